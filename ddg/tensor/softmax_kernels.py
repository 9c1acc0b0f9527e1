"""CPU kernel of the softmax and log-softmax gradients over the rows of C-contiguous
``[rows, n]`` float32/float64 arrays (the last axis): one pass over a row for its sum and
one for the update, where numpy needs four whole-array passes and three temporaries.

The forwards stay numpy expressions: their cost is ``exp``, which numpy computes with SIMD
and a numba loop (without Intel's SVML) calls once per element, two to five times slower.
Sums are accumulated in float64 for both dtypes."""
import numpy as np

from .compiled import kernel


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


def softmax_last_grad(p2, g, log):
    """The input gradient of softmax (``log=False``) or log-softmax over the last axis, from
    the probabilities ``p2`` (``rows_of`` the softmax) and the output gradient ``g``."""
    dx = np.empty_like(p2)
    _softmax_rows_grad(p2, np.ascontiguousarray(g, dtype=p2.dtype).reshape(p2.shape), dx, log)
    return dx
