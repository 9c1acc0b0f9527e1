"""The closed-form KL divergences between distributions of one family, registered with
``register_kl`` (the registry and ``kl_divergence`` are in ``distribution.py``)."""
import math

from ._ops import abs, digamma, exp, lgamma, log, log1p  # noqa: A004
from .continuous import (Beta, Cauchy, ContinuousBernoulli, Dirichlet, Exponential, Gamma, Gumbel, Laplace, LogNormal,
                         MultivariateNormal, Normal, Uniform)
from .discrete import Bernoulli, Binomial, Categorical, Geometric, Poisson
from .distribution import register_kl

@register_kl(Normal, Normal)
def _kl_normal(p, q):
    r = p.scale / q.scale
    return 0.5 * (r * r + ((p.loc - q.loc) / q.scale) ** 2) - 0.5 - log(r)


@register_kl(LogNormal, LogNormal)
def _kl_lognormal(p, q):
    return _kl_normal(p._base, q._base)


@register_kl(Uniform, Uniform)
def _kl_uniform(p, q):
    from ._ops import full_like, where
    inside = (q.low <= p.low) & (p.high <= q.high)
    kl = log(q.high - q.low) - log(p.high - p.low)
    return where(inside, kl, full_like(kl, math.inf))


@register_kl(Exponential, Exponential)
def _kl_exponential(p, q):
    r = q.rate / p.rate
    return r - 1 - log(r)


@register_kl(Laplace, Laplace)
def _kl_laplace(p, q):
    d = abs(p.loc - q.loc)
    return log(q.scale / p.scale) + d / q.scale + p.scale / q.scale * exp(-d / p.scale) - 1


@register_kl(Cauchy, Cauchy)
def _kl_cauchy(p, q):
    return log(((p.scale + q.scale) ** 2 + (p.loc - q.loc) ** 2) / (4 * p.scale * q.scale))


@register_kl(Gumbel, Gumbel)
def _kl_gumbel(p, q):
    from .distribution import EULER
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    return -log(ct1) - ct2 + ct3 + ct1 * EULER + exp(ct2 + lgamma(1 + ct1) - ct3) - (1 + EULER)


@register_kl(Gamma, Gamma)
def _kl_gamma(p, q):
    a1, b1, a2, b2 = p.concentration, p.rate, q.concentration, q.rate
    return ((a1 - a2) * digamma(a1) - lgamma(a1) + lgamma(a2) + a2 * (log(b1) - log(b2))
            + a1 * (b2 - b1) / b1)


@register_kl(Beta, Beta)
def _kl_beta(p, q):
    a1, b1, a2, b2 = p.alpha, p.beta, q.alpha, q.beta
    lbeta = lambda a, b: lgamma(a) + lgamma(b) - lgamma(a + b)  # noqa: E731
    return (lbeta(a2, b2) - lbeta(a1, b1) + (a1 - a2) * digamma(a1) + (b1 - b2) * digamma(b1)
            + (a2 - a1 + b2 - b1) * digamma(a1 + b1))


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet(p, q):
    c1, c2 = p.concentration, q.concentration
    s1, s2 = c1.sum(-1), c2.sum(-1)
    return (lgamma(s1) - lgamma(s2) - (lgamma(c1) - lgamma(c2)).sum(-1)
            + ((c1 - c2) * (digamma(c1) - digamma(s1.unsqueeze(-1)))).sum(-1))


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli(p, q):
    from .discrete import _xlogy
    a, b = p.probs_param, q.probs_param
    return _xlogy(a, a) - _xlogy(a, b) + _xlogy(1 - a, 1 - a) - _xlogy(1 - a, 1 - b)


@register_kl(Categorical, Categorical)
def _kl_categorical(p, q):
    from ..nn.functional import log_softmax, softmax
    lp, lq = log_softmax(p.logits, axis=-1), log_softmax(q.logits, axis=-1)
    return (softmax(p.logits, axis=-1) * (lp - lq)).sum(-1, keepdim=True)  # Paddle keeps the last dim


@register_kl(Geometric, Geometric)
def _kl_geometric(p, q):
    a, b = p.probs_param, q.probs_param
    return (log(a) - log(b)) + (1 - a) / a * (log1p(-a) - log1p(-b))


@register_kl(Poisson, Poisson)
def _kl_poisson(p, q):
    return p.rate * (log(p.rate) - log(q.rate)) - p.rate + q.rate


@register_kl(Binomial, Binomial)
def _kl_binomial(p, q):
    from .discrete import _xlogy
    a, b = p.probs_param, q.probs_param
    return p.total_count * (_xlogy(a, a) - _xlogy(a, b) + _xlogy(1 - a, 1 - a) - _xlogy(1 - a, 1 - b))


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn(p, q):
    from ._ops import linalg
    k = p.loc.shape[-1]
    m = linalg.solve(q.scale_tril, p.scale_tril)             # Lq^-1 Lp
    d = linalg.solve(q.scale_tril, (q.loc - p.loc).unsqueeze(-1)).squeeze(-1)
    return 0.5 * ((m * m).sum([-2, -1]) + (d * d).sum(-1) - k) + q._half_log_det() - p._half_log_det()


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_cont_bernoulli(p, q):
    lp = log(p.probs_param) - log1p(-p.probs_param)
    lq = log(q.probs_param) - log1p(-q.probs_param)
    return (p.mean * (lp - lq) + p._log_norm() + log1p(-p.probs_param) - q._log_norm()
            - log1p(-q.probs_param))
