"""Axis arguments of ops: one place that checks and normalizes them, so every op
reports an out-of-range axis the same way."""
import numbers

from ..tensor.tensor import Tensor


def normalize_axis(axis, ndim, op):
    """One axis as a non-negative int; a 0-d tensor accepts axis 0 and -1."""
    a = int(axis)
    n = max(ndim, 1)
    if not -n <= a < n:
        raise ValueError(f"ddg.{op}: axis {a} is out of range for a tensor with {ndim} dimensions")
    return a % n


def normalize_axes(axis, ndim, op):
    """A sorted tuple of distinct non-negative axes: all of them for None or an empty
    list; () for a 0-d tensor."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, Tensor):
        axis = axis.tolist()
    if isinstance(axis, numbers.Integral):
        axis = [axis]
    if len(axis) == 0:
        return tuple(range(ndim))
    out = {normalize_axis(a, ndim, op) for a in axis}
    return tuple(sorted(out)) if ndim else ()
