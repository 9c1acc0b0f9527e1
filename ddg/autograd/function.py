"""The one pattern for an op: a ``Function`` subclass whose ``forward`` and ``backward``
stand side by side and work on raw arrays with ``xp`` (numpy or cupy).

``forward(*arrays)`` computes the output array(s) and keeps on ``self`` whatever the
backward needs. ``backward(grad)`` gets the gradient of the output (a tuple of them for
multi-output ops) and returns one gradient per input, ``None`` where an input needs
none (``self.needs[i]`` says which inputs need one). Broadcasting is undone in exactly
one place, ``sum_to``.

A node is recorded only when grad mode is on and some input requires grad; integer
and bool outputs never require grad. Saved arrays are guarded by version counters:
``save_inputs`` declares which input arrays backward reads (True: all of them, False:
none, or a tuple of input indices; ``forward`` may set it on the instance where the
choice depends on the path it took), ``save_output`` whether it reads the output, so
that an in-place write to one of them makes backward fail loudly instead of returning
wrong gradients.

With ``ddg.set_flags({"FLAGS_check_nan_inf": True})`` every op checks its float
outputs, and its gradients in backward, for nan/inf and raises naming itself.

Interception slots (all held in ``ddg/dispatch.py``, with the one way to install a
holder). Features that must see every op hook in through one-element lists that the hot
path reads once each (``None``/``False``: the feature is off). In the order an op call
meets them:

1. ``function._autocast`` (set by ``ddg.amp.auto_cast``): casts the inputs, then calls
   the op again with the slot cleared, so the casts are ordinary ops.
2. ``function._recorder`` (set by ``ddg.jit`` while tracing): records the call, then
   runs it with the slot cleared; AMP comes first, so its casts are recorded too.
3. ``grad_mode._enabled`` (``no_grad``, ``enable_grad``): whether a node is recorded.
4. ``flags.check_nan_inf`` (``ddg.set_flags``): checks outputs here and gradients in
   the engine.

Two more slots sit outside the op call: ``tensor._watch`` (``ddg.jit`` while tracing)
hears when a tensor's data goes to the host or is written in place, and
``backend._rng_observer`` (``backend.observe_rng``, used by ``ddg.jit``) hears every
random draw. ``ddg/dispatch.py`` and ``docs/design.md`` have the same table.
"""
import numpy as np

from .. import dispatch
from ..flags import check_nan_inf as _check_nan_inf
from ..tensor import backend
from ..tensor.tensor import Tensor
from .grad_mode import _enabled

_ARRAY_TYPES = backend.ARRAY_TYPES
_wrap = Tensor._wrap
_FLOAT_KINDS = "fcV"  # V: bfloat16 (ml_dtypes), the only void-kind dtype ddg makes

#: ddg.jit's recording slot: while ``to_static`` records a trace it holds a callable
#: ``hook(fn, tensors)`` that every op call is routed through (the hook clears the slot
#: while it runs the op, so the call takes the ordinary path). None otherwise: one list
#: read per op when not recording.
_recorder = dispatch.RECORDER

#: ddg.amp's casting slot: inside ``auto_cast`` it holds the active ``AutoCast`` policy
#: (ddg/autograd/autocast.py), a callable ``hook(fn, tensors)`` that casts the inputs of
#: every op call to the dtype the op runs in under mixed precision, then runs it (with
#: the slot cleared, so casts and the op take the ordinary path, and ddg.jit records
#: them). None otherwise: one list read per op when AMP is off.
_autocast = dispatch.AUTOCAST


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
    save_inputs = True   # the inputs backward reads (versions guarded): True (all), False, or indices
    save_output = False  # backward reads the output array
    view = False         # the output shares memory with input 0
    differentiable = True
    # a multi-output op whose backward takes None for the outputs that got no gradient
    # (instead of arrays of zeros, which cost a memset each and the arithmetic on them)
    none_grads = False
    keep_half = True     # float16/bfloat16 inputs give outputs of their dtype (see _keep_half)
    n_out = 1
    # set on the node of a loss scaled by an enabled GradScaler (ddg.amp), which checks the
    # gradients for inf/nan itself: a backward from it runs without numpy's overflow warnings
    overflow_checked = False

    edges = ()
    _vin = None
    _vout = None
    _hooks = None
    _pre_backward = None  # callable(node) the engine runs just before this node's backward

    @property
    def name(self):
        return type(self).__name__

    def forward(self, *arrays):  # pragma: no cover - abstract
        raise NotImplementedError

    def backward(self, grad):  # pragma: no cover - abstract
        raise NotImplementedError

    def backward_graph(self, grad):
        """``backward`` written with ddg ops on Tensors, run by the engine instead of
        ``backward`` under ``create_graph=True`` so that the gradient can be differentiated
        again (see ``ddg.autograd.higher``). ``grad`` is a Tensor (a tuple of them for
        multi-output ops); returns one Tensor or None per input."""
        raise NotImplementedError(
            f"ddg: op {self.name} does not support higher-order gradients (create_graph=True): it has no "
            f"differentiable backward (backward_graph); docs/higher_order.md lists "
            f"the ops that have one")

    def apply_linear(self, u):
        """For ops linear in input 0 whose ``backward_graph`` is ``linear_backward_graph``: the
        op's linear map applied to array ``u`` (by default ``forward`` on a copy of this node,
        other inputs being index arrays the op saved)."""
        return _frozen(self).forward(u)

    def __call__(self, *tensors):
        if _autocast[0] is not None:
            return _autocast[0](self, tensors)
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
        except (ValueError, TypeError, IndexError, RuntimeError) as exc:
            raise _op_error(self, tensors, exc) from exc
        except AttributeError as exc:
            if not _blames_inputs(self, tensors, exc):
                raise       # a bug inside ddg: surfaces as itself
            raise _op_error(self, tensors, exc) from exc
        if type(out) not in _ARRAY_TYPES:
            if type(out) is tuple:
                if self.keep_half and n_in:
                    out = tuple([_keep_half(o, tensors) for o in out])
                if _check_nan_inf[0]:
                    _check_outputs(self, out, tensors, rec)
                return self._wrap_many(out, tensors, rec)
            out = backend.get_array_module(tensors[0]._data if tensors else out).asarray(out)
        if n_in and out.dtype is not tensors[0]._data.dtype and self.keep_half:
            out = _keep_half(out, tensors)
        if _check_nan_inf[0]:
            _check_outputs(self, out, tensors, rec)
        if rec and out.dtype.kind in _FLOAT_KINDS:
            o = _wrap(out, False)
            o._node = self
            self.edges = tuple([None if t.stop_gradient else
                                ((t, None) if t._node is None else (t._node, t._idx)) for t in tensors])
            if self.save_inputs:
                self._vin = _versions(self.save_inputs, tensors)
            if self.view:
                o._vc = tensors[0]._vc
            if self.save_output:
                self._vout = (o._vc, o._vc[0])
            return o
        o = _wrap(out, True)
        if self.view:
            o._vc = tensors[0]._vc
        return o

    def _note_outputs(self, outs, xp):
        """The outputs of a multi-output ``forward`` as a list of arrays; notes their count and
        shapes, which backward needs (zeros for outputs that get no gradient). Shared by
        ``__call__`` and ddg.jit's replay."""
        outs = [o if type(o) in _ARRAY_TYPES else xp.asarray(o) for o in outs]
        self.n_out = len(outs)
        self._out_shapes = [(o.shape, o.dtype) for o in outs]
        return outs

    def _wrap_many(self, outs, tensors, rec):
        outs = self._note_outputs(outs, backend.get_array_module(tensors[0]._data) if tensors else np)
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
                self._vin = _versions(self.save_inputs, tensors)
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


def _keep_half(out, tensors):
    """``out`` back in its inputs' 2-byte float dtype where numpy widened it: numpy
    computes bfloat16 (ml_dtypes) with a Python float, ``clip`` and ``matmul`` in float32,
    and ops may accumulate half inputs in float32 on purpose. An op whose float inputs
    are all float16 (or all bfloat16) returns that dtype, as in Paddle; ops that change
    the dtype on purpose (``cast``) set ``keep_half = False``."""
    return keep_half(out, [t._data for t in tensors])


def keep_half(out, arrays):
    """:func:`_keep_half` on the input arrays (ddg.jit's replay calls it too)."""
    d = getattr(out, "dtype", None)
    if d is None or d.kind != "f" or d.itemsize == 2:
        return out
    half = None
    for a in arrays:
        td = a.dtype
        if td.kind not in _FLOAT_KINDS:
            continue
        if td.itemsize != 2 or (half is not None and td != half):
            return out
        half = td
    return out if half is None else out.astype(half)


def _versions(saved, tensors):
    """(version counter, version now) of the inputs backward reads: ``saved`` is True
    (all of them) or a tuple of input indices."""
    if saved is True:
        return tuple([(t._vc, t._vc[0]) for t in tensors])
    return tuple([(tensors[i]._vc, tensors[i]._vc[0]) for i in saved])


def _nonfinite(arr):
    """A description of the nan/inf values in a float array, or None if there are none."""
    if getattr(arr, "dtype", None) is None or arr.dtype.kind not in _FLOAT_KINDS:
        return None
    xp = backend.get_array_module(arr)
    if bool(xp.isfinite(arr).all()):
        return None
    n_nan = int(xp.isnan(arr).sum())
    return f"{n_nan} nan and {int(arr.size) - int(xp.isfinite(arr).sum()) - n_nan} inf value(s)"


def _check_outputs(fn, out, tensors, rec):
    """FLAGS_check_nan_inf: raise naming the op if a forward output is not finite, and
    have its backward check the gradients it returns."""
    check_forward(fn, out, lambda: _describe(tensors))
    if rec:
        fn.backward = _CheckedBackward(fn, [(list(t._data.shape), t._data.dtype) for t in tensors])


def check_forward(fn, out, inputs):
    """Raise naming op ``fn`` if one of its forward outputs ``out`` (an array or a tuple)
    holds nan/inf; ``inputs()`` describes the inputs for the message. Used by eager
    ops and by ``to_static``'s replay while FLAGS_check_nan_inf is on."""
    outs = out if type(out) is tuple else (out,)
    for k, arr in enumerate(outs):
        bad = _nonfinite(arr)
        if bad is not None:
            which = f"output {k}" if len(outs) > 1 else "output"
            raise RuntimeError(f"ddg.{fn.name}: {which} (shape {list(arr.shape)}, dtype {arr.dtype}) holds {bad} "
                               f"(FLAGS_check_nan_inf is on); inputs: {inputs()}")


def check_backward(fn, results, inputs):
    """Raise naming op ``fn`` if a gradient its backward returned holds nan/inf;
    ``inputs`` lists the inputs' (shape, dtype)."""
    for i, g in enumerate(results if type(results) is tuple else (results,)):
        bad = _nonfinite(g) if g is not None else None
        if bad is not None:
            shape, dtype = inputs[i] if i < len(inputs) else ("?", "?")
            raise RuntimeError(f"ddg.{fn.name} backward: the gradient of input {i} (shape {list(g.shape)}, "
                               f"dtype {g.dtype}; the input: {shape}:{dtype}) holds {bad} "
                               f"(FLAGS_check_nan_inf is on)")


class _CheckedBackward:
    """Stands in for one node's ``backward`` while FLAGS_check_nan_inf is on: runs the
    op's backward and raises naming the op if a gradient it returns is not finite."""

    def __init__(self, fn, inputs):
        self.fn, self.inputs = fn, inputs

    def __call__(self, grad):
        fn = self.fn
        results = type(fn).backward(fn, grad)
        check_backward(fn, results, self.inputs)
        return results


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
    msg = f"ddg.{fn.name}: {exc} (inputs: {_describe(tensors)})"
    kinds = (TypeError, IndexError, RuntimeError)
    if not isinstance(exc, kinds):
        return ValueError(msg)
    try:
        return type(exc)(msg)
    except Exception:   # noqa: BLE001 - a class with a constructor of its own (numpy's ufunc casting errors)
        return next(k for k in kinds if isinstance(exc, k))(msg)


def _blames_inputs(fn, tensors, exc):
    """Whether an AttributeError raised in ``fn.forward`` is about what the user passed:
    the object that lacks the attribute is one of the input arrays, or one of the op's
    non-array settings (an axis, a shape, a mode given to the op). Anything else (a
    module without the function, an array ddg made itself) is a bug in ddg."""
    obj = getattr(exc, "obj", None)
    if obj is None:
        return False
    if any(obj is t._data for t in tensors):
        return True
    return any(obj is v for v in vars(fn).values() if type(v) not in _ARRAY_TYPES)


def same_float_dtype(op, x, y):
    """Matrix products do not promote: a float32 weight meeting a float64 input is a
    bug to report (as Paddle does), not a silent float64 result."""
    if x.dtype != y.dtype and x.dtype.kind in "fV" and y.dtype.kind in "fV":
        raise ValueError(f"{op}: x and y must have the same float dtype, got x {x.dtype} {list(x.shape)} and "
                         f"y {y.dtype} {list(y.shape)}; cast one with .astype() first")


def _frozen(op):
    """A shallow copy of node ``op`` for later use (higher-order gradients): the engine
    releases the original's state after its backward, and a copy's ``forward`` may
    overwrite what it sets."""
    c = object.__new__(type(op))
    c.__dict__.update(op.__dict__)
    c.__dict__.pop("backward", None)  # FLAGS_check_nan_inf's wrapper refers to the original
    return c
