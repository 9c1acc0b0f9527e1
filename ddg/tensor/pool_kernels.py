"""Compiled (numba) CPU loops of 2-D max and average pooling over NCHW planes (numpy
float32/float64), for ``ddg/autograd/ops/pooling.py``.

Each output reads its window straight from the input plane, the window clipped to the image
(padding never wins a maximum and counts in a mean only where the rule says so), so there is
no padded copy of the input and no pass per kernel offset over the whole batch: the
strided-slice form made kh*kw passes forward and about twice that backward, each over
arrays far out of cache on large images (a 3x3 stride-2 pool on 8x64x112x112 ran 3.5x
torch's time). A maximum keeps the flat index ``h*W + w`` of its window's first maximal
element (row-major, a NaN winning over numbers, as the 3-D kernels), which backward,
``return_mask`` and double backward read; backward adds each output's gradient there.
"""
from .compiled import jitable, kernel


@jitable
def _span(o, s, p, k, n):
    """The input range ``[lo, hi)`` of output ``o``'s window (stride ``s``, leading padding
    ``p``, kernel ``k``) clipped to an axis of ``n`` elements."""
    start = o * s - p
    return max(start, 0), min(start + k, n)


@jitable
def _divisor(ha, hb, wa, wb, kh, kw, mode, div):
    """A mean's divisor: ``div`` if > 0 (``divisor_override``), else with ``mode`` 1
    (exclusive) the window's input elements, with 0 ``kh*kw``."""
    if div > 0:
        return div
    return (hb - ha) * (wb - wa) if mode == 1 else kh * kw


@kernel
def max2d(x, y, pos, geom):
    """``y[p, i, j]`` the maximum of plane ``x[p]`` over the window of output (i, j) and
    ``pos`` its flat index; ``geom`` = (kh, kw, sh, sw, pt, pl). Every window holds at least
    one input element (the caller checks)."""
    kh, kw, sh, sw, pt, pl = geom
    n_p, h_n, w_n = x.shape
    oh, ow = y.shape[1], y.shape[2]
    for p in range(n_p):
        xp = x[p]
        for i in range(oh):
            ha, hb = _span(i, sh, pt, kh, h_n)
            for j in range(ow):
                wa, wb = _span(j, sw, pl, kw, w_n)
                best = xp[ha, wa]
                bi = ha * w_n + wa
                for h in range(ha, hb):
                    row = xp[h]
                    for w in range(wa, wb):
                        v = row[w]
                        # branch-free selects: random comparisons of small windows mispredict
                        take = (v > best) | ((v != v) & (best == best))
                        best = v if take else best
                        bi = h * w_n + w if take else bi
                y[p, i, j] = best
                pos[p, i, j] = bi


@kernel
def max2d_adjoint(g, pos, gx):
    """``gx`` [P, H*W] (zeroed by the caller) gains each output gradient ``g`` [P, OH*OW] at
    its maximum's index ``pos`` (overlapping windows add up)."""
    n_p, n_o = g.shape
    for p in range(n_p):
        for o in range(n_o):
            gx[p, pos[p, o]] += g[p, o]


@kernel
def avg2d(x, y, geom, mode, div):
    """``y[p, i, j]`` the mean of plane ``x[p]`` over the window of output (i, j), summed in
    float64, divided by ``_divisor``."""
    kh, kw, sh, sw, pt, pl = geom
    n_p, h_n, w_n = x.shape
    oh, ow = y.shape[1], y.shape[2]
    for p in range(n_p):
        xp = x[p]
        for i in range(oh):
            ha, hb = _span(i, sh, pt, kh, h_n)
            for j in range(ow):
                wa, wb = _span(j, sw, pl, kw, w_n)
                acc = 0.0
                for h in range(ha, hb):
                    row = xp[h]
                    for w in range(wa, wb):
                        acc += row[w]
                y[p, i, j] = acc / _divisor(ha, hb, wa, wb, kh, kw, mode, div)


@kernel
def avg2d_adjoint(g, gx, geom, mode, div):
    """The adjoint of ``avg2d``: ``gx`` [P, H, W] (zeroed by the caller) gains each output's
    gradient divided by its divisor over its window."""
    kh, kw, sh, sw, pt, pl = geom
    n_p, h_n, w_n = gx.shape
    oh, ow = g.shape[1], g.shape[2]
    for p in range(n_p):
        gp = gx[p]
        for i in range(oh):
            ha, hb = _span(i, sh, pt, kh, h_n)
            for j in range(ow):
                wa, wb = _span(j, sw, pl, kw, w_n)
                v = g[p, i, j] / _divisor(ha, hb, wa, wb, kh, kw, mode, div)
                for h in range(ha, hb):
                    row = gp[h]
                    for w in range(wa, wb):
                        row[w] += v
