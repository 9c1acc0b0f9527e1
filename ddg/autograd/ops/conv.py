"""Convolution and pooling primitives (primitives for speed: a composite im2col would
record dozens of nodes and copies per layer).

Memory layout. im2col builds the column matrix as one contiguous array of shape
``[C, kh, kw, N, OH, OW]`` straight from a strided view of the (padded) input, so
that the convolution is ONE matrix product ``W[O, C*kh*kw] @ cols[C*kh*kw, N*OH*OW]``
(a batched product over groups when ``groups > 1``). Its result ``[O, N*OH*OW]`` is
returned as the transposed view ``[N, O, OH, OW]`` -- no output copy. The elementwise
ops and pools that follow keep that channel-major memory order, and the next im2col
reads it through ``as_strided`` whatever the strides are, so a conv stack never pays
for NCHW <-> CNHW transposes. Backward reuses the saved ``cols`` for the weight
gradient, and scatters the column gradient back (col2im) with one strided slice-add
per kernel offset (kh*kw vectorized adds; no ``add.at``, no loop over pixels).

Pooling loops over the kh*kw kernel offsets too, each step a vectorized operation on
a strided slice; max pooling keeps the (small, int) offset of the winner per output,
the backward scatters the gradient with it.

Padding is given per side: ``pads = (top, bottom, left, right)``.
"""
import numpy as np

from ...tensor import backend
from ..function import Function


# -- helpers ------------------------------------------------------------------------------
def out_size(n, k, s, p0, p1, d=1, ceil_mode=False):
    """Output length of a sliding window: input ``n``, kernel ``k``, stride ``s``, pads
    ``p0``/``p1``, dilation ``d``. ``ceil_mode`` keeps a last partial window, provided it
    starts inside the input or the leading pad (the Paddle/PyTorch rule)."""
    span = d * (k - 1) + 1
    room = n + p0 + p1 - span
    if room < 0:
        return 0
    if ceil_mode:
        o = -(-room // s) + 1
        if (o - 1) * s >= n + p0:
            o -= 1
        return o
    return room // s + 1


def _strided(xp):
    return xp.lib.stride_tricks.as_strided


def _pad_input(x, pads, fill=0.0, extra=(0, 0)):
    """``x`` [N, C, H, W] padded per side (``extra`` adds rows/cols at the bottom/right,
    for ceil mode). Returns ``x`` itself when nothing is padded."""
    top, bottom, left, right = pads
    bottom += extra[0]
    right += extra[1]
    if not (top or bottom or left or right):
        return x
    xp = backend.get_array_module(x)
    n, c, h, w = x.shape
    # channel-major allocation: matches the layout convolutions produce
    buf = xp.full((c, n, h + top + bottom, w + left + right), fill, dtype=x.dtype).transpose(1, 0, 2, 3)
    buf[:, :, top:top + h, left:left + w] = x
    return buf


def im2col(xpad, kh, kw, sh, sw, dh, dw, oh, ow):
    """Contiguous columns ``[C, kh, kw, N, OH, OW]`` of the padded input ``[N, C, Hp, Wp]``
    (any strides) -- one strided gather."""
    xp = backend.get_array_module(xpad)
    n, c = xpad.shape[:2]
    s_n, s_c, s_h, s_w = xpad.strides
    view = _strided(xp)(xpad, shape=(c, kh, kw, n, oh, ow),
                        strides=(s_c, dh * s_h, dw * s_w, s_n, sh * s_h, sw * s_w))
    return xp.ascontiguousarray(view)


def col2im(cols, hp, wp, sh, sw, dh, dw):
    """Adjoint of ``im2col``: sum columns ``[C, kh, kw, N, OH, OW]`` into a padded image,
    returned as ``[N, C, Hp, Wp]`` (a channel-major view). One strided add per kernel offset."""
    xp = backend.get_array_module(cols)
    c, kh, kw, n, oh, ow = cols.shape
    out = xp.zeros((c, n, hp, wp), dtype=cols.dtype)
    he, we = sh * (oh - 1) + 1, sw * (ow - 1) + 1
    disjoint = sh >= dh * (kh - 1) + 1 and sw >= dw * (kw - 1) + 1
    for i in range(kh):
        for j in range(kw):
            dst = out[:, :, i * dh:i * dh + he:sh, j * dw:j * dw + we:sw]
            if disjoint:
                dst[...] = cols[:, i, j]
            else:
                dst += cols[:, i, j]
    return out.transpose(1, 0, 2, 3)


def _cn_matrix(a):
    """``a`` [N, C, H, W] as the matrix [C, N*H*W] (a free view when ``a`` is channel-major)."""
    n, c, h, w = a.shape
    return a.transpose(1, 0, 2, 3).reshape(c, n * h * w)


def _gmm(a, b):
    """Matrix product, batched over groups when the operands are 3-D."""
    if a.ndim == 2:
        return a @ b
    return backend.get_array_module(a).matmul(a, b)


def _swap(a):
    return a.T if a.ndim == 2 else a.transpose(0, 2, 1)


# -- convolution -----------------------------------------------------------------------------
class Conv2d(Function):
    """``out[n, o] = sum_{c, i, j} w[o, c, i, j] * xpad[n, g*Cg + c, y*sh + i*dh, x*sw + j*dw] + b[o]``
    for NCHW input and weight ``[O, C/groups, kh, kw]``."""
    save_inputs = False  # backward reads the saved columns and weight, not x

    def __init__(self, stride, pads, dilation, groups):
        self.stride, self.pads, self.dilation, self.groups = stride, pads, dilation, groups

    def forward(self, x, w, *b):
        if x.ndim != 4 or w.ndim != 4:
            raise ValueError(f"conv2d expects a 4-D input and a 4-D weight, got {x.ndim}-D and {w.ndim}-D")
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        g = self.groups
        if c != cg * g or o % g:
            raise ValueError(f"conv2d: input has {c} channels and groups={g}, so the weight must have shape "
                             f"[O (divisible by {g}), {c // g if c % g == 0 else '?'}, kh, kw]; got {list(w.shape)}")
        (sh, sw), (dh, dw), (pt, pb, pl, pr) = self.stride, self.dilation, self.pads
        oh = out_size(h, kh, sh, pt, pb, dh)
        ow = out_size(wd, kw, sw, pl, pr, dw)
        if oh <= 0 or ow <= 0:
            raise ValueError(f"conv2d: kernel {kh}x{kw} (dilation {dh}x{dw}) is larger than the padded input "
                             f"{h + pt + pb}x{wd + pl + pr}")
        xpad = _pad_input(x, self.pads)
        cols = im2col(xpad, kh, kw, sh, sw, dh, dw, oh, ow)
        if g == 1:
            out = w.reshape(o, -1) @ cols.reshape(c * kh * kw, -1)
        else:
            out = _gmm(w.reshape(g, o // g, -1), cols.reshape(g, cg * kh * kw, -1)).reshape(o, -1)
        if b:
            out += b[0].reshape(o, 1)
        self.cols, self.w = cols, w
        self.geom = (n, c, h, wd, xpad.shape[2], xpad.shape[3], oh, ow)
        return out.reshape(o, n, oh, ow).transpose(1, 0, 2, 3)

    def backward(self, gy):
        needs = self.needs
        w, cols, gr = self.w, self.cols, self.groups
        n, c, h, wd, hp, wp, oh, ow = self.geom
        o, cg, kh, kw = w.shape
        g2 = _cn_matrix(gy)  # [O, N*OH*OW]
        gx = gw = gb = None
        if gr == 1:
            wm, cm, gm = w.reshape(o, -1), cols.reshape(c * kh * kw, -1), g2
        else:
            wm = w.reshape(gr, o // gr, -1)
            cm = cols.reshape(gr, cg * kh * kw, -1)
            gm = g2.reshape(gr, o // gr, -1)
        if needs[1]:
            gw = _gmm(gm, _swap(cm)).reshape(w.shape)
        if len(needs) == 3 and needs[2]:
            gb = g2.sum(axis=1)
        if needs[0]:
            gcols = _gmm(_swap(wm), gm).reshape(c, kh, kw, n, oh, ow)
            (sh, sw), (dh, dw), (pt, _, pl, _) = self.stride, self.dilation, self.pads
            gx = col2im(gcols, hp, wp, sh, sw, dh, dw)[:, :, pt:pt + h, pl:pl + wd]
        return (gx, gw, gb) if len(needs) == 3 else (gx, gw)


class Conv2dTranspose(Function):
    """The adjoint of Conv2d with respect to its input: input ``[N, Cin, H, W]``, weight
    ``[Cin, Cout/groups, kh, kw]``, output ``[N, Cout, OH, OW]`` with
    ``OH = (H-1)*sh - pt - pb + dh*(kh-1) + 1 + output_padding``."""

    def __init__(self, stride, pads, dilation, groups, out_hw):
        self.stride, self.pads, self.dilation, self.groups, self.out_hw = stride, pads, dilation, groups, out_hw

    def forward(self, x, w, *b):
        if x.ndim != 4 or w.ndim != 4:
            raise ValueError(f"conv2d_transpose expects a 4-D input and a 4-D weight, got {x.ndim}-D and "
                             f"{w.ndim}-D")
        n, cin, h, wd = x.shape
        wc, og, kh, kw = w.shape
        g = self.groups
        if wc != cin or cin % g:
            raise ValueError(f"conv2d_transpose: input has {cin} channels (groups={g}) but the weight has shape "
                             f"{list(w.shape)}; expected [{cin}, Cout/groups, kh, kw]")
        (sh, sw), (dh, dw), (pt, pb, pl, pr) = self.stride, self.dilation, self.pads
        oh, ow = self.out_hw
        # the full (uncropped) extent the windows cover, plus room for output_padding
        hp = max((h - 1) * sh + dh * (kh - 1) + 1, pt + oh)
        wp = max((wd - 1) * sw + dw * (kw - 1) + 1, pl + ow)
        xm = _cn_matrix(x)
        if g == 1:
            cols = w.reshape(cin, -1).T @ xm
        else:
            cols = _gmm(_swap(w.reshape(g, cin // g, -1)), xm.reshape(g, cin // g, -1))
        cols = cols.reshape(og * g, kh, kw, n, h, wd)
        out = col2im(cols, hp, wp, sh, sw, dh, dw)[:, :, pt:pt + oh, pl:pl + ow]
        if b:
            out = out + b[0].reshape(1, -1, 1, 1)
        self.geom = (hp, wp)
        self.x, self.w = x, w
        return out

    def backward(self, gy):
        needs = self.needs
        x, w, g = self.x, self.w, self.groups
        n, cin, h, wd = x.shape
        _, og, kh, kw = w.shape
        hp, wp = self.geom
        (sh, sw), (dh, dw), (pt, _, pl, _) = self.stride, self.dilation, self.pads
        oh, ow = self.out_hw
        xp = backend.get_array_module(gy)
        gpad = xp.zeros((og * g, n, hp, wp), dtype=gy.dtype).transpose(1, 0, 2, 3)
        gpad[:, :, pt:pt + oh, pl:pl + ow] = gy
        gcols = im2col(gpad, kh, kw, sh, sw, dh, dw, h, wd)  # [Cout, kh, kw, N, H, W]
        gx = gw = gb = None
        xm = _cn_matrix(x)
        if g == 1:
            wm, cm, xmm = w.reshape(cin, -1), gcols.reshape(og * kh * kw, -1), xm
        else:
            wm = w.reshape(g, cin // g, -1)
            cm = gcols.reshape(g, og * kh * kw, -1)
            xmm = xm.reshape(g, cin // g, -1)
        if needs[0]:
            gx = _gmm(wm, cm).reshape(cin, n, h, wd).transpose(1, 0, 2, 3)
        if needs[1]:
            gw = _gmm(xmm, _swap(cm)).reshape(w.shape)
        if len(needs) == 3 and needs[2]:
            gb = gy.sum(axis=(0, 2, 3))
        return (gx, gw, gb) if len(needs) == 3 else (gx, gw)


class Unfold(Function):
    """im2col as an op: ``[N, C, H, W]`` -> ``[N, C*kh*kw, OH*OW]`` (Paddle's F.unfold)."""
    save_inputs = False

    def __init__(self, kernel, stride, pads, dilation):
        self.kernel, self.stride, self.pads, self.dilation = kernel, stride, pads, dilation

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"unfold expects a 4-D input, got {x.ndim}-D")
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (dh, dw), (pt, pb, pl, pr) = self.kernel, self.stride, self.dilation, self.pads
        oh, ow = out_size(h, kh, sh, pt, pb, dh), out_size(w, kw, sw, pl, pr, dw)
        if oh <= 0 or ow <= 0:
            raise ValueError(f"unfold: kernel {kh}x{kw} is larger than the padded input {h + pt + pb}x{w + pl + pr}")
        xpad = _pad_input(x, self.pads)
        cols = im2col(xpad, kh, kw, sh, sw, dh, dw, oh, ow)
        self.geom = (h, w, xpad.shape[2], xpad.shape[3], oh, ow)
        return cols.reshape(c * kh * kw, n, oh * ow).transpose(1, 0, 2)

    def backward(self, g):
        h, w, hp, wp, oh, ow = self.geom
        n, ckk, _ = g.shape
        (kh, kw), (sh, sw), (dh, dw), (pt, _, pl, _) = self.kernel, self.stride, self.dilation, self.pads
        cols = g.transpose(1, 0, 2).reshape(ckk // (kh * kw), kh, kw, n, oh, ow)
        return col2im(cols, hp, wp, sh, sw, dh, dw)[:, :, pt:pt + h, pl:pl + w]


# -- pooling --------------------------------------------------------------------------------------
def _pool_geometry(shape, kernel, stride, pads, ceil_mode):
    n, c, h, w = shape
    (kh, kw), (sh, sw), (pt, pb, pl, pr) = kernel, stride, pads
    if kh > h + pt + pb or kw > w + pl + pr:
        raise ValueError(f"pool2d: kernel {kh}x{kw} is larger than the padded input {h + pt + pb}x{w + pl + pr}")
    if max(pt, pb) * 2 > kh or max(pl, pr) * 2 > kw:
        raise ValueError(f"pool2d: padding {list(pads)} must be at most half the kernel size {[kh, kw]}")
    oh = out_size(h, kh, sh, pt, pb, 1, ceil_mode)
    ow = out_size(w, kw, sw, pl, pr, 1, ceil_mode)
    # rows/cols beyond the bottom/right pad that ceil-mode windows reach
    extra = (max(0, (oh - 1) * sh + kh - (h + pt + pb)), max(0, (ow - 1) * sw + kw - (w + pl + pr)))
    return oh, ow, extra


class MaxPool2d(Function):
    """Max over each window; ties go to the first offset in row-major kernel order
    (as Paddle/PyTorch). Keeps the winning kernel offset per output for backward."""
    save_inputs = False

    def __init__(self, kernel, stride, pads, ceil_mode):
        self.kernel, self.stride, self.pads, self.ceil_mode = kernel, stride, pads, ceil_mode

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"max_pool2d expects a 4-D input, got {x.ndim}-D")
        if x.dtype.kind != "f":
            raise TypeError(f"max_pool2d expects a floating-point input, got {x.dtype}")
        xp = backend.get_array_module(x)
        (kh, kw), (sh, sw) = self.kernel, self.stride
        oh, ow, extra = _pool_geometry(x.shape, self.kernel, self.stride, self.pads, self.ceil_mode)
        xpad = _pad_input(x, self.pads, -np.inf, extra)
        he, we = sh * (oh - 1) + 1, sw * (ow - 1) + 1
        best = idx = None
        for k in range(kh * kw):
            i, j = divmod(k, kw)
            v = xpad[:, :, i:i + he:sh, j:j + we:sw]
            if best is None:
                best = v.copy(order="K")
                idx = xp.zeros(best.shape, dtype=np.int8 if kh * kw < 128 else np.int32)
            else:
                win = v > best
                xp.copyto(best, v, where=win)
                xp.copyto(idx, k, where=win)
        self.idx = idx
        self.geom = (x.shape, xpad.shape, x.dtype)
        return best

    def backward(self, g):
        xp = backend.get_array_module(g)
        (kh, kw), (sh, sw), (pt, _, pl, _) = self.kernel, self.stride, self.pads
        shape, pshape, dtype = self.geom
        n, c, h, w = shape
        oh, ow = g.shape[2:]
        he, we = sh * (oh - 1) + 1, sw * (ow - 1) + 1
        gx = xp.zeros((c, n) + tuple(pshape[2:]), dtype=dtype).transpose(1, 0, 2, 3)
        disjoint = sh >= kh and sw >= kw
        idx = self.idx
        for k in range(kh * kw):
            i, j = divmod(k, kw)
            dst = gx[:, :, i:i + he:sh, j:j + we:sw]
            hit = idx == k
            if disjoint:
                xp.multiply(g, hit, out=dst)
            else:
                dst += g * hit
        return gx[:, :, pt:pt + h, pl:pl + w]


def max_pool_mask(idx, kernel, stride, pads, in_hw):
    """Paddle's ``return_mask``: for each output, the flat index ``y*W + x`` of its maximum
    in the (unpadded) input plane."""
    xp = backend.get_array_module(idx)
    (kh, kw), (sh, sw), (pt, _, pl, _) = kernel, stride, pads
    oh, ow = idx.shape[2:]
    idx = idx.astype(np.int64)
    rows = xp.arange(oh).reshape(-1, 1) * sh - pt + idx // kw
    cols = xp.arange(ow) * sw - pl + idx % kw
    return (rows * in_hw[1] + cols).astype(np.int32)


class AvgPool2d(Function):
    """Mean over each window. ``exclusive`` divides by the number of input (non-pad)
    elements in the window, otherwise by kh*kw (Paddle's rule)."""
    save_inputs = False

    def __init__(self, kernel, stride, pads, ceil_mode, exclusive, divisor=None):
        self.kernel, self.stride, self.pads = kernel, stride, pads
        self.ceil_mode, self.exclusive, self.divisor = ceil_mode, exclusive, divisor

    def _div(self, xp, h, w, oh, ow, dtype):
        if self.divisor:
            return dtype.type(self.divisor)
        (kh, kw), (sh, sw), (pt, _, pl, _) = self.kernel, self.stride, self.pads
        if not self.exclusive:
            return dtype.type(kh * kw)

        def count(n_in, k, s, p, o):
            start = np.arange(o) * s - p
            return np.minimum(start + k, n_in) - np.maximum(start, 0)

        cnt = np.outer(count(h, kh, sh, pt, oh), count(w, kw, sw, pl, ow)).astype(dtype)
        return xp.asarray(cnt)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"avg_pool2d expects a 4-D input, got {x.ndim}-D")
        if x.dtype.kind != "f":
            raise TypeError(f"avg_pool2d expects a floating-point input, got {x.dtype}")
        xp = backend.get_array_module(x)
        (kh, kw), (sh, sw) = self.kernel, self.stride
        n, c, h, w = x.shape
        oh, ow, extra = _pool_geometry(x.shape, self.kernel, self.stride, self.pads, self.ceil_mode)
        xpad = _pad_input(x, self.pads, 0.0, extra)
        he, we = sh * (oh - 1) + 1, sw * (ow - 1) + 1
        acc = None
        for i in range(kh):
            for j in range(kw):
                v = xpad[:, :, i:i + he:sh, j:j + we:sw]
                if acc is None:
                    acc = v.copy(order="K")
                else:
                    acc += v
        self.div = self._div(xp, h, w, oh, ow, x.dtype)
        self.geom = (x.shape, xpad.shape, x.dtype)
        acc /= self.div
        return acc

    def backward(self, g):
        xp = backend.get_array_module(g)
        (kh, kw), (sh, sw), (pt, _, pl, _) = self.kernel, self.stride, self.pads
        shape, pshape, dtype = self.geom
        n, c, h, w = shape
        oh, ow = g.shape[2:]
        he, we = sh * (oh - 1) + 1, sw * (ow - 1) + 1
        gd = g / self.div
        gx = xp.zeros((c, n) + tuple(pshape[2:]), dtype=dtype).transpose(1, 0, 2, 3)
        for i in range(kh):
            for j in range(kw):
                gx[:, :, i:i + he:sh, j:j + we:sw] += gd
        return gx[:, :, pt:pt + h, pl:pl + w]
