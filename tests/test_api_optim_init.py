"""LBFGS, initializer.Bilinear and set_global_initializer (added for API coverage): the
values Paddle 3.3.1 gives for the same programs."""
import numpy as np
import pytest

import ddg
import ddg.nn as nn
from ddg.nn import initializer as I

_rng = np.random.default_rng(0)
_A = _rng.standard_normal((6, 4))
_B = _rng.standard_normal(6)
_W0 = _rng.standard_normal(4)

# the parameter after each of three LBFGS steps (max_iter=7, history_size=3), as Paddle 3.3.1 printed it
PADDLE = {
    None: [[0.270259084553366, 0.3200978131603385, 0.4480690783954243, -0.3568364207164819],
           [0.2532583071502903, 0.3250751635315042, 0.42971991217938377, -0.3471980316457473],
           [0.253248665030177, 0.32507687199664276, 0.4297188550655594, -0.34719133584050266]],
    "strong_wolfe": [[0.25819107427737353, 0.32897367391185933, 0.4277354332367994, -0.3542835232168148],
                     [0.2532433160661107, 0.32508252637820334, 0.42972532789426426, -0.3471921216783054],
                     [0.2532433160661107, 0.32508252637820334, 0.42972532789426426, -0.3471921216783054]],
}


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_follows_paddle_step_by_step(line_search):
    w = ddg.create_parameter([4], "float64")
    w.set_value(_W0)
    a, b = ddg.to_tensor(_A), ddg.to_tensor(_B)
    opt = ddg.optimizer.LBFGS(learning_rate=1.0, max_iter=7, history_size=3, line_search_fn=line_search,
                              parameters=[w])
    evals = []

    def closure():
        opt.clear_grad()
        r = ddg.matmul(a, w) - b
        loss = (r * r).sum() + 0.1 * (w ** 4).sum()
        loss.backward()
        evals.append(loss.item())
        return loss
    got = []
    for _ in range(3):
        first = opt.step(closure)
        got.append(w.numpy().copy())
    np.testing.assert_allclose(got, PADDLE[line_search], rtol=1e-10, atol=1e-12)
    assert first.item() == evals[-1] or first.item() in evals      # step returns the closure's first loss
    # the minimum: the gradient vanishes there
    wv = w.numpy()
    grad = 2 * _A.T @ (_A @ wv - _B) + 0.4 * wv ** 3
    assert np.abs(grad).max() < 1e-4


def test_lbfgs_trains_a_layer_and_checks_its_arguments():
    ddg.seed(0)
    x = ddg.randn([32, 3])
    y = x @ ddg.to_tensor([[1.0], [-2.0], [0.5]]) + 0.3
    lin = nn.Linear(3, 1)
    opt = ddg.optimizer.LBFGS(parameters=lin.parameters(), line_search_fn="strong_wolfe")

    def closure():
        opt.clear_grad()
        loss = ((lin(x) - y) ** 2).mean()
        loss.backward()
        return loss
    for _ in range(3):
        opt.step(closure)
    np.testing.assert_allclose(lin.weight.numpy().ravel(), [1.0, -2.0, 0.5], atol=1e-4)
    np.testing.assert_allclose(lin.bias.numpy(), [0.3], atol=1e-4)
    with pytest.raises(ValueError, match="closure"):
        opt.step()
    with pytest.raises(ValueError, match="line_search_fn"):
        ddg.optimizer.LBFGS(parameters=lin.parameters(), line_search_fn="armijo")


def test_bilinear_initializer_gives_paddles_values():
    w = ddg.create_parameter([1, 1, 3, 3], "float32", default_initializer=I.Bilinear())
    np.testing.assert_allclose(w.numpy()[0, 0], [[0.0625, 0.3125, 0.4375], [0.1875, 0.6875, 0.6875],
                                                 [0.1875, 0.4375, 0.3125]])
    with pytest.raises(ValueError, match="Bilinear.*4-D"):
        ddg.create_parameter([3, 3], "float32", default_initializer=I.Bilinear())


def test_global_initializer_ranks_below_param_attr():
    try:
        I.set_global_initializer(I.Constant(2.0), I.Constant(3.0))
        lin = nn.Linear(2, 3)
        assert (lin.weight.numpy() == 2).all() and (lin.bias.numpy() == 3).all()
        conv = nn.Conv2D(1, 1, 2)        # the layer's own default initializer loses too
        assert (conv.weight.numpy() == 2).all()
        lin = nn.Linear(2, 3, weight_attr=ddg.ParamAttr(initializer=I.Constant(5.0)))
        assert (lin.weight.numpy() == 5).all()
        with pytest.raises(TypeError, match="set_global_initializer"):
            I.set_global_initializer("normal")
    finally:
        I.set_global_initializer(None, None)
    assert not (nn.Linear(2, 3).weight.numpy() == 2).all()


def test_batch_norm_statistics_are_parameters_optimizers_skip():
    # Paddle 3.3.1: BatchNorm2D(3).named_parameters() gives weight, bias (trainable) and _mean,
    # _variance (stop_gradient=True), named batch_norm2d_N.w_0, .b_0, .w_1, .w_2; no buffers
    bn = nn.BatchNorm2D(3)
    named = list(bn.named_parameters())
    assert [n for n, _ in named] == ["weight", "bias", "_mean", "_variance"]
    assert [p.stop_gradient for _, p in named] == [False, False, True, True]
    assert [p.name.split(".")[1] for _, p in named] == ["w_0", "b_0", "w_1", "w_2"]
    assert list(bn.named_buffers()) == [] and list(bn.state_dict()) == ["weight", "bias", "_mean", "_variance"]
    model = nn.Sequential(nn.Conv2D(1, 3, 3), bn)
    opt = ddg.optimizer.Adam(learning_rate=0.1, parameters=model.parameters())
    model(ddg.randn([4, 1, 5, 5])).sum().backward()
    mean = bn._mean.numpy().copy()
    assert bn._mean.grad is None and not np.allclose(mean, 0)      # the forward pass updated it
    opt.step()
    np.testing.assert_array_equal(bn._mean.numpy(), mean)          # the optimizer did not
    assert not any(k.startswith(bn._mean.name) for k in opt.state_dict())
    model.eval()
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    other = nn.Sequential(nn.Conv2D(1, 3, 3), nn.BatchNorm2D(3))
    other.set_state_dict(model.state_dict())
    other.eval()
    np.testing.assert_array_equal(other[1]._variance.numpy(), state["1._variance"])
    x = ddg.randn([2, 1, 5, 5])
    np.testing.assert_allclose(other(x).numpy(), model(x).numpy(), rtol=1e-6)
