"""Discrete distributions: Bernoulli, Categorical, Geometric, Poisson, Binomial,
Multinomial (Paddle's names, arguments and formulas)."""
import numpy as np

from ._ops import exp, lgamma, log, log1p, sigmoid, where  # noqa: A004
from ..tensor import backend
from ..tensor.tensor import Tensor
from .distribution import Distribution, as_param, broadcast_params, check_value, draw, host, sample_shape


def _xlogy(x, y):
    """x * log(y), 0 where x == 0 (the entropy and mass of a degenerate probability)."""
    from ._ops import full_like
    safe = where(x == 0, full_like(y, 1.0), y)
    return x * log(safe)


class Bernoulli(Distribution):
    """``Bernoulli(probs)``: 1 with probability ``probs``. Samples have ``probs``' dtype."""

    def __init__(self, probs, name=None):
        (self.probs_param,), shape = broadcast_params("Bernoulli", probs=probs)
        p = host(self.probs_param)
        if ((p < 0) | (p > 1)).any():
            raise ValueError(f"ddg.distribution.Bernoulli: probs must be in [0, 1], got {p.tolist()}")
        super().__init__(shape)

    @property
    def mean(self):
        return self.probs_param

    @property
    def variance(self):
        return self.probs_param * (1 - self.probs_param)

    def sample(self, shape=()):
        shape = self._extend_shape(sample_shape(shape, "Bernoulli"))
        u = draw(self.probs_param, "random", size=shape)
        return (u < self.probs_param.detach()).astype(self.probs_param.dtype)

    def rsample(self, shape=(), temperature=1.0):
        """A relaxed (Gumbel-softmax / concrete) sample in (0, 1), differentiable in ``probs``."""
        shape = self._extend_shape(sample_shape(shape, "Bernoulli"))
        u = draw(self.probs_param, "random", size=shape)
        p = self.probs_param
        logits = log(p) - log1p(-p)
        return sigmoid((logits + log(u) - log1p(-u)) / temperature)

    def log_prob(self, value):
        value = check_value(value, self.probs_param, "Bernoulli")
        p = self.probs_param
        return _xlogy(value, p) + _xlogy(1 - value, 1 - p)

    def prob(self, value):
        return exp(self.log_prob(value))

    probs = prob

    def entropy(self):
        p = self.probs_param
        return -(_xlogy(p, p) + _xlogy(1 - p, 1 - p))

    def cdf(self, value):
        from ._ops import full_like
        value = check_value(value, self.probs_param, "Bernoulli")
        p = self.probs_param + value * 0
        zero, one = full_like(p, 0.0), full_like(p, 1.0)
        return where(value < 0, zero, where(value < 1, 1 - p, one))


class Categorical(Distribution):
    """``Categorical(logits)``, as Paddle defines it: ``sample``, ``probs`` and ``log_prob``
    read ``logits`` as unnormalised probabilities (``logits / logits.sum(-1)``), while
    ``entropy`` and ``kl_divergence`` read them as log-probabilities (``softmax(logits)``)."""

    def __init__(self, logits, name=None):
        self.logits = as_param(logits, "logits", "Categorical")
        if self.logits.ndim < 1:
            raise ValueError("ddg.distribution.Categorical: logits must have at least one dimension")
        super().__init__(self.logits.shape[:-1])
        self._prob = self.logits / self.logits.sum(-1, keepdim=True)

    def sample(self, shape=()):
        shape = sample_shape(shape, "Categorical")
        p = host(self._prob).astype(np.float64)
        flat = p.reshape(-1, p.shape[-1])
        n = int(np.prod(shape)) if shape else 1
        g = backend.rng(np)
        idx = np.stack([g.choice(flat.shape[1], size=n, p=row / row.sum()) for row in flat], axis=-1)
        out = idx.reshape(list(shape) + list(self.batch_shape)).astype(np.int64)
        xp = backend.get_array_module(self.logits._data)
        return Tensor._wrap(out if xp is np else xp.asarray(out))

    def _gather(self, value):
        from ._ops import take_along_axis
        value = value if isinstance(value, Tensor) else Tensor._wrap(np.asarray(value, dtype=np.int64))
        if value._data.dtype.kind not in "iu":
            raise TypeError(f"ddg.distribution.Categorical: value must hold integer category indices, got "
                            f"{value.dtype}")
        p = self._prob
        if p.ndim == 1:
            return p[value] if value.ndim else p[value].reshape([])
        # one category per batch entry, batch dims leading
        if list(value.shape) == list(self.batch_shape):
            return take_along_axis(p, value.unsqueeze(-1), -1).squeeze(-1)
        return take_along_axis(p, value.reshape(list(self.batch_shape) + [-1]), -1)

    def probs(self, value):
        return self._gather(value)

    prob = probs

    def log_prob(self, value):
        return log(self._gather(value))

    def entropy(self):
        from ..nn.functional import log_softmax, softmax
        lp = log_softmax(self.logits, axis=-1)
        return -(softmax(self.logits, axis=-1) * lp).sum(-1)


class Geometric(Distribution):
    """``Geometric(probs)``: the number of failures before the first success,
    ``P(k) = (1 - probs)^k probs`` for k = 0, 1, ..."""

    def __init__(self, probs):
        (self.probs_param,), shape = broadcast_params("Geometric", probs=probs)
        super().__init__(shape)

    @property
    def mean(self):
        return (1 - self.probs_param) / self.probs_param

    @property
    def variance(self):
        return (1 - self.probs_param) / (self.probs_param * self.probs_param)

    def sample(self, shape=()):
        shape = self._extend_shape(sample_shape(shape, "Geometric"))
        p = np.broadcast_to(host(self.probs_param).astype(np.float64), shape)
        return draw(self.probs_param, "geometric", p, size=shape) - 1

    def log_pmf(self, k):
        k = check_value(k, self.probs_param, "Geometric")
        p = self.probs_param
        return k * log1p(-p) + log(p)

    log_prob = log_pmf

    def pmf(self, k):
        return exp(self.log_pmf(k))

    prob = pmf

    def entropy(self):
        p = self.probs_param
        return -(_xlogy(p, p) + _xlogy(1 - p, 1 - p)) / p

    def cdf(self, k):
        k = check_value(k, self.probs_param, "Geometric")
        return 1 - exp((k + 1) * log1p(-self.probs_param))


class Poisson(Distribution):
    """``Poisson(rate)``. Samples have ``rate``'s dtype."""

    def __init__(self, rate):
        (self.rate,), shape = broadcast_params("Poisson", rate=rate)
        super().__init__(shape)

    @property
    def mean(self):
        return self.rate

    @property
    def variance(self):
        return self.rate

    def sample(self, shape=()):
        shape = self._extend_shape(sample_shape(shape, "Poisson"))
        lam = np.broadcast_to(host(self.rate).astype(np.float64), shape)
        return draw(self.rate, "poisson", lam, size=shape)

    def log_prob(self, value):
        value = check_value(value, self.rate, "Poisson")
        return _xlogy(value, self.rate) - self.rate - lgamma(value + 1)

    def entropy(self):
        """By summation over the support up to where the remaining mass is below 1e-12."""
        lam = host(self.rate).astype(np.float64)
        top = int(np.max(lam + 30 * np.sqrt(lam) + 30)) if lam.size else 1
        k = np.arange(top + 1, dtype=np.float64).reshape((-1,) + (1,) * lam.ndim)
        from ._ops import to_tensor
        kt = to_tensor(k.astype(np.dtype(self.rate.dtype)))
        lp = self.log_prob(kt)
        return -(exp(lp) * lp).sum(0)


class Binomial(Distribution):
    """``Binomial(total_count, probs)``: successes in ``total_count`` trials."""

    def __init__(self, total_count, probs):
        (self.probs_param,), shape = broadcast_params("Binomial", probs=probs)
        n = np.asarray(host(total_count) if isinstance(total_count, Tensor) else total_count)
        if n.dtype.kind not in "iuf" or (n < 0).any() or (n != np.round(n)).any():
            raise ValueError(f"ddg.distribution.Binomial: total_count must be non-negative integers, got {n.tolist()}")
        shape = list(np.broadcast_shapes(tuple(shape), n.shape))
        self.total_count = as_param(n.astype(np.dtype(self.probs_param.dtype)), "total_count", "Binomial")
        from ._ops import broadcast_to
        if list(self.total_count.shape) != shape:
            self.total_count = broadcast_to(self.total_count, shape)
        if list(self.probs_param.shape) != shape:
            self.probs_param = broadcast_to(self.probs_param, shape)
        super().__init__(shape)

    @property
    def mean(self):
        return self.total_count * self.probs_param

    @property
    def variance(self):
        return self.total_count * self.probs_param * (1 - self.probs_param)

    def sample(self, shape=()):
        shape = self._extend_shape(sample_shape(shape, "Binomial"))
        n = np.broadcast_to(host(self.total_count).astype(np.int64), shape)
        p = np.broadcast_to(host(self.probs_param).astype(np.float64), shape)
        return draw(self.probs_param, "binomial", n, p, size=shape)

    def log_prob(self, value):
        value = check_value(value, self.probs_param, "Binomial")
        n, p = self.total_count, self.probs_param
        return (lgamma(n + 1) - lgamma(value + 1) - lgamma(n - value + 1) + _xlogy(value, p)
                + _xlogy(n - value, 1 - p))

    def entropy(self):
        n = host(self.total_count)
        top = int(n.max()) if n.size else 0
        k = np.arange(top + 1, dtype=np.float64).reshape((-1,) + (1,) * n.ndim)
        from ._ops import full_like, to_tensor
        kt = to_tensor(np.broadcast_to(k, (top + 1,) + n.shape).astype(np.dtype(self.probs_param.dtype)))
        lp = self.log_prob(kt)
        inside = kt <= self.total_count
        lp = where(inside, lp, full_like(lp, 0.0))
        return -(where(inside, exp(lp), full_like(lp, 0.0)) * lp).sum(0)


class Multinomial(Distribution):
    """``Multinomial(total_count, probs)``: counts of ``total_count`` draws over the last
    dimension's categories (``probs`` normalised along it)."""

    def __init__(self, total_count, probs):
        if isinstance(total_count, bool) or not isinstance(total_count, (int, np.integer)) or total_count < 1:
            raise ValueError(f"ddg.distribution.Multinomial: total_count must be a positive int, got {total_count!r}")
        self.total_count = int(total_count)
        p = as_param(probs, "probs", "Multinomial")
        if p.ndim < 1:
            raise ValueError("ddg.distribution.Multinomial: probs must have at least one dimension")
        self.probs_param = p / p.sum(-1, keepdim=True)
        super().__init__(p.shape[:-1], p.shape[-1:])

    @property
    def mean(self):
        return self.probs_param * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs_param * (1 - self.probs_param)

    def sample(self, shape=()):
        shape = sample_shape(shape, "Multinomial")
        p = host(self.probs_param).astype(np.float64)
        p = np.broadcast_to(p, tuple(shape) + p.shape)
        out = backend.rng(np).multinomial(self.total_count, p / p.sum(-1, keepdims=True))
        out = out.astype(self.probs_param._data.dtype)
        xp = backend.get_array_module(self.probs_param._data)
        return Tensor._wrap(out if xp is np else xp.asarray(out))

    def log_prob(self, value):
        value = check_value(value, self.probs_param, "Multinomial")
        return (lgamma(value.sum(-1) + 1) - lgamma(value + 1).sum(-1)
                + _xlogy(value, self.probs_param).sum(-1))

    def entropy(self):
        """By summation over every outcome (small ``total_count`` and category counts only)."""
        import itertools
        k = self.probs_param.shape[-1]
        outcomes = [c for c in itertools.product(range(self.total_count + 1), repeat=k) if sum(c) == self.total_count]
        if len(outcomes) > 200000:
            raise ValueError(f"ddg.distribution.Multinomial.entropy: {len(outcomes)} outcomes are too many to sum")
        from ._ops import to_tensor
        v = np.array(outcomes, dtype=np.float64).reshape((len(outcomes),) + (1,) * len(self.batch_shape) + (k,))
        lp = self.log_prob(to_tensor(v.astype(np.dtype(self.probs_param.dtype))))
        return -(exp(lp) * lp).sum(0)
