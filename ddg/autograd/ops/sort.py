"""Sorting: the order of elements along an axis (no gradient: it is an integer result).
``sort`` and ``topk`` are composites of this and ``take_along_axis`` (composite.py)."""
import numpy as np

from ...tensor import backend
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
