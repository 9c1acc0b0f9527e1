"""The Tensor API in one table.

Each ``Row`` names a function and the forms it has:

* ``FN``: exported by ``ddg`` (``ddg.exp``);
* ``METHOD``: a ``Tensor`` method (``x.exp()``; ``method=`` when the method is another
  callable than the function, e.g. ``x.concat(y)`` beside ``ddg.concat([x, y])``);
* ``INPLACE``: the in-place method ``x.exp_()``, built by
  ``tensor_methods.inplace_method`` (``inplace=`` says how it writes, or gives the method);
* ``INPLACE_FN``: the in-place function ``ddg.exp_(x)``;
* ``ops``: the operators it implements (``__add__``; ``__radd__`` swaps the operands,
  ``__iadd__`` is ``b = b + x``, see ``_augmented``);
* ``amp``: the Paddle op names that ``ddg.amp.auto_cast`` lists may use for it, each with
  the ddg ``Function`` classes that implement it and the default list it sits on.

``install()`` attaches every method, in-place form and operator to ``Tensor`` (the only
place that does), ``exports()`` gives ``ddg``'s functions, and ``amp_names()`` the AMP
lists and the op-name map of ``ddg.amp`` (``AMP_ONLY`` adds the Paddle op names of the
nn layers and of fused ops, which are no Tensor function). Adding an elementwise op is
its ``Function`` in ``ops/`` plus one row here.
"""
from typing import Callable, NamedTuple

from ..tensor import creation as _creation
from ..tensor.tensor import Tensor
from .composite import arithmetic as AR
from .composite import creation as CR
from .composite import indexing as IX
from .composite import matrices as MX
from .composite import products as PR
from .composite import queries as Q
from .composite import random as RN
from .composite import shapes as SH
from .composite import sorting as SO
from .composite import statistics as ST
from . import grad_mode
from . import tensor_methods as TM
from .ops import elementwise as E
from .ops import fft as FFT
from .ops import linalg as L
from .ops import logic as G
from .ops import movement as M
from .ops import reduce as R
from .ops import sort as S
from .ops import special as SP
from .tensor_methods import ADOPT, KEEP_DTYPE, UFUNC, VIEW

FN, METHOD, INPLACE, INPLACE_FN = 1, 2, 4, 8

# default AMP lists (Paddle's): low precision for float16 and bfloat16, for float16 only,
# float32 at O1, float32 at O1 and O2 (no low-precision kernel in Paddle)
WHITE, WHITE_FP16, BLACK, BLACK_ALWAYS = "white", "white_fp16", "black", "black_always"


class Amp(NamedTuple):
    """A Paddle op name, the ddg Function classes it matches (space separated; empty for an
    op ddg has no primitive for) and the default list it is on (None: on none)."""
    op: str
    classes: str = ""
    list: str = None


class Row(NamedTuple):
    name: str
    impl: Callable
    forms: int
    method: Callable = None      # the Tensor method when it is not ``impl``
    inplace: object = ADOPT      # an in-place kind of tensor_methods, or the in-place method itself
    inplace_fn: Callable = None  # the in-place function when it is not built from the method
    ops: tuple = ()
    amp: tuple = ()


# shorthands for the usual sets of forms, and for ``Row`` in the table below
F, FM, FMI, ALL = FN, FN | METHOD, FN | METHOD | INPLACE, FN | METHOD | INPLACE | INPLACE_FN
_ = Row
ROWS = (
    # -- arithmetic (ops/elementwise.py) --
    _("add", E.add, FMI, inplace=UFUNC, ops=("__add__", "__radd__", "__iadd__"),
      amp=(Amp("elementwise_add", "Add AddScalar"),)),
    _("subtract", E.subtract, FMI, inplace=UFUNC, ops=("__sub__", "__rsub__", "__isub__"),
      amp=(Amp("elementwise_sub", "Sub RSubScalar"),)),
    _("multiply", E.multiply, ALL, inplace=UFUNC, ops=("__mul__", "__rmul__", "__imul__"),
      amp=(Amp("elementwise_mul", "Mul MulScalar"),)),
    _("divide", E.divide, ALL, inplace=UFUNC, ops=("__truediv__", "__rtruediv__", "__itruediv__"),
      amp=(Amp("elementwise_div", "Div DivScalar RDivScalar"),)),
    _("floor_divide", E.floor_divide, ALL, ops=("__floordiv__", "__rfloordiv__")),
    _("remainder", E.remainder, ALL, ops=("__mod__", "__rmod__")),
    _("mod", E.mod, ALL),
    _("floor_mod", E.floor_mod, ALL),
    _("pow", E.pow, ALL, inplace=TM.pow_, ops=("__pow__", "__rpow__"),
      amp=(Amp("pow", "Pow PowScalar RPowScalar", BLACK), Amp("elementwise_pow", "Pow"))),
    _("maximum", E.maximum, FM),
    _("minimum", E.minimum, FM),
    _("neg", E.neg, ALL, inplace=KEEP_DTYPE, ops=("__neg__",)),
    _("abs", E.abs, ALL, inplace=KEEP_DTYPE, ops=("__abs__",)),
    _("sign", E.sign, FM),
    _("clip", E.clip, FMI, inplace=TM.clip_),
    _("clamp", E.clamp, FMI, inplace=TM.clip_),
    _("where", E.where, ALL, inplace=TM.where_method, inplace_fn=TM.where_),
    _("cast", E.cast, ALL, method=TM.astype),
    _("astype", TM.astype, METHOD),
    # -- elementwise math --
    _("exp", E.exp, FMI, inplace=KEEP_DTYPE, amp=(Amp("exp", "Exp", BLACK),)),
    _("expm1", E.expm1, ALL, amp=(Amp("expm1", "Expm1", BLACK),)),
    _("log", E.log, ALL, inplace=KEEP_DTYPE, amp=(Amp("log", "Log", BLACK),)),
    _("log2", E.log2, ALL, amp=(Amp("log2", "Log2", BLACK),)),
    _("log10", E.log10, ALL, amp=(Amp("log10", "Log10", BLACK),)),
    _("log1p", E.log1p, ALL, amp=(Amp("log1p", "Log1p"),)),
    _("sqrt", E.sqrt, FMI, inplace=KEEP_DTYPE, amp=(Amp("sqrt", "Sqrt"),)),
    _("rsqrt", E.rsqrt, FMI, inplace=KEEP_DTYPE, amp=(Amp("rsqrt", "Rsqrt", BLACK),)),
    _("square", E.square, ALL, inplace=KEEP_DTYPE, amp=(Amp("square", "Square", BLACK),)),
    _("reciprocal", E.reciprocal, FMI, inplace=KEEP_DTYPE, amp=(Amp("reciprocal", "Reciprocal", BLACK),)),
    _("sin", E.sin, ALL, inplace=KEEP_DTYPE),
    _("cos", E.cos, ALL, inplace=KEEP_DTYPE),
    _("tan", E.tan, ALL, amp=(Amp("tan", "Tan", BLACK),)),
    _("asin", E.asin, ALL, amp=(Amp("asin", "Asin", BLACK),)),
    _("acos", E.acos, ALL, amp=(Amp("acos", "Acos", BLACK),)),
    _("atan", E.atan, ALL),
    _("sinh", E.sinh, ALL, amp=(Amp("sinh", "Sinh", BLACK),)),
    _("cosh", E.cosh, ALL, amp=(Amp("cosh", "Cosh", BLACK),)),
    _("tanh", E.tanh, ALL, inplace=KEEP_DTYPE, amp=(Amp("tanh", "Tanh"),)),
    _("asinh", E.asinh, ALL),
    _("acosh", E.acosh, ALL),
    _("atanh", E.atanh, ALL, amp=(Amp("atanh", "Atanh", BLACK),)),
    _("sigmoid", E.sigmoid, FMI, inplace=KEEP_DTYPE, amp=(Amp("sigmoid", "Sigmoid"),)),
    _("relu", E.relu, METHOD, amp=(Amp("relu", "Relu"),)),
    _("erf", E.erf, ALL),
    _("floor", E.floor, FMI, inplace=KEEP_DTYPE),
    _("ceil", E.ceil, FMI, inplace=KEEP_DTYPE),
    _("round", E.round, FMI, inplace=KEEP_DTYPE),
    _("trunc", E.trunc, ALL),
    # -- special functions (ops/special.py) --
    _("lgamma", SP.lgamma, ALL),
    _("digamma", SP.digamma, ALL),
    _("polygamma", SP.polygamma, ALL),
    _("erfinv", SP.erfinv, FMI, amp=(Amp("erfinv", "", BLACK),)),
    _("i0", SP.i0, ALL),
    _("i0e", SP.i0e, FM),
    _("i1", SP.i1, FM),
    _("i1e", SP.i1e, FM),
    # -- comparisons and logic (ops/logic.py) --
    _("equal", G.equal, ALL, ops=("__eq__",)),
    _("not_equal", G.not_equal, ALL, ops=("__ne__",)),
    _("less_than", G.less_than, ALL, ops=("__lt__",)),
    _("less_equal", G.less_equal, ALL, ops=("__le__",)),
    _("greater_than", G.greater_than, ALL, ops=("__gt__",)),
    _("greater_equal", G.greater_equal, ALL, ops=("__ge__",)),
    _("logical_and", G.logical_and, ALL),
    _("logical_or", G.logical_or, ALL),
    _("logical_xor", G.logical_xor, ALL),
    _("logical_not", G.logical_not, ALL),
    # bitwise, as in Paddle: on bool tensors that is the logical operation
    _("bitwise_and", G.bitwise_and, ALL, ops=("__and__", "__rand__")),
    _("bitwise_or", G.bitwise_or, ALL, ops=("__or__", "__ror__")),
    _("bitwise_xor", G.bitwise_xor, ALL, ops=("__xor__", "__rxor__")),
    _("bitwise_not", G.bitwise_not, ALL, ops=("__invert__",)),
    _("isnan", G.isnan, FM),
    _("isinf", G.isinf, FM),
    _("isfinite", G.isfinite, FM),
    _("equal_all", G.equal_all, FM),
    _("allclose", G.allclose, FM),
    _("isclose", G.isclose, FM),
    _("nonzero", G.nonzero, FM),
    # -- products and linear algebra (ops/linalg.py) --
    _("matmul", L.matmul, FM, ops=("__matmul__", "__rmatmul__"),
      amp=(Amp("matmul", "MatMul", WHITE), Amp("matmul_v2", "MatMul", WHITE), Amp("mul", "MatMul", WHITE))),
    _("mm", L.mm, FM),
    _("bmm", L.bmm, FM, amp=(Amp("bmm", "MatMul"),)),
    _("einsum", L.einsum, F, amp=(Amp("einsum", "Einsum", WHITE),)),
    _("inverse", L.inverse, FM),
    _("solve", L.solve, METHOD),
    _("cholesky", L.cholesky, METHOD),
    _("eigvalsh", L.eigvalsh, METHOD),
    # -- reductions and scans (ops/reduce.py) --
    _("sum", R.sum, FM, amp=(Amp("reduce_sum", "Sum", BLACK), Amp("sum", "Sum"))),
    _("mean", R.mean, FM, amp=(Amp("mean", "Mean", BLACK), Amp("reduce_mean", "Mean", BLACK))),
    _("max", R.max, FM),
    _("min", R.min, FM),
    _("amax", R.amax, FM),
    _("amin", R.amin, FM),
    _("prod", R.prod, FM, amp=(Amp("reduce_prod", "Prod", BLACK),)),
    _("argmax", R.argmax, FM),
    _("argmin", R.argmin, FM),
    _("logsumexp", R.logsumexp, FM, amp=(Amp("logsumexp", "LogSumExp"),)),
    _("all", R.all, FM),
    _("any", R.any, FM),
    _("cumsum", R.cumsum, ALL, amp=(Amp("cumsum", "CumSum", BLACK),)),
    _("cumprod", R.cumprod, ALL, amp=(Amp("cumprod", "CumProd", BLACK),)),
    # -- shapes, indexing, moves (ops/movement.py) --
    _("getitem", M.getitem, 0, ops=("__getitem__",)),
    _("setitem", M.setitem, 0, ops=("__setitem__",)),
    _("positive", TM.positive, 0, ops=("__pos__",)),
    _("reshape", M.reshape, ALL, inplace=VIEW),
    _("view", SH.view, FM, method=M.reshape),
    _("transpose", M.transpose, ALL),
    _("flatten", M.flatten, FMI, inplace=VIEW),
    _("squeeze", M.squeeze, ALL, inplace=VIEW),
    _("unsqueeze", M.unsqueeze, ALL, inplace=VIEW),
    _("expand", M.expand, FM),
    _("expand_as", M.expand_as, FM),
    _("broadcast_to", M.broadcast_to, FM),
    _("broadcast_tensors", M.broadcast_tensors, FM, method=TM.broadcast_tensors),
    _("concat", M.concat, FM, method=TM.concat),
    _("cat", M.concat, F),
    _("stack", M.stack, FM, method=TM.stack),
    _("tile", M.tile, FM),
    _("flip", M.flip, FM),
    _("split", M.split, FM),
    _("chunk", M.chunk, FM),
    _("unbind", M.unbind, FM),
    _("gather", M.gather, FM),
    _("index_select", M.index_select, FM),
    _("take_along_axis", M.take_along_axis, FM),
    _("roll", M.roll, FM),
    _("masked_select", M.masked_select, FM),
    _("moveaxis", M.moveaxis, FM),
    _("numel", M.numel, FM),
    _("shape", M.shape, F),
    _("clone", M.clone, FM),
    _("scatter", M.scatter, ALL, amp=(Amp("scatter", "Scatter", BLACK_ALWAYS),)),
    _("scatter_nd_add", M.scatter_nd_add, FM),
    _("put_along_axis", M.put_along_axis, FMI),
    # -- sorting and counting (ops/sort.py) --
    _("argsort", S.argsort, FM),
    _("unique", S.unique, FM),
    _("bincount", S.bincount, FM),
    # -- complex parts (ops/fft.py) --
    _("real", FFT.real, FM),
    _("imag", FFT.imag, FM),
    _("conj", FFT.conj, FM),
    # -- statistics (composite/statistics.py) --
    _("var", ST.var, FM),
    _("std", ST.std, FM),
    _("count_nonzero", ST.count_nonzero, FM),
    _("diff", ST.diff, FM),
    _("trapezoid", ST.trapezoid, FM),
    _("cumulative_trapezoid", ST.cumulative_trapezoid, FM),
    _("logcumsumexp", ST.logcumsumexp, FM),
    _("cummax", ST.cummax, FM),
    _("cummin", ST.cummin, FM),
    _("nansum", ST.nansum, FM),
    _("nanmean", ST.nanmean, FM),
    _("kthvalue", ST.kthvalue, FM),
    _("quantile", ST.quantile, FM),
    _("nanquantile", ST.nanquantile, FM),
    _("median", ST.median, FM),
    _("nanmedian", ST.nanmedian, FM),
    _("mode", ST.mode, FM),
    _("cov", ST.cov, METHOD),
    _("corrcoef", ST.corrcoef, METHOD),
    _("histogram", ST.histogram, FM),
    # -- products and norms (composite/products.py) --
    _("dot", PR.dot, FM),
    _("outer", PR.outer, FM),
    _("kron", PR.kron, FM),
    _("norm", PR.norm, FM),
    _("addmm", PR.addmm, ALL),
    _("mv", PR.mv, FM),
    _("inner", PR.inner, FM),
    _("tensordot", PR.tensordot, FM),
    _("cross", PR.cross, FM),
    _("dist", PR.dist, FM, amp=(Amp("dist", "", BLACK),)),
    _("cdist", PR.cdist, FM),
    _("renorm", PR.renorm, ALL, amp=(Amp("renorm", "", BLACK),)),
    # -- diagonals and triangles (composite/matrices.py) --
    _("tril", MX.tril, ALL),
    _("triu", MX.triu, ALL),
    _("diagonal", MX.diagonal, FM),
    _("trace", MX.trace, FM),
    _("diag", MX.diag, FM),
    _("diagflat", MX.diagflat, FM),
    _("diag_embed", MX.diag_embed, FM),
    _("diagonal_scatter", MX.diagonal_scatter, FM),
    _("fill_diagonal_tensor", TM.fill_diagonal_tensor, METHOD | INPLACE, inplace=TM.fill_diagonal_tensor_),
    _("vander", MX.vander, FM),
    _("tril_indices", MX.tril_indices, F),
    _("triu_indices", MX.triu_indices, F),
    # -- shapes (composite/shapes.py) --
    _("t", SH.t, ALL),
    _("unstack", SH.unstack, FM),
    _("repeat_interleave", SH.repeat_interleave, FM),
    _("atleast_1d", SH.atleast_1d, FM),
    _("atleast_2d", SH.atleast_2d, FM),
    _("atleast_3d", SH.atleast_3d, FM),
    _("broadcast_shape", SH.broadcast_shape, FM),
    _("unflatten", SH.unflatten, FM),
    _("view_as", SH.view_as, FM),
    _("vsplit", SH.vsplit, FM),
    _("tensor_split", SH.tensor_split, FM),
    _("reverse", SH.reverse, FM),
    _("rot90", SH.rot90, FM),
    _("crop", SH.crop, F),
    _("unfold", SH.unfold, FM),
    _("as_strided", SH.as_strided, FM),
    # -- indexing (composite/indexing.py) --
    _("masked_fill", IX.masked_fill, ALL),
    _("slice", IX.slice, FM),
    _("gather_nd", IX.gather_nd, FM),
    _("strided_slice", IX.strided_slice, FM),
    _("select_scatter", IX.select_scatter, FM),
    _("index_fill", IX.index_fill, ALL),
    _("index_add", IX.index_add, ALL),
    _("index_put", IX.index_put, ALL),
    _("index_sample", IX.index_sample, FM),
    _("take", IX.take, FM),
    _("multiplex", IX.multiplex, FM),
    _("masked_scatter", IX.masked_scatter, ALL),
    _("scatter_nd", IX.scatter_nd, FM),
    _("shard_index", IX.shard_index, FM),
    # -- sorting and searching (composite/sorting.py) --
    _("sort", SO.sort, FM),
    _("topk", SO.topk, FM),
    _("searchsorted", SO.searchsorted, F),
    _("bucketize", SO.bucketize, FM),
    _("unique_consecutive", SO.unique_consecutive, FM),
    _("isin", SO.isin, FM),
    # -- elementwise composites (composite/arithmetic.py) --
    _("scale", AR.scale, FMI, inplace=TM.scale_),
    _("add_n", AR.add_n, FM),
    _("nan_to_num", AR.nan_to_num, ALL),
    _("deg2rad", AR.deg2rad, FM),
    _("rad2deg", AR.rad2deg, FM),
    _("frac", AR.frac, ALL),
    _("hypot", AR.hypot, ALL),
    _("lerp", AR.lerp, FMI),
    _("logaddexp", AR.logaddexp, FM),
    _("logit", AR.logit, ALL),
    _("stanh", AR.stanh, FM),
    _("sgn", AR.sgn, FM),
    _("heaviside", AR.heaviside, FM),
    _("fmax", AR.fmax, FM),
    _("fmin", AR.fmin, FM),
    _("ldexp", AR.ldexp, ALL),
    _("frexp", AR.frexp, FM),
    _("nextafter", AR.nextafter, FM),
    _("gcd", AR.gcd, ALL),
    _("lcm", AR.lcm, ALL),
    _("atan2", AR.atan2, FM),
    _("multigammaln", AR.multigammaln, ALL),
    _("increment", AR.increment, FM),
    # -- creation (composite/creation.py) --
    _("meshgrid", CR.meshgrid, F),
    _("assign", CR.assign, F),
    _("combinations", CR.combinations, FM),
    _("logspace", CR.logspace, F),
    # -- random (composite/random.py) --
    _("poisson", RN.poisson, F),
    _("standard_normal", RN.standard_normal, F),
    _("randint_like", RN.randint_like, F),
    _("multinomial", _creation.multinomial, FM),
    # -- queries (composite/queries.py) --
    _("is_tensor", Q.is_tensor, FM),
    _("is_complex", Q.is_complex, FM),
    _("is_floating_point", Q.is_floating_point, FM, method=TM.is_floating_point),
    _("is_integer", Q.is_integer, FM),
    _("is_empty", Q.is_empty, FM),
    _("rank", Q.rank, FM),
    _("tolist", Q.tolist, F),
    _("iinfo", Q.iinfo, F),
    _("finfo", Q.finfo, F),
    # -- matrix functions of ddg.linalg that are Tensor methods --
    _("matrix_power", PR.matrix_power, METHOD),
    _("multi_dot", PR.multi_dot, METHOD, method=TM.multi_dot),
    _("cholesky_solve", PR.cholesky_solve, METHOD),
    # -- methods that are not ops (tensor_methods.py) --
    _("detach", TM.detach, FMI, inplace=TM.detach_),
    _("backward", TM.backward, METHOD),
    _("retain_grads", TM.retain_grads, METHOD),
    _("to", TM.to, METHOD),
    _("element_size", TM.element_size, METHOD),
    _("ndimension", TM.ndimension, METHOD),
    _("is_same_shape", TM.is_same_shape, METHOD),
    _("is_contiguous", TM.is_contiguous, METHOD),
    _("contiguous", TM.contiguous, METHOD),
    _("data_ptr", TM.data_ptr, METHOD),
    _("copy_", TM.copy_, METHOD),
    _("uniform_", TM.uniform_, METHOD),
    _("normal_", TM.normal_, FM),
    _("cauchy_", TM.cauchy_, FM),
    _("geometric_", TM.geometric_, FM),
    _("exponential_", TM.exponential_, METHOD),
    _("fill_diagonal_", TM.fill_diagonal_, METHOD),
    _("T", TM.transposed, METHOD),
    _("mT", TM.matrix_transposed, METHOD),
    _("data", TM.data, METHOD),
    _("grad_fn", TM.grad_fn, METHOD),
    _("inplace_version", TM.inplace_version, METHOD),
)

# Paddle op names of nn layers and fused ops: their AMP list entries and ddg classes
AMP_ONLY = (
    Amp("linear", "Linear"), Amp("linear_v2", "Linear", WHITE), Amp("fused_gemm_epilogue", "Linear", WHITE),
    Amp("conv2d", "Conv2d", WHITE), Amp("depthwise_conv2d", "Conv2d"), Amp("conv2d_transpose", "Conv2dTranspose"),
    Amp("max_pool2d_with_index", "MaxPool2d", WHITE), Amp("pool2d", "MaxPool2d AvgPool2d"),
    Amp("dropout", "Dropout"),
    Amp("flash_attn", "", WHITE), Amp("fused_rotary_position_embedding", "", WHITE),
    Amp("fused_attention", "", WHITE_FP16), Amp("fused_feedforward", "", WHITE_FP16),
    Amp("fake_quantize_dequantize_abs_max", "", WHITE_FP16),
    Amp("fake_quantize_dequantize_moving_average_abs_max", "", WHITE_FP16),
    Amp("softmax", "Softmax", BLACK), Amp("log_softmax", "LogSoftmax", BLACK),
    Amp("softmin", "", BLACK), Amp("softplus", "", BLACK), Amp("tanh_shrink", "", BLACK),
    Amp("cross_entropy", "SoftmaxCrossEntropy", BLACK), Amp("cross_entropy2", "SoftmaxCrossEntropy", BLACK),
    Amp("softmax_with_cross_entropy", "SoftmaxCrossEntropy", BLACK),
    Amp("c_softmax_with_cross_entropy", "SoftmaxCrossEntropy", BLACK),
    Amp("c_softmax_with_multi_label_cross_entropy", "", BLACK),
    Amp("sigmoid_cross_entropy_with_logits", "SigmoidCrossEntropy", BLACK), Amp("nll_loss", "NLLLoss", BLACK),
    Amp("huber_loss", "SmoothL1Loss", BLACK), Amp("triplet_margin_loss", "", BLACK), Amp("log_loss", "", BLACK),
    Amp("hsigmoid_loss", "", BLACK), Amp("margin_cross_entropy", "", BLACK),
    Amp("pnorm", "", BLACK), Amp("frobenius_norm", "", BLACK),
    Amp("layer_norm", "Standardize RowNorm", BLACK), Amp("group_norm", "Standardize RowNorm", BLACK),
    Amp("instance_norm", "Standardize RowNorm"),
    Amp("batch_norm", "Standardize BatchNormAffine _SyncStandardize"), Amp("sync_batch_norm", "_SyncStandardize"),
    Amp("lookup_table", "", BLACK_ALWAYS), Amp("lookup_table_v2", "", BLACK_ALWAYS),
    Amp("linear_interp_v2", "", BLACK_ALWAYS), Amp("nearest_interp_v2", "", BLACK_ALWAYS),
    Amp("bilinear_interp_v2", "", BLACK_ALWAYS), Amp("bicubic_interp_v2", "", BLACK_ALWAYS),
    Amp("trilinear_interp_v2", "", BLACK_ALWAYS),
)


# -- what the table generates ------------------------------------------------------------------------
def _reversed(fn):
    def method(self, other):
        return fn(other, self)
    return method


def _augmented(fn, inplace):
    """``b += x`` and friends. Paddle's Tensor has no in-place augmented operators, so
    ``b += x`` is ``b = b + x``: a new tensor, other names bound to the old one keep its
    values. One exception, for PyTorch-style manual updates (``w -= lr * w.grad`` under
    ``no_grad``): a leaf that requires grad, updated while grad mode is off, is updated in
    place, so it stays the same leaf and keeps training (in Paddle that line would rebind
    ``w`` to a tensor that no longer requires grad)."""
    def method(self, other):
        if not grad_mode._enabled[0] and self._node is None and not self.stop_gradient:
            return inplace(self, other)
        return fn(self, other)
    return method


_REVERSED = frozenset({"__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rfloordiv__", "__rmod__", "__rpow__",
                       "__rmatmul__", "__rand__", "__ror__", "__rxor__"})
_AUGMENTED = frozenset({"__iadd__", "__isub__", "__imul__", "__itruediv__"})


def _operator(row, dunder, attrs):
    if dunder in _AUGMENTED:
        return _augmented(row.impl, attrs[row.name + "_"])
    if dunder in _REVERSED:
        return _reversed(row.impl)
    return row.impl


def tensor_attributes(rows=ROWS):
    """``{name: value}``: everything ``rows`` attach to ``Tensor``."""
    attrs = {}
    for row in rows:
        if row.forms & METHOD:
            attrs[row.name] = row.method if row.method is not None else row.impl
        if row.forms & INPLACE:
            kind = row.inplace
            attrs[row.name + "_"] = (TM.inplace_method(row.name, row.impl, kind) if isinstance(kind, str)
                                     else kind)
    for row in rows:
        for dunder in row.ops:
            attrs[dunder] = _operator(row, dunder, attrs)
    return attrs


#: what ``install()`` attached to ``Tensor`` (tests check that nothing else was)
INSTALLED = {}


def install():
    """Attach the table's methods, in-place forms and operators to ``Tensor``."""
    INSTALLED.update(tensor_attributes())
    for name, value in INSTALLED.items():
        setattr(Tensor, name, value)


def exports(rows=ROWS):
    """``{name: function}``: the functions ``ddg`` exports, in-place forms included."""
    out = {}
    for row in rows:
        if row.forms & FN:
            out[row.name] = row.impl
        if row.forms & INPLACE_FN:
            out[row.name + "_"] = (row.inplace_fn if row.inplace_fn is not None
                                   else TM.inplace_function(row.name, row.impl))
    return out


def amp_entries():
    """Every ``Amp`` entry: the rows' and ``AMP_ONLY``."""
    return [a for row in ROWS for a in row.amp] + list(AMP_ONLY)


def amp_names(which):
    """The Paddle op names on one default list (``WHITE``, ``BLACK``...)."""
    return {a.op for a in amp_entries() if a.list == which}


def op_classes():
    """``{Paddle op name: (ddg Function class names)}`` for the names ddg implements."""
    return {a.op: tuple(a.classes.split()) for a in amp_entries() if a.classes}
