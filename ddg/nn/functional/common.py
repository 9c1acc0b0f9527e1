"""linear, bilinear, one_hot, sequence_mask, gather_tree and small helpers."""
import numpy as np

from ...autograd.ops import elementwise as E
from ...autograd.ops import linalg as L
from ...autograd.ops import movement as M
from ...autograd.ops import nn_ops
from ...autograd.ops import reduce as R
from ...autograd.ops.elementwise import cast
from ...autograd.ops.logic import equal, less_than
from ...autograd.ops.movement import unsqueeze
from ...tensor import backend
from ...tensor.tensor import Tensor


def require_float(op, **tensors):
    """A TypeError naming ``op`` (``ddg.<op>``) and the dtype where one of the named tensors
    holds integers or bools: layers that compute in floating point refuse them, as Paddle
    does, where numpy's promotion would return float64 results (uint8 images as read)."""
    for what, t in tensors.items():
        if isinstance(t, Tensor) and t._data.dtype.kind not in "fV":     # (bfloat16's kind is V)
            raise TypeError(f"ddg.{op}: {what} must be floating point (float16, bfloat16, float32 or float64), "
                            f"got {t._data.dtype}; cast integer data with .astype('float32')")


def linear(x, weight, bias=None, name=None):
    """``x @ weight + bias`` with Paddle's weight layout ``[in_features, out_features]``."""
    require_float("nn.functional.linear", x=x, weight=weight)
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


def _xp(x):
    return backend.get_array_module(x._data)


def _const(a, like, dtype=None):
    return Tensor._wrap(_xp(like).asarray(a, dtype=dtype))


def bilinear(x1, x2, weight, bias=None, name=None):
    """``out[n, o] = x1[n] @ weight[o] @ x2[n] + bias[o]`` with weight ``[out, in1, in2]``."""
    if weight.ndim != 3 or x1.shape[-1] != weight.shape[1] or x2.shape[-1] != weight.shape[2]:
        raise ValueError(f"ddg.nn.functional.bilinear: x1 {x1.shape}, x2 {x2.shape} and weight {weight.shape} "
                         f"do not fit ([N, in1], [N, in2], [out, in1, in2])")
    o, i1, i2 = weight.shape
    t = L.matmul(x1, M.reshape(M.transpose(weight, [1, 0, 2]), [i1, o * i2]))   # N, o*in2
    out = R.sum(E.multiply(M.reshape(t, [-1, o, i2]), M.unsqueeze(x2, 1)), axis=-1)
    if bias is not None:
        out = E.add(out, M.reshape(bias, [1, -1]))
    return out


def gather_tree(ids, parents):
    """Full beam-search sequences from per-step ``ids`` and ``parents`` ``[T, N, beam]``,
    back-tracking from the last step."""
    if ids.ndim != 3 or ids.shape != parents.shape:
        raise ValueError(f"ddg.nn.functional.gather_tree: ids and parents must be [T, N, beam] of one shape, got "
                         f"{ids.shape} and {parents.shape}")
    a, par = backend.to_host(ids._data), backend.to_host(parents._data)
    t, n, b = a.shape
    out = np.empty_like(a)
    beam = np.tile(np.arange(b), (n, 1))
    rows = np.arange(n)[:, None]
    for step in range(t - 1, -1, -1):
        out[step] = a[step][rows, beam]
        beam = par[step][rows, beam]
    return _const(out, ids)
