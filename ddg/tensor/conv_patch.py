"""One-group 2-D convolution whose windows tile the image: kernel = stride, no padding,
no dilation (patch embeddings of vision transformers, ConvNeXt's stem and downsampling
layers, 2x2 stride-2 convolutions), on numpy float32/float64.

The windows do not overlap, so the columns are the image itself rearranged: one transposing
copy gives ``cols [C*kh*kw, N*OH*OW]`` (rows in the weight's (c, i, j) order, columns in
(n, y, x) order), then one product ``W [O, C*kh*kw] @ cols`` gives the output as
``[O, N, OH, OW]``, returned as an NCHW view (each sample's channel planes contiguous).
Backward: the weight gradient is one product ``gy2 @ cols^T`` and the input gradient one
product ``W^T @ gy2`` rearranged back by the inverse copy (rows and columns of the image past
the last whole window get zeros), with ``gy2`` the output gradient as ``[O, N*OH*OW]`` (a
view when it comes in the output's own layout).

The general paths pay here for what a tiling needs none of: the polyphase split for
stride 2, the zero-filled column scatter of col2im, the batch-innermost layout copies.
"""
import numpy as np


def usable(x, w, groups, stride, pads, dilation):
    """Whether this path takes the convolution: one group, kernel = stride (at least 2 in
    some direction), no padding or dilation, numpy float32/float64 arrays of one dtype."""
    kh, kw = w.shape[2:]
    return (groups == 1 and tuple(stride) == (kh, kw) and kh * kw > 1 and not any(pads)
            and tuple(dilation) == (1, 1) and type(x) is np.ndarray and type(w) is np.ndarray
            and x.dtype == w.dtype and x.dtype in (np.float32, np.float64))


def _blocks(a, kh, kw, oh, ow):
    """``a`` [N, C, H, W] cut to its whole windows as [N, C, OH, kh, OW, kw] (a view)."""
    n, c = a.shape[:2]
    return a[:, :, :oh * kh, :ow * kw].reshape(n, c, oh, kh, ow, kw)


def forward(x, w, b, oh, ow):
    """``conv2d(x, w) + b``; returns the output (an NCHW view of ``[O, N, OH, OW]`` memory)
    and the state ``backward`` takes (the columns, the size of the tiled image)."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    cols = np.empty((c, kh, kw, n, oh, ow), x.dtype)
    cols[...] = _blocks(x, kh, kw, oh, ow).transpose(1, 3, 5, 0, 2, 4)
    cols = cols.reshape(c * kh * kw, n * oh * ow)
    y = w.reshape(o, -1) @ cols
    if b is not None:
        y += b.astype(x.dtype, copy=False).reshape(o, 1)
    return y.reshape(o, n, oh, ow).transpose(1, 0, 2, 3), (cols, w, x.shape, (oh, ow))


def backward(state, gy, need_x, need_w):
    """Input and weight gradients (None where not needed) from the output gradient ``gy``."""
    cols, w, x_shape, (oh, ow) = state
    n, c, h, wd = x_shape
    o, _, kh, kw = w.shape
    g2 = gy.astype(w.dtype, copy=False).transpose(1, 0, 2, 3).reshape(o, n * oh * ow)  # a copy unless [O, N, ...]
    gx = gw = None
    if need_w:
        gw = (g2 @ cols.T).reshape(w.shape)
    if need_x:
        gc = (w.reshape(o, -1).T @ g2).reshape(c, kh, kw, n, oh, ow)
        gx = np.empty(x_shape, w.dtype)
        if oh * kh < h:
            gx[:, :, oh * kh:] = 0
        if ow * kw < wd:
            gx[:, :, :oh * kh, ow * kw:] = 0
        _blocks(gx, kh, kw, oh, ow)[...] = gc.transpose(3, 0, 4, 1, 5, 2)
    return gx, gw
