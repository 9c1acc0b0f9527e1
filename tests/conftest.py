import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SHARED = os.environ.get("DDG_SHARED_DIR", os.path.join(ROOT, "..", "shared"))


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


@pytest.fixture
def shared_dir():
    if not os.path.isdir(SHARED):
        pytest.skip(f"shared folder not found at {SHARED}")
    return SHARED


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
