"""Small helpers the composite files share."""
from ...tensor import backend
from ...tensor.tensor import Tensor


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
