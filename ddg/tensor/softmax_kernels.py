"""CPU kernels of softmax and log-softmax over the rows of C-contiguous ``[rows, n]``
float32/float64 arrays (the last axis), and over axis 1 of C-contiguous ``[outer, n,
inner]`` float32 arrays (an axis before the last: every loop runs along the contiguous
inner axis, the softmax axis reduced element-wise).

float32 softmax and log-softmax forward: rows of up to 24 values go through a kernel that
handles 128 rows at a time, transposed in a scratch block so that its loops run across rows
(along a row of 16 values the vectorized loops barely start). Longer rows go through a
kernel that takes about 2048 values' worth of rows at a time, finds their maxima (eight
running maxima, so the compare chain is not one long dependency), then runs their ``exp``
loops back to back, so that no row's loop waits on the previous row's sum; one row at a
time cost 1.1-1.4x torch's time on rows of 32-128 values, the group kernel 0.9x. With log,
both also write the softmax (the backward's input) and the log-softmax as the shifted value
minus the log of the row's sum, rounded once. The ``exp`` is written out (below) so that
the loop vectorizes: numba's ``math.exp`` calls libm once per element (no SVML here), two to
five times slower than numpy's SIMD ``exp``, and the kernel with its own ``exp`` is ~2x
faster than the max-subtract kernel + numpy ``exp`` + normalize kernel it replaces. A factor
``scale > 0`` applied to the inputs comes free (the attention op's ``1/sqrt(d)``).

float64 forward: one kernel subtracts each row's max, numpy's SIMD ``exp`` exponentiates in
place and a second kernel sums each row and scales it while it is in cache (log-softmax:
also subtracts the log of the sum).

Backward: one pass over a row for its dot product or sum and one for the update, where
numpy needs four whole-array passes and three temporaries. Sums are accumulated in float64
for both dtypes.

The float32 ``exp`` (of ``d <= 0``, the shifted scores): ``d = k ln2 + f`` with ``k``
an integer (``ceil(d log2 e - 1/2)``, so ``|f| <= ln2 / 2``), ``exp(f)`` by Cephes'
degree-7 polynomial, ``2**k`` built from its exponent bits in an int32 scratch row read
back as float32. Within 2e-7 relative of float64 ``exp`` (tested); ``d < -87.33`` (where
float32 ``exp`` leaves the normal range) gives 0; NaN propagates (a NaN in a row makes the
row NaN, as in numpy; ``-inf`` entries give 0, a row of ``-inf`` or one with ``+inf`` NaN).
"""
import math

import numpy as np

from .compiled import jitable, kernel

_F = np.float32
_LOG2E, _LN2_HI, _LN2_LO = _F(1.4426950408889634), _F(0.693359375), _F(-2.12194440e-4)
_P0, _P1, _P2 = _F(1.9875691500e-4), _F(1.3981999507e-3), _F(8.3334519073e-3)
_P3, _P4, _P5 = _F(4.1665795894e-2), _F(1.6666665459e-1), _F(5.0000001201e-1)
_LOWEST = _F(-87.33)     # below: exp underflows float32's normal range, taken as 0
_HALF, _ONE, _ZERO, _KMIN = _F(0.5), _F(1.0), _F(0.0), _F(-126.0)


@jitable
def exp_parts(d):
    """float32 ``exp(d)`` for ``d <= 0`` as every kernel here computes it: ``(e, bits)`` with
    ``exp(d) = e * 2**k`` and ``bits`` the float32 bit pattern of ``2**k``, which the kernels
    store and reinterpret as float32 in a second loop (both loops vectorize). ``e`` is 0
    below ``_LOWEST`` (exp underflows float32's normal range). Also plain Python for tests."""
    y = d * _LOG2E - _HALF
    y = y if y > _KMIN else _KMIN
    k = np.int32(y)
    kf = _F(k)
    f = d - kf * _LN2_HI - kf * _LN2_LO
    p = _P0 * f + _P1
    p = p * f + _P2
    p = p * f + _P3
    p = p * f + _P4
    p = p * f + _P5
    e = p * f * f + f + _ONE
    return (_ZERO if d < _LOWEST else e), (k + 127) << 23


@jitable
def row_max(row):
    """Largest value of a 1-D ``row`` (length >= 1) over eight running maxima, so the
    compare chain is not one long dependency (one chain ran ~4x slower on long rows). NaN
    never wins a comparison: a row holding NaN still comes out NaN through ``exp``."""
    n = row.shape[0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = row[0]
    j = 0
    while j + 8 <= n:
        v = row[j]
        m0 = v if v > m0 else m0
        v = row[j + 1]
        m1 = v if v > m1 else m1
        v = row[j + 2]
        m2 = v if v > m2 else m2
        v = row[j + 3]
        m3 = v if v > m3 else m3
        v = row[j + 4]
        m4 = v if v > m4 else m4
        v = row[j + 5]
        m5 = v if v > m5 else m5
        v = row[j + 6]
        m6 = v if v > m6 else m6
        v = row[j + 7]
        m7 = v if v > m7 else m7
        j += 8
    for jj in range(j, n):
        v = row[jj]
        m0 = v if v > m0 else m0
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    m4 = m5 if m5 > m4 else m4
    m6 = m7 if m7 > m6 else m6
    m0 = m2 if m2 > m0 else m0
    m4 = m6 if m6 > m4 else m4
    return m4 if m4 > m0 else m0


_SHORT = 24     # rows of up to this many float32 values: the block kernel below
_BLOCK = 128    # rows per block of that kernel
_GROUP = 2048   # longer rows: the group kernel takes max(1, _GROUP // n) rows at a time
_NO_P = np.empty((1, 1), np.float32)   # the kernels' unused probability output without log


@kernel(error_model="numpy")
def _softmax_short_f32(x, out, p, scale, block, log):
    # out = softmax(scale * x) for short rows: blocks of block rows copied into a transposed
    # scratch [n, rows] so that every loop runs across the rows of the block (long,
    # vectorized) instead of along one short row (where the vector loops never start); the
    # max, the exp (exp_parts), the sum and the scaling are element-wise over the block's
    # columns. With log: out = log-softmax (the shifted value minus the log of the sum, one
    # rounding) and p = softmax; without, p is not touched. x, out and p distinct. scale > 0.
    # block: rows per block (_BLOCK; an argument, not the constant: with a constant trip count
    # LLVM vectorizes these loops worse).
    rows, n = x.shape
    sc = _F(scale)
    t = np.empty((n, block), np.float32)
    ex = np.empty((n, block), np.float32)
    sh = np.empty((n, block) if log else (1, 1), np.float32)
    bits = np.empty((n, block), np.int32)
    pow2 = bits.view(np.float32)
    m = np.empty(block, np.float32)
    s = np.empty(block, np.float64)
    inv = np.empty(block, np.float32)
    for r0 in range(0, rows, block):
        nr = min(block, rows - r0)
        for i in range(nr):
            row = x[r0 + i]
            for j in range(n):
                t[j, i] = row[j]
        t0 = t[0]
        for i in range(nr):
            m[i] = t0[i]
            s[i] = 0.0
        for j in range(1, n):
            tj = t[j]
            for i in range(nr):
                v = tj[i]
                m[i] = v if v > m[i] else m[i]
        for i in range(nr):
            m[i] *= sc
        for j in range(n):
            tj = t[j]
            ej = ex[j]
            bj = bits[j]
            if log:
                hj = sh[j]
                for i in range(nr):
                    d = tj[i] * sc - m[i]
                    hj[i] = d
                    ej[i], bj[i] = exp_parts(d)
            else:
                for i in range(nr):
                    d = tj[i] * sc - m[i]
                    ej[i], bj[i] = exp_parts(d)
            pj = pow2[j]
            for i in range(nr):
                v = ej[i] * pj[i]
                tj[i] = v
                s[i] += v
        for i in range(nr):
            inv[i] = _F(1.0 / s[i])
        q = p if log else out
        for i in range(nr):
            qrow = q[r0 + i]
            iv = inv[i]
            for j in range(n):
                qrow[j] = t[j, i] * iv
        if log:
            for i in range(nr):
                orow = out[r0 + i]
                ls = _F(math.log(s[i]))
                for j in range(n):
                    orow[j] = sh[j, i] - ls


@kernel(error_model="numpy")
def _softmax_group_f32(x, out, p, scale, group, log):
    # out = softmax(scale * x), rows of more than _SHORT values, taken `group` rows at a
    # time: their maxima first, then their exp loops back to back (no row waits for the
    # previous one's sum), the 2**k factors of the whole group in one long loop, and each
    # row's sum and scaling. With log: p = softmax and out = log-softmax (the shifted value
    # minus the log of the sum, one rounding); without, p is not touched. x, out and p
    # distinct. scale > 0.
    rows, n = x.shape
    sc = _F(scale)
    q = p if log else out
    of = q.reshape(-1)
    bits = np.empty(group * n, np.int32)
    pow2 = bits.view(np.float32)
    ms = np.empty(group, np.float32)
    for r0 in range(0, rows, group):
        g = min(group, rows - r0)
        for i in range(g):
            row = x[r0 + i]
            ms[i] = row_max(row) * sc
        for i in range(g):
            m = ms[i]
            row = x[r0 + i]
            qrow = q[r0 + i]
            br = bits[i * n:(i + 1) * n]
            if log:     # the shifted row stored, so that it is rounded before the log is taken off
                orow = out[r0 + i]
                for j in range(n):
                    d = row[j] * sc - m
                    orow[j] = d
                    qrow[j], br[j] = exp_parts(d)
            else:
                for j in range(n):
                    d = row[j] * sc - m
                    qrow[j], br[j] = exp_parts(d)
        ob = of[r0 * n:(r0 + g) * n]
        for i in range(g * n):
            ob[i] *= pow2[i]
        for i in range(g):
            qrow = q[r0 + i]
            s = 0.0
            for j in range(n):
                s += qrow[j]
            inv = _F(1.0 / s)
            for j in range(n):
                qrow[j] *= inv
            if log:
                orow = out[r0 + i]
                ls = _F(math.log(s))
                for j in range(n):
                    orow[j] -= ls


@kernel(error_model="numpy")
def _softmax_mid_f32(x, out, p, log):
    # softmax over axis 1 of [outer, n, inner] float32 arrays (an axis before the last, e.g.
    # the channels of NCHW): each loop runs along the contiguous inner axis, the n slices
    # reduced element-wise (vectorized); the same exp as the row kernels. With log: out =
    # log_softmax, p = softmax. x, out and p distinct.
    outer, n, inner = x.shape
    m = np.empty(inner, np.float32)
    s = np.empty(inner, np.float64)
    inv = np.empty(inner, np.float32)
    bits = np.empty(inner, np.int32)
    pow2 = bits.view(np.float32)
    q = p if log else out
    for o in range(outer):
        xo = x[o]
        qo = q[o]
        for i in range(inner):
            m[i] = xo[0, i]
            s[i] = 0.0
        for c in range(1, n):
            for i in range(inner):
                v = xo[c, i]
                m[i] = v if v > m[i] else m[i]
        for c in range(n):
            qc = qo[c]
            xc = xo[c]
            for i in range(inner):
                d = xc[i] - m[i]
                qc[i], bits[i] = exp_parts(d)
            for i in range(inner):
                v = qc[i] * pow2[i]
                qc[i] = v
                s[i] += v
        for i in range(inner):
            inv[i] = _F(1.0 / s[i])
        for c in range(n):
            qc = qo[c]
            for i in range(inner):
                qc[i] *= inv[i]
        if log:
            oo = out[o]
            for c in range(n):      # shifted first, then minus log(sum): rounded once each
                oc = oo[c]
                xc = xo[c]
                for i in range(inner):
                    oc[i] = xc[i] - m[i]
            for i in range(inner):
                inv[i] = _F(math.log(s[i]))
            for c in range(n):
                oc = oo[c]
                for i in range(inner):
                    oc[i] -= inv[i]


@kernel(error_model="numpy")
def _softmax_mid_grad(p, g, dx, log):
    # the input gradient over axis 1 of [outer, n, inner] (see _softmax_rows_grad)
    outer, n, inner = p.shape
    s = np.empty(inner, np.float64)
    s32 = np.empty(inner, p.dtype)
    for o in range(outer):
        for i in range(inner):
            s[i] = 0.0
        for c in range(n):
            if log:
                for i in range(inner):
                    s[i] += g[o, c, i]
            else:
                for i in range(inner):
                    s[i] += g[o, c, i] * p[o, c, i]
        for i in range(inner):
            s32[i] = s[i]
        for c in range(n):
            if log:
                for i in range(inner):
                    dx[o, c, i] = g[o, c, i] - p[o, c, i] * s32[i]
            else:
                for i in range(inner):
                    dx[o, c, i] = p[o, c, i] * (g[o, c, i] - s32[i])

@kernel
def _rows_sub_max(x, out):
    rows, n = x.shape
    for r in range(rows):
        m = x[r, 0]
        for j in range(1, n):
            m = max(m, x[r, j])
        for j in range(n):
            out[r, j] = x[r, j] - m


@kernel
def _rows_normalize(e, shifted, log):
    # e: exp of the shifted rows, scaled in place to sum to 1; log: shifted -= log(sum)
    rows, n = e.shape
    for r in range(rows):
        s = 0.0
        for j in range(n):
            s += e[r, j]
        inv = 1.0 / s
        for j in range(n):
            e[r, j] *= inv
        if log:
            ls = math.log(s)
            for j in range(n):
                shifted[r, j] -= ls


@kernel
def _softmax_rows_grad(p, g, dx, log, scale):
    # softmax:     dx = scale * p * (g - sum(g * p))
    # log-softmax: dx = scale * (g - p * sum(g))     (p = exp(log_softmax), the probabilities)
    rows, n = p.shape
    sc = p.dtype.type(scale)
    for r in range(rows):
        s = 0.0
        if log:
            for j in range(n):
                s += g[r, j]
            s32 = p.dtype.type(s)
            for j in range(n):
                dx[r, j] = (g[r, j] - p[r, j] * s32) * sc
        else:
            for j in range(n):
                s += g[r, j] * p[r, j]
            s32 = p.dtype.type(s)
            for j in range(n):
                dx[r, j] = p[r, j] * (g[r, j] - s32) * sc


def rows_of(a, axis):
    """``a`` as a ``[rows, n]`` view when the kernel takes it (a C-contiguous numpy
    float32/float64 array, ``axis`` its last, not empty), else None."""
    if (type(a) is not np.ndarray or a.dtype not in (np.float32, np.float64) or a.ndim == 0
            or axis not in (-1, a.ndim - 1) or not a.flags.c_contiguous or a.size == 0):
        return None
    return a.reshape(-1, a.shape[-1])


def mid_of(a, axis):
    """``a`` as an ``[outer, n, inner]`` view, ``n`` the softmax axis, when the middle-axis
    kernels take it (a C-contiguous numpy float32 array, ``axis`` not its last), else
    None."""
    if (type(a) is not np.ndarray or a.dtype != np.float32 or a.ndim < 2 or not a.flags.c_contiguous
            or a.size == 0):
        return None
    axis = axis % a.ndim
    if axis == a.ndim - 1:
        return None
    return a.reshape(int(np.prod(a.shape[:axis])), a.shape[axis], -1)


def softmax_mid(x3, log):
    """Softmax over axis 1 of ``x3`` (from ``mid_of``); with ``log``, the pair
    (log-softmax, softmax)."""
    out = np.empty_like(x3)
    if not log:
        _softmax_mid_f32(x3, out, out, False)
        return out
    p = np.empty_like(x3)
    _softmax_mid_f32(x3, out, p, True)
    return out, p


def softmax_mid_grad(p3, g, log):
    """The input gradient over axis 1 of ``p3`` (``mid_of`` the softmax; see
    ``softmax_last_grad``)."""
    g = np.ascontiguousarray(g, dtype=p3.dtype).reshape(p3.shape)
    dx = np.empty_like(p3)
    _softmax_mid_grad(p3, g, dx, log)
    return dx


def softmax_last(x2, log, scale=1.0):
    """Softmax of the rows of ``scale * x2`` (``x2`` from ``rows_of``, ``scale > 0``); with
    ``log``, the pair (log-softmax, softmax). Into new arrays: with the output on the input,
    LLVM's overlap check sends the float32 loops to their scalar versions (2.6x slower)."""
    out = np.empty_like(x2)
    if x2.dtype == np.float32:
        p = np.empty_like(x2) if log else _NO_P
        n = x2.shape[1]
        if n <= _SHORT:
            _softmax_short_f32(x2, out, p, float(scale), _BLOCK, bool(log))
        else:
            _softmax_group_f32(x2, out, p, float(scale), max(1, _GROUP // n), bool(log))
        return (out, p) if log else out
    if scale != 1.0:
        x2 = x2 * scale
    _rows_sub_max(x2, out)
    if not log:
        np.exp(out, out=out)
        _rows_normalize(out, out, False)
        return out
    e = np.exp(out)
    _rows_normalize(e, out, True)
    return out, e


def softmax_last_grad(p2, g, log, scale=1.0):
    """The input gradient of softmax (``log=False``) or log-softmax over the last axis, from
    the probabilities ``p2`` (``rows_of`` the softmax) and the output gradient ``g``, times
    ``scale``. A new array (written over ``g``, the loops would run scalar)."""
    g = np.ascontiguousarray(g, dtype=p2.dtype).reshape(p2.shape)
    dx = np.empty_like(p2)
    _softmax_rows_grad(p2, g, dx, log, float(scale))
    return dx
