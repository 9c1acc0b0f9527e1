"""Data parallelism on GPUs: the MPI communicator on cupy arrays (CUDA-aware or staged
through pinned host buffers), the NCCL communicator, and DataParallel on the GPU.

Run with (any world size >= 2; skipped without cupy/GPU):

    mpiexec -n 2 python tests/mpi_pytest.py tests/test_mpi_gpu.py

Every rank binds GPU ``local_rank % n_gpus`` (init_parallel_env). The MPI tests work
with ranks sharing a GPU; NCCL refuses two ranks on one GPU, so its tests need at
least as many GPUs as ranks. Every rank builds every rank's data from the rank
number, so each computes the expected result locally; each test performs all its
collectives before asserting, so one rank's failure cannot desynchronize the others.
"""
import numpy as np
import pytest

import ddg
from ddg.parallel import comm as C
from ddg.tensor import backend

pytestmark = [
    pytest.mark.mpi(min_size=2),
    pytest.mark.skipif(not backend.cupy_available(), reason="GPU data-parallel tests need cupy and an NVIDIA GPU"),
]


@pytest.fixture(scope="module")
def world():
    c = C.get_world_communicator()
    assert isinstance(c, C.MPICommunicator), "tests must run under mpiexec with --with-mpi"
    ddg.distributed.init_parallel_env()
    return c


@pytest.fixture(scope="module")
def nccl(world):
    from ddg.parallel import comm, env
    if not comm.nccl_available():
        pytest.skip("cupy has no NCCL here")
    # NCCL needs one GPU per rank (all ranks of the test run on one node)
    if backend.cuda_device_count() < world.size:
        pytest.skip(f"NCCL needs a GPU per rank: {world.size} ranks, {backend.cuda_device_count()} GPU(s)")
    return env.get_device_communicator("nccl")


def rank_data(rank, shape=(5, 6), dtype="float32"):
    rng = np.random.default_rng(1000 + rank)
    return rng.integers(1, 4, size=shape).astype(dtype)


def _collectives(comm, size, rank):
    """Runs the same collectives on cupy arrays; returns (results, expected) pairs."""
    cp = backend.cupy_module()
    datas = [rank_data(r) for r in range(size)]
    out = []
    for op, ref in (("sum", np.sum), ("max", np.max), ("min", np.min), ("avg", np.mean)):
        a = cp.asarray(datas[rank])
        res = comm.allreduce(a, op)
        assert res is a
        out.append((f"allreduce {op}", backend.to_host(a), ref(np.stack(datas), axis=0)))
    h = cp.asarray(datas[rank].astype(np.float16))
    comm.allreduce(h, "sum")
    out.append(("allreduce float16", backend.to_host(h), np.sum(np.stack(datas), axis=0).astype(np.float16)))
    nc = cp.asarray(np.asfortranarray(datas[rank]))          # non-contiguous in C order
    comm.allreduce(nc, "sum")
    out.append(("allreduce F-order", backend.to_host(nc), np.sum(np.stack(datas), axis=0)))
    reqs = [(comm.iallreduce(cp.asarray(datas[rank] * k), "sum"), k) for k in (1, 2, 3)]
    for req, k in reqs:
        out.append((f"iallreduce #{k}", backend.to_host(req.wait()), k * np.sum(np.stack(datas), axis=0)))
    b = cp.asarray(datas[rank])
    comm.broadcast(b, root=size - 1)
    out.append(("broadcast", backend.to_host(b), datas[size - 1]))
    g = comm.allgather(cp.asarray(datas[rank]))
    out.append(("allgather", backend.to_host(g), np.stack(datas)))
    flat = [rank_data(r, (size * 2, 3)) for r in range(size)]
    rs = comm.reduce_scatter(cp.asarray(flat[rank]), "sum")
    out.append(("reduce_scatter", backend.to_host(rs), np.sum(np.stack(flat), axis=0)[rank * 2:(rank + 1) * 2]))
    r = cp.asarray(datas[rank])
    comm.reduce(r, root=0, op="sum")
    out.append(("reduce", backend.to_host(r), np.sum(np.stack(datas), axis=0) if rank == 0 else datas[rank]))
    return out


def _check(results):
    for what, got, want in results:
        np.testing.assert_allclose(got, want, rtol=1e-3, err_msg=what)


def test_mpi_communicator_on_cupy_arrays(world):
    _check(_collectives(world, world.size, world.rank))


def test_staged_communicator_on_cupy_arrays(world):
    """The pinned-host staging path, whatever the MPI library reports."""
    staged = C.StagedCommunicator.for_cupy(world)
    _check(_collectives(staged, world.size, world.rank))


def test_nccl_communicator(world, nccl):
    assert nccl.size == world.size and nccl.rank == world.rank
    _check(_collectives(nccl, world.size, world.rank))
    # host arrays go to the host communicator
    a = rank_data(world.rank)
    nccl.allreduce(a, "sum")
    np.testing.assert_allclose(a, np.sum([rank_data(r) for r in range(world.size)], axis=0))


def _dp_grads(comm_or_none, world):
    """Gradients of a GPU Linear after one DataParallel backward; each rank its own batch."""
    ddg.seed(0)
    model = ddg.nn.Linear(6, 3)
    model.to("gpu")
    dp = ddg.DataParallel(model) if comm_or_none is None else ddg.DataParallel(model, group=comm_or_none)
    x = ddg.to_tensor(rank_data(world.rank, (4, 6)), place="gpu")
    (dp(x) ** 2).mean().backward()
    return {n: p.grad.numpy() for n, p in model.named_parameters()}, \
        [backend.is_gpu_array(p.grad._data) for p in model.parameters()]


def _reference_grads(world):
    ddg.seed(0)
    model = ddg.nn.Linear(6, 3)
    xs = np.concatenate([rank_data(r, (4, 6)) for r in range(world.size)])
    (model(ddg.to_tensor(xs)) ** 2).mean().backward()
    return {n: p.grad.numpy() for n, p in model.named_parameters()}


def test_data_parallel_on_gpu_mpi(world):
    grads, on_gpu = _dp_grads(None, world)
    ref = _reference_grads(world)
    assert all(on_gpu)
    for k in ref:
        np.testing.assert_allclose(grads[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_data_parallel_on_gpu_nccl(world, nccl):
    grads, on_gpu = _dp_grads(nccl, world)
    ref = _reference_grads(world)
    assert all(on_gpu)
    for k in ref:
        np.testing.assert_allclose(grads[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_data_parallel_on_gpu_half(world, dtype):
    """float16/bfloat16 gradients on the GPU: their bucket stays in the dtype (staged
    through the host 2 bytes a value unless MPI is CUDA-aware) and the result is the
    one-process gradient on the whole batch, within the dtype's precision."""
    ddg.seed(0)
    model = ddg.nn.Linear(6, 3).to(dtype=dtype)
    ref = ddg.nn.Linear(6, 3)
    ref.set_state_dict({k: v.astype("float32") for k, v in model.state_dict().items()})
    model.to("gpu")
    dp = ddg.DataParallel(model)
    x = ddg.to_tensor(rank_data(world.rank, (4, 6)), place="gpu").astype(dtype)
    (dp(x) ** 2).mean().backward()
    xs = np.concatenate([rank_data(r, (4, 6)) for r in range(world.size)])
    (ref(ddg.to_tensor(xs)) ** 2).mean().backward()
    assert [str(b.data.dtype) for b in dp.reducer.buckets] == [dtype]
    tol = 4e-2 if dtype == "bfloat16" else 5e-3
    for p, q in zip(model.parameters(), ref.parameters()):
        assert p.grad.dtype == p.dtype and backend.is_gpu_array(p.grad._data)
        g, want = p.grad.numpy().astype(np.float64), q.grad.numpy()
        assert np.abs(g - want).max() <= tol * np.abs(want).max()


class _Branchy(ddg.nn.Layer):
    """A body every rank uses and a side branch only rank 0 uses."""

    def __init__(self):
        super().__init__()
        self.body = ddg.nn.Sequential(ddg.nn.Linear(6, 8), ddg.nn.ReLU(), ddg.nn.Linear(8, 3))
        self.side = ddg.nn.Linear(6, 3)

    def forward(self, x, side_rows=0):
        out = self.body(x)
        if side_rows:
            out = out + ddg.concat([self.side(x[:side_rows]), ddg.zeros([x.shape[0] - side_rows, 3],
                                                                        place=x.place)])
        return out


def _rows(rank, step):
    return np.random.default_rng(100 * step + rank).standard_normal((3 + rank, 6)).astype(np.float32)


def test_data_parallel_gpu_training_equals_one_process(world):
    """Three Momentum steps on the GPU, uneven batches (rank r holds 3 + r rows) and a
    branch only rank 0 uses: the parameters equal one process's on the whole batch. The
    last step reads back from the device only what the all-reduce must: one staging copy
    per bucket unless MPI is CUDA-aware, plus the flags of buckets where a parameter had
    no gradient on this rank."""
    from gpu_helpers import D2HCounter
    cp = backend.cupy_module()
    ddg.seed(0)
    model = _Branchy()
    ref = _Branchy()
    ref.set_state_dict(model.state_dict())
    model.to("gpu")
    dp = ddg.DataParallel(model, find_unused_parameters=True, comm_buffer_size=1e-4,
                          last_comm_buffer_size=1e-4)   # several buckets
    opt = ddg.optimizer.Momentum(0.1, momentum=0.9, parameters=model.parameters())
    ref_opt = ddg.optimizer.Momentum(0.1, momentum=0.9, parameters=ref.parameters())
    counter = D2HCounter(cp)
    for step in range(3):
        x = ddg.to_tensor(_rows(world.rank, step), place="gpu")
        side = x.shape[0] if world.rank == 0 else 0
        if step == 2:
            counter.install().active = True
        try:
            loss = (dp(x, side_rows=side) ** 2).sum(1).mean()
            loss.backward()
            opt.step()
            opt.clear_grad(set_to_zero=False)   # the side branch has no gradient off rank 0
        finally:
            counter.active = False
            counter.uninstall()
        xs = np.concatenate([_rows(r, step) for r in range(world.size)])
        out = ref(ddg.to_tensor(xs), side_rows=3)
        (out ** 2).sum(1).mean().backward()
        ref_opt.step()
        ref_opt.clear_grad()
    got = {k: v.numpy() for k, v in model.state_dict().items()}
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(got[k], v.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)
    if counter.unpatched:
        pytest.skip(f"this cupy's ndarray cannot be instrumented ({counter.unpatched})")
    buckets = dp.reducer.buckets
    assert len(buckets) > 1
    staged = 0 if C.cuda_aware_mpi() else len(buckets)
    flag_reads = sum(1 for b in buckets if not b.all_local)
    side = {id(p) for p in model.side.parameters()}
    side_buckets = sum(1 for b in buckets if any(id(p) in side for p in b.params))
    assert flag_reads == (side_buckets if world.rank else 0)
    assert len(counter.calls) == staged + flag_reads, counter.report(10)


def test_each_rank_binds_its_own_gpu(world):
    """'gpu' means this rank's GPU (local rank mod GPU count, bound by init_parallel_env),
    in the main thread and in other threads (DataLoader workers), for new tensors,
    moved layers and set_device('gpu')."""
    import threading
    n = backend.cuda_device_count()
    if n < world.size:
        pytest.skip(f"needs a GPU per rank: {world.size} ranks, {n} GPU(s)")
    env = ddg.distributed.ParallelEnv()
    want = f"gpu:{env.local_rank % n}"
    assert env.device_id == env.local_rank % n
    seen = {}
    t = threading.Thread(target=lambda: seen.update(t=str(ddg.ones([2], place="gpu").place)))
    t.start()
    t.join()
    layer = ddg.nn.Linear(2, 2)
    layer.to("gpu")
    prev = ddg.get_device()
    try:
        ddg.set_device("gpu")
        made = ddg.zeros([2])
        current = ddg.get_device()
    finally:
        ddg.set_device(prev)
    got = [str(ddg.to_tensor([1.0], place="gpu").place), seen["t"], str(layer.weight.place),
           str(made.place), current]
    assert got == [want] * 5, got


def test_sharded_training_on_gpu(world):
    """group_sharded_parallel at stages 1, 2 and 3 on the GPU (Adam, global-norm clipping):
    the parameters equal DataParallel's to float32 rounding (the shards' squared norms
    are summed in another order), and the gathered state dict is whole."""
    import ddg.nn.functional as F
    from ddg import nn
    from ddg.distributed.sharding import group_sharded_parallel

    def run(level):
        ddg.seed(4)
        net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
        net.to("gpu")
        opt = ddg.optimizer.Adam(0.05, parameters=net.parameters(), grad_clip=nn.ClipGradByGlobalNorm(0.05))
        if level == "dp":
            model = ddg.DataParallel(net)
        else:
            model, opt, _ = group_sharded_parallel(net, opt, level)
        n, size, r = 4, world.size, world.rank
        for step in range(3):
            rng = np.random.default_rng(step)
            x = rng.standard_normal((n * size, 6)).astype("float32")
            y = rng.integers(0, 3, n * size)
            rows = slice(n * r, n * (r + 1))
            loss = F.cross_entropy(model(ddg.to_tensor(x[rows], place="gpu")), ddg.to_tensor(y[rows], place="gpu"))
            loss.backward()
            opt.step()
            opt.clear_grad()
        # stage 3: a rank holds its own parameters only; the state dict gathers them
        values = model.state_dict().values() if level == "p_g_os" else model.parameters()
        return [p.numpy() for p in values], len(opt.state_dict()), model.parameters()[0].place
    want, n_state, _ = run("dp")
    ok = []
    for level in ("os", "os_g", "p_g_os"):
        got, m_state, place = run(level)
        diff = max(float(np.abs(a - b).max()) for a, b in zip(want, got))
        ok.append((diff < 1e-6 and m_state == n_state and "gpu" in str(place), level, diff))
    everyone = world.allgather_object(ok)
    assert all(o for mine in everyone for o, _, _ in mine), everyone
