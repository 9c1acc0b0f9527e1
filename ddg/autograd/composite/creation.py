"""Tensors built from others: ``meshgrid``, ``assign``, ``combinations`` and
``logspace``."""
import itertools

import numpy as np

from ...tensor.dtypes import convert_dtype
from ...tensor.dtypes import default_float
from ...tensor.tensor import Tensor
from ..ops import movement as M
from ._common import _const


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


def combinations(x, r=2, with_replacement=False, name=None):
    if x.ndim != 1:
        raise ValueError(f"ddg.combinations: x must be 1-D, got shape {x.shape}")
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(gen(range(x.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    if idx.size == 0:
        return M.reshape(M.gather(x, _const(np.zeros(0, np.int64), x)), [0] if r != 1 else [0, 1])
    return M.reshape(M.gather(x, _const(idx.reshape(-1), x)), [idx.shape[0], r])


def logspace(start, stop, num, base=10.0, dtype=None, name=None):
    from ...tensor.creation import to_tensor
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, stop, num, base)]
    dt = convert_dtype(dtype) if dtype is not None else default_float()
    return to_tensor(np.power(vals[3], np.linspace(vals[0], vals[1], int(vals[2]))).astype(dt))
