"""Higher-order gradients under DataParallel (any world size >= 2):

    mpiexec -n 2 python tests/mpi_pytest.py tests/test_mpi_higher_order.py

A WGAN-GP step (a gradient penalty from ddg.grad(create_graph=True), then backward) on each
rank's slice of a global batch gives, after DataParallel's all-reduce, the single-process
gradient of the whole batch. Every rank computes the reference itself; assertions come
after the last collective.
"""
import numpy as np
import pytest

import ddg
from ddg import nn
from ddg.parallel import comm as C

pytestmark = pytest.mark.mpi(min_size=2)


def _critic():
    ddg.seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4), nn.Sigmoid(), nn.Linear(4, 1))


def _loss(critic, real, fake, alpha):
    r, f, a = ddg.to_tensor(real), ddg.to_tensor(fake), ddg.to_tensor(alpha)
    x_hat = a * r + (1 - a) * f
    x_hat.stop_gradient = False
    (g,) = ddg.grad(critic(x_hat).sum(), x_hat, create_graph=True)
    penalty = ((((g * g).sum(axis=1)) ** 0.5 - 1) ** 2).mean()
    return critic(f).mean() - critic(r).mean() + 10 * penalty


def test_gradient_penalty_under_data_parallel_matches_one_process():
    world = C.get_world_communicator()
    rank, size = world.rank, world.size
    prev = ddg.get_default_dtype()
    ddg.set_default_dtype("float64")
    try:
        rng = np.random.default_rng(1)
        n = 4 * size
        real, fake, alpha = rng.standard_normal((n, 3)), rng.standard_normal((n, 3)), rng.uniform(size=(n, 1))
        single = _critic()
        _loss(single, real, fake, alpha).backward()
        dp = ddg.DataParallel(_critic())
        sl = slice(4 * rank, 4 * (rank + 1))
        _loss(dp, real[sl], fake[sl], alpha[sl]).backward()
        pairs = [(p.grad.numpy(), q.grad.numpy()) for p, q in zip(single.parameters(), dp.parameters())]
    finally:
        ddg.set_default_dtype(prev)
    for a, b in pairs:
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
