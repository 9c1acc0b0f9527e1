"""Few-channel 3x3 stride-1 convolutions as products of shifted windows (``Conv2d``'s path for
8 to 32 channels, at most 384 input x output channel pairs (more on small images and
batches), where the CPU has AVX2 but not AVX-512: ``takes``).

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


def takes(x, w, groups, stride, dilation, pads):
    """Whether ``Conv2d`` runs this path: a numpy float32 3x3 convolution, stride 1, no
    dilation, one group, padding of at most 2 per side, an output of at least 4x4, channels in
    the measured range above; where the fused register tiles run (``gemm.FUSED``) and numpy's
    BLAS takes the Linear products (``gemm.ENABLED`` False: an AVX2 CPU, where this was
    measured) with one thread."""
    if not gemm.FUSED or gemm.ENABLED:
        return False
    if type(x) is not np.ndarray or type(w) is not np.ndarray or x.dtype != np.float32 or w.dtype != np.float32:
        return False
    o, c, kh, kw = w.shape
    n, _, h, wd = x.shape
    oh, ow = h + pads[0] + pads[1] - 2, wd + pads[2] + pads[3] - 2
    pairs = c * o
    return (kh == kw == 3 and groups == 1 and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and max(pads) <= 2 and min(oh, ow) >= 4 and c % 4 == 0 and o % 4 == 0
            and min(c, o) >= MIN_CHANNELS and max(c, o) >= WIDE_CHANNELS
            and (pairs <= MAX_PAIRS or (pairs <= MAX_PAIRS_SMALL and oh * ow <= SMALL_PIXELS)
                 or (pairs <= MAX_PAIRS_FEW and n * oh * ow <= FEW_VALUES))
            # 3 rows of 4-byte values per channel, of the padded input or output gradient
            and 12 * max(c, o) * max(wd + pads[2] + pads[3], ow + 4) * n <= MAX_TAP_ROWS_BYTES
            and gemm.blas_threads() == 1)


def forward(x, w, b, pads, oh, ow):
    """``(y, state)``: the convolution of ``x`` [N, C, H, W] with ``w`` [O, C, 3, 3] (plus
    ``b`` [O] where not None), ``y`` a batch-innermost view [N, O, OH, OW]."""
    from . import gemm_kernels  # noqa: PLC0415 - numba with the first call
    n, c, h, wd = x.shape
    o = w.shape[0]
    xp = padded_batch_inner(x, pads)
    hp, wp = xp.shape[1:3]
    tab = _window_table(c, hp * wp * n, 3, 3, wp, n)
    y = np.empty((o, oh * ow * n), np.float32)
    gemm_kernels.conv_rows(np.ascontiguousarray(w).reshape(o, 9 * c), xp, tab, y, oh, ow, n, wp * n, 0)
    y = y.reshape(o, oh, ow, n)
    if b is not None:
        y += b.reshape(o, 1, 1, 1)
    return y.transpose(3, 0, 1, 2), (xp, w, tab, pads, x.shape)


def backward(state, gy, need_x, need_w):
    """``(gx, gw)`` of ``forward`` for the output gradient ``gy`` [N, O, OH, OW] (any layout),
    each None unless asked for."""
    from . import gemm_kernels  # noqa: PLC0415
    xp, w, tab, (pt, _, pl, _), (n, c, h, wd) = state
    o = w.shape[0]
    oh, ow = gy.shape[2:]
    gy = gy.astype(np.float32, copy=False)
    gx = gw = None
    if need_w:
        g2 = np.ascontiguousarray(gy.transpose(1, 2, 3, 0)).reshape(o, -1)
        gwt = np.empty((9 * c, o), np.float32)
        gemm_kernels.conv_wgrad_rows(xp, tab, gemm.transposed(g2), gwt, oh, ow, n, xp.shape[2] * n)
        gw = np.ascontiguousarray(gwt.T).reshape(o, c, 3, 3)
    if need_x:
        # the input's gradient is the output gradient, padded by 2, convolved with the kernel
        # flipped in both axes and its channel axes swapped (pixel (y, x) of the padded input
        # at (y + pt, x + pl); the padding's own pixels are not computed)
        gp = padded_batch_inner(gy, (2, 2, 2, 2))
        wf = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)).reshape(c, 9 * o)
        rowg = gp.shape[2]
        gx = np.empty((c, h * wd * n), np.float32)
        gemm_kernels.conv_rows(wf, gp, _window_table(o, gp.shape[1] * rowg * n, 3, 3, rowg, n), gx, h, wd, n,
                               rowg * n, (pt * rowg + pl) * n)
        gx = gx.reshape(c, h, wd, n).transpose(3, 0, 1, 2)
    return gx, gw
