"""The default op lists of ``ddg.amp.auto_cast``, by Paddle's op names (the same sets as
Paddle 3.3.1's ``paddle.amp.white_list()``/``black_list()``, so custom lists written for
Paddle mean the same here), generated from the ``amp`` entries of the Tensor API table
(``ddg/autograd/tensor_table.py``), which also map each name to the ddg ops that implement
it; names of ops that ddg has no primitive for simply match nothing."""
import copy

from ..autograd import tensor_table as _T

# float16 and bfloat16 share the white list, except that bfloat16 leaves out a few fused ops;
# black: ops whose low-precision results are numerically unsafe (float32 at O1); always
# black: ops without low-precision kernels in Paddle (interpolation, embedding lookup,
# scatter), float32 at O1 and O2. Each op's entry sits in its row of the Tensor API table.
BF16_WHITE_LIST = _T.amp_names(_T.WHITE)
FP16_WHITE_LIST = BF16_WHITE_LIST | _T.amp_names(_T.WHITE_FP16)
FP16_BLACK_LIST = _T.amp_names(_T.BLACK)
EXTRA_BLACK_LIST = _T.amp_names(_T.BLACK_ALWAYS)
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
