"""Activations as single ops: one node each, instead of a composite of 3-6 nodes that each
cost a pass and a temporary forward and backward.

On numpy (float32/float64; float16/bfloat16 computed in float32) forward and backward are
one compiled pass each (``ddg/tensor/cpu_nn_kernels.py``: ``act_forward`` computes ``f(x)``,
``act_backward`` ``g * f'(x)`` from the saved input). On cupy they are a few whole-array
passes (in place where the temporaries are the op's own): ``fn`` and ``deriv`` below.

Each op keeps its input (and, where backward needs it, one intermediate array such as
GELU's ``Phi(x)``). ``backward`` multiplies the incoming gradient by the derivative;
``backward_graph`` writes the same derivative with ddg ops on the live input, so every order
of derivative is available. The gradients at kinks are Paddle's (each op says which).
float16/bfloat16 inputs are computed in float32 and returned in their dtype.

The array-module pieces (the normal CDF, sigmoid, softplus, clamp) are in
``ddg/tensor/kernels.py``; the compiled float32 polynomials' error bounds are in
``cpu_nn_kernels.py``.
"""
import math

import numpy as np

from ...tensor import backend, gemm
from ...tensor.dtypes import upcast
from ...tensor.kernels import clamp, normal_cdf
from ...tensor.kernels import mask01 as _mask
from ...tensor.kernels import sigmoid as _sigmoid
from ...tensor.kernels import softplus as _softplus
from ..function import Function
from ..higher import const, fit_t, live_input

_SQRT1_2 = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_TANH_K = math.sqrt(2 / math.pi)
_TANH_C = 0.044715


def _kernels():
    from ...tensor import cpu_nn_kernels  # noqa: PLC0415 - imports numba on the first numpy call
    return cpu_nn_kernels


def _dense_like(a):
    """``(a, out)``: ``a`` (copied if it is not dense) and an empty array laid out like it, so
    that both flatten (``ravel("K")``) to views in the same element order."""
    out = np.empty_like(a)
    if out.strides != a.strides:
        a = np.ascontiguousarray(a)
        out = np.empty_like(a)
    return a, out


class _Activation(Function):
    """``out = f(x)``; ``backward``: ``g * f'(x)``. On numpy: the compiled kernels for
    activation ``kind`` (a code's name in ``cpu_nn_kernels``) with ``params()``; on cupy: ``self.fn(xp, a)`` and
    ``self.deriv(xp)`` (an array it may overwrite). ``backward_graph``: ``g * self.deriv_graph(x)``
    with x the live input."""
    save_inputs = True
    kind = None

    def params(self):
        return ()

    def _pvals(self, dt):
        p = tuple(self.params()) + (0.0,) * (3 - len(self.params()))
        return tuple(dt.type(v) for v in p)

    def forward(self, a):
        self.dtype = a.dtype
        a = upcast(a)
        if type(a) is np.ndarray:
            a, out = _dense_like(a)
            self.a = a
            k = _kernels()
            k.act_forward(getattr(k, self.kind), a.ravel("K"), out.ravel("K"), *self._pvals(a.dtype))
            return out
        if a.ndim == 0:   # in-place steps need arrays, not numpy scalars
            a = a.reshape(1)
            self.a = a
            return self.fn(backend.get_array_module(a), a).reshape(())
        self.a = a
        return self.fn(backend.get_array_module(a), a)

    def backward(self, g):
        if type(self.a) is np.ndarray:
            return self._backward_cpu(g)
        if g.ndim == 0:
            g = g.reshape(1)
            return self.backward(g).reshape(())
        d = self.deriv(backend.get_array_module(g))
        if d.dtype == g.dtype and d.shape == g.shape:
            d *= g
            return d
        return (d * g).astype(self.dtype, copy=False)

    def _backward_cpu(self, g):
        a = self.a
        out = np.empty_like(a)
        if g.strides != a.strides or g.dtype != a.dtype or g.shape != a.shape:   # a's layout and dtype
            g2 = np.empty_like(a)
            gemm.copy_into(g2, g)
            g = g2
        k = _kernels()
        k.act_backward(getattr(k, self.kind), a.ravel("K"), g.ravel("K"), out.ravel("K"), *self._pvals(a.dtype))
        return out if out.dtype == self.dtype else out.astype(self.dtype)

    def backward_graph(self, g):
        x = live_input(self, 0, self.a)
        return g * self.deriv_graph(x)

    def _mask(self, m):
        return const(backend.get_array_module(self.a).asarray(m).astype(self.a.dtype))


class Gelu(_Activation):
    """``x * Phi(x)`` (exact, Phi the normal CDF) or the tanh approximation
    ``0.5 x (1 + tanh(k (x + 0.044715 x^3)))``."""

    def __init__(self, approximate=False):
        self.approximate = bool(approximate)
        self.kind = "GELU_TANH" if self.approximate else "GELU"

    def fn(self, xp, a):
        dt = a.dtype.type
        if self.approximate:
            u = a * a
            u *= dt(_TANH_C)
            u += 1
            u *= a
            u *= dt(_TANH_K)
            xp.tanh(u, out=u)
            self.t = u                     # tanh(...)
            out = u + 1
            out *= a
            out *= dt(0.5)
            return out
        self.t = normal_cdf(xp, a)        # Phi(x)
        return a * self.t

    def deriv(self, xp):
        a, t = self.a, self.t
        dt = a.dtype.type
        if self.approximate:
            # 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3c x^2)
            d = a * a
            d *= dt(3 * _TANH_C)
            d += 1
            d *= a
            d *= dt(0.5 * _TANH_K)
            d *= 1 - t * t
            d += dt(0.5) * t
            d += dt(0.5)
            return d
        # Phi(x) + x phi(x) = Phi(x) + x exp(-x^2 / 2) / sqrt(2 pi)
        d = a * a
        d *= dt(-0.5)
        xp.exp(d, out=d)
        d *= a
        d *= dt(_INV_SQRT_2PI)
        d += t
        return d

    def deriv_graph(self, x):
        if self.approximate:
            t = (_TANH_K * (x + _TANH_C * x * x * x)).tanh()
            return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _TANH_K * (1 + 3 * _TANH_C * x * x)
        return 0.5 * (1 + (x * _SQRT1_2).erf()) + x * (-0.5 * x * x).exp() * _INV_SQRT_2PI


class Silu(_Activation):
    """``x * sigmoid(x)``; derivative ``s (1 + x (1 - s))``."""
    kind = "SILU"

    def fn(self, xp, a):
        self.s = _sigmoid(xp, a)
        return a * self.s

    def deriv(self, xp):
        s = self.s
        d = 1 - s
        d *= self.a
        d += 1
        d *= s
        return d

    def deriv_graph(self, x):
        s = x.sigmoid()
        return s * (1 + x * (1 - s))


class Mish(_Activation):
    """``x * tanh(softplus(x))``; derivative ``t + x (1 - t^2) sigmoid(x)``."""
    kind = "MISH"

    def fn(self, xp, a):
        t = _softplus(xp, a)
        xp.tanh(t, out=t)
        self.t = t
        return a * t

    def deriv(self, xp):
        t = self.t
        d = _sigmoid(xp, self.a)
        d *= self.a
        d *= 1 - t * t
        d += t
        return d

    def deriv_graph(self, x):
        t = Softplus(1.0, 20.0)(x).tanh()
        return t + x * (1 - t * t) * x.sigmoid()


class LeakyRelu(_Activation):
    """``x`` where ``x >= 0``, else ``slope * x`` (gradient 1 at 0, as Paddle)."""

    kind = "LEAKY"

    def __init__(self, slope):
        self.slope = float(slope)

    def params(self):
        return (self.slope,)

    def fn(self, xp, a):
        s = a.dtype.type(self.slope)
        if 0 <= self.slope <= 1:
            return xp.maximum(a, a * s)
        out = clamp(xp, a, hi=0)                 # x + (slope - 1) min(x, 0)
        out *= a.dtype.type(self.slope - 1)
        out += a
        return out

    def deriv(self, xp):
        # 1 + (slope - 1) [x < 0]
        d = _mask(self.a < 0, self.a.dtype)
        d *= self.a.dtype.type(self.slope - 1)
        d += 1
        return d

    def deriv_graph(self, x):
        return self._mask(self.deriv(backend.get_array_module(self.a)))


class Elu(_Activation):
    """``scale * x`` where ``x > 0``, else ``scale * alpha * (exp(x / c) - 1)``: ELU (scale 1,
    c 1), SELU (c 1), CELU (scale 1, c alpha). Gradient at 0 is the left branch's slope
    ``scale * alpha / c``, as Paddle."""

    kind = "ELU"

    def __init__(self, alpha, scale=1.0, c=1.0):
        self.alpha, self.scale, self.c = float(alpha), float(scale), float(c)

    def params(self):
        return self.alpha, self.scale, 1 / self.c

    def fn(self, xp, a):
        dt = a.dtype.type
        neg = clamp(xp, a, hi=0)
        if self.c != 1:
            neg *= dt(1 / self.c)
        xp.expm1(neg, out=neg)
        neg *= dt(self.scale * self.alpha)
        pos = clamp(xp, a, lo=0)             # one of the two terms is 0 everywhere
        if self.scale != 1:
            pos *= dt(self.scale)
        neg += pos
        return neg

    def deriv(self, xp):
        a = self.a
        dt = a.dtype.type
        d = clamp(xp, a, hi=0)
        if self.c != 1:
            d *= dt(1 / self.c)
        xp.exp(d, out=d)
        left = self.scale * self.alpha / self.c   # d's value where x > 0, replaced by scale there
        d *= dt(left)
        m = _mask(a > 0, a.dtype)
        m *= dt(self.scale - left)
        d += m
        return d

    def deriv_graph(self, x):
        pos = self._mask(self.a > 0)
        left = (x.minimum(0.0) * (1 / self.c)).exp() * (self.scale * self.alpha / self.c)
        return pos * self.scale + (1 - pos) * left


class Softplus(_Activation):
    """``log(1 + exp(beta x)) / beta``, and ``x`` where ``beta x > threshold``."""

    kind = "SOFTPLUS"

    def __init__(self, beta, threshold):
        self.beta, self.threshold = float(beta), float(threshold)

    def params(self):
        return self.beta, self.threshold, 1 / self.beta

    def fn(self, xp, a):
        dt = a.dtype.type
        bx = a * dt(self.beta) if self.beta != 1 else a
        out = _softplus(xp, bx)
        if self.beta != 1:
            out *= dt(1 / self.beta)
        lin = bx > self.threshold                # x itself there, as Paddle
        if lin.any():
            out[lin] = a[lin]
        return out

    def deriv(self, xp):
        a = self.a
        bx = a * a.dtype.type(self.beta) if self.beta != 1 else a
        d = _sigmoid(xp, bx)
        lin = bx > self.threshold
        if lin.any():
            d[lin] = 1
        return d

    def deriv_graph(self, x):
        lin = self._mask(self.a * self.beta > self.threshold)
        return lin + (1 - lin) * (x * self.beta).sigmoid()


class LogSigmoid(_Activation):
    """``log(sigmoid(x)) = -softplus(-x)``; derivative ``sigmoid(-x)``."""
    kind = "LOGSIGMOID"

    def fn(self, xp, a):
        out = _softplus(xp, -a)
        xp.negative(out, out=out)
        return out

    def deriv(self, xp):
        return _sigmoid(xp, -self.a)

    def deriv_graph(self, x):
        return (-x).sigmoid()


class Hardswish(_Activation):
    """``x * clip(x + 3, 0, 6) / 6``; gradient 0 at -3 and 1 at 3, as Paddle."""
    kind = "HARDSWISH"

    def fn(self, xp, a):
        dt = a.dtype.type
        out = a + dt(3)
        xp.clip(out, dt(0), dt(6), out=out)
        out *= a
        out *= dt(1 / 6)
        return out

    def deriv(self, xp):
        a = self.a
        dt = a.dtype.type
        # (2x + 3) / 6 strictly inside (-3, 3), 0 at and below -3, 1 at and above 3
        d = a * dt(1 / 3)
        d += dt(0.5)
        d *= _mask((a > -3) & (a < 3), a.dtype)
        d += _mask(a >= 3, a.dtype)
        return d

    def deriv_graph(self, x):
        mid = self._mask((self.a > -3) & (self.a < 3))
        return mid * (x * (1 / 3) + 0.5) + self._mask(self.a >= 3)


class Hardsigmoid(_Activation):
    """``clip(slope x + offset, 0, 1)``; gradient ``slope`` strictly inside, 0 at the kinks
    (as Paddle)."""

    kind = "HARDSIGMOID"

    def __init__(self, slope, offset):
        self.slope, self.offset = float(slope), float(offset)

    def params(self):
        return self.slope, self.offset

    def fn(self, xp, a):
        dt = a.dtype.type
        out = a * dt(self.slope)
        out += dt(self.offset)
        xp.clip(out, dt(0), dt(1), out=out)
        return out

    def _inside(self):
        y = self.a * self.a.dtype.type(self.slope) + self.a.dtype.type(self.offset)
        return (y > 0) & (y < 1)

    def deriv(self, xp):
        return self._inside().astype(self.a.dtype) * self.a.dtype.type(self.slope)

    def deriv_graph(self, x):
        return self._mask(self._inside()) * self.slope


class Tanhshrink(_Activation):
    """``x - tanh(x)``; derivative ``tanh(x)^2``."""
    kind = "TANHSHRINK"

    def fn(self, xp, a):
        self.t = xp.tanh(a)
        return a - self.t

    def deriv(self, xp):
        return self.t * self.t

    def deriv_graph(self, x):
        t = x.tanh()
        return t * t


class Softsign(_Activation):
    """``x / (1 + |x|)``; derivative ``1 / (1 + |x|)^2``."""
    kind = "SOFTSIGN"

    def fn(self, xp, a):
        d = xp.abs(a)
        d += 1
        return a / d

    def deriv(self, xp):
        d = xp.abs(self.a)
        d += 1
        d *= d
        return xp.reciprocal(d, out=d)

    def deriv_graph(self, x):
        d = 1 + x.abs()
        return 1 / (d * d)


class _Piecewise(_Activation):
    """Piecewise-linear activations: the derivative is a mask (or 0/1 values) of the input."""

    def deriv(self, xp):
        return self.mask().astype(self.a.dtype)

    def backward(self, g):
        if type(self.a) is np.ndarray:
            return self._backward_cpu(g)
        if g.ndim == 0:
            return (g * self.mask().reshape(())).astype(self.dtype, copy=False)
        return (g * self.mask()).astype(self.dtype, copy=False)

    def deriv_graph(self, x):
        return self._mask(self.mask())


class Softshrink(_Piecewise):
    """``x - t`` above ``t``, ``x + t`` below ``-t``, 0 between (gradient 0 at ``±t``)."""
    kind = "SOFTSHRINK"

    def __init__(self, threshold):
        self.threshold = float(threshold)

    def params(self):
        return (self.threshold,)

    def fn(self, xp, a):
        t = a.dtype.type(self.threshold)
        out = xp.clip(a, -t, t)
        xp.subtract(a, out, out=out)
        return out

    def mask(self):
        return xp_abs(self.a) > self.threshold


class Hardshrink(_Piecewise):
    """``x`` where ``|x| >= threshold`` (Paddle keeps the bounds), else 0."""
    kind = "HARDSHRINK"

    def __init__(self, threshold):
        self.threshold = float(threshold)

    def params(self):
        return (self.threshold,)

    def fn(self, xp, a):
        return a * _mask(xp.abs(a) >= self.threshold, a.dtype)

    def mask(self):
        return xp_abs(self.a) >= self.threshold


class ThresholdedRelu(_Piecewise):
    """``x`` where ``x > threshold``, else ``value``."""

    kind = "THRESHOLDED"

    def __init__(self, threshold, value):
        self.threshold, self.value = float(threshold), float(value)

    def params(self):
        return self.threshold, self.value

    def fn(self, xp, a):
        m = _mask(a > self.threshold, a.dtype)
        out = a * m
        if self.value:
            m -= 1
            m *= a.dtype.type(-self.value)
            out += m
        return out

    def mask(self):
        return self.a > self.threshold


def _c_order(a):
    """``a`` C-contiguous, copied only if it is not (``np.ascontiguousarray`` would make a 0-d
    array 1-d)."""
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def xp_abs(a):
    return backend.get_array_module(a).abs(a)


class RRelu(Function):
    """Leaky ReLU with a slope per element, ``lower + (upper - lower) * u`` for ``u`` an array of
    uniform [0, 1) draws of the input's shape and dtype (a constant: no gradient flows to it):
    ``x`` where ``x >= 0``, else ``slope * x``. The op keeps the derivative (1 or the slope)
    and multiplies the gradient by it. On numpy float32/float64 the forward is one compiled
    pass that writes the output and turns ``u`` (owned by the op) into the derivative."""

    save_inputs = False

    def __init__(self, u, lower, upper):
        self.u, self.lower, self.upper = u, float(lower), float(upper)

    def forward(self, a):
        u, self.u = self.u, None
        if u.shape != a.shape or u.dtype != a.dtype:
            raise ValueError(f"ddg rrelu: the uniform draws must have the input's shape and dtype, got "
                             f"{u.shape} {u.dtype} for an input {a.shape} {a.dtype}")
        dt = a.dtype.type
        if type(a) is np.ndarray and a.dtype in (np.float32, np.float64):
            a, u = _c_order(a), _c_order(u)
            out = np.empty_like(a)
            _kernels().rrelu_forward(a.ravel(), u.ravel(), out.ravel(), dt(self.lower), dt(self.upper - self.lower))
            self.d = u
            return out
        xp = backend.get_array_module(a)
        u = u * dt(self.upper - self.lower) + dt(self.lower)
        self.d = xp.where(a >= 0, dt(1), u)
        return a * self.d

    def backward(self, g):
        d = self.d
        if g.strides == d.strides and g.dtype == d.dtype:
            return np.multiply(g, d, out=np.empty_like(d)) if type(d) is np.ndarray else g * d
        return (g * d).astype(d.dtype, copy=False)

    def backward_graph(self, g):
        return g * const(self.d)


class PRelu(Function):
    """PReLU on numpy float32/float64 as one compiled pass each way: ``x`` where ``x > 0``,
    else ``w[c] x`` with ``c`` the index along ``axis`` (``axis`` None: one weight for all);
    gradient ``w`` at 0, as Paddle. Inputs ``x`` and ``w`` [C] of one dtype; backward gives
    ``x``'s gradient and ``w``'s (a float64 sum per channel, returned in ``w``'s dtype)."""

    def __init__(self, axis):
        self.axis = axis

    def _view3(self, a):
        s = a.shape
        if self.axis is None:
            return a.reshape(1, 1, -1)
        ax = self.axis
        return a.reshape(math.prod(s[:ax]), s[ax], math.prod(s[ax + 1:]))

    def forward(self, x, w):
        if self.axis is not None and (x.ndim <= self.axis or x.shape[self.axis] != w.size):
            raise ValueError(f"ddg prelu: {w.size} weights for an input of shape {x.shape} "
                             f"(channel axis {self.axis})")
        if type(x) is not np.ndarray or x.dtype not in (np.float32, np.float64) or w.dtype != x.dtype:
            raise TypeError(f"ddg prelu: the compiled op needs numpy float32/float64 x and w of one dtype, "
                            f"got {type(x).__name__} {x.dtype} and {w.dtype}")
        x = _c_order(x)
        self.x, self.w = x, _c_order(w.reshape(-1))
        out = np.empty_like(x)
        _kernels().prelu_forward(self._view3(x), self.w, self._view3(out))
        return out

    def backward(self, g):
        x = self.x
        if g.strides != x.strides or g.dtype != x.dtype or g.shape != x.shape:
            g2 = np.empty_like(x)
            gemm.copy_into(g2, g)
            g = g2
        gx = np.empty_like(x)
        gw = np.zeros(self.w.size, np.float64)
        _kernels().prelu_backward(self._view3(x), self._view3(g), self.w, self._view3(gx), gw)
        return gx, gw.astype(self.w.dtype)

    def backward_graph(self, g):
        x = live_input(self, 0, self.x)
        w = live_input(self, 1, self.w)
        shape = [1] * self.x.ndim
        if self.axis is not None:
            shape[self.axis] = self.w.size
        m = const((self.x > 0).astype(self.x.dtype))
        wb = w.reshape(shape) if self.axis is not None else w.reshape([1] * self.x.ndim)
        gx = g * (m + (1 - m) * wb)
        gw = fit_t(g * x * (1 - m), tuple(shape), self.x.dtype).reshape([self.w.size])
        return gx, gw


class Glu(Function):
    """Gated linear unit along ``axis``: ``a * sigmoid(b)`` with ``a``, ``b`` the two halves of
    the input (the axis has an even size). Gradients ``g s`` for ``a`` and ``g a s (1 - s)`` for
    ``b`` (``s = sigmoid(b)``). On numpy float32/float64 one compiled pass each way over the
    input viewed as [before, 2, half * after] (``glu_pass``; float32 with
    the kernels' exp polynomial); on cupy a few whole-array passes keeping ``s``. 2-byte floats
    are computed in float32."""
    save_inputs = True

    def __init__(self, axis):
        self.axis = axis

    def _view3(self, a):
        ax = self.axis
        return a.reshape(math.prod(a.shape[:ax]), 2, -1)

    def forward(self, x):
        ax = self.axis
        if x.shape[ax] % 2:
            raise ValueError(f"ddg glu: axis {ax} of shape {list(x.shape)} must have an even size")
        self.dtype = x.dtype
        a = upcast(x)
        oshape = x.shape[:ax] + (x.shape[ax] // 2,) + x.shape[ax + 1:]
        if type(a) is np.ndarray and a.size:
            a = _c_order(a)
            self.x = a
            out = np.empty(oshape, a.dtype)
            v = self._view3(a)
            _kernels().glu_pass(v, out.reshape(v.shape[0], -1), out.reshape(v.shape[0], 1, -1), a.dtype.type(1),
                                False)
            return out
        xp = backend.get_array_module(a)
        self.x = a
        h, b = xp.split(a, 2, axis=ax)
        self.s = _sigmoid(xp, xp.ascontiguousarray(b)) if b.size else b
        return h * self.s

    def backward(self, g):
        x = self.x
        if type(x) is np.ndarray and x.size:
            g = np.ascontiguousarray(g, dtype=x.dtype)
            gx = np.empty_like(x)
            v = self._view3(x)
            _kernels().glu_pass(v, g.reshape(v.shape[0], -1), self._view3(gx), x.dtype.type(1), True)
        else:
            xp = backend.get_array_module(g)
            h = xp.split(x, 2, axis=self.axis)[0]
            s = self.s
            ga = g * s
            gx = xp.concatenate([ga, ga * h * (1 - s)], axis=self.axis)
        return gx if gx.dtype == self.dtype else gx.astype(self.dtype)

    def backward_graph(self, g):
        x = live_input(self, 0, self.x)
        h, b = x.split(2, self.axis)          # Tensor methods: ops/ files do not import each other
        s = b.sigmoid()
        ga = g * s
        return ga.concat(ga * h * (1 - s), axis=self.axis)
