"""Convolution and transposed convolution over any number of spatial dimensions (used for
3-D, NCDHW), in the batch-innermost layout of ``conv.py``: the padded input is copied
once to ``[C, *S, N]``, its columns ``[C, *k, *o, N]`` are one contiguous gather of a
strided view (runs of ``o_last*N`` elements for stride 1), the convolution is one matrix
product per group whose result ``[O, *o, N]`` is handed out as a transposed view
``[N, O, *o]`` (no output copy), and gradients are scattered back (col2im) by a compiled
loop on numpy float32/float64 (``conv_kernels.col2im``; one strided add per kernel offset
on cupy and for other dtypes). The transposed convolution is the adjoint: a product then
col2im forward, im2col then products backward (no columns of inserted zeros).

On numpy float32/float64 three shapes take ``ddg.tensor.conv_phase`` instead: a stride-1
kd x 3 x 3 convolution with one group and at least 16 channels in and out (Winograd
F(4x4, 3x3) over height and width, depth offsets as channels: ``_use_wino3``), another
stride-1 3-D convolution with one group (depth slabs of 2-D columns, the input gradient as
a convolution of the output gradient), and a transposed convolution with one group,
dilation 1 and a kernel that is a multiple of the stride, unless it has many input channels
on few input positions (one stride-1 convolution per output phase, itself Winograd F(2, 2)
or F(4x4, 3x3) for a kernel of twice the stride). A 3-D transposed convolution whose kernel
equals its stride (no padding, one group) is one product per sample and an interleave of its
taps (``conv_phase.tile_transpose_forward``, numpy or cupy). A stride-1 3-D transposed
convolution with enough input positions per channel runs as the convolution with the flipped,
transposed kernel, and a 3x3x3 stride-2 one as the 4x4x4 one with a zero-padded kernel
(``_pad_k3_usable``).
"""
import itertools

import numpy as np

from ...tensor import backend
from ..function import Function
from ...tensor import conv_kernels as K
from ...tensor import conv_w22
from .conv import _gmm, _wgrad
from ...tensor.conv_phase import (_cl, _from_cl, _hwd, _phases_usable, _slab_conv, _slab_wgrad, _wino3_backward,
                                  _wino3_forward, phase_transpose_backward, phase_transpose_forward,
                                  phases_pay_3d, tile_transpose_backward, tile_transpose_forward,
                                  tile_transpose_usable)


def _im2col(xcl, k, s, d, o):
    """Contiguous columns ``[C, *k, *o, N]`` of the batch-innermost ``xcl`` [C, *Sp, N]."""
    xp = backend.get_array_module(xcl)
    nd = len(k)
    if nd <= 3 and K.usable(xcl):
        one = (1,) * (3 - nd)
        c, n = xcl.shape[0], xcl.shape[-1]
        cols = K.im2col(xcl.reshape((c,) + one + xcl.shape[1:-1] + (n,)), one + tuple(k), one + tuple(o),
                        one + tuple(s), one + tuple(d))
        return cols.reshape((c,) + tuple(k) + tuple(o) + (n,))
    st = xcl.strides
    shape = (xcl.shape[0],) + tuple(k) + tuple(o) + (xcl.shape[-1],)
    strides = (st[0],) + tuple(st[1 + i] * d[i] for i in range(nd)) + tuple(st[1 + i] * s[i] for i in range(nd)) + \
        (st[-1],)
    return xp.ascontiguousarray(xp.lib.stride_tricks.as_strided(xcl, shape, strides))


def _col2im(cols, extent, s, d):
    """The adjoint of ``_im2col``: columns ``[C, *k, *o, N]`` summed into a zero
    ``[C, *extent, N]``."""
    xp = backend.get_array_module(cols)
    nd = len(extent)
    c, n = cols.shape[0], cols.shape[-1]
    k, o = cols.shape[1:1 + nd], cols.shape[1 + nd:1 + 2 * nd]
    out = xp.zeros((c,) + tuple(extent) + (n,), dtype=cols.dtype)
    if nd <= 3 and K.usable(cols):
        pad = (1,) * (3 - nd)
        K.col2im(cols.reshape((c,) + pad + tuple(k) + pad + tuple(o) + (n,)),
                 out.reshape((c,) + pad + tuple(extent) + (n,)), pad + tuple(s), pad + tuple(d))
        return out
    for off in itertools.product(*[range(m) for m in k]):
        sl = tuple(slice(off[i] * d[i], off[i] * d[i] + s[i] * (o[i] - 1) + 1, s[i]) for i in range(nd))
        out[(slice(None),) + sl] += cols[(slice(None),) + off]
    return out


# -- 3-D Winograd (``conv_phase._wino3_forward``) -------------------------------------------------
def _use_wino3(x, w, s, pads, d, groups):
    """Whether ConvNd takes the 3-D Winograd path: numpy float32/float64, 3-D, one group,
    stride 1, a kd x 3 x 3 kernel with no height/width dilation, padding within the kernel,
    at least 16 channels in and out and an output plane of at least 8x8 (smaller ones where
    the tiles' work and the products' width pay, ``WINO3_SMALL_GAIN``)."""
    if len(s) != 3 or groups != 1 or any(v != 1 for v in s) or tuple(w.shape[3:]) != (3, 3) or d[1:] != (1, 1):
        return False
    if not K.usable(x, w) or x.dtype != w.dtype or min(w.shape[0], w.shape[1]) < 16:
        return False
    kd = w.shape[2]
    if pads[0] > d[0] * (kd - 1) or pads[1] > d[0] * (kd - 1) or max(pads[2:]) > 2:
        return False
    oh, ow = x.shape[3] + pads[2] + pads[3] - 2, x.shape[4] + pads[4] + pads[5] - 2
    if min(oh, ow) >= 8:
        return True
    # smaller planes: the tiles' multiplications against the columns' (4 * tiles / (OH*OW))
    # widened for narrow products (columns = tiles * OD * N), as for the transposed phases.
    # Winograd / columns, forward + backward, float32, 1 thread, 16-64 channels, planes 4-7,
    # batch 1-16: 0.57-0.88 where this is <= 0.75, 1.01-1.5 above it (0.77-4.3)
    tiles = -(-oh // 4) * -(-ow // 4)
    od = x.shape[2] + pads[0] + pads[1] - d[0] * (kd - 1)
    cols = tiles * od * x.shape[0]
    return 4.0 * tiles / (oh * ow) * (1.0 + 64.0 / cols) <= WINO3_SMALL_GAIN


WINO3_SMALL_GAIN = 0.75


def _out_sizes(spatial, k, s, pads, d):
    return tuple((spatial[i] + pads[2 * i] + pads[2 * i + 1] - d[i] * (k[i] - 1) - 1) // s[i] + 1
                 for i in range(len(k)))


class ConvNd(Function):
    """N-d convolution (cross-correlation) of [N, C, *S] with weight [O, C/groups, *k]."""
    save_inputs = (1,)   # backward reads the weight and the columns (a copy of x)

    def __init__(self, stride, pads, dilation, groups):
        self.s, self.pads, self.d, self.groups = tuple(stride), tuple(pads), tuple(dilation), groups

    def forward(self, x, w, b=None):
        k = w.shape[2:]
        n, c = x.shape[:2]
        o = _out_sizes(x.shape[2:], k, self.s, self.pads, self.d)
        if min(o) <= 0:
            raise ValueError(f"ddg.conv3d: the output would be empty: input {list(x.shape)}, kernel {list(k)}")
        g = self.groups
        nd = len(o)
        self.wino3 = None
        if _use_wino3(x, w, self.s, self.pads, self.d, g):
            y, self.wino3 = _wino3_forward(x, w, self.pads, self.d[0], o)    # [O, 4*th, 4*tw, OD, N]
            y = y[:, :o[1], :o[2]]
            if b is not None:
                y += b.reshape((-1,) + (1,) * (nd + 1))
            self.meta = (x.shape, o, b is not None)
            return y.transpose(4, 0, 3, 1, 2)
        self.slab = (nd == 3 and g == 1 and self.s == (1,) * nd and K.usable(x, w) and
                     all(max(self.pads[2 * i], self.pads[2 * i + 1]) <= self.d[i] * (k[i] - 1) for i in range(nd)))
        if self.slab:
            # stride 1, padding within the kernel's extent: depth slabs of 2-D columns forward,
            # the input gradient as the same convolution of the padded output gradient
            out, cols = _slab_conv(_cl(x, self.pads), w, self.d, o)
            out = out.reshape((w.shape[0],) + o + (n,))
            if b is not None:
                out += b.reshape((-1,) + (1,) * (nd + 1))
            self.cols, self.w, self.meta = cols, w, (x.shape, o, b is not None)
            return _from_cl(out)
        cols = _im2col(_cl(x, self.pads), k, self.s, self.d, o)
        out = _gmm(w.reshape(g, w.shape[0] // g, -1), cols.reshape(g, -1, int(np.prod(o)) * n))
        out = out.reshape((w.shape[0],) + o + (n,))
        if b is not None:
            out += b.reshape((-1,) + (1,) * (len(o) + 1))
        self.cols, self.w, self.meta = cols, w, (x.shape, o, b is not None)
        return _from_cl(out)

    def _backward_slab(self, gy):
        xs, o, has_b = self.meta
        w = self.w
        nd = len(o)
        k = w.shape[2:]
        needs = self.needs
        gm = _cl(gy.astype(w.dtype, copy=False)).reshape(w.shape[0], -1)     # [O, L]
        gx = gw = gb = None
        if needs[0]:
            # the input gradient of a stride-1 convolution: the output gradient padded by the
            # kernel's extent less the forward padding, convolved with the flipped kernel
            # (input and output channels swapped)
            ext = [self.d[i] * (k[i] - 1) for i in range(nd)]
            gp = tuple(v for i in range(nd) for v in (ext[i] - self.pads[2 * i], ext[i] - self.pads[2 * i + 1]))
            wf = w[:, :, ::-1, ::-1, ::-1].transpose(1, 0, 2, 3, 4)
            gpad = _cl(gy.astype(w.dtype, copy=False), gp)
            gxm, _ = _slab_conv(gpad, wf, self.d, tuple(xs[2:]))
            gx = _from_cl(gxm.reshape((xs[1],) + tuple(xs[2:]) + (xs[0],)))
        if needs[1]:
            gw = _slab_wgrad(self.cols, gm, w.shape, self.d[0], o[0])
        if has_b and needs[2]:
            gb = gy.sum(axis=(0,) + tuple(range(2, 2 + nd)))
        return (gx, gw, gb) if has_b else (gx, gw)

    def backward(self, gy):
        if self.wino3 is not None:
            th, tw = self.wino3[-2:]
            g = _hwd(gy.astype(self.wino3[0].dtype, copy=False), (0, 0, 0), (4 * th, 4 * tw) + gy.shape[2:3] +
                     gy.shape[:1])
            gx, gw = _wino3_backward(g, self.wino3, self.needs[0], self.needs[1])
            if not self.meta[2]:
                return gx, gw
            gb = gy.sum(axis=(0, 2, 3, 4)) if self.needs[2] else None
            return gx, gw, gb
        if self.slab:
            return self._backward_slab(gy)
        xs, o, has_b = self.meta
        w, g = self.w, self.groups
        nd = len(o)
        og = w.shape[0] // g
        gm = _cl(gy.astype(w.dtype, copy=False)).reshape(g, og, -1)        # [G, O/G, P*N]
        cm = self.cols.reshape(g, -1, gm.shape[-1])                          # [G, C/G*K, P*N]
        needs = self.needs
        gx = gw = gb = None
        if needs[0]:
            gcols = _gmm(w.reshape(g, og, -1).transpose(0, 2, 1), gm).reshape(self.cols.shape)
            padded = tuple(xs[2 + i] + self.pads[2 * i] + self.pads[2 * i + 1] for i in range(nd))
            full = _col2im(gcols, padded, self.s, self.d)
            gx = _from_cl(full[(slice(None),) + tuple(slice(self.pads[2 * i], self.pads[2 * i] + xs[2 + i])
                                                      for i in range(nd))])
        if needs[1]:
            gw = _wgrad(gm, cm, o[0]).reshape(w.shape)
        if has_b and needs[2]:
            gb = gy.sum(axis=(0,) + tuple(range(2, 2 + nd)))
        return (gx, gw, gb) if has_b else (gx, gw)


# A stride-1 3-D transposed convolution runs as the convolution with the flipped kernel (its
# Winograd and depth-slab paths) unless it has few input positions (N*D*H*W) per input
# channel, where the adjoint's one product and col2im beat them. Forward + backward vs torch,
# float32, 1 thread (convolution / adjoint): 3x3x3 padding 1 16 -> 16 [8, 16, 8^3] 0.71 / 2.29,
# [8, 16, 4^3] 0.75 / 1.07, 32 -> 32 [2, 32, 8^3] 0.93 / 1.75, 64 -> 64 [1, 64, 8^3] 0.51 /
# 0.77; 3x3x3 padding 0 8 -> 8 [2, 8, 16^3] 1.19 / 1.56; 4x4x4 padding 2 4 -> 4 [4, 4, 16^3]
# 0.51 / 1.24. Left to the adjoint (positions per input channel): 64 -> 64 [4, 64, 4^3] (4)
# 1.71 / 1.55, 32 -> 32 [2, 32, 4^3] (4) 1.19 / 1.03, 128 -> 128 [1, 128, 4^3] (0.5) 1.50 /
# 0.97, 256 -> 256 [1, 256, 4^3] 1.99 / 1.00, 64 -> 64 [2, 64, 6^3] (6.75) 1.63 / 1.63.
AS_CONV_POSITIONS_PER_CIN = 8

# A 3x3x3 stride-2 transposed convolution is the 4x4x4 one whose kernel has a zero last tap
# per axis: its phases by Winograd F(2, 2) (``conv_w22``) beat the adjoint's columns with
# many input positions (N*D*H*W) per input channel; with few, the 4x4x4 weight's transforms
# cost more than the columns. Forward + backward vs torch, padding 1, float32, 1 thread
# (4x4x4 phases / adjoint; positions per channel): 16 -> 16 [2, 16, 8^3] (64) 1.28 / 1.58,
# 8 -> 8 [2, 8, 16^3] (1024) 1.08 / 1.33, 32 -> 32 [1, 32, 12^3] (54) 0.83 / 1.11, [2, 32,
# 6^3] (13.5) 1.60 / 1.54, 64 -> 64 [1, 64, 8^3] (8) 1.37 / 1.17, 128 -> 64 [2, 128, 8^3] (8)
# 2.22 / 1.52, 64 -> 64 [2, 64, 4^3] (2) 3.24 / 1.53; 16 -> 32 [2, 16, 8^3] 1.31 / 1.94. With
# fewer output than input channels the adjoint's product and col2im (over Cout) are the
# cheaper: 32 -> 16 [4, 32, 8^3] 1.86 / 1.53, 16 -> 8 [2, 16, 16^3] 1.36 / 1.26.
PAD_K3_POSITIONS_PER_CIN = 32


def _pad_k3_usable(x, w, s, d, g):
    """Whether a 3-D transposed convolution runs as the 4x4x4 one with a zero-padded kernel:
    3x3x3, stride 2, one group, dilation 1, numpy float32/float64, channels ``conv_w22``
    takes, no fewer output than input channels and at least ``PAD_K3_POSITIONS_PER_CIN`` input
    positions per input channel."""
    if tuple(w.shape[2:]) != (3, 3, 3) or tuple(s) != (2, 2, 2) or g != 1 or tuple(d) != (1, 1, 1):
        return False
    if w.shape[1] < w.shape[0]:
        return False
    if not K.usable(x, w) or int(np.prod(x.shape[2:])) * x.shape[0] < PAD_K3_POSITIONS_PER_CIN * x.shape[1]:
        return False
    return conv_w22.usable(x, np.empty(w.shape[:2] + (4, 4, 4), w.dtype), s, d, g)


class ConvTransposeNd(Function):
    """N-d transposed convolution (the input-gradient of ConvNd) of [N, Cin, *S] with weight
    [Cin, Cout/groups, *k], to spatial size ``out_sizes``: the product ``W^T x`` gives the
    columns, col2im sums them into the output (no im2col of inserted zeros)."""
    save_inputs = (1,)   # backward reads the weight and x's batch-innermost copy

    def __init__(self, stride, pads, dilation, groups, out_sizes):
        self.s, self.pads, self.d, self.groups = tuple(stride), tuple(pads), tuple(dilation), groups
        self.out_sizes = tuple(out_sizes)

    def _as_conv_usable(self, x, w, g):
        """Whether this stride-1 transposed convolution runs as ``ConvNd`` with the flipped,
        transposed kernel and padding ``d*(k-1) - p`` per side: 3-D, one group, numpy
        float32/float64, padding within the kernel's extent, the output size that padding gives."""
        k, nd = w.shape[2:], len(self.s)
        if nd != 3 or g != 1 or any(v != 1 for v in self.s) or not K.usable(x, w):
            return False
        if int(np.prod(x.shape[2:])) * x.shape[0] < AS_CONV_POSITIONS_PER_CIN * x.shape[1]:
            return False
        ext = [self.d[i] * (k[i] - 1) for i in range(nd)]
        return (all(self.pads[i] <= ext[i // 2] for i in range(2 * nd)) and
                all(self.out_sizes[i] == x.shape[2 + i] + ext[i] - self.pads[2 * i] - self.pads[2 * i + 1]
                    for i in range(nd)))

    def _extent(self, sp, k):
        """The spatial size the windows cover, with room for the output (output_padding)."""
        return tuple(max((sp[i] - 1) * self.s[i] + self.d[i] * (k[i] - 1) + 1, self.pads[2 * i] + self.out_sizes[i])
                     for i in range(len(k)))

    def forward(self, x, w, b=None):
        g = self.groups
        n, cin = x.shape[:2]
        sp = tuple(x.shape[2:])
        k = tuple(w.shape[2:])
        nd = len(sp)
        self.phase = None
        if n == 0:                                                          # an empty batch: no products
            self.phase, self.w, self.meta = "empty", w, (x.shape, b is not None)
            return backend.get_array_module(x).zeros((0, w.shape[1] * g) + self.out_sizes, x.dtype)
        if self._as_conv_usable(x, w, g):
            # stride 1: the convolution with the flipped, transposed kernel (its fast paths)
            wf = np.ascontiguousarray(w[(slice(None), slice(None)) + (slice(None, None, -1),) * nd].swapaxes(0, 1))
            ext = [self.d[i] * (k[i] - 1) for i in range(nd)]
            conv = ConvNd((1,) * nd, tuple(ext[i // 2] - self.pads[i] for i in range(2 * nd)), self.d, 1)
            y = conv.forward(x, wf, b)
            self.phase, self.w, self.meta = ("conv", conv), w, (x.shape, b is not None)
            return y
        if tile_transpose_usable(x, w, self.s, self.pads, self.d, g, self.out_sizes):
            # kernel = stride (3-D): one product per sample, its taps interleaved into the output
            y, st = tile_transpose_forward(x, w, b, self.out_sizes)
            self.save_inputs = (0, 1)                                        # backward reads x itself
            self.phase, self.w, self.meta = ("tile", st), w, (x.shape, b is not None)
            return y
        k_pad = None
        if _pad_k3_usable(x, w, self.s, self.d, g):
            # 3x3x3 stride 2: the 4x4x4 kernel with a zero last tap per axis (its phases, F(2, 2))
            k_pad = k
            w4 = np.zeros(w.shape[:2] + (4, 4, 4), w.dtype)
            w4[:, :, :3, :3, :3] = w
            w = w4
        w22 = nd == 3 and conv_w22.usable(x, w, self.s, self.d, g)
        if _phases_usable(x, w, self.s, self.d, g) and (nd != 3 or phases_pay_3d(x, w.shape[1] if w22 else None)):
            y, self.phase = phase_transpose_forward(x, w, self.s, self.pads[0::2], self.out_sizes)
            if k_pad is not None:
                self.phase = ("padk", self.phase)
            if b is not None:
                y += b.reshape((-1,) + (1,) * (nd + 1))
            self.w, self.meta = w, (x.shape, b is not None)
            return _from_cl(y)
        xcl = _cl(x)                                                        # [Cin, *S, N]
        xm = xcl.reshape(g, cin // g, -1)
        cols = _gmm(w.reshape(g, cin // g, -1).transpose(0, 2, 1), xm)  # [G, Cout/G*K, S*N]
        cout = w.shape[1] * g
        full = _col2im(cols.reshape((cout,) + k + sp + (n,)), self._extent(sp, k), self.s, self.d)
        out = full[(slice(None),) + tuple(slice(self.pads[2 * i], self.pads[2 * i] + self.out_sizes[i])
                                          for i in range(nd))]
        if b is not None:
            out = out + b.reshape((-1,) + (1,) * (nd + 1))
        self.xm, self.w, self.meta = xm, w, (x.shape, b is not None)
        return _from_cl(out)

    def backward(self, gy):
        xs, has_b = self.meta
        if self.phase == "empty":
            xp = backend.get_array_module(gy)
            gx, gw = xp.zeros(xs, gy.dtype), xp.zeros(self.w.shape, self.w.dtype)
            gb = xp.zeros(gy.shape[1], gy.dtype)
            return (gx, gw, gb) if has_b else (gx, gw)
        if self.phase is not None:
            # "conv", "tile", "padk" (the phases of the zero-padded 4x4x4 kernel): tagged
            # (tag, state); the phases' own state untagged
            tag = self.phase[0] if isinstance(self.phase[0], str) else None
            if tag == "conv":
                conv = self.phase[1]
                conv.needs = self.needs
                grads = conv.backward(gy)
                gx, gw = grads[0], grads[1]
                if gw is not None:
                    gw = gw[(slice(None), slice(None)) + (slice(None, None, -1),) * (gw.ndim - 2)].swapaxes(0, 1)
                return (gx, gw, grads[2]) if has_b else (gx, gw)
            if tag == "tile":
                gx, gw = tile_transpose_backward(gy, self.phase[1], self.needs[0], self.needs[1])
            else:
                state = self.phase[1] if tag == "padk" else self.phase
                gx, gw = phase_transpose_backward(gy, state, self.needs[0], self.needs[1])
                if tag == "padk" and gw is not None:    # the 3x3x3 weight's part of the 4x4x4 gradient
                    gw = gw[:, :, :3, :3, :3]
            gb = gy.sum(axis=(0,) + tuple(range(2, gy.ndim))) if has_b and self.needs[2] else None
            return (gx, gw, gb) if has_b else (gx, gw)
        w, g = self.w, self.groups
        n, cin = xs[:2]
        sp, k = tuple(xs[2:]), tuple(w.shape[2:])
        nd = len(sp)
        gpad = _cl(gy.astype(w.dtype, copy=False), self.pads, self._extent(sp, k))   # [Cout, *extent, N]
        gcols = _im2col(gpad, k, self.s, self.d, sp).reshape(g, -1, self.xm.shape[-1])   # [G, Cout/G*K, S*N]
        gx = gw = gb = None
        if self.needs[0]:
            gx = _from_cl(_gmm(w.reshape(g, cin // g, -1), gcols).reshape((cin,) + sp + (n,)))
        if self.needs[1]:
            gw = _wgrad(self.xm, gcols, sp[0]).reshape(w.shape)
        if has_b and self.needs[2]:
            gb = gy.sum(axis=(0,) + tuple(range(2, 2 + nd)))
        return (gx, gw, gb) if has_b else (gx, gw)
