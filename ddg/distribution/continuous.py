"""Continuous distributions: Normal, LogNormal, Uniform, Exponential, Laplace, Gumbel,
Cauchy, Gamma, Chi2, Beta, Dirichlet (Paddle's names, arguments and formulas)."""
import math

import numpy as np

from ._ops import abs, atan, digamma, exp, expm1, lgamma, log, log1p, sign, tan, where  # noqa: A004
from ..tensor import backend
from ..tensor.tensor import Tensor
from .distribution import EULER, LOG_2PI, ExponentialFamily, Distribution, broadcast_params, check_value, draw, \
    sample_shape


def _full(like, v):
    from ._ops import full_like
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
        from ._ops import erf
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


class StudentT(Distribution):
    """``StudentT(df, loc, scale)``: mean ``loc`` for ``df > 1`` (nan otherwise), variance
    ``scale^2 df / (df - 2)`` for ``df > 2`` (inf for ``1 < df <= 2``, nan below)."""

    def __init__(self, df, loc, scale, name=None):
        (self.df, self.loc, self.scale), shape = broadcast_params("StudentT", df=df, loc=loc, scale=scale)
        super().__init__(shape)

    @property
    def mean(self):
        return where(self.df > 1, self.loc, _full(self.loc, np.nan))

    @property
    def variance(self):
        v = self.scale * self.scale * self.df / (self.df - 2)
        return where(self.df > 2, v, where(self.df > 1, _full(v, np.inf), _full(v, np.nan)))

    def sample(self, shape=()):
        shape = self._extend_shape(sample_shape(shape, "StudentT"))
        t = draw(self.df, "standard_t", np.broadcast_to(self.df.numpy().astype(np.float64), shape), size=shape)
        return (self.loc.detach() + self.scale.detach() * t).detach()

    def log_prob(self, value):
        value = check_value(value, self.loc, "StudentT")
        d = self.df
        z = (value - self.loc) / self.scale
        return (lgamma((d + 1) / 2) - lgamma(d / 2) - 0.5 * log(d * math.pi) - log(self.scale)
                - (d + 1) / 2 * log1p(z * z / d))

    def entropy(self):
        d = self.df
        lbeta = lgamma(d / 2) + math.lgamma(0.5) - lgamma((d + 1) / 2)
        return (d + 1) / 2 * (digamma((d + 1) / 2) - digamma(d / 2)) + 0.5 * log(d) + lbeta + log(self.scale)


class MultivariateNormal(Distribution):
    """``MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None,
    scale_tril=None)``: exactly one of the three describes the covariance; the last
    dimension of ``loc`` is the event."""

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None):
        from ._ops import linalg
        from .distribution import as_param
        given = [m is not None for m in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            raise ValueError("ddg.distribution.MultivariateNormal: give exactly one of covariance_matrix, "
                             "precision_matrix and scale_tril")
        self.loc = as_param(loc, "loc", "MultivariateNormal")
        if self.loc.ndim < 1:
            raise ValueError("ddg.distribution.MultivariateNormal: loc must have at least one dimension")
        k = self.loc.shape[-1]
        m = as_param(covariance_matrix if given[0] else precision_matrix if given[1] else scale_tril,
                     "covariance", "MultivariateNormal", self.loc)
        if m.ndim < 2 or m.shape[-1] != k or m.shape[-2] != k:
            raise ValueError(f"ddg.distribution.MultivariateNormal: the matrix must be [..., {k}, {k}] for loc of "
                             f"shape {self.loc.shape}, got {m.shape}")
        if given[0]:
            self.scale_tril = linalg.cholesky(m)
        elif given[1]:
            self.scale_tril = linalg.cholesky(linalg.inv(m))
        else:
            self.scale_tril = m
        batch = list(np.broadcast_shapes(tuple(self.loc.shape[:-1]), tuple(self.scale_tril.shape[:-2])))
        super().__init__(batch, [k])

    @property
    def covariance_matrix(self):
        return self.scale_tril @ self.scale_tril.transpose(list(range(self.scale_tril.ndim - 2))
                                                           + [self.scale_tril.ndim - 1, self.scale_tril.ndim - 2])

    @property
    def mean(self):
        from ._ops import broadcast_to
        return broadcast_to(self.loc, list(self.batch_shape) + list(self.event_shape))

    @property
    def variance(self):
        from ._ops import broadcast_to, diagonal
        return broadcast_to(diagonal(self.covariance_matrix, axis1=-2, axis2=-1),
                            list(self.batch_shape) + list(self.event_shape))

    def rsample(self, shape=()):
        shape = self._extend_shape(sample_shape(shape, "MultivariateNormal"))
        eps = draw(self.loc, "standard_normal", size=shape)
        return self.loc + (self.scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        from ._ops import diagonal
        return log(diagonal(self.scale_tril, axis1=-2, axis2=-1)).sum(-1)

    def log_prob(self, value):
        from ._ops import broadcast_to, linalg
        value = check_value(value, self.loc, "MultivariateNormal")
        diff = value - self.loc
        k = self.loc.shape[-1]
        batch = list(np.broadcast_shapes(tuple(diff.shape[:-1]), tuple(self.scale_tril.shape[:-2])))
        L = broadcast_to(self.scale_tril, batch + [k, k])
        sol = linalg.solve(L, broadcast_to(diff, batch + [k]).unsqueeze(-1)).squeeze(-1)
        return -0.5 * (k * LOG_2PI + (sol * sol).sum(-1)) - self._half_log_det()

    def entropy(self):
        k = self.loc.shape[-1]
        return 0.5 * k * (1 + LOG_2PI) + self._half_log_det() + self.loc.sum(-1) * 0


class ContinuousBernoulli(ExponentialFamily):
    """``ContinuousBernoulli(probs, lims=(0.499, 0.501))`` on [0, 1]; for ``probs`` within
    ``lims`` the normaliser and moments use their Taylor expansions around 1/2."""

    def __init__(self, probs, lims=(0.499, 0.501)):
        (self.probs_param,), shape = broadcast_params("ContinuousBernoulli", probs=probs)
        self.lims = (float(lims[0]), float(lims[1]))
        super().__init__(shape)

    def _outside(self):
        p = self.probs_param
        return (p < self.lims[0]) | (p > self.lims[1])

    def _cut(self):
        return where(self._outside(), self.probs_param, _full(self.probs_param, self.lims[0]))

    def _log_norm(self):
        c = self._cut()
        below = where(c <= 0.5, c, _full(c, 0.0))
        above = where(c >= 0.5, c, _full(c, 1.0))
        exact = log(abs(log1p(-c) - log(c))) - where(c <= 0.5, log1p(-2.0 * below), log(2.0 * above - 1.0))
        x = (self.probs_param - 0.5) ** 2
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return where(self._outside(), exact, taylor)

    @property
    def mean(self):
        c = self._cut()
        exact = c / (2.0 * c - 1.0) + 1.0 / (log1p(-c) - log(c))
        x = self.probs_param - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x * x) * x
        return where(self._outside(), exact, taylor)

    @property
    def variance(self):
        c = self._cut()
        exact = c * (c - 1.0) / (1.0 - 2.0 * c) ** 2 + 1.0 / (log1p(-c) - log(c)) ** 2
        x = (self.probs_param - 0.5) ** 2
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return where(self._outside(), exact, taylor)

    def rsample(self, shape=()):
        u = draw(self.probs_param, "random", size=self._extend_shape(sample_shape(shape, "ContinuousBernoulli")))
        return self.icdf(u)

    def log_prob(self, value):
        value = check_value(value, self.probs_param, "ContinuousBernoulli")
        p = self.probs_param
        return value * log(p) + (1 - value) * log1p(-p) + self._log_norm()

    def entropy(self):
        p = self.probs_param
        l0, l1 = log1p(-p), log(p)
        return self.mean * (l0 - l1) - self._log_norm() - l0

    def cdf(self, value):
        from ._ops import clip
        value = check_value(value, self.probs_param, "ContinuousBernoulli")
        c = self._cut()
        cdfs = (exp(value * log(c) + (1 - value) * log1p(-c)) + c - 1.0) / (2.0 * c - 1.0)
        return clip(where(self._outside(), cdfs, value + c * 0), 0.0, 1.0)

    def icdf(self, value):
        value = check_value(value, self.probs_param, "ContinuousBernoulli")
        c = self._cut()
        exact = (log1p(-c + value * (2.0 * c - 1.0)) - log1p(-c)) / (log(c) - log1p(-c))
        return where(self._outside(), exact, value + c * 0)


class LKJCholesky(Distribution):
    """``LKJCholesky(dim=2, concentration=1.0, sample_method='onion')``: Cholesky factors of
    ``dim x dim`` correlation matrices whose density is proportional to
    ``det(C)^(concentration - 1)``. ``sample_method`` is ``'onion'`` or ``'cvine'`` (both
    draw from the same distribution)."""

    def __init__(self, dim=2, concentration=1.0, sample_method="onion"):
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
            raise ValueError(f"ddg.distribution.LKJCholesky: dim must be an int >= 2, got {dim!r}")
        if sample_method not in ("onion", "cvine"):
            raise ValueError(f"ddg.distribution.LKJCholesky: sample_method must be 'onion' or 'cvine', got "
                             f"{sample_method!r}")
        (self.concentration,), shape = broadcast_params("LKJCholesky", concentration=concentration)
        c = self.concentration.numpy()
        if (c <= 0).any():
            raise ValueError(f"ddg.distribution.LKJCholesky: concentration must be positive, got {c.tolist()}")
        self.dim, self.sample_method = dim, sample_method
        super().__init__(shape, (dim, dim))

    def _onion(self, shape, eta):
        g = backend.rng(np)
        d = self.dim
        offset = np.concatenate([[0.0], np.arange(d - 1, dtype=np.float64)])
        marginal = eta + 0.5 * (d - 2)
        # row i's squared off-diagonal norm ~ Beta(i / 2, marginal - (i - 1) / 2) (Lewandowski,
        # Kurowicka and Joe 2009, sec. 3.2); Paddle's onion sampler uses i - 1/2 for the first
        # parameter, which skews the rows after the second (its cvine sampler is right)
        a = np.broadcast_to(0.5 * offset + 0.5, tuple(shape) + (d,))
        b = np.broadcast_to(marginal[..., None] - 0.5 * offset, tuple(shape) + (d,))
        y = g.beta(a, b)[..., None]
        u = np.tril(g.standard_normal(tuple(shape) + (d, d)), -1)
        norm = np.linalg.norm(u, axis=-1, keepdims=True)
        u = np.divide(u, norm, out=np.zeros_like(u), where=norm > 0)
        w = np.sqrt(y) * u
        diag = np.sqrt(np.clip(1 - (w ** 2).sum(-1), np.finfo(np.float64).tiny, None))
        return w + diag[..., None] * np.eye(d)

    def _cvine(self, shape, eta):
        g = backend.rng(np)
        d = self.dim
        L = np.zeros(tuple(shape) + (d, d))
        L[..., 0, 0] = 1.0
        for i in range(1, d):
            total = np.zeros(tuple(shape))
            for j in range(i):
                beta = eta + 0.5 * (d - 2 - j)
                z = 2 * g.beta(beta, beta) - 1  # the partial correlation at level j
                L[..., i, j] = z * np.sqrt(1 - total)
                total = total + L[..., i, j] ** 2
            L[..., i, i] = np.sqrt(np.clip(1 - total, 0, None))
        return L

    def sample(self, shape=()):
        shape = list(sample_shape(shape, "LKJCholesky")) + list(self.batch_shape)
        eta = np.broadcast_to(self.concentration.numpy().astype(np.float64), shape)
        out = self._onion(shape, eta) if self.sample_method == "onion" else self._cvine(shape, eta)
        out = out.astype(self.concentration._data.dtype)
        xp = backend.get_array_module(self.concentration._data)
        return Tensor._wrap(out if xp is np else xp.asarray(out))

    def log_prob(self, value):
        from ..autograd.composite.arithmetic import multigammaln
        from ._ops import diagonal, to_tensor
        value = check_value(value, self.concentration, "LKJCholesky")
        d = self.dim
        diag = diagonal(value, axis1=-2, axis2=-1)[..., 1:]
        order = to_tensor(np.arange(2, d + 1).astype(np.dtype(self.concentration.dtype)))
        order = 2 * (self.concentration - 1).unsqueeze(-1) + d - order
        unnormalized = (order * log(diag)).sum(-1)
        alpha = self.concentration + 0.5 * (d - 1)
        normalize = 0.5 * (d - 1) * math.log(math.pi) + multigammaln(alpha - 0.5, d - 1) - lgamma(alpha) * (d - 1)
        return unnormalized - normalize
