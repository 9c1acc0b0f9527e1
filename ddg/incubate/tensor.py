"""Segment reductions, ``graph_send_recv``, the fused masked softmaxes and ``identity_loss``
of ``ddg.incubate`` (Paddle's ``paddle.incubate`` names), composed of ddg's ops so that
they differentiate."""
import numpy as np

from ..autograd.ops import elementwise as E
from ..autograd.ops import linalg as L
from ..autograd.ops import movement as M
from ..autograd.ops import reduce as R
from ..nn import functional as F
from ..tensor.tensor import Tensor

__all__ = ["segment_sum", "segment_mean", "segment_max", "segment_min", "graph_send_recv", "softmax_mask_fuse",
           "softmax_mask_fuse_upper_triangle", "identity_loss"]


def _ids(ids, n, op):
    if not isinstance(ids, Tensor) or ids.dtype.kind not in "iu" or ids.ndim != 1:
        raise TypeError(f"ddg.incubate.{op}: ids must be a 1-D integer Tensor, got "
                        f"{getattr(ids, 'dtype', type(ids).__name__)} {getattr(ids, 'shape', '')}")
    if ids.shape[0] != n:
        raise ValueError(f"ddg.incubate.{op}: {ids.shape[0]} ids for {n} rows of data")
    return np.asarray(ids.numpy()).astype(np.int64)


def _reduce_rows(data, seg, num, pool, op):
    """Rows of ``data`` reduced into ``num`` segments by the (host) ids ``seg``; an empty
    segment gives zeros."""
    if seg.size and (seg.min() < 0 or seg.max() >= num):
        raise ValueError(f"ddg.incubate.{op}: ids must lie in [0, {num}), got values from {seg.min()} to {seg.max()}")
    flat = M.reshape(data, [data.shape[0], -1])
    member = (np.arange(num)[:, None] == seg[None, :])                       # [num, n]
    if pool in ("sum", "mean"):
        onehot = Tensor._wrap(member.astype(flat.dtype))
        out = L.matmul(onehot, flat)
        if pool == "mean":
            count = np.maximum(member.sum(1), 1).astype(flat.dtype)[:, None]
            out = out / Tensor._wrap(count)
    else:
        fill = -np.inf if pool == "max" else np.inf
        mask = Tensor._wrap(member[:, :, None])
        picked = E.where(mask, M.unsqueeze(flat, 0), Tensor._wrap(np.asarray(fill, dtype=flat.dtype)))
        out = R.max(picked, axis=1) if pool == "max" else R.min(picked, axis=1)
        empty = Tensor._wrap(~member.any(1)[:, None])
        out = E.where(empty, Tensor._wrap(np.zeros((), dtype=flat.dtype)), out)
    return M.reshape(out, [num] + list(data.shape[1:]))


def _segment(data, segment_ids, pool, op):
    seg = _ids(segment_ids, data.shape[0], op)
    if seg.size and np.any(np.diff(seg) < 0):
        raise ValueError(f"ddg.incubate.{op}: segment_ids must be sorted (non-decreasing)")
    num = int(seg.max()) + 1 if seg.size else 0
    return _reduce_rows(data, seg, num, pool, op)


def segment_sum(data, segment_ids, name=None):
    """Sums of the rows of ``data`` that share a (sorted) segment id: ``out[i] = sum(data[j]
    for j with segment_ids[j] == i)``, ``max(segment_ids) + 1`` rows."""
    return _segment(data, segment_ids, "sum", "segment_sum")


def segment_mean(data, segment_ids, name=None):
    return _segment(data, segment_ids, "mean", "segment_mean")


def segment_max(data, segment_ids, name=None):
    return _segment(data, segment_ids, "max", "segment_max")


def segment_min(data, segment_ids, name=None):
    return _segment(data, segment_ids, "min", "segment_min")


def graph_send_recv(x, src_index, dst_index, pool_type="sum", out_size=None, name=None):
    """Message passing: row ``x[src_index[i]]`` is sent to row ``dst_index[i]`` of the output,
    where the messages are reduced by ``pool_type`` ('sum', 'mean', 'max', 'min'); the output
    has ``out_size`` rows (``x.shape[0]`` when None or <= 0), zeros where nothing arrived."""
    op = "graph_send_recv"
    if pool_type not in ("sum", "mean", "max", "min"):
        raise ValueError(f"ddg.incubate.{op}: pool_type must be 'sum', 'mean', 'max' or 'min', got {pool_type!r}")
    src = _ids(src_index, src_index.shape[0] if isinstance(src_index, Tensor) else -1, op)
    dst = _ids(dst_index, src.shape[0], op)
    if isinstance(out_size, Tensor):
        out_size = int(out_size.numpy().reshape(-1)[0])
    num = x.shape[0] if out_size is None or out_size <= 0 else int(out_size)
    if src.size and (src.min() < 0 or src.max() >= x.shape[0]):
        raise ValueError(f"ddg.incubate.{op}: src_index must lie in [0, {x.shape[0]})")
    msgs = M.gather(x, Tensor._wrap(src))
    return _reduce_rows(msgs, dst, num, pool_type, op)


def softmax_mask_fuse(x, mask, name=None):
    """``softmax(x + mask)`` over the last axis."""
    return F.softmax(x + mask, -1)


def softmax_mask_fuse_upper_triangle(x):
    """Softmax over the last axis of ``x`` [..., seq, seq] with the upper triangle (key after
    query) masked out: causal attention weights."""
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"ddg.incubate.softmax_mask_fuse_upper_triangle: needs [..., seq, seq], got {x.shape}")
    s = x.shape[-1]
    future = Tensor._wrap(np.triu(np.ones((s, s), dtype=bool), 1))
    masked = E.where(future, Tensor._wrap(np.asarray(-np.inf, dtype=x.dtype)), x)
    return F.softmax(masked, -1)


def identity_loss(x, reduction="none"):
    """``x`` reduced as a loss: 'sum' (or 0), 'mean' (or 1), 'none' (or 2)."""
    red = {0: "sum", 1: "mean", 2: "none"}.get(reduction, reduction)
    if red == "sum":
        return R.sum(x)
    if red == "mean":
        return R.mean(x)
    if red == "none":
        return x
    raise ValueError(f"ddg.incubate.identity_loss: reduction must be 'sum', 'mean', 'none' (or 0, 1, 2), got "
                     f"{reduction!r}")
