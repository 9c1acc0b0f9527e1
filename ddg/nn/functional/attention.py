"""Scaled dot-product attention: one op (``ops.nn_ops.Attention``, dropout on the weights
included), or, under ``auto_cast``, a composite of matmul, softmax and dropout."""
import math

import numpy as np

from ...autograd.ops import elementwise as E
from ...autograd.ops import movement as M
from ...autograd.function import _autocast
from ...autograd.ops.linalg import matmul
from ...autograd.ops.nn_ops import Attention
from ...tensor import backend
from ...tensor.dtypes import finfo
from ...tensor.tensor import Tensor
from .activation import softmax
from .dropout import dropout

__all__ = ["scaled_dot_product_attention"]


def _convert_attention_mask(attn_mask, dtype):
    """Paddle's mask convention, as an additive float mask of ``dtype``: a bool (or integer)
    mask keeps positions that are True (non-zero) and gets -1e9 where it is False (zero),
    -65504 in float16 (whose largest value that is: 1e9 there would be inf, and the kept
    positions' ``0 * inf`` NaN); a float mask is added to the scores as it is."""
    if attn_mask is None:
        return None
    if not isinstance(attn_mask, Tensor):
        raise TypeError(f"ddg.nn.functional: attn_mask must be a Tensor, got {type(attn_mask).__name__}")
    kind = attn_mask._data.dtype.kind
    if kind in "biu":
        m = E.cast(attn_mask, dtype)
        return (m - 1.0) * min(1e9, float(finfo(m._data.dtype).max))
    if attn_mask.dtype != np.dtype(dtype):
        return E.cast(attn_mask, dtype)
    return attn_mask


def _attend(q, k, v, mask=None, dropout_p=0.0, training=True, scale=None):
    """``softmax(q k^T * scale + mask) v`` on ``[..., L, d]`` tensors; returns ``(out, weights)``."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    drop = dropout_p if training else 0.0
    if _autocast[0] is None:
        # one op (ops.nn_ops.Attention, dropout inside); under auto_cast the composite, so
        # that the products and the softmax follow the casting policy's lists one by one
        op = Attention(scale, dropout=drop)
        return tuple(op(q, k, v) if mask is None else op(q, k, v, mask))
    scores = matmul(q * scale, k, transpose_y=True)
    if mask is not None:
        scores = scores + mask
    weights = softmax(scores, axis=-1)
    if dropout_p and training:
        weights = dropout(weights, dropout_p, training=True, mode="upscale_in_train")
    return matmul(weights, v), weights


def _attend_heads(q, k, v, heads, mask=None, dropout_p=0.0, training=True):
    """Multi-head attention on projections ``[batch, L, heads * d]``: returns the values
    ``[batch, Lq, heads * dv]`` and the weights ``[batch, heads, Lq, Lk]``. One op that splits
    and merges the heads itself where ``_attend`` takes one op (outside auto_cast); else the
    heads are split with reshape/transpose ops around the composite."""
    scale = 1.0 / math.sqrt(q.shape[-1] // heads)
    if _autocast[0] is None:
        op = Attention(scale, heads, dropout=dropout_p if training else 0.0)
        return tuple(op(q, k, v) if mask is None else op(q, k, v, mask))
    q, k, v = (M.transpose(M.reshape(t, [0, 0, heads, t.shape[-1] // heads]), [0, 2, 1, 3]) for t in (q, k, v))
    out, weights = _attend(q, k, v, mask, dropout_p, training, scale)
    return M.reshape(M.transpose(out, [0, 2, 1, 3]), [0, 0, out.shape[1] * out.shape[3]]), weights


_CAUSAL = {}     # (Lq, Lk, dtype) -> read-only numpy causal mask


def _causal_mask(lq, lk, like):
    """The additive causal mask ``[lq, lk]`` in ``like``'s dtype and array module: 0 where key
    ``j <= i + lk - lq``, -big after. Numpy masks are kept read-only and reused (a handful
    of shapes; building one costs 30-80 us at 64-128 positions)."""
    xp = backend.get_array_module(like)
    key = (lq, lk, like.dtype)
    if xp is np:
        got = _CAUSAL.get(key)
        if got is not None:
            return got
    allowed = xp.tril(xp.ones((lq, lk), dtype=bool), k=lk - lq)
    big = min(1e9, float(finfo(like.dtype).max))   # float16 tops out at 65504
    mask = xp.where(allowed, 0.0, -big).astype(like.dtype)
    if xp is np:
        if len(_CAUSAL) >= 16:
            _CAUSAL.clear()
        mask.flags.writeable = False
        _CAUSAL[key] = mask
    return mask


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 training=True, name=None):
    """Paddle's ``F.scaled_dot_product_attention``: inputs ``[batch, seq_len, num_heads,
    head_dim]`` (the flash-attention layout), output the same layout as ``query``.

    ``attn_mask`` broadcasts to ``[batch, num_heads, seq_q, seq_k]``: bool (True = attend)
    or float (added to the scores). ``is_causal=True`` masks keys after each query
    (aligned to the end when ``seq_k > seq_q``)."""
    for t, n in ((query, "query"), (key, "key"), (value, "value")):
        if not isinstance(t, Tensor) or t.ndim != 4:
            raise ValueError(f"ddg.nn.functional.scaled_dot_product_attention: {n} must be a 4-D Tensor "
                             f"[batch, seq_len, num_heads, head_dim], got "
                             f"{t.shape if isinstance(t, Tensor) else type(t).__name__}")
    if query.shape[-1] != key.shape[-1] or key.shape[1] != value.shape[1] or \
            query.shape[0] != key.shape[0] or key.shape[2] != value.shape[2]:
        raise ValueError(f"ddg.nn.functional.scaled_dot_product_attention: incompatible shapes query "
                         f"{query.shape}, key {key.shape}, value {value.shape}")
    if query.shape[2] != key.shape[2]:
        raise ValueError(f"ddg.nn.functional.scaled_dot_product_attention: query has {query.shape[2]} heads, "
                         f"key/value have {key.shape[2]}")
    mask = _convert_attention_mask(attn_mask, query.dtype)
    if is_causal:
        causal = Tensor._wrap(_causal_mask(query.shape[1], key.shape[1], query._data))
        mask = causal if mask is None else mask + causal
    if _autocast[0] is None:    # one op on the [batch, L, heads, d] inputs, no transposes
        # causal and no other mask: the op may skip the products of the masked scores
        op = Attention(1.0 / math.sqrt(query.shape[-1]), dropout=dropout_p if training else 0.0, bshd=True,
                       causal=is_causal and attn_mask is None)
        return op(query, key, value)[0] if mask is None else op(query, key, value, mask)[0]
    q, k, v = (M.transpose(t, [0, 2, 1, 3]) for t in (query, key, value))
    out, _ = _attend(q, k, v, mask, dropout_p, training)
    return M.transpose(out, [0, 2, 1, 3])
