"""Compiled (numba) CPU loops of 2-D max and average pooling over NCHW planes (numpy
float32/float64), and max pooling over batch-innermost ones, for
``ddg/autograd/ops/pooling.py``.

Each output reads its window straight from the input plane, the window clipped to the image
(padding never wins a maximum and counts in a mean only where the rule says so), so there is
no padded copy of the input and no pass per kernel offset over the whole batch: the
strided-slice form made kh*kw passes forward and about twice that backward, each over
arrays far out of cache on large images (a 3x3 stride-2 pool on 8x64x112x112 ran 3.5x
torch's time). A maximum keeps the flat index ``h*W + w`` of its window's first maximal
element (row-major, a NaN winning over numbers, as the 3-D kernels), which backward,
``return_mask`` and double backward read; backward adds each output's gradient there.
"""
import numpy as np

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


@jitable
def _wins(v, best):
    """Whether element ``v`` replaces a window's running maximum ``best``: it is greater,
    or a NaN where ``best`` is a number (the first NaN wins). Used as a select, not a branch:
    random comparisons of small windows mispredict."""
    return (v > best) | ((v != v) & (best == best))


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
                        take = _wins(v, best)
                        best = v if take else best
                        bi = h * w_n + w if take else bi
                y[p, i, j] = best
                pos[p, i, j] = bi


@jitable
def _max_step(best, bi, v, k, seen):
    """One element ``v`` (flat index ``k``) against a window's running maximum ``best`` at
    ``bi``: it takes the index when greater, or when a NaN not preceded by one (``seen``).
    Branch-free: the index moves arithmetically and ``best`` (only compared with) by
    ``max``; written as selects, numba's LLVM emitted branches, which the random comparisons
    of small windows mispredict (1.5x slower on 2x2x2 windows)."""
    nan = v != v
    take = ((v > best) | nan) & ~seen
    return max(best, v), bi + np.int64(take) * (k - bi), seen | nan


@kernel
def max3d(x, y, pos, bins):
    """``y[p, a, i, j]`` the maximum of volume ``x[p]`` [D, H, W] over the window of output
    (a, i, j) and ``pos`` its flat index ``(d*H + h)*W + w`` (the first maximal element in
    row-major order, a NaN winning); ``bins`` [3, 2, O] int64: per axis the [start, end) of
    each output's window, clipped to the input and not empty (a pool's strided windows or
    adaptive pooling's bins; 1-D and 2-D pools pass leading axes of length 1 with bins
    [0, 1)). The output is read at the index. When every window is a disjoint 2x2x2 block
    (the common pool) the loop runs over seven constant offsets, which compiles unrolled
    (1.6x faster than the general loop nest). Window rows of 8 or more elements take their
    maximum first and are searched only when it beats the window's so far (rarely, in long
    windows: 1.5-1.9x faster there than the branch-free steps, which shorter rows keep).
    Backward is ``max2d_adjoint`` on the flat volumes."""
    n_p, d_n, h_n, w_n = x.shape
    od, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    hw = h_n * w_n
    pair = True
    for ax in range(3):
        for a in range(y.shape[ax + 1]):
            if bins[ax, 0, a] != 2 * a or bins[ax, 1, a] != 2 * a + 2:
                pair = False
    for p in range(n_p):
        xp = x[p].reshape(d_n * hw)
        yp = y[p]
        pp = pos[p]
        if pair:
            for a in range(od):
                for i in range(oh):
                    for j in range(ow):
                        o = (2 * a * h_n + 2 * i) * w_n + 2 * j
                        best = xp[o]
                        bi, seen = o, best != best
                        for k in (1, w_n, w_n + 1, hw, hw + 1, hw + w_n, hw + w_n + 1):
                            best, bi, seen = _max_step(best, bi, xp[o + k], o + k, seen)
                        yp[a, i, j] = xp[bi]
                        pp[a, i, j] = bi
            continue
        for a in range(od):
            da, db = bins[0, 0, a], bins[0, 1, a]
            for i in range(oh):
                ha, hb = bins[1, 0, i], bins[1, 1, i]
                for j in range(ow):
                    wa, wb = bins[2, 0, j], bins[2, 1, j]
                    bi = (da * h_n + ha) * w_n + wa
                    best = xp[bi]
                    seen = best != best
                    long = wb - wa >= 8
                    for d in range(da, db):
                        for h in range(ha, hb):
                            base = d * hw + h * w_n
                            if not long:
                                for w in range(wa, wb):
                                    best, bi, seen = _max_step(best, bi, xp[base + w], base + w, seen)
                            elif not seen:
                                # a long row: its maximum and NaN flag as vectorized reductions,
                                # searched only when it beats the window's maximum so far
                                m = xp[base + wa]
                                nan = False
                                for w in range(wa, wb):
                                    v = xp[base + w]
                                    m = max(m, v)
                                    nan |= v != v
                                if nan or m > best:
                                    for w in range(wa, wb):
                                        v = xp[base + w]
                                        if (v != v) if nan else (v == m):
                                            bi = base + w
                                            break
                                    best, seen = xp[bi], nan
                    yp[a, i, j] = xp[bi]
                    pp[a, i, j] = bi


@kernel
def max2d_bi(x, y, pos, geom):
    """``max2d`` on batch-innermost planes: ``x`` [C, H, W, N], ``y`` and ``pos`` [C, OH, OW,
    N], the batch the innermost loop (one vector of samples per window element: the layout
    of the im2col convolutions' activations, read in place). Same values, indices and
    NaN rule as ``max2d``."""
    kh, kw, sh, sw, pt, pl = geom
    n_c, h_n, w_n, n_b = x.shape
    oh, ow = y.shape[1], y.shape[2]
    for c in range(n_c):
        xc = x[c]
        for i in range(oh):
            ha, hb = _span(i, sh, pt, kh, h_n)
            for j in range(ow):
                wa, wb = _span(j, sw, pl, kw, w_n)
                yo, po = y[c, i, j], pos[c, i, j]
                first = xc[ha, wa]
                for b in range(n_b):
                    yo[b] = first[b]
                    po[b] = ha * w_n + wa
                for h in range(ha, hb):
                    for w in range(wa, wb):
                        if h == ha and w == wa:
                            continue
                        v = xc[h, w]
                        k = h * w_n + w
                        for b in range(n_b):
                            vb, best = v[b], yo[b]
                            take = _wins(vb, best)
                            yo[b] = vb if take else best
                            po[b] = k if take else po[b]


@kernel
def max2d_bi_adjoint(g, pos, gx):
    """``max2d_adjoint`` on batch-innermost planes: ``gx`` [C, H*W, N] (zeroed by the
    caller) gains each ``g`` [C, OH*OW, N] at ``pos`` (the same shape)."""
    n_c, n_o, n_b = g.shape
    for c in range(n_c):
        gc, pc, xc = g[c], pos[c], gx[c]
        for o in range(n_o):
            go, po = gc[o], pc[o]
            for b in range(n_b):
                xc[po[b], b] += go[b]


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
