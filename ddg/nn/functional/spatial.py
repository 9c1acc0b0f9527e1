"""Ops along the spatial axes of images and sequences: pad, interpolate/upsample, unfold.

pad is the primitive ``ops.nn_ops.Pad`` (slice copies forward, slice adds backward);
interpolate is a composite that gathers along one axis at a time (``index_select``, whose
backward scatter-adds); unfold is the im2col primitive ``ops.conv.Unfold``.
"""
import math

import numpy as np

from ...autograd.ops import conv as C
from ...autograd.ops import elementwise as E
from ...autograd.ops import movement as M
from ...autograd.ops import nn_ops as NN
from ...autograd.ops.resample import Resample2D
from ...tensor import backend
from ...tensor.tensor import Tensor
from .conv import _ntuple


def _const_like(arr, x):
    """A constant (no-grad) Tensor on the device of ``x`` from host array ``arr``."""
    xp = backend.get_array_module(x._data)
    return Tensor._wrap(xp.asarray(arr))


# -- pad -------------------------------------------------------------------------------------------------
def _check_pads(mode, shape, pairs):
    for ax, (before, after) in pairs.items():
        n = shape[ax]
        if mode == "reflect" and (before >= n or after >= n):
            raise ValueError(f"ddg.nn.functional.pad: reflect padding ({before}, {after}) must be smaller than the "
                             f"padded dimension ({n})")
        if mode == "circular" and (before > n or after > n):
            raise ValueError(f"ddg.nn.functional.pad: circular padding ({before}, {after}) must not exceed the "
                             f"padded dimension ({n})")
        if mode == "replicate" and n == 0 and (before or after):
            raise ValueError(f"ddg.nn.functional.pad: replicate padding of an empty dimension (shape {shape})")


def pad(x, pad, mode="constant", value=0.0, data_format=None, name=None):  # noqa: A002
    """Pad ``x``. With ``len(pad) == 2 * x.ndim`` (constant mode) ``pad`` lists
    ``[before, after]`` for every dim from the first; otherwise it pads the spatial dims
    starting from the LAST one: ``[left, right]`` (3-D), ``[left, right, top, bottom]``
    (4-D), ``[left, right, top, bottom, front, back]`` (5-D)."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"ddg.nn.functional.pad: mode must be constant, reflect, replicate or circular, "
                         f"got {mode!r}")
    if isinstance(pad, Tensor):
        pad = pad.tolist()
    pad = [int(p) for p in ([pad] if isinstance(pad, int) else pad)]
    if any(p < 0 for p in pad):
        raise ValueError(f"ddg.nn.functional.pad: pads must be non-negative, got {pad}")
    nd = x.ndim
    if len(pad) == 2 * nd and (mode == "constant" or nd < 3):
        pairs = {ax: (pad[2 * ax], pad[2 * ax + 1]) for ax in range(nd)}
    else:
        if nd < 3:
            raise ValueError(f"ddg.nn.functional.pad: {mode} padding needs a 3-D to 5-D input, got shape {x.shape}")
        # None (Paddle 3's default): channels first, whatever the rank
        channel_last = data_format is not None and data_format.upper()[-1] == "C" and data_format.upper() != "NC"
        spatial = list(range(1, nd - 1)) if channel_last else list(range(2, nd))
        if len(pad) == 1:
            pad = pad * (2 * len(spatial))
        if len(pad) != 2 * len(spatial):
            layout = data_format or "channels-first"
            raise ValueError(f"ddg.nn.functional.pad: expected {2 * len(spatial)} pads for a {nd}-D {layout} "
                             f"input (or {2 * nd} in constant mode), got {pad}")
        pairs = {}
        for k, ax in enumerate(reversed(spatial)):  # pad[0:2] is the last spatial dim
            pairs[ax] = (pad[2 * k], pad[2 * k + 1])
    _check_pads(mode, x.shape, pairs)
    if not any(b or a for b, a in pairs.values()):
        return x
    return NN.pad(x, [pairs.get(ax, (0, 0)) for ax in range(nd)], mode, value)


# -- interpolate ---------------------------------------------------------------------------------------
_MODES = {"nearest": None, "linear": 3, "bilinear": 4, "trilinear": 5, "area": None}


def _along(w, ndim, axis, x):
    shape = [1] * ndim
    shape[axis] = -1
    return _const_like(w.astype(x.dtype).reshape(shape), x)


def _taps(n_in, n_out, mode, align_corners, align_mode, scale):
    """The source indices and weights of each output index along one axis: ``(i0, i1, f,
    rep)``, output k = ``(1 - f[k]) x[i0[k]] + f[k] x[i1[k]]`` (nearest: i1 = i0, f = 0), and
    ``rep`` the factor when that is an integer nearest upscale (each input repeated), else
    None. Paddle's index conventions (see ``interpolate``)."""
    k = np.arange(n_out, dtype=np.float64)
    if align_corners:
        ratio = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        ratio = 1.0 / scale if scale else n_in / n_out
    if mode == "nearest":
        src = np.floor(ratio * k + 0.5) if align_corners else np.floor(ratio * k)
        idx = np.clip(src, 0, n_in - 1).astype(np.int64)
        rep = n_out // n_in
        rep = rep if n_out == rep * n_in and np.array_equal(idx, np.arange(n_out) // rep) else None
        return idx, idx, np.zeros(n_out), rep
    if n_out == n_in and (align_corners or align_mode == 0):
        idx = np.arange(n_in, dtype=np.int64)
        return idx, idx, np.zeros(n_out), 1
    if align_corners or align_mode == 1:
        src = ratio * k
    else:
        src = np.maximum(ratio * (k + 0.5) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return i0, i1, src - i0, None


def _resample_axis(x, axis, taps):
    i0, i1, w1, rep = taps
    if rep == 1:
        return x
    if rep is not None:
        # an integer upscale: each element repeated ``rep`` times, a broadcast view copied
        # once (backward: strided slices added), not a gather and its scatter-add
        return M.RepeatEach(axis, rep)(x)
    if not w1.any():
        return M.index_select(x, _const_like(i0, x), axis)
    lo = M.index_select(x, _const_like(i0, x), axis)
    hi = M.index_select(x, _const_like(i1, x), axis)
    return lo * _along(1.0 - w1, x.ndim, axis, x) + hi * _along(w1, x.ndim, axis, x)


def _resample_cpu(x, axes, taps, channel_last):
    """One ``Resample2D`` op for the (one or two) spatial axes of a numpy input."""
    shape = list(x.shape)
    n = shape[0]
    if len(axes) == 1:
        taps = [(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1), 1)] + list(taps)
        sp_in = [1, shape[axes[0]]]
    else:
        sp_in = [shape[a] for a in axes]
    sp_out = [len(t[0]) for t in taps]
    c = shape[-1] if channel_last else shape[1]
    a_, b_ = (n, c) if channel_last else (n * c, 1)
    out_shape = list(shape)
    for ax, t in zip(axes, taps[-len(axes):]):
        out_shape[ax] = len(t[0])
    if b_ == 1 and all(t[3] is not None for t in taps):
        return Resample2D([a_] + sp_in + [b_], [a_] + sp_out + [b_], out_shape,
                          reps=(taps[0][3], taps[1][3]))(x)
    flat = (taps[0][0], taps[0][1], taps[0][2], taps[1][0], taps[1][1], taps[1][2])   # also nearest: f = 0
    return Resample2D([a_] + sp_in + [b_], [a_] + sp_out + [b_], out_shape, taps=flat)(x)


def interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=False, align_mode=0,
                data_format=None, name=None):
    """Resize the spatial dims: ``nearest``, ``linear`` (3-D), ``bilinear`` (4-D),
    ``trilinear`` (5-D) or ``area`` (adaptive average pooling). Index conventions follow
    Paddle: ``align_corners`` maps corner to corner; otherwise ``align_mode=0`` uses
    half-pixel centers and ``align_mode=1`` the ratio ``in/out`` from 0."""
    mode = mode.lower()
    if mode not in _MODES:
        raise ValueError(f"ddg.nn.functional.interpolate: mode must be one of {sorted(_MODES)}, got {mode!r}")
    if _MODES[mode] is not None and x.ndim != _MODES[mode]:
        raise ValueError(f"ddg.nn.functional.interpolate: mode {mode!r} needs a {_MODES[mode]}-D input, "
                         f"got shape {x.shape}")
    if x.ndim not in (3, 4, 5):
        raise ValueError(f"ddg.nn.functional.interpolate: expected a 3-D to 5-D input, got shape {x.shape}")
    if mode == "nearest" and align_corners:
        raise ValueError("ddg.nn.functional.interpolate: align_corners=True is not allowed with mode 'nearest'")
    nd = x.ndim - 2
    channel_last = data_format is not None and data_format.upper()[-1] == "C"  # None: channels first
    axes = list(range(1, 1 + nd)) if channel_last else list(range(2, 2 + nd))
    in_sizes = [x.shape[a] for a in axes]
    if (size is None) == (scale_factor is None):
        raise ValueError("ddg.nn.functional.interpolate: give exactly one of size and scale_factor")
    scales = [None] * nd
    if size is not None:
        if isinstance(size, Tensor):
            size = size.tolist()
        sizes = [int(s) for s in size] if isinstance(size, (list, tuple)) else [int(size)] * nd
        if len(sizes) != nd:
            raise ValueError(f"ddg.nn.functional.interpolate: size must have {nd} entries, got {size!r}")
    else:
        if isinstance(scale_factor, Tensor):
            scale_factor = scale_factor.tolist()
        scales = [float(s) for s in scale_factor] if isinstance(scale_factor, (list, tuple)) \
            else [float(scale_factor)] * nd
        if len(scales) != nd or any(s <= 0 for s in scales):
            raise ValueError(f"ddg.nn.functional.interpolate: scale_factor must be positive with {nd} entries, "
                             f"got {scale_factor!r}")
        sizes = [int(math.floor(n * s)) for n, s in zip(in_sizes, scales)]
    if any(s <= 0 for s in sizes):
        raise ValueError(f"ddg.nn.functional.interpolate: output size {sizes} must be positive")
    if mode == "area":
        from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d
        if nd == 3:
            raise NotImplementedError("ddg.nn.functional.interpolate: 'area' mode supports 3-D and 4-D inputs")
        xc = M.moveaxis(x, -1, 1) if channel_last else x
        y = adaptive_avg_pool2d(xc, sizes) if nd == 2 else adaptive_avg_pool1d(xc, sizes[0])
        return M.moveaxis(y, 1, -1) if channel_last else y
    kind = "nearest" if mode == "nearest" else "linear"
    taps = [_taps(x.shape[ax], n_out, kind, align_corners, align_mode, s) for ax, n_out, s in zip(axes, sizes, scales)]
    if all(t[3] == 1 for t in taps):
        return x
    if nd <= 2 and type(x._data) is np.ndarray and x._data.dtype in (np.float32, np.float64):
        return _resample_cpu(x, axes, taps, channel_last)
    out = x
    for ax, t in zip(axes, taps):
        out = _resample_axis(out, ax, t)
    return out


def upsample(x, size=None, scale_factor=None, mode="nearest", align_corners=False, align_mode=0,
             data_format=None, name=None):
    return interpolate(x, size, scale_factor, mode, align_corners, align_mode, data_format)


# -- unfold -------------------------------------------------------------------------------------------
def block_args(kernel_sizes, strides, paddings, dilations, op):
    """``(kernel, stride, pads, dilation)`` of unfold/fold: ``pads`` = (top, bottom, left,
    right) from an int, ``[ph, pw]`` or ``[top, left, bottom, right]`` (Paddle's order)."""
    k = _ntuple(kernel_sizes, 2, "kernel_sizes", op)
    s = _ntuple(strides, 2, "strides", op)
    d = _ntuple(dilations, 2, "dilations", op)
    if isinstance(paddings, int):
        pads = (paddings,) * 4
    else:
        pl = [int(v) for v in paddings]
        if len(pl) == 2:
            pads = (pl[0], pl[0], pl[1], pl[1])
        elif len(pl) == 4:
            pads = (pl[0], pl[2], pl[1], pl[3])
        else:
            raise ValueError(f"ddg.nn.functional.{op}: paddings must be an int, 2 or 4 ints, got {paddings!r}")
    if any(p < 0 for p in pads):
        raise ValueError(f"ddg.nn.functional.{op}: paddings must be non-negative, got {paddings!r}")
    return k, s, pads, d


def unfold(x, kernel_sizes, strides=1, paddings=0, dilations=1, name=None):
    """im2col: ``[N, C, H, W]`` -> ``[N, C*kh*kw, L]`` (L sliding positions). ``paddings``
    is an int, ``[ph, pw]`` or ``[top, left, bottom, right]`` (Paddle's order)."""
    if x.ndim != 4:
        raise ValueError(f"ddg.nn.functional.unfold: expected a 4-D input, got shape {x.shape}")
    k, s, pads, d = block_args(kernel_sizes, strides, paddings, dilations, "unfold")
    return C.Unfold(k, s, pads, d)(x)


def pixel_shuffle(x, upscale_factor, data_format="NCHW", name=None):
    """``[N, C*r*r, H, W]`` -> ``[N, C, H*r, W*r]`` (or the NHWC equivalent)."""
    r = int(upscale_factor)
    if x.ndim != 4 or data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"ddg.nn.functional.pixel_shuffle: needs a 4-D input and data_format NCHW or NHWC, got "
                         f"shape {x.shape} and {data_format!r}")
    if data_format == "NHWC":
        x = M.transpose(x, [0, 3, 1, 2])
    n, c, h, w = x.shape
    if c % (r * r):
        raise ValueError(f"ddg.nn.functional.pixel_shuffle: {c} channels are not divisible by "
                         f"upscale_factor**2 = {r * r}")
    y = M.reshape(x, [n, c // (r * r), r, r, h, w])
    y = M.reshape(M.transpose(y, [0, 1, 4, 2, 5, 3]), [n, c // (r * r), h * r, w * r])
    return M.transpose(y, [0, 2, 3, 1]) if data_format == "NHWC" else y


def zeropad2d(x, padding, data_format="NCHW", name=None):
    """Zero padding of the two spatial axes; ``padding`` is [left, right, top, bottom] or an int."""
    if isinstance(padding, int):
        padding = [padding] * 4
    return pad(x, list(padding), "constant", 0.0, data_format)


def affine_grid(theta, out_shape, align_corners=True, name=None):
    """Sampling grid ``[N, H, W, 2]`` (x, y in [-1, 1]) of the affine maps ``theta``
    ``[N, 2, 3]`` applied to the output pixels' coordinates."""
    if isinstance(out_shape, Tensor):
        out_shape = out_shape.tolist()
    out_shape = [int(s) for s in out_shape]
    if len(out_shape) != 4 or theta.ndim != 3 or theta.shape[1:] != [2, 3]:
        raise ValueError(f"ddg.nn.functional.affine_grid: needs theta [N, 2, 3] and a 4-D out_shape, got "
                         f"{theta.shape} and {out_shape}")
    n, _, h, w = out_shape

    def coords(k):
        if align_corners:
            return np.linspace(-1.0, 1.0, k) if k > 1 else np.zeros(1)
        return (np.arange(k) * 2.0 + 1.0) / k - 1.0
    gy, gx = np.meshgrid(coords(h), coords(w), indexing="ij")
    base = np.stack([gx.ravel(), gy.ravel(), np.ones(h * w)], axis=1).astype(theta.dtype)
    xp = backend.get_array_module(theta._data)
    base_t = Tensor._wrap(xp.asarray(base))
    grid = M.reshape(base_t, [1, h * w, 3]) @ M.transpose(theta, [0, 2, 1])
    return M.reshape(grid, [theta.shape[0], h, w, 2])


def _unnormalize(g, size, align_corners):
    if align_corners:
        return (g + 1) * ((size - 1) / 2)
    return ((g + 1) * size - 1) / 2


def _reflect(c, lo, hi):
    """Fold coordinates ``c`` into [lo, hi] by reflecting at the ends."""
    span = hi - lo
    if span <= 0:
        return c * 0.0
    d = E.abs(c - lo)
    flips = E.floor(d / span)
    extra = d - flips * span
    even = E.remainder(flips, 2.0) == 0.0
    return E.where(even, extra + lo, (span - extra) + lo)


def grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True, name=None):
    """Sample ``x`` ``[N, C, H, W]`` at ``grid`` ``[N, Ho, Wo, 2]`` (x, y in [-1, 1]);
    bilinear or nearest, with zeros, border or reflection padding; differentiable in
    both ``x`` and ``grid``."""
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"ddg.nn.functional.grid_sample: mode must be 'bilinear' or 'nearest', got {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"ddg.nn.functional.grid_sample: padding_mode must be zeros, border or reflection, "
                         f"got {padding_mode!r}")
    if x.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != x.shape[0]:
        raise ValueError(f"ddg.nn.functional.grid_sample: needs x [N, C, H, W] and grid [N, Ho, Wo, 2], got "
                         f"{x.shape} and {grid.shape}")
    n, c, h, w = x.shape
    ix = _unnormalize(grid[..., 0], w, align_corners)
    iy = _unnormalize(grid[..., 1], h, align_corners)
    if padding_mode == "border":
        ix, iy = E.clip(ix, 0.0, w - 1.0), E.clip(iy, 0.0, h - 1.0)
    elif padding_mode == "reflection":
        if align_corners:
            ix, iy = _reflect(ix, 0.0, w - 1.0), _reflect(iy, 0.0, h - 1.0)
        else:
            ix, iy = _reflect(ix, -0.5, w - 0.5), _reflect(iy, -0.5, h - 0.5)
        ix, iy = E.clip(ix, 0.0, w - 1.0), E.clip(iy, 0.0, h - 1.0)
    xp = backend.get_array_module(x._data)
    xt = M.transpose(x, [0, 2, 3, 1])  # [N, H, W, C]: gathered rows come out as [N, Ho, Wo, C]
    batch = Tensor._wrap(xp.broadcast_to(xp.arange(n, dtype=np.int64)[:, None, None], ix.shape))

    def tap(xc, yc, weight):
        valid = (xc >= 0.0) & (xc <= w - 1.0) & (yc >= 0.0) & (yc <= h - 1.0)
        xi = E.cast(E.clip(xc, 0.0, w - 1.0), "int64")
        yi = E.cast(E.clip(yc, 0.0, h - 1.0), "int64")
        vals = M.getitem(xt, (batch, yi, xi))
        return vals * M.unsqueeze(weight * E.cast(valid, x.dtype), -1)

    if mode == "nearest":
        out = tap(E.round(ix), E.round(iy), E.cast(ix == ix, x.dtype))
    else:
        x0, y0 = E.floor(ix), E.floor(iy)
        wx1, wy1 = ix - x0, iy - y0
        wx0, wy0 = 1 - wx1, 1 - wy1
        out = (tap(x0, y0, wx0 * wy0) + tap(x0 + 1, y0, wx1 * wy0)
               + tap(x0, y0 + 1, wx0 * wy1) + tap(x0 + 1, y0 + 1, wx1 * wy1))
    return M.transpose(out, [0, 3, 1, 2])
