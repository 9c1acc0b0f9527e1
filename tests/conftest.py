import gc
import os
import re
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SHARED = os.environ.get("DDG_SHARED_DIR", os.path.join(ROOT, "..", "shared"))


def pytest_configure(config):
    """numpy's BLAS on one thread in this process, as ``tests/run_all.sh`` runs the suite
    (``OPENBLAS_NUM_THREADS=1``): the compiled products and fused ops take their shapes only
    then (``gemm.takes``), and tests check that choice, so a plain ``pytest`` on a many-core
    machine checks what CI checks. Set through the library, which read its environment
    before this file ran."""
    from ddg.tensor import gemm
    gemm.set_blas_threads(1)


def pytest_collection_finish(session):
    """Move what collection built (thousands of test items, the imported modules) out of the
    garbage collector's sight: each full collection afterwards walked all of it again, ~0.1 s
    apiece (gc took 1.1-1.2 s of a 15 s run of five test files, 0.7-0.8 s frozen)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _cpu_gemm_on():
    """The compiled float32 products (``ddg.tensor.gemm``) take their shapes in every test,
    whatever this CPU: by default they run only where it has AVX-512, and the suite checks
    them (and the paths that choose them) on every machine. A test may still switch them
    off. Set here by hand, not through ``monkeypatch`` (a test's ``monkeypatch.undo()`` would
    switch them off again)."""
    from ddg.tensor import gemm
    was, gemm.ENABLED = gemm.ENABLED, True
    yield
    gemm.ENABLED = was


@pytest.fixture(autouse=True)
def _ddg_seeded():
    """Every test starts from ``ddg.seed(0)``: unseeded, each ddg process draws a fresh seed
    from the operating system, so a test that uses ddg's generator (initializers, dropout,
    shuffling) would otherwise see different numbers on every run and on every MPI rank."""
    from ddg.tensor import backend
    backend.seed(0)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def shared_path(*parts):
    """A path under the shared folder (``../shared`` beside the checkout, or
    ``$DDG_SHARED_DIR``), which the suite needs: the acceptance programs and MNIST data
    live there. A missing one fails the test with the place it looked."""
    path = os.path.join(SHARED, *parts)
    assert os.path.exists(path), (f"{path} not found: the test suite reads the shared folder beside the "
                                  f"checkout (../shared) or $DDG_SHARED_DIR")
    return path


@pytest.fixture
def shared_dir():
    return shared_path()


def _gpu_ready():
    from ddg.tensor import backend
    return backend.cupy_available()


BACKENDS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("gpu", id="gpu", marks=pytest.mark.skipif(not _gpu_ready(),
                                                            reason="no cupy or no NVIDIA GPU here")),
]


@pytest.fixture(params=BACKENDS)
def place(request):
    """Run a test once per available backend: 'cpu' always, 'gpu' where cupy sees a GPU."""
    return request.param


# ---------------------------------------------------------------- the simulated-GPU pass
# tests/run_all.sh runs the suite once on numpy, then (without a real GPU) once more on
# simcupy with DDG_DEVICE_TESTS_ONLY=1: only the tests that exercise a device run again.
DEVICE_MODULES = {"test_gpu.py", "test_gpu_fallbacks.py", "test_kernel_budget.py", "test_mpi_gpu.py"}
_DEVICE_WORDS = re.compile(r"gpu|cupy|cuda", re.IGNORECASE)


def touches_device(item):
    """Whether a test exercises a GPU code path: a device module, the ``gpu`` marker, a
    ``place``/parameter or name that says gpu/cupy/cuda, or a skip condition about one."""
    if os.path.basename(str(item.fspath)) in DEVICE_MODULES or item.get_closest_marker("gpu"):
        return True
    if _DEVICE_WORDS.search(item.nodeid):
        return True
    return any(_DEVICE_WORDS.search(str(m.kwargs.get("reason", ""))) for m in item.iter_markers("skipif"))


def pytest_ignore_collect(collection_path, config):
    """tests/test_mpi_*.py run under mpiexec (tests/mpi_pytest.py passes --with-mpi); a
    plain pytest run leaves them out rather than listing each as skipped."""
    name = collection_path.name
    if name.startswith("test_mpi_") and name.endswith(".py") and not config.getoption("with_mpi", False):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    if os.environ.get("DDG_DEVICE_TESTS_ONLY") != "1":
        return
    keep = [it for it in items if touches_device(it)]
    dropped = [it for it in items if not touches_device(it)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
