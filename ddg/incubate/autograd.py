"""``ddg.incubate.autograd``: Paddle's functional differentiation API (``vjp``, ``jvp``,
``Jacobian``, ``Hessian``, ``grad``, ``forward_grad``) on ddg's engine. ``enable_prim``/
``disable_prim`` switch Paddle's primitive-operator lowering of static programs; ddg has
no static programs, so they only set the flag ``prim_enabled()`` reports."""
import numpy as np

from ..autograd import engine
from ..autograd.ops import movement as M
from ..autograd.ops import reduce as R
from ..tensor.tensor import Tensor

__all__ = ["vjp", "jvp", "Jacobian", "Hessian", "enable_prim", "disable_prim", "prim_enabled", "forward_grad",
           "grad"]

_prim = [False]


def enable_prim():
    _prim[0] = True


def disable_prim():
    _prim[0] = False


def prim_enabled():
    return _prim[0]


def _seq(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _restore(like, vals):
    return vals if isinstance(like, (list, tuple)) else vals[0]


def _prepare(xs):
    out = []
    for x in _seq(xs):
        if not isinstance(x, Tensor):
            raise TypeError(f"ddg.incubate.autograd: xs must be Tensors, got {type(x).__name__}")
        y = x.detach()
        y.stop_gradient = False
        out.append(y)
    return out


def _grads(ys, xs, vs, create_graph):
    gs = engine.grad(ys, xs, vs, create_graph=create_graph, allow_unused=True)
    return [g if g is not None else x * 0 for g, x in zip(gs, xs)]


def vjp(func, xs, v=None):
    """``(func(xs), v^T J)``: the outputs and the vector-Jacobian product (``v`` defaults to
    ones shaped like the outputs)."""
    inputs = _prepare(xs)
    ys = func(*inputs)
    ys_list = _seq(ys)
    vs = None if v is None else _seq(v)
    return ys, _restore(xs, _grads(ys_list, inputs, vs, create_graph=False))


def jvp(func, xs, v=None):
    """``(func(xs), J v)``: the outputs and the Jacobian-vector product (``v`` defaults to
    ones shaped like ``xs``), by differentiating a vector-Jacobian product once more."""
    inputs = _prepare(xs)
    ys = func(*inputs)
    ys_list = _seq(ys)
    us = [(y * 0).detach() for y in ys_list]
    for u in us:
        u.stop_gradient = False
    g = _grads(ys_list, inputs, us, create_graph=True)
    vs = [x * 0 + 1 for x in inputs] if v is None else _seq(v)
    jv = engine.grad(g, us, vs, allow_unused=True)
    jv = [j if j is not None else y * 0 for j, y in zip(jv, ys_list)]
    return ys, _restore(ys, jv)


def grad(outputs, inputs, grad_outputs=None):
    """Gradients of ``outputs`` with respect to ``inputs`` (reverse mode)."""
    outs = engine.grad(_seq(outputs), _seq(inputs), None if grad_outputs is None else _seq(grad_outputs),
                       allow_unused=True)
    return _restore(inputs, list(outs))


def forward_grad(outputs, inputs, grad_inputs=None):
    """Forward-mode gradients: ``J v`` of ``outputs`` along ``grad_inputs`` (ones when
    None), computed from the recorded graph by differentiating a vector-Jacobian product."""
    ys, xs = _seq(outputs), _seq(inputs)
    us = [(y * 0).detach() for y in ys]
    for u in us:
        u.stop_gradient = False
    g = engine.grad(ys, xs, us, create_graph=True, retain_graph=True, allow_unused=True)
    g = [gi if gi is not None else x * 0 for gi, x in zip(g, xs)]
    vs = [x * 0 + 1 for x in xs] if grad_inputs is None else _seq(grad_inputs)
    jv = engine.grad(g, us, vs, allow_unused=True)
    return _restore(outputs, [j if j is not None else y * 0 for j, y in zip(jv, ys)])


class Jacobian:
    """The Jacobian of ``func`` at ``xs`` as one matrix: [M, N] with M the outputs' and N the
    inputs' total sizes (several inputs concatenated), or [B, M, N] with ``is_batched``
    (axis 0 of every input and output is the batch). ``J[...]`` slices it; ``J.shape``."""

    def __init__(self, func, xs, is_batched=False):
        self._inputs = _prepare(xs)
        ys = func(*self._inputs)
        self._ys = _seq(ys)
        self._batched = is_batched
        self._matrix = None
        b = self._inputs[0].shape[0] if is_batched else None
        per = (lambda t: t.size // b) if is_batched else (lambda t: t.size)
        m, n = sum(per(y) for y in self._ys), sum(per(x) for x in self._inputs)
        self.shape = (b, m, n) if is_batched else (m, n)

    def _build(self):
        ys, xs = self._ys, self._inputs
        b = self.shape[0] if self._batched else None
        flat = [M.reshape(y, [b, -1] if self._batched else [-1]) for y in ys]
        y_all = M.concat(flat, axis=-1)
        rows = []
        for i in range(y_all.shape[-1]):
            v = np.zeros(y_all.shape, dtype=y_all.dtype)
            v[..., i] = 1
            gs = _grads([y_all], xs, [Tensor._wrap(v)], create_graph=True)
            rows.append(M.concat([M.reshape(g, [b, -1] if self._batched else [-1]) for g in gs], axis=-1))
        self._matrix = M.stack(rows, axis=-2)

    def __getitem__(self, index):
        if self._matrix is None:
            self._build()
        return self._matrix[index]


class Hessian(Jacobian):
    """The Hessian of a scalar ``func`` (one value, or one per batch row with
    ``is_batched``) at ``xs``: the Jacobian of its gradient, [N, N] (or [B, N, N])."""

    def __init__(self, func, xs, is_batched=False):
        def gradient(*inputs):
            y = func(*inputs)
            if y.size != (inputs[0].shape[0] if is_batched else 1):
                raise ValueError(f"ddg.incubate.autograd.Hessian: func must return one value (per batch row), got "
                                 f"shape {y.shape}")
            gs = engine.grad([R.sum(y)], list(inputs), create_graph=True, allow_unused=True)
            gs = [g if g is not None else x * 0 for g, x in zip(gs, inputs)]
            return gs if len(gs) > 1 else gs[0]
        super().__init__(gradient, xs, is_batched)
