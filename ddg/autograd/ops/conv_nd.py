"""Convolution and transposed convolution over any number of spatial dimensions (used for
3-D, NCDHW): windows are a strided view of the padded input (im2col without a copy until
the matrix product), gradients are scattered back with one strided slice-add per kernel
offset (col2im). The 2-D primitives in ``conv.py`` keep their own tuned CHWN layout; the
N-d pooling primitives (``pooling.py``) share these window helpers.
"""
import itertools

import numpy as np

from ...tensor import backend
from ..function import Function


def _pad(a, pads, fill=0.0):
    """``a`` [N, C, *S] padded by ``pads`` = (before_0, after_0, before_1, ...)."""
    xp = backend.get_array_module(a)
    nd = a.ndim - 2
    if not any(pads):
        return a
    out = xp.full(a.shape[:2] + tuple(a.shape[2 + i] + pads[2 * i] + pads[2 * i + 1] for i in range(nd)),
                  fill, dtype=a.dtype)
    out[(slice(None), slice(None)) + tuple(slice(pads[2 * i], pads[2 * i] + a.shape[2 + i]) for i in range(nd))] = a
    return out


def _windows(a, k, s, d, o):
    """The strided view [N, C, *o, *k] of padded ``a``: window (i...) at i*s, taps at j*d."""
    xp = backend.get_array_module(a)
    st = a.strides
    nd = len(k)
    shape = a.shape[:2] + tuple(o) + tuple(k)
    strides = st[:2] + tuple(st[2 + i] * s[i] for i in range(nd)) + tuple(st[2 + i] * d[i] for i in range(nd))
    return xp.lib.stride_tricks.as_strided(a, shape, strides)


def _scatter(gw, padded_spatial, k, s, d, o):
    """The adjoint of ``_windows``: gw [N, C, *o, *k] summed into a zero [N, C, *padded]."""
    xp = backend.get_array_module(gw)
    out = xp.zeros(gw.shape[:2] + tuple(padded_spatial), dtype=gw.dtype)
    nd = len(k)
    for off in itertools.product(*[range(n) for n in k]):
        sl = tuple(slice(off[i] * d[i], off[i] * d[i] + s[i] * (o[i] - 1) + 1, s[i]) for i in range(nd))
        out[(slice(None), slice(None)) + sl] += gw[(Ellipsis,) + off]
    return out


def _crop(a, pads, spatial):
    nd = len(spatial)
    return a[(slice(None), slice(None)) + tuple(slice(pads[2 * i], pads[2 * i] + spatial[i]) for i in range(nd))]


def _im2col(x, pads, k, s, d, o, groups):
    """[G, N*prod(o), C/G*prod(k)] columns of ``x`` [N, C, *S]."""
    n, c = x.shape[:2]
    nd = len(k)
    win = _windows(_pad(x, pads), k, s, d, o)
    win = win.reshape((n, groups, c // groups) + tuple(o) + tuple(k))
    perm = (1, 0) + tuple(range(3, 3 + nd)) + (2,) + tuple(range(3 + nd, 3 + 2 * nd))
    return win.transpose(perm).reshape(groups, n * int(np.prod(o)), (c // groups) * int(np.prod(k)))


def _col2im(cols, n, c, spatial, pads, k, s, d, o, groups):
    """The adjoint of ``_im2col``: [N, C, *spatial]."""
    nd = len(k)
    cg = c // groups
    g = cols.reshape((groups, n) + tuple(o) + (cg,) + tuple(k))
    perm = (1, 0, 2 + nd) + tuple(range(2, 2 + nd)) + tuple(range(3 + nd, 3 + 2 * nd))
    g = g.transpose(perm).reshape((n, c) + tuple(o) + tuple(k))
    padded = tuple(spatial[i] + pads[2 * i] + pads[2 * i + 1] for i in range(nd))
    return _crop(_scatter(g, padded, k, s, d, o), pads, spatial)


def _out_sizes(spatial, k, s, pads, d):
    return tuple((spatial[i] + pads[2 * i] + pads[2 * i + 1] - d[i] * (k[i] - 1) - 1) // s[i] + 1
                 for i in range(len(k)))


class ConvNd(Function):
    """N-d convolution (cross-correlation) of [N, C, *S] with weight [O, C/groups, *k]."""
    save_inputs = (0, 1)   # the saved columns and weight matrix may be views of them

    def __init__(self, stride, pads, dilation, groups):
        self.s, self.pads, self.d, self.groups = tuple(stride), tuple(pads), tuple(dilation), groups

    def forward(self, x, w, b=None):
        xp = backend.get_array_module(x, w)
        k = w.shape[2:]
        n, c = x.shape[:2]
        o = _out_sizes(x.shape[2:], k, self.s, self.pads, self.d)
        if min(o) <= 0:
            raise ValueError(f"ddg.conv3d: the output would be empty: input {list(x.shape)}, kernel {list(k)}")
        g = self.groups
        cols = _im2col(x, self.pads, k, self.s, self.d, o, g)
        wm = w.reshape(g, w.shape[0] // g, -1)
        out = xp.matmul(cols, wm.transpose(0, 2, 1))             # G, N*P, O/G
        og = w.shape[0] // g
        out = out.reshape((g, n) + o + (og,))
        nd = len(o)
        out = out.transpose((1, 0, 2 + nd) + tuple(range(2, 2 + nd))).reshape((n, w.shape[0]) + o)
        if b is not None:
            out = out + b.reshape((1, -1) + (1,) * nd)
        self.cols, self.wm, self.meta = cols, wm, (x.shape, w.shape, o, b is not None)
        return xp.ascontiguousarray(out)

    def backward(self, gy):
        xp = backend.get_array_module(gy)
        xs, ws, o, has_b = self.meta
        g = self.groups
        n = xs[0]
        nd = len(o)
        og = ws[0] // g
        gm = gy.reshape((n, g, og) + o).transpose((1, 0) + tuple(range(3, 3 + nd)) + (2,)).reshape(g, -1, og)
        needs = self.needs
        gx = gw = gb = None
        if needs[0]:
            gx = _col2im(xp.matmul(gm, self.wm), n, xs[1], xs[2:], self.pads, ws[2:], self.s, self.d, o, g)
        if needs[1]:
            gw = xp.matmul(gm.transpose(0, 2, 1), self.cols).reshape(ws)
        if has_b and needs[2]:
            gb = gy.sum(axis=(0,) + tuple(range(2, 2 + nd)))
        return (gx, gw, gb) if has_b else (gx, gw)


class ConvTransposeNd(Function):
    """N-d transposed convolution (the input-gradient of ConvNd) of [N, Cin, *S] with weight
    [Cin, Cout/groups, *k], to spatial size ``out_sizes``."""
    save_inputs = (0, 1)

    def __init__(self, stride, pads, dilation, groups, out_sizes):
        self.s, self.pads, self.d, self.groups = tuple(stride), tuple(pads), tuple(dilation), groups
        self.out_sizes = tuple(out_sizes)

    def forward(self, x, w, b=None):
        xp = backend.get_array_module(x, w)
        g = self.groups
        n, cin = x.shape[:2]
        o = tuple(x.shape[2:])
        nd = len(o)
        xm = x.reshape((n, g, cin // g) + o).transpose((1, 0) + tuple(range(3, 3 + nd)) + (2,)).reshape(
            g, -1, cin // g)
        wm = w.reshape(g, cin // g, -1)
        cout = w.shape[1] * g
        out = _col2im(xp.matmul(xm, wm), n, cout, self.out_sizes, self.pads, w.shape[2:], self.s, self.d, o, g)
        if b is not None:
            out = out + b.reshape((1, -1) + (1,) * nd)
        self.xm, self.wm, self.meta = xm, wm, (x.shape, w.shape, b is not None)
        return xp.ascontiguousarray(out)

    def backward(self, gy):
        xp = backend.get_array_module(gy)
        xs, ws, has_b = self.meta
        g = self.groups
        n, cin = xs[:2]
        o = tuple(xs[2:])
        nd = len(o)
        cols = _im2col(gy, self.pads, ws[2:], self.s, self.d, o, g)   # G, N*P, Cout/G*K
        gx = gw = gb = None
        if self.needs[0]:
            gx = xp.matmul(cols, self.wm.transpose(0, 2, 1))           # G, N*P, Cin/G
            gx = gx.reshape((g, n) + o + (cin // g,)).transpose((1, 0, 2 + nd) + tuple(range(2, 2 + nd)))
            gx = xp.ascontiguousarray(gx).reshape(xs)
        if self.needs[1]:
            gw = xp.matmul(self.xm.transpose(0, 2, 1), cols).reshape(ws)
        if has_b and self.needs[2]:
            gb = gy.sum(axis=(0,) + tuple(range(2, 2 + nd)))
        return (gx, gw, gb) if has_b else (gx, gw)
