"""Sorting and searching: ``sort``, ``topk``, ``unique_consecutive``, ``isin``,
``searchsorted`` and ``bucketize``."""
import builtins as _b

from ...tensor.dtypes import convert_dtype
from ...tensor.tensor import Tensor
from ..axes import normalize_axis
from ..ops import logic as G
from ..ops import movement as M
from ..ops import sort as S
from ._common import _nograd, _xp


def sort(x, axis=-1, descending=False, stable=False, name=None):
    """``x`` sorted along ``axis``; the gradient goes back to where each value came from."""
    if x._data.ndim == 0:
        return M.clone(x)
    idx = S.argsort(x, axis, descending)
    return M.take_along_axis(x, idx, axis)


def topk(x, k, axis=None, largest=True, sorted=True, name=None):  # noqa: A002 - Paddle's name
    """The ``k`` largest (or smallest) values along ``axis`` (default the last) and their
    int64 indices, in sorted order."""
    k = int(k.item() if isinstance(k, Tensor) else k)
    if x._data.ndim == 0:   # a 0-D tensor is its own top 1
        if k not in (0, 1) or (axis is not None and axis not in (0, -1)):
            raise ValueError(f"ddg.topk: k={k}, axis={axis} do not fit a 0-D tensor")
        return x, M.reshape(G.not_equal(x, x), []).astype("int64")
    axis = -1 if axis is None else axis
    ax = normalize_axis(axis, x._data.ndim, "topk")
    n = x._data.shape[ax] if x._data.ndim else 1
    if not 0 <= k <= n:
        raise ValueError(f"ddg.topk: k={k} is out of range for axis {axis} of size {n} (shape {x.shape})")
    idx = S.argsort(x, ax, descending=largest)
    idx = M.getitem(idx, tuple([_b.slice(None)] * ax + [_b.slice(0, k)]))
    return M.take_along_axis(x, idx, ax), idx


def searchsorted(sorted_sequence, values, out_int32=False, right=False, name=None):
    xp = _xp(sorted_sequence)
    s, v = sorted_sequence._data, values._data if isinstance(values, Tensor) else xp.asarray(values)
    side = "right" if right else "left"
    if s.ndim == 1:
        out = xp.searchsorted(s, v, side=side)
    else:
        if s.shape[:-1] != v.shape[:-1]:
            raise ValueError(f"ddg.searchsorted: leading dimensions differ: {list(s.shape)} and {list(v.shape)}")
        s2, v2 = s.reshape(-1, s.shape[-1]), v.reshape(-1, v.shape[-1])
        out = xp.stack([xp.searchsorted(s2[i], v2[i], side=side) for i in range(s2.shape[0])]).reshape(v.shape)
    return _nograd(out.astype("int32" if out_int32 else "int64"))


def bucketize(x, sorted_sequence, out_int32=False, right=False, name=None):
    if sorted_sequence.ndim != 1:
        raise ValueError(f"ddg.bucketize: sorted_sequence must be 1-D, got shape {sorted_sequence.shape}")
    return searchsorted(sorted_sequence, x, out_int32, right)


def unique_consecutive(x, return_inverse=False, return_counts=False, axis=None, dtype="int64", name=None):
    xp = _xp(x)
    a = x._data
    if axis is None:
        a = a.reshape(-1)
        ax = 0
    else:
        ax = normalize_axis(axis, a.ndim, "unique_consecutive")
        a = xp.moveaxis(a, ax, 0)
    n = a.shape[0]
    if n == 0:
        change = xp.zeros(0, dtype=bool)
    else:
        diff_ = (a[1:] != a[:-1]).reshape(n - 1, -1).any(-1)
        change = xp.concatenate([xp.ones(1, dtype=bool), diff_])
    starts = xp.nonzero(change)[0]
    out = a[starts]
    if axis is not None:
        out = xp.moveaxis(out, 0, ax)
    res = [_nograd(xp.ascontiguousarray(out))]
    if return_inverse:
        res.append(_nograd((xp.cumsum(change) - 1).astype(convert_dtype(dtype))))
    if return_counts:
        ends = xp.concatenate([starts[1:], xp.asarray([n])])
        res.append(_nograd((ends - starts).astype(convert_dtype(dtype))))
    return res[0] if len(res) == 1 else tuple(res)


def isin(x, test_x, assume_unique=False, invert=False, name=None):
    """Elementwise: is each element of ``x`` in ``test_x``? (bool, no gradient)."""
    for n, t in (("x", x), ("test_x", test_x)):
        if not isinstance(t, Tensor):
            raise TypeError(f"ddg.isin: {n} must be a Tensor, got {type(t).__name__}")
    xp = _xp(x)
    return _nograd(xp.isin(x._data, test_x._data, assume_unique=assume_unique, invert=invert))
