"""CPU kernels of softmax and log-softmax over the rows of C-contiguous ``[rows, n]``
float32/float64 arrays (the last axis).

Forward: one kernel subtracts each row's max, numpy's SIMD ``exp`` exponentiates in place
(a numba loop without Intel's SVML calls ``exp`` once per element, two to five times
slower), and a second kernel sums each row and scales it while it is in cache (log-softmax:
also subtracts the log of the sum). Three passes over memory where numpy takes five.
Backward: one pass over a row for its dot product or sum and one for the update, where
numpy needs four whole-array passes and three temporaries. Sums are accumulated in float64
for both dtypes."""
import math

import numpy as np

from .compiled import kernel


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
def _softmax_rows_grad(p, g, dx, log):
    # softmax:     dx = p * (g - sum(g * p))
    # log-softmax: dx = g - p * sum(g)          (p = exp(log_softmax), the probabilities)
    rows, n = p.shape
    for r in range(rows):
        s = 0.0
        if log:
            for j in range(n):
                s += g[r, j]
            for j in range(n):
                dx[r, j] = g[r, j] - p[r, j] * s
        else:
            for j in range(n):
                s += g[r, j] * p[r, j]
            for j in range(n):
                dx[r, j] = p[r, j] * (g[r, j] - s)


def rows_of(a, axis):
    """``a`` as a ``[rows, n]`` view when the kernel takes it (a C-contiguous numpy
    float32/float64 array, ``axis`` its last, not empty), else None."""
    if (type(a) is not np.ndarray or a.dtype not in (np.float32, np.float64) or a.ndim == 0
            or axis not in (-1, a.ndim - 1) or not a.flags.c_contiguous or a.size == 0):
        return None
    return a.reshape(-1, a.shape[-1])


def softmax_last(x2, log):
    """Softmax of the rows of ``x2`` (from ``rows_of``); with ``log``, the pair (log-softmax,
    softmax)."""
    shifted = np.empty_like(x2)
    _rows_sub_max(x2, shifted)
    if not log:
        np.exp(shifted, out=shifted)
        _rows_normalize(shifted, shifted, False)
        return shifted
    e = np.exp(shifted)
    _rows_normalize(e, shifted, True)
    return shifted, e


def softmax_last_grad(p2, g, log):
    """The input gradient of softmax (``log=False``) or log-softmax over the last axis, from
    the probabilities ``p2`` (``rows_of`` the softmax) and the output gradient ``g``."""
    dx = np.empty_like(p2)
    _softmax_rows_grad(p2, np.ascontiguousarray(g, dtype=p2.dtype).reshape(p2.shape), dx, log)
    return dx
