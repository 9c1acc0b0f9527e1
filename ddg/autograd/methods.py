"""Attach ops to Tensor as methods and operators (Paddle names plus the PyTorch
spellings seed 002 uses), and the Tensor methods that need the engine or ops:
``backward``, ``astype``/``cast`` and ``to``. ddg/tensor sits above ddg/autograd in the
package's layering, so ``Tensor`` itself imports none of them."""
import weakref

import numpy as np

from ..tensor import backend
from ..tensor.dtypes import convert_dtype
from ..tensor.place import Place, parse_place
from ..tensor.tensor import Tensor, _watch
from . import composite as C
from . import engine, grad_mode
from .ops import elementwise as E
from .ops import linalg as L
from .ops import logic as G
from .ops import movement as M
from .ops import reduce as R
from .ops import sort as S


def detach(x):
    """A tensor sharing ``x``'s memory (and version counter) with no gradient history."""
    t = Tensor._wrap(x._data, True)
    t._vc = x._vc
    return t


def _backward(self, grad_tensor=None, retain_graph=False, create_graph=False):
    """Gradients of this tensor with respect to the leaves it depends on (``create_graph``,
    PyTorch's extra keyword, records them for higher-order gradients)."""
    engine.backward([self], None if grad_tensor is None else [grad_tensor], retain_graph, create_graph)


def _astype(self, dtype):
    return E.cast(self, dtype)


def _to(self, *args, **kwargs):
    """``to(place)``, ``to(dtype)``, ``to(place, dtype)``, ``to(device=..., dtype=...)``."""
    place = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("blocking", None)
    if kwargs:
        raise TypeError(f"ddg: Tensor.to() got unexpected arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Place) or (isinstance(a, str) and a.split(":")[0].lower() in ("cpu", "gpu", "cuda")):
            place = a
        elif a is not None:
            dtype = a
    out = self
    if place is not None:
        out = M.to_place(out, parse_place(place))
    if dtype is not None and convert_dtype(dtype) != out.dtype:
        out = E.cast(out, dtype)
    return out


def _rev(fn):
    return lambda self, other: fn(other, self)


_UFUNC = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.true_divide}


def _inplace(name):
    op = getattr(E, name)
    ufunc = _UFUNC[name]

    def method(self, other):
        recording = grad_mode._enabled[0] and (
            not self.stop_gradient or (isinstance(other, Tensor) and not other.stop_gradient))
        if recording:
            if self._node is None and not self.stop_gradient:
                raise RuntimeError(f"ddg: in-place {name} on a leaf tensor that requires grad (shape {self.shape}); "
                                   f"update parameters inside ddg.no_grad()")
            # record out of place and give this Python object the result's identity: nodes that
            # saved the old array keep it untouched, so their gradients stay right
            res = op(self, other)
            self._data, self._node, self._idx = res._data, res._node, res._idx
            self.stop_gradient, self._vc = res.stop_gradient, res._vc
            return self
        if _watch[0] is not None:
            _watch[0](self, name + "_", None)
        o = other._data if isinstance(other, Tensor) else other
        if self._data.dtype.kind in "iub" and name == "divide":
            raise TypeError(f"ddg: in-place true division of an integer tensor ({self.dtype})")
        try:
            ufunc(self._data, o, out=self._data, casting="unsafe")
        except ValueError as exc:
            oshape = other.shape if isinstance(other, Tensor) else list(np.shape(other))
            raise ValueError(f"ddg.{name}_: cannot update a tensor of shape {self.shape} in place with shape "
                             f"{oshape}: {exc}") from None
        self._bump()
        return self
    method.__name__ = name + "_"
    return method


def _augmented(name):
    """``b += x`` and friends. Paddle's Tensor has no in-place augmented operators, so
    ``b += x`` is ``b = b + x``: a new tensor, other names bound to the old one keep its
    values. One exception, for PyTorch-style manual updates (seed 002's
    ``w -= lr * w.grad`` under ``no_grad``): a leaf that requires grad, updated while
    grad mode is off, is updated in place, so it stays the same leaf and keeps training
    (in Paddle that line would rebind ``w`` to a tensor that no longer requires grad)."""
    op = getattr(E, name)
    inplace = getattr(Tensor, name + "_")

    def method(self, other):
        if not grad_mode._enabled[0] and self._node is None and not self.stop_gradient:
            return inplace(self, other)
        return op(self, other)
    method.__name__ = f"__i{name}__"
    return method


def _retain_grads(self):
    """Keep this non-leaf tensor's gradient in ``.grad`` after backward (leaves always do)."""
    if self.stop_gradient or self._node is None:
        return
    ref = weakref.ref(self)

    def keep(g):
        t = ref()
        if t is not None:
            if t._grad is None:
                t._grad = Tensor._wrap(g._data.copy())
            else:
                t._grad._data += g._data
    self.register_hook(keep)


def _unary_inplace(name, fn):
    """``exp_``, ``sqrt_``...: the result written into this tensor. While a graph is being
    recorded, the op is recorded out of place and this Python object takes the result's
    identity (as ``+=`` on an intermediate does), so earlier users of the old values keep
    them; a leaf that requires grad refuses, as in Paddle."""
    def method(self):
        if grad_mode._enabled[0] and not self.stop_gradient:
            if self._node is None:
                raise RuntimeError(f"ddg: in-place {name}_ on a leaf tensor that requires grad (shape {self.shape})")
            res = fn(self)
            self._data, self._node, self._idx = res._data, res._node, res._idx
            self.stop_gradient, self._vc = res.stop_gradient, res._vc
            return self
        if _watch[0] is not None:
            _watch[0](self, name + "_", None)
        with grad_mode.no_grad():
            res = fn(self)
        if res._data.dtype != self._data.dtype:
            raise TypeError(f"ddg.{name}_: the result is {res._data.dtype}, the tensor {self._data.dtype}; "
                            f"use {name}() instead")
        self._data[...] = res._data
        self._bump()
        return self
    method.__name__ = name + "_"
    return method


def _shape_inplace(name, fn):
    """``reshape_``, ``squeeze_``, ``unsqueeze_``, ``flatten_``: this tensor takes the new
    shape (a view of the same memory, sharing its version counter)."""
    def method(self, *args, **kwargs):
        res = fn(self, *args, **kwargs)
        self._data, self._node, self._idx = res._data, res._node, res._idx
        self.stop_gradient = res.stop_gradient
        return self
    method.__name__ = name + "_"
    return method


def _clip_(self, min=None, max=None):  # noqa: A002
    with grad_mode.no_grad():
        self.set_value(E.clip(self, min, max))
    return self


def _uniform_(self, min=0.0, max=1.0, seed=0):  # noqa: A002 - Paddle 3 defaults ([0, 1))
    if _watch[0] is not None:
        _watch[0](self, "uniform_", None)
    # drawn by the generator of the tensor's own device (a host draw cannot fill a GPU array)
    self._data[...] = backend.rng(backend.get_array_module(self._data)).uniform(min, max, self._data.shape)
    self._bump()
    return self


def install():
    T = Tensor
    # operators
    T.__add__ = E.add
    T.__radd__ = _rev(E.add)
    T.__sub__ = E.subtract
    T.__rsub__ = _rev(E.subtract)
    T.__mul__ = E.multiply
    T.__rmul__ = _rev(E.multiply)
    T.__truediv__ = E.divide
    T.__rtruediv__ = _rev(E.divide)
    T.__floordiv__ = E.floor_divide
    T.__rfloordiv__ = _rev(E.floor_divide)
    T.__mod__ = E.remainder
    T.__rmod__ = _rev(E.remainder)
    T.__pow__ = E.pow
    T.__rpow__ = _rev(E.pow)
    T.__matmul__ = L.matmul
    T.__rmatmul__ = _rev(L.matmul)
    T.__neg__ = E.neg
    T.__pos__ = lambda self: self
    T.__abs__ = E.abs
    T.__eq__ = G.equal
    T.__ne__ = G.not_equal
    T.__lt__ = G.less_than
    T.__le__ = G.less_equal
    T.__gt__ = G.greater_than
    T.__ge__ = G.greater_equal
    # bitwise, as in Paddle: on bool tensors that is the logical operation
    T.__and__ = G.bitwise_and
    T.__or__ = G.bitwise_or
    T.__xor__ = G.bitwise_xor
    T.__rand__ = _rev(G.bitwise_and)
    T.__ror__ = _rev(G.bitwise_or)
    T.__rxor__ = _rev(G.bitwise_xor)
    T.__invert__ = G.bitwise_not
    T.__getitem__ = M.getitem
    T.__setitem__ = M.setitem
    T.__hash__ = object.__hash__
    for name in ("add", "subtract", "multiply", "divide"):
        setattr(T, name + "_", _inplace(name))
    for name, dunder in (("add", "__iadd__"), ("subtract", "__isub__"), ("multiply", "__imul__"),
                         ("divide", "__itruediv__")):
        setattr(T, dunder, _augmented(name))
    T.clip_ = _clip_
    T.clamp_ = _clip_
    T.uniform_ = _uniform_
    T.scale_ = lambda self, scale=1.0, bias=0.0: self.multiply_(scale).add_(bias)

    T.retain_grads = _retain_grads
    T.numel = M.numel  # Paddle: a 0-d int64 tensor (it still works as an int: int(), range(), ==)
    for n in ("exp", "sqrt", "rsqrt", "tanh", "sigmoid", "abs", "floor", "ceil", "round", "reciprocal",
              "square", "log", "sin", "cos", "neg"):
        setattr(T, n + "_", _unary_inplace(n, getattr(E, n)))
    for n in ("reshape", "squeeze", "unsqueeze", "flatten"):
        setattr(T, n + "_", _shape_inplace(n, getattr(M, n)))
    T.backward = _backward
    T.astype = T.cast = _astype
    T.to = _to
    methods = {
        E: "add subtract multiply divide pow maximum minimum floor_divide remainder mod floor_mod exp log log1p sqrt "
           "rsqrt square sin cos tanh sigmoid erf relu abs neg sign floor ceil round clip clamp where "
           "tan asin acos atan sinh cosh asinh acosh atanh log2 log10 expm1 reciprocal trunc",
        G: "equal not_equal less_than less_equal greater_than greater_equal logical_and logical_or logical_xor "
           "logical_not bitwise_and bitwise_or bitwise_xor bitwise_not isnan isinf isfinite equal_all allclose isclose nonzero",
        L: "matmul mm bmm inverse",
        R: "sum mean max min amax amin prod argmax argmin logsumexp all any cumsum cumprod",
        M: "reshape transpose flatten squeeze unsqueeze expand expand_as broadcast_to tile flip split "
           "chunk unbind gather index_select roll masked_select moveaxis clone scatter scatter_nd_add put_along_axis "
           "take_along_axis",
        C: "var std dot t outer masked_fill scale sort topk tril triu diagonal trace diag kron add_n nan_to_num "
           "unstack norm repeat_interleave gather_nd slice count_nonzero",
    }
    for mod, names in methods.items():
        for n in names.split():
            setattr(T, n, getattr(mod, n))
    T.detach = detach
    T.argsort = S.argsort
    T.unique = S.unique
    T.bincount = S.bincount
    T.view = M.reshape
    T.pow_ = lambda self, y: self.set_value(E.pow(self, y))
    T.T = property(lambda self: M.transpose(self, list(range(self.ndim))[::-1]))
    T.mT = property(lambda self: M.transpose(self, list(range(self.ndim - 2)) + [self.ndim - 1, self.ndim - 2]))
    T.is_floating_point = lambda self: self._data.dtype.kind in "fV"
    T.element_size = lambda self: self._data.dtype.itemsize
