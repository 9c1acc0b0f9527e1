"""``PyLayer``: a user-defined op with a Python forward and backward on Tensors."""
from ..tensor.tensor import Tensor
from . import grad_mode
from .function import Function


class PyLayerContext:
    """The ``ctx`` passed to forward and backward."""

    def __init__(self):
        self._saved = ()
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors):
        self._saved = tensors

    def saved_tensor(self):
        return self._saved

    saved_tensors = property(saved_tensor)

    def mark_not_inplace(self, *args):
        pass

    def mark_non_differentiable(self, *args):
        pass

    def set_materialize_grads(self, value):
        pass


class _PyLayerNode(Function):
    save_inputs = False

    def __init__(self, cls, ctx, n_inputs):
        self.cls, self.ctx, self.n_inputs = cls, ctx, n_inputs

    @property
    def name(self):
        return self.cls.__name__

    def backward(self, grads):
        if self.n_out == 1:
            grads = (grads,)
        with grad_mode.no_grad():
            res = self.cls.backward(self.ctx, *[Tensor._wrap(g) for g in grads])
        if not isinstance(res, (tuple, list)):
            res = (res,)
        if len(res) != self.n_inputs:
            raise RuntimeError(f"ddg.PyLayer {self.cls.__name__}.backward returned {len(res)} gradients, but "
                               f"forward took {self.n_inputs} tensor inputs")
        out = []
        for r, need in zip(res, self.needs):
            out.append(None if (r is None or not need) else (r._data if isinstance(r, Tensor) else r))
        return tuple(out)

    def backward_graph(self, grads):
        """Under create_graph: the user's backward with grad mode on, on the gradient Tensors
        (its ops are recorded; tensors saved in forward are constants unless they are inputs)."""
        if self.n_out == 1:
            grads = (grads,)
        res = self.cls.backward(self.ctx, *grads)
        if not isinstance(res, (tuple, list)):
            res = (res,)
        if len(res) != self.n_inputs:
            raise RuntimeError(f"ddg.PyLayer {self.cls.__name__}.backward returned {len(res)} gradients, but "
                               f"forward took {self.n_inputs} tensor inputs")
        return tuple(None if (r is None or not need) else (r if isinstance(r, Tensor) else Tensor._wrap(r))
                     for r, need in zip(res, self.needs))


class PyLayer:
    """Subclass with ``@staticmethod forward(ctx, *args)`` and ``backward(ctx, *grads)``;
    call ``MyLayer.apply(*args)``. backward returns one gradient per Tensor input."""

    @staticmethod
    def forward(ctx, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = PyLayerContext()
        tensors = [a for a in args if isinstance(a, Tensor)]
        ctx.needs_input_grad = tuple(not t.stop_gradient for t in tensors)
        with grad_mode.no_grad():
            outs = cls.forward(ctx, *args, **kwargs)
        single = isinstance(outs, Tensor)
        outs = [outs] if single else list(outs)
        outs = [Tensor._wrap(o._data, True) if isinstance(o, Tensor) else o for o in outs]
        if grad_mode._enabled[0] and any(not t.stop_gradient for t in tensors):
            node = _PyLayerNode(cls, ctx, len(tensors))
            node.needs = ctx.needs_input_grad
            node.edges = tuple(None if t.stop_gradient else ((t, None) if t._node is None else (t._node, t._idx))
                               for t in tensors)
            node.n_out = len(outs)
            node._out_shapes = [(o._data.shape, o._data.dtype) for o in outs]
            for i, o in enumerate(outs):
                if isinstance(o, Tensor) and o._data.dtype.kind in "fcV":
                    o._node, o._idx, o.stop_gradient = node, i, False
        return outs[0] if single else tuple(outs)
