"""numba CPU kernels of the neural-network layers that numpy cannot run in one or two
whole-array passes: activations (forward, and backward ``g * f'(x)``; rrelu's and prelu's
their own kernels), normalizations
(statistics, standardization and affine part in one kernel; backward in one), embedding
backward (a scatter-add of rows) and nearest/bilinear upsampling.

Kernels take contiguous numpy float32/float64 arrays only (``ddg.tensor.compiled.kernel``):
cupy arrays keep the ops' array-module code, float16/bfloat16 are computed in float32.

Importing this module imports numba; the ops import it on their first numpy call, so
``import ddg`` stays without numba.

**Few signatures.** Each activation kind is one loop inside one forward and one backward
kernel (selected by an integer code), so the activations compile 2 kernels per dtype, not
2 per activation; each loop is vectorized on its own.

**Transcendentals in float32** are vectorizable polynomials (numba's ``math.exp`` is a scalar
libm call per element without Intel's SVML, which the pip llvmlite lacks; it made SiLU 10x
slower than this):

- ``exp``: Cody-Waite reduction ``x = n ln2 + r``, a degree-7 polynomial of ``r`` (Cephes'
  ``expf``), ``2^n`` built in the exponent bits; relative error < 3e-7 (tested), overflow to
  inf above 88.72, 0 below -86.6 (where exp < 2.5e-38: float32's smallest normals and its
  subnormals are flushed), NaN kept.
- ``log1p`` on [0, 1]: ``2 atanh(y / (2 + y))`` by its odd series to ``s^13``; softplus
  built on it (and exp) is within 1.6e-7 absolute or 2.5e-7 relative of float64 (tested).
- ``tanh``: ``sign(x) (1 - 2 / (exp(2|x|) + 1))``: absolute error < 2.5e-7 (tested).
- the normal CDF ``Phi`` (exact GELU): ``0.5 erfc(|x| / sqrt 2)``, reflected for x > 0, with
  ``erfc(z) = t R(t) exp(-z^2)``, ``t = 1 / (1 + z/2)`` and ``R`` a degree-10 polynomial
  fitted to ``erfcx(z) / t`` (relative error 1.6e-7), so that GELU's derivative
  ``Phi(x) + x exp(-x^2/2) / sqrt(2 pi)`` takes one exponential: absolute error < 3e-7 (tested
  against float64 ``math.erfc``).

float64 takes numba's ``math`` functions (libm accuracy).
"""
import math

import numpy as np
from numba import types
from numba.extending import overload, register_jitable

from .compiled import kernel

f32 = np.float32

# activation codes (one kernel each in _FORWARD / _BACKWARD, below). SIGMOID's and RELU's
# backward kernels read the op's output (passed as ``x``), not its input; RELU has no forward
# kernel (numpy's clip is one pass) and CLIP none either (its backward: the gradient where
# ``p0 <= x <= p1``, or strictly inside when ``p2`` is nonzero).
GELU, GELU_TANH, SILU, MISH, LEAKY, ELU, SOFTPLUS, LOGSIGMOID, HARDSWISH, HARDSIGMOID, TANHSHRINK, SOFTSIGN, \
    SOFTSHRINK, HARDSHRINK, THRESHOLDED, SIGMOID, RELU, CLIP = range(18)

_SQRT1_2 = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_TANH_K = math.sqrt(2 / math.pi)
_TANH_C = 0.044715


# -- scalar helpers: a float32 polynomial, or math's function in float64 ---------------------------
@register_jitable
def _exp32(x):
    lo, hi = f32(-86.6), f32(89.0)
    c = hi if x > hi else x                           # NaN passes both clamps
    c = lo if c < lo else c
    n = np.floor(c * f32(1.4426950408889634) + f32(0.5))
    r = c - n * f32(0.693359375)
    r = r - n * f32(-2.12194440e-4)
    p = f32(1.9875691500e-4)
    p = p * r + f32(1.3981999507e-3)
    p = p * r + f32(8.3334519073e-3)
    p = p * r + f32(4.1665795894e-2)
    p = p * r + f32(1.6666665459e-1)
    p = p * r + f32(5.0000001201e-1)
    p = p * r * r + r + f32(1.0)
    scale = np.int32((np.int32(n) + np.int32(126)) << np.int32(23)).view(np.float32)   # 2^(n-1)
    e = p * f32(2.0) * scale
    return f32(0.0) if x < lo else e


@register_jitable
def _log1p01_32(y):
    # log1p(y) for y in [0, 1]: 2 atanh(s), s = y / (2 + y) in [0, 1/3]
    s = y / (f32(2.0) + y)
    s2 = s * s
    p = f32(2.0 / 13.0)
    p = p * s2 + f32(2.0 / 11.0)
    p = p * s2 + f32(2.0 / 9.0)
    p = p * s2 + f32(2.0 / 7.0)
    p = p * s2 + f32(2.0 / 5.0)
    p = p * s2 + f32(2.0 / 3.0)
    p = p * s2 + f32(2.0)
    return p * s


def _exp(x):
    pass


def _log1p01(y):
    pass


def _tanh(x):
    pass


def _phi_e(x):
    pass


@overload(_exp)
def _ov_exp(x):
    if x == types.float32:
        return lambda x: _exp32(x)
    return lambda x: math.exp(x)


@overload(_log1p01)
def _ov_log1p(y):
    if y == types.float32:
        return lambda y: _log1p01_32(y)
    return lambda y: math.log1p(y)


@register_jitable
def _tanh32(x):
    a = abs(x)
    t = f32(1.0) - f32(2.0) / (_exp32(f32(2.0) * a) + f32(1.0))
    return -t if x < f32(0.0) else t


@overload(_tanh)
def _ov_tanh(x):
    if x == types.float32:
        return lambda x: _tanh32(x)
    return lambda x: math.tanh(x)


# erfc(z) = t R(t) exp(-z^2), t = 1 / (1 + z/2): R a degree-10 polynomial in t, fitted (weighted
# least squares on t in (0, 1]) to erfcx(z) / t; relative error 1.6e-7 evaluated in float32
_ERFC_R = (0.28209479516975094, 0.2820937554048334, 0.2468845360256143, 0.17531640078992283,
           0.09345989358837792, -0.059202301657289444, 0.13215695483094417, -0.4549460181300405,
           0.49367118116097664, -0.23472235694822058, 0.0431931643293807)
_R0, _R1, _R2, _R3, _R4, _R5, _R6, _R7, _R8, _R9, _R10 = (np.float32(c) for c in _ERFC_R)


@register_jitable(inline="always")
def _phi_e32(x):
    # (Phi(x), exp(-x^2 / 2)): Phi(-|x|) = 0.5 erfc(|x| / sqrt 2), the exponential shared
    z = abs(x) * f32(_SQRT1_2)
    t = f32(1.0) / (f32(1.0) + f32(0.5) * z)
    q = _R10
    q = q * t + _R9
    q = q * t + _R8
    q = q * t + _R7
    q = q * t + _R6
    q = q * t + _R5
    q = q * t + _R4
    q = q * t + _R3
    q = q * t + _R2
    q = q * t + _R1
    q = q * t + _R0
    e = _exp32(-z * z)
    h = f32(0.5) * t * q * e                   # Phi(-|x|)
    return (f32(1.0) - h if x > 0 else h), e


@overload(_phi_e, inline="always")
def _ov_phi_e(x):
    if x == types.float32:
        return lambda x: _phi_e32(x)
    return lambda x: (0.5 * math.erfc(-x * _SQRT1_2), math.exp(-0.5 * x * x))


def _as(like, c):
    pass


@overload(_as)
def _ov_as(like, c):
    """The constant ``c`` in the float type of ``like`` (numba would widen float32 arithmetic
    with a Python float or int to float64)."""
    if like == types.float32:
        return lambda like, c: np.float32(c)
    return lambda like, c: np.float64(c)


@register_jitable
def _softplus(x):
    # max(x, 0) + log1p(exp(-|x|))
    return (x if x > 0 else _as(x, 0.0)) + _log1p01(_exp(-abs(x)))


# -- activations ----------------------------------------------------------------------------------
# One kernel per activation and direction: a kernel compiles whole on its first call, so
# one loop per kind behind a branch on ``kind`` compiled every activation's loop (GELU's
# erf, Mish's softplus and tanh, ...) for a ReLU's gradient (~2.5 s of CPU per direction and
# dtype); each compiles alone now, and ``act_forward`` / ``act_backward`` pick it in Python.
@kernel(error_model="numpy")
def _fwd_gelu(x, out, p0, p1, p2):
    n = x.size
    for i in range(n):
        v = x[i]
        out[i] = v * _phi_e(v)[0]


@kernel(error_model="numpy")
def _fwd_gelu_tanh(x, out, p0, p1, p2):
    n = x.size
    one = _as(p0, 1.0)
    half = _as(p0, 0.5)
    k, c = _as(p0, _TANH_K), _as(p0, _TANH_C)
    for i in range(n):
        v = x[i]
        out[i] = half * v * (one + _tanh(k * (v + c * v * v * v)))


@kernel(error_model="numpy")
def _fwd_silu(x, out, p0, p1, p2):
    n = x.size
    one = _as(p0, 1.0)
    for i in range(n):
        v = x[i]
        out[i] = v / (one + _exp(-v))


@kernel(error_model="numpy")
def _fwd_mish(x, out, p0, p1, p2):
    n = x.size
    for i in range(n):
        v = x[i]
        out[i] = v * _tanh(_softplus(v))


@kernel(error_model="numpy")
def _fwd_leaky(x, out, p0, p1, p2):    # p0: slope
    n = x.size
    for i in range(n):
        v = x[i]
        out[i] = v if v >= 0 else v * p0


@kernel(error_model="numpy")
def _fwd_elu(x, out, p0, p1, p2):    # p0: alpha, p1: scale, p2: 1 / c
    n = x.size
    one = _as(p0, 1.0)
    zero = _as(p0, 0.0)
    sa = p0 * p1
    for i in range(n):
        v = x[i]
        e = sa * (_exp((zero if v > zero else v) * p2) - one)
        out[i] = v * p1 if v > 0 else e


@kernel(error_model="numpy")
def _fwd_softplus(x, out, p0, p1, p2):    # p0: beta, p1: threshold, p2: 1 / beta
    n = x.size
    for i in range(n):
        v = x[i]
        bv = v * p0
        out[i] = v if bv > p1 else _softplus(bv) * p2


@kernel(error_model="numpy")
def _fwd_logsigmoid(x, out, p0, p1, p2):
    n = x.size
    for i in range(n):
        out[i] = -_softplus(-x[i])


@kernel(error_model="numpy")
def _fwd_hardswish(x, out, p0, p1, p2):
    n = x.size
    zero = _as(p0, 0.0)
    three = _as(p0, 3.0)
    six = _as(p0, 6.0)
    for i in range(n):
        v = x[i]
        t = v + three
        t = zero if t < zero else t
        t = six if t > six else t
        out[i] = v * t * _as(p0, 1.0 / 6.0)


@kernel(error_model="numpy")
def _fwd_hardsigmoid(x, out, p0, p1, p2):    # p0: slope, p1: offset
    n = x.size
    one = _as(p0, 1.0)
    zero = _as(p0, 0.0)
    for i in range(n):
        t = x[i] * p0 + p1
        t = zero if t < zero else t
        out[i] = one if t > one else t


@kernel(error_model="numpy")
def _fwd_tanhshrink(x, out, p0, p1, p2):
    n = x.size
    for i in range(n):
        v = x[i]
        out[i] = v - _tanh(v)


@kernel(error_model="numpy")
def _fwd_softsign(x, out, p0, p1, p2):
    n = x.size
    one = _as(p0, 1.0)
    for i in range(n):
        v = x[i]
        out[i] = v / (one + abs(v))


@kernel(error_model="numpy")
def _fwd_softshrink(x, out, p0, p1, p2):    # p0: threshold
    n = x.size
    zero = _as(p0, 0.0)
    for i in range(n):
        v = x[i]
        out[i] = zero if abs(v) <= p0 else (v - p0 if v > zero else v + p0)


@kernel(error_model="numpy")
def _fwd_hardshrink(x, out, p0, p1, p2):    # p0: threshold
    n = x.size
    zero = _as(p0, 0.0)
    for i in range(n):
        v = x[i]
        out[i] = zero if abs(v) < p0 else v


@kernel(error_model="numpy")
def _fwd_thresholded(x, out, p0, p1, p2):    # p0: threshold, p1: value
    n = x.size
    for i in range(n):
        v = x[i]
        out[i] = p1 if v <= p0 else v


@kernel(error_model="numpy")
def _fwd_sigmoid(x, out, p0, p1, p2):
    n = x.size
    one = _as(p0, 1.0)
    for i in range(n):
        out[i] = one / (one + _exp(-x[i]))


@kernel(error_model="numpy")
def _bwd_gelu(x, g, out, p0, p1, p2):
    n = x.size
    for i in range(n):
        v = x[i]
        ph, e = _phi_e(v)
        out[i] = g[i] * (ph + v * e * _as(p0, _INV_SQRT_2PI))


@kernel(error_model="numpy")
def _bwd_gelu_tanh(x, g, out, p0, p1, p2):
    n = x.size
    one = _as(p0, 1.0)
    half = _as(p0, 0.5)
    three = _as(p0, 3.0)
    k, c = _as(p0, _TANH_K), _as(p0, _TANH_C)
    for i in range(n):
        v = x[i]
        t = _tanh(k * (v + c * v * v * v))
        out[i] = g[i] * (half * (one + t) + half * v * (one - t * t) * k * (one + three * c * v * v))


@kernel(error_model="numpy")
def _bwd_silu(x, g, out, p0, p1, p2):
    n = x.size
    one = _as(p0, 1.0)
    for i in range(n):
        v = x[i]
        s = one / (one + _exp(-v))
        out[i] = g[i] * (s * (one + v * (one - s)))


@kernel(error_model="numpy")
def _bwd_mish(x, g, out, p0, p1, p2):
    n = x.size
    one = _as(p0, 1.0)
    for i in range(n):
        v = x[i]
        t = _tanh(_softplus(v))
        s = one / (one + _exp(-v))
        out[i] = g[i] * (t + v * (one - t * t) * s)


@kernel(error_model="numpy")
def _bwd_leaky(x, g, out, p0, p1, p2):
    n = x.size
    for i in range(n):
        out[i] = g[i] if x[i] >= 0 else g[i] * p0


@kernel(error_model="numpy")
def _bwd_elu(x, g, out, p0, p1, p2):    # gradient at 0: the left branch's scale * alpha / c
    n = x.size
    zero = _as(p0, 0.0)
    sa = p0 * p1 * p2
    for i in range(n):
        v = x[i]
        d = sa * _exp((v if v < 0 else zero) * p2)
        out[i] = g[i] * (p1 if v > 0 else d)


@kernel(error_model="numpy")
def _bwd_softplus(x, g, out, p0, p1, p2):
    n = x.size
    one = _as(p0, 1.0)
    for i in range(n):
        bv = x[i] * p0
        out[i] = g[i] if bv > p1 else g[i] / (one + _exp(-bv))


@kernel(error_model="numpy")
def _bwd_logsigmoid(x, g, out, p0, p1, p2):
    n = x.size
    one = _as(p0, 1.0)
    for i in range(n):
        out[i] = g[i] / (one + _exp(x[i]))


@kernel(error_model="numpy")
def _bwd_hardswish(x, g, out, p0, p1, p2):    # 0 at and below -3, 1 at and above 3
    n = x.size
    one = _as(p0, 1.0)
    half = _as(p0, 0.5)
    zero = _as(p0, 0.0)
    three = _as(p0, 3.0)
    for i in range(n):
        v = x[i]
        d = v * _as(p0, 1.0 / 3.0) + half
        d = d if v > -three else zero
        out[i] = g[i] * (d if v < three else one)


@kernel(error_model="numpy")
def _bwd_hardsigmoid(x, g, out, p0, p1, p2):    # slope strictly inside, 0 at the kinks
    n = x.size
    one = _as(p0, 1.0)
    zero = _as(p0, 0.0)
    for i in range(n):
        t = x[i] * p0 + p1
        out[i] = g[i] * p0 if (t > zero and t < one) else zero


@kernel(error_model="numpy")
def _bwd_tanhshrink(x, g, out, p0, p1, p2):
    n = x.size
    for i in range(n):
        t = _tanh(x[i])
        out[i] = g[i] * (t * t)


@kernel(error_model="numpy")
def _bwd_softsign(x, g, out, p0, p1, p2):
    n = x.size
    one = _as(p0, 1.0)
    for i in range(n):
        d = one + abs(x[i])
        out[i] = g[i] / (d * d)


@kernel(error_model="numpy")
def _bwd_softshrink(x, g, out, p0, p1, p2):
    n = x.size
    zero = _as(p0, 0.0)
    for i in range(n):
        out[i] = g[i] if abs(x[i]) > p0 else zero


@kernel(error_model="numpy")
def _bwd_hardshrink(x, g, out, p0, p1, p2):
    n = x.size
    zero = _as(p0, 0.0)
    for i in range(n):
        out[i] = g[i] if abs(x[i]) >= p0 else zero


@kernel(error_model="numpy")
def _bwd_thresholded(x, g, out, p0, p1, p2):
    n = x.size
    zero = _as(p0, 0.0)
    for i in range(n):
        out[i] = g[i] if x[i] > p0 else zero


@kernel(error_model="numpy")
def _bwd_sigmoid(x, g, out, p0, p1, p2):    # x: the output y; g y (1 - y)
    n = x.size
    one = _as(p0, 1.0)
    for i in range(n):
        y = x[i]
        out[i] = g[i] * (y * (one - y))


@kernel(error_model="numpy")
def _bwd_relu(x, g, out, p0, p1, p2):    # x: the output y
    n = x.size
    zero = _as(p0, 0.0)
    for i in range(n):
        out[i] = g[i] if x[i] > zero else zero


@kernel(error_model="numpy")
def _bwd_clip(x, g, out, p0, p1, p2):
    # p0, p1: the bounds (+-inf when absent), p2: strict if nonzero
    n = x.size
    zero = _as(p0, 0.0)
    if p2 != zero:
        for i in range(n):
            v = x[i]
            out[i] = g[i] if (v > p0 and v < p1) else zero
    else:
        for i in range(n):
            v = x[i]
            out[i] = g[i] if (v >= p0 and v <= p1) else zero


_FORWARD = {
    GELU: _fwd_gelu, GELU_TANH: _fwd_gelu_tanh, SILU: _fwd_silu, MISH: _fwd_mish,
    LEAKY: _fwd_leaky, ELU: _fwd_elu, SOFTPLUS: _fwd_softplus, LOGSIGMOID: _fwd_logsigmoid,
    HARDSWISH: _fwd_hardswish, HARDSIGMOID: _fwd_hardsigmoid, TANHSHRINK: _fwd_tanhshrink,
    SOFTSIGN: _fwd_softsign, SOFTSHRINK: _fwd_softshrink, HARDSHRINK: _fwd_hardshrink,
    THRESHOLDED: _fwd_thresholded, SIGMOID: _fwd_sigmoid
}
_BACKWARD = {
    GELU: _bwd_gelu, GELU_TANH: _bwd_gelu_tanh, SILU: _bwd_silu, MISH: _bwd_mish,
    LEAKY: _bwd_leaky, ELU: _bwd_elu, SOFTPLUS: _bwd_softplus, LOGSIGMOID: _bwd_logsigmoid,
    HARDSWISH: _bwd_hardswish, HARDSIGMOID: _bwd_hardsigmoid, TANHSHRINK: _bwd_tanhshrink,
    SOFTSIGN: _bwd_softsign, SOFTSHRINK: _bwd_softshrink, HARDSHRINK: _bwd_hardshrink,
    THRESHOLDED: _bwd_thresholded, SIGMOID: _bwd_sigmoid, RELU: _bwd_relu, CLIP: _bwd_clip
}


def act_forward(kind, x, out, p0, p1, p2):
    """``out = f(x)`` for activation ``kind`` with parameters ``p0..p2`` (x's dtype)."""
    _FORWARD[kind](x, out, p0, p1, p2)


def act_backward(kind, x, g, out, p0, p1, p2):
    """``out = g * f'(x)`` for activation ``kind`` (the derivative at the kinks is Paddle's,
    as the ops' docstrings say)."""
    _BACKWARD[kind](x, g, out, p0, p1, p2)


@kernel(error_model="numpy")
def rrelu_forward(x, u, out, lower, width):
    """Randomized leaky ReLU with per-element slopes ``lower + width * u`` (``u`` uniform in
    [0, 1)): ``out = x`` where ``x >= 0``, else ``slope * x``; ``u`` is overwritten with the
    derivative (1 where ``x >= 0``, else the slope)."""
    one = _as(lower, 1.0)
    for i in range(x.size):
        v = x[i]
        d = one if v >= 0 else lower + width * u[i]
        out[i] = v * d
        u[i] = d


@kernel(error_model="numpy")
def scale_rows(x, s, out):
    """``out[r] = x[r] * s[r]`` for ``x`` [R, S]: a per-row factor (dropout's channel mask)
    times contiguous rows, which numpy's broadcast multiply ran at half the speed of a
    plain one. ``x * 0`` stays NaN for a NaN, as in numpy."""
    R, S = x.shape
    for r in range(R):
        v = s[r]
        xr = x[r]
        o = out[r]
        for j in range(S):
            o[j] = xr[j] * v


@kernel(error_model="numpy")
def prelu_forward(x, w, out):
    """Channel-wise PReLU on ``x`` [A, C, B] (C the channels, B the positions after them):
    ``out = x`` where ``x > 0``, else ``w[c] * x``."""
    A, C, B = x.shape
    for a in range(A):
        for c in range(C):
            wc = w[c]
            xs = x[a, c]
            os = out[a, c]
            for b in range(B):
                v = xs[b]
                os[b] = v if v > 0 else v * wc


@kernel(error_model="numpy")
def prelu_backward(x, g, w, gx, gw):
    """The gradients of ``prelu_forward``: ``gx`` [A, C, B] written (``g``, or ``g * w[c]``
    where ``x <= 0``), ``gw`` [C] float64 accumulated into (the sum of ``g * x`` where
    ``x <= 0``)."""
    A, C, B = x.shape
    one = _as(w[0], 1.0)
    for a in range(A):
        for c in range(C):
            wc = w[c]
            xs = x[a, c]
            gs = g[a, c]
            gxs = gx[a, c]
            acc = 0.0
            for b in range(B):
                v = xs[b]
                gv = gs[b]
                pos = v > 0
                gxs[b] = gv * (one if pos else wc)
                acc += 0.0 if pos else np.float64(gv * v)
            gw[c] += acc

# -- normalizations -------------------------------------------------------------------------------
# Statistics are shifted sums in float64: s1 = sum(x - k), s2 = sum((x - k)^2) with k the
# group's first element, mean = k + s1/n, var = s2/n - (s1/n)^2. One pass, and with the shift
# the cancellation in the variance is that of float64 on values of the group's own spread:
# float32 inputs keep full float32 accuracy whatever their mean. The mean is then applied as
# ``xhat = (x - mu) * rstd - dl`` with ``mu`` the mean rounded to x's dtype (``x - mu`` is exact
# for x near the mean) and ``dl = (mean - mu) * rstd`` its rounding error in standardized units
# (without it a float32 mean of 1e4 offsets every output by up to 5e-4 / std).

@kernel(error_model="numpy")
def rows_norm_forward(x, w, b, out, mean, rstd, P, K, eps):
    """Rows of ``x`` [R, M] standardized (``mean``/``rstd`` [R] float64 out), then
    ``out = xhat * w[j] + b[j]`` with ``j = (r % P) * K + m // (M // K)`` (LayerNorm: P 1,
    K M; GroupNorm: P groups, K channels per group; InstanceNorm: P channels, K 1)."""
    R, M = x.shape
    S = M // K
    for r in range(R):
        row = x[r]
        o = out[r]
        sh = np.float64(row[0])
        s1 = 0.0
        s2 = 0.0
        for i in range(M):
            d = np.float64(row[i]) - sh
            s1 += d
            s2 += d * d
        m1 = s1 / M
        var = s2 / M - m1 * m1
        var = 0.0 if var < 0.0 else var
        mu = sh + m1
        rs = 1.0 / math.sqrt(var + eps)
        mean[r] = mu
        rstd[r] = rs
        base = (r % P) * K
        mu_t = _as(row[0], mu)
        rs_t = _as(row[0], rs)
        dl = _as(row[0], (mu - np.float64(mu_t)) * rs)
        if S == 1:
            ws = w[base:base + M]
            bs = b[base:base + M]
            for k in range(M):
                o[k] = ((row[k] - mu_t) * rs_t - dl) * ws[k] + bs[k]
        else:
            for k in range(K):    # slices indexed from 0: numba then proves no wraparound and vectorizes
                a = w[base + k]
                c = b[base + k]
                xs = row[k * S:(k + 1) * S]
                os = o[k * S:(k + 1) * S]
                for s in range(S):
                    os[s] = ((xs[s] - mu_t) * rs_t - dl) * a + c


_NORM_BLOCK = 16    # rows per partial sum of the layer-norm weight gradients in x's dtype


@kernel(error_model="numpy")
def rows_norm_backward(x, w, g, mean, rstd, P, K, gx, gw, gb):
    """The gradients of ``rows_norm_forward``: ``gx`` [R, M] written, ``gw``/``gb`` [P*K]
    float64 accumulated into. ``gx = rstd (gy - mean(gy) - xhat mean(gy xhat))`` with
    ``gy = g * w``, per row.

    With one weight per element (``K == M``: layer norm) the per-element sums of ``gw``/``gb``
    go first into buffers of x's dtype, added to the float64 ones every ``_NORM_BLOCK`` rows:
    the inner loop stays in one float width (about 1.4x faster than a float64
    read-modify-write per element at M 128-512), and each float64 entry sums partial sums
    of at most ``_NORM_BLOCK`` terms."""
    R, M = x.shape
    S = M // K
    if S == 1:
        tw = np.zeros(P * M, x.dtype)
        tb = np.zeros(P * M, x.dtype)
        for r0 in range(0, R, _NORM_BLOCK):
            for r in range(r0, min(R, r0 + _NORM_BLOCK)):
                row = x[r]
                gr = g[r]
                o = gx[r]
                mu = _as(row[0], mean[r])
                rs = _as(row[0], rstd[r])
                dl = _as(row[0], (mean[r] - np.float64(mu)) * rstd[r])
                base = (r % P) * M
                ws = w[base:base + M]
                tws = tw[base:base + M]
                tbs = tb[base:base + M]
                a = 0.0
                c = 0.0
                for k in range(M):
                    xh = (row[k] - mu) * rs - dl
                    gv = gr[k]
                    tbs[k] += gv
                    tws[k] += gv * xh
                    gy = gv * ws[k]
                    a += gy
                    c += gy * xh
                am = _as(mu, a / M)
                cm = _as(mu, c / M)
                for k in range(M):
                    xh = (row[k] - mu) * rs - dl
                    o[k] = rs * (gr[k] * ws[k] - am - xh * cm)
            for k in range(P * M):
                gw[k] += tw[k]
                gb[k] += tb[k]
                tw[k] = 0
                tb[k] = 0
        return
    for r in range(R):
        row = x[r]
        gr = g[r]
        o = gx[r]
        mu = _as(row[0], mean[r])
        rs = _as(row[0], rstd[r])
        dl = _as(row[0], (mean[r] - np.float64(mu)) * rstd[r])
        base = (r % P) * K
        a = 0.0
        c = 0.0
        for k in range(K):
            sg = 0.0
            sgx = 0.0
            xs = row[k * S:(k + 1) * S]
            gs = gr[k * S:(k + 1) * S]
            for s in range(S):
                gv = gs[s]
                sg += gv
                sgx += gv * ((xs[s] - mu) * rs - dl)
            gb[base + k] += sg
            gw[base + k] += sgx
            a += w[base + k] * sg
            c += w[base + k] * sgx
        am = _as(mu, a / M)
        cm = _as(mu, c / M)
        for k in range(K):
            wk = w[base + k]
            xs = row[k * S:(k + 1) * S]
            gs = gr[k * S:(k + 1) * S]
            os = o[k * S:(k + 1) * S]
            for s in range(S):
                xh = (xs[s] - mu) * rs - dl
                os[s] = rs * (gs[s] * wk - am - xh * cm)


@kernel(error_model="numpy")
def batch_norm_forward(x, w, b, eps, y, mean, var, rstd, relu):
    """Training batch norm of ``x`` [A, C, S] (statistics over A and S per channel): the
    float64 ``mean``, biased ``var`` and ``rstd`` [C] written, then
    ``y = (x - mean) * (w * rstd) + b`` (the mean's rounding to x's dtype compensated),
    ``max(y, 0)`` when ``relu``."""
    A, C, S = x.shape
    n = A * S
    s1 = np.zeros(C)
    s2 = np.zeros(C)
    for c in range(C):
        mean[c] = x[0, c, 0]             # the shift
    for a in range(A):
        for c in range(C):
            sh = mean[c]
            blk = x[a, c]
            t1 = 0.0
            t2 = 0.0
            for s in range(S):
                d = np.float64(blk[s]) - sh
                t1 += d
                t2 += d * d
            s1[c] += t1
            s2[c] += t2
    for c in range(C):
        m1 = s1[c] / n
        v = s2[c] / n - m1 * m1
        v = 0.0 if v < 0.0 else v
        mean[c] += m1
        var[c] = v
        rstd[c] = 1.0 / math.sqrt(v + eps)
    for a in range(A):
        for c in range(C):
            mu, q, t = _bn_scale_shift(x[0, 0, 0], w[c], b[c], mean[c], rstd[c])
            xb = x[a, c]
            yb = y[a, c]
            if relu:
                zero = _as(mu, 0.0)
                for s in range(S):
                    yb[s] = max((xb[s] - mu) * q + t, zero)
            else:
                for s in range(S):
                    yb[s] = (xb[s] - mu) * q + t


@register_jitable
def _bn_scale_shift(like, w, b, mean, rstd):
    """``(mu, q, t)`` in ``like``'s dtype with ``y = (x - mu) * q + t`` for one channel: ``mu``
    the mean rounded, ``t`` compensating that rounding (the forward's output, and the
    backward's ReLU mask recomputed from ``x`` with the same operations)."""
    mu = _as(like, mean)
    q64 = np.float64(w) * rstd
    return mu, _as(mu, q64), _as(mu, np.float64(b) - q64 * (mean - np.float64(mu)))


@kernel(error_model="numpy")
def batch_norm_backward(x, g, w, b, mean, rstd, g_mean, g_var, relu, gx, gw, gb):
    """The gradients of ``batch_norm_forward``: ``gw = sum(g * xhat)``, ``gb = sum(g)``
    (float64 [C], written), and ``gx = p g + q (x - mean) + t`` per channel with
    ``p = w rstd``, ``q = (2 g_var - p rstd gw) / n``, ``t = (g_mean - p gb) / n`` (``g_mean``,
    ``g_var``: the gradients of the batch statistics, zeros when they have none); ``gx`` is
    skipped when it has size 0. With ``relu`` the output was ``max(y, 0)``: ``g`` is taken
    as 0 where ``y <= 0``, ``y`` recomputed from ``x`` (``b`` is read only then)."""
    A, C, S = x.shape
    n = A * S
    for c in range(C):
        gw[c] = 0.0
        gb[c] = 0.0
    for a in range(A):
        for c in range(C):
            mu = _as(x[0, 0, 0], mean[c])
            rs = _as(mu, rstd[c])
            dl = _as(mu, (mean[c] - np.float64(mu)) * rstd[c])
            xb = x[a, c]
            gbk = g[a, c]
            t1 = 0.0
            t2 = 0.0
            if relu:
                mu, qf, tf = _bn_scale_shift(x[0, 0, 0], w[c], b[c], mean[c], rstd[c])
                zero = _as(mu, 0.0)
                for s in range(S):
                    xv = xb[s]
                    gv = gbk[s] if (xv - mu) * qf + tf > zero else zero
                    t1 += gv
                    t2 += gv * ((xv - mu) * rs - dl)
            else:
                for s in range(S):
                    gv = gbk[s]
                    t1 += gv
                    t2 += gv * ((xb[s] - mu) * rs - dl)
            gb[c] += t1
            gw[c] += t2
    if gx.size == 0:
        return
    for a in range(A):
        for c in range(C):
            mu = _as(x[0, 0, 0], mean[c])
            p64 = np.float64(w[c]) * rstd[c]
            q64 = (2.0 * g_var[c] - p64 * rstd[c] * gw[c]) / n
            t64 = (g_mean[c] - p64 * gb[c]) / n - q64 * (mean[c] - np.float64(mu))
            p = _as(mu, p64)
            q = _as(mu, q64)
            t = _as(mu, t64)
            xb = x[a, c]
            gbk = g[a, c]
            ob = gx[a, c]
            if relu:
                mu, qf, tf = _bn_scale_shift(x[0, 0, 0], w[c], b[c], mean[c], rstd[c])
                zero = _as(mu, 0.0)
                for s in range(S):
                    xv = xb[s]
                    gv = gbk[s] if (xv - mu) * qf + tf > zero else zero
                    ob[s] = p * gv + q * (xv - mu) + t
            else:
                for s in range(S):
                    ob[s] = p * gbk[s] + q * (xb[s] - mu) + t


# -- embedding ------------------------------------------------------------------------------------
@kernel(error_model="numpy")
def embedding_backward(ids, g, gw, pad):
    """``gw[ids[i]] += g[i]`` for every lookup ``i`` whose id is not ``pad`` (``ids`` int64
    [n], ``g`` [n, D], ``gw`` [V, D] zeroed by the caller): a scatter-add of contiguous rows,
    one pass over ``g``."""
    n, D = g.shape
    for i in range(n):
        r = ids[i]
        if r != pad:
            row = gw[r]
            gi = g[i]
            for j in range(D):
                row[j] += gi[j]


# -- upsampling -----------------------------------------------------------------------------------
# Channels-first inputs have B = 1: those loops index 3-D views by position (a 1-element view per
# element costs more than the copy), with unsigned indices where they are computed (numba then
# emits no negative-index wraparound, which keeps the loops vectorizable). Array-slice
# assignment is written as loops: numba's broadcasting setitem is slow to compile.

@kernel(error_model="numpy")
def upsample_nearest(x, out, rh, rw):
    """``out[a, h*rh + i, w*rw + j] = x[a, h, w]``: ``x`` [A, H, W] repeated ``rh`` x ``rw``
    times into ``out`` [A, H*rh, W*rw] (channels-first inputs; channels-last ones take
    ``resample_linear``)."""
    A, H, W = x.shape
    OW = W * rw
    for a in range(A):
        for h in range(H):
            xr = x[a, h]
            o0 = out[a, h * rh]
            if rw == 2:
                for w in range(W):
                    v = xr[w]
                    o0[2 * w] = v
                    o0[2 * w + 1] = v
            else:
                for w in range(W):
                    v = xr[w]
                    for j in range(rw):
                        o0[np.uint64(w * rw + j)] = v
            for i in range(1, rh):
                oi = out[a, h * rh + i]
                for k in range(OW):
                    oi[k] = o0[k]


@kernel(error_model="numpy")
def upsample_nearest_backward(g, gx, rh, rw):
    """The adjoint of ``upsample_nearest``: ``gx[a, h, w]`` = the sum of its ``rh`` x ``rw``
    block of ``g`` (``gx`` zeroed by the caller)."""
    A, H, W = gx.shape
    for a in range(A):
        for h in range(H):
            gr = gx[a, h]
            for i in range(rh):
                gi = g[a, h * rh + i]
                if rw == 2:
                    for w in range(W):
                        gr[w] += gi[2 * w] + gi[2 * w + 1]
                else:
                    for w in range(W):
                        t = gr[w]
                        for j in range(rw):
                            t += gi[np.uint64(w * rw + j)]
                        gr[w] = t


@kernel(error_model="numpy")
def resample_linear(x, ih0, ih1, fh, iw0, iw1, fw, out):
    """Separable two-tap resampling of axes 1 and 2 of ``x`` [A, H, W, B] into ``out`` [A, OH,
    OW, B]: output row ``oh`` mixes input rows ``ih0[oh]`` and ``ih1[oh]`` with weights
    ``1 - fh[oh]`` and ``fh[oh]``; the same along W (bilinear, linear with H = 1, and any
    nearest resize with ``f = 0``). Indices are uint64."""
    A, H, W, B = x.shape
    OH = out.shape[1]
    OW = out.shape[2]
    if B == 1:
        x3 = x.reshape((A, H, W))
        o3 = out.reshape((A, OH, OW))
    for a in range(A):
        for oh in range(OH):
            f = fh[oh]
            e = _as(f, 1.0) - f
            if B == 1:
                r0 = x3[a, ih0[oh]]
                r1 = x3[a, ih1[oh]]
                o = o3[a, oh]
                for ow in range(OW):
                    w0 = iw0[ow]
                    w1 = iw1[ow]
                    u = fw[ow]
                    v = _as(u, 1.0) - u
                    o[ow] = e * (v * r0[w0] + u * r0[w1]) + f * (v * r1[w0] + u * r1[w1])
            else:
                q0 = x[a, ih0[oh]]
                q1 = x[a, ih1[oh]]
                o4 = out[a, oh]
                for ow in range(OW):
                    w0 = iw0[ow]
                    w1 = iw1[ow]
                    u = fw[ow]
                    v = _as(u, 1.0) - u
                    ob = o4[ow]
                    for b in range(B):
                        ob[b] = e * (v * q0[w0, b] + u * q0[w1, b]) + f * (v * q1[w0, b] + u * q1[w1, b])


@kernel(error_model="numpy")
def resample_linear_backward(g, ih0, ih1, fh, iw0, iw1, fw, gx):
    """The adjoint of ``resample_linear``: each output gradient spread back onto its four
    taps (``gx`` [A, H, W, B] zeroed by the caller)."""
    A, H, W, B = gx.shape
    OH = g.shape[1]
    OW = g.shape[2]
    if B == 1:
        g3 = g.reshape((A, OH, OW))
        gx3 = gx.reshape((A, H, W))
    for a in range(A):
        for oh in range(OH):
            f = fh[oh]
            e = _as(f, 1.0) - f
            if B == 1:
                r0 = gx3[a, ih0[oh]]
                r1 = gx3[a, ih1[oh]]
                go = g3[a, oh]
                for ow in range(OW):
                    w0 = iw0[ow]
                    w1 = iw1[ow]
                    u = fw[ow]
                    v = _as(u, 1.0) - u
                    val = go[ow]
                    r0[w0] += e * v * val
                    r0[w1] += e * u * val
                    r1[w0] += f * v * val
                    r1[w1] += f * u * val
            else:
                q0 = gx[a, ih0[oh]]
                q1 = gx[a, ih1[oh]]
                go4 = g[a, oh]
                for ow in range(OW):
                    w0 = iw0[ow]
                    w1 = iw1[ow]
                    u = fw[ow]
                    v = _as(u, 1.0) - u
                    gb = go4[ow]
                    for b in range(B):
                        val = gb[b]
                        q0[w0, b] += e * v * val
                        q0[w1, b] += e * u * val
                        q1[w0, b] += f * v * val
                        q1[w1, b] += f * u * val


# -- GLU ------------------------------------------------------------------------------------------
@kernel(error_model="numpy")
def glu_pass(x, g, out, one, grad):
    """GLU over ``x`` [P, 2, Q] (the two halves ``a``, ``b`` of the split axis, C-contiguous),
    ``s = sigmoid(b)``, ``one`` 1 in x's dtype. Forward (``grad`` False): ``out`` [P, 1, Q] gets
    ``a s`` (``g`` is not read). Backward: ``out`` [P, 2, Q] gets ``g s`` and ``g a s (1 - s)``
    for the output gradient ``g`` [P, Q]. One kernel for both directions: two signatures
    (float32, float64) to compile, not four."""
    P, _, Q = x.shape
    for p in range(P):
        a = x[p, 0]
        b = x[p, 1]
        if grad:
            gp = g[p]
            ga = out[p, 0]
            gb = out[p, 1]
            for q in range(Q):         # the gate first: this loop and the next vectorize,
                ga[q] = one / (one + _exp(-b[q]))      # one loop doing both does not
            for q in range(Q):
                s = ga[q]
                t = gp[q] * s
                ga[q] = t
                gb[q] = t * a[q] * (one - s)
        else:
            o = out[p, 0]
            for q in range(Q):
                o[q] = a[q] / (one + _exp(-b[q]))


# -- padding by index (reflect, replicate, circular) ---------------------------------------------
@kernel(error_model="numpy")
def pad_gather(x, out, i0, i1, i2, i3, grad):
    """Padding as a gather: ``out[p, a, b, c, d] = x[p, i0[a], i1[b], i2[c], i3[d]]`` with ``x``
    [P, A, B, C, D] and ``out`` [P, len(i0), ..., len(i3)], both C-contiguous, and per axis the
    source index of every padded position (int64). With ``grad`` the adjoint instead: ``x``
    (zeroed by the caller) gains ``out`` at those positions (a border element adds onto the
    element it was copied from). One kernel for both directions: two signatures."""
    P = x.shape[0]
    n0, n1, n2, n3 = i0.size, i1.size, i2.size, i3.size
    for p in range(P):
        for a in range(n0):
            xa = x[p, i0[a]]
            oa = out[p, a]
            for b in range(n1):
                xb = xa[i1[b]]
                ob = oa[b]
                for c in range(n2):
                    xr = xb[i2[c]]
                    orow = ob[c]
                    if grad:
                        for d in range(n3):
                            xr[i3[d]] += orow[d]
                    else:
                        for d in range(n3):
                            orow[d] = xr[i3[d]]


# -- multi-class margin loss ----------------------------------------------------------------------
@kernel(error_model="numpy")
def multi_margin(x, lab, w, margin, square, raw, coef):
    """Per sample ``i`` of ``x`` [N, C] with label ``y = lab[i]``: ``raw[i]`` (float64) =
    ``sum_{j != y} h_j^k / C`` with ``h_j = max(0, margin - x[i, y] + x[i, j])`` and k = 2 when
    ``square`` else 1; ``coef[i]`` [C] = the derivative of ``w[y] * raw[i]`` by ``x[i]``
    (``w[y] k h_j^(k-1) / C`` where ``h_j > 0``, the column ``y`` minus their sum). Returns -1,
    or the first sample whose label is outside [0, C) (nothing after it is written)."""
    N, C = x.shape
    zero = _as(margin, 0.0)
    two = _as(margin, 2.0)
    fc = _as(margin, C)
    for i in range(N):
        y = lab[i]
        if y < 0 or y >= C:
            return i
        xi = x[i]
        ci = coef[i]
        xy = xi[y]
        s = w[y] / fc
        acc = 0.0
        tot = zero
        for j in range(C):
            m = margin - xy + xi[j]
            c = zero
            if m > zero and j != y:
                if square:
                    acc += m * m
                    c = two * m * s
                else:
                    acc += m
                    c = s
            ci[j] = c
            tot += c
        ci[y] = -tot
        raw[i] = acc / C
    return -1


# -- pooling over per-axis bins (3-D disjoint windows, adaptive max pooling) -----------------------
@kernel(error_model="numpy")
def pool_bins(x, out, b0, b1, b2, mode, scale):
    """Sum pooling of ``x`` [P, D, H, W] (C-contiguous) into ``out`` [P, OD, OH, OW] over boxes
    given per axis by ``b0`` [2, OD], ``b1`` [2, OH], ``b2`` [2, OW] (int64 start and end rows,
    inside the input; boxes may overlap), input rows read in order. ``mode`` 1: the box sums
    times ``scale``; 2: the adjoint, ``x`` (overwritten) gets ``out * scale`` added over each
    box. (Max pooling is ``pool_kernels.max3d``.)"""
    P, D, H, W = x.shape
    OD, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    zero = scale - scale
    xf = x.reshape(P, D * H * W)
    for p in range(P):
        if mode == 2:
            xr = xf[p]
            for q in range(D * H * W):
                xr[q] = zero
        for a in range(OD):
            for i in range(OH):
                o = out[p, a, i]
                if mode == 1:
                    for j in range(OW):
                        o[j] = zero
                for d in range(b0[0, a], b0[1, a]):
                    for h in range(b1[0, i], b1[1, i]):
                        r = x[p, d, h]
                        if mode == 1:
                            for j in range(OW):
                                acc = zero
                                for w in range(b2[0, j], b2[1, j]):
                                    acc += r[w]
                                o[j] += acc
                        else:
                            for j in range(OW):
                                v = o[j] * scale
                                for w in range(b2[0, j], b2[1, j]):
                                    r[w] += v
                if mode == 1:
                    for j in range(OW):
                        o[j] *= scale
