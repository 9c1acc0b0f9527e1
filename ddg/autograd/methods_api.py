"""Tensor methods and in-place variants added for Paddle API coverage (see
``tools/api_coverage.py``): the composites of ``composite_api`` as methods, the
``x.op_()`` in-place forms of out-of-place ops, and their function forms
(``ddg.abs_(x)``). ``install()`` runs after ``methods.install()``."""
import functools

import numpy as np

from ..tensor import backend
from ..tensor.tensor import Tensor, _watch
from . import composite as C
from . import composite_api as A
from . import grad_mode
from .ops import elementwise as E
from .ops import logic as G
from .ops import movement as M
from .ops import reduce as R
from .ops import special as SP

# Paddle's in-place ops (method and function forms) and the out-of-place op each one updates with
INPLACE = {
    "abs": E.abs, "acos": E.acos, "acosh": E.acosh, "asin": E.asin, "asinh": E.asinh, "atan": E.atan,
    "atanh": E.atanh, "cos": E.cos, "cosh": E.cosh, "sin": E.sin, "sinh": E.sinh, "tan": E.tan, "tanh": E.tanh,
    "erf": E.erf, "expm1": E.expm1, "log": E.log, "log2": E.log2, "log10": E.log10, "log1p": E.log1p,
    "square": E.square, "trunc": E.trunc, "neg": E.neg, "frac": A.frac, "logit": A.logit,
    "pow": E.pow, "divide": E.divide, "multiply": E.multiply, "remainder": E.remainder, "mod": E.remainder,
    "floor_mod": E.remainder, "floor_divide": E.floor_divide, "hypot": A.hypot, "lerp": A.lerp,
    "ldexp": A.ldexp, "gcd": A.gcd, "lcm": A.lcm,
    "bitwise_and": G.bitwise_and, "bitwise_or": G.bitwise_or, "bitwise_xor": G.bitwise_xor,
    "bitwise_not": G.bitwise_not, "logical_and": G.logical_and, "logical_or": G.logical_or,
    "logical_xor": G.logical_xor, "logical_not": G.logical_not,
    "equal": G.equal, "not_equal": G.not_equal, "less_than": G.less_than, "less_equal": G.less_equal,
    "greater_than": G.greater_than, "greater_equal": G.greater_equal,
    "cumsum": R.cumsum, "cumprod": R.cumprod, "cast": E.cast, "nan_to_num": C.nan_to_num,
    "masked_fill": C.masked_fill, "masked_scatter": A.masked_scatter, "tril": C.tril, "triu": C.triu, "t": C.t, "transpose": M.transpose,
    "scatter": M.scatter, "put_along_axis": M.put_along_axis, "index_add": A.index_add,
    "index_fill": A.index_fill, "index_put": A.index_put, "renorm": A.renorm, "addmm": A.addmm,
    "lgamma": SP.lgamma, "digamma": SP.digamma, "polygamma": SP.polygamma, "erfinv": SP.erfinv, "i0": SP.i0,
    "multigammaln": A.multigammaln, "reshape": M.reshape, "squeeze": M.squeeze, "unsqueeze": M.unsqueeze,
    "where": None,  # where_(condition, x, y) updates x, its second argument: below
}


def _adopt(self, res, name):
    """Make ``self`` hold ``res``: written into its memory when nothing is being recorded and
    dtype and shape agree (so views see it); otherwise ``self`` takes ``res``'s identity, as
    ``+=`` on an intermediate does, so earlier users of the old values keep them."""
    recording = grad_mode._enabled[0] and not res.stop_gradient
    if recording or res._data.dtype != self._data.dtype or res._data.shape != self._data.shape:
        if recording and self._node is None and not self.stop_gradient:
            raise RuntimeError(f"ddg: in-place {name} on a leaf tensor that requires grad (shape {self.shape})")
        self._data, self._node, self._idx = res._data, res._node, res._idx
        self.stop_gradient, self._vc = res.stop_gradient, res._vc
        return self
    if _watch[0] is not None:
        _watch[0](self, name, None)
    self._data[...] = res._data
    self._bump()
    return self


def _inplace_method(name, fn):
    def method(self, *args, **kwargs):
        if grad_mode._enabled[0] and self._node is None and not self.stop_gradient:
            raise RuntimeError(f"ddg: in-place {name}_ on a leaf tensor that requires grad (shape {self.shape}); "
                               f"do it inside ddg.no_grad()")
        return _adopt(self, fn(self, *args, **kwargs), name + "_")
    method.__name__ = name + "_"
    method.__doc__ = f"In-place ``{name}``: the result written into this tensor, which is returned."
    return method


def _function_form(name):
    method = getattr(Tensor, name + "_")
    base = INPLACE.get(name)

    @functools.wraps(base if base is not None else method)
    def fn(x, *args, **kwargs):
        kwargs.pop("name", None)
        return getattr(x, name + "_")(*args, **kwargs)
    fn.__name__ = name + "_"
    fn.__qualname__ = name + "_"
    fn.__doc__ = f"In-place ``{name}`` of ``x`` (returns ``x``)."
    return fn


def _where_(condition, x=None, y=None, name=None):
    return _adopt(x, E.where(condition, x, y), "where_")


def _random_fill(name, draw):
    def method(self, *args, **kwargs):
        if _watch[0] is not None:
            _watch[0](self, name, None)
        if self._data.dtype.kind != "f":
            raise TypeError(f"ddg.{name}: needs a float tensor, got {self.dtype}")
        xp = backend.get_array_module(self._data)
        self._data[...] = draw(backend.rng(xp), self._data.shape, *args, **kwargs)
        self._bump()
        return self
    method.__name__ = name
    return method


def _random_function_form(name):
    method = getattr(Tensor, name)

    @functools.wraps(method)
    def fn(x, *args, **kwargs):
        kwargs.pop("name", None)
        return method(x, *args, **kwargs)
    return fn


def _normal_(rng, shape, mean=0.0, std=1.0):
    return rng.normal(mean, std, shape)


def _cauchy_(rng, shape, loc=0, scale=1):
    return loc + scale * rng.standard_cauchy(shape)


def _geometric_(rng, shape, probs):
    # Paddle's geometric_ fills with the (float) number of trials to the first success
    return rng.geometric(probs, shape)


def _exponential_(rng, shape, lam=1.0):
    return rng.exponential(1.0 / lam, shape)


def _fill_diagonal_(self, value, offset=0, wrap=False, name=None):
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


def _fill_diagonal_tensor(self, y, offset=0, dim1=0, dim2=1, name=None):
    return A.diagonal_scatter(self, y, offset, dim1, dim2)


def _copy_(self, other, blocking=True):
    return self.set_value(other)


def _detach_(self):
    self._node, self._idx = None, 0
    self.stop_gradient = True
    return self


def cov(x, rowvar=True, ddof=True, fweights=None, aweights=None, name=None):
    """Covariance of the variables in the rows (``rowvar``) of ``x``, with optional
    integer frequency and float observation weights."""
    if x.ndim > 2:
        raise ValueError(f"ddg.cov: x must have at most 2 dimensions, got shape {x.shape}")
    if x.ndim < 2:
        x = M.reshape(x, [1, -1])
    if not rowvar and x.shape[0] != 1:
        x = M.transpose(x, [1, 0])
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = E.cast(fweights, x.dtype)
    if aweights is not None:
        a = E.cast(aweights, x.dtype)
        w = a if w is None else E.multiply(w, a)
    if w is None:
        avg = R.mean(x, axis=1, keepdim=True)
        norm = n - (1 if ddof else 0)
        d = E.subtract(x, avg)
        out = E.divide(A.inner(d, d), float(norm))
        return M.squeeze(out) if x.shape[0] == 1 else out
    wsum = R.sum(w)
    avg = E.divide(R.sum(E.multiply(x, w), axis=1, keepdim=True), wsum)
    if not ddof:
        norm = wsum
    elif aweights is None:
        norm = E.subtract(wsum, 1.0)
    else:
        norm = E.subtract(wsum, E.divide(R.sum(E.multiply(w, E.cast(aweights, x.dtype))), wsum))
    d = E.subtract(x, avg)
    out = E.divide(A.inner(E.multiply(d, w), d), norm)
    return M.squeeze(out) if x.shape[0] == 1 else out


def corrcoef(x, rowvar=True, name=None):
    c = cov(x, rowvar)
    if c.ndim == 0:
        return E.divide(c, c)
    d = E.sqrt(C.diagonal(c))
    out = E.divide(E.divide(c, M.unsqueeze(d, 1)), M.unsqueeze(d, 0))
    return E.clip(out, -1.0, 1.0)


# in-place forms Paddle has only as Tensor methods
METHOD_ONLY = {"lerp", "put_along_axis", "erfinv"}

# composites attached as Tensor methods under their own names
METHODS = ("addmm mv inner tensordot cross dist cdist deg2rad rad2deg frac hypot lerp logaddexp logit stanh sgn "
           "heaviside fmax fmin ldexp frexp nextafter gcd lcm diff trapezoid cumulative_trapezoid logcumsumexp "
           "cummax cummin nansum nanmean kthvalue quantile nanquantile median nanmedian mode atleast_1d atleast_2d "
           "atleast_3d broadcast_shape unflatten view_as vsplit reverse rot90 strided_slice unfold as_strided "
           "diagflat diag_embed diagonal_scatter select_scatter index_fill index_add index_put index_sample take "
           "multiplex combinations vander renorm scatter_nd bucketize histogram unique_consecutive "
           "shard_index increment is_complex is_integer is_empty rank multigammaln atan2 masked_scatter tensor_split "
           "isin").split()
SPECIAL = "lgamma digamma polygamma erfinv i0 i0e i1 i1e".split()


def install():
    T = Tensor
    for n in METHODS:
        setattr(T, n, getattr(A, n))
    T.is_tensor = A.is_tensor
    from .ops import fft as _fft
    T.real, T.imag, T.conj = _fft.real, _fft.imag, _fft.conj
    for n in SPECIAL:
        setattr(T, n, getattr(SP, n))
    for name, fn in INPLACE.items():
        if fn is not None and not hasattr(T, name + "_"):
            setattr(T, name + "_", _inplace_method(name, fn))
    T.where_ = lambda self, condition, y=None, name=None: _where_(condition, self, y)
    T.normal_ = _random_fill("normal_", _normal_)
    T.cauchy_ = _random_fill("cauchy_", _cauchy_)
    T.geometric_ = _random_fill("geometric_", _geometric_)
    T.exponential_ = _random_fill("exponential_", _exponential_)
    T.fill_diagonal_ = _fill_diagonal_
    T.fill_diagonal_tensor = _fill_diagonal_tensor
    T.fill_diagonal_tensor_ = lambda self, y, offset=0, dim1=0, dim2=1, name=None: _adopt(
        self, _fill_diagonal_tensor(self, y, offset, dim1, dim2), "fill_diagonal_tensor_")
    T.copy_ = _copy_
    T.detach_ = _detach_
    T.cov = cov
    T.corrcoef = corrcoef
    T.ndimension = lambda self: self._data.ndim
    T.is_same_shape = lambda self, y: list(self._data.shape) == list(y.shape)
    T.inplace_version = property(lambda self: self._vc[0])
    T.data = property(lambda self: self, lambda self, value: self.set_value(value))
    T.grad_fn = property(lambda self: self._node)
    T.is_contiguous = lambda self: bool(self._data.flags.c_contiguous)
    T.contiguous = lambda self: self if self._data.flags.c_contiguous else M.clone(self)
    from ..tensor.creation import multinomial
    T.broadcast_tensors = lambda self, *others, name=None: M.broadcast_tensors([self, *others])
    T.concat = lambda self, *others, axis=0, name=None: M.concat([self, *others], axis)
    T.stack = lambda self, *others, axis=0, name=None: M.stack([self, *others], axis)
    T.multinomial = multinomial
    T.data_ptr = lambda self: int(self._data.data.ptr if backend.is_gpu_array(self._data)
                                  else self._data.ctypes.data)


def function_forms():
    """``{name: function}`` for the in-place function forms ddg exports at the top level."""
    out = {name + "_": _function_form(name) for name, fn in INPLACE.items()
           if fn is not None and name not in METHOD_ONLY}
    out["where_"] = _where_
    for n in ("normal_", "cauchy_", "geometric_"):
        out[n] = _random_function_form(n)
    return out
