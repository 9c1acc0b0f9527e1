"""A multi-head attention of up to a few hundred positions, forward and backward, one
compiled call each (numpy float32, the attention op's heads path, ``Attention._fuses``
says where): an additive mask read through its broadcast strides, the causal mask's zero
weights skipped.

Per batch row and head, the scores ``q k^T`` (``[Lq, Lk]``), their softmax, the dropout and
the product with the values run back to back on one head's slices while they sit in L1/L2,
by the register tiles of ``gemm_kernels``; the heads are read from and written to the
``[batch, L, heads * d]`` projections in place (a head is a column range: the tiles take
the inner range ``k0:k1`` and the output's column offset), so nothing is split, copied or
merged. Only each head's ``k`` (forward) and ``v`` (backward) are transposed, into a
scratch block that stays in L1, for the tiles' row-wise right-hand side (transposing a
whole batch row's ``[L, heads * d]`` at once wrote past L1: at heads of 192 the transposes
took a seventh of the time).

The weights ``p`` (``[B, heads, Lq, Lk]``, 10 MB at 16 x 4 heads x 200 x 200) are written by
the forward and read back by the backward long after, from memory: the forward's softmax
prefetches the next head's block before the scores product writes it, and the backward reads
each head's weights row by row a few rows behind a prefetch, then takes ``dv = p^T g`` while
they are still in cache (read first, column-wise and cold, that product ran at a third of
its speed in a training step; 128-wide, S 200: backward 22.2 -> 18.5 ms, forward 13.0 -> 12.0).

numpy's matmul runs such a stack as one BLAS call per head: at 32 positions and heads of
64 each product is ~65k multiply-adds and the calls' overhead, the strided heads and the
passes over the whole weights array between the products cost about as much as the
arithmetic (forward + backward ran at ~55 GFLOP/s in a training step).
"""
import numba
import numpy as np

from .compiled import I0, NO, YES, _register_helpers
from .gemm_kernels import _OPTS, _T1, _T8, _TT1, _TT8, _tile, as_float32, prefetch, row_max8, transpose32
from .softmax_kernels import exp_parts

_register_helpers()     # exp_parts, callable from the kernels below
_F = np.float32
_ZERO, _ONE = _F(0.0), _F(1.0)
_U8, _UT8 = _tile(8, False, masked=False), _tile(8, True, masked=False)   # whole 16-column blocks
# whole 8-column blocks: the last block of a head 8 past a multiple of 16 wide (8, 24, 40, ...),
# which the masked tiles took on AVX2 at up to twice their time (heads of 24: the backward in a
# training step 11.7 ms against 9.4 at heads of 32)
_H8, _HT8 = _tile(8, False, lanes=8, masked=False), _tile(8, True, lanes=8, masked=False)


#: what a causal attention's products leave out (``_product``'s ``limit``): nothing; the
#: output's columns past a row tile's last allowed key; the inner keys past it; the inner
#: queries before a key tile's first
_ALL, _COLS, _KEYS, _QUERIES = 0, 1, 2, 3

#: how many rows ahead the backward prefetches the weights it reads row by row (written by the
#: forward long before, they come from memory)
_AHEAD = 3


@numba.njit(**_OPTS)
def _product(a, a_t, x, out, rows, b0, cols, k0, k1, xoff, limit, c):
    """``out[:rows, b0:b0+cols] = A[:rows, k0:k1] @ X[k0:k1, b0:b0+cols]`` with ``A = a`` or,
    where ``a_t``, ``a.T``, and row k of X at ``x``'s element ``xoff + k * x.shape[1]``;
    8-row tiles; rows past the last 8 by one more 8-row tile over the last 8 rows (those
    it repeats are written again with the same values: the products overwrite ``out``), and
    fewer than 8 rows one at a time (a 1-row tile makes one multiply-add per value of X it
    loads: at 10 or 20 positions the tails ran 1.2-1.6x numpy's time).

    A causal attention (query i sees keys j <= i + c) skips what is zero or not wanted, per
    row tile (rows r0..r1-1): ``limit`` ``_COLS`` computes the columns below ``r1 + c`` only
    (the rest of those rows left as they are), ``_KEYS`` the inner range below ``k0 + r1 +
    c``, ``_QUERIES`` (rows are keys, the inner index queries) the inner range from ``k0 +
    r0 - c``."""
    last = rows - 8 if rows % 8 else -1       # the overlapping tile's first row, or none
    r8 = rows - rows % 8
    height = 8 if rows >= 8 else 1
    tiles = r8 // 8 + (1 if last > 0 else 0) if rows >= 8 else rows
    for j0 in range(0, cols, 16):
        for t in range(tiles):
            i = t if rows < 8 else (8 * t if t < r8 // 8 else last)
            kk0, kk1, cl = k0, k1, cols
            if limit == _COLS:
                cl = min(cols, i + height + c)
            elif limit == _KEYS:
                kk1 = min(k1, k0 + i + height + c)
            elif limit == _QUERIES:
                kk0 = max(k0, k0 + i - c)
            if j0 >= cl:
                continue
            nb = min(16, cl - j0)
            b = b0 + j0
            if height == 1:
                if a_t:
                    _TT1(a, x, out, i, i, b, nb, kk0, kk1, xoff, 0)
                else:
                    _T1(a, x, out, i, i, b, nb, kk0, kk1, xoff, 0)
            elif nb == 16:
                if a_t:
                    _UT8(a, x, out, i, i, b, nb, kk0, kk1, xoff, 0)
                else:
                    _U8(a, x, out, i, i, b, nb, kk0, kk1, xoff, 0)
            elif nb == 8:
                if a_t:
                    _HT8(a, x, out, i, i, b, nb, kk0, kk1, xoff, 0)
                else:
                    _H8(a, x, out, i, i, b, nb, kk0, kk1, xoff, 0)
            elif a_t:
                _TT8(a, x, out, i, i, b, nb, kk0, kk1, xoff, 0)
            else:
                _T8(a, x, out, i, i, b, nb, kk0, kk1, xoff, 0)


@numba.njit(**_OPTS)
def _softmax_rows(s, scale, ahead, at):
    """``s = softmax(scale * s)`` over each row, in place (the ``exp`` of
    ``softmax_kernels``, the maximum by ``row_max8``). With ``at >= 0``,
    row i also prefetches ``s.size`` elements of ``ahead`` from flat element ``at``, its
    share of them (the next head's weights: the scores product then writes to lines in
    cache rather than waits for each one to come from memory)."""
    n = s.shape[1]
    sc = _F(scale)
    for i in range(s.shape[0]):
        row = s[i]
        if at >= 0:
            for j in range(at + i * n, at + (i + 1) * n, 16):
                prefetch(ahead, j)
        m = row_max8(row) * sc
        t = _ZERO
        for j in range(n):      # exp as e * 2**k, 2**k from its bits: one loop that vectorizes
            e, b = exp_parts(row[j] * sc - m)
            v = e * as_float32(b)
            row[j] = v
            t += v
        inv = _ONE / t
        for j in range(n):
            row[j] *= inv


@numba.njit(**_OPTS)
def forward(q, k, v, heads, scale, mask, mstrides, causal, keep, p, pd, out):
    """``out = merge(dropout(softmax(q k^T * scale [+ mask])) v)`` per batch row and head:
    ``q`` ``[B, Lq, heads * d]``, ``k`` ``[B, Lk, heads * d]``, ``v`` ``[B, Lk, heads * dv]``;
    ``p`` ``[B, heads, Lq, Lk]`` gets the weights, ``pd`` (``p`` itself where ``keep`` is
    empty) the weights times ``keep`` (dropout's keep-and-upscale factors, ``p``'s shape),
    ``out`` ``[B, Lq, heads * dv]`` the values. All C-contiguous float32. ``mask``: empty,
    or the additive mask's values, flat, element ``[b, h, i, j]`` of its broadcast to
    ``p``'s shape at ``b * mstrides[0] + h * mstrides[1] + i * mstrides[2] + j *
    mstrides[3]`` (0 along a broadcast axis). ``causal`` ``c >= 0``: the mask is the causal
    one, -big where key ``j > i + c`` (``c = Lk - Lq``), whose weights are exactly 0: the
    products skip those scores (set to 0 before the mask is added, as the numpy path's row
    blocks leave them) and those keys; ``-1``: none."""
    B, Lq, E = q.shape
    Lk = k.shape[1]
    d, dv = E // heads, v.shape[2] // heads
    drop = keep.size > 0
    masked = mask.size > 0
    ms3 = mstrides[3]
    sc = _F(scale)
    kt = np.empty((d, Lk), np.float32)
    for b in range(B):
        qb, vb, ob = q[b], v[b], out[b]
        for h in range(heads):
            s = p[b, h]
            transpose32(k[b][:, h * d:h * d + d], kt)     # this head's k^T, its rows numbered from h * d
            lim = _ALL if causal < 0 else _COLS
            _product(qb, NO, kt, s, Lq, I0, Lk, h * d, h * d + d, -h * d * Lk, lim, causal)
            if causal >= 0:
                for i in range(Lq):
                    for j in range(i + causal + 1, Lk):
                        s[i, j] = _F(0.0)
            at = (b * heads + h + 1) * Lq * Lk if b * heads + h + 1 < B * heads else -1     # the next head's weights
            if masked:      # scaled, then the mask added (as the numpy path rounds it)
                for i in range(Lq):
                    row = s[i]
                    m0 = b * mstrides[0] + h * mstrides[1] + i * mstrides[2]
                    for j in range(Lk):
                        row[j] = row[j] * sc + mask[m0 + j * ms3]
                _softmax_rows(s, 1.0, p, at)
            else:
                _softmax_rows(s, scale, p, at)
            w = s
            if drop:
                w = pd[b, h]
                kb = keep[b, h]
                for i in range(Lq):
                    for j in range(Lk):
                        w[i, j] = s[i, j] * kb[i, j]
            _product(w, NO, vb, ob, Lq, h * dv, dv, I0, Lk, I0, _ALL if causal < 0 else _KEYS, causal)


@numba.njit(**_OPTS)
def backward(q, k, v, g, gp, heads, scale, causal, p, pd, keep, dq, dk, dv, need_q, need_k, need_v):
    """The gradients of ``forward``'s q, k and v from ``g`` (the values' gradient, ``[B, Lq,
    heads * dv]``) and ``gp`` (the weights' gradient, ``p``'s shape, or empty): ``dv = pd^T
    g``, ``ds = p * (dp - sum(dp * p)) * scale`` with ``dp = (g v^T + gp) * keep``, ``dq = ds
    k``, ``dk = ds^T q``, each per head into its columns of ``dq``/``dk``/``dv`` (arrays of
    q's, k's and v's shapes, written where ``need_*``); ``causal`` as ``forward``'s (the
    weights, and so ``ds``, are 0 past each query's last key)."""
    B, Lq, E = q.shape
    Lk = k.shape[1]
    d, dvh = E // heads, v.shape[2] // heads
    drop = keep.size > 0
    with_gp = gp.size > 0
    vt = np.empty((dvh, Lk), np.float32)
    ds = np.empty((Lq, Lk), np.float32)
    sc = _F(scale)
    cols, keys, queries = (_ALL, _ALL, _ALL) if causal < 0 else (_COLS, _KEYS, _QUERIES)
    for b in range(B):
        gb = g[b]
        for h in range(heads):
            if not (need_q or need_k):
                if need_v:
                    _product(pd[b, h], YES, gb, dv[b], Lk, h * dvh, dvh, I0, Lq, I0, queries, causal)
                continue
            transpose32(v[b][:, h * dvh:h * dvh + dvh], vt)     # this head's v^T, rows numbered from h * dvh
            _product(gb, NO, vt, ds, Lq, I0, Lk, h * dvh, h * dvh + dvh, -h * dvh * Lk, cols, causal)
            pb = p[b, h]
            for i in range(Lq):
                row, prow = ds[i], pb[i]
                n = Lk if causal < 0 else min(Lk, i + causal + 1)    # past n: weights 0, ds 0
                if i + _AHEAD < Lq:     # the rows _AHEAD on that this loop reads, on their way from memory
                    at = ((b * heads + h) * Lq + i + _AHEAD) * Lk      # flat, in p's shape
                    for j in range(at, at + Lk, 16):
                        prefetch(p, j)
                        if drop:        # and the weights after dropout, read by dv's product next
                            prefetch(keep, j)
                            prefetch(pd, j)
                        if with_gp:
                            prefetch(gp, j)
                if with_gp:
                    gr = gp[b, h, i]
                    for j in range(n):
                        row[j] += gr[j]
                if drop:
                    kr = keep[b, h, i]
                    for j in range(n):
                        row[j] *= kr[j]
                t = 0.0
                for j in range(n):
                    t += row[j] * prow[j]
                t32 = _F(t)
                for j in range(n):
                    row[j] = prow[j] * (row[j] - t32) * sc
                for j in range(n, Lk):
                    row[j] = _F(0.0)
            if need_v:      # after the rows above read the weights in order: they are in cache now
                _product(pd[b, h], YES, gb, dv[b], Lk, h * dvh, dvh, I0, Lq, I0, queries, causal)
            if need_q:
                _product(ds, NO, k[b], dq[b], Lq, h * d, d, I0, Lk, I0, keys, causal)
            if need_k:
                _product(ds, YES, q[b], dk[b], Lk, h * d, d, I0, Lq, I0, queries, causal)
