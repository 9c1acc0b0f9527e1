"""Diagonals and triangles: ``tril``/``triu`` and their index lists, ``diagonal``,
``trace``, ``diag``, ``diagflat``, ``diag_embed``, ``diagonal_scatter`` and ``vander``."""
import builtins as _b

import numpy as np

from ...tensor import backend
from ...tensor.dtypes import convert_dtype
from ...tensor.tensor import Tensor
from ..axes import normalize_axis
from ..ops import elementwise as E
from ..ops import linalg as L
from ..ops import movement as M
from ..ops import reduce as R
from ._common import _const, _nograd, _xp


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


def diagflat(x, offset=0, name=None):
    return diag(M.flatten(x), offset)


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


def _tri_indices(row, col, offset, dtype, lower):
    r, c = (np.tril_indices if lower else np.triu_indices)(row, offset, col)
    from ...tensor.creation import to_tensor
    return to_tensor(np.stack([r, c]).astype(convert_dtype(dtype)))


def tril_indices(row, col, offset=0, dtype="int64"):
    return _tri_indices(row, col, offset, dtype, True)


def triu_indices(row, col=None, offset=0, dtype="int64"):
    return _tri_indices(row, row if col is None else col, offset, dtype, False)
