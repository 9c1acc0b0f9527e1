"""Elementwise primitives: arithmetic (tensor-tensor and tensor-scalar), unary math,
comparisons and logic. Gradients undo broadcasting with ``sum_to`` and come back in
each input's own dtype."""
import types

import numpy as np

from ...tensor import backend
from ...tensor import kernels as _kernels
from ...tensor.dtypes import bfloat16 as _BF16
from ...tensor.dtypes import convert_dtype, default_float
from ...tensor.tensor import Tensor
from ..function import Function, sum_to
from ..higher import const, fit_t, live_input, live_output
from ..promotion import result_dtype
from .logic import nonzero

_SCALARS = (int, float, bool, np.number, np.bool_)


def _fit(g, shape, dtype):
    """Gradient ``g`` summed down to ``shape`` (undoing broadcasting) in ``dtype``."""
    g = sum_to(g, shape)
    return g if g.dtype == dtype else g.astype(dtype)


# -- tensor (op) tensor ------------------------------------------------------------
class Add(Function):
    save_inputs = False

    def forward(self, a, b):
        self.meta = (a.shape, a.dtype, b.shape, b.dtype)
        return a + b

    def backward(self, g):
        na, nb = self.needs
        sa, da, sb, db = self.meta
        return (_fit(g, sa, da) if na else None, _fit(g, sb, db) if nb else None)

    def backward_graph(self, g):
        na, nb = self.needs
        sa, da, sb, db = self.meta
        return (fit_t(g, sa, da) if na else None, fit_t(g, sb, db) if nb else None)


class Sub(Function):
    save_inputs = False

    def forward(self, a, b):
        self.meta = (a.shape, a.dtype, b.shape, b.dtype)
        return a - b

    def backward(self, g):
        na, nb = self.needs
        sa, da, sb, db = self.meta
        return (_fit(g, sa, da) if na else None, _fit(-g, sb, db) if nb else None)

    def backward_graph(self, g):
        na, nb = self.needs
        sa, da, sb, db = self.meta
        return (fit_t(g, sa, da) if na else None, fit_t(-g, sb, db) if nb else None)


class Mul(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return a * b

    def backward(self, g):
        na, nb = self.needs
        a, b = self.a, self.b
        return (_fit(g * b, a.shape, a.dtype) if na else None, _fit(g * a, b.shape, b.dtype) if nb else None)

    def backward_graph(self, g):
        na, nb = self.needs
        a, b = self.a, self.b
        at, bt = live_input(self, 0, a), live_input(self, 1, b)
        return (fit_t(g * bt, a.shape, a.dtype) if na else None, fit_t(g * at, b.shape, b.dtype) if nb else None)


class Div(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return a / b

    def backward(self, g):
        na, nb = self.needs
        gb = None
        ga = g / self.b
        if nb:
            gb = _fit(-ga * self.a / self.b, self.b.shape, self.b.dtype)
        return (_fit(ga, self.a.shape, self.a.dtype) if na else None, gb)

    def backward_graph(self, g):
        na, nb = self.needs
        a, b = self.a, self.b
        bt = live_input(self, 1, b)
        ga = g / bt
        gb = fit_t(-ga * live_input(self, 0, a) / bt, b.shape, b.dtype) if nb else None
        return (fit_t(ga, a.shape, a.dtype) if na else None, gb)


class Pow(Function):
    save_output = True

    def forward(self, a, b):
        self.a, self.b = a, b
        self.out = a ** b
        return self.out

    def backward(self, g):
        na, nb = self.needs
        xp = backend.get_array_module(g)
        a, b = self.a, self.b
        ga = _fit(g * b * a ** (b - 1), a.shape, a.dtype) if na else None
        gb = None
        if nb:
            with np.errstate(divide="ignore", invalid="ignore"):
                one, zero = a.dtype.type(1), a.dtype.type(0)  # typed: numpy 1.x would pick float16 for 1
                log_a = xp.where(a > 0, xp.log(xp.where(a > 0, a, one)), zero)
            gb = _fit(g * self.out * log_a, b.shape, b.dtype)
        return ga, gb

    def backward_graph(self, g):
        na, nb = self.needs
        a, b = self.a, self.b
        at, bt = live_input(self, 0, a), live_input(self, 1, b)
        ga = fit_t(g * bt * at ** (bt - 1), a.shape, a.dtype) if na else None
        gb = None
        if nb:
            pos = const((a > 0).astype(a.dtype))
            # log(a) where a > 0, else 0 (the log's input is kept positive)
            log_a = (at * pos + (1 - pos)).log() * pos
            gb = fit_t(g * live_output(self, self.out) * log_a, b.shape, b.dtype)
        return ga, gb


class Maximum(Function):
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

    def backward(self, g):
        # ties send half the gradient each way
        a, b = self.a, self.b
        wa = self._weights(g.dtype)
        na, nb = self.needs
        return (_fit(g * wa, a.shape, a.dtype) if na else None,
                _fit(g * (1 - wa), b.shape, b.dtype) if nb else None)

    def backward_graph(self, g):
        a, b = self.a, self.b
        wa = self._weights(g._data.dtype)
        na, nb = self.needs
        return (fit_t(g * const(wa), a.shape, a.dtype) if na else None,
                fit_t(g * const(1 - wa), b.shape, b.dtype) if nb else None)


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


class Mod(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return backend.get_array_module(a, b).mod(a, b)

    def backward(self, g):
        xp = backend.get_array_module(g)
        na, nb = self.needs
        return (_fit(g, self.a.shape, self.a.dtype) if na else None,
                _fit(-g * xp.floor_divide(self.a, self.b), self.b.shape, self.b.dtype) if nb else None)

    def backward_graph(self, g):
        xp = backend.get_array_module(g._data)
        na, nb = self.needs
        return (fit_t(g, self.a.shape, self.a.dtype) if na else None,
                fit_t(-g * const(xp.floor_divide(self.a, self.b)), self.b.shape, self.b.dtype) if nb else None)


# -- tensor (op) python scalar ----------------------------------------------------
def _sc(s, a):
    """The Python scalar ``s`` as an operand for array ``a``. numpy 1.x promotes a 0-d
    array with a Python scalar by value (a float32 0-d array times 2 is float64 there,
    float32 under numpy 2's rules and in Paddle), so for 0-d arrays the scalar is given
    ``a``'s dtype, which keeps ``a``'s dtype under every numpy. numpy scalars
    (``np.float64(0.5)``) count as Python scalars, as in Paddle."""
    if a.dtype == _BF16 and not isinstance(s, (bool, np.bool_)):
        return _BF16.type(s)   # numpy widens bfloat16 (ml_dtypes) with a Python float to float32
    if (a.ndim == 0 or isinstance(s, np.generic)) and (a.dtype.kind in "fc" or (a.dtype.kind in "iu" and isinstance(s, (int, np.integer))
                                                and not isinstance(s, (bool, np.bool_)))):
        return a.dtype.type(s)
    return s


class AddScalar(Function):
    save_inputs = False

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        return a + _sc(self.s, a)

    def backward(self, g):
        return g

    def backward_graph(self, g):
        return g


class MulScalar(Function):
    save_inputs = False

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        return a * _sc(self.s, a)

    def backward(self, g):
        return g * _sc(self.s, g)

    def backward_graph(self, g):
        return g * self.s


class RSubScalar(Function):  # s - a
    save_inputs = False

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        return _sc(self.s, a) - a

    def backward(self, g):
        return -g

    def backward_graph(self, g):
        return -g


class DivScalar(Function):  # a / s
    save_inputs = False

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        return a / _sc(self.s, a)

    def backward(self, g):
        return g / _sc(self.s, g)

    def backward_graph(self, g):
        return g / self.s


class RDivScalar(Function):  # s / a
    save_output = True

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        self.a = a
        self.out = _sc(self.s, a) / a
        return self.out

    def backward(self, g):
        return -g * self.out / self.a

    def backward_graph(self, g):
        return -g * live_output(self, self.out) / live_input(self, 0, self.a)


class PowScalar(Function):  # a ** s
    def __init__(self, s):
        self.s = s

    def forward(self, a):
        self.a = a
        return a ** _sc(self.s, a)

    def backward(self, g):
        s = self.s
        if s == 2:
            return g * (2 * self.a)
        return g * (_sc(s, self.a) * self.a ** _sc(s - 1, self.a))

    def backward_graph(self, g):
        s = self.s
        a = live_input(self, 0, self.a)
        return g * (2 * a) if s == 2 else g * (s * a ** (s - 1))


class RPowScalar(Function):  # s ** a
    save_inputs = False
    save_output = True

    def __init__(self, s):
        self.s = s

    def forward(self, a):
        self.out = _sc(self.s, a) ** a
        return self.out

    def backward(self, g):
        return g * self.out * _sc(float(np.log(self.s)), g)

    def backward_graph(self, g):
        return g * live_output(self, self.out) * float(np.log(self.s))


# -- unary math ----------------------------------------------------------------------
class Neg(Function):
    save_inputs = False

    def forward(self, a):
        return -a

    def backward(self, g):
        return -g

    def backward_graph(self, g):
        return -g


class Abs(Function):
    def forward(self, a):
        self.a = a
        return backend.get_array_module(a).abs(a)

    def backward(self, g):
        return g * backend.get_array_module(g).sign(self.a)

    def backward_graph(self, g):
        return g * const(backend.get_array_module(self.a).sign(self.a))


class Exp(Function):
    save_inputs = False
    save_output = True

    def forward(self, a):
        self.out = backend.get_array_module(a).exp(a)
        return self.out

    def backward(self, g):
        return g * self.out

    def backward_graph(self, g):
        return g * live_output(self, self.out)


class Log(Function):
    def forward(self, a):
        self.a = a
        return backend.get_array_module(a).log(a)

    def backward(self, g):
        return g / self.a

    def backward_graph(self, g):
        return g / live_input(self, 0, self.a)


class Log1p(Function):
    def forward(self, a):
        self.a = a
        return backend.get_array_module(a).log1p(a)

    def backward(self, g):
        return g / (1 + self.a)

    def backward_graph(self, g):
        return g / (1 + live_input(self, 0, self.a))


class Sqrt(Function):
    save_inputs = False
    save_output = True

    def forward(self, a):
        self.out = backend.get_array_module(a).sqrt(a)
        return self.out

    def backward(self, g):
        return g / (2 * self.out)

    def backward_graph(self, g):
        return g / (2 * live_output(self, self.out))


class Rsqrt(Function):
    save_inputs = False
    save_output = True

    def forward(self, a):
        self.out = a.dtype.type(1) / backend.get_array_module(a).sqrt(a)
        return self.out

    def backward(self, g):
        return g * (-0.5 * self.out ** 3)

    def backward_graph(self, g):
        return g * (-0.5 * live_output(self, self.out) ** 3)


class Square(Function):
    def forward(self, a):
        self.a = a
        return a * a

    def backward(self, g):
        return g * (2 * self.a)

    def backward_graph(self, g):
        return g * (2 * live_input(self, 0, self.a))


class Sin(Function):
    def forward(self, a):
        self.a = a
        return backend.get_array_module(a).sin(a)

    def backward(self, g):
        return g * backend.get_array_module(g).cos(self.a)

    def backward_graph(self, g):
        return g * live_input(self, 0, self.a).cos()


class Cos(Function):
    def forward(self, a):
        self.a = a
        return backend.get_array_module(a).cos(a)

    def backward(self, g):
        return -g * backend.get_array_module(g).sin(self.a)

    def backward_graph(self, g):
        return -g * live_input(self, 0, self.a).sin()


class Tanh(Function):
    save_inputs = False
    save_output = True

    def forward(self, a):
        self.out = backend.get_array_module(a).tanh(a)
        return self.out

    def backward(self, g):
        return g * (1 - self.out * self.out)

    def backward_graph(self, g):
        y = live_output(self, self.out)
        return g * (1 - y * y)


class Sigmoid(Function):
    save_inputs = False
    save_output = True

    def forward(self, a):
        # 1 / (1 + exp(-a)): exact in both tails (exp overflowing to inf gives exactly 0), and
        # four fast passes where numpy's where on the sign mask is a slow one
        self.out = _kernels.sigmoid(backend.get_array_module(a), a)
        return self.out

    def backward(self, g):
        return g * self.out * (1 - self.out)

    def backward_graph(self, g):
        y = live_output(self, self.out)
        return g * y * (1 - y)


class Erf(Function):
    def forward(self, a):
        self.a = a
        return backend.erf(backend.get_array_module(a), a).astype(a.dtype, copy=False)

    def backward(self, g):
        xp = backend.get_array_module(g)
        return g * _sc(float(2 / np.sqrt(np.pi)), g) * xp.exp(-self.a * self.a)

    def backward_graph(self, g):
        a = live_input(self, 0, self.a)
        return g * float(2 / np.sqrt(np.pi)) * (-a * a).exp()


class Tan(Function):
    save_inputs = False
    save_output = True

    def forward(self, a):
        self.out = backend.get_array_module(a).tan(a)
        return self.out

    def backward(self, g):
        return g * (1 + self.out * self.out)

    def backward_graph(self, g):
        y = live_output(self, self.out)
        return g * (1 + y * y)


class _InputUnary(Function):
    """A unary op whose gradient is ``g * d(a)``, with ``d`` a function of the input."""
    fn = None

    def forward(self, a):
        self.a = a
        return getattr(backend.get_array_module(a), self.fn)(a)

    def backward(self, g):
        return g * self.d(backend.get_array_module(g), self.a)

    def backward_graph(self, g):
        return g * self.d(_TensorMath, live_input(self, 0, self.a))


class Asin(_InputUnary):
    fn = "arcsin"

    @staticmethod
    def d(xp, a):
        return 1 / xp.sqrt(1 - a * a)


class Acos(_InputUnary):
    fn = "arccos"

    @staticmethod
    def d(xp, a):
        return -1 / xp.sqrt(1 - a * a)


class Atan(_InputUnary):
    fn = "arctan"

    @staticmethod
    def d(xp, a):
        return 1 / (1 + a * a)


class Sinh(_InputUnary):
    fn = "sinh"

    @staticmethod
    def d(xp, a):
        return xp.cosh(a)


class Cosh(_InputUnary):
    fn = "cosh"

    @staticmethod
    def d(xp, a):
        return xp.sinh(a)


class Asinh(_InputUnary):
    fn = "arcsinh"

    @staticmethod
    def d(xp, a):
        return 1 / xp.sqrt(a * a + 1)


class Acosh(_InputUnary):
    fn = "arccosh"

    @staticmethod
    def d(xp, a):
        return 1 / xp.sqrt(a * a - 1)


class Atanh(_InputUnary):
    fn = "arctanh"

    @staticmethod
    def d(xp, a):
        return 1 / (1 - a * a)


class Log2(_InputUnary):
    fn = "log2"

    @staticmethod
    def d(xp, a):
        return 1 / (a * a.dtype.type(np.log(2)))


class Log10(_InputUnary):
    fn = "log10"

    @staticmethod
    def d(xp, a):
        return 1 / (a * a.dtype.type(np.log(10)))


class Expm1(Function):
    save_inputs = False
    save_output = True

    def forward(self, a):
        self.out = backend.get_array_module(a).expm1(a)
        return self.out

    def backward(self, g):
        return g * (self.out + 1)

    def backward_graph(self, g):
        return g * (live_output(self, self.out) + 1)


class Reciprocal(Function):
    save_inputs = False
    save_output = True

    def forward(self, a):
        self.out = a.dtype.type(1) / a
        return self.out

    def backward(self, g):
        return -g * self.out * self.out

    def backward_graph(self, g):
        y = live_output(self, self.out)
        return -g * y * y


class Relu(Function):
    save_inputs = False
    save_output = True

    def forward(self, a):
        xp = backend.get_array_module(a)
        if a.dtype.kind in "fV":
            self.out = _kernels.clamp(xp, a, lo=0)
        else:
            self.out = xp.maximum(a, a.dtype.type(0))
        return self.out

    def backward(self, g):
        out = self.out
        xp = backend.get_array_module(out)
        if g.strides != out.strides or g.dtype != out.dtype:
            # a broadcast gradient (from a mean or a pool) or another layout: copy it into the
            # output's layout first, where the masked product is one contiguous pass (numpy's
            # mixed-type loop over a broadcast operand is ~40x slower than this copy)
            res = xp.empty_like(out)
            res[...] = g
            res *= out > 0
            return res
        return xp.multiply(g, out > 0, out=xp.empty_like(out))

    def backward_graph(self, g):
        return g * const((self.out > 0).astype(g._data.dtype))


class Clip(Function):
    """``clip`` passes the gradient where ``lo <= x <= hi`` (bounds included, as Paddle's
    clip); with ``strict`` only where ``lo < x < hi``, which is the gradient Paddle gives
    relu6, hardtanh and hardsigmoid at their kinks."""
    strict = False  # class default: programs saved before the attribute existed load unchanged

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

    def backward(self, g):
        mask = True
        if self.lo is not None:
            mask = self.a > self.lo if self.strict else self.a >= self.lo
        if self.hi is not None:
            mask = mask & (self.a < self.hi if self.strict else self.a <= self.hi)
        return g * mask

    def backward_graph(self, g):
        mask = True
        if self.lo is not None:
            mask = self.a > self.lo if self.strict else self.a >= self.lo
        if self.hi is not None:
            mask = mask & (self.a < self.hi if self.strict else self.a <= self.hi)
        return g * const(backend.get_array_module(self.a).asarray(mask).astype(g._data.dtype))


class ZeroGrad(Function):
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

    def backward(self, g):
        return backend.get_array_module(g).zeros(*self.meta)

    def backward_graph(self, g):
        return const(backend.get_array_module(g._data).zeros(*self.meta))


class Cast(Function):
    save_inputs = False
    keep_half = False   # the one op whose point is to change the dtype

    def __init__(self, dtype):
        self.dtype = dtype

    def forward(self, a):
        self.src = a.dtype
        return a.astype(self.dtype)

    def backward(self, g):
        return g.astype(self.src) if self.src.kind in "fcV" else None

    def backward_graph(self, g):
        return Cast(self.src)(g) if self.src.kind in "fc" else None


class Where(Function):
    def forward(self, cond, a, b):
        self.cond = cond
        self.a_meta = (a.shape, a.dtype)
        self.b_meta = (b.shape, b.dtype)
        return backend.get_array_module(a, b).where(cond, a, b)

    def backward(self, g):
        _, na, nb = self.needs
        zero = g.dtype.type(0)
        xp = backend.get_array_module(g)
        return (None,
                _fit(xp.where(self.cond, g, zero), *self.a_meta) if na else None,
                _fit(xp.where(self.cond, zero, g), *self.b_meta) if nb else None)

    def backward_graph(self, g):
        _, na, nb = self.needs
        c = const(self.cond)
        z = const(backend.get_array_module(g._data).zeros((), g._data.dtype))
        return (None,
                fit_t(Where()(c, g, z), *self.a_meta) if na else None,
                fit_t(Where()(c, z, g), *self.b_meta) if nb else None)


# the ``xp`` functions ``_InputUnary.d`` uses, on Tensors (for ``backward_graph``)
_TensorMath = types.SimpleNamespace(sqrt=lambda t: t.sqrt(), cosh=lambda t: t.cosh(), sinh=lambda t: t.sinh())


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
