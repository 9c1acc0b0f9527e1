"""ddg.amp under DataParallel across real MPI ranks (2 and 3):

    mpiexec -n 2 python tests/mpi_pytest.py tests/test_mpi_amp.py
    mpiexec -n 3 python tests/mpi_pytest.py tests/test_mpi_amp.py

Every rank builds the whole global batch and the single-process reference itself.
Results are gathered before assertions, so a failing rank does not leave others waiting.
"""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.parallel import comm as C

pytestmark = pytest.mark.mpi(min_size=2)


@pytest.fixture(scope="module")
def comm():
    c = C.get_world_communicator()
    assert isinstance(c, C.MPICommunicator), "tests must run under mpiexec with --with-mpi"
    return c


def _net():
    ddg.seed(3)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


def _data(step, n_per_rank, size):
    rng = np.random.default_rng(100 + step)
    x = rng.standard_normal((n_per_rank * size, 8)).astype(np.float32)
    y = rng.integers(0, 4, n_per_rank * size)
    return x, y


def _train(model, opt, scaler, steps, rank, size, n, level="O1", bad=None, poison_grad=None, whole=False):
    """``steps`` steps of the rank's slice of a global batch of ``n * size`` (all of it
    when ``whole``: the one-process reference);
    ``bad[step] == r`` makes rank r's loss inf at that step; ``poison_grad[step] == r``
    puts an inf into rank r's gradient after backward (past DataParallel's all-reduce)."""
    scales, skipped = [], []
    for step in range(steps):
        x, y = _data(step, n, size)
        sl = slice(None) if whole else slice(rank * n, (rank + 1) * n)
        with ddg.amp.auto_cast(level=level):
            loss = F.cross_entropy(model(ddg.to_tensor(x[sl])), ddg.to_tensor(y[sl]))
        if bad is not None and bad.get(step) == rank:
            loss = loss * float("inf")
        with np.errstate(all="ignore"):
            scaler.scale(loss).backward()
        if poison_grad is not None and poison_grad.get(step) == rank:
            next(iter(model.parameters())).grad._data[0, 0] = np.inf
        before = [p.numpy().copy() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
        opt.clear_grad()
        skipped.append(all(np.array_equal(b, p.numpy()) for b, p in zip(before, model.parameters())))
        scales.append(float(scaler.state_dict().get("scale", [0])[0]))
    return scales, skipped


def _flat(model):
    return np.concatenate([p.numpy().astype(np.float64).ravel() for p in model.parameters()])


def _gather_ok(comm, ok, msg):
    oks = comm.allgather_object((bool(ok), msg))
    bad = [f"rank {r}: {m}" for r, (good, m) in enumerate(oks) if not good]
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_data_parallel_grad_scaler_equals_one_process(comm, level):
    rank, size, n, steps = comm.rank, comm.size, 6, 5
    bad = {2: size - 1}          # the last rank's loss overflows at step 2: every rank skips it

    def build(parallel):
        net = _net()
        # Momentum, not Adam: Adam turns a float16 rounding of a near-zero gradient into a full
        # step of either sign, which would hide the comparison in noise
        opt = ddg.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=net.parameters())
        if level == "O2":
            net, opt = ddg.amp.decorate(net, opt, level="O2")
        model = ddg.DataParallel(net) if parallel else net
        return model, net, opt, ddg.amp.GradScaler(init_loss_scaling=2.0 ** 12, incr_every_n_steps=2)

    model, net, opt, scaler = build(True)
    scales, skipped = _train(model, opt, scaler, steps, rank, size, n, level, bad)
    ref_model, ref_net, ref_opt, ref_scaler = build(False)
    ref_bad = {2: 0}             # one process: the same step overflows
    ref_scales, ref_skipped = _train(ref_model, ref_opt, ref_scaler, steps, 0, size, n, level, ref_bad, whole=True)
    mine, ref = _flat(net), _flat(ref_net)
    replicas = comm.allgather_object(mine)
    msgs = []
    if skipped != [False, False, True, False, False] or skipped != ref_skipped:
        msgs.append(f"skipped {skipped} (one process: {ref_skipped})")
    if scales != ref_scales:
        msgs.append(f"scales {scales} vs one process {ref_scales}")
    if not all(np.array_equal(r, replicas[0]) for r in replicas):
        msgs.append("replicas differ")
    tol = 2e-3 if level == "O1" else 5e-3   # float16 products over a slice vs the whole batch
    err = float(np.max(np.abs(mine - ref)))
    if err > tol:
        msgs.append(f"max |DataParallel - one process| = {err}")
    _gather_ok(comm, not msgs, "; ".join(msgs))


def test_inf_past_the_allreduce_on_one_rank_skips_on_every_rank(comm):
    """A gradient poisoned on one rank after DataParallel's all-reduce (e.g. a parameter
    outside DataParallel): the scaler's flag all-reduce still makes every rank skip."""
    rank, size, n = comm.rank, comm.size, 4
    net = _net()
    opt = ddg.optimizer.SGD(learning_rate=0.1, parameters=net.parameters())
    model = ddg.DataParallel(net)
    scaler = ddg.amp.GradScaler(init_loss_scaling=1024)
    scales, skipped = _train(model, opt, scaler, 3, rank, size, n, poison_grad={1: 1})
    replicas = comm.allgather_object(_flat(net))
    ok = skipped == [False, True, False] and scales == [1024, 512, 512] and \
        all(np.array_equal(r, replicas[0]) for r in replicas)
    _gather_ok(comm, ok, f"skipped {skipped}, scales {scales}")
