"""More of Paddle's tensor API as composites of the primitives (added for API coverage,
see ``tools/api_coverage.py``): products, differences and integrals, statistics that
sort, index arithmetic, scatters built from gathers, and integer and random helpers.

Gradients come from the primitives they call: none of these is a ``Function``. Helpers
that return integers or indices (``searchsorted``, ``tril_indices``, ``gcd``...) compute
on the raw arrays and return tensors that need no gradient.
"""
import builtins as _b
import itertools

import numpy as np

from ..tensor import backend
from ..tensor.dtypes import convert_dtype, default_float
from ..tensor.tensor import Tensor
from . import composite as C
from .axes import normalize_axes, normalize_axis
from .ops import elementwise as E
from .ops import linalg as L
from .ops import logic as G
from .ops import movement as M
from .ops import reduce as R
from .ops import sort as S
from .ops import special as SP


def _xp(x):
    return backend.get_array_module(x._data)


def _const(arr, like, dtype=None):
    """A tensor (no grad) holding ``arr`` on ``like``'s device."""
    xp = _xp(like)
    return Tensor._wrap(xp.asarray(arr, dtype=dtype))


def _nograd(arr):
    return Tensor._wrap(arr)


def _check_tensor(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"ddg.{op}: x must be a Tensor, got {type(x).__name__}")


def _detached(x):
    return Tensor._wrap(x._data)


# -- products -------------------------------------------------------------------------------
def addmm(input, x, y, beta=1.0, alpha=1.0, name=None):  # noqa: A002
    """``beta * input + alpha * (x @ y)``."""
    if x.ndim != 2 or y.ndim != 2:
        raise ValueError(f"ddg.addmm: x and y must be 2-D, got shapes {x.shape} and {y.shape}")
    return E.add(E.multiply(input, beta), E.multiply(L.matmul(x, y), alpha))


def mv(x, vec, name=None):
    if x.ndim != 2 or vec.ndim != 1:
        raise ValueError(f"ddg.mv: needs a matrix and a vector, got shapes {x.shape} and {vec.shape}")
    return L.matmul(x, vec)


def inner(x, y, name=None):
    """Sum over the last axes of both: ``x[..., k] * y[..., k]``."""
    if x.ndim == 0 or y.ndim == 0:
        return E.multiply(x, y)
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"ddg.inner: last dimensions differ: shapes {x.shape} and {y.shape}")
    k = x.shape[-1]
    out = L.matmul(M.reshape(x, [-1, k]), M.reshape(y, [-1, k]), transpose_y=True)
    return M.reshape(out, x.shape[:-1] + y.shape[:-1])


def tensordot(x, y, axes=2, name=None):
    """Contract ``x``'s axes ``axes[0]`` with ``y``'s ``axes[1]`` (an int n: the last n of
    ``x`` with the first n of ``y``)."""
    if isinstance(axes, Tensor):
        axes = axes.tolist()
    if isinstance(axes, int):
        ax, ay = list(range(x.ndim - axes, x.ndim)), list(range(axes))
    else:
        axes = list(axes)
        if len(axes) == 1:
            axes = [axes[0], axes[0]]
        ax, ay = axes
        ax = [ax] if isinstance(ax, int) else list(ax)
        ay = [ay] if isinstance(ay, int) else list(ay)
        n = _b.max(len(ax), len(ay))
        ax, ay = (ax + ay[len(ax):])[:n], (ay + ax[len(ay):])[:n]
    ax = [a % x.ndim for a in ax]
    ay = [a % y.ndim for a in ay]
    for a, b in zip(ax, ay):
        if x.shape[a] != y.shape[b]:
            raise ValueError(f"ddg.tensordot: axis {a} of x (shape {x.shape}) and axis {b} of y "
                             f"(shape {y.shape}) differ in size")
    fx = [a for a in range(x.ndim) if a not in ax]
    fy = [b for b in range(y.ndim) if b not in ay]
    k = int(np.prod([x.shape[a] for a in ax])) if ax else 1
    xm = M.reshape(M.transpose(x, fx + ax), [-1, k])
    ym = M.reshape(M.transpose(y, ay + fy), [k, -1])
    return M.reshape(L.matmul(xm, ym), [x.shape[a] for a in fx] + [y.shape[b] for b in fy])


def cross(x, y, axis=9, name=None):
    """Cross product along ``axis`` (9, Paddle's default, means the first axis of size 3)."""
    if x.shape != y.shape:
        raise ValueError(f"ddg.cross: shapes differ: {x.shape} and {y.shape}")
    if axis == 9:
        axis = next((i for i, n in enumerate(x.shape) if n == 3), None)
        if axis is None:
            raise ValueError(f"ddg.cross: no axis of size 3 in shape {x.shape}")
    axis = normalize_axis(axis, x.ndim, "cross")
    if x.shape[axis] != 3:
        raise ValueError(f"ddg.cross: axis {axis} of shape {x.shape} must have size 3")
    i1 = _const([1, 2, 0], x, "int64")
    i2 = _const([2, 0, 1], x, "int64")
    sel = lambda t, i: M.index_select(t, i, axis)  # noqa: E731
    return E.subtract(E.multiply(sel(x, i1), sel(y, i2)), E.multiply(sel(x, i2), sel(y, i1)))


def _pnorm(d, p, axis, keepdim=False):
    p = float(p)
    if p == 0:
        return R.sum(E.cast(G.not_equal(d, 0), d.dtype), axis=axis, keepdim=keepdim)
    if p == np.inf:
        return R.max(E.abs(d), axis=axis, keepdim=keepdim)
    if p == -np.inf:
        return R.min(E.abs(d), axis=axis, keepdim=keepdim)
    if p == 2:
        return E.sqrt(R.sum(E.square(d), axis=axis, keepdim=keepdim))
    if p == 1:
        return R.sum(E.abs(d), axis=axis, keepdim=keepdim)
    return E.pow(R.sum(E.pow(E.abs(d), p), axis=axis, keepdim=keepdim), 1.0 / p)


def dist(x, y, p=2, name=None):
    """The p-norm of ``x - y`` over all elements (broadcast)."""
    return _pnorm(E.subtract(x, y), p, None)


def cdist(x, y, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary", name=None):
    """Pairwise p-norm distances between the rows of ``x`` [.., P, M] and ``y`` [.., R, M]."""
    if x.ndim < 2 or y.ndim < 2 or x.shape[-1] != y.shape[-1]:
        raise ValueError(f"ddg.cdist: needs [..., P, M] and [..., R, M], got shapes {x.shape} and {y.shape}")
    d = E.subtract(M.unsqueeze(x, -2), M.unsqueeze(y, -3))
    return _pnorm(d, p, -1)


# -- elementwise composites ----------------------------------------------------------------
def deg2rad(x, name=None):
    return E.multiply(E._int_to_float(x), np.pi / 180.0)


def rad2deg(x, name=None):
    return E.multiply(E._int_to_float(x), 180.0 / np.pi)


def frac(x, name=None):
    return E.subtract(x, E.trunc(x))


def hypot(x, y, name=None):
    return E.sqrt(E.add(E.square(x), E.square(y)))


def lerp(x, y, weight, name=None):
    return E.add(x, E.multiply(weight, E.subtract(y, x)))


def logaddexp(x, y, name=None):
    x, y = E._int_to_float(x), E._int_to_float(y)
    m = _detached(E.maximum(x, y))
    return E.add(m, E.log(E.add(E.exp(E.subtract(x, m)), E.exp(E.subtract(y, m)))))


def logit(x, eps=None, name=None):
    if eps:
        x = E.clip(x, eps, 1.0 - eps)
    return E.log(E.divide(x, E.subtract(1.0, x)))


def stanh(x, scale_a=0.67, scale_b=1.7159, name=None):
    return E.multiply(E.tanh(E.multiply(x, scale_a)), scale_b)


def sgn(x, name=None):
    return E.sign(x)


def heaviside(x, y, name=None):
    """0 where ``x < 0``, 1 where ``x > 0``, ``y`` where ``x == 0``."""
    one = E.cast(G.greater_than(x, 0), y.dtype)
    return E.where(G.equal(x, 0), y, E.add(E.multiply(y, 0.0), one))


def fmax(x, y, name=None):
    """The larger of the two, ignoring NaN (NaN only where both are)."""
    m = E.maximum(x, y)
    return E.where(G.isnan(x), y, E.where(G.isnan(y), x, m))


def fmin(x, y, name=None):
    m = E.minimum(x, y)
    return E.where(G.isnan(x), y, E.where(G.isnan(y), x, m))


def ldexp(x, y, name=None):
    """``x * 2 ** y`` (``y`` an integer tensor)."""
    if isinstance(y, Tensor) and y.dtype.kind not in "iu":
        raise TypeError(f"ddg.ldexp: y must be an integer tensor, got {y.dtype}")
    x = E._int_to_float(x)
    yy = y._data if isinstance(y, Tensor) else y
    return E.multiply(x, _const(_xp(x).exp2(_xp(x).asarray(yy, dtype=x._data.dtype)), x))


def frexp(x, name=None):
    """``(mantissa, exponent)`` with ``x = mantissa * 2 ** exponent``, ``0.5 <= |mantissa| < 1``;
    both in ``x``'s dtype, the gradient flowing through the mantissa."""
    xp = _xp(x)
    _, e = xp.frexp(x._data)
    e = e.astype(x._data.dtype)
    return E.multiply(x, _nograd(xp.exp2(-e))), _nograd(e)


def nextafter(x, y, name=None):
    return _nograd(_xp(x).nextafter(x._data, y._data))


def _int_binary(op):
    def fn(x, y, name=None):
        for t in (x, y):
            if isinstance(t, Tensor) and t.dtype.kind not in "iu":
                raise TypeError(f"ddg.{op}: needs integer tensors, got {t.dtype}")
        xp = _xp(x)
        yy = y._data if isinstance(y, Tensor) else y
        return _nograd(getattr(xp, op)(x._data, yy))
    fn.__name__ = op
    return fn


gcd = _int_binary("gcd")
lcm = _int_binary("lcm")


def atan2(x, y, name=None):
    """``arctan(x / y)`` in the quadrant of the point (y, x) (numpy's ``arctan2(x, y)``); integer
    inputs give float64, as in Paddle."""
    x, y = E._pair(x, y, "atan2")
    if x._data.dtype.kind != "f":
        x, y = E.cast(x, "float64"), E.cast(y, "float64")
    return SP.atan2(x, y)


def multigammaln(x, p, name=None):
    """The log of the multivariate gamma function of dimension ``p``."""
    if int(p) != p or p < 1:
        raise ValueError(f"ddg.multigammaln: p must be a positive integer, got {p}")
    out = SP.lgamma(x)
    for j in range(1, int(p)):
        out = E.add(out, SP.lgamma(E.subtract(x, j / 2.0)))
    return E.add(out, p * (p - 1) / 4.0 * np.log(np.pi))


# -- differences, integrals, cumulative ops ----------------------------------------------------
def diff(x, n=1, axis=-1, prepend=None, append=None, name=None):
    axis = normalize_axis(axis, x.ndim, "diff")
    parts = [t for t in (prepend, x, append) if t is not None]
    if len(parts) > 1:
        x = M.concat(parts, axis)
    for _ in range(n):
        k = x.shape[axis]
        hi = [slice(None)] * x.ndim
        lo = [slice(None)] * x.ndim
        hi[axis], lo[axis] = slice(1, k), slice(0, k - 1)
        if x.dtype == np.bool_:
            x = G.logical_xor(M.getitem(x, tuple(hi)), M.getitem(x, tuple(lo)))
        else:
            x = E.subtract(M.getitem(x, tuple(hi)), M.getitem(x, tuple(lo)))
    return x


def _trap_parts(y, x, dx, axis):
    axis = normalize_axis(axis, y.ndim, "trapezoid")
    k = y.shape[axis]
    hi = [slice(None)] * y.ndim
    lo = [slice(None)] * y.ndim
    hi[axis], lo[axis] = slice(1, k), slice(0, k - 1)
    mid = E.multiply(E.add(M.getitem(y, tuple(hi)), M.getitem(y, tuple(lo))), 0.5)
    if x is not None:
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[axis] = k - 1
            d = M.reshape(diff(x), shape)
        else:
            d = diff(x, axis=axis)
        return E.multiply(mid, d), axis
    return E.multiply(mid, 1.0 if dx is None else dx), axis


def trapezoid(y, x=None, dx=None, axis=-1, name=None):
    if x is not None and dx is not None:
        raise ValueError("ddg.trapezoid: give x or dx, not both")
    parts, axis = _trap_parts(y, x, dx, axis)
    return R.sum(parts, axis=axis)


def cumulative_trapezoid(y, x=None, dx=None, axis=-1, name=None):
    if x is not None and dx is not None:
        raise ValueError("ddg.cumulative_trapezoid: give x or dx, not both")
    parts, axis = _trap_parts(y, x, dx, axis)
    return R.cumsum(parts, axis=axis)


def logcumsumexp(x, axis=None, dtype=None, name=None):
    if dtype is not None:
        x = E.cast(x, dtype)
    if axis is None:
        x, axis = M.flatten(x), 0
    m = _detached(R.max(x, axis=axis, keepdim=True)) if x.size else 0.0
    return E.add(E.log(R.cumsum(E.exp(E.subtract(x, m)), axis=axis)), m)


def _cum_extreme(x, axis, dtype, better, op):
    if axis is None:
        x, axis = M.flatten(x), 0
    axis = normalize_axis(axis, x.ndim, op)
    xp = _xp(x)
    a = xp.moveaxis(x._data, axis, -1)
    idx = xp.zeros(a.shape, dtype=convert_dtype(dtype))
    if a.shape[-1]:
        best = a[..., 0].copy()
        for i in range(1, a.shape[-1]):
            v = a[..., i]
            take = better(v, best) | xp.isnan(v)
            best = xp.where(take, v, best)
            idx[..., i] = xp.where(take, i, idx[..., i - 1])
    idx = xp.moveaxis(idx, -1, axis)
    ind = _nograd(xp.ascontiguousarray(idx))
    return M.take_along_axis(x, E.cast(ind, "int64"), axis), ind


def cummax(x, axis=None, dtype="int64", name=None):
    """Running maximum along ``axis`` and where it was found (the latest position on ties)."""
    return _cum_extreme(x, axis, dtype, lambda v, b: v >= b, "cummax")


def cummin(x, axis=None, dtype="int64", name=None):
    return _cum_extreme(x, axis, dtype, lambda v, b: v <= b, "cummin")


# -- statistics that sort ------------------------------------------------------------------
def _nan_to_zero(x):
    return E.where(G.isnan(x), _const(0, x, x._data.dtype), x)


def nansum(x, axis=None, dtype=None, keepdim=False, name=None):
    return R.sum(_nan_to_zero(x), axis=axis, dtype=dtype, keepdim=keepdim)


def nanmean(x, axis=None, keepdim=False, name=None):
    n = R.sum(E.cast(G.logical_not(G.isnan(x)), x.dtype), axis=axis, keepdim=keepdim)
    return E.divide(nansum(x, axis=axis, keepdim=keepdim), n)


def kthvalue(x, k, axis=None, keepdim=False, name=None):
    """The k-th smallest value (1-based) along ``axis`` (default the last) and its index."""
    axis = -1 if axis is None else axis
    axis = normalize_axis(axis, x.ndim, "kthvalue") if x.ndim else 0
    n = x.shape[axis] if x.ndim else 1
    if not 1 <= k <= n:
        raise ValueError(f"ddg.kthvalue: k={k} out of range for axis {axis} of shape {x.shape}")
    if x.ndim == 0:
        return x, _nograd(_xp(x).asarray(0, dtype="int64"))
    order = S.argsort(x, axis=axis, stable=True)
    sl = [slice(None)] * x.ndim
    sl[axis] = slice(k - 1, k)
    idx = M.getitem(order, tuple(sl))
    val = M.take_along_axis(x, idx, axis)
    if not keepdim:
        val, idx = M.squeeze(val, axis), M.squeeze(idx, axis)
    return val, idx


def _quantile(x, q, axis, keepdim, ignore_nan, op, interp="linear"):
    scalar_q = not isinstance(q, (list, tuple, Tensor))
    qs = [q] if scalar_q else (q.tolist() if isinstance(q, Tensor) else list(q))
    for v in qs:
        if not 0 <= v <= 1:
            raise ValueError(f"ddg.{op}: q must be in [0, 1], got {v}")
    if axis is None:
        src, ax = M.flatten(x), 0
        axes = list(range(x.ndim))
    else:
        axes = [normalize_axis(a, x.ndim, op) for a in ([axis] if isinstance(axis, int) else axis)]
        rest = [a for a in range(x.ndim) if a not in axes]
        src = M.transpose(x, rest + axes) if x.ndim else x
        src = M.reshape(src, [x.shape[a] for a in rest] + [-1])
        ax = src.ndim - 1
    xp = _xp(x)
    order = S.argsort(src, axis=ax, stable=True)  # NaN sorts last
    srt = M.take_along_axis(src, order, ax)
    n = src.shape[ax]
    if ignore_nan:
        cnt = xp.sum(~xp.isnan(src._data), axis=ax, keepdims=True)
    else:
        cnt = xp.full([1] * src.ndim, n)
    outs = []
    for v in qs:
        pos = (cnt - 1).astype(np.float64) * v
        pos = xp.maximum(pos, 0)
        lo = xp.floor(pos).astype("int64")
        hi = xp.minimum(lo + 1, xp.maximum(cnt - 1, 0)).astype("int64")
        w = (pos - lo).astype(x._data.dtype)
        shape = list(srt.shape)
        shape[ax] = 1
        lo_t, hi_t = _nograd(xp.broadcast_to(lo, shape).copy()), _nograd(xp.broadcast_to(hi, shape).copy())
        a, b = M.take_along_axis(srt, lo_t, ax), M.take_along_axis(srt, hi_t, ax)
        if interp == "lower":
            r = a
        elif interp == "higher":
            r = b
        elif interp == "midpoint":
            r = E.multiply(E.add(a, b), 0.5)
        else:
            r = E.add(a, E.multiply(E.subtract(b, a), _nograd(xp.broadcast_to(w, shape).copy())))
        if ignore_nan:
            r = E.where(_nograd(xp.broadcast_to(cnt == 0, shape).copy()), _const(np.nan, x, x._data.dtype), r)
        r = M.squeeze(r, ax)
        if keepdim:
            full = [1 if (i in axes) else s for i, s in enumerate(x.shape)]
            r = M.reshape(r, full)
        outs.append(r)
    return outs[0] if scalar_q else M.stack(outs, 0)


def quantile(x, q, axis=None, keepdim=False, interpolation="linear", name=None):
    """The q-th quantile(s) along ``axis``, interpolating linearly between order statistics."""
    return _quantile(x, q, axis, keepdim, False, "quantile", interpolation)


def nanquantile(x, q, axis=None, keepdim=False, interpolation="linear", name=None):
    return _quantile(x, q, axis, keepdim, True, "nanquantile", interpolation)


def median(x, axis=None, keepdim=False, mode="avg", name=None):
    """The median along ``axis`` (the mean of the two middle values for an even count;
    ``mode='min'`` takes the lower one and also returns its index)."""
    if mode not in ("avg", "min"):
        raise ValueError(f"ddg.median: mode must be 'avg' or 'min', got {mode!r}")
    if mode == "min":
        if axis is None:
            flat = M.flatten(x)
            v, i = kthvalue(flat, (flat.shape[0] + 1) // 2, axis=0)
            if keepdim:
                v = M.reshape(v, [1] * x.ndim)
                i = M.reshape(i, [1] * x.ndim)
            return v, i
        return kthvalue(x, (x.shape[axis] + 1) // 2, axis=axis, keepdim=keepdim)
    return _quantile(x, 0.5, axis, keepdim, False, "median")


def nanmedian(x, axis=None, keepdim=False, mode="avg", name=None):
    """The median of the non-NaN values along ``axis`` (NaN where all are NaN)."""
    if mode != "avg":
        raise ValueError(f"ddg.nanmedian: only mode='avg' is supported, got {mode!r}")
    if axis is not None and not isinstance(axis, int):
        axis = list(axis)
    return _quantile(x, 0.5, axis, keepdim, True, "nanmedian")


def mode(x, axis=-1, keepdim=False, name=None):
    """The most frequent value along ``axis`` (the smallest on ties) and the last index at
    which it occurs."""
    axis = normalize_axis(axis, x.ndim, "mode")
    xp = _xp(x)
    a = xp.moveaxis(x._data, axis, -1)
    n = a.shape[-1]
    # counts[..., i] = how often a[..., i] occurs in its row
    counts = (a[..., :, None] == a[..., None, :]).sum(-1)
    best = counts.max(-1, keepdims=True)
    cand = xp.where(counts == best, a, xp.asarray(np.inf, dtype=a.dtype) if a.dtype.kind == "f" else
                    xp.iinfo(a.dtype).max)
    val = cand.min(-1, keepdims=True)
    pos = xp.arange(n)
    idx = xp.where(a == val, pos, -1).max(-1, keepdims=True).astype("int64")
    idx = xp.moveaxis(idx, -1, axis)
    it = _nograd(xp.ascontiguousarray(idx))
    v = M.take_along_axis(x, it, axis)
    if not keepdim:
        v, it = M.squeeze(v, axis), M.squeeze(it, axis)
    return v, it


# -- shapes and views ----------------------------------------------------------------------
def _atleast(n, inputs):
    out = []
    for x in inputs:
        if not isinstance(x, Tensor):
            from ..tensor.creation import to_tensor
            x = to_tensor(x)
        if x.ndim < n:
            if n == 3 and x.ndim == 2:
                x = M.unsqueeze(x, -1)
            elif n == 3 and x.ndim == 1:
                x = M.reshape(x, [1, -1, 1])
            else:
                x = M.reshape(x, [1] * (n - x.ndim) + x.shape)
        out.append(x)
    return out[0] if len(out) == 1 else out


def atleast_1d(*inputs, name=None):
    return _atleast(1, inputs)


def atleast_2d(*inputs, name=None):
    return _atleast(2, inputs)


def atleast_3d(*inputs, name=None):
    return _atleast(3, inputs)


def broadcast_shape(x_shape, y_shape):
    try:
        return list(np.broadcast_shapes(tuple(x_shape), tuple(y_shape)))
    except ValueError:
        raise ValueError(f"ddg.broadcast_shape: shapes {list(x_shape)} and {list(y_shape)} do not broadcast") from None


def unflatten(x, axis, shape, name=None):
    axis = normalize_axis(axis, x.ndim, "unflatten")
    if isinstance(shape, Tensor):
        shape = shape.tolist()
    return M.reshape(x, x.shape[:axis] + list(shape) + x.shape[axis + 1:])


def view(x, shape_or_dtype, name=None):
    """A reshaped tensor, or (given a dtype) the same bytes read as another dtype (no gradient)."""
    if isinstance(shape_or_dtype, (list, tuple, Tensor)):
        return M.reshape(x, shape_or_dtype)
    return _nograd(x._data.view(convert_dtype(shape_or_dtype)))


def view_as(x, other, name=None):
    return M.reshape(x, other.shape)


def vsplit(x, num_or_sections, name=None):
    if x.ndim < 2:
        raise ValueError(f"ddg.vsplit: needs at least 2 dimensions, got shape {x.shape}")
    return M.split(x, num_or_sections, 0)


def reverse(x, axis, name=None):
    return M.flip(x, axis)


def rot90(x, k=1, axes=[0, 1], name=None):  # noqa: B006 - Paddle's default
    a0, a1 = (normalize_axis(a, x.ndim, "rot90") for a in axes)
    if a0 == a1:
        raise ValueError(f"ddg.rot90: the two axes must differ, got {axes}")
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return M.flip(x, [a0, a1])
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return M.transpose(M.flip(x, [a1]), perm)
    return M.flip(M.transpose(x, perm), [a1])


def crop(x, shape=None, offsets=None, name=None):
    """The block of ``shape`` (-1: to the end) starting at ``offsets``."""
    shape = x.shape if shape is None else (shape.tolist() if isinstance(shape, Tensor) else list(shape))
    offsets = [0] * x.ndim if offsets is None else \
        (offsets.tolist() if isinstance(offsets, Tensor) else list(offsets))
    if len(shape) != x.ndim or len(offsets) != x.ndim:
        raise ValueError(f"ddg.crop: shape {shape} and offsets {offsets} need {x.ndim} entries for shape {x.shape}")
    idx = []
    for o, s, n in zip(offsets, shape, x.shape):
        o = int(o)
        e = n if s == -1 else o + int(s)
        if o < 0 or e > n:
            raise ValueError(f"ddg.crop: the block at offsets {offsets} of shape {shape} leaves shape {x.shape}")
        idx.append(slice(o, e))
    return M.getitem(x, tuple(idx))


def strided_slice(x, axes, starts, ends, strides, name=None):
    idx = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, strides):
        s, e, st = (int(v.item()) if isinstance(v, Tensor) else int(v) for v in (s, e, st))
        idx[normalize_axis(a, x.ndim, "strided_slice")] = slice(s, e, st)
    return M.getitem(x, tuple(idx))


def unfold(x, axis, size, step, name=None):
    """Windows of ``size`` every ``step`` along ``axis``, as a new last dimension."""
    axis = normalize_axis(axis, x.ndim, "unfold") if x.ndim else 0
    n = x.shape[axis] if x.ndim else 1
    if size > n or size < 0 or step <= 0:
        raise ValueError(f"ddg.unfold: size {size} and step {step} do not fit axis {axis} of shape {x.shape}")
    count = (n - size) // step + 1
    idx = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    g = M.index_select(x, _const(idx, x, "int64"), axis)
    g = M.reshape(g, x.shape[:axis] + [count, size] + x.shape[axis + 1:])
    return M.moveaxis(g, axis + 1, -1)


def as_strided(x, shape, stride, offset=0, name=None):
    """Elements of ``x``'s flattened (row-major) data at ``offset + sum(i_k * stride_k)``."""
    shape, stride = list(shape), list(stride)
    if len(shape) != len(stride):
        raise ValueError(f"ddg.as_strided: shape {shape} and stride {stride} differ in length")
    flat = np.full(shape, offset, dtype=np.int64)
    for k, (n, s) in enumerate(zip(shape, stride)):
        r = [1] * len(shape)
        r[k] = n
        flat = flat + np.arange(n).reshape(r) * s
    if flat.size and (flat.min() < 0 or flat.max() >= x.size):
        raise ValueError(f"ddg.as_strided: shape {shape}, stride {stride}, offset {offset} reach outside "
                         f"the {x.size} elements of a tensor of shape {x.shape}")
    return M.reshape(M.gather(M.flatten(x), _const(flat.reshape(-1), x, "int64")), shape)


def diagflat(x, offset=0, name=None):
    return C.diag(M.flatten(x), offset)


def _diag_selector(n, m, offset):
    """(positions on the diagonal ``offset`` of an n x m matrix) as a 0/1 matrix [k, n*m]."""
    rows = np.arange(_b.max(0, -offset), _b.min(n, m - offset))
    sel = np.zeros((len(rows), n * m))
    sel[np.arange(len(rows)), rows * m + rows + offset] = 1
    return sel


def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """Matrices whose ``offset`` diagonal (in dims ``dim1``, ``dim2``) holds the last axis of ``input``."""
    x = input
    k = x.shape[-1]
    n = k + _b.abs(offset)
    nd = x.ndim + 1
    d1, d2 = normalize_axis(dim1, nd, "diag_embed"), normalize_axis(dim2, nd, "diag_embed")
    if d1 == d2:
        raise ValueError(f"ddg.diag_embed: dim1 and dim2 must differ, got {dim1} and {dim2}")
    sel = _const(_diag_selector(n, n, offset), x, x._data.dtype)
    out = M.reshape(L.matmul(x, sel), x.shape[:-1] + [n, n])
    rest = list(range(nd - 2))
    perm = [0] * nd
    it = iter(rest)
    for i in range(nd):
        perm[i] = nd - 2 if i == d1 else nd - 1 if i == d2 else next(it)
    return M.transpose(out, perm)


def diagonal_scatter(x, y, offset=0, axis1=0, axis2=1, name=None):
    """``x`` with its ``offset`` diagonal (in ``axis1``, ``axis2``) replaced by ``y``."""
    a1, a2 = normalize_axis(axis1, x.ndim, "diagonal_scatter"), normalize_axis(axis2, x.ndim, "diagonal_scatter")
    rest = [a for a in range(x.ndim) if a not in (a1, a2)]
    xt = M.transpose(x, rest + [a1, a2])
    n, m = x.shape[a1], x.shape[a2]
    sel = _diag_selector(n, m, offset)
    if list(y.shape) != [x.shape[a] for a in rest] + [sel.shape[0]]:
        raise ValueError(f"ddg.diagonal_scatter: y has shape {y.shape}, the diagonal {offset} of x "
                         f"(shape {x.shape}, axes {axis1}, {axis2}) has {[x.shape[a] for a in rest] + [sel.shape[0]]}")
    emb = M.reshape(L.matmul(y, _const(sel, x, x._data.dtype)), xt.shape[:-2] + [n, m])
    mask = _const(sel.sum(0).reshape(n, m) > 0, x)
    out = E.where(mask, emb, xt)
    inv = np.argsort(rest + [a1, a2]).tolist()
    return M.transpose(out, inv)


def _axis_mask(x, axis, index, op):
    axis = normalize_axis(axis, x.ndim, op)
    xp = _xp(x)
    idx = index._data if isinstance(index, Tensor) else xp.asarray(index)
    m = xp.zeros(x.shape[axis], dtype=bool)
    m[idx.astype("int64") % x.shape[axis] if idx.size else idx.astype("int64")] = True
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return _nograd(m.reshape(shape)), axis


def select_scatter(x, values, axis, index, name=None):
    """``x`` with the slice ``index`` along ``axis`` replaced by ``values``."""
    mask, axis = _axis_mask(x, axis, [index], "select_scatter")
    return E.where(mask, M.unsqueeze(values, axis), x)


def index_fill(x, index, axis, value, name=None):
    mask, _ = _axis_mask(x, axis, index, "index_fill")
    v = value if isinstance(value, Tensor) else _const(value, x, x._data.dtype)
    return E.where(mask, E.cast(v, x.dtype), x)


def index_add(x, index, axis, value, name=None):
    """``x`` plus ``value`` added at positions ``index`` along ``axis`` (repeats add up)."""
    axis = normalize_axis(axis, x.ndim, "index_add")
    idx = np.asarray(backend.to_host(index._data) if isinstance(index, Tensor) else index).reshape(-1)
    n = x.shape[axis]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise ValueError(f"ddg.index_add: index out of range for axis {axis} of shape {x.shape}")
    onehot = np.zeros((len(idx), n))
    onehot[np.arange(len(idx)), idx % n] = 1
    v = M.moveaxis(value, axis, -1)
    add = L.matmul(v, _const(onehot, x, value._data.dtype))
    return E.add(x, M.moveaxis(add, -1, axis))


def index_put(x, indices, value, accumulate=False, name=None):
    """``x`` with ``value`` written (or added, ``accumulate=True``) at ``x[indices]``."""
    indices = tuple(indices)
    xp = _xp(x)
    if len(indices) == 1 and indices[0].dtype == np.bool_:
        indices = tuple(_nograd(a) for a in xp.nonzero(indices[0]._data))
    idx = M.stack([E.cast(i, "int64") for i in indices], -1)
    pos_shape = idx.shape[:-1]
    tail = x.shape[len(indices):]
    v = value if isinstance(value, Tensor) else _const(value, x, x._data.dtype)
    v = M.broadcast_to(v, pos_shape + tail)
    added = M.scatter_nd_add(E.multiply(x, 0.0) if x.dtype.kind == "f" else x * 0, idx, v)
    if accumulate:
        return E.add(x, added)
    hit = M.scatter_nd_add(_nograd(xp.zeros(x._data.shape, dtype=np.float32)), idx,
                           _nograd(xp.ones(pos_shape + tail, dtype=np.float32)))
    # where several positions repeat, the last write wins, as in a plain assignment
    last = _nograd(xp.zeros(x._data.shape, dtype=x._data.dtype))
    last._data[tuple(i._data for i in indices)] = v._data
    keep = G.greater_than(hit, 0)
    one_write = G.less_equal(hit, 1)
    return E.where(keep, E.where(one_write, added, last), x)


def index_sample(x, index):
    if x.ndim != 2 or index.ndim != 2 or x.shape[0] != index.shape[0]:
        raise ValueError(f"ddg.index_sample: needs x [N, D] and index [N, K], got {x.shape} and {index.shape}")
    return M.take_along_axis(x, index, 1)


def take(x, index, mode="raise", name=None):
    """Elements of the flattened ``x`` at ``index`` (``mode``: 'raise', 'wrap' or 'clip')."""
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"ddg.take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    n = x.size
    xp = _xp(x)
    i = index._data.astype("int64")
    if mode == "raise":
        if i.size and (int(i.min()) < -n or int(i.max()) >= n):
            raise IndexError(f"ddg.take: index out of range for a tensor of {n} elements (shape {x.shape})")
        i = i % n if n else i
    elif mode == "wrap":
        i = i % n
    else:
        i = xp.clip(i, 0, n - 1)
    out = M.gather(M.flatten(x), _nograd(i.reshape(-1)))
    return M.reshape(out, index.shape)


def multiplex(inputs, index, name=None):
    """Row ``i`` of the result is row ``i`` of ``inputs[index[i]]``."""
    st = M.stack(list(inputs), 0)
    xp = _xp(st)
    sel = index._data.reshape(-1).astype("int64")
    return M.getitem(st, (_nograd(sel), _nograd(xp.arange(st.shape[1]))))


def combinations(x, r=2, with_replacement=False, name=None):
    if x.ndim != 1:
        raise ValueError(f"ddg.combinations: x must be 1-D, got shape {x.shape}")
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(gen(range(x.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    if idx.size == 0:
        return M.reshape(M.gather(x, _const(np.zeros(0, np.int64), x)), [0] if r != 1 else [0, 1])
    return M.reshape(M.gather(x, _const(idx.reshape(-1), x)), [idx.shape[0], r])


def vander(x, n=None, increasing=False, name=None):
    if x.ndim != 1:
        raise ValueError(f"ddg.vander: x must be 1-D, got shape {x.shape}")
    n = x.shape[0] if n is None else n
    x = E._int_to_float(x) if x.dtype.kind == "b" else x
    cols = [E.pow(x, float(p) if x.dtype.kind == "f" else p) if p else E.add(E.multiply(x, 0), 1)
            for p in range(n)]
    if not increasing:
        cols = cols[::-1]
    if not cols:
        return _nograd(_xp(x).zeros((x.shape[0], 0), dtype=x._data.dtype))
    return M.stack(cols, 1)


def renorm(x, p, axis, max_norm):
    """Each slice along ``axis`` whose p-norm exceeds ``max_norm`` scaled down to it."""
    axis = normalize_axis(axis, x.ndim, "renorm")
    rest = [a for a in range(x.ndim) if a != axis]
    norm = _pnorm(x, p, rest, keepdim=True)
    factor = E.where(G.greater_than(norm, max_norm), E.divide(max_norm, E.add(norm, 1e-7)),
                     _const(1, x, x._data.dtype))
    return E.multiply(x, factor)


def scatter_nd(index, updates, shape, name=None):
    xp = _xp(updates)
    return M.scatter_nd_add(_nograd(xp.zeros(tuple(shape), dtype=updates._data.dtype)), index, updates)


# -- integer and index helpers (no gradient) ---------------------------------------------------
def searchsorted(sorted_sequence, values, out_int32=False, right=False, name=None):
    xp = _xp(sorted_sequence)
    s, v = sorted_sequence._data, values._data if isinstance(values, Tensor) else xp.asarray(values)
    side = "right" if right else "left"
    if s.ndim == 1:
        out = xp.searchsorted(s, v, side=side)
    else:
        if s.shape[:-1] != v.shape[:-1]:
            raise ValueError(f"ddg.searchsorted: leading dimensions differ: {list(s.shape)} and {list(v.shape)}")
        s2, v2 = s.reshape(-1, s.shape[-1]), v.reshape(-1, v.shape[-1])
        out = xp.stack([xp.searchsorted(s2[i], v2[i], side=side) for i in range(s2.shape[0])]).reshape(v.shape)
    return _nograd(out.astype("int32" if out_int32 else "int64"))


def bucketize(x, sorted_sequence, out_int32=False, right=False, name=None):
    if sorted_sequence.ndim != 1:
        raise ValueError(f"ddg.bucketize: sorted_sequence must be 1-D, got shape {sorted_sequence.shape}")
    return searchsorted(sorted_sequence, x, out_int32, right)


def histogram(input, bins=100, min=0, max=0, name=None):  # noqa: A002
    """Counts of ``input`` in ``bins`` equal bins over [min, max] (the data's range when both are 0)."""
    xp = _xp(input)
    a = input._data.reshape(-1)
    lo, hi = float(min), float(max)
    if lo == 0 and hi == 0 and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise ValueError(f"ddg.histogram: max ({max}) must not be below min ({min})")
    counts, _ = xp.histogram(a, bins=bins, range=(lo, hi))
    return _nograd(counts.astype("int64"))


def unique_consecutive(x, return_inverse=False, return_counts=False, axis=None, dtype="int64", name=None):
    xp = _xp(x)
    a = x._data
    if axis is None:
        a = a.reshape(-1)
        ax = 0
    else:
        ax = normalize_axis(axis, a.ndim, "unique_consecutive")
        a = xp.moveaxis(a, ax, 0)
    n = a.shape[0]
    if n == 0:
        change = xp.zeros(0, dtype=bool)
    else:
        diff_ = (a[1:] != a[:-1]).reshape(n - 1, -1).any(-1)
        change = xp.concatenate([xp.ones(1, dtype=bool), diff_])
    starts = xp.nonzero(change)[0]
    out = a[starts]
    if axis is not None:
        out = xp.moveaxis(out, 0, ax)
    res = [_nograd(xp.ascontiguousarray(out))]
    if return_inverse:
        res.append(_nograd((xp.cumsum(change) - 1).astype(convert_dtype(dtype))))
    if return_counts:
        ends = xp.concatenate([starts[1:], xp.asarray([n])])
        res.append(_nograd((ends - starts).astype(convert_dtype(dtype))))
    return res[0] if len(res) == 1 else tuple(res)


def shard_index(input, index_num, nshards, shard_id, ignore_value=-1):  # noqa: A002
    """Labels of shard ``shard_id`` (of ``nshards`` equal shards of ``index_num``) made
    local to it; others become ``ignore_value``."""
    if not 0 <= shard_id < nshards:
        raise ValueError(f"ddg.shard_index: shard_id {shard_id} out of range for {nshards} shards")
    size = (index_num + nshards - 1) // nshards
    a = input._data
    xp = _xp(input)
    return _nograd(xp.where(a // size == shard_id, a % size, ignore_value).astype(a.dtype))


def _tri_indices(row, col, offset, dtype, lower):
    r, c = (np.tril_indices if lower else np.triu_indices)(row, offset, col)
    from ..tensor.creation import to_tensor
    return to_tensor(np.stack([r, c]).astype(convert_dtype(dtype)))


def tril_indices(row, col, offset=0, dtype="int64"):
    return _tri_indices(row, col, offset, dtype, True)


def triu_indices(row, col=None, offset=0, dtype="int64"):
    return _tri_indices(row, row if col is None else col, offset, dtype, False)


def logspace(start, stop, num, base=10.0, dtype=None, name=None):
    from ..tensor.creation import to_tensor
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, stop, num, base)]
    dt = convert_dtype(dtype) if dtype is not None else default_float()
    return to_tensor(np.power(vals[3], np.linspace(vals[0], vals[1], int(vals[2]))).astype(dt))


def increment(x, value=1.0, name=None):
    """``x + value`` for a one-element tensor."""
    if x.size != 1:
        raise ValueError(f"ddg.increment: x must have exactly one element, got shape {x.shape}")
    return E.add(x, value)


# -- predicates and conversions ------------------------------------------------------------------
def is_tensor(x):
    return isinstance(x, Tensor)


def is_complex(x):
    _check_tensor(x, "is_complex")
    return x._data.dtype.kind == "c"


def is_floating_point(x):
    _check_tensor(x, "is_floating_point")
    return x._data.dtype.kind == "f"


def is_integer(x):
    _check_tensor(x, "is_integer")
    return x._data.dtype.kind in "iu"


def is_empty(x, name=None):
    return _nograd(_xp(x).asarray(x.size == 0))


def rank(input):  # noqa: A002
    return _nograd(_xp(input).asarray(input.ndim, dtype="int32"))


def tolist(x):
    return x.tolist()


class iinfo:
    """Limits of an integer dtype: ``min``, ``max``, ``bits``, ``dtype``."""

    def __init__(self, dtype):
        d = convert_dtype(dtype)
        if d.kind not in "iub":
            raise TypeError(f"ddg.iinfo: needs an integer dtype, got {d}")
        i = np.iinfo(d) if d.kind != "b" else np.iinfo(np.uint8)
        self.min, self.max, self.bits, self.dtype = int(i.min), int(i.max), int(i.bits), str(d)

    def __repr__(self):
        return f"paddle.iinfo(min={self.min}, max={self.max}, bits={self.bits}, dtype={self.dtype})"


class finfo:
    """Limits of a float dtype: ``min``, ``max``, ``eps``, ``resolution``, ``smallest_normal``,
    ``tiny``, ``bits``, ``dtype``."""

    def __init__(self, dtype):
        d = convert_dtype(dtype)
        if d.kind not in "fc":
            raise TypeError(f"ddg.finfo: needs a floating point dtype, got {d}")
        f = np.finfo(d)
        self.min, self.max, self.eps = float(f.min), float(f.max), float(f.eps)
        self.resolution, self.bits = float(f.resolution), int(f.bits)
        self.smallest_normal = self.tiny = float(f.smallest_normal)
        self.dtype = str(d)

    def __repr__(self):
        return (f"paddle.finfo(min={self.min}, max={self.max}, eps={self.eps}, resolution={self.resolution}, "
                f"smallest_normal={self.smallest_normal}, tiny={self.tiny}, bits={self.bits}, dtype={self.dtype})")


# -- random ---------------------------------------------------------------------------------------
def poisson(x, name=None):
    """Samples of Poisson distributions with rates ``x``, in ``x``'s dtype."""
    xp = _xp(x)
    return _nograd(backend.rng(xp).poisson(x._data).astype(x._data.dtype))


def standard_normal(shape, dtype=None, name=None):
    from ..tensor.creation import randn
    return randn(shape, dtype=dtype)


def randint_like(x, low=0, high=None, dtype=None, name=None):
    from ..tensor.creation import randint
    if high is None:
        low, high = 0, low
    out = randint(low, high, shape=x.shape, dtype="int64")
    out = E.cast(out, dtype if dtype is not None else x.dtype)
    return out.to(x.place) if out.place != x.place else out


def masked_scatter(x, mask, value, name=None):
    """``x`` with the positions where ``mask`` (broadcast to ``x``'s shape) is True filled,
    in row-major order, with the first elements of ``value``. Gradients reach ``x`` (where
    the mask is False) and the used elements of ``value``."""
    if not isinstance(mask, Tensor) or mask._data.dtype.kind != "b":
        raise TypeError(f"ddg.masked_scatter: mask must be a bool Tensor, got "
                        f"{mask.dtype if isinstance(mask, Tensor) else type(mask).__name__}")
    if not isinstance(value, Tensor) or value._data.dtype != x._data.dtype:
        raise TypeError(f"ddg.masked_scatter: value must be a Tensor of x's dtype {x.dtype}, got "
                        f"{value.dtype if isinstance(value, Tensor) else type(value).__name__}")
    try:
        shape = list(np.broadcast_shapes(tuple(x.shape), tuple(mask.shape)))
    except ValueError:
        raise ValueError(f"ddg.masked_scatter: mask of shape {mask.shape} does not broadcast with x of shape "
                         f"{x.shape}") from None
    if shape != list(x.shape):
        raise ValueError(f"ddg.masked_scatter: mask of shape {mask.shape} would broadcast x of shape {x.shape} "
                         f"to {shape}; it must broadcast to x's shape")
    xp = _xp(x)
    m = xp.broadcast_to(mask._data, tuple(shape)).reshape(-1)
    n = int(m.sum())
    if n > value._data.size:
        raise ValueError(f"ddg.masked_scatter: the mask selects {n} positions but value (shape {value.shape}) "
                         f"has only {value._data.size} elements")
    idx = xp.clip(xp.cumsum(m) - 1, 0, None).astype(np.int64)
    taken = M.reshape(M.gather(M.reshape(value, [-1]), _nograd(idx)), shape) if idx.size else x
    return E.where(_nograd(m.reshape(shape)), taken, x)


def tensor_split(x, num_or_indices, axis=0, name=None):
    """Split ``x`` along ``axis`` into ``n`` nearly equal parts (the first ``size % n``
    one longer) or at the given indices, as numpy's ``array_split``; parts may be empty."""
    axis = normalize_axis(axis.item() if isinstance(axis, Tensor) else axis, x.ndim, "tensor_split")
    size = x.shape[axis]
    if isinstance(num_or_indices, Tensor):
        num_or_indices = num_or_indices.tolist()
    if isinstance(num_or_indices, (int, np.integer)) and not isinstance(num_or_indices, bool):
        n = int(num_or_indices)
        if n <= 0:
            raise ValueError(f"ddg.tensor_split: the number of sections must be positive, got {n}")
        q, r = divmod(size, n)
        bounds = [0]
        for i in range(n):
            bounds.append(bounds[-1] + q + (1 if i < r else 0))
    elif isinstance(num_or_indices, (list, tuple)):
        idx = []
        for i in num_or_indices:
            if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
                raise TypeError(f"ddg.tensor_split: indices must be ints, got {num_or_indices!r}")
            i = int(i)
            idx.append(_b.min(_b.max(i + size if i < 0 else i, 0), size))
        bounds = [0] + idx + [size]
    else:
        raise TypeError(f"ddg.tensor_split: num_or_indices must be an int or a list of ints, got "
                        f"{type(num_or_indices).__name__}")
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        b = _b.max(a, b)
        parts.append(C.slice(x, [axis], [a], [b]))
    return parts


def isin(x, test_x, assume_unique=False, invert=False, name=None):
    """Elementwise: is each element of ``x`` in ``test_x``? (bool, no gradient)."""
    for n, t in (("x", x), ("test_x", test_x)):
        if not isinstance(t, Tensor):
            raise TypeError(f"ddg.isin: {n} must be a Tensor, got {type(t).__name__}")
    xp = _xp(x)
    return _nograd(xp.isin(x._data, test_x._data, assume_unique=assume_unique, invert=invert))


# -- matrix functions of ddg.linalg that are Tensor methods too ------------------------------------------
def vector_norm(x, p=2.0, axis=None, keepdim=False, name=None):
    """The vector p-norm over ``axis`` (an int, a list of axes, or all of them when None)."""
    axes = list(range(x.ndim)) if axis is None else ([axis] if isinstance(axis, int) else list(axis))
    a = E.abs(x)
    p = float(p)
    if p == float("inf"):
        return R.amax(a, axis=axes, keepdim=keepdim)
    if p == float("-inf"):
        return R.amin(a, axis=axes, keepdim=keepdim)
    if p == 0:
        return R.sum(E.sign(a), axis=axes, keepdim=keepdim)
    if p == 2:
        return E.sqrt(R.sum(E.square(x), axis=axes, keepdim=keepdim))
    if p == 1:
        return R.sum(a, axis=axes, keepdim=keepdim)
    return E.pow(R.sum(E.pow(a, p), axis=axes, keepdim=keepdim), 1.0 / p)


def matrix_power(x, n, name=None):
    """``x`` multiplied by itself ``n`` times (powers of the inverse for negative ``n``,
    the identity for 0)."""
    n = int(n)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"ddg.linalg.matrix_power: needs square matrices, got shape {x.shape}")
    if n == 0:
        xp = backend.get_array_module(x._data)
        return M.broadcast_to(Tensor._wrap(xp.eye(x.shape[-1], dtype=x.dtype)), x.shape)
    base = L.inverse(x) if n < 0 else x
    out = base
    for _ in range(abs(n) - 1):
        out = L.matmul(out, base)
    return out


def multi_dot(x, name=None):
    """``x[0] @ x[1] @ ...`` (left to right)."""
    x = list(x)
    if len(x) < 2:
        raise ValueError(f"ddg.linalg.multi_dot: needs at least 2 tensors, got {len(x)}")
    out = x[0]
    for t in x[1:]:
        out = L.matmul(out, t)
    return out


def cholesky_solve(x, y, upper=False, name=None):
    """The solution ``X`` of ``A X = x`` given ``y``, the Cholesky factor of ``A`` (lower, or
    upper with ``upper=True``)."""
    low = M.transpose(y, list(range(y.ndim - 2)) + [y.ndim - 1, y.ndim - 2]) if upper else y
    a = L.matmul(low, low, transpose_y=True)
    return L.solve(a, x)


# -- covariance --------------------------------------------------------------------------------------
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
        out = E.divide(inner(d, d), float(norm))
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
    out = E.divide(inner(E.multiply(d, w), d), norm)
    return M.squeeze(out) if x.shape[0] == 1 else out


def corrcoef(x, rowvar=True, name=None):
    c = cov(x, rowvar)
    if c.ndim == 0:
        return E.divide(c, c)
    d = E.sqrt(C.diagonal(c))
    out = E.divide(E.divide(c, M.unsqueeze(d, 1)), M.unsqueeze(d, 0))
    return E.clip(out, -1.0, 1.0)
