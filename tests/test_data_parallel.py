"""DataParallel / SyncBatchNorm in one process, and whole jobs launched through ddgrun
in subprocesses (acceptance programs, abort on one rank's exception, the stall
watchdog, checkpoint resume)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.parallel.comm import launcher_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DDGRUN = os.path.join(ROOT, "launch", "ddgrun.py")
SHARED = os.environ.get("DDG_SHARED_DIR", os.path.join(ROOT, "..", "shared"))


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    for k in launcher_env.LAUNCHER_VARS + ("DDG_FORCE_MPI",):
        env.pop(k, None)
    return env


def run_job(n, script_args, timeout=60, extra_env=None, cwd=None):
    env = _env()
    env.update(extra_env or {})
    return subprocess.run([sys.executable, DDGRUN, "-n", str(n), sys.executable] + list(script_args),
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd or ROOT)




# ---------------------------------------------------------------------- world size 1
def test_world_size_one_is_a_transparent_wrapper():
    ddg.seed(0)
    ref = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    ddg.seed(0)
    inner = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    dp = ddg.DataParallel(inner)
    assert dp._layers is inner and dp.world_size == 1 and dp.reducer is None
    assert list(dp.state_dict()) == list(ref.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert [n for n, _ in dp.named_parameters()] == [n for n, _ in ref.named_parameters()]
    x = ddg.to_tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    dp(x).sum().backward()
    ref(x).sum().backward()
    for p, q in zip(dp.parameters(), ref.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    with dp.no_sync():
        dp(x).sum().backward()
    dp.eval()
    assert not inner.training and not inner[0].training
    dp.train()
    assert inner[0].training
    dp.set_state_dict(ref.state_dict())
    assert getattr(dp, "0") is inner[0]  # attribute access falls through to the wrapped layer
    assert dp.scale_loss(x) is x


def test_world_size_one_needs_no_mpi4py(tmp_path):
    script = tmp_path / "nompi.py"
    script.write_text(textwrap.dedent("""
        import sys
        sys.modules["mpi4py"] = None          # any "import mpi4py" now raises ImportError
        import numpy as np
        import ddg, ddg.distributed as dist
        from ddg import nn
        env = dist.init_parallel_env()
        assert env.world_size == 1 and env.rank == 0
        model = ddg.DataParallel(nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1)))
        x = ddg.to_tensor(np.ones((2, 3), np.float32))
        model(x).mean().backward()
        assert all(p.grad is not None for p in model.parameters())
        bn = nn.SyncBatchNorm(4)
        bn(ddg.ones([3, 4])).sum().backward()
        assert "mpi4py" not in sys.modules or sys.modules["mpi4py"] is None
        print("NOMPI OK")
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=_env())
    assert out.returncode == 0, out.stderr
    assert "NOMPI OK" in out.stdout


def test_bad_arguments():
    with pytest.raises(TypeError, match="ddg.nn.Layer"):
        ddg.DataParallel(object())
    with pytest.raises(ValueError, match="comm_buffer_size"):
        ddg.DataParallel(nn.Linear(2, 2), comm_buffer_size=0)
    with pytest.raises(TypeError, match="group"):
        ddg.DataParallel(nn.Linear(2, 2), group="world")


# ---------------------------------------------------------------------- SyncBatchNorm
def test_sync_batch_norm_gradcheck_and_stats():
    from ddg.parallel.comm import SingleProcessCommunicator
    from ddg.parallel.sync_batch_norm import _SyncStandardize
    rng = np.random.default_rng(0)
    x = ddg.to_tensor(rng.standard_normal((4, 3, 2, 5)) * 3 + 1, stop_gradient=False)
    w = ddg.to_tensor(rng.standard_normal((4, 3, 2, 5)))
    op = lambda a: _SyncStandardize((0, 2, 3), 1e-5, SingleProcessCommunicator())(a)[0] * w  # noqa: E731
    assert ddg.autograd.gradcheck(op, [x])
    bn = nn.SyncBatchNorm(3, momentum=0.8)
    xs = rng.standard_normal((6, 3, 4, 4)).astype(np.float32) * 2 + 5
    y = bn(ddg.to_tensor(xs)).numpy()
    ref = (xs - xs.mean(axis=(0, 2, 3), keepdims=True)) / np.sqrt(xs.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bn._mean.numpy(), 0.2 * xs.mean(axis=(0, 2, 3)), rtol=1e-5)
    np.testing.assert_allclose(bn._variance.numpy(), 0.8 + 0.2 * xs.var(axis=(0, 2, 3)), rtol=1e-5)
    bn.eval()
    np.testing.assert_allclose(bn(ddg.to_tensor(xs)).numpy(),
                               (xs - bn._mean.numpy()[:, None, None]) /
                               np.sqrt(bn._variance.numpy()[:, None, None] + 1e-5), rtol=1e-4, atol=1e-4)
    nhwc = nn.SyncBatchNorm(3, data_format="NHWC")
    assert nhwc(ddg.to_tensor(xs.transpose(0, 2, 3, 1))).shape == [6, 4, 4, 3]
    with pytest.raises(ValueError, match="channels"):
        bn(ddg.ones([2, 4, 3, 3]))


# ---------------------------------------------------------------------- checkpoint resume
RESUME = textwrap.dedent("""
    import sys, os
    import numpy as np
    import ddg, ddg.distributed as dist
    from ddg import nn
    import ddg.nn.functional as F
    dist.init_parallel_env()
    rank, world = dist.get_rank(), dist.get_world_size()
    ckpt, total, stop_at, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    ddg.seed(3)
    model = ddg.DataParallel(nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.3), nn.Linear(16, 3)))
    opt = ddg.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    X = np.random.default_rng(0).standard_normal((40, 6)).astype(np.float32)
    Y = (np.arange(40) % 3).astype(np.int64)
    sampler = ddg.io.DistributedBatchSampler(ddg.io.TensorDataset([ddg.to_tensor(X), ddg.to_tensor(Y)]),
                                             batch_size=4, shuffle=True)
    loader = ddg.io.DataLoader(sampler.dataset, batch_sampler=sampler)
    start = 0
    if os.path.exists(ckpt):
        state = ddg.load(ckpt)
        model.set_state_dict(state["model"])
        opt.set_state_dict(state["opt"])
        start = state["epoch"] + 1
        ddg.set_rng_state(state["rng"][rank])
    for epoch in range(start, total):
        sampler.set_epoch(epoch)
        for x, y in loader:
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.clear_grad()
        rngs = []
        dist.all_gather_object(rngs, ddg.get_rng_state())
        dist.save_checkpoint({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch,
                              "rng": rngs}, ckpt)
        if epoch + 1 == stop_at:
            break
    if rank == 0:
        np.save(out, np.concatenate([p.numpy().ravel() for p in model.parameters()]))
    print("RESUME OK", rank)
""")


def test_resume_continues_exactly(tmp_path):
    script = tmp_path / "resume.py"
    script.write_text(RESUME)
    a, b = str(tmp_path / "a.pdckpt"), str(tmp_path / "b.pdckpt")
    full = run_job(2, [str(script), a, "4", "99", str(tmp_path / "full.npy")])
    assert full.returncode == 0, full.stderr[-3000:]
    part1 = run_job(2, [str(script), b, "4", "2", str(tmp_path / "half.npy")])
    assert part1.returncode == 0, part1.stderr[-3000:]
    part2 = run_job(2, [str(script), b, "4", "99", str(tmp_path / "resumed.npy")])
    assert part2.returncode == 0, part2.stderr[-3000:]
    np.testing.assert_array_equal(np.load(tmp_path / "full.npy"), np.load(tmp_path / "resumed.npy"))
    assert not np.array_equal(np.load(tmp_path / "half.npy"), np.load(tmp_path / "full.npy"))


# ---------------------------------------------------------------------- whole jobs
@pytest.mark.parametrize("n", [1, 2, 3])
def test_acceptance_equivalence(n):
    path = os.path.join(SHARED, "acceptance", "ddp_equivalence.py")
    assert os.path.exists(path), f"acceptance program not found: {path}"
    out = run_job(n, [path])
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("ddp_equivalence OK") == n


def test_acceptance_control_flow():
    path = os.path.join(SHARED, "acceptance", "ddp_control_flow.py")
    assert os.path.exists(path), f"acceptance program not found: {path}"
    out = run_job(2, [path])
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("ddp_control_flow OK") == 2


def test_exception_on_one_rank_aborts_the_job(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text(textwrap.dedent("""
        import time, ddg, ddg.distributed as dist
        from ddg import nn
        dist.init_parallel_env()
        model = ddg.DataParallel(nn.Linear(3, 3))
        if dist.get_rank() == 1:
            raise RuntimeError("boom on purpose")
        model(ddg.ones([2, 3])).sum().backward()   # rank 0 would wait here forever
        time.sleep(30)
    """))
    out = run_job(2, [str(script)], timeout=40)
    assert out.returncode != 0
    assert "[rank 1] RuntimeError: boom on purpose" in out.stderr
    assert "[rank 1] Traceback" in out.stderr


def test_stall_watchdog_names_rank_and_collective(tmp_path):
    script = tmp_path / "stall.py"
    script.write_text(textwrap.dedent("""
        import time, ddg.distributed as dist
        dist.init_parallel_env()
        if dist.get_rank() == 1:
            time.sleep(60)                 # rank 0 waits in the barrier meanwhile
        dist.barrier()
        print("STALL DONE")
    """))
    out = run_job(2, [str(script)], timeout=40, extra_env={"DDG_STALL_TIMEOUT": "1"})
    # the watchdog reports the stall, then ends the whole job, non-zero
    assert out.returncode != 0, out.stderr
    assert "STALL DONE" not in out.stdout
    assert "[rank 0] stalled for" in out.stderr and "in barrier" in out.stderr, out.stderr
    assert "ending the job (DDG_STALL_TIMEOUT=1 s)" in out.stderr
