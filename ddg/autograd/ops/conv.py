"""Convolution primitives (primitives for speed: a composite im2col would
record dozens of nodes and copies per layer).

Memory layout. Tensors stay logically NCHW, but the arrays convolutions and pools
allocate are laid out "CHWN" in memory (batch innermost) and handed out as transposed
views. im2col builds the column matrix as one contiguous array of shape
``[C, kh, kw, OH, OW, N]`` straight from a strided view of the (padded) input, so the
convolution is ONE matrix product ``W[O, C*kh*kw] @ cols[C*kh*kw, OH*OW*N]`` (a
batched product over groups when ``groups > 1``), whose result ``[O, OH*OW*N]`` is
returned as a view ``[N, O, OH, OW]`` -- no output copy. With the batch innermost,
every strided copy/add moves contiguous runs of ``OW*N`` elements (not ``OW``), which
is what makes im2col/col2im cheap for small images. Elementwise ops keep the layout
(numpy's order='K'), so a conv stack never pays for NCHW <-> CHWN transposes. Backward
reuses the saved ``cols`` for the weight gradient. The input gradient of a stride-1
convolution whose output is no smaller than its input ("same" padding) is the convolution
of the (padded) output gradient with the flipped, transposed kernel: one im2col of ``gy``
and one matrix product. Otherwise the column gradient is scattered back (col2im) with one
strided slice-add per kernel offset (kh*kw vectorized adds; no ``add.at``, no loop over
pixels); a 1x1 stride-1 window needs neither copy (its columns are the image itself).

Algorithm per shape: a 3x3 stride-1 convolution with enough channels runs as Winograd
(``_use_winograd`` says when; forward and both gradients, on the same batch-innermost
layout): F(4x4, 3x3) on numpy float32/float64 for outputs of at least 8x8 (``_wino_tile``;
1/4 of the multiplications, compiled tile transforms, by cache-sized blocks of tile rows),
else F(2x2, 3x3) (16/36 of them, the tile transforms whole-array adds: cupy, or numpy with
mixed dtypes); a 5x5 or 7x7 stride-1 one with enough channels is the 3x3 one of its 3x3
blocks over four or nine shifted copies of the image, on the same Winograd
(``_use_blocks3``); a depthwise one, or grouped with at most 8 channels per group, is a
compiled direct loop on numpy (``conv_kernels``; at stride 1 over whole padded planes, in
the input's own layout, small NCHW planes batch-innermost; at a stride that is at most the
kernel, depthwise, over the stride's polyphase components, ``ddg.tensor.conv_strided``); a
one-group strided one whose kernel is a multiple
of its stride (4x4 stride 2), on long enough images, is a stride-1 convolution of the
polyphase components without columns (``conv_strided``); a grouped 3x3 stride-1 one with
at least 16 channels per group is Winograd per
group; a 3x3 one dilated by d >= 2 with "same" padding is Winograd on the image's d*d
row/column residue classes (numpy; batched, or laid out as one image per sample with zero
rows and columns between them where the classes are small); a 1x1 stride-1 one is a plain product over the image
itself (per sample on an NCHW input); everything else is im2col + one product (per group), im2col and col2im
compiled loops on numpy. A transposed convolution whose kernel is a multiple of its stride
runs by output phases (``ddg.tensor.conv_phase``), a 3x3 stride-2 one by its exact phases
(9 taps, no zero-extended kernel). On the GPU cuDNN, where usable, takes
precedence over all of them.

The pooling primitives (``pooling.py``) share this layout and these helpers.

Padding is given per side: ``pads = (top, bottom, left, right)``.

GPU. With cupy arrays the same kernels run on the device (cupy's strided views and
cuBLAS matrix products), unless cuDNN is usable through cupy (``backend.cudnn_module()``
is not None): then convolutions and transposed convolutions with symmetric padding
call cuDNN instead. The cuDNN paths keep NCHW C-contiguous arrays (what cuDNN's
descriptors take); the CPU path is untouched by them. ``DDG_CUDNN=0`` forces the im2col kernels on the GPU too.
"""
import numpy as np

from ...tensor import backend, gemm
from ...tensor.dtypes import upcast
from ..function import Function
from ..higher import linear_backward_graph, live_input
from ...tensor import conv_kernels as K
from ...tensor import conv1d, conv_patch, conv_sample, conv_strided, conv_taps
from ...tensor.winograd import (WINO4_AT as _WINO4_AT, WINO4_BT as _WINO4_BT, WINO4_G as _WINO4_G,  # noqa: F401
                                 wino_weight as _wino_weight, wino_weight_adjoint as _wino_weight_adjoint)
from ...tensor.conv_phase import phases_pay
from ...tensor.conv_phase import _cl, _phases_usable, phase_transpose_backward, phase_transpose_forward
from ...tensor.conv_phase import (phase_cols_backward, phase_cols_forward, phase_cols_usable, phase_plane_backward,
                                  phase_plane_forward, phase_plane_usable, phase_k3_backward, phase_k3_forward,
                                  phase_k3_usable)


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


def _alloc(xp, n, c, h, w, dtype, fill=None):
    """A logical [N, C, H, W] array stored CHWN (batch innermost)."""
    buf = xp.zeros((c, h, w, n), dtype=dtype) if fill is None else xp.full((c, h, w, n), fill, dtype=dtype)
    return buf.transpose(3, 0, 1, 2)


def _alloc_empty(n, c, h, w, dtype):
    """An uninitialized numpy [N, C, H, W] array stored CHWN."""
    return np.empty((c, h, w, n), dtype).transpose(3, 0, 1, 2)


def _is_chwn(a):
    """Whether [N, C, H, W] array ``a`` is laid out with the batch axis innermost."""
    s = a.strides
    return s[0] == a.itemsize and s[3] >= s[0] * a.shape[0] and s[2] >= s[3] and s[1] >= s[2]


def _channel_sums(gy):
    """``gy.sum(axis=(0, 2, 3))`` (a bias gradient): for a numpy float32/float64 array dense in
    NCHW or batch-innermost order one matrix-vector product with ones (5x faster than numpy's
    reduction over the outer and inner axes at once), else numpy's sum."""
    if type(gy) is np.ndarray and gy.dtype in (np.float32, np.float64):
        n, c, h, w = gy.shape
        if gy.flags.c_contiguous:
            return (gy.reshape(n * c, h * w) @ np.ones(h * w, gy.dtype)).reshape(n, c).sum(axis=0)
        t = gy.transpose(1, 2, 3, 0)
        if t.flags.c_contiguous:
            return t.reshape(c, -1) @ np.ones(h * w * n, gy.dtype)
    return gy.sum(axis=(0, 2, 3))


def _nchw_padded(x, pads):
    """``x`` [N, C, H, W] (numpy) padded per side into a C-contiguous NCHW buffer."""
    top, bottom, left, right = pads
    if not (top or bottom or left or right):
        return np.ascontiguousarray(x)
    n, c, h, w = x.shape
    buf = np.zeros((n, c, h + top + bottom, w + left + right), x.dtype)
    buf[:, :, top:top + h, left:left + w] = x
    return buf


def _pad_input(x, pads, fill=0.0, extra=(0, 0), to_chwn=True):
    """``x`` [N, C, H, W] padded per side (``extra`` adds rows/cols at the bottom/right,
    for ceil mode), in a CHWN buffer. Without padding ``x`` itself is returned, copied
    to CHWN first when ``to_chwn`` and it is laid out otherwise (a copy of the input,
    kh*kw times smaller than the columns it makes contiguous)."""
    top, bottom, left, right = pads
    bottom += extra[0]
    right += extra[1]
    if not (top or bottom or left or right):
        if not to_chwn or _is_chwn(x):
            return x
    xp = backend.get_array_module(x)
    n, c, h, w = x.shape
    if xp is np and x.flags.c_contiguous:
        # a C-ordered input (a first layer's output, conv_sample's) to CHWN by the blocked
        # transpose: numpy's copy across the layouts ran 3-4x its time ([64, 16, 64, 64])
        t = _alloc_empty(n, c, h, w, x.dtype)
        if gemm.relayout_into(t, x):
            if not (top or bottom or left or right):
                return t
            x = t
    buf = _alloc(xp, n, c, h + top + bottom, w + left + right, x.dtype, None if fill == 0 else fill)
    buf[:, :, top:top + h, left:left + w] = x
    return buf


def im2col(xpad, kh, kw, sh, sw, dh, dw, oh, ow):
    """Contiguous columns ``[C, kh, kw, OH, OW, N]`` of the padded input ``[N, C, Hp, Wp]``
    (any strides; fastest when CHWN) -- one strided gather (the compiled loop of
    ``conv_kernels`` for a CHWN numpy float32/float64 input)."""
    xp = backend.get_array_module(xpad)
    n, c = xpad.shape[:2]
    if K.usable(xpad) and _is_chwn(xpad) and xpad.transpose(1, 2, 3, 0).flags.c_contiguous:
        x4 = xpad.transpose(1, 2, 3, 0)
        cols = K.im2col(x4.reshape((c, 1) + x4.shape[1:]), (1, kh, kw), (1, oh, ow), (1, sh, sw), (1, dh, dw))
        return cols.reshape(c, kh, kw, oh, ow, n)
    s_n, s_c, s_h, s_w = xpad.strides
    view = _strided(xp)(xpad, shape=(c, kh, kw, oh, ow, n),
                        strides=(s_c, dh * s_h, dw * s_w, sh * s_h, sw * s_w, s_n))
    return xp.ascontiguousarray(view)


def col2im(cols, hp, wp, sh, sw, dh, dw):
    """Adjoint of ``im2col``: sum columns ``[C, kh, kw, OH, OW, N]`` into a padded image,
    returned as ``[N, C, Hp, Wp]`` (a CHWN view). A compiled loop on numpy float32/float64
    (one pass over the columns), else one strided add per kernel offset."""
    xp = backend.get_array_module(cols)
    c, kh, kw, oh, ow, n = cols.shape
    if kh == kw == 1 and (oh, ow) == (hp, wp):   # a 1x1 stride-1 window: the columns are the image
        return cols.reshape(c, hp, wp, n).transpose(3, 0, 1, 2)
    out = xp.zeros((c, hp, wp, n), dtype=cols.dtype)
    if K.usable(cols) and cols.flags.c_contiguous:
        K.col2im(cols.reshape(c, 1, kh, kw, 1, oh, ow, n), out.reshape(c, 1, hp, wp, n), (1, sh, sw), (1, dh, dw))
        return out.transpose(3, 0, 1, 2)
    he, we = sh * (oh - 1) + 1, sw * (ow - 1) + 1
    disjoint = sh >= dh * (kh - 1) + 1 and sw >= dw * (kw - 1) + 1
    for i in range(kh):
        for j in range(kw):
            dst = out[:, i * dh:i * dh + he:sh, j * dw:j * dw + we:sw]
            if disjoint:
                dst[...] = cols[:, i, j]
            else:
                dst += cols[:, i, j]
    return out.transpose(3, 0, 1, 2)


def _cn_matrix(a):
    """``a`` [N, C, H, W] as the matrix [C, H*W*N] (a free view when ``a`` is CHWN)."""
    n, c, h, w = a.shape
    return a.transpose(1, 2, 3, 0).reshape(c, h * w * n)


def _mm(a, b):
    """``a @ b`` of 2-D operands; on numpy by ``gemm.product``: the compiled kernel where its
    rules take the shapes (an im2col product's, a weight gradient's), else numpy's BLAS.
    DCGAN steps 2-9% faster (4x4 stride-2 convolutions and their transposes); ResNet-style
    steps unchanged (their 3x3 convolutions run Winograd's stacked products, left to numpy:
    the kernel ran those 5% slower)."""
    if type(a) is np.ndarray and type(b) is np.ndarray:
        return gemm.product(a, b)
    return a @ b


def _gmm(a, b):
    """Matrix product, batched over groups when the operands are 3-D: on numpy one 2-D product
    per group written into the result (numpy's stacked matmul misses BLAS for some operand
    layouts, measured 5-10x slower on these shapes)."""
    if a.ndim == 2:
        return _mm(a, b)
    if type(a) is not np.ndarray:   # cupy: one batched (cuBLAS) product
        return backend.get_array_module(a).matmul(a, b)
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), dtype=np.result_type(a, b))
    for i in range(a.shape[0]):
        np.matmul(a[i], b[i], out=out[i])
    return out


def _wgrad(g, cols, chunks):
    """``g @ cols.T`` ([O, K] x [CKK, K] -> [O, CKK]; per group when 3-D).
    K = OH*OW*N is often far larger than O and CKK (first layers), a shape for which
    BLAS runs poorly; then K is cut into ``chunks`` slabs, multiplied as one batched
    product and summed (measured 3x faster for LeNet's first conv). Otherwise it is
    computed as ``(cols @ g.T).T``, which OpenBLAS runs faster than the transposed form."""
    xp = backend.get_array_module(g)
    if g.ndim == 3:
        if type(g) is not np.ndarray:
            return xp.matmul(g, cols.transpose(0, 2, 1))
        return xp.stack([_wgrad(g[i], cols[i], chunks) for i in range(g.shape[0])])
    m, k = g.shape
    n = cols.shape[0]
    if chunks > 1 and k % chunks == 0 and k >= 16 * max(m, n):
        gs = g.reshape(m, chunks, -1).transpose(1, 0, 2)
        cs = cols.reshape(n, chunks, -1).transpose(1, 2, 0)
        return xp.matmul(gs, cs).sum(axis=0)
    if m * n >= WGRAD_DIRECT_MIN:
        # a large weight: its gradient in its own layout (the transposed result of the other
        # orientation costs a transposing pass wherever it is used, e.g. added into .grad)
        return _mm(g, cols.T)
    return _mm(cols, g.T).T


#: weights of at least this many elements get their gradient from ``_wgrad`` C-contiguous
WGRAD_DIRECT_MIN = 1 << 16


def _swap(a):
    return a.T if a.ndim == 2 else a.transpose(0, 2, 1)


# -- Winograd F(2x2, 3x3) ----------------------------------------------------------------------------
# A 3x3 stride-1 convolution computed on 4x4 input tiles (stride 2) that each give a 2x2 output
# tile: Y = A^T [ (G w G^T) * (B^T d B) ] A, with the 16 elementwise products of all tiles and
# channel pairs done as 16 matrix products [O, C] x [C, tiles*N]: 16/36 of im2col's
# multiplications. B^T, A^T have entries 0 and +-1 (the transforms are adds), G has +-1/2: the
# rounding error is that of a few extra additions (float32: ~1e-6 relative to the output's
# scale, tested against float64). The transforms are the whole-array adds over strided tile views
# below: cupy takes this variant (numpy float32/float64 take F(4x4, 3x3), compiled).
#
# Winograd F(4x4, 3x3): 6x6 input tiles (stride 4) giving 4x4 output tiles, 36 products per tile:
# 36/144 = 1/4 of im2col's multiplications, and transformed tiles 36/16 = 2.25 times the image
# (F(2x2, 3x3): 4 times), so for few channels, where the 16 or 36 products [O, C] x [C, tiles*N]
# are bound by memory rather than arithmetic, it moves about half the data. Interpolation points
# 0, +-1, +-2 and infinity (B^T, A^T have small integer entries, G has 1/4, 1/6, 1/12, 1/24):
# its rounding error is larger than F(2x2, 3x3)'s (float32: ~1e-5 relative to the output's
# scale, tested against float64). numpy float32/float64 only (the compiled transforms
# ``conv_kernels.wino4_*``, by blocks of tile rows); cupy and mixed dtypes keep F(2x2, 3x3).
# The matrices and the weight transform live in ``ddg.tensor.winograd``.


def _use_winograd(x, w, stride, dilation, groups, pads):
    """Whether Conv2d takes the Winograd path: 3x3, stride 1, no dilation, one group, padding
    within the kernel, at least 16 channels in and out, an output of at least 8x8 (smaller
    tile grids are mostly edges) and at least 2**20 output-channel products (C*O*H*W*N;
    2**19 below 32 channels). Measured with the compiled transforms, forward + backward,
    batch 16, Winograd / im2col time: 0.45-0.65 at C=32-128 on 16x16 to 64x64, 0.6-0.8 at
    C=32-256 on 8x8, 1.15-1.55 on 4x4; at C=16 0.45-0.8 on 16x16 and 32x32, 0.6-1.1 on
    64x64, 1.2 on 8x8 (once 16x16 at least below 32 channels; but at batch 32-128, where
    im2col's columns outgrow L2 and its products with 16 rows wait on memory, ResNet-style
    steps at C=16 on 8x8 ran 1.11 / 1.38 / 1.61x torch against 0.90-0.91 with Winograd,
    on 12x12 1.58 -> 0.87, 10x10 1.17 -> 1.01, 14x14 1.25 -> 1.03, and batch 16 0.94 ->
    0.92: 8x8 is the gate at every width). At 2**19 products (CPU
    time against torch, load ~3.4): C=16 16x16 batch 8 1.44 -> 1.01, C=16 32x32 batch 2
    1.50 -> 1.21, but C=32 16x16 batch 2 1.16 -> 1.27 (kept on im2col). And at least
    ``WINO_MIN_TILES`` 4x4 output tiles over the batch: the weight's transform and its
    adjoint cost the same at any batch, about what 20 tiles save (ResNet-style training
    steps against torch, im2col below the gate / Winograd: C=128 8x8 batch 1 1.02 / 1.57,
    batch 2 1.00 / 1.28, batch 4 (16 tiles) 1.07 / 1.08, C=128 16x16 batch 1 (16) 1.00 /
    1.15, C=256 8x8 batch 2 1.03 / 1.47; Winograd kept: batch 6 (24) 1.10 / 0.99, batch 8
    (32) 1.20 / 0.95)."""
    o, cg, kh, kw = w.shape
    n, _, h, wd = x.shape
    oh, ow = h + pads[0] + pads[1] - 2, wd + pads[2] + pads[3] - 2
    return (kh == kw == 3 and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1) and groups == 1
            and max(pads) <= 2 and min(cg, o) >= 16 and min(oh, ow) >= 8
            and cg * o * h * wd * n >= (1 << 20 if min(cg, o) >= 32 else 1 << 19)
            and n * -(-oh // 4) * -(-ow // 4) >= WINO_MIN_TILES and x.dtype.kind == "f")


#: the fewest 4x4 output tiles (over the whole batch) for which ``_use_winograd`` takes Winograd
WINO_MIN_TILES = 20


#: bytes of transformed tiles (and as many of products) per block of tile rows in F(4x4, 3x3):
#: each block's tiles go through the transform, the 36 products and the output transform while
#: they are in cache (measured ~30 % faster than whole-image passes at C=16 on 64x64)
_WINO_BLOCK_BYTES = 1 << 21


#: the most bytes of transformed tiles F(4x4, 3x3) keeps from forward to backward over several
#: blocks (one block's are always kept): recomputing them cost 8 % of a 5x5 64 -> 64 layer on
#: 8x8 at batch 32 (``_use_blocks3``, 4.7 MB of tiles in two blocks)
_WINO_KEEP_BYTES = 1 << 23


def _wino_blocks(c, o, th, tw, n):
    """``(ty0, ty1)`` ranges of tile rows of even sizes, each with at most ``_WINO_BLOCK_BYTES`` of
    float32 transformed tiles (at least one tile row)."""
    most = max(1, _WINO_BLOCK_BYTES // (36 * 4 * max(c, o) * tw * n))
    nb = -(-th // most)
    bounds = [th * i // nb for i in range(nb + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _wino_tile(x, w, oh, ow):
    """The output tile of a Winograd convolution: 4 (F(4x4, 3x3)) on numpy float32/float64 for an
    output of at least 8x8, else 2 (F(2x2, 3x3)). Measured forward + backward, batch 16,
    F(4x4) / F(2x2) time: 0.5-0.75 at C=16-256 on 16x16 to 64x64, 0.7-0.9 at C=32-256 on 8x8."""
    return 4 if K.usable(x, w) and min(oh, ow) >= 8 else 2


def _use_grouped_winograd(x, w, stride, dilation, groups, pads):
    """Whether a grouped 3x3 stride-1 convolution runs as Winograd per group
    (``Conv2d._forward_grouped_winograd``): numpy float32/float64, more than one group, at
    least 8 input and output channels per group (fewer go to the whole-plane loop: at 4 per
    group the tile products are too small for BLAS and Winograd ran 1.0-1.5x the loop's
    time; at 8 it ran 0.3-0.8x), padding within the kernel, an output of at least 8x8; at 8
    input channels per group from batch 4 (forward + backward against torch, 32 channels in 4
    groups, Winograd -> plane loop: batch 1 64x64 1.75 -> 1.31, 32x32 1.33 -> 0.93, batch 2
    32x32 1.29 -> 1.11; batch 4 32x32 1.14 against 1.34, batch 8 16x16 1.10 against 1.59)."""
    o, cg, kh, kw = w.shape
    n, _, h, wd = x.shape
    oh, ow = h + pads[0] + pads[1] - 2, wd + pads[2] + pads[3] - 2
    return (groups > 1 and kh == kw == 3 and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and max(pads) <= 2 and min(cg, o // groups) >= 8 and (cg > 8 or n >= 4) and min(oh, ow) >= 8
            and K.usable(x, w))


def _few_channels_plane(c, oh, ow, stride, x_grad):
    """Whether a one-group stride-1 convolution with ``c`` input channels runs the whole-plane
    loop. With few channels im2col's input gradient (a product with c*kh*kw rows, then
    col2im over columns kh*kw times the image) is most of its time, so the loop pays when
    the input needs a gradient: forward + backward, plane loop / im2col time (batch 16-64,
    3x3 and 5x5, 1-64 output channels) 0.25-0.55 at 1-3 channels from 16x16 outputs on,
    0.7-0.9 at 8 channels from 32x32 on; smaller outputs (1.2 at 8 channels 24x24, 2-2.7 at
    8x8) keep im2col. Without an input gradient (a network's first layer) im2col's forward
    and weight gradient ran faster (the loop 0.9-1.6x its time)."""
    pixels = oh * ow
    return (x_grad and tuple(stride) == (1, 1) and c <= 8
            and (pixels >= 900 or (c <= 3 and pixels >= 256)))


def _dilated_same_3x3(x, w, stride, dilation, groups, pads):
    """A 3x3 stride-1 convolution of one group dilated by d >= 2 along both axes with "same"
    padding (d on each side), on numpy float32/float64: what ``_use_phases`` and
    ``_use_tiled`` choose between."""
    d = dilation[0]
    return (w.shape[2:] == (3, 3) and tuple(stride) == (1, 1) and d >= 2 and tuple(dilation) == (d, d)
            and groups == 1 and tuple(pads) == (d, d, d, d) and K.usable(x, w))


def _use_phases(x, w, stride, dilation, groups, pads):
    """Whether Conv2d runs a 3x3 convolution dilated by d >= 2 along both axes with "same"
    padding (d on each side) as Winograd on the d*d row/column residue classes of the image
    (``Conv2d._forward_phases``): numpy float32/float64, at least 16 channels in and out,
    classes of at least 8x8 and at least 2**19 channel-pixel products (C*O*H*W*N). The
    classes are a d*d times larger batch, so their Winograd pays below ``_use_winograd``'s
    size gates: forward + backward, Winograd on the classes / dilated im2col time, measured
    (d = 2) 0.55-0.7 at C=16 on 16x16 (batch 8-16), 0.6 at C=64-128 on 16x16 (batch 4),
    0.9 at C=16 on 32x32 (batch 2), ~1 at C=32 on 16x16 (batch 2); below the size gate
    1.0-1.4 (C=16, 16x16, batch 2-4). Classes of 4-7 pixels a side (F(4x4, 3x3) on them,
    ``_forward_phases``), forward + backward against torch (1 thread): d=2 at [N, C, 12, 12]
    N=64 C=96 1.81 -> 1.23, N=16 C=64 1.72 -> 1.32, N=32 C=16 1.69 -> 1.32; d=2 N=8 C=128 8x8
    1.45 -> 0.86; d=3 N=8 C=64 12x12 1.45 -> 0.82; N=16 C=32 14x14 1.49 -> 0.95; kept on
    im2col: 5x5 classes (1.62 -> 1.75: a tile grid 2.6x the class) and a class batch below 16
    (N=2 C=64 12x12: 1.27 -> 1.58)."""
    n, c, h, wd = x.shape
    d = dilation[0]
    if not _dilated_same_3x3(x, w, stride, dilation, groups, pads):
        return False
    hh, ww = -(-h // d), -(-wd // d)
    if min(c, w.shape[0]) < 16 or c * w.shape[0] * h * wd * n < 1 << 19:
        return False
    if min(hh, ww) >= 8:
        return True
    # classes of 4-7 pixels a side run F(4x4, 3x3) on tiles partly past their edge: taken
    # where the tiles' computed outputs are at most twice the class's (sides 4, 6, 7, not 5),
    # the classes give a batch of at least 16 and the 36 transformed products at least 32
    # rows each (16 rows of 512 channels, [4, 512, 7, 7] d=2: 1.3 -> 1.8 against im2col)
    tiles = -(-hh // 4) * -(-ww // 4)
    return min(hh, ww) >= 4 and hh * ww * 2 >= 16 * tiles and d * d * n >= 16 and d * d * n * tiles >= 32


def _use_tiled(x, w, stride, dilation, groups, pads):
    """Whether Conv2d runs a 3x3 "same" convolution dilated by d >= 2 that ``_use_phases``
    leaves as an undilated one of its residue classes laid out as one image
    (``Conv2d._forward_tiled``): numpy float32/float64, batch >= 4, >= 2**21 channel-pixel
    products, where that image takes the Winograd path. Forward + backward against torch
    (1 thread), dilated im2col -> tiled: d=2 [16, 48, 10, 10] 1.56 -> 1.08, [32, 96, 10, 10]
    1.67 -> 0.91, [4, 128, 10, 10] 1.44 -> 1.25; d=3 [16, 32, 15, 15] 1.71 -> 1.46; smaller
    ones lose ([2, 64, 12, 12] 1.26 -> 2.0, [8, 32, 9, 9] 1.10 -> 1.52: im2col kept)."""
    n, c, h, wd = x.shape
    d = dilation[0]
    if not (_dilated_same_3x3(x, w, stride, dilation, groups, pads) and n >= 4
            and c * w.shape[0] * h * wd * n >= 1 << 21):
        return False
    side = (d * (-(-h // d) + 1), d * (-(-wd // d) + 1))
    if h * wd * 2 < 16 * -(-side[0] // 4) * -(-side[1] // 4):
        return False    # F(4x4) tiles over more than twice the image ([4, 96, 13, 13] d=3: 1.57 -> 1.88)
    image = np.broadcast_to(np.zeros((), x.dtype), (n, c) + side)    # its shape and dtype, no data
    return _use_winograd(image, w, (1, 1), (1, 1), 1, (1, 1, 1, 1))


#: switch for the 5x5 / 7x7 path below (tests and benchmarks turn it off to compare)
BLOCKS3 = True
#: the square kernels ``_use_blocks3`` takes
BLOCKS3_KERNELS = (5, 7)


def _use_blocks3(x, w, stride, dilation, groups, pads):
    """Whether Conv2d runs a 5x5 (7x7) stride-1 convolution as a 3x3 one over four (nine)
    shifted copies of the image (``Conv2d._forward_blocks3``): the kernel zero-extended to 6x6
    (9x9) is s*s 3x3 blocks (s = 2, 3) at offsets (3a, 3b), so the convolution is a 3x3 one with
    s*s*C input channels, copy (a, b) the padded image shifted by (3a, 3b), and that one runs as
    Winograd F(4x4, 3x3): 36/4 = 9 multiplications per output and channel pair where im2col
    makes 25 (20.25 against 49 at 7x7), the count of F(2x2, 5x5), whose transformed tiles are
    as large (9x the image), with no transforms of its own. numpy float32/float64, one group,
    no dilation, padding within the kernel, at least 16 channels in and out, where the stacked
    convolution passes ``_use_winograd``'s gates, with ``BLOCKS3_MIN_TILES`` output tiles and
    blocks of ``BLOCKS3_MIN_COLUMNS`` (``conv_taps`` keeps layers of at most 32 channels: faster
    there). Forward + backward against torch (1 thread, interleaved), im2col -> this: 5x5
    32->64 16x16 batch 32 1.77 -> 1.20, 32->64 32x32 batch 16 1.90 -> 1.21, 64->64 16x16
    batch 32 1.55 -> 1.32, 128->128 16x16 batch 16 1.38 -> 1.15; 7x7 32->64 16x16 batch 32
    1.84 -> 1.36, 32->64 32x32 batch 16 1.97 -> 1.38, 128->128 16x16 batch 16 1.35 -> 1.19,
    64->64 16x16 batch 16 1.76 -> 1.74 (0.97-1.26 of im2col's time over runs: the edge)."""
    o, cg, kh, kw = w.shape
    n, c, h, wd = x.shape
    if not (BLOCKS3 and kh == kw and kh in BLOCKS3_KERNELS and tuple(stride) == (1, 1)
            and tuple(dilation) == (1, 1) and groups == 1 and max(pads) < kh and min(c, o) >= 16 and K.usable(x, w)):
        return False
    s = -(-kh // 3)
    oh, ow = h + pads[0] + pads[1] - kh + 1, wd + pads[2] + pads[3] - kw + 1
    stacked = np.broadcast_to(np.zeros((), x.dtype), (n, s * s * c, oh + 2, ow + 2))   # shapes only
    w3 = np.broadcast_to(np.zeros((), w.dtype), (o, s * s * c, 3, 3))
    if not _use_winograd(stacked, w3, (1, 1), (1, 1), 1, (0, 0, 0, 0)):
        return False
    th, tw = -(-oh // 4), -(-ow // 4)
    t0, t1 = _wino_blocks(s * s * c, o, th, tw, n)[0]
    return (t1 - t0) * tw * n >= BLOCKS3_MIN_COLUMNS and th * tw * n >= BLOCKS3_MIN_TILES


#: the fewest tile columns in one of ``_use_blocks3``'s blocks of tile rows: the 36 products of
#: a block read the whole transformed weight (36 * O * s*s*C values, 5.8x im2col's weight at
#: 5x5), so narrower blocks wait on it (5x5, forward + backward against torch, im2col ->
#: blocks: 16 columns 128->128 16x16 batch 4 1.10 -> 1.99, 32 columns 64->64 8x8 batch 16
#: 1.45 -> 1.63, 256->256 16x16 batch 8 1.05 -> 1.25; 48 columns 64->64 8x8 batch 24 1.47 ->
#: 1.45; 64 columns 64->128 8x8 batch 32 1.37 -> 1.18, 256->256 8x8 batch 32 1.04 -> 0.84)
BLOCKS3_MIN_COLUMNS = 64

#: the fewest 4x4 output tiles over the batch for ``_use_blocks3``: below, the transforms of 4C
#: channels and the weight's cost what the products save (blocks / im2col time, forward +
#: backward, one process: 16x16 at batch 4 (64 tiles) 32->64 1.09, 48->96 1.13; 8x8 at batch
#: 16 0.92, 1.01; from 128 tiles on 0.54-0.95 over 32-256 channels, 8-64 px)
BLOCKS3_MIN_TILES = 128


def _blocks3_windows(s, pads, h, wd, hp, wp):
    """Per shifted copy (a, b) of ``_blocks3_input`` that overlaps the image: ``(s*a + b, dst,
    org)``, the index of the copy, its window ``[:, i0:i1, j0:j1]`` (of ``[C, hp, wp, N]``) and
    the image's ``[:, H, W, N]`` window it holds: copy pixel (i, j) is the padded image's
    (3a + i, 3b + j), the image's (3a + i - pt, 3b + j - pl)."""
    pt, pl = pads[0], pads[2]
    for a in range(s):
        for b in range(s):
            i0, j0 = max(0, pt - 3 * a), max(0, pl - 3 * b)
            i1, j1 = min(hp, h + pt - 3 * a), min(wp, wd + pl - 3 * b)
            if i1 > i0 and j1 > j0:
                yield (s * a + b, (slice(None), slice(i0, i1), slice(j0, j1)),
                       (slice(None), slice(i0 + 3 * a - pt, i1 + 3 * a - pt), slice(j0 + 3 * b - pl, j1 + 3 * b - pl)))


def _blocks3_input(x, pads, hp, wp, s=2):
    """The s*s shifted copies of the padded ``x`` [N, C, H, W] that ``_use_blocks3``'s 3x3
    convolution reads, as one batch-innermost image [N, s*s*C, hp, wp] (copy (a, b), shifted
    by (3a, 3b), in channels (s*a + b)*C ...; ``hp``, ``wp`` cover the Winograd tiles, zero past
    the padded image)."""
    n, c, h, wd = x.shape
    xc = _pad_input(x, (0, 0, 0, 0))                 # batch-innermost (copied once if not)
    src = xc.transpose(1, 2, 3, 0)                   # [C, H, W, N]
    out = np.zeros((s * s, c, hp, wp, n), x.dtype)
    for q, dst, org in _blocks3_windows(s, pads, h, wd, hp, wp):
        out[q][dst] = src[org]
    return out.reshape(s * s * c, hp, wp, n).transpose(3, 0, 1, 2)


def _blocks3_input_adjoint(gs, c, h, wd, pads, s=2):
    """The adjoint of ``_blocks3_input``: the stacked image's gradient [N, s*s*C, hp, wp] (laid
    out batch-innermost) summed back onto [N, C, H, W] (batch-innermost)."""
    n, _, hp, wp = gs.shape
    g = gs.transpose(1, 2, 3, 0).reshape(s * s, c, hp, wp, n)
    out = np.zeros((c, h, wd, n), gs.dtype)
    for q, dst, org in _blocks3_windows(s, pads, h, wd, hp, wp):
        out[org] += g[q][dst]
    return out.transpose(3, 0, 1, 2)


def _blocks3_weight(w, s=2):
    """[O, C, k, k] (k <= 3s) -> the stacked convolution's [O, s*s*C, 3, 3]: zero-extended to
    3s x 3s, block (a, b) (rows 3a.., columns 3b..) as input channels (s*a + b)*C ...
    (C-contiguous)."""
    o, c, k = w.shape[:3]
    wz = np.zeros((o, c, 3 * s, 3 * s), w.dtype)
    wz[:, :, :k, :k] = w
    return np.ascontiguousarray(wz.reshape(o, c, s, 3, s, 3).transpose(0, 2, 4, 1, 3, 5)).reshape(o, s * s * c, 3, 3)


def _blocks3_weight_adjoint(g3, c, k, s=2):
    """The adjoint of ``_blocks3_weight``: [O, s*s*C, 3, 3] -> [O, C, k, k]."""
    o = g3.shape[0]
    gz = g3.reshape(o, s, s, c, 3, 3).transpose(0, 3, 1, 4, 2, 5).reshape(o, c, 3 * s, 3 * s)
    return np.ascontiguousarray(gz[:, :, :k, :k])


def _to_classes(a, d):
    """The residue classes of ``a`` [N, C, H, W] modulo ``d`` along height and width as a
    batch [d*d*N, C, ceil(H/d), ceil(W/d)] (class (p, q) in batch rows (p*d + q)*N ...;
    positions past H, W zero), batch-innermost (one copy)."""
    n, c, h, w = a.shape
    hh, ww = -(-h // d), -(-w // d)
    t = a.transpose(1, 2, 3, 0)
    if (hh * d, ww * d) != (h, w):
        e = np.zeros((c, hh * d, ww * d, n), a.dtype)
        e[:, :h, :w] = t
        t = e
    t = t.reshape(c, hh, d, ww, d, n).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(t).reshape(c, hh, ww, d * d * n).transpose(3, 0, 1, 2)


def _from_classes(a, d, n, h, w):
    """The inverse of ``_to_classes``: [d*d*N, C, hh, ww] back to the image [N, C, H, W]
    (one copy, batch-innermost; positions past H, W dropped)."""
    c, hh, ww = a.shape[1:]
    t = a.transpose(1, 2, 3, 0).reshape(c, hh, ww, d, d, n).transpose(0, 1, 3, 2, 4, 5)
    full = np.ascontiguousarray(t).reshape(c, hh * d, ww * d, n)
    return full[:, :h, :w].transpose(3, 0, 1, 2)


def _to_tiled(a, d):
    """The residue classes of ``a`` [N, C, H, W] modulo ``d`` (height and width) laid out as
    one image per sample [N, C, d*(hh+1), d*(ww+1)], ``hh = ceil(H/d)``: class (p, q) at rows
    ``p*(hh+1)`` on, columns ``q*(ww+1)`` on, each followed by a zero row and column (positions
    past H, W zero too), batch-innermost (one copy). A 3x3 convolution dilated by d with
    padding d of ``a`` is the undilated one with padding 1 of this image, read back by
    ``_from_tiled``: the zeros between the classes are their padding."""
    n, c, h, w = a.shape
    hh, ww = -(-h // d), -(-w // d)
    t = np.zeros((c, d, hh + 1, d, ww + 1, n), a.dtype)
    src = a.transpose(1, 2, 3, 0)
    if (hh * d, ww * d) != (h, w):
        e = np.zeros((c, hh * d, ww * d, n), a.dtype)
        e[:, :h, :w] = src
        src = e
    t[:, :, :hh, :, :ww] = src.reshape(c, hh, d, ww, d, n).transpose(0, 2, 1, 4, 3, 5)
    return t.reshape(c, d * (hh + 1), d * (ww + 1), n).transpose(3, 0, 1, 2)


def _from_tiled(a, d, h, w):
    """The inverse of ``_to_tiled``: [N, C, d*(hh+1), d*(ww+1)] back to [N, C, H, W] (one copy,
    batch-innermost; the separators and positions past H, W dropped)."""
    n, c, h1, w1 = a.shape
    hh, ww = h1 // d - 1, w1 // d - 1
    t = a.transpose(1, 2, 3, 0).reshape(c, d, hh + 1, d, ww + 1, n)[:, :, :hh, :, :ww]
    full = np.ascontiguousarray(t.transpose(0, 2, 1, 4, 3, 5)).reshape(c, hh * d, ww * d, n)
    return full[:, :h, :w].transpose(3, 0, 1, 2)


def _wino_in(xpad, th, tw):
    """``V = B^T d B`` of every 4x4 tile of ``xpad`` [N, C, 2*th+2, 2*tw+2] (CHWN): an array
    [4, 4, C, th, tw, N]."""
    xp = backend.get_array_module(xpad)
    n, c, hp, wp = xpad.shape
    sn, sc, sh, sw = xpad.strides
    rows = _strided(xp)(xpad, shape=(4, c, th, wp, n), strides=(sh, sc, 2 * sh, sw, sn))   # tile row i
    r = xp.empty((4, c, th, wp, n), xpad.dtype)
    xp.subtract(rows[0], rows[2], out=r[0])
    xp.add(rows[1], rows[2], out=r[1])
    xp.subtract(rows[2], rows[1], out=r[2])
    xp.subtract(rows[1], rows[3], out=r[3])
    s0, s1, s2, s3, s4 = r.strides
    cols = _strided(xp)(r, shape=(4, 4, c, th, tw, n), strides=(s0, s3, s1, s2, 2 * s3, s4))  # tile col j
    v = xp.empty((4, 4, c, th, tw, n), xpad.dtype)
    xp.subtract(cols[:, 0], cols[:, 2], out=v[:, 0])
    xp.add(cols[:, 1], cols[:, 2], out=v[:, 1])
    xp.subtract(cols[:, 2], cols[:, 1], out=v[:, 2])
    xp.subtract(cols[:, 1], cols[:, 3], out=v[:, 3])
    return v


def _wino_in_adjoint(gv, hp, wp):
    """The adjoint of ``_wino_in``: tile gradients [4, 4, C, th, tw, N] summed back into the
    padded image [N, C, hp, wp] (a CHWN view; overlapping tiles add)."""
    xp = backend.get_array_module(gv)
    _, _, c, th, tw, n = gv.shape
    # columns: gd_j from gV_b (B^T's columns), then the overlapping scatter along the width
    gr = xp.zeros((4, c, th, wp, n), gv.dtype)
    w0, w1, w2, w3 = (gr[:, :, :, j:j + 2 * tw:2] for j in range(4))
    w0 += gv[:, 0]
    w1 += gv[:, 1]
    w1 -= gv[:, 2]
    w1 += gv[:, 3]
    w2 -= gv[:, 0]
    w2 += gv[:, 1]
    w2 += gv[:, 2]
    w3 -= gv[:, 3]
    # rows: the same along the height
    out = xp.zeros((c, hp, wp, n), gv.dtype)
    h0, h1, h2, h3 = (out[:, i:i + 2 * th:2] for i in range(4))
    h0 += gr[0]
    h1 += gr[1]
    h1 -= gr[2]
    h1 += gr[3]
    h2 -= gr[0]
    h2 += gr[1]
    h2 += gr[2]
    h3 -= gr[3]
    return out.transpose(3, 0, 1, 2)


def _wino_out(m):
    """``Y = A^T M A`` of [4, 4, O, th, tw, N] products: the output [O, 2*th, 2*tw, N]."""
    xp = backend.get_array_module(m)
    o, th, tw, n = m.shape[2:]
    s = xp.empty((2, 4, o, th, tw, n), m.dtype)
    xp.add(m[0], m[1], out=s[0])
    s[0] += m[2]
    xp.subtract(m[1], m[2], out=s[1])
    s[1] -= m[3]
    y = xp.empty((o, th, 2, tw, 2, n), m.dtype)
    yv = y.transpose(2, 4, 0, 1, 3, 5)
    xp.add(s[:, 0], s[:, 1], out=yv[:, 0])
    yv[:, 0] += s[:, 2]
    xp.subtract(s[:, 1], s[:, 2], out=yv[:, 1])
    yv[:, 1] -= s[:, 3]
    return y.reshape(o, 2 * th, 2 * tw, n)


def _wino_out_adjoint(gy):
    """The adjoint of ``_wino_out``: [O, 2*th, 2*tw, N] -> [4, 4, O, th, tw, N]."""
    xp = backend.get_array_module(gy)
    o, h2, w2, n = gy.shape
    th, tw = h2 // 2, w2 // 2
    g = gy.reshape(o, th, 2, tw, 2, n).transpose(2, 4, 0, 1, 3, 5)     # [a, b, O, th, tw, N]
    gs = xp.empty((2, 4, o, th, tw, n), gy.dtype)                        # along the width: b -> j
    xp.copyto(gs[:, 0], g[:, 0])
    xp.add(g[:, 0], g[:, 1], out=gs[:, 1])
    xp.subtract(g[:, 0], g[:, 1], out=gs[:, 2])
    xp.negative(g[:, 1], out=gs[:, 3])
    gm = xp.empty((4, 4, o, th, tw, n), gy.dtype)                        # along the height: a -> i
    xp.copyto(gm[0], gs[0])
    xp.add(gs[0], gs[1], out=gm[1])
    xp.subtract(gs[0], gs[1], out=gm[2])
    xp.negative(gs[1], out=gm[3])
    return gm


# -- cuDNN (GPU only) --------------------------------------------------------------------------
_CUDNN_DTYPES = ("float16", "float32", "float64")


def _cudnn_for(*arrays):
    """cupy's cuDNN wrappers when every array is a cupy array of a dtype cuDNN takes,
    else None (always None on the CPU, so the numpy path never changes)."""
    if not all(backend.is_gpu_array(a) for a in arrays):
        return None
    if any(a.dtype.name not in _CUDNN_DTYPES for a in arrays):
        return None
    return backend.cudnn_module()


def _symmetric(pads):
    """(pad_h, pad_w) when top == bottom and left == right (cuDNN pads symmetrically), else None."""
    pt, pb, pl, pr = pads
    return (pt, pl) if pt == pb and pl == pr else None


def _contig(a):
    return backend.get_array_module(a).ascontiguousarray(a)


# keyword arguments of cupy.cudnn's convolution calls: cuDNN's heuristic algorithm choice
# (no benchmarking), non-deterministic algorithms allowed, Tensor Cores where cupy deems them
# usable for the dtype (float16).
_CONV_KW = dict(auto_tune=False, tensor_core="auto")
_CONV_BWD_KW = dict(deterministic=False, auto_tune=False, tensor_core="auto")


def _cudnn_conv(cd, x, w, b, pad, stride, dilation, groups, out_hw):
    """``y = conv(x, w) + b`` through cuDNN; ``y`` is a fresh C-contiguous NCHW array."""
    xp = backend.get_array_module(x)
    y = xp.empty((x.shape[0], w.shape[0]) + tuple(out_hw), dtype=x.dtype)
    cd.convolution_forward(_contig(x), _contig(w), None if b is None else _contig(b), y,
                           pad, stride, dilation, groups, **_CONV_KW)
    return y


def _cudnn_conv_data(cd, w, gy, b, x_shape, pad, stride, dilation, groups):
    """The adjoint of ``_cudnn_conv`` in its input (``conv_transpose(gy, w) [+ b]``) into a
    fresh array of shape ``x_shape``."""
    xp = backend.get_array_module(gy)
    gx = xp.empty(tuple(x_shape), dtype=gy.dtype)
    cd.convolution_backward_data(_contig(w), _contig(gy), None if b is None else _contig(b), gx,
                                 pad, stride, dilation, groups, **_CONV_BWD_KW)
    return gx


def _cudnn_conv_filter(cd, x, gy, w_shape, pad, stride, dilation, groups):
    """The adjoint of ``_cudnn_conv`` in its weight, a fresh array of shape ``w_shape``."""
    xp = backend.get_array_module(x)
    gw = xp.empty(tuple(w_shape), dtype=x.dtype)
    cd.convolution_backward_filter(_contig(x), _contig(gy), gw, pad, stride, dilation, groups, **_CONV_BWD_KW)
    return gw


# -- convolution -----------------------------------------------------------------------------
# batches below which grouped Winograd transforms the input with its groups as batch entries:
# forward + backward at batch 1 ([1, 48, 96, 96], 4 groups) 0.77x the time of the transforms on
# rows of one value per pixel; at batch 2-16 (32-256 channels, 4 groups) 1.04-1.6x
GWINO_FOLD_BELOW = 2

# output pixels per plane up to which a stride-1 depthwise / narrow-group convolution of an
# NCHW batch (of PLANE_BATCH_INNER_MIN_N or more) runs batch-innermost: 3x3 on 8x8 planes,
# batch 16, 64-256 channels, forward + backward 0.65-0.7 of the NCHW plane loop's time (16x16:
# even); at batch 2-4 (thread CPU time, 3x3 and 5x5, 7x7 to 10x10 planes, 64-512 channels,
# depthwise and 4-8 channels per group) 0.67-0.98 of it: a 7x7 plane's 61-element rows leave
# the loop mostly overhead, and even two samples per row pay for the interleaving copies
PLANE_BATCH_INNER_MAX = 100
PLANE_BATCH_INNER_MIN_N = 2


class Conv2d(Function):
    """``out[n, o] = sum_{c, i, j} w[o, c, i, j] * xpad[n, g*Cg + c, y*sh + i*dh, x*sw + j*dw] + b[o]``
    for NCHW input and weight ``[O, C/groups, kh, kw]``."""
    save_inputs = (1,)  # backward reads w and the columns (a copy of x); on cuDNN x too (see forward)
    poly = None   # the polyphase paths' (backward, state) (strided depthwise / dense, ``conv_strided``)

    def __init__(self, stride, pads, dilation, groups):
        self.stride, self.pads, self.dilation, self.groups = stride, pads, dilation, groups

    def forward(self, x, w, *b):
        if x.ndim != 4 or w.ndim != 4:
            raise ValueError(f"conv2d expects a 4-D input and a 4-D weight, got {x.ndim}-D and {w.ndim}-D")
        if type(x) is np.ndarray:   # numpy has no half-precision BLAS: float32 products
            x, w, b = upcast(x), upcast(w), tuple(upcast(v) for v in b)
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
        self.cudnn = _cudnn_for(x, w, *b)
        if self.cudnn is not None and _symmetric(self.pads) is not None:
            # GPU + cuDNN: backward needs x itself (saved here; no columns are built)
            self.x, self.w = x, w
            self.save_inputs = (0, 1)
            return _cudnn_conv(self.cudnn, x, w, b[0] if b else None, _symmetric(self.pads), (sh, sw), (dh, dw),
                               g, (oh, ow))
        self.cudnn = None
        self.wino = self.direct_x = self.phases = self.plane = self.pointwise = self.gwino = self.tiled = None
        self.blocks3 = None
        if kw > 1 and conv1d.usable(x, w, b, g, self.pads, sw, ow, dw):   # 1-D: compiled tiles or products
            y, state = conv1d.forward(x, w, b, sw, (pl, pr), dw, ow)
            self.poly = (conv1d.backward, state)
            self.w, self.x = w, x
            return y
        if conv_patch.usable(x, w, g, self.stride, self.pads, self.dilation):
            # the windows tile the image (kernel = stride): the columns are a rearranged copy
            y, state = conv_patch.forward(x, w, b[0] if b else None, oh, ow)
            self.poly = (conv_patch.backward, state)
            self.w, self.x = w, x
            return y
        if conv_taps.takes(x, w, g, self.stride, self.dilation, self.pads):
            # few channels (AVX2): one product over the taps' shifted windows, not Winograd's
            y, state = conv_taps.forward(x, w, b[0] if b else None, self.pads, oh, ow)
            self.poly = (conv_taps.backward, state)
            self.w, self.x = w, x
            return y
        if _use_winograd(x, w, self.stride, self.dilation, g, self.pads):
            return self._forward_winograd(x, w, b, oh, ow)
        if _use_blocks3(x, w, self.stride, self.dilation, g, self.pads):
            return self._forward_blocks3(x, w, b, oh, ow)
        if _use_phases(x, w, self.stride, self.dilation, g, self.pads):
            return self._forward_phases(x, w, b)
        if _use_tiled(x, w, self.stride, self.dilation, g, self.pads):
            return self._forward_tiled(x, w, b)
        if _use_grouped_winograd(x, w, self.stride, self.dilation, g, self.pads):
            return self._forward_grouped_winograd(x, w, b, oh, ow)
        if g == 1 and _few_channels_plane(cg, oh, ow, self.stride, getattr(self, "needs", (False,))[0]) \
                and K.usable(x, w, *b):
            return self._forward_plane(x, w, b, oh, ow)
        if g > 1 and cg <= 8 and K.usable(x, w, *b):
            # depthwise and narrow groups: the compiled direct loop (per output row cg*kh*kw
            # multiply-adds of contiguous rows) instead of per-group products with a few-row
            # operand; measured 0.45-0.66 of im2col's time at 2-4 channels per group, even at
            # 16, 2x slower at 32
            if (sh, sw) == (1, 1):
                return self._forward_plane(x, w, b, oh, ow)
            if conv_strided.usable(x, w, g, self.stride, self.dilation):
                y, state = conv_strided.forward(x, w, self.stride, self.pads, oh, ow)
                self.poly = (conv_strided.backward, state)
                if b:
                    y += b[0].reshape(1, o, 1, 1)
                self.w, self.x = w, x
                return y
            self.direct_x = np.ascontiguousarray(_pad_input(x, self.pads).transpose(1, 2, 3, 0))
            y = K.direct_forward(self.direct_x, w, g, (sh, sw), (dh, dw), oh, ow)
            if b:
                y += b[0].reshape(1, o, 1, 1)
            self.w, self.x = w, x
            return y
        if kh == kw == 1 and (sh, sw) == (1, 1) and g == 1 and not any(self.pads) and type(x) is np.ndarray:
            return self._forward_1x1(x, w, b)
        if conv_strided.stem_pays(x, w, g, self.stride, self.dilation, oh, ow, getattr(self, "needs", (True,))[0]):
            y, self.poly = conv_strided.stem_forward(x, w, self.stride, self.pads, oh, ow)
            if b:
                y += b[0].reshape(1, o, 1, 1)
            self.w, self.x = w, x
            return y
        # first layers (<= 4 channels) by per-sample columns before the dense components: 4x4/2
        # 3->16 and 3->64 @64 ran 0.6-0.8x the components' time, with or without an input gradient
        if conv_sample.pays(x, w, g, oh, ow):
            y, state = conv_sample.forward(x, w, b[0] if b else None, self.stride, self.pads, self.dilation, oh, ow)
            self.poly = (conv_sample.backward, state)
            self.w, self.x = w, x
            return y
        if conv_strided.dense_usable(x, w, g, self.stride, self.dilation, oh, ow):
            y, state = conv_strided.dense_forward(x, w, self.stride, self.pads, oh, ow)
            self.poly = (conv_strided.dense_backward, state)
            if b:
                y += b[0].reshape(1, o, 1, 1)
            self.w, self.x = w, x
            return y
        xpad = _pad_input(x, self.pads)
        cols = im2col(xpad, kh, kw, sh, sw, dh, dw, oh, ow)
        if g == 1:
            out = _mm(w.reshape(o, -1), cols.reshape(c * kh * kw, -1))
        else:
            out = _gmm(w.reshape(g, o // g, -1), cols.reshape(g, cg * kh * kw, -1)).reshape(o, -1)
        if b:
            out += b[0].reshape(o, 1)
        self.cols, self.w, self.x = cols, w, x  # x: for backward_graph only
        self.geom = (n, c, h, wd, xpad.shape[2], xpad.shape[3], oh, ow)
        return out.reshape(o, oh, ow, n).transpose(3, 0, 1, 2)

    def _forward_winograd(self, x, w, b, oh, ow, tile=None):
        xp = backend.get_array_module(x)
        n, c, h, wd = x.shape
        o = w.shape[0]
        pt, _, pl, _ = self.pads
        m = tile or _wino_tile(x, w, oh, ow)
        t = m + 2
        th, tw = -(-oh // m), -(-ow // m)
        hp, wp = m * th + 2, m * tw + 2
        xpad = _pad_input(x, (pt, hp - h - pt, pl, wp - wd - pl))
        if m == 4:   # F(4x4, 3x3): compiled transforms (numpy float32/float64), by blocks of tile rows
            u = _wino_weight(w, _WINO4_G)
            v = np.ascontiguousarray(xpad.transpose(1, 2, 3, 0))     # kept: backward recomputes the tiles
            y = np.empty((o, 4 * th, 4 * tw, n), x.dtype)
            blocks = _wino_blocks(c, o, th, tw, n)
            # the blocks' tiles are kept for backward where they total at most _WINO_KEEP_BYTES
            # (one block always), else recomputed there block by block
            keep = len(blocks) == 1 or 36 * c * th * tw * n * x.dtype.itemsize <= _WINO_KEEP_BYTES
            kept = []
            for t0, t1 in blocks:
                vb = K.wino4_in(v, th, tw, t0, t1).reshape(36, c, -1)
                K.wino4_out_into(_gmm(u, vb).reshape(6, 6, o, t1 - t0, tw, n), y, t0)
                if keep:
                    kept.append(vb)
            self.wino_v = kept if keep else None
            y = y[:, :oh, :ow]
        else:
            u = _wino_weight(w)
            v = _wino_in(xpad, th, tw).reshape(16, c, -1)
            y = _wino_out(_gmm(u, v).reshape(4, 4, o, th, tw, n))[:, :oh, :ow]
        if b:
            y += b[0].reshape(o, 1, 1, 1)
        self.wino = (v, u, th, tw, hp, wp, m)
        self.w, self.x = w, x
        return y.transpose(3, 0, 1, 2)

    def _backward_winograd(self, gy):
        needs = self.needs
        v, u, th, tw, hp, wp, m = self.wino
        t = m + 2
        x, w = self.x, self.w
        xp = backend.get_array_module(gy)
        n, c, h, wd = x.shape
        o = w.shape[0]
        oh, ow = gy.shape[2:]
        g = gy.astype(v.dtype, copy=False).transpose(1, 2, 3, 0)      # [O, OH, OW, N]
        if (oh, ow) != (m * th, m * tw):                              # partial tiles: zero-padded
            gp = xp.zeros((o, m * th, m * tw, n), gy.dtype)
            gp[:, :oh, :ow] = g
            g = gp
        if m == 4:
            return self._backward_winograd4(gy, np.ascontiguousarray(g))
        gm = _wino_out_adjoint(g).reshape(16, o, -1)
        gx = gw = gb = None
        if needs[1]:
            # one stacked product: measured 10-20 % faster than _wgrad's per-position loop here
            gu = np.matmul(gm, v.transpose(0, 2, 1)) if type(gm) is np.ndarray else _wgrad(gm, v, 1)
            gw = _wino_weight_adjoint(gu, o, c)
        if needs[0]:
            pt, _, pl, _ = self.pads
            gv = _gmm(u.transpose(0, 2, 1), gm).reshape(t, t, c, th, tw, n)
            gx = _wino_in_adjoint(gv, hp, wp)[:, :, pt:pt + h, pl:pl + wd]
        if len(needs) == 3:
            gb = gy.sum(axis=(0, 2, 3)) if needs[2] else None
            return gx, gw, gb
        return gx, gw

    def _backward_winograd4(self, gy, g):
        # F(4x4, 3x3) by the forward's blocks of tile rows: the block's tiles recomputed from the
        # kept padded input, its products' gradients, then the weight gradient's products
        # (accumulated) and the input gradient's (added into the padded image)
        needs = self.needs
        x4, u, th, tw, hp, wp, _ = self.wino
        n, c, h, wd = self.x.shape
        o = u.shape[1]
        gu = np.zeros((36, o, c), x4.dtype) if needs[1] else None
        gx4 = np.zeros((c, hp, wp, n), x4.dtype) if needs[0] else None
        ut = u.transpose(0, 2, 1)
        for i, (t0, t1) in enumerate(_wino_blocks(c, o, th, tw, n)):
            gm = K.wino4_out_adjoint(g, t0, t1).reshape(36, o, -1)
            if needs[1]:
                vb = self.wino_v[i] if self.wino_v is not None else K.wino4_in(x4, th, tw, t0, t1).reshape(36, c, -1)
                gu += np.matmul(gm, vb.transpose(0, 2, 1))
            if needs[0]:
                K.wino4_in_adjoint_add(_gmm(ut, gm).reshape(6, 6, c, t1 - t0, tw, n), gx4, t0)
        gw = _wino_weight_adjoint(gu, o, c, _WINO4_G) if needs[1] else None
        gx = None
        if needs[0]:
            pt, _, pl, _ = self.pads
            gx = gx4.transpose(3, 0, 1, 2)[:, :, pt:pt + h, pl:pl + wd]
        if len(needs) == 3:
            return gx, gw, (gy.sum(axis=(0, 2, 3)) if needs[2] else None)
        return gx, gw

    @staticmethod
    def _inner_winograd(pads):
        """A stride-1 3x3 Conv2d with ``pads`` that a composite path runs ``_forward_winograd`` on
        directly (the residue classes, the 5x5 / 7x7 blocks): its other paths marked unused, so
        that its ``backward`` takes the Winograd one."""
        ph = Conv2d((1, 1), pads, (1, 1), 1)
        ph.cudnn = ph.direct_x = ph.phases = ph.plane = ph.pointwise = ph.gwino = ph.tiled = ph.blocks3 = None
        return ph

    def _forward_phases(self, x, w, b):
        # a 3x3 convolution dilated by d with "same" padding reads, for each output pixel,
        # only pixels of its own row and column residues modulo d: per class (d*d of them)
        # it is an undilated 3x3 convolution padded by 1 of that class's sub-image (the
        # image zero-extended to a multiple of d: those zeros lie in the padding). The
        # classes go into the batch axis (one copy) and the Winograd path runs on them.
        n, c, h, wd = x.shape
        d = self.dilation[0]
        xs = _to_classes(x, d)
        ph = self.phases = Conv2d._inner_winograd((1, 1, 1, 1))
        hh, ww = xs.shape[2:]
        # F(4x4, 3x3) from classes of 4x4 on (where the compiled transforms apply): the
        # class batch fills the products that small outputs leave short
        ys = ph._forward_winograd(xs, w, b, hh, ww, 4 if min(hh, ww) >= 4 and K.usable(xs, w) else None)
        self.w, self.x = w, x
        return _from_classes(ys, d, n, h, wd)

    def _forward_blocks3(self, x, w, b, oh, ow):
        # a 5x5 / 7x7 convolution as the 3x3 one of ``_use_blocks3`` on Winograd F(4x4, 3x3); the
        # stacked image is made as large as its tiles need, so the inner path pads nothing
        th, tw = -(-oh // 4), -(-ow // 4)
        nb = -(-w.shape[2] // 3)
        xs = _blocks3_input(x, self.pads, 4 * th + 2, 4 * tw + 2, nb)
        ph = self.blocks3 = Conv2d._inner_winograd((0, 0, 0, 0))
        y = ph._forward_winograd(xs, _blocks3_weight(w, nb), b, 4 * th, 4 * tw, 4)
        self.w, self.x = w, x
        return y[:, :, :oh, :ow]

    def _backward_blocks3(self, gy):
        n, c, h, wd = self.x.shape
        oh, ow = gy.shape[2:]
        th, tw = -(-oh // 4), -(-ow // 4)
        ph = self.blocks3
        ph.needs = self.needs
        g = gy.astype(self.w.dtype, copy=False)
        if (oh, ow) != (4 * th, 4 * tw):         # the inner output covers whole tiles
            gp = _alloc(np, n, gy.shape[1], 4 * th, 4 * tw, g.dtype, None)
            gp[:, :, :oh, :ow] = g
            g = gp
        grads = ph.backward(g)
        k = self.w.shape[2]
        nb = -(-k // 3)
        gx = None if grads[0] is None else _blocks3_input_adjoint(grads[0], c, h, wd, self.pads, nb)
        gw = None if grads[1] is None else _blocks3_weight_adjoint(grads[1], c, k, nb)
        return (gx, gw) + tuple(grads[2:])

    def _forward_tiled(self, x, w, b):
        # the residue classes as one image per sample with zero rows and columns between
        # them (``_to_tiled``): an undilated 3x3 convolution padded by 1, whose own path
        # choice applies (Winograd F(4x4) on a 10x10 image's 12x12 layout, where its 5x5
        # classes would fill 2.6x their size with tiles)
        n, c, h, wd = x.shape
        d = self.dilation[0]
        ph = self.tiled = Conv2d((1, 1), (1, 1, 1, 1), (1, 1), 1)
        if hasattr(self, "needs"):      # the inner path choice may depend on it
            ph.needs = self.needs
        y = ph.forward(_to_tiled(x, d), w, *b)
        self.w, self.x = w, x
        return _from_tiled(y, d, h, wd)

    def _backward_tiled(self, gy):
        d = self.dilation[0]
        h, wd = self.x.shape[2:]
        self.tiled.needs = self.needs
        grads = self.tiled.backward(_to_tiled(gy.astype(self.w.dtype, copy=False), d))
        gx = grads[0]
        return (None if gx is None else _from_tiled(gx, d, h, wd),) + tuple(grads[1:])

    def _backward_phases(self, gy):
        n, c, h, wd = self.x.shape
        d = self.dilation[0]
        g = _to_classes(gy.astype(self.w.dtype, copy=False), d)
        self.phases.needs = self.needs
        grads = self.phases.backward(g)
        gx = grads[0]
        return (None if gx is None else _from_classes(gx, d, n, h, wd),) + tuple(grads[1:])

    def _forward_1x1(self, x, w, b):
        # a 1x1 stride-1 convolution is a product over the image itself, in the input's own
        # layout: one product [O, C] x [C, H*W*N] for a batch-innermost input, one per sample
        # [O, C] x [C, H*W] for an NCHW one (no copy of x, y or, in that layout, gy)
        n, c, h, wd = x.shape
        o = w.shape[0]
        wm = w.reshape(o, c)
        if _is_chwn(x) and x.transpose(1, 2, 3, 0).flags.c_contiguous:
            y = _mm(wm, _cn_matrix(x)).reshape(o, h, wd, n).transpose(3, 0, 1, 2)
            self.pointwise = "chwn"
        else:
            x = np.ascontiguousarray(x)
            y = np.empty((n, o, h, wd), np.result_type(x, w))
            for i in range(n):
                np.matmul(wm, x[i].reshape(c, h * wd), out=y[i].reshape(o, h * wd))
            self.pointwise = "nchw"
        if b:
            y += b[0].reshape(1, o, 1, 1)
        self.w, self.x = w, x
        self.save_inputs = (0, 1)   # backward reads x itself
        return y

    def _backward_1x1(self, gy):
        needs, x, w = self.needs, self.x, self.w
        n, c, h, wd = x.shape
        o = w.shape[0]
        wm = w.reshape(o, c)
        gy = gy.astype(w.dtype, copy=False)
        gx = gw = None
        if self.pointwise == "chwn":
            g2 = _cn_matrix(gy)
            if needs[1]:
                gw = _wgrad(g2, _cn_matrix(x), h).reshape(w.shape)
            if needs[0]:
                gx = _mm(wm.T, g2).reshape(c, h, wd, n).transpose(3, 0, 1, 2)
        else:
            g3 = np.ascontiguousarray(gy).reshape(n, o, h * wd)
            x3 = x.reshape(n, c, h * wd)
            if needs[1]:
                acc = np.zeros((o, c), np.float64 if w.dtype == np.float64 else np.float32)
                for i in range(n):
                    acc += g3[i] @ x3[i].T
                gw = acc.astype(w.dtype, copy=False).reshape(w.shape)
            if needs[0]:
                gx = np.empty((n, c, h, wd), g3.dtype)
                for i in range(n):
                    np.matmul(wm.T, g3[i], out=gx[i].reshape(c, h * wd))
        if len(needs) == 3:
            return gx, gw, (gy.sum(axis=(0, 2, 3)) if needs[2] else None)
        return gx, gw

    def _forward_grouped_winograd(self, x, w, b, oh, ow):
        # Winograd F(4x4, 3x3) per group: the compiled tile transforms act per channel, so
        # they serve every group at once; the 36 tile products become 36*groups products
        # [O/g, C/g] x [C/g, tiles*N] (1/4 of im2col's multiplications)
        n, c, h, wd = x.shape
        o, cg = w.shape[:2]
        gr = self.groups
        og = o // gr
        pt, _, pl, _ = self.pads
        th, tw = -(-oh // 4), -(-ow // 4)
        hp, wp = 4 * th + 2, 4 * tw + 2
        pads = (pt, hp - h - pt, pl, wp - wd - pl)
        fold = n < GWINO_FOLD_BELOW and x.flags.c_contiguous
        if fold:
            # batch 1: the groups as batch entries ([C/g, Hp, Wp, N*g]), so that the
            # transforms run on rows g times longer (their cost goes by rows: at batch 1 they
            # were 2/3 of the convolution's time); the tiles are regrouped by one copy each way
            v = K.wino4_in(_cl(x.reshape(n * gr, cg, h, wd), pads), th, tw).reshape(36, cg, -1, gr)
            v = np.ascontiguousarray(v.transpose(0, 3, 1, 2)).reshape(36 * gr, cg, -1)
        else:
            v = K.wino4_in(_cl(x, pads), th, tw).reshape(36 * gr, cg, -1)
        u = _wino_weight(w, _WINO4_G).reshape(36 * gr, og, cg)
        # C-contiguous stacks of small products: numpy's stacked matmul loops over BLAS calls
        # without Python overhead
        m = np.matmul(u, v)
        if fold:
            m = np.ascontiguousarray(m.reshape(36, gr, og, -1).transpose(0, 2, 3, 1))
            y = np.empty((og, 4 * th, 4 * tw, n * gr), v.dtype)
            K.wino4_out_into(m.reshape(6, 6, og, th, tw, n * gr), y)
            y = y.reshape(og, 4 * th, 4 * tw, n, gr)[:, :oh, :ow].transpose(3, 4, 0, 1, 2).reshape(n, o, oh, ow)
            if b:
                y += b[0].reshape(1, o, 1, 1)
        else:
            y = np.empty((o, 4 * th, 4 * tw, n), v.dtype)
            K.wino4_out_into(m.reshape(6, 6, o, th, tw, n), y)
            y = y[:, :oh, :ow]
            if b:
                y += b[0].reshape(o, 1, 1, 1)
            y = y.transpose(3, 0, 1, 2)
        self.gwino = (v, u, th, tw, hp, wp, fold)
        self.w, self.x = w, x
        return y

    def _backward_grouped_winograd(self, gy):
        needs = self.needs
        v, u, th, tw, hp, wp, fold = self.gwino
        n, c, h, wd = self.x.shape
        o, cg = self.w.shape[:2]
        gr = self.groups
        og = o // gr
        oh, ow = gy.shape[2:]
        gy = gy.astype(v.dtype, copy=False)
        if fold:   # [O/g, 4*th, 4*tw, N*g], partial tiles zero-padded; the groups' tiles regrouped
            gm = K.wino4_out_adjoint(_cl(gy.reshape(n * gr, og, oh, ow), (0, 4 * th - oh, 0, 4 * tw - ow)))
            gm = np.ascontiguousarray(gm.reshape(36, og, -1, gr).transpose(0, 3, 1, 2)).reshape(36 * gr, og, -1)
        else:      # [O, 4*th, 4*tw, N], partial tiles zero-padded
            gm = K.wino4_out_adjoint(_cl(gy, (0, 4 * th - oh, 0, 4 * tw - ow))).reshape(36 * gr, og, -1)
        gx = gw = gb = None
        if needs[1]:   # (v_i @ gm_i^T)^T: the orientation BLAS runs fastest here
            gu = np.matmul(v, gm.transpose(0, 2, 1)).transpose(0, 2, 1)
            gw = _wino_weight_adjoint(np.ascontiguousarray(gu).reshape(36, o, cg), o, cg, _WINO4_G)
        if needs[0]:
            pt, _, pl, _ = self.pads
            gv = np.matmul(np.ascontiguousarray(u.transpose(0, 2, 1)), gm)
            if fold:
                gv = np.ascontiguousarray(gv.reshape(36, gr, cg, -1).transpose(0, 2, 3, 1))
                gx4 = K.wino4_in_adjoint_add(gv.reshape(6, 6, cg, th, tw, n * gr),
                                             np.zeros((cg, hp, wp, n * gr), gv.dtype))
                gx = gx4.reshape(cg, hp, wp, n, gr)[:, pt:pt + h, pl:pl + wd]
                gx = gx.transpose(3, 4, 0, 1, 2).reshape(n, c, h, wd)
            else:
                gx4 = K.wino4_in_adjoint_add(gv.reshape(6, 6, c, th, tw, n), np.zeros((c, hp, wp, n), gv.dtype))
                gx = gx4.transpose(3, 0, 1, 2)[:, :, pt:pt + h, pl:pl + wd]
        if len(needs) == 3:
            gb = _channel_sums(gy) if needs[2] else None
            return gx, gw, gb
        return gx, gw

    def _grouped_stride1(self):
        """Whether a grouped convolution's backward is ``_backward_grouped``: stride 1, padding
        within the kernel's extent, numpy arrays (the shapes it was measured on)."""
        kh, kw = self.w.shape[2:]
        (dh, dw), (pt, pb, pl, pr) = self.dilation, self.pads
        return (tuple(self.stride) == (1, 1) and type(self.cols) is np.ndarray and max(pt, pb) <= dh * (kh - 1)
                and max(pl, pr) <= dw * (kw - 1))

    def _backward_grouped(self, gy):
        # grouped, stride 1: per group the weight gradient (cols_g @ gy_g^T)^T, written in the
        # weight's layout, and the input gradient as the columns w_g^T gy_g scattered back
        needs, w, cols, gr = self.needs, self.w, self.cols, self.groups
        n, c, h, wd, hp, wp, oh, ow = self.geom
        o, cg, kh, kw = w.shape
        og = o // gr
        (dh, dw), (pt, pb, pl, pr) = self.dilation, self.pads
        g2 = _cn_matrix(gy.astype(w.dtype, copy=False))   # [O, OH*OW*N]
        gx = gw = gb = None
        if needs[1]:
            cm = cols.reshape(gr, cg * kh * kw, -1)
            gw = np.empty((gr, og, cg * kh * kw), w.dtype)
            for i in range(gr):
                np.matmul(cm[i], g2[i * og:(i + 1) * og].T, out=gw[i].T)
            gw = gw.reshape(w.shape)
        if len(needs) == 3 and needs[2]:
            gb = g2.sum(axis=1)
        if needs[0]:
            # the columns w_g^T gy_g scattered back by the compiled col2im: forward + backward
            # 0.88-1.0x the time of the input gradient as a convolution of the padded output
            # gradient (its flipped, transposed weight copy and columns of gy), 0.92x at 512
            # channels on 7x7 (groups 2-8, 3x3 to 7x7 kernels, 4x4 to 32x32 images)
            gc = _gmm(_swap(w.reshape(gr, og, -1)), g2.reshape(gr, og, -1)).reshape(c, kh, kw, oh, ow, n)
            gx = col2im(gc, hp, wp, 1, 1, dh, dw)[:, :, pt:pt + h, pl:pl + wd]
        return (gx, gw, gb) if len(needs) == 3 else (gx, gw)

    def _forward_plane(self, x, w, b, oh, ow):
        # stride-1 depthwise / narrow-group convolution as whole-plane shifted multiply-adds
        # (``conv_kernels.plane_forward``), in the input's own layout: a batch-innermost
        # input as one [C, Hp, Wp, N] image, any other as N planes [C, Hp, Wp] (no transposing
        # copy of x, y or gy; the padding is one contiguous copy), but small NCHW planes
        # batch-innermost (output and input gradient then batch-innermost views)
        n, c, h, wd = x.shape
        if _is_chwn(x):
            x5 = np.ascontiguousarray(_pad_input(x, self.pads).transpose(1, 2, 3, 0))[None]
        elif oh * ow <= PLANE_BATCH_INNER_MAX and n >= PLANE_BATCH_INNER_MIN_N:
            # small planes: an NCHW plane's rows are too short for the loop; one compiled
            # interleaving copy makes the image batch-innermost (rows N times longer)
            x5 = (conv_strided.padded_batch_inner(x, self.pads) if K.usable(x) else _cl(x, self.pads))[None]
        else:
            x5 = _nchw_padded(x, self.pads)[..., None]
        y5 = K.plane_forward(x5, w, self.groups, self.dilation, oh, ow)
        y = y5[0].transpose(3, 0, 1, 2) if x5.shape[0] == 1 and x5.shape[-1] == n and n > 1 else y5[..., 0]
        if b:
            y += b[0].reshape(1, -1, 1, 1)
        self.plane, self.w, self.x = x5, w, x
        if np.may_share_memory(x5, x):   # unpadded NCHW: backward reads x itself
            self.save_inputs = (0, 1)
        return y

    def _backward_plane(self, gy):
        needs, x5 = self.needs, self.plane
        n, c, h, wd = self.x.shape
        chwn = x5.shape[0] == 1 and x5.shape[-1] == n and n > 1
        gy = gy.astype(x5.dtype, copy=False)
        g5 = _cl(gy)[None] if chwn else np.ascontiguousarray(gy)[..., None]
        gx, gw = K.plane_backward(x5, self.w, g5, self.groups, self.dilation, needs[0], needs[1])
        if gx is not None:
            pt, _, pl, _ = self.pads
            if chwn and not _is_chwn(self.x) and K.usable(gx):
                # an NCHW input made batch-innermost for the loop: its gradient back in NCHW
                gx = conv_strided.unpad_to_nchw(gx[0], self.x.shape, pt, pl)
            else:
                gx = gx[0].transpose(3, 0, 1, 2) if chwn else gx[..., 0]
                gx = gx[:, :, pt:pt + h, pl:pl + wd]
        if len(needs) == 3:
            return gx, gw, (_channel_sums(gy) if needs[2] else None)
        return gx, gw

    def _backward_direct(self, gy):
        needs = self.needs
        gx, gw = K.direct_backward(self.direct_x, self.w, gy, self.groups, self.stride, self.dilation, needs[0],
                                   needs[1])
        if gx is not None:
            h, wd = self.x.shape[2:]
            pt, _, pl, _ = self.pads
            gx = gx[:, :, pt:pt + h, pl:pl + wd]
        if len(needs) == 3:
            return gx, gw, (_channel_sums(gy) if needs[2] else None)
        return gx, gw

    def backward(self, gy):
        if self.cudnn is not None:
            return self._backward_cudnn(gy)
        if self.wino is not None:
            return self._backward_winograd(gy)
        if self.plane is not None:
            return self._backward_plane(gy)
        if self.poly is not None:
            if self.poly[0] is conv_sample.backward and len(self.needs) == 3:
                return conv_sample.backward(self.poly[1], gy, *self.needs)   # the bias's too
            gx, gw = self.poly[0](self.poly[1], gy, self.needs[0], self.needs[1])
            if len(self.needs) == 3:
                return gx, gw, (_channel_sums(gy) if self.needs[2] else None)
            return gx, gw
        if self.gwino is not None:
            return self._backward_grouped_winograd(gy)
        if self.pointwise is not None:
            return self._backward_1x1(gy)
        if self.direct_x is not None:
            return self._backward_direct(gy)
        if self.phases is not None:
            return self._backward_phases(gy)
        if self.tiled is not None:
            return self._backward_tiled(gy)
        if self.blocks3 is not None:
            return self._backward_blocks3(gy)
        if self.groups > 1 and self._grouped_stride1():
            return self._backward_grouped(gy)
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
            gw = _wgrad(gm, cm, oh).reshape(w.shape)
        if len(needs) == 3 and needs[2]:
            gb = g2.sum(axis=1)
        if needs[0]:
            (sh, sw), (dh, dw), (pt, pb, pl, pr) = self.stride, self.dilation, self.pads
            fh, fw = dh * (kh - 1), dw * (kw - 1)
            if gr == 1 and sh == sw == 1 and kh * kw > 1 and max(pt, pb) <= fh and max(pl, pr) <= fw \
                    and h * wd <= oh * ow:
                # stride 1: the input gradient is itself a convolution of gy (padded by the
                # kernel's extent less the forward padding) with the flipped, transposed
                # kernel -- one strided gather (im2col) of gy instead of kh*kw strided adds
                # into a zeroed image (col2im); its product is as large as the col2im path's
                # when the input is no larger than the output ("same" padding), larger for
                # "valid" ones (H*W / (OH*OW) times), which keep col2im
                gpad = _pad_input(gy, (fh - pt, fh - pb, fw - pl, fw - pr))
                gcols = im2col(gpad, kh, kw, 1, 1, dh, dw, h, wd)
                wf = w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3).reshape(c, -1)
                gx = _mm(wf, gcols.reshape(o * kh * kw, -1)).reshape(c, h, wd, n).transpose(3, 0, 1, 2)
            else:
                gcols = _gmm(_swap(wm), gm).reshape(c, kh, kw, oh, ow, n)
                gx = col2im(gcols, hp, wp, sh, sw, dh, dw)[:, :, pt:pt + h, pl:pl + wd]
        return (gx, gw, gb) if len(needs) == 3 else (gx, gw)

    def backward_graph(self, gy):
        # gx = conv_transpose(gy, w) and gw = the filter gradient, itself an op of (x, gy)
        needs, geo = self.needs, (self.stride, self.pads, self.dilation, self.groups)
        gx = gw = gb = None
        if needs[0]:
            gx = Conv2dTranspose(*geo, tuple(self.x.shape[2:]))(gy, live_input(self, 1, self.w))
        if needs[1]:
            gw = Conv2dFilterGrad(*geo, tuple(self.w.shape))(live_input(self, 0, self.x), gy)
        if len(needs) == 3:
            gb = gy.sum(axis=[0, 2, 3]) if needs[2] else None
            return gx, gw, gb
        return gx, gw

    def _backward_cudnn(self, gy):
        needs, cd, x, w = self.needs, self.cudnn, self.x, self.w
        geo = (_symmetric(self.pads), tuple(self.stride), tuple(self.dilation), self.groups)
        gx = _cudnn_conv_data(cd, w, gy, None, x.shape, *geo) if needs[0] else None
        gw = _cudnn_conv_filter(cd, x, gy, w.shape, *geo) if needs[1] else None
        if len(needs) == 3:
            return gx, gw, (gy.sum(axis=(0, 2, 3)) if needs[2] else None)
        return gx, gw


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
        if type(x) is np.ndarray:   # numpy has no half-precision BLAS: float32 products
            x, w, b = upcast(x), upcast(w), tuple(upcast(v) for v in b)
        n, cin, h, wd = x.shape
        wc, og, kh, kw = w.shape
        g = self.groups
        if wc != cin or cin % g:
            raise ValueError(f"conv2d_transpose: input has {cin} channels (groups={g}) but the weight has shape "
                             f"{list(w.shape)}; expected [{cin}, Cout/groups, kh, kw]")
        (sh, sw), (dh, dw), (pt, pb, pl, pr) = self.stride, self.dilation, self.pads
        oh, ow = self.out_hw
        self.cudnn = _cudnn_for(x, w, *b)
        pad = _symmetric(self.pads)
        # cuDNN's backward-data is this op when the output size is one whose forward
        # convolution gives back H x W (true for output_padding < stride)
        if self.cudnn is not None and pad is not None and \
                out_size(oh, kh, sh, pt, pb, dh) == h and out_size(ow, kw, sw, pl, pr, dw) == wd:
            self.x, self.w = x, w
            return _cudnn_conv_data(self.cudnn, w, x, b[0] if b else None, (n, og * g, oh, ow), pad, (sh, sw),
                                    (dh, dw), g)
        self.cudnn = self.phase = None
        if conv1d.transpose_usable(x, w, b, g, self.pads, sw, dw):
            # 1-D: the stride's phases on compiled tiles, or the adjoint as three column products
            y, st = conv1d.transpose_forward(x, w, b, sw, (pl, pr), dw, ow)
            self.phase = ("line", st)
            self.x, self.w = x, w
            return y
        if phase_k3_usable(x, w, (sh, sw), self.pads, (dh, dw), g, (oh, ow)):
            # 3x3 stride 2 padding 1, few channels: the exact phases on the NCHW planes
            y, self.phase = phase_k3_forward(x, w, (oh, ow))
            if b:
                y += b[0].reshape(1, -1, 1, 1)
            self.x, self.w = x, w
            return y
        if phase_plane_usable(x, w, (sh, sw), (dh, dw), g):
            # few channels: the phases as whole-plane multiply-adds on the NCHW planes
            y, self.phase = phase_plane_forward(x, w, (sh, sw), (pt, pl), (oh, ow))
            if b:
                y += b[0].reshape(1, -1, 1, 1)
            self.x, self.w = x, w
            return y
        if phase_cols_usable(x, w, (sh, sw), (dh, dw), g):
            # per-sample NCHW column products of the phases
            y, self.phase = phase_cols_forward(x, w, (sh, sw), (pt, pl), (oh, ow))
            if b:
                y += b[0].reshape(1, -1, 1, 1)
            self.x, self.w = x, w
            return y
        if _phases_usable(x, w, (sh, sw), (dh, dw), g) and phases_pay(x, w, (sh, sw)):
            # kernel a multiple of the stride, image not too small: one stride-1 convolution
            # per output phase
            y, self.phase = phase_transpose_forward(x, w, (sh, sw), (pt, pl), (oh, ow))
            if b:
                y += b[0].reshape(-1, 1, 1, 1)
            self.x, self.w = x, w
            return y.transpose(3, 0, 1, 2)
        # the full (uncropped) extent the windows cover, plus room for output_padding
        hp = max((h - 1) * sh + dh * (kh - 1) + 1, pt + oh)
        wp = max((wd - 1) * sw + dw * (kw - 1) + 1, pl + ow)
        xm = _cn_matrix(x)
        if g == 1:
            cols = _mm(w.reshape(cin, -1).T, xm)
        else:
            cols = _gmm(_swap(w.reshape(g, cin // g, -1)), xm.reshape(g, cin // g, -1))
        cols = cols.reshape(og * g, kh, kw, h, wd, n)
        out = col2im(cols, hp, wp, sh, sw, dh, dw)[:, :, pt:pt + oh, pl:pl + ow]
        if b:
            out = out + b[0].reshape(1, -1, 1, 1)
        self.geom = (hp, wp)
        self.x, self.w = x, w
        return out

    def backward(self, gy):
        needs = self.needs
        x, w, g = self.x, self.w, self.groups
        if self.cudnn is not None:
            # forward was conv's input-adjoint: its gradients are conv itself (for x) and
            # conv's filter-adjoint with the roles of input and output swapped (for w)
            geo = (_symmetric(self.pads), tuple(self.stride), tuple(self.dilation), g)
            gx = _cudnn_conv(self.cudnn, gy, w, None, *geo, x.shape[2:]) if needs[0] else None
            gw = _cudnn_conv_filter(self.cudnn, gy, x, w.shape, *geo) if needs[1] else None
            gb = gy.sum(axis=(0, 2, 3)) if len(needs) == 3 and needs[2] else None
            return (gx, gw, gb) if len(needs) == 3 else (gx, gw)
        if self.phase is not None:
            tag = self.phase[0] if isinstance(self.phase[0], str) else None
            if tag == "line":
                gx, gw = conv1d.transpose_backward(self.phase[1], gy, needs[0], needs[1])
            elif tag == "plane":
                gx, gw = phase_plane_backward(gy.astype(w.dtype, copy=False), self.phase, needs[0], needs[1])
            elif tag == "cols":
                gx, gw = phase_cols_backward(gy, self.phase, needs[0], needs[1])
            elif tag == "k3":
                gx, gw = phase_k3_backward(gy, self.phase, needs[0], needs[1])
            else:
                gx, gw = phase_transpose_backward(gy, self.phase, needs[0], needs[1])
            gb = gy.sum(axis=(0, 2, 3)) if len(needs) == 3 and needs[2] else None
            return (gx, gw, gb) if len(needs) == 3 else (gx, gw)
        n, cin, h, wd = x.shape
        _, og, kh, kw = w.shape
        hp, wp = self.geom
        (sh, sw), (dh, dw), (pt, _, pl, _) = self.stride, self.dilation, self.pads
        oh, ow = self.out_hw
        xp = backend.get_array_module(gy)
        gpad = _alloc(xp, n, og * g, hp, wp, gy.dtype)
        gpad[:, :, pt:pt + oh, pl:pl + ow] = gy
        gcols = im2col(gpad, kh, kw, sh, sw, dh, dw, h, wd)  # [Cout, kh, kw, H, W, N]
        gx = gw = gb = None
        xm = _cn_matrix(x)
        if g == 1:
            wm, cm, xmm = w.reshape(cin, -1), gcols.reshape(og * kh * kw, -1), xm
        else:
            wm = w.reshape(g, cin // g, -1)
            cm = gcols.reshape(g, og * kh * kw, -1)
            xmm = xm.reshape(g, cin // g, -1)
        if needs[0]:
            gx = _gmm(wm, cm).reshape(cin, h, wd, n).transpose(3, 0, 1, 2)
        if needs[1]:
            gw = _gmm(xmm, _swap(cm)).reshape(w.shape)
        if len(needs) == 3 and needs[2]:
            gb = gy.sum(axis=(0, 2, 3))
        return (gx, gw, gb) if len(needs) == 3 else (gx, gw)

    def backward_graph(self, gy):
        # the adjoint pair again: gx = conv2d(gy, w), gw = conv's filter gradient of (gy, x)
        # (for output_padding < stride, where conv2d of the output size gives back H x W)
        needs, geo = self.needs, (self.stride, self.pads, self.dilation, self.groups)
        gx = gw = gb = None
        if needs[0]:
            gx = Conv2d(*geo)(gy, live_input(self, 1, self.w))
        if needs[1]:
            gw = Conv2dFilterGrad(*geo, tuple(self.w.shape))(gy, live_input(self, 0, self.x))
        if len(needs) == 3:
            gb = gy.sum(axis=[0, 2, 3]) if needs[2] else None
            return gx, gw, gb
        return gx, gw


class Conv2dFilterGrad(Function):
    """Conv2d's weight gradient as an op of ``(x, gy)``, recorded by Conv2d's
    ``backward_graph``. It is bilinear: for an upstream gradient ``u`` (weight-shaped) the
    gradient of x is ``conv2d_transpose(gy, u)`` and that of gy is ``conv2d(x, u)``."""

    def __init__(self, stride, pads, dilation, groups, w_shape):
        self.stride, self.pads, self.dilation, self.groups, self.w_shape = stride, pads, dilation, groups, w_shape

    def forward(self, x, gy):
        self.x, self.gy = x, gy
        (sh, sw), (dh, dw), gr = self.stride, self.dilation, self.groups
        cd = _cudnn_for(x, gy)
        if cd is not None and _symmetric(self.pads) is not None:
            return _cudnn_conv_filter(cd, x, gy, self.w_shape, _symmetric(self.pads), (sh, sw), (dh, dw), gr)
        c = x.shape[1]
        o, cg, kh, kw = self.w_shape
        oh, ow = gy.shape[2:]
        cols = im2col(_pad_input(x, self.pads), kh, kw, sh, sw, dh, dw, oh, ow)
        g2 = _cn_matrix(gy)
        if gr == 1:
            gm, cm = g2, cols.reshape(c * kh * kw, -1)
        else:
            gm, cm = g2.reshape(gr, o // gr, -1), cols.reshape(gr, cg * kh * kw, -1)
        return _wgrad(gm, cm, oh).reshape(self.w_shape)

    def backward(self, u):
        geo = (self.stride, self.pads, self.dilation, self.groups)
        nx, ng = self.needs
        gx = Conv2dTranspose(*geo, tuple(self.x.shape[2:])).forward(self.gy, u) if nx else None
        ggy = Conv2d(*geo).forward(self.x, u) if ng else None
        return gx, ggy

    def backward_graph(self, u):
        geo = (self.stride, self.pads, self.dilation, self.groups)
        nx, ng = self.needs
        gx = Conv2dTranspose(*geo, tuple(self.x.shape[2:]))(live_input(self, 1, self.gy), u) if nx else None
        ggy = Conv2d(*geo)(live_input(self, 0, self.x), u) if ng else None
        return gx, ggy


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
        if K.usable(x):   # one compiled gather on the NCHW image: (N*C) planes, batch of one
            xpad = _nchw_padded(x, self.pads)
            cols = K.im2col(xpad.reshape(n * c, 1, xpad.shape[2], xpad.shape[3], 1), (1, kh, kw), (1, oh, ow),
                            (1, sh, sw), (1, dh, dw))
            self.geom = (h, w, xpad.shape[2], xpad.shape[3], oh, ow)
            return cols.reshape(n, c * kh * kw, oh * ow)
        xpad = _pad_input(x, self.pads)
        cols = im2col(xpad, kh, kw, sh, sw, dh, dw, oh, ow)
        self.geom = (h, w, xpad.shape[2], xpad.shape[3], oh, ow)
        return cols.reshape(c * kh * kw, oh * ow, n).transpose(2, 0, 1)

    def backward(self, g):
        h, w, hp, wp, oh, ow = self.geom
        n, ckk, _ = g.shape
        (kh, kw), (sh, sw), (dh, dw), (pt, _, pl, _) = self.kernel, self.stride, self.dilation, self.pads
        if K.usable(g):   # one compiled scatter-add into the NCHW image
            c = ckk // (kh * kw)
            out = np.zeros((n * c, 1, hp, wp, 1), g.dtype)
            K.col2im(np.ascontiguousarray(g).reshape(n * c, 1, kh, kw, 1, oh, ow, 1), out, (1, sh, sw), (1, dh, dw))
            return out.reshape(n, c, hp, wp)[:, :, pt:pt + h, pl:pl + w]
        cols = g.transpose(1, 2, 0).reshape(ckk // (kh * kw), kh, kw, oh, ow, n)
        return col2im(cols, hp, wp, sh, sw, dh, dw)[:, :, pt:pt + h, pl:pl + w]

    backward_graph = linear_backward_graph  # linear: apply_linear is forward itself
