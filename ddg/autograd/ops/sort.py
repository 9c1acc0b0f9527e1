"""Sorting and counting, with integer results and so no gradient: the order of elements
along an axis (``sort`` and ``topk`` are composites of it and ``take_along_axis`` in
``composite/sorting.py``), ``unique`` and ``bincount``."""
import numpy as np

from ...tensor import backend
from ...tensor.dtypes import convert_dtype
from ..axes import normalize_axis
from ..function import Function


class ArgSort(Function):
    """Indices (int64) that sort the input along ``axis``; ties keep their order (stable)."""
    differentiable = False
    save_inputs = False

    def __init__(self, axis, descending):
        self.axis, self.descending = axis, descending

    def forward(self, a):
        xp = backend.get_array_module(a)
        if self.descending:
            if a.dtype.kind == "b":
                key = ~a
            elif a.dtype.kind == "u":
                key = a.max(initial=0) - a if a.size else a
            elif a.dtype.kind == "i":
                key = -(a.astype(np.int64) + 1) if a.dtype != np.int64 else ~a  # ~a == -a - 1, no overflow
            else:
                key = -a
        else:
            key = a
        return xp.argsort(key, axis=self.axis, kind="stable").astype(np.int64, copy=False)


def argsort(x, axis=-1, descending=False, stable=False, name=None):
    """Indices that sort ``x`` along ``axis`` (always stable: equal values keep their order,
    which is one of the orders Paddle's unstable sort may give)."""
    if x._data.ndim == 0:
        return ArgSort(None, descending)(x.reshape([1])).reshape([])
    return ArgSort(normalize_axis(axis, x._data.ndim, "argsort"), bool(descending))(x)


class Unique(Function):
    """The sorted distinct values (of the flattened input, or the distinct slices along
    ``axis``), with the first index of each, the inverse map and the counts."""
    differentiable = False
    save_inputs = False

    def __init__(self, axis, dtype):
        self.axis, self.dtype = axis, dtype

    def forward(self, a):
        xp = backend.get_array_module(a)
        vals, first, inverse, counts = xp.unique(a, return_index=True, return_inverse=True, return_counts=True,
                                                 axis=self.axis)
        d = self.dtype
        return vals, first.astype(d), inverse.reshape(-1).astype(d), counts.astype(d)


def unique(x, return_index=False, return_inverse=False, return_counts=False, axis=None, dtype="int64", name=None):
    """Paddle's ``unique``: the sorted distinct values, plus (as asked) the index of each
    one's first occurrence, the index of each input element's value, and the counts."""
    d = convert_dtype(dtype)
    if d not in (np.dtype("int32"), np.dtype("int64")):
        raise TypeError(f"ddg.unique: dtype must be int32 or int64, got {d}")
    ax = None if axis is None else normalize_axis(axis, x._data.ndim, "unique")
    vals, first, inverse, counts = Unique(ax, d)(x)
    extra = [t for t, want in ((first, return_index), (inverse, return_inverse), (counts, return_counts)) if want]
    return (vals, *extra) if extra else vals


class Bincount(Function):
    """How often each value 0..max occurs in a 1-D integer tensor (summing ``weights``)."""
    differentiable = False
    save_inputs = False

    def __init__(self, minlength):
        self.minlength = minlength

    def forward(self, a, *weights):
        xp = backend.get_array_module(a)
        if a.size and int(a.min()) < 0:
            raise ValueError(f"bincount needs non-negative integers, got a minimum of {int(a.min())}")
        w = weights[0] if weights else None
        out = xp.bincount(a, weights=w, minlength=self.minlength)
        return out.astype(w.dtype) if w is not None else out.astype(np.int64)


def bincount(x, weights=None, minlength=0, name=None):
    if x._data.ndim != 1 or x._data.dtype.kind not in "iu":
        raise ValueError(f"ddg.bincount: needs a 1-D integer tensor, got shape {x.shape} and dtype {x.dtype}")
    if weights is not None and weights.shape != x.shape:
        raise ValueError(f"ddg.bincount: weights shape {weights.shape} differs from x shape {x.shape}")
    return Bincount(int(minlength))(x, *([weights] if weights is not None else []))
