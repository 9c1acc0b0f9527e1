"""Recording and replay for ``ddg.jit.to_static``.

The first calls for an input signature run the Python code eagerly while a
``_Recorder`` watches every primitive op (through the ``_recorder`` slot of
``ddg.autograd.function``): which Function class ran, its constructor attributes,
and which arrays flowed where (inputs, tensors read live from outside such as
parameters and buffers, constants, outputs of earlier ops). The result is a
``Program``: a flat list of steps over numbered slots.

Later calls with that signature replay the program on raw arrays: one fresh
Function instance per op (attributes restored, ``forward`` called), no per-op
Tensor objects and no graph bookkeeping. With grad on, the whole replay is ONE graph
node (``_Replay``) whose backward runs the recorded ops' backwards in reverse; its
inputs are the tensors that need gradients (inputs and live tensors such as
parameters), so the engine accumulates each parameter's gradient and fires its
grad-ready hooks (DataParallel) as usual.

Safety: a recording is only replayed when nothing it saw depended on data in a way
the recording cannot reproduce. While recording, the tensors that flow are given a
subclass (``_Traced``; the class is restored afterwards) that reports

* data reaching Python (``bool``, ``item``, ``numpy``, ``float``, ``int``,
  ``tolist``, ``__array__``, ``__index__``): data-dependent control flow;
* in-place writes that are not recorded ops (``x[i] = v``, ``zero_``...), except
  ``set_value`` into a buffer or live tensor, which is recorded as a write step
  (BatchNorm's running statistics);

random numbers drawn outside an op are logged (the numpy generator handed out by
``ddg.tensor.backend.rng`` is wrapped while recording): a draw whose result enters an
op is recorded as a step that draws again at each replay; a draw whose result
vanishes into Python (``if ddg.rand([1]) > 0.5:``) makes the function eager. Finally,
a signature is recorded twice (its first two calls) and the two programs must agree,
constants included, before the third call replays: this catches values computed
from data outside ops (raw-array code) that would otherwise be frozen as constants.
Any of these makes the function run eagerly from then on, with one warning naming
the file and line responsible.
"""
import functools
import os
import sys
import warnings

import numpy as np

from ..autograd import function as _function
from ..autograd import grad_mode
from ..autograd.function import Function
from ..nn.parameter import Parameter
from ..tensor import backend
from ..tensor.tensor import Tensor

_ARRAY_TYPES = backend.ARRAY_TYPES
_DDG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# step kinds
OP, RAW, DRAW, WRITE = 0, 1, 2, 3

# numpy functions a RAW step may call (comparisons and logic on traced tensors)
RAW_FUNCS = frozenset(["greater", "less", "greater_equal", "less_equal", "equal", "not_equal",
                       "logical_and", "logical_or", "logical_xor", "logical_not"])
# generator methods a DRAW step may call
DRAW_METHODS = frozenset(["random", "standard_normal", "normal", "uniform", "integers", "permutation",
                          "exponential", "binomial", "poisson", "beta", "gamma"])

_current = [None]  # the active _Recorder


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
    pass


# -- the traced tensor subclasses --------------------------------------------------------------------
def _escape(name):
    base = getattr(Tensor, name)

    def method(self, *args, **kwargs):
        rec = _current[0]
        if rec is not None and not rec.in_op:
            rec.fail(f"{name.strip('_')}() of a tensor computed from the inputs (data-dependent Python)")
        return base(self, *args, **kwargs)
    method.__name__ = name
    return method


def _inplace_guard(name):
    base = getattr(Tensor, name)

    def method(self, *args, **kwargs):
        rec = _current[0]
        if rec is not None and not rec.in_op:
            other = args[0] if args else None
            recorded = name in ("add_", "subtract_", "multiply_", "divide_", "__iadd__", "__isub__", "__imul__",
                                "__itruediv__") and grad_mode._enabled[0] and (
                not self.stop_gradient or (isinstance(other, Tensor) and not other.stop_gradient))
            if not recorded:  # a raw in-place write the recording would not see
                rec.fail(f"in-place {name.strip('_')} on a tensor used by the function")
        return base(self, *args, **kwargs)
    method.__name__ = name
    return method


def _compare(np_name, swap=False):
    from ..autograd.ops import elementwise as E
    op = {"greater": E.greater_than, "less": E.less_than, "greater_equal": E.greater_equal,
          "less_equal": E.less_equal, "equal": E.equal, "not_equal": E.not_equal,
          "logical_and": E.logical_and, "logical_or": E.logical_or, "logical_xor": E.logical_xor}[np_name]

    def method(self, other):
        out = op(other, self) if swap else op(self, other)
        rec = _current[0]
        if rec is not None and not rec.in_op:
            args = (other, self) if swap else (self, other)
            rec.raw(np_name, args, out)
        return out
    return method


def _set_value(self, value):
    rec = _current[0]
    out = Tensor.set_value(self, value)
    if rec is not None and not rec.in_op:
        rec.write(self, value)
    return out


def _invert(self):
    out = Tensor.__invert__(self)
    rec = _current[0]
    if rec is not None and not rec.in_op:
        rec.raw("logical_not", (self,), out)
    return out


_TRACED_METHODS = {}
for _n in ("__bool__", "__float__", "__int__", "__index__", "item", "numpy", "tolist", "__array__"):
    _TRACED_METHODS[_n] = _escape(_n)
for _n in ("__setitem__", "zero_", "fill_", "uniform_", "clip_", "clamp_", "add_", "subtract_", "multiply_",
           "divide_", "__iadd__", "__isub__", "__imul__", "__itruediv__", "scale_"):
    _TRACED_METHODS[_n] = _inplace_guard(_n)
for _n, _np in (("__gt__", "greater"), ("__lt__", "less"), ("__ge__", "greater_equal"), ("__le__", "less_equal"),
                ("__eq__", "equal"), ("__ne__", "not_equal"), ("__and__", "logical_and"),
                ("__or__", "logical_or"), ("__xor__", "logical_xor")):
    _TRACED_METHODS[_n] = _compare(_np)
_TRACED_METHODS["set_value"] = _set_value
_TRACED_METHODS["_copy_from"] = _set_value
_TRACED_METHODS["__invert__"] = _invert
_TRACED_METHODS["__hash__"] = object.__hash__

_Traced = type("_Traced", (Tensor,), dict(_TRACED_METHODS, __slots__=(), __module__=__name__))
_TracedParameter = type("_TracedParameter", (Parameter,), dict(_TRACED_METHODS, __module__=__name__))
_TRACED_CLASS = {Tensor: _Traced, Parameter: _TracedParameter}


# -- random draws outside ops -----------------------------------------------------------------------
class _RngProxy:
    """Stands in for the numpy Generator while recording: draws go through to the real
    generator (so the numbers are exactly eager mode's) and are logged."""

    def __init__(self, real, rec):
        self._real, self._rec = real, rec

    def __getattr__(self, name):
        attr = getattr(self._real, name)
        if not callable(attr):
            return attr

        def draw(*args, **kwargs):
            out = attr(*args, **kwargs)
            rec = self._rec
            if not rec.in_op:
                rec.draws.append([name, args, kwargs, out, _where(), False])
            return out
        return draw


# -- the program ------------------------------------------------------------------------------------
class Program:
    """A recorded trace: steps over numbered slots.

    steps: (OP, cls, attrs, ins, outs, multi, needs, grad) | (RAW, np_name, args, out)
         | (DRAW, method, args, kwargs, dtype, out) | (WRITE, tensor, slot)
    RAW args are ('s', slot) or ('v', value)."""

    def __init__(self):
        self.steps = []
        self.nslots = 0
        self.input_slots = []
        self.input_sg = []
        self.externals = []  # (slot, tensor, stop_gradient when recorded)
        self.consts = []     # (slot, array)
        self.requires = []   # per slot: requires grad as observed
        self.out_slots = []
        self.out_spec = None
        self.fused = []      # ('in', index) or ('ext', index): fused-node inputs, in order
        self.fused_slots = []

    def finalize(self):
        self.fused, self.fused_slots = [], []
        seen = set()
        for i, s in enumerate(self.input_slots):
            if self.requires[s] and s not in seen:
                seen.add(s)
                self.fused.append(("in", i))
                self.fused_slots.append(s)
        for i, (s, t, sg) in enumerate(self.externals):
            if not sg and s not in seen:
                seen.add(s)
                self.fused.append(("ext", i))
                self.fused_slots.append(s)
        self.any_grad = any(st[0] == OP and st[7] for st in self.steps)

    # -- replay -----------------------------------------------------------------------------------
    def run(self, in_arrays, keep=None):
        """Execute the steps; returns the output arrays. With ``keep`` (a list) the Function
        instances of differentiable steps are appended to it for the backward."""
        vals = [None] * self.nslots
        for s, a in zip(self.input_slots, in_arrays):
            vals[s] = a
        for s, t, _ in self.externals:
            vals[s] = t._data
        for s, a in self.consts:
            vals[s] = a
        for st in self.steps:
            kind = st[0]
            if kind == OP:
                cls = st[1]
                fn = cls.__new__(cls)
                fn.__dict__.update(st[2])
                fn.needs = st[6]
                out = fn.forward(*[vals[i] for i in st[3]])
                if st[5]:
                    outs = [o if type(o) in _ARRAY_TYPES else np.asarray(o) for o in out]
                    for s, o in zip(st[4], outs):
                        vals[s] = o
                    fn._out_shapes = [(o.shape, o.dtype) for o in outs]
                    fn.n_out = len(outs)
                else:
                    vals[st[4][0]] = out if type(out) in _ARRAY_TYPES else np.asarray(out)
                if keep is not None and st[7]:
                    keep.append((fn, st))
            elif kind == RAW:
                xp = np
                args = []
                for k, v in st[2]:
                    if k == "s":
                        v = vals[v]
                        xp = backend.get_array_module(v)
                    args.append(v)
                vals[st[3]] = xp.asarray(getattr(xp, st[1])(*args))
            elif kind == DRAW:
                arr = getattr(backend.rng(np), st[1])(*st[2], **st[3])
                vals[st[5]] = np.asarray(arr).astype(st[4], copy=False)
            else:  # WRITE: set_value into a live tensor (a buffer)
                t = st[1]
                t._data[...] = vals[st[2]]
                t._vc[0] += 1
        return [vals[s] for s in self.out_slots]

    def backward(self, fns, out_grads):
        grads = [None] * self.nslots
        for s, g in zip(self.out_slots, out_grads):
            if g is not None:
                grads[s] = g if grads[s] is None else grads[s] + g
        for fn, st in reversed(fns):
            outs = st[4]
            if st[5]:
                go = [grads[s] for s in outs]
                if all(g is None for g in go):
                    continue
                xp = backend.get_array_module(next(g for g in go if g is not None))
                go = tuple(xp.zeros(*fn._out_shapes[i]) if g is None else g for i, g in enumerate(go))
                for s in outs:
                    grads[s] = None
            else:
                go = grads[outs[0]]
                if go is None:
                    continue
                grads[outs[0]] = None
            res = fn.backward(go)
            if type(res) is not tuple:
                res = (res,)
            for s, r, need in zip(st[3], res, st[6]):
                if need and r is not None:
                    prev = grads[s]
                    grads[s] = r if prev is None else prev + r
        return tuple(grads[s] for s in self.fused_slots)


class _Replay(Function):
    """The whole replayed program as one graph node."""
    save_inputs = False

    def __init__(self, prog, in_arrays):
        self.prog, self.in_arrays = prog, in_arrays

    @property
    def name(self):
        return "to_static"

    def forward(self, *arrays):
        self.fns = []
        outs = self.prog.run(self.in_arrays, self.fns)
        self.in_arrays = None
        if len(outs) == 1:
            return outs[0]
        return tuple(outs)

    def backward(self, g):
        prog = self.prog
        return prog.backward(self.fns, (g,) if len(prog.out_slots) == 1 else g)


def replay(prog, tensors):
    """Run ``prog`` on input tensors; Tensors out (one graph node when grad is needed)."""
    arrays = [t._data for t in tensors]
    fused_tensors = None
    if grad_mode._enabled[0] and prog.fused and prog.any_grad:
        fused_tensors = [tensors[i] if k == "in" else prog.externals[i][1] for k, i in prog.fused]
    if not prog.out_slots:
        prog.run(arrays)
        return []
    if fused_tensors:
        out = _Replay(prog, arrays)(*fused_tensors)
        return list(out) if type(out) is tuple else [out]
    return [Tensor._wrap(a) for a in prog.run(arrays)]


# -- the recorder -----------------------------------------------------------------------------------
class _Recorder:
    def __init__(self, buffers=()):
        self.prog = Program()
        self.slot_of = {}   # id(array) -> slot
        self.keep = []      # arrays and Functions kept alive while recording (ids stay unique)
        self.fn_ids = set()
        self.in_op = False
        self.problem = None
        self.draws = []
        self.swapped = []
        self.buffers = {id(b): b for b in buffers}
        self.buffer_snap = [(b, b._data, b._data.copy()) for b in buffers]
        self.written = set()
        self.ext_ids = {}

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

    def mark(self, t):
        cls = _TRACED_CLASS.get(type(t))
        if cls is not None:
            self.swapped.append((t, type(t)))
            t.__class__ = cls

    def add_input(self, t):
        s = self.slot_of.get(id(t._data))
        if s is None:
            s = self._new_slot(t._data, not t.stop_gradient)
        self.prog.input_slots.append(s)
        self.prog.input_sg.append(t.stop_gradient)
        self.mark(t)

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
            if not d[5] and type(d[3]) is np.ndarray and d[3].shape == arr.shape and \
                    type(arr) is np.ndarray and np.array_equal(d[3].astype(arr.dtype, copy=False), arr):
                d[5] = True
                s = self._new_slot(arr, False)
                self.prog.steps.append((DRAW, d[0], d[1], d[2], arr.dtype, s))
                return s
        if isinstance(t, Parameter) or not t.stop_gradient or id(t) in self.buffers or t._node is not None:
            # read live at each replay: parameters, buffers, tensors needing grad from outside
            s = self._new_slot(arr, not t.stop_gradient)
            self.prog.externals.append((s, t, t.stop_gradient))
            self.ext_ids[id(t)] = s
            self.mark(t)
            return s
        s = self._new_slot(arr, False)
        self.prog.consts.append((s, arr))
        return s

    # -- the hook ----------------------------------------------------------------------------------------
    def __call__(self, fn, tensors):
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
            self.mark(o)
        self.prog.steps.append((OP, type(fn), attrs, ins, tuple(slots), multi, needs, any(needs)))
        return out

    def raw(self, np_name, args, out):
        rargs = []
        for a in args:
            if isinstance(a, Tensor):
                rargs.append(("s", self.slot_for(a)))
            else:
                rargs.append(("v", a))
        s = self._new_slot(out._data, False)
        self.prog.steps.append((RAW, np_name, tuple(rargs), s))
        self.mark(out)

    def write(self, t, value):
        if id(t) not in self.buffers and id(t) not in self.ext_ids:
            self.fail("set_value on a tensor that is not a buffer or parameter of the layer")
            return
        if not isinstance(value, Tensor) or id(value._data) not in self.slot_of:
            self.fail("set_value with a value computed outside ddg ops")
            return
        if id(t) not in self.ext_ids:
            self.slot_for(t)
        self.written.add(id(t))
        self.prog.steps.append((WRITE, t, self.slot_of[id(value._data)]))

    # -- start / finish ------------------------------------------------------------------------------------
    def __enter__(self):
        if _function._recorder[0] is not None:
            raise RuntimeError("ddg.jit: nested to_static recording")
        _current[0] = self
        _function._recorder[0] = self
        self._real_rng = backend._np_rng
        self._proxy = _RngProxy(self._real_rng, self)
        backend._np_rng = self._proxy
        for b in self.buffers.values():
            self.mark(b)
        return self

    def __exit__(self, *exc):
        _function._recorder[0] = None
        _current[0] = None
        if backend._np_rng is self._proxy:
            backend._np_rng = self._real_rng
        for t, cls in reversed(self.swapped):
            t.__class__ = cls
        self.swapped = []
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
                if not d[5]:
                    self.problem = (f"random numbers drawn outside ddg ops that do not feed an op (data-dependent "
                                    f"Python?) at {d[4]}")
                    break
        if self.problem is None:
            tensors = []
            spec = _flatten(outputs, tensors)
            for t in tensors:
                s = self.slot_of.get(id(t._data))
                if s is None:
                    self.problem = f"an output tensor (shape {t.shape}) was computed outside ddg ops"
                    break
                prog.out_slots.append(s)
            prog.out_spec = spec
        if self.problem is not None:
            raise DataDependent(self.problem)
        prog.finalize()
        self.keep = None
        return prog


def _array_equal(a, b):
    try:
        return a.shape == b.shape and bool((a == b).all())
    except Exception:
        return False


# -- structures --------------------------------------------------------------------------------------------
def _flatten(obj, tensors):
    """A hashable description of ``obj`` with its Tensors listed in ``tensors``."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return ("T",)
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_flatten(o, tensors) for o in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _flatten(v, tensors)) for k, v in obj.items()))
    try:
        hash(obj)
        return ("v", type(obj).__name__, obj)
    except TypeError:
        return ("id", id(obj))


def _unflatten(spec, it, original):
    kind = spec[0]
    if kind == "T":
        return next(it)
    if kind in ("list", "tuple"):
        items = [_unflatten(s, it, o) for s, o in zip(spec[1], original)]
        return items if kind == "list" else (type(original)(*items) if hasattr(original, "_fields")
                                             else tuple(items))
    if kind == "dict":
        return {k: _unflatten(s, it, original[k]) for k, s in spec[1]}
    return original


def _same(a, b):
    """Structural equality of step attributes and constants (arrays by value)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, _ARRAY_TYPES):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        eq = a == b
        if a.dtype.kind in "fc":
            eq = eq | ((a != a) & (b != b))  # NaN equals NaN here
        return bool(eq.all())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (Tensor, type)):
        return a is b
    try:
        return bool(a == b)
    except Exception:
        return a is b


def same_program(p, q):
    if len(p.steps) != len(q.steps) or p.nslots != q.nslots or p.out_slots != q.out_slots:
        return False
    if p.input_slots != q.input_slots or len(p.consts) != len(q.consts) or len(p.externals) != len(q.externals):
        return False
    for (s1, t1, g1), (s2, t2, g2) in zip(p.externals, q.externals):
        if s1 != s2 or t1 is not t2 or g1 != g2:
            return False
    for (s1, a1), (s2, a2) in zip(p.consts, q.consts):
        if s1 != s2 or not _same(a1, a2):
            return False
    for a, b in zip(p.steps, q.steps):
        if a[0] != b[0] or len(a) != len(b):
            return False
        if a[0] == WRITE:
            if a[1] is not b[1] or a[2] != b[2]:
                return False
        elif not _same(a[1:], b[1:]):
            return False
    return True


# -- to_static ------------------------------------------------------------------------------------------------
_EAGER = "eager"


def _tensor_key(t):
    a = t._data
    return (a.shape, a.dtype.str, backend.device_id_of(a), t.stop_gradient)


class StaticFunction:
    """``fn`` recorded once per input signature and replayed afterwards.

    ``layer`` (optional) is the Layer whose ``training`` flags and buffers belong to the
    signature and the recording."""

    def __init__(self, fn, layer=None, input_spec=None):
        self._fn = fn
        self._layer = layer
        self._input_spec = input_spec
        self._cache = {}
        self._eager = False
        self._warned = False
        self._sublayers = None
        self._n_direct = 0
        functools.update_wrapper(self, fn, updated=())

    # decorator on a method: bind per instance
    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        key = "_ddg_static_" + getattr(self._fn, "__name__", "fn")
        bound = instance.__dict__.get(key)
        if bound is None:
            from ..nn.layer.layers import Layer
            bound = StaticFunction(self._fn.__get__(instance, owner),
                                   instance if isinstance(instance, Layer) else None, self._input_spec)
            object.__setattr__(instance, key, bound)
        return bound

    @property
    def dygraph_function(self):
        return self._fn

    def _training_key(self):
        layer = self._layer
        if layer is None:
            return None
        subs = self._sublayers
        if subs is None or len(layer._sub_layers) != self._n_direct:
            # the layer tree, cached (walking it each call costs ~20 us on a small MLP)
            subs = self._sublayers = layer.sublayers(include_self=True)
            self._n_direct = len(layer._sub_layers)
        return tuple([lay.training for lay in subs])

    def _check_spec(self, tensors):
        spec = self._input_spec
        if not spec:
            return
        from ..static import InputSpec
        for i, (s, t) in enumerate(zip(spec, tensors)):
            if isinstance(s, InputSpec) and not s._matches(t):
                raise ValueError(f"ddg.jit.to_static: input {i} has shape {t.shape} and dtype {t.dtype}, "
                                 f"which does not match {s}")

    def __call__(self, *args, **kwargs):
        if self._eager:
            return self._fn(*args, **kwargs)
        if not kwargs and all(type(a) is Tensor for a in args):  # fast path: tensors only
            tensors = list(args)
            spec = len(args)
        else:
            tensors = []
            spec = _flatten((args, kwargs), tensors)
        self._check_spec(tensors)
        key = (spec, tuple(_tensor_key(t) for t in tensors), grad_mode._enabled[0], self._training_key())
        entry = self._cache.get(key)
        if entry is None or type(entry) is tuple:
            return self._record(key, entry, args, kwargs, tensors)
        if entry is _EAGER:
            return self._fn(*args, **kwargs)
        for _, t, sg in entry.externals:
            if t.stop_gradient != sg:  # a parameter was frozen or unfrozen: record again
                del self._cache[key]
                return self._record(key, None, args, kwargs, tensors)
        outs = replay(entry, tensors)
        return _unflatten(entry.out_spec, iter(outs), entry.out_original)

    def _buffers(self):
        if self._layer is None:
            return []
        return list(self._layer.buffers())

    def _record(self, key, entry, args, kwargs, tensors):
        rec = _Recorder(self._buffers())
        with rec:
            for t in tensors:
                rec.add_input(t)
            out = self._fn(*args, **kwargs)
        try:
            prog = rec.finish(out)
        except DataDependent as exc:
            self._go_eager(key, str(exc))
            return out
        prog.out_original = out
        if entry is None:  # first recording: verify against a second one before replaying
            self._cache[key] = (prog,)
        elif same_program(entry[0], prog):
            self._cache[key] = prog
        else:
            self._go_eager(key, "two calls with the same input signature recorded different programs "
                                "(values computed from data outside ddg ops, or random numbers)")
        return out

    def _go_eager(self, key, why):
        self._cache[key] = _EAGER
        self._eager = True  # for safety: once data-dependent, always eager
        if not self._warned:
            self._warned = True
            name = getattr(self._fn, "__qualname__", repr(self._fn))
            warnings.warn(f"ddg.jit.to_static({name}): running eagerly: {why}", stacklevel=4)

    def concrete_program(self, *args, **kwargs):
        """Record (without caching) and return the Program for these arguments."""
        tensors = []
        _flatten((args, kwargs), tensors)
        rec = _Recorder(self._buffers())
        with rec:
            for t in tensors:
                rec.add_input(t)
            out = self._fn(*args, **kwargs)
        prog = rec.finish(out)
        prog.out_original = out
        return prog


def to_static(function=None, input_spec=None, build_strategy=None, backend=None, **kwargs):
    """Record ``function`` (a function, a method, or a Layer) once per input signature and
    replay the recording afterwards. On a Layer, its ``forward`` is replaced in place and
    the same Layer is returned (its parameters, buffers and state_dict are unchanged).
    Usable as ``@to_static`` or ``@to_static(input_spec=[...])``."""
    from ..nn.layer.layers import Layer
    if function is None:
        return lambda f: to_static(f, input_spec=input_spec)
    if isinstance(function, Layer):
        fwd = function.forward
        if isinstance(fwd, StaticFunction):
            return function
        object.__setattr__(function, "forward", StaticFunction(fwd, function, input_spec))
        return function
    if isinstance(function, StaticFunction):
        return function
    layer = getattr(function, "__self__", None)
    if not isinstance(layer, Layer):
        layer = None
    return StaticFunction(function, layer, input_spec)


def not_to_static(fn):
    return fn
