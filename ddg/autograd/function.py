"""The one pattern for an op: a ``Function`` subclass whose ``forward`` and ``backward``
stand side by side and work on raw arrays with ``xp`` (numpy or cupy).

``forward(*arrays)`` computes the output array(s) and keeps on ``self`` whatever the
backward needs. ``backward(grad)`` gets the gradient of the output (a tuple of them for
multi-output ops) and returns one gradient per input, ``None`` where an input needs
none (``self.needs[i]`` says which inputs need one). Broadcasting is undone in exactly
one place, ``sum_to``.

A node is recorded only when grad mode is on and some input requires grad; integer
and bool outputs never require grad. Saved arrays are guarded by version counters:
``save_inputs`` / ``save_output`` say whether backward reads the input / output arrays,
so that an in-place write to one of them makes backward fail loudly instead of
returning wrong gradients.
"""
import numpy as np

from ..tensor import backend
from ..tensor.tensor import Tensor
from .grad_mode import _enabled

_ARRAY_TYPES = backend.ARRAY_TYPES
_wrap = Tensor._wrap
_FLOAT_KINDS = "fc"

#: ddg.jit's recording slot: while ``to_static`` records a trace it holds a callable
#: ``hook(fn, tensors)`` that every op call is routed through (the hook clears the slot
#: while it runs the op, so the call takes the ordinary path). None otherwise: one list
#: read per op when not recording.
_recorder = [None]


def sum_to(g, shape):
    """Sum ``g`` down to ``shape``: the adjoint of broadcasting ``shape`` up to ``g.shape``."""
    gshape = g.shape
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and gshape[i + lead] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    if lead:
        g = g.reshape(shape)
    return g


class Function:
    save_inputs = True   # backward reads input arrays (guard their versions)
    save_output = False  # backward reads the output array
    view = False         # the output shares memory with input 0
    differentiable = True
    n_out = 1

    edges = ()
    _vin = None
    _vout = None
    _hooks = None

    @property
    def name(self):
        return type(self).__name__

    def forward(self, *arrays):  # pragma: no cover - abstract
        raise NotImplementedError

    def backward(self, grad):  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, *tensors):
        if _recorder[0] is not None:
            return _recorder[0](self, tensors)
        # The hot path: every op of every step comes through here, so it is written for
        # speed, with the common arities (one and two inputs) unrolled.
        n_in = len(tensors)
        if _enabled[0] and self.differentiable:
            if n_in == 2:
                needs = (not tensors[0].stop_gradient, not tensors[1].stop_gradient)
            elif n_in == 1:
                needs = (not tensors[0].stop_gradient,)
            else:
                needs = tuple([not t.stop_gradient for t in tensors])
            rec = True in needs
            if rec:
                self.needs = needs
        else:
            rec = False
        try:
            if n_in == 2:
                out = self.forward(tensors[0]._data, tensors[1]._data)
            elif n_in == 1:
                out = self.forward(tensors[0]._data)
            else:
                out = self.forward(*[t._data for t in tensors])
        except (ValueError, TypeError, IndexError, RuntimeError, AttributeError) as exc:
            raise _op_error(self, tensors, exc) from exc
        if type(out) not in _ARRAY_TYPES:
            if type(out) is tuple:
                return self._wrap_many(out, tensors, rec)
            out = backend.get_array_module(tensors[0]._data if tensors else out).asarray(out)
        if rec and out.dtype.kind in _FLOAT_KINDS:
            o = _wrap(out, False)
            o._node = self
            self.edges = tuple([None if t.stop_gradient else
                                ((t, None) if t._node is None else (t._node, t._idx)) for t in tensors])
            if self.save_inputs:
                self._vin = tuple([(t._vc, t._vc[0]) for t in tensors])
            if self.view:
                o._vc = tensors[0]._vc
            if self.save_output:
                self._vout = (o._vc, o._vc[0])
            return o
        o = _wrap(out, True)
        if self.view:
            o._vc = tensors[0]._vc
        return o

    def _wrap_many(self, outs, tensors, rec):
        xp = backend.get_array_module(tensors[0]._data) if tensors else np
        outs = [o if type(o) in _ARRAY_TYPES else xp.asarray(o) for o in outs]
        self.n_out = len(outs)
        rec = rec and any(o.dtype.kind in _FLOAT_KINDS for o in outs)
        result = []
        for i, arr in enumerate(outs):
            t = Tensor._wrap(arr, not (rec and arr.dtype.kind in _FLOAT_KINDS))
            if not t.stop_gradient:
                t._node = self
                t._idx = i
            if self.view:
                t._vc = tensors[0]._vc
            result.append(t)
        if rec:
            self.edges = tuple(None if t.stop_gradient else ((t, None) if t._node is None else (t._node, t._idx))
                               for t in tensors)
            if self.save_inputs:
                self._vin = tuple((t._vc, t._vc[0]) for t in tensors)
            self._out_shapes = [(o.shape, o.dtype) for o in outs]
        return tuple(result)

    def _out_hook_list(self, idx):
        if self._hooks is None:
            self._hooks = {}
        return self._hooks.setdefault(idx, [])

    def _release(self):
        """Drop everything forward saved: called after this node's backward ran."""
        n_out = self.n_out
        self.__dict__.clear()
        self.edges = None
        self.n_out = n_out


def _describe(tensors):
    parts = []
    for t in tensors:
        parts.append(f"{list(t._data.shape)}:{t._data.dtype}@{t.place}")
    return ", ".join(parts)


def _op_error(fn, tensors, exc):
    """A clear error naming the op and its inputs' shapes, dtypes and places."""
    places = {str(t.place) for t in tensors}
    if len(places) > 1:
        return ValueError(f"ddg.{fn.name}: inputs are on different places ({', '.join(sorted(places))}); "
                          f"move them with .to(place) first. Inputs: {_describe(tensors)}")
    cls = type(exc) if isinstance(exc, (TypeError, IndexError, RuntimeError)) else ValueError
    return cls(f"ddg.{fn.name}: {exc} (inputs: {_describe(tensors)})")
