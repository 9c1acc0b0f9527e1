"""Collectives across real MPI ranks, checked against numpy references.

Run with (must pass with any world size >= 2):

    mpiexec -n 2 python -m pytest --with-mpi tests/test_mpi_collectives.py
    mpiexec -n 3 python -m pytest --with-mpi tests/test_mpi_collectives.py

Every rank builds every rank's input deterministically from the rank number, so
each can compute the expected result locally. Each test performs all of its
collectives before asserting, so a failure on one rank does not desynchronize the
ranks' sequence of collectives.
"""
import time

import numpy as np
import pytest

import ddg  # noqa: F401  (registers 'bfloat16' with numpy, through ml_dtypes)
from ddg.parallel import comm as C

pytestmark = pytest.mark.mpi(min_size=2)

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64", "bool"]
SHAPE = (5, 6)


@pytest.fixture(scope="module")
def comm():
    c = C.get_world_communicator()
    assert isinstance(c, C.MPICommunicator), "tests must run under mpiexec with --with-mpi"
    return c


def rank_data(rank, dtype, shape=SHAPE):
    """Rank-dependent values small enough that sums and products of up to ~4 ranks fit
    every dtype exactly (int8 products stay below 128)."""
    rng = np.random.default_rng(1000 + rank)
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    return rng.integers(1, 4, size=shape).astype(dtype)


def all_data(size, dtype, shape=SHAPE):
    return np.stack([rank_data(r, dtype, shape) for r in range(size)])


def reference(stack, op):
    """What a reduction of the rows of ``stack`` must give, in the rows' dtype."""
    dtype = stack.dtype
    if dtype == np.bool_:
        return {"sum": np.any, "max": np.any, "prod": np.all, "min": np.all}[op](stack, axis=0)
    # float16 and bfloat16 are reduced in float32 and rounded once; integer data makes this exact.
    work = stack.astype(np.float32) if dtype.itemsize == 2 and dtype.kind in "fV" else stack
    if op in ("sum", "avg"):
        r = work.sum(axis=0, dtype=work.dtype)
        if op == "avg":
            r = r / work.dtype.type(stack.shape[0])
    else:
        r = {"prod": np.prod, "max": np.max, "min": np.min}[op](work, axis=0)
        r = r.astype(work.dtype)
    return r.astype(dtype)


def valid(dtype, op):
    return not (op == "avg" and np.dtype(dtype).kind not in "fcV")


# ---------------------------------------------------------------------------
# allreduce / iallreduce

@pytest.mark.parametrize("op", C.REDUCE_OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce(comm, dtype, op):
    if not valid(dtype, op):
        with pytest.raises(TypeError, match=f"allreduce.*avg.*{dtype}"):
            comm.allreduce(rank_data(comm.rank, dtype), op)
        return
    a = rank_data(comm.rank, dtype)
    assert comm.allreduce(a, op) is a
    # A non-contiguous view: reduced through a contiguous copy, written back.
    base = np.zeros((SHAPE[0], 2 * SHAPE[1]), dtype=dtype)
    view = base[:, ::2]
    view[...] = rank_data(comm.rank, dtype)
    comm.allreduce(view, op)
    # A 0-d array.
    s = np.array(rank_data(comm.rank, dtype)[0, 0])
    comm.allreduce(s, op)

    ref = reference(all_data(comm.size, dtype), op)
    assert a.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(a, ref)
    np.testing.assert_array_equal(view, ref)
    assert not base[:, 1::2].any()                   # untouched between the strides
    np.testing.assert_array_equal(s, ref[0, 0])


@pytest.mark.parametrize("op", C.REDUCE_OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_iallreduce(comm, dtype, op):
    if not valid(dtype, op):
        with pytest.raises(TypeError, match="iallreduce"):
            comm.iallreduce(rank_data(comm.rank, dtype), op)
        return
    a = rank_data(comm.rank, dtype)
    nc = np.zeros((SHAPE[0], 2 * SHAPE[1]), dtype=dtype)[:, ::2]
    nc[...] = rank_data(comm.rank, dtype)
    r1 = comm.iallreduce(a, op)
    r2 = comm.iallreduce(nc, op)
    assert r2.wait() is nc                           # out of order is fine
    assert r1.wait() is a
    assert r1.test() and r1.wait() is a              # idempotent after completion
    ref = reference(all_data(comm.size, dtype), op)
    np.testing.assert_array_equal(a, ref)
    np.testing.assert_array_equal(nc, ref)


def test_iallreduce_overlaps_and_test_polls(comm):
    """Several requests in flight at once (same sizes: float16 staging buffers must not
    be shared), computation between start and wait, test() polling to completion."""
    n = 1 << 16
    arrays = [np.full(n, comm.rank + 1 + k, dtype=dt)
              for k in range(4) for dt in (np.float16, np.float32)]
    reqs = [comm.iallreduce(x, "sum") for x in arrays]
    busy = np.sin(np.arange(10000.0)).sum()          # overlapped work
    deadline = time.monotonic() + 30
    pending = list(reqs)
    while pending and time.monotonic() < deadline:
        pending = [r for r in pending if not r.test()]
    assert not pending, "test() never reported completion"
    for r in reqs:
        r.wait()
    total = comm.size * (comm.size + 1) // 2
    for i, x in enumerate(arrays):
        k = i // 2
        np.testing.assert_array_equal(x, np.full(n, total + comm.size * k, dtype=x.dtype))
    assert np.isfinite(busy)
    assert comm.activity() is None                   # watchdog bookkeeping cleared


def test_avg_of_float16_rounds_once(comm):
    # 0.1-ish values whose float16 partial sums would round differently.
    a = np.full(8, 0.1 * (comm.rank + 1), dtype=np.float16)
    comm.allreduce(a, "avg")
    vals = [np.float16(0.1 * (r + 1)).astype(np.float32) for r in range(comm.size)]
    expect = np.float16(np.float32(sum(vals, np.float32(0))) / np.float32(comm.size))
    np.testing.assert_array_equal(a, np.full(8, expect, dtype=np.float16))


# ---------------------------------------------------------------------------
# broadcast / allgather / reduce_scatter / reduce / scatter

@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_every_root(comm, dtype):
    results = []
    for root in range(comm.size):
        a = rank_data(comm.rank, dtype)
        comm.broadcast(a, root)
        nc = np.zeros((SHAPE[0], 2 * SHAPE[1]), dtype=dtype)[:, 1::2]
        nc[...] = rank_data(comm.rank, dtype)
        comm.broadcast(nc, root)
        results.append((root, a, nc))
    for root, a, nc in results:
        np.testing.assert_array_equal(a, rank_data(root, dtype))
        np.testing.assert_array_equal(nc, rank_data(root, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_allgather(comm, dtype):
    a = rank_data(comm.rank, dtype)
    g = comm.allgather(a)
    gnc = comm.allgather(np.asfortranarray(a))
    expect = all_data(comm.size, dtype)
    assert g.shape == (comm.size,) + SHAPE and g.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(g, expect)
    np.testing.assert_array_equal(gnc, expect)


@pytest.mark.parametrize("op", C.REDUCE_OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_scatter(comm, dtype, op):
    rows = 2 * comm.size
    shape = (rows, 3)
    if not valid(dtype, op):
        with pytest.raises(TypeError, match="reduce_scatter"):
            comm.reduce_scatter(rank_data(comm.rank, dtype, shape), op)
        return
    got = comm.reduce_scatter(rank_data(comm.rank, dtype, shape), op)
    full = reference(all_data(comm.size, dtype, shape), op)
    assert got.shape == (2, 3) and got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, full[2 * comm.rank: 2 * comm.rank + 2])


def test_reduce_scatter_shape_error(comm):
    with pytest.raises(ValueError, match="reduce_scatter.*divisible"):
        comm.reduce_scatter(np.ones((comm.size + 1, 2)), "sum")


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod", "avg"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_every_root(comm, dtype, op):
    if not valid(dtype, op):
        with pytest.raises(TypeError, match="reduce"):
            comm.reduce(rank_data(comm.rank, dtype), 0, op)
        return
    results = []
    for root in range(comm.size):
        a = rank_data(comm.rank, dtype)
        comm.reduce(a, root, op)
        results.append((root, a))
    ref = reference(all_data(comm.size, dtype), op)
    for root, a in results:
        if comm.rank == root:
            np.testing.assert_array_equal(a, ref)
        else:
            np.testing.assert_array_equal(a, rank_data(comm.rank, dtype))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int32", "bool"])
def test_nonblocking_reduce_broadcast_allgather(comm, dtype):
    """ireduce / ibroadcast / iallgather to and from every root, all started before any
    is waited on (contiguous and strided arrays), finished out of order."""
    size, rank = comm.size, comm.rank
    stack = all_data(size, dtype)
    op = "max" if np.dtype(dtype) == np.bool_ else "sum"
    started = []
    for root in range(size):
        red = rank_data(rank, dtype)
        red_nc = np.zeros((SHAPE[0], 2 * SHAPE[1]), dtype=dtype)[:, ::2]
        red_nc[...] = rank_data(rank, dtype)
        bc = rank_data(rank, dtype)
        bc_nc = np.zeros((SHAPE[0], 2 * SHAPE[1]), dtype=dtype)[:, 1::2]
        bc_nc[...] = rank_data(rank, dtype)
        reqs = [comm.ireduce(red, root, op), comm.ireduce(red_nc, root, op),
                comm.ibroadcast(bc, root), comm.ibroadcast(bc_nc, root)]
        started.append((root, red, red_nc, bc, bc_nc, reqs))
    gather = comm.iallgather(np.asfortranarray(rank_data(rank, dtype)))
    g = gather.wait()
    np.testing.assert_array_equal(g, stack)
    for root, red, red_nc, bc, bc_nc, reqs in reversed(started):
        for r, a in zip(reqs, (red, red_nc, bc, bc_nc)):
            assert r.wait() is a and r.test()
        expect = reference(stack, op) if rank == root else rank_data(rank, dtype)
        np.testing.assert_array_equal(red, expect)
        np.testing.assert_array_equal(red_nc, expect)
        np.testing.assert_array_equal(bc, rank_data(root, dtype))
        np.testing.assert_array_equal(bc_nc, rank_data(root, dtype))
    assert comm.activity() is None


def test_nonblocking_collectives_poll_and_record_waits(comm):
    """test() polls an ireduce/ibroadcast/iallgather to completion without blocking; a
    wait is recorded for the stall watchdog while it blocks, and cleared after."""
    n = 1 << 15
    a = np.full(n, comm.rank + 1.0)
    b = np.full(n, float(comm.rank))
    reqs = [comm.ireduce(a, comm.size - 1, "sum"), comm.ibroadcast(b, 1), comm.iallgather(np.arange(3) + comm.rank)]
    deadline = time.monotonic() + 30
    while not all(r.test() for r in reqs) and time.monotonic() < deadline:
        pass
    assert all(r.test() for r in reqs)
    total = comm.size * (comm.size + 1) / 2
    np.testing.assert_array_equal(a, np.full(n, total if comm.rank == comm.size - 1 else comm.rank + 1.0))
    np.testing.assert_array_equal(b, np.full(n, 1.0))
    np.testing.assert_array_equal(reqs[2].wait(), np.arange(3)[None, :] + np.arange(comm.size)[:, None])
    # the wait is what the watchdog sees: rank 0 enters its wait before the others start
    seen = []
    if comm.rank == 0:
        c = np.zeros(4)
        r = comm.ibroadcast(c, 1)
        orig = r._block

        def block():
            seen.append(comm.activity())
            orig()
        r._block = block
        comm.barrier()
        r.wait()
    else:
        comm.barrier()
        c = np.full(4, 7.0)
        comm.ibroadcast(c, 1).wait()
    np.testing.assert_array_equal(c, np.full(4, 7.0))
    if comm.rank == 0:
        assert seen[0] is not None and seen[0][0][0] == "ibroadcast.wait"
    assert comm.activity() is None


def test_nonblocking_errors_name_the_collective(comm):
    with pytest.raises(ValueError, match="ireduce"):
        comm.ireduce(np.ones(2), comm.size, "sum")
    with pytest.raises(TypeError, match="ireduce"):
        comm.ireduce(np.ones(2, dtype=np.int32), 0, "avg")
    with pytest.raises(ValueError, match="ibroadcast"):
        comm.ibroadcast(np.ones(2), -1)
    with pytest.raises(TypeError, match="iallgather"):
        comm.iallgather(np.ones(2, dtype=np.longdouble))


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_every_root(comm, dtype):
    results = []
    for root in range(comm.size):
        parts = [rank_data(10 * root + r, dtype) for r in range(comm.size)] if comm.rank == root else None
        got = comm.scatter(parts, root)
        out = np.zeros(SHAPE, dtype=dtype)
        got_out = comm.scatter(parts, root, out=out)
        results.append((root, got, got_out is out, out))
    for root, got, same, out in results:
        np.testing.assert_array_equal(got, rank_data(10 * root + comm.rank, dtype))
        assert same
        np.testing.assert_array_equal(out, rank_data(10 * root + comm.rank, dtype))


def test_scatter_bad_list_raises_on_every_rank(comm):
    parts = [np.ones(3)] * (comm.size + 1) if comm.rank == 0 else None
    with pytest.raises(ValueError, match=f"scatter.*{comm.size} arrays"):
        comm.scatter(parts, 0)
    comm.barrier()


def test_errors_name_the_collective(comm):
    with pytest.raises(TypeError, match="allreduce.*dtype <U1"):
        comm.allreduce(np.array(["a", "b"]), "sum")
    with pytest.raises(TypeError, match="broadcast.*not supported"):
        comm.broadcast(np.ones(2, dtype=np.longdouble) if np.dtype(np.longdouble).itemsize > 8
                       else np.array(["x"]), 0)
    with pytest.raises(TypeError, match="allreduce.*max.*complex"):
        comm.allreduce(np.ones(2, dtype=np.complex64), "max")
    with pytest.raises(ValueError, match="broadcast.*root"):
        comm.broadcast(np.ones(2), comm.size)
    with pytest.raises(ValueError, match="unknown reduce op"):
        comm.iallreduce(np.ones(2), "mean")
    comm.barrier()


def test_complex(comm):
    a = np.full(3, 1 + 1j * comm.rank, dtype=np.complex64)
    comm.allreduce(a, "sum")
    np.testing.assert_array_equal(a, np.full(3, comm.size + 1j * sum(range(comm.size)), np.complex64))


# ---------------------------------------------------------------------------
# objects, barrier, environment

def test_object_collectives(comm):
    mine = {"rank": comm.rank, "name": f"r{comm.rank}", "shape": (comm.rank, 2)}
    everyone = comm.allgather_object(mine)
    from_last = comm.bcast_object(mine if comm.rank == comm.size - 1 else None, comm.size - 1)
    gathered = comm.gather_object(comm.rank * 10, root=1)
    comm.barrier()
    assert everyone == [{"rank": r, "name": f"r{r}", "shape": (r, 2)} for r in range(comm.size)]
    assert from_last["rank"] == comm.size - 1
    if comm.rank == 1:
        assert gathered == [r * 10 for r in range(comm.size)]
    else:
        assert gathered is None


def test_parallel_env(comm):
    from ddg.parallel import env as E
    e = E.init_parallel_env()
    assert E.init_parallel_env() is e and E.is_initialized()
    ranks = comm.allgather_object((e.rank, e.local_rank))
    assert (e.rank, e.world_size, e.nranks) == (comm.rank, comm.size, comm.size)
    assert (E.get_rank(), E.get_world_size()) == (comm.rank, comm.size)
    # the rank on this node, as MPI's shared-memory split finds it, is the launcher's (on
    # one node: the world rank; across nodes, tests/test_multinode.py, it starts over)
    from ddg.parallel.comm import launcher_env
    local = launcher_env.launcher_local_rank()
    assert e.local_rank == (comm.rank if local is None else local)
    if local is None or launcher_env.launcher_local_size() == comm.size:
        assert ranks == [(r, r) for r in range(comm.size)]


# ---------------------------------------------------------------------------
# The staging path (what non-CUDA-aware MPI does with GPU arrays)

class _Copies:
    """numpy stand-ins for device<->host copies; counts them. No GPU is involved:
    this checks the staging logic (buffer reuse, copy-back, requests)."""

    def __init__(self):
        self.n_host = self.n_dev = 0

    def make(self, inner):
        def to_host(dev, host):
            self.n_host += 1
            host[...] = dev

        def to_device(host, dev):
            self.n_dev += 1
            dev[...] = host

        return C.StagedCommunicator(inner, to_host, to_device, np.array)


@pytest.mark.parametrize("dtype", ["float16", "float32", "int64", "bool"])
def test_staged_collectives(comm, dtype):
    cp = _Copies()
    s = cp.make(comm)
    a = rank_data(comm.rank, dtype)
    s.allreduce(a, "max")
    # Two in-flight requests of the same size must get distinct host buffers.
    b = rank_data(comm.rank, dtype)
    c = rank_data(comm.rank, dtype)[:, ::-1]
    rb, rc = s.iallreduce(b, "sum"), s.iallreduce(c, "sum")
    rc.wait()
    while not rb.test():
        pass
    allocs_after_two = s.pool.allocations
    bc = rank_data(comm.rank, dtype)
    s.broadcast(bc, comm.size - 1)
    g = s.allgather(rank_data(comm.rank, dtype))
    rd = rank_data(comm.rank, dtype)
    s.reduce(rd, 0, "sum")
    allocs_same_size = s.pool.allocations
    ird = rank_data(comm.rank, dtype)
    ibc = rank_data(comm.rank, dtype)
    r_ird, r_ibc = s.ireduce(ird, comm.size - 1, "max"), s.ibroadcast(ibc, comm.size - 1)
    r_ig = s.iallgather(rank_data(comm.rank, dtype))
    r_ibc.wait()
    r_ird.wait()
    ig = r_ig.wait()
    rs = s.reduce_scatter(rank_data(comm.rank, dtype, (comm.size, 4)), "min")
    parts = [rank_data(r, dtype) for r in range(comm.size)] if comm.rank == 0 else None
    out = np.zeros(SHAPE, dtype=dtype)
    s.scatter(parts, 0, out=out)

    stack = all_data(comm.size, dtype)
    np.testing.assert_array_equal(a, reference(stack, "max"))
    np.testing.assert_array_equal(b, reference(stack, "sum"))
    np.testing.assert_array_equal(c, reference(stack, "sum")[:, ::-1])
    assert allocs_after_two == 2                      # no buffer shared by two requests
    assert allocs_same_size == 2                      # ... and reused afterwards
    np.testing.assert_array_equal(bc, rank_data(comm.size - 1, dtype))
    np.testing.assert_array_equal(g, stack)
    np.testing.assert_array_equal(rd, reference(stack, "sum") if comm.rank == 0 else rank_data(comm.rank, dtype))
    last = comm.rank == comm.size - 1
    np.testing.assert_array_equal(ird, reference(stack, "max") if last else rank_data(comm.rank, dtype))
    np.testing.assert_array_equal(ibc, rank_data(comm.size - 1, dtype))
    np.testing.assert_array_equal(ig, stack)
    full = reference(all_data(comm.size, dtype, (comm.size, 4)), "min")
    np.testing.assert_array_equal(rs, full[comm.rank: comm.rank + 1])
    np.testing.assert_array_equal(out, rank_data(comm.rank, dtype))
    assert cp.n_host >= 7 and cp.n_dev >= 5


# ---------------------------------------------------------------------------
# cupy arrays (skipped without a GPU)

@pytest.fixture(params=[False, True], ids=["staged", "cuda-aware"])
def gpu_mode(request, monkeypatch):
    from ddg.tensor import backend
    if not backend.cupy_available():
        pytest.skip("cupy with a GPU is not available")
    if request.param and not _mpi_reports_cuda_aware():
        pytest.skip("CUDA-aware path needs a CUDA-aware MPI build")
    from ddg.parallel.comm import mpi
    monkeypatch.setattr(mpi, "_cuda_aware", request.param)
    assert C.cuda_aware_mpi() is request.param
    return backend.cupy_module()


def _mpi_reports_cuda_aware():
    from mpi4py import MPI
    q = getattr(MPI, "Query_cuda_support", None)
    try:
        return bool(q()) if q else False
    except Exception:
        return False


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32"])
def test_cupy_collectives(comm, gpu_mode, dtype):
    cp = gpu_mode
    a = cp.asarray(rank_data(comm.rank, dtype))
    comm.allreduce(a, "sum")
    b = cp.asarray(rank_data(comm.rank, dtype))
    comm.iallreduce(b, "max").wait()
    c = cp.asarray(rank_data(comm.rank, dtype))
    comm.broadcast(c, 0)
    g = comm.allgather(cp.asarray(rank_data(comm.rank, dtype)))
    d = cp.asarray(rank_data(comm.rank, dtype))
    e = cp.asarray(rank_data(comm.rank, dtype))
    reqs = [comm.ireduce(d, comm.size - 1, "sum"), comm.ibroadcast(e, comm.size - 1),
            comm.iallgather(cp.asarray(rank_data(comm.rank, dtype)))]
    ig = reqs[2].wait()
    reqs[1].wait()
    reqs[0].wait()
    stack = all_data(comm.size, dtype)
    last = comm.rank == comm.size - 1
    assert isinstance(ig, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(d), reference(stack, "sum") if last else rank_data(comm.rank, dtype))
    np.testing.assert_array_equal(cp.asnumpy(e), rank_data(comm.size - 1, dtype))
    np.testing.assert_array_equal(cp.asnumpy(ig), stack)
    assert isinstance(a, cp.ndarray) and isinstance(g, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(a), reference(stack, "sum"))
    np.testing.assert_array_equal(cp.asnumpy(b), reference(stack, "max"))
    np.testing.assert_array_equal(cp.asnumpy(c), rank_data(0, dtype))
    np.testing.assert_array_equal(cp.asnumpy(g), stack)


# ---------------------------------------------------------------------------
# ddg.distributed on Tensors

def test_distributed_tensors(comm):
    import ddg
    import ddg.distributed as dist
    R, N = comm.rank, comm.size
    t = ddg.to_tensor(np.full(3, R + 1, dtype=np.float32))
    dist.all_reduce(t)
    avg = ddg.to_tensor(np.full(3, R + 1, dtype=np.float32))
    dist.all_reduce(avg, op=dist.ReduceOp.AVG, sync_op=False).wait()
    mx = ddg.to_tensor(np.array([R], dtype=np.int64))
    dist.all_reduce(mx, dist.ReduceOp.MAX)
    b = ddg.to_tensor(np.full(2, R, dtype=np.float64))
    dist.broadcast(b, src=N - 1)
    gathered = []
    dist.all_gather(gathered, ddg.to_tensor(np.array([R, -R], dtype=np.int32)))
    objs = ["keep"]
    dist.all_gather_object(objs, {"r": R})
    lst = [R, "x"] if R == 1 else [None, None]
    dist.broadcast_object_list(lst, src=1)
    red = ddg.to_tensor(np.full(2, R + 1, dtype=np.float32))
    dist.reduce(red, dst=0, op=dist.ReduceOp.SUM)
    sc = ddg.to_tensor(np.zeros(2, dtype=np.float32))
    parts = [ddg.to_tensor(np.full(2, 10 * r, dtype=np.float32)) for r in range(N)] if R == 0 else None
    dist.scatter(sc, parts, src=0)
    dist.barrier()

    tot = N * (N + 1) / 2
    np.testing.assert_array_equal(t.numpy(), np.full(3, tot, np.float32))
    np.testing.assert_allclose(avg.numpy(), np.full(3, tot / N, np.float32), rtol=1e-6)
    assert mx.numpy().tolist() == [N - 1]
    np.testing.assert_array_equal(b.numpy(), np.full(2, N - 1, np.float64))
    assert [g.numpy().tolist() for g in gathered] == [[r, -r] for r in range(N)]
    assert objs == ["keep"] + [{"r": r} for r in range(N)]
    assert lst == [1, "x"]
    np.testing.assert_array_equal(red.numpy(), np.full(2, tot if R == 0 else R + 1, np.float32))
    np.testing.assert_array_equal(sc.numpy(), np.full(2, 10 * R, np.float32))



def test_distributed_collectives_refuse_ranks_that_disagree(comm):
    """A rank that passes another shape, dtype, root or reduction, or calls another
    collective, makes every rank raise the same ValueError naming each rank's call (MPI
    truncated the message of an all_gather of other shapes and summed buffers of other
    dtypes); the world stays usable after it."""
    import ddg
    import ddg.distributed as dist
    R, N = comm.rank, comm.size
    odd = R == N - 1

    def f32(*shape):
        return ddg.to_tensor(np.zeros(shape, np.float32))
    cases = [
        (lambda: dist.all_gather([], f32(3 if odd else 2)), "float32[3]"),
        (lambda: dist.all_reduce(ddg.to_tensor(np.zeros(2, np.float64 if odd else np.float32))), "float64[2]"),
        (lambda: dist.all_reduce(f32(2), op=dist.ReduceOp.MAX if odd else dist.ReduceOp.SUM), "op='max'"),
        (lambda: dist.broadcast(f32(2), src=1 if odd else 0), "src=1"),
        (lambda: dist.reduce(f32(2, 2) if odd else f32(4), dst=0), "float32[2, 2]"),
        (lambda: dist.gather(ddg.to_tensor(np.zeros(2, np.int32 if odd else np.int64)), [] if R == 0 else None, dst=0),
         "int32[2]"),
        (lambda: dist.scatter(f32(3 if odd else 2), [f32(2) for _ in range(N)] if R == 0 else None, src=0),
         "float32[3]"),
        (lambda: (dist.all_reduce if odd else dist.broadcast)(f32(2)), f"rank {N - 1}: all_reduce("),
    ]
    results = []
    for call, needle in cases:
        try:
            call()
            results.append("no error")
        except ValueError as e:
            msg = str(e)
            results.append("ok" if f"rank {N - 1}:" in msg and needle in msg and "disagree" in msg else msg)
    t = ddg.to_tensor(np.ones(2, np.float32))
    dist.all_reduce(t)
    ok = results == ["ok"] * len(cases) and t.numpy().tolist() == [N, N]
    every = comm.allgather_object((ok, results))
    assert all(o for o, _ in every), every

def test_save_checkpoint(comm, tmp_path_factory):
    import ddg
    import ddg.distributed as dist
    # One shared path for all ranks: rank 0 chooses it.
    path = comm.bcast_object(str(tmp_path_factory.mktemp("ckpt") / "m.pdparams") if comm.rank == 0 else None)
    dist.save_checkpoint({"w": ddg.to_tensor(np.arange(3.0, dtype=np.float32)), "step": 7}, path)
    state = ddg.load(path)                           # every rank may read it right away
    comm.barrier()
    assert state["step"] == 7
    np.testing.assert_array_equal(np.asarray(state["w"].numpy() if hasattr(state["w"], "numpy")
                                             else state["w"]), np.arange(3.0, dtype=np.float32))


# -- gather, all-to-all, point to point, subgroups ------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "float32", "int64", "bool"])
def test_gather_alltoall_and_point_to_point(comm, dtype):
    R, N = comm.rank, comm.size
    g = comm.gather(rank_data(R, dtype), root=N - 1)
    rows = np.stack([rank_data(R * N + j, dtype) for j in range(N)])      # row j goes to rank j
    a2a = comm.alltoall(rows)
    a2a_strided = comm.alltoall(np.ascontiguousarray(np.swapaxes(rows, 1, 2)).swapaxes(1, 2))
    # a ring: send to the next rank, receive from the previous, non-contiguous buffers too
    nxt, prv = (R + 1) % N, (R - 1) % N
    out = np.zeros(SHAPE, dtype)[:, ::-1]
    reqs = [comm.isend(rank_data(R, dtype)[:, ::-1], nxt, tag=5), comm.irecv(out, prv, tag=5)]
    for q in reqs:
        q.wait()
    anyone = np.zeros(3, np.int64)
    if R == 0:
        for _ in range(N - 1):
            comm.recv(anyone, None, tag=9)           # from any rank
    else:
        comm.send(np.full(3, R, np.int64), 0, tag=9)
    comm.barrier()
    if R == N - 1:
        np.testing.assert_array_equal(g, all_data(N, dtype))
    else:
        assert g is None
    want = np.stack([rank_data(j * N + R, dtype) for j in range(N)])
    np.testing.assert_array_equal(a2a, want)
    np.testing.assert_array_equal(a2a_strided, want)
    np.testing.assert_array_equal(out, rank_data(prv, dtype)[:, ::-1])


def test_receives_from_any_rank_after_a_barrier(comm):
    # every rank sends two tag-11 messages and one tag-12 message to every other, then all
    # meet in a barrier before receiving from any rank (across nodes under MPICH/UCX, a
    # posted ANY_SOURCE receive would never match here); waited on newest first, the
    # receives still match oldest first: each sender's two messages arrive in order
    R, N = comm.rank, comm.size
    others = [r for r in range(N) if r != R]
    sends = [comm.isend(np.array([R, k, 11], np.int64), r, tag=11) for r in others for k in (0, 1)]
    sends += [comm.isend(np.array([R, 0, 12], np.int64), r, tag=12) for r in others]
    comm.barrier()
    got11 = [np.full(3, -1, np.int64) for _ in range(2 * len(others))]
    got12 = [np.full(3, -1, np.int64)[::1] for _ in others]
    recvs = [comm.irecv(b, None, tag=11) for b in got11] + [comm.irecv(b, None, tag=12) for b in got12]
    for q in reversed(recvs):
        q.wait()
    for q in sends:
        q.wait()
    assert sorted(map(tuple, got11)) == sorted((r, k, 11) for r in others for k in (0, 1))
    assert sorted(map(tuple, got12)) == sorted((r, 0, 12) for r in others)
    for r in others:
        assert [int(b[1]) for b in got11 if b[0] == r] == [0, 1]


def test_point_to_point_errors(comm):
    with pytest.raises(ValueError, match="cannot send to or from itself"):
        comm.send(np.ones(2), comm.rank)
    with pytest.raises(ValueError, match=r"peer must be a rank in \[0, "):
        comm.irecv(np.ones(2), comm.size)
    with pytest.raises(ValueError, match="first axis is the number of ranks"):
        comm.alltoall(np.ones((comm.size + 1, 2)))


def test_split_makes_subgroups(comm):
    R, N = comm.rank, comm.size
    members = list(range(N - 1, -1, -2))          # every other rank, counted from the last: reversed order
    sub = comm.split(members)
    with pytest.raises(ValueError, match="every rank must pass the same ranks"):
        comm.split([R])                            # ranks disagree: an error on every rank, no hang
    x = np.full(2, R + 1.0)
    if sub is not None:
        sub.allreduce(x)
        sub_rank, sub_size = sub.rank, sub.size
        sub.free()
    comm.barrier()
    if R in members:
        assert (sub_rank, sub_size) == (members.index(R), len(members))
        np.testing.assert_array_equal(x, np.full(2, sum(m + 1.0 for m in members)))
    else:
        assert sub is None
        np.testing.assert_array_equal(x, np.full(2, R + 1.0))


def test_distributed_groups_and_new_collectives(comm):
    import ddg
    import ddg.distributed as dist
    R, N = comm.rank, comm.size
    odd = dist.new_group([r for r in range(N) if r % 2 == 1])
    even = dist.new_group([r for r in range(N) if r % 2 == 0])
    world = dist.get_group()
    mine = odd if R % 2 else even
    t = ddg.to_tensor(np.full(2, R + 1.0, np.float32))
    dist.all_reduce(t, group=mine)
    # broadcast inside the group from its last member, given as a GLOBAL rank (Paddle)
    b = ddg.to_tensor(np.full(2, float(R), np.float32))
    dist.broadcast(b, src=mine.ranks[-1], group=mine)
    untouched = ddg.to_tensor(np.full(2, -1.0, np.float32))
    dist.all_reduce(untouched, group=odd if R % 2 == 0 else even)     # not a member: returns at once
    gl = []
    dist.gather(ddg.to_tensor(np.array([R, R * R], np.int64)), gl if R == 0 else None, dst=0)
    rs = ddg.to_tensor(np.zeros(3, np.float32))
    dist.reduce_scatter(rs, [ddg.to_tensor(np.full(3, 10.0 * R + j, np.float32)) for j in range(N)])
    outs = []
    dist.alltoall(outs, [ddg.to_tensor(np.array([100 * R + j], np.int64)) for j in range(N)])
    old_order = []
    dist.alltoall([ddg.to_tensor(np.array([100 * R + j], np.int64)) for j in range(N)], old_order)  # 2.6 order
    single_in = ddg.to_tensor(np.arange(2 * N, dtype=np.float32) + 1000 * R)
    single_out = ddg.to_tensor(np.zeros(2 * N, np.float32))
    dist.alltoall_single(single_out, single_in)
    # uneven blocks: rank r sends j+1 rows to rank j, and receives r+1 rows from each rank
    sizes_in = [j + 1 for j in range(N)]
    uneven_in = ddg.to_tensor(np.repeat(np.arange(N, dtype=np.float32), sizes_in) + 10 * R)
    uneven_out = ddg.to_tensor(np.zeros(N * (R + 1), np.float32))
    dist.alltoall_single(uneven_out, uneven_in, sizes_in, [R + 1] * N)
    ring = ddg.to_tensor(np.zeros(4, np.float32))
    tasks = dist.batch_isend_irecv([dist.P2POp(dist.isend, ddg.to_tensor(np.full(4, R, np.float32)), (R + 1) % N),
                                    dist.P2POp(dist.irecv, ring, (R - 1) % N)])
    for task in tasks:
        task.wait()
    objs = [None]
    if R == 0:
        dist.send_object_list([{"step": 3}, "hello"], dst=N - 1)
    elif R == N - 1:
        dist.recv_object_list(objs, src=0)
    scattered = []
    dist.scatter_object_list(scattered, [f"for {r}" for r in range(N)] if R == 1 else None, src=1)
    dist.barrier(group=mine)
    dist.destroy_process_group()
    dist.barrier()

    np.testing.assert_array_equal(t.numpy(), np.full(2, sum(r + 1.0 for r in mine.ranks), np.float32))
    np.testing.assert_array_equal(b.numpy(), np.full(2, float(mine.ranks[-1]), np.float32))
    np.testing.assert_array_equal(untouched.numpy(), np.full(2, -1.0, np.float32))
    assert world.nranks == N and world.rank == R and mine.rank == mine.ranks.index(R)
    assert (odd if R % 2 == 0 else even).rank == -1 and not (odd if R % 2 == 0 else even).is_member()
    if R == 0:
        assert [g.numpy().tolist() for g in gl] == [[r, r * r] for r in range(N)]
    np.testing.assert_array_equal(rs.numpy(), np.full(3, sum(10.0 * r + R for r in range(N)), np.float32))
    assert [o.numpy().tolist() for o in outs] == [[100 * j + R] for j in range(N)]
    assert [o.numpy().tolist() for o in old_order] == [[100 * j + R] for j in range(N)]
    np.testing.assert_array_equal(single_out.numpy(), np.concatenate(
        [np.arange(2 * N, dtype=np.float32)[2 * R:2 * R + 2] + 1000 * j for j in range(N)]))
    np.testing.assert_array_equal(uneven_out.numpy(), np.concatenate(
        [np.full(R + 1, R + 10.0 * j, np.float32) for j in range(N)]))
    np.testing.assert_array_equal(ring.numpy(), np.full(4, (R - 1) % N, np.float32))
    if R == N - 1:
        assert objs == [{"step": 3}, "hello"]
    assert scattered == [f"for {R}"]
    with pytest.raises(ValueError, match="destroyed"):
        dist.all_reduce(t, group=mine)


def test_staged_gather_alltoall_point_to_point_and_split(comm):
    # the GPU path without a GPU: device arrays staged through host buffers
    s = _Copies().make(comm)
    R, N = comm.rank, comm.size
    g = s.gather(rank_data(R, "float32"), root=0)
    a2a = s.alltoall(np.stack([rank_data(R * N + j, "int64") for j in range(N)]))
    got = np.zeros(SHAPE, np.float32)
    reqs = [s.isend(rank_data(R, "float32"), (R + 1) % N, tag=3), s.irecv(got, (R - 1) % N, tag=3)]
    for q in reqs:
        q.wait()
    sub = s.split([0, N - 1])
    x = np.full(2, R + 1.0)
    if sub is not None:
        sub.allreduce(x)
    comm.barrier()
    if R == 0:
        np.testing.assert_array_equal(g, all_data(N, "float32"))
    np.testing.assert_array_equal(a2a, np.stack([rank_data(j * N + R, "int64") for j in range(N)]))
    np.testing.assert_array_equal(got, rank_data((R - 1) % N, "float32"))
    assert (sub is not None) == (R in (0, N - 1)) and (sub is None or isinstance(sub, C.StagedCommunicator))
    if sub is not None:
        np.testing.assert_array_equal(x, np.full(2, 1.0 + N))
