"""Shape composites: transposes of matrices, ``unstack``, ``repeat_interleave``,
``atleast_*d``, ``unflatten``, views, splits, flips and rotations, ``crop``, sliding
windows (``unfold``) and ``as_strided``."""
import builtins as _b

import numpy as np

from ...tensor import backend
from ...tensor.dtypes import convert_dtype
from ...tensor.tensor import Tensor
from ..axes import normalize_axis
from ..ops import movement as M
from ._common import _const, _nograd
from .indexing import slice


def t(input, name=None):  # noqa: A002
    if input.ndim > 2:
        raise ValueError(f"ddg.t: needs a tensor with at most 2 dimensions, got shape {input.shape}")
    if input.ndim < 2:
        return input
    return M.transpose(input, [1, 0])


def unstack(x, axis=0, num=None):
    """The slices of ``x`` along ``axis``, as a list (``num``, if given, must match)."""
    parts = M.unbind(x, axis)
    if num is not None and int(num) != len(parts):
        raise ValueError(f"ddg.unstack: num={num} but axis {axis} of shape {x.shape} has {len(parts)} slices")
    return parts


def repeat_interleave(x, repeats, axis=None, name=None):
    """Each element (slice along ``axis``; of the flattened ``x`` when None) repeated
    ``repeats`` times (an int, or one count per element)."""
    if axis is None:
        x, axis = M.reshape(x, [-1]), 0
    ax = normalize_axis(axis, x._data.ndim, "repeat_interleave")
    n = x._data.shape[ax]
    counts = backend.to_host(repeats._data) if isinstance(repeats, Tensor) else repeats
    counts = np.broadcast_to(np.asarray(counts, dtype=np.int64), (n,))
    if (counts < 0).any():
        raise ValueError("ddg.repeat_interleave: repeats must be >= 0")
    xp = backend.get_array_module(x._data)
    idx = xp.asarray(np.repeat(np.arange(n, dtype=np.int64), counts))
    return M.index_select(x, Tensor._wrap(idx), ax)


def _atleast(n, inputs):
    out = []
    for x in inputs:
        if not isinstance(x, Tensor):
            from ...tensor.creation import to_tensor
            x = to_tensor(x)
        if x.ndim < n:
            if n == 3 and x.ndim == 2:
                x = M.unsqueeze(x, -1)
            elif n == 3 and x.ndim == 1:
                x = M.reshape(x, [1, -1, 1])
            else:
                x = M.reshape(x, [1] * (n - x.ndim) + x.shape)
        out.append(x)
    return out[0] if len(out) == 1 else out


def atleast_1d(*inputs, name=None):
    return _atleast(1, inputs)


def atleast_2d(*inputs, name=None):
    return _atleast(2, inputs)


def atleast_3d(*inputs, name=None):
    return _atleast(3, inputs)


def broadcast_shape(x_shape, y_shape):
    try:
        return list(np.broadcast_shapes(tuple(x_shape), tuple(y_shape)))
    except ValueError:
        raise ValueError(f"ddg.broadcast_shape: shapes {list(x_shape)} and {list(y_shape)} do not broadcast") from None


def unflatten(x, axis, shape, name=None):
    axis = normalize_axis(axis, x.ndim, "unflatten")
    if isinstance(shape, Tensor):
        shape = shape.tolist()
    return M.reshape(x, x.shape[:axis] + list(shape) + x.shape[axis + 1:])


def view(x, shape_or_dtype, name=None):
    """A reshaped tensor, or (given a dtype) the same bytes read as another dtype (no gradient)."""
    if isinstance(shape_or_dtype, (list, tuple, Tensor)):
        return M.reshape(x, shape_or_dtype)
    return _nograd(x._data.view(convert_dtype(shape_or_dtype)))


def view_as(x, other, name=None):
    return M.reshape(x, other.shape)


def vsplit(x, num_or_sections, name=None):
    if x.ndim < 2:
        raise ValueError(f"ddg.vsplit: needs at least 2 dimensions, got shape {x.shape}")
    return M.split(x, num_or_sections, 0)


def reverse(x, axis, name=None):
    return M.flip(x, axis)


def rot90(x, k=1, axes=[0, 1], name=None):  # noqa: B006 - Paddle's default
    a0, a1 = (normalize_axis(a, x.ndim, "rot90") for a in axes)
    if a0 == a1:
        raise ValueError(f"ddg.rot90: the two axes must differ, got {axes}")
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return M.flip(x, [a0, a1])
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return M.transpose(M.flip(x, [a1]), perm)
    return M.flip(M.transpose(x, perm), [a1])


def crop(x, shape=None, offsets=None, name=None):
    """The block of ``shape`` (-1: to the end) starting at ``offsets``."""
    shape = x.shape if shape is None else (shape.tolist() if isinstance(shape, Tensor) else list(shape))
    offsets = [0] * x.ndim if offsets is None else \
        (offsets.tolist() if isinstance(offsets, Tensor) else list(offsets))
    if len(shape) != x.ndim or len(offsets) != x.ndim:
        raise ValueError(f"ddg.crop: shape {shape} and offsets {offsets} need {x.ndim} entries for shape {x.shape}")
    idx = []
    for o, s, n in zip(offsets, shape, x.shape):
        o = int(o)
        e = n if s == -1 else o + int(s)
        if o < 0 or e > n:
            raise ValueError(f"ddg.crop: the block at offsets {offsets} of shape {shape} leaves shape {x.shape}")
        idx.append(_b.slice(o, e))
    return M.getitem(x, tuple(idx))


def unfold(x, axis, size, step, name=None):
    """Windows of ``size`` every ``step`` along ``axis``, as a new last dimension."""
    axis = normalize_axis(axis, x.ndim, "unfold") if x.ndim else 0
    n = x.shape[axis] if x.ndim else 1
    if size > n or size < 0 or step <= 0:
        raise ValueError(f"ddg.unfold: size {size} and step {step} do not fit axis {axis} of shape {x.shape}")
    count = (n - size) // step + 1
    idx = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    g = M.index_select(x, _const(idx, x, "int64"), axis)
    g = M.reshape(g, x.shape[:axis] + [count, size] + x.shape[axis + 1:])
    return M.moveaxis(g, axis + 1, -1)


def as_strided(x, shape, stride, offset=0, name=None):
    """Elements of ``x``'s flattened (row-major) data at ``offset + sum(i_k * stride_k)``."""
    shape, stride = list(shape), list(stride)
    if len(shape) != len(stride):
        raise ValueError(f"ddg.as_strided: shape {shape} and stride {stride} differ in length")
    flat = np.full(shape, offset, dtype=np.int64)
    for k, (n, s) in enumerate(zip(shape, stride)):
        r = [1] * len(shape)
        r[k] = n
        flat = flat + np.arange(n).reshape(r) * s
    if flat.size and (flat.min() < 0 or flat.max() >= x.size):
        raise ValueError(f"ddg.as_strided: shape {shape}, stride {stride}, offset {offset} reach outside "
                         f"the {x.size} elements of a tensor of shape {x.shape}")
    return M.reshape(M.gather(M.flatten(x), _const(flat.reshape(-1), x, "int64")), shape)


def tensor_split(x, num_or_indices, axis=0, name=None):
    """Split ``x`` along ``axis`` into ``n`` nearly equal parts (the first ``size % n``
    one longer) or at the given indices, as numpy's ``array_split``; parts may be empty."""
    axis = normalize_axis(axis.item() if isinstance(axis, Tensor) else axis, x.ndim, "tensor_split")
    size = x.shape[axis]
    if isinstance(num_or_indices, Tensor):
        num_or_indices = num_or_indices.tolist()
    if isinstance(num_or_indices, (int, np.integer)) and not isinstance(num_or_indices, bool):
        n = int(num_or_indices)
        if n <= 0:
            raise ValueError(f"ddg.tensor_split: the number of sections must be positive, got {n}")
        q, r = divmod(size, n)
        bounds = [0]
        for i in range(n):
            bounds.append(bounds[-1] + q + (1 if i < r else 0))
    elif isinstance(num_or_indices, (list, tuple)):
        idx = []
        for i in num_or_indices:
            if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
                raise TypeError(f"ddg.tensor_split: indices must be ints, got {num_or_indices!r}")
            i = int(i)
            idx.append(_b.min(_b.max(i + size if i < 0 else i, 0), size))
        bounds = [0] + idx + [size]
    else:
        raise TypeError(f"ddg.tensor_split: num_or_indices must be an int or a list of ints, got "
                        f"{type(num_or_indices).__name__}")
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        b = _b.max(a, b)
        parts.append(slice(x, [axis], [a], [b]))
    return parts
