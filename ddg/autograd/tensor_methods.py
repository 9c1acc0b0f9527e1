"""The Tensor methods that are not ops: ``backward``, ``astype``/``to``, ``detach``,
``retain_grads``, the random fills (``uniform_``, ``normal_``...), ``fill_diagonal_``,
the small queries (``is_contiguous``, ``data_ptr``...), and the one helper that builds
every in-place form (``x.exp_()``, ``ddg.exp_(x)``, ``F.relu_(x)``) from its
out-of-place op. ``ddg/autograd/tensor_table.py`` names each of them in its table and
attaches them to ``Tensor``; ddg/tensor sits above ddg/autograd in the package's
layering, so ``Tensor`` itself imports none of them."""
import functools
import weakref

import numpy as np

from ..tensor import backend
from ..tensor.dtypes import convert_dtype
from ..tensor.place import Place, parse_place
from ..tensor.tensor import Tensor, _watch
from . import engine, grad_mode
from .composite.matrices import diagonal_scatter
from .composite.products import multi_dot as _multi_dot
from .ops import elementwise as E
from .ops import movement as M


# -- gradients and graph ---------------------------------------------------------------------------
def detach(x):
    """A tensor sharing ``x``'s memory (and version counter) with no gradient history."""
    t = Tensor._wrap(x._data, True)
    t._vc = x._vc
    return t


def detach_(self):
    self._node, self._idx = None, 0
    self.stop_gradient = True
    return self


def backward(self, grad_tensor=None, retain_graph=False, create_graph=False):
    """Gradients of this tensor with respect to the leaves it depends on (``create_graph``,
    PyTorch's extra keyword, records them for higher-order gradients)."""
    engine.backward([self], None if grad_tensor is None else [grad_tensor], retain_graph, create_graph)


def retain_grads(self):
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


# -- dtype and place -------------------------------------------------------------------------------
def astype(self, dtype):
    return E.cast(self, dtype)


def to(self, *args, **kwargs):
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


# -- small queries and properties --------------------------------------------------------------------
def positive(self):
    """``+x``: the tensor itself."""
    return self


def is_floating_point(self):
    return self._data.dtype.kind in "fV"


def element_size(self):
    return self._data.dtype.itemsize


def ndimension(self):
    return self._data.ndim


def is_same_shape(self, y):
    return list(self._data.shape) == list(y.shape)


def is_contiguous(self):
    return bool(self._data.flags.c_contiguous)


def contiguous(self):
    return self if self._data.flags.c_contiguous else M.clone(self)


def data_ptr(self):
    return int(self._data.data.ptr if backend.is_gpu_array(self._data) else self._data.ctypes.data)


transposed = property(lambda self: M.transpose(self, list(range(self.ndim))[::-1]))
matrix_transposed = property(
    lambda self: M.transpose(self, list(range(self.ndim - 2)) + [self.ndim - 1, self.ndim - 2]))
inplace_version = property(lambda self: self._vc[0])
data = property(lambda self: self, lambda self, value: self.set_value(value))
grad_fn = property(lambda self: self._node)


# method forms of functions of a list of tensors: ``x.concat(y, z, axis=1)`` is
# ``concat([x, y, z], axis=1)``
def broadcast_tensors(self, *others, name=None):
    return M.broadcast_tensors([self, *others])


def concat(self, *others, axis=0, name=None):
    return M.concat([self, *others], axis)


def stack(self, *others, axis=0, name=None):
    return M.stack([self, *others], axis)


def multi_dot(self, *others, name=None):
    return _multi_dot([self, *others])


# -- in-place forms ----------------------------------------------------------------------------------
#: How an in-place form writes its result (see ``inplace_method``).
ADOPT, KEEP_DTYPE, UFUNC, VIEW = "adopt", "keep_dtype", "ufunc", "view"

_UFUNC = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.true_divide}


def _leaf_error(self, name):
    return RuntimeError(f"ddg.{name}: in-place on a leaf tensor that requires grad (shape {self.shape}); "
                        f"update it inside ddg.no_grad()")


def _take(self, res):
    """``self`` takes ``res``'s identity (array, graph node, version counter), as ``+=`` on
    an intermediate does: earlier users of the old values keep them."""
    self._data, self._node, self._idx = res._data, res._node, res._idx
    self.stop_gradient, self._vc = res.stop_gradient, res._vc
    return self


def adopt(self, res, name):
    """Make ``self`` hold ``res``: written into its memory when nothing is being recorded and
    dtype and shape agree (so views see it); otherwise ``self`` takes ``res``'s identity."""
    recording = grad_mode._enabled[0] and not res.stop_gradient
    if recording or res._data.dtype != self._data.dtype or res._data.shape != self._data.shape:
        if recording and self._node is None and not self.stop_gradient:
            raise _leaf_error(self, name)
        return _take(self, res)
    if _watch[0] is not None:
        _watch[0](self, name, None)
    self._data[...] = res._data
    self._bump()
    return self


def inplace_method(name, fn, kind=ADOPT):
    """``Tensor.<name>_``: ``fn(self, ...)`` written into this tensor, which is returned.

    While a graph is being recorded every kind records ``fn`` out of place and this Python
    object takes the result's identity, so nodes that saved the old values keep them; a
    leaf that requires grad refuses, as in Paddle. Outside recording, ``kind`` says how the
    values land:

    * ``ADOPT``: written into the tensor's memory when dtype and shape agree, otherwise
      the tensor takes the result's identity;
    * ``KEEP_DTYPE``: written into its memory; a result of another dtype is an error;
    * ``UFUNC`` (``add``, ``subtract``, ``multiply``, ``divide``): the numpy ufunc writes
      straight into the tensor's memory (cast to its dtype), no temporary tensor;
    * ``VIEW`` (``reshape``...): the tensor becomes the view ``fn`` returns, sharing its
      memory and version counter.
    """
    iname = name + "_"
    if kind == VIEW:
        def method(self, *args, **kwargs):
            res = fn(self, *args, **kwargs)
            self._data, self._node, self._idx = res._data, res._node, res._idx
            self.stop_gradient = res.stop_gradient
            return self
    elif kind == UFUNC:
        ufunc = _UFUNC[name]

        def method(self, other):
            if grad_mode._enabled[0] and (
                    not self.stop_gradient or (isinstance(other, Tensor) and not other.stop_gradient)):
                if self._node is None and not self.stop_gradient:
                    raise _leaf_error(self, iname)
                return _take(self, fn(self, other))
            if _watch[0] is not None:
                _watch[0](self, iname, None)
            o = other._data if isinstance(other, Tensor) else other
            if self._data.dtype.kind in "iub" and name == "divide":
                raise TypeError(f"ddg: in-place true division of an integer tensor ({self.dtype})")
            try:
                ufunc(self._data, o, out=self._data, casting="unsafe")
            except ValueError as exc:
                oshape = other.shape if isinstance(other, Tensor) else list(np.shape(other))
                raise ValueError(f"ddg.{iname}: cannot update a tensor of shape {self.shape} in place with shape "
                                 f"{oshape}: {exc}") from None
            self._bump()
            return self
    elif kind == KEEP_DTYPE:
        def method(self):
            if grad_mode._enabled[0] and not self.stop_gradient:
                if self._node is None:
                    raise _leaf_error(self, iname)
                return _take(self, fn(self))
            if _watch[0] is not None:
                _watch[0](self, iname, None)
            with grad_mode.no_grad():
                res = fn(self)
            if res._data.dtype != self._data.dtype:
                raise TypeError(f"ddg.{iname}: the result is {res._data.dtype}, the tensor {self._data.dtype}; "
                                f"use {name}() instead")
            self._data[...] = res._data
            self._bump()
            return self
    elif kind == ADOPT:
        def method(self, *args, **kwargs):
            if grad_mode._enabled[0] and self._node is None and not self.stop_gradient:
                raise _leaf_error(self, iname)
            return adopt(self, fn(self, *args, **kwargs), iname)
    else:
        raise ValueError(f"ddg: unknown in-place kind {kind!r} for {iname}")
    method.__name__ = method.__qualname__ = iname
    method.__doc__ = f"In-place ``{name}``: the result written into this tensor, which is returned."
    return method


def inplace_function(name, base, method=None):
    """``ddg.<name>_(x, ...)``: the in-place form as a function of ``x``. It calls
    ``x.<name>_`` (looked up at call time), or ``method`` when the in-place form is not a
    Tensor method (``F.relu_``); ``base`` is the out-of-place function whose signature it
    shows."""
    iname = name + "_"

    @functools.wraps(base)
    def fn(x, *args, **kwargs):
        kwargs.pop("name", None)
        if method is not None:
            return method(x, *args, **kwargs)
        return getattr(x, iname)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = iname
    fn.__doc__ = f"In-place ``{name}`` of ``x`` (returns ``x``)."
    return fn


# -- in-place forms with their own rules -----------------------------------------------------------
def clip_(self, min=None, max=None):  # noqa: A002
    with grad_mode.no_grad():
        self.set_value(E.clip(self, min, max))
    return self


def pow_(self, y):
    return self.set_value(E.pow(self, y))


def scale_(self, scale=1.0, bias=0.0):
    return self.multiply_(scale).add_(bias)


def where_(condition, x=None, y=None, name=None):
    """``ddg.where_(condition, x, y)``: ``where(condition, x, y)`` written into ``x``."""
    return adopt(x, E.where(condition, x, y), "where_")


def where_method(self, condition, y=None, name=None):
    """``x.where_(condition, y)``: ``where(condition, x, y)`` written into ``x``."""
    return where_(condition, self, y)


def copy_(self, other, blocking=True):
    return self.set_value(other)


# -- random fills ------------------------------------------------------------------------------------
def uniform_(self, min=0.0, max=1.0, seed=0):  # noqa: A002 - Paddle 3 defaults ([0, 1))
    if _watch[0] is not None:
        _watch[0](self, "uniform_", None)
    # drawn by the generator of the tensor's own device (a host draw cannot fill a GPU array)
    self._data[...] = backend.rng(backend.get_array_module(self._data)).uniform(min, max, self._data.shape)
    self._bump()
    return self


def _random_fill(name, draw):
    """A method that fills a float tensor with ``draw(rng, shape, ...)``; it works as a
    function of the tensor too (``ddg.normal_(x)``, Paddle's ``name=`` ignored)."""
    def method(self, *args, **kwargs):
        kwargs.pop("name", None)
        if _watch[0] is not None:
            _watch[0](self, name, None)
        if self._data.dtype.kind != "f":
            raise TypeError(f"ddg.{name}: needs a float tensor, got {self.dtype}")
        xp = backend.get_array_module(self._data)
        self._data[...] = draw(backend.rng(xp), self._data.shape, *args, **kwargs)
        self._bump()
        return self
    method.__name__ = method.__qualname__ = name
    return method


def _geometric(rng, shape, probs):
    # Paddle's geometric_ fills with the (float) number of trials to the first success
    return rng.geometric(probs, shape)


normal_ = _random_fill("normal_", lambda rng, shape, mean=0.0, std=1.0: rng.normal(mean, std, shape))
cauchy_ = _random_fill("cauchy_", lambda rng, shape, loc=0, scale=1: loc + scale * rng.standard_cauchy(shape))
geometric_ = _random_fill("geometric_", _geometric)
exponential_ = _random_fill("exponential_", lambda rng, shape, lam=1.0: rng.exponential(1.0 / lam, shape))


def fill_diagonal_(self, value, offset=0, wrap=False, name=None):
    """Writes ``value`` on the main diagonal (``offset`` to its right) of a 2-D tensor, or on
    the all-equal-index diagonal of a tensor whose dimensions are all equal."""
    if _watch[0] is not None:
        _watch[0](self, "fill_diagonal_", None)
    a = self._data
    if a.ndim < 2 or (a.ndim > 2 and len(set(a.shape)) != 1):
        raise ValueError(f"ddg.fill_diagonal_: needs a 2-D tensor or all dimensions equal, got shape {self.shape}")
    xp = backend.get_array_module(a)
    if a.ndim == 2:
        # as Paddle: with wrap, the diagonal starts again m + 1 rows further down (a tall matrix)
        n, m = a.shape
        rows = np.arange(n)
        cols = (rows % (m + 1) if wrap else rows) + offset
        keep = (cols >= 0) & (cols < m)
        a[xp.asarray(rows[keep]), xp.asarray(cols[keep])] = value
    else:
        i = xp.arange(a.shape[0])
        a[(i,) * a.ndim] = value
    self._bump()
    return self


def fill_diagonal_tensor(self, y, offset=0, dim1=0, dim2=1, name=None):
    """This tensor with its ``offset`` diagonal (in ``dim1``, ``dim2``) replaced by ``y``."""
    return diagonal_scatter(self, y, offset, dim1, dim2)


def fill_diagonal_tensor_(self, y, offset=0, dim1=0, dim2=1, name=None):
    return adopt(self, diagonal_scatter(self, y, offset, dim1, dim2), "fill_diagonal_tensor_")
