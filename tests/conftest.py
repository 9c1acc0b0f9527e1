import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SHARED = os.environ.get("DDG_SHARED_DIR", os.path.join(ROOT, "..", "shared"))


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
