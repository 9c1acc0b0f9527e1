"""Reductions over an ``axis`` (int, list or None) with ``keepdim``."""
import builtins as _b

import numpy as np

from ...tensor import backend
from ...tensor.dtypes import compute_dtype, convert_dtype, default_float, upcast
from ...tensor.tensor import Tensor
from ..axes import normalize_axis as _axis
from ..axes import normalize_axes as _axes
from ..function import Function
from ..higher import const, linear_backward_graph, live_input, live_output


def _expand_back(g, in_shape, axes, keepdim):
    """Reshape a reduced gradient so it broadcasts against the input."""
    if not keepdim and axes:
        shape = list(in_shape)
        for a in axes:
            shape[a] = 1
        g = g.reshape(shape)
    return g


class Sum(Function):
    save_inputs = False

    def __init__(self, axes, keepdim, dtype=None):
        self.axes, self.keepdim, self.dtype = axes, keepdim, dtype
        if dtype is not None:
            self.keep_half = False   # sum(x, dtype='float32') of a half x is float32

    def forward(self, a):
        self.meta = (a.shape, a.dtype)
        # 2-byte floats accumulate in float32 (and come back in their dtype)
        return a.sum(axis=self.axes, keepdims=self.keepdim, dtype=self.dtype or compute_dtype(a.dtype))

    def backward(self, g):
        shape, dtype = self.meta
        g = _expand_back(g, shape, self.axes, self.keepdim)
        return backend.broadcast_view(g.astype(dtype, copy=False), shape)

    def backward_graph(self, g):
        shape, dtype = self.meta
        g = _expand_back(g, shape, self.axes, self.keepdim)
        return (g if g._data.dtype == dtype else g.astype(dtype)).expand(list(shape))


class Mean(Function):
    save_inputs = False

    def __init__(self, axes, keepdim):
        self.axes, self.keepdim = axes, keepdim

    def forward(self, a):
        self.meta = (a.shape, a.dtype)
        if a.dtype.kind in "iu":  # Paddle: the integer mean, rounded toward zero, in the input's dtype
            xp = backend.get_array_module(a)
            s = a.sum(axis=self.axes, keepdims=self.keepdim, dtype=xp.int64)
            n = 1
            for ax in self.axes:
                n *= a.shape[ax]
            n = _b.max(n, 1)
            q = s // n
            q = xp.where((s < 0) & (q * n != s), q + 1, q)
            return xp.asarray(q).astype(a.dtype)
        return a.mean(axis=self.axes, keepdims=self.keepdim, dtype=compute_dtype(a.dtype))

    def backward(self, g):
        shape, dtype = self.meta
        n = 1
        for ax in self.axes:
            n *= shape[ax]
        g = _expand_back(g, shape, self.axes, self.keepdim) * (1.0 / _b.max(n, 1))
        return backend.broadcast_view(g.astype(dtype, copy=False), shape)

    def backward_graph(self, g):
        shape, dtype = self.meta
        n = 1
        for ax in self.axes:
            n *= shape[ax]
        g = _expand_back(g, shape, self.axes, self.keepdim) * (1.0 / _b.max(n, 1))
        return (g if g._data.dtype == dtype else g.astype(dtype)).expand(list(shape))


class MaxMin(Function):
    """max / min; ties share the gradient equally."""

    def __init__(self, axes, keepdim, fn):
        self.axes, self.keepdim, self.fn = axes, keepdim, fn

    @property
    def name(self):
        return self.fn

    def forward(self, a):
        self.a = a
        xp = backend.get_array_module(a)
        if a.size == 0:
            raise ValueError(f"zero-size tensor of shape {list(a.shape)} has no {self.fn}")
        self.out = getattr(xp, self.fn)(a, axis=self.axes, keepdims=True)
        return self.out if self.keepdim else self.out.reshape(
            [n for i, n in enumerate(a.shape) if i not in self.axes])

    def backward(self, g):
        mask = (self.a == self.out).astype(g.dtype)
        mask /= mask.sum(axis=self.axes, keepdims=True)
        return _expand_back(g, self.a.shape, self.axes, self.keepdim) * mask

    def backward_graph(self, g):
        # linear in g: the winners' mask is a constant of the formula (it has zero derivative)
        mask = (self.a == self.out).astype(g._data.dtype)
        mask /= mask.sum(axis=self.axes, keepdims=True)
        return _expand_back(g, self.a.shape, self.axes, self.keepdim) * const(mask)


class Prod(Function):
    def __init__(self, axes, keepdim):
        self.axes, self.keepdim = axes, keepdim

    def forward(self, a):
        self.a = a
        # integers keep their dtype, as in Paddle (numpy would widen int32 to int64)
        self.out = a.prod(axis=self.axes, keepdims=True, dtype=a.dtype if a.dtype.kind in "iu" else None)
        return self.out if self.keepdim else self.out.reshape(
            [n for i, n in enumerate(a.shape) if i not in self.axes])

    def backward(self, g):
        xp = backend.get_array_module(g)
        g = _expand_back(g, self.a.shape, self.axes, self.keepdim)
        a = self.a
        if xp is np and not (a == 0).any():  # fast path; the test is a D2H sync on a GPU
            return g * self.out / a
        # exact product of the other elements where zeros occur: move reduced axes last,
        # flatten them, and take exclusive cumulative products from both sides
        keep = [i for i in range(a.ndim) if i not in self.axes]
        perm = keep + list(self.axes)
        moved = xp.transpose(a, perm)
        flat = moved.reshape(moved.shape[:len(keep)] + (-1,))
        ones = xp.ones(flat.shape[:-1] + (1,), dtype=a.dtype)
        left = xp.cumprod(xp.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
        right = xp.flip(xp.cumprod(xp.flip(xp.concatenate([flat[..., 1:], ones], axis=-1), -1), axis=-1), -1)
        others = (left * right).reshape(moved.shape)
        inv = tuple(np.argsort(perm).tolist())   # axes as Python ints (cupy wants no host array)
        return g * xp.transpose(others, inv)

    def backward_graph(self, g):
        a = self.a
        if bool((a == 0).any()):
            raise NotImplementedError(f"ddg: op Prod does not support higher-order gradients (create_graph=True) "
                                      f"where its input holds zeros (shape {list(a.shape)})")
        out = live_output(self, self.out if self.keepdim else self.out.reshape(
            [n for i, n in enumerate(a.shape) if i not in self.axes]))
        out = _expand_back(out, a.shape, self.axes, self.keepdim)
        return _expand_back(g, a.shape, self.axes, self.keepdim) * out / live_input(self, 0, a)


class LogSumExp(Function):
    """A primitive for numerical stability: subtracts the max before exponentiating."""

    def __init__(self, axes, keepdim):
        self.axes, self.keepdim = axes, keepdim

    def forward(self, a):
        xp = backend.get_array_module(a)
        a = upcast(a)
        m = a.max(axis=self.axes, keepdims=True)
        m = xp.where(xp.isfinite(m), m, m.dtype.type(0))
        self.e = xp.exp(a - m)
        s = self.e.sum(axis=self.axes, keepdims=True)
        self.s = s
        out = xp.log(s) + m
        self.a, self.out = a, out  # for backward_graph
        return out if self.keepdim else out.reshape([n for i, n in enumerate(a.shape) if i not in self.axes])

    def backward(self, g):
        return _expand_back(g, self.e.shape, self.axes, self.keepdim) * (self.e / self.s)

    def backward_graph(self, g):
        # d logsumexp / da = exp(a - logsumexp(a)), with the output (keepdims) on the graph
        a = live_input(self, 0, self.a)
        out = live_output(self, self.out if self.keepdim else self.out.reshape(
            [n for i, n in enumerate(self.a.shape) if i not in self.axes]))
        if not self.keepdim:
            out = _expand_back(out, self.e.shape, self.axes, False)
        return _expand_back(g, self.e.shape, self.axes, self.keepdim) * (a - out).exp()


class CumSum(Function):
    """Cumulative sum along ``axis``; ``axis=None`` runs over the flattened input."""
    save_inputs = False

    def __init__(self, axis):
        self.axis = axis

    def forward(self, a):
        self.shape = a.shape
        return backend.get_array_module(a).cumsum(a, axis=self.axis, dtype=compute_dtype(a.dtype))

    def backward(self, g):
        xp = backend.get_array_module(g)
        axis = 0 if self.axis is None else self.axis
        return xp.flip(xp.cumsum(xp.flip(g, axis), axis=axis), axis).reshape(self.shape)

    backward_graph = linear_backward_graph


class CumProd(Function):
    """Cumulative product along ``axis`` (the flattened input when None). The gradient of
    x_i is ``sum_{j >= i} g_j * out_j / x_i``; where some x is 0 that division is replaced
    by the exact products without x_i (a quadratic loop over the axis, only then)."""

    def __init__(self, axis):
        self.axis = axis

    def forward(self, a):
        xp = backend.get_array_module(a)
        self.shape = a.shape
        flat = a.reshape(-1) if self.axis is None else a
        self.a = flat
        self.out = xp.cumprod(flat, axis=0 if self.axis is None else self.axis)
        return self.out

    def backward(self, g):
        xp = backend.get_array_module(g)
        axis = 0 if self.axis is None else self.axis
        a, out = self.a, self.out
        g = g.reshape(out.shape)
        rev = xp.flip(xp.cumsum(xp.flip(g * out, axis), axis=axis), axis)
        zero = a == 0
        with np.errstate(divide="ignore", invalid="ignore"):
            grad = xp.where(zero, a.dtype.type(0), rev / xp.where(zero, a.dtype.type(1), a))
        if bool(zero.any()):
            # exact: d out_j / d x_i = prod_{k <= j, k != i} x_k
            am, gm = xp.moveaxis(a, axis, -1), xp.moveaxis(g, axis, -1)
            n = am.shape[-1]
            exact = xp.zeros_like(am)
            for i in range(n):
                others = am.copy()
                others[..., i] = 1
                exact[..., i] = (xp.cumprod(others, axis=-1)[..., i:] * gm[..., i:]).sum(axis=-1)
            grad = xp.where(zero, xp.moveaxis(exact, -1, axis), grad)
        return grad.reshape(self.shape).astype(a.dtype, copy=False)


# -- public functions ----------------------------------------------------------------------
def sum(x, axis=None, dtype=None, keepdim=False, name=None):  # noqa: A001
    d = convert_dtype(dtype)
    if d is None and (x._data.dtype.kind == "b" or x._data.dtype == np.int32):
        d = np.dtype("int64")  # Paddle's: bool and int32 sum to int64 (int8/int16/uint8 keep their dtype)
    return Sum(_axes(axis, x._data.ndim, "sum"), keepdim, d)(x)


def mean(x, axis=None, keepdim=False, name=None):
    if x._data.dtype.kind == "b":
        x = x.astype(default_float())
    return Mean(_axes(axis, x._data.ndim, "mean"), keepdim)(x)


def max(x, axis=None, keepdim=False, name=None):  # noqa: A001
    return MaxMin(_axes(axis, x._data.ndim, "max"), keepdim, "amax")(x)


def min(x, axis=None, keepdim=False, name=None):  # noqa: A001
    return MaxMin(_axes(axis, x._data.ndim, "min"), keepdim, "amin")(x)


amax = max
amin = min


def prod(x, axis=None, keepdim=False, dtype=None, name=None):
    if dtype is not None:
        x = x.astype(dtype)
    return Prod(_axes(axis, x._data.ndim, "prod"), keepdim)(x)


def logsumexp(x, axis=None, keepdim=False, name=None):
    return LogSumExp(_axes(axis, x._data.ndim, "logsumexp"), keepdim)(x)


def cumsum(x, axis=None, dtype=None, name=None):
    if dtype is not None:
        x = x.astype(dtype)
    elif x._data.dtype.kind in "biu" and x._data.dtype.itemsize < 8:
        x = x.astype("int64")  # Paddle's: integer cumulative sums are int64
    if x._data.ndim == 0 and axis is not None:   # along its axis, a 0-D tensor stays 0-D
        _axis(axis, 1, "cumsum")
        return CumSum(None)(x).reshape([])
    if axis is None:
        return CumSum(None)(x)
    return CumSum(_axis(axis, x._data.ndim, "cumsum"))(x)


# -- reductions without a gradient: Functions so that ddg.jit records them ----------------
class ArgReduce(Function):
    """argmax / argmin over one axis (``axis=None``: over the flattened tensor)."""
    differentiable = False
    save_inputs = False

    def __init__(self, fn, axis, keepdim, dtype):
        self.fn, self.axis, self.keepdim, self.dtype = fn, axis, keepdim, dtype

    @property
    def name(self):
        return self.fn

    def forward(self, a):
        xp = backend.get_array_module(a)
        f = getattr(xp, self.fn)
        if self.axis is None:
            out = xp.asarray(f(a.reshape(-1)))
            if self.keepdim:
                out = out.reshape([1] * a.ndim)
        else:
            out = f(a, axis=self.axis, keepdims=self.keepdim)
        return xp.asarray(out).astype(self.dtype)


def _arg(fn):
    def op(x, axis=None, keepdim=False, dtype="int64", name=None):
        if x._data.ndim == 0 and axis is not None:
            # a 0-D tensor: index 0, shaped [1] with keepdim (Paddle's rule)
            _axes(int(axis), 1, fn)
            out = ArgReduce(fn, None, False, convert_dtype(dtype))(x)
            return out.reshape([1]) if keepdim else out
        ax = None if axis is None else _axes(int(axis), x._data.ndim, fn)[0]
        return ArgReduce(fn, ax, bool(keepdim), convert_dtype(dtype))(x)
    op.__name__ = fn
    return op


argmax = _arg("argmax")
argmin = _arg("argmin")


class BoolReduce(Function):
    """all / any over ``axes`` (None: every axis)."""
    differentiable = False
    save_inputs = False

    def __init__(self, fn, axes, keepdim):
        self.fn, self.axes, self.keepdim = fn, axes, keepdim

    @property
    def name(self):
        return self.fn

    def forward(self, a):
        return backend.get_array_module(a).asarray(getattr(a, self.fn)(axis=self.axes, keepdims=self.keepdim))


def all(x, axis=None, keepdim=False, name=None):  # noqa: A001 - Paddle's name
    axes = None if axis is None else _axes(axis, x._data.ndim, "all")
    return BoolReduce("all", axes, bool(keepdim))(x)


def any(x, axis=None, keepdim=False, name=None):  # noqa: A001 - Paddle's name
    axes = None if axis is None else _axes(axis, x._data.ndim, "any")
    return BoolReduce("any", axes, bool(keepdim))(x)


def cumprod(x, dim=None, dtype=None, name=None):
    """Cumulative product along ``dim`` (over the flattened ``x`` when None)."""
    if dtype is not None:
        x = x.astype(dtype)
    if dim is None:
        return CumProd(None)(x)
    return CumProd(_axis(dim, x._data.ndim, "cumprod"))(x)
