"""Layer, group, instance and batch norm through their compiled numpy kernels (ops.norm
RowNorm, BatchNormAffine): forward against float64 numpy, backward against central
differences, second order, float32 statistics on inputs with a large mean, layouts, and
the cupy path (simcupy) giving the same results."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd.gradcheck import gradcheck, gradgradcheck
from ddg.tensor import backend

RNG = np.random.default_rng(7)


def _ref_norm(x, axes, w=None, b=None, wshape=None, eps=1e-5):
    x = x.astype(np.float64)
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    y = (x - m) / np.sqrt(v + eps)
    if w is not None:
        y = y * w.astype(np.float64).reshape(wshape)
    if b is not None:
        y = y + b.astype(np.float64).reshape(wshape)
    return y


def _zeros(x, n):
    return ddg.Tensor._wrap(backend.get_array_module(x._data).zeros(n, x._data.dtype))


def _ones(x, n):
    return ddg.Tensor._wrap(backend.get_array_module(x._data).ones(n, x._data.dtype))


def _cases():
    """name -> (ddg call f(x, w, b), reference f(x, w, b), x shape, weight length)."""
    return {
        "layer": (lambda x, w, b: F.layer_norm(x, [4, 5], w, b),
                  lambda x, w, b: _ref_norm(x, (2, 3), w, b, (4, 5)), (2, 3, 4, 5), 20),
        "group": (lambda x, w, b: F.group_norm(x, 2, weight=w, bias=b),
                  lambda x, w, b: _ref_norm(x.reshape(2, 2, -1), (2,)).reshape(x.shape) * (
                      1 if w is None else w.reshape(1, 6, 1, 1)) + (0 if b is None else b.reshape(1, 6, 1, 1)),
                  (2, 6, 3, 2), 6),
        "instance": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
                     lambda x, w, b: _ref_norm(x, (2, 3), w, b, (1, 4, 1, 1)), (3, 4, 3, 3), 4),
        "instance_nhwc": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b, data_format="NHWC"),
                          lambda x, w, b: _ref_norm(x, (1, 2), w, b, (1, 1, 1, 4)), (2, 3, 3, 4), 4),
        "group_nhwc": (lambda x, w, b: F.group_norm(x, 2, weight=w, bias=b, data_format="NHWC"),
                       lambda x, w, b: np.moveaxis(_ref_norm(np.moveaxis(x, 3, 1).reshape(2, 2, -1), (2,)).reshape(
                           2, 4, 3, 3), 1, 3) * (1 if w is None else w) + (0 if b is None else b), (2, 3, 3, 4), 4),
        "batch": (lambda x, w, b: F.batch_norm(x, _zeros(x, 4), _ones(x, 4), w, b, training=True),
                  lambda x, w, b: _ref_norm(x, (0, 2, 3), w, b, (1, 4, 1, 1)), (3, 4, 2, 3), 4),
        "batch_nhwc": (lambda x, w, b: F.batch_norm(x, _zeros(x, 4), _ones(x, 4), w, b, training=True,
                                                    data_format="NHWC"),
                       lambda x, w, b: _ref_norm(x, (0, 1, 2), w, b, (1, 1, 1, 4)), (3, 2, 3, 4), 4),
    }


CASES = _cases()


def _inputs(name, dtype=np.float64, mean=0.0, scale=1.0):
    _, _, shape, n = CASES[name]
    x = (RNG.standard_normal(shape) * scale + mean).astype(dtype)
    return x, RNG.uniform(0.5, 1.5, n).astype(dtype), RNG.standard_normal(n).astype(dtype)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_float64(name, affine):
    fn, ref, _, _ = CASES[name]
    if name.startswith("batch") and not affine:
        pytest.skip("batch norm without weight and bias is the Standardize op")
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 2e-6)):
        x, w, b = _inputs(name, dtype)
        args = (w, b) if affine else (None, None)
        got = fn(ddg.to_tensor(x), *[None if a is None else ddg.to_tensor(a) for a in args]).numpy()
        assert got.dtype == dtype
        np.testing.assert_allclose(got, ref(x, *args), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_statistics_with_a_large_mean(name):
    """float32 inputs with mean 1e4 and spread 1e-2: the output keeps float32 accuracy
    relative to the spread (as far as the input's own rounding allows)."""
    fn, ref, _, _ = CASES[name]
    x, w, b = _inputs(name, np.float32, mean=1e4, scale=1e-2)
    got = fn(ddg.to_tensor(x), ddg.to_tensor(w), ddg.to_tensor(b)).numpy()
    # the input's rounding is ulp(1e4) / 1e-2 ~ 1e-1 of a standardized unit; compare with
    # the float64 result of the same float32 values
    np.testing.assert_allclose(got, ref(x, w, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_matches_central_differences(name):
    fn = CASES[name][0]
    x, w, b = (ddg.to_tensor(a, stop_gradient=False) for a in _inputs(name))
    assert gradcheck(fn, [x, w, b], eps=1e-6, atol=1e-6, rtol=1e-5)
    if not name.startswith("batch"):
        assert gradcheck(lambda x: fn(x, None, None), [x], eps=1e-6, atol=1e-6, rtol=1e-5)
        assert gradcheck(lambda x, w: fn(x, w, None), [x, w], eps=1e-6, atol=1e-6, rtol=1e-5)


def test_weight_gradients_over_many_rows():
    """One weight per element (layer norm; group norm on 1x1 maps): the weight and bias
    gradients are summed in blocks of rows; over 37 rows (two full blocks and a partial
    one) they match central differences in float64, and in float32 the float64 sums of
    the same float32 values."""
    from ddg.tensor.cpu_nn_kernels import _NORM_BLOCK
    assert 37 > 2 * _NORM_BLOCK
    x, w, b = RNG.standard_normal((37, 3)), RNG.uniform(0.5, 1.5, 3), RNG.standard_normal(3)
    args = [ddg.to_tensor(a, stop_gradient=False) for a in (x, w, b)]
    assert gradcheck(lambda x, w, b: F.layer_norm(x, [3], w, b), args, eps=1e-6, atol=1e-6, rtol=1e-5)
    xg, wg, bg = RNG.standard_normal((19, 4, 1, 1)), RNG.uniform(0.5, 1.5, 4), RNG.standard_normal(4)
    args = [ddg.to_tensor(a, stop_gradient=False) for a in (xg, wg, bg)]    # 38 rows, 2 groups
    assert gradcheck(lambda x, w, b: F.group_norm(x, 2, weight=w, bias=b), args, eps=1e-6, atol=1e-6, rtol=1e-5)
    x32 = (RNG.standard_normal((37, 64)) * 3 + 2).astype(np.float32)
    g32 = RNG.standard_normal((37, 64)).astype(np.float32)
    xt = ddg.to_tensor(x32, stop_gradient=False)
    wt, bt = (ddg.to_tensor(RNG.uniform(0.5, 1.5, 64).astype(np.float32), stop_gradient=False) for _ in range(2))
    (F.layer_norm(xt, [64], wt, bt) * ddg.to_tensor(g32)).sum().backward()
    xhat = _ref_norm(x32, (1,))
    np.testing.assert_allclose(bt.grad.numpy(), g32.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(wt.grad.numpy(), (g32 * xhat).sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["layer", "group_nhwc", "instance", "batch"])
def test_second_order_matches_central_differences(name):
    fn = CASES[name][0]
    x, w, b = (ddg.to_tensor(a, stop_gradient=False) for a in _inputs(name))
    assert gradgradcheck(lambda x, w, b: fn(x, w, b) ** 2, [x, w, b], eps=1e-6, atol=1e-5, rtol=1e-4)


def test_batch_norm_keeps_a_batch_innermost_layout():
    x = np.ascontiguousarray(RNG.standard_normal((3, 4, 5, 6)).transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    w, b = RNG.uniform(0.5, 1.5, 4), RNG.standard_normal(4)
    xt = ddg.Tensor._wrap(x)
    xt.stop_gradient = False
    assert not xt._data.flags.c_contiguous
    y = F.batch_norm(xt, ddg.zeros([4], "float64"), ddg.ones([4], "float64"), ddg.to_tensor(w), ddg.to_tensor(b),
                     training=True)
    assert y._data.strides == x.strides
    np.testing.assert_allclose(y.numpy(), _ref_norm(x, (0, 2, 3), w, b, (1, 4, 1, 1)), rtol=1e-12, atol=1e-12)


def test_half_precision_norms_keep_their_dtype():
    for name in ("layer", "group", "instance", "batch"):
        fn, ref, _, _ = CASES[name]
        x, w, b = _inputs(name, np.float32)
        xt, wt, bt = (ddg.to_tensor(a).astype("float16") for a in (x, w, b))
        xt.stop_gradient = False
        y = fn(xt, wt, bt)
        assert y.dtype == ddg.float16, name
        y.sum().backward()
        assert xt.grad.dtype == ddg.float16, name
        ref32 = ref(*(t.astype("float32").numpy() for t in (xt, wt, bt)))
        np.testing.assert_allclose(y.astype("float32").numpy(), ref32, atol=2e-2)


@pytest.mark.skipif(not backend.cupy_available(),
                    reason="GPU tests need cupy and an NVIDIA GPU (cupy is not installed or sees no GPU)")
@pytest.mark.parametrize("name", sorted(CASES))
def test_device_gives_the_cpu_results(name):
    fn = CASES[name][0]
    x, w, b = _inputs(name, np.float32)
    res = []
    for place in ("cpu", "gpu"):
        ts = [ddg.to_tensor(a, place=place, stop_gradient=False) for a in (x, w, b)]
        y = fn(*ts)
        y.backward(ddg.to_tensor(np.linspace(-1, 1, y.size, dtype=np.float32).reshape(y.shape), place=place))
        res.append([y.numpy()] + [t.grad.numpy() for t in ts])
    for a, c in zip(*res):
        np.testing.assert_allclose(c, a, rtol=1e-4, atol=1e-5)
