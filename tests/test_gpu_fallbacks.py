"""What the GPU additions do on a machine without a GPU (runs everywhere): cuDNN and
NCCL report themselves unusable, the communicator selection falls back or explains,
and the CPU paths of the audited ops keep their checks."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.parallel import comm as C
from ddg.parallel import comm as comm_pkg
from ddg.parallel import env
from ddg.tensor import backend

no_gpu = pytest.mark.skipif(backend.cupy_available(), reason="checks the no-GPU behaviour")


@no_gpu
def test_cudnn_and_nccl_unusable_without_gpu():
    assert backend.cudnn_module() is None
    assert backend.nccl_module() is None
    assert not comm_pkg.nccl_available()


@no_gpu
def test_device_communicator_selection_without_gpu(monkeypatch):
    world = C.get_world_communicator()
    assert env.get_device_communicator("mpi") is world
    assert env.get_device_communicator("auto") is world
    monkeypatch.setenv("DDG_COMM", "auto")
    assert env.get_device_communicator() is world
    with pytest.raises(RuntimeError, match="NCCL is not usable"):
        env.get_device_communicator("nccl")
    with pytest.raises(RuntimeError, match="NCCL is not usable"):
        comm_pkg.NCCLCommunicator()
    with pytest.raises(ValueError, match="kind must be"):
        env.get_device_communicator("gloo")


def test_cpu_label_checks_are_kept():
    x = ddg.to_tensor(np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match="labels must lie in"):
        F.cross_entropy(x, ddg.to_tensor(np.array([0, 4, 1])))
    with pytest.raises(ValueError, match="ids must lie in"):
        F.embedding(ddg.to_tensor(np.array([5])), ddg.to_tensor(np.zeros((3, 2), np.float32)))
    with pytest.raises(ValueError, match="one_hot"):
        F.one_hot(ddg.to_tensor(np.array([7])), 3)


def test_cross_entropy_mean_denominators():
    """mean over the non-ignored (weighted) samples; all ignored gives 0 (CPU path)."""
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((5, 3)).astype(np.float32)
    lab = np.array([0, -100, 2, 1, -100])
    w = np.array([1.0, 2.0, 0.5], np.float32)
    out = F.cross_entropy(ddg.to_tensor(logits), ddg.to_tensor(lab), weight=ddg.to_tensor(w)).numpy()
    lsm = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    keep = lab != -100
    per = -lsm[np.arange(5)[keep], lab[keep]] * w[lab[keep]]
    np.testing.assert_allclose(out, per.sum() / w[lab[keep]].sum(), rtol=1e-5)
    allign = F.cross_entropy(ddg.to_tensor(logits), ddg.to_tensor(np.full(5, -100))).numpy()
    assert allign == 0.0
