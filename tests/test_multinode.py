"""Jobs across two nodes, simulated on this machine (tests/multinode.py): they train, agree
with one process, and end, with status 0, soon after their last step, without the lines a
stalled exit prints.

What assumes one node is checked across "nodes" here: node-local ranks (MPI's
``COMM_TYPE_SHARED`` split), thread counts per node, GPU choice by local rank, per-rank
log files, a checkpoint written by rank 0 and read by all, DataLoader workers with shared
memory. The fault cases across nodes are in test_failfast.py."""
import os
import re
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from ddg.parallel.comm import launcher_env
from launch import ddgrun

import multinode

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIMGPU = os.path.join(REPO, "tests", "simgpu")
# seconds from a job's last step to its end (teardown, the exit handshake, MPI_Finalize). A
# stalled exit has its own marks, checked beside this bound: the exit handshake prints a line
# when its goodbyes take over failfast._EXIT_DRAIN (5 s), a rank that never reaches its exit
# one after DDG_STALL_TIMEOUT (300 s), and a hang is killed at the job's timeout. A clean exit
# of 3 ranks took 5.1 s on a 2-core CI machine while the other test worker compiled kernels,
# so the bound itself leaves room for load.
END_WITHIN = 15.0
STALLED_EXIT = ("exit handshake", "has not finished yet", "have not finished yet", "stalled")



def _env(**extra):
    env = launcher_env.without_launcher(also=("DDG_FORCE_MPI", "DDG_STALL_TIMEOUT", "DDG_MPIEXEC",
                                              "DDG_LOG_DIR") + ddgrun.THREAD_VARS)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def job(cmd, timeout=120, **extra_env):
    """Run ``cmd``; returns (exit status, [(seconds since start, stdout line)], stderr, seconds)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=_env(**extra_env), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    err = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    reader.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    lines = [(time.monotonic() - t0, line.rstrip("\n")) for line in proc.stdout]
    code = proc.wait()
    took = time.monotonic() - t0
    timer.cancel()
    reader.join()
    print(f"\n{' '.join(map(str, cmd[:8]))} ...: exit {code} after {took:.1f} s")
    return code, lines, "".join(err), took


def ended_promptly(lines, took, marker, err):
    """The job ended within END_WITHIN seconds of the last line containing ``marker``, and
    its stderr ``err`` has none of the lines a stalled exit prints."""
    last = max(t for t, line in lines if marker in line)
    print(f"ended {took - last:.2f} s after its last step")
    stalled = [line for line in err.splitlines() if any(m in line for m in STALLED_EXIT)]
    assert not stalled, stalled
    return took - last < END_WITHIN


def _ddgrun(n, per_node, tmp_path, program):
    return [sys.executable, "-m", "launch.ddgrun", "-n", str(n)] + multinode.hostfile_args(tmp_path, per_node) \
        + program


@pytest.mark.parametrize("per_node", [1, 2])
def test_init_only_job_ends(per_node, tmp_path):
    prog = tmp_path / "init.py"
    prog.write_text("import sys, ddg\nddg.distributed.init_parallel_env()\n"
                    "sys.stdout.write(f'LAST STEP {ddg.distributed.get_rank()}\\n')\n")
    code, lines, err, took = job(_ddgrun(2 * per_node, per_node, tmp_path, [str(prog)]))
    assert code == 0, err
    # mpiexec may put two ranks' lines on one line: look for the pattern, not for lines
    text = "\n".join(line for _, line in lines)
    assert sorted(re.findall(r"LAST STEP (\d+)", text)) == [str(r) for r in range(2 * per_node)], text
    assert ended_promptly(lines, took, "LAST STEP", err) and took < 60


@pytest.mark.parametrize("per_node", [1, 2])
def test_main_job_ends(per_node, tmp_path, shared_dir):
    # examples/mnist.py, one epoch, as the README launches it, on 2 nodes
    data = os.environ.get("DDG_DATA_DIR") or os.path.join(shared_dir, "data", "mnist-10k")
    code, lines, err, took = job(_ddgrun(2 * per_node, per_node, tmp_path, [
        "examples/mnist.py", "--epochs", "1", "--no-plot", "--out", str(tmp_path / "out")]),
        timeout=240, DDG_DATA_DIR=data)      # the thread counts ddgrun chooses, as a user gets them
    assert code == 0, err
    final = re.findall(r"final test accuracy (\d\.\d+)", "\n".join(line for _, line in lines))
    assert len(final) == 1 and float(final[0]) > 0.85, lines[-3:]
    assert (tmp_path / "out" / "checkpoint.pdckpt").exists()
    assert ended_promptly(lines, took, "final test accuracy", err)


def test_mpi_tests_across_nodes(tmp_path):
    # the collectives and DataParallel (equal to one process, join, uneven slices...) test
    # families, with ranks 0 and 1 on one node and rank 2 on the other
    code, lines, err, took = job([ddgrun.find_mpiexec(), "-n", "3"] + multinode.hostfile_args(tmp_path, 2) + [
        sys.executable, "tests/mpi_pytest.py", "-q", "-p", "no:randomly", "tests/test_mpi_collectives.py",
        "tests/test_mpi_data_parallel.py"], timeout=300, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = "\n".join(line for _, line in lines)
    assert code == 0, out[-3000:] + err[-3000:]
    summary = [line for _, line in lines if " passed" in line][-1]
    assert "failed" not in summary and "error" not in summary, out[-3000:]
    assert ended_promptly(lines, took, " passed", err)


NODE_LOCAL = """
    import os, sys
    import numpy as np
    import ddg, ddg.distributed as dist
    from ddg import nn
    from ddg.parallel import get_world_communicator
    from ddg.tensor import backend

    env = dist.init_parallel_env()
    rank, comm = env.rank, get_world_communicator()
    seen = {}
    # node-local ranks and node sizes, from MPI's shared-memory split
    from mpi4py import MPI
    node = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    seen["node"] = (env.local_rank, node.Get_size())
    node.Free()
    seen["gpu"] = (backend.cuda_device_count(), env.device_id)
    seen["threads"] = os.environ.get("OMP_NUM_THREADS")
    seen["log"] = sys.stdout.isatty() or os.path.basename(os.readlink(f"/proc/self/fd/1"))

    # a checkpoint written by rank 0 and read by every rank
    model = ddg.DataParallel(nn.Linear(5, 3))
    model(ddg.ones([4, 5])).sum().backward()
    path = sys.argv[1]
    if rank == 0:
        ddg.save(model.state_dict(), path)
    dist.barrier()
    state = ddg.load(path)
    seen["checkpoint"] = all(np.array_equal(np.asarray(state[k].numpy() if hasattr(state[k], "numpy") else state[k]),
                                            v.numpy()) for k, v in model.state_dict().items())

    # DataLoader worker processes passing batches through shared memory, on every node
    class Items(ddg.io.Dataset):
        def __len__(self):
            return 18
        def __getitem__(self, i):
            return np.array([i], dtype="int64")
    sampler = ddg.io.DistributedBatchSampler(Items(), batch_size=2, shuffle=False)
    loader = ddg.io.DataLoader(Items(), batch_sampler=sampler, num_workers=1, use_shared_memory=True)
    mine = sorted(int(v) for batch in loader for v in np.asarray(batch[0].numpy() if isinstance(batch, list)
                                                                  else batch.numpy()).ravel())
    seen["loader"] = mine

    everything = comm.allgather_object(seen)
    if rank == 0:
        print("SEEN", repr(everything), flush=True)
    print("LAST STEP", rank, flush=True)
"""


def test_node_local_things_across_nodes(tmp_path):
    # 3 ranks, 2 per node: ranks 0 and 1 on node "localhost", rank 2 alone on "127.0.0.1";
    # two simulated GPUs per node (simcupy), each rank's log in a file of its own
    prog = tmp_path / "local.py"
    prog.write_text(textwrap.dedent(NODE_LOCAL))
    logs = tmp_path / "logs"
    ckpt = tmp_path / "model.pdparams"
    code, lines, err, took = job(
        _ddgrun(3, 2, tmp_path, [str(prog), str(ckpt)]), DDG_LOG_DIR=str(logs), SIMCUPY_DEVICES="2",
        PYTHONPATH=f"{SIMGPU}{os.pathsep}{REPO}")
    ended = time.time()
    logged = {r: (logs / f"workerlog.{r}").read_text() for r in range(3)}
    assert code == 0, err + "\n".join(logged.values())
    assert lines == [] and "LAST STEP 1" in logged[1]        # the output went to the log files
    seen = eval([line for line in logged[0].splitlines() if line.startswith("SEEN")][0][5:])
    assert [s["node"] for s in seen] == [(0, 2), (1, 2), (0, 1)]
    assert [s["gpu"] for s in seen] == [(2, 0), (2, 1), (2, 0)]      # GPU = local rank % GPUs per node
    # both "nodes" are this machine: its cores are shared by all 3 ranks (on real nodes each
    # rank's guard counts its own node's ranks: test_launcher.py)
    assert [s["threads"] for s in seen] == [str(max(1, ddgrun._cores() // 3))] * 3
    assert [s["log"] for s in seen] == [f"workerlog.{r}" for r in range(3)]
    assert all(s["checkpoint"] for s in seen)
    assert sorted(sum((s["loader"] for s in seen), [])) == list(range(18))
    assert all(len(s["loader"]) == 6 for s in seen)
    last = max(os.path.getmtime(logs / f"workerlog.{r}") for r in range(3))
    print(f"ended {ended - last:.2f} s after its last step")
    assert ended - last < END_WITHIN
