"""One-group 2-D convolution of an NCHW image sample by sample (numpy float32/float64).

Per sample, the columns of its windows (``[C*kh*kw, OH*OW]``, the padding read as zeros
without a padded copy) are gathered by one compiled pass while the sample is in cache, and
one product ``W [O, C*kh*kw] @ cols`` writes the sample's output plane block straight into
the NCHW result. Backward takes the output gradient in the same NCHW layout: the weight
gradient is a sum of per-sample products ``gy[n] @ cols[n]^T``, the input gradient per
sample ``W^T @ gy[n]`` scattered back by the adjoint pass.

The batch-innermost im2col of ``ops/conv.py`` builds one matrix for the whole batch, which
needs the input, output and output gradient transposed to ``[C, H, W, N]``; with few input
channels (a network's first layer, 1-D signals) those layout copies and the single large
column matrix, kh*kw times the image and far out of cache, were most of the time.
"""
import numpy as np

from . import gemm
from .compiled import jitable, kernel


@jitable
def _inside(off, sw, ow, w):
    """The output columns ``[lo, hi)`` whose input column ``x*sw + off`` lies in ``[0, w)``."""
    lo = 0 if off >= 0 else min(ow, (-off + sw - 1) // sw)
    hi = 0 if w - 1 - off < 0 else min(ow, (w - 1 - off) // sw + 1)
    return lo, max(hi, lo)


@kernel
def _gather(x, cols, geom):
    """``cols[(c*kh + i)*kw + j, y*OW + x] = x[c, y*sh + i*dh - pt, x*sw + j*dw - pl]`` (0 outside
    the image) for one sample ``x`` [C, H, W]; every element of ``cols`` is written.
    ``geom`` = (kh, kw, OH, OW, sh, sw, dh, dw, pt, pl)."""
    kh, kw, oh, ow, sh, sw, dh, dw, pt, pl = geom
    c_n, h, w = x.shape
    r = 0
    for c in range(c_n):
        for i in range(kh):
            for j in range(kw):
                row = cols[r]
                off = j * dw - pl
                lo, hi = _inside(off, sw, ow, w)
                for y in range(oh):
                    seg = row[y * ow:(y + 1) * ow]
                    iy = y * sh + i * dh - pt
                    if iy < 0 or iy >= h:
                        for q in range(ow):
                            seg[q] = 0.0
                        continue
                    for q in range(lo):
                        seg[q] = 0.0
                    # slices from non-negative starts, indexed from 0: no wraparound checks,
                    # so the copy vectorizes (4x faster than indexing x[c, iy] at q + off)
                    dst = seg[lo:hi]
                    if sw == 1:
                        src = x[c, iy, lo + off:hi + off]
                        for q in range(hi - lo):
                            dst[q] = src[q]
                    else:
                        src = x[c, iy, lo * sw + off:]
                        for q in range(hi - lo):
                            dst[q] = src[q * sw]
                    for q in range(hi, ow):
                        seg[q] = 0.0
                r += 1


@kernel
def _scatter_add(cols, gx, geom):
    """The adjoint of ``_gather``: ``cols`` [C*kh*kw, OH*OW] summed into the sample's input
    gradient ``gx`` [C, H, W] (entries that fall on the padding are dropped)."""
    kh, kw, oh, ow, sh, sw, dh, dw, pt, pl = geom
    c_n, h, w = gx.shape
    r = 0
    for c in range(c_n):
        for i in range(kh):
            for j in range(kw):
                row = cols[r]
                off = j * dw - pl
                lo, hi = _inside(off, sw, ow, w)
                for y in range(oh):
                    iy = y * sh + i * dh - pt
                    if iy < 0 or iy >= h:
                        continue
                    src = row[y * ow + lo:y * ow + hi]
                    if sw == 1:
                        dst = gx[c, iy, lo + off:hi + off]
                        for q in range(hi - lo):
                            dst[q] += src[q]
                    else:
                        dst = gx[c, iy, lo * sw + off:]
                        for q in range(hi - lo):
                            dst[q * sw] += src[q]
                r += 1


#: columns per product: OpenBLAS ran the products with a few-row weight (16 x 27) at ~40
#: GFLOP/s over a sample's 4096 columns and at 75-87 over blocks of 1024 (the block of
#: columns stays in L2 while it is packed)
CHUNK = 1024


def usable(x, w, groups):
    """Whether this path can take the convolution: one group, numpy float32/float64 arrays
    of one dtype, the input a C-contiguous NCHW array."""
    return (groups == 1 and type(x) is np.ndarray and type(w) is np.ndarray and x.dtype == w.dtype
            and x.dtype in (np.float32, np.float64) and x.flags.c_contiguous)


def pays(x, w, groups, oh, ow):
    """Whether the convolution takes this path: at most 4 input channels (a network's first
    layer, a stem) and outputs of at least 32x32. Forward + weight gradient ran 0.3-0.9x the
    time of the batch-innermost im2col (1-3 channels, 3x3 to 7x7, stride 1-2, 32-128 px);
    with an input gradient, strided stems 0.6-0.9x (3 channels, 3x3 and 7x7 stride 2 on 64
    px); stride-1 inputs with a gradient and few channels reach the whole-plane loop first.
    On smaller outputs the per-sample calls cost more than they save (LeNet's 1 -> 6
    channel 5x5 on 24x24 outputs, batch 64: 1.5x)."""
    return x.shape[1] <= 4 and oh * ow >= 1024 and usable(x, w, groups)


def forward(x, w, b, stride, pads, dilation, oh, ow):
    """``conv2d(x, w) + b`` for a C-contiguous NCHW ``x``; returns the NCHW output and the
    state ``backward`` takes (the columns of every sample, kept: kh*kw times the input).
    A bias rides in the product: the columns get a row of ones and the weight matrix the
    bias as its last column (no separate pass over the output; ``backward`` reads the bias
    gradient off the weight gradient's product the same way)."""
    n = x.shape[0]
    o, c, kh, kw = w.shape
    geom = (kh, kw, oh, ow, stride[0], stride[1], dilation[0], dilation[1], pads[0], pads[2])
    k = c * kh * kw
    wm = w.reshape(o, k)
    cols = np.empty((n, k + (b is not None), oh * ow), x.dtype)
    if b is not None:
        wm = np.concatenate([wm, b.astype(x.dtype, copy=False).reshape(o, 1)], axis=1)
        cols[:, k] = 1.0
    y = np.empty((n, o, oh * ow), x.dtype)
    for i in range(n):
        _gather(x[i], cols[i, :k], geom)
        for p0 in range(0, oh * ow, CHUNK):
            np.matmul(wm, cols[i, :, p0:p0 + CHUNK], out=y[i, :, p0:p0 + CHUNK])
    return y.reshape(n, o, oh, ow), (cols, w, geom, x.shape)


def backward(state, gy, need_x, need_w, need_b=None):
    """Input and weight gradients (None where not needed) from the output gradient ``gy``
    (any layout; copied to NCHW when it is not), and the bias gradient as a third value
    when ``need_b`` is given (the forward pass had a bias)."""
    cols, w, geom, x_shape = state
    n = x_shape[0]
    o = w.shape[0]
    k = w.size // o
    g3 = (gemm.c_contiguous(gy) if gy.dtype == w.dtype else np.ascontiguousarray(gy, dtype=w.dtype)).reshape(n, o, -1)
    gx = gw = gb = None
    if need_w or need_b:
        # with a bias the columns' row of ones gives its gradient as the product's last column
        acc = np.zeros((o, cols.shape[1]), w.dtype)
        part = np.empty_like(acc)
        for i in range(n):
            for p0 in range(0, cols.shape[2], CHUNK):
                np.matmul(g3[i, :, p0:p0 + CHUNK], cols[i, :, p0:p0 + CHUNK].T, out=part)
                acc += part
        if need_w:
            gw = acc[:, :k].reshape(w.shape)
        if need_b:
            gb = acc[:, k].copy()
    if need_x:
        wt = np.ascontiguousarray(w.reshape(o, -1).T)
        gx = np.zeros(x_shape, w.dtype)
        gc = np.empty((k, cols.shape[2]), w.dtype)
        for i in range(n):
            np.matmul(wt, g3[i], out=gc)
            _scatter_add(gc, gx[i], geom)
    return (gx, gw) if need_b is None else (gx, gw, gb)
