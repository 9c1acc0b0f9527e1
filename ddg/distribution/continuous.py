"""Continuous distributions: Normal, LogNormal, Uniform, Exponential, Laplace, Gumbel,
Cauchy, Gamma, Chi2, Beta, Dirichlet (Paddle's names, arguments and formulas)."""
import math

import numpy as np

from .. import abs, atan, digamma, exp, expm1, lgamma, log, log1p, sign, tan, where  # noqa: A004
from ..tensor import backend
from ..tensor.tensor import Tensor
from .distribution import EULER, LOG_2PI, ExponentialFamily, Distribution, broadcast_params, check_value, draw, \
    sample_shape


def _full(like, v):
    from .. import full_like
    return full_like(like, v)


class Normal(ExponentialFamily):
    """``Normal(loc, scale)``."""

    def __init__(self, loc, scale, name=None):
        (self.loc, self.scale), shape = broadcast_params("Normal", loc=loc, scale=scale)
        super().__init__(shape)

    @property
    def mean(self):
        return self.loc

    @property
    def variance(self):
        return self.scale * self.scale

    def sample(self, shape=(), seed=0):
        return super().sample(shape)

    def rsample(self, shape=()):
        eps = draw(self.loc, "standard_normal", size=self._extend_shape(sample_shape(shape, "Normal")))
        return self.loc + self.scale * eps

    def log_prob(self, value):
        value = check_value(value, self.loc, "Normal")
        var = self.scale * self.scale
        return -((value - self.loc) ** 2) / (2 * var) - log(self.scale) - 0.5 * LOG_2PI

    def entropy(self):
        return 0.5 + 0.5 * LOG_2PI + log(self.scale)

    def cdf(self, value):
        from .. import erf
        value = check_value(value, self.loc, "Normal")
        return 0.5 * (1 + erf((value - self.loc) / (self.scale * math.sqrt(2))))


class LogNormal(Distribution):
    """``LogNormal(loc, scale)``: ``exp`` of ``Normal(loc, scale)``."""

    def __init__(self, loc, scale, name=None):
        self._base = Normal(loc, scale)
        self.loc, self.scale = self._base.loc, self._base.scale
        super().__init__(self._base.batch_shape)

    @property
    def mean(self):
        return exp(self.loc + self.scale * self.scale / 2)

    @property
    def variance(self):
        s2 = self.scale * self.scale
        return expm1(s2) * exp(2 * self.loc + s2)

    def rsample(self, shape=()):
        return exp(self._base.rsample(shape))

    def log_prob(self, value):
        value = check_value(value, self.loc, "LogNormal")
        lv = log(value)
        return self._base.log_prob(lv) - lv

    def entropy(self):
        return self._base.entropy() + self.loc


class Uniform(Distribution):
    """``Uniform(low, high)`` on the open interval ``(low, high)``."""

    def __init__(self, low, high, name=None):
        (self.low, self.high), shape = broadcast_params("Uniform", low=low, high=high)
        super().__init__(shape)

    @property
    def mean(self):
        return (self.low + self.high) / 2

    @property
    def variance(self):
        return (self.high - self.low) ** 2 / 12

    def sample(self, shape=(), seed=0):
        return super().sample(shape)

    def rsample(self, shape=()):
        u = draw(self.low, "random", size=self._extend_shape(sample_shape(shape, "Uniform")))
        return self.low + (self.high - self.low) * u

    def _inside(self, value):
        return ((self.low < value).astype(value.dtype)) * ((value < self.high).astype(value.dtype))

    def log_prob(self, value):
        value = check_value(value, self.low, "Uniform")
        lp = -log(self.high - self.low) + value * 0
        return where(self._inside(value) > 0, lp, _full(lp, -np.inf))

    def probs(self, value):
        value = check_value(value, self.low, "Uniform")
        return self._inside(value) / (self.high - self.low)

    prob = probs

    def entropy(self):
        return log(self.high - self.low)


class Exponential(ExponentialFamily):
    """``Exponential(rate)``: density ``rate * exp(-rate * x)`` on x >= 0."""

    def __init__(self, rate):
        (self.rate,), shape = broadcast_params("Exponential", rate=rate)
        super().__init__(shape)

    @property
    def mean(self):
        return 1 / self.rate

    @property
    def variance(self):
        return 1 / (self.rate * self.rate)

    def rsample(self, shape=()):
        e = draw(self.rate, "standard_exponential", size=self._extend_shape(sample_shape(shape, "Exponential")))
        return e / self.rate

    def log_prob(self, value):
        value = check_value(value, self.rate, "Exponential")
        lp = log(self.rate) - self.rate * value
        return where(value >= 0, lp, _full(lp, -np.inf))

    def entropy(self):
        return 1 - log(self.rate)

    def cdf(self, value):
        value = check_value(value, self.rate, "Exponential")
        return -expm1(-self.rate * value)

    def icdf(self, value):
        value = check_value(value, self.rate, "Exponential")
        return -log1p(-value) / self.rate


class Laplace(Distribution):
    """``Laplace(loc, scale)``."""

    def __init__(self, loc, scale):
        (self.loc, self.scale), shape = broadcast_params("Laplace", loc=loc, scale=scale)
        super().__init__(shape)

    @property
    def mean(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale * self.scale

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def rsample(self, shape=()):
        e = draw(self.loc, "laplace", size=self._extend_shape(sample_shape(shape, "Laplace")))
        return self.loc + self.scale * e

    def log_prob(self, value):
        value = check_value(value, self.loc, "Laplace")
        return -log(2 * self.scale) - abs(value - self.loc) / self.scale

    def entropy(self):
        return 1 + log(2 * self.scale)

    def cdf(self, value):
        value = check_value(value, self.loc, "Laplace")
        z = value - self.loc
        return 0.5 - 0.5 * sign(z) * expm1(-abs(z) / self.scale)

    def icdf(self, value):
        value = check_value(value, self.loc, "Laplace")
        t = value - 0.5
        return self.loc - self.scale * sign(t) * log1p(-2 * abs(t))


class Gumbel(Distribution):
    """``Gumbel(loc, scale)`` (the maximum-value type I distribution)."""

    def __init__(self, loc, scale):
        (self.loc, self.scale), shape = broadcast_params("Gumbel", loc=loc, scale=scale)
        super().__init__(shape)

    @property
    def mean(self):
        return self.loc + self.scale * EULER

    @property
    def variance(self):
        return (math.pi ** 2 / 6) * self.scale * self.scale

    def rsample(self, shape=()):
        g = draw(self.loc, "gumbel", size=self._extend_shape(sample_shape(shape, "Gumbel")))
        return self.loc + self.scale * g

    def log_prob(self, value):
        value = check_value(value, self.loc, "Gumbel")
        z = (value - self.loc) / self.scale
        return -(z + exp(-z)) - log(self.scale)

    def entropy(self):
        return log(self.scale) + 1 + EULER

    def cdf(self, value):
        value = check_value(value, self.loc, "Gumbel")
        return exp(-exp(-(value - self.loc) / self.scale))


class Cauchy(Distribution):
    """``Cauchy(loc, scale)``: no mean and no variance."""

    def __init__(self, loc, scale, name=None):
        (self.loc, self.scale), shape = broadcast_params("Cauchy", loc=loc, scale=scale)
        super().__init__(shape)

    @property
    def mean(self):
        raise ValueError("Cauchy distribution has no mean.")

    @property
    def variance(self):
        raise ValueError("Cauchy distribution has no variance.")

    @property
    def stddev(self):
        raise ValueError("Cauchy distribution has no stddev.")

    def rsample(self, shape=()):
        u = draw(self.loc, "random", size=self._extend_shape(sample_shape(shape, "Cauchy")))
        return self.loc + self.scale * tan(math.pi * (u - 0.5))

    def log_prob(self, value):
        value = check_value(value, self.loc, "Cauchy")
        z = (value - self.loc) / self.scale
        return -math.log(math.pi) - log(self.scale) - log1p(z * z)

    def entropy(self):
        return math.log(4 * math.pi) + log(self.scale)

    def cdf(self, value):
        value = check_value(value, self.loc, "Cauchy")
        return atan((value - self.loc) / self.scale) / math.pi + 0.5


class Gamma(ExponentialFamily):
    """``Gamma(concentration, rate)``: density ``rate^a x^(a-1) exp(-rate x) / Gamma(a)``.
    ``rsample`` carries gradients to ``rate`` only: it refuses when ``concentration``
    requires grad (the implicit reparameterization is not implemented)."""

    def __init__(self, concentration, rate):
        (self.concentration, self.rate), shape = broadcast_params("Gamma", concentration=concentration, rate=rate)
        super().__init__(shape)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def variance(self):
        return self.concentration / (self.rate * self.rate)

    def _standard(self, shape):
        a = np.broadcast_to(self.concentration.numpy().astype(np.float64), shape)
        return draw(self.concentration, "standard_gamma", a, size=shape)

    def sample(self, shape=()):
        shape = self._extend_shape(sample_shape(shape, type(self).__name__))
        return (self._standard(shape) / self.rate.detach()).detach()

    def rsample(self, shape=()):
        if not self.concentration.stop_gradient:
            raise NotImplementedError(f"ddg.distribution.{type(self).__name__}.rsample: gradients with respect to "
                                      f"the concentration are not implemented; use sample, or a concentration "
                                      f"with stop_gradient=True")
        shape = self._extend_shape(sample_shape(shape, type(self).__name__))
        return self._standard(shape) / self.rate

    def log_prob(self, value):
        value = check_value(value, self.rate, type(self).__name__)
        a, b = self.concentration, self.rate
        return a * log(b) + (a - 1) * log(value) - b * value - lgamma(a)

    def entropy(self):
        a, b = self.concentration, self.rate
        return a - log(b) + lgamma(a) + (1 - a) * digamma(a)


class Chi2(Gamma):
    """``Chi2(df)``: ``Gamma(df / 2, 1 / 2)``."""

    def __init__(self, df):
        (df,), _ = broadcast_params("Chi2", df=df)
        self.df = df
        super().__init__(df * 0.5, _full(df, 0.5))


class Beta(ExponentialFamily):
    """``Beta(alpha, beta)`` on (0, 1)."""

    def __init__(self, alpha, beta):
        (self.alpha, self.beta), shape = broadcast_params("Beta", alpha=alpha, beta=beta)
        super().__init__(shape)

    @property
    def mean(self):
        return self.alpha / (self.alpha + self.beta)

    @property
    def variance(self):
        s = self.alpha + self.beta
        return self.alpha * self.beta / (s * s * (s + 1))

    def sample(self, shape=()):
        shape = self._extend_shape(sample_shape(shape, "Beta"))
        a, b = (np.broadcast_to(t.numpy().astype(np.float64), shape) for t in (self.alpha, self.beta))
        return draw(self.alpha, "beta", a, b, size=shape)

    def log_prob(self, value):
        value = check_value(value, self.alpha, "Beta")
        a, b = self.alpha, self.beta
        return (a - 1) * log(value) + (b - 1) * log1p(-value) - (lgamma(a) + lgamma(b) - lgamma(a + b))

    def entropy(self):
        a, b = self.alpha, self.beta
        return (lgamma(a) + lgamma(b) - lgamma(a + b) - (a - 1) * digamma(a) - (b - 1) * digamma(b)
                + (a + b - 2) * digamma(a + b))


class Dirichlet(ExponentialFamily):
    """``Dirichlet(concentration)``: the last dimension is the event."""

    def __init__(self, concentration):
        (c,), shape = broadcast_params("Dirichlet", concentration=concentration)
        if len(shape) < 1:
            raise ValueError("ddg.distribution.Dirichlet: concentration must have at least one dimension")
        self.concentration = c
        super().__init__(shape[:-1], shape[-1:])

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0 * c0 * (c0 + 1))

    def sample(self, shape=()):
        shape = self._extend_shape(sample_shape(shape, "Dirichlet"))
        c = np.broadcast_to(self.concentration.numpy().astype(np.float64), shape)
        g = backend.rng(np).standard_gamma(c)
        out = g / g.sum(-1, keepdims=True)
        xp = backend.get_array_module(self.concentration._data)
        out = out.astype(self.concentration._data.dtype)
        return Tensor._wrap(out if xp is np else xp.asarray(out))

    def log_prob(self, value):
        value = check_value(value, self.concentration, "Dirichlet")
        c = self.concentration
        return ((c - 1) * log(value)).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1)

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        c0 = c.sum(-1)
        return lgamma(c).sum(-1) - lgamma(c0) + (c0 - k) * digamma(c0) - ((c - 1) * digamma(c)).sum(-1)
