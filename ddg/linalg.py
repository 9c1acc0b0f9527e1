"""``ddg.linalg`` (Paddle's ``paddle.linalg``): norms, inverse, determinants, solving,
matrix powers and chained products."""
from .autograd.composite import norm
from .autograd.ops import elementwise as _E
from .autograd.ops import linalg as _L
from .autograd.ops import movement as _M
from .autograd.ops import reduce as _R
from .autograd.ops.linalg import cholesky, det, eigvalsh, inverse as inv, matmul, slogdet, solve  # noqa: F401
from .tensor import backend as _backend
from .tensor.tensor import Tensor as _Tensor

__all__ = ["norm", "vector_norm", "inv", "det", "slogdet", "solve", "matrix_power", "multi_dot", "matmul"]


def vector_norm(x, p=2.0, axis=None, keepdim=False, name=None):
    """The vector p-norm over ``axis`` (an int, a list of axes, or all of them when None)."""
    axes = list(range(x.ndim)) if axis is None else ([axis] if isinstance(axis, int) else list(axis))
    a = _E.abs(x)
    p = float(p)
    if p == float("inf"):
        return _R.amax(a, axis=axes, keepdim=keepdim)
    if p == float("-inf"):
        return _R.amin(a, axis=axes, keepdim=keepdim)
    if p == 0:
        return _R.sum(_E.sign(a), axis=axes, keepdim=keepdim)
    if p == 2:
        return _E.sqrt(_R.sum(_E.square(x), axis=axes, keepdim=keepdim))
    if p == 1:
        return _R.sum(a, axis=axes, keepdim=keepdim)
    return _E.pow(_R.sum(_E.pow(a, p), axis=axes, keepdim=keepdim), 1.0 / p)


def matrix_power(x, n, name=None):
    """``x`` multiplied by itself ``n`` times (powers of the inverse for negative ``n``,
    the identity for 0)."""
    n = int(n)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"ddg.linalg.matrix_power: needs square matrices, got shape {x.shape}")
    if n == 0:
        xp = _backend.get_array_module(x._data)
        return _M.broadcast_to(_Tensor._wrap(xp.eye(x.shape[-1], dtype=x.dtype)), x.shape)
    base = inv(x) if n < 0 else x
    out = base
    for _ in range(abs(n) - 1):
        out = _L.matmul(out, base)
    return out


def multi_dot(x, name=None):
    """``x[0] @ x[1] @ ...`` (left to right)."""
    x = list(x)
    if len(x) < 2:
        raise ValueError(f"ddg.linalg.multi_dot: needs at least 2 tensors, got {len(x)}")
    out = x[0]
    for t in x[1:]:
        out = _L.matmul(out, t)
    return out


# the Tensor methods Paddle spells after these functions
_Tensor.matrix_power = matrix_power
_Tensor.multi_dot = lambda self, *others, name=None: multi_dot([self, *others])
_Tensor.solve = solve
_Tensor.cholesky = cholesky
_Tensor.eigvalsh = eigvalsh


def cholesky_solve(x, y, upper=False, name=None):
    """The solution ``X`` of ``A X = x`` given ``y``, the Cholesky factor of ``A`` (lower, or
    upper with ``upper=True``)."""
    low = _M.transpose(y, list(range(y.ndim - 2)) + [y.ndim - 1, y.ndim - 2]) if upper else y
    a = matmul(low, low, transpose_y=True)
    return solve(a, x)


_Tensor.cholesky_solve = cholesky_solve
