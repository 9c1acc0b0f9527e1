"""Tensor-level composites: functions built from the primitives of several op
families (``ddg.autograd.ops.*``), so that no primitive file has to import another.

Their gradients come from the primitives they call; none of them is a Function.
"""
import builtins as _b

from ..tensor.tensor import Tensor
from .axes import normalize_axes
from .ops import elementwise as E
from .ops import linalg as L
from .ops import logic as G
from .ops import movement as M
from .ops import reduce as R


# -- statistics --------------------------------------------------------------------------
def var(x, axis=None, unbiased=True, keepdim=False, name=None):
    """Mean of squared deviations, times n/(n-1) when unbiased."""
    axes = list(normalize_axes(axis, x._data.ndim, "var"))
    n = 1
    for a in axes:
        n *= x._data.shape[a]
    d = E.subtract(x, R.mean(x, axis=axes, keepdim=True))
    v = R.mean(E.square(d), axis=axes, keepdim=keepdim)
    if unbiased:
        v = E.multiply(v, n / _b.max(n - 1, 1))
    return v


def std(x, axis=None, unbiased=True, keepdim=False, name=None):
    return E.sqrt(var(x, axis, unbiased, keepdim))


def count_nonzero(x, axis=None, keepdim=False, name=None):
    return R.sum(G.not_equal(x, 0), axis=axis, keepdim=keepdim)


# -- products ------------------------------------------------------------------------------
def dot(x, y, name=None):
    """Inner product of vectors (row-wise for 2-D inputs, as in Paddle)."""
    if x.ndim == 1 and y.ndim == 1:
        return L.matmul(x, y)
    return R.sum(E.multiply(x, y), axis=-1)


def outer(x, y, name=None):
    return L.matmul(M.reshape(x, [-1, 1]), M.reshape(y, [1, -1]))


def t(input, name=None):  # noqa: A002
    if input.ndim > 2:
        raise ValueError(f"ddg.t: needs a tensor with at most 2 dimensions, got shape {input.shape}")
    if input.ndim < 2:
        return input
    return M.transpose(input, [1, 0])


# -- selection and scaling -------------------------------------------------------------------
def masked_fill(x, mask, value, name=None):
    return E.where(mask, value, x)


def scale(x, scale=1.0, bias=0.0, bias_after_scale=True, act=None, name=None):
    """``scale * x + bias`` (or ``scale * (x + bias)``), then the activation ``act``."""
    s = scale.item() if isinstance(scale, Tensor) else scale
    out = E.add(E.multiply(x, s), bias) if bias_after_scale else E.multiply(E.add(x, bias), s)
    if act is not None:
        out = getattr(E, act)(out)
    return out
