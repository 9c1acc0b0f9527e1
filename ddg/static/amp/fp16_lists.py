"""Paddle 3.3.1's static mixed-precision op lists (op type names) and
``AutoMixedPrecisionLists`` over them (see ``ddg.static.amp``)."""

# Paddle 3.3.1's static lists (paddle/static/amp/fp16_lists.py), float16
WHITE_LIST = frozenset({
    'conv2d', 'einsum', 'fake_quantize_dequantize_abs_max', 'fake_quantize_dequantize_moving_average_abs_max',
    'flash_attn', 'fused_attention', 'fused_bn_add_activation', 'fused_feedforward', 'fused_gemm_epilogue',
    'fused_rotary_position_embedding', 'linear_v2', 'matmul', 'matmul_v2', 'max_pool2d_with_index', 'mul',
    'resnet_unit',
})
# bfloat16 leaves out the ops without a bfloat16 kernel
BF16_WHITE_LIST = WHITE_LIST - {'fused_bn_add_activation', 'resnet_unit'}
BLACK_LIST = frozenset({
    'acos', 'asin', 'atanh', 'bicubic_interp_v2', 'bilinear_interp_v2', 'c_softmax_with_cross_entropy',
    'c_softmax_with_multi_label_cross_entropy', 'cosh', 'cross_entropy', 'cross_entropy2', 'cumprod', 'cumsum',
    'dist', 'erfinv', 'exp', 'expm1', 'frobenius_norm', 'group_norm', 'hsigmoid_loss', 'huber_loss',
    'layer_norm', 'linear_interp_v2', 'log', 'log10', 'log2', 'log_loss', 'log_softmax', 'lookup_table',
    'lookup_table_v2', 'margin_cross_entropy', 'mean', 'nearest_interp_v2', 'nll_loss', 'pnorm', 'pow',
    'reciprocal', 'reduce_mean', 'reduce_prod', 'reduce_sum', 'renorm', 'rsqrt', 'scatter',
    'sigmoid_cross_entropy_with_logits', 'sinh', 'softmax', 'softmax_with_cross_entropy', 'softmin',
    'softplus', 'square', 'tan', 'tanh_shrink', 'trilinear_interp_v2', 'triplet_margin_loss',
})
GRAY_LIST = frozenset({
    'all_reduce', 'batch_norm', 'c_concat', 'c_identity', 'cast', 'concat', 'dropout', 'elementwise_add',
    'elementwise_div', 'elementwise_floordiv', 'elementwise_max', 'elementwise_min', 'elementwise_mod',
    'elementwise_mul', 'elementwise_pow', 'elementwise_sub', 'fill_constant', 'flatten2', 'fused_attention',
    'fused_bn_add_activation', 'fused_feedforward', 'fused_multi_transformer', 'gather', 'gaussian_random',
    'get_tensor_from_selected_rows', 'layer_norm', 'leaky_relu', 'pool2d', 'pool3d', 'rank', 'relu', 'relu6',
    'reshape2', 'scale', 'sigmoid', 'sign', 'slice', 'soft_relu', 'split', 'stack', 'tanh', 'top_k',
    'transpose2', 'uniform_random', 'uniform_random_batch_size_like', 'unstack',
})



def _move(ops, into, *others):
    for op in ops:
        for o in others:
            o.discard(op)
        into.add(op)


class AutoMixedPrecisionLists:
    """Paddle's static op lists for ``dtype`` ('float16' or 'bfloat16'), with
    ``custom_white_list`` moved into ``white_list`` and ``custom_black_list`` into
    ``black_list`` (an op in both is an error, as in Paddle)."""

    def __init__(self, custom_white_list=None, custom_black_list=None, custom_black_varnames=None,
                 dtype="float16"):
        if dtype not in ("float16", "bfloat16"):
            raise ValueError(f"ddg.static.amp.AutoMixedPrecisionLists: dtype must be 'float16' or 'bfloat16', "
                             f"got {dtype!r}")
        self.amp_dtype = dtype
        self._custom_white_list, self._custom_black_list = custom_white_list, custom_black_list
        self.white_list = set(WHITE_LIST if dtype == "float16" else BF16_WHITE_LIST)
        self.black_list = set(BLACK_LIST)
        self.gray_list = set(GRAY_LIST)
        self.unsupported_list = set()
        self.black_varnames = set(custom_black_varnames or ())
        if custom_white_list and custom_black_list:
            both = set(custom_white_list) & set(custom_black_list)
            if both:
                raise ValueError(f"ddg.static.amp.AutoMixedPrecisionLists: custom_white_list and custom_black_list "
                                 f"both name {sorted(both)}")
        _move(custom_white_list or (), self.white_list, self.black_list, self.gray_list)
        _move(custom_black_list or (), self.black_list, self.white_list, self.gray_list)
        self.all_list = self.white_list | self.black_list | self.gray_list


CustomOpLists = AutoMixedPrecisionLists
