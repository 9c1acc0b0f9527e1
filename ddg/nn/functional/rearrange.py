"""Rearrangements of channels, pixels and frames: ``pixel_unshuffle``,
``channel_shuffle``, ``temporal_shift``, ``fold`` (the inverse of ``unfold``), and
``maxout`` (the maximum over groups of channels). Composites of the primitives; ``fold``
is the op ``ops.fold.Fold``."""

from ...autograd.axes import normalize_axis as _ax
from ...autograd.ops import fold as _fold
from ...autograd.ops import movement as M
from ...autograd.ops import reduce as R
from ...tensor.tensor import Tensor
from .common import _xp
from .spatial import block_args

__all__ = ["pixel_unshuffle", "channel_shuffle", "maxout", "temporal_shift", "fold"]


def pixel_unshuffle(x, downscale_factor, data_format="NCHW", name=None):
    """``[N, C, H*r, W*r]`` -> ``[N, C*r*r, H, W]``: the inverse of pixel_shuffle."""
    r = int(downscale_factor)
    if x.ndim != 4 or data_format not in ("NCHW", "NHWC") or r <= 0:
        raise ValueError(f"ddg.nn.functional.pixel_unshuffle: needs a 4-D input, data_format NCHW or NHWC and a "
                         f"positive factor, got shape {x.shape}, {data_format!r}, {downscale_factor}")
    if data_format == "NHWC":
        x = M.transpose(x, [0, 3, 1, 2])
    n, c, h, w = x.shape
    if h % r or w % r:
        raise ValueError(f"ddg.nn.functional.pixel_unshuffle: height {h} and width {w} must be divisible by {r}")
    y = M.reshape(x, [n, c, h // r, r, w // r, r])
    y = M.reshape(M.transpose(y, [0, 1, 3, 5, 2, 4]), [n, c * r * r, h // r, w // r])
    return M.transpose(y, [0, 2, 3, 1]) if data_format == "NHWC" else y


def channel_shuffle(x, groups, data_format="NCHW", name=None):
    if x.ndim != 4 or data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"ddg.nn.functional.channel_shuffle: needs a 4-D input and data_format NCHW or NHWC, "
                         f"got shape {x.shape} and {data_format!r}")
    ca = 1 if data_format == "NCHW" else 3
    c = x.shape[ca]
    if groups <= 0 or c % groups:
        raise ValueError(f"ddg.nn.functional.channel_shuffle: groups={groups} must divide the {c} channels")
    shape = list(x.shape)
    split = shape[:ca] + [groups, c // groups] + shape[ca + 1:]
    perm = list(range(len(split)))
    perm[ca], perm[ca + 1] = perm[ca + 1], perm[ca]
    return M.reshape(M.transpose(M.reshape(x, split), perm), shape)


def maxout(x, groups, axis=1, name=None):
    """The maximum over each run of ``groups`` consecutive channels along ``axis``."""
    axis = _ax(axis, x.ndim, "maxout")
    c = x.shape[axis]
    if groups <= 0 or c % groups:
        raise ValueError(f"ddg.nn.functional.maxout: groups={groups} must divide the {c} channels of shape {x.shape}")
    y = M.reshape(x, x.shape[:axis] + [c // groups, groups] + x.shape[axis + 1:])
    return R.max(y, axis=axis + 1)


def fold(x, output_sizes, kernel_sizes, strides=1, paddings=0, dilations=1, name=None):
    """Sum sliding blocks ``[N, C*kh*kw, L]`` back into ``[N, C, H, W]``: the adjoint of
    ``unfold``, one op (``ops.fold.Fold``)."""
    if x.ndim != 3:
        raise ValueError(f"ddg.nn.functional.fold: x must be [N, C*kh*kw, L], got shape {x.shape}")
    k, s, p, d = block_args(kernel_sizes, strides, paddings, dilations, "fold")
    out = [int(v) for v in ((output_sizes,) * 2 if isinstance(output_sizes, int) else output_sizes)]
    kk = k[0] * k[1]
    n, ck, length = x.shape
    if ck % kk:
        raise ValueError(f"ddg.nn.functional.fold: {ck} channels are not a multiple of the kernel's {kk} taps")
    c = ck // kk
    blocks = [(out[i] + p[2 * i] + p[2 * i + 1] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    if blocks[0] * blocks[1] != length:
        raise ValueError(f"ddg.nn.functional.fold: L = {length} blocks, but output {out}, kernel {list(k)}, stride "
                         f"{list(s)}, padding {list(p)} and dilation {list(d)} give {blocks[0]} x {blocks[1]}")
    return _fold.Fold(out, k, s, p, d)(x)


def temporal_shift(x, seg_num, shift_ratio=0.25, name=None, data_format="NCHW"):
    """Shift a fraction of the channels one segment back and forward in time (TSM): ``x`` is
    ``[N*T, C, H, W]`` with ``T = seg_num``."""
    if x.ndim != 4 or data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"ddg.nn.functional.temporal_shift: needs a 4-D NCHW/NHWC input, got shape {x.shape}")
    if data_format == "NHWC":
        x = M.transpose(x, [0, 3, 1, 2])
    nt, c, h, w = x.shape
    if nt % seg_num:
        raise ValueError(f"ddg.nn.functional.temporal_shift: batch {nt} is not a multiple of seg_num={seg_num}")
    t = seg_num
    y = M.reshape(x, [nt // t, t, c, h, w])
    c1 = int(c * shift_ratio)
    c2 = int(c * 2 * shift_ratio)
    zero = Tensor._wrap(_xp(x).zeros((nt // t, 1, 1, h, w), dtype=x._data.dtype))

    def z(ch):
        return M.broadcast_to(zero, [nt // t, 1, ch, h, w])
    prev = M.concat([z(c1), y[:, :-1, :c1]], 1)                # channel block 1 takes the previous frame
    nxt = M.concat([y[:, 1:, c1:c2], z(c2 - c1)], 1)           # block 2 the next frame
    out = M.reshape(M.concat([prev, nxt, y[:, :, c2:]], 2), [nt, c, h, w])
    return M.transpose(out, [0, 2, 3, 1]) if data_format == "NHWC" else out
