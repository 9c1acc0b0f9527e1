"""3-D transposed convolution with a 4x4x4 kernel and stride 2 by Winograd F(2, 2) on its
output phases (numpy float32/float64; used by ``conv_phase.phase_transpose_forward``).

Along one axis, output phase r of a kernel of 4 taps at stride 2 is a 2-tap correlation of
the input padded by one leading zero (``xp[q] = x[q - 1]``): phase position j reads ``xp[j]``
and ``xp[j + 1]`` with the taps ``a0 = w[2 + r]`` and ``a1 = w[r]``. Two consecutive positions
(a tile) read a window of three points ``d0, d1, d2``, and F(2, 2) gives them with three
multiplications instead of four:

    v = (d0 - d1, d1, d2 - d1),   u = (a0, a0 + a1, a1),   m = u * v,   y = (m0 + m1, m1 + m2).

Over depth, height and width a tile of 2x2x2 positions of one phase takes 27 products of its
window's transform instead of 64 multiply-adds, so the eight phases are 27 x 8 matrix
products ``V [8, 27, tiles, Cin] @ U [8, 27, Cin, Cout]`` (0.42x the direct multiply-adds).
A phase's tiles start at its first output position, so with an even number of positions per
phase and axis no tile is partly outside the output (a tile past the end is computed and
dropped). Backward: the adjoints of the output and input transforms, ``gM @ U^T`` for the
input gradient and ``V^T @ gM`` for the weight transform's gradient. All of it runs by
blocks of rows of tiles that fit the caches (``W22_BLOCK``).

Arrays (channels-last, C-contiguous, passed flat to the compiled loops): the padded input
``[N, Dp, Hp, Wp, C]``, a block's transformed input and products ``[8, 27, tiles, C]`` (phase
p = (rd*2 + rh)*2 + rw, point k = (kd*3 + kh)*3 + kw, tiles (n, td, th, tw) of the block's
rows (n, td, th)), the output ``[N, OD, OH, OW, C]`` handed out as an NCDHW view.
"""
import itertools

import numpy as np

from .compiled import kernel

# the weight transform per axis, (a0, a1) -> (a0, a0 + a1, a1), over three axes
_G = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
G3 = np.einsum("ad,be,cf->abcdef", _G, _G, _G).reshape(27, 8)


@kernel
def _w22_in(xp, v, geom):
    """The input transform: ``xp`` [N, Dp, Hp, Wp, C] into ``v`` [8, 27, (r1 - r0) * Tw, C]
    (overwritten), the tiles of the rows of tiles (n, td, th) numbered r0 to r1 - 1; phase r's
    tile t along an axis reads the window at ``j_r + 2t`` (``geom`` = (N, C, Dp, Hp, Wp, Td,
    Th, Tw, jd0, jd1, jh0, jh1, jw0, jw1, r0, r1)). Per row of tiles: the width transform per
    tile over its C channels, then height and depth over the row's Tw*C values."""
    n_n, c_n, dp, hp, wp, td_n, th_n, tw_n, jd0, jd1, jh0, jh1, jw0, jw1, r0, r1 = geom
    tl = (r1 - r0) * tw_n
    ln = tw_n * c_n
    a = np.empty((27, ln), xp.dtype)    # after width: [ed, eh, kw]
    for p in range(8):
        jd = jd0 if p < 4 else jd1
        jh = jh0 if (p >> 1) & 1 == 0 else jh1
        jw = jw0 if p & 1 == 0 else jw1
        for n in range(n_n):
            for td in range(td_n):
                for th in range(th_n):
                    rr = (n * td_n + td) * th_n + th
                    if rr < r0 or rr >= r1:        # a row of tiles outside this block
                        continue
                    for e in range(9):
                        r = (((n * dp + jd + 2 * td + e // 3) * hp + jh + 2 * th + e % 3) * wp + jw) * c_n
                        a0, a1, a2 = a[3 * e], a[3 * e + 1], a[3 * e + 2]
                        for tw in range(tw_n):
                            x = xp[r + 2 * tw * c_n:r + (2 * tw + 3) * c_n]
                            f = tw * c_n
                            for c in range(c_n):
                                x1 = x[c_n + c]
                                a0[f + c] = x[c] - x1
                                a1[f + c] = x1
                                a2[f + c] = x[2 * c_n + c] - x1
                    for e in range(9):                 # height, in place, per (ed, kw)
                        i0 = (e // 3) * 9 + e % 3
                        s0, s1, s2 = a[i0], a[i0 + 3], a[i0 + 6]
                        for i in range(ln):
                            s0[i] -= s1[i]
                            s2[i] -= s1[i]
                    o = (p * 27 * tl + (rr - r0) * tw_n) * c_n
                    for e in range(9):                 # depth, stored
                        s0, s1, s2 = a[e], a[e + 9], a[e + 18]
                        v0 = v[o + e * tl * c_n:o + e * tl * c_n + ln]
                        v1 = v[o + (e + 9) * tl * c_n:o + (e + 9) * tl * c_n + ln]
                        v2 = v[o + (e + 18) * tl * c_n:o + (e + 18) * tl * c_n + ln]
                        for i in range(ln):
                            v0[i] = s0[i] - s1[i]
                            v1[i] = s1[i]
                            v2[i] = s2[i] - s1[i]


@kernel
def _w22_in_adj(gv, gxp, geom):
    """The adjoint of ``_w22_in``: ``gv`` [8, 27, (r1 - r0) * Tw, C] added into ``gxp`` [N,
    Dp, Hp, Wp, C]."""
    n_n, c_n, dp, hp, wp, td_n, th_n, tw_n, jd0, jd1, jh0, jh1, jw0, jw1, r0, r1 = geom
    tl = (r1 - r0) * tw_n
    ln = tw_n * c_n
    a = np.empty((27, ln), gv.dtype)
    for p in range(8):
        jd = jd0 if p < 4 else jd1
        jh = jh0 if (p >> 1) & 1 == 0 else jh1
        jw = jw0 if p & 1 == 0 else jw1
        for n in range(n_n):
            for td in range(td_n):
                for th in range(th_n):
                    rr = (n * td_n + td) * th_n + th
                    if rr < r0 or rr >= r1:        # a row of tiles outside this block
                        continue
                    o = (p * 27 * tl + (rr - r0) * tw_n) * c_n
                    for e in range(9):                 # depth: d1 gets -v0 + v1 - v2
                        s0, s1, s2 = a[e], a[e + 9], a[e + 18]
                        v0 = gv[o + e * tl * c_n:o + e * tl * c_n + ln]
                        v1 = gv[o + (e + 9) * tl * c_n:o + (e + 9) * tl * c_n + ln]
                        v2 = gv[o + (e + 18) * tl * c_n:o + (e + 18) * tl * c_n + ln]
                        for i in range(ln):
                            s0[i] = v0[i]
                            s1[i] = v1[i] - v0[i] - v2[i]
                            s2[i] = v2[i]
                    for e in range(9):                 # height
                        i0 = (e // 3) * 9 + e % 3
                        s0, s1, s2 = a[i0], a[i0 + 3], a[i0 + 6]
                        for i in range(ln):
                            s1[i] -= s0[i] + s2[i]
                    for e in range(9):                 # width, into the windows' points
                        r = (((n * dp + jd + 2 * td + e // 3) * hp + jh + 2 * th + e % 3) * wp + jw) * c_n
                        a0, a1, a2 = a[3 * e], a[3 * e + 1], a[3 * e + 2]
                        for tw in range(tw_n):
                            g = gxp[r + 2 * tw * c_n:r + (2 * tw + 3) * c_n]
                            f = tw * c_n
                            for c in range(c_n):
                                g[c] += a0[f + c]
                                g[c_n + c] += a1[f + c] - a0[f + c] - a2[f + c]
                                g[2 * c_n + c] += a2[f + c]


@kernel
def _w22_out(m, y, geom):
    """The output transform and the phase interleave: the products ``m`` [8, 27, (r1 - r0) *
    Tw, C] of the rows of tiles r0 to r1 - 1 into their positions of ``y`` [N, OD, OH, OW, C]
    (each written once); phase r's position j is output ``2j + r - p0`` (``geom`` = (N, C, OD,
    OH, OW, Td, Th, Tw, jd0, jd1, jh0, jh1, jw0, jw1, p0d, p0h, p0w, r0, r1)). Depth and height
    over rows of tiles, then width per tile."""
    n_n, c_n, od, oh, ow, td_n, th_n, tw_n, jd0, jd1, jh0, jh1, jw0, jw1, pd, ph, pw, r0, r1 = geom
    tl = (r1 - r0) * tw_n
    ln = tw_n * c_n
    a = np.empty((18, ln), m.dtype)     # after depth: [2, kh, kw]
    b = np.empty((12, ln), m.dtype)     # after height: [2, 2, kw]
    for p in range(8):
        rd, rh, rw = p >> 2, (p >> 1) & 1, p & 1
        jd = jd0 if rd == 0 else jd1
        jh = jh0 if rh == 0 else jh1
        x0 = 2 * (jw0 if rw == 0 else jw1) + rw - pw
        for n in range(n_n):
            for td in range(td_n):
                z0 = 2 * (jd + 2 * td) + rd - pd
                for th in range(th_n):
                    rr = (n * td_n + td) * th_n + th
                    if rr < r0 or rr >= r1:        # a row of tiles outside this block
                        continue
                    y0 = 2 * (jh + 2 * th) + rh - ph
                    o = (p * 27 * tl + (rr - r0) * tw_n) * c_n
                    for e in range(9):
                        m0 = m[o + e * tl * c_n:o + e * tl * c_n + ln]
                        m1 = m[o + (e + 9) * tl * c_n:o + (e + 9) * tl * c_n + ln]
                        m2 = m[o + (e + 18) * tl * c_n:o + (e + 18) * tl * c_n + ln]
                        s0, s1 = a[e], a[e + 9]
                        for i in range(ln):
                            s0[i] = m0[i] + m1[i]
                            s1[i] = m1[i] + m2[i]
                    for e in range(6):
                        i0 = (e // 3) * 9 + e % 3
                        j0 = (e // 3) * 6 + e % 3
                        s0, s1, s2 = a[i0], a[i0 + 3], a[i0 + 6]
                        b0, b1 = b[j0], b[j0 + 3]
                        for i in range(ln):
                            b0[i] = s0[i] + s1[i]
                            b1[i] = s1[i] + s2[i]
                    for e in range(4):
                        z = z0 + 2 * (e >> 1)
                        yy = y0 + 2 * (e & 1)
                        if z >= od or yy >= oh:
                            continue
                        row = ((n * od + z) * oh + yy) * ow
                        c0, c1, c2 = b[3 * e], b[3 * e + 1], b[3 * e + 2]
                        for tw in range(tw_n):
                            x = x0 + 4 * tw
                            f = tw * c_n
                            if x < ow:
                                yr = y[(row + x) * c_n:(row + x + 1) * c_n]
                                for c in range(c_n):
                                    yr[c] = c0[f + c] + c1[f + c]
                            if x + 2 < ow:
                                yr = y[(row + x + 2) * c_n:(row + x + 3) * c_n]
                                for c in range(c_n):
                                    yr[c] = c1[f + c] + c2[f + c]


@kernel
def _w22_out_adj(gy, gm, geom):
    """The adjoint of ``_w22_out``: the output gradient ``gy`` [N, OD, OH, OW, C] into ``gm``
    [8, 27, (r1 - r0) * Tw, C] (overwritten; positions past the output read as zero)."""
    n_n, c_n, od, oh, ow, td_n, th_n, tw_n, jd0, jd1, jh0, jh1, jw0, jw1, pd, ph, pw, r0, r1 = geom
    tl = (r1 - r0) * tw_n
    ln = tw_n * c_n
    b = np.empty((12, ln), gm.dtype)    # [2, 2, kw]
    a = np.empty((18, ln), gm.dtype)    # [2, kh, kw]
    for p in range(8):
        rd, rh, rw = p >> 2, (p >> 1) & 1, p & 1
        jd = jd0 if rd == 0 else jd1
        jh = jh0 if rh == 0 else jh1
        x0 = 2 * (jw0 if rw == 0 else jw1) + rw - pw
        for n in range(n_n):
            for td in range(td_n):
                z0 = 2 * (jd + 2 * td) + rd - pd
                for th in range(th_n):
                    rr = (n * td_n + td) * th_n + th
                    if rr < r0 or rr >= r1:        # a row of tiles outside this block
                        continue
                    y0 = 2 * (jh + 2 * th) + rh - ph
                    for e in range(4):                 # width: (g0, g0 + g1, g1)
                        z = z0 + 2 * (e >> 1)
                        yy = y0 + 2 * (e & 1)
                        c0, c1, c2 = b[3 * e], b[3 * e + 1], b[3 * e + 2]
                        if z >= od or yy >= oh:
                            c0[:] = 0
                            c1[:] = 0
                            c2[:] = 0
                            continue
                        row = ((n * od + z) * oh + yy) * ow
                        for tw in range(tw_n):
                            x = x0 + 4 * tw
                            f = tw * c_n
                            if x < ow:
                                g0 = gy[(row + x) * c_n:(row + x + 1) * c_n]
                                for c in range(c_n):
                                    c0[f + c] = g0[c]
                            else:
                                c0[f:f + c_n] = 0
                            if x + 2 < ow:
                                g1 = gy[(row + x + 2) * c_n:(row + x + 3) * c_n]
                                for c in range(c_n):
                                    c2[f + c] = g1[c]
                            else:
                                c2[f:f + c_n] = 0
                        for i in range(ln):
                            c1[i] = c0[i] + c2[i]
                    for e in range(6):                 # height
                        i0 = (e // 3) * 9 + e % 3
                        j0 = (e // 3) * 6 + e % 3
                        b0, b1 = b[j0], b[j0 + 3]
                        s0, s1, s2 = a[i0], a[i0 + 3], a[i0 + 6]
                        for i in range(ln):
                            s0[i] = b0[i]
                            s1[i] = b0[i] + b1[i]
                            s2[i] = b1[i]
                    o = (p * 27 * tl + (rr - r0) * tw_n) * c_n
                    for e in range(9):                 # depth, stored
                        s0, s1 = a[e], a[e + 9]
                        g0 = gm[o + e * tl * c_n:o + e * tl * c_n + ln]
                        g1 = gm[o + (e + 9) * tl * c_n:o + (e + 9) * tl * c_n + ln]
                        g2 = gm[o + (e + 18) * tl * c_n:o + (e + 18) * tl * c_n + ln]
                        for i in range(ln):
                            g0[i] = s0[i]
                            g1[i] = s0[i] + s1[i]
                            g2[i] = s1[i]


def usable(x, w, s, d, groups):
    """Whether ``x`` [N, Cin, D, H, W] and ``w`` [Cin, Cout, 4, 4, 4] at stride 2 take these
    phases: numpy float32/float64 of one dtype, one group, dilation 1 and at least
    ``W22_MIN_C`` channels in and out (with fewer the 216 products are too thin for the
    transforms' cost)."""
    return (x.ndim == 5 and type(x) is np.ndarray and type(w) is np.ndarray and x.dtype == w.dtype and
            x.dtype in (np.float32, np.float64) and tuple(w.shape[2:]) == (4, 4, 4) and tuple(s) == (2, 2, 2) and
            tuple(d) == (1, 1, 1) and groups == 1 and min(x.shape[1], w.shape[1]) >= W22_MIN_C)


# Forward + backward, padding 1, Cin = Cout, float32, 1 thread, thread CPU time, against torch,
# these phases / the path taken without them (the phases' column products, or F(4x4, 3x3)
# phases from 16^3 at 16 channels): [1, 32, 10^3] 0.97 / 1.76, [1, 64, 8^3] 1.15 / 1.70,
# [8, 16, 6^3] 0.98 / 1.46, [2, 16, 16^3] 1.09 / 1.32, [1, 16, 16^3] 1.18 / 1.44, [2, 32, 16^3]
# 0.93 / 1.11, [1, 64, 16^3] 0.85 / 1.07, [4, 32, 16^3] 0.84 / 1.18, [1, 32, 24^3] 0.80 / 1.03,
# 8 channels: [2, 8, 20^3] 0.86 / 1.07, [4, 8, 16^3] 0.80 / 0.95, [1, 8, 32^3] 0.87 / 1.10,
# [2, 8, 8^3] 0.64 / 0.68; 4 channels [4, 4, 12^3] 0.99 / 0.48, 3 channels [2, 3, 32^3] 1.56 / 1.24
# (the column products with whole columns; by depth blocks 0.40 and 0.84).
W22_MIN_C = 8


def _geometry(sp, p0, out):
    """Per axis the first phase positions (j0, j1), the tiles per phase and the padded size."""
    jf, tiles, pads = [], [], []
    for i in range(3):
        j = [(p0[i] - r + 1) // 2 for r in (0, 1)]
        cnt = [(p0[i] + out[i] - 1 - r) // 2 - j[r] + 1 for r in (0, 1)]
        t = max(1, -(-max(cnt) // 2))
        jf.append(j)
        tiles.append(t)
        pads.append(max(max(j) + 2 * t + 1, sp[i] + 1))
    return jf, tiles, pads


_W_INDEX = {}


def _weight_index(w_shape):
    """Flat indices into ``w`` [Cin, Cout, 4, 4, 4] giving the phases' taps [8, 8, Cin, Cout]
    (phase (rd, rh, rw), tap (ud, uh, uw): kernel position 2 * (1 - u) + r per axis), and
    their inverse. Cached per shape."""
    hit = _W_INDEX.get(tuple(w_shape))
    if hit is None:
        cin, cout = w_shape[:2]
        ar = np.arange(int(np.prod(w_shape))).reshape(w_shape)
        idx = np.empty((8, 8, cin, cout), np.intp)
        for p, (rd, rh, rw) in enumerate(np.ndindex(2, 2, 2)):
            for t, (ud, uh, uw) in enumerate(np.ndindex(2, 2, 2)):
                idx[p, t] = ar[:, :, 2 * (1 - ud) + rd, 2 * (1 - uh) + rh, 2 * (1 - uw) + rw]
        idx = idx.ravel()
        inv = np.empty(idx.size, np.intp)
        inv[idx] = np.arange(idx.size)
        if len(_W_INDEX) >= 64:
            _W_INDEX.clear()
        hit = _W_INDEX[tuple(w_shape)] = (idx, inv)
    return hit


def _phase_taps(w):
    """``w`` [Cin, Cout, 4, 4, 4] as the phases' taps [8, 8, Cin*Cout] (``_weight_index``'s
    order) by one transposing copy: kernel position 2 * a + r per axis with a = 1 - u, so the
    axes (a, r) of each are split and reordered, a reversed (numpy's gather by 8-byte indices
    ran 1.2-1.3x slower)."""
    cin, cout = w.shape[:2]
    out = np.empty((2,) * 6 + (cin, cout), w.dtype)
    out[...] = w.reshape(cin, cout, 2, 2, 2, 2, 2, 2).transpose(3, 5, 7, 2, 4, 6, 0, 1)[:, :, :, ::-1, ::-1, ::-1]
    return out.reshape(8, 8, cin * cout)


# From this many weight values per tap (Cin*Cout) the adjoint of ``_phase_taps`` takes one
# copy per tap (contiguous reads, writes 64 values apart): [64, 64] 0.26 ms against 0.69 for
# the inverse gather, [128, 128] 1.0 against 2.9; [16, 16] 0.044 against 0.013 (the 64 calls).
W22_TAP_COPIES_MIN = 1024


def _phase_taps_adjoint(g8, w_shape):
    """The weight [Cin, Cout, 4, 4, 4] whose ``_phase_taps`` are ``g8`` [8, 8, Cin*Cout]."""
    cc = int(w_shape[0]) * int(w_shape[1])
    if cc < W22_TAP_COPIES_MIN:
        return np.take(g8.reshape(-1), _weight_index(w_shape)[1]).reshape(w_shape)
    out = np.empty((cc,) + (2,) * 6, g8.dtype)
    g = g8.reshape((2,) * 6 + (cc,))
    for rd, rh, rw, ud, uh, uw in itertools.product(range(2), repeat=6):
        out[:, 1 - ud, rd, 1 - uh, rh, 1 - uw, rw] = g[rd, rh, rw, ud, uh, uw]
    return out.reshape(w_shape)


def _blocks(rows, tw, c):
    """Ranges of tile rows (``tw`` tiles each) of about ``W22_BLOCK`` values per channel
    column (tiles * channels), at least ``W22_BLOCK_MIN_TILES`` tiles (and one row)."""
    step = max(W22_BLOCK // (tw * c), -(-W22_BLOCK_MIN_TILES // tw), 1)
    return [(r, min(rows, r + step)) for r in range(0, rows, step)]


# Each block's tiles go through the input transform, the 216 products and the output
# transform (backward: the output transform's adjoint, both products and the input
# transform's adjoint) while its transformed values, ~1 MB at float32 (216 * W22_BLOCK
# values), are in cache. Forward + backward against torch, blocks of 512 / 1024 / 2048 /
# 8192 / one block: [2, 16, 16^3] 1.31 / 1.09 / 1.13 / 1.42 / 1.42, [1, 16, 16^3] 1.36 / 1.18
# / 1.21 / - / -, [2, 32, 16^3] - / - / - / 0.97 / 1.32, [1, 32, 24^3] - / 0.80 / 0.75 / - /
# 1.50 (float32, 1 thread, thread CPU time); at [1, 32, 10^3] and [8, 16, 6^3] 0.97-1.07 and
# 0.98-1.11 throughout.
W22_BLOCK = 1024
# Backward sums the weight transform's gradient over the blocks (216 * Cin * Cout values a
# block): with many channels, blocks of a few tiles made that sum cost more than the products
# ([1, 128, 8^3] 128 -> 128 in blocks of 8 tiles: 1.69x torch).
W22_BLOCK_MIN_TILES = 64


def forward(x, w, p0, out):
    """The transposed convolution of ``x`` [N, Cin, D, H, W] with ``w`` [Cin, Cout, 4, 4, 4],
    stride 2, leading crop ``p0``, to ``out``: the output [N, Cout, *out] (a view of a
    channels-last [N, *out, Cout] array) and the state ``backward`` takes."""
    n, cin = x.shape[:2]
    cout = w.shape[1]
    sp = x.shape[2:]
    jf, tiles, pads = _geometry(sp, p0, out)
    xp = np.zeros((n,) + tuple(pads) + (cin,), x.dtype)
    xp[:, 1:1 + sp[0], 1:1 + sp[1], 1:1 + sp[2]] = x.transpose(0, 2, 3, 4, 1)
    geo = tuple(tiles) + tuple(jf[0]) + tuple(jf[1]) + tuple(jf[2])
    g_in = (n, cin) + tuple(pads) + geo
    g_out = (n, cout) + tuple(out) + geo + tuple(p0)
    w8 = _phase_taps(w)
    u = np.matmul(G3.astype(w.dtype), w8).reshape(8, 27, cin, cout)
    y = np.empty((n,) + tuple(out) + (cout,), x.dtype)
    blocks = _blocks(n * tiles[0] * tiles[1], tiles[2], max(cin, cout))
    vs = []
    for r0, r1 in blocks:
        v = np.empty((8, 27, (r1 - r0) * tiles[2], cin), x.dtype)
        _w22_in(xp.reshape(-1), v.reshape(-1), g_in + (r0, r1))
        m = np.matmul(v, u)                                                 # [8, 27, tiles, Cout]
        _w22_out(m.reshape(-1), y.reshape(-1), g_out + (r0, r1))
        vs.append(v)
    return y.transpose(0, 4, 1, 2, 3), (vs, blocks, u, w.shape, x.shape, g_in, g_out)


def backward(gy, state, need_x, need_w):
    """The gradients of ``forward`` (x's [N, Cin, D, H, W] as a view, w's [Cin, Cout, 4, 4,
    4]) for the output gradient ``gy`` [N, Cout, *out]."""
    vs, blocks, u, w_shape, xs, g_in, g_out = state
    cin, cout = w_shape[:2]
    dt = u.dtype
    g = np.ascontiguousarray(gy.transpose(0, 2, 3, 4, 1), dtype=dt)          # [N, *out, Cout]
    gu = gxp = ut = None
    if need_x:
        # U^T copied first unless the products are short: numpy's product with the transposed
        # view ran 1.4-1.6x slower from 32 rows on, 0.4-0.6x the copy and product at 8-16 rows
        ut = u.transpose(0, 1, 3, 2)
        ut = ut if sum(v.shape[2] for v in vs) <= 16 else np.ascontiguousarray(ut)
        gxp = np.zeros((xs[0],) + tuple(g_in[2:5]) + (cin,), dt)
    for (r0, r1), v in zip(blocks, vs):
        gm = np.empty(v.shape[:3] + (cout,), dt)
        _w22_out_adj(g.reshape(-1), gm.reshape(-1), g_out + (r0, r1))
        if need_w:
            t = np.matmul(v.transpose(0, 1, 3, 2), gm)                       # [8, 27, Cin, Cout]
            if gu is None:
                gu = t
            else:
                gu += t
        if need_x:
            gv = np.matmul(gm, ut)                                           # [8, 27, tiles, Cin]
            _w22_in_adj(gv.reshape(-1), gxp.reshape(-1), g_in + (r0, r1))
    gx = gw = None
    if need_w:
        gw8 = np.matmul(G3.T.astype(dt), gu.reshape(8, 27, cin * cout))         # [8, 8, Cin*Cout]
        gw = _phase_taps_adjoint(gw8, w_shape)
    if need_x:
        gx = gxp[:, 1:1 + xs[2], 1:1 + xs[3], 1:1 + xs[4]].transpose(0, 4, 1, 2, 3)
    return gx, gw
