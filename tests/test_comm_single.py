"""The single-process communicator and environment: no MPI launcher, no mpi4py.

Also the parts of ddg.parallel that need no second rank: the host buffer pool,
staging with numpy stand-ins for device copies, the stall watchdog's report, and
the world-detection logic.
"""
import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ddg  # noqa: F401  (registers 'bfloat16' with numpy, through ml_dtypes)
from ddg.parallel import comm as C
from ddg.parallel.comm import failfast as F
from ddg.parallel.comm import launcher_env

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64", "bool"]

def _clean_env(**extra):
    env = launcher_env.without_launcher()
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _data(dtype, shape=(3, 4)):
    a = np.arange(int(np.prod(shape))).reshape(shape) % 5
    return a.astype(dtype)


def test_no_mpi4py_imported_in_a_single_process():
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import ddg.parallel as P
        import ddg.distributed as dist
        env = P.init_parallel_env()
        c = P.get_world_communicator()
        assert type(c).__name__ == "SingleProcessCommunicator", c
        assert (P.get_rank(), P.get_world_size()) == (0, 1)
        assert (env.rank, env.world_size, env.local_rank, env.nranks, env.device_id) == (0, 1, 0, 1, 0)
        a = np.arange(4.0)
        c.allreduce(a, "avg"); c.iallreduce(a).wait(); c.broadcast(a, 0); c.barrier()
        assert dist.is_initialized()
        assert 'mpi4py' not in sys.modules, "mpi4py was imported"
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], env=_clean_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_force_mpi_off_wins_over_launcher_variables():
    assert C.launched_under_mpi({"PMI_RANK": "0", "DDG_FORCE_MPI": "0"}) is False
    assert C.launched_under_mpi({"DDG_FORCE_MPI": "1"}) is True
    assert C.launched_under_mpi({"OMPI_COMM_WORLD_SIZE": "4"}) is True
    assert C.launched_under_mpi({"HOME": "/"}) is False


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", C.REDUCE_OPS)
def test_single_allreduce_is_identity(dtype, op):
    c = C.SingleProcessCommunicator()
    a = _data(dtype)
    ref = a.copy()
    if op == "avg" and np.dtype(dtype).kind not in "fcV":
        with pytest.raises(TypeError, match="allreduce.*avg"):
            c.allreduce(a, op)
        return
    assert c.allreduce(a, op) is a
    np.testing.assert_array_equal(a, ref)
    req = c.iallreduce(a, op)
    assert req.test()
    assert req.wait() is a
    np.testing.assert_array_equal(a, ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_single_data_movement(dtype):
    c = C.SingleProcessCommunicator()
    a = _data(dtype)
    assert c.broadcast(a, 0) is a
    g = c.allgather(a)
    assert g.shape == (1, 3, 4) and g.dtype == a.dtype
    np.testing.assert_array_equal(g[0], a)
    np.testing.assert_array_equal(c.reduce_scatter(a, "sum"), a)
    np.testing.assert_array_equal(c.reduce(a.copy(), 0, "max"), a)
    s = c.scatter([a], 0)
    np.testing.assert_array_equal(s, a)
    out = np.zeros_like(a)
    assert c.scatter([a], 0, out=out) is out
    np.testing.assert_array_equal(out, a)
    # the non-blocking forms: complete at once, same results, same argument checks
    ref = a.copy()
    r = c.ireduce(a, 0, "max")
    assert r.test() and r.wait() is a
    r = c.ibroadcast(a, 0)
    assert r.test() and r.wait() is a
    np.testing.assert_array_equal(a, ref)
    g2 = c.iallgather(a).wait()
    assert g2.shape == (1, 3, 4) and g2 is not a
    np.testing.assert_array_equal(g2[0], a)
    with pytest.raises(ValueError, match="root"):
        c.ibroadcast(a, 1)
    with pytest.raises(ValueError, match="root"):
        c.ireduce(a, 1)


def test_single_objects_and_errors():
    c = C.SingleProcessCommunicator()
    assert c.allgather_object({"a": 1}) == [{"a": 1}]
    assert c.bcast_object([1, 2], 0) == [1, 2]
    assert c.gather_object("x", 0) == ["x"]
    c.barrier()
    with pytest.raises(ValueError, match="unknown reduce op"):
        c.allreduce(np.ones(2), "mean")
    with pytest.raises(ValueError, match="broadcast.*root"):
        c.broadcast(np.ones(2), 1)
    with pytest.raises(TypeError, match="allreduce.*array"):
        c.allreduce([1.0, 2.0])
    with pytest.raises(TypeError, match="allreduce.*float64"):
        c.allreduce(np.float64(1.0))
    with pytest.raises(ValueError, match="scatter"):
        c.scatter([np.ones(2), np.ones(2)], 0)


def test_op_names_are_case_insensitive():
    from ddg.distributed import ReduceOp
    from ddg.parallel.comm.util import normalize_op
    for spelling, want in [("SUM", "sum"), ("Avg", "avg"), ("max", "max"), ("MiN", "min"), ("PROD", "prod"),
                           (ReduceOp.SUM, "sum"), (ReduceOp.MAX, "max"), (ReduceOp.MIN, "min"),
                           (ReduceOp.PROD, "prod"), (ReduceOp.AVG, "avg")]:
        assert normalize_op(spelling, "allreduce") == want, spelling
    c = C.SingleProcessCommunicator()
    x = np.array([1.5, -2.0])
    for op in ("SUM", ReduceOp.PROD, "Max", ReduceOp.AVG):
        out = c.allreduce(x.copy(), op)     # one rank: every reduction returns its input
        np.testing.assert_array_equal(out, x)
    for bad in ("summ", "mean", ""):
        with pytest.raises(ValueError, match="unknown reduce op"):
            c.allreduce(x.copy(), bad)


def test_host_buffer_pool_reuses_and_never_double_hands_out():
    pool = C.HostBufferPool()
    a = pool.acquire(64)
    b = pool.acquire(64)
    assert a is not b and pool.allocations == 2
    pool.release(a)
    assert pool.acquire(64) is a and pool.allocations == 2
    v = pool.view(b, np.float32, (4, 4))
    assert v.shape == (4, 4) and v.dtype == np.float32 and v.flags.c_contiguous


class _FakeDevice:
    """Counts the copies StagedCommunicator makes. numpy arrays stand in for device
    arrays here; only the staging logic is under test, not any GPU."""

    def __init__(self):
        self.to_host = self.to_device = self.new = 0

    def comm(self, inner):
        def to_host(dev, host):
            self.to_host += 1
            assert host.flags.c_contiguous and host.shape == dev.shape and host.dtype == dev.dtype
            host[...] = dev

        def to_device(host, dev):
            self.to_device += 1
            dev[...] = host

        def new_device(host):
            self.new += 1
            return np.array(host)

        return C.StagedCommunicator(inner, to_host, to_device, new_device)


def test_staged_single_process_round_trips():
    dev = _FakeDevice()
    s = dev.comm(C.SingleProcessCommunicator())
    a = np.arange(12.0).reshape(3, 4)[:, ::2]        # non-contiguous "device" array
    ref = a.copy()
    assert s.allreduce(a, "avg") is a
    np.testing.assert_array_equal(a, ref)
    assert (dev.to_host, dev.to_device) == (1, 1)
    r = s.iallreduce(a, "sum")
    assert r.test() and r.wait() is a
    assert s.pool.allocations == 1                   # same nbytes: buffer reused
    np.testing.assert_array_equal(s.allgather(a)[0], ref)
    np.testing.assert_array_equal(s.reduce_scatter(a), ref)
    out = np.zeros_like(ref)
    s.scatter([ref], 0, out=out)
    np.testing.assert_array_equal(out, ref)


def test_stall_watchdog_reports_once():
    c = C.SingleProcessCommunicator()
    buf = io.StringIO()
    w = F.StallWatchdog(c, timeout=5, stream=buf)
    assert w.check(now=100.0) is None                # nothing running
    c._begin(("allreduce", np.zeros((4, 2), np.float32), "sum"))
    start = c.activity()[1]
    assert w.check(now=start + 1) is None            # not yet stalled
    msg = w.check(now=start + 7)
    assert msg == "[rank 0] stalled for 7 s in allreduce (float32[4, 2], op=sum)\n"
    assert w.check(now=start + 20) is None           # reported once per stall
    c._end()
    assert w.check(now=start + 30) is None
    assert buf.getvalue() == msg


def test_stall_watchdog_thread_prints(capfd):
    import time
    c = C.SingleProcessCommunicator()
    w = F.StallWatchdog(c, timeout=0.1, period=0.02).start()
    try:
        c._begin(("barrier", None, ""))
        time.sleep(0.4)
        c._end()
    finally:
        w.stop()
    err = capfd.readouterr().err
    assert err.count("stalled for") == 1 and "in barrier" in err and err.startswith("[rank 0] ")


def test_distributed_face_single_process():
    import ddg
    import ddg.distributed as dist
    from ddg.tensor import tensor as T
    t = ddg.to_tensor(np.arange(4, dtype=np.float32))
    assert dist.all_reduce(t) is None
    np.testing.assert_array_equal(t.numpy(), np.arange(4, dtype=np.float32))
    task = dist.all_reduce(t, op=dist.ReduceOp.AVG, sync_op=False)
    task.wait()
    out = []
    dist.all_gather(out, t)
    assert len(out) == 1 and isinstance(out[0], T.Tensor)
    np.testing.assert_array_equal(out[0].numpy(), t.numpy())
    objs = []
    dist.all_gather_object(objs, {"r": 0})
    assert objs == [{"r": 0}]
    lst = ["a", 1]
    dist.broadcast_object_list(lst, src=0)
    assert lst == ["a", 1]
    dist.broadcast(t, src=0)
    dist.reduce(t, dst=0)
    recv = ddg.to_tensor(np.zeros(4, dtype=np.float32))
    dist.scatter(recv, [t], src=0)
    np.testing.assert_array_equal(recv.numpy(), t.numpy())
    dist.barrier()
    with pytest.raises(TypeError, match="all_reduce"):
        dist.all_reduce(np.ones(3))


def test_distributed_helpers_in_one_process():
    import ddg
    import ddg.distributed as dist
    g = dist.new_group([0])
    assert (g.rank, g.nranks, g.ranks, g.is_member()) == (0, 1, [0], True) and dist.get_group(g.id) is g
    assert dist.get_backend() == "SINGLE" and dist.is_available()
    t = ddg.to_tensor(np.arange(3, dtype=np.float32))
    gl = []
    dist.gather(t, gl, dst=0, group=g)
    rs = ddg.to_tensor(np.zeros(3, np.float32))
    dist.reduce_scatter(rs, [t * 2])
    outs = []
    dist.alltoall(outs, [t])
    single = ddg.to_tensor(np.zeros(3, np.float32))
    dist.alltoall_single(single, t)
    objs = []
    dist.scatter_object_list(objs, ["only"])
    assert [x.numpy().tolist() for x in gl] == [[0.0, 1.0, 2.0]] and objs == ["only"]
    assert rs.numpy().tolist() == [0.0, 2.0, 4.0] and outs[0].numpy().tolist() == [0.0, 1.0, 2.0]
    assert single.numpy().tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="cannot send to or from itself"):
        dist.send(t, dst=0)
    with pytest.raises(ValueError, match="one tensor per rank"):
        dist.reduce_scatter(rs, [t, t])
    dist.destroy_process_group(g)
    with pytest.raises(ValueError, match="destroyed"):
        dist.all_reduce(t, group=g)


def test_watchdog_timings_come_from_the_environment():
    assert F.stall_timeout({}) == F.DEFAULT_STALL_TIMEOUT and F.stall_timeout({"DDG_STALL_TIMEOUT": "0"}) == 0
    assert F.exit_grace({}) == 3.0 and F.exit_grace({"DDG_EXIT_GRACE": " 0.25 "}) == 0.25
    for name, fn in (("DDG_STALL_TIMEOUT", F.stall_timeout), ("DDG_EXIT_GRACE", F.exit_grace)):
        for bad in ("soon", "-1", "nan"):
            with pytest.raises(ValueError, match=name):
                fn({name: bad})
