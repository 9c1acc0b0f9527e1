"""Products and norms: ``dot``, ``outer``, ``kron``, ``addmm``, ``mv``, ``inner``,
``tensordot``, ``cross``, distances, vector and matrix norms, ``renorm``, and the
matrix functions of ``ddg.linalg`` (``matrix_power``, ``multi_dot``, ``cholesky_solve``)."""
import builtins as _b

import numpy as np

from ...tensor import backend
from ...tensor.tensor import Tensor
from ..axes import normalize_axis
from ..ops import elementwise as E
from ..ops import linalg as L
from ..ops import logic as G
from ..ops import movement as M
from ..ops import reduce as R
from ._common import _const


def dot(x, y, name=None):
    """Inner product of vectors (row-wise for 2-D inputs, as in Paddle): ``x`` and ``y`` are
    both 1-D or both 2-D, of the same shape."""
    if x.ndim not in (1, 2) or list(x.shape) != list(y.shape):
        raise ValueError(f"ddg.dot: needs two 1-D or two 2-D tensors of the same shape, got shapes {x.shape} "
                         f"and {y.shape}")
    if x.ndim == 1:
        return L.matmul(x, y)
    return R.sum(E.multiply(x, y), axis=-1)


def outer(x, y, name=None):
    return L.matmul(M.reshape(x, [-1, 1]), M.reshape(y, [1, -1]))


def kron(x, y, name=None):
    """The Kronecker product: block (i, j...) is ``x[i, j...] * y``."""
    nd = _b.max(x._data.ndim, y._data.ndim)
    xs = [1] * (nd - x._data.ndim) + list(x._data.shape)
    ys = [1] * (nd - y._data.ndim) + list(y._data.shape)
    xi = M.reshape(x, [d for s in xs for d in (s, 1)])
    yi = M.reshape(y, [d for s in ys for d in (1, s)])
    return M.reshape(E.multiply(xi, yi), [a * b for a, b in zip(xs, ys)])


def norm(x, p=None, axis=None, keepdim=False, name=None):
    """Vector p-norms (p a number, ``inf``, ``-inf`` or 0) along ``axis`` (all elements
    when None), or the Frobenius norm (``p='fro'`` or None) over one or two axes."""
    nd = x._data.ndim
    axes = None if axis is None else ([axis] if isinstance(axis, int) else list(axis))
    if axes is not None:
        axes = [normalize_axis(a, nd, "norm") for a in axes]
    if p is None:
        p = "fro" if axes is None or len(axes) == 2 else 2.0
    if p == "fro":
        if axes is not None and len(axes) > 2:
            raise ValueError(f"ddg.norm: the Frobenius norm takes at most 2 axes, got {axis}")
        return E.sqrt(R.sum(E.square(x), axis=axes, keepdim=keepdim))
    if isinstance(p, str):
        raise ValueError(f"ddg.norm: p={p!r} is not supported (use a number, inf, -inf, 0 or 'fro')")
    if axes is not None and len(axes) != 1:
        raise ValueError(f"ddg.norm: a vector {p}-norm takes one axis, got {axis}")
    p = float(p)
    a = E.abs(x)
    if p == float("inf"):
        return R.amax(a, axis=axes, keepdim=keepdim)
    if p == float("-inf"):
        return R.amin(a, axis=axes, keepdim=keepdim)
    if p == 0:
        return R.sum(E.sign(a), axis=axes, keepdim=keepdim)  # the count of nonzeros; gradient 0, as Paddle
    if p == 2:
        return E.sqrt(R.sum(E.square(x), axis=axes, keepdim=keepdim))
    if p == 1:
        return R.sum(a, axis=axes, keepdim=keepdim)
    return E.pow(R.sum(E.pow(a, p), axis=axes, keepdim=keepdim), 1.0 / p)


def addmm(input, x, y, beta=1.0, alpha=1.0, name=None):  # noqa: A002
    """``beta * input + alpha * (x @ y)``."""
    if x.ndim != 2 or y.ndim != 2:
        raise ValueError(f"ddg.addmm: x and y must be 2-D, got shapes {x.shape} and {y.shape}")
    return E.add(E.multiply(input, beta), E.multiply(L.matmul(x, y), alpha))


def mv(x, vec, name=None):
    if x.ndim != 2 or vec.ndim != 1:
        raise ValueError(f"ddg.mv: needs a matrix and a vector, got shapes {x.shape} and {vec.shape}")
    return L.matmul(x, vec)


def inner(x, y, name=None):
    """Sum over the last axes of both: ``x[..., k] * y[..., k]``."""
    if x.ndim == 0 or y.ndim == 0:
        return E.multiply(x, y)
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"ddg.inner: last dimensions differ: shapes {x.shape} and {y.shape}")
    k = x.shape[-1]
    out = L.matmul(M.reshape(x, [-1, k]), M.reshape(y, [-1, k]), transpose_y=True)
    return M.reshape(out, x.shape[:-1] + y.shape[:-1])


def tensordot(x, y, axes=2, name=None):
    """Contract ``x``'s axes ``axes[0]`` with ``y``'s ``axes[1]`` (an int n: the last n of
    ``x`` with the first n of ``y``)."""
    if isinstance(axes, Tensor):
        axes = axes.tolist()
    if isinstance(axes, int):
        ax, ay = list(range(x.ndim - axes, x.ndim)), list(range(axes))
    else:
        axes = list(axes)
        if len(axes) == 1:
            axes = [axes[0], axes[0]]
        ax, ay = axes
        ax = [ax] if isinstance(ax, int) else list(ax)
        ay = [ay] if isinstance(ay, int) else list(ay)
        n = _b.max(len(ax), len(ay))
        ax, ay = (ax + ay[len(ax):])[:n], (ay + ax[len(ay):])[:n]
    ax = [a % x.ndim for a in ax]
    ay = [a % y.ndim for a in ay]
    for a, b in zip(ax, ay):
        if x.shape[a] != y.shape[b]:
            raise ValueError(f"ddg.tensordot: axis {a} of x (shape {x.shape}) and axis {b} of y "
                             f"(shape {y.shape}) differ in size")
    fx = [a for a in range(x.ndim) if a not in ax]
    fy = [b for b in range(y.ndim) if b not in ay]
    k = int(np.prod([x.shape[a] for a in ax])) if ax else 1
    xm = M.reshape(M.transpose(x, fx + ax), [-1, k])
    ym = M.reshape(M.transpose(y, ay + fy), [k, -1])
    return M.reshape(L.matmul(xm, ym), [x.shape[a] for a in fx] + [y.shape[b] for b in fy])


def cross(x, y, axis=9, name=None):
    """Cross product along ``axis`` (9, Paddle's default, means the first axis of size 3)."""
    if x.shape != y.shape:
        raise ValueError(f"ddg.cross: shapes differ: {x.shape} and {y.shape}")
    if axis == 9:
        axis = next((i for i, n in enumerate(x.shape) if n == 3), None)
        if axis is None:
            raise ValueError(f"ddg.cross: no axis of size 3 in shape {x.shape}")
    axis = normalize_axis(axis, x.ndim, "cross")
    if x.shape[axis] != 3:
        raise ValueError(f"ddg.cross: axis {axis} of shape {x.shape} must have size 3")
    i1 = _const([1, 2, 0], x, "int64")
    i2 = _const([2, 0, 1], x, "int64")
    sel = lambda t, i: M.index_select(t, i, axis)  # noqa: E731
    return E.subtract(E.multiply(sel(x, i1), sel(y, i2)), E.multiply(sel(x, i2), sel(y, i1)))


def _pnorm(d, p, axis, keepdim=False):
    p = float(p)
    if p == 0:
        return R.sum(E.cast(G.not_equal(d, 0), d.dtype), axis=axis, keepdim=keepdim)
    if p == np.inf:
        return R.max(E.abs(d), axis=axis, keepdim=keepdim)
    if p == -np.inf:
        return R.min(E.abs(d), axis=axis, keepdim=keepdim)
    if p == 2:
        return E.sqrt(R.sum(E.square(d), axis=axis, keepdim=keepdim))
    if p == 1:
        return R.sum(E.abs(d), axis=axis, keepdim=keepdim)
    return E.pow(R.sum(E.pow(E.abs(d), p), axis=axis, keepdim=keepdim), 1.0 / p)


def dist(x, y, p=2, name=None):
    """The p-norm of ``x - y`` over all elements (broadcast)."""
    return _pnorm(E.subtract(x, y), p, None)


def cdist(x, y, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary", name=None):
    """Pairwise p-norm distances between the rows of ``x`` [.., P, M] and ``y`` [.., R, M]."""
    if x.ndim < 2 or y.ndim < 2 or x.shape[-1] != y.shape[-1]:
        raise ValueError(f"ddg.cdist: needs [..., P, M] and [..., R, M], got shapes {x.shape} and {y.shape}")
    d = E.subtract(M.unsqueeze(x, -2), M.unsqueeze(y, -3))
    return _pnorm(d, p, -1)


def renorm(x, p, axis, max_norm):
    """Each slice along ``axis`` whose p-norm exceeds ``max_norm`` scaled down to it."""
    axis = normalize_axis(axis, x.ndim, "renorm")
    rest = [a for a in range(x.ndim) if a != axis]
    norm = _pnorm(x, p, rest, keepdim=True)
    factor = E.where(G.greater_than(norm, max_norm), E.divide(max_norm, E.add(norm, 1e-7)),
                     _const(1, x, x._data.dtype))
    return E.multiply(x, factor)


def vector_norm(x, p=2.0, axis=None, keepdim=False, name=None):
    """The vector p-norm over ``axis`` (an int, a list of axes, or all of them when None)."""
    axes = list(range(x.ndim)) if axis is None else ([axis] if isinstance(axis, int) else list(axis))
    a = E.abs(x)
    p = float(p)
    if p == float("inf"):
        return R.amax(a, axis=axes, keepdim=keepdim)
    if p == float("-inf"):
        return R.amin(a, axis=axes, keepdim=keepdim)
    if p == 0:
        return R.sum(E.sign(a), axis=axes, keepdim=keepdim)
    if p == 2:
        return E.sqrt(R.sum(E.square(x), axis=axes, keepdim=keepdim))
    if p == 1:
        return R.sum(a, axis=axes, keepdim=keepdim)
    return E.pow(R.sum(E.pow(a, p), axis=axes, keepdim=keepdim), 1.0 / p)


def matrix_power(x, n, name=None):
    """``x`` multiplied by itself ``n`` times (powers of the inverse for negative ``n``,
    the identity for 0)."""
    n = int(n)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"ddg.linalg.matrix_power: needs square matrices, got shape {x.shape}")
    if n == 0:
        xp = backend.get_array_module(x._data)
        return M.broadcast_to(Tensor._wrap(xp.eye(x.shape[-1], dtype=x.dtype)), x.shape)
    base = L.inverse(x) if n < 0 else x
    out = base
    for _ in range(abs(n) - 1):
        out = L.matmul(out, base)
    return out


def multi_dot(x, name=None):
    """``x[0] @ x[1] @ ...`` (left to right)."""
    x = list(x)
    if len(x) < 2:
        raise ValueError(f"ddg.linalg.multi_dot: needs at least 2 tensors, got {len(x)}")
    out = x[0]
    for t in x[1:]:
        out = L.matmul(out, t)
    return out


def cholesky_solve(x, y, upper=False, name=None):
    """The solution ``X`` of ``A X = x`` given ``y``, the Cholesky factor of ``A`` (lower, or
    upper with ``upper=True``)."""
    low = M.transpose(y, list(range(y.ndim - 2)) + [y.ndim - 1, y.ndim - 2]) if upper else y
    a = L.matmul(low, low, transpose_y=True)
    return L.solve(a, x)
