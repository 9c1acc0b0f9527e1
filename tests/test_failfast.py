"""Failures that could hang a job or let it report success: each must end the whole
job, non-zero and promptly, at 2 and 3 ranks, under ddgrun and under plain mpiexec
(a rank that fails before ``import ddg`` under plain mpiexec: after DDG_STALL_TIMEOUT),
on one node and across two simulated nodes (a hostfile naming this machine twice, so
that hydra starts one proxy per "node" and ranks on different nodes talk over the
network transport; see tests/multinode.py).

Each case runs a small program as a user would and bounds the job's time well below
the suite's timeout; the time from the fault to the job's end is printed (``-s``)."""
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from ddg.parallel.comm import launcher_env
from launch import ddgrun

import multinode

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))




def _launches(*cases):
    return [pytest.param(launcher, n, ppn, id=f"{launcher}-{n}" + (f"-{ppn}pernode" if ppn else ""))
            for launcher, n, ppn in cases]


# (launcher, ranks, ranks per node): None = all on this node; 1 or 2 = two "nodes" (with
# 3 ranks at 2 per node, ranks 0 and 1 share a node and rank 2 is alone on the other)
LAUNCHES = _launches(("ddgrun", 2, None), ("ddgrun", 3, None), ("mpiexec", 2, None), ("ddgrun", 2, 1),
                     ("mpiexec", 3, 2))
# fewer jobs for the slower faults (each waits out a stall timeout), still one node and two,
# ddgrun and plain mpiexec, 2 and 3 ranks between them
FEWER = _launches(("mpiexec", 3, None), ("ddgrun", 2, 1), ("mpiexec", 3, 2))


def _env(**extra):
    env = launcher_env.without_launcher(also=("DDG_FORCE_MPI", "DDG_STALL_TIMEOUT"))
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["DDG_PYTHON"] = sys.executable
    env["OMP_NUM_THREADS"] = "1"
    env["DDG_EXIT_GRACE"] = "0.5"    # the default 3 s only makes each job slower to end
    env.update(extra)
    return env


def run(launcher, n, tmp_path, body, timeout=45, per_node=None, **extra_env):
    """Run ``body`` on ``n`` ranks, ``per_node`` ranks on each of two simulated nodes
    (None: all on this one); returns (completed process, seconds it took)."""
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(body))
    nodes = [] if per_node is None else multinode.hostfile_args(tmp_path, per_node)
    if launcher == "ddgrun":
        cmd = [sys.executable, "-m", "launch.ddgrun", "-n", str(n)] + nodes + [sys.executable, str(prog)]
    else:
        cmd = [ddgrun.find_mpiexec(), "-n", str(n)] + nodes + [sys.executable, str(prog)]
    t0 = time.monotonic()
    out = subprocess.run(cmd, env=_env(**extra_env), capture_output=True, text=True, timeout=timeout, cwd=REPO)
    took = time.monotonic() - t0
    print(f"\n{launcher} -n {n} {nodes}: exit {out.returncode} after {took:.1f} s")
    return out, took


@pytest.mark.parametrize("launcher,n,per_node", LAUNCHES)
def test_uneven_step_counts_end_the_job(launcher, n, per_node, tmp_path):
    # rank 0 runs one step more: its extra all-reduce has no partner
    out, took = run(launcher, n, tmp_path, per_node=per_node, body="""
        import ddg, ddg.distributed as dist
        from ddg import nn
        dist.init_parallel_env()
        model = ddg.DataParallel(nn.Linear(4, 2))
        for step in range(3 if dist.get_rank() == 0 else 2):
            model(ddg.ones([8, 4])).sum().backward()
        print("FINISHED", dist.get_rank(), flush=True)
    """)
    assert out.returncode != 0
    assert "[rank 0] stalled for" in out.stderr and "iallreduce.wait (float32[" in out.stderr, out.stderr
    assert "has already left" in out.stderr and "model.join()" in out.stderr
    assert took < 30


@pytest.mark.parametrize("launcher,n,per_node", LAUNCHES)
@pytest.mark.parametrize("code", [0, 3])
def test_sys_exit_on_one_rank_ends_the_job(launcher, n, per_node, code, tmp_path):
    out, took = run(launcher, n, tmp_path, per_node=per_node, body=f"""
        import sys
        import numpy as np
        import ddg.distributed as dist
        dist.init_parallel_env()
        if dist.get_rank() == {n - 1}:
            sys.exit({code})
        dist.all_reduce(__import__("ddg").ones([5]))     # the last rank never comes
        print("REDUCED", flush=True)
    """)
    assert out.returncode != 0
    assert "REDUCED" not in out.stdout
    assert f"rank {n - 1} has already left" in out.stderr, out.stderr
    assert took < 30


@pytest.mark.parametrize("launcher,n,per_node", LAUNCHES)
def test_exception_without_init_parallel_env_ends_the_job(launcher, n, per_node, tmp_path):
    # a bare DataParallel: the abort hook comes with the world communicator
    out, took = run(launcher, n, tmp_path, per_node=per_node, body="""
        import time
        import ddg
        from ddg import nn
        model = ddg.DataParallel(nn.Linear(3, 3))
        if ddg.distributed.get_rank() == 1:
            raise RuntimeError("boom on purpose")
        model(ddg.ones([2, 3])).sum().backward()       # would wait for rank 1 forever
        time.sleep(60)
    """)
    assert out.returncode != 0
    assert "[rank 1] RuntimeError: boom on purpose" in out.stderr
    assert took < 30


def _fails_before_import_ddg(fail):
    """A program whose rank 1 runs ``fail`` before it imports ddg; the others meet in a barrier."""
    return f"""
        import os, sys
        if os.environ.get("PMI_RANK") == "1":
            {fail}
        import ddg
        ddg.distributed.init_parallel_env()
        ddg.distributed.barrier()
        print("PASSED THE BARRIER", flush=True)
    """


RANKS = [pytest.param(n, ppn, id=f"{n}" + (f"-{ppn}pernode" if ppn else "")) for n, ppn in [(2, None), (3, 2)]]


@pytest.mark.parametrize("n,per_node", RANKS)
@pytest.mark.parametrize("how", ["import", "exit"])
def test_failure_before_import_ddg_ends_a_ddgrun_job(how, n, per_node, tmp_path):
    # one rank fails before it even imports ddg: ddgrun's rank guard ends the job at once
    fail = "import a_module_that_is_not_there" if how == "import" else "sys.exit(4)"
    out, took = run("ddgrun", n, tmp_path, _fails_before_import_ddg(fail), per_node=per_node)
    assert out.returncode != 0
    assert "PASSED THE BARRIER" not in out.stdout
    assert "[ddgrun] rank 1 failed before the job's first collective" in out.stdout
    if how == "import":
        assert "[rank 1] ModuleNotFoundError: No module named 'a_module_that_is_not_there'" in out.stderr, out.stderr
        assert "rank_guard" not in out.stderr and "runpy" not in out.stderr     # the user's frames only
        assert out.returncode == 1
    else:
        assert out.returncode == 4
    assert took < 30


@pytest.mark.parametrize("n,per_node", RANKS)
@pytest.mark.parametrize("how", ["import", "exit0"])
def test_failure_before_import_ddg_ends_a_plain_mpiexec_job(how, n, per_node, tmp_path):
    # plain mpiexec: the other ranks wait inside MPI_Init for the rank that never came;
    # ddg's MPI_Init watchdog ends them after DDG_STALL_TIMEOUT (here 2 s)
    fail = "import a_module_that_is_not_there" if how == "import" else "sys.exit(0)"
    out, took = run("mpiexec", n, tmp_path, _fails_before_import_ddg(fail), per_node=per_node,
                    DDG_STALL_TIMEOUT="2")
    assert out.returncode != 0
    assert "PASSED THE BARRIER" not in out.stdout
    assert "] ddg: MPI_Init has not returned after 2 s (DDG_STALL_TIMEOUT)" in out.stderr, out.stderr
    assert took < 30


@pytest.mark.parametrize("launcher,n,per_node", FEWER[1:])     # on one node: test_launcher.py
def test_rank_killed_by_sigkill_ends_the_job(launcher, n, per_node, tmp_path):
    out, took = run(launcher, n, tmp_path, per_node=per_node, body="""
        import os, signal, time
        import ddg, ddg.distributed as dist
        dist.init_parallel_env()
        if dist.get_rank() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce(ddg.ones([3]))
        print("REDUCED", flush=True)
    """)
    assert out.returncode != 0 and "REDUCED" not in out.stdout
    if launcher == "ddgrun" and per_node is None:
        # across nodes hydra's proxy fails instead (mpiexec exits 255, with no signal report)
        assert out.returncode == 128 + 9, (out.returncode, out.stderr)
    assert took < 30


@pytest.mark.parametrize("launcher,n,per_node", FEWER[:2])
def test_frozen_rank_ends_the_job(launcher, n, per_node, tmp_path):
    # rank 1 stops dead (SIGSTOP: not even its own threads run) while the others wait for it
    # in a collective; their stall watchdog ends the job after DDG_STALL_TIMEOUT
    out, took = run(launcher, n, tmp_path, per_node=per_node, DDG_STALL_TIMEOUT="3", body="""
        import os, signal
        import ddg, ddg.distributed as dist
        dist.init_parallel_env()
        if dist.get_rank() == 1:
            os.kill(os.getpid(), signal.SIGSTOP)
        dist.all_reduce(ddg.ones([3]))
        print("REDUCED", flush=True)
    """)
    assert out.returncode != 0 and "REDUCED" not in out.stdout
    # whichever waiting rank's watchdog fires first ends the job
    # (in ddg.distributed.all_reduce's check that the ranks agree, which runs first)
    assert re.search(r"\[rank [02]\] stalled for \d+ s in all_reduce \(float32\[3\], op=sum; checking that the "
                     r"ranks agree\); ending the job", out.stderr), out.stderr
    assert took < 30


@pytest.mark.parametrize("launcher,n,per_node", _launches(("ddgrun", 2, None), ("mpiexec", 3, 2)))
def test_ranks_waiting_at_exit_for_a_frozen_rank_end_the_job(launcher, n, per_node, tmp_path):
    # every rank but 1 finishes its program; rank 1 is frozen outside any collective, so only
    # the exit wait can notice: it ends the job after DDG_STALL_TIMEOUT, naming rank 1
    out, took = run(launcher, n, tmp_path, per_node=per_node, DDG_STALL_TIMEOUT="3", body="""
        import os, signal
        import ddg.distributed as dist
        dist.init_parallel_env()
        dist.barrier()
        if dist.get_rank() == 1:
            os.kill(os.getpid(), signal.SIGSTOP)
        print("FINISHED", dist.get_rank(), flush=True)
    """)
    assert out.returncode != 0
    assert re.search(r"\[rank [02]\] ddg: this rank's program ended 3 s ago, but rank 1 has not finished yet "
                     r"\(DDG_STALL_TIMEOUT\); ending the job", out.stderr), out.stderr
    assert took < 30


def test_rank_guard_runs_scripts_and_modules_as_python_does(tmp_path):
    (tmp_path / "helper_mod.py").write_text("VALUE = 42\n")
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import sys, helper_mod
        print(__name__, sys.argv[1:], helper_mod.VALUE)
    """))
    env = _env()
    guard = os.path.join(REPO, "launch", "rank_guard.py")
    r = subprocess.run([sys.executable, guard, str(tmp_path / "prog.py"), "a", "--b"], env=env, cwd=str(tmp_path.parent),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["__main__", "['a',", "'--b']", "42"], r.stderr
    r = subprocess.run([sys.executable, guard, "-m", "prog", "x"], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["__main__", "['x']", "42"], r.stderr
    # outside an MPI job exit statuses pass through unchanged
    (tmp_path / "bad.py").write_text("import sys; sys.exit(6)\n")
    r = subprocess.run([sys.executable, guard, str(tmp_path / "bad.py")], env=env, capture_output=True, timeout=60)
    assert r.returncode == 6


@pytest.mark.parametrize("launcher,n,per_node", LAUNCHES)
def test_failure_before_the_world_exists_ends_the_job(launcher, n, per_node, tmp_path):
    # one rank fails between `import ddg` and its first collective (MPI not initialized)
    out, took = run(launcher, n, tmp_path, per_node=per_node, body="""
        import ddg
        from ddg.parallel.comm import launcher_env
        if launcher_env.launcher_rank() == 1:
            import a_module_that_is_not_there
        ddg.distributed.init_parallel_env()
        ddg.distributed.barrier()
        print("PASSED THE BARRIER", flush=True)
    """)
    assert out.returncode != 0
    assert "PASSED THE BARRIER" not in out.stdout
    assert "[rank 1] ModuleNotFoundError: No module named 'a_module_that_is_not_there'" in out.stderr
    assert took < 30


def test_launcher_and_mpi_library_mismatch_is_an_error(tmp_path):
    # Open MPI's mpirun in front of an mpi4py built on MPICH (the reverse of the GPU test
    # machine's trap): MPI sees a world of 1 where the launcher started 2
    prog = tmp_path / "prog.py"
    prog.write_text("import ddg.distributed as dist\ndist.init_parallel_env()\nprint('TRAINED ALONE')\n")
    env = _env(OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="1")
    out = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True, timeout=45)
    assert out.returncode != 0
    assert "TRAINED ALONE" not in out.stdout
    err = out.stderr
    assert "the launcher and the MPI library do not match" in err and "one of 2 ranks" in err
    assert "sees a world of 1" in err and "DDG_MPIEXEC" in err and "DDG_FORCE_MPI=0" in err
    # DDG_FORCE_MPI=0 is the explicit way to run single-process anyway
    out = subprocess.run([sys.executable, str(prog)], env=dict(env, DDG_FORCE_MPI="0"), capture_output=True,
                         text=True, timeout=45)
    assert out.returncode == 0 and "TRAINED ALONE" in out.stdout, out.stderr


class _Request:
    def __init__(self, done):
        self.done, self.cancelled, self.freed = done, False, False

    def Test(self):
        return self.done

    def Cancel(self):
        self.cancelled = True

    def Free(self):
        self.freed = True


class _MPI:
    """What the exit handshake uses of mpi4py's MPI, with requests that complete or never do."""
    BYTE, REQUEST_NULL = "byte", None

    class Request:
        @staticmethod
        def Testall(requests):
            return all(r.Test() for r in requests)

    @staticmethod
    def Is_finalized():
        return False


class _GoodbyeComm:
    def __init__(self, arrived, barrier_done):
        self.arrived, self.barrier_done, self.requests = arrived, barrier_done, {}

    def Isend(self, buf, dest, tag):
        return _Request(True)

    def Irecv(self, buf, source, tag):
        assert source >= 0, "the exit handshake must receive from named ranks, never ANY_SOURCE"
        self.requests[source] = _Request(source in self.arrived)
        return self.requests[source]

    def Ibarrier(self):
        return _Request(self.barrier_done)


@pytest.mark.parametrize("case", ["complete", "goodbye lost", "rank never arrives"])
def test_exit_handshake_is_bounded(case, monkeypatch, capsys):
    # rank 0 of 3 at exit: every goodbye arrives / rank 2's never does although every rank
    # reached the exit barrier / rank 2 never reaches it. No case may wait unboundedly.
    from ddg.parallel.comm import failfast
    monkeypatch.setattr(failfast, "_EXIT_DRAIN", 0.2)
    aborted = []
    monkeypatch.setattr(failfast, "_abort", aborted.append)

    class World:
        rank, size = 0, 3

    class Watchdog:
        comm, stopped = "the world", False

        def stop(self):
            self.stopped = True

    comm = _GoodbyeComm(arrived={1, 2} if case == "complete" else {1}, barrier_done=case != "rank never arrives")
    watchdog = Watchdog()
    t0 = time.monotonic()
    failfast._leave(failfast._Goodbye(World, comm, _MPI), watchdog, 0.3)
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert watchdog.stopped and took < 5
    if case == "complete":
        assert err == "" and not aborted
    elif case == "goodbye lost":
        assert err == ("[rank 0] ddg: every rank reached its exit, but the exit handshake did not complete "
                       "within 0.2 s (goodbyes from ranks [2] not received); exiting anyway\n")
        assert not aborted and comm.requests[2].cancelled and comm.requests[2].freed
    else:
        assert err == ("[rank 0] ddg: this rank's program ended 0.3 s ago, but rank 2 has not finished yet "
                       "(DDG_STALL_TIMEOUT); ending the job\n")
        assert aborted == ["the world"]
