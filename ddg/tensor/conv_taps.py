"""Few-channel 3x3 stride-1 convolutions as products of shifted windows (``Conv2d``'s path for
8 to 32 channels, at most 384 input x output channel pairs (more on small images and
batches), where the CPU has AVX2 but not AVX-512: ``takes``); likewise 5x5 and 7x7 kernels
with 8 to 32 channels, where the alternative is im2col.

Winograd F(4x4, 3x3) makes a 3x3 convolution 36 products ``[O x C] @ [C x tiles]`` per
block of tiles. With 16 channels each has only 16 inner values: OpenBLAS ran them at 22-26
GFLOP/s (Zen 3, AVX2, 1 thread), and the tile transforms cost about as much again, so a
ResNet-style step at 16 channels ran 1.05-1.21x torch. Here the convolution is one
product ``W [O, 9C] @ windows [9C, OH*OW*N]`` whose rows are the nine taps' shifted
windows of the padded batch-innermost image, read in place through an offset table by
the register tile of ``gemm_kernels`` (``conv_rows``): four output channels by 16 output
values in eight AVX2 registers over all 9C taps, no columns copied, no transforms. It does
4x the multiplications of Winograd F(4x4, 3x3), at 51-69 GFLOP/s where Winograd's whole
forward ran at 24-37 GFLOP/s-equivalent (16 channels, 32x32 to 64x64, batch 16).

* forward: ``conv_rows`` on the padded input (kept for the weight gradient);
* input gradient: the same product on the output gradient padded by 2 with the flipped,
  transposed kernel, only the unpadded input's pixels computed;
* weight gradient: ``conv_wgrad_rows``, the taps' windows as rows of A against the output
  gradient transposed to ``[OH*OW*N, O]`` (one blocked transpose), summed output row by
  output row.

numpy float32 only; every other case keeps its own path. The register tile is AVX2's
(``gemm_kernels`` builds it for the host's vector width, so it runs on any CPU: the tests
switch the path on everywhere).
"""
import numpy as np

from . import gemm
from .conv_phase import _window_table
from .conv_strided import padded_batch_inner

#: channel range (input and output, multiples of 4): at least MIN_CHANNELS on both sides and
#: WIDE_CHANNELS on one, at most MAX_PAIRS input x output channels, or MAX_PAIRS_SMALL on
#: outputs of at most SMALL_PIXELS. Forward + backward of one layer (3x3, pad 1) against the
#: path taken otherwise (Winograd from 16 channels on both sides, else im2col), batch 16, Zen
#: 3, 1 thread, interleaved: 16 -> 16 on 8x8 to 64x64 0.73-0.92 (batch 1-32 at 32x32:
#: 0.70-0.85), 8 -> 16 0.73, 12 -> 12 0.67, 12 -> 24 on 16x16 0.64 (batch 1-32: 0.63-0.78),
#: 12 -> 32 0.55, 8 -> 32 0.65, 24 -> 16 0.72, 16 -> 24 0.86-0.94, 20 -> 20 0.98; 16 -> 32 on
#: 16x16 / 32x32 0.89-0.97 but 64x64 1.04, 32 -> 16 0.76. Left out: 8 -> 8 (0.84-1.09 over
#: batches 1-32), 4 -> 4 (1.10-1.17), 24 -> 24 (1.01-1.05), 32 -> 32 (1.08-1.32): there
#: Winograd's products have enough inner values
MIN_CHANNELS, WIDE_CHANNELS = 8, 12
MAX_PAIRS, MAX_PAIRS_SMALL, SMALL_PIXELS = 384, 512, 32 * 32
#: up to MAX_PAIRS_FEW channel pairs (32 -> 32) where the whole batch has at most FEW_VALUES
#: output positions N*OH*OW: Winograd's products then have few columns as well as few inner
#: values. 32 -> 32, windows / Winograd: batch 1 on 16x16 / 32x32 0.92 / 0.62-0.67, batch 2
#: 16x16 0.84, batch 2 32x32 0.76-0.89, batch 4 16x16 0.78, batch 8 8x8 0.90; past it batch 8
#: on 16x16 1.04, batch 4 on 32x32 0.90-0.93, batch 16 on 32x32 1.08. 64 -> 64 at batch 1-8
#: on 8x8 to 32x32 swung 0.78-1.19 over runs: left to Winograd
MAX_PAIRS_FEW, FEW_VALUES = 1024, 2048
#: bytes of the three padded input rows of every channel that each 4-row tile of
#: ``gemm_kernels.conv_rows`` reads again (kept in L2, 512 KB on Zen 3; the input gradient's
#: product reads the output gradient's rows, padded by 2): 16 -> 16 on 32x32 at batch 64
#: (432 KB) ran 35-37 GFLOP/s against 56-84 at batch 16-32 and 64x64 (104-209 KB), and
#: forward + backward 1.06-1.09x Winograd's time; 16 -> 16 and 8 -> 16 on 64x64 at batch 32
#: (408 KB) 1.08 and 1.24; at 306 KB 16 <-> 24 on 64x64 0.95-1.00, 12 -> 24 0.55. Cutting
#: the rows into spans of 256-1024 values lifted batch 64 only to 38-43 GFLOP/s and slowed
#: the rest
MAX_TAP_ROWS_BYTES = 320 * 1024
#: 5x5 and 7x7 kernels (any mix) with 8 to WIDE_MAX_CHANNELS channels on both sides. The
#: path otherwise is im2col and one product: columns of 25-49 taps per input channel, 4-40 MB
#: written and read again, at 1.3-3.3x torch's time. Forward + backward of one layer (pad
#: k // 2), windows / im2col, then windows / torch (Zen 3, 1 thread, best of 5 in 3
#: interleaved rounds): 5x5 16 -> 16 on 32x32 batch 32 0.48 / 1.45, on 64x64 batch 8 0.39 /
#: 1.01, on 8x8 batch 64 0.71 / 1.44; 8 -> 16 on 28x28 batch 64 0.39 / 1.26; 16 -> 32 on
#: 16x16 0.71 / 1.22; 12 -> 32 on 32x32 0.43 / 0.74; 24 -> 24 on 24x24 0.65 / 1.13; 32 -> 32
#: on 32x32 batch 16 0.55 / 1.00, on 16x16 batch 32 0.99 / 1.74; 8 -> 8 0.88 / 1.18; 7x7
#: 16 -> 16 on 32x32 0.48 / 0.92, 32 -> 16 0.50 / 1.30, 32 -> 32 on 16x16 0.54 / 1.07. Past
#: 32 channels the product's inner length is long enough for OpenBLAS: 32 -> 64 1.06, 64 ->
#: 64 1.06, 64 -> 128 and 128 -> 128 on 8x8 1.45-1.47 of im2col's time; left to it. No
#: size limit on the rows: at 5 rows per channel they pass L2 at batch 32 on 32x32 (400 KB)
#: and still ran at half im2col's time
WIDE_KERNELS, WIDE_MAX_CHANNELS = (5, 7), 32
#: First layers of 3 channels (RGB; a zero channel added, the tiles' rows of A go in fours)
#: with 5x5 or 7x7 kernels and STEM_MIN_OUT to STEM_MAX_OUT outputs: the weight gradient and
#: forward (no input gradient: the data), windows / the path before / torch:
#: 5x5 3 -> 16 32x32 batch 32 0.71 / 1.50, 7x7 3 -> 16 batch 16 0.58 / 1.34. Left out: 5x5 3
#: -> 32 (1.00), 1 -> 16 (1.29), 3x3 3 -> 8 / 16 / 32 / 64 (1.05-2.01) and 7x7 3 -> 64
#: (1.50), where the paths for first layers (``conv_sample``, ``conv_strided``) win
STEM_KERNELS, STEM_MIN_OUT, STEM_MAX_OUT = (5, 7), 8, 16


def takes(x, w, groups, stride, dilation, pads):
    """Whether ``Conv2d`` runs this path: a numpy float32 3x3, 5x5 or 7x7 convolution (5 and 7
    mixed too), stride 1, no dilation, one group, padding under the kernel's size per side,
    an output of at least 4x4, channels multiples of 4 in the measured ranges above; where
    the fused register tiles run (``gemm.FUSED``) and numpy's BLAS takes the Linear products
    (``gemm.ENABLED`` False: an AVX2 CPU, where this was measured) with one thread."""
    if not gemm.FUSED or gemm.ENABLED:
        return False
    if type(x) is not np.ndarray or type(w) is not np.ndarray or x.dtype != np.float32 or w.dtype != np.float32:
        return False
    o, c, kh, kw = w.shape
    n, _, h, wd = x.shape
    oh, ow = h + pads[0] + pads[1] - kh + 1, wd + pads[2] + pads[3] - kw + 1
    pairs = c * o
    if not (groups == 1 and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1) and min(oh, ow) >= 4
            and o % 4 == 0 and max(pads[:2]) < kh and max(pads[2:]) < kw and gemm.blas_threads() == 1):
        return False
    if c < 4:
        return c == 3 and kh == kw and kh in STEM_KERNELS and STEM_MIN_OUT <= o <= STEM_MAX_OUT
    if c % 4:
        return False
    # kh rows of 4-byte values per channel, of the padded input or the output gradient
    rows = 4 * kh * max(c, o) * max(wd + pads[2] + pads[3], ow + 2 * kw - 2) * n
    if kh == kw == 3:
        return (min(c, o) >= MIN_CHANNELS and max(c, o) >= WIDE_CHANNELS
                and (pairs <= MAX_PAIRS or (pairs <= MAX_PAIRS_SMALL and oh * ow <= SMALL_PIXELS)
                     or (pairs <= MAX_PAIRS_FEW and n * oh * ow <= FEW_VALUES))
                and rows <= MAX_TAP_ROWS_BYTES)
    return (kh in WIDE_KERNELS and kw in WIDE_KERNELS
            and MIN_CHANNELS <= min(c, o) and max(c, o) <= WIDE_MAX_CHANNELS)


def forward(x, w, b, pads, oh, ow):
    """``(y, state)``: the convolution of ``x`` [N, C, H, W] with ``w`` [O, C, kh, kw] (plus
    ``b`` [O] where not None), ``y`` a batch-innermost view [N, O, OH, OW]."""
    from . import gemm_kernels  # noqa: PLC0415 - numba with the first call
    n, c, h, wd = x.shape
    o = w.shape[0]
    xp = padded_batch_inner(x, pads)
    hp, wp = xp.shape[1:3]
    kh, kw = w.shape[2:]
    if c % 4:       # a first layer's 3 channels: a zero channel added (the tiles' rows of A go in fours)
        c4 = c + (-c) % 4
        xp = np.concatenate([xp, np.zeros((c4 - c,) + xp.shape[1:], np.float32)])
        w = np.concatenate([w, np.zeros((o, c4 - c, kh, kw), np.float32)], axis=1)
        c = c4
    tab = _window_table(c, hp * wp * n, kh, kw, wp, n)
    y = np.empty((o, oh * ow * n), np.float32)
    gemm_kernels.conv_rows(np.ascontiguousarray(w).reshape(o, kh * kw * c), xp, tab, y, oh, ow, n, wp * n, 0)
    y = y.reshape(o, oh, ow, n)
    if b is not None:
        y += b.reshape(o, 1, 1, 1)
    return y.transpose(3, 0, 1, 2), (xp, w, tab, pads, x.shape)


def backward(state, gy, need_x, need_w):
    """``(gx, gw)`` of ``forward`` for the output gradient ``gy`` [N, O, OH, OW] (any layout),
    each None unless asked for."""
    from . import gemm_kernels  # noqa: PLC0415
    xp, w, tab, (pt, _, pl, _), (n, c0, h, wd) = state
    o, c, kh, kw = w.shape      # c: the channels padded to a multiple of 4 (c0 the input's)
    oh, ow = gy.shape[2:]
    gy = gy.astype(np.float32, copy=False)
    gx = gw = None
    if need_w:
        g2 = np.ascontiguousarray(gy.transpose(1, 2, 3, 0)).reshape(o, -1)
        gwt = np.empty((kh * kw * c, o), np.float32)
        gemm_kernels.conv_wgrad_rows(xp, tab, gemm.transposed(g2), gwt, oh, ow, n, xp.shape[2] * n)
        gw = np.ascontiguousarray(gwt.T.reshape(o, c, kh, kw)[:, :c0])
    if need_x:
        # the input's gradient is the output gradient, padded by kh - 1 and kw - 1, convolved with the kernel
        # flipped in both axes and its channel axes swapped (pixel (y, x) of the padded input
        # at (y + pt, x + pl); the padding's own pixels are not computed)
        gp = padded_batch_inner(gy, (kh - 1, kh - 1, kw - 1, kw - 1))
        wf = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)).reshape(c, kh * kw * o)
        rowg = gp.shape[2]
        gx = np.empty((c, h * wd * n), np.float32)
        gemm_kernels.conv_rows(wf, gp, _window_table(o, gp.shape[1] * rowg * n, kh, kw, rowg, n), gx, h, wd, n,
                               rowg * n, (pt * rowg + pl) * n)
        gx = gx.reshape(c, h, wd, n)[:c0].transpose(3, 0, 1, 2)
    return gx, gw
