"""Elementwise primitives: arithmetic (tensor-tensor and tensor-scalar), unary math,
``clip``, ``cast`` and ``where``. Each op's derivative is one ``grad(self, xp, g)``
formula (``ddg/autograd/formula.py``) that serves both the array backward and the
differentiable ``backward_graph``. Gradients undo broadcasting with ``xp.fit`` and come
back in each input's own dtype."""
import numpy as np

from ...tensor import backend, gemm
from ...tensor import kernels as _kernels
from ...tensor.dtypes import convert_dtype, default_float
from ...tensor.tensor import Tensor
from ..formula import Formula
from ..formula import scalar_operand as _sc
from ..function import Function
from ..promotion import result_dtype
from .logic import nonzero

_SCALARS = (int, float, bool, np.number, np.bool_)


# -- tensor (op) tensor ------------------------------------------------------------
def _batch_inner_op(ufunc, a, b):
    """``ufunc(a, b)`` (the four arithmetic ops) into a batch-innermost ([C, H, W, N] storage)
    result where one of the numpy float ``[N, C, H, W]`` operands (same shape and dtype) is
    stored that way and the other in C order, else None. numpy would make the result
    C-ordered, and a residual add of a convolution's output (batch-innermost, the layout of
    ddg's im2col and Winograd paths) with a C-ordered input (a first layer's,
    ``conv_sample``) would then hand the next convolution an input it must transpose, every
    block after it again, and likewise the gradients in backward (ResNet-style steps at C=16
    on 32x32, batch 64: six 4 MB transposing copies per step); with the result
    batch-innermost only the first mixed op pays. That one copies the C-ordered operand into
    the result (by the blocked transpose, ``gemm.copy_into``) and applies the op in place:
    numpy's ufunc over the two layouts at once took 74-93 ms at [64, 16, 64, 64] float32,
    this 10 ms (the same values: each element is still ``a[i] (op) b[i]``)."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != 4 or a.shape != b.shape \
            or a.dtype != b.dtype or a.dtype.kind != "f" or a.shape[0] < 2:
        return None
    for p, q in ((a, b), (b, a)):
        if q.flags.c_contiguous and not p.flags.c_contiguous and p.transpose(1, 2, 3, 0).flags.c_contiguous:
            n, c, h, w = a.shape
            out = np.empty((c, h, w, n), a.dtype).transpose(3, 0, 1, 2)
            gemm.copy_into(out, q)
            return ufunc(out, b, out=out) if q is a else ufunc(a, out, out=out)
    return None


class Add(Formula):
    save_inputs = False

    def forward(self, a, b):
        self.meta = (a.shape, a.dtype, b.shape, b.dtype)
        out = _batch_inner_op(np.add, a, b)
        return a + b if out is None else out

    def grad(self, xp, g):
        na, nb = self.needs
        sa, da, sb, db = self.meta
        return (xp.fit(g, sa, da) if na else None, xp.fit(g, sb, db) if nb else None)


class Sub(Formula):
    save_inputs = False

    def forward(self, a, b):
        self.meta = (a.shape, a.dtype, b.shape, b.dtype)
        out = _batch_inner_op(np.subtract, a, b)
        return a - b if out is None else out

    def grad(self, xp, g):
        na, nb = self.needs
        sa, da, sb, db = self.meta
        return (xp.fit(g, sa, da) if na else None, xp.fit(-g, sb, db) if nb else None)


class Mul(Formula):
    def forward(self, a, b):
        self.a, self.b = a, b
        out = _batch_inner_op(np.multiply, a, b)
        return a * b if out is None else out

    def grad(self, xp, g):
        na, nb = self.needs
        a, b = self.a, self.b
        return (xp.fit(g * xp.input(1, b), a.shape, a.dtype) if na else None,
                xp.fit(g * xp.input(0, a), b.shape, b.dtype) if nb else None)


class Div(Formula):
    def forward(self, a, b):
        self.a, self.b = a, b
        out = _batch_inner_op(np.divide, a, b)
        return a / b if out is None else out

    def grad(self, xp, g):
        na, nb = self.needs
        a, b = self.a, self.b
        bt = xp.input(1, b)
        ga = g / bt
        return (xp.fit(ga, a.shape, a.dtype) if na else None,
                xp.fit(-ga * xp.input(0, a) / bt, b.shape, b.dtype) if nb else None)


class Pow(Formula):
    save_output = True

    def forward(self, a, b):
        self.a, self.b = a, b
        self.out = a ** b
        return self.out

    def grad(self, xp, g):
        na, nb = self.needs
        a, b = self.a, self.b
        at, bt = xp.input(0, a), xp.input(1, b)
        ga = xp.fit(g * bt * at ** (bt - 1), a.shape, a.dtype) if na else None
        gb = None
        if nb:
            # log(a) where a > 0, else 0 (the log's input is kept positive); the scalars are
            # typed: numpy 1.x would pick float16 for a bare 1
            pos = a > 0
            with np.errstate(divide="ignore", invalid="ignore"):
                log_a = xp.where(pos, xp.log(xp.where(pos, at, a.dtype.type(1))), a.dtype.type(0))
            gb = xp.fit(g * xp.output(self.out) * log_a, b.shape, b.dtype)
        return ga, gb


class Maximum(Formula):
    def forward(self, a, b):
        self.a, self.b = a, b
        return self._pick(a, b)

    @staticmethod
    def _pick(a, b):
        return backend.get_array_module(a, b).maximum(a, b)

    def _mask(self):
        return self.a > self.b

    def _weights(self, dtype):
        """Input a's share of the gradient: 1 where it wins, 0.5 at ties, else 0 (as 0/1
        arithmetic: numpy's where on an unpredictable mask is a slow pass)."""
        wa = (self.a == self.b).astype(dtype)
        wa *= dtype.type(0.5)
        wa += self._mask()
        return wa

    def grad(self, xp, g):
        # ties send half the gradient each way
        a, b = self.a, self.b
        wa = xp.const(self._weights(g.dtype))
        na, nb = self.needs
        return (xp.fit(g * wa, a.shape, a.dtype) if na else None,
                xp.fit(g * (1 - wa), b.shape, b.dtype) if nb else None)


class Minimum(Maximum):
    @staticmethod
    def _pick(a, b):
        return backend.get_array_module(a, b).minimum(a, b)

    def _mask(self):
        return self.a < self.b


class FloorDiv(Function):
    differentiable = False

    def forward(self, a, b):
        return backend.get_array_module(a, b).floor_divide(a, b)


class Mod(Formula):
    def forward(self, a, b):
        self.a, self.b = a, b
        return backend.get_array_module(a, b).mod(a, b)

    def grad(self, xp, g):
        na, nb = self.needs
        a, b = self.a, self.b
        return (xp.fit(g, a.shape, a.dtype) if na else None,
                xp.fit(-g * xp.floor_divide(a, b), b.shape, b.dtype) if nb else None)


# -- tensor (op) python scalar ----------------------------------------------------
class AddScalar(Formula):
    save_inputs = False

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        return a + _sc(self.s, a)

    def grad(self, xp, g):
        return g


class MulScalar(Formula):
    save_inputs = False

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        return a * _sc(self.s, a)

    def grad(self, xp, g):
        return g * xp.scalar(self.s, g)


class RSubScalar(Formula):  # s - a
    save_inputs = False

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        return _sc(self.s, a) - a

    def grad(self, xp, g):
        return -g


class DivScalar(Formula):  # a / s
    save_inputs = False

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        return a / _sc(self.s, a)

    def grad(self, xp, g):
        return g / xp.scalar(self.s, g)


class RDivScalar(Formula):  # s / a
    save_output = True

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        self.a = a
        self.out = _sc(self.s, a) / a
        return self.out

    def grad(self, xp, g):
        return -g * xp.output(self.out) / xp.input(0, self.a)


class PowScalar(Formula):  # a ** s
    def __init__(self, s):
        self.s = s

    def forward(self, a):
        self.a = a
        return a ** _sc(self.s, a)

    def grad(self, xp, g):
        s, a = self.s, xp.input(0, self.a)
        if s == 2:
            return g * (2 * a)
        return g * (xp.scalar(s, a) * a ** xp.scalar(s - 1, a))


class RPowScalar(Formula):  # s ** a
    save_inputs = False
    save_output = True

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        self.out = _sc(self.s, a) ** a
        return self.out

    def grad(self, xp, g):
        return g * xp.output(self.out) * xp.scalar(float(np.log(self.s)), g)


# -- unary math ----------------------------------------------------------------------
class Neg(Formula):
    save_inputs = False

    def forward(self, a):
        return -a

    def grad(self, xp, g):
        return -g


_COMPILED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


# below this many elements numpy's one or two passes cost less than the compiled call's
# argument dispatch (~4 us; measured crossover ~10k float32 values for relu/clip/sigmoid)
COMPILED_MIN_SIZE = 8192


def _compiled(a):
    """Whether ``a`` takes the compiled activation kernels: numpy float32/float64 arrays of at
    least ``COMPILED_MIN_SIZE`` elements (cupy arrays, float16/bfloat16 and small arrays keep
    the array-module formulas)."""
    return type(a) is np.ndarray and a.dtype in _COMPILED_DTYPES and a.size >= COMPILED_MIN_SIZE


def _cpu_kernels():
    from ...tensor import cpu_nn_kernels  # noqa: PLC0415 - imports numba on the first numpy call
    return cpu_nn_kernels


def _dense(a):
    """``(a, out)``: ``a`` (copied if it is not dense) and an empty array of its layout, so that
    both flatten (``ravel("K")``) to views in the same element order."""
    out = np.empty_like(a)
    if out.strides != a.strides:
        a = np.ascontiguousarray(a)
        out = np.empty_like(a)
    return a, out


def _act_backward(code, x, g, p0=0.0, p1=0.0, p2=0.0):
    """``g * f'`` by the compiled loop ``code`` of ``act_backward`` reading the saved array ``x``
    (the op's input or output, as the code says), in ``x``'s memory layout and dtype."""
    x, out = _dense(x)
    if g.strides != x.strides or g.dtype != x.dtype or g.shape != x.shape:
        g2 = np.empty_like(x)
        gemm.copy_into(g2, g)
        g = g2
    k = _cpu_kernels()
    t = x.dtype.type
    k.act_backward(getattr(k, code), x.ravel("K"), g.ravel("K"), out.ravel("K"), t(p0), t(p1), t(p2))
    return out


class _OfInput(Formula):
    """A unary op computed by the array function named ``fn``, whose gradient reads the
    input (``grad`` gets it with ``xp.input(0, self.a)``)."""
    fn = None

    def forward(self, a):
        self.a = a
        return getattr(backend.get_array_module(a), self.fn)(a)


class _OfOutput(Formula):
    """A unary op computed by the array function named ``fn``, whose gradient reads only
    the output (``xp.output(self.out)``)."""
    save_inputs = False
    save_output = True
    fn = None

    def forward(self, a):
        self.out = getattr(backend.get_array_module(a), self.fn)(a)
        return self.out


class Abs(_OfInput):
    fn = "abs"

    def grad(self, xp, g):
        return g * xp.sign(self.a)   # a constant: the saved array, not the input on the graph


class Exp(_OfOutput):
    fn = "exp"

    def grad(self, xp, g):
        return g * xp.output(self.out)


class Expm1(_OfOutput):
    fn = "expm1"

    def grad(self, xp, g):
        return g * (xp.output(self.out) + 1)


class Log(_OfInput):
    fn = "log"

    def grad(self, xp, g):
        return g / xp.input(0, self.a)


class Log1p(_OfInput):
    fn = "log1p"

    def grad(self, xp, g):
        return g / (1 + xp.input(0, self.a))


class Log2(_OfInput):
    fn = "log2"

    def grad(self, xp, g):
        a = xp.input(0, self.a)
        return g * (1 / (a * a.dtype.type(np.log(2))))


class Log10(_OfInput):
    fn = "log10"

    def grad(self, xp, g):
        a = xp.input(0, self.a)
        return g * (1 / (a * a.dtype.type(np.log(10))))


class Sqrt(_OfOutput):
    fn = "sqrt"

    def grad(self, xp, g):
        return g / (2 * xp.output(self.out))


class Rsqrt(_OfOutput):
    def forward(self, a):
        self.out = a.dtype.type(1) / backend.get_array_module(a).sqrt(a)
        return self.out

    def grad(self, xp, g):
        return g * (-0.5 * xp.output(self.out) ** 3)


class Reciprocal(_OfOutput):
    def forward(self, a):
        self.out = a.dtype.type(1) / a
        return self.out

    def grad(self, xp, g):
        y = xp.output(self.out)
        return -g * y * y


class Square(_OfInput):
    def forward(self, a):
        self.a = a
        return a * a

    def grad(self, xp, g):
        return g * (2 * xp.input(0, self.a))


class Sin(_OfInput):
    fn = "sin"

    def grad(self, xp, g):
        return g * xp.cos(xp.input(0, self.a))


class Cos(_OfInput):
    fn = "cos"

    def grad(self, xp, g):
        return -g * xp.sin(xp.input(0, self.a))


class Tan(_OfOutput):
    fn = "tan"

    def grad(self, xp, g):
        y = xp.output(self.out)
        return g * (1 + y * y)


class Asin(_OfInput):
    fn = "arcsin"

    def grad(self, xp, g):
        a = xp.input(0, self.a)
        return g * (1 / xp.sqrt(1 - a * a))


class Acos(_OfInput):
    fn = "arccos"

    def grad(self, xp, g):
        a = xp.input(0, self.a)
        return g * (-1 / xp.sqrt(1 - a * a))


class Atan(_OfInput):
    fn = "arctan"

    def grad(self, xp, g):
        a = xp.input(0, self.a)
        return g * (1 / (1 + a * a))


class Sinh(_OfInput):
    fn = "sinh"

    def grad(self, xp, g):
        return g * xp.cosh(xp.input(0, self.a))


class Cosh(_OfInput):
    fn = "cosh"

    def grad(self, xp, g):
        return g * xp.sinh(xp.input(0, self.a))


class Tanh(_OfOutput):
    fn = "tanh"

    def grad(self, xp, g):
        y = xp.output(self.out)
        return g * (1 - y * y)


class Asinh(_OfInput):
    fn = "arcsinh"

    def grad(self, xp, g):
        a = xp.input(0, self.a)
        return g * (1 / xp.sqrt(a * a + 1))


class Acosh(_OfInput):
    fn = "arccosh"

    def grad(self, xp, g):
        a = xp.input(0, self.a)
        return g * (1 / xp.sqrt(a * a - 1))


class Atanh(_OfInput):
    fn = "arctanh"

    def grad(self, xp, g):
        a = xp.input(0, self.a)
        return g * (1 / (1 - a * a))


class Sigmoid(_OfOutput):
    """``1 / (1 + exp(-x))``. numpy float32/float64: one compiled pass each way (the backward
    reads the output); otherwise four array passes, exact in both tails (exp overflowing to
    inf gives exactly 0) where numpy's where on the sign mask would be a slow one."""

    def forward(self, a):
        if _compiled(a):
            a, out = _dense(a)
            k = _cpu_kernels()
            z = a.dtype.type(0)
            k.act_forward(k.SIGMOID, a.ravel("K"), out.ravel("K"), z, z, z)
            self.out = out
            return out
        self.out = _kernels.sigmoid(backend.get_array_module(a), a)
        return self.out

    def fast(self, g):   # one compiled pass on numpy float32/float64
        if _compiled(self.out):
            return _act_backward("SIGMOID", self.out, g)
        return None

    def grad(self, xp, g):
        y = xp.output(self.out)
        return g * y * (1 - y)


class Erf(_OfInput):
    def forward(self, a):
        self.a = a
        return backend.erf(backend.get_array_module(a), a).astype(a.dtype, copy=False)

    def grad(self, xp, g):
        a = xp.input(0, self.a)
        return g * xp.scalar(float(2 / np.sqrt(np.pi)), g) * xp.exp(-a * a)


class Relu(_OfOutput):
    def forward(self, a):
        xp = backend.get_array_module(a)
        if a.dtype.kind in "fV":
            self.out = _kernels.clamp(xp, a, lo=0)
        else:
            self.out = xp.maximum(a, a.dtype.type(0))
        return self.out

    def fast(self, g):   # one compiled pass on numpy float32/float64
        if _compiled(self.out):
            return _act_backward("RELU", self.out, g)
        return None

    def grad(self, xp, g):
        # the array result in the output's layout (a broadcast gradient is copied into it)
        return xp.masked(g, self.out > 0, self.out)


class Clip(Formula):
    """``clip`` passes the gradient where ``lo <= x <= hi`` (bounds included, as Paddle's
    clip); with ``strict`` only where ``lo < x < hi``, which is the gradient Paddle gives
    relu6, hardtanh and hardsigmoid at their kinks."""
    strict = False  # class default: programs saved without the attribute load unchanged

    def __init__(self, lo, hi, strict=False):
        self.lo, self.hi = lo, hi
        if strict:
            self.strict = True

    def forward(self, a):
        xp = backend.get_array_module(a)
        self.a = a
        if a.dtype.kind in "fV":
            return _kernels.clamp(xp, a, -np.inf if self.lo is None else self.lo, np.inf if self.hi is None else self.hi)
        out = a
        if self.lo is not None:
            out = xp.maximum(out, xp.asarray(self.lo, dtype=a.dtype))
        if self.hi is not None:
            out = xp.minimum(out, xp.asarray(self.hi, dtype=a.dtype))
        return out if out is not a else a.copy()

    def fast(self, g):   # one compiled pass on numpy float32/float64
        if _compiled(self.a):
            return _act_backward("CLIP", self.a, g, -np.inf if self.lo is None else self.lo,
                                 np.inf if self.hi is None else self.hi, 1.0 if self.strict else 0.0)
        return None

    def grad(self, xp, g):
        a, keep = self.a, True
        if self.lo is not None:
            keep = a > self.lo if self.strict else a >= self.lo
        if self.hi is not None:
            keep = keep & (a < self.hi if self.strict else a <= self.hi)
        return xp.masked(g, keep)


class ZeroGrad(Formula):
    """sign, floor, ceil, round: piecewise constant, so the gradient is zero."""
    save_inputs = False

    def __init__(self, fn):
        self.fn = fn

    @property
    def name(self):
        return self.fn

    def forward(self, a):
        self.meta = (a.shape, a.dtype)
        return getattr(backend.get_array_module(a), self.fn)(a)

    def grad(self, xp, g):
        return xp.zeros(*self.meta)


class Cast(Formula):
    save_inputs = False
    keep_half = False   # the one op whose point is to change the dtype

    def __init__(self, dtype):
        self.dtype = dtype

    def forward(self, a):
        self.src = a.dtype
        return a.astype(self.dtype)

    def grad(self, xp, g):
        # arrays and Tensors both cast with astype (on Tensors a Cast node)
        return g.astype(self.src) if self.src.kind in "fcV" else None


class Where(Formula):
    def forward(self, cond, a, b):
        self.cond = cond
        self.a_meta = (a.shape, a.dtype)
        self.b_meta = (b.shape, b.dtype)
        return backend.get_array_module(a, b).where(cond, a, b)

    def grad(self, xp, g):
        _, na, nb = self.needs
        zero = g.dtype.type(0)
        return (None,
                xp.fit(xp.where(self.cond, g, zero), *self.a_meta) if na else None,
                xp.fit(xp.where(self.cond, zero, g), *self.b_meta) if nb else None)


# -- public functions -------------------------------------------------------------------
def _const(x, like):
    """A Tensor (no grad) from a scalar/array/list, on the place of tensor ``like``."""
    xp = backend.get_array_module(like._data)
    if isinstance(x, _SCALARS):
        return Tensor._wrap(xp.asarray(x, dtype=like._data.dtype if not isinstance(x, float) or
                                       like._data.dtype.kind in "fV" else default_float()))
    arr = np.asarray(x)
    if arr.dtype == np.float64 and not isinstance(x, np.ndarray):
        arr = arr.astype(default_float())
    return Tensor._wrap(xp.asarray(arr))


def _as_tensor(x, like):
    return x if isinstance(x, Tensor) else _const(x, like)


def _promote(x, y, op, scalar_tensors=True):
    """Both tensors in the dtype Paddle 3 computes ``op`` in (see ``promotion``)."""
    dx, dy = x._data.dtype, y._data.dtype
    if dx == dy:
        return x, y
    d = result_dtype(dx, x._data.ndim, dy, y._data.ndim, op, scalar_tensors)
    return cast(x, d), cast(y, d)


def _pair(x, y, op):
    return _promote(_as_tensor(x, y), _as_tensor(y, x), op)


def _int_to_float(x):
    """Paddle promotes an integer tensor to float when combined with a float scalar."""
    return cast(x, default_float()) if x._data.dtype.kind in "iub" else x


def add(x, y, name=None):
    if isinstance(y, Tensor) and isinstance(x, Tensor):
        return Add()(*_promote(x, y, "add"))
    if isinstance(y, _SCALARS) and isinstance(x, Tensor):
        if isinstance(y, float):
            x = _int_to_float(x)
        return AddScalar(y)(x)
    if isinstance(x, _SCALARS):
        return add(y, x)
    return Add()(*_pair(x, y, "add"))


def subtract(x, y, name=None):
    if isinstance(y, Tensor) and isinstance(x, Tensor):
        return Sub()(*_promote(x, y, "subtract"))
    if isinstance(y, _SCALARS) and isinstance(x, Tensor):
        if isinstance(y, float):
            x = _int_to_float(x)
        return AddScalar(-y)(x)
    if isinstance(x, _SCALARS):
        if isinstance(x, float):
            y = _int_to_float(y)
        return RSubScalar(x)(y)
    return Sub()(*_pair(x, y, "subtract"))


def multiply(x, y, name=None):
    if isinstance(y, Tensor) and isinstance(x, Tensor):
        return Mul()(*_promote(x, y, "multiply"))
    if isinstance(y, _SCALARS) and isinstance(x, Tensor):
        if isinstance(y, float):
            x = _int_to_float(x)
        return MulScalar(y)(x)
    if isinstance(x, _SCALARS):
        return multiply(y, x)
    return Mul()(*_pair(x, y, "multiply"))


def divide(x, y, name=None):
    """True division; integer inputs give the default float dtype."""
    if isinstance(y, _SCALARS) and isinstance(x, Tensor):
        return DivScalar(y)(_int_to_float(x))
    if isinstance(x, _SCALARS):
        return RDivScalar(x)(_int_to_float(y))
    x, y = _pair(x, y, "divide")
    if x._data.dtype.kind in "iub" and y._data.dtype.kind in "iub":
        x, y = _int_to_float(x), _int_to_float(y)
    return Div()(x, y)


def pow(x, y, name=None):
    if isinstance(y, _SCALARS) and isinstance(x, Tensor):
        if isinstance(y, float):
            x = _int_to_float(x)
        return PowScalar(y)(x)
    if isinstance(x, _SCALARS):
        return RPowScalar(x)(_int_to_float(y) if isinstance(x, float) else y)
    return Pow()(*_pair(x, y, "pow"))


def floor_divide(x, y, name=None):
    return FloorDiv()(*_pair(x, y, "floor_divide"))


def remainder(x, y, name=None):
    return Mod()(*_pair(x, y, "remainder"))


mod = remainder
floor_mod = remainder


def maximum(x, y, name=None):
    return Maximum()(*_pair(x, y, "maximum"))


def minimum(x, y, name=None):
    return Minimum()(*_pair(x, y, "minimum"))


def neg(x, name=None):
    return Neg()(x)


def abs(x, name=None):  # noqa: A001 - Paddle's name
    return Abs()(x)


def exp(x, name=None):
    return Exp()(_int_to_float(x))


def log(x, name=None):
    return Log()(_int_to_float(x))


def log1p(x, name=None):
    return Log1p()(_int_to_float(x))


def sqrt(x, name=None):
    return Sqrt()(_int_to_float(x))


def rsqrt(x, name=None):
    return Rsqrt()(_int_to_float(x))


def square(x, name=None):
    return Square()(x)


def sin(x, name=None):
    return Sin()(_int_to_float(x))


def cos(x, name=None):
    return Cos()(_int_to_float(x))


def tanh(x, name=None):
    return Tanh()(_int_to_float(x))


def sigmoid(x, name=None):
    return Sigmoid()(_int_to_float(x))


def erf(x, name=None):
    return Erf()(_int_to_float(x))


def relu(x, name=None):
    return Relu()(x)


def tan(x, name=None):
    return Tan()(_int_to_float(x))


def asin(x, name=None):
    return Asin()(_int_to_float(x))


def acos(x, name=None):
    return Acos()(_int_to_float(x))


def atan(x, name=None):
    return Atan()(_int_to_float(x))


def sinh(x, name=None):
    return Sinh()(_int_to_float(x))


def cosh(x, name=None):
    return Cosh()(_int_to_float(x))


def asinh(x, name=None):
    return Asinh()(_int_to_float(x))


def acosh(x, name=None):
    return Acosh()(_int_to_float(x))


def atanh(x, name=None):
    return Atanh()(_int_to_float(x))


def log2(x, name=None):
    return Log2()(_int_to_float(x))


def log10(x, name=None):
    return Log10()(_int_to_float(x))


def expm1(x, name=None):
    return Expm1()(_int_to_float(x))


def reciprocal(x, name=None):
    return Reciprocal()(_int_to_float(x))


def trunc(input, name=None):  # noqa: A002 - Paddle's name
    return ZeroGrad("trunc")(input)


def clip(x, min=None, max=None, name=None):  # noqa: A002 - Paddle's names
    lo = min.item() if isinstance(min, Tensor) else min
    hi = max.item() if isinstance(max, Tensor) else max
    return Clip(lo, hi)(x)


def clamp(x, min=None, max=None):  # noqa: A002 - PyTorch's names
    return clip(x, min, max)


def sign(x, name=None):
    return ZeroGrad("sign")(x)


def floor(x, name=None):
    return ZeroGrad("floor")(x)


def ceil(x, name=None):
    return ZeroGrad("ceil")(x)


def round(x, decimals=0, name=None):  # noqa: A001
    """Round half to even (numpy's and Paddle's rule), to ``decimals`` places."""
    if decimals:
        s = 10.0 ** int(decimals)
        return divide(ZeroGrad("round")(multiply(x, s)), s)
    return ZeroGrad("round")(x)


def cast(x, dtype):
    d = convert_dtype(dtype)
    if x._data.dtype == d:
        return x
    return Cast(d)(x)


def where(condition, x=None, y=None, name=None):
    if x is None and y is None:
        return nonzero(condition, as_tuple=True)
    like = condition if not isinstance(x, Tensor) and not isinstance(y, Tensor) else (
        x if isinstance(x, Tensor) else y)
    x, y = _promote(_as_tensor(x, like), _as_tensor(y, like), "where", scalar_tensors=False)
    cond = condition if isinstance(condition, Tensor) else _const(condition, like)
    return Where()(cond, x, y)
