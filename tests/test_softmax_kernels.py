"""Softmax and log-softmax over the last axis of numpy float32/float64 arrays run compiled
row loops (ddg/tensor/softmax_kernels.py); other axes, dtypes and cupy keep the numpy/cupy
expression. Both paths against a float64 reference, the gradient against central
differences, and the edge values a row can hold (-inf entries, NaN, one element)."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd import gradcheck, gradgradcheck
from ddg.tensor import softmax_kernels as SK

RNG = np.random.default_rng(7)


def _ref(x, axis, log):
    x = x.astype(np.float64)
    s = x - x.max(axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return s - np.log(np.exp(s).sum(axis=axis, keepdims=True)) if log else \
            np.exp(s) / np.exp(s).sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype,tol", [("float32", 2e-6), ("float64", 1e-13)])
def test_last_axis_kernel_and_other_axis_agree_with_float64(log, dtype, tol):
    fn = F.log_softmax if log else F.softmax
    x = (RNG.standard_normal((3, 5, 37)) * 4).astype(dtype)
    assert SK.rows_of(x, -1) is not None and SK.rows_of(x, 1) is None and SK.rows_of(x.T, -1) is None
    for axis in (-1, 1):
        t = ddg.to_tensor(x, stop_gradient=False)
        y = fn(t, axis=axis)
        assert y.dtype == t.dtype
        np.testing.assert_allclose(y.numpy(), _ref(x, axis, log), rtol=tol, atol=tol)
        w = RNG.standard_normal(x.shape)
        (y * ddg.to_tensor(w.astype(dtype))).sum().backward()
        # the exact gradient from the float64 output: J^T w
        p = np.exp(_ref(x, axis, True))
        ref = w - p * w.sum(axis=axis, keepdims=True) if log else p * (w - (w * p).sum(axis=axis, keepdims=True))
        np.testing.assert_allclose(t.grad.numpy(), ref, rtol=20 * tol, atol=20 * tol)


@pytest.mark.parametrize("log", [False, True])
def test_last_axis_gradients_against_central_differences(log):
    fn = F.log_softmax if log else F.softmax
    x = ddg.to_tensor(RNG.standard_normal((2, 3, 6)), stop_gradient=False)
    assert gradcheck(lambda x: fn(x, axis=-1), [x])
    assert gradgradcheck(lambda x: fn(x, axis=-1) ** 2, [x])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rows_with_inf_nan_one_element_and_0d(dtype):
    x = RNG.standard_normal((4, 6))
    x[0, :3] = -np.inf       # masked entries: probability 0, log-probability -inf
    x[1, 2] = np.nan         # a NaN spreads over its row, as in numpy
    w = RNG.standard_normal(x.shape)
    for fn, log in ((F.softmax, False), (F.log_softmax, True)):
        t = ddg.to_tensor(x.astype(dtype), stop_gradient=False)
        y = fn(t)
        np.testing.assert_allclose(y.numpy(), _ref(x, -1, log), rtol=1e-6, atol=1e-7)  # equal_nan, inf exact
        (y * ddg.to_tensor(w.astype(dtype))).sum().backward()
        gx = t.grad.numpy()
        assert np.isnan(gx[1]).all() and np.isfinite(gx[[0, 2, 3]]).all()
        # d softmax_j / d x_j = p_j (1 - p_j) = 0 there; d log_softmax_j / d x_j = 1 - p_j = 1
        np.testing.assert_allclose(gx[0, :3], w[0, :3] if log else 0, rtol=1e-6)
    edge = np.array([[np.nan, 1.0, 2.0], [-np.inf, -np.inf, -np.inf]], dtype=dtype)  # NaN first; all masked
    assert np.isnan(F.softmax(ddg.to_tensor(edge)).numpy()).all()
    assert np.isnan(F.log_softmax(ddg.to_tensor(edge)).numpy()).all()
    one = ddg.to_tensor(np.array([[3.0], [-1.0]], dtype=dtype))
    np.testing.assert_array_equal(F.softmax(one).numpy(), [[1.0], [1.0]])
    np.testing.assert_array_equal(F.log_softmax(one).numpy(), [[0.0], [0.0]])
    np.testing.assert_array_equal(F.softmax(ddg.to_tensor(np.array(2.0, dtype=dtype)), axis=0).numpy(), 1.0)
