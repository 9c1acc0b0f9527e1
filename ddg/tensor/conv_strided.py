"""Strided depthwise convolution by polyphase components (numpy float32/float64).

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
loop's rows in NCHW), so the output and the input gradient are batch-innermost views
(``[N, C, H, W]`` over a C-contiguous ``[C, H, W, N]``), the input gradient a dense one.
"""
import numpy as np

from . import conv_kernels as K
from .compiled import kernel
from .conv_phase import _cl


def usable(x, w, groups, stride, dilation):
    """Whether the polyphase path takes this convolution: numpy float32/float64, depthwise
    (one input channel per group, any channel multiplier), no dilation, a stride above 1
    and no larger than the kernel on each axis."""
    kh, kw = w.shape[2:]
    sh, sw = stride
    return (w.shape[1] == 1 and groups == x.shape[1] and tuple(dilation) == (1, 1) and (sh, sw) != (1, 1)
            and 1 <= sh <= kh and 1 <= sw <= kw and K.usable(x, w))


@kernel
def _poly_split(x, xs, geom):
    """Polyphase components of the zero-padded batch-innermost ``x`` [C, H, W, N] (flat,
    C-contiguous): ``xs[c, p, q, a, b, n] = x[c, a*sh + p - pt, b*sw + q - pl, n]`` (0 outside
    the input), every element of ``xs`` [C, sh, sw, Hq, Wq, N] written; one copy of the N
    contiguous values per pixel. ``geom`` = (N, C, H, W, sh, sw, Hq, Wq, pt, pl)."""
    n_n, c_n, h, w, sh, sw, hq, wq, pt, pl = geom
    for c in range(c_n):
        for p in range(sh):
            for a in range(hq):
                r = a * sh + p - pt
                for q in range(sw):
                    o = ((((c * sh + p) * sw + q) * hq + a) * wq) * n_n
                    orow = xs[o:o + wq * n_n]
                    if r < 0 or r >= h:
                        orow[:] = 0.0
                        continue
                    i0 = (c * h + r) * w * n_n
                    for b in range(wq):
                        col = b * sw + q - pl
                        dst = orow[b * n_n:(b + 1) * n_n]
                        if col < 0 or col >= w:
                            dst[:] = 0.0
                        else:
                            src = x[i0 + col * n_n:i0 + (col + 1) * n_n]
                            for k in range(n_n):
                                dst[k] = src[k]


@kernel
def _poly_merge(gxs, gx, geom):
    """Adjoint of ``_poly_split`` restricted to the input: ``gx[c, r, col, n]`` (flat
    C-contiguous [C, H, W, N], every element written) = the component element that input
    pixel (r, col) went to. Each input pixel is in exactly one component, so this is a
    gather (no sums). ``geom`` as ``_poly_split``'s."""
    n_n, c_n, h, w, sh, sw, hq, wq, pt, pl = geom
    for c in range(c_n):
        for r in range(h):
            p = (r + pt) % sh
            a = (r + pt) // sh
            o = (c * h + r) * w * n_n
            for col in range(w):
                q = (col + pl) % sw
                b = (col + pl) // sw
                i0 = ((((c * sh + p) * sw + q) * hq + a) * wq + b) * n_n
                src = gxs[i0:i0 + n_n]
                dst = gx[o + col * n_n:o + (col + 1) * n_n]
                for k in range(n_n):
                    dst[k] = src[k]


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


def forward(x, w, stride, pads, oh, ow):
    """Depthwise convolution of ``x`` [N, C, H, W] with ``w`` [O, 1, kh, kw] (O = C * multiplier)
    at ``stride``, padding ``pads`` (top, bottom, left, right): the output [N, O, OH, OW]
    (a batch-innermost view) and the state ``backward`` needs."""
    sh, sw = stride
    c = x.shape[1]
    o, _, kh, kw = w.shape
    kh2, kw2, hq, wq = _geometry(x.shape, w.shape, stride, pads, oh, ow)
    n, _, h, wd = x.shape
    xs = np.empty((1, c * sh * sw, hq, wq, n), x.dtype)
    geom = (n, c, h, wd, sh, sw, hq, wq, pads[0], pads[2])
    _poly_split(_cl(x).reshape(-1), xs.reshape(-1), geom)
    ws = np.zeros((o, sh, sw, kh2, kw2), w.dtype)
    for p in range(sh):
        for q in range(sw):
            tap = w[:, 0, p::sh, q::sw]
            ws[:, p, q, :tap.shape[1], :tap.shape[2]] = tap
    ws = ws.reshape(o, sh * sw, kh2, kw2)
    y5 = K.plane_forward(xs, ws, c, (1, 1), oh, ow)
    return y5[0].transpose(3, 0, 1, 2), (xs, ws, geom, x.shape, w.shape)


def backward(state, gy, need_x, need_w):
    """Gradients of ``forward`` for the output gradient ``gy`` [N, O, OH, OW]: the input's
    (a dense batch-innermost view) and the weight's, each None unless asked for."""
    xs, ws, geom, x_shape, w_shape = state
    n, c, h, wd = x_shape
    sh, sw = geom[4:6]
    g5 = _cl(gy.astype(xs.dtype, copy=False))[None]
    gxs, gws = K.plane_backward(xs, ws, g5, c, (1, 1), need_x, need_w)
    gx = gw = None
    if need_x:
        g = np.empty((c, h, wd, n), xs.dtype)
        _poly_merge(gxs.reshape(-1), g.reshape(-1), geom)
        gx = g.transpose(3, 0, 1, 2)
    if need_w:
        o, _, kh, kw = w_shape
        gws = gws.reshape(o, sh, sw, ws.shape[2], ws.shape[3])
        gw = np.empty(w_shape, ws.dtype)
        for p in range(sh):
            for q in range(sw):
                tap = gw[:, 0, p::sh, q::sw]
                tap[...] = gws[:, p, q, :tap.shape[1], :tap.shape[2]]
    return gx, gw


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
    _poly_split(_cl(x).reshape(-1), xs.reshape(-1), geom)
    # w_ab[o, (c, p, q)] = w[o, c, a*sh + p, b*sw + q]
    wab = np.ascontiguousarray(w.reshape(o, c, kh2, sh, kw2, sw).transpose(2, 4, 0, 1, 3, 5)).reshape(
        kh2 * kw2, o, c * sh * sw)
    xf = xs.reshape(c * sh * sw, hq * wq * n)
    ln = (oh - 1) * wq * n + ow * n
    acc = None
    for t, s in _shifts(kh2, kw2, wq, n):
        part = wab[t] @ xf[:, s:s + ln]
        if acc is None:
            acc = part
        else:
            acc += part
    y = np.empty((o, oh, ow, n), x.dtype)
    full = np.empty((o, oh * wq * n), x.dtype)
    full[:, :ln] = acc
    y[...] = full.reshape(o, oh, wq, n)[:, :, :ow]
    return y.transpose(3, 0, 1, 2), (xs, wab, geom, (kh2, kw2, oh, ow), w.shape)


def dense_backward(state, gy, need_x, need_w):
    """Gradients of ``dense_forward`` for the output gradient ``gy`` [N, O, OH, OW]: the
    input's (a dense batch-innermost view) and the weight's, each None unless asked for."""
    xs, wab, geom, (kh2, kw2, oh, ow), w_shape = state
    n, c, h, wd, sh, sw, hq, wq = geom[:8]
    o = w_shape[0]
    ln = (oh - 1) * wq * n + ow * n
    # the output gradient on the padded width, zero in the junk columns, as [O, L] and as
    # [L, O] (the weight gradient's products run 1.3x faster with the [L, O] operand)
    g = np.zeros((o, oh, wq, n), xs.dtype)
    g[:, :, :ow] = gy.transpose(1, 2, 3, 0)
    gf = g.reshape(o, -1)[:, :ln]
    xf = xs.reshape(c * sh * sw, hq * wq * n)
    gx = gw = None
    if need_w:
        gft = np.ascontiguousarray(gf.T)
        gwab = np.empty((kh2 * kw2, c * sh * sw, o), xs.dtype)
        for t, s in _shifts(kh2, kw2, wq, n):
            np.matmul(xf[:, s:s + ln], gft, out=gwab[t])
        gw = np.ascontiguousarray(gwab.reshape(kh2, kw2, c, sh, sw, o).transpose(5, 2, 0, 3, 1, 4)).reshape(w_shape)
    if need_x:
        # all offsets' products as one (taps*C*sh*sw rows; measured 1.5x faster than one
        # product per offset), each then added into its shifted range
        parts = (np.ascontiguousarray(wab.transpose(0, 2, 1)).reshape(-1, o) @ gf).reshape(kh2 * kw2, -1, ln)
        gxs = np.zeros((c * sh * sw, hq * wq * n), xs.dtype)
        for t, s in _shifts(kh2, kw2, wq, n):
            gxs[:, s:s + ln] += parts[t]
        gxd = np.empty((c, h, wd, n), xs.dtype)
        _poly_merge(gxs.reshape(-1), gxd.reshape(-1), geom)
        gx = gxd.transpose(3, 0, 1, 2)
    return gx, gw
