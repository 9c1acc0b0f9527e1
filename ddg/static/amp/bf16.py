"""``ddg.static.amp.bf16``: Paddle's static bfloat16 names (``bf16_guard``, the op lists,
``decorate_bf16``), which in dygraph change nothing (see ``ddg.static.amp``)."""
import contextlib

from ..program import name_scope
from .decorator import decorate

__all__ = ["AutoMixedPrecisionListsBF16", "bf16_guard", "decorate_bf16"]

BF16_LIST = frozenset({
    'conv2d', 'einsum', 'flash_attn', 'fused_gemm_epilogue', 'fused_rotary_position_embedding', 'linear_v2',
    'matmul', 'matmul_v2', 'max_pool2d_with_index', 'mul',
})
FP32_LIST = frozenset({
    'acos', 'asin', 'atanh', 'c_softmax_with_cross_entropy', 'c_softmax_with_multi_label_cross_entropy',
    'cosh', 'cross_entropy', 'cross_entropy2', 'cumprod', 'cumsum', 'dist', 'erfinv', 'exp', 'expm1',
    'fake_quantize_dequantize_abs_max', 'fake_quantize_dequantize_moving_average_abs_max', 'frobenius_norm',
    'group_norm', 'hsigmoid_loss', 'huber_loss', 'log', 'log10', 'log2', 'log_loss', 'log_softmax',
    'margin_cross_entropy', 'mean', 'nll_loss', 'pnorm', 'pow', 'reciprocal', 'reduce_mean', 'reduce_prod',
    'reduce_sum', 'renorm', 'rsqrt', 'sigmoid_cross_entropy_with_logits', 'sinh', 'softmax',
    'softmax_with_cross_entropy', 'softmin', 'softplus', 'square', 'tan', 'tanh_shrink', 'triplet_margin_loss',
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
BF16_INITIALIZER_LIST = frozenset({'fill_constant', 'uniform_random'})


class AutoMixedPrecisionListsBF16:
    """Paddle's static bfloat16 op lists with ``custom_bf16_list`` moved into ``bf16_list``
    and ``custom_fp32_list`` into ``fp32_list``."""

    def __init__(self, custom_bf16_list=None, custom_fp32_list=None, custom_fp32_varnames=None):
        self._custom_bf16_list, self._custom_fp32_list = custom_bf16_list, custom_fp32_list
        self.bf16_list, self.fp32_list = set(BF16_LIST), set(FP32_LIST)
        self.gray_list, self.bf16_initializer_list = set(GRAY_LIST), set(BF16_INITIALIZER_LIST)
        self.unsupported_list = set()
        self.fp32_varnames = custom_fp32_varnames
        if custom_bf16_list and custom_fp32_list:
            both = set(custom_bf16_list) & set(custom_fp32_list)
            if both:
                raise ValueError(f"ddg.static.amp.bf16.AutoMixedPrecisionListsBF16: custom_bf16_list and "
                                 f"custom_fp32_list both name {sorted(both)}")
        for op in custom_bf16_list or ():
            self.fp32_list.discard(op)
            self.gray_list.discard(op)
            self.bf16_list.add(op)
        for op in custom_fp32_list or ():
            self.bf16_list.discard(op)
            self.gray_list.discard(op)
            self.fp32_list.add(op)


@contextlib.contextmanager
def bf16_guard():
    """Marks ops for bfloat16 in a static program; in dygraph a name scope that changes nothing."""
    with name_scope(prefix="__use_bf16__"):
        yield


def decorate_bf16(optimizer, amp_lists=None, use_pure_bf16=False, use_bf16_guard=None):
    """Wraps ``optimizer`` as ``ddg.static.amp.decorate`` does, for bfloat16."""
    return decorate(optimizer, level="O2" if use_pure_bf16 else "O1", dtype="bfloat16")
