"""A recorded trace (``Program``) and its replay.

A Program is a flat list of steps over numbered slots (one slot per array that flowed:
inputs, tensors read live from outside such as parameters and buffers, constants,
outputs of ops). There are three kinds of step, one record type each:

* ``OpStep``: run one ``Function`` (class and constructor attributes as recorded);
* ``DrawStep``: draw random numbers from ``ddg.tensor.backend.rng`` again (a draw made
  outside ops whose result fed an op);
* ``WriteStep``: ``set_value`` of a slot into a live tensor (BatchNorm's running
  statistics).

Replay runs the steps on raw arrays: one fresh Function instance per op (attributes
restored, ``forward`` called), no per-op Tensor objects and no graph bookkeeping. With
grad on, the whole replay is ONE graph node (``_Replay``) whose backward runs the
recorded ops' backwards in reverse, summing gradients with the engine's own helpers;
its inputs are the tensors that need gradients (inputs and live tensors such as
parameters), so the engine accumulates each parameter's gradient and fires its
grad-ready hooks (DataParallel) as usual.
"""
from typing import NamedTuple

import numpy as np

from ..autograd import grad_mode
from ..autograd.engine import add_grad, call_backward
from ..autograd.function import Function, check_backward, check_forward, keep_half
from ..flags import check_nan_inf as _check_nan_inf
from ..tensor import backend
from ..tensor.tensor import Tensor

_ARRAY_TYPES = backend.ARRAY_TYPES

#: generator methods a DrawStep may call (a saved file may name only these)
DRAW_METHODS = frozenset(["random", "standard_normal", "normal", "uniform", "integers", "permutation",
                          "exponential", "binomial", "poisson", "beta", "gamma"])


class OpStep(NamedTuple):
    """Run ``cls`` (attributes ``attrs``) on slots ``ins``, results into slots ``outs``."""
    cls: type
    attrs: dict
    ins: tuple
    outs: tuple
    multi: bool     # forward returns a tuple
    needs: tuple    # per input: needs a gradient
    grad: bool      # any(needs): the step takes part in backward


class DrawStep(NamedTuple):
    """``backend.rng(numpy).<method>(*args, **kwargs)`` as ``dtype`` into slot ``out``."""
    method: str
    args: tuple
    kwargs: dict
    dtype: np.dtype
    out: int


class WriteStep(NamedTuple):
    """Copy slot ``slot`` into the live tensor ``tensor`` (``set_value``)."""
    tensor: Tensor
    slot: int


class Program:
    """A recorded trace: steps over numbered slots, and where the slots come from."""

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
        self.out_original = None
        self.fused = []      # ('in', index) or ('ext', index): fused-node inputs, in order
        self.fused_slots = []
        self.any_grad = False

    def slots_used(self):
        """Every slot index the program reads or writes (for validating loaded files)."""
        slots = [s for s, *_ in self.externals] + [s for s, _ in self.consts] + self.input_slots + self.out_slots
        for st in self.steps:
            if type(st) is OpStep:
                slots += list(st.ins) + list(st.outs)
            elif type(st) is DrawStep:
                slots.append(st.out)
            else:
                slots.append(st.slot)
        return slots

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
        self.any_grad = any(type(st) is OpStep and st.grad for st in self.steps)

    # -- replay -----------------------------------------------------------------------------------
    def run(self, in_arrays, keep=None):
        """Execute the steps; returns the output arrays. With ``keep`` (a list) the Function
        instances of differentiable steps are appended to it, with their steps, for the backward."""
        vals = [None] * self.nslots
        for s, a in zip(self.input_slots, in_arrays):
            vals[s] = a
        for s, t, _ in self.externals:
            vals[s] = t._data
        for s, a in self.consts:
            vals[s] = a
        for st in self.steps:
            if type(st) is OpStep:
                cls = st.cls
                fn = cls.__new__(cls)
                fn.__dict__.update(st.attrs)
                fn.needs = st.needs
                args = [vals[i] for i in st.ins]
                out = fn.forward(*args)
                if fn.keep_half and args and type(out) is not list:   # as Function.__call__ does
                    out = tuple([keep_half(o, args) for o in out]) if type(out) is tuple else keep_half(out, args)
                if _check_nan_inf[0]:
                    check_forward(fn, out, lambda: _describe_arrays(args))
                    fn.input_meta = [(list(a.shape), a.dtype) for a in args]
                if st.multi:
                    xp = backend.get_array_module(args[0]) if args else np
                    for s, o in zip(st.outs, fn._note_outputs(out, xp)):
                        vals[s] = o
                else:
                    vals[st.outs[0]] = out if type(out) in _ARRAY_TYPES else \
                        backend.get_array_module(*args).asarray(out)
                if keep is not None and st.grad:
                    keep.append((fn, st))
            elif type(st) is DrawStep:
                arr = getattr(backend.rng(np), st.method)(*st.args, **st.kwargs)
                vals[st.out] = np.asarray(arr).astype(st.dtype, copy=False)
            else:  # WriteStep: set_value into a live tensor (a buffer)
                t = st.tensor
                t._data[...] = vals[st.slot]
                t._bump()
        return [vals[s] for s in self.out_slots]

    def backward(self, fns, out_grads):
        """Gradients of the fused node's inputs from those of the outputs: the kept steps'
        backwards in reverse order, gradients summed per slot with the engine's helpers."""
        grads = [None] * self.nslots
        for s, g in zip(self.out_slots, out_grads):
            if g is not None:
                add_grad(grads, s, g)
        for fn, st in reversed(fns):
            outs = st.outs
            if st.multi:
                go = [grads[s] for s in outs]
                if all(g is None for g in go):
                    continue
                for s in outs:
                    grads[s] = None
            else:  # the common case, kept lean: replay speed is the point of to_static
                s = outs[0]
                go = [grads[s]]
                if go[0] is None:
                    continue
                grads[s] = None
            results = call_backward(fn, go)
            if _check_nan_inf[0]:
                check_backward(fn, results, getattr(fn, "input_meta", []))
            for s, r, need in zip(st.ins, results, st.needs):
                if need and r is not None:
                    add_grad(grads, s, r)
        return tuple(grads[s] for s in self.fused_slots)


def _describe_arrays(arrays):
    return ", ".join(f"{list(a.shape)}:{a.dtype}" for a in arrays)


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

    def backward_graph(self, g):
        raise NotImplementedError("ddg: a to_static program's replay has no differentiable backward, so "
                                  "grad(create_graph=True) cannot pass through its outputs; call the function "
                                  "eagerly (without to_static) where higher-order gradients are needed")


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


# -- comparing two recordings -----------------------------------------------------------------------
def same_value(a, b):
    """Structural equality of step attributes and constants (arrays by value, NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, _ARRAY_TYPES):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        eq = a == b
        if a.dtype.kind in "fcV":
            eq = eq | ((a != a) & (b != b))
        return bool(eq.all())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (Tensor, type)):
        return a is b
    try:
        return bool(a == b)
    except Exception:
        return a is b


def same_program(p, q):
    """Whether two recordings of one signature are the same program, constants included."""
    if len(p.steps) != len(q.steps) or p.nslots != q.nslots or p.out_slots != q.out_slots:
        return False
    if p.input_slots != q.input_slots or len(p.consts) != len(q.consts) or len(p.externals) != len(q.externals):
        return False
    for (s1, t1, g1), (s2, t2, g2) in zip(p.externals, q.externals):
        if s1 != s2 or t1 is not t2 or g1 != g2:
            return False
    for (s1, a1), (s2, a2) in zip(p.consts, q.consts):
        if s1 != s2 or not same_value(a1, a2):
            return False
    for a, b in zip(p.steps, q.steps):
        if type(a) is not type(b):
            return False
        if type(a) is WriteStep:
            if a.tensor is not b.tensor or a.slot != b.slot:
                return False
        elif not same_value(tuple(a), tuple(b)):
            return False
    return True


# -- nested outputs ---------------------------------------------------------------------------------
def flatten(obj, tensors):
    """A hashable description of ``obj`` with its Tensors listed in ``tensors``."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return ("T",)
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(flatten(o, tensors) for o in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, flatten(v, tensors)) for k, v in obj.items()))
    try:
        hash(obj)
        return ("v", type(obj).__name__, obj)
    except TypeError:
        return ("id", id(obj))


def unflatten(spec, it, original):
    """Rebuild the structure ``spec`` (from :func:`flatten` of ``original``) with the Tensors of ``it``."""
    kind = spec[0]
    if kind == "T":
        return next(it)
    if kind in ("list", "tuple"):
        items = [unflatten(s, it, o) for s, o in zip(spec[1], original)]
        return items if kind == "list" else (type(original)(*items) if hasattr(original, "_fields")
                                             else tuple(items))
    if kind == "dict":
        return {k: unflatten(s, it, original[k]) for k, s in spec[1]}
    return original
