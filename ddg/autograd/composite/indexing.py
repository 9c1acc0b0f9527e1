"""Indexing composites: masked fills and scatters, slices, ``gather_nd``/``scatter_nd``,
the ``index_*`` family, ``take``, ``multiplex`` and ``shard_index``."""
import builtins as _b

import numpy as np

from ...tensor import backend
from ...tensor.tensor import Tensor
from ..axes import normalize_axis
from ..ops import elementwise as E
from ..ops import linalg as L
from ..ops import logic as G
from ..ops import movement as M
from ._common import _const, _nograd, _xp


def masked_fill(x, mask, value, name=None):
    return E.where(mask, value, x)


def slice(input, axes, starts, ends):  # noqa: A001,A002 - Paddle's names
    """``input[starts[i]:ends[i]]`` along each of ``axes`` (ends clipped to the size)."""
    def ints(v):
        if isinstance(v, Tensor):
            return [int(i) for i in backend.to_host(v._data).reshape(-1)]
        return [int(i.item()) if isinstance(i, Tensor) else int(i) for i in v]
    axes, starts, ends = list(axes), ints(starts), ints(ends)
    if not len(axes) == len(starts) == len(ends):
        raise ValueError(f"ddg.slice: axes, starts and ends differ in length ({len(axes)}, {len(starts)}, {len(ends)})")
    index = [_b.slice(None)] * input._data.ndim
    for a, s, e in zip(axes, starts, ends):
        index[normalize_axis(a, input._data.ndim, "slice")] = _b.slice(s, e)
    return M.getitem(input, tuple(index))


def gather_nd(x, index, name=None):
    """``x[index[..., 0], index[..., 1], ...]``: the last axis of ``index`` addresses the
    leading axes of ``x``; the result has ``index.shape[:-1] + x.shape[k:]``."""
    k = index._data.shape[-1] if index._data.ndim else 0
    if k > x._data.ndim:
        raise ValueError(f"ddg.gather_nd: index addresses {k} axes, x has shape {x.shape}")
    if k == 0:
        return M.broadcast_to(x, list(index._data.shape[:-1]) + x.shape)
    parts = tuple(M.getitem(index, (Ellipsis, i)) for i in range(k))
    return M.getitem(x, parts)


def strided_slice(x, axes, starts, ends, strides, name=None):
    idx = [_b.slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, strides):
        s, e, st = (int(v.item()) if isinstance(v, Tensor) else int(v) for v in (s, e, st))
        idx[normalize_axis(a, x.ndim, "strided_slice")] = _b.slice(s, e, st)
    return M.getitem(x, tuple(idx))


def _axis_mask(x, axis, index, op):
    axis = normalize_axis(axis, x.ndim, op)
    xp = _xp(x)
    idx = index._data if isinstance(index, Tensor) else xp.asarray(index)
    m = xp.zeros(x.shape[axis], dtype=bool)
    m[idx.astype("int64") % x.shape[axis] if idx.size else idx.astype("int64")] = True
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return _nograd(m.reshape(shape)), axis


def select_scatter(x, values, axis, index, name=None):
    """``x`` with the slice ``index`` along ``axis`` replaced by ``values``."""
    mask, axis = _axis_mask(x, axis, [index], "select_scatter")
    return E.where(mask, M.unsqueeze(values, axis), x)


def index_fill(x, index, axis, value, name=None):
    mask, _ = _axis_mask(x, axis, index, "index_fill")
    v = value if isinstance(value, Tensor) else _const(value, x, x._data.dtype)
    return E.where(mask, E.cast(v, x.dtype), x)


def index_add(x, index, axis, value, name=None):
    """``x`` plus ``value`` added at positions ``index`` along ``axis`` (repeats add up)."""
    axis = normalize_axis(axis, x.ndim, "index_add")
    idx = np.asarray(backend.to_host(index._data) if isinstance(index, Tensor) else index).reshape(-1)
    n = x.shape[axis]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise ValueError(f"ddg.index_add: index out of range for axis {axis} of shape {x.shape}")
    onehot = np.zeros((len(idx), n))
    onehot[np.arange(len(idx)), idx % n] = 1
    v = M.moveaxis(value, axis, -1)
    add = L.matmul(v, _const(onehot, x, value._data.dtype))
    return E.add(x, M.moveaxis(add, -1, axis))


def index_put(x, indices, value, accumulate=False, name=None):
    """``x`` with ``value`` written (or added, ``accumulate=True``) at ``x[indices]``."""
    indices = tuple(indices)
    xp = _xp(x)
    if len(indices) == 1 and indices[0].dtype == np.bool_:
        indices = tuple(_nograd(a) for a in xp.nonzero(indices[0]._data))
    idx = M.stack([E.cast(i, "int64") for i in indices], -1)
    pos_shape = idx.shape[:-1]
    tail = x.shape[len(indices):]
    v = value if isinstance(value, Tensor) else _const(value, x, x._data.dtype)
    v = M.broadcast_to(v, pos_shape + tail)
    added = M.scatter_nd_add(E.multiply(x, 0.0) if x.dtype.kind == "f" else x * 0, idx, v)
    if accumulate:
        return E.add(x, added)
    hit = M.scatter_nd_add(_nograd(xp.zeros(x._data.shape, dtype=np.float32)), idx,
                           _nograd(xp.ones(pos_shape + tail, dtype=np.float32)))
    # where several positions repeat, the last write wins, as in a plain assignment
    last = _nograd(xp.zeros(x._data.shape, dtype=x._data.dtype))
    last._data[tuple(i._data for i in indices)] = v._data
    keep = G.greater_than(hit, 0)
    one_write = G.less_equal(hit, 1)
    return E.where(keep, E.where(one_write, added, last), x)


def index_sample(x, index):
    if x.ndim != 2 or index.ndim != 2 or x.shape[0] != index.shape[0]:
        raise ValueError(f"ddg.index_sample: needs x [N, D] and index [N, K], got {x.shape} and {index.shape}")
    return M.take_along_axis(x, index, 1)


def take(x, index, mode="raise", name=None):
    """Elements of the flattened ``x`` at ``index`` (``mode``: 'raise', 'wrap' or 'clip')."""
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"ddg.take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    n = x.size
    xp = _xp(x)
    i = index._data.astype("int64")
    if mode == "raise":
        if i.size and (int(i.min()) < -n or int(i.max()) >= n):
            raise IndexError(f"ddg.take: index out of range for a tensor of {n} elements (shape {x.shape})")
        i = i % n if n else i
    elif mode == "wrap":
        i = i % n
    else:
        i = xp.clip(i, 0, n - 1)
    out = M.gather(M.flatten(x), _nograd(i.reshape(-1)))
    return M.reshape(out, index.shape)


def multiplex(inputs, index, name=None):
    """Row ``i`` of the result is row ``i`` of ``inputs[index[i]]``."""
    st = M.stack(list(inputs), 0)
    xp = _xp(st)
    sel = index._data.reshape(-1).astype("int64")
    return M.getitem(st, (_nograd(sel), _nograd(xp.arange(st.shape[1]))))


def scatter_nd(index, updates, shape, name=None):
    xp = _xp(updates)
    return M.scatter_nd_add(_nograd(xp.zeros(tuple(shape), dtype=updates._data.dtype)), index, updates)


def shard_index(input, index_num, nshards, shard_id, ignore_value=-1):  # noqa: A002
    """Labels of shard ``shard_id`` (of ``nshards`` equal shards of ``index_num``) made
    local to it; others become ``ignore_value``."""
    if not 0 <= shard_id < nshards:
        raise ValueError(f"ddg.shard_index: shard_id {shard_id} out of range for {nshards} shards")
    size = (index_num + nshards - 1) // nshards
    a = input._data
    xp = _xp(input)
    return _nograd(xp.where(a // size == shard_id, a % size, ignore_value).astype(a.dtype))


def masked_scatter(x, mask, value, name=None):
    """``x`` with the positions where ``mask`` (broadcast to ``x``'s shape) is True filled,
    in row-major order, with the first elements of ``value``. Gradients reach ``x`` (where
    the mask is False) and the used elements of ``value``."""
    if not isinstance(mask, Tensor) or mask._data.dtype.kind != "b":
        raise TypeError(f"ddg.masked_scatter: mask must be a bool Tensor, got "
                        f"{mask.dtype if isinstance(mask, Tensor) else type(mask).__name__}")
    if not isinstance(value, Tensor) or value._data.dtype != x._data.dtype:
        raise TypeError(f"ddg.masked_scatter: value must be a Tensor of x's dtype {x.dtype}, got "
                        f"{value.dtype if isinstance(value, Tensor) else type(value).__name__}")
    try:
        shape = list(np.broadcast_shapes(tuple(x.shape), tuple(mask.shape)))
    except ValueError:
        raise ValueError(f"ddg.masked_scatter: mask of shape {mask.shape} does not broadcast with x of shape "
                         f"{x.shape}") from None
    if shape != list(x.shape):
        raise ValueError(f"ddg.masked_scatter: mask of shape {mask.shape} would broadcast x of shape {x.shape} "
                         f"to {shape}; it must broadcast to x's shape")
    xp = _xp(x)
    m = xp.broadcast_to(mask._data, tuple(shape)).reshape(-1)
    n = int(m.sum())
    if n > value._data.size:
        raise ValueError(f"ddg.masked_scatter: the mask selects {n} positions but value (shape {value.shape}) "
                         f"has only {value._data.size} elements")
    idx = xp.clip(xp.cumsum(m) - 1, 0, None).astype(np.int64)
    taken = M.reshape(M.gather(M.reshape(value, [-1]), _nograd(idx)), shape) if idx.size else x
    return E.where(_nograd(m.reshape(shape)), taken, x)
