"""``ddg.distribution``: Paddle's probability distributions, with ``sample``, ``rsample``
(reparameterized, differentiable), ``log_prob``, ``prob``, ``entropy``, ``mean``,
``variance``, ``cdf`` where Paddle has it, and ``kl_divergence`` between distributions of
the same family (``register_kl`` adds pairs). See ``distribution.py`` for the rules on
parameters, dtypes and random numbers."""
from .continuous import (Beta, Cauchy, Chi2, ContinuousBernoulli, Dirichlet, Exponential, Gamma, Gumbel, Laplace,
                         LKJCholesky, LogNormal, MultivariateNormal, Normal, StudentT, Uniform)
from .discrete import Bernoulli, Binomial, Categorical, Geometric, Multinomial, Poisson
from .distribution import Distribution, ExponentialFamily, kl_divergence, register_kl
from .independent import Independent
from . import kl  # noqa: F401  (registers the closed-form KL divergences)
from .transform import (AbsTransform, AffineTransform, ChainTransform, ExpTransform, IndependentTransform,
                        PowerTransform, ReshapeTransform, SigmoidTransform, SoftmaxTransform, StackTransform,
                        StickBreakingTransform, TanhTransform, Transform, TransformedDistribution)

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "ContinuousBernoulli", "Dirichlet",
           "Distribution", "LKJCholesky", "MultivariateNormal", "StudentT",
           "Exponential", "ExponentialFamily", "Gamma", "Geometric", "Gumbel", "Independent", "Laplace",
           "LogNormal", "Multinomial", "Normal", "Poisson", "Uniform", "kl_divergence", "register_kl",
           "TransformedDistribution", "Transform", "AbsTransform", "AffineTransform", "ChainTransform",
           "ExpTransform", "IndependentTransform", "PowerTransform", "ReshapeTransform", "SigmoidTransform",
           "SoftmaxTransform", "StackTransform", "StickBreakingTransform", "TanhTransform"]
