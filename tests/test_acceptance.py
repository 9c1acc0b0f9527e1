"""The seed programs run unchanged and print OK, and the examples run end to end.

The DataParallel acceptance programs (ddp_equivalence, ddp_control_flow) run under
ddgrun from tests/test_data_parallel.py."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT, SHARED

# The seed programs draw their data and weights without seeding, and some of their own checks
# ("the loss falls at every one of 10 Adam steps") fail for a few random starts in 1,000 (real
# Paddle too: s000_weight_sharing 1 of 300), so they run from a fixed start seed (DDG_SEED).
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), DDG_SEED="2026")
PROGRAMS = [
    "s000_basic.py", "s000_control_flow.py", "s002_torch_style.py",   # the core
    "s000_train_mymodel.py", "s000_weight_sharing.py", "s001_mnist.py",  # layers, data
    "s002_static_graph.py", "s001_static_mnist.py",                     # static graphs
]


def _run(cmd, cwd, timeout=600):
    return subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("program", PROGRAMS)
def test_seed_program_prints_ok(program):
    folder = os.path.join(SHARED, "acceptance")
    assert os.path.exists(os.path.join(folder, program)), f"{program} not found in {folder}"
    proc = _run([sys.executable, program], folder)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.split(":")[0] + ": OK" in last or last.endswith("OK"), proc.stdout[-500:]


def test_tutorial_example_runs():
    proc = _run([sys.executable, os.path.join("examples", "tutorial.py")], ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "autoencoder step 9" in proc.stdout


def test_main_job_two_ranks_one_epoch(tmp_path):
    """The README's first command, shortened to one epoch: ddgrun -n 2 examples/mnist.py."""
    data = os.environ.get("DDG_DATA_DIR", os.path.join(SHARED, "data", "mnist-10k"))
    assert os.path.isdir(data), f"MNIST data not found at {data}"
    proc = _run([sys.executable, os.path.join("launch", "ddgrun.py"), "-n", "2", "python", "examples/mnist.py",
                 "--epochs", "1", "--data-dir", data, "--out", str(tmp_path)], ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    # off a terminal: one plain line per epoch, no progress-bar frames in the log
    assert "\r" not in proc.stdout + proc.stderr and "epoch 1/1: train loss" in proc.stdout, proc.stdout[-2000:]
    assert os.path.exists(tmp_path / "checkpoint.pdckpt") or any(p.suffix.startswith(".pd") for p in tmp_path.iterdir())
