"""The default op lists of ``ddg.amp.auto_cast``, by Paddle's op names (the same sets as
Paddle 3.3.1's ``paddle.amp.white_list()``/``black_list()``, so custom lists written for
Paddle mean the same here). ``ddg/autograd/autocast.py`` maps each name to the ddg ops
that implement it; names of ops that ddg has no primitive for simply match nothing."""
import copy

# float16 and bfloat16 share these, except that bfloat16 leaves out a few fused ops
_COMMON_WHITE = {"conv2d", "einsum", "matmul", "matmul_v2", "max_pool2d_with_index", "mul", "fused_gemm_epilogue",
                 "linear_v2", "flash_attn", "fused_rotary_position_embedding"}
FP16_WHITE_LIST = _COMMON_WHITE | {"fused_attention", "fused_feedforward", "fake_quantize_dequantize_abs_max",
                                   "fake_quantize_dequantize_moving_average_abs_max"}
BF16_WHITE_LIST = set(_COMMON_WHITE)

# ops whose low-precision results are numerically unsafe: they run in float32 at O1
FP16_BLACK_LIST = {
    "tan", "acos", "asin", "sinh", "cosh", "atanh", "tanh_shrink", "erfinv", "exp", "expm1", "log",
    "log10", "log2", "reciprocal", "rsqrt", "pow", "square", "reduce_sum", "mean", "reduce_mean", "reduce_prod",
    "cumprod", "cumsum", "dist", "pnorm", "frobenius_norm", "renorm", "group_norm", "layer_norm", "softmax",
    "softmin", "softplus", "log_softmax", "softmax_with_cross_entropy", "sigmoid_cross_entropy_with_logits",
    "c_softmax_with_cross_entropy", "c_softmax_with_multi_label_cross_entropy", "cross_entropy",
    "cross_entropy2", "nll_loss", "huber_loss", "triplet_margin_loss", "log_loss", "hsigmoid_loss",
    "margin_cross_entropy",
}
# ops without low-precision kernels in Paddle (interpolation, embedding lookup, scatter):
# float32 at O1 and O2
EXTRA_BLACK_LIST = {"lookup_table", "lookup_table_v2", "scatter", "linear_interp_v2", "nearest_interp_v2",
                    "bilinear_interp_v2", "bicubic_interp_v2", "trilinear_interp_v2"}
BF16_BLACK_LIST = set(FP16_BLACK_LIST)


def white_list():
    """``{dtype: {level: set of op names}}``: the ops that run in low precision."""
    return {"float16": {"OD": set(FP16_WHITE_LIST), "O1": set(FP16_WHITE_LIST), "O2": set(FP16_WHITE_LIST)},
            "bfloat16": {"OD": set(BF16_WHITE_LIST), "O1": set(BF16_WHITE_LIST), "O2": set(BF16_WHITE_LIST)}}


def black_list():
    """``{dtype: {level: set of op names}}``: the ops that run in float32."""
    return {"float16": {"OD": set(), "O1": FP16_BLACK_LIST | EXTRA_BLACK_LIST, "O2": set(EXTRA_BLACK_LIST)},
            "bfloat16": {"OD": set(), "O1": BF16_BLACK_LIST | EXTRA_BLACK_LIST, "O2": set(EXTRA_BLACK_LIST)}}


def _lists(level, dtype, custom_white_list=None, custom_black_list=None):
    """The white and black lists of one context: the defaults with the custom lists applied
    (a custom entry moves an op from the other list)."""
    if level == "O0":
        return set(), set()
    white = copy.copy(white_list()[dtype][level])
    black = copy.copy(black_list()[dtype][level])
    cw = set(custom_white_list or ())
    cb = set(custom_black_list or ())
    both = cw & cb
    if both:
        raise ValueError(f"ddg.amp.auto_cast: custom_white_list and custom_black_list both name {sorted(map(str, both))}")
    white = (white - cb) | cw
    black = (black - cw) | cb
    return white, black
