"""Tensor-level composites: functions built from the primitives of several op
families (``ddg.autograd.ops.*``), so that no primitive file has to import another.

Their gradients come from the primitives they call; none of them is a Function.
"""
import builtins as _b

import numpy as np

from ..tensor import backend
from ..tensor.dtypes import finfo
from ..tensor.tensor import Tensor
from .axes import normalize_axes, normalize_axis
from .ops import elementwise as E
from .ops import linalg as L
from .ops import logic as G
from .ops import movement as M
from .ops import reduce as R
from .ops import sort as S


# -- statistics --------------------------------------------------------------------------
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


# -- products ------------------------------------------------------------------------------
def dot(x, y, name=None):
    """Inner product of vectors (row-wise for 2-D inputs, as in Paddle): ``x`` and ``y`` are
    both 1-D or both 2-D, of the same shape."""
    if x.ndim not in (1, 2) or list(x.shape) != list(y.shape):
        raise ValueError(f"ddg.dot: needs two 1-D or two 2-D tensors of the same shape, got shapes {x.shape} "
                         f"and {y.shape}")
    if x.ndim == 1:
        return L.matmul(x, y)
    return R.sum(E.multiply(x, y), axis=-1)


def outer(x, y, name=None):
    return L.matmul(M.reshape(x, [-1, 1]), M.reshape(y, [1, -1]))


def t(input, name=None):  # noqa: A002
    if input.ndim > 2:
        raise ValueError(f"ddg.t: needs a tensor with at most 2 dimensions, got shape {input.shape}")
    if input.ndim < 2:
        return input
    return M.transpose(input, [1, 0])


# -- selection and scaling -------------------------------------------------------------------
def masked_fill(x, mask, value, name=None):
    return E.where(mask, value, x)


def scale(x, scale=1.0, bias=0.0, bias_after_scale=True, act=None, name=None):
    """``scale * x + bias`` (or ``scale * (x + bias)``), then the activation ``act``."""
    s = scale.item() if isinstance(scale, Tensor) else scale
    out = E.add(E.multiply(x, s), bias) if bias_after_scale else E.multiply(E.add(x, bias), s)
    if act is not None:
        out = getattr(E, act)(out)
    return out


# -- sorting -----------------------------------------------------------------------------------
def sort(x, axis=-1, descending=False, stable=False, name=None):
    """``x`` sorted along ``axis``; the gradient goes back to where each value came from."""
    if x._data.ndim == 0:
        return M.clone(x)
    idx = S.argsort(x, axis, descending)
    return M.take_along_axis(x, idx, axis)


def topk(x, k, axis=None, largest=True, sorted=True, name=None):  # noqa: A002 - Paddle's name
    """The ``k`` largest (or smallest) values along ``axis`` (default the last) and their
    int64 indices, in sorted order."""
    k = int(k.item() if isinstance(k, Tensor) else k)
    if x._data.ndim == 0:   # a 0-D tensor is its own top 1
        if k not in (0, 1) or (axis is not None and axis not in (0, -1)):
            raise ValueError(f"ddg.topk: k={k}, axis={axis} do not fit a 0-D tensor")
        return x, M.reshape(G.not_equal(x, x), []).astype("int64")
    axis = -1 if axis is None else axis
    ax = normalize_axis(axis, x._data.ndim, "topk")
    n = x._data.shape[ax] if x._data.ndim else 1
    if not 0 <= k <= n:
        raise ValueError(f"ddg.topk: k={k} is out of range for axis {axis} of size {n} (shape {x.shape})")
    idx = S.argsort(x, ax, descending=largest)
    idx = M.getitem(idx, tuple([_b.slice(None)] * ax + [_b.slice(0, k)]))
    return M.take_along_axis(x, idx, ax), idx


# -- triangles, diagonals, products of shapes ---------------------------------------------------
def _tri_mask(x, diagonal, lower, op):
    if x._data.ndim < 2:
        raise ValueError(f"ddg.{op}: needs a tensor with at least 2 dimensions, got shape {x.shape}")
    xp = backend.get_array_module(x._data)
    r, c = x._data.shape[-2:]
    tri = xp.tri(r, c, int(diagonal), dtype=bool)
    return Tensor._wrap(tri if lower else ~xp.tri(r, c, int(diagonal) - 1, dtype=bool))


def tril(x, diagonal=0, name=None):
    """The lower triangle (on and below the ``diagonal``-th diagonal) of the last two axes."""
    return E.where(_tri_mask(x, diagonal, True, "tril"), x, 0)


def triu(x, diagonal=0, name=None):
    """The upper triangle (on and above the ``diagonal``-th diagonal) of the last two axes."""
    return E.where(_tri_mask(x, diagonal, False, "triu"), x, 0)


def diagonal(x, offset=0, axis1=0, axis2=1, name=None):
    """The ``offset``-th diagonal of the planes given by ``axis1`` and ``axis2``, as a new last axis."""
    nd = x._data.ndim
    a1, a2 = normalize_axis(axis1, nd, "diagonal"), normalize_axis(axis2, nd, "diagonal")
    if a1 == a2:
        raise ValueError(f"ddg.diagonal: axis1 and axis2 are both {a1}")
    y = M.moveaxis(x, [a1, a2], [-2, -1])
    r, c = y._data.shape[-2:]
    offset = int(offset)
    n = _b.max(0, _b.min(r, c - offset) if offset >= 0 else _b.min(r + offset, c))
    xp = backend.get_array_module(x._data)
    rows = xp.arange(n, dtype=np.int64) + _b.max(0, -offset)
    cols = xp.arange(n, dtype=np.int64) + _b.max(0, offset)
    return M.getitem(y, (Ellipsis, Tensor._wrap(rows), Tensor._wrap(cols)))


def trace(x, offset=0, axis1=0, axis2=1, name=None):
    return R.sum(diagonal(x, offset, axis1, axis2), axis=-1)


def diag(x, offset=0, padding_value=0, name=None):
    """A 1-D ``x`` on the ``offset``-th diagonal of a square matrix (``padding_value``
    elsewhere); the ``offset``-th diagonal of a 2-D ``x``."""
    if x._data.ndim == 2:
        return diagonal(x, offset)
    if x._data.ndim != 1:
        raise ValueError(f"ddg.diag: needs a 1-D or 2-D tensor, got shape {x.shape}")
    n, k = x._data.shape[0], int(offset)
    m = n + _b.abs(k)
    xp = backend.get_array_module(x._data)
    r = xp.arange(m, dtype=np.int64)[:, None]
    c = xp.arange(m, dtype=np.int64)[None, :]
    mask = (c - r) == k
    src = xp.clip(r if k >= 0 else c, 0, _b.max(n - 1, 0))  # which element of x lands at (r, c)
    if n == 0:
        return E.where(Tensor._wrap(mask), Tensor._wrap(xp.zeros((m, m), x._data.dtype)), padding_value)
    return E.where(Tensor._wrap(mask), M.getitem(x, Tensor._wrap(src)), padding_value)


def kron(x, y, name=None):
    """The Kronecker product: block (i, j...) is ``x[i, j...] * y``."""
    nd = _b.max(x._data.ndim, y._data.ndim)
    xs = [1] * (nd - x._data.ndim) + list(x._data.shape)
    ys = [1] * (nd - y._data.ndim) + list(y._data.shape)
    xi = M.reshape(x, [d for s in xs for d in (s, 1)])
    yi = M.reshape(y, [d for s in ys for d in (1, s)])
    return M.reshape(E.multiply(xi, yi), [a * b for a, b in zip(xs, ys)])


def meshgrid(*args, **kwargs):
    """Coordinate grids from 1-D tensors, 'ij' indexing (Paddle's)."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"ddg.meshgrid: unexpected arguments {sorted(kwargs)}")
    shape = [int(a._data.size) for a in args]
    out = []
    for i, a in enumerate(args):
        view = [1] * len(args)
        view[i] = shape[i]
        out.append(M.broadcast_to(M.reshape(a, view), shape))
    return out


# -- small conveniences ---------------------------------------------------------------------------
def add_n(inputs, name=None):
    """The elementwise sum of a list of tensors."""
    if isinstance(inputs, Tensor):
        return M.clone(inputs)
    inputs = list(inputs)
    if not inputs:
        raise ValueError("ddg.add_n: needs at least one tensor")
    out = inputs[0]
    for t in inputs[1:]:
        out = E.add(out, t)
    return out if len(inputs) > 1 else M.clone(out)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None, name=None):
    """nan -> ``nan``, +inf -> ``posinf`` (default the dtype's largest), -inf -> ``neginf``
    (default the lowest); the gradient is 1 at the finite values, 0 at the replaced ones."""
    if x._data.dtype.kind not in "fcV":
        return M.clone(x)
    info = finfo(x._data.dtype)
    hi = float(info.max) if posinf is None else float(posinf)
    lo = float(info.min) if neginf is None else float(neginf)
    out = E.where(G.isnan(x), float(nan), x)
    out = E.where(G.equal(x, float("inf")), hi, out)
    return E.where(G.equal(x, float("-inf")), lo, out)


def unstack(x, axis=0, num=None):
    """The slices of ``x`` along ``axis``, as a list (``num``, if given, must match)."""
    parts = M.unbind(x, axis)
    if num is not None and int(num) != len(parts):
        raise ValueError(f"ddg.unstack: num={num} but axis {axis} of shape {x.shape} has {len(parts)} slices")
    return parts


# -- norms ----------------------------------------------------------------------------------------
def norm(x, p=None, axis=None, keepdim=False, name=None):
    """Vector p-norms (p a number, ``inf``, ``-inf`` or 0) along ``axis`` (all elements
    when None), or the Frobenius norm (``p='fro'`` or None) over one or two axes."""
    nd = x._data.ndim
    axes = None if axis is None else ([axis] if isinstance(axis, int) else list(axis))
    if axes is not None:
        axes = [normalize_axis(a, nd, "norm") for a in axes]
    if p is None:
        p = "fro" if axes is None or len(axes) == 2 else 2.0
    if p == "fro":
        if axes is not None and len(axes) > 2:
            raise ValueError(f"ddg.norm: the Frobenius norm takes at most 2 axes, got {axis}")
        return E.sqrt(R.sum(E.square(x), axis=axes, keepdim=keepdim))
    if isinstance(p, str):
        raise ValueError(f"ddg.norm: p={p!r} is not supported (use a number, inf, -inf, 0 or 'fro')")
    if axes is not None and len(axes) != 1:
        raise ValueError(f"ddg.norm: a vector {p}-norm takes one axis, got {axis}")
    p = float(p)
    a = E.abs(x)
    if p == float("inf"):
        return R.amax(a, axis=axes, keepdim=keepdim)
    if p == float("-inf"):
        return R.amin(a, axis=axes, keepdim=keepdim)
    if p == 0:
        return R.sum(E.sign(a), axis=axes, keepdim=keepdim)  # the count of nonzeros; gradient 0, as Paddle
    if p == 2:
        return E.sqrt(R.sum(E.square(x), axis=axes, keepdim=keepdim))
    if p == 1:
        return R.sum(a, axis=axes, keepdim=keepdim)
    return E.pow(R.sum(E.pow(a, p), axis=axes, keepdim=keepdim), 1.0 / p)


def assign(x, output=None):
    """A copy of ``x`` (a Tensor, numpy array, list or number) as a new tensor; with
    ``output``, written into it. The gradient flows through a tensor ``x``."""
    if isinstance(x, Tensor):
        out = M.clone(x)
    else:
        arr = np.array(x)  # as Paddle: numpy's dtype (a list of floats is float64)
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"ddg.assign: cannot assign a {type(x).__name__} of dtype {arr.dtype}")
        out = Tensor._wrap(arr)
    if output is None:
        return out
    output.set_value(out)
    return output


def repeat_interleave(x, repeats, axis=None, name=None):
    """Each element (slice along ``axis``; of the flattened ``x`` when None) repeated
    ``repeats`` times (an int, or one count per element)."""
    if axis is None:
        x, axis = M.reshape(x, [-1]), 0
    ax = normalize_axis(axis, x._data.ndim, "repeat_interleave")
    n = x._data.shape[ax]
    counts = backend.to_host(repeats._data) if isinstance(repeats, Tensor) else repeats
    counts = np.broadcast_to(np.asarray(counts, dtype=np.int64), (n,))
    if (counts < 0).any():
        raise ValueError("ddg.repeat_interleave: repeats must be >= 0")
    xp = backend.get_array_module(x._data)
    idx = xp.asarray(np.repeat(np.arange(n, dtype=np.int64), counts))
    return M.index_select(x, Tensor._wrap(idx), ax)


def slice(input, axes, starts, ends):  # noqa: A001,A002 - Paddle's names
    """``input[starts[i]:ends[i]]`` along each of ``axes`` (ends clipped to the size)."""
    def ints(v):
        if isinstance(v, Tensor):
            return [int(i) for i in backend.to_host(v._data).reshape(-1)]
        return [int(i.item()) if isinstance(i, Tensor) else int(i) for i in v]
    axes, starts, ends = list(axes), ints(starts), ints(ends)
    if not len(axes) == len(starts) == len(ends):
        raise ValueError(f"ddg.slice: axes, starts and ends differ in length ({len(axes)}, {len(starts)}, {len(ends)})")
    index = [_b.slice(None)] * input._data.ndim
    for a, s, e in zip(axes, starts, ends):
        index[normalize_axis(a, input._data.ndim, "slice")] = _b.slice(s, e)
    return M.getitem(input, tuple(index))


def gather_nd(x, index, name=None):
    """``x[index[..., 0], index[..., 1], ...]``: the last axis of ``index`` addresses the
    leading axes of ``x``; the result has ``index.shape[:-1] + x.shape[k:]``."""
    k = index._data.shape[-1] if index._data.ndim else 0
    if k > x._data.ndim:
        raise ValueError(f"ddg.gather_nd: index addresses {k} axes, x has shape {x.shape}")
    if k == 0:
        return M.broadcast_to(x, list(index._data.shape[:-1]) + x.shape)
    parts = tuple(M.getitem(index, (Ellipsis, i)) for i in range(k))
    return M.getitem(x, parts)


def rnn_sequence(op, x, *rest):
    """What ``ops.rnn.RNNSequence`` ``op`` computes, written with ordinary ops (one graph node
    per operation): what its ``backward_graph`` differentiates, and a reference for its
    fused kernels."""
    lstm = op.mode == "LSTM"
    n_state = 2 if lstm else 1
    states, (w_ih, w_hh, b_ih, b_hh) = list(rest[:n_state]), rest[n_state:]
    xt = M.transpose(x, [1, 0, 2]) if op.batch_major else x
    T, B = xt.shape[0], xt.shape[1]
    H = w_hh.shape[1]
    xg = L.matmul(xt, w_ih, transpose_y=True) + (b_ih if op.mode == "GRU" else b_ih + b_hh)
    keep = op._masks(backend.get_array_module(x._data), T, B, x._data.dtype)
    ys = [None] * T
    h = states[0]
    c = states[1] if lstm else None
    for t in (range(T - 1, -1, -1) if op.reverse else range(T)):
        hh = L.matmul(h, w_hh, transpose_y=True)
        if op.mode == "LSTM":
            i, f, g, o = M.split(xg[t] + hh, 4, axis=-1)
            cn = E.sigmoid(f) * c + E.sigmoid(i) * E.tanh(g)
            hn = E.sigmoid(o) * E.tanh(cn)
        elif op.mode == "GRU":
            hh = hh + b_hh
            x_rz, x_c = M.split(xg[t], [2 * H, H], axis=-1)
            h_rz, h_c = M.split(hh, [2 * H, H], axis=-1)
            r, z = M.split(E.sigmoid(x_rz + h_rz), 2, axis=-1)
            cand = E.tanh(x_c + r * h_c)
            hn = (h - cand) * z + cand
        else:
            pre = xg[t] + hh
            hn = E.relu(pre) if op.mode == "RNN_RELU" else E.tanh(pre)
        m = keep[t]
        if m is None:
            ys[t] = hn
        else:
            mt, nm = Tensor._wrap(m), Tensor._wrap(1 - m)
            ys[t] = hn * mt
            hn = hn * mt + h * nm
            if lstm:
                cn = cn * mt + c * nm
        h = hn
        if lstm:
            c = cn
    y = M.stack(ys, axis=0)
    if op.batch_major:
        y = M.transpose(y, [1, 0, 2])
    return (y, h, c) if lstm else (y, h)
