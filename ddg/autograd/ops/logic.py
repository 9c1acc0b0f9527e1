"""Comparisons, logic, bitwise ops, value tests (isnan...) and nonzero: elementwise ops
without a gradient (argmax/argmin and all/any, likewise, live in reduce.py).

They are ``Function`` subclasses like every other op (``differentiable = False``: the
engine never records a node for them, their outputs never require grad), so that
``ddg.jit.to_static`` sees them as ops and replays them on new data instead of
freezing their results as constants.
"""
import numpy as np

from ...tensor import backend
from ...tensor.tensor import Tensor
from ..function import Function
from ..promotion import result_dtype

_SCALARS = (int, float, bool, np.number, np.bool_)


class Elementwise(Function):
    """``xp.<fn>`` applied elementwise (comparison, logical, bitwise or value test).

    With ``scalar`` set the op takes one tensor and the Python scalar is the other
    operand: the second one, or the first when ``scalar_first``."""
    differentiable = False
    save_inputs = False

    def __init__(self, fn, scalar=None, scalar_first=False):
        self.fn = fn
        self.scalar = scalar
        self.scalar_first = scalar_first

    @property
    def name(self):
        return self.fn

    def forward(self, *arrays):
        f = getattr(backend.get_array_module(*arrays), self.fn)
        if self.scalar is None:
            return f(*arrays)
        return f(self.scalar, arrays[0]) if self.scalar_first else f(arrays[0], self.scalar)


def _tensor_of(v, like):
    """A non-scalar operand (list, array) as a constant tensor on the place of ``like``."""
    return Tensor._wrap(backend.get_array_module(like._data).asarray(np.asarray(v)))


def _binary(fn):
    def op(x, y, name=None):
        if isinstance(x, Tensor) and isinstance(y, Tensor):
            dx, dy = x._data.dtype, y._data.dtype
            if dx != dy:  # Paddle 3 refuses what it would not promote (int32 == int64...)
                result_dtype(dx, x._data.ndim, dy, y._data.ndim, fn)
            return Elementwise(fn)(x, y)
        if isinstance(x, Tensor):
            if isinstance(y, _SCALARS):
                return Elementwise(fn, y)(x)
            return Elementwise(fn)(x, _tensor_of(y, x))
        if not isinstance(y, Tensor):
            raise TypeError(f"ddg.{fn}: expected a Tensor operand, got {type(x).__name__} and {type(y).__name__}")
        if isinstance(x, _SCALARS):
            return Elementwise(fn, x, scalar_first=True)(y)
        return Elementwise(fn)(_tensor_of(x, y), y)
    op.__name__ = fn
    return op


def _unary(fn):
    def op(x, name=None):
        return Elementwise(fn)(x)
    op.__name__ = fn
    return op


equal = _binary("equal")
not_equal = _binary("not_equal")
less_than = _binary("less")
less_equal = _binary("less_equal")
greater_than = _binary("greater")
greater_equal = _binary("greater_equal")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")
logical_not = _unary("logical_not")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
bitwise_not = _unary("invert")
isnan = _unary("isnan")
isinf = _unary("isinf")
isfinite = _unary("isfinite")


class EqualAll(Function):
    """One bool: same shape and all elements equal."""
    differentiable = False
    save_inputs = False

    def forward(self, a, b):
        xp = backend.get_array_module(a, b)
        return xp.asarray(a.shape == b.shape and bool((a == b).all()))


class IsClose(Function):
    """``xp.isclose`` elementwise, or ``xp.allclose`` as one bool when ``reduce``."""
    differentiable = False
    save_inputs = False

    def __init__(self, rtol, atol, equal_nan, reduce):
        self.rtol, self.atol, self.equal_nan, self.reduce = rtol, atol, equal_nan, reduce

    @property
    def name(self):
        return "allclose" if self.reduce else "isclose"

    def forward(self, a, b):
        xp = backend.get_array_module(a, b)
        if self.reduce:
            return xp.asarray(bool(xp.allclose(a, b, self.rtol, self.atol, self.equal_nan)))
        return xp.isclose(a, b, self.rtol, self.atol, self.equal_nan)


def equal_all(x, y, name=None):
    return EqualAll()(x, y)


def allclose(x, y, rtol=1e-05, atol=1e-08, equal_nan=False, name=None):
    return IsClose(float(rtol), float(atol), bool(equal_nan), True)(x, y)


def isclose(x, y, rtol=1e-05, atol=1e-08, equal_nan=False, name=None):
    return IsClose(float(rtol), float(atol), bool(equal_nan), False)(x, y)


# -- nonzero ------------------------------------------------------------------------------
class Nonzero(Function):
    """Indices of the nonzero elements: an [n, ndim] int64 array, or (``as_tuple``) one
    [n, 1] array per dimension (a multi-output op)."""
    differentiable = False
    save_inputs = False

    def __init__(self, as_tuple):
        self.as_tuple = as_tuple

    def forward(self, a):
        xp = backend.get_array_module(a)
        nz = xp.nonzero(a)
        if self.as_tuple:
            return tuple(i.astype(np.int64).reshape(-1, 1) for i in nz)
        return xp.stack(nz, axis=1).astype(np.int64) if nz else xp.zeros((0, 0), np.int64)


def nonzero(x, as_tuple=False):
    return Nonzero(bool(as_tuple))(x)
