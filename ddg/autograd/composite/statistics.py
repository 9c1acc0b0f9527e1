"""Statistics and scans: variance, counts, nan-aware sums and means, order statistics
(``kthvalue``, ``quantile``, ``median``, ``mode``), covariance, histograms, differences
and integrals, and the cumulative ``logcumsumexp``/``cummax``/``cummin``."""
import numpy as np

from ...tensor.dtypes import convert_dtype
from ...tensor.tensor import Tensor
from ..axes import normalize_axes
from ..axes import normalize_axis
from ..ops import elementwise as E
from ..ops import logic as G
from ..ops import movement as M
from ..ops import reduce as R
from ..ops import sort as S
from ._common import _const, _detached, _nograd, _xp
from .matrices import diagonal
from .products import inner


def var(x, axis=None, unbiased=None, keepdim=False, name=None, *, correction=1):
    """The sum of squared deviations over ``n - correction`` (Paddle 3: ``unbiased=True``
    means correction 1, ``False`` correction 0; give one of the two)."""
    if unbiased is not None and correction != 1:
        raise ValueError("ddg.var: give only one of unbiased and correction")
    c = (1 if unbiased else 0) if unbiased is not None else correction
    axes = list(normalize_axes(axis, x._data.ndim, "var"))
    n = 1
    for a in axes:
        n *= x._data.shape[a]
    d = E.subtract(x, R.mean(x, axis=axes, keepdim=True))
    v = R.mean(E.square(d), axis=axes, keepdim=keepdim)
    if c:   # n <= correction: no degrees of freedom left, NaN (as Paddle, numpy)
        v = E.multiply(v, n / (n - c) if n > c else float("nan"))
    return v


def std(x, axis=None, unbiased=True, keepdim=False, name=None):
    return E.sqrt(var(x, axis, bool(unbiased), keepdim))


def count_nonzero(x, axis=None, keepdim=False, name=None):
    return R.sum(G.not_equal(x, 0), axis=axis, keepdim=keepdim)


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
    d = E.sqrt(diagonal(c))
    out = E.divide(E.divide(c, M.unsqueeze(d, 1)), M.unsqueeze(d, 0))
    return E.clip(out, -1.0, 1.0)
