"""The base class of ``ddg.distribution`` and the helpers its distributions share.

Parameters may be Python numbers, lists, numpy arrays or Tensors; numbers and lists
become Tensors of the default float dtype, integer Tensors are cast to it, and all
parameters of one distribution are broadcast to its ``batch_shape``. Densities,
entropies, moments and ``rsample`` are written with ddg's differentiable ops, so they
carry gradients to Tensor parameters; ``sample`` returns Tensors without gradient.
Random numbers come from ddg's global generator (``ddg.seed`` reproduces them).
"""
import math

import numpy as np

from ..autograd import grad_mode
from ..tensor import backend
from ..tensor.dtypes import default_float
from ..tensor.tensor import Tensor


def as_param(value, name, owner, like=None):
    """``value`` as a floating Tensor (``like``'s dtype for numbers when given)."""
    from ._ops import cast, to_tensor
    if isinstance(value, Tensor):
        return value if value._data.dtype.kind in "fV" else cast(value, default_float())
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return to_tensor(value)
    dtype = like.dtype if isinstance(like, Tensor) else default_float()
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"ddg.distribution.{owner}: {name} must be a number, a list, an array or a Tensor, "
                        f"got {type(value).__name__}") from None
    return to_tensor(arr.astype(np.dtype(dtype)))


def broadcast_params(owner, **params):
    """The parameters as Tensors of one dtype, broadcast to one shape; returns (list, shape)."""
    from ._ops import broadcast_to
    tensors = {}
    like = next((v for v in params.values() if isinstance(v, Tensor)), None)
    for k, v in params.items():
        tensors[k] = as_param(v, k, owner, like)
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) > 1:
        raise TypeError(f"ddg.distribution.{owner}: the parameters must share one dtype, got "
                        + ", ".join(f"{k} {t.dtype}" for k, t in tensors.items()))
    try:
        shape = list(np.broadcast_shapes(*[tuple(t.shape) for t in tensors.values()]))
    except ValueError:
        raise ValueError(f"ddg.distribution.{owner}: the parameters' shapes do not broadcast: "
                         + ", ".join(f"{k} {t.shape}" for k, t in tensors.items())) from None
    out = [t if list(t.shape) == shape else broadcast_to(t, shape) for t in tensors.values()]
    return out, shape


def sample_shape(shape, owner):
    if shape is None:
        return []
    if isinstance(shape, Tensor):
        shape = shape.tolist()
    if isinstance(shape, (int, np.integer)):
        shape = [shape]
    try:
        shape = [int(s) for s in shape]
    except (TypeError, ValueError):
        raise TypeError(f"ddg.distribution.{owner}.sample: shape must be a list of ints, got {shape!r}") from None
    if any(s < 0 for s in shape):
        raise ValueError(f"ddg.distribution.{owner}.sample: negative size in shape {shape}")
    return shape


def draw(like, method, *args, size, dtype=None):
    """Numbers from ddg's global numpy generator (``method`` of numpy.random.Generator),
    as a Tensor without gradient on ``like``'s device, in ``dtype`` (default ``like``'s)."""
    arr = getattr(backend.rng(np), method)(*args, size=tuple(size))
    arr = np.asarray(arr).astype(dtype or like._data.dtype, copy=False)
    xp = backend.get_array_module(like._data)
    return Tensor._wrap(arr if xp is np else xp.asarray(arr))


def host(t):
    return backend.to_host(t._data)


def check_value(value, like, owner):
    from ._ops import to_tensor
    if not isinstance(value, Tensor):
        value = to_tensor(np.asarray(value, dtype=np.dtype(like.dtype)))
    return value


EULER = 0.57721566490153286061
LOG_2PI = math.log(2 * math.pi)


class Distribution:
    """The abstract distribution: ``batch_shape``, ``event_shape``, ``sample``, ``rsample``,
    ``log_prob``, ``prob``/``probs``, ``entropy``, ``kl_divergence``, ``mean``, ``variance``."""

    def __init__(self, batch_shape=(), event_shape=()):
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def mean(self):
        raise NotImplementedError(f"ddg.distribution.{type(self).__name__} has no mean")

    @property
    def variance(self):
        raise NotImplementedError(f"ddg.distribution.{type(self).__name__} has no variance")

    @property
    def stddev(self):
        from ._ops import sqrt
        return sqrt(self.variance)

    def _extend_shape(self, shape):
        return list(shape) + list(self._batch_shape) + list(self._event_shape)

    def sample(self, shape=()):
        with grad_mode.no_grad():
            out = self.rsample(shape)
        return out.detach()

    def rsample(self, shape=()):
        raise NotImplementedError(f"ddg.distribution.{type(self).__name__} has no reparameterized sample "
                                  f"(rsample); use sample")

    def log_prob(self, value):
        raise NotImplementedError

    def prob(self, value):
        """The density (or mass) at ``value``: ``exp(log_prob(value))``."""
        from ._ops import exp
        return exp(self.log_prob(value))

    def probs(self, value):
        return self.prob(value)

    def entropy(self):
        raise NotImplementedError(f"ddg.distribution.{type(self).__name__} has no entropy")

    def kl_divergence(self, other):
        return kl_divergence(self, other)

    def __repr__(self):
        return f"{type(self).__name__}(batch_shape={list(self._batch_shape)}, event_shape={list(self._event_shape)})"


class ExponentialFamily(Distribution):
    """Distributions of the exponential family (Paddle's base class of Normal, Gamma, ...)."""


# -- KL divergences: closed forms by the pair of types, looked up along both classes' MROs
# (the most specific registered pair wins); kl.py registers ddg's own
_KL = {}


def register_kl(cls_p, cls_q):
    """Decorator: ``fn(p, q)`` computes KL(p || q) for ``p`` of ``cls_p`` and ``q`` of ``cls_q``."""
    if not (isinstance(cls_p, type) and issubclass(cls_p, Distribution)
            and isinstance(cls_q, type) and issubclass(cls_q, Distribution)):
        raise TypeError("ddg.distribution.register_kl: cls_p and cls_q must be Distribution subclasses")

    def deco(fn):
        _KL[(cls_p, cls_q)] = fn
        return fn
    return deco


def _lookup(tp, tq):
    best = None
    for i, a in enumerate(tp.__mro__):
        for j, b in enumerate(tq.__mro__):
            fn = _KL.get((a, b))
            if fn is not None and (best is None or i + j < best[0]):
                best = (i + j, fn)
    return None if best is None else best[1]


def kl_divergence(p, q):
    """KL(p || q), by the batch, for a registered pair of distribution types."""
    fn = _lookup(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"ddg.distribution.kl_divergence: no KL divergence is registered for "
                                  f"{type(p).__name__} and {type(q).__name__}")
    return fn(p, q)
