"""``TransformedDistribution(base, transforms)``: the distribution of ``transforms``
applied in order to samples of ``base``; ``log_prob`` by the change of variables."""
from .distribution import Distribution
from .transform import ChainTransform, Transform, _sum_right


class TransformedDistribution(Distribution):
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
        from .distribution import check_value
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
