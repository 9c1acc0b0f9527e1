"""Softmax cross-entropy with integer labels (``ops.nn_ops.SoftmaxCrossEntropy`` and the
compiled float32 rows of ``ddg/tensor/loss_kernels.py``): every reduction, with ignored
labels, against a float64 numpy reference; gradients against central differences and
second order; the label check on the compiled path; the mean taken in the op itself."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(11)


def T(a, grad=False, dtype=None):
    t = ddg.to_tensor(np.asarray(a) if dtype is None else np.asarray(a).astype(dtype))
    t.stop_gradient = not grad
    return t


def _ref(x, lab, ignore, reduction):
    x = x.astype(np.float64).reshape(-1, x.shape[-1])
    lab = lab.reshape(-1)
    keep = lab != ignore
    lse = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
    per = np.where(keep, lse - x[np.arange(len(lab)), np.where(keep, lab, 0)], 0.0)
    if reduction == "mean":   # negative ignore_index: the ignored samples count in N (Paddle)
        return per.mean()
    return per.sum() if reduction == "sum" else per


@pytest.mark.parametrize("shape", [(7, 5), (2, 3, 33)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_against_float64(shape, reduction):
    x = RNG.standard_normal(shape) * 4
    lab = RNG.integers(0, shape[-1], shape[:-1])
    lab.reshape(-1)[1] = -100
    ref = _ref(x, lab, -100, reduction)
    v = RNG.standard_normal(np.shape(ref))
    grads = {}
    for dt in ("float64", "float32"):
        xt = T(x, True, dt)
        y = F.cross_entropy(xt, T(lab), reduction=reduction)
        tol = 1e-12 if dt == "float64" else 2e-6 * max(1.0, np.abs(ref).max())
        np.testing.assert_allclose(y.numpy().reshape(np.shape(ref)), ref, rtol=0, atol=tol)
        (y * T(v.reshape(y.shape), dtype=dt)).sum().backward()
        grads[dt] = xt.grad.numpy()
    np.testing.assert_allclose(grads["float32"], grads["float64"], rtol=0, atol=2e-6 * np.abs(grads["float64"]).max())
    assert np.all(grads["float64"].reshape(-1, shape[-1])[1] == 0)   # the ignored sample
    lt = T(lab)
    assert gradcheck(lambda x: F.cross_entropy(x, lt, reduction=reduction), [T(x, True)])
    assert gradgradcheck(lambda x: F.cross_entropy(x, lt, reduction=reduction), [T(x, True)])


def test_cross_entropy_mean_is_one_node_and_takes_a_second_backward():
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    lab = RNG.integers(0, 4, 6)
    xt = T(x, True)
    y = F.cross_entropy(xt, T(lab))
    assert type(y._node).__name__ == "SoftmaxCrossEntropy" and y.shape == []
    y.backward(retain_graph=True)
    g1 = xt.grad.numpy().copy()
    y.backward()   # the softmax is recomputed (the first backward wrote over it)
    np.testing.assert_allclose(xt.grad.numpy(), 2 * g1, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_rejects_labels_out_of_range(dtype):
    x = T(RNG.standard_normal((4, 3)), dtype=dtype)
    for bad in ([0, 3, 1, 2], [0, -1, 1, 2], [0, -100, 7, 2]):
        with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
            F.cross_entropy(x, T(bad))
        with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
            F.cross_entropy(x, T(bad), reduction="none")


@pytest.mark.skipif(not ddg.tensor.backend.cupy_available(),
                    reason="GPU tests need cupy and an NVIDIA GPU (cupy is not installed or sees no GPU)")
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_on_the_device_gives_the_cpu_results(reduction):
    x = RNG.standard_normal((5, 6)).astype(np.float32)
    lab = np.array([0, 5, -100, 3, 2])
    results = []
    for place in ("cpu", "gpu"):
        t = ddg.to_tensor(x, place=place, stop_gradient=False)
        y = F.cross_entropy(t, ddg.to_tensor(lab, place=place), reduction=reduction)
        y.sum().backward()
        assert (type(y._data) is np.ndarray) == (place == "cpu")
        results.append((y.numpy(), t.grad.numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
