"""``ddg.incubate.nn.functional``: Paddle's fused operators, computed with ddg's ops (the
same formulas as Paddle's documentation gives for its fused kernels; a fused GPU kernel
can replace one later without changing results beyond rounding).

Names of Paddle's that need its own inference kernels or hardware (block/masked
multi-head attention, FP8 and quantised GEMMs, MoE dispatch) raise an error naming the
alternative.
"""
import math

import numpy as np

from ...autograd.ops import elementwise as E
from ...autograd.ops import linalg as L
from ...autograd.ops import movement as M
from ...autograd.ops import reduce as R
from ...nn import functional as F
from ...tensor.creation import to_tensor, zeros

__all__ = ["fused_linear", "fused_matmul_bias", "fused_linear_activation", "fused_dropout_add",
           "fused_bias_dropout_residual_layer_norm", "fused_feedforward", "fused_multi_head_attention",
           "fused_rms_norm", "fused_layer_norm", "fused_rotary_position_embedding", "fused_bias_act", "swiglu"]

_MODES = ("upscale_in_train", "downscale_in_infer")


def fused_matmul_bias(x, y, bias=None, transpose_x=False, transpose_y=False, name=None):
    """``matmul(x, y, transpose_x, transpose_y) + bias``."""
    out = L.matmul(x, y, transpose_x, transpose_y)
    return out if bias is None else out + bias


def fused_linear(x, weight, bias=None, transpose_weight=False, name=None):
    """``x @ weight + bias`` (``weight`` [in, out], or [out, in] with ``transpose_weight``)."""
    return fused_matmul_bias(x, weight, bias, False, transpose_weight)


def fused_linear_activation(x, y, bias, trans_x=False, trans_y=False, activation=None):
    """``act(matmul(x, y) + bias)`` with ``activation`` None/'none', 'relu' or 'gelu' (the tanh
    approximation, as the fused GEMM epilogue computes it)."""
    out = fused_matmul_bias(x, y, bias, trans_x, trans_y)
    if activation is None or activation == "none":
        return out
    if activation == "relu":
        return F.relu(out)
    if activation == "gelu":
        return F.gelu(out, approximate=True)
    raise ValueError(f"ddg.incubate.nn.functional.fused_linear_activation: activation must be None, 'relu' or "
                     f"'gelu', got {activation!r}")


def _check_mode(mode, op):
    if mode not in _MODES:
        raise ValueError(f"ddg.incubate.nn.functional.{op}: mode must be one of {_MODES}, got {mode!r}")


def fused_dropout_add(x, y, p=0.5, training=True, mode="upscale_in_train", name=None):
    """``dropout(x, p) + y``."""
    _check_mode(mode, "fused_dropout_add")
    return F.dropout(x, p, training=training, mode=mode) + y


def _ln_last(x, scale, bias, eps):
    return F.layer_norm(x, [x.shape[-1]], scale, bias, eps)


def fused_bias_dropout_residual_layer_norm(x, residual, bias=None, ln_scale=None, ln_bias=None, dropout_rate=0.5,
                                           ln_epsilon=1e-5, training=True, mode="upscale_in_train", name=None):
    """``layer_norm(residual + dropout(x + bias))`` over the last axis."""
    _check_mode(mode, "fused_bias_dropout_residual_layer_norm")
    if list(x.shape) != list(residual.shape):
        raise ValueError(f"ddg.incubate.nn.functional.fused_bias_dropout_residual_layer_norm: x {x.shape} and "
                         f"residual {residual.shape} must have the same shape")
    h = x if bias is None else x + bias
    return _ln_last(residual + F.dropout(h, dropout_rate, training=training, mode=mode), ln_scale, ln_bias,
                    ln_epsilon)


def _activation(name, op):
    if name == "gelu":
        return F.gelu
    if name == "relu":
        return F.relu
    raise ValueError(f"ddg.incubate.nn.functional.{op}: activation must be 'relu' or 'gelu', got {name!r}")


def fused_feedforward(x, linear1_weight, linear2_weight, linear1_bias=None, linear2_bias=None, ln1_scale=None,
                      ln1_bias=None, ln2_scale=None, ln2_bias=None, dropout1_rate=0.5, dropout2_rate=0.5,
                      activation="relu", ln1_epsilon=1e-5, ln2_epsilon=1e-5, pre_layer_norm=False, training=True,
                      mode="upscale_in_train", ring_id=-1, add_residual=True, name=None):
    """The transformer feed-forward block::

        out = layer_norm1(x) if pre_layer_norm else x
        out = dropout2(linear2(dropout1(act(linear1(out)))))
        out = x + out if add_residual else out
        out = out if pre_layer_norm else layer_norm2(out)
    """
    op = "fused_feedforward"
    _check_mode(mode, op)
    if ring_id != -1:
        raise ValueError(f"ddg.incubate.nn.functional.{op}: ring_id={ring_id} (tensor model parallel) needs "
                         f"Paddle's fleet; ddg runs data parallel (ddg.DataParallel)")
    act = _activation(activation, op)
    out = _ln_last(x, ln1_scale, ln1_bias, ln1_epsilon) if pre_layer_norm else x
    out = F.dropout(act(F.linear(out, linear1_weight, linear1_bias)), dropout1_rate, training=training, mode=mode)
    out = F.dropout(F.linear(out, linear2_weight, linear2_bias), dropout2_rate, training=training, mode=mode)
    if add_residual:
        out = x + out
    return out if pre_layer_norm else _ln_last(out, ln2_scale, ln2_bias, ln2_epsilon)


def fused_multi_head_attention(x, qkv_weight, linear_weight, pre_layer_norm=False, pre_ln_scale=None,
                               pre_ln_bias=None, ln_scale=None, ln_bias=None, pre_ln_epsilon=1e-5, qkv_bias=None,
                               linear_bias=None, cache_kv=None, attn_mask=None, dropout_rate=0.5,
                               attn_dropout_rate=0.5, ln_epsilon=1e-5, training=True, mode="upscale_in_train",
                               ring_id=-1, add_residual=True, num_heads=-1, transpose_qkv_wb=False, name=None):
    """Self-attention of ``x`` [batch, seq, embed] with one packed projection ``qkv_weight``
    [3, num_heads, head_dim, embed] (or [embed, 3 * embed] with ``transpose_qkv_wb``)::

        out = layer_norm(x) if pre_layer_norm else x
        q, k, v = split(out @ qkv_weight^T + qkv_bias);  q = q * head_dim ** -0.5
        out = dropout(softmax(q @ k^T + attn_mask)) @ v, heads merged
        out = dropout(out @ linear_weight + linear_bias)
        out = x + out if add_residual else out
        out = out if pre_layer_norm else layer_norm(out)
    """
    op = "fused_multi_head_attention"
    _check_mode(mode, op)
    if cache_kv is not None:
        raise NotImplementedError(f"ddg.incubate.nn.functional.{op}: cache_kv (incremental decoding) is not "
                                  f"supported; use ddg.nn.MultiHeadAttention with a Cache")
    if ring_id != -1:
        raise ValueError(f"ddg.incubate.nn.functional.{op}: ring_id={ring_id} (tensor model parallel) needs "
                         f"Paddle's fleet; ddg runs data parallel (ddg.DataParallel)")
    if x.ndim != 3:
        raise ValueError(f"ddg.incubate.nn.functional.{op}: x must be [batch, seq, embed], got {x.shape}")
    b, s, e = x.shape
    if transpose_qkv_wb:
        if num_heads <= 0 or qkv_weight.ndim != 2 or list(qkv_weight.shape) != [e, 3 * e]:
            raise ValueError(f"ddg.incubate.nn.functional.{op}: with transpose_qkv_wb, qkv_weight must be "
                             f"[{e}, {3 * e}] and num_heads > 0, got {qkv_weight.shape}, num_heads={num_heads}")
        nh, hd = num_heads, e // num_heads
        w = M.transpose(qkv_weight, [1, 0])                      # [3 * nh * hd, e]
        bias = qkv_bias
    else:
        if qkv_weight.ndim != 4 or qkv_weight.shape[0] != 3 or qkv_weight.shape[3] != e:
            raise ValueError(f"ddg.incubate.nn.functional.{op}: qkv_weight must be [3, num_heads, head_dim, {e}], "
                             f"got {qkv_weight.shape}")
        nh, hd = qkv_weight.shape[1], qkv_weight.shape[2]
        w = M.reshape(qkv_weight, [3 * nh * hd, e])
        bias = None if qkv_bias is None else M.reshape(qkv_bias, [3 * nh * hd])
    out = _ln_last(x, pre_ln_scale, pre_ln_bias, pre_ln_epsilon) if pre_layer_norm else x
    qkv = L.matmul(out, w, transpose_y=True)
    if bias is not None:
        qkv = qkv + bias
    qkv = M.transpose(M.reshape(qkv, [b, s, 3, nh, hd]), [2, 0, 3, 1, 4])   # [3, b, nh, s, hd]
    q, k, v = M.unbind(qkv, 0)
    scores = L.matmul(q * (hd ** -0.5), k, transpose_y=True)
    if attn_mask is not None:
        scores = scores + attn_mask
    probs = F.dropout(F.softmax(scores, -1), attn_dropout_rate, training=training, mode=mode)
    ctx = M.reshape(M.transpose(L.matmul(probs, v), [0, 2, 1, 3]), [b, s, nh * hd])
    out = F.dropout(F.linear(ctx, linear_weight, linear_bias), dropout_rate, training=training, mode=mode)
    if add_residual:
        out = x + out
    return out if pre_layer_norm else _ln_last(out, ln_scale, ln_bias, ln_epsilon)


def _norm_prologue(x, bias, residual, residual_alpha=1.0):
    if bias is not None:
        x = x + bias
    if residual is not None:
        x = x + residual * residual_alpha
    return x


def _check_quant(quant_scale, op):
    if quant_scale > 0:
        raise NotImplementedError(f"ddg.incubate.nn.functional.{op}: quantised output (quant_scale > 0) needs "
                                  f"Paddle's int8 kernels; leave quant_scale at -1")


def fused_rms_norm(x, norm_weight, norm_bias, epsilon, begin_norm_axis=1, bias=None, residual=None, quant_scale=-1,
                   quant_round_type=0, quant_max_bound=0, quant_min_bound=0):
    """RMS norm of ``x (+ bias) (+ residual)`` over the axes from ``begin_norm_axis`` on:
    ``h / sqrt(mean(h^2) + epsilon) * norm_weight + norm_bias``. Returns ``(out, h)``, as
    Paddle: ``h`` the sum (for the next block) when ``residual`` is given, else empty."""
    _check_quant(quant_scale, "fused_rms_norm")
    h = _norm_prologue(x, bias, residual)
    axes = list(range(begin_norm_axis % h.ndim, h.ndim))
    ms = R.mean(h * h, axis=axes, keepdim=True)
    out = h * E.rsqrt(ms + epsilon)
    out = out * M.reshape(norm_weight, list(h.shape[axes[0]:]))
    if norm_bias is not None:
        out = out + M.reshape(norm_bias, list(h.shape[axes[0]:]))
    if residual is None:
        return out, zeros([0], dtype=x.dtype)
    return out, h


def fused_layer_norm(x, norm_weight, norm_bias, epsilon, residual_alpha=1.0, begin_norm_axis=1, bias=None,
                     residual=None, quant_scale=-1, quant_round_type=0, quant_max_bound=0, quant_min_bound=0):
    """Layer norm of ``h = x (+ bias) (+ residual_alpha * residual)`` over the axes from
    ``begin_norm_axis`` on. Returns ``(out, h, mean, 1 / sqrt(variance + epsilon))`` as Paddle
    does, the statistics one per normalised row."""
    _check_quant(quant_scale, "fused_layer_norm")
    h = _norm_prologue(x, bias, residual, residual_alpha)
    axis = begin_norm_axis % h.ndim
    shape = list(h.shape[axis:])
    n = math.prod(shape)
    w = None if norm_weight is None else M.reshape(norm_weight, [n])
    b_ = None if norm_bias is None else M.reshape(norm_bias, [n])
    out = F.layer_norm(h, shape, w, b_, epsilon)
    rows = M.reshape(h, [-1, n])
    mean = R.mean(rows, axis=1)
    centred = rows - M.unsqueeze(mean, 1)
    inv_std = E.rsqrt(R.mean(centred * centred, axis=1) + epsilon)
    return out, h, mean, inv_std


def swiglu(x, y=None, name=None):
    """``silu(x) * y``; with ``y`` None, ``x`` is split in two halves along the last axis."""
    if y is None:
        if x.shape[-1] % 2:
            raise ValueError(f"ddg.incubate.nn.functional.swiglu: the last axis of x must be even, got {x.shape}")
        x, y = M.split(x, 2, axis=-1)
    return F.silu(x) * y


def fused_bias_act(x, bias=None, dequant_scales=None, shift=None, smooth=None, act_method="gelu",
                   compute_dtype="default", quant_scale=-1, quant_round_type=0, quant_max_bound=0,
                   quant_min_bound=0):
    """``act(x + bias)`` for ``act_method`` 'gelu', 'relu', 'silu' (or 'swish') and 'swiglu'/'geglu'
    (gated: the halves of the last axis)."""
    op = "fused_bias_act"
    _check_quant(quant_scale, op)
    if dequant_scales is not None or shift is not None or smooth is not None:
        raise NotImplementedError(f"ddg.incubate.nn.functional.{op}: dequant_scales/shift/smooth (int8 inference) "
                                  f"are not supported")
    h = x if bias is None else x + bias
    if act_method == "gelu":
        return F.gelu(h)
    if act_method == "relu":
        return F.relu(h)
    if act_method in ("silu", "swish"):
        return F.silu(h)
    if act_method in ("swiglu", "geglu"):
        a, g = M.split(h, 2, axis=-1)
        return (F.silu(a) if act_method == "swiglu" else F.gelu(a)) * g
    raise ValueError(f"ddg.incubate.nn.functional.{op}: act_method must be 'gelu', 'relu', 'silu', 'swiglu' or "
                     f"'geglu', got {act_method!r}")


def _rotate_half(t, neox):
    if neox:
        a, b = M.split(t, 2, axis=-1)
        return M.concat([-b, a], axis=-1)
    d = t.shape[-1]
    pairs = M.reshape(t, list(t.shape[:-1]) + [d // 2, 2])
    a, b = M.unbind(pairs, -1)
    return M.reshape(M.stack([-b, a], axis=-1), list(t.shape))


def fused_rotary_position_embedding(q, k=None, v=None, sin=None, cos=None, position_ids=None,
                                    use_neox_rotary_style=True, time_major=False, rotary_emb_base=10000.0):
    """Rotary position embedding of ``q``, ``k``, ``v`` ([batch, seq, heads, head_dim], or
    [seq, batch, ...] with ``time_major``): ``t * cos + rotate(t) * sin``, ``rotate`` pairing
    the two halves of the head (``use_neox_rotary_style``) or neighbouring elements. Without
    ``sin``/``cos`` they are built from ``rotary_emb_base``. Returns ``(q, k, v)`` (None for
    those not given)."""
    op = "fused_rotary_position_embedding"
    if q.ndim != 4:
        raise ValueError(f"ddg.incubate.nn.functional.{op}: q must be 4-D [batch, seq, heads, head_dim], got {q.shape}")
    seq_axis = 0 if time_major else 1
    s, d = q.shape[seq_axis], q.shape[-1]
    if d % 2:
        raise ValueError(f"ddg.incubate.nn.functional.{op}: head_dim must be even, got {d}")
    if sin is None or cos is None:
        inv = 1.0 / (rotary_emb_base ** (np.arange(0, d, 2, dtype=np.float64) / d))
        ang = np.arange(s, dtype=np.float64)[:, None] * inv[None, :]            # [s, d/2]
        ang = np.concatenate([ang, ang], -1) if use_neox_rotary_style else np.repeat(ang, 2, -1)
        sin = to_tensor(np.sin(ang).astype(q.dtype))
        cos = to_tensor(np.cos(ang).astype(q.dtype))
    sin = M.reshape(sin, [-1, d]) if sin.ndim != 2 else sin
    cos = M.reshape(cos, [-1, d]) if cos.ndim != 2 else cos
    if position_ids is not None:
        sin, cos = M.gather(sin, M.reshape(position_ids, [-1])), M.gather(cos, M.reshape(position_ids, [-1]))
        shape = list(position_ids.shape) + [1, d]          # [batch, seq, 1, d]
    else:
        shape = [s, 1, 1, d] if time_major else [1, s, 1, d]
    sin, cos = M.reshape(sin, shape), M.reshape(cos, shape)
    out = []
    for t in (q, k, v):
        out.append(None if t is None else t * cos + _rotate_half(t, use_neox_rotary_style) * sin)
    return tuple(out)


_NEEDS_PADDLE = {
    "fused_multi_transformer": "ddg.incubate.nn.FusedTransformerEncoderLayer stacked in a LayerList",
    "masked_multihead_attention": "ddg.nn.functional.scaled_dot_product_attention with a mask",
    "block_multihead_attention": "ddg.nn.functional.scaled_dot_product_attention",
    "blha_get_max_len": "the sequence lengths' max() in Python",
    "variable_length_memory_efficient_attention": "ddg.nn.functional.scaled_dot_product_attention with a mask",
    "fused_rms_norm_ext": "ddg.incubate.nn.functional.fused_rms_norm",
}


def __getattr__(name):
    if name in _NEEDS_PADDLE:
        raise NotImplementedError(f"ddg.incubate.nn.functional.{name} needs Paddle's GPU inference kernels; use "
                                  f"{_NEEDS_PADDLE[name]}")
    if name.startswith(("fp8_", "moe_", "fused_act_dequant", "fused_swiglu_weighted", "fused_weighted_swiglu",
                        "fused_stack_transpose_quant", "fused_transpose", "cal_aux_loss", "expand_modality",
                        "build_src_rank", "int_bincount", "embedding_grad_add_to_", "cross_entropy_with_softmax_bwd",
                        "fast_ln", "fast_rms_norm")):
        raise NotImplementedError(f"ddg.incubate.nn.functional.{name} is one of Paddle's GPU-only kernels (FP8, "
                                  f"mixture-of-experts dispatch, fused quantisation); ddg has no equivalent")
    raise AttributeError(f"module 'ddg.incubate.nn.functional' has no attribute {name!r}")
