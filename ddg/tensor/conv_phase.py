"""Stride-1 convolution by depth slabs of 2-D columns, and transposed convolution by
output phases on top of it (numpy float32/float64), shared by the 2-D ops of ``conv.py``
and the N-d ones of ``conv_nd.py``. Arrays are batch-innermost (``[C, *S, N]``), as in those
modules; a 2-D image is a 3-D one of depth 1.

* ``_slab_conv``: a stride-1 3-D convolution as a 2-D im2col over height and width taken at
  every depth (a kd-th of the 3-D columns), each depth offset a column range of it, kd
  products summed.
* ``phase_transpose_forward`` / ``phase_transpose_backward``: a transposed convolution whose
  kernel is a multiple of its stride as one stride-1 convolution with one output-channel
  block per output phase (see the section below); a 3-D one with a 4x4x4 kernel at stride 2
  and at least 8 channels as Winograd F(2, 2) on the phases (``conv_w22``).
* ``phase_plane_forward`` / ``phase_cols_forward`` (and their backwards): the same phases on
  NCHW arrays for few channels (the whole-plane loop) and for 1-D ones and kernels equal to
  the stride (three column products), without batch-innermost copies.
* ``phase_k3_forward`` / ``phase_k3_backward``: a 2-D 3x3 stride-2 padding-1 transposed
  convolution by its exact output phases (9 taps, one product per phase) on NCHW planes.
* ``tile_transpose_forward`` / ``tile_transpose_backward``: a 3-D transposed convolution
  whose kernel equals its stride, as one product per sample and an interleave of its taps
  (NCDHW in and out, numpy or cupy).
"""
import itertools

import numpy as np

from . import backend
from . import conv_kernels as K
from . import conv_w22
from . import gemm
from .winograd import WINO4_G, wino_weight, wino_weight_adjoint


def _cl(a, pads=None, extent=None):
    """``a`` [N, C, *S] as a C-contiguous batch-innermost array ``[C, *Sp, N]``, padded by
    ``pads`` (before_0, after_0, ...) or placed at ``pads``' leading offsets in a zero array
    of spatial size ``extent``. Without padding, free when ``a`` is already such a view."""
    xp = backend.get_array_module(a)
    nd = a.ndim - 2
    perm = tuple(range(1, nd + 2)) + (0,)
    plain = extent is None and (pads is None or not any(pads))
    compiled = 1 <= nd <= 3 and a.shape[0] > 1 and K.usable(a) and a.flags.c_contiguous
    if plain and not compiled:
        return xp.ascontiguousarray(a.transpose(perm))
    if extent is None:
        extent = tuple(a.shape[2 + i] + (pads[2 * i] + pads[2 * i + 1] if pads else 0) for i in range(nd))
    if compiled:   # an NC* array: one compiled interleaving pass (numpy's strided copy is 3-5x slower)
        out = (np.empty if plain else np.zeros)((a.shape[1],) + tuple(extent) + (a.shape[0],), dtype=a.dtype)
        K.to_batch_inner(a, out, tuple(pads[2 * i] for i in range(nd)) if pads else (0,) * nd)
        return out
    out = xp.zeros((a.shape[1],) + tuple(extent) + (a.shape[0],), dtype=a.dtype)
    out[(slice(None),) + tuple(slice(pads[2 * i], pads[2 * i] + a.shape[2 + i]) for i in range(nd))] = \
        a.transpose(perm)
    return out


def _from_cl(a):
    """``[C, *S, N]`` as the logical ``[N, C, *S]`` (a view)."""
    return a.transpose((a.ndim - 1,) + tuple(range(a.ndim - 1)))


def _slab_cols(xcl, kh, kw, dh, dw, oh, ow):
    """2-D columns over height and width only, at every depth of the batch-innermost
    ``xcl`` [C, D, H, W, N]: ``[C*kh*kw, D*P]`` with ``P = oh*ow*N``."""
    c, dp = xcl.shape[:2]
    return K.im2col(xcl, (1, kh, kw), (dp, oh, ow), (1, 1, 1), (1, dh, dw)).reshape(c * kh * kw, -1)


def _slab_apply(cols, w, d0, od, p):
    """The product of ``_slab_cols`` columns (``P = p`` columns per depth) with ``w`` [O, C,
    kd, kh, kw]: depth offset ``a`` is the column range starting at ``a*d0*p``, so the
    convolution is kd products ``w_a @ cols[:, slab_a]`` summed, each written in the result's
    [O, L] layout (measured 5-50 % faster than the [L, O] product and its transposed copy, from
    16 to 256 output channels); returns [O, od*p] C-contiguous. ``w`` may also come tap-major,
    [kd, O, C*kh*kw] C-contiguous (no per-tap copy)."""
    tapped = w.ndim == 3    # tap-major [kd, O, C*kh*kw]: each tap's matrix is w[a]
    o_n, kd = (w.shape[1], w.shape[0]) if tapped else (w.shape[0], w.shape[2])
    ln = od * p
    acc = None
    for a in range(kd):
        wa = w[a] if tapped else np.ascontiguousarray(w[:, :, a]).reshape(o_n, -1)
        t = wa @ cols[:, a * d0 * p:a * d0 * p + ln]
        if acc is None:
            acc = t
        else:
            acc += t
    return acc


def _slab_conv(xcl, w, d, o):
    """Stride-1 3-D convolution (one group) of the padded batch-innermost ``xcl`` [C, Dp, Hp,
    Wp, N] (numpy float32/float64) with ``w`` [O, C, kd, kh, kw] and dilation ``d``, to the
    output sizes ``o``: the result [O, OD*OH*OW*N] and the columns. The columns are a 2-D
    im2col over height and width only, taken at every padded depth (``_slab_cols``: a kd-th
    of the 3-D columns), and depth offsets are column ranges of them (``_slab_apply``)."""
    cols = _slab_cols(xcl, w.shape[3], w.shape[4], d[1], d[2], o[1], o[2])
    return _slab_apply(cols, w, d[0], o[0], o[1] * o[2] * xcl.shape[-1]), cols


def _slab_wgrad(cols, gm, w_shape, d0, od):
    """The weight gradient of ``_slab_conv`` for the output gradient ``gm`` [O, L]."""
    o_n, c, kd, kh, kw = w_shape
    p = gm.shape[1] // od
    gw = np.empty((o_n, c, kd, kh * kw), gm.dtype)
    for a in range(kd):
        gw[:, :, a] = (cols[:, a * d0 * p:a * d0 * p + gm.shape[1]] @ gm.T).T.reshape(o_n, c, kh * kw)
    return gw.reshape(w_shape)


def _slab_wgrad_taps(cols, gm, kd, d0, od):
    """``_slab_wgrad`` tap-major, as the products leave it: [kd, C*kh*kw, O], entry a the
    gradient of depth tap a's matrix transposed (no transposing copy per tap)."""
    p = gm.shape[1] // od
    gwt = np.empty((kd, cols.shape[0], gm.shape[0]), gm.dtype)
    for a in range(kd):
        np.matmul(cols[:, a * d0 * p:a * d0 * p + gm.shape[1]], gm.T, out=gwt[a])
    return gwt


# -- stride-1 3-D convolution as F(4x4, 3x3) Winograd over height and width ------------------------
# A stride-1 convolution with a kd x 3 x 3 kernel is, per depth offset a, a 2-D 3x3 convolution
# of the input's depth planes d + a*dd. The input is copied once, padded, to [C, Hp, Wp, Dp, N]:
# C images [Hp, Wp] with Dp*N "batch" entries innermost (the compiled transforms run at their
# speed on rows of Dp*N values; with N alone innermost, a small batch makes them 3-4x slower).
# Their F(4x4, 3x3) input transform (``conv_kernels.wino4_in``) gives V [36, C, th, tw, Dp, N],
# and the depth offsets become channels by one strided copy Vd [36, C*kd, th*tw*OD*N] (entry
# (c, a), (tile, d, n) = V[c, tile, d + a*dd, n]). Then 36 products U [36, O, C*kd] @ Vd, U the
# 2-D weight transform of w seen as [O, C*kd, 3, 3], and the output transform gives
# [O, OH, OW, OD, N] (ConvNd hands it out as a transposed view). 4x fewer multiply-adds than the
# columns' product, and the products have C*kd (not C) as their inner dimension. The
# transposed convolutions with a kernel of twice the stride take it too (see below).


def _hwd(a, lead, extent):
    """``a`` [N, C, D, H, W] copied into a zero [C, *extent] array laid out [C, H, W, D, N], at
    the leading offsets ``lead`` (depth, height, width)."""
    n, c, d, h, w = a.shape
    pads = (lead[1], extent[0] - h - lead[1], lead[2], extent[1] - w - lead[2])
    if d == 1 and extent[2] == 1 and lead[0] == 0 and min(pads) >= 0:
        # depth 1 (a 2-D image): the batch-innermost [C, H, W, N] copy, by the compiled pass
        # for NCHW inputs (numpy's transposing copy took 2-5x as long)
        return _cl(a[:, :, 0], pads).reshape((c,) + tuple(extent))
    out = np.zeros((c,) + tuple(extent), a.dtype)
    out[:, lead[1]:lead[1] + h, lead[2]:lead[2] + w, lead[0]:lead[0] + d] = a.transpose(1, 3, 4, 2, 0)
    return out


def _wino3_forward(x, w, pads, dd, o):
    """The 3-D Winograd convolution of ``x`` [N, C, D, H, W] with ``w`` [O, C, kd, 3, 3] (pads
    (before, after) per axis; only the leading ones of height and width are read: the
    trailing ones fill the tiles), to the output sizes ``o``: the output [O, 4*th, 4*tw, OD, N]
    (C-contiguous, rows and columns past OH, OW are tile fill) and the backward state."""
    m, st = _wino3_products(x, w, pads, dd, o)
    o_n, th, tw, odn = m.shape[2:]
    y = np.empty((o_n, 4 * th, 4 * tw, odn), x.dtype)
    K.wino4_out_into(m, y)
    return y.reshape(o_n, 4 * th, 4 * tw, o[0], x.shape[0]), st


def _wino3_products(x, w, pads, dd, o):
    """``_wino3_forward`` up to its output transform: the 36 products [6, 6, O, th, tw, OD*N]
    (C-contiguous) and the backward state."""
    st = _wino3_operands(x, w, pads, dd, o)
    vd, u, th, tw = st[0], st[1], st[7], st[8]
    return np.matmul(u, vd).reshape(6, 6, u.shape[1], th, tw, -1), st


def _wino3_operands(x, w, pads, dd, o):
    """The operands of ``_wino3_products``' 36 products ``U [36, O, C*kd] @ Vd [36, C*kd,
    th*tw*OD*N]``, in the backward state (its first two entries Vd and U)."""
    n, c, dx = x.shape[:3]
    o_n, kd = w.shape[0], w.shape[2]
    od, oh, ow = o
    th, tw = -(-oh // 4), -(-ow // 4)
    hp, wp, dp = 4 * th + 2, 4 * tw + 2, dx + pads[0] + pads[1]
    xt = _hwd(x, pads[0::2], (hp, wp, dp, n))                               # [C, Hp, Wp, Dp, N]
    v = K.wino4_in(xt.reshape(c, hp, wp, dp * n), th, tw).reshape(36, c, th * tw, dp, n)
    if kd == 1 and od == dp:    # one depth tap covering every plane: the tiles are the operand
        vd = v.reshape(36, c, -1)
    else:
        st = v.strides
        vd = np.ascontiguousarray(np.lib.stride_tricks.as_strided(
            v, (36, c, kd, th * tw, od, n), (st[0], st[1], st[3] * dd, st[2], st[3], st[4])))
        vd = vd.reshape(36, c * kd, -1)
    u = wino_weight(w.reshape(o_n, c * kd, 3, 3), WINO4_G)                     # [36, O, C*kd]
    return vd, u, x.shape, (c, hp, wp, dp, n), tuple(pads), dd, kd, th, tw


def _wino3_backward(g, state, need_x, need_w):
    """The gradients (x's [N, C, D, H, W] as a transposed view, w's [O, C, kd, 3, 3]) of
    ``_wino3_forward`` for the output gradient ``g`` in its output's layout [O, 4*th, 4*tw,
    OD, N] (C-contiguous, zero in the tile fill)."""
    th, tw, n = state[7], state[8], state[3][4]
    o_n, od = g.shape[0], g.shape[3]
    gm = K.wino4_out_adjoint(g.reshape(o_n, 4 * th, 4 * tw, od * n))
    return _wino3_backward_products(gm, state, need_x, need_w)


def _wino3_backward_products(gm, state, need_x, need_w):
    """``_wino3_backward`` from the products' gradients ``gm`` [6, 6, O, th, tw, OD*N]."""
    vd, u, xs, (c, hp, wp, dp, n), pads, dd, kd, th, tw = state
    o_n = u.shape[1]
    od = vd.shape[2] // (th * tw * n)
    gm = gm.reshape(36, o_n, -1)
    gx = gw = None
    if need_w:
        gu = np.matmul(gm, vd.transpose(0, 2, 1))                             # [36, O, C*kd]
        gw = wino_weight_adjoint(gu, o_n, c * kd, WINO4_G).reshape(o_n, c, kd, 3, 3)
    if need_x:
        gvd = np.matmul(u.transpose(0, 2, 1), gm).reshape(36, c, kd, th * tw, od, n)
        if kd == 1 and od == dp:
            gv = gvd
        else:
            gv = np.empty((36, c, th * tw, dp, n), vd.dtype)   # tap 0 assigned, the rest added
            gv[:, :, :, :od] = gvd[:, :, 0]
            gv[:, :, :, od:] = 0
            for a in range(1, kd):
                gv[:, :, :, a * dd:a * dd + od] += gvd[:, :, a]
        gx4 = np.zeros((c, hp, wp, dp * n), vd.dtype)
        K.wino4_in_adjoint_add(gv.reshape(6, 6, c, th, tw, dp * n), gx4)
        full = gx4.reshape(c, hp, wp, dp, n)[:, pads[2]:pads[2] + xs[3], pads[4]:pads[4] + xs[4],
                                             pads[0]:pads[0] + xs[2]]
        gx = full.transpose(4, 0, 3, 1, 2)
    return gx, gw


# -- transposed convolution by phases ------------------------------------------------------------
# With stride s and a kernel of k = s*t taps per axis, output position s*j + r (phase r) of the
# uncropped transposed convolution only meets the taps s*u + r: per phase it is a stride-1
# "full" correlation of x with a t-tap kernel. All phases together are one stride-1
# convolution of x with s^nd * Cout output channels, whose results are interleaved into the
# output; its adjoints are stride-1 convolutions of the phases of the output gradient. No
# columns of inserted zeros, no strided im2col/col2im, and the products have s^nd*t^nd*Cin
# (not Cin) as their inner dimension.
def _phases_usable(x, w, s, d, groups):
    k = w.shape[2:]
    return (len(k) in (2, 3) and groups == 1 and all(v == 1 for v in d) and K.usable(x, w) and
            all(k[i] % s[i] == 0 for i in range(len(k))) and any(v > 1 for v in s))


# The uncropped phases compute S + t - 1 positions per axis for S input positions: for small
# images that is much more work than the columns' product W^T x and its col2im (S = 4, t = 2:
# 1.56x the multiply-adds, measured 1.2x slower forward + backward at batch 16, 128 -> 64
# channels, 4x4 -> 8x8; at 8x8 -> 16x16, 1.27x the work, the two ran even).
PHASE_WORK_MAX = 1.4
# The phases permute the weight three times (the flipped phase weight, the gradients' phase
# weight, the weight gradient back) and copy its gradient out of a transposed product: passes
# over Cin*Cout*k^2 values, where the columns' im2col and col2im move Cout*k^2*H*W*N. With many
# input channels on few pixels the weight is the larger. Forward + backward, 4x4 stride 2
# padding 1, float32, 1 thread, phases / columns time (Cin -> Cout on [N, Cin, H, W]):
# 512 -> 512 [4, 7, 7] 1.8, [1, 14, 14] 1.74; 512 -> 64 [4, 7, 7] 1.47; 256 -> 32 [2, 8, 8] 1.3;
# 256 -> 256 [4, 7, 7] 1.34, [8, 7, 7] 1.21, [1, 16, 16] 1.18, [2, 14, 14] 1.13; 128 -> 128
# [2, 8, 8] 1.26, [1, 12, 12] 1.07; 64 -> 64 [1, 8, 8] 1.1. Left to the phases: more pixels
# per channel (256 -> 256 [16, 7, 7] 1.1 and 128 -> 128 [2, 14, 14] 1.02, near even; [8, 14, 14]
# 1.0, 128 -> 128 [4, 14, 14] 0.96, [16, 8, 8] 0.96, 64 -> 64 [1, 16, 16] 0.8, [4, 14, 14] 0.88)
# and fewer input channels, whose column products with Cin as the inner dimension run slowly
# (32 -> 256 [1, 8, 8] 0.83, 16 -> 256 0.66).
PHASE_PIXELS_PER_CIN = 2
PHASE_COLS_MIN_CIN = 64


def phases_pay(x, w, s):
    """Whether a 2-D transposed convolution that ``_phases_usable`` accepts should take the
    phases: their multiply-adds over the columns' product's at most ``PHASE_WORK_MAX``, and
    unless there are at least ``PHASE_COLS_MIN_CIN`` input channels with at most
    ``PHASE_PIXELS_PER_CIN`` input positions (H*W*N) per channel."""
    cin = x.shape[1]
    if cin >= PHASE_COLS_MIN_CIN and int(np.prod(x.shape[2:])) * x.shape[0] <= PHASE_PIXELS_PER_CIN * cin:
        return False
    r = 1.0
    for i in range(len(s)):
        t = w.shape[2 + i] // s[i]
        r *= (x.shape[2 + i] + t - 1) / x.shape[2 + i]
    return r <= PHASE_WORK_MAX


# 3-D: with many input channels on few input positions the phases (both their column
# products and the F(2, 2) ones) spend more on the weight (gathers, transforms, their
# adjoints) than the adjoint's product W^T x and its col2im do on the columns. Forward +
# backward, 4x4x4 stride 2 padding 1, float32, 1 thread, against torch (adjoint / phases):
# 256 -> 256 [1, 256, 4^3] 1.08 / 2.55, 128 -> 64 [1, 128, 4^3] 1.42 / 1.94, 128 -> 128
# [2, 128, 4^3] 1.39 / 1.86, 64 -> 64 [1, 64, 4^3] 1.66 / 1.69; at two positions per channel
# the phases ran even or ahead (128 -> 64 [4, 128, 4^3] 1.44 / 1.49, 64 -> 64 [2, 64, 4^3]
# 1.57 / 1.49, 256 -> 128 [1, 256, 8^3] 1.41 / 1.18).
PHASE3_COLS_MIN_CIN = 64
# The F(2, 2) phases (weight taps gathered by copies) stay ahead on one position per channel
# too for a weight of at most 64 x 64 (216 transformed values per channel pair, ~3.5 MB at
# float32). F(2, 2) / adjoint, forward + backward vs torch: 64 -> 64 [1, 64, 4^3]
# 1.28-1.40 / 1.80-1.84, [1, 64, 8x4x2] 1.03 / 1.73, [1, 64, 4x4x2] 1.25 / 1.45, 64 -> 32
# [1, 64, 4^3] 1.02 / 1.54, 64 -> 16 1.03 / 1.21 ([2, 64, 3^3] 1.62 / 1.51); larger ones do
# not: 64 -> 128 [1, 64, 4^3] 2.05 / 1.84, 96 -> 96 2.04 / 1.52, 128 -> 128 1.89 / 1.32.
PHASE3_SMALL_WEIGHT = 64 * 64


def phases_pay_3d(x, cout=None):
    """Whether a 3-D transposed convolution of ``x`` [N, Cin, D, H, W] that ``_phases_usable``
    accepts should take the phases: not with at least ``PHASE3_COLS_MIN_CIN`` input channels
    and at most one input position (N*D*H*W) per input channel, unless ``cout`` is given (the
    output channels of one ``conv_w22`` takes) and the weight has at most
    ``PHASE3_SMALL_WEIGHT`` channel pairs and at least ``conv_w22.W22_MIN_C`` output channels."""
    cin = x.shape[1]
    if cout is not None and cin * cout <= PHASE3_SMALL_WEIGHT and cout >= conv_w22.W22_MIN_C:
        return True
    return not (cin >= PHASE3_COLS_MIN_CIN and int(np.prod(x.shape[2:])) * x.shape[0] <= cin)


def _as3(t, one=1):
    """A 2-D per-axis tuple with a leading depth entry ``one``; 3-D ones unchanged."""
    return tuple(t) if len(t) == 3 else (one,) + tuple(t)


def _phase_weight(w, s):
    """``w`` [Cin, Cout, *k] (k = s*t per axis) as the stride-1 weight [Cin, P*Cout, *t] with
    entry [ci, (r, co), u] = w[ci, co, s*u + r] (r the phase, row-major over the axes)."""
    cin, cout = w.shape[:2]
    nd = len(s)
    t = tuple(w.shape[2 + i] // s[i] for i in range(nd))
    v = w.reshape((cin, cout) + tuple(q for i in range(nd) for q in (t[i], s[i])))
    perm = (0,) + tuple(3 + 2 * i for i in range(nd)) + (1,) + tuple(2 + 2 * i for i in range(nd))
    return np.ascontiguousarray(v.transpose(perm)).reshape((cin, int(np.prod(s)) * cout) + t)


def _phase_weight_adjoint(g, s, cout):
    """The inverse of ``_phase_weight``: [Cin, P*Cout, *t] -> [Cin, Cout, *k]."""
    cin, nd = g.shape[0], len(s)
    t = g.shape[2:]
    v = g.reshape((cin,) + tuple(s) + (cout,) + tuple(t))
    perm = (0, nd + 1) + tuple(q for i in range(nd) for q in (nd + 2 + i, 1 + i))
    return np.ascontiguousarray(v.transpose(perm)).reshape((cin, cout) + tuple(t[i] * s[i] for i in range(nd)))


_PHASE_INDEX = {}


def _phase_index(w_shape, s):
    """Flat indices into ``w`` [Cin, Cout, *k] (k = s*t per axis) that gather, in one
    ``np.take``, the forward's flipped stride-1 weight [P*Cout, Cin, *t] (entry [(r, co), ci,
    u] = w[ci, co, s*(t-1-u) + r]) and the gradients' weight ``_phase_weight(w)`` [Cin,
    P*Cout, *t]; and the inverse of the second (its gradient back to [Cin, Cout, *k]).
    numpy's copies of the flipped, transposed views run 3-6x slower than these gathers. Cached
    per (shape, stride)."""
    key = (tuple(w_shape), tuple(s))
    hit = _PHASE_INDEX.get(key)
    if hit is None:
        nd = len(s)
        ar = np.arange(int(np.prod(w_shape))).reshape(w_shape)
        wg = _phase_weight(ar, s)
        wf = wg[(slice(None), slice(None)) + (slice(None, None, -1),) * nd].transpose((1, 0) + tuple(range(2, 2 + nd)))
        wf = np.ascontiguousarray(wf)
        inv = np.empty(ar.size, np.intp)
        inv[wg.ravel()] = np.arange(ar.size)
        if len(_PHASE_INDEX) >= 64:
            _PHASE_INDEX.clear()
        hit = _PHASE_INDEX[key] = (wf.ravel(), wf.shape, wg.ravel(), wg.shape, inv)
    return hit


_PHASE_TAPS = {}


def _phase_index_taps(w_shape, s):
    """``_phase_index``'s gathers tap-major, for the depth-slab products (a 2-D weight as
    depth 1): flat indices into ``w`` [Cin, Cout, *k] giving the forward's flipped weight as
    [td, P*Cout, Cin*th*tw] and the gradients' as [td, Cin, P*Cout*th*tw] (entry a the
    matrix of depth tap a, so ``_slab_apply`` copies no tap), and the indices taking the
    weight gradient from ``_slab_wgrad_taps``' [td, P*Cout*th*tw, Cin] back to [Cin, Cout,
    *k]. At [1, 64, 8^3], 4x4x4 stride 2, the per-tap copies and the transposed writes they
    replace were ~1 ms of a 15 ms step. Cached per (shape, stride)."""
    key = (tuple(w_shape), tuple(s))
    hit = _PHASE_TAPS.get(key)
    if hit is None:
        wf_i, wf_shape, wg_i, wg_shape, _ = _phase_index(w_shape, s)
        wf = wf_i.reshape(wf_shape[:2] + _as3(wf_shape[2:]))               # [P*Cout, Cin, td, th, tw]
        wg = wg_i.reshape(wg_shape[:2] + _as3(wg_shape[2:]))               # [Cin, P*Cout, td, th, tw]
        ft = np.ascontiguousarray(wf.transpose(2, 0, 1, 3, 4))           # [td, P*Cout, Cin, th, tw]
        gt = np.ascontiguousarray(wg.transpose(2, 0, 1, 3, 4))           # [td, Cin, P*Cout, th, tw]
        back = wg.transpose(2, 1, 3, 4, 0).ravel()                        # [td, P*Cout, th, tw, Cin]
        inv = np.empty(back.size, np.intp)
        inv[back] = np.arange(back.size)
        if len(_PHASE_TAPS) >= 64:
            _PHASE_TAPS.clear()
        hit = _PHASE_TAPS[key] = (ft.ravel(), ft.shape[:2] + (-1,), gt.ravel(), gt.shape[:2] + (-1,), inv)
    return hit


# Kernels of twice the stride (t = 2 taps per phase along height and width) take the 3-D
# Winograd convolution above: along height and width each phase r gets a window of
# ceil(out/s) positions starting at its first output position, i.e. at j = o_r (0 or 1 when
# the crop p0 is below the stride), and its two taps become the taps o_r, o_r + 1 of a 3-tap
# kernel (the third is zero): F(4x4, 3x3) on windows of 16 or 32 rather than on the 17 or 33
# positions of the uncropped phases. Depth keeps the uncropped phases (depth taps are channels).
def _phase_wino_usable(x, w, s, p0, out):
    """Whether the 3-D ``x`` [N, Cin, D, H, W], ``w`` [Cin, Cout, *k] take the Winograd phases
    (a 2-D image comes as one of depth 1, stride 1 along depth)."""
    nd = len(s)
    if nd != 3 or not (K.usable(x, w) and x.dtype == w.dtype and min(x.shape[1], w.shape[1] * int(np.prod(s))) >= 16):
        return False
    for i in range(nd - 2, nd):
        if w.shape[2 + i] != 2 * s[i] or p0[i] >= s[i] or -(-out[i] // s[i]) < max(8, x.shape[2 + i]):
            return False
    # the 36 products' width (tiles * depth window * N) and the multiplications against the
    # phases' column products (t = 2 taps along height and width per phase on the Jh x Jw
    # uncropped positions, 36 per F(4x4) tile): R = 9 * tiles / (Jh * Jw)
    jd = -(-max((x.shape[2] - 1) * s[0] + w.shape[2], p0[0] + out[0]) // s[0])
    th, tw = -(-out[1] // (4 * s[1])), -(-out[2] // (4 * s[2]))
    cols = th * tw * jd * x.shape[0]
    if x.shape[2] == 1 and w.shape[2] == 1:
        # a 2-D image (batch 16, 4x4 stride 2, C = 16-128 on 16x16 and 32x32 images):
        # Winograd / columns 0.75-0.85 at 256 columns. At 128 columns (layer vs torch, 1
        # thread): batch 8 on 16x16 inputs, 32-256 channels, 1.25-1.37 -> 1.14-1.23, but on
        # 14x14 (windows of 14 in four tiles) 1.22-1.38 -> 1.49-1.66, and batch 2 on 32x32
        # even or slower (1.40 -> 1.44, 1.21 -> 1.27); at 64 columns 1.08-1.2x slower
        whole = all(-(-out[i] // s[i]) % 4 == 0 for i in (1, 2))
        return cols >= 256 or (cols >= 128 and x.shape[0] >= 8 and whole)
    # 3-D: narrow products run below BLAS speed and the weight transform does not shrink with
    # them; Winograd / columns (forward + backward, float32, 1 thread) came out near
    # R * (1 + 64 / columns): 16-128 channels, batch 1-4, inputs 8^3-16^3, 36-360 columns,
    # measured 0.65-1.02 where that is <= 0.9, 0.86-1.35 above it (9^3 inputs, whose 9-wide
    # windows take three tiles, 1.2-1.27 even at 270-360 columns)
    jh, jw = (-(-max((x.shape[2 + i] - 1) * s[i] + w.shape[2 + i], p0[i] + out[i]) // s[i]) for i in (1, 2))
    return 9.0 * th * tw / (jh * jw) * (1.0 + 64.0 / cols) <= PHASE_WINO_GAIN


PHASE_WINO_GAIN = 0.9


def _phase_wino_forward(x, w, s, p0, out):
    """``phase_transpose_forward`` by ``_wino3_forward`` (3-D): the output [Cout, OH, OW, OD, N]
    and the backward state."""
    n, cin, dx = x.shape[:3]
    cout, kd = w.shape[1], w.shape[2]
    td = kd // s[0]
    jd = -(-max((dx - 1) * s[0] + kd, p0[0] + out[0]) // s[0])
    win = tuple(-(-out[i] // s[i]) for i in (1, 2))
    wf = _phase_weight(w, s)[:, :, ::-1, ::-1, ::-1].transpose(1, 0, 2, 3, 4)   # [P*Cout, Cin, td, 2, 2]
    org = [[((r - p0[i]) % s[i] + p0[i]) // s[i] for r in range(s[i])] for i in (1, 2)]
    w3 = np.zeros(wf.shape[:3] + (3, 3), w.dtype)
    for p, (rd, rh, rw) in enumerate(np.ndindex(*s)):
        a, b = org[0][rh], org[1][rw]
        w3[p * cout:(p + 1) * cout, :, :, a:a + 2, b:b + 2] = wf[p * cout:(p + 1) * cout]
    st = _wino3_operands(x, w3, (td - 1, jd - dx, 1, 0, 1, 0), 1, (jd,) + win)
    vd, u, th, tw = st[0], st[1], st[7], st[8]
    # the products and their output transform by blocks of output channels (every phase of
    # each), a block's products [36, P*cb, th*tw*Jd*N] about PHASE_WINO_BLOCK bytes: the
    # transform reads them from cache rather than from a whole product array written first
    p = int(np.prod(s))
    cb = max(1, min(cout, PHASE_WINO_BLOCK // (36 * p * vd.shape[2] * vd.itemsize)))
    y = np.empty((cout,) + tuple(out[1:]) + (out[0], n), x.dtype)           # [Cout, OH, OW, OD, N]
    ub = u.reshape(36, p, cout, -1)
    for c0 in range(0, cout, cb):
        c1 = min(cout, c0 + cb)
        m = np.matmul(ub[:, :, c0:c1].reshape(36, p * (c1 - c0), -1), vd)   # [36, P*cb, th*tw*Jd*N]
        K.wino4_out_phase_into(m, y[c0:c1], th, tw, jd, n, out, s, p0)
    return y, (st, (cout, th, tw, jd), org, s, tuple(p0))


PHASE_WINO_BLOCK = 5 << 18     # 1.25 MiB: at [2, 16, 16^3] -> 32^3 the forward's products and
# transform 4.0 -> 2.9 ms in blocks of 2 channels (one channel 3.1), at [1, 32, 24^3] 19.3 ->
# 16.5 ms in blocks of one (4-8 channels, 4-8 MiB, ran slower than no blocks); float32, 1 thread


def _phase_wino_backward(gy, state, need_x, need_w):
    """The gradients of ``_phase_wino_forward`` for the output gradient ``gy`` [N, Cout, *out]."""
    st, (cout, th, tw, jd), org, s, p0 = state
    gm = K.wino4_out_phase_adjoint(gy, cout, th, tw, jd, s, p0, st[0].dtype)
    gx, gw3 = _wino3_backward_products(gm, st, need_x, need_w)
    gw = None
    if need_w:
        gwf = np.empty(gw3.shape[:3] + (2, 2), gw3.dtype)
        for p, (rd, rh, rw) in enumerate(np.ndindex(*s)):
            a, b = org[0][rh], org[1][rw]
            gwf[p * cout:(p + 1) * cout] = gw3[p * cout:(p + 1) * cout, :, :, a:a + 2, b:b + 2]
        gw = _phase_weight_adjoint(np.ascontiguousarray(gwf.transpose(1, 0, 2, 3, 4)[:, :, ::-1, ::-1, ::-1]), s, cout)
    return gx, gw


def _rows_conv(xpad, wf, jn, sh, p0h, oh):
    """The 2-D phases' stride-1 convolution of ``xpad`` [Cin, Hp, Wp, N] with the flipped
    phase weight ``wf`` [sh*sw*Cout, Cin, th, tw] as [P*Cout, Jh*Jw*N], computed per height
    phase for the rows ``_phase_out`` reads only (the cropped ones are left unset): of the
    Jh = ceil(extent / sh) uncropped rows a phase keeps ceil(OH / sh), so the product shrinks
    by up to a row per phase (8/9 of it at an 8x8 input, kernel 4, stride 2, padding 1)."""
    cin, n = xpad.shape[0], xpad.shape[-1]
    p_co = wf.shape[0]
    jh, jw = jn
    cols = _slab_cols(xpad.reshape((cin, 1) + xpad.shape[1:]), wf.shape[2], wf.shape[3], 1, 1, jh, jw)
    w2 = wf.reshape(p_co, -1)
    f = np.empty((p_co, jh * jw * n), cols.dtype)
    blk, row = p_co // sh, jw * n
    for rh in range(sh):
        x0 = (rh - p0h) % sh                          # the phase's first output row
        cnt = (oh - x0 + sh - 1) // sh if x0 < oh else 0
        j0 = (x0 + p0h) // sh
        if cnt:
            cs = slice(j0 * row, (j0 + cnt) * row)
            np.matmul(w2[rh * blk:(rh + 1) * blk], cols[:, cs], out=f[rh * blk:(rh + 1) * blk, cs])
    return f


# The 2-D phases' products run ``gemm_kernels.gemm_rows`` on shifted windows where
# ``gemm.takes`` the dtype (float32, one BLAS thread) and each product has at least
# TAPS_MIN_ROWS rows, else numpy's products on im2col columns. Fewer rows than this in a window
# product (output channels times width phases forward, input
# channels or output channels times phases backward) leave the phases to im2col and numpy. Since
# gemm_rows runs the rows past the last 8 as one more padded 8-row tile, every size takes the
# windows: a DCGAN's last 32 -> 3 layer on 32x32, batch 16, forward + backward 6.95 -> 5.89 ms
# (16 -> 3: 3.97 -> 3.18, batch 64 64 -> 3 on 16x16 15.8 -> 14.9); batch 2 64 -> 3 1.36 ->
# 1.44, the one case slower
TAPS_MIN_ROWS = 1


def _window_table(c, plane, th, tw, row, n):
    """Offsets of the windows of taps (a, b) < (th, tw) of ``c`` planes of ``plane`` elements
    with rows of ``row`` pixels of ``n`` values: row (ci, a, b) of a window product at
    ``ci*plane + (a*row + b)*n``."""
    taps = (np.arange(th)[:, None] * row + np.arange(tw)) * n
    return (np.arange(c, dtype=np.int64)[:, None] * plane + taps.reshape(-1)).reshape(-1)


def _rows_conv_kernel(xpad, wf, jn, sh, p0h, oh):
    """``_rows_conv`` by ``gemm_kernels.gemm_rows``: the 2x2 (th x tw) taps of every input
    channel read as shifted windows of ``xpad`` [Cin, Hp, Wp, N] (no im2col columns), the
    phases [P*Cout, Jh*Wp*N] on the padded width Wp (row by row where ``by_rows``; each row's
    last tw - 1 columns and the cropped rows left unset)."""
    cin, hp, wp, n = xpad.shape
    p_co, _, th, tw = wf.shape
    jh, jw = jn
    w2 = wf.reshape(p_co, -1)
    tab = _window_table(cin, hp * wp * n, th, tw, wp, n)
    f = np.empty((p_co, jh * wp * n), xpad.dtype)
    blk = p_co // sh
    for rh in range(sh):
        x0 = (rh - p0h) % sh
        cnt = (oh - x0 + sh - 1) // sh if x0 < oh else 0
        j0 = (x0 + p0h) // sh
        window_rows(w2[rh * blk:(rh + 1) * blk], xpad, tab, f[rh * blk:(rh + 1) * blk], j0, cnt, wp * n, jw * n)
    return f


def window_rows(a, b, tab, out, first, count, row, used):
    """``gemm_kernels.gemm_rows`` for rows ``first .. first + count - 1`` of an output laid on
    rows of ``row`` values of which the first ``used`` are wanted (``out`` and the windows
    ``tab`` of ``b`` alike): a call per row where ``by_rows``, else one over their span (the
    unwanted columns between them computed too)."""
    from . import gemm_kernels  # noqa: PLC0415
    kc, qb = gemm.blocking(len(tab))
    if by_rows(row, used):
        for r0 in range(first * row, (first + count) * row, row):
            gemm_kernels.gemm_rows(a, b, tab + r0, out, r0, used, out, 0, 0, kc, qb)
    elif count:
        r0 = first * row
        gemm_kernels.gemm_rows(a, b, tab + r0, out, r0, (count - 1) * row + used, out, 0, 0, kc, qb)


def tap_product(a, bt, shift, ln, out, row, used):
    """``out = a[:, shift:shift + ln] @ bt[:ln]`` by ``gemm_kernels.gemm_rows`` (``a`` read in
    place from column ``shift``; ``bt`` ``[>= ln, N]`` C-contiguous, ``out`` ``[M, N]``): one
    tap's weight gradient, whose ``ln`` columns are rows of ``row`` values, the first
    ``used`` of each wanted (``bt`` zero in the others); summed row by row over those alone
    where ``by_rows``."""
    from . import gemm_kernels  # noqa: PLC0415
    kc, qb = gemm.blocking(ln)
    tab = np.arange(-shift, ln, dtype=np.int64) * bt.shape[1]
    if not by_rows(row, used):
        gemm_kernels.gemm_rows(a, bt, tab, out, 0, out.shape[1], out, 0, shift, kc, qb)
        return
    for r0 in range(0, ln, row):
        gemm_kernels.gemm_rows(a, bt, tab[:shift + r0 + used], out, 0, out.shape[1], out, 1 if r0 else 0, shift + r0,
                               kc, qb)


def by_rows(width, used):
    """Whether window products over rows of ``width`` pixels of which the first ``used`` are
    wanted run row by row (a call per row, none of the other columns computed) rather than
    over whole planes: where those columns are at least a sixteenth of the row. On 8x8
    inputs a transposed 128 -> 64 layer at batch 16 ran 11.1-11.6 -> 10.7-10.9 ms row by row;
    on 32x32 at batch 2 (3 % of the columns, rows of 66 values) 1.1 -> 1.45."""
    return (width - used) * 16 >= width



def _phase_backward_kernel(g, xm, wt, sp, jn, n, t, need_x, need_w):
    """The 2-D phases' gradients by ``gemm_kernels.gemm_rows`` on shifted windows of the
    output gradient's phases ``g`` [P*Cout, Jh, Jw, N] (no im2col columns): the input's
    ``[Cin, H*W*N]`` (batch-innermost) from ``wt`` [Cin, P*Cout*th*tw], and the weight's,
    tap-major ``[1, P*Cout*th*tw, Cin]``, against the input ``xm`` [Cin, H*W*N]. Both run on
    the Jw-wide rows (the input laid with zeros in the junk columns), input row by input row
    over the W valid columns where ``by_rows``."""
    from . import gemm_kernels  # noqa: PLC0415
    pc, jh, jw = g.shape[:3]
    h, wd = sp
    th, tw = t
    cin = xm.shape[0]
    ln = ((h - 1) * jw + wd) * n       # window columns: input rows on the padded width
    gxm = gwt = None
    if need_x:
        tab = _window_table(pc, jh * jw * n, th, tw, jw, n)
        if by_rows(jw, wd):
            gxm = np.empty((cin, h * wd * n), g.dtype)
            kc, qb = gemm.blocking(len(tab))
            for hh in range(h):          # input row by input row, straight into [Cin, H*W*N]
                gemm_kernels.gemm_rows(wt, g, tab + hh * jw * n, gxm, hh * wd * n, wd * n, gxm, 0, 0, kc, qb)
        else:
            gxp = np.empty((cin, h, jw, n), g.dtype)
            window_rows(wt, g, tab, gxp.reshape(cin, -1), 0, h, jw * n, wd * n)
            gxm = np.ascontiguousarray(gxp[:, :, :wd]).reshape(cin, -1)
    if need_w:
        xt = np.zeros((h, jw, n, cin), g.dtype)     # x^T on the padded width, zero in the junk columns
        xt[:, :wd] = gemm.transposed(xm).reshape(h, wd, n, cin)
        xt = xt.reshape(-1, cin)[:ln]
        g2 = g.reshape(pc, -1)
        gtap = np.empty((th, tw, pc, cin), g.dtype)
        for a in range(th):
            for b in range(tw):
                tap_product(g2, xt, (a * jw + b) * n, ln, gtap[a, b], jw * n, wd * n)
        gwt = np.ascontiguousarray(gtap.transpose(2, 0, 1, 3)).reshape(1, -1, cin)
    return gxm, gwt


def phase_transpose_forward(x, w, s, p0, out):
    """Transposed convolution (one group, dilation 1, kernel a multiple of the stride) of
    ``x`` [N, Cin, *S] (2 or 3 spatial axes, numpy float32/float64) with ``w`` [Cin, Cout,
    *k], stride ``s``, leading crop ``p0`` and output sizes ``out``: the output as a
    batch-innermost array [Cout, *out, N] and the state ``phase_transpose_backward`` takes."""
    nd = len(s)
    if conv_w22.usable(x, w, s, (1,) * nd, 1):
        y, st = conv_w22.forward(x, w, p0, out)                            # [N, Cout, OD, OH, OW]
        return y.transpose(1, 2, 3, 4, 0), ("w22", st)
    if _phase_wino_usable(x, w, s, p0, out):
        y, st = _phase_wino_forward(x, w, s, p0, out)                     # [Cout, OH, OW, OD, N]
        return y.transpose(0, 3, 1, 2, 4), ("wino", st)
    if nd == 2:   # as a 3-D one of depth 1
        x3, w3, s3, p3, o3 = x[:, :, None], w[:, :, None], (1,) + tuple(s), (0,) + tuple(p0), (1,) + tuple(out)
        if _phase_wino_usable(x3, w3, s3, p3, o3):
            y, st = _phase_wino_forward(x3, w3, s3, p3, o3)               # [Cout, OH, OW, 1, N]
            return y.reshape(y.shape[:3] + y.shape[4:]), ("wino2", st)
    n, cin = x.shape[:2]
    sp, k = tuple(x.shape[2:]), tuple(w.shape[2:])
    cout = w.shape[1]
    t = tuple(k[i] // s[i] for i in range(nd))
    extent = [max((sp[i] - 1) * s[i] + k[i], p0[i] + out[i]) for i in range(nd)]
    jn = tuple(-(-extent[i] // s[i]) for i in range(nd))
    xpad = _cl(x, tuple(v for i in range(nd) for v in (t[i] - 1, jn[i] - sp[i])))
    xm = _cl(x)                                                           # [Cin, *S, N]
    if nd == 2:
        wf_i, wf_shape, _, _, _ = _phase_index(w.shape, s)
        wf = np.take(w.reshape(-1), wf_i).reshape(wf_shape)              # [P*Cout, Cin, *t], flipped
        if wf.shape[0] // s[0] >= TAPS_MIN_ROWS and gemm.takes(x.dtype):   # [P*Cout, Jh, Wp, N]: on xpad's width
            f = _rows_conv_kernel(xpad, wf, jn, s[0], p0[0], out[0])
            jn = (jn[0], xpad.shape[2])
        else:
            f = _rows_conv(xpad, wf, jn, s[0], p0[0], out[0])
    else:
        ft_i, ft_shape, _, _, _ = _phase_index_taps(w.shape, s)
        wt = np.take(w.reshape(-1), ft_i).reshape(ft_shape)              # [td, P*Cout, Cin*th*tw], flipped
        cols = _slab_cols(xpad, t[1], t[2], 1, 1, jn[1], jn[2])
        f = _slab_apply(cols, wt, 1, jn[0], jn[1] * jn[2] * n)
    y = K.phase_out(f.reshape((int(np.prod(s)), cout) + jn + (n,)), out, s, p0)
    jn = tuple(-(-extent[i] // s[i]) for i in range(nd))
    return y, (xm.reshape(cin, -1), w, tuple(sp), jn, tuple(p0), tuple(out), tuple(s), cout)


def phase_transpose_backward(gy, state, need_x, need_w):
    """The gradients of ``phase_transpose_forward`` (x's [N, Cin, *S] as a batch-innermost
    view, w's [Cin, Cout, *k]) for the output gradient ``gy`` [N, Cout, *out]."""
    tag = state[0] if isinstance(state[0], str) else None
    if tag == "w22":
        return conv_w22.backward(gy, state[1], need_x, need_w)
    if tag == "wino":
        return _phase_wino_backward(gy, state[1], need_x, need_w)
    if tag == "wino2":
        gx, gw = _phase_wino_backward(gy[:, :, None], state[1], need_x, need_w)
        return (None if gx is None else gx[:, :, 0]), (None if gw is None else gw[:, :, 0])
    xm, w, sp, jn, p0, _, s, cout = state
    n = gy.shape[0]
    _, _, gt_i, gt_shape, inv = _phase_index_taps(w.shape, s)
    t3 = _as3(tuple(w.shape[2 + i] // s[i] for i in range(len(s))))
    g = K.phase_in(gy, jn, s, p0, w.dtype)                              # the output gradient's phases
    if len(s) == 2 and min(w.shape[0], int(np.prod(s)) * cout) >= TAPS_MIN_ROWS and gemm.takes(w.dtype):
        wt = np.take(w.reshape(-1), gt_i).reshape(gt_shape)[0] if need_x else None
        gxm, gwt = _phase_backward_kernel(g.reshape((-1,) + tuple(jn) + (n,)), xm, wt, sp, jn, n, t3[1:],
                                          need_x, need_w)
        gx = None if gxm is None else _from_cl(gxm.reshape((w.shape[0],) + sp + (n,)))
        gw = None if gwt is None else np.take(gwt.reshape(-1), inv).reshape(w.shape)
        return gx, gw
    s3 = _as3(sp)
    cols = _slab_cols(g.reshape((-1,) + _as3(jn) + (n,)), t3[1], t3[2], 1, 1, s3[1], s3[2])
    gx = gw = None
    wt = np.take(w.reshape(-1), gt_i).reshape(gt_shape) if need_x else None   # [td, Cin, P*Cout*th*tw]
    if s3[0] > 1 and cols.shape[0] > PHASE_SLAB_BLOCK_ROWS * w.shape[0]:
        gxm, gwt = _slab_backward_blocks(cols, wt, xm, t3[0], s3[0], need_x, need_w)
    else:
        gxm = _slab_apply(cols, wt, 1, s3[0], s3[1] * s3[2] * n) if need_x else None
        gwt = _slab_wgrad_taps(cols, xm, t3[0], 1, s3[0]) if need_w else None
    if need_x:
        gx = _from_cl(gxm.reshape((w.shape[0],) + sp + (n,)))
    if need_w:
        gw = np.take(gwt.reshape(-1), inv).reshape(w.shape)
    return gx, gw


# The backward's two products read the same columns: with few input channels (an input
# gradient [Cin, L] and a weight gradient [K, Cin] from columns [K, L] with K = P*Cout*th*tw
# many times Cin) each is bound by reading the columns. By blocks of depth slabs of about
# PHASE_SLAB_BLOCK columns both products (every depth tap) read a block while it is in cache:
# at [2, 3, 32^3] (columns [96, 2 * 32^3] per tap) the two products 7.6 -> 4.6 ms per tap
# (blocks of 1024-2048 columns; 6.7 at 4096 and 8192), float32, 1 thread.
PHASE_SLAB_BLOCK = 2048
PHASE_SLAB_BLOCK_ROWS = 8     # columns' rows per input channel from which the blocks are taken


def _slab_backward_blocks(cols, wt, xm, td, od, need_x, need_w):
    """``_slab_apply`` (tap-major ``wt`` [td, Cin, K]) and ``_slab_wgrad_taps`` of the columns
    ``cols`` [K, (od + td - 1) * p] and ``xm`` [Cin, od * p] by blocks of depth slabs: the input
    gradient [Cin, od * p] and the weight gradient [td, K, Cin]."""
    k, cin = cols.shape[0], xm.shape[0]
    p = xm.shape[1] // od
    step = max(1, PHASE_SLAB_BLOCK // p)
    gxm = np.empty((cin, od * p), cols.dtype) if need_x else None
    gwt = np.zeros((td, k, cin), cols.dtype) if need_w else None
    for d0 in range(0, od, step):
        d1 = min(od, d0 + step)
        xs = slice(d0 * p, d1 * p)
        for a in range(td):
            c = cols[:, (d0 + a) * p:(d1 + a) * p]
            if need_x:
                if a == 0:
                    np.matmul(wt[0], c, out=gxm[:, xs])
                else:
                    gxm[:, xs] += wt[a] @ c
            if need_w:
                gwt[a] += c @ xm[:, xs].T
    return gxm, gwt


# -- few channels: the phases as whole-plane shifted multiply-adds ------------------------------------
# With few channels the phases' products are tiny (inner dimension Cin*t^2, Cout*s^2 rows) and
# their columns (t^2 times the input, and in backward t^2 times the output gradient's phases)
# cost more to write and read than the multiply-adds. The phases' stride-1 convolution then runs
# as ``conv_kernels.plane_forward`` / ``plane_backward`` on the NCHW planes (the input padded
# once, no columns, no batch-innermost copy), and the interleave into the output and the gather
# of the output gradient's phases are one strided numpy copy per phase.
PHASE_PLANE_MAX_C = 8     # at most this many input and output channels
PHASE_PLANE_MIN_PIXELS = 256   # per padded input plane (shorter planes: the loop's passes are too short)


def phase_plane_usable(x, w, s, d, groups):
    """Whether a 2-D transposed convolution (a 1-D one as height 1) of ``x`` [N, Cin, H, W]
    with ``w`` [Cin, Cout, kh, kw] takes the whole-plane phases."""
    return (x.ndim == 4 and _phases_usable(x, w, s, d, groups) and x.dtype == w.dtype and
            max(w.shape[0], w.shape[1]) <= PHASE_PLANE_MAX_C and
            (x.shape[2] + w.shape[2] // s[0] - 1) * (x.shape[3] + w.shape[3] // s[1] - 1) >= PHASE_PLANE_MIN_PIXELS)


def phase_plane_forward(x, w, s, p0, out):
    """``phase_transpose_forward`` for ``phase_plane_usable`` shapes: the output [N, Cout, OH,
    OW] (NCHW, C-contiguous) and the state ``phase_plane_backward`` takes."""
    n, cin, h, wd = x.shape
    cout = w.shape[1]
    t = (w.shape[2] // s[0], w.shape[3] // s[1])
    jn = tuple(-(-max((x.shape[2 + i] - 1) * s[i] + w.shape[2 + i], p0[i] + out[i]) // s[i]) for i in range(2))
    wf_i, wf_shape, _, _, _ = _phase_index(w.shape, s)
    wf = np.take(w.reshape(-1), wf_i).reshape(wf_shape)                  # [P*Cout, Cin, th, tw], flipped
    x5 = np.zeros((n, cin, jn[0] + t[0] - 1, jn[1] + t[1] - 1, 1), x.dtype)
    x5[:, :, t[0] - 1:t[0] - 1 + h, t[1] - 1:t[1] - 1 + wd, 0] = x
    f = K.plane_forward(x5, wf, 1, (1, 1), jn[0], jn[1])                # [N, P*Cout, Jh, Jw, 1]
    y = K.phase_out_planes(f, n, cout, jn, out, s, p0)
    return y, ("plane", x5, wf, wf_i, w.shape, jn, tuple(s), tuple(p0), tuple(out), t, (h, wd))


def phase_plane_backward(gy, state, need_x, need_w):
    """The gradients of ``phase_plane_forward`` (x's [N, Cin, H, W], w's [Cin, Cout, kh, kw])
    for the output gradient ``gy`` [N, Cout, OH, OW]."""
    _, x5, wf, wf_i, w_shape, jn, s, p0, out, t, (h, wd) = state
    n, cout = gy.shape[:2]
    g = K.phase_in_planes(gy, jn, s, p0, x5.dtype)                      # the output gradient's phases
    gx5, gwf = K.plane_backward(x5, wf, g.reshape(n, -1, jn[0], jn[1], 1), 1, (1, 1), need_x, need_w)
    gx = gw = None
    if need_x:
        gx = gx5[:, :, t[0] - 1:t[0] - 1 + h, t[1] - 1:t[1] - 1 + wd, 0]
    if need_w:
        gw = np.empty(int(np.prod(w_shape)), gwf.dtype)
        gw[wf_i] = gwf.reshape(-1)
        gw = gw.reshape(w_shape)
    return gx, gw


# -- NCHW column products -----------------------------------------------------------------------------
# The 2-D phases (a 1-D one as height 1) as column products read straight from the NCHW input:
# the input padded into [N, Cin, Jh + th, Wp] (Wp = Jw + tw - 1; the extra zero row lets every
# shift read a whole [Jh, Wp] window), its columns [Cin*th*tw, N*Jh*Wp] one strided copy (each
# tap a shift of the flat plane by u*Wp + v, runs of Jh*Wp elements), and one product with the
# flipped phase weight [P*Cout, Cin*th*tw] gives the phases [P*Cout, N, Jh, Wp] on the padded
# width (columns past Jw are never read by the interleave). Backward gathers the output
# gradient's phases into that layout (zero in those columns), their columns as shifts of each
# plane give the input gradient [Cin, N, H, Wp] through the phase weight [Cin, P*Cout*th*tw],
# and the weight gradient is the product of the phases with the forward's columns. Three
# products, no batch-innermost copies and no compiled im2col. 1-D ones take it (forward +
# backward against the batch-innermost phases, float32, 1 thread: 0.7-0.85x at batch 4-32,
# 16-64 channels, lengths 64-1024), and 2-D ones whose kernel equals the stride (2x2 stride 2:
# 0.8-0.93x at 32-128 channels on 16x16, even on 4x4 and 8x8); other 2-D images keep the
# batch-innermost phases, which ran faster (these products 1.1-1.25x their time at 16-64
# channels on 16x16 to 32x32, 4x4 kernels).
def phase_cols_usable(x, w, s, d, groups):
    """Whether a 1-D transposed convolution (a 2-D one of height 1, kernel height 1), or a 2-D
    one whose kernel equals its stride (one tap per phase: the columns are the padded input
    itself), takes the NCHW column products. Other 2-D images keep the batch-innermost phases."""
    one_tap = x.ndim == 4 and tuple(w.shape[2:]) == tuple(s)
    return (x.ndim == 4 and (one_tap or (x.shape[2] == 1 and w.shape[2] == 1)) and
            _phases_usable(x, w, s, d, groups) and x.dtype == w.dtype and max(w.shape[:2]) <= PHASE_COLS_MAX_C)


PHASE_COLS_MAX_C = 128   # at 256 channels on short sequences the batch-innermost phases ran faster


def _shift_cols(a, t, wp, length):
    """The columns [C*th*tw, N*length] of ``a`` [N, C, R, wp] (each plane C-contiguous):
    entry [(c, u, v), (n, k)] = a[n, c].flat[k + u*wp + v]."""
    n, c = a.shape[:2]
    st = a.strides
    e = a.itemsize
    v = np.lib.stride_tricks.as_strided(a, (c, t[0], t[1], n, length), (st[1], wp * e, e, st[0], e))
    return np.ascontiguousarray(v).reshape(c * t[0] * t[1], n * length)


def phase_cols_forward(x, w, s, p0, out):
    """``phase_transpose_forward`` of a 2-D ``x`` [N, Cin, H, W] by NCHW column products: the
    output [N, Cout, OH, OW] (NCHW) and the state ``phase_cols_backward`` takes."""
    n, cin, h, wd = x.shape
    cout = w.shape[1]
    t = (w.shape[2] // s[0], w.shape[3] // s[1])
    jn = tuple(-(-max((x.shape[2 + i] - 1) * s[i] + w.shape[2 + i], p0[i] + out[i]) // s[i]) for i in range(2))
    wp = jn[1] + t[1] - 1
    wf_i, wf_shape, wg_i, wg_shape, _ = _phase_index(w.shape, s)
    wf = np.take(w.reshape(-1), wf_i).reshape(wf_shape[0], -1)             # [P*Cout, Cin*th*tw], flipped
    xp = np.zeros((n, cin, jn[0] + t[0], wp), x.dtype)
    xp[:, :, t[0] - 1:t[0] - 1 + h, t[1] - 1:t[1] - 1 + wd] = x
    cols = _shift_cols(xp, t, wp, jn[0] * wp)
    f = wf @ cols                                                           # [P*Cout, N*Jh*Wp]
    y = K.phase_out_planes(f, n, cout, (jn[0], wp), out, s, p0, batch_major=False)
    return y, ("cols", cols, wf_i, wg_i, wg_shape, w, jn, wp, tuple(s), tuple(p0), tuple(out), t, (h, wd))


def phase_cols_backward(gy, state, need_x, need_w):
    """The gradients of ``phase_cols_forward`` (x's [N, Cin, H, W] as a view, w's [Cin, Cout,
    kh, kw]) for the output gradient ``gy`` [N, Cout, OH, OW]."""
    _, cols, wf_i, wg_i, wg_shape, w, jn, wp, s, p0, out, t, (h, wd) = state
    n = gy.shape[0]
    # [P, Cout, N, Jh, Wp]; the last plane's shifted rows read up to tw - 1 elements past it (into
    # its junk columns): a tail of zeros
    g = K.phase_in_planes(gy, jn[:1] + (wp,), s, p0, w.dtype, batch_major=False, tail=t[1])
    pc = g.shape[0] * g.shape[1]
    gx = gw = None
    if need_x:
        wg = np.take(w.reshape(-1), wg_i).reshape(wg_shape[0], -1)         # [Cin, P*Cout*th*tw]
        gcols = _shift_cols(g.reshape(pc, n, jn[0], wp).transpose(1, 0, 2, 3), t, wp, h * wp)
        gx = (wg @ gcols).reshape(wg.shape[0], n, h, wp)[..., :wd].transpose(1, 0, 2, 3)
    if need_w:
        gwf = g.reshape(pc, -1) @ cols.T                                                  # [P*Cout, Cin*th*tw]
        gw = np.empty(w.size, gwf.dtype)
        gw[wf_i] = gwf.reshape(-1)
        gw = gw.reshape(w.shape)
    return gx, gw


# -- 3x3 stride 2 padding 1: the exact phases on NCHW planes ------------------------------------------
# The usual 2x upsampling kernel (3x3, stride 2, padding 1, output 2H - 1 or 2H) is no multiple of
# its stride. Per axis, output 2j takes tap 1 of input j, output 2j + 1 taps 2 (input j) and 0
# (input j + 1): per axis phase one or two shifts (0, +1) of the input, so the four 2-D phases use
# 1, 2, 2 and 4 of the four shifted input planes, 9 taps in all (the 4x4 zero-extended kernel of
# the general phases has 16, the adjoint's columns are 9 times the output gradient). With the
# shifted planes stacked in the order (0, 1), (0, 0), (1, 0), (1, 1), each phase's shifts are one
# contiguous block of rows, so a phase is one product of its taps' weights with a block of them.
# Planes are laid out on a padded width (Wp = W + 1), so a shift is an offset of the flat plane;
# the extra column (junk in the phases, zero in x and in the phases' gradients) and zero rows
# absorb the reads past the edges. One product per phase forward; backward, the nine shifted
# planes of the output gradient's phases give both gradients in one product each.
K3_SHIFTS = ((0, 1), (0, 0), (1, 0), (1, 1))
K3_BLOCKS = ((1, 2), (0, 2), (1, 3), (0, 4))      # phase (rh, rw) = (0, 0), (0, 1), (1, 0), (1, 1): its shifts
K3_TAP = {(0, 0): 1, (1, 0): 2, (1, 1): 0}        # (axis phase, shift) -> kernel tap
# Forward + backward against the adjoint (layer race vs torch, float32, 1 thread): at 8-16 channels
# 0.65-0.8 of its time on 32x32 to 64x64 inputs, even on 8x8; at 32-128 channels 0.8 on 32x32, even
# on 16x16, but 1.15-1.25x slower on 8x8 inputs (the padded row and column are a quarter more
# positions there, and the per-phase products are small): more channels take it from 16x16 inputs.
PHASE_K3_MAX_C = 16
PHASE_K3_MIN_PIXELS = 256


def phase_k3_usable(x, w, s, pads, d, groups, out):
    """Whether a 2-D transposed convolution of ``x`` [N, Cin, H, W] with ``w`` [Cin, Cout,
    3, 3], stride 2, padding 1 to ``out`` (2H - 1 or 2H per axis) takes the exact phases."""
    return (x.ndim == 4 and tuple(w.shape[2:]) == (3, 3) and tuple(s) == (2, 2) and tuple(pads) == (1, 1, 1, 1) and
            tuple(d) == (1, 1) and groups == 1 and K.usable(x, w) and x.dtype == w.dtype and
            (max(w.shape[0], w.shape[1]) <= PHASE_K3_MAX_C or x.shape[2] * x.shape[3] >= PHASE_K3_MIN_PIXELS) and
            all(out[i] in (2 * x.shape[2 + i] - 1, 2 * x.shape[2 + i]) for i in range(2)))


def _k3_taps():
    """Per phase p (row-major over (rh, rw)) its (shift block index, kh, kw) in block order."""
    taps = []
    for p, (rh, rw) in enumerate(np.ndindex(2, 2)):
        lo, hi = K3_BLOCKS[p]
        taps.append([(q, K3_TAP[(rh, K3_SHIFTS[q][0])], K3_TAP[(rw, K3_SHIFTS[q][1])]) for q in range(lo, hi)])
    return taps


K3_TAPS = _k3_taps()


def phase_k3_forward(x, w, out):
    """The transposed convolution of ``phase_k3_usable`` shapes: the output [N, Cout, OH, OW]
    (NCHW, C-contiguous) and the state ``phase_k3_backward`` takes."""
    n, cin, h, wd = x.shape
    cout = w.shape[1]
    wp = wd + 1
    ln = h * wp
    xp = np.zeros((n, cin, h + 2, wp), x.dtype)     # the rows below: the shifted reads past the last row
    xp[:, :, :h, :wd] = x
    flat, e = xp.reshape(-1), x.itemsize
    cols = np.empty((4, cin, n, ln), x.dtype)       # the four shifted planes
    for q, (u, v) in enumerate(K3_SHIFTS):
        cols[q] = np.lib.stride_tricks.as_strided(flat[u * wp + v:], (cin, n, ln), (xp.strides[1], xp.strides[0], e))
    cm = cols.reshape(4 * cin, n * ln)
    f = np.empty((4, cout, n * ln), x.dtype)
    for p, taps in enumerate(K3_TAPS):
        wr = np.concatenate([w[:, :, kh, kw] for _, kh, kw in taps], axis=0)   # [taps*Cin, Cout]
        lo, hi = K3_BLOCKS[p]
        np.matmul(wr.T, cm[lo * cin:hi * cin], out=f[p])
    y = K.phase_out_planes(f, n, cout, (h, wp), out, (2, 2), (0, 0), batch_major=False)
    return y, ("k3", cm, w, tuple(out))


def phase_k3_backward(gy, state, need_x, need_w):
    """The gradients of ``phase_k3_forward`` (x's [N, Cin, H, W] as a view, w's [Cin, Cout,
    3, 3]) for the output gradient ``gy`` [N, Cout, OH, OW]."""
    _, cm, w, out = state
    cin, cout = w.shape[:2]
    n = gy.shape[0]
    h, wd = (out[0] + 1) // 2, (out[1] + 1) // 2
    wp = wd + 1
    lx, lg = h * wp, (h + 1) * wp                     # a plane of x, of the gradient's phases
    # the phases on planes of one more row (zero), after wp + 1 zeros: every shifted read
    # below that falls off an output plane reads a zero
    lead = wp + 1
    buf = np.zeros(lead + 4 * cout * n * lg, w.dtype)
    K.phase_in_planes(gy, (h + 1, wp), (2, 2), (0, 0), w.dtype, batch_major=False, out=buf[lead:])
    # input position i meets tap (phase p, shift d) through g_p[i - d]: the nine shifted phase
    # planes stacked give both gradients in one product each
    e = w.itemsize
    gc = np.empty((9, cout, n, lx), w.dtype)
    wg = []
    k = 0
    for p, taps in enumerate(K3_TAPS):
        for q, kh, kw in taps:
            u, v = K3_SHIFTS[q]
            off = lead + p * cout * n * lg - (u * wp + v)
            gc[k] = np.lib.stride_tricks.as_strided(buf[off:], (cout, n, lx), (n * lg * e, lg * e, e))
            wg.append((kh, kw))
            k += 1
    gcm = gc.reshape(9 * cout, n * lx)
    gx = gw = None
    if need_w:    # x on the padded width is the forward's unshifted block (zero in the extra column)
        gwm = (gcm @ cm[cin:2 * cin].T).reshape(9, cout, cin)
        gw = np.empty(w.shape, w.dtype)
        for k, (kh, kw) in enumerate(wg):
            gw[:, :, kh, kw] = gwm[k].T
    if need_x:
        gxm = np.concatenate([w[:, :, kh, kw] for kh, kw in wg], axis=1) @ gcm        # [Cin, N*H*Wp]
        gx = gxm.reshape(cin, n, h, wp)[..., :wd].transpose(1, 0, 2, 3)
    return gx, gw


# -- 3-D transposed convolution whose kernel equals its stride ------------------------------------
# (the 2x2x2 stride-2 upsampling of U-Nets): every output position meets exactly one tap of one
# input position, so the whole layer is one product per sample, Wm^T [Cout*K, Cin] @ x_n
# [Cin, S] (K = kd*kh*kw taps, S = D*H*W input positions, x read in place), whose rows' taps
# are interleaved into the output in one copy (with the bias added in the same pass). The
# input gradient is Wm [Cin, Cout*K] @ the output gradient's taps taken apart into
# [Cout*K, N, S] (each sample's block a strided matrix of the product), the weight gradient
# one product of x's [Cin, N*S] copy with those taps transposed.
def tile_transpose_usable(x, w, s, pads, d, groups, out):
    """Whether ``tile_transpose_forward`` takes this 3-D transposed convolution: one group,
    kernel = stride, no padding or dilation, the output no smaller than S*s per axis, numpy
    (or cupy) float32/float64 arrays of one dtype."""
    k = tuple(w.shape[2:])
    xp = backend.get_array_module(x)
    return (len(k) == 3 and groups == 1 and tuple(s) == k and not any(pads) and all(v == 1 for v in d)
            and backend.get_array_module(w) is xp and x.dtype == w.dtype
            and x.dtype in (np.float32, np.float64)
            and all(out[i] >= x.shape[2 + i] * k[i] for i in range(3)))


def _tile_view(a, sp, k):
    """``a`` [N, C, *out] cut to its whole tiles as [N, C, D, kd, H, kh, W, kw] (a view)."""
    n, c = a.shape[:2]
    v = a[(slice(None), slice(None)) + tuple(slice(0, sp[i] * k[i]) for i in range(3))]
    return v.reshape((n, c) + tuple(m for i in range(3) for m in (sp[i], k[i])))


def tile_transpose_forward(x, w, b, out):
    """``conv3d_transpose(x, w) + b`` for ``tile_transpose_usable`` shapes: the output
    [N, Cout, *out] (C-contiguous) and the state ``tile_transpose_backward`` takes."""
    xp = backend.get_array_module(x)
    n, cin = x.shape[:2]
    sp, k = tuple(x.shape[2:]), tuple(w.shape[2:])
    cout = w.shape[1]
    ns = int(np.prod(sp))
    f = xp.matmul(w.reshape(cin, -1).T, x.reshape(n, cin, ns))          # [N, Cout*K, S]
    if b is not None:
        f.reshape(n, cout, -1)[...] += b.astype(x.dtype, copy=False).reshape(1, -1, 1)
    y = xp.empty((n, cout) + tuple(out), x.dtype)
    if any(out[i] > sp[i] * k[i] for i in range(3)):                     # output_padding: rows no tap reaches
        y[...] = 0 if b is None else b.astype(x.dtype, copy=False).reshape(-1, 1, 1, 1)
    # one strided copy per tap: numpy's copy of the whole 8-axis transposition (or an add
    # into it) runs its inner loop over the kw taps alone and is 2-3x slower
    f = f.reshape((n, cout) + k + sp)
    yv = _tile_view(y, sp, k)
    for i, j, m in itertools.product(range(k[0]), range(k[1]), range(k[2])):
        yv[:, :, :, i, :, j, :, m] = f[:, :, i, j, m]
    return y, (x, w)


def tile_transpose_backward(gy, state, need_x, need_w):
    """The gradients of ``tile_transpose_forward`` (x's [N, Cin, *S], w's [Cin, Cout, *k])
    for the output gradient ``gy`` [N, Cout, *out] (any layout)."""
    x, w = state
    xp = backend.get_array_module(x)
    n, cin = x.shape[:2]
    sp, k = tuple(x.shape[2:]), tuple(w.shape[2:])
    cout = w.shape[1]
    ns = int(np.prod(sp))
    g = xp.empty((cout,) + k + (n,) + sp, w.dtype)                        # the taps: [Cout, kd, kh, kw, N, D, H, W]
    g[...] = _tile_view(gy, sp, k).transpose(1, 3, 5, 7, 0, 2, 4, 6)
    g = g.reshape(-1, n, ns)
    gx = gw = None
    if need_x:
        gx = xp.matmul(w.reshape(cin, -1), g.transpose(1, 0, 2)).reshape(x.shape)
    if need_w:
        xm = x.reshape(cin, ns) if n == 1 else xp.ascontiguousarray(x.reshape(n, cin, ns).transpose(1, 0, 2))
        gw = (xm.reshape(cin, -1) @ g.reshape(g.shape[0], -1).T).reshape(w.shape)
    return gx, gw
