"""LBFGS (with and without the strong Wolfe line search): the iterates Paddle 3.3.1
gives for the same program, and its argument checks."""
import numpy as np
import pytest

import ddg
import ddg.nn as nn

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
