"""Paddle's fused layers (``incubate.nn``), with Paddle's parameter names and shapes (so a
Paddle state_dict loads), over ``ddg.incubate.nn.functional``."""
from ...nn import initializer as I
from ...nn.functional.attention import _convert_attention_mask
from ...nn.layer.layers import Layer
from . import functional as IF

__all__ = ["FusedLinear", "FusedDropoutAdd", "FusedBiasDropoutResidualLayerNorm", "FusedFeedForward",
           "FusedMultiHeadAttention", "FusedTransformerEncoderLayer"]


class FusedLinear(Layer):
    """``x @ weight + bias``; ``weight`` is [in, out], or [out, in] with ``transpose_weight``."""

    def __init__(self, in_features, out_features, weight_attr=None, bias_attr=None, transpose_weight=False,
                 name=None):
        super().__init__()
        shape = [out_features, in_features] if transpose_weight else [in_features, out_features]
        self.weight = self.create_parameter(shape, attr=weight_attr)
        self.bias = self.create_parameter([out_features], attr=bias_attr, is_bias=True)
        self.transpose_weight, self.name = transpose_weight, name

    def forward(self, input):  # noqa: A002
        return IF.fused_linear(input, self.weight, self.bias, self.transpose_weight)


class FusedDropoutAdd(Layer):
    """``dropout(x, p) + y``."""

    def __init__(self, p=0.5, mode="upscale_in_train", name=None):
        super().__init__()
        self.p, self.mode, self.name = p, mode, name

    def forward(self, x, y):
        return IF.fused_dropout_add(x, y, self.p, self.training, self.mode)

    def extra_repr(self):
        return f"p={self.p}, mode={self.mode}"


class FusedBiasDropoutResidualLayerNorm(Layer):
    """``layer_norm(residual + dropout(x + linear_bias))`` with ``ln_scale``/``ln_bias``."""

    def __init__(self, embed_dim, dropout_rate=0.5, weight_attr=None, bias_attr=None, epsilon=1e-5, name=None):
        super().__init__()
        if embed_dim <= 0:
            raise ValueError(f"ddg.incubate.nn.FusedBiasDropoutResidualLayerNorm: embed_dim must be positive, got "
                             f"{embed_dim}")
        self._bias_attr, self._weight_attr = bias_attr, weight_attr
        self.embed_dim, self.dropout_rate, self._epsilon, self.name = embed_dim, dropout_rate, epsilon, name
        self.linear_bias = self.create_parameter([embed_dim], attr=bias_attr, is_bias=True)
        self.ln_scale = self.create_parameter([embed_dim], attr=weight_attr, default_initializer=I.Constant(1.0))
        self.ln_bias = self.create_parameter([embed_dim], attr=bias_attr, is_bias=True)

    def forward(self, x, residual):
        return IF.fused_bias_dropout_residual_layer_norm(x, residual, self.linear_bias, self.ln_scale, self.ln_bias,
                                                         self.dropout_rate, self._epsilon, self.training)


class FusedFeedForward(Layer):
    """The transformer feed-forward block (see ``functional.fused_feedforward``), its
    parameters named as Paddle names them (``_linear1_weight``... ``_ln1_*`` before,
    ``_ln2_*`` after)."""

    def __init__(self, d_model, dim_feedforward, dropout_rate=0.1, epsilon=1e-05, activation="relu",
                 act_dropout_rate=None, normalize_before=False, linear1_weight_attr=None, linear1_bias_attr=None,
                 linear2_weight_attr=None, linear2_bias_attr=None, ln1_scale_attr=None, ln1_bias_attr=None,
                 ln2_scale_attr=None, ln2_bias_attr=None, nranks=1, ring_id=-1, name=None):
        super().__init__()
        if d_model <= 0 or dim_feedforward <= 0:
            raise ValueError(f"ddg.incubate.nn.FusedFeedForward: d_model and dim_feedforward must be positive, got "
                             f"{d_model} and {dim_feedforward}")
        if nranks != 1:
            raise ValueError(f"ddg.incubate.nn.FusedFeedForward: nranks={nranks} (tensor model parallel) needs "
                             f"Paddle's fleet; ddg runs data parallel (ddg.DataParallel)")
        self._d_model, self._dim_feedforward = d_model, dim_feedforward
        self._dropout_rate = dropout_rate
        self._act_dropout_rate = dropout_rate if act_dropout_rate is None else act_dropout_rate
        self._act_method, self._normalize_before, self._epsilon = activation, normalize_before, epsilon
        self._ring_id, self.name = ring_id, name
        self._linear1_weight = self.create_parameter([d_model, dim_feedforward], attr=linear1_weight_attr)
        self._linear1_bias = self.create_parameter([dim_feedforward], attr=linear1_bias_attr, is_bias=True)
        self._linear2_weight = self.create_parameter([dim_feedforward, d_model], attr=linear2_weight_attr)
        self._linear2_bias = self.create_parameter([d_model], attr=linear2_bias_attr, is_bias=True)
        one = I.Constant(1.0)
        if normalize_before:
            self._ln1_scale = self.create_parameter([d_model], attr=ln1_scale_attr, default_initializer=one)
            self._ln1_bias = self.create_parameter([d_model], attr=ln1_bias_attr, is_bias=True)
            self._ln2_scale = self._ln2_bias = None
        else:
            self._ln1_scale = self._ln1_bias = None
            self._ln2_scale = self.create_parameter([d_model], attr=ln2_scale_attr, default_initializer=one)
            self._ln2_bias = self.create_parameter([d_model], attr=ln2_bias_attr, is_bias=True)

    def forward(self, src, cache=None):
        return IF.fused_feedforward(src, self._linear1_weight, self._linear2_weight, self._linear1_bias,
                                    self._linear2_bias, self._ln1_scale, self._ln1_bias, self._ln2_scale,
                                    self._ln2_bias, self._act_dropout_rate, self._dropout_rate, self._act_method,
                                    self._epsilon, self._epsilon, self._normalize_before, self.training)


class FusedMultiHeadAttention(Layer):
    """Self-attention with one packed ``qkv_weight`` [3, num_heads, head_dim, embed_dim] (or
    [embed_dim, 3 * embed_dim] with ``transpose_qkv_wb``), ``linear_weight`` [embed_dim,
    embed_dim], and a layer norm before (``pre_ln_*``, ``normalize_before``) or after
    (``ln_*``); see ``functional.fused_multi_head_attention``."""

    def __init__(self, embed_dim, num_heads, dropout_rate=0.5, attn_dropout_rate=0.5, kdim=None, vdim=None,
                 normalize_before=False, need_weights=False, qkv_weight_attr=None, qkv_bias_attr=None,
                 linear_weight_attr=None, linear_bias_attr=None, pre_ln_scale_attr=None, pre_ln_bias_attr=None,
                 ln_scale_attr=None, ln_bias_attr=None, epsilon=1e-5, nranks=1, ring_id=-1, transpose_qkv_wb=False,
                 name=None):
        super().__init__()
        cls = "ddg.incubate.nn.FusedMultiHeadAttention"
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"{cls}: num_heads={num_heads} must divide embed_dim={embed_dim}")
        if need_weights:
            raise ValueError(f"{cls}: need_weights=True is not supported (as in Paddle); use ddg.nn.MultiHeadAttention")
        if nranks != 1:
            raise ValueError(f"{cls}: nranks={nranks} (tensor model parallel) needs Paddle's fleet; ddg runs data "
                             f"parallel (ddg.DataParallel)")
        for what, d in (("kdim", kdim), ("vdim", vdim)):
            if d is not None and d != embed_dim:
                raise ValueError(f"{cls}: {what}={d} must equal embed_dim={embed_dim} (self-attention)")
        self.normalize_before, self._epsilon, self._ring_id = normalize_before, epsilon, ring_id
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.kdim, self.vdim, self.need_weights = kdim, vdim, need_weights
        self.transpose_qkv_wb = transpose_qkv_wb
        if transpose_qkv_wb:
            wshape, bshape = [embed_dim, 3 * embed_dim], [3 * embed_dim]
        else:
            wshape, bshape = [3, num_heads, self.head_dim, embed_dim], [3, num_heads, self.head_dim]
        self.qkv_weight = self.create_parameter(wshape, attr=qkv_weight_attr)
        self.qkv_bias = self.create_parameter(bshape, attr=qkv_bias_attr, is_bias=True)
        self.linear_weight = self.create_parameter([embed_dim, embed_dim], attr=linear_weight_attr)
        self.linear_bias = self.create_parameter([embed_dim], attr=linear_bias_attr, is_bias=True)
        one = I.Constant(1.0)
        if normalize_before:
            self.pre_ln_scale = self.create_parameter([embed_dim], attr=pre_ln_scale_attr, default_initializer=one)
            self.pre_ln_bias = self.create_parameter([embed_dim], attr=pre_ln_bias_attr, is_bias=True)
            self.ln_scale = self.ln_bias = None
        else:
            self.pre_ln_scale = self.pre_ln_bias = None
            self.ln_scale = self.create_parameter([embed_dim], attr=ln_scale_attr, default_initializer=one)
            self.ln_bias = self.create_parameter([embed_dim], attr=ln_bias_attr, is_bias=True)
        self.dropout_rate, self.attn_dropout_rate, self.name = dropout_rate, attn_dropout_rate, name

    def forward(self, query, key=None, value=None, attn_mask=None, cache=None):
        if attn_mask is not None:   # a bool/int mask marks what may be attended to (Paddle's rule)
            attn_mask = _convert_attention_mask(attn_mask, query.dtype)
        return IF.fused_multi_head_attention(query, self.qkv_weight, self.linear_weight, self.normalize_before,
                                             self.pre_ln_scale, self.pre_ln_bias, self.ln_scale, self.ln_bias,
                                             self._epsilon, self.qkv_bias, self.linear_bias, cache, attn_mask,
                                             self.dropout_rate, self.attn_dropout_rate, self._epsilon, self.training,
                                             num_heads=self.num_heads, transpose_qkv_wb=self.transpose_qkv_wb)


class FusedTransformerEncoderLayer(Layer):
    """``FusedMultiHeadAttention`` (``fused_attn``) then ``FusedFeedForward`` (``ffn``)."""

    def __init__(self, d_model, nhead, dim_feedforward, dropout_rate=0.1, activation="relu", attn_dropout_rate=None,
                 act_dropout_rate=None, normalize_before=False, weight_attr=None, bias_attr=None):
        super().__init__()
        self._config = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward, dropout_rate=dropout_rate,
                            activation=activation, attn_dropout_rate=attn_dropout_rate,
                            act_dropout_rate=act_dropout_rate, normalize_before=normalize_before,
                            weight_attr=weight_attr, bias_attr=bias_attr)
        attn_dropout_rate = dropout_rate if attn_dropout_rate is None else attn_dropout_rate
        act_dropout_rate = dropout_rate if act_dropout_rate is None else act_dropout_rate
        self.normalize_before = normalize_before
        w = weight_attr if isinstance(weight_attr, (list, tuple)) else [weight_attr] * 2
        b = bias_attr if isinstance(bias_attr, (list, tuple)) else [bias_attr] * 2
        if len(w) != 2 or len(b) != 2:
            raise ValueError("ddg.incubate.nn.FusedTransformerEncoderLayer: weight_attr and bias_attr lists need 2 "
                             "entries (attention, feed-forward)")
        self.fused_attn = FusedMultiHeadAttention(
            d_model, nhead, dropout_rate=dropout_rate, attn_dropout_rate=attn_dropout_rate,
            normalize_before=normalize_before, qkv_weight_attr=w[0], qkv_bias_attr=b[0], linear_weight_attr=w[0],
            linear_bias_attr=b[0], pre_ln_scale_attr=w[0], pre_ln_bias_attr=b[0], ln_scale_attr=w[0],
            ln_bias_attr=b[0])
        self.ffn = FusedFeedForward(d_model, dim_feedforward, dropout_rate=dropout_rate, activation=activation,
                                    act_dropout_rate=act_dropout_rate, normalize_before=normalize_before,
                                    linear1_weight_attr=w[1], linear1_bias_attr=b[1], linear2_weight_attr=w[1],
                                    linear2_bias_attr=b[1])

    def forward(self, src, src_mask=None, cache=None):
        if cache is not None:
            raise NotImplementedError("ddg.incubate.nn.FusedTransformerEncoderLayer: cache is not supported; use "
                                      "ddg.nn.TransformerEncoderLayer")
        return self.ffn(self.fused_attn(src, attn_mask=src_mask))
