"""linear and small helpers."""
import numpy as np

from ...autograd.ops import nn_ops
from ...autograd.ops.elementwise import cast
from ...autograd.ops.logic import equal, less_than
from ...autograd.ops.movement import unsqueeze
from ...tensor import backend
from ...tensor.tensor import Tensor


def linear(x, weight, bias=None, name=None):
    """``x @ weight + bias`` with Paddle's weight layout ``[in_features, out_features]``."""
    if x.shape[-1] != weight.shape[0]:
        raise ValueError(f"ddg.nn.functional.linear: input has {x.shape[-1]} features (shape {x.shape}) but "
                         f"the weight expects {weight.shape[0]} (weight shape {weight.shape})")
    if bias is None:
        return nn_ops.Linear()(x, weight)
    return nn_ops.Linear()(x, weight, bias)


def one_hot(x, num_classes=-1, name=None):
    """float32 one-hot rows; ``num_classes=-1`` (Paddle 3's default) means ``max(x) + 1``."""
    xp = backend.get_array_module(x._data)
    lab = x._data
    if num_classes == -1:
        num_classes = int(backend.to_host(lab).max()) + 1 if lab.size else 0
    # checked on the host only (on a GPU it would be a synchronizing device-to-host copy)
    if xp is np and lab.size and (int(lab.min()) < 0 or int(lab.max()) >= num_classes):
        raise ValueError(f"ddg.nn.functional.one_hot: labels must lie in [0, {num_classes})")
    # ops, not raw arrays, so that ddg.jit replays the encoding of new labels
    classes = Tensor._wrap(xp.arange(num_classes, dtype=lab.dtype))
    return cast(equal(unsqueeze(x, -1), classes), "float32")


def sequence_mask(x, maxlen=None, dtype="int64", name=None):
    """``mask[..., j] = j < x[...]`` for ``j < maxlen`` (default ``max(x)``), as ``dtype``."""
    xp = backend.get_array_module(x._data)
    if maxlen is None:
        maxlen = int(backend.to_host(x._data).max()) if x._data.size else 0
    elif isinstance(maxlen, Tensor):
        maxlen = int(maxlen.item())
    steps = Tensor._wrap(xp.arange(int(maxlen), dtype=x._data.dtype))
    return cast(less_than(steps, unsqueeze(x, -1)), dtype)
