"""Elementwise composites: scaling, sums of many tensors, angle conversion, ``hypot``,
``lerp``, ``logit``, ``heaviside``, ``fmax``/``fmin``, ``ldexp``/``frexp``, integer ``gcd``/``lcm``
and ``multigammaln``."""
import numpy as np

from ...tensor.dtypes import finfo as _dtype_finfo
from ...tensor.tensor import Tensor
from ..ops import elementwise as E
from ..ops import logic as G
from ..ops import movement as M
from ..ops import special as SP
from ._common import _const, _detached, _nograd, _xp


def scale(x, scale=1.0, bias=0.0, bias_after_scale=True, act=None, name=None):
    """``scale * x + bias`` (or ``scale * (x + bias)``), then the activation ``act``."""
    s = scale.item() if isinstance(scale, Tensor) else scale
    out = E.add(E.multiply(x, s), bias) if bias_after_scale else E.multiply(E.add(x, bias), s)
    if act is not None:
        out = getattr(E, act)(out)
    return out


def add_n(inputs, name=None):
    """The elementwise sum of a list of tensors."""
    if isinstance(inputs, Tensor):
        return M.clone(inputs)
    inputs = list(inputs)
    if not inputs:
        raise ValueError("ddg.add_n: needs at least one tensor")
    out = inputs[0]
    for t in inputs[1:]:
        out = E.add(out, t)
    return out if len(inputs) > 1 else M.clone(out)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None, name=None):
    """nan -> ``nan``, +inf -> ``posinf`` (default the dtype's largest), -inf -> ``neginf``
    (default the lowest); the gradient is 1 at the finite values, 0 at the replaced ones."""
    if x._data.dtype.kind not in "fcV":
        return M.clone(x)
    info = _dtype_finfo(x._data.dtype)
    hi = float(info.max) if posinf is None else float(posinf)
    lo = float(info.min) if neginf is None else float(neginf)
    out = E.where(G.isnan(x), float(nan), x)
    out = E.where(G.equal(x, float("inf")), hi, out)
    return E.where(G.equal(x, float("-inf")), lo, out)


def deg2rad(x, name=None):
    return E.multiply(E._int_to_float(x), np.pi / 180.0)


def rad2deg(x, name=None):
    return E.multiply(E._int_to_float(x), 180.0 / np.pi)


def frac(x, name=None):
    return E.subtract(x, E.trunc(x))


def hypot(x, y, name=None):
    return E.sqrt(E.add(E.square(x), E.square(y)))


def lerp(x, y, weight, name=None):
    return E.add(x, E.multiply(weight, E.subtract(y, x)))


def logaddexp(x, y, name=None):
    x, y = E._int_to_float(x), E._int_to_float(y)
    m = _detached(E.maximum(x, y))
    return E.add(m, E.log(E.add(E.exp(E.subtract(x, m)), E.exp(E.subtract(y, m)))))


def logit(x, eps=None, name=None):
    if eps:
        x = E.clip(x, eps, 1.0 - eps)
    return E.log(E.divide(x, E.subtract(1.0, x)))


def stanh(x, scale_a=0.67, scale_b=1.7159, name=None):
    return E.multiply(E.tanh(E.multiply(x, scale_a)), scale_b)


def sgn(x, name=None):
    return E.sign(x)


def heaviside(x, y, name=None):
    """0 where ``x < 0``, 1 where ``x > 0``, ``y`` where ``x == 0``."""
    one = E.cast(G.greater_than(x, 0), y.dtype)
    return E.where(G.equal(x, 0), y, E.add(E.multiply(y, 0.0), one))


def fmax(x, y, name=None):
    """The larger of the two, ignoring NaN (NaN only where both are)."""
    m = E.maximum(x, y)
    return E.where(G.isnan(x), y, E.where(G.isnan(y), x, m))


def fmin(x, y, name=None):
    m = E.minimum(x, y)
    return E.where(G.isnan(x), y, E.where(G.isnan(y), x, m))


def ldexp(x, y, name=None):
    """``x * 2 ** y`` (``y`` an integer tensor)."""
    if isinstance(y, Tensor) and y.dtype.kind not in "iu":
        raise TypeError(f"ddg.ldexp: y must be an integer tensor, got {y.dtype}")
    x = E._int_to_float(x)
    yy = y._data if isinstance(y, Tensor) else y
    return E.multiply(x, _const(_xp(x).exp2(_xp(x).asarray(yy, dtype=x._data.dtype)), x))


def frexp(x, name=None):
    """``(mantissa, exponent)`` with ``x = mantissa * 2 ** exponent``, ``0.5 <= |mantissa| < 1``;
    both in ``x``'s dtype, the gradient flowing through the mantissa."""
    xp = _xp(x)
    _, e = xp.frexp(x._data)
    e = e.astype(x._data.dtype)
    return E.multiply(x, _nograd(xp.exp2(-e))), _nograd(e)


def nextafter(x, y, name=None):
    return _nograd(_xp(x).nextafter(x._data, y._data))


def _int_binary(op):
    def fn(x, y, name=None):
        for t in (x, y):
            if isinstance(t, Tensor) and t.dtype.kind not in "iu":
                raise TypeError(f"ddg.{op}: needs integer tensors, got {t.dtype}")
        xp = _xp(x)
        yy = y._data if isinstance(y, Tensor) else y
        return _nograd(getattr(xp, op)(x._data, yy))
    fn.__name__ = op
    return fn


gcd = _int_binary("gcd")


lcm = _int_binary("lcm")


def atan2(x, y, name=None):
    """``arctan(x / y)`` in the quadrant of the point (y, x) (numpy's ``arctan2(x, y)``); integer
    inputs give float64, as in Paddle."""
    x, y = E._pair(x, y, "atan2")
    if x._data.dtype.kind != "f":
        x, y = E.cast(x, "float64"), E.cast(y, "float64")
    return SP.atan2(x, y)


def multigammaln(x, p, name=None):
    """The log of the multivariate gamma function of dimension ``p``."""
    if int(p) != p or p < 1:
        raise ValueError(f"ddg.multigammaln: p must be a positive integer, got {p}")
    out = SP.lgamma(x)
    for j in range(1, int(p)):
        out = E.add(out, SP.lgamma(E.subtract(x, j / 2.0)))
    return E.add(out, p * (p - 1) / 4.0 * np.log(np.pi))


def increment(x, value=1.0, name=None):
    """``x + value`` for a one-element tensor."""
    if x.size != 1:
        raise ValueError(f"ddg.increment: x must have exactly one element, got shape {x.shape}")
    return E.add(x, value)
