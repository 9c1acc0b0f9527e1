"""Attention and transformer layers with Paddle 2.x semantics: ``MultiHeadAttention``,
``TransformerEncoderLayer`` / ``TransformerEncoder``, ``TransformerDecoderLayer`` /
``TransformerDecoder`` and ``Transformer``. All batch-major (``[batch, seq, d_model]``).

Attention masks follow Paddle: a bool (or integer) mask marks with True (non-zero) the
positions that may be attended to; a float mask is added to the attention scores (0 to
keep, -inf or a large negative number to drop). Masks broadcast to
``[batch, num_heads, seq_q, seq_k]``.
"""
import collections
import copy

import numpy as np

from ...autograd.ops import movement as M
from ...tensor import backend
from ...tensor.dtypes import default_float
from ...tensor.place import current_place, move_array
from ...tensor.tensor import Tensor
from .. import functional as F
from ..functional.attention import _attend, _attend_heads, _convert_attention_mask
from ..param_attr import ParamAttr
from .common import Linear
from .container import LayerList
from .dropout import Dropout
from .layers import Layer
from .norm import LayerNorm


def _param_attr_list(attr, n):
    """One ParamAttr (or False) per sublayer group, as Paddle spreads ``weight_attr`` /
    ``bias_attr`` of a transformer layer: a list gives one per group; a single attr is
    copied (a name gets suffix ``_i``); ``False`` means no parameter everywhere."""
    if isinstance(attr, (list, tuple)):
        if len(attr) != n:
            raise ValueError(f"ddg.nn: expected {n} parameter attributes, got {len(attr)}")
        return [(ParamAttr._to_attr(None) if a is True else a) if isinstance(a, bool) else ParamAttr._to_attr(a)
                for a in attr]
    if isinstance(attr, bool):
        return [ParamAttr._to_attr(None) if attr else False for _ in range(n)]
    base = ParamAttr._to_attr(attr)
    out = []
    for i in range(n):
        a = copy.deepcopy(base)
        if a.name:
            a.name = f"{a.name}_{i}"
        out.append(a)
    return out


def _activation(name, where):
    fn = getattr(F, name, None) if isinstance(name, str) else None
    if fn is None:
        raise ValueError(f"ddg.nn.{where}: unknown activation {name!r} (use a name from ddg.nn.functional, "
                         f"e.g. 'relu' or 'gelu')")
    return fn


def _check_3d(x, what, where, dim=None):
    if not isinstance(x, Tensor):
        raise TypeError(f"ddg.nn.{where}: {what} must be a Tensor, got {type(x).__name__}")
    if x.ndim != 3 or (dim is not None and x.shape[-1] != dim):
        raise ValueError(f"ddg.nn.{where}: {what} must be [batch, seq_len, {dim if dim else 'features'}], got "
                         f"shape {x.shape}")


class MultiHeadAttention(Layer):
    """Multi-head attention: ``out_proj(concat_h softmax(q_h k_h^T / sqrt(d) + mask) v_h)``.

    ``forward(query, key=None, value=None, attn_mask=None, cache=None)`` (key and value
    default to query) returns ``out`` ``[batch, seq_q, embed_dim]``, plus the attention
    weights ``[batch, num_heads, seq_q, seq_k]`` when ``need_weights``, plus the updated
    cache when ``cache`` is given (``Cache``: keys/values of earlier steps, extended by
    this call; ``StaticCache``: precomputed keys/values, e.g. of an encoder's memory)."""

    Cache = collections.namedtuple("Cache", ["k", "v"])
    StaticCache = collections.namedtuple("StaticCache", ["k", "v"])

    def __init__(self, embed_dim, num_heads, dropout=0.0, kdim=None, vdim=None, need_weights=False,
                 weight_attr=None, bias_attr=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"ddg.nn.MultiHeadAttention: embed_dim and num_heads must be positive, got "
                             f"{embed_dim} and {num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"ddg.nn.MultiHeadAttention: embed_dim {embed_dim} is not divisible by num_heads "
                             f"{num_heads}")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = kdim or embed_dim
        self.vdim = vdim or embed_dim
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.need_weights = need_weights
        self.q_proj = Linear(embed_dim, embed_dim, weight_attr, bias_attr=bias_attr)
        self.k_proj = Linear(self.kdim, embed_dim, weight_attr, bias_attr=bias_attr)
        self.v_proj = Linear(self.vdim, embed_dim, weight_attr, bias_attr=bias_attr)
        self.out_proj = Linear(embed_dim, embed_dim, weight_attr, bias_attr=bias_attr)

    def _heads(self, x):
        """``[B, L, E]`` -> ``[B, num_heads, L, head_dim]``."""
        return M.transpose(M.reshape(x, [0, 0, self.num_heads, self.head_dim]), [0, 2, 1, 3])

    def compute_kv(self, key, value):
        """Projected keys and values, each ``[batch, num_heads, seq_k, head_dim]``."""
        _check_3d(key, "key", "MultiHeadAttention", self.kdim)
        _check_3d(value, "value", "MultiHeadAttention", self.vdim)
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(f"ddg.nn.MultiHeadAttention: key {key.shape} and value {value.shape} need the same "
                             f"batch and sequence length")
        return self._heads(self.k_proj(key)), self._heads(self.v_proj(value))

    def gen_cache(self, key, value=None, type=Cache):  # noqa: A002 - Paddle's name
        """A cache for incremental decoding: ``StaticCache`` of ``compute_kv(key, value)``;
        an empty ``Cache`` (``key`` gives batch size and dtype) when ``value`` is None;
        else ``Cache(key, value)`` as given."""
        if type is MultiHeadAttention.StaticCache:
            return self.StaticCache(*self.compute_kv(key, key if value is None else value))
        if value is None:
            xp = backend.get_array_module(key._data)
            empty = xp.zeros([key.shape[0], self.num_heads, 0, self.head_dim], dtype=key._data.dtype)
            return self.Cache(Tensor._wrap(empty), Tensor._wrap(empty.copy()))
        return self.Cache(key, value)

    def forward(self, query, key=None, value=None, attn_mask=None, cache=None):
        key = query if key is None else key
        value = query if value is None else value
        _check_3d(query, "query", "MultiHeadAttention", self.embed_dim)
        if cache is None:                   # heads split and merged inside the attention op
            _check_3d(key, "key", "MultiHeadAttention", self.kdim)
            _check_3d(value, "value", "MultiHeadAttention", self.vdim)
            if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
                raise ValueError(f"ddg.nn.MultiHeadAttention: query {query.shape}, key {key.shape} and value "
                                 f"{value.shape} need one batch size, key and value one sequence length")
            q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
            mask = _convert_attention_mask(attn_mask, q.dtype)
            out, weights = _attend_heads(q, k, v, self.num_heads, mask, self.dropout, self.training)
            out = self.out_proj(out)
            return (out, weights) if self.need_weights else out
        q = self._heads(self.q_proj(query))
        if isinstance(cache, self.StaticCache):
            k, v = cache.k, cache.v
        else:
            k, v = self.compute_kv(key, value)
            if isinstance(cache, self.Cache):
                k = M.concat([cache.k, k], axis=2)
                v = M.concat([cache.v, v], axis=2)
                cache = self.Cache(k, v)
            elif cache is not None:
                raise TypeError(f"ddg.nn.MultiHeadAttention: cache must be a MultiHeadAttention.Cache or "
                                f"StaticCache, got {type(cache).__name__}")
        if q.shape[0] != k.shape[0]:
            raise ValueError(f"ddg.nn.MultiHeadAttention: query batch {q.shape[0]} differs from key batch "
                             f"{k.shape[0]}")
        mask = _convert_attention_mask(attn_mask, q.dtype)
        out, weights = _attend(q, k, v, mask, self.dropout, self.training)
        out = M.reshape(M.transpose(out, [0, 2, 1, 3]), [0, 0, self.embed_dim])
        out = self.out_proj(out)
        outs = [out]
        if self.need_weights:
            outs.append(weights)
        if cache is not None:
            outs.append(cache)
        return out if len(outs) == 1 else tuple(outs)

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"


class _TransformerLayerBase(Layer):
    """What the encoder and decoder layers share: their constructor arguments are kept in
    ``_config`` (so TransformerEncoder/Decoder can rebuild fresh copies, as Paddle does)."""

    def _remember_config(self, args):
        """Store the constructor arguments; return the effective attention and activation
        dropout rates (both default to ``dropout``)."""
        keys = ("d_model", "nhead", "dim_feedforward", "dropout", "activation", "attn_dropout", "act_dropout",
                "normalize_before", "weight_attr", "bias_attr", "layer_norm_eps")
        self._config = {k: args[k] for k in keys}
        self.normalize_before = args["normalize_before"]
        dropout = args["dropout"]
        return (dropout if args["attn_dropout"] is None else args["attn_dropout"],
                dropout if args["act_dropout"] is None else args["act_dropout"])


class TransformerEncoderLayer(_TransformerLayerBase):
    """Self-attention then a feed-forward block, each with residual connection, dropout and
    LayerNorm (post-norm by default, pre-norm with ``normalize_before=True``)."""

    def __init__(self, d_model, nhead, dim_feedforward, dropout=0.1, activation="relu", attn_dropout=None,
                 act_dropout=None, normalize_before=False, weight_attr=None, bias_attr=None, layer_norm_eps=1e-5):
        super().__init__()
        attn_dropout, act_dropout = self._remember_config(locals())
        w, b = _param_attr_list(weight_attr, 2), _param_attr_list(bias_attr, 2)
        self.self_attn = MultiHeadAttention(d_model, nhead, dropout=attn_dropout, weight_attr=w[0], bias_attr=b[0])
        self.linear1 = Linear(d_model, dim_feedforward, w[1], bias_attr=b[1])
        self.dropout = Dropout(act_dropout, mode="upscale_in_train")
        self.linear2 = Linear(dim_feedforward, d_model, w[1], bias_attr=b[1])
        self.norm1 = LayerNorm(d_model, epsilon=layer_norm_eps)
        self.norm2 = LayerNorm(d_model, epsilon=layer_norm_eps)
        self.dropout1 = Dropout(dropout, mode="upscale_in_train")
        self.dropout2 = Dropout(dropout, mode="upscale_in_train")
        self.activation = _activation(activation, "TransformerEncoderLayer")

    def forward(self, src, src_mask=None, cache=None):
        _check_3d(src, "src", "TransformerEncoderLayer")
        src_mask = _convert_attention_mask(src_mask, src.dtype)
        residual = src
        if self.normalize_before:
            src = self.norm1(src)
        if cache is None:
            src = self.self_attn(src, src, src, src_mask)
        else:
            src, new_cache = self.self_attn(src, src, src, src_mask, cache)
        src = residual + self.dropout1(src)
        if not self.normalize_before:
            src = self.norm1(src)
        residual = src
        if self.normalize_before:
            src = self.norm2(src)
        src = self.linear2(self.dropout(self.activation(self.linear1(src))))
        src = residual + self.dropout2(src)
        if not self.normalize_before:
            src = self.norm2(src)
        return src if cache is None else (src, new_cache)

    def gen_cache(self, src):
        return self.self_attn.gen_cache(src, type=MultiHeadAttention.Cache)


def _clones(layer, num_layers, where):
    """As Paddle: the given layer first, then ``num_layers - 1`` new layers built from its
    constructor arguments (fresh parameters). A layer without recorded constructor
    arguments (a user subclass) is deep-copied instead."""
    if int(num_layers) < 1:
        raise ValueError(f"ddg.nn.{where}: num_layers must be >= 1, got {num_layers}")
    config = getattr(layer, "_config", None)
    if config is not None and type(layer) in (TransformerEncoderLayer, TransformerDecoderLayer):
        others = [type(layer)(**config) for _ in range(int(num_layers) - 1)]
    else:
        others = [copy.deepcopy(layer) for _ in range(int(num_layers) - 1)]
    return LayerList([layer] + others)


class TransformerEncoder(Layer):
    """``num_layers`` encoder layers in sequence, then ``norm`` if given."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_recompute=False):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers, "TransformerEncoder")
        self.num_layers = int(num_layers)
        self.norm = norm

    def forward(self, src, src_mask=None, cache=None):
        src_mask = _convert_attention_mask(src_mask, src.dtype)
        out = src
        new_caches = []
        for i, layer in enumerate(self.layers):
            if cache is None:
                out = layer(out, src_mask=src_mask)
            else:
                out, c = layer(out, src_mask=src_mask, cache=cache[i])
                new_caches.append(c)
        if self.norm is not None:
            out = self.norm(out)
        return out if cache is None else (out, new_caches)

    def gen_cache(self, src):
        return [layer.gen_cache(src) for layer in self.layers]


class TransformerDecoderLayer(_TransformerLayerBase):
    """Masked self-attention, cross-attention over ``memory``, then a feed-forward block;
    each with residual, dropout and LayerNorm (pre-norm with ``normalize_before=True``)."""

    def __init__(self, d_model, nhead, dim_feedforward, dropout=0.1, activation="relu", attn_dropout=None,
                 act_dropout=None, normalize_before=False, weight_attr=None, bias_attr=None, layer_norm_eps=1e-5):
        super().__init__()
        attn_dropout, act_dropout = self._remember_config(locals())
        w, b = _param_attr_list(weight_attr, 3), _param_attr_list(bias_attr, 3)
        self.self_attn = MultiHeadAttention(d_model, nhead, dropout=attn_dropout, weight_attr=w[0], bias_attr=b[0])
        self.cross_attn = MultiHeadAttention(d_model, nhead, dropout=attn_dropout, weight_attr=w[1],
                                             bias_attr=b[1])
        self.linear1 = Linear(d_model, dim_feedforward, w[2], bias_attr=b[2])
        self.dropout = Dropout(act_dropout, mode="upscale_in_train")
        self.linear2 = Linear(dim_feedforward, d_model, w[2], bias_attr=b[2])
        self.norm1 = LayerNorm(d_model, epsilon=layer_norm_eps)
        self.norm2 = LayerNorm(d_model, epsilon=layer_norm_eps)
        self.norm3 = LayerNorm(d_model, epsilon=layer_norm_eps)
        self.dropout1 = Dropout(dropout, mode="upscale_in_train")
        self.dropout2 = Dropout(dropout, mode="upscale_in_train")
        self.dropout3 = Dropout(dropout, mode="upscale_in_train")
        self.activation = _activation(activation, "TransformerDecoderLayer")

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, cache=None):
        _check_3d(tgt, "tgt", "TransformerDecoderLayer")
        _check_3d(memory, "memory", "TransformerDecoderLayer")
        tgt_mask = _convert_attention_mask(tgt_mask, tgt.dtype)
        memory_mask = _convert_attention_mask(memory_mask, memory.dtype)
        residual = tgt
        if self.normalize_before:
            tgt = self.norm1(tgt)
        if cache is None:
            tgt = self.self_attn(tgt, tgt, tgt, tgt_mask, None)
        else:
            tgt, incremental = self.self_attn(tgt, tgt, tgt, tgt_mask, cache[0])
        tgt = residual + self.dropout1(tgt)
        if not self.normalize_before:
            tgt = self.norm1(tgt)
        residual = tgt
        if self.normalize_before:
            tgt = self.norm2(tgt)
        if cache is None:
            tgt = self.cross_attn(tgt, memory, memory, memory_mask, None)
        else:
            tgt, static = self.cross_attn(tgt, memory, memory, memory_mask, cache[1])
        tgt = residual + self.dropout2(tgt)
        if not self.normalize_before:
            tgt = self.norm2(tgt)
        residual = tgt
        if self.normalize_before:
            tgt = self.norm3(tgt)
        tgt = self.linear2(self.dropout(self.activation(self.linear1(tgt))))
        tgt = residual + self.dropout3(tgt)
        if not self.normalize_before:
            tgt = self.norm3(tgt)
        return tgt if cache is None else (tgt, (incremental, static))

    def gen_cache(self, memory):
        incremental = self.self_attn.gen_cache(memory, type=MultiHeadAttention.Cache)
        static = self.cross_attn.gen_cache(memory, memory, type=MultiHeadAttention.StaticCache)
        return incremental, static


class TransformerDecoder(Layer):
    """``num_layers`` decoder layers in sequence, then ``norm`` if given."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers, "TransformerDecoder")
        self.num_layers = int(num_layers)
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, cache=None):
        tgt_mask = _convert_attention_mask(tgt_mask, tgt.dtype)
        memory_mask = _convert_attention_mask(memory_mask, memory.dtype)
        out = tgt
        new_caches = []
        for i, layer in enumerate(self.layers):
            if cache is None:
                out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
            else:
                out, c = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask, cache=cache[i])
                new_caches.append(c)
        if self.norm is not None:
            out = self.norm(out)
        return out if cache is None else (out, new_caches)

    def gen_cache(self, memory, do_zip=False):
        cache = [layer.gen_cache(memory) for layer in self.layers]
        return list(zip(*cache)) if do_zip else cache


def _split_attrs(attr):
    """Transformer's ``weight_attr`` / ``bias_attr`` -> (encoder attrs, decoder attrs)."""
    if isinstance(attr, (list, tuple)):
        if len(attr) == 1:
            return [attr[0]] * 2, [attr[0]] * 3
        if len(attr) == 2:
            return list(attr), [attr[0], attr[0], attr[-1]]
        if len(attr) == 3:
            return [attr[0], attr[-1]], list(attr)
        raise ValueError(f"ddg.nn.Transformer: weight_attr/bias_attr lists need 1, 2 or 3 entries, got {len(attr)}")
    return attr, attr


class Transformer(Layer):
    """Encoder-decoder transformer (Vaswani et al.): ``forward(src, tgt, src_mask=None,
    tgt_mask=None, memory_mask=None)`` -> ``[batch, tgt_len, d_model]``."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", attn_dropout=None, act_dropout=None, normalize_before=False,
                 weight_attr=None, bias_attr=None, custom_encoder=None, custom_decoder=None):
        super().__init__()
        enc_w, dec_w = _split_attrs(weight_attr)
        enc_b, dec_b = _split_attrs(bias_attr)
        kw = dict(dropout=dropout, activation=activation, attn_dropout=attn_dropout, act_dropout=act_dropout,
                  normalize_before=normalize_before)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, weight_attr=enc_w, bias_attr=enc_b,
                                            **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, LayerNorm(d_model))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, weight_attr=dec_w, bias_attr=dec_b,
                                            **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, LayerNorm(d_model))
        self.d_model, self.nhead = d_model, nhead

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None):
        src_mask = _convert_attention_mask(src_mask, src.dtype)
        memory = self.encoder(src, src_mask=src_mask)
        tgt_mask = _convert_attention_mask(tgt_mask, tgt.dtype)
        memory_mask = _convert_attention_mask(memory_mask, memory.dtype)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)

    def generate_square_subsequent_mask(self, length):
        """``[length, length]`` float mask: 0 on and below the diagonal, -inf above it."""
        length = int(length.item() if isinstance(length, Tensor) else length)
        mask = np.triu(np.full([length, length], -np.inf), 1).astype(default_float())
        return Tensor._wrap(move_array(mask, current_place()))
