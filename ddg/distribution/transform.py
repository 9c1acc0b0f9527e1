"""Paddle's ``paddle.distribution`` transforms: invertible (or, for ``Abs`` and ``Softmax``,
not injective) maps with their log-absolute-determinant Jacobians, written with ddg's
differentiable ops.

A transform ``t`` has ``forward(x)``, ``inverse(y)``, ``forward_log_det_jacobian(x)``,
``inverse_log_det_jacobian(y)``, ``forward_shape``/``inverse_shape``; ``t(x)`` applies it
to a Tensor, ``t(distribution)`` gives a ``TransformedDistribution`` and ``t(other)`` a
``ChainTransform``. ``_event_rank`` is the number of trailing dimensions one
transformation acts on jointly (0: elementwise); the log-determinants have the input's
shape without those dimensions.
"""
import math

import numpy as np

from ..tensor.tensor import Tensor
from .distribution import Distribution, check_value


def _t(v, like=None):
    from .distribution import as_param
    return v if isinstance(v, Tensor) else as_param(v, "value", "Transform", like)


def _sum_right(t, n):
    return t.sum(list(range(t.ndim - n, t.ndim))) if n > 0 else t


class Transform:
    """The base class. Subclasses define ``_forward``, ``_inverse`` and
    ``_forward_log_det_jacobian`` (and ``_inverse_log_det_jacobian`` when it is not
    ``-_forward_log_det_jacobian(inverse(y))``)."""
    _event_rank = 0
    _injective = True

    def __call__(self, input):  # noqa: A002 - Paddle's name
        if isinstance(input, Distribution):
            return TransformedDistribution(input, [self])
        if isinstance(input, Transform):
            return ChainTransform([input, self])
        return self.forward(input)

    def forward(self, x):
        return self._forward(_t(x))

    def inverse(self, y):
        return self._inverse(_t(y))

    def forward_log_det_jacobian(self, x):
        if not self._injective:
            raise NotImplementedError(f"ddg.distribution.{type(self).__name__}: forward_log_det_jacobian can't be "
                                      f"implemented for non-injective transforms")
        return self._forward_log_det_jacobian(_t(x))

    def inverse_log_det_jacobian(self, y):
        y = _t(y)
        if not self._injective:
            raise NotImplementedError(f"ddg.distribution.{type(self).__name__}: inverse_log_det_jacobian can't be "
                                      f"implemented for non-injective transforms")
        return self._inverse_log_det_jacobian(y)

    def _inverse_log_det_jacobian(self, y):
        return -self._forward_log_det_jacobian(self._inverse(y))

    def forward_shape(self, shape):
        return tuple(shape)

    def inverse_shape(self, shape):
        return tuple(shape)

    def _forward(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def _forward_log_det_jacobian(self, x):
        raise NotImplementedError


class AbsTransform(Transform):
    """``y = |x|``: not injective; ``inverse(y)`` is the pair ``(-y, y)``."""
    _injective = False

    def _forward(self, x):
        from ._ops import abs
        return abs(x)

    def _inverse(self, y):
        return -y, y

    def inverse_log_det_jacobian(self, y):
        from ._ops import zeros_like
        z = zeros_like(_t(y))
        return z, z


class AffineTransform(Transform):
    """``y = loc + scale * x``."""

    def __init__(self, loc, scale):
        self.loc = _t(loc)
        self.scale = _t(scale, self.loc)

    def _forward(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def _forward_log_det_jacobian(self, x):
        from ._ops import abs, log
        return log(abs(self.scale)) + x * 0

    def forward_shape(self, shape):
        return tuple(np.broadcast_shapes(tuple(shape), tuple(self.loc.shape), tuple(self.scale.shape)))

    inverse_shape = forward_shape


class ExpTransform(Transform):
    """``y = exp(x)``."""

    def _forward(self, x):
        from ._ops import exp
        return exp(x)

    def _inverse(self, y):
        from ._ops import log
        return log(y)

    def _forward_log_det_jacobian(self, x):
        return x


class PowerTransform(Transform):
    """``y = x ** power`` (on positive ``x``)."""

    def __init__(self, power):
        self.power = _t(power)

    def _forward(self, x):
        return x ** self.power

    def _inverse(self, y):
        return y ** (1 / self.power)

    def _forward_log_det_jacobian(self, x):
        from ._ops import abs, log
        return log(abs(self.power * x ** (self.power - 1)))


class SigmoidTransform(Transform):
    """``y = sigmoid(x)``."""

    def _forward(self, x):
        from ._ops import sigmoid
        return sigmoid(x)

    def _inverse(self, y):
        from ._ops import log, log1p
        return log(y) - log1p(-y)

    def _forward_log_det_jacobian(self, x):
        from ..nn.functional import softplus
        return -softplus(-x) - softplus(x)


class TanhTransform(Transform):
    """``y = tanh(x)``."""

    def _forward(self, x):
        from ._ops import tanh
        return tanh(x)

    def _inverse(self, y):
        from ._ops import atanh
        return atanh(y)

    def _forward_log_det_jacobian(self, x):
        from ..nn.functional import softplus
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class SoftmaxTransform(Transform):
    """``y = softmax(x)`` over the last dimension; ``inverse(y) = log(y)``; not injective."""
    _event_rank = 1
    _injective = False

    def _forward(self, x):
        from ..nn.functional import softmax
        return softmax(x, axis=-1)

    def _inverse(self, y):
        from ._ops import log
        return log(y)


class StickBreakingTransform(Transform):
    """The last dimension (size K) to the probability simplex of size K + 1."""
    _event_rank = 1

    def _offset(self, n, like):
        from ._ops import to_tensor
        return to_tensor(np.arange(n, 0, -1).astype(np.dtype(like.dtype)))

    def _forward(self, x):
        from ._ops import concat, cumprod, log, ones_like, sigmoid
        k = x.shape[-1]
        z = sigmoid(x - log(self._offset(k, x)))
        one = ones_like(z[..., :1])
        zc = cumprod(1 - z, dim=-1)
        return concat([z, one], -1) * concat([one, zc], -1)

    def _inverse(self, y):
        from ._ops import cumsum, log
        head = y[..., :-1]
        return log(head) - log(1 - cumsum(head, axis=-1)) + log(self._offset(head.shape[-1], y))

    def _forward_log_det_jacobian(self, x):
        from ._ops import log
        from ..nn.functional import log_sigmoid
        y = self._forward(x)
        k = x.shape[-1]
        shifted = x - log(self._offset(k, x))
        return (-shifted + log_sigmoid(shifted) + log(y[..., :-1])).sum(-1)

    def forward_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class ChainTransform(Transform):
    """The transforms applied in order."""

    def __init__(self, transforms):
        transforms = list(transforms)
        if not all(isinstance(t, Transform) for t in transforms):
            raise TypeError("ddg.distribution.ChainTransform: transforms must be Transforms")
        self.transforms = transforms
        self._event_rank = max((t._event_rank for t in transforms), default=0)
        self._injective = all(t._injective for t in transforms)

    def _forward(self, x):
        for t in self.transforms:
            x = t.forward(x)
        return x

    def _inverse(self, y):
        for t in reversed(self.transforms):
            y = t.inverse(y)
        return y

    def _forward_log_det_jacobian(self, x):
        total, rank = 0.0, self._event_rank
        for t in self.transforms:
            total = total + _sum_right(t.forward_log_det_jacobian(x), rank - t._event_rank)
            x = t.forward(x)
        return total

    def forward_shape(self, shape):
        for t in self.transforms:
            shape = t.forward_shape(shape)
        return tuple(shape)

    def inverse_shape(self, shape):
        for t in reversed(self.transforms):
            shape = t.inverse_shape(shape)
        return tuple(shape)


class IndependentTransform(Transform):
    """``base`` with its last ``reinterpreted_batch_rank`` dimensions read as one event
    (the log-determinants summed over them)."""

    def __init__(self, base, reinterpreted_batch_rank):
        if not isinstance(base, Transform):
            raise TypeError("ddg.distribution.IndependentTransform: base must be a Transform")
        if isinstance(reinterpreted_batch_rank, bool) or not isinstance(reinterpreted_batch_rank, int) or \
                reinterpreted_batch_rank <= 0:
            raise ValueError(f"ddg.distribution.IndependentTransform: reinterpreted_batch_rank must be a positive "
                             f"int, got {reinterpreted_batch_rank!r}")
        self.base, self._n = base, reinterpreted_batch_rank
        self._event_rank = base._event_rank + reinterpreted_batch_rank
        self._injective = base._injective

    def _forward(self, x):
        return self.base.forward(x)

    def _inverse(self, y):
        return self.base.inverse(y)

    def _forward_log_det_jacobian(self, x):
        return _sum_right(self.base.forward_log_det_jacobian(x), self._n)

    def forward_shape(self, shape):
        return self.base.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base.inverse_shape(shape)


class ReshapeTransform(Transform):
    """The trailing ``in_event_shape`` reshaped to ``out_event_shape`` (same size)."""

    def __init__(self, in_event_shape, out_event_shape):
        self.in_event_shape, self.out_event_shape = tuple(in_event_shape), tuple(out_event_shape)
        if int(np.prod(self.in_event_shape)) != int(np.prod(self.out_event_shape)):
            raise ValueError(f"ddg.distribution.ReshapeTransform: in_event_shape {self.in_event_shape} and "
                             f"out_event_shape {self.out_event_shape} have different sizes")
        self._event_rank = len(self.in_event_shape)

    def _forward(self, x):
        batch = list(x.shape[:x.ndim - len(self.in_event_shape)])
        return x.reshape(batch + list(self.out_event_shape))

    def _inverse(self, y):
        batch = list(y.shape[:y.ndim - len(self.out_event_shape)])
        return y.reshape(batch + list(self.in_event_shape))

    def _forward_log_det_jacobian(self, x):
        from ._ops import zeros
        batch = list(x.shape[:x.ndim - len(self.in_event_shape)])
        return zeros(batch, dtype=x.dtype)

    def forward_shape(self, shape):
        n = len(self.in_event_shape)
        if tuple(shape[len(shape) - n:]) != self.in_event_shape:
            raise ValueError(f"ddg.distribution.ReshapeTransform: shape {tuple(shape)} does not end in "
                             f"{self.in_event_shape}")
        return tuple(shape[:len(shape) - n]) + self.out_event_shape

    def inverse_shape(self, shape):
        n = len(self.out_event_shape)
        if tuple(shape[len(shape) - n:]) != self.out_event_shape:
            raise ValueError(f"ddg.distribution.ReshapeTransform: shape {tuple(shape)} does not end in "
                             f"{self.out_event_shape}")
        return tuple(shape[:len(shape) - n]) + self.in_event_shape


class StackTransform(Transform):
    """Transform ``i`` applied to slice ``i`` along ``axis``."""

    def __init__(self, transforms, axis=0):
        transforms = list(transforms)
        if not transforms or not all(isinstance(t, Transform) for t in transforms):
            raise TypeError("ddg.distribution.StackTransform: transforms must be a non-empty list of Transforms")
        self.transforms, self.axis = transforms, axis
        self._injective = all(t._injective for t in transforms)

    def _map(self, fns, x):
        from ._ops import stack, unbind
        parts = unbind(x, self.axis)
        if len(parts) != len(self.transforms):
            raise ValueError(f"ddg.distribution.StackTransform: axis {self.axis} has size {len(parts)}, but there "
                             f"are {len(self.transforms)} transforms")
        return stack([f(p) for f, p in zip(fns, parts)], self.axis)

    def _forward(self, x):
        return self._map([t.forward for t in self.transforms], x)

    def _inverse(self, y):
        return self._map([t.inverse for t in self.transforms], y)

    def _forward_log_det_jacobian(self, x):
        from ._ops import broadcast_to
        return self._map([lambda p, t=t: broadcast_to(t.forward_log_det_jacobian(p), p.shape)
                          for t in self.transforms], x)


class TransformedDistribution(Distribution):
    """``TransformedDistribution(base, transforms)``: the distribution of ``transforms``
    applied in order to samples of ``base``; ``log_prob`` by the change of variables."""

    def __init__(self, base, transforms):
        if not isinstance(base, Distribution):
            raise TypeError(f"ddg.distribution.TransformedDistribution: base must be a Distribution, got "
                            f"{type(base).__name__}")
        transforms = list(transforms)
        if not all(isinstance(t, Transform) for t in transforms):
            raise TypeError("ddg.distribution.TransformedDistribution: transforms must be Transforms")
        self.base, self.transforms = base, transforms
        self._chain = ChainTransform(transforms)
        shape = self._chain.forward_shape(tuple(base.batch_shape) + tuple(base.event_shape))
        rank = max(len(base.event_shape), self._chain._event_rank)
        super().__init__(shape[:len(shape) - rank], shape[len(shape) - rank:])

    def sample(self, shape=()):
        return self._chain.forward(self.base.sample(shape)).detach()

    def rsample(self, shape=()):
        return self._chain.forward(self.base.rsample(shape))

    def log_prob(self, value):
        y = value
        event_rank = len(self.event_shape)
        lp = 0.0
        for t in reversed(self.transforms):
            x = t.inverse(y)
            lp = lp - _sum_right(t.forward_log_det_jacobian(x), event_rank - t._event_rank)
            event_rank += len(t.inverse_shape(y.shape)) - len(y.shape)
            y = x
        base_lp = self.base.log_prob(check_value(y, y, "TransformedDistribution"))
        return lp + _sum_right(base_lp, event_rank - len(self.base.event_shape))
