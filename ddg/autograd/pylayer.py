"""``PyLayer``: a user-defined op with a Python forward and backward on Tensors.

The contract is Paddle's:

* inputs: every Tensor argument of ``apply``, positional or keyword (positional ones
  first, then keywords in call order), and every list or tuple of Tensors (one input
  whose gradient is a list); other arguments are passed through;
* outputs: ``forward`` returns a Tensor, or a tuple/list holding at least one Tensor
  (anything else in it is returned untouched and gets no gradient); floating outputs
  require grad when an input does, unless marked with ``ctx.mark_non_differentiable``;
* ``backward(ctx, *grads)`` gets one gradient per Tensor output (zeros for outputs
  that got none, or None after ``ctx.set_materialize_grads(False)``) and returns one
  gradient (a Tensor or None) per input, in the order above.
"""
from ..tensor import backend
from ..tensor.tensor import Tensor
from . import grad_mode
from .function import Function


class PyLayerContext:
    """The ``ctx`` passed to forward and backward."""

    def __init__(self):
        self._saved = ()
        self.needs_input_grad = ()
        self._non_differentiable = ()
        self._materialize_grads = True
        self._grad_in_dtype_consistent = True

    def save_for_backward(self, *tensors):
        """Keep ``tensors`` for backward (``ctx.saved_tensor()`` returns them); inside
        ``saved_tensors_hooks`` each Tensor is kept as its ``pack_hook`` makes it."""
        from .saved_tensors_hooks import current_hooks
        hooks = current_hooks()
        if hooks is None:
            self._saved = tensors
            self._unpack = None
            return
        self._saved = tuple(hooks[0](t) if isinstance(t, Tensor) else t for t in tensors)
        self._unpack = (hooks[1], [isinstance(t, Tensor) for t in tensors])

    def saved_tensor(self):
        """The tensors given to ``save_for_backward``, as a tuple."""
        unpack = getattr(self, "_unpack", None)
        if unpack is not None:
            fn, is_tensor = unpack
            self._saved = tuple(fn(t) if k else t for t, k in zip(self._saved, is_tensor))
            self._unpack = None
        return self._saved

    saved_tensors = property(saved_tensor)  # PyTorch's spelling

    def mark_not_inplace(self, *args):
        """Paddle's hint that outputs are not inputs modified in place: ddg's outputs are
        always new Tensors, so there is nothing to do."""

    def mark_non_differentiable(self, *tensors):
        """Outputs among ``tensors`` get ``stop_gradient=True``; backward receives zeros
        (or None, see ``set_materialize_grads``) for them."""
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"PyLayerContext.mark_non_differentiable: expects Tensors, got {type(t).__name__}")
        self._non_differentiable = self._non_differentiable + tuple(tensors)

    def set_materialize_grads(self, value):
        """True (the default): backward gets zeros for outputs that received no gradient;
        False: it gets None for them."""
        self._materialize_grads = bool(value)

    def set_grad_in_dtype_consistent(self, value):
        """True (the default): each gradient backward returns is cast to its input's dtype."""
        self._grad_in_dtype_consistent = bool(value)


def _input_structure(args, kwargs):
    """The inputs of ``apply``: a list with one entry per input (a Tensor, or a list of
    Tensors for a list/tuple argument holding Tensors), and the Tensors flattened."""
    entries, flat = [], []
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, Tensor):
            entries.append(a)
            flat.append(a)
        elif isinstance(a, (list, tuple)) and any(isinstance(t, Tensor) for t in a):
            ts = [t for t in a if isinstance(t, Tensor)]
            entries.append(ts)
            flat.extend(ts)
    return entries, flat


class _PyLayerNode(Function):
    save_inputs = False
    none_grads = True  # the node fills (or not) the missing output gradients itself

    def __init__(self, cls, ctx, entries, flat):
        self.cls, self.ctx = cls, ctx
        self.n_inputs = len(entries)
        # per input entry: None (one Tensor) or the number of Tensors in its list
        self._entry_sizes = [None if isinstance(e, Tensor) else len(e) for e in entries]
        self._in_meta = [(t._data.shape, t._data.dtype) for t in flat]

    @property
    def name(self):
        return self.cls.__name__

    def _grads_in(self, grads, wrap_zero):
        if self.n_out == 1:
            grads = (grads,)
        out = []
        for i, g in enumerate(grads):
            if g is None and self.ctx._materialize_grads:
                g = wrap_zero(*self._out_shapes[i])
            out.append(g)
        return out

    def _flat_results(self, res):
        """The user's backward result, checked, as one gradient (or None) per flattened Tensor input."""
        name = self.cls.__name__
        if not isinstance(res, (tuple, list)):
            res = (res,)
        if len(res) > self.n_inputs:
            raise ValueError(f"{name} : The number of outputs of `PyLayer.backward` should be {self.n_inputs}, "
                             f"but received {len(res)}.")
        flat = []
        for i, size in enumerate(self._entry_sizes):
            r = res[i] if i < len(res) else _MISSING
            if size is None:
                flat.append((i, r))
                continue
            if r is _MISSING or r is None:
                flat.extend((i, r) for _ in range(size))
            elif isinstance(r, (list, tuple)) and len(r) == size:
                flat.extend((i, x) for x in r)
            else:
                raise ValueError(f"{name} : `PyLayer.backward` must return a list of {size} gradients (Tensor or "
                                 f"None) for input {i} (a list of {size} Tensors), got {type(r).__name__}"
                                 + (f" of length {len(r)}" if isinstance(r, (list, tuple)) else ""))
        out = []
        for (i, r), need, (shape, dtype) in zip(flat, self.needs, self._in_meta):
            if r is _MISSING:
                if need:
                    raise ValueError(f"{name}'s backward function should not return empty at {i} position: the "
                                     f"input needs a gradient (return None for it explicitly to give none)")
                out.append(None)
                continue
            if r is None or not need:
                out.append(None)
                continue
            if not isinstance(r, Tensor):
                raise ValueError(f"{name} : We can only support Tensor or None for backward output, but got "
                                 f"{type(r).__name__} for input {i}")
            if tuple(r._data.shape) != tuple(shape):
                raise ValueError(f"{name} : `PyLayer.backward` returned a gradient of shape {list(r._data.shape)} "
                                 f"for input {i}, whose shape is {list(shape)}")
            if self.ctx._grad_in_dtype_consistent and r._data.dtype != dtype:
                r = r.astype(dtype)
            out.append(r)
        return out

    def backward(self, grads):
        first = grads if self.n_out == 1 else next(g for g in grads if g is not None)
        xp = backend.get_array_module(first)
        gin = self._grads_in(grads, lambda shape, dtype: xp.zeros(shape, dtype))
        with grad_mode.no_grad():
            res = self.cls.backward(self.ctx, *[None if g is None else Tensor._wrap(g) for g in gin])
        return tuple(None if r is None else r._data for r in self._flat_results(res))

    def backward_graph(self, grads):
        """Under create_graph: the user's backward with grad mode on, on the gradient Tensors
        (its ops are recorded; tensors saved in forward are constants unless they are inputs)."""
        first = grads if self.n_out == 1 else next(g for g in grads if g is not None)
        xp = backend.get_array_module(first._data)
        gin = self._grads_in(grads, lambda shape, dtype: Tensor._wrap(xp.zeros(shape, dtype)))
        res = self.cls.backward(self.ctx, *gin)
        return tuple(self._flat_results(res))


_MISSING = object()


class PyLayer:
    """Subclass with ``@staticmethod forward(ctx, *args, **kwargs)`` and
    ``@staticmethod backward(ctx, *grads)``; call ``MyLayer.apply(*args, **kwargs)``.
    See the module docstring for what counts as an input and an output."""

    @staticmethod
    def forward(ctx, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = PyLayerContext()
        entries, tensors = _input_structure(args, kwargs)
        ctx.needs_input_grad = tuple(not t.stop_gradient for t in tensors)
        with grad_mode.no_grad():
            outs = cls.forward(ctx, *args, **kwargs)
        single = isinstance(outs, Tensor)
        if single:
            items = [outs]
        elif isinstance(outs, (tuple, list)):
            items = list(outs)
        else:
            items = []
        if not any(isinstance(o, Tensor) for o in items):
            raise ValueError(f"{cls.__name__} : At least one output of `PyLayer.forward` is a `Tensor`; got "
                             f"{type(outs).__name__}")
        marked = set(id(t) for t in ctx._non_differentiable)
        wrapped, tensor_outs, frozen = [], [], []
        for o in items:
            if isinstance(o, Tensor):
                w = Tensor._wrap(o._data, True)
                tensor_outs.append(w)
                frozen.append(id(o) in marked)
                wrapped.append(w)
            else:
                wrapped.append(o)
        if grad_mode._enabled[0] and any(not t.stop_gradient for t in tensors):
            node = _PyLayerNode(cls, ctx, entries, tensors)
            node.needs = ctx.needs_input_grad
            node.edges = tuple(None if t.stop_gradient else ((t, None) if t._node is None else (t._node, t._idx))
                               for t in tensors)
            node.n_out = len(tensor_outs)
            node._out_shapes = [(o._data.shape, o._data.dtype) for o in tensor_outs]
            for i, (o, fz) in enumerate(zip(tensor_outs, frozen)):
                if not fz and o._data.dtype.kind in "fcV":
                    o._node, o._idx, o.stop_gradient = node, i, False
        if single:
            return wrapped[0]
        return type(outs)(wrapped) if type(outs) in (tuple, list) else tuple(wrapped)
