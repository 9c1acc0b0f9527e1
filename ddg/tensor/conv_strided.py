"""Strided depthwise and few-channel convolutions by polyphase components (numpy float32/float64).

Two loops take it (``forward`` at the end of this module chooses): for a dense NCHW input
with wide outputs a per-plane compiled loop (``_dw_loop``: each image plane split into its
components in a small in-cache buffer, no layout change); otherwise the batch-innermost
components described here, whose rows are N times longer.

A convolution with stride (sh, sw) reads input pixel (y*sh + i, x*sw + j) for output pixel
(y, x) and kernel offset (i, j). Writing i = a*sh + p and j = b*sw + q (p < sh, q < sw), the
pixel is (y + a)*sh + p, (x + b)*sw + q: pixel (y + a, x + b) of the polyphase component
(p, q) of the padded input (every sh-th row from p, every sw-th column from q). So the strided
convolution is a stride-1 convolution of the sh*sw components with the kernel split the same
way (component (p, q) gets the taps w[a*sh + p, b*sw + q], a ceil(kh/sh) x ceil(kw/sw) kernel,
zero where a tap falls outside the kernel). For a depthwise convolution the components of one
channel form one group of sh*sw input channels, so the whole op is the stride-1 grouped
whole-plane loop of ``conv_kernels`` (``plane_forward`` / ``plane_backward``), whose inner
loops run over contiguous rows, instead of the strided direct loop (inner loop over N
batch-interleaved values per output pixel). A 3x3 stride-2 kernel becomes 4 components of
2x2 (16 multiply-adds per output instead of 9, each vectorized).

The components are built batch-innermost (``[C*sh*sw, Hq, Wq, N]``, a contiguous run of N
values per pixel; at stride 2 the planes are a quarter of the input's, too short for the
loop's rows in NCHW), read from the input in its own layout (NCHW or batch-innermost), so
the output is a batch-innermost view (``[N, C, H, W]`` over a C-contiguous
``[C, H, W, N]``) and the input gradient a dense array in the input's layout. The same
route serves one-group first layers with few channels (``stem_pays``), and at stride 1 the
split and merge convert small NCHW planes for the whole-plane loop
(``padded_batch_inner``, ``unpad_to_nchw``).
"""
import numpy as np

from . import conv_kernels as K
from . import gemm
from .compiled import jitable, kernel
from .conv_phase import _cl, tap_product, window_rows


def usable(x, w, groups, stride, dilation):
    """Whether the polyphase path takes this convolution: numpy float32/float64, depthwise
    (one input channel per group, any channel multiplier), no dilation, a stride above 1
    and no larger than the kernel on each axis."""
    kh, kw = w.shape[2:]
    sh, sw = stride
    return (w.shape[1] == 1 and groups == x.shape[1] and tuple(dilation) == (1, 1) and (sh, sw) != (1, 1)
            and 1 <= sh <= kh and 1 <= sw <= kw and K.usable(x, w))


@jitable
def _pixel_offsets(geom):
    """For pixel i = r*W + col of an input plane: the offset of its element for image 0 in a
    channel's components [sh, sw, Hq, Wq, N] (the same table for every image and channel)."""
    n_n, c_n, h, w, sh, sw, hq, wq, pt, pl = geom
    comp = np.empty(h * w, np.int64)
    for r in range(h):
        p = (r + pt) % sh
        a = (r + pt) // sh
        for col in range(w):
            q = (col + pl) % sw
            b = (col + pl) // sw
            comp[r * w + col] = (((p * sw + q) * hq + a) * wq + b) * n_n
    return comp


@kernel
def _poly_split(x, sx, xs, geom):
    """Polyphase components of the zero-padded ``x`` [N, C, H, W] (flat, element strides
    ``sx`` = (n, c, row, column): batch-innermost, or NCHW C-contiguous): ``xs[c, p, q, a,
    b, n] = x[n, c, a*sh + p - pt, b*sw + q - pl]`` (0 outside the input), every element of
    ``xs`` [C, sh, sw, Hq, Wq, N] (flat, C-contiguous) written. A batch-innermost ``x`` is
    copied one contiguous run of N values per pixel; an NCHW one plane by plane, each plane
    read in order and its pixels written N apart into the channel's components (which stay
    in cache) through a per-pixel offset table, so no whole-array layout change precedes
    the split. ``geom`` = (N, C, H, W, sh, sw, Hq, Wq, pt, pl)."""
    n_n, c_n, h, w, sh, sw, hq, wq, pt, pl = geom
    blk = sh * sw * hq * wq * n_n
    if sx[0] != 1:
        comp = _pixel_offsets(geom)
        for c in range(c_n):
            cb = xs[c * blk:(c + 1) * blk]
            cb[:] = 0.0   # the padding; the planes write the rest
            for n in range(n_n):
                plane = x[n * sx[0] + c * sx[1]:n * sx[0] + c * sx[1] + h * w]
                d = cb[n:]
                for i in range(h * w):
                    d[comp[i]] = plane[i]
        return
    for c in range(c_n):
        cb = xs[c * blk:(c + 1) * blk]
        for p in range(sh):
            for a in range(hq):
                r = a * sh + p - pt
                for q in range(sw):
                    o = (((p * sw + q) * hq + a) * wq) * n_n
                    orow = cb[o:o + wq * n_n]
                    if r < 0 or r >= h:
                        orow[:] = 0.0
                        continue
                    i0 = c * sx[1] + r * sx[2]
                    for b in range(wq):
                        col = b * sw + q - pl
                        dst = orow[b * n_n:(b + 1) * n_n]
                        if col < 0 or col >= w:
                            dst[:] = 0.0
                        else:
                            run = x[i0 + col * sx[3]:i0 + col * sx[3] + n_n]
                            for k in range(n_n):
                                dst[k] = run[k]


@kernel
def _poly_merge(gxs, gx, sx, geom):
    """Adjoint of ``_poly_split`` restricted to the input: ``gx[n, c, r, col]`` (flat, element
    strides ``sx`` = (n, c, row, column): batch-innermost, or NCHW C-contiguous; every
    element written) = the component element that input pixel (r, col) of image n went to.
    Each input pixel is in exactly one component, so this is a gather (no sums); an NCHW
    ``gx`` plane by plane through ``_poly_split``'s offset table. ``geom`` as
    ``_poly_split``'s."""
    n_n, c_n, h, w, sh, sw, hq, wq, pt, pl = geom
    blk = sh * sw * hq * wq * n_n
    if sx[0] != 1:
        comp = _pixel_offsets(geom)
        for c in range(c_n):
            cb = gxs[c * blk:(c + 1) * blk]
            for n in range(n_n):
                plane = gx[n * sx[0] + c * sx[1]:n * sx[0] + c * sx[1] + h * w]
                d = cb[n:]
                for i in range(h * w):
                    plane[i] = d[comp[i]]
        return
    for c in range(c_n):
        cb = gxs[c * blk:(c + 1) * blk]
        for r in range(h):
            p = (r + pt) % sh
            a = (r + pt) // sh
            o = c * sx[1] + r * sx[2]
            for col in range(w):
                q = (col + pl) % sw
                b = (col + pl) // sw
                j0 = (((p * sw + q) * hq + a) * wq + b) * n_n
                run = cb[j0:j0 + n_n]
                out = gx[o + col * sx[3]:o + col * sx[3] + n_n]
                for k in range(n_n):
                    out[k] = run[k]


def _geometry(x_shape, w_shape, stride, pads, oh, ow):
    h, wd = x_shape[2:4]
    kh, kw = w_shape[2:]
    sh, sw = stride
    kh2, kw2 = -(-kh // sh), -(-kw // sw)
    # component extent: what the outputs read, and at least every input sample (so that the
    # input gradient is written in full by the components)
    hq = max(oh - 1 + kh2, -(-(pads[0] + h) // sh))
    wq = max(ow - 1 + kw2, -(-(pads[2] + wd) // sw))
    return kh2, kw2, hq, wq


def _poly_forward(x, w, stride, pads, oh, ow, groups):
    """Convolution of ``x`` [N, C, H, W] with ``w`` [O, C/groups, kh, kw] at ``stride``, padding
    ``pads`` (top, bottom, left, right), for ``groups`` = C (depthwise, any channel
    multiplier) or 1, as the stride-1 whole-plane loop over the components (each input
    channel's sh*sw components are input channels of its group): the output
    [N, O, OH, OW] (a batch-innermost view) and the state ``_poly_backward`` needs."""
    sh, sw = stride
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    kh2, kw2, hq, wq = _geometry(x.shape, w.shape, stride, pads, oh, ow)
    xs = np.empty((1, c * sh * sw, hq, wq, n), x.dtype)
    geom = (n, c, h, wd, sh, sw, hq, wq, pads[0], pads[2])
    xf, sx = _flat(x)
    _poly_split(xf, sx, xs.reshape(-1), geom)
    ws = np.zeros((o, cg, sh, sw, kh2, kw2), w.dtype)
    live = np.zeros((o, cg, sh, sw, kh2, kw2), np.uint8)   # the component taps that exist
    for p in range(sh):
        for q in range(sw):
            tap = w[:, :, p::sh, q::sw]
            ws[:, :, p, q, :tap.shape[2], :tap.shape[3]] = tap
            live[:, :, p, q, :tap.shape[2], :tap.shape[3]] = 1
    ws = ws.reshape(o, cg * sh * sw, kh2, kw2)
    y5 = K.plane_forward(xs, ws, groups, (1, 1), oh, ow, live)
    return y5[0].transpose(3, 0, 1, 2), (xs, ws, geom, x.shape, w.shape, live, sx[0] == 1, groups)


def _poly_backward(state, gy, need_x, need_w):
    """Gradients of ``_poly_forward`` for the output gradient ``gy`` [N, O, OH, OW]: the input's
    (in the input's layout: batch-innermost for a batch-innermost input, else C-contiguous
    NCHW) and the weight's, each None unless asked for."""
    xs, ws, geom, x_shape, w_shape, live, chwn, groups = state
    n, c, h, wd = x_shape
    sh, sw = geom[4:6]
    gy = gy.astype(xs.dtype, copy=False)
    # batch-innermost output gradient: on small planes by the split at stride 1 (measured
    # 0.6x the interleaving copy's time on 4x4 planes, 0.9-0.97x on 8x8, 1.2x on 16x16)
    g5 = (padded_batch_inner(gy, (0, 0, 0, 0)) if gy.shape[2] * gy.shape[3] <= 64 else _cl(gy))[None]
    gxs, gws = K.plane_backward(xs, ws, g5, groups, (1, 1), need_x, need_w, live)
    gx = gw = None
    if need_x:
        gx = np.empty((c, h, wd, n), xs.dtype).transpose(3, 0, 1, 2) if chwn else np.empty(x_shape, xs.dtype)
        _poly_merge(gxs.reshape(-1), gx.transpose(_CHWN).reshape(-1) if chwn else gx.reshape(-1),
                    tuple(st // gx.itemsize for st in gx.strides), geom)
    if need_w:
        o, cg, kh, kw = w_shape
        gws = gws.reshape(o, cg, sh, sw, ws.shape[2], ws.shape[3])
        gw = np.empty(w_shape, ws.dtype)
        for p in range(sh):
            for q in range(sw):
                tap = gw[:, :, p::sh, q::sw]
                tap[...] = gws[:, :, p, q, :tap.shape[2], :tap.shape[3]]
    return gx, gw


# -- few-channel strided convolutions (first layers, stems) by components -------------------------

STEM_MIN_PIXELS = 1024   # output pixels per plane from which ``stem_pays`` takes the components


def stem_pays(x, w, groups, stride, dilation, oh, ow, x_grad=True):
    """Whether a one-group strided convolution with few input channels (a first layer, a stem)
    runs as the whole-plane loop over the input's polyphase components (``stem_forward``)
    instead of per-sample columns: numpy float32/float64, no dilation, 1 < stride <= kernel,
    at most 4 input channels, outputs of at least ``STEM_MIN_PIXELS`` (32x32), and few output channels for the
    kernel (<= 24 from 5x5 kernels on, <= 32 when the input needs no gradient, <= 8 below):
    the loop's work grows with the output channels, the columns' gather and scatter do not
    (nor their input gradient's product, absent without an input gradient). Forward +
    backward, batch 16-32 on 64 px, loop / columns time: 7x7/2 3->8 0.43 (without an input
    gradient 0.45), 3->16 0.72 (0.5), 3->24 0.9, 3->32 1.05 (0.82-0.9), 3->48 (0.95-1.25); 5x5/2
    3->16 0.5, 3->32 (0.9); 3x3/2 3->8 0.85, 3->16 1.3 (1.45)."""
    kh, kw = w.shape[2:]
    sh, sw = stride
    o = w.shape[0]
    return (groups == 1 and tuple(dilation) == (1, 1) and (sh, sw) != (1, 1) and sh <= kh and sw <= kw
            and x.shape[1] <= 4 and oh * ow >= STEM_MIN_PIXELS and o <= ((24 if x_grad else 32) if kh * kw >= 25 else 8)
            and K.usable(x, w))


def stem_forward(x, w, stride, pads, oh, ow):
    """``stem_pays``' convolution: the output [N, O, OH, OW] (a batch-innermost view) and the
    state ``backward`` takes."""
    y, state = _poly_forward(x, w, stride, pads, oh, ow, 1)
    return y, (_poly_backward, state)


def padded_batch_inner(x, pads):
    """``x`` [N, C, H, W] (numpy float32/float64) zero-padded by ``pads`` (top, bottom, left,
    right) as a C-contiguous batch-innermost ``[C, Hp, Wp, N]``: ``_poly_split`` at stride
    1 (an NCHW input plane by plane, each padded channel block zeroed in cache, so no
    whole-array zero fill before the copy). An input already batch-innermost and dense goes
    by numpy's slice copy of whole ``[W, N]`` rows and the border zeroed alone: [16, 16, 32,
    32] 0.09 ms against the loop's 0.18, [16, 16, 64, 64] 0.38 against 0.67."""
    n, c, h, wd = x.shape
    top, bottom, left, right = pads
    hp, wp = h + top + bottom, wd + left + right
    out = np.empty((c, hp, wp, n), x.dtype)
    inner = x.transpose(_CHWN)
    if inner.flags.c_contiguous:
        out[:, :top] = 0
        out[:, top + h:] = 0
        out[:, top:top + h, :left] = 0
        out[:, top:top + h, left + wd:] = 0
        out[:, top:top + h, left:left + wd] = inner
        return out
    xf, sx = _flat(x)
    _poly_split(xf, sx, out.reshape(-1), (n, c, h, wd, 1, 1, hp, wp, pads[0], pads[2]))
    return out


def unpad_to_nchw(g, x_shape, pt, pl):
    """The [N, C, H, W] block at rows ``pt``, columns ``pl`` of the padded batch-innermost
    ``g`` [C, Hp, Wp, N] (C-contiguous, numpy float32/float64) as a C-contiguous NCHW array
    (``_poly_merge`` at stride 1): an input gradient handed back in its NCHW input's layout,
    not as a transposed view that a consumer copies through numpy's strided loops."""
    n, c, h, wd = x_shape
    gx = np.empty(x_shape, g.dtype)
    _poly_merge(g.reshape(-1), gx.reshape(-1), tuple(st // gx.itemsize for st in gx.strides),
                (n, c, h, wd, 1, 1, g.shape[1], g.shape[2], pt, pl))
    return gx


# -- dense (groups = 1) strided convolution with a kernel that is a multiple of the stride ----------
# The components of all C channels are the 4C (sh*sw*C) input channels of a stride-1
# convolution with a (kh/sh) x (kw/sw) kernel. It runs without columns: on the components'
# batch-innermost planes [C*sh*sw, Hq, Wq, N], flattened, the output pixel (y, x) sits at
# (y*Wq + x)*N and kernel offset (a, b) is the shift (a*Wq + b)*N of the whole plane, so the
# convolution is one product per offset, W_ab [O, C*sh*sw] by a shifted column range of the
# planes, summed (outputs laid on the padded width Wq, the Wq - OW junk columns dropped at
# the end). The input gradient is the same shifted ranges gaining W_ab^T @ gy, the weight
# gradient gy @ range^T per offset.

MIN_COLUMNS = 8   # output positions per component channel below which im2col is faster


def dense_usable(x, w, groups, stride, dilation, oh, ow):
    """Whether the component path takes this convolution: numpy float32/float64, one group,
    no dilation, a stride above 1 on some axis that divides the kernel on each axis, and
    products long enough: at least ``MIN_COLUMNS`` output positions (OH*OW*N) per component
    channel (C*sh*sw). Below that (deep layers on small images) the per-offset products are
    short and the one product over im2col columns was measured as fast or faster (4x4
    stride 2, batch 16, forward + backward: 64 -> 128 channels on 8x8 images 1.35x slower by
    components, on 16x16 even, on 32x32 1.2x faster; 16 -> 32 on 32x32 1.4x faster)."""
    kh, kw = w.shape[2:]
    sh, sw = stride
    return (groups == 1 and tuple(dilation) == (1, 1) and (sh, sw) != (1, 1) and kh % sh == 0 and kw % sw == 0
            and oh * ow * x.shape[0] >= MIN_COLUMNS * x.shape[1] * sh * sw and K.usable(x, w))


def _shifts(kh2, kw2, wq, n):
    return [((a * kw2 + b), (a * wq + b) * n) for a in range(kh2) for b in range(kw2)]


def dense_forward(x, w, stride, pads, oh, ow):
    """Convolution of ``x`` [N, C, H, W] with ``w`` [O, C, kh, kw] at ``stride`` (dividing
    the kernel), padding ``pads`` (top, bottom, left, right): the output [N, O, OH, OW] (a
    dense batch-innermost view) and the state ``dense_backward`` needs."""
    sh, sw = stride
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    kh2, kw2, hq, wq = _geometry(x.shape, w.shape, stride, pads, oh, ow)
    xs = np.empty((c, sh, sw, hq, wq, n), x.dtype)
    geom = (n, c, h, wd, sh, sw, hq, wq, pads[0], pads[2])
    xf, sx = _flat(x)
    _poly_split(xf, sx, xs.reshape(-1), geom)
    # w_ab[o, (c, p, q)] = w[o, c, a*sh + p, b*sw + q]
    wab = np.ascontiguousarray(w.reshape(o, c, kh2, sh, kw2, sw).transpose(2, 4, 0, 1, 3, 5)).reshape(
        kh2 * kw2, o, c * sh * sw)
    cp, wf = c * sh * sw, hq * wq * n
    xf = xs.reshape(cp, wf)
    ln = (oh - 1) * wq * n + ow * n
    full = np.empty((o, oh * wq * n), x.dtype)
    if o >= TAPS_MIN_ROWS and gemm.takes(x.dtype):
        # every tap in one product: column (t, c) of the taps' weights times the input window
        # of shift s_t, row c, read in place (row t*cp + c of B starts at c*wf + s_t)
        shifts = np.array([s for _, s in _shifts(kh2, kw2, wq, n)], np.int64)
        tab = (np.arange(cp, dtype=np.int64) * wf + shifts[:, None]).reshape(-1)
        window_rows(np.ascontiguousarray(wab.transpose(1, 0, 2)).reshape(o, -1), xf, tab, full, 0, oh, wq * n, ow * n)
    else:
        acc = None
        for t, s in _shifts(kh2, kw2, wq, n):
            part = wab[t] @ xf[:, s:s + ln]
            if acc is None:
                acc = part
            else:
                acc += part
        full[:, :ln] = acc
    y = np.empty((o, oh, ow, n), x.dtype)
    y[...] = full.reshape(o, oh, wq, n)[:, :, :ow]
    return y.transpose(3, 0, 1, 2), (xs, wab, geom, (kh2, kw2, oh, ow), w.shape)


def dense_backward(state, gy, need_x, need_w):
    """Gradients of ``dense_forward`` for the output gradient ``gy`` [N, O, OH, OW]: the
    input's (a dense batch-innermost view) and the weight's, each None unless asked for."""
    xs, wab, geom, (kh2, kw2, oh, ow), w_shape = state
    if min(w_shape[0], xs.shape[0] * xs.shape[1] * xs.shape[2]) >= TAPS_MIN_ROWS and gemm.takes(xs.dtype):
        return _dense_backward_kernel(state, gy, need_x, need_w)
    n, c, h, wd, sh, sw, hq, wq = geom[:8]
    o = w_shape[0]
    ln = (oh - 1) * wq * n + ow * n
    cp, wf = c * sh * sw, hq * wq * n
    xf = xs.reshape(cp, wf)
    # the output gradient on the padded width, zero in the junk columns, as [O, L] and as
    # [L, O] (the weight gradient's products run 1.3x faster with the [L, O] operand)
    gf = _cl(gy.astype(xs.dtype, copy=False), (0, 0, 0, wq - ow)).reshape(o, -1)[:, :ln]
    gx = gw = None
    if need_w:
        gft = gemm.transposed(gf)
        gwab = np.empty((kh2 * kw2, cp, o), xs.dtype)
        for t, s in _shifts(kh2, kw2, wq, n):
            np.matmul(xf[:, s:s + ln], gft, out=gwab[t])
        gw = np.ascontiguousarray(gwab.reshape(kh2, kw2, c, sh, sw, o).transpose(5, 2, 0, 3, 1, 4)).reshape(w_shape)
    if need_x:
        # all offsets' products as one (taps*C*sh*sw rows; measured 1.5x faster than one
        # product per offset), each then added into its shifted range
        parts = (np.ascontiguousarray(wab.transpose(0, 2, 1)).reshape(-1, o) @ gf).reshape(kh2 * kw2, -1, ln)
        gxs = np.zeros((cp, wf), xs.dtype)
        for t, s in _shifts(kh2, kw2, wq, n):
            gxs[:, s:s + ln] += parts[t]
        gx = _merge(gxs, geom)
    return gx, gw


def _merge(gxs, geom):
    """The input gradient (a dense batch-innermost ``[N, C, H, W]`` view) from its components'."""
    n, c, h, wd = geom[:4]
    gxd = np.empty((c, h, wd, n), gxs.dtype)
    _poly_merge(gxs.reshape(-1), gxd.reshape(-1), (1, h * wd * n, wd * n, n), geom)
    return gxd.transpose(3, 0, 1, 2)


# The dense path's products run ``gemm_kernels.gemm_rows`` where ``gemm.takes`` the dtype
# (float32, one BLAS thread) and each has at least TAPS_MIN_ROWS rows (output channels
# forward, component rows C*sh*sw backward), else numpy's: a 3 -> 64 first layer on 32x32 (12
# component rows), batch 64, ran 12.6 ms with numpy's products and 13.0 by the window
# kernel's padded tile
TAPS_MIN_ROWS = 16


def _dense_backward_kernel(state, gy, need_x, need_w):
    """``dense_backward`` by the compiled window products: the weight gradient of each tap
    as the product of its input window (read in place) and the output gradient, the input
    gradient as every tap's product summed in the register tile from shifted windows of the
    output gradient (laid with P zero columns before it and zeros after), written once."""
    xs, wab, geom, (kh2, kw2, oh, ow), w_shape = state
    n, c, h, wd, sh, sw, hq, wq = geom[:8]
    o = w_shape[0]
    ln = (oh - 1) * wq * n + ow * n
    cp, wf = c * sh * sw, hq * wq * n
    xf = xs.reshape(cp, wf)
    shifts = np.array([s for _, s in _shifts(kh2, kw2, wq, n)], np.int64)
    T, P = len(shifts), int(shifts.max())
    # the output gradient batch-innermost on the padded width, placed kh2 - 1 rows and kw2 - 1
    # columns in (P values: the largest shift) with zeros around it and in the junk columns
    gpad = _cl(gy.astype(xs.dtype, copy=False), (kh2 - 1, hq + 1 - oh, kw2 - 1, wq - ow - kw2 + 1)).reshape(o, -1)
    gx = gw = None
    if need_w:
        gft = gemm.transposed(gpad[:, P:P + ln])
        gwab = np.empty((T, cp, o), xs.dtype)
        for t in range(T):      # columns s_t.. of the input's components against rows 0.. of gft
            tap_product(xf, gft, int(shifts[t]), ln, gwab[t], wq * n, ow * n)
        gw = np.ascontiguousarray(gwab.reshape(kh2, kw2, c, sh, sw, o).transpose(5, 2, 0, 3, 1, 4)).reshape(w_shape)
    if need_x:
        from . import gemm_kernels  # noqa: PLC0415
        tab = (np.arange(o, dtype=np.int64) * gpad.shape[1] + (P - shifts)[:, None]).reshape(-1)
        gxs = np.empty((cp, wf), xs.dtype)
        kc, qb = gemm.blocking(len(tab))
        gemm_kernels.gemm_rows(np.ascontiguousarray(wab.transpose(2, 0, 1)).reshape(cp, T * o), gpad, tab, gxs, 0, wf,
                               gxs, 0, 0, kc, qb)
        gx = _merge(gxs, geom)
    return gx, gw


# -- depthwise strided convolution, one plane at a time ---------------------------------------------
# Each (image, channel) plane of a dense NCHW input is split into its sh*sw polyphase components
# in a small buffer ``[sh, sw, Hq, Wq]`` that stays in cache (at sw = 2 both column phases of
# a row in one loop, which compiles to paired vector loads). On the components' padded width
# Wq, kernel offset (i, j) = (a*sh + p, b*sw + q) is one shift of component (p, q), so the
# output plane is kh*kw multiply-adds over ``L = (OH-1)*Wq + OW`` contiguous elements (9 for
# a 3x3 kernel, none on padding taps), its junk columns dropped when the rows are written.
# The backward pass runs the same shifts: the weight gradient as dot products with the
# output gradient laid on the padded width, the input gradient as shifted adds into a
# component buffer that is gathered back into the plane. The output gradient is read
# through its element strides (n, c, row, column), so a batch-innermost one needs no copy.

@kernel
def _dw_loop(x, keep, w, g, gx, gw, geom, sx, sg, nco, fwd, need_x, need_w, zero):
    """Forward (``fwd``): ``g`` (flat, element strides ``sg``) = the depthwise strided
    convolution of ``x`` (flat, strides ``sx``) with ``w`` [O, 1, kh, kw], each plane's
    components left in ``keep`` ([C, N, sh, sw, Hq, Wq], flat, every element written).
    Backward: for the output gradient ``g``, the input gradient ``gx`` (flat, strides
    ``sx``, every element written) if ``need_x`` and the weight gradient ``gw`` (float64
    [O*kh*kw]) if ``need_w``, reading the input's components from ``keep``.
    ``nco`` = (N, C, O); ``zero`` is 0 in the arrays' dtype. ``geom`` = (H, W, kh, kw, sh,
    sw, OH, OW, pt, pl, Hq, Wq)."""
    h, wd, kh, kw, sh, sw, oh, ow, pt, pl, hq, wq = geom
    n_n, c_n, o_n = nco
    m = o_n // c_n
    ln = (oh - 1) * wq + ow
    pq = hq * wq
    half, odd = wd // 2, wd % 2
    gbuf = np.empty(sh * sw * pq, x.dtype)
    acc = np.zeros(ln, x.dtype)   # the output (gradient) on the padded width: junk columns stay 0
    gw[:] = 0.0
    for c in range(c_n):
        for n in range(n_n):
            xb = n * sx[0] + c * sx[1]
            ko = (c * n_n + n) * sh * sw * pq
            buf = keep[ko:ko + sh * sw * pq]
            if fwd:
                buf[:] = zero   # the padding positions; the split writes the others
                # the plane's components: buf[p, q, a, b] = x[a*sh + p - pt, b*sw + q - pl] (0 outside)
                for r in range(h):
                    p = (r + pt) % sh
                    a = (r + pt) // sh
                    if sw == 2 and sx[3] == 1:
                        # both column phases in one loop (vectorized as paired loads)
                        xc = x[xb + r * sx[2]:xb + r * sx[2] + wd]
                        re = ((p * 2 + pl % 2) * hq + a) * wq + pl // 2
                        ro = ((p * 2 + (pl + 1) % 2) * hq + a) * wq + (pl + 1) // 2
                        ev = buf[re:re + half + odd]
                        od = buf[ro:ro + half]
                        for k in range(half):
                            ev[k] = xc[2 * k]
                            od[k] = xc[2 * k + 1]
                        if odd:
                            ev[half] = xc[wd - 1]
                        continue
                    xr = x[xb + r * sx[2]:xb + r * sx[2] + (wd - 1) * sx[3] + 1:sx[3]]
                    for q in range(sw):
                        c0 = (q - pl) % sw
                        if c0 >= wd:
                            continue
                        xs = xr[c0::sw]
                        rb = ((p * sw + q) * hq + a) * wq + (c0 + pl) // sw
                        orow = buf[rb:rb + xs.shape[0]]
                        for k in range(xs.shape[0]):
                            orow[k] = xs[k]
            if not fwd and need_x:
                gbuf[:] = zero
            for o in range(c * m, c * m + m):
                gb = n * sg[0] + o * sg[1]
                if fwd:
                    acc[:] = zero
                else:
                    for yy in range(oh):
                        ar = acc[yy * wq:yy * wq + ow]
                        if sg[3] == 1:
                            gc = g[gb + yy * sg[2]:gb + yy * sg[2] + ow]
                            for xx in range(ow):
                                ar[xx] = gc[xx]
                            continue
                        gr = g[gb + yy * sg[2]:gb + yy * sg[2] + (ow - 1) * sg[3] + 1:sg[3]]
                        for xx in range(ow):
                            ar[xx] = gr[xx]
                for i in range(kh):
                    for j in range(kw):
                        t = (o * kh + i) * kw + j
                        s0 = (((i % sh) * sw + j % sw) * hq + i // sh) * wq + j // sw
                        wv = w[t]
                        if fwd:
                            src = buf[s0:s0 + ln]
                            for k in range(ln):
                                acc[k] += wv * src[k]
                            continue
                        if need_w and need_x:
                            src = buf[s0:s0 + ln]
                            dst = gbuf[s0:s0 + ln]
                            d = zero
                            for k in range(ln):
                                d += acc[k] * src[k]
                                dst[k] += wv * acc[k]
                            gw[t] += d
                            continue
                        if need_w:
                            src = buf[s0:s0 + ln]
                            d = zero
                            for k in range(ln):
                                d += acc[k] * src[k]
                            gw[t] += d
                        if need_x:
                            dst = gbuf[s0:s0 + ln]
                            for k in range(ln):
                                dst[k] += wv * acc[k]
                if fwd:
                    for yy in range(oh):
                        ar = acc[yy * wq:yy * wq + ow]
                        if sg[3] == 1:
                            gc = g[gb + yy * sg[2]:gb + yy * sg[2] + ow]
                            for xx in range(ow):
                                gc[xx] = ar[xx]
                            continue
                        gr = g[gb + yy * sg[2]:gb + yy * sg[2] + (ow - 1) * sg[3] + 1:sg[3]]
                        for xx in range(ow):
                            gr[xx] = ar[xx]
            if not fwd and need_x:
                # every input pixel is in one component: a gather back into the plane
                for r in range(h):
                    p = (r + pt) % sh
                    a = (r + pt) // sh
                    if sw == 2 and sx[3] == 1:
                        xc = gx[xb + r * sx[2]:xb + r * sx[2] + wd]
                        re = ((p * 2 + pl % 2) * hq + a) * wq + pl // 2
                        ro = ((p * 2 + (pl + 1) % 2) * hq + a) * wq + (pl + 1) // 2
                        ev = gbuf[re:re + half + odd]
                        od = gbuf[ro:ro + half]
                        for k in range(half):
                            xc[2 * k] = ev[k]
                            xc[2 * k + 1] = od[k]
                        if odd:
                            xc[wd - 1] = ev[half]
                        continue
                    xr = gx[xb + r * sx[2]:xb + r * sx[2] + (wd - 1) * sx[3] + 1:sx[3]]
                    for q in range(sw):
                        c0 = (q - pl) % sw
                        if c0 >= wd:
                            continue
                        xs = xr[c0::sw]
                        rb = ((p * sw + q) * hq + a) * wq + (c0 + pl) // sw
                        grow = gbuf[rb:rb + xs.shape[0]]
                        for k in range(xs.shape[0]):
                            xs[k] = grow[k]


_CHWN = (1, 2, 3, 0)


def _flat(a):
    """``a`` [N, C, H, W] as a flat array and its element strides (n, c, row, column), without
    a copy where it is dense in NCHW or batch-innermost order (else copied to NCHW)."""
    for perm in ((0, 1, 2, 3), _CHWN):
        t = a.transpose(perm)
        if t.flags.c_contiguous:
            return t.reshape(-1), tuple(s // a.itemsize for s in a.strides)
    a = np.ascontiguousarray(a)
    return a.reshape(-1), tuple(s // a.itemsize for s in a.strides)


def _plane_forward(x, w, stride, pads, oh, ow):
    """Depthwise convolution of ``x`` [N, C, H, W] with ``w`` [O, 1, kh, kw] (O = C * multiplier)
    at ``stride``, padding ``pads`` (top, bottom, left, right) by ``_dw_loop``, for a
    C-contiguous ``x``: the output [N, O, OH, OW] (C-contiguous) and the state
    ``_plane_backward`` needs."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    _, _, hq, wq = _geometry(x.shape, w.shape, stride, pads, oh, ow)
    xf, sx = _flat(x)
    geom = (h, wd, kh, kw, stride[0], stride[1], oh, ow, pads[0], pads[2], hq, wq)
    y = np.empty((n, o, oh, ow), x.dtype)
    wf = np.ascontiguousarray(w, x.dtype).reshape(-1)
    keep = np.empty(c * n * stride[0] * stride[1] * hq * wq, x.dtype)
    _dw_loop(xf, keep, wf, y.reshape(-1), xf[:0], np.empty(0), geom, sx, (o * oh * ow, oh * ow, ow, 1), (n, c, o),
             True, False, False, x.dtype.type(0))
    return y, (keep, sx, wf, geom, x.shape, w.shape)


def _plane_backward(state, gy, need_x, need_w):
    """Gradients of ``_plane_forward`` for the output gradient ``gy`` [N, O, OH, OW]: the
    input's (C-contiguous) and the weight's, each None unless asked for; ``gy`` in any
    layout (read through its strides where it is NCHW or batch-innermost)."""
    keep, sx, wf, geom, x_shape, w_shape = state
    gf, sg = _flat(gy.astype(keep.dtype, copy=False))
    gx = np.empty(x_shape, keep.dtype) if need_x else None
    gxf = gx.reshape(-1) if need_x else keep[:0]
    gw = np.empty(wf.size, np.float64)
    _dw_loop(keep[:0], keep, wf, gf, gxf, gw, geom, sx, sg, (x_shape[0], x_shape[1], w_shape[0]), False,
             bool(need_x), bool(need_w), keep.dtype.type(0))
    return gx, (gw.astype(keep.dtype).reshape(w_shape) if need_w else None)


PLANE_MIN_OW = 10   # output width from which the per-plane loop beats the batch-innermost components


def forward(x, w, stride, pads, oh, ow):
    """Depthwise strided convolution of ``x`` [N, C, H, W] with ``w`` [O, 1, kh, kw] at
    ``stride``, padding ``pads`` (top, bottom, left, right): the output [N, O, OH, OW] and the
    state ``backward`` needs. A dense NCHW input with wide outputs (at least ``PLANE_MIN_OW``
    columns) goes plane by plane (``_dw_loop``, output NCHW); other inputs over the
    batch-innermost components: narrow outputs, where their rows are N times longer (the
    per-row overhead of the plane loop made it slower there; 3x3 stride 2, NCHW, forward +
    backward, plane loop / components time: 14x14 outputs (256 channels, batch 8) 0.76,
    12x12 0.8, 10x10 (128 channels, batch 16) 0.93, 9x9 1.1, 8x8 1.2, 7x7 1.25), and
    batch-innermost inputs (the layout the nets' other layers hand on), which the
    components read without a layout change (the plane loop read them 5% slower in the
    MobileNet bench)."""
    if ow >= PLANE_MIN_OW and x.flags.c_contiguous:
        y, state = _plane_forward(x, w, stride, pads, oh, ow)
        return y, (_plane_backward, state)
    y, state = _poly_forward(x, w, stride, pads, oh, ow, x.shape[1])
    return y, (_poly_backward, state)


def backward(state, gy, need_x, need_w):
    """Gradients of ``forward`` for the output gradient ``gy`` [N, O, OH, OW]: the input's and
    the weight's, each None unless asked for."""
    return state[0](state[1], gy, need_x, need_w)
