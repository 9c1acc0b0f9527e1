"""Mixed precision at op dispatch: the policy ``ddg.amp.auto_cast`` installs.

Every op is a ``Function`` and every op call goes through ``Function.__call__``, which
hands the call to the policy in ``function._autocast`` while an ``auto_cast`` context is
active (one list read per op otherwise). The policy decides the dtype the op runs in
from its class and its inputs, casts the float inputs that differ with ordinary ``Cast``
ops (so gradients flow back through the casts, and a float32 parameter gets a float32
gradient), and runs the op with the slot cleared (so the casts and the op take the
ordinary path, and ``ddg.jit`` records them).

What runs in which dtype (``low`` is float16 or bfloat16; only float16, bfloat16 and
float32 inputs are ever cast, float64 and integer tensors never are):

* ``white``: in ``low`` (matrix products and convolutions);
* ``black``: in float32 (softmax, losses, exp/log/pow, reductions, norms' statistics);
* everything else at O1 and O2 with ``use_promote``: an op whose float inputs mix float32
  and ``low`` runs in float32 (the widest), otherwise in its inputs' dtype; at O2
  without ``use_promote``: in ``low``; at OD: in float32;
* at O2, norms (``Standardize``) compute their statistics in float32 and return their
  input's dtype, unless a list names them;
* never cast: casts, moves, in-place writes, views (a view must share its input's
  memory) and ops without float inputs.

The slot is process-wide, like ``ddg.jit``'s recording slot: ops that other threads run
while a context is active are cast too, and while the policy runs one op the slot is
empty, so do not run ddg ops in other threads during ``auto_cast`` (DataLoader workers
return numpy data, which is fine).

Parameters cast for an op are cached for the rest of the context (keyed by the
parameter, valid while its array and version are unchanged and the cast's graph node
has not been consumed by a backward pass), so a weight used by several ops, or every
time step of an RNN, is cast once.

Op names: the lists use Paddle's op names (``matmul_v2``, ``conv2d``, ``reduce_mean``,
``softmax_with_cross_entropy``...); ``OP_CLASSES`` maps each to the ddg ``Function``
classes that implement it. A list may also name ddg classes directly (``'MatMul'``) or
hold the classes themselves. Names of Paddle ops that ddg builds as composites
(``softplus``, ``nll_loss``...) map to nothing: their reductions and logarithms are
black-listed primitives anyway.
"""
import numpy as np

from . import function as _function
from .grad_mode import _enabled
from .ops.elementwise import Cast

# Paddle op name -> names of the ddg Function classes that implement it.
OP_CLASSES = {
    "matmul": ("MatMul",), "matmul_v2": ("MatMul",), "mul": ("MatMul",), "bmm": ("MatMul",),
    "linear": ("Linear",), "linear_v2": ("Linear",), "fused_gemm_epilogue": ("Linear",),
    "conv2d": ("Conv2d",), "depthwise_conv2d": ("Conv2d",), "conv2d_transpose": ("Conv2dTranspose",),
    "einsum": ("Einsum",),
    "softmax": ("Softmax",), "log_softmax": ("LogSoftmax",),
    "cross_entropy": ("SoftmaxCrossEntropy",), "cross_entropy2": ("SoftmaxCrossEntropy",),
    "softmax_with_cross_entropy": ("SoftmaxCrossEntropy",), "c_softmax_with_cross_entropy": ("SoftmaxCrossEntropy",),
    "layer_norm": ("Standardize", "RowNorm"), "group_norm": ("Standardize", "RowNorm"),
    "instance_norm": ("Standardize", "RowNorm"),
    "batch_norm": ("Standardize", "BatchNormAffine", "_SyncStandardize"), "sync_batch_norm": ("_SyncStandardize",),
    "square": ("Square",), "reciprocal": ("Reciprocal",), "rsqrt": ("Rsqrt",), "sqrt": ("Sqrt",),
    "mean": ("Mean",), "reduce_mean": ("Mean",), "reduce_sum": ("Sum",), "sum": ("Sum",),
    "reduce_prod": ("Prod",), "logsumexp": ("LogSumExp",),
    "exp": ("Exp",), "expm1": ("Expm1",), "log": ("Log",), "log2": ("Log2",), "log10": ("Log10",),
    "log1p": ("Log1p",), "pow": ("Pow", "PowScalar", "RPowScalar"), "elementwise_pow": ("Pow",),
    "cosh": ("Cosh",), "sinh": ("Sinh",), "tan": ("Tan",), "acos": ("Acos",), "asin": ("Asin",),
    "atanh": ("Atanh",), "cumsum": ("CumSum",), "cumprod": ("CumProd",), "scatter": ("Scatter",),
    "elementwise_add": ("Add", "AddScalar"), "elementwise_sub": ("Sub", "RSubScalar"),
    "elementwise_mul": ("Mul", "MulScalar"), "elementwise_div": ("Div", "DivScalar", "RDivScalar"),
    "relu": ("Relu",), "tanh": ("Tanh",), "sigmoid": ("Sigmoid",), "dropout": ("Dropout",),
    "pool2d": ("MaxPool2d", "AvgPool2d"), "max_pool2d_with_index": ("MaxPool2d",),
}

# never cast: casts, moves, in-place writes, graph plumbing
_EXEMPT = frozenset({"Cast", "ToPlace", "SetItem", "ZeroGrad", "_PyLayerNode", "_Replay"})
_CASTABLE = frozenset({"float16", "bfloat16", "float32"})
_F32 = np.dtype("float32")

LOW, F32, PROMOTE, NONE, F32_KEEP = 0, 1, 2, 3, 4


def _subclasses(cls):
    out = []
    for c in cls.__subclasses__():
        out.append(c)
        out.extend(_subclasses(c))
    return out


_by_name = [None, -1]   # {class name: [classes]}, and the count of Function's direct subclasses it saw
_named = {}             # frozenset of list entries -> frozenset of classes


def _classes_named(entries):
    """The Function classes a list of op names (Paddle's or ddg's) or classes refers to
    (cached: every auto_cast entry asks, and walking the op classes costs ~0.3 ms)."""
    n = len(_function.Function.__subclasses__())
    if _by_name[1] != n:
        by_name = {}
        for c in _subclasses(_function.Function):
            by_name.setdefault(c.__name__, []).append(c)
        _by_name[:] = [by_name, n]
        _named.clear()
    key = frozenset(entries)
    hit = _named.get(key)
    if hit is None:
        hit = _named[key] = frozenset(_resolve(entries, _by_name[0]))
    return hit


def _resolve(entries, by_name):
    out = set()
    for e in entries:
        if isinstance(e, type):
            out.add(e)
            continue
        for name in OP_CLASSES.get(e, (e,)):
            out.update(by_name.get(name, ()))
    return out


class AutoCast:
    """One ``auto_cast`` context's policy (see the module docstring)."""

    def __init__(self, low, level, white, black, use_promote, custom_white=(), custom_black=()):
        self.low = low
        self.level = level
        # a custom entry wins over a default list that reaches the same class by another name
        # (Paddle's matmul, matmul_v2 and mul are all ddg's MatMul)
        cw, cb = _classes_named(custom_white), _classes_named(custom_black)
        self.white = (_classes_named(white) - cb) | cw
        self.black = (_classes_named(black) - cw) | cb
        named = self.white | self.black
        if level == "O2":
            self.gray = PROMOTE if use_promote else LOW
        elif level == "OD":
            self.gray = F32
        else:
            self.gray = PROMOTE
        # at O2, norms keep float32 statistics unless a list names them
        self.keep = set() if level != "O2" else {c for c in _classes_named(["batch_norm", "layer_norm"])
                                                  if c not in named}
        self.names = (set(white) | set(custom_white)) - set(custom_black), (set(black) | set(custom_black)) - \
            set(custom_white)
        self.actions = {}
        self.cache = {}
        self.active = True   # False once its context has exited (see __call__'s finally)

    def action(self, cls):
        if cls in self.white:
            act = LOW
        elif cls in self.black:
            act = F32
        elif cls.__name__ in _EXEMPT or cls.view:
            act = NONE
        elif cls in self.keep:
            act = F32_KEEP
        else:
            act = self.gray
        self.actions[cls] = act
        return act

    def __call__(self, fn, tensors):
        slot = _function._autocast
        slot[0] = None
        try:
            act = self.actions.get(type(fn))
            if act is None:
                act = self.action(type(fn))
            if act == NONE or not tensors:
                return fn(*tensors)
            first = tensors[0]._data.dtype
            names = [t._data.dtype.name for t in tensors]
            if act == LOW:
                want = self.low
            elif act == PROMOTE:
                floats = {n for n in names if n in _CASTABLE}
                if len(floats) < 2:
                    return fn(*tensors)
                want = _F32
            else:
                want = _F32
            wname = want.name
            if any(n != wname and n in _CASTABLE for n in names):
                tensors = [self.cast(t, want) if n != wname and n in _CASTABLE else t
                           for t, n in zip(tensors, names)]
            out = fn(*tensors)
            if act == F32_KEEP and names[0] != "float32" and names[0] in _CASTABLE:
                # float32 statistics, the result back in the input's dtype (extra outputs,
                # batch norm's mean and variance, stay float32 for the running estimates)
                if type(out) is tuple:
                    out = (Cast(first)(out[0]),) + out[1:]
                else:
                    out = Cast(first)(out)
            return out
        finally:
            if self.active:   # (another thread may have left the context meanwhile)
                slot[0] = self

    def composite(self, name, t):
        """For a composite that Paddle runs as one op named ``name`` (embedding:
        ``lookup_table_v2``): ``t`` cast to the dtype that op's list gives (float32 when
        black-listed, low precision when white-listed), else ``t`` itself."""
        white, black = self.names
        want = self.low if name in white else _F32 if name in black else None
        if want is None or t._data.dtype.name not in _CASTABLE or t._data.dtype == want:
            return t
        slot = _function._autocast
        slot[0] = None
        try:
            return self.cast(t, want)
        finally:
            if self.active:
                slot[0] = self

    def cast(self, t, dtype):
        """``t`` as ``dtype`` through a Cast op; parameters' casts are cached."""
        if t._node is not None or not getattr(t, "persistable", False):
            return Cast(dtype)(t)
        key = (id(t), dtype.name)
        hit = self.cache.get(key)
        need_graph = _enabled[0] and not t.stop_gradient
        if hit is not None:
            src, arr, version, out = hit
            node = out._node
            if arr is t._data and version == t._vc[0] and (
                    (node is not None and node.edges is not None) or (node is None and not need_graph)):
                return out
        out = Cast(dtype)(t)
        self.cache[key] = (t, t._data, t._vc[0], out)
        return out

