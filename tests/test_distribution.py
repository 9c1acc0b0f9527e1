"""ddg.distribution against scipy.stats (densities, entropies, moments, cdfs), Paddle
3.3.1's own conventions (Categorical, Geometric, Uniform's open support), gradients of
log_prob/entropy/rsample against float64 central differences, sample moments, and
kl_divergence against Monte-Carlo estimates."""
import numpy as np
import pytest
from scipy import stats

import ddg
import ddg.distribution as D


def T(a):
    return ddg.to_tensor(np.asarray(a, dtype=np.float64))


LOC, SCALE = np.array([0.3, -1.2]), np.array([0.8, 1.7])
A, B = np.array([1.5, 3.0]), np.array([2.5, 0.7])
# name: (make(params), params, scipy frozen distribution, values, has cdf)
CONT = {
    "Normal": (lambda p: D.Normal(*p), (LOC, SCALE), stats.norm(LOC, SCALE), [0.1, 2.0], True),
    "LogNormal": (lambda p: D.LogNormal(*p), (LOC, SCALE), stats.lognorm(SCALE, scale=np.exp(LOC)), [0.5, 2.0], False),
    "Uniform": (lambda p: D.Uniform(*p), (LOC, LOC + SCALE), stats.uniform(LOC, SCALE), [0.35, -1.0], False),
    "Exponential": (lambda p: D.Exponential(*p), (A,), stats.expon(scale=1 / A), [0.4, 2.0], True),
    "Laplace": (lambda p: D.Laplace(*p), (LOC, SCALE), stats.laplace(LOC, SCALE), [0.1, -2.0], True),
    "Gumbel": (lambda p: D.Gumbel(*p), (LOC, SCALE), stats.gumbel_r(LOC, SCALE), [0.1, 2.0], True),
    "Cauchy": (lambda p: D.Cauchy(*p), (LOC, SCALE), stats.cauchy(LOC, SCALE), [0.1, 2.0], True),
    "Gamma": (lambda p: D.Gamma(*p), (A, B), stats.gamma(A, scale=1 / B), [0.5, 2.0], False),
    "Chi2": (lambda p: D.Chi2(*p), (A,), stats.chi2(A), [0.5, 2.0], False),
    "Beta": (lambda p: D.Beta(*p), (A, B), stats.beta(A, B), [0.3, 0.8], False),
    "StudentT": (lambda p: D.StudentT(*p), (A + 2, LOC, SCALE), stats.t(A + 2, LOC, SCALE), [0.1, 2.0], False),
}


def _leafs(params):
    out = []
    for p in params:
        t = T(p)
        t.stop_gradient = False
        out.append(t)
    return out


def _central(f, params, eps=1e-6):
    grads = []
    for k, p in enumerate(params):
        g = np.zeros_like(p)
        for i in np.ndindex(p.shape):
            hi = [q.copy() for q in params]
            lo = [q.copy() for q in params]
            hi[k][i] += eps
            lo[k][i] -= eps
            g[i] = (f(hi) - f(lo)) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("name", sorted(CONT))
def test_continuous_against_scipy_with_gradients(name):
    make, params, ref, values, has_cdf = CONT[name]
    d = make([T(p) for p in params])
    v = T(values)
    np.testing.assert_allclose(d.log_prob(v).numpy(), ref.logpdf(values), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(d.prob(v).numpy(), ref.pdf(values), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(d.entropy().numpy(), ref.entropy(), rtol=1e-9)
    if name != "Cauchy":
        np.testing.assert_allclose(d.mean.numpy(), ref.mean(), rtol=1e-9)
        np.testing.assert_allclose(d.variance.numpy(), ref.var(), rtol=1e-9)
    if has_cdf:
        np.testing.assert_allclose(d.cdf(v).numpy(), ref.cdf(values), rtol=1e-9)
    assert d.batch_shape == (2,) and d.log_prob(v).dtype == ddg.float64
    # gradients of log_prob + entropy with respect to every parameter
    leafs = _leafs(params)
    dl = make(leafs)
    (dl.log_prob(v).sum() + dl.entropy().sum()).backward()
    num = _central(lambda ps: float((make([T(p) for p in ps]).log_prob(v).sum()
                                     + make([T(p) for p in ps]).entropy().sum()).numpy()), list(params))
    for t, g in zip(leafs, num):
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-5, atol=1e-7)


def _scipy_for(name, params):
    """The scipy reference with one batch entry's parameters."""
    ref = {"Normal": lambda m, s: stats.norm(m, s), "LogNormal": lambda m, s: stats.lognorm(s, scale=np.exp(m)),
           "Uniform": lambda lo, hi: stats.uniform(lo, hi - lo), "Exponential": lambda a: stats.expon(scale=1 / a),
           "Laplace": lambda m, s: stats.laplace(m, s), "Gumbel": lambda m, s: stats.gumbel_r(m, s),
           "Cauchy": lambda m, s: stats.cauchy(m, s), "Gamma": lambda a, b: stats.gamma(a, scale=1 / b),
           "Chi2": lambda a: stats.chi2(a), "Beta": lambda a, b: stats.beta(a, b),
           "StudentT": lambda d, m, s: stats.t(d, m, s)}[name]
    return ref(*[float(p) for p in params])


@pytest.mark.parametrize("name", sorted(CONT))
def test_samples_follow_the_distribution(name):
    make, params, _, _, _ = CONT[name]
    ddg.seed(1)
    s = make([T(p) for p in params]).sample([3000])
    assert s.shape == [3000, 2] and s.stop_gradient and s.dtype == ddg.float64
    x = s.numpy()
    for j in range(2):  # Kolmogorov-Smirnov per batch entry (deterministic under ddg.seed)
        assert stats.kstest(x[:, j], _scipy_for(name, [p[j] for p in params]).cdf).pvalue > 1e-4, (name, j)
    ddg.seed(1)
    np.testing.assert_array_equal(make([T(p) for p in params]).sample([3000]).numpy(), x)
    assert make([T(p) for p in params]).sample().shape == [2]


RSAMPLE = ["Normal", "LogNormal", "Uniform", "Exponential", "Laplace", "Gumbel", "Cauchy"]


@pytest.mark.parametrize("name", RSAMPLE)
def test_rsample_gradients(name):
    make, params, _, _, _ = CONT[name]
    w = np.array([[0.3, -1.1], [2.0, 0.5], [-0.7, 1.3]])

    def f(ps):
        ddg.seed(7)
        return float((make([T(p) for p in ps]).rsample([3]) * T(w)).sum().numpy())

    leafs = _leafs(params)
    ddg.seed(7)
    (make(leafs).rsample([3]) * T(w)).sum().backward()
    for t, g in zip(leafs, _central(f, list(params))):
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-5, atol=1e-7)


def test_gamma_rsample_reaches_rate_only():
    a, b = T(A), _leafs([B])[0]
    ddg.seed(3)
    x = D.Gamma(a, b).rsample([5])
    (x.sum()).backward()
    np.testing.assert_allclose(b.grad.numpy(), -(x.numpy() / B).sum(0), rtol=1e-10)
    with pytest.raises(NotImplementedError, match="concentration"):
        D.Gamma(_leafs([A])[0], T(B)).rsample([2])


def test_dirichlet_against_scipy():
    c = np.array([[1.5, 2.0, 3.5], [0.7, 1.2, 2.0]])
    v = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
    d = D.Dirichlet(T(c))
    assert d.batch_shape == (2,) and d.event_shape == (3,)
    for i in range(2):
        ref = stats.dirichlet(c[i])
        np.testing.assert_allclose(d.log_prob(T(v)).numpy()[i], ref.logpdf(v[i]), rtol=1e-9)
        np.testing.assert_allclose(d.entropy().numpy()[i], ref.entropy(), rtol=1e-9)
        np.testing.assert_allclose(d.mean.numpy()[i], ref.mean(), rtol=1e-9)
        np.testing.assert_allclose(d.variance.numpy()[i], ref.var(), rtol=1e-9)
    ddg.seed(2)
    s = d.sample([4000]).numpy()
    assert s.shape == (4000, 2, 3)
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(s.mean(0), c / c.sum(-1, keepdims=True), atol=0.02)
    leaf = _leafs([c])[0]
    D.Dirichlet(leaf).log_prob(T(v)).sum().backward()
    num = _central(lambda ps: float(D.Dirichlet(T(ps[0])).log_prob(T(v)).sum().numpy()), [c])[0]
    np.testing.assert_allclose(leaf.grad.numpy(), num, rtol=1e-5)


def test_discrete_against_scipy():
    p = np.array([0.3, 0.85])
    k = np.array([1.0, 0.0])
    bern = D.Bernoulli(T(p))
    np.testing.assert_allclose(bern.log_prob(T(k)).numpy(), stats.bernoulli(p).logpmf(k), rtol=1e-12)
    np.testing.assert_allclose(bern.entropy().numpy(), stats.bernoulli(p).entropy(), rtol=1e-12)
    np.testing.assert_allclose(bern.cdf(T([0.5, -1.0])).numpy(), [0.7, 0.0])
    geo = D.Geometric(T(p))  # failures before the first success: scipy's geom shifted by one
    kk = np.array([2.0, 3.0])
    np.testing.assert_allclose(geo.log_pmf(T(kk)).numpy(), stats.geom(p, loc=-1).logpmf(kk), rtol=1e-12)
    np.testing.assert_allclose(geo.mean.numpy(), stats.geom(p, loc=-1).mean(), rtol=1e-12)
    np.testing.assert_allclose(geo.cdf(T(kk)).numpy(), stats.geom(p, loc=-1).cdf(kk), rtol=1e-12)
    np.testing.assert_allclose(geo.entropy().numpy(), stats.geom(p).entropy(), rtol=1e-9)
    lam = np.array([2.0, 0.5])
    poi = D.Poisson(T(lam))
    np.testing.assert_allclose(poi.log_prob(T(kk)).numpy(), stats.poisson(lam).logpmf(kk), rtol=1e-12)
    np.testing.assert_allclose(poi.entropy().numpy(), stats.poisson(lam).entropy(), rtol=1e-9)
    binom = D.Binomial(10, T(p))
    np.testing.assert_allclose(binom.log_prob(T(kk)).numpy(), stats.binom(10, p).logpmf(kk), rtol=1e-12)
    np.testing.assert_allclose(binom.entropy().numpy(), stats.binom(10, p).entropy(), rtol=1e-9)
    probs = np.array([0.2, 0.3, 0.5])
    mult = D.Multinomial(4, T(probs))
    counts = np.array([1.0, 1.0, 2.0])
    np.testing.assert_allclose(mult.log_prob(T(counts)).numpy(), stats.multinomial(4, probs).logpmf(counts))
    np.testing.assert_allclose(mult.entropy().numpy(), stats.multinomial(4, probs).entropy(), rtol=1e-9)
    ddg.seed(4)
    for d, ref in ((poi, lam), (binom, 10 * p), (geo, (1 - p) / p), (bern, p)):
        np.testing.assert_allclose(d.sample([20000]).numpy().mean(0), ref, rtol=0.05)
    assert mult.sample([3]).shape == [3, 3] and (mult.sample([3]).numpy().sum(-1) == 4).all()


def test_categorical_follows_paddle():
    # Paddle: probs/log_prob/sample read logits / sum(logits); entropy and KL read softmax(logits)
    c = D.Categorical(T([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(c.probs(ddg.to_tensor([0, 2])).numpy(), [1 / 6, 0.5])
    np.testing.assert_allclose(c.log_prob(ddg.to_tensor([0, 2])).numpy(), np.log([1 / 6, 0.5]))
    np.testing.assert_allclose(c.entropy().numpy(), 0.8323955, rtol=1e-6)  # Paddle 3.3.1's value
    kl = D.kl_divergence(c, D.Categorical(T([2.0, 2.0, 2.0])))
    assert kl.shape == [1]
    np.testing.assert_allclose(kl.numpy(), [0.26621675], rtol=1e-6)
    ddg.seed(0)
    s = c.sample([6000]).numpy()
    assert s.dtype == np.int64
    np.testing.assert_allclose(np.bincount(s, minlength=3) / 6000, [1 / 6, 2 / 6, 3 / 6], atol=0.02)
    batch = D.Categorical(T([[1.0, 1.0], [3.0, 1.0]]))
    assert batch.sample([5]).shape == [5, 2]
    np.testing.assert_allclose(batch.probs(ddg.to_tensor([1, 0])).numpy(), [0.5, 0.75])


PAIRS = {
    "Normal": (lambda: D.Normal(T([0.2]), T([1.1])), lambda: D.Normal(T([-0.5]), T([0.7]))),
    "LogNormal": (lambda: D.LogNormal(T([0.2]), T([0.6])), lambda: D.LogNormal(T([0.1]), T([0.8]))),
    "Exponential": (lambda: D.Exponential(T([1.5])), lambda: D.Exponential(T([0.6]))),
    "Laplace": (lambda: D.Laplace(T([0.2]), T([1.1])), lambda: D.Laplace(T([-0.5]), T([0.7]))),
    "Cauchy": (lambda: D.Cauchy(T([0.2]), T([1.1])), lambda: D.Cauchy(T([-0.5]), T([0.7]))),
    "Gumbel": (lambda: D.Gumbel(T([0.2]), T([1.1])), lambda: D.Gumbel(T([-0.5]), T([0.7]))),
    "Gamma": (lambda: D.Gamma(T([2.0]), T([1.5])), lambda: D.Gamma(T([3.0]), T([1.0]))),
    "Beta": (lambda: D.Beta(T([2.0]), T([1.5])), lambda: D.Beta(T([3.0]), T([1.0]))),
    "Uniform": (lambda: D.Uniform(T([0.2]), T([0.9])), lambda: D.Uniform(T([0.0]), T([1.5]))),
    "Poisson": (lambda: D.Poisson(T([2.0])), lambda: D.Poisson(T([3.5]))),
    "Geometric": (lambda: D.Geometric(T([0.3])), lambda: D.Geometric(T([0.6]))),
    "Bernoulli": (lambda: D.Bernoulli(T([0.3])), lambda: D.Bernoulli(T([0.6]))),
    "Binomial": (lambda: D.Binomial(6, T([0.3])), lambda: D.Binomial(6, T([0.6]))),
    "Dirichlet": (lambda: D.Dirichlet(T([[1.5, 2.0, 3.0]])), lambda: D.Dirichlet(T([[1.0, 1.0, 2.5]]))),
}


PAIRS.update({
    "MultivariateNormal": (lambda: D.MultivariateNormal(T(_mvn_params()[0][0]), covariance_matrix=T(_mvn_params()[1])),
                           lambda: D.MultivariateNormal(T([0.0, 0.5, 0.0]), scale_tril=T(np.eye(3) * 1.3))),
    "ContinuousBernoulli": (lambda: D.ContinuousBernoulli(T([0.3])), lambda: D.ContinuousBernoulli(T([0.7]))),
})


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_kl_divergence_against_monte_carlo(name):
    p, q = (f() for f in PAIRS[name])
    kl = D.kl_divergence(p, q).numpy().reshape(-1)
    ddg.seed(5)
    x = p.sample([100000])
    lr = (p.log_prob(x) - q.log_prob(x)).numpy().reshape(100000, -1)
    est, err = lr.mean(0), lr.std(0) / np.sqrt(100000)
    assert np.all(np.abs(kl - est) < 6 * err + 1e-3), (name, kl, est, err)
    np.testing.assert_allclose(p.kl_divergence(p).numpy(), 0.0, atol=1e-12)


def test_independent_register_kl_and_errors():
    base = D.Normal(T(np.zeros((2, 3))), T(np.ones((2, 3))))
    ind = D.Independent(base, 1)
    assert ind.batch_shape == (2,) and ind.event_shape == (3,)
    v = T(np.full((2, 3), 0.5))
    np.testing.assert_allclose(ind.log_prob(v).numpy(), base.log_prob(v).numpy().sum(-1))
    np.testing.assert_allclose(D.kl_divergence(ind, ind).numpy(), [0.0, 0.0])

    class Mine(D.Normal):
        pass

    @D.register_kl(Mine, D.Normal)
    def _kl(p, q):
        return ddg.to_tensor(42.0)

    assert D.kl_divergence(Mine(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 42.0
    assert D.kl_divergence(D.Normal(0.0, 1.0), Mine(0.0, 1.0)).item() == 0.0  # the Normal pair
    with pytest.raises(NotImplementedError, match="no KL divergence is registered for Normal and Gamma"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Gamma(1.0, 1.0))
    with pytest.raises(ValueError, match="do not broadcast"):
        D.Normal(T([0.0, 1.0]), T([1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="Cauchy distribution has no mean"):
        D.Cauchy(0.0, 1.0).mean
    with pytest.raises(ValueError, match="probs must be in"):
        D.Bernoulli(T([1.5]))
    n = D.Normal(0.0, 1.0)
    assert n.sample([2]).dtype == ddg.float32 and n.batch_shape == () and n.entropy().shape == []


def _mvn_params():
    loc = np.array([[0.3, -1.0, 0.5], [1.0, 0.0, -0.2]])
    a = np.array([[1.2, 0.0, 0.0], [0.4, 0.9, 0.0], [-0.3, 0.2, 0.7]])
    return loc, a @ a.T


@pytest.mark.parametrize("form", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_against_scipy(form):
    loc, cov = _mvn_params()
    arg = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov),
           "scale_tril": np.linalg.cholesky(cov)}[form]
    d = D.MultivariateNormal(T(loc), **{form: T(arg)})
    assert d.batch_shape == (2,) and d.event_shape == (3,)
    v = np.array([[0.1, -0.5, 0.9], [1.5, 0.3, 0.0]])
    for i in range(2):
        ref = stats.multivariate_normal(loc[i], cov)
        np.testing.assert_allclose(d.log_prob(T(v)).numpy()[i], ref.logpdf(v[i]), rtol=1e-10)
        np.testing.assert_allclose(d.entropy().numpy()[i], ref.entropy(), rtol=1e-10)
    np.testing.assert_allclose(d.variance.numpy(), np.broadcast_to(np.diag(cov), (2, 3)), rtol=1e-10)
    ddg.seed(3)
    s = d.sample([20000]).numpy()
    np.testing.assert_allclose(np.cov(s[:, 0].T), cov, atol=0.06)
    np.testing.assert_allclose(s.mean(0), loc, atol=0.05)
    # gradients of log_prob with respect to the mean and the covariance
    lo, cv = _leafs([loc, cov])
    D.MultivariateNormal(lo, covariance_matrix=cv).log_prob(T(v)).sum().backward()
    num = _central(lambda ps: float(D.MultivariateNormal(T(ps[0]), covariance_matrix=T((ps[1] + ps[1].T) / 2))
                                    .log_prob(T(v)).sum().numpy()), [loc, cov])
    np.testing.assert_allclose(lo.grad.numpy(), num[0], rtol=1e-5, atol=1e-7)
    g = cv.grad.numpy()
    np.testing.assert_allclose((g + g.T) / 2, (num[1] + num[1].T) / 2, rtol=1e-4, atol=1e-6)


def test_continuous_bernoulli_by_integration():
    from scipy import integrate
    probs = np.array([0.2, 0.4995, 0.8])
    d = D.ContinuousBernoulli(T(probs))
    for i, p in enumerate(probs):
        dens = lambda x: float(d.prob(T(np.full(3, x))).numpy()[i])  # noqa: E731
        assert abs(integrate.quad(dens, 0, 1)[0] - 1) < 1e-4
        m = integrate.quad(lambda x: x * dens(x), 0, 1)[0]
        np.testing.assert_allclose(d.mean.numpy()[i], m, rtol=1e-4)
        np.testing.assert_allclose(d.variance.numpy()[i], integrate.quad(lambda x: (x - m) ** 2 * dens(x), 0, 1)[0],
                                   rtol=1e-3)
        np.testing.assert_allclose(d.entropy().numpy()[i],
                                   integrate.quad(lambda x: -dens(x) * np.log(dens(x)), 0, 1)[0], atol=1e-5)
        # within lims the cdf is the uniform one (Paddle's and PyTorch's approximation)
        np.testing.assert_allclose(d.cdf(T(np.full(3, 0.3))).numpy()[i], integrate.quad(dens, 0, 0.3)[0],
                                   atol=1e-3 if i == 1 else 1e-5)
    u = T(np.array([0.1, 0.5, 0.9]))
    np.testing.assert_allclose(d.cdf(d.icdf(u)).numpy(), u.numpy(), atol=1e-9)
    # Paddle 3.3.1's values (float32)
    cb = D.ContinuousBernoulli(ddg.to_tensor([0.3, 0.5]))
    v = ddg.to_tensor([0.2, 0.7])
    np.testing.assert_allclose(cb.log_prob(v).numpy(), [0.22445315, 0.0], atol=1e-6)
    np.testing.assert_allclose(cb.entropy().numpy(), [-0.02938607, 0.0], atol=1e-6)
    np.testing.assert_allclose(cb.kl_divergence(D.ContinuousBernoulli(ddg.to_tensor([0.6, 0.2]))).numpy(),
                               [0.06451914, 0.07883082], atol=1e-6)



ELEMENTWISE = {
    "Exp": (lambda: D.ExpTransform(), np.exp, np.array([-1.0, 0.5, 2.0])),
    "Affine": (lambda: D.AffineTransform(T([1.0, -2.0, 0.5]), T([2.0, -0.5, 3.0])),
               lambda x: np.array([1.0, -2.0, 0.5]) + np.array([2.0, -0.5, 3.0]) * x, np.array([-1.0, 0.5, 2.0])),
    "Power": (lambda: D.PowerTransform(T(3.0)), lambda x: x ** 3, np.array([0.5, 1.5, 2.0])),
    "Sigmoid": (lambda: D.SigmoidTransform(), lambda x: 1 / (1 + np.exp(-x)), np.array([-1.0, 0.5, 2.0])),
    "Tanh": (lambda: D.TanhTransform(), np.tanh, np.array([-1.0, 0.5, 2.0])),
    "Chain": (lambda: D.ChainTransform([D.TanhTransform(), D.AffineTransform(T(1.0), T(2.0)), D.ExpTransform()]),
              lambda x: np.exp(1 + 2 * np.tanh(x)), np.array([-1.0, 0.5, 2.0])),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_transforms(name):
    make, ref, x = ELEMENTWISE[name]
    t = make()
    y = t.forward(T(x))
    np.testing.assert_allclose(y.numpy(), ref(x), rtol=1e-12)
    np.testing.assert_allclose(t.inverse(y).numpy(), x, rtol=1e-9)
    eps = 1e-6
    num = np.log(np.abs((ref(x + eps) - ref(x - eps)) / (2 * eps)))
    np.testing.assert_allclose(t.forward_log_det_jacobian(T(x)).numpy(), num, rtol=1e-6)
    np.testing.assert_allclose(t.inverse_log_det_jacobian(y).numpy(), -num, rtol=1e-6)
    np.testing.assert_allclose(t(T(x)).numpy(), y.numpy())


def test_structured_transforms():
    x = np.array([[0.1, -0.3, 0.8], [1.2, 0.0, -0.5]])
    sb = D.StickBreakingTransform()
    y = sb.forward(T(x)).numpy()
    assert y.shape == (2, 4) and np.allclose(y.sum(-1), 1) and (y > 0).all()
    np.testing.assert_allclose(sb.inverse(T(y)).numpy(), x, rtol=1e-9, atol=1e-12)
    for i in range(2):  # log|det| of the map to the first K coordinates, by central differences
        eps, k = 1e-6, 3
        jac = np.zeros((k, k))
        for j in range(k):
            d = np.zeros(k)
            d[j] = eps
            jac[:, j] = (sb.forward(T(x[i] + d)).numpy()[:k] - sb.forward(T(x[i] - d)).numpy()[:k]) / (2 * eps)
        np.testing.assert_allclose(sb.forward_log_det_jacobian(T(x[i])).numpy(), np.log(abs(np.linalg.det(jac))),
                                   rtol=1e-6)
    assert sb.forward_shape([2, 3]) == (2, 4) and sb.inverse_shape([2, 4]) == (2, 3)
    with pytest.raises(NotImplementedError, match="non-injective"):
        D.AbsTransform().forward_log_det_jacobian(T(x))
    neg, pos = D.AbsTransform().inverse(T([1.0, 2.0]))
    assert neg.numpy().tolist() == [-1.0, -2.0] and pos.numpy().tolist() == [1.0, 2.0]
    sm = D.SoftmaxTransform()
    np.testing.assert_allclose(sm.forward(T(x)).numpy().sum(-1), 1.0)
    r = D.ReshapeTransform((2, 3), (3, 2))
    ones = ddg.ones([4, 2, 3])
    assert r.forward(ones).shape == [4, 3, 2] and r.forward_log_det_jacobian(ones).shape == [4]
    with pytest.raises(ValueError, match="different sizes"):
        D.ReshapeTransform((2, 3), (4,))
    it = D.IndependentTransform(D.ExpTransform(), 1)
    np.testing.assert_allclose(it.forward_log_det_jacobian(T(x)).numpy(), x.sum(-1))
    st = D.StackTransform([D.ExpTransform(), D.AffineTransform(T(1.0), T(2.0)), D.TanhTransform()], axis=1)
    want = np.stack([np.exp(x[:, 0]), 1 + 2 * x[:, 1], np.tanh(x[:, 2])], 1)
    np.testing.assert_allclose(st.forward(T(x)).numpy(), want)
    np.testing.assert_allclose(st.forward_log_det_jacobian(T(x)).numpy()[:, :2],
                               np.stack([x[:, 0], np.full(2, np.log(2.0))], 1))


def test_transformed_distribution():
    loc, scale = np.array([0.2, -0.4]), np.array([0.7, 1.3])
    lo, sc = _leafs([loc, scale])
    td = D.TransformedDistribution(D.Normal(lo, sc), [D.ExpTransform()])
    v = np.array([0.5, 2.0])
    np.testing.assert_allclose(td.log_prob(T(v)).numpy(), stats.lognorm(scale, scale=np.exp(loc)).logpdf(v), rtol=1e-10)
    assert td.batch_shape == (2,) and td.event_shape == ()
    ddg.seed(0)
    x = td.rsample([4])
    x.sum().backward()
    assert lo.grad is not None and sc.grad is not None
    assert type(D.ExpTransform()(D.Normal(0.0, 1.0))).__name__ == "TransformedDistribution"
    base = D.Normal(T(np.zeros((2, 3))), T(np.ones((2, 3))))
    simplex = D.TransformedDistribution(base, [D.StickBreakingTransform()])
    assert simplex.batch_shape == (2,) and simplex.event_shape == (4,)
    y = simplex.sample([5])
    assert y.shape == [5, 2, 4]
    xs = D.StickBreakingTransform().inverse(y)
    want = base.log_prob(xs).sum(-1) - D.StickBreakingTransform().forward_log_det_jacobian(xs)
    np.testing.assert_allclose(simplex.log_prob(y).numpy(), want.numpy(), rtol=1e-9)


@pytest.mark.parametrize("method", ["onion", "cvine"])
def test_lkj_cholesky(method):
    from scipy import integrate
    eta, d = 2.5, 3
    ddg.seed(6)
    L = D.LKJCholesky(d, T(eta), sample_method=method).sample([3000]).numpy()
    assert L.shape == (3000, d, d) and np.allclose(np.triu(L, 1), 0)
    corr = L @ np.swapaxes(L, -1, -2)
    np.testing.assert_allclose(np.diagonal(corr, axis1=-2, axis2=-1), 1.0, rtol=1e-12)
    beta = eta - 1 + d / 2  # each off-diagonal correlation: (r + 1) / 2 ~ Beta(beta, beta)
    for i, j in [(1, 0), (2, 0), (2, 1)]:
        assert stats.kstest((corr[:, i, j] + 1) / 2, stats.beta(beta, beta).cdf).pvalue > 1e-4, (method, i, j)
    # for dim 2 the density of the one free element integrates to 1
    two = D.LKJCholesky(2, T(1.7))
    dens = lambda r: float(np.exp(two.log_prob(T([[1.0, 0.0], [r, np.sqrt(1 - r * r)]])).numpy()))  # noqa: E731
    assert abs(integrate.quad(dens, -1, 1)[0] - 1) < 1e-6
    Lp = np.array([[1, 0, 0], [0.6, 0.8, 0], [-0.3, 0.4, np.sqrt(0.75)]], dtype="float32")
    for c, want in ((1.0, -1.8194562), (2.5, -1.6170748)):  # Paddle 3.3.1's values
        np.testing.assert_allclose(D.LKJCholesky(3, c).log_prob(ddg.to_tensor(Lp)).numpy(), want, rtol=1e-6)
    with pytest.raises(ValueError, match="sample_method"):
        D.LKJCholesky(3, 1.0, sample_method="x")
