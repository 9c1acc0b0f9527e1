"""Recording a ``Program`` while the Python code of a function runs eagerly.

A ``Recorder`` is active inside ``with recorder:``. It watches

* every op: it sits in the ``_recorder`` slot of ``ddg.autograd.function``, so each
  ``Function`` call is routed through it (which class ran, its constructor attributes,
  which arrays flowed where). Every public op is a Function (comparisons and logic
  included), so nothing computed from the inputs escapes the recording;
* data reaching Python (``bool``, ``item``, ``numpy``, ``float``, ``int``, ``tolist``,
  ``__array__``, ``__index__``) and in-place writes outside ops (``x[i] = v``,
  ``zero_``...) of the tensors it tracks (inputs, op outputs, parameters, buffers),
  through the ``_watch`` slot of ``ddg.tensor.tensor``: data-dependent Python, which a
  replay cannot reproduce. ``set_value`` into a buffer or live tensor is the exception:
  it is recorded as a write step (BatchNorm's running statistics);
* random numbers drawn outside an op, through ``ddg.tensor.backend.observe_rng``: a draw
  whose result enters an op is recorded as a step that draws again at each replay; a
  draw whose result vanishes into Python (``if ddg.rand([1]) > 0.5:``) is refused.

Anything refused makes ``finish`` raise ``DataDependent`` with the file and line
responsible (the innermost frame outside the ddg package).
"""
import os
import sys

import numpy as np

from .. import dispatch
from ..autograd import function as _function
from ..autograd import grad_mode
from ..nn.parameter import Parameter
from ..tensor import backend
from ..tensor import tensor as _tensor
from .program import DrawStep, OpStep, Program, WriteStep, flatten

_DDG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _where():
    """'file:line' of the innermost frame outside the ddg package."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_DDG_DIR + os.sep):
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


class DataDependent(Exception):
    """The recording saw something a replay cannot reproduce."""


class _Draw:
    """A random draw made outside ops while recording."""
    __slots__ = ("method", "args", "kwargs", "out", "where", "used")

    def __init__(self, method, args, kwargs, out, where):
        self.method, self.args, self.kwargs, self.out, self.where = method, args, kwargs, out, where
        self.used = False


class Recorder:
    def __init__(self, buffers=()):
        self.prog = Program()
        self.slot_of = {}   # id(array) -> slot
        self.keep = []      # arrays, tensors and Functions kept alive while recording (ids stay unique)
        self.fn_ids = set()
        self.tracked = set()  # ids of the tensors whose data must not reach Python
        self.in_op = False
        self.problem = None
        self.draws = []
        self.buffers = {id(b): b for b in buffers}
        self.buffer_snap = [(b, b._data, b._data.copy()) for b in buffers]
        self.written = set()
        self.ext_ids = {}
        self._rng = backend.observe_rng(self._on_draw)

    # -- bookkeeping ---------------------------------------------------------------------------------
    def fail(self, why):
        if self.problem is None:
            self.problem = f"{why} at {_where()}"

    def _new_slot(self, arr, requires):
        s = self.prog.nslots
        self.prog.nslots += 1
        self.prog.requires.append(bool(requires))
        self.slot_of[id(arr)] = s
        self.keep.append(arr)
        return s

    def track(self, t):
        if id(t) not in self.tracked:
            self.tracked.add(id(t))
            self.keep.append(t)

    def add_input(self, t):
        s = self.slot_of.get(id(t._data))
        if s is None:
            s = self._new_slot(t._data, not t.stop_gradient)
        self.prog.input_slots.append(s)
        self.prog.input_sg.append(t.stop_gradient)
        self.track(t)

    def slot_for(self, t):
        """The slot of tensor ``t`` used as an op input (creating one for tensors from outside)."""
        arr = t._data
        s = self.slot_of.get(id(arr))
        if s is not None:
            node = t._node
            if node is not None and not t.stop_gradient and id(node) not in self.fn_ids \
                    and id(t) not in self.ext_ids:
                self.fail(f"a tensor whose graph node ({node.name}) was built outside ddg ops "
                          f"(PyLayer, x[i] = v)")
            return s
        # a draw made outside ops whose result is used here: re-draw at each replay
        for d in self.draws:
            if not d.used and type(d.out) is np.ndarray and d.out.shape == arr.shape and \
                    type(arr) is np.ndarray and np.array_equal(d.out.astype(arr.dtype, copy=False), arr):
                d.used = True
                s = self._new_slot(arr, False)
                self.prog.steps.append(DrawStep(d.method, d.args, d.kwargs, arr.dtype, s))
                return s
        if isinstance(t, Parameter) or not t.stop_gradient or id(t) in self.buffers or t._node is not None:
            # read live at each replay: parameters, buffers, tensors needing grad from outside
            s = self._new_slot(arr, not t.stop_gradient)
            self.prog.externals.append((s, t, t.stop_gradient))
            self.ext_ids[id(t)] = s
            self.track(t)
            return s
        s = self._new_slot(arr, False)
        self.prog.consts.append((s, arr))
        return s

    # -- the hooks -----------------------------------------------------------------------------------
    def __call__(self, fn, tensors):
        """Every op call while recording comes here (``function._recorder``)."""
        attrs = dict(fn.__dict__)
        ins = tuple(self.slot_for(t) for t in tensors)
        grad_on = grad_mode._enabled[0] and fn.differentiable
        needs = tuple(grad_on and not t.stop_gradient for t in tensors)
        _function._recorder[0] = None
        self.in_op = True
        try:
            out = fn(*tensors)
        finally:
            self.in_op = False
            _function._recorder[0] = self
        self.fn_ids.add(id(fn))
        self.keep.append(fn)
        multi = type(out) is tuple
        outs = out if multi else (out,)
        slots = []
        for o in outs:
            slots.append(self._new_slot(o._data, not o.stop_gradient))
            self.track(o)
        self.prog.steps.append(OpStep(type(fn), attrs, ins, tuple(slots), multi, needs, any(needs)))
        return out

    def _on_watch(self, t, what, value):
        """A tensor's data reached Python or was written in place (``tensor._watch``)."""
        if self.in_op or id(t) not in self.tracked:
            return
        if what == "set_value":
            self._write(t, value)
        elif what.endswith("_") or what == "setitem":
            self.fail(f"in-place {what.strip('_')} on a tensor used by the function")
        else:
            self.fail(f"{what}() of a tensor computed from the inputs (data-dependent Python)")

    def _on_draw(self, method, args, kwargs, out):
        """A random draw (``backend.observe_rng``)."""
        if not self.in_op:
            self.draws.append(_Draw(method, args, kwargs, out, _where()))

    def _write(self, t, value):
        if id(t) not in self.buffers and id(t) not in self.ext_ids:
            self.fail("set_value on a tensor that is not a buffer or parameter of the layer")
            return
        if not isinstance(value, _tensor.Tensor) or id(value._data) not in self.slot_of:
            self.fail("set_value with a value computed outside ddg ops")
            return
        if id(t) not in self.ext_ids:
            self.slot_for(t)
        self.written.add(id(t))
        self.prog.steps.append(WriteStep(t, self.slot_of[id(value._data)]))

    # -- start / finish ------------------------------------------------------------------------------------
    def __enter__(self):
        if _function._recorder[0] is not None:
            raise RuntimeError("ddg.jit: nested to_static recording")
        self._rng.__enter__()
        self._prev = (dispatch.install(_function._recorder, self, exclusive=True),
                      dispatch.install(_tensor._watch, self._on_watch))
        for b in self.buffers.values():
            self.track(b)
        return self

    def __exit__(self, *exc):
        dispatch.restore(_function._recorder, self._prev[0])
        dispatch.restore(_tensor._watch, self._prev[1])
        self._rng.__exit__(*exc)
        return False

    def finish(self, outputs):
        """Describe the outputs; check buffers and draws. Returns the Program or raises DataDependent."""
        prog = self.prog
        if self.problem is None:
            for b, arr, snap in self.buffer_snap:
                if id(b) not in self.written and (b._data is not arr or not _array_equal(arr, snap)):
                    self.problem = (f"buffer of shape {b.shape} changed in place outside ddg ops or set_value "
                                    f"(cannot be recorded)")
                    break
        if self.problem is None:
            for d in self.draws:
                if not d.used:
                    self.problem = (f"random numbers drawn outside ddg ops that do not feed an op (data-dependent "
                                    f"Python?) at {d.where}")
                    break
        if self.problem is None:
            tensors = []
            spec = flatten(outputs, tensors)
            for t in tensors:
                s = self.slot_of.get(id(t._data))
                if s is None:
                    self.problem = f"an output tensor (shape {t.shape}) was computed outside ddg ops"
                    break
                prog.out_slots.append(s)
            prog.out_spec = spec
        if self.problem is not None:
            raise DataDependent(self.problem)
        prog.out_original = outputs
        prog.finalize()
        self.keep = None
        self.tracked = None
        return prog


def _array_equal(a, b):
    try:
        return a.shape == b.shape and bool((a == b).all())
    except Exception:
        return False


def record(fn, args, kwargs, tensors, buffers=()):
    """Run ``fn(*args, **kwargs)`` while recording, ``tensors`` being its input tensors.
    Returns ``(output, Program)``, or ``(output, DataDependent)`` when it cannot be replayed."""
    rec = Recorder(buffers)
    with rec:
        for t in tensors:
            rec.add_input(t)
        out = fn(*args, **kwargs)
    try:
        return out, rec.finish(out)
    except DataDependent as exc:
        return out, exc
