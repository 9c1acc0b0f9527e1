"""Higher-order gradients: ``ddg.grad``/``backward`` with ``create_graph=True``, each op's
``backward_graph`` against float64 central differences (``gradgradcheck``: the second
derivative of the create_graph pass vs finite differences of the ordinary backward),
Hessian-vector products, WGAN-GP gradient penalties, ``ddg.autograd.jacobian``/``hessian``
against values printed by Paddle 3.3.1, and the errors for what is not supported."""
import numpy as np
import pytest

import ddg
import ddg.nn as nn
import ddg.nn.functional as F
from ddg.autograd import gradgradcheck
from ddg.tensor import backend

_rng = np.random.default_rng(0)


def T(*shape, pos=False, scale=1.0):
    a = _rng.standard_normal(shape) * scale
    if pos:
        a = np.abs(a) + 0.5
    return ddg.to_tensor(a, stop_gradient=False)


def _i(*v):
    return ddg.to_tensor(np.array(v, dtype=np.int64))


def _written(x, v):
    y = x * x
    y[1:, 0] = v * v
    y[[0, 2]] = ddg.tanh(v[0])       # (duplicate indices would make the write order-dependent)
    y[y > 1.5] = v[1] ** 3
    return y


# name -> (function, inputs factory)
CASES = {
    "tanh": (lambda x: ddg.tanh(x), lambda: [T(3, 4)]),
    "sigmoid": (lambda x: F.sigmoid(x), lambda: [T(3, 4)]),
    "exp": (lambda x: ddg.exp(x), lambda: [T(3, 4)]),
    "log": (lambda x: ddg.log(x), lambda: [T(3, 4, pos=True)]),
    "pow": (lambda x, y: x ** y, lambda: [T(3, 4, pos=True), T(3, 4)]),
    "pow_scalar": (lambda x: x ** 3.0 + 2.0 ** x + 1.5 / (x * x + 1), lambda: [T(5)]),
    "mul_div_broadcast": (lambda x, y: x * y / (y * y + 1) - y, lambda: [T(3, 4), T(4)]),
    "unary_math": (lambda x: ddg.sqrt(x) + ddg.rsqrt(x) + ddg.reciprocal(x) + ddg.log1p(x) + ddg.log2(x)
                   + ddg.expm1(x * 0.1) + ddg.square(x), lambda: [T(4, pos=True)]),
    "trig": (lambda x: ddg.sin(x) * ddg.cos(x) + ddg.erf(x) + ddg.asin(x * 0.3) + ddg.atan(x) + ddg.sinh(x)
             + ddg.tan(x * 0.3) + ddg.abs(x) * x, lambda: [T(5)]),
    "activations": (lambda x: F.relu(x) ** 2 + F.gelu(x) + F.silu(x) + F.softplus(x) + F.elu(x)
                    + F.leaky_relu(x) * x + F.hardtanh(x) * x + ddg.clip(x, -0.5, 0.5) * x, lambda: [T(6)]),
    "max_min_where": (lambda x, y: ddg.maximum(x * x, y) + ddg.minimum(x, y * y) + ddg.where(x > 0, x * x, x ** 3),
                      lambda: [T(6), T(6)]),
    "softmax": (lambda x: F.softmax(x, axis=-1), lambda: [T(3, 4)]),
    "log_softmax": (lambda x: F.log_softmax(x, axis=0), lambda: [T(3, 4)]),
    "matmul": (lambda x, y: ddg.tanh(ddg.matmul(x, y)), lambda: [T(3, 4), T(4, 2)]),
    "matmul_transposed": (lambda x, y: ddg.tanh(ddg.matmul(x, y, transpose_x=True, transpose_y=True)),
                          lambda: [T(4, 3), T(2, 4)]),
    "matmul_batch_matrix_ty": (lambda x, y: ddg.tanh(ddg.matmul(x, y, transpose_y=True)), lambda: [T(2, 3, 4), T(2, 4)]),
    "matmul_batch_vector": (lambda x, y: ddg.tanh(ddg.matmul(x, y)), lambda: [T(2, 3, 4), T(4)]),
    "matmul_vector_batch": (lambda x, y: ddg.tanh(ddg.matmul(x, y)), lambda: [T(4), T(2, 4, 3)]),
    "einsum_inverse": (lambda a, b: ddg.tanh(ddg.einsum("ij,jk->ik", a, b))
                       + ddg.inverse(b[:, :3] + 3 * ddg.eye(3, dtype="float64")).sum(),
                       lambda: [T(2, 3), T(3, 4)]),
    "det_slogdet_solve": (lambda a, b: ddg.linalg.det(a) + ddg.linalg.slogdet(a)[1] + ddg.linalg.solve(a, b).sum()
                          + ddg.linalg.solve(a, b[:, 0]).sum(),
                          lambda: [ddg.to_tensor(_rng.standard_normal((3, 3)) + 3 * np.eye(3), stop_gradient=False),
                                   T(3, 2)]),
    "sum_mean_prod": (lambda x: (x * x).sum(axis=1) + (x ** 3).mean(axis=0).sum() + ddg.prod(x, axis=1),
                      lambda: [T(3, 4)]),
    "max_logsumexp_cumsum": (lambda x: (x * x).max(axis=1) + ddg.logsumexp(x * x, axis=1)
                             + ddg.cumsum(x * x, axis=1)[:, -1], lambda: [T(3, 4)]),
    "movement": (lambda x: ddg.concat([x.reshape([4, 3]).transpose([1, 0]) ** 2,
                                       ddg.flip(x, [0])[:, 1:] ** 3], axis=1).sum(axis=0), lambda: [T(3, 4)]),
    "stack_split_expand": (lambda x: ddg.stack([x, x * x], axis=1).split(2, axis=0)[0] ** 2
                           + ddg.unsqueeze(x[0] ** 2, 0).expand([2, 3]).unsqueeze(1), lambda: [T(4, 3)]),
    "gather_tile": (lambda x: (ddg.index_select(x * x, _i(0, 2, 2), axis=1) * x[:, 0:1] ** 2).sum(axis=1)
                    + (ddg.tile(x * x, [2, 1])[1:4] * ddg.gather(x * x, _i(2, 0, 1)) * x[_i(1, 1, 0)]).sum(axis=1),
                    lambda: [T(3, 4)]),
    "setitem": (lambda x, v: _written(x, v) ** 2, lambda: [T(3, 2), T(2)]),
    "linear": (lambda x, w, b: F.linear(ddg.tanh(x), w, b) ** 2, lambda: [T(2, 3), T(3, 4), T(4)]),
    "cross_entropy": (lambda x: F.cross_entropy(x * x, _i(1, 0, 3).to(x.place)), lambda: [T(3, 4)]),
    "cross_entropy_weighted": (lambda x: F.cross_entropy(x * x, _i(1, 0, 3), reduction="none",
                                                         weight=ddg.to_tensor([1., 2., .5, 1.], dtype="float64")),
                               lambda: [T(3, 4)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x * x, [4], w, b), lambda: [T(3, 4), T(4), T(4)]),
    "batch_norm_train": (lambda x, w, b: F.batch_norm(x * x, ddg.zeros_like(w), ddg.ones_like(w),
                                                      w, b, training=True), lambda: [T(4, 3, 2, 2), T(3), T(3)]),
    "group_instance_norm": (lambda x: F.group_norm(x * x, 2) if hasattr(F, "group_norm") else
                            F.instance_norm(x * x), lambda: [T(2, 4, 2, 2)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=1, padding=1) ** 2,
               lambda: [T(2, 2, 4, 4), T(3, 2, 3, 3), T(3)]),
    "conv2d_strided_grouped": (lambda x, w: ddg.tanh(F.conv2d(x, w, stride=2, padding=1, groups=2)),
                               lambda: [T(1, 4, 5, 5), T(4, 2, 3, 3)]),
    "conv2d_transpose": (lambda x, w: ddg.tanh(F.conv2d_transpose(x, w, stride=2, padding=1)),
                         lambda: [T(1, 2, 3, 3), T(2, 3, 3, 3)]),
    "max_pool": (lambda x: F.max_pool2d(x * x, 2, 2) ** 2, lambda: [T(1, 2, 4, 4)]),
    "avg_pool": (lambda x: F.avg_pool2d(x * x, 3, 2, padding=1) ** 2, lambda: [T(1, 2, 5, 5)]),
    "dropout_unfold": (lambda x: F.dropout(x * x, 0.0) ** 2 + F.unfold(x, 2).sum() ** 2, lambda: [T(1, 1, 3, 3)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_derivative_matches_finite_differences(name):
    fn, make = CASES[name]
    assert gradgradcheck(fn, make(), atol=1e-5, rtol=1e-4)


def test_gradgradcheck_catches_a_wrong_backward_graph(monkeypatch):
    from ddg.autograd.higher import live_output
    from ddg.autograd.ops import elementwise as E
    monkeypatch.setattr(E.Tanh, "backward_graph", lambda self, g: g * (1 - live_output(self, self.out)))
    with pytest.raises(AssertionError, match="create_graph=True"):
        gradgradcheck(lambda x: ddg.tanh(x), [T(3)])


def test_second_derivatives_of_tanh_sigmoid_exp_log_pow_in_closed_form():
    x = T(5, pos=True)
    a = x.numpy()
    t, s = np.tanh(a), 1 / (1 + np.exp(-a))
    for fn, d2 in [(ddg.tanh, -2 * t * (1 - t * t)), (F.sigmoid, s * (1 - s) * (1 - 2 * s)),
                   (ddg.exp, np.exp(a)), (ddg.log, -1 / a ** 2), (lambda v: v ** 2.5, 2.5 * 1.5 * a ** 0.5)]:
        (g,) = ddg.grad(fn(x).sum(), x, create_graph=True)
        assert not g.stop_gradient
        (h,) = ddg.grad(g.sum(), x)
        np.testing.assert_allclose(h.numpy(), d2, rtol=1e-10)


def test_third_derivative_and_the_conv_family_closes():
    x = T(4)
    (g,) = ddg.grad((x ** 4).sum(), x, create_graph=True)
    (h,) = ddg.grad(g.sum(), x, create_graph=True)
    (k,) = ddg.grad(h.sum(), x)
    np.testing.assert_allclose(k.numpy(), 24 * x.numpy(), rtol=1e-12)
    # third order through conv2d: its filter-gradient op and conv2d_transpose differentiate again
    xc, w = T(1, 2, 4, 4), T(2, 2, 3, 3)

    def second(x, w):
        gx, gw = ddg.grad((F.conv2d(x, w, padding=1) ** 3).sum(), [x, w], create_graph=True)
        return (gx * gx).sum() + (gw * gw).sum()
    assert gradgradcheck(second, [xc, w], atol=1e-4)


def _mlp(dtype="float64"):
    ddg.seed(1)
    prev = ddg.get_default_dtype()
    ddg.set_default_dtype(dtype)
    try:
        return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 4), nn.Sigmoid(), nn.Linear(4, 1))
    finally:
        ddg.set_default_dtype(prev)


def _fd_along(params, fn, eps=1e-6):
    """Central differences of ``fn()`` (a list of arrays) along each parameter's ``.v``."""
    def shift(sign):
        with ddg.no_grad():
            for p in params:
                p._data += sign * eps * p.v
    shift(1)
    hi = fn()
    shift(-2)
    lo = fn()
    shift(1)
    return [(a - b) / (2 * eps) for a, b in zip(hi, lo)]


def test_hessian_vector_product_of_an_mlp():
    model = _mlp()
    params = model.parameters()
    x, y = ddg.to_tensor(_rng.standard_normal((6, 3))), ddg.to_tensor(_rng.standard_normal((6, 1)))
    for p in params:
        p.v = _rng.standard_normal(p.shape)

    def loss():
        return F.mse_loss(model(x), y)
    gs = ddg.grad(loss(), params, create_graph=True)
    hv = ddg.grad(sum((g * ddg.to_tensor(p.v)).sum() for g, p in zip(gs, params)), params)
    numeric = _fd_along(params, lambda: [g.numpy() for g in ddg.grad(loss(), params)])
    for a, n in zip(hv, numeric):
        np.testing.assert_allclose(a.numpy(), n, rtol=1e-5, atol=1e-7)


def _gradient_penalty(critic, real, fake, alpha, create_graph=True):
    """WGAN-GP: mean over samples of (||d critic / d x_hat|| - 1)^2 at x_hat between real and fake."""
    x_hat = alpha * real + (1 - alpha) * fake
    x_hat.stop_gradient = False
    (g,) = ddg.grad(critic(x_hat).sum(), x_hat, create_graph=create_graph)
    norm = ((g * g).reshape([g.shape[0], -1]).sum(axis=1) + 1e-12).sqrt()
    return ((norm - 1) ** 2).mean()


def _check_penalty_gradient(critic, real, fake, alpha):
    params = critic.parameters()
    gp = _gradient_penalty(critic, real, fake, alpha)
    analytic = ddg.grad(gp, params, allow_unused=True)   # the last bias does not move d critic / dx
    eps = 1e-6
    for p, a in zip(params, analytic):
        num = np.zeros(p.shape)
        for i in np.ndindex(*p.shape):
            old = p._data[i]
            p._data[i] = old + eps
            hi = float(_gradient_penalty(critic, real, fake, alpha, False))
            p._data[i] = old - eps
            lo = float(_gradient_penalty(critic, real, fake, alpha, False))
            p._data[i] = old
            num[i] = (hi - lo) / (2 * eps)
        np.testing.assert_allclose(np.zeros(p.shape) if a is None else a.numpy(), num, rtol=1e-4, atol=1e-7,
                                   err_msg=p.name)


def test_wgan_gp_penalty_gradient_mlp_critic():
    critic = _mlp()
    real, fake = ddg.to_tensor(_rng.standard_normal((4, 3))), ddg.to_tensor(_rng.standard_normal((4, 3)))
    alpha = ddg.to_tensor(_rng.uniform(size=(4, 1)))
    _check_penalty_gradient(critic, real, fake, alpha)


def test_wgan_gp_penalty_gradient_conv_critic():
    prev = ddg.get_default_dtype()
    ddg.set_default_dtype("float64")
    try:
        ddg.seed(2)
        critic = nn.Sequential(nn.Conv2D(1, 2, 3, padding=1), nn.LeakyReLU(0.2), nn.AvgPool2D(2),
                               nn.Conv2D(2, 2, 3, padding=1), nn.LayerNorm([2, 2, 2]), nn.Tanh(),
                               nn.Flatten(), nn.Linear(8, 1))
    finally:
        ddg.set_default_dtype(prev)
    real, fake = ddg.to_tensor(_rng.standard_normal((2, 1, 4, 4))), ddg.to_tensor(_rng.standard_normal((2, 1, 4, 4)))
    alpha = ddg.to_tensor(_rng.uniform(size=(2, 1, 1, 1)))
    _check_penalty_gradient(critic, real, fake, alpha)


def test_wgan_gp_training_step_float32():
    """The usual loop: penalty + critic loss, backward, optimizer step (float32, no errors, finite)."""
    critic = _mlp("float32")
    opt = ddg.optimizer.Adam(learning_rate=1e-3, parameters=critic.parameters())
    real, fake = ddg.randn([8, 3]), ddg.randn([8, 3])
    for _ in range(2):
        alpha = ddg.rand([8, 1])
        loss = critic(fake).mean() - critic(real).mean() + 10 * _gradient_penalty(critic, real, fake, alpha)
        loss.backward()
        opt.step()
        opt.clear_grad()
        assert np.isfinite(float(loss))
    assert all(p.grad is None or p.grad.dtype == ddg.float32 for p in critic.parameters())


def test_backward_create_graph_keeps_grad_on_the_graph():
    x = T(3)
    y = (x ** 3).sum()
    y.backward(create_graph=True)
    g = x.grad
    assert not g.stop_gradient
    np.testing.assert_allclose(g.numpy(), 3 * x.numpy() ** 2)
    (h,) = ddg.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * x.numpy())


def test_grad_outputs_on_the_graph_and_double_backward_trick():
    # the vector-Jacobian product's gradient with respect to v is J v^T's Jacobian: J^T u -> J u
    x = T(3)
    W = ddg.to_tensor(_rng.standard_normal((2, 3)))
    y = ddg.tanh(ddg.matmul(W, x))
    v = ddg.zeros([2], dtype="float64")
    v.stop_gradient = False
    (vjp,) = ddg.grad(y, x, grad_outputs=v, create_graph=True)
    u = ddg.to_tensor(_rng.standard_normal(3))
    (jvp,) = ddg.grad(vjp, v, grad_outputs=u)
    jac = (1 - np.tanh(W.numpy() @ x.numpy()) ** 2)[:, None] * W.numpy()
    np.testing.assert_allclose(jvp.numpy(), jac @ u.numpy(), rtol=1e-12)


def test_no_grad_vars_stop_the_gradient_through_them():
    x = T(2)
    h = x * x
    y = (h * 3 + x).sum()
    (g,) = ddg.grad(y, x, no_grad_vars=[h], retain_graph=True)
    np.testing.assert_allclose(g.numpy(), [1.0, 1.0])            # only the direct path
    (g,) = ddg.grad(y, x, no_grad_vars=h, create_graph=True)
    np.testing.assert_allclose(g.numpy(), [1.0, 1.0])
    (g,) = ddg.grad(y, x)                                        # the hook is gone afterwards
    np.testing.assert_allclose(g.numpy(), 6 * x.numpy() + 1)


def test_retain_graph_semantics():
    x = T(3)
    y = ddg.tanh(x).sum()
    ddg.grad(y, x)                                    # retain_graph defaults to create_graph (False)
    with pytest.raises(RuntimeError, match="second time"):
        ddg.grad(y, x)
    y = ddg.tanh(x).sum()
    a = ddg.grad(y, x, retain_graph=True)[0]
    b = ddg.grad(y, x)[0]
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    y = ddg.tanh(x).sum()
    (g,) = ddg.grad(y, x, create_graph=True)          # retains: both the first and the new graph work
    ddg.grad(g.sum(), x, retain_graph=True)
    np.testing.assert_array_equal(ddg.grad(y, x)[0].numpy(), g.numpy())


def test_cross_entropy_backward_twice_with_retain_graph():
    x = T(3, 4)
    loss = F.cross_entropy(x * 1.0, _i(1, 0, 3))
    a = ddg.grad(loss, x, retain_graph=True)[0].numpy()
    b = ddg.grad(loss, x)[0].numpy()
    np.testing.assert_allclose(a, b, rtol=1e-12)


def test_unsupported_op_raises_naming_it():
    x = T(4)
    with pytest.raises(NotImplementedError, match="op CumProd .*create_graph"):
        ddg.grad(ddg.cumprod(x * x, dim=0).sum(), x, create_graph=True)
    # the ordinary backward of the same op still works
    assert ddg.grad(ddg.cumprod(x * x, dim=0).sum(), x)[0].shape == [4]
    with pytest.raises(NotImplementedError, match="op Prod .*zeros"):
        ddg.grad(ddg.prod(x * ddg.to_tensor([0., 1., 1., 1.], dtype="float64")), x, create_graph=True)


def test_create_graph_under_to_static_raises():
    @ddg.jit.to_static
    def f(x):
        (g,) = ddg.grad((x * x).sum(), x, create_graph=True)
        return g

    with pytest.raises(NotImplementedError, match="to_static"):
        f(T(3))


def test_create_graph_through_a_to_static_replay_raises():
    @ddg.jit.to_static
    def f(x):
        return ddg.tanh(x) * 2

    x = T(3)
    for _ in range(3):   # recorded, checked, then replayed as one node
        y = f(x)
    with pytest.raises(NotImplementedError, match="to_static program's replay"):
        ddg.grad(y.sum(), x, create_graph=True)
    np.testing.assert_allclose(ddg.grad(f(x).sum(), x)[0].numpy(), 2 * (1 - np.tanh(x.numpy()) ** 2))


def test_create_graph_off_records_nothing_new():
    x = T(3)
    (g,) = ddg.grad(ddg.tanh(x).sum(), x)
    assert g.stop_gradient and g._node is None


# -- jacobian / hessian, values printed by Paddle 3.3.1 for the same functions ---------------
_X = [0.5, -1.0, 2.0]
_XB = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
_W = [[0.3, -0.2, 0.1], [0.4, 0.5, -0.6]]
PADDLE_J1 = [[0.8377859943757723, 0.2756763557332106, 0.6129421389187476],
             [-0.7967242702906773, -0.7696182744521299, -1.06778422867615]]
PADDLE_H1 = [[1.8451005586572466, -0.006856058306224721, -0.13770761225720413],
             [-0.006856058306224721, -0.12012436267015622, -0.030726721576607836],
             [-0.13770761225720413, -0.030726721576607836, 2.450127168793017]]
PADDLE_JB = [[[0.2475722274217511, -0.00342802915311236, -0.06885380612860206],
              [0.006856058306224721, 0.0015297933878548945, 0.030726721576607836],
              [-0.27541522451440825, -0.061453443153215666, 1.1224657022568998]],
             [[1.0218660671877742, -0.2218219799961742, -0.08160374604053543],
              [-0.03697032999936236, 0.24670357811074292, -0.0038966441137290235],
              [0.040801873020267714, 0.011689932341187072, 0.023231249489828753]]]
PADDLE_HB = [[[1.35402814580349, 0.4131182833078014, -0.0670567874040397],
              [0.4131182833078014, 0.35743278410744483, -0.030726721576607833],
              [-0.0670567874040397, -0.030726721576607833, 0.10032499012025553]],
             [[0.07299819927378179, 0.7921335288089286, 0.5421833109209745],
              [0.7921335288089285, -0.5272136417754834, -0.015586576454916094],
              [0.5421833109209745, -0.015586576454916092, 1.2067516272323051]]]
PADDLE_H2_XX = [[-0.3561623708779577, 0.0, 0.0], [0.0, 0.31345300414012, 0.0], [0.0, 0.0, -0.06674715683928535]]
PADDLE_H2_XS = [1.1010268261522982, 0.5879640782596366, 0.09891115479443019]


def _x(v):
    return ddg.to_tensor(v, dtype="float64", stop_gradient=False)


def test_jacobian_matches_paddle():
    x = _x(_X)
    W = ddg.to_tensor(_W, dtype="float64")
    J = ddg.autograd.jacobian(ddg.tanh(ddg.matmul(W, x)) * x.sum(), x)
    assert isinstance(J, ddg.autograd.Jacobian) and J.shape == [2, 3]
    np.testing.assert_allclose(J[:].numpy(), PADDLE_J1, rtol=1e-12)
    np.testing.assert_allclose(J[1].numpy(), PADDLE_J1[1], rtol=1e-12)
    np.testing.assert_allclose(J[:, 2].numpy(), np.array(PADDLE_J1)[:, 2], rtol=1e-12)
    np.testing.assert_allclose(float(J[-1, 0]), PADDLE_J1[1][0], rtol=1e-12)
    assert not J[:].stop_gradient                     # create_graph: differentiable again
    xb = _x(_XB)
    fb = ddg.exp(xb) / ddg.exp(xb).sum(-1, keepdim=True) * xb
    JB = ddg.autograd.jacobian(fb, xb, batch_axis=0)
    assert JB.shape == [2, 3, 3]
    np.testing.assert_allclose(JB[:].numpy(), PADDLE_JB, rtol=1e-12)
    np.testing.assert_allclose(JB[1].numpy(), PADDLE_JB[1], rtol=1e-12)
    np.testing.assert_allclose(JB[:, 1].numpy(), np.array(PADDLE_JB)[:, 1], rtol=1e-12)


def test_hessian_matches_paddle():
    x = _x(_X)
    f = (F.sigmoid(x) * x * x).sum() + ddg.log(ddg.exp(x).sum())
    H = ddg.autograd.hessian(f, x)
    assert isinstance(H, ddg.autograd.Hessian) and H.shape == [3, 3]
    np.testing.assert_allclose(H[:].numpy(), PADDLE_H1, rtol=1e-12)
    xb = _x(_XB)
    HB = ddg.autograd.hessian(ddg.log(ddg.exp(xb).sum(-1)) + ddg.tanh(xb).sum(-1) * xb[:, 0], xb, batch_axis=0)
    assert HB.shape == [2, 3, 3]
    np.testing.assert_allclose(HB[:].numpy(), PADDLE_HB, rtol=1e-12)
    x, s = _x(_X), _x(0.7)
    H2 = ddg.autograd.hessian((ddg.tanh(x) * s).sum() * s, [x, s])
    assert isinstance(H2, tuple) and isinstance(H2[0], tuple) and H2[0][1].shape == [3] and H2[1][1].shape == []
    np.testing.assert_allclose(H2[0][0][:].numpy(), PADDLE_H2_XX, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(H2[0][1][:].numpy(), PADDLE_H2_XS, rtol=1e-12)
    np.testing.assert_allclose(H2[1][0][:].numpy(), PADDLE_H2_XS, rtol=1e-12)
    np.testing.assert_allclose(float(H2[1][1][()]), 2 * float(ddg.tanh(x).sum()), rtol=1e-12)
    with pytest.raises(IndexError, match="0-D"):          # as Paddle: a 0-D Jacobian has no rows to index
        H2[1][1][:]


def test_jacobian_shapes_types_and_errors_as_paddle():
    x, s = _x(_X), _x(2.0)
    assert ddg.autograd.jacobian(s * s, s).shape == []
    assert ddg.autograd.jacobian(x * s, s).shape == [3]
    assert ddg.autograd.jacobian(x.sum(), x).shape == [3]
    assert ddg.autograd.jacobian(x.sum() * 2, x)[0].shape == []
    j = ddg.autograd.jacobian((x * 2, x.sum()), (x,))
    assert isinstance(j, tuple) and isinstance(j[0], tuple) and isinstance(j[1][0], ddg.autograd.Jacobian)
    assert len(ddg.autograd.jacobian(x * 2, (x, x))) == 2 and len(ddg.autograd.jacobian((x * 2,), x)) == 1
    np.testing.assert_array_equal(ddg.autograd.jacobian(x[:2] * 3, x)[:].numpy(), [[3, 0, 0], [0, 3, 0]])
    const = ddg.to_tensor([1., 2.], dtype="float64")
    np.testing.assert_array_equal(ddg.autograd.jacobian(const * 3, x)[:].numpy(), np.zeros((2, 3)))
    xb = _x(_XB)
    with pytest.raises(ValueError, match="ys.ndim should be 0 or 1 when is_batched=False but got 2"):
        ddg.autograd.jacobian(xb * 2, x)
    with pytest.raises(ValueError, match="xs.ndim should be 0 or 1"):
        ddg.autograd.jacobian(x * 2, xb)
    with pytest.raises(ValueError, match="batch_axis should be None or 0, but got 1"):
        ddg.autograd.jacobian(x * x, x, batch_axis=1)
    with pytest.raises(ValueError, match=r"Only support ys.numel\(\)\(3\)==1 when batch_axis is None"):
        ddg.autograd.hessian(x * x, x)
    with pytest.raises(ValueError, match="when batch_axis is int"):
        ddg.autograd.hessian(xb * xb, xb, batch_axis=0)
    with pytest.raises(IndexError):
        ddg.autograd.jacobian(x * 2, x)[..., 0]
    # lazily evaluated: a row is computed once, when first indexed
    J = ddg.autograd.jacobian(x * x, x)
    assert J._rows == {}
    J[1]
    assert list(J._rows) == [1]


def test_jacobian_of_a_jacobian_is_differentiable():
    x = _x(_X)
    J = ddg.autograd.jacobian(x * x * x, x)[:]           # diag(3 x^2)
    (g,) = ddg.grad(J.sum(), x)
    np.testing.assert_allclose(g.numpy(), 6 * x.numpy())


# -- the same on the GPU (a real one, or simcupy in tests/run_all.sh) -------------------------
gpu = pytest.mark.skipif(not backend.cupy_available(), reason="needs cupy (or simcupy) with a GPU")


@gpu
def test_gpu_second_derivatives_match_cpu():
    for name in ("tanh", "softmax", "conv2d", "batch_norm_train", "max_pool", "cross_entropy", "linear"):
        fn, make = CASES[name]
        xs = make()
        res = []
        for place in ("cpu", "gpu"):
            ts = [ddg.to_tensor(x.numpy(), place=place, stop_gradient=False) for x in xs]
            gs = ddg.grad(fn(*ts).sum(), ts, create_graph=True, allow_unused=True)
            s = sum((g * g).sum() for g in gs if g is not None)
            res.append([g.numpy() for g in ddg.grad(s, ts, allow_unused=True) if g is not None])
        for a, b in zip(*res):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8, err_msg=name)


@gpu
def test_gpu_hessian():
    x = ddg.to_tensor(_X, dtype="float64", place="gpu", stop_gradient=False)
    f = (F.sigmoid(x) * x * x).sum() + ddg.log(ddg.exp(x).sum())
    np.testing.assert_allclose(ddg.autograd.hessian(f, x)[:].numpy(), PADDLE_H1, rtol=1e-10)
