"""Questions about a tensor or a dtype: ``is_tensor``, ``is_complex``,
``is_floating_point``, ``is_integer``, ``is_empty``, ``rank``, ``tolist``, ``iinfo``,
``finfo``."""
import numpy as np

from ...tensor.dtypes import convert_dtype
from ...tensor.tensor import Tensor
from ._common import _check_tensor, _nograd, _xp


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
