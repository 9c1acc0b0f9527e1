"""``jacobian`` and ``hessian`` with Paddle's API (``paddle.autograd.jacobian/hessian``).

The results are lazily evaluated matrices: ``J = jacobian(ys, xs)`` computes nothing
until indexed; ``J[i]`` (or ``J[:, i]`` with ``batch_axis=0``) runs one backward pass
(``create_graph=True``, so the result can be differentiated again) for each row of ``ys``
it needs and caches it. Shapes follow Paddle: without a batch axis ``ys`` and ``xs`` are
0-D or 1-D and ``J.shape`` is ``ys.shape + xs.shape``; with ``batch_axis=0`` they are
1-D or 2-D (axis 0 the batch, the same size for both) and the shape is
``[B] + ys.shape[1:] + xs.shape[1:]``, the Jacobian of each sample on its own.
"""
from ..tensor import backend
from ..tensor.tensor import Tensor
from . import engine


def _is_seq(v):
    return isinstance(v, (tuple, list))


class Jacobian:
    """The Jacobian of one ``ys`` with respect to one ``xs``, evaluated row by row on indexing."""

    def __init__(self, ys, xs, is_batched=False):
        lo, hi = (1, 2) if is_batched else (0, 1)
        for what, t in (("ys", ys), ("xs", xs)):
            if not isinstance(t, Tensor):
                raise TypeError(f"ddg.autograd.jacobian: {what} must be Tensors, got {type(t).__name__}")
            if not lo <= t.ndim <= hi:
                raise ValueError(f"{what}.ndim should be {lo} or {hi} when is_batched={is_batched} but got {t.ndim}")
        if is_batched and ys.shape[0] != xs.shape[0]:
            raise ValueError(f"ddg.autograd.jacobian: batch_axis=0 needs the same batch size for ys and xs, got "
                             f"ys {ys.shape} and xs {xs.shape}")
        self._ys, self._xs, self._batched = ys, xs, is_batched
        r = 1 if is_batched else 0
        self._nrows = ys.shape[r] if ys.ndim > r else None  # None: ys has no row axis
        self.shape = ([ys.shape[0]] if is_batched else []) + list(ys.shape[r:]) + list(xs.shape[r:])
        self._rows = {}

    def _row(self, i):
        """d ys[i] / d xs (``i`` None: ys has no row axis), shaped like xs."""
        row = self._rows.get(i)
        if row is not None:
            return row
        ys, xs = self._ys, self._xs
        xp = backend.get_array_module(ys._data)
        g = None
        if not ys.stop_gradient and not xs.stop_gradient:
            v = None
            if i is not None:
                v = xp.zeros(ys._data.shape, dtype=ys._data.dtype)
                v[(slice(None), i) if self._batched else i] = 1
                v = Tensor._wrap(v)
            (g,) = engine.grad([ys], [xs], None if v is None else [v], create_graph=True, allow_unused=True)
        if g is None:  # xs does not reach ys: zeros, as Paddle gives
            g = Tensor._wrap(xp.zeros(xs._data.shape, dtype=xs._data.dtype))
        self._rows[i] = g
        return g

    def __getitem__(self, index):
        idx = index if isinstance(index, tuple) else (index,)
        for k in idx:
            if k is Ellipsis or k is None or not isinstance(k, (int, slice)):
                raise IndexError(f"ddg.autograd.Jacobian: index with ints and slices only, got {index!r}")
        if not self.shape and idx:
            raise IndexError("ddg.autograd.Jacobian: a 0-D Jacobian can not be indexed (J[()] gives its value)")
        if len(idx) > len(self.shape):
            raise IndexError(f"ddg.autograd.Jacobian: too many indices ({len(idx)}) for shape {self.shape}")
        if self._nrows is None:
            full = self._row(None)
            return full[idx] if idx else full
        r = 1 if self._batched else 0
        k = idx[r] if len(idx) > r else slice(None)
        n = self._nrows
        if isinstance(k, slice):
            sel = list(range(n))[k]
        else:
            if not -n <= k < n:
                raise IndexError(f"ddg.autograd.Jacobian: index {k} is out of range for {n} rows (shape "
                                 f"{self.shape})")
            sel = [k % n]
        from .ops.movement import stack
        if not sel:
            xp = backend.get_array_module(self._ys._data)
            shape = list(self.shape)
            shape[r] = 0
            return Tensor._wrap(xp.zeros(shape, dtype=self._xs._data.dtype))
        block = stack([self._row(i) for i in sel], axis=r)
        rest = idx[:r] + ((slice(None) if isinstance(k, slice) else 0),) + idx[r + 1:]
        return block[rest]

    def __repr__(self):
        return f"Jacobian(shape={self.shape}, batched={self._batched})"


class Hessian(Jacobian):
    """The Hessian of a scalar ``ys`` (one per sample with ``batch_axis=0``): the Jacobian of
    its gradient, evaluated row by row on indexing."""


def _batch_flag(batch_axis):
    if batch_axis is None:
        return False
    if batch_axis == 0:
        return True
    raise ValueError(f"batch_axis should be None or 0, but got {batch_axis}.")


def jacobian(ys, xs, batch_axis=None):
    """Jacobian(s) of ``ys`` with respect to ``xs`` (Tensors or sequences of them): a
    ``Jacobian`` for one of each, a tuple over whichever is a sequence, a tuple of tuples
    (``[i][j]`` for ``ys[i]``, ``xs[j]``) for two sequences."""
    batched = _batch_flag(batch_axis)
    if _is_seq(ys) and _is_seq(xs):
        return tuple(tuple(Jacobian(y, x, batched) for x in xs) for y in ys)
    if _is_seq(ys):
        return tuple(Jacobian(y, xs, batched) for y in ys)
    if _is_seq(xs):
        return tuple(Jacobian(ys, x, batched) for x in xs)
    return Jacobian(ys, xs, batched)


def hessian(ys, xs, batch_axis=None):
    """Hessian of ``ys`` (one element; one per sample with ``batch_axis=0``) with respect to
    ``xs`` (a Tensor, or a sequence: then a tuple of tuples ``[i][j]`` of the blocks
    d2 ys / d xs[i] d xs[j])."""
    batched = _batch_flag(batch_axis)
    if not isinstance(ys, Tensor):
        raise TypeError(f"ddg.autograd.hessian: ys must be a Tensor, got {type(ys).__name__}")
    if batched:
        if ys.ndim < 1 or ys.size != ys.shape[0]:
            raise ValueError(f"Only support ys[0].numel()({ys.size // max(ys.shape[0], 1) if ys.ndim else 0})==1 "
                             f"when batch_axis is int")
    elif ys.size != 1:
        raise ValueError(f"Only support ys.numel()({ys.size})==1 when batch_axis is None.")
    seq = _is_seq(xs)
    xs_list = list(xs) if seq else [xs]
    total = ys.sum() if ys.ndim else ys  # per sample, the samples being independent
    grads = engine.grad([total], xs_list, create_graph=True, allow_unused=True) if not ys.stop_gradient \
        else [None] * len(xs_list)
    grads = [Tensor._wrap(backend.get_array_module(x._data).zeros(x._data.shape, dtype=x._data.dtype))
             if g is None else g for g, x in zip(grads, xs_list)]
    if not seq:
        return Hessian(grads[0], xs, batched)
    return tuple(tuple(Hessian(g, x, batched) for x in xs_list) for g in grads)
