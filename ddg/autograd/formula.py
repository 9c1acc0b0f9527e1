"""An op's derivative written once, for both backward paths.

An op derived from ``Formula`` writes its gradient as one method, ``grad(self, xp, g)``,
against a namespace ``xp`` that the two backward paths fill in differently:

* ``backward`` (every ordinary backward) passes the ``ArrayMath`` of the gradient's
  array module: ``g`` is a numpy/cupy array, saved arrays are used as they are and the
  functions are numpy's or cupy's, so the formula runs exactly the array operations it
  spells out (no wrapping, no extra pass; the namespace costs ~0.1 us of Python calls).
* ``backward_graph`` (``create_graph=True``) passes a ``GraphMath`` of the node: ``g`` is
  a Tensor, saved inputs and outputs come back onto the graph (``live_input`` /
  ``live_output``) and the functions are ddg ops, so the gradient is recorded and can be
  differentiated again.

Arithmetic operators and ``.dtype`` work on both arrays and Tensors. Beyond them a
formula uses only what both namespaces provide:

``xp.input(i, arr)``      input ``i`` of the op, whose saved array is ``arr``
``xp.output(arr)``        the op's output, saved as ``arr``
``xp.const(arr)``         an array computed from saved arrays that the formula treats as a
                          constant (a mask, a sign, weights): no gradient flows through it
``xp.fit(g, shape, dtype)``  ``g`` summed down to ``shape`` (undoing broadcasting), in ``dtype``
``xp.scalar(s, like)``    the Python scalar ``s`` as an operand of ``like`` (see
                          ``scalar_operand``; on Tensors ``s`` itself)
``xp.masked(g, keep, like=None)``  ``g`` where the boolean array ``keep`` holds, else 0
``xp.zeros(shape, dtype)``   zeros on the gradient's device (a constant)
``xp.sqrt(x)``, ``xp.where(cond, x, y)``, ...  numpy's functions by their names: on the
                          array path numpy's (cupy's); on the graph path the Tensor method
                          of the same name, or, when every argument is an array (saved
                          arrays, masks), a constant of numpy's result.

``docs/contributing.md`` shows an op written this way.
"""
import numpy as np

from ..tensor import backend
from ..tensor.dtypes import bfloat16 as _BF16
from ..tensor.tensor import Tensor
from .function import Function, sum_to
from .higher import const, fit_t, live_input, live_output


def scalar_operand(s, a):
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


def fit(g, shape, dtype):
    """Gradient array ``g`` summed down to ``shape`` (undoing broadcasting) in ``dtype``."""
    g = sum_to(g, shape)
    return g if g.dtype == dtype else g.astype(dtype)


def _same(x):
    return x


def _input(i, arr):
    return arr


class ArrayMath:
    """The namespace of the array path: saved arrays as they are, numpy's (cupy's)
    functions. One instance per array module; ``ArrayMath.of(g)`` finds it."""
    _by_type = {}

    def __init__(self, module):
        self.module = module
        # plain functions in the instance: on this hot path a lookup cheaper than a
        # class-level staticmethod
        self.input = _input
        self.output = self.const = _same
        self.fit = fit
        self.scalar = scalar_operand

    @classmethod
    def of(cls, g):
        ns = cls._by_type.get(type(g))
        if ns is None:
            ns = cls._by_type[type(g)] = cls(backend.get_array_module(g))
        return ns

    def __getattr__(self, name):  # sqrt, exp, where...: the module's, looked up once
        f = getattr(self.module, name)
        setattr(self, name, f)
        return f

    def zeros(self, shape, dtype):
        return self.module.zeros(shape, dtype)

    def masked(self, g, keep, like=None):
        """``g * keep``; with ``like`` (an array of ``g``'s shape) the result takes its
        dtype and memory layout. A gradient that arrives broadcast (from a mean or a pool)
        or in another layout is first copied into that layout, where the masked product is
        one contiguous pass (numpy's mixed-type loop over a broadcast operand is ~40x
        slower than the copy)."""
        if like is None:
            return g * keep
        xp = self.module
        if g.strides != like.strides or g.dtype != like.dtype:
            res = xp.empty_like(like)
            res[...] = g
            res *= keep
            return res
        return xp.multiply(g, keep, out=xp.empty_like(like))


class GraphMath:
    """The namespace of ``backward_graph``: saved arrays of ``node`` as Tensors on the
    graph, ddg ops for the functions."""

    def __init__(self, node, g):
        self.node = node
        self.module = backend.get_array_module(g._data)

    def input(self, i, arr):
        return live_input(self.node, i, arr)

    def output(self, arr):
        return live_output(self.node, arr)

    const = staticmethod(const)
    fit = staticmethod(fit_t)

    @staticmethod
    def scalar(s, like):
        return s

    def _tensor(self, x):
        return x if isinstance(x, Tensor) else const(self.module.asarray(x))

    def masked(self, g, keep, like=None):
        return g * const(self.module.asarray(keep).astype(g.dtype))

    def zeros(self, shape, dtype):
        return const(self.module.zeros(shape, dtype))

    def __getattr__(self, name):
        """numpy's function ``name`` as a ddg op: on arguments that include a Tensor the
        Tensor method of that name (called on the first argument, arrays and scalars
        made constants), on arrays alone a constant of numpy's (cupy's) result."""
        if name.startswith("_"):
            raise AttributeError(name)
        module = self.module

        def fn(*args):
            if any(isinstance(x, Tensor) for x in args):
                first, *rest = [self._tensor(x) for x in args]
                return getattr(first, name)(*rest)
            return const(getattr(module, name)(*args))
        return fn


_NUMPY = ArrayMath(np)


class Formula(Function):
    """A ``Function`` whose ``backward`` and ``backward_graph`` are one formula,
    ``grad(self, xp, g)`` (see the module docstring).

    An op may also name a compiled kernel of the same derivative for numpy arrays,
    ``fast(self, g)``: the array backward tries it first and falls back to the formula
    when it returns None (a dtype or layout the kernel does not take). It is an
    implementation of ``grad``, not a second definition: its tests compare it with the
    formula and with central differences."""
    fast = None

    def grad(self, xp, g):  # pragma: no cover - abstract
        raise NotImplementedError

    def backward(self, g, _numpy=_NUMPY, _ndarray=np.ndarray):  # (bound once: the hot path)
        if type(g) is _ndarray:
            if self.fast is not None:
                res = self.fast(g)
                if res is not None:
                    return res
            return self.grad(_numpy, g)
        return self.grad(ArrayMath.of(g), g)

    def backward_graph(self, g):
        return self.grad(GraphMath(self, g), g)
