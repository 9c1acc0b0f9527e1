"""DataParallel across real MPI ranks. Must pass with any world size >= 2:

    PYTHONPATH=. mpiexec -n 2 python -m pytest --with-mpi tests/test_mpi_data_parallel.py
    PYTHONPATH=. mpiexec -n 3 python -m pytest --with-mpi tests/test_mpi_data_parallel.py

Every rank builds the whole global batch deterministically and computes the
single-process reference locally, so each rank can check its own replica.
Assertions come after each test's last collective (or results are gathered first),
so a failing rank does not leave the others waiting.
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


# ---------------------------------------------------------------------- helpers
def mlp():
    return nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 24), nn.ReLU(), nn.Linear(24, 5))


class Reversed(nn.Layer):
    """Layers registered in the opposite order of use: backward finishes the
    parameters out of bucket order, so buckets complete out of order."""

    def __init__(self):
        super().__init__()
        self.c = nn.Linear(24, 5)
        self.b = nn.Linear(24, 24)
        self.a = nn.Linear(12, 24)

    def forward(self, x):
        return self.c(F.relu(self.b(ddg.tanh(self.a(x)))))


def build(factory, seed=11):
    ddg.seed(seed)
    return factory()


class SGD:
    def __init__(self, params, lr=0.1):
        self.params, self.lr = list(params), lr

    def step(self):
        for p in self.params:
            if p.grad is not None:
                p._data -= self.lr * p.grad._data

    def clear_grad(self):
        for p in self.params:
            p.clear_grad()


class Adam:
    """A reference Adam on raw arrays (the library's optimizer is tested elsewhere)."""

    def __init__(self, params, lr=0.01, b1=0.9, b2=0.999, eps=1e-8):
        self.params, self.lr, self.b1, self.b2, self.eps = list(params), lr, b1, b2, eps
        self.m = [np.zeros_like(p._data) for p in self.params]
        self.v = [np.zeros_like(p._data) for p in self.params]
        self.t = 0

    def step(self):
        self.t += 1
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            g = p.grad._data
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            mh = m / (1 - self.b1 ** self.t)
            vh = v / (1 - self.b2 ** self.t)
            p._data -= self.lr * mh / (np.sqrt(vh) + self.eps)

    def clear_grad(self):
        for p in self.params:
            p.clear_grad()


def data(steps, batch, seed=3):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((steps, batch, 12)).astype(np.float32)
    ys = rng.integers(0, 5, size=(steps, batch))
    return xs, ys


def local_slice(comm, n):
    return slice(comm.rank * n // comm.size, (comm.rank + 1) * n // comm.size)


def loss_of(model, x, y):
    return F.cross_entropy(model(ddg.to_tensor(x)), ddg.to_tensor(y))


def all_same(comm, arrays):
    blob = np.concatenate([a.ravel() for a in arrays]).tobytes()
    return all(b == blob for b in comm.allgather_object(blob))


def gather_ok(comm, ok, msg=""):
    """Every rank learns whether every rank passed (so all ranks fail together)."""
    oks = comm.allgather_object((bool(ok), msg))
    bad = [(r, m) for r, (o, m) in enumerate(oks) if not o]
    assert not bad, f"failed on ranks {bad}"


def compare(comm, replica, reference, rtol=1e-4, atol=1e-5, grads=False):
    msg = ""
    for (name, p), q in zip(replica.named_parameters(), reference.parameters()):
        a, b = (p.grad, q.grad) if grads else (p, q)
        if (a is None) != (b is None):
            msg = f"{name}: one grad is None"
            break
        if a is not None and not np.allclose(a.numpy(), b.numpy(), rtol=rtol, atol=atol):
            msg = f"{name}: max diff {np.abs(a.numpy() - b.numpy()).max():.3g}"
            break
    gather_ok(comm, not msg, msg)


# ---------------------------------------------------------------------- equivalence
@pytest.mark.parametrize("opt_cls", [SGD, Adam])
def test_equals_single_process(comm, opt_cls):
    steps, batch = 6, 24
    xs, ys = data(steps, batch)
    ref = build(mlp)
    dp = ddg.DataParallel(build(mlp, seed=11 if comm.rank == 0 else 100 + comm.rank))  # rank 0 wins
    ropt, opt = opt_cls(ref.parameters()), opt_cls(dp.parameters())
    sl = local_slice(comm, batch)
    for s in range(steps):
        loss_of(ref, xs[s], ys[s]).backward()
        loss_of(dp, xs[s, sl], ys[s, sl]).backward()
        compare(comm, dp, ref, grads=True)
        ropt.step(), opt.step()
        ropt.clear_grad(), opt.clear_grad()
    compare(comm, dp, ref)


def test_uneven_slices_weighted_by_batch(comm):
    # 13 samples: the ranks get different batch sizes; the result is still the
    # gradient of the mean loss over the whole batch.
    xs, ys = data(1, 13)
    ref, dp = build(mlp), ddg.DataParallel(build(mlp))
    sl = local_slice(comm, 13)
    loss_of(ref, xs[0], ys[0]).backward()
    loss_of(dp, xs[0, sl], ys[0, sl]).backward()
    compare(comm, dp, ref, grads=True)


@pytest.mark.parametrize("factory", [mlp, Reversed])
def test_many_small_buckets_in_order(comm, factory):
    xs, ys = data(4, 16)
    ref = build(factory)
    dp = ddg.DataParallel(build(factory), comm_buffer_size=0.0005, last_comm_buffer_size=0.0001)
    buckets = dp.reducer.buckets
    assert len(buckets) >= 4
    launched = []
    orig = dp.reducer._launch
    dp.reducer._launch = lambda b: (launched.append(b.index), orig(b))
    ropt, opt = SGD(ref.parameters()), SGD(dp.parameters())
    sl = local_slice(comm, 16)
    for s in range(4):
        launched.clear()
        loss_of(ref, xs[s], ys[s]).backward()
        loss_of(dp, xs[s, sl], ys[s, sl]).backward()
        order_ok = launched == list(range(len(buckets)))
        compare(comm, dp, ref, grads=True)
        gather_ok(comm, order_ok, f"launch order {launched}")
        ropt.step(), opt.step()
        ropt.clear_grad(), opt.clear_grad()


def test_no_sync_accumulation(comm):
    # Three micro-batches: two under no_sync, the last synchronized, then a second
    # synced backward without clear_grad: the gradients must equal one process's
    # accumulated gradients on the same global micro-batches.
    xs, ys = data(4, 12)
    ref, dp = build(mlp), ddg.DataParallel(build(mlp))
    sl = local_slice(comm, 12)
    for s in range(4):
        loss_of(ref, xs[s], ys[s]).backward()
    with dp.no_sync():
        loss_of(dp, xs[0, sl], ys[0, sl]).backward()
        loss_of(dp, xs[1, sl], ys[1, sl]).backward()
    differ = not all_same(comm, [p.grad.numpy() for p in dp.parameters()])   # local only
    loss_of(dp, xs[2, sl], ys[2, sl]).backward()
    loss_of(dp, xs[3, sl], ys[3, sl]).backward()
    gather_ok(comm, differ, "no_sync communicated")
    compare(comm, dp, ref, grads=True)


def test_broadcast_initial_state_and_buffers(comm):
    class WithBuffer(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)
            self.register_buffer("stat", ddg.to_tensor(np.full(3, float(comm.rank), np.float32)))

        def forward(self, x):
            return self.fc(x) + self.stat

    ddg.seed(comm.rank)
    dp = ddg.DataParallel(WithBuffer())
    same_init = all_same(comm, [p.numpy() for p in dp.parameters()] + [dp.stat.numpy()])
    dp._layers.stat._data[...] = 10.0 + comm.rank    # diverge, as local BN statistics do
    out = dp(ddg.ones([2, 4]))
    buffer_ok = np.all(dp.stat.numpy() == 10.0)         # rank 0's buffer after the forward
    out.sum().backward()
    gather_ok(comm, same_init and buffer_ok)


# ---------------------------------------------------------------------- control flow
class CoinModel(nn.Layer):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(12, 16)
        self.linear2 = nn.Linear(16, 16)
        self.never = nn.Linear(16, 16)       # unused on every rank
        self.linear3 = nn.Linear(16, 1)

    def forward(self, x, use_middle):
        x = F.relu(self.linear1(x))
        if use_middle:
            x = F.relu(self.linear2(x))
        return self.linear3(x)


def test_control_flow_no_hang_no_drift(comm):
    ddg.seed(5 + comm.rank)
    dp = ddg.DataParallel(CoinModel())
    opt = SGD(dp.parameters(), lr=0.05)
    rng = np.random.default_rng(comm.rank)
    ok, msg = True, ""
    for step in range(8):
        use = bool(rng.random() < 0.5) if step > 1 else bool(comm.rank == step)  # step 0/1: rank-dependent
        x = ddg.to_tensor(rng.standard_normal((8, 12)).astype(np.float32))
        y = ddg.to_tensor(rng.standard_normal((8, 1)).astype(np.float32))
        F.mse_loss(dp(x, use), y).backward()
        if dp.never.weight.grad is not None or dp.never.bias.grad is not None:
            ok, msg = False, f"step {step}: globally unused parameter got a gradient"
        if step == 0 and dp.linear2.weight.grad is None:
            ok, msg = False, "step 0: linear2 used on rank 0 only must have a gradient everywhere"
        opt.step()
        opt.clear_grad()
        if not all_same(comm, [p.numpy() for p in dp.parameters()]):
            ok, msg = False, f"step {step}: parameters differ across ranks"
    gather_ok(comm, ok, msg)


class EarlyExit(nn.Layer):
    """Skips every layer when ``skip`` is set: that rank's loss reaches no parameter."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 6)

    def forward(self, x, skip):
        return x * 2.0 if skip else self.linear(x)


def test_rank_reaching_no_parameter_still_syncs_with_find_unused(comm):
    """Rank 0 takes the early exit; the others train. With find_unused_parameters=True
    nobody hangs, and everyone ends with the same average (rank 0 contributing zeros)."""
    ddg.seed(3)
    dp = ddg.DataParallel(EarlyExit(), find_unused_parameters=True)
    opt = SGD(dp.parameters(), lr=0.1)
    rng = np.random.default_rng(comm.rank)
    ok, msg = True, ""
    for step in range(3):
        x = ddg.to_tensor(rng.standard_normal((4, 6)).astype(np.float32), stop_gradient=False)
        loss = (dp(x, comm.rank == 0) ** 2).mean()
        loss.backward()
        if dp.linear.weight.grad is None:
            ok, msg = False, f"step {step}: the parameter used on other ranks has no gradient"
        opt.step()
        opt.clear_grad()
        if not all_same(comm, [p.numpy() for p in dp.parameters()]):
            ok, msg = False, f"step {step}: parameters differ across ranks"
    gather_ok(comm, ok, msg)


def test_unused_everywhere_keeps_none_then_used(comm):
    ddg.seed(0)
    dp = ddg.DataParallel(CoinModel())
    x = ddg.ones([4, 12])
    dp(x, False).sum().backward()
    none_first = dp.linear2.weight.grad is None and dp.never.weight.grad is None
    dp.clear_gradients()
    dp(x, True).sum().backward()                   # now used everywhere: bound lazily again
    g = dp.linear2.weight.grad
    later = g is not None and np.abs(g.numpy()).sum() > 0
    same = all_same(comm, [g.numpy()]) if g is not None else False
    gather_ok(comm, none_first and later and same)


# ---------------------------------------------------------------------- errors / fp16
def test_model_mismatch_raises_on_every_rank(comm):
    ddg.seed(0)
    hidden = 8 if comm.rank != 1 else 9
    with pytest.raises(ValueError, match=r"rank 1 has param '0.weight' float32\[12, 9\]"):
        ddg.DataParallel(nn.Sequential(nn.Linear(12, hidden), nn.Linear(hidden, 2)))
    extra = [nn.Linear(2, 2)] if comm.rank == comm.size - 1 else []
    with pytest.raises(ValueError, match=f"rank {comm.size - 1}"):
        ddg.DataParallel(nn.Sequential(nn.Linear(3, 2), *extra))


def test_fp16_allreduce_close_to_fp32(comm):
    xs, ys = data(1, 16)
    sl = local_slice(comm, 16)
    d32 = ddg.DataParallel(build(mlp))
    d16 = ddg.DataParallel(build(mlp), fp16_allreduce=True)
    loss_of(d32, xs[0, sl], ys[0, sl]).backward()
    loss_of(d16, xs[0, sl], ys[0, sl]).backward()
    worst = 0.0
    for p, q in zip(d32.parameters(), d16.parameters()):
        a, b = p.grad.numpy(), q.grad.numpy()
        worst = max(worst, float(np.abs(a - b).max() / (np.abs(a).max() + 1e-12)))
    same = all_same(comm, [q.grad.numpy() for q in d16.parameters()])
    gather_ok(comm, worst < 4e-3 and same, f"relative error {worst:.3g}")


def test_state_dict_keys_match_single_process(comm):
    ref = build(mlp)
    dp = ddg.DataParallel(build(mlp))
    assert list(dp.state_dict().keys()) == list(ref.state_dict().keys())
    assert [n for n, _ in dp.named_parameters()] == [n for n, _ in ref.named_parameters()]
    dp.set_state_dict(ref.state_dict())


# ---------------------------------------------------------------------- SyncBatchNorm
class ConvBN(nn.Layer):
    def __init__(self, group=None):
        super().__init__()
        self.fc = nn.Linear(12, 6 * 4)
        self.bn = nn.SyncBatchNorm(6, group=group)
        self.out = nn.Linear(6 * 4, 5)

    def forward(self, x):
        h = self.fc(x).reshape([-1, 6, 2, 2])
        h = F.relu(self.bn(h))
        return self.out(h.reshape([-1, 24]))


@pytest.mark.parametrize("opt_cls", [SGD, Adam])
def test_sync_batch_norm_equals_single_process(comm, opt_cls):
    # The reference runs the same layer on a one-process communicator over the
    # whole batch, i.e. ordinary batch norm.
    steps, batch = 4, 12
    xs, ys = data(steps, batch)
    ref = build(lambda: ConvBN(group=C.SingleProcessCommunicator()))
    dp = ddg.DataParallel(build(ConvBN))
    ropt, opt = opt_cls(ref.parameters()), opt_cls(dp.parameters())
    sl = local_slice(comm, batch)
    for s in range(steps):
        loss_of(ref, xs[s], ys[s]).backward()
        loss_of(dp, xs[s, sl], ys[s, sl]).backward()
        compare(comm, dp, ref, grads=True)
        ropt.step(), opt.step()
        ropt.clear_grad(), opt.clear_grad()
    compare(comm, dp, ref)
    # the running statistics: parameters that need no gradient (Paddle's _mean and _variance)
    def stats(m):
        return [p for n, p in m.named_parameters() if n.endswith(("_mean", "_variance"))]
    assert len(stats(dp)) == len(stats(ref)) > 0
    stats_ok = all(np.allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
                   for a, b in zip(stats(dp), stats(ref)))
    same = all_same(comm, [b.numpy() for b in stats(dp)])
    dp.eval(), ref.eval()
    with ddg.no_grad():
        out_ok = np.allclose(dp(ddg.to_tensor(xs[0])).numpy(), ref(ddg.to_tensor(xs[0])).numpy(),
                             rtol=1e-4, atol=1e-5)
    gather_ok(comm, stats_ok and same and out_ok, f"stats {stats_ok} same {same} eval {out_ok}")


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_sync_batch_norm_uneven_slices_equal_single_process(comm, data_format):
    """Rank r holds 1 + 2r rows of each batch: the batch statistics span the uneven slices,
    and the gradients (DataParallel's batch-weighted mean; SyncBatchNorm's cross-rank sums
    weighted the same way) are those of ordinary batch norm on the whole batch in one
    process, step after step, for the layers before the norm too."""
    counts = [1 + 2 * r for r in range(comm.size)]
    lo = sum(counts[:comm.rank])
    sl = slice(lo, lo + counts[comm.rank])
    steps, batch = 3, sum(counts)
    xs, ys = data(steps, batch, seed=9)

    class Net(nn.Layer):
        def __init__(self, group=None):
            super().__init__()
            self.fc = nn.Linear(12, 6 * 4)
            self.bn = nn.SyncBatchNorm(6, group=group, data_format=data_format)
            self.out = nn.Linear(6 * 4, 5)

        def forward(self, x):
            h = self.fc(x).reshape([-1, 6, 2, 2] if data_format == "NCHW" else [-1, 2, 2, 6])
            return self.out(F.relu(self.bn(h)).reshape([-1, 24]))
    ref = build(lambda: Net(group=C.SingleProcessCommunicator()))
    dp = ddg.DataParallel(build(Net))
    ropt, opt = Adam(ref.parameters()), Adam(dp.parameters())
    for s in range(steps):
        loss_of(ref, xs[s], ys[s]).backward()
        loss_of(dp, xs[s, sl], ys[s, sl]).backward()
        compare(comm, dp, ref, rtol=1e-4, atol=1e-6, grads=True)
        ropt.step(), opt.step()
        ropt.clear_grad(), opt.clear_grad()
    compare(comm, dp, ref)


# ---------------------------------------------------------------------- uneven inputs: join
def test_join_with_sync_batch_norm_refuses_the_uneven_tail_at_once(comm):
    """SyncBatchNorm's statistics are collectives in forward: a rank out of data under
    join() cannot answer them. Every rank raises a RuntimeError naming the layer at the
    first training forward after some rank ran out (no hang until the stall timeout), and
    the communicator stays usable. Even inputs, and an eval forward in the uneven tail,
    pass."""
    def net():
        return nn.Sequential(nn.Linear(12, 6), nn.SyncBatchNorm(6), nn.ReLU(), nn.Linear(6, 5))
    xs, ys = data(comm.size + 1, 4)
    dp = ddg.DataParallel(build(net))
    opt = SGD(dp.parameters())
    with dp.join():                       # the same number of steps everywhere: fine
        for s in range(2):
            loss_of(dp, xs[s], ys[s]).backward()
            opt.step(), opt.clear_grad()
    dp.eval()
    with dp.join():                       # uneven, but eval forwards use the running statistics
        for s in range(1 + comm.rank):
            with ddg.no_grad():
                dp(ddg.to_tensor(xs[s]))
    dp.train()
    err = ""
    try:
        with dp.join():
            for s in range(1 + comm.rank):
                loss_of(dp, xs[s], ys[s]).backward()
                opt.step(), opt.clear_grad()
    except RuntimeError as e:
        err = str(e)
    alive = comm.allreduce(np.ones(1), "sum")[0] == comm.size
    gather_ok(comm, "SyncBatchNorm (layer '1')" in err and "run out of data" in err and alive and dp._join is None,
              f"error {err!r}, alive {alive}")


def test_join_uneven_inputs_equal_single_process(comm):
    # Rank r trains on 2 + r steps of 4 rows each (rank 0 runs out first). At step s the
    # reference sees the rows of the ranks that still have data: under join the ranks
    # that left contribute nothing. After the context every replica equals the reference.
    rows = 4
    steps = [2 + r for r in range(comm.size)]
    xs, ys = data(max(steps), rows * comm.size)
    ref = build(mlp)
    dp = ddg.DataParallel(build(mlp))
    ropt, opt = SGD(ref.parameters()), SGD(dp.parameters())
    grads_ok = True
    with dp.join():
        for s in range(steps[comm.rank]):
            sl = slice(comm.rank * rows, (comm.rank + 1) * rows)
            loss_of(dp, xs[s, sl], ys[s, sl]).backward()
            live = [r for r in range(comm.size) if steps[r] > s]
            pick = np.concatenate([np.arange(r * rows, (r + 1) * rows) for r in live])
            loss_of(ref, xs[s, pick], ys[s, pick]).backward()
            for p, q in zip(dp.parameters(), ref.parameters()):
                grads_ok &= bool(np.allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6))
            ropt.step(), opt.step()
            ropt.clear_grad(), opt.clear_grad()
    # the reference goes on alone for the steps this rank did not run
    for s in range(steps[comm.rank], max(steps)):
        live = [r for r in range(comm.size) if steps[r] > s]
        pick = np.concatenate([np.arange(r * rows, (r + 1) * rows) for r in live])
        loss_of(ref, xs[s, pick], ys[s, pick]).backward()
        ropt.step()
        ropt.clear_grad()
    gather_ok(comm, grads_ok, "gradients under join differ from the reference")
    compare(comm, dp, ref)
    same = all_same(comm, [p.numpy() for p in dp.parameters()])
    gather_ok(comm, same, "replicas differ after join")


def test_join_without_uneven_inputs_is_transparent(comm):
    xs, ys = data(3, 12)
    ref, dp = build(mlp), ddg.DataParallel(build(mlp))
    sl = local_slice(comm, 12)
    with dp.join():
        for s in range(3):
            loss_of(ref, xs[s], ys[s]).backward()
            loss_of(dp, xs[s, sl], ys[s, sl]).backward()
            compare(comm, dp, ref, grads=True)
            for p in list(ref.parameters()) + list(dp.parameters()):
                p.clear_grad()


def test_check_nan_inf_checks_the_reduced_gradients(comm):
    """Each rank's float32 gradient is finite (3e38) but their sum over ranks is not: under
    FLAGS_check_nan_inf every rank raises, naming the parameter, instead of stepping on inf."""
    ddg.seed(3)
    lin = nn.Linear(2, 1, bias_attr=False)
    lin.weight.name = "w_probe"
    lin.weight.set_value(np.full((2, 1), 1e-3, np.float32))  # a finite forward
    dp = ddg.DataParallel(lin)
    x = ddg.to_tensor(np.full((1, 2), 3e38, np.float32))   # d sum(x @ w) / dw = x
    ddg.set_flags({"FLAGS_check_nan_inf": True})
    try:
        with pytest.raises(RuntimeError) as err:
            dp(x).sum().backward()
    finally:
        ddg.set_flags({"FLAGS_check_nan_inf": False})
    msg = str(err.value)
    assert "after the all-reduce" in msg and "w_probe [2, 1]" in msg and "this rank's own gradients were finite" in msg
    # the flag off: the same step goes through (and the reducer is still usable)
    lin.clear_gradients()
    dp(x * 1e-30).sum().backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.full((2, 1), 3e8, np.float32), rtol=1e-6)


class SparseBag(nn.Layer):
    """An embedding with Paddle's ``sparse=True`` (lookups recorded for lazy updates) and a head."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 6, sparse=True)
        self.head = nn.Linear(6, 5)

    def forward(self, ids):
        return self.head(self.emb(ids).mean(axis=1))


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW"])
def test_lazy_adam_on_sparse_embedding_equals_single_process(comm, opt_name):
    # each rank looks up other rows: lazy mode must update the union of every rank's rows
    # (else the replicas drift apart while each looks right)
    steps, batch = 4, 12
    rng = np.random.default_rng(5)
    ids = [rng.integers(0, 50, size=(batch, 3)) for _ in range(steps)]
    ys = rng.integers(0, 5, size=(steps, batch))
    ref = build(SparseBag)
    dp = ddg.DataParallel(build(SparseBag))
    mk = getattr(ddg.optimizer, opt_name)
    ropt = mk(0.05, parameters=ref.parameters(), lazy_mode=True)
    opt = mk(0.05, parameters=dp.parameters(), lazy_mode=True)
    sl = local_slice(comm, batch)
    untouched_ok = True
    w0 = ref.emb.weight.numpy().copy()
    for s in range(steps):
        F.cross_entropy(ref(ddg.to_tensor(ids[s])), ddg.to_tensor(ys[s])).backward()
        F.cross_entropy(dp(ddg.to_tensor(ids[s][sl])), ddg.to_tensor(ys[s][sl])).backward()
        ropt.step(), opt.step()
        ropt.clear_grad(), opt.clear_grad()
    never = np.setdiff1d(np.arange(50), np.unique(np.concatenate([i.ravel() for i in ids])))
    if opt_name == "Adam":   # AdamW's decay scales every row; plain lazy Adam leaves the rest
        untouched_ok = np.array_equal(dp.emb.weight.numpy()[never], w0[never])
    gather_ok(comm, untouched_ok and len(never) > 0, "rows never looked up changed")
    compare(comm, dp, ref, rtol=1e-5, atol=1e-6)
    gather_ok(comm, all_same(comm, [p.numpy() for p in dp.parameters()]), "replicas differ")
