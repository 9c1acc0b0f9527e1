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
products ``U [8, 27, Cout, Cin] @ V [8, 27, Cin, N*tiles]`` (0.42x the direct multiply-adds).
A phase's tiles start at its first output position, so with an even number of positions per
phase and axis no tile is partly outside the output (a tile past the end is computed and
dropped). Backward: the adjoints of the output and input transforms, ``U^T @ gM`` for the
input gradient and ``gM @ V^T`` for the weight transform's gradient.

Arrays: the padded input ``[N, C, Dp, Hp, Wp]``, the transformed input and the products
``[8, 27, C, N, Td, Th, Tw]`` (phase p = (rd*2 + rh)*2 + rw, point k = (kd*3 + kh)*3 + kw),
the output NCDHW, all C-contiguous and passed flat to the compiled loops.
"""
import numpy as np

from .compiled import jitable, kernel

# the weight transform per axis, (a0, a1) -> (a0, a0 + a1, a1), over three axes
_G = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
G3 = np.einsum("ad,be,cf->abcdef", _G, _G, _G).reshape(27, 8)


@jitable
def _tile(geom, p, td, th, tw):
    """Phase p's tile (td, th, tw): its window's first (depth, height, width) position."""
    jd = geom[8] if p < 4 else geom[9]
    jh = geom[10] if (p >> 1) & 1 == 0 else geom[11]
    jw = geom[12] if p & 1 == 0 else geom[13]
    return jd + 2 * td, jh + 2 * th, jw + 2 * tw


@kernel
def _w22_in(xp, v, geom):
    """The input transform: ``xp`` [N, Dp, Hp, Wp, C] into ``v`` [8, 27, N, Td, Th, Tw, C]
    (overwritten); phase r's tile t along an axis reads the window at ``j_r + 2t`` (``geom`` =
    (N, C, Dp, Hp, Wp, Td, Th, Tw, jd0, jd1, jh0, jh1, jw0, jw1)). Every step is a pass over
    the C channels of a point."""
    n_n, c_n, dp, hp, wp, td_n, th_n, tw_n = geom[:8]
    tl = n_n * td_n * th_n * tw_n
    s = np.empty((27, c_n), xp.dtype)
    for p in range(8):
        for n in range(n_n):
            for td in range(td_n):
                for th in range(th_n):
                    for tw in range(tw_n):
                        d0, h0, w0 = _tile(geom, p, td, th, tw)
                        for e in range(9):          # width, per (depth, height) point
                            q = (((n * dp + d0 + e // 3) * hp + h0 + e % 3) * wp + w0) * c_n
                            x0, x1, x2 = xp[q:q + c_n], xp[q + c_n:q + 2 * c_n], xp[q + 2 * c_n:q + 3 * c_n]
                            s0, s1, s2 = s[3 * e], s[3 * e + 1], s[3 * e + 2]
                            for c in range(c_n):
                                s0[c] = x0[c] - x1[c]
                                s1[c] = x1[c]
                                s2[c] = x2[c] - x1[c]
                        for e in range(9):          # height, per (depth, width)
                            i = (e // 3) * 9 + e % 3
                            s0, s1, s2 = s[i], s[i + 3], s[i + 6]
                            for c in range(c_n):
                                s0[c] -= s1[c]
                                s2[c] -= s1[c]
                        t = ((n * td_n + td) * th_n + th) * tw_n + tw
                        for e in range(9):          # depth, per (height, width), stored
                            s0, s1, s2 = s[e], s[e + 9], s[e + 18]
                            o = ((p * 27 + e) * tl + t) * c_n
                            v0 = v[o:o + c_n]
                            v1 = v[o + 9 * tl * c_n:o + 9 * tl * c_n + c_n]
                            v2 = v[o + 18 * tl * c_n:o + 18 * tl * c_n + c_n]
                            for c in range(c_n):
                                v0[c] = s0[c] - s1[c]
                                v1[c] = s1[c]
                                v2[c] = s2[c] - s1[c]


@kernel
def _w22_in_adj(gv, gxp, geom):
    """The adjoint of ``_w22_in``: ``gv`` [8, 27, N, Td, Th, Tw, C] added into ``gxp`` [N, Dp,
    Hp, Wp, C]."""
    n_n, c_n, dp, hp, wp, td_n, th_n, tw_n = geom[:8]
    tl = n_n * td_n * th_n * tw_n
    s = np.empty((27, c_n), gv.dtype)
    for p in range(8):
        for n in range(n_n):
            for td in range(td_n):
                for th in range(th_n):
                    for tw in range(tw_n):
                        d0, h0, w0 = _tile(geom, p, td, th, tw)
                        t = ((n * td_n + td) * th_n + th) * tw_n + tw
                        for e in range(9):          # depth: d1 gets -v0 + v1 - v2
                            o = ((p * 27 + e) * tl + t) * c_n
                            v0 = gv[o:o + c_n]
                            v1 = gv[o + 9 * tl * c_n:o + 9 * tl * c_n + c_n]
                            v2 = gv[o + 18 * tl * c_n:o + 18 * tl * c_n + c_n]
                            s0, s1, s2 = s[e], s[e + 9], s[e + 18]
                            for c in range(c_n):
                                s0[c] = v0[c]
                                s1[c] = v1[c] - v0[c] - v2[c]
                                s2[c] = v2[c]
                        for e in range(9):          # height
                            i = (e // 3) * 9 + e % 3
                            s0, s1, s2 = s[i], s[i + 3], s[i + 6]
                            for c in range(c_n):
                                s1[c] -= s0[c] + s2[c]
                        for e in range(9):          # width, into the window's points
                            q = (((n * dp + d0 + e // 3) * hp + h0 + e % 3) * wp + w0) * c_n
                            g0, g1, g2 = gxp[q:q + c_n], gxp[q + c_n:q + 2 * c_n], gxp[q + 2 * c_n:q + 3 * c_n]
                            s0, s1, s2 = s[3 * e], s[3 * e + 1], s[3 * e + 2]
                            for c in range(c_n):
                                g0[c] += s0[c]
                                g1[c] += s1[c] - s0[c] - s2[c]
                                g2[c] += s2[c]


@kernel
def _w22_out(m, y, geom):
    """The output transform and the phase interleave: the products ``m`` [8, 27, N, Td, Th,
    Tw, C] into ``y`` [N, OD, OH, OW, C] (every position written once); phase r's position j
    is output ``2j + r - p0`` (``geom`` = (N, C, OD, OH, OW, Td, Th, Tw, jd0, jd1, jh0, jh1,
    jw0, jw1, p0d, p0h, p0w))."""
    n_n, c_n, od, oh, ow, td_n, th_n, tw_n = geom[:8]
    pd, ph, pw = geom[14], geom[15], geom[16]
    tl = n_n * td_n * th_n * tw_n
    s = np.empty((18, c_n), m.dtype)
    for p in range(8):
        rd, rh, rw = p >> 2, (p >> 1) & 1, p & 1
        for n in range(n_n):
            for td in range(td_n):
                for th in range(th_n):
                    for tw in range(tw_n):
                        d0, h0, w0 = _tile(geom, p, td, th, tw)
                        z0, y0, x0 = 2 * d0 + rd - pd, 2 * h0 + rh - ph, 2 * w0 + rw - pw
                        t = ((n * td_n + td) * th_n + th) * tw_n + tw
                        for e in range(9):          # depth: (m0 + m1, m1 + m2)
                            o = ((p * 27 + e) * tl + t) * c_n
                            m0 = m[o:o + c_n]
                            m1 = m[o + 9 * tl * c_n:o + 9 * tl * c_n + c_n]
                            m2 = m[o + 18 * tl * c_n:o + 18 * tl * c_n + c_n]
                            s0, s1 = s[e], s[e + 9]
                            for c in range(c_n):
                                s0[c] = m0[c] + m1[c]
                                s1[c] = m1[c] + m2[c]
                        for e in range(6):          # height, in place: rows 0, 1 of (a, kh)
                            i = (e // 3) * 9 + e % 3
                            s0, s1, s2 = s[i], s[i + 3], s[i + 6]
                            for c in range(c_n):
                                s0[c] += s1[c]
                                s1[c] += s2[c]
                        for e in range(4):          # width, written
                            z = z0 + 2 * (e >> 1)
                            yy = y0 + 2 * (e & 1)
                            if z >= od or yy >= oh:
                                continue
                            i = (e >> 1) * 9 + (e & 1) * 3
                            s0, s1, s2 = s[i], s[i + 1], s[i + 2]
                            row = ((n * od + z) * oh + yy) * ow
                            if x0 < ow:
                                yr = y[(row + x0) * c_n:(row + x0 + 1) * c_n]
                                for c in range(c_n):
                                    yr[c] = s0[c] + s1[c]
                            if x0 + 2 < ow:
                                yr = y[(row + x0 + 2) * c_n:(row + x0 + 3) * c_n]
                                for c in range(c_n):
                                    yr[c] = s1[c] + s2[c]


@kernel
def _w22_out_adj(gy, gm, geom):
    """The adjoint of ``_w22_out``: the output gradient ``gy`` [N, OD, OH, OW, C] into ``gm``
    [8, 27, N, Td, Th, Tw, C] (overwritten; positions past the output read as zero)."""
    n_n, c_n, od, oh, ow, td_n, th_n, tw_n = geom[:8]
    pd, ph, pw = geom[14], geom[15], geom[16]
    tl = n_n * td_n * th_n * tw_n
    s = np.empty((27, c_n), gm.dtype)
    for p in range(8):
        rd, rh, rw = p >> 2, (p >> 1) & 1, p & 1
        for n in range(n_n):
            for td in range(td_n):
                for th in range(th_n):
                    for tw in range(tw_n):
                        d0, h0, w0 = _tile(geom, p, td, th, tw)
                        z0, y0, x0 = 2 * d0 + rd - pd, 2 * h0 + rh - ph, 2 * w0 + rw - pw
                        t = ((n * td_n + td) * th_n + th) * tw_n + tw
                        for e in range(4):          # width: g0, g1 -> (g0, g0 + g1, g1)
                            z = z0 + 2 * (e >> 1)
                            yy = y0 + 2 * (e & 1)
                            i = (e >> 1) * 9 + (e & 1) * 3
                            s0, s1, s2 = s[i], s[i + 1], s[i + 2]
                            row = ((n * od + z) * oh + yy) * ow
                            inside = z < od and yy < oh
                            if inside and x0 < ow:
                                g0 = gy[(row + x0) * c_n:(row + x0 + 1) * c_n]
                                for c in range(c_n):
                                    s0[c] = g0[c]
                            else:
                                s0[:] = 0
                            if inside and x0 + 2 < ow:
                                g1 = gy[(row + x0 + 2) * c_n:(row + x0 + 3) * c_n]
                                for c in range(c_n):
                                    s2[c] = g1[c]
                            else:
                                s2[:] = 0
                            for c in range(c_n):
                                s1[c] = s0[c] + s2[c]
                        for e in range(6):          # height: rows 0, 1 -> 0, 1, 2
                            i = (e // 3) * 9 + e % 3
                            s0, s1, s2 = s[i], s[i + 3], s[i + 6]
                            for c in range(c_n):
                                s2[c] = s1[c]
                                s1[c] += s0[c]
                        for e in range(9):          # depth, stored
                            s0, s1 = s[e], s[e + 9]
                            o = ((p * 27 + e) * tl + t) * c_n
                            g0 = gm[o:o + c_n]
                            g1 = gm[o + 9 * tl * c_n:o + 9 * tl * c_n + c_n]
                            g2 = gm[o + 18 * tl * c_n:o + 18 * tl * c_n + c_n]
                            for c in range(c_n):
                                g0[c] = s0[c]
                                g1[c] = s0[c] + s1[c]
                                g2[c] = s1[c]


def usable(x, w, s, d, groups, p0, out):
    """Whether ``x`` [N, Cin, D, H, W] and ``w`` [Cin, Cout, 4, 4, 4] at stride 2 (leading
    crop ``p0``, output sizes ``out``) take these phases: numpy float32/float64 of one dtype,
    one group, dilation 1, at least ``W22_MIN_C`` channels in and out (with fewer the 27 x 8
    products are too thin for the transforms' cost) and at most ``W22_MAX_VALUES`` values in
    the transformed input or products (8 * 27 * N * tiles * channels)."""
    if not (x.ndim == 5 and type(x) is np.ndarray and type(w) is np.ndarray and x.dtype == w.dtype and
            x.dtype in (np.float32, np.float64) and tuple(w.shape[2:]) == (4, 4, 4) and tuple(s) == (2, 2, 2) and
            tuple(d) == (1, 1, 1) and groups == 1 and min(x.shape[1], w.shape[1]) >= W22_MIN_C):
        return False
    _, tiles, _ = _geometry(x.shape[2:], p0, out)
    return 216 * x.shape[0] * int(np.prod(tiles)) * max(x.shape[1], w.shape[1]) <= W22_MAX_VALUES


# Forward + backward against the phases' column products (thread CPU time, float32, 1 thread):
# 32 -> 32 [1, 32, 10^3] 0.73x, 64 -> 64 [1, 64, 8^3] 0.76x, 16 -> 16 [8, 16, 6^3] 0.87x; at 8
# channels ([2, 8, 8^3]) 1.5x slower; with 3.5M values ([2, 16, 16^3], [2, 8, 20^3]) the
# transforms cost more than the Winograd and column paths there (1.5-1.6x).
W22_MIN_C = 16
W22_MAX_VALUES = 1 << 20


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
    tl = n * tiles[0] * tiles[1] * tiles[2]
    geo = tuple(tiles) + tuple(jf[0]) + tuple(jf[1]) + tuple(jf[2])
    g_in = (n, cin) + tuple(pads) + geo
    v = np.empty((8, 27, tl, cin), x.dtype)
    _w22_in(xp.reshape(-1), v.reshape(-1), g_in)
    idx, _ = _weight_index(w.shape)
    w8 = np.take(w.reshape(-1), idx).reshape(8, 8, cin * cout)
    u = np.matmul(G3.astype(w.dtype), w8).reshape(8, 27, cin, cout)
    m = np.matmul(v, u)                                                     # [8, 27, N*tiles, Cout]
    y = np.empty((n,) + tuple(out) + (cout,), x.dtype)
    g_out = (n, cout) + tuple(out) + geo + tuple(p0)
    _w22_out(m.reshape(-1), y.reshape(-1), g_out)
    return y.transpose(0, 4, 1, 2, 3), (v, u, w.shape, x.shape, g_in, g_out)


def backward(gy, state, need_x, need_w):
    """The gradients of ``forward`` (x's [N, Cin, D, H, W] as a view, w's [Cin, Cout, 4, 4,
    4]) for the output gradient ``gy`` [N, Cout, *out]."""
    v, u, w_shape, xs, g_in, g_out = state
    cin, cout = w_shape[:2]
    g = np.ascontiguousarray(gy.transpose(0, 2, 3, 4, 1), dtype=v.dtype)      # [N, *out, Cout]
    gm = np.empty((8, 27, v.shape[2], cout), v.dtype)
    _w22_out_adj(g.reshape(-1), gm.reshape(-1), g_out)
    gx = gw = None
    if need_w:
        gu = np.matmul(v.transpose(0, 1, 3, 2), gm).reshape(8, 27, cin * cout)   # [8, 27, Cin, Cout]
        gw8 = np.matmul(G3.T.astype(v.dtype), gu)                                 # [8, 8, Cin*Cout]
        gw = np.take(gw8.reshape(-1), _weight_index(w_shape)[1]).reshape(w_shape)
    if need_x:
        # U^T copied first: numpy's product with the transposed view ran at half the speed
        gv = np.matmul(gm, np.ascontiguousarray(u.transpose(0, 1, 3, 2)))       # [8, 27, N*tiles, Cin]
        gxp = np.zeros((xs[0],) + tuple(g_in[2:5]) + (cin,), v.dtype)
        _w22_in_adj(gv.reshape(-1), gxp.reshape(-1), g_in)
        gx = gxp[:, 1:1 + xs[2], 1:1 + xs[3], 1:1 + xs[4]].transpose(0, 4, 1, 2, 3)
    return gx, gw
