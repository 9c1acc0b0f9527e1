"""``Independent(base, reinterpreted_batch_rank)``: the last batch dimensions of ``base``
read as event dimensions (log-probabilities and entropies summed over them)."""
from .distribution import Distribution, kl_divergence, register_kl


class Independent(Distribution):
    def __init__(self, base, reinterpreted_batch_rank):
        if not isinstance(base, Distribution):
            raise TypeError(f"ddg.distribution.Independent: base must be a Distribution, got {type(base).__name__}")
        n = reinterpreted_batch_rank
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= len(base.batch_shape):
            raise ValueError(f"ddg.distribution.Independent: reinterpreted_batch_rank must be in "
                             f"(0, {len(base.batch_shape)}], got {n!r}")
        self.base, self._n = base, n
        bs = tuple(base.batch_shape)
        super().__init__(bs[:len(bs) - n], bs[len(bs) - n:] + tuple(base.event_shape))

    def _sum(self, t):
        return t.sum(list(range(t.ndim - self._n, t.ndim))) if self._n else t

    @property
    def mean(self):
        return self.base.mean

    @property
    def variance(self):
        return self.base.variance

    def sample(self, shape=()):
        return self.base.sample(shape)

    def rsample(self, shape=()):
        return self.base.rsample(shape)

    def log_prob(self, value):
        return self._sum(self.base.log_prob(value))

    def entropy(self):
        return self._sum(self.base.entropy())


@register_kl(Independent, Independent)
def _kl_independent(p, q):
    if p._n != q._n:
        raise NotImplementedError("ddg.distribution.kl_divergence: Independent distributions with different "
                                  "reinterpreted_batch_rank")
    return p._sum(kl_divergence(p.base, q.base))
