"""Pooling primitives: max and average pooling over 2-D windows (primitives for speed,
like the convolutions of ``conv.py``, whose memory layout, padding convention and
cuDNN rules they share: see that module's docstring).

Pooling loops over the kh*kw kernel offsets, each step a vectorized operation on a
strided slice; max pooling keeps the (small, int) offset of the winner per output, and
the backward scatters the gradient with it. With cupy arrays and a usable cuDNN, pools
with symmetric padding (no ceil mode, no divisor override) call cuDNN instead.

The N-d primitives at the end (``MaxPoolNd``, ``AvgPoolNd``, used for 3-D; ``AdaptiveMaxPool``
for adaptive max pooling, 1-D to 3-D) run compiled on numpy float32/float64, else through
the strided window views defined here (cupy, other dtypes). Max pooling, strided or
adaptive, is ``pool_kernels.max3d`` (per output a loop over its window's per-axis bins,
the maximum's flat index kept) and its backward ``pool_kernels.max2d_adjoint`` on the flat
volumes (the 2-D pool's kernel: one signature for both). 3-D average pooling is one pass of
``conv_kernels.pool_forward`` (per output a loop over its box); 3-D float32 average pools
with disjoint windows (stride = kernel, no padding) take ``cpu_nn_kernels.pool_bins``
instead, which reads each input row once.
``AdaptiveAvgPool`` (1-D to 3-D) is a product with small averaging matrices.
"""
import functools
import itertools
import math

import numpy as np

from ...tensor import backend
from ..function import Function
from ..higher import linear_backward_graph
from ...tensor.dtypes import upcast
from .conv import _alloc, _contig, _cudnn_for, _pad_input, _symmetric, out_size
from ...tensor import conv_kernels as K


# -- pooling --------------------------------------------------------------------------------------
# -- N-d windows: padding, the strided window view and its adjoint --------------------------------
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


def _cudnn_pool_mode(cd, kind):
    """cuDNN's pooling mode constant: 'max' (the deterministic variant where cupy exposes
    it), 'avg_exclusive' (divide by the non-pad count) or 'avg_inclusive' (by kh*kw)."""
    lib = cd.lib
    if kind == "max":
        return getattr(lib, "CUDNN_POOLING_MAX_DETERMINISTIC", lib.CUDNN_POOLING_MAX)
    if kind == "avg_exclusive":
        return lib.CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
    return lib.CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING


def _cudnn_pool_ok(x, kernel, stride, pads, oh, ow):
    """cuDNN for this pool, or None: a cupy input, symmetric pads, and the output size cuDNN
    computes (floor mode) equal to ours (ceil mode adding a window goes to the kernels)."""
    cd = _cudnn_for(x)
    if cd is None or _symmetric(pads) is None:
        return None
    (kh, kw), (sh, sw), (pt, pb, pl, pr) = kernel, stride, pads
    if out_size(x.shape[2], kh, sh, pt, pb) != oh or out_size(x.shape[3], kw, sw, pl, pr) != ow:
        return None
    return cd


def _cudnn_pool(cd, x, kernel, stride, pads, oh, ow, mode):
    xp = backend.get_array_module(x)
    y = xp.empty((x.shape[0], x.shape[1], oh, ow), dtype=x.dtype)
    cd.pooling_forward(_contig(x), y, tuple(kernel), tuple(stride), _symmetric(pads), mode)
    return y


def _cudnn_pool_backward(op, g):
    """The input gradient of a pooling op (MaxPool2d/AvgPool2d) whose forward ran on cuDNN."""
    return op.cudnn.pooling_backward(_contig(op.x), _contig(op.out), _contig(g), tuple(op.kernel),
                                     tuple(op.stride), _symmetric(op.pads), op.mode)


def _pool_kernels():
    from ...tensor import pool_kernels  # noqa: PLC0415 - imports numba on the first numpy call
    return pool_kernels


def _compiled_2d(x, kernel, stride, pads, oh, ow):
    """Whether a 2-D pool runs as the compiled per-window loops (``pool_kernels``): a
    C-contiguous NCHW numpy float32/float64 input and every window holding at least one
    input element; returns the geometry tuple the kernels take, or None. A batch-innermost
    input has kernels of its own (``_batch_inner_2d``: copying it to NCHW and back cost more
    than the NCHW kernel saved on LeNet's pools); other layouts keep the strided passes."""
    if not K.usable(x) or not x.flags.c_contiguous:
        return None
    return _window_geom(x, kernel, stride, pads, oh, ow)


def _batch_inner_2d(x, kernel, stride, pads, oh, ow):
    """``_compiled_2d`` for an input stored batch-innermost (``[C, H, W, N]``, as the im2col
    convolutions leave their activations): the max pool's compiled loops read it in place,
    a vector of samples per window element (LeNet's two pools, backward: 3.3 -> ~0.4 ms of
    a 17 ms step, where the strided passes of the other path ran)."""
    if not K.usable(x) or not x.transpose(1, 2, 3, 0).flags.c_contiguous:
        return None
    return _window_geom(x, kernel, stride, pads, oh, ow)


def _window_geom(x, kernel, stride, pads, oh, ow):
    (kh, kw), (sh, sw), (pt, _, pl, _) = kernel, stride, pads
    if (oh - 1) * sh - pt >= x.shape[2] or (ow - 1) * sw - pl >= x.shape[3]:
        return None
    return (kh, kw, sh, sw, pt, pl)


class MaxPool2d(Function):
    """Max over each window; in backward each output's gradient goes to the FIRST
    maximal element of its window in row-major kernel order (as Paddle/PyTorch).

    On numpy float32/float64 forward is one compiled pass over the windows keeping each
    maximum's flat index in its plane (``pool_kernels.max2d``, or ``max2d_bi`` on an input
    stored batch-innermost, read in place; a NaN wins, as in the N-d pools), and backward
    adds each gradient there. Otherwise (cupy without cuDNN, 2-byte floats, other layouts)
    forward is kh*kw ``maximum`` passes over strided slices and backward re-finds the
    winners by comparing each slice with the saved output (no index array is kept), with a
    boolean "already claimed" mask so that ties route to the first offset."""
    save_output = True
    pos = None    # the compiled path's [N, C, OH, OW] flat indices of the maxima
    batch_inner = False    # pos (a view) and the output stored [C, OH, OW, N]

    def __init__(self, kernel, stride, pads, ceil_mode):
        self.kernel, self.stride, self.pads, self.ceil_mode = kernel, stride, pads, ceil_mode

    def _slices(self, xpad, oh, ow):
        (kh, kw), (sh, sw) = self.kernel, self.stride
        he, we = sh * (oh - 1) + 1, sw * (ow - 1) + 1
        for i in range(kh):
            for j in range(kw):
                yield (slice(None), slice(None), slice(i, i + he, sh), slice(j, j + we, sw))

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"max_pool2d expects a 4-D input, got {x.ndim}-D")
        if x.dtype.kind not in "fV":
            raise TypeError(f"max_pool2d expects a floating-point input, got {x.dtype}")
        xp = backend.get_array_module(x)
        oh, ow, extra = _pool_geometry(x.shape, self.kernel, self.stride, self.pads, self.ceil_mode)
        self.cudnn = _cudnn_pool_ok(x, self.kernel, self.stride, self.pads, oh, ow)
        if self.cudnn is not None:  # GPU + cuDNN; winner_index() pads x lazily if asked
            self.mode = _cudnn_pool_mode(self.cudnn, "max")
            self.x, self.xpad, self.extra = x, None, extra
            self.out = _cudnn_pool(self.cudnn, x, self.kernel, self.stride, self.pads, oh, ow, self.mode)
            self.geom = (x.shape, oh, ow)
            return self.out
        geom = _compiled_2d(x, self.kernel, self.stride, self.pads, oh, ow)
        if geom is not None:
            n, c, h, w = x.shape
            x3 = np.ascontiguousarray(x).reshape(n * c, h, w)
            y = np.empty((n, c, oh, ow), x.dtype)
            self.pos = np.empty((n, c, oh, ow), np.int32)
            _pool_kernels().max2d(x3, y.reshape(n * c, oh, ow), self.pos.reshape(n * c, oh, ow), geom)
            self.xpad, self.out, self.geom = None, y, (x.shape, oh, ow)
            return y
        geom = _batch_inner_2d(x, self.kernel, self.stride, self.pads, oh, ow)
        if geom is not None:
            n, c = x.shape[:2]
            y = np.empty((c, oh, ow, n), x.dtype)
            pos = np.empty((c, oh, ow, n), np.int32)
            _pool_kernels().max2d_bi(x.transpose(1, 2, 3, 0), y, pos, geom)
            self.pos, self.batch_inner = pos.transpose(3, 0, 1, 2), True
            self.xpad, self.out, self.geom = None, y.transpose(3, 0, 1, 2), (x.shape, oh, ow)
            return self.out
        xpad = _pad_input(x, self.pads, -np.inf, extra, to_chwn=False)
        best = None
        for sl in self._slices(xpad, oh, ow):
            if best is None:
                best = xpad[sl].copy(order="K")
            else:
                xp.maximum(best, xpad[sl], out=best)
        self.xpad, self.out = xpad, best
        self.geom = (x.shape, oh, ow)
        return best

    def mask(self):
        """Paddle's ``return_mask``: per output, the flat index ``y*W + x`` of its maximum in
        the (unpadded) input plane, int32."""
        if self.pos is not None:
            return self.pos.copy()
        (x_shape, _, _) = self.geom
        return max_pool_mask(self.winner_index(), self.kernel, self.stride, self.pads, x_shape[2:])

    def winner_index(self):
        """Per output, the kernel offset (row-major) of its first maximal element."""
        xp = backend.get_array_module(self.out)
        (x_shape, oh, ow), best = self.geom, self.out
        if self.xpad is None:  # cuDNN forward: pad now (only return_mask needs it)
            self.xpad = _pad_input(self.x, self.pads, -np.inf, self.extra, to_chwn=False)
        idx = xp.full(best.shape, -1, dtype=np.int32)
        for k, sl in enumerate(self._slices(self.xpad, oh, ow)):
            hit = (self.xpad[sl] == best) & (idx < 0)
            idx[hit] = k
        return idx

    def backward(self, g):
        if self.cudnn is not None:
            # cuDNN routes a tied window's gradient to one maximal element, not necessarily
            # the first in row-major order (ties are measure-zero for real-valued data)
            return _cudnn_pool_backward(self, g)
        if self.batch_inner:
            (n, c, h, w), oh, ow = self.geom
            gx = np.zeros((c, h * w, n), self.out.dtype)
            g3 = np.ascontiguousarray(g.transpose(1, 2, 3, 0), dtype=self.out.dtype).reshape(c, oh * ow, n)
            _pool_kernels().max2d_bi_adjoint(g3, self.pos.transpose(1, 2, 3, 0).reshape(c, oh * ow, n), gx)
            return gx.reshape(c, h, w, n).transpose(3, 0, 1, 2)
        if self.pos is not None:
            (n, c, h, w), oh, ow = self.geom
            gx = np.zeros((n * c, h * w), self.out.dtype)
            g2 = np.ascontiguousarray(g, dtype=self.out.dtype).reshape(n * c, oh * ow)
            _pool_kernels().max2d_adjoint(g2, self.pos.reshape(n * c, oh * ow), gx)
            return gx.reshape(n, c, h, w)
        xp = backend.get_array_module(g)
        (kh, kw), (sh, sw), (pt, _, pl, _) = self.kernel, self.stride, self.pads
        (n, c, h, w), oh, ow = self.geom
        xpad, best = self.xpad, self.out
        gx = _alloc(xp, n, c, xpad.shape[2], xpad.shape[3], g.dtype)
        disjoint = sh >= kh and sw >= kw
        claimed = None  # outputs whose gradient an earlier (tied) offset already took
        last = kh * kw - 1
        for k, sl in enumerate(self._slices(xpad, oh, ow)):
            hit = xpad[sl] == best
            if claimed is None:
                claimed = hit.copy() if k < last else hit
            else:
                xp.greater(hit, claimed, out=hit)  # hit and not claimed (bool arrays)
                if k < last:
                    xp.logical_or(claimed, hit, out=claimed)
            if disjoint:
                xp.multiply(g, hit, out=gx[sl])
            else:
                gx[sl] += g * hit
        return gx[:, :, pt:pt + h, pl:pl + w]

    # the gradient is linear in g (the winners are constants of it)
    backward_graph = linear_backward_graph

    def apply_linear(self, u):
        """``u`` read at each window's winner (the adjoint of ``backward``)."""
        if self.pos is not None:
            n, c, oh, ow = self.pos.shape
            planes = u.reshape(n * c, -1)
            return np.take_along_axis(planes, self.pos.reshape(n * c, -1), axis=1).reshape(n, c, oh, ow)
        xp = backend.get_array_module(u)
        idx = self.winner_index()  # pads self.xpad on the cuDNN path
        (n, c, h, w), oh, ow = self.geom
        (pt, _, pl, _) = self.pads
        upad = xp.zeros(self.xpad.shape, dtype=u.dtype)
        upad[:, :, pt:pt + h, pl:pl + w] = u
        out = xp.zeros(self.out.shape, dtype=u.dtype)
        for k, sl in enumerate(self._slices(upad, oh, ow)):
            out += xp.where(idx == k, upad[sl], u.dtype.type(0))
        return out


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
    elements in the window, otherwise by kh*kw (Paddle's rule). Strided pools of numpy
    float32/float64 are one compiled pass each way (``pool_kernels.avg2d``); the others
    kh*kw passes over strided slices."""
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
        if x.dtype.kind not in "fV":
            raise TypeError(f"avg_pool2d expects a floating-point input, got {x.dtype}")
        xp = backend.get_array_module(x)
        (kh, kw), (sh, sw) = self.kernel, self.stride
        n, c, h, w = x.shape
        oh, ow, extra = _pool_geometry(x.shape, self.kernel, self.stride, self.pads, self.ceil_mode)
        self.cudnn = None if self.divisor else _cudnn_pool_ok(x, self.kernel, self.stride, self.pads, oh, ow)
        if self.cudnn is not None:  # GPU + cuDNN (backward needs x and the output)
            self.mode = _cudnn_pool_mode(self.cudnn, "avg_exclusive" if self.exclusive else "avg_inclusive")
            self.x = x
            self.out = _cudnn_pool(self.cudnn, x, self.kernel, self.stride, self.pads, oh, ow, self.mode)
            return self.out
        (sh, sw) = self.stride
        self.compiled = _compiled_2d(x, self.kernel, self.stride, self.pads, oh, ow) if sh > 1 and sw > 1 else None
        if self.compiled is not None:
            # strided windows: one compiled pass (at stride 1 the kh*kw passes over
            # contiguous slices below measured faster)
            n, c, h, w = x.shape
            y = np.empty((n, c, oh, ow), x.dtype)
            _pool_kernels().avg2d(np.ascontiguousarray(x).reshape(n * c, h, w), y.reshape(n * c, oh, ow),
                                  self.compiled, int(self.exclusive), float(self.divisor or 0))
            self.geom = (x.shape, None, x.dtype)
            return y
        xpad = _pad_input(x, self.pads, 0.0, extra, to_chwn=False)
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
        if self.cudnn is not None:
            return _cudnn_pool_backward(self, g)
        if self.compiled is not None:
            (n, c, h, w), _, dtype = self.geom
            oh, ow = g.shape[2:]
            gx = np.zeros((n * c, h, w), dtype)
            _pool_kernels().avg2d_adjoint(np.ascontiguousarray(g, dtype=dtype).reshape(n * c, oh, ow), gx,
                                          self.compiled, int(self.exclusive), float(self.divisor or 0))
            return gx.reshape(n, c, h, w)
        xp = backend.get_array_module(g)
        (kh, kw), (sh, sw), (pt, _, pl, _) = self.kernel, self.stride, self.pads
        shape, pshape, dtype = self.geom
        n, c, h, w = shape
        oh, ow = g.shape[2:]
        he, we = sh * (oh - 1) + 1, sw * (ow - 1) + 1
        gd = g / self.div
        gx = _alloc(xp, n, c, pshape[2], pshape[3], dtype)
        for i in range(kh):
            for j in range(kw):
                gx[:, :, i:i + he:sh, j:j + we:sw] += gd
        return gx[:, :, pt:pt + h, pl:pl + w]

    backward_graph = linear_backward_graph  # linear: apply_linear is forward itself


# -- N-d pooling (3-D) ------------------------------------------------------------------------
def pool_out_sizes(spatial, k, s, pads, ceil_mode):
    out = []
    for i in range(len(k)):
        n = spatial[i] + pads[2 * i] + pads[2 * i + 1] - k[i]
        o = (-(-n // s[i]) if ceil_mode else n // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= spatial[i] + pads[2 * i]:
            o -= 1   # the last window must start inside the input or its leading padding
        out.append(o)
    return tuple(out)


def _pool_pads(spatial, k, s, pads, o):
    """``pads`` with the trailing side grown so that every window of ``o`` fits (ceil_mode)."""
    p = list(pads)
    for i in range(len(k)):
        need = (o[i] - 1) * s[i] + k[i] - (spatial[i] + p[2 * i] + p[2 * i + 1])
        if need > 0:
            p[2 * i + 1] += need
    return tuple(p)


@functools.lru_cache(maxsize=256)
def _window_bins(spatial, k, s, pads, o):
    """Per axis the [start, end) of each output's window clipped to the input, and the
    length of the window clipped to the caller's padding (the inclusive mean's count).
    Cached per geometry (the arrays are only read)."""
    bins, incl = [], []
    for i in range(len(k)):
        start = np.arange(o[i]) * s[i] - pads[2 * i]
        end = start + k[i]
        bins.append((np.clip(start, 0, spatial[i]), np.clip(end, 0, spatial[i])))
        incl.append((np.minimum(end, spatial[i] + pads[2 * i + 1]) - np.maximum(start, -pads[2 * i])).astype(float))
    return bins, incl


def _kernel_ok(x):
    return x.ndim <= 5 and K.usable(x)


def _tiled3d(x, k, s, pads, o):
    """Whether a 3-D average pool runs as ``cpu_nn_kernels.pool_bins``: numpy float32 (the kernel
    takes about a second to compile per dtype; float64 keeps the general pass), disjoint
    windows (stride = kernel), no padding, and the output the floor division (no ceil-mode
    window past the end)."""
    return (x.ndim == 5 and type(x) is np.ndarray and x.dtype == np.float32 and tuple(k) == tuple(s)
            and not any(pads) and all(m == n // kk for m, n, kk in zip(o, x.shape[2:], k)))


def _max3d_ok(x, k, pads):
    """Whether a max pool runs as ``pool_kernels.max3d``: a 5-D numpy float32/float64 input and
    no window wholly inside the leading padding (``pool_out_sizes`` keeps the last window's
    start inside the input or its leading padding, so every window then holds an input
    element)."""
    return x.ndim == 5 and K.usable(x) and all(kk > pads[2 * i] for i, kk in enumerate(k))


def _bins3(bins):
    """Per-axis (starts, ends) of 1 to 3 axes as ``pool_kernels.max3d``'s [3, 2, O] int64
    array, leading axes of length 1 given the bin [0, 1)."""
    lead = 3 - len(bins)
    size = max([len(b[0]) for b in bins] + [1])
    bb = np.zeros((3, 2, size), np.int64)
    bb[:lead, 1, 0] = 1
    for ax, (st, en) in enumerate(bins):
        bb[lead + ax, 0, :len(st)], bb[lead + ax, 1, :len(en)] = st, en
    return bb


@functools.lru_cache(maxsize=256)
def _strided_bins(spatial, k, s, pads, o):
    """``max3d``'s bins for windows ``k`` at stride ``s`` with padding, clipped to the input."""
    return _bins3(_window_bins(spatial, k, s, pads, o)[0])


def _max3d_run(x, bins, o):
    """``pool_kernels.max3d`` on [N, C, *S] ``x`` (1 to 3 spatial axes, numpy float32/float64)
    into [N, C, *o]: the output and each maximum's flat index in its plane (int32)."""
    n, c = x.shape[:2]
    lead = (1,) * (5 - x.ndim)
    o = tuple(o)
    y = np.empty((n, c) + o, x.dtype)
    idx = np.empty((n, c) + o, np.int32)
    _pool_kernels().max3d(np.ascontiguousarray(x).reshape((n * c,) + lead + x.shape[2:]),
                          y.reshape((n * c,) + lead + o), idx.reshape((n * c,) + lead + o), bins)
    return y, idx


def _max3d_adjoint(g, x_shape, idx, dtype):
    """The input gradient (``dtype``) of ``_max3d_run``: each output's gradient added at its
    maximum."""
    planes, n_in = x_shape[0] * x_shape[1], math.prod(x_shape[2:])
    gx = np.zeros((planes, n_in), dtype)
    _pool_kernels().max2d_adjoint(np.ascontiguousarray(g, dtype=dtype).reshape(planes, -1),
                                  idx.reshape(planes, -1), gx)
    return gx.reshape(x_shape)


def _nn_kernels():
    from ...tensor import cpu_nn_kernels  # noqa: PLC0415 - imports numba on the first numpy call
    return cpu_nn_kernels


@functools.lru_cache(maxsize=256)
def _tiled_boxes(k, o):
    """``pool_bins``' per-axis [2, O] start/end rows of disjoint windows of size ``k``."""
    return tuple(np.stack([np.arange(m) * kk, np.arange(m) * kk + kk]).astype(np.int64) for kk, m in zip(k, o))


def _boxes_run(x, boxes, o, scale):
    """``pool_bins``' forward, the box sums times ``scale``, of [N, C, *S] ``x`` (1 to 3
    spatial axes; ``boxes`` for 3): the output [N, C, *o]."""
    n, c = x.shape[:2]
    lead = (1,) * (5 - x.ndim)
    xv = np.ascontiguousarray(x).reshape((n * c,) + lead + x.shape[2:])
    out = np.empty((n * c,) + lead + tuple(o), x.dtype)
    _nn_kernels().pool_bins(xv, out, *boxes, 1, x.dtype.type(scale))
    return out.reshape((n, c) + tuple(o))


def _boxes_adjoint(g, x_shape, boxes, scale):
    """``pool_bins``' adjoint: the input gradient [N, C, *S] for the output gradient ``g``,
    each spread over its box times ``scale``."""
    n, c = x_shape[:2]
    lead = (1,) * (5 - len(x_shape))
    gx = np.empty(x_shape, g.dtype)
    gv = np.ascontiguousarray(g).reshape((n * c,) + lead + g.shape[2:])
    _nn_kernels().pool_bins(gx.reshape((n * c,) + lead + x_shape[2:]), gv, *boxes, 2, g.dtype.type(scale))
    return gx


class MaxPoolNd(Function):
    save_inputs = False

    def __init__(self, kernel, stride, pads, ceil_mode):
        self.k, self.s, self.pads, self.ceil = tuple(kernel), tuple(stride), tuple(pads), ceil_mode

    def forward(self, x):
        xp = backend.get_array_module(x)
        sp = x.shape[2:]
        o = pool_out_sizes(sp, self.k, self.s, self.pads, self.ceil)
        if min(o) <= 0:
            raise ValueError(f"ddg.max_pool3d: the output would be empty: input {list(x.shape)}, kernel {list(self.k)}")
        self.dtype = x.dtype
        self.compiled = _max3d_ok(x, self.k, self.pads)
        if self.compiled:   # one pass, the windows clipped to the input (padding never wins)
            y, self.idx = _max3d_run(x, _strided_bins(tuple(sp), self.k, self.s, self.pads, tuple(o)), o)
            self.meta = (x.shape, o, None)
            return y
        pads = _pool_pads(sp, self.k, self.s, self.pads, o)
        fill = -np.inf if x.dtype.kind in "fV" else np.iinfo(x.dtype).min   # V: bfloat16
        win = _windows(_pad(x, pads, fill), self.k, self.s, (1,) * len(self.k), o)
        win = win.reshape(x.shape[:2] + o + (-1,))
        self.idx = win.argmax(-1)
        self.meta = (x.shape, o, pads)
        return xp.ascontiguousarray(xp.take_along_axis(win, self.idx[..., None], -1)[..., 0])

    def backward(self, g):
        xp = backend.get_array_module(g)
        xs, o, pads = self.meta
        if self.compiled:   # each gradient added at its maximum
            return _max3d_adjoint(g, xs, self.idx, self.dtype)
        kk = int(np.prod(self.k))
        gw = (xp.arange(kk) == self.idx[..., None]) * g[..., None]
        gw = gw.astype(g.dtype).reshape(g.shape + self.k)
        padded = tuple(xs[2 + i] + pads[2 * i] + pads[2 * i + 1] for i in range(len(o)))
        return xp.ascontiguousarray(_crop(_scatter(gw, padded, self.k, self.s, (1,) * len(o), o), pads, xs[2:]))

    def mask(self):
        """Paddle's mask: each maximum's flat index into the input's spatial dims (int32)."""
        xp = backend.get_array_module(self.idx)
        xs, o, pads = self.meta
        if self.compiled:
            return self.idx.astype("int32")
        nd = len(o)
        offs = xp.unravel_index(self.idx, self.k) if hasattr(xp, "unravel_index") else None
        flat = 0
        for i in range(nd):
            shape = [1] * (2 + nd)
            shape[2 + i] = o[i]
            pos = xp.arange(o[i]).reshape(shape) * self.s[i] - self.pads[2 * i] + offs[i]
            flat = flat * xs[2 + i] + pos
        return flat.astype("int32")


class AvgPoolNd(Function):
    save_inputs = False

    def __init__(self, kernel, stride, pads, ceil_mode, exclusive, divisor_override):
        self.k, self.s, self.pads, self.ceil = tuple(kernel), tuple(stride), tuple(pads), ceil_mode
        self.exclusive, self.divisor = exclusive, divisor_override

    def forward(self, x):
        xp = backend.get_array_module(x)
        sp = x.shape[2:]
        o = pool_out_sizes(sp, self.k, self.s, self.pads, self.ceil)
        if min(o) <= 0:
            raise ValueError(f"ddg.avg_pool3d: the output would be empty: input {list(x.shape)}, kernel {list(self.k)}")
        self.tiled = _tiled3d(x, self.k, self.s, self.pads, o)
        if self.tiled:      # disjoint full windows: one divisor
            self.scale = 1.0 / (self.divisor or math.prod(self.k))
            self.boxes = _tiled_boxes(self.k, tuple(o))
            y = _boxes_run(x, self.boxes, o, self.scale)
            self.meta = (x.shape, o, None)
            return y
        self.compiled = _kernel_ok(x)
        if self.compiled:   # one pass; the divisor per axis, or the override
            bins, incl = _window_bins(tuple(sp), self.k, self.s, self.pads, tuple(o))
            cnt = [e - b for b, e in bins] if self.exclusive else incl
            self.div = self.divisor or 0
            y, self.state = K.pool_forward(x, bins, cnt, self.div)
            self.meta = (x.shape, o, None)
            return y
        pads = _pool_pads(sp, self.k, self.s, self.pads, o)
        one = (1,) * len(o)
        total = _windows(_pad(x, pads), self.k, self.s, one, o).sum(axis=tuple(range(-len(o), 0)))
        if self.divisor:
            count = xp.asarray(float(self.divisor), dtype=x.dtype)
        elif self.exclusive:
            ones = xp.ones((1, 1) + tuple(sp), dtype=x.dtype)
            count = _windows(_pad(ones, pads), self.k, self.s, one, o).sum(axis=tuple(range(-len(o), 0)))
        else:
            # padding the caller asked for counts; the extra trailing padding of ceil_mode does not
            ones = xp.ones((1, 1) + tuple(s + self.pads[2 * i] + self.pads[2 * i + 1] for i, s in enumerate(sp)),
                           dtype=x.dtype)
            extra = []
            for i in range(len(o)):
                extra += [0, pads[2 * i + 1] - self.pads[2 * i + 1]]
            count = _windows(_pad(ones, extra), self.k, self.s, one, o).sum(axis=tuple(range(-len(o), 0)))
        self.count, self.meta = count, (x.shape, o, pads)
        return (total / count).astype(x.dtype, copy=False)

    def backward(self, g):
        xp = backend.get_array_module(g)
        xs, o, pads = self.meta
        if self.tiled:
            return _boxes_adjoint(g, xs, self.boxes, self.scale)
        if self.compiled:
            return K.pool_backward(g, xs, self.state, self.div)
        gq = (g / self.count).astype(g.dtype, copy=False)
        gw = xp.broadcast_to(gq.reshape(gq.shape + (1,) * len(o)), gq.shape + self.k)
        padded = tuple(xs[2 + i] + pads[2 * i] + pads[2 * i + 1] for i in range(len(o)))
        return xp.ascontiguousarray(_crop(_scatter(gw, padded, self.k, self.s, (1,) * len(o), o), pads, xs[2:]))


@functools.lru_cache(maxsize=256)
def _adaptive_bins(spatial, out):
    """Per axis the (starts, ends) of Paddle's adaptive bins: output i of an axis of length n
    pools [floor(i*n/o), ceil((i+1)*n/o)). Cached per geometry (the arrays are only read)."""
    bins = []
    for n, m in zip(spatial, out):
        i = np.arange(m)
        bins.append(((i * n) // m, -(-((i + 1) * n) // m)))
    return bins


@functools.lru_cache(maxsize=256)
def _adaptive_bins3(spatial, out):
    """``max3d``'s bins for adaptive pooling."""
    return _bins3(_adaptive_bins(spatial, out))


class AdaptiveMaxPool(Function):
    """Adaptive max pooling of [N, C, *S] (1 to 3 spatial axes) to ``out_sizes``: output i of
    an axis of length n pools [floor(i*n/o), ceil((i+1)*n/o)) (Paddle's bins). numpy
    float32/float64 only (the functional layer keeps its composite elsewhere); each output's
    gradient goes to the first maximal element of its bin.

    One compiled pass over the bins (``pool_kernels.max3d``, backward ``max2d_adjoint``),
    except for 1-D pooling whose bins tile the input and are long (32 or more: measured
    faster there, 2.2x at 784 -> 7): the input viewed as [N, C, O, K]
    and numpy's argmax over the last axis; the backward writes each gradient at its maximum
    (the bins are disjoint). (With several axes the view needs a transposing copy, and short
    bins cost numpy a call per bin: the compiled pass is faster there.)"""
    save_inputs = False

    def __init__(self, out_sizes):
        self.out_sizes = tuple(out_sizes)

    def forward(self, x):
        sp, o = x.shape[2:], self.out_sizes
        self.x_shape, self.dtype = x.shape, x.dtype
        if len(sp) == 1 and sp[0] % o[0] == 0 and sp[0] // o[0] >= 32:
            return self._tiled(x, sp, o)
        y, self.idx = _max3d_run(x, _adaptive_bins3(tuple(sp), o), o)
        self.compiled = True
        return y

    def _tiled(self, x, sp, o):
        nd = len(sp)
        k = tuple(n // m for n, m in zip(sp, o))
        v = np.ascontiguousarray(x).reshape(x.shape[:2] + sum(((m, kk) for m, kk in zip(o, k)), ()))
        perm = (0, 1) + tuple(2 + 2 * i for i in range(nd)) + tuple(3 + 2 * i for i in range(nd))
        w = v.transpose(perm).reshape(x.shape[:2] + o + (-1,))
        arg = w.argmax(-1)
        y = np.take_along_axis(w, arg[..., None], -1)[..., 0]
        flat, inner = 0, int(np.prod(k))
        for i in range(nd):      # the winner's flat index in its input plane
            inner //= k[i]
            shape = [1] * (2 + nd)
            shape[2 + i] = o[i]
            pos = np.arange(o[i]).reshape(shape) * k[i] + (arg // inner) % k[i]
            flat = flat * sp[i] + pos
        self.idx, self.compiled = flat, False
        return y

    def backward(self, g):
        if self.compiled:
            return _max3d_adjoint(g, self.x_shape, self.idx, self.dtype)
        n, c = self.x_shape[:2]
        gx = np.zeros((n, c, int(np.prod(self.x_shape[2:]))), g.dtype)
        np.put_along_axis(gx, self.idx.reshape(n, c, -1), g.reshape(n, c, -1), axis=2)
        return gx.reshape(self.x_shape)

    backward_graph = linear_backward_graph

    def apply_linear(self, u):
        """``u`` read at each bin's maximum (the adjoint of ``backward``)."""
        n, c = u.shape[:2]
        flat = np.ascontiguousarray(u).reshape(n, c, -1)
        return np.take_along_axis(flat, self.idx.reshape(n, c, -1), axis=2).reshape(self.idx.shape)

    def mask(self):
        """Paddle's mask: each maximum's flat index into the input's spatial dims (int32)."""
        return self.idx.astype("int32")


@functools.lru_cache(maxsize=128)
def _avg_matrix(n_in, n_out, dtype):
    """[n_out, n_in]: row i averages Paddle's adaptive bin [floor(i*n/o), ceil((i+1)*n/o))."""
    m = np.zeros((n_out, n_in), dtype=dtype)
    for i in range(n_out):
        a, b = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        m[i, a:b] = 1.0 / (b - a)
    m.flags.writeable = False
    return m


def _along(xp, a, m, axis):
    """``m`` [o, n] applied to axis ``axis`` of ``a`` (one matrix product, no transpose copy)."""
    shape = a.shape
    if axis == a.ndim - 1:
        return xp.matmul(a.reshape(-1, shape[-1]), m.T).reshape(shape[:-1] + (m.shape[0],))
    after = int(np.prod(shape[axis + 1:]))
    out = xp.matmul(m, a.reshape(-1, shape[axis], after))
    return out.reshape(shape[:axis] + (m.shape[0],) + shape[axis + 1:])


@functools.lru_cache(maxsize=64)
def _avg_matrix_full(spatial, out, dtype):
    """[prod(out), prod(spatial)]: the whole pool over the flattened spatial axes (the
    Kronecker product of the per-axis matrices)."""
    m = np.ones((1, 1), dtype=dtype)
    for n, o in zip(spatial, out):
        m = np.kron(m, _avg_matrix(n, o, dtype))
    m.flags.writeable = False
    return m


class AdaptiveAvgPool(Function):
    """Adaptive average pooling of [N, C, *S] (1 to 3 spatial axes) to ``out_sizes``:
    separable, so one small averaging matrix per pooled axis (``_avg_matrix``) applied as a
    matrix product along that axis, the last axis first; backward applies the transposed
    matrices in the reverse order. When one product with the whole pool's matrix (over the
    flattened spatial axes) costs at most 2^22 multiply-adds and that matrix has at most
    2^16 entries it is that product instead: at small sizes each product along an axis
    costs more in calls and batched loops than in arithmetic (8x16x6^3 -> 3^3 forward +
    backward 366 -> 112 us, 8x256x7x7 -> 3x3 694 -> 220 us; with larger matrices or more
    work the per-axis products are faster). One node for the whole pool;
    2-byte floats are computed in float32."""
    _FULL, _FULL_MATRIX = 1 << 22, 1 << 16
    save_inputs = False

    def __init__(self, out_sizes):
        self.out_sizes = tuple(out_sizes)

    def _mats(self, xp, shape, dtype):
        return [(2 + i, xp.asarray(_avg_matrix(n, o, np.dtype(dtype).str)))
                for i, (n, o) in reversed(list(enumerate(zip(shape[2:], self.out_sizes)))) if n != o]

    def _full(self, xp, shape, dtype):
        sp = tuple(shape[2:])
        entries = math.prod(sp) * math.prod(self.out_sizes)
        if entries > self._FULL_MATRIX or shape[0] * shape[1] * entries > self._FULL:
            return None
        return xp.asarray(_avg_matrix_full(sp, self.out_sizes, np.dtype(dtype).str))

    def forward(self, x):
        xp = backend.get_array_module(x)
        self.x_shape, self.dtype = x.shape, x.dtype
        a = upcast(x)
        m = self._full(xp, x.shape, a.dtype)
        if m is not None:
            return xp.matmul(a.reshape(x.shape[0] * x.shape[1], -1), m.T).reshape(x.shape[:2] + self.out_sizes)
        for ax, m in self._mats(xp, x.shape, a.dtype):
            a = _along(xp, a, m, ax)
        return a if a is not x else a.copy()

    def backward(self, g):
        xp = backend.get_array_module(g)
        a = upcast(g)
        m = self._full(xp, self.x_shape, a.dtype)
        if m is not None:
            a = xp.matmul(a.reshape(g.shape[0] * g.shape[1], -1), m).reshape(self.x_shape)
            return a.astype(self.dtype, copy=False)
        for ax, m in reversed(self._mats(xp, self.x_shape, a.dtype)):
            a = _along(xp, a, m.T, ax)
        return a.astype(self.dtype, copy=False) if a is not g else a.copy()

    backward_graph = linear_backward_graph   # linear: apply_linear is forward itself
