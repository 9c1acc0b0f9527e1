"""The simulated-GPU pass of tests/run_all.sh reruns exactly the tests that exercise a
device (tests/conftest.py: touches_device), and a plain run leaves the MPI files to
mpiexec."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _collect(*files, **env):
    out = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *files],
                         cwd=os.path.dirname(HERE), env=dict(os.environ, **env), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_device_pass_selects_device_tests_only():
    files = ["tests/test_ops_table.py", "tests/test_kernel_budget.py", "tests/test_amp.py"]
    every = _collect(*files)
    chosen = _collect(*files, DDG_DEVICE_TESTS_ONLY="1")
    assert chosen and set(chosen) < set(every)
    gpu_params = [t for t in every if t.endswith("[gpu]") or "-gpu]" in t or "[gpu-" in t]
    assert gpu_params and set(gpu_params) <= set(chosen)                  # every gpu parameter
    assert not [t for t in chosen if t.endswith("[cpu]")]                  # no cpu twin
    assert {t for t in every if "test_kernel_budget.py" in t} <= set(chosen)   # device modules whole
    assert "tests/test_amp.py::test_gpu_amp_step_matches_cpu_and_syncs_once[O2]" in chosen   # a skip about cupy


class _Config:
    def __init__(self, with_mpi):
        self.with_mpi = with_mpi

    def getoption(self, name, default=None):
        return self.with_mpi if name == "with_mpi" else default


def test_plain_run_leaves_mpi_files_to_mpiexec():
    import pathlib

    import conftest
    mpi, plain = pathlib.Path(HERE, "test_mpi_hapi.py"), pathlib.Path(HERE, "test_hapi.py")
    assert conftest.pytest_ignore_collect(mpi, _Config(False)) is True
    assert conftest.pytest_ignore_collect(mpi, _Config(True)) is None
    assert conftest.pytest_ignore_collect(plain, _Config(False)) is None
