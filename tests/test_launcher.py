"""ddgrun, run as a user would (not under MPI itself): ranks, abort on error, -n 1, errors."""
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from ddg.parallel.comm import launcher_env
from launch import ddgrun

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRAPPER = os.path.join(REPO, "launch", "ddgrun")

def _env(**extra):
    env = launcher_env.without_launcher(also=("DDG_FORCE_MPI", "DDG_MPIEXEC"))
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["DDG_PYTHON"] = sys.executable
    env.update(extra)
    return env




def _script(tmp_path, body):
    p = tmp_path / "prog.py"
    p.write_text(textwrap.dedent(body))
    return str(p)


def _ranks_seen(stdout):
    """(rank, size, mpi imported, argv) per rank. mpiexec may interleave the ranks'
    output within a line, so parse by pattern rather than by line."""
    return sorted(re.findall(r"rank (\d+) size (\d+) mpi (\w+) omp \S+ args (\[[^\]]*\])", stdout))


def _ddgrun(args, timeout=60, **env):
    return subprocess.run([sys.executable, "-m", "launch.ddgrun"] + args, env=_env(**env),
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


HELLO = """
    import os, sys
    import ddg.distributed as dist
    env = dist.init_parallel_env()
    print(f"rank {dist.get_rank()} size {dist.get_world_size()} "
          f"mpi {'mpi4py' in sys.modules} omp {os.environ.get('OMP_NUM_THREADS')} "
          f"args {sys.argv[1:]}", flush=True)
"""


def test_two_ranks_print_rank_and_size(tmp_path):
    prog = _script(tmp_path, HELLO)
    r = _ddgrun(["-n", "2", prog, "a", "--b"])
    assert r.returncode == 0, r.stderr
    assert _ranks_seen(r.stdout) == [("0", "2", "True", "['a', '--b']"), ("1", "2", "True", "['a', '--b']")]


def test_wrapper_and_leading_python(tmp_path):
    prog = _script(tmp_path, HELLO)
    r = subprocess.run([WRAPPER, "-n", "2", "python", prog], env=_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [x[:2] for x in _ranks_seen(r.stdout)] == [("0", "2"), ("1", "2")]


def test_module_mode(tmp_path):
    pkg = tmp_path / "mymod.py"
    pkg.write_text(textwrap.dedent(HELLO))
    r = _ddgrun(["-n", "2", "-m", "mymod", "x"], PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}")
    assert r.returncode == 0, r.stderr
    assert _ranks_seen(r.stdout) == [("0", "2", "True", "['x']"), ("1", "2", "True", "['x']")]


def test_exception_on_one_rank_ends_the_job(tmp_path):
    prog = _script(tmp_path, """
        import time
        import ddg.distributed as dist
        import numpy as np
        dist.init_parallel_env()
        if dist.get_rank() == 1:
            time.sleep(0.5)
            raise RuntimeError("boom on purpose")
        from ddg.parallel import get_world_communicator
        get_world_communicator().allreduce(np.ones(4))   # would wait forever for rank 1
        time.sleep(60)
    """)
    t0 = time.monotonic()
    r = _ddgrun(["-n", "2", prog], timeout=40)
    elapsed = time.monotonic() - t0
    assert r.returncode != 0
    assert elapsed < 20, f"job took {elapsed:.1f} s to end"
    assert "[rank 1] Traceback (most recent call last):" in r.stderr
    assert "[rank 1] RuntimeError: boom on purpose" in r.stderr


def test_stall_watchdog_off_with_zero(tmp_path):
    # DDG_STALL_TIMEOUT=0 turns the watchdog off: a slow rank is then simply waited for
    prog = _script(tmp_path, """
        import time
        import ddg.distributed as dist
        dist.init_parallel_env()
        if dist.get_rank() == 0:
            time.sleep(2.5)                    # rank 1 waits in the barrier meanwhile
        dist.barrier()
        print("BARRIER DONE")
    """)
    r = _ddgrun(["-n", "2", prog], DDG_STALL_TIMEOUT="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("BARRIER DONE") == 2
    assert "stalled" not in r.stderr


def test_one_rank_runs_without_mpi(tmp_path):
    prog = _script(tmp_path, textwrap.dedent(HELLO) + "sys.exit(3)\n")
    # Even a broken DDG_MPIEXEC does not matter: -n 1 does not use MPI.
    r = _ddgrun(["-n", "1", prog], DDG_MPIEXEC="/nonexistent/mpiexec")
    assert r.returncode == 3, r.stderr
    assert _ranks_seen(r.stdout) == [("0", "1", "False", "[]")]


def test_missing_mpiexec_is_a_clear_error(tmp_path):
    prog = _script(tmp_path, HELLO)
    r = _ddgrun(["-n", "2", prog], DDG_MPIEXEC="/nonexistent/mpiexec")
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "mpiexec" in err[0] and "install ddg[mpi]" in err[0]


def test_exit_status_is_the_jobs(tmp_path):
    prog = _script(tmp_path, "import sys; sys.exit(5)\n")
    assert _ddgrun(["-n", "1", prog]).returncode == 5
    assert _ddgrun(["-n", "2", prog]).returncode != 0


def test_argument_parsing(tmp_path):
    prog = _script(tmp_path, "pass\n")
    n, opts, program, ppn, dry = ddgrun.parse_args(
        ["-n", "4", "-f", "hosts", "-ppn", "2", "-genv", "A", "1", "--bind-to=core", "python3", "-u", prog, "x"])
    assert (n, ppn, dry) == (4, 2, False)
    assert opts == ["-f", "hosts", "-ppn", "2", "-genv", "A", "1", "--bind-to=core"]
    assert program == [sys.executable, "-u", prog, "x"]
    n, opts, program, _, dry = ddgrun.parse_args(["--dry-run", "-np=3", "--hostfile", "h", "-m", "pkg.mod", "-n", "9"])
    assert (n, opts, dry) == (3, ["--hostfile", "h"], True)
    assert program == [sys.executable, "-m", "pkg.mod", "-n", "9"]
    assert ddgrun.parse_args(["--", prog])[2] == [sys.executable, prog]
    for bad in ([], ["-n"], ["-n", "zero", prog], ["-n", "0", prog], ["-n", "2"], ["-n", "2", "missing.py"]):
        with pytest.raises(ddgrun.UsageError):
            ddgrun.parse_args(bad)


def test_thread_env_defaults():
    env = ddgrun.thread_env(2, {"MKL_NUM_THREADS": "7"})
    expect = str(max(1, ddgrun._cores() // 2))
    assert env["OMP_NUM_THREADS"] == expect and env["OPENBLAS_NUM_THREADS"] == expect
    assert env["MKL_NUM_THREADS"] == "7"
    assert env["DDG_AUTO_THREADS"] == "OMP_NUM_THREADS,OPENBLAS_NUM_THREADS"   # the user's stay theirs
    assert ddgrun.thread_env(10 ** 6, {})["OMP_NUM_THREADS"] == "1"
    assert "DDG_AUTO_THREADS" not in ddgrun.thread_env(2, {v: "3" for v in ddgrun.THREAD_VARS})
    assert "DDG_AUTO_THREADS" not in ddgrun.thread_env(2, {}, per_node_guard=False)


def test_rank_guard_sets_threads_from_its_own_node(monkeypatch):
    # ddgrun chose OMP/OPENBLAS (not MKL, the user's): the guard on a node the launcher put
    # 3 ranks on gives each cores // 3; the user's own setting and unknown sizes stay
    from launch import rank_guard
    cores = ddgrun._cores()
    for local_size, want in [("3", str(max(1, cores // 3))), ("1", str(cores))]:
        monkeypatch.setenv("DDG_AUTO_THREADS", "OMP_NUM_THREADS,OPENBLAS_NUM_THREADS")
        monkeypatch.setenv("MPI_LOCALNRANKS", local_size)
        for var, value in [("OMP_NUM_THREADS", "9"), ("OPENBLAS_NUM_THREADS", "9"), ("MKL_NUM_THREADS", "5")]:
            monkeypatch.setenv(var, value)
        rank_guard._node_threads()
        assert [os.environ[v] for v in ddgrun.THREAD_VARS] == [want, want, "5"]
        assert "DDG_AUTO_THREADS" not in os.environ
    monkeypatch.setenv("DDG_AUTO_THREADS", "OMP_NUM_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", "9")
    monkeypatch.delenv("MPI_LOCALNRANKS")
    rank_guard._node_threads()
    assert os.environ["OMP_NUM_THREADS"] == "9"


def test_idle_wait_env_sleeps_only_on_an_oversubscribed_node():
    Y = launcher_env.YIELD_VAR
    for var in launcher_env.LOCAL_SIZE_VARS:             # MPICH/hydra, Open MPI, MVAPICH
        for cpus in (1, 2, 8):
            for ranks, want in ((cpus - 1, {}), (cpus, {}), (cpus + 1, {Y: "1"}), (4 * cpus, {Y: "1"})):
                if ranks >= 1:
                    assert launcher_env.idle_wait_env({var: str(ranks)}, cpus=cpus) == want, (var, ranks, cpus)
            for user in ("0", "1", ""):                  # the user's setting stands, whatever it is
                assert launcher_env.idle_wait_env({var: str(cpus + 1), Y: user}, cpus=cpus) == {}
    assert launcher_env.idle_wait_env({}, cpus=1) == {}                 # no launcher: nothing known
    assert launcher_env.idle_wait_env({"MPI_LOCALNRANKS": "x"}, cpus=1) == {}
    n = os.cpu_count()
    assert launcher_env.idle_wait_env({"MPI_LOCALNRANKS": str(n + 1)}) == {Y: "1"}   # the node's CPUs by default
    assert launcher_env.idle_wait_env({"MPI_LOCALNRANKS": str(n)}) == {}


@pytest.mark.skipif((os.cpu_count() or 1) > 3, reason="needs more ranks than this machine has CPUs (at most 4)")
@pytest.mark.parametrize("launcher", ["ddgrun", "mpiexec"])
def test_ranks_beyond_the_cpus_wait_by_sleeping(launcher, tmp_path):
    """MPI_Init reads MPICH's switch, so each rank sets it before MPI starts: on with more
    ranks than CPUs, off with a rank per CPU, and a value the user gave is kept. A program
    that imports mpi4py first gets it from ddgrun only."""
    Y = launcher_env.YIELD_VAR
    prog = _script(tmp_path, f"""
        import os
        import ddg.distributed as dist
        dist.init_parallel_env()
        print(f"<rank {{dist.get_rank()}} wait {{os.environ.get('{Y}')}}>", flush=True)
    """)
    # a program that starts MPI itself before ddg: only ddgrun, before the ranks exist, sets it
    (tmp_path / "early").mkdir()
    early = _script(tmp_path / "early", f"""
        import os
        from mpi4py import MPI
        import ddg.distributed as dist
        dist.init_parallel_env()
        print(f"<rank {{dist.get_rank()}} wait {{os.environ.get('{Y}')}}>", flush=True)
    """)
    cpus = os.cpu_count()
    cases = [(prog, cpus + 1, None, "1"), (prog, cpus, None, "None"), (prog, cpus + 1, "0", "0"),
             (early, cpus + 1, None, "1" if launcher == "ddgrun" else "None")]
    for program, n, user, want in cases:
        env = {k: v for k, v in _env().items() if k != Y}
        if user is not None:
            env[Y] = user
        cmd = ([sys.executable, "-m", "launch.ddgrun"] if launcher == "ddgrun" else [ddgrun.find_mpiexec()])
        r = subprocess.run(cmd + ["-n", str(n), sys.executable, program], env=env, capture_output=True,
                           text=True, timeout=60, cwd=REPO)
        assert r.returncode == 0, r.stderr
        assert sorted(re.findall(r"<rank (\d+) wait (\w+)>", r.stdout)) == [(str(i), want) for i in range(n)], \
            (program, r.stdout)


def test_hosts_all_on_this_machine(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("# two simulated nodes\nlocalhost:2\n127.0.0.1:2   # the same machine\n")
    assert ddgrun.hosts_all_here(["-f", str(hosts), "-ppn", "2"])
    assert ddgrun.hosts_all_here(["--hostfile=" + str(hosts)]) and ddgrun.hosts_all_here(["-hosts", "localhost,127.0.0.1"])
    assert not ddgrun.hosts_all_here(["-hosts", "localhost,node-that-does-not-exist.invalid"])
    assert not ddgrun.hosts_all_here([]) and not ddgrun.hosts_all_here(["-f", str(tmp_path / "missing")])


def test_ddgrun_sets_the_sleeping_wait_where_its_ranks_share_this_machine(tmp_path):
    Y, cores = launcher_env.YIELD_VAR, ddgrun._cores()
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:2\n127.0.0.1:2\n")
    here = [[], ["-f", str(hosts), "-ppn", "2"], ["-hosts", "localhost,127.0.0.1"]]
    for opts in here:
        assert ddgrun.sleeping_wait({}, cores + 1, opts) == {Y: "1"}, opts
        assert ddgrun.sleeping_wait({}, cores, opts) == {}, opts
        assert ddgrun.sleeping_wait({Y: "0"}, cores + 1, opts) == {Y: "0"}, opts     # the user's stays
    # another machine in the list: each rank decides from its own node's count
    assert ddgrun.sleeping_wait({}, 4 * cores, ["-hosts", "localhost,node-that-does-not-exist.invalid"]) == {}
    assert ddgrun.sleeping_wait({}, 4 * cores, ["-f", str(tmp_path / "missing")]) == {}


def test_dry_run_prints_the_command(tmp_path):
    prog = _script(tmp_path, "pass\n")
    r = _ddgrun(["--dry-run", "-n", "3", "-hosts", "a,b", prog])
    assert r.returncode == 0
    cmd = r.stdout.split()
    assert os.path.basename(cmd[0]) in ("mpiexec", "mpirun") and cmd[1:5] == ["-n", "3", "-hosts", "a,b"]
    assert cmd[5:] == [sys.executable, ddgrun.RANK_GUARD, prog]


def test_ranks_run_through_the_guard():
    g = ddgrun.guarded
    exe, rg = sys.executable, ddgrun.RANK_GUARD
    assert g([exe, "t.py", "-x"]) == [exe, rg, "t.py", "-x"]
    assert g([exe, "-u", "-W", "ignore", "-X", "dev", "t.py"]) == [exe, "-u", "-W", "ignore", "-X", "dev", rg, "t.py"]
    assert g([exe, "-m", "pkg.mod", "-n", "2"]) == [exe, rg, "-m", "pkg.mod", "-n", "2"]
    for unchanged in ([exe, "-c", "print(1)"], [exe, "-u"], ["./run.sh", "a"], ["hostname"]):
        assert g(unchanged) == unchanged


def test_mpiexec_search_order(tmp_path, monkeypatch):
    fake = tmp_path / "my-mpiexec"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("DDG_MPIEXEC", str(fake))
    assert ddgrun.find_mpiexec() == str(fake)
    monkeypatch.delenv("DDG_MPIEXEC")
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(here):
        assert ddgrun.find_mpiexec() == here
    elif shutil.which("mpiexec"):
        assert ddgrun.find_mpiexec() == shutil.which("mpiexec")


@pytest.mark.parametrize("sig", [9, 15])
def test_rank_killed_by_a_signal_exits_128_plus_signal(tmp_path, sig):
    # mpiexec (hydra) itself exits with the bare signal number; ddgrun promises 128 + N,
    # and must still tell a rank killed by signal N from one that exits with status N.
    killed = _script(tmp_path, f"""
        import os, signal, sys, time
        import ddg.distributed as dist
        dist.init_parallel_env()
        sys.stdout.write(f"relayed-{{dist.get_rank()}}-ok\\n")   # one write: ranks may interleave
        sys.stdout.flush()
        if dist.get_world_size() == 1 or dist.get_rank() == 1:
            os.kill(os.getpid(), {sig})
        time.sleep(30)
    """)
    r = _ddgrun(["-n", "1", killed])
    assert r.returncode == 128 + sig, (r.returncode, r.stdout, r.stderr)
    r = _ddgrun(["-n", "2", killed], timeout=40)
    assert r.returncode == 128 + sig, (r.returncode, r.stdout, r.stderr)
    assert sorted(re.findall(r"relayed-(\d)-ok", r.stdout)) == ["0", "1"], r.stdout
    plain = _script(tmp_path, f"import sys; sys.exit({sig})\n")
    assert _ddgrun(["-n", "2", plain]).returncode == sig


def test_job_status_reads_hydras_signal_report():
    report = (b"=   EXIT CODE: 9\n===\nYOUR APPLICATION TERMINATED WITH THE EXIT STRING: "
              b"Killed (signal 9)\nThis typically refers to a problem with your application.\n")
    assert ddgrun.job_status(9, report) == 137
    assert ddgrun.job_status(9, b"rank output\n") == 9          # a rank's exit(9)
    assert ddgrun.job_status(-15) == 143                        # -n 1: the child itself
    assert ddgrun.job_status(0, report) == 0
    core = report.replace(b"Killed (signal 9)", b"Segmentation fault (signal 11)")
    assert ddgrun.job_status(11 | 0x80, core) == 139             # core-dump bit set


# -- ddg.distributed.spawn and python -m ddg.distributed.launch ------------------------------------
SPAWNED = """
    import sys
    import numpy as np
    import ddg
    import ddg.distributed as dist

    def train(scale, out_dir):
        dist.init_parallel_env()
        t = ddg.to_tensor(np.full(2, (dist.get_rank() + 1) * scale, np.float32))
        dist.all_reduce(t)
        with open(f"{out_dir}/rank{dist.get_rank()}", "w") as f:
            f.write(f"{dist.get_world_size()} {t.numpy().tolist()} {__name__}")
        if scale < 0:
            raise RuntimeError("negative scale on purpose")

    if __name__ == "__main__":
        ctx = dist.spawn(train, args=(float(sys.argv[1]), sys.argv[2]), nprocs=int(sys.argv[3]))
        print("SPAWN RETURNED", ctx.returncode, flush=True)
"""


def test_spawn_runs_a_function_of_the_main_script_on_n_ranks(tmp_path):
    prog = _script(tmp_path, SPAWNED)
    out = tmp_path / "out"
    out.mkdir()
    r = subprocess.run([sys.executable, prog, "1.5", str(out), "2"], env=_env(), capture_output=True, text=True,
                       timeout=60, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "SPAWN RETURNED 0" in r.stdout
    for rank in range(2):
        assert (out / f"rank{rank}").read_text() == "2 [4.5, 4.5] __mp_main__"   # 1.5 + 3.0 on both
    # a failing rank: spawn raises in the parent, naming the exit status
    r = subprocess.run([sys.executable, prog, "-1", str(out), "2"], env=_env(), capture_output=True, text=True,
                       timeout=60, cwd=str(tmp_path))
    assert r.returncode != 0 and "SPAWN RETURNED" not in r.stdout
    assert "RuntimeError: negative scale on purpose" in r.stderr
    assert "ddg.distributed.spawn: the job of 2 rank(s) failed" in r.stderr


def test_spawn_refuses_what_cannot_travel():
    import ddg.distributed as dist
    with pytest.raises(TypeError, match="picklable"):
        dist.spawn(lambda: None, nprocs=1)
    with pytest.raises(TypeError, match="unknown option"):
        dist.spawn(print, nprocs=1, bogus=1)


def test_distributed_launch_maps_paddles_flags():
    from ddg.distributed import launch as L
    args, env = L.build(["--nproc_per_node", "2", "train.py", "--lr", "0.1"])
    assert args == ["-n", "2", sys.executable, "train.py", "--lr", "0.1"] and env == {}
    args, env = L.build(["--gpus", "0,1,2", "--log_dir", "logs", "train.py"])
    assert args[:2] == ["-n", "3"] and env["CUDA_VISIBLE_DEVICES"] == "0,1,2"
    assert env["DDG_LOG_DIR"] == os.path.abspath("logs")
    args, _ = L.build(["--ips", "10.0.0.1,10.0.0.2", "--nproc_per_node", "4", "train.py"])
    assert args[:6] == ["-n", "8", "-hosts", "10.0.0.1,10.0.0.2", "-ppn", "4"]
    with pytest.raises(SystemExit):
        L.build(["--ips", "a,b", "--nnodes", "3", "train.py"])


def test_distributed_launch_writes_each_ranks_log(tmp_path):
    prog = _script(tmp_path, textwrap.dedent(HELLO) + "if sys.argv[1:] == ['fail'] and dist.get_rank() == 1:\n"
                                                      "    raise ValueError('rank one fails')\n")
    logs = tmp_path / "logs"
    r = subprocess.run([sys.executable, "-m", "ddg.distributed.launch", "--nproc_per_node", "2", "--log_dir",
                        str(logs), prog, "ok"], env=_env(), capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode == 0, r.stderr
    for rank in range(2):
        assert f"rank {rank} size 2" in (logs / f"workerlog.{rank}").read_text()
    assert "rank 0 size" not in r.stdout
    r = subprocess.run([sys.executable, "-m", "ddg.distributed.launch", "--nproc_per_node", "2", "--log_dir",
                        str(logs), prog, "fail"], env=_env(), capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode != 0
    assert "ValueError: rank one fails" in (logs / "workerlog.1").read_text()
    assert "---- end of" in r.stderr and "rank one fails" in r.stderr


def test_installed_launcher_does_not_collide_with_another_launch_package(tmp_path):
    """ddg installs launch/ as the package ``ddg_launch`` (the ``ddgrun`` script and
    ``ddg.distributed.launch`` use it), so another distribution's top-level ``launch``
    package, even first on the path, changes nothing."""
    foreign = tmp_path / "launch"
    foreign.mkdir()
    (foreign / "__init__.py").write_text("raise ImportError('a foreign package named launch')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    code = ("from ddg.distributed import launch as L; import ddg_launch.ddgrun as D; "
            "print(L.ddgrun.__name__, D.main is L.ddgrun.main)")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ddg_launch.ddgrun", "True"]
    with open(os.path.join(REPO, "pyproject.toml")) as f:
        assert 'ddgrun = "ddg_launch.ddgrun:main"' in f.read()
