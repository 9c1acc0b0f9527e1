"""float16 and bfloat16 under DataParallel across real MPI ranks (any world size >= 2):

    mpiexec -n 2 python tests/mpi_pytest.py -q tests/test_mpi_half.py
    mpiexec -n 3 python tests/mpi_pytest.py -q tests/test_mpi_half.py

Half-precision gradients are all-reduced in their own dtype: one bucket per dtype, 2
bytes a value on the wire, summed by a user-defined MPI op (float32 add, one rounding
per combine), divided by the world size before the sum so float16 cannot overflow.
"""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.parallel import comm as C
from ddg.tensor.dtypes import bfloat16

pytestmark = pytest.mark.mpi(min_size=2)

HALF = [pytest.param(np.dtype(np.float16), id="float16"), pytest.param(bfloat16, id="bfloat16")]
TOL = {np.dtype(np.float16): 5e-3, bfloat16: 4e-2}


@pytest.fixture(scope="module")
def comm():
    c = C.get_world_communicator()
    assert isinstance(c, C.MPICommunicator), "tests must run under mpiexec with --with-mpi"
    return c


def gather_ok(comm, ok, msg=""):
    oks = comm.allgather_object((bool(ok), msg))
    bad = [(r, m) for r, (o, m) in enumerate(oks) if not o]
    assert not bad, f"failed on ranks {bad}"


def mlp(dtype, seed=11):
    ddg.seed(seed)
    m = nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 24), nn.ReLU(), nn.Linear(24, 5))
    return m.to(dtype=dtype)


def local_slice(comm, n):
    return slice(comm.rank * n // comm.size, (comm.rank + 1) * n // comm.size)


class _Spy:
    """Stands in for the mpi4py communicator: records what each Iallreduce sends."""

    def __init__(self, inner):
        self.inner, self.sent = inner, []

    def Iallreduce(self, sendbuf, recvbuf, op):
        buf = recvbuf[0]
        self.sent.append((buf.dtype, int(buf.nbytes), int(buf.size)))
        return self.inner.Iallreduce(sendbuf, recvbuf, op)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("dtype", HALF)
def test_half_model_equals_single_process(comm, dtype):
    steps, batch = 4, 24
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((steps, batch, 12)).astype(dtype)
    ys = rng.integers(0, 5, size=(steps, batch))
    ref = mlp(dtype)
    dp = ddg.DataParallel(mlp(dtype, seed=11 if comm.rank == 0 else 50 + comm.rank))   # rank 0's wins
    ropt = ddg.optimizer.SGD(learning_rate=0.5, parameters=ref.parameters())
    opt = ddg.optimizer.SGD(learning_rate=0.5, parameters=dp.parameters())
    sl = local_slice(comm, batch)
    spy = _Spy(comm.comm)
    comm.comm = spy
    try:
        for s in range(steps):
            F.cross_entropy(ref(ddg.to_tensor(xs[s])), ddg.to_tensor(ys[s])).backward()
            F.cross_entropy(dp(ddg.to_tensor(xs[s, sl])), ddg.to_tensor(ys[s, sl])).backward()
            ropt.step(), opt.step()
            ropt.clear_grad(), opt.clear_grad()
    finally:
        comm.comm = spy.inner
    msg, tol = "", TOL[dtype]
    for (name, p), q in zip(dp.named_parameters(), ref.parameters()):
        a, b = p.numpy().astype(np.float64), q.numpy().astype(np.float64)
        if p.dtype != dtype:
            msg = f"{name} became {p.dtype}"
        elif np.abs(a - b).max() > tol * max(1.0, np.abs(b).max()):
            msg = f"{name}: max diff {np.abs(a - b).max():.3g}"
    blob = np.concatenate([p.numpy().view(np.uint16).ravel() for p in dp.parameters()]).tobytes()
    same = all(b == blob for b in comm.allgather_object(blob))
    n_values = sum(p.size for p in dp.parameters()) + len(dp.parameters()) + 1   # grads, flags, weight
    wire = [(d, nb) for d, nb, _ in spy.sent]
    ok_wire = wire and all(d == dtype and nb == 2 * n_values for d, nb in wire) and len(wire) == steps
    gather_ok(comm, not msg and same and ok_wire, msg or f"replicas equal: {same}; sent: {wire}")


class Mixed(nn.Layer):
    """A bfloat16 body and a float32 head: two dtypes, so two buckets."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 6).to(dtype="bfloat16")
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        return self.head(self.body(x.astype("bfloat16")).astype("float32"))


def test_one_bucket_per_dtype_two_bytes_a_value(comm):
    ddg.seed(5)
    dp = ddg.DataParallel(Mixed())
    buckets = dp.reducer.buckets
    kinds = sorted(str(b.data.dtype) for b in buckets)
    sizes = {str(b.data.dtype): (b.nbytes, sum(p.size for p in b.params) + len(b.params) + 1) for b in buckets}
    x = ddg.to_tensor(np.random.default_rng(comm.rank).standard_normal((4, 8)).astype(np.float32))
    dp(x).sum().backward()
    grads_ok = dp.body.weight.grad.dtype == bfloat16 and dp.head.weight.grad.dtype == np.float32
    ok = kinds == ["bfloat16", "float32"] and sizes["bfloat16"][0] == 2 * sizes["bfloat16"][1] and \
        sizes["float32"][0] == 4 * sizes["float32"][1] and grads_ok
    gather_ok(comm, ok, f"{kinds} {sizes} {grads_ok}")


@pytest.mark.parametrize("dtype", HALF)
def test_half_wire_sum_and_avg(comm, dtype):
    n = comm.size
    vals = [np.linspace(-3, 3, 10).astype(np.float32) * (r + 1) / 7 for r in range(n)]
    a = vals[comm.rank].astype(dtype)
    comm.iallreduce(a, "sum", "half").wait()
    halves = [v.astype(dtype).astype(np.float32) for v in vals]
    exact = sum(halves)
    eps = float(ddg.tensor.dtypes.finfo(dtype).eps)
    err = np.abs(a.astype(np.float32) - exact).max() / np.abs(exact).max()
    ok_sum = a.dtype == dtype and err <= (n - 1) * eps
    # 'avg' divides first: float16 values whose sum overflows (2 x 40000 > 65504) average fine
    big = np.full(6, 40000.0 + 8 * comm.rank, dtype=dtype)
    comm.iallreduce(big, "avg", "half").wait()
    want = np.mean([40000.0 + 8 * r for r in range(n)])
    ok_avg = bool(np.isfinite(big.astype(np.float32)).all()) and \
        np.abs(big.astype(np.float64) - want).max() <= 2 * eps * want
    # a plain all_reduce of a half array sums in float32 and rounds once (4 bytes a value)
    b = vals[comm.rank].astype(dtype)
    comm.allreduce(b, "sum")
    ok_plain = np.array_equal(b.view(np.uint16), exact.astype(dtype).view(np.uint16))
    gather_ok(comm, ok_sum and ok_avg and ok_plain, f"sum err {err:.3g}, avg {big[:2]}, plain {ok_plain}")


def test_fp16_grads_do_not_overflow_in_the_mean(comm):
    """Every rank's float16 gradient is about 40000: their sum would overflow float16, their
    mean does not, and DataParallel returns the mean."""
    lin = nn.Linear(1, 1, bias_attr=False).to(dtype="float16")
    dp = ddg.DataParallel(lin)
    x = ddg.to_tensor(np.full((1, 1), 40000.0 + comm.rank, dtype=np.float16))
    dp(x).sum().backward()
    g = float(lin.weight.grad.numpy()[0, 0])
    want = np.mean([float(np.float16(40000.0 + r)) for r in range(comm.size)])
    gather_ok(comm, np.isfinite(g) and abs(g - want) <= 64, f"grad {g}, want {want}")
