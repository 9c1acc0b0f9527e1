"""Activations that draw random numbers: ``rrelu`` (a random leaky slope in training)
and ``gumbel_softmax``."""
import numpy as np

from ...autograd.ops import activation as A
from ...autograd.ops import elementwise as E
from ...tensor import backend
from ...tensor.tensor import Tensor
from .activation import softmax
from .common import _const, _xp

__all__ = ["rrelu", "gumbel_softmax"]


def rrelu(x, lower=1.0 / 8.0, upper=1.0 / 3.0, training=True, name=None):
    """Leaky ReLU with a negative slope drawn uniformly from [lower, upper] per element in
    training, and ``(lower + upper) / 2`` otherwise."""
    if not 0 <= lower <= upper <= 1:
        raise ValueError(f"ddg.nn.functional.rrelu: need 0 <= lower <= upper <= 1, got {lower}, {upper}")
    if x._data.dtype.kind not in "fV":
        raise TypeError(f"ddg.nn.functional.rrelu: needs a float tensor, got {x.dtype} (shape {x.shape})")
    if not training:
        return A.LeakyRelu((lower + upper) / 2.0)(x)   # gradient 1 at 0, as the training form
    xp, dt = _xp(x), x._data.dtype
    if xp is np and dt in (np.float32, np.float64):
        u = backend.rng(np).random(x._data.shape, dtype=dt)      # drawn in the input's dtype
    else:
        u = backend.rng(xp).uniform(0.0, 1.0, x._data.shape).astype(dt)
    return A.RRelu(u, lower, upper)(x)


def gumbel_softmax(x, temperature=1.0, hard=False, axis=-1, name=None):
    """Softmax of ``(x + Gumbel noise) / temperature``; ``hard`` gives one-hot samples whose
    gradient is the soft one's (straight-through)."""
    xp = _xp(x)
    u = xp.clip(backend.rng(xp).uniform(0, 1, x._data.shape), 1e-20, 1.0)
    g = Tensor._wrap((-xp.log(-xp.log(u) + 1e-20)).astype(x._data.dtype))
    y = softmax(E.divide(E.add(x, g), temperature), axis=axis)
    if not hard:
        return y
    xp = _xp(x)
    idx = xp.argmax(y._data, axis=axis)
    onehot = xp.zeros_like(y._data)
    xp.put_along_axis(onehot, xp.expand_dims(idx, axis), 1, axis=axis)
    return E.add(E.subtract(_const(onehot, x), Tensor._wrap(y._data)), y)
