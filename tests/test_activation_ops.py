"""The single-op activations (ddg/autograd/ops/activation.py): forward against float64 numpy
formulas, backward against central differences, second order through backward_graph,
Paddle's gradients at the kinks, dtypes, and the vectorized erf's error bound."""
import math

import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd.gradcheck import gradcheck, gradgradcheck
from ddg.tensor.kernels import erf_numpy
from ddg.tensor import backend
from ddg.tensor.tensor import Tensor

_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(np.minimum(beta * x, threshold))) / beta)


K = math.sqrt(2 / math.pi)
# name: (ddg call, float64 reference, smooth enough for second-order checks)
CASES = {
    "gelu": (lambda x: F.gelu(x), lambda x: 0.5 * x * (1 + _erf64(x / math.sqrt(2))), True),
    "gelu_tanh": (lambda x: F.gelu(x, approximate=True),
                  lambda x: 0.5 * x * (1 + np.tanh(K * (x + 0.044715 * x ** 3))), True),
    "sigmoid": (F.sigmoid, _sig, True),
    "silu": (F.silu, lambda x: x * _sig(x), True),
    "swish": (F.swish, lambda x: x * _sig(x), True),
    "mish": (F.mish, lambda x: x * np.tanh(_softplus(x)), True),
    "leaky_relu": (F.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x), False),
    "leaky_relu_0.3": (lambda x: F.leaky_relu(x, 0.3), lambda x: np.where(x >= 0, x, 0.3 * x), False),
    "leaky_relu_neg": (lambda x: F.leaky_relu(x, -0.5), lambda x: np.where(x >= 0, x, -0.5 * x), False),
    "leaky_relu_2": (lambda x: F.leaky_relu(x, 2.0), lambda x: np.where(x >= 0, x, 2.0 * x), False),
    "elu": (F.elu, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))), True),
    "elu_0.5": (lambda x: F.elu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(np.minimum(x, 0))), True),
    "selu": (F.selu, lambda x: 1.0507009873554805 * np.where(
        x > 0, x, 1.6732632423543772 * np.expm1(np.minimum(x, 0))), True),
    "selu_args": (lambda x: F.selu(x, 1.5, 0.7), lambda x: 1.5 * np.where(x > 0, x, 0.7 * np.expm1(np.minimum(x, 0))),
                  True),
    "celu": (F.celu, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))), True),
    "celu_2": (lambda x: F.celu(x, 2.0), lambda x: np.where(x > 0, x, 2.0 * np.expm1(np.minimum(x, 0) / 2.0)), True),
    "softplus": (F.softplus, _softplus, True),
    "softplus_args": (lambda x: F.softplus(x, 2.0, 3.0), lambda x: _softplus(x, 2.0, 3.0), True),
    "log_sigmoid": (F.log_sigmoid, lambda x: np.log(_sig(x)), True),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6, True),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x * 0.1666667 + 0.5, 0, 1), True),
    "hardsigmoid_args": (lambda x: F.hardsigmoid(x, 0.2, 0.3), lambda x: np.clip(x * 0.2 + 0.3, 0, 1), True),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x), True),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x)), True),
    "softshrink": (F.softshrink, lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0)), True),
    "softshrink_1": (lambda x: F.softshrink(x, 1.0), lambda x: np.where(x > 1, x - 1, np.where(x < -1, x + 1, 0)),
                     True),
    "hardshrink": (F.hardshrink, lambda x: np.where(np.abs(x) >= 0.5, x, 0), True),
    "thresholded_relu": (lambda x: F.thresholded_relu(x, 0.7, 0.2), lambda x: np.where(x > 0.7, x, 0.2), True),
    "relu": (F.relu, lambda x: np.maximum(x, 0), True),
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6), True),
    "hardtanh": (F.hardtanh, lambda x: np.clip(x, -1, 1), True),
    "hardtanh_args": (lambda x: F.hardtanh(x, -2.5, 1.5), lambda x: np.clip(x, -2.5, 1.5), True),
    "clip": (lambda x: ddg.clip(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), True),
    "clip_lo": (lambda x: ddg.clip(x, min=-3.0), lambda x: np.maximum(x, -3.0), True),
    "rrelu_eval": (lambda x: F.rrelu(x, 0.1, 0.3, training=False), lambda x: np.where(x >= 0, x, 0.2 * x), False),
}


def _points(n=200, seed=0):
    """Values over [-8, 8], kept 1e-3 away from every kink of the cases (finite differences
    straddle no kink)."""
    x = np.random.default_rng(seed).uniform(-8, 8, n)
    for k in (0.0, 0.5, -0.5, 1.0, -1.0, 0.7, 3.0, -3.0, 6.0, 2.5, -2.5, 1.5, 3.0 / 2, 2.0 / 0.2 - 1.5):
        x = np.where(np.abs(x - k) < 2e-3, x + 5e-3, x)
    return x


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_float64_formula(name):
    fn, ref, _ = CASES[name]
    x = np.concatenate([_points(), [0.0, -20.0, 30.0, 1e-8, -1e-8]])
    got = fn(ddg.to_tensor(x)).numpy()
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref(x), rtol=1e-12, atol=3e-7 if name.startswith("gelu") else 1e-13)
    got32 = fn(ddg.to_tensor(x.astype(np.float32))).numpy()
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, ref(x.astype(np.float32).astype(np.float64)), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_matches_central_differences(name):
    fn = CASES[name][0]
    x = ddg.to_tensor(_points(60, seed=1).reshape(3, 4, 5))
    x.stop_gradient = False
    assert gradcheck(fn, [x], eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_with_a_strided_output_gradient_in_another_layout(name):
    # input channels-last in memory, output gradient a view into a padded buffer (as a
    # convolution's input gradient is): the same gradient as with a contiguous one
    fn = CASES[name][0]
    rng = np.random.default_rng(5)
    x_nhwc = rng.uniform(-8, 8, (2, 12, 12, 40)).astype(np.float32)
    gp = np.zeros((2, 14, 14, 40), np.float32)
    gp[:, 1:-1, 1:-1] = rng.standard_normal((2, 12, 12, 40))
    g_view = gp[:, 1:-1, 1:-1].transpose(0, 3, 1, 2)
    leaf = ddg.to_tensor(x_nhwc, stop_gradient=False)
    x = leaf.transpose([0, 3, 1, 2])                      # a strided view, NHWC in memory
    fn(x).backward(Tensor._wrap(g_view))                   # the array as it is, not a copy
    assert x_nhwc.size >= 8192 and not x._data.flags.c_contiguous and not g_view.flags.c_contiguous
    ref = ddg.to_tensor(np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2)), stop_gradient=False)
    fn(ref).backward(ddg.to_tensor(np.ascontiguousarray(g_view)))   # every array C-contiguous
    # equal up to float32 rounding (the compiled loop's vector body and scalar tail round
    # a few values differently, and which elements fall in which depends on the layout)
    np.testing.assert_allclose(leaf.grad.numpy().transpose(0, 3, 1, 2), ref.grad.numpy(), rtol=2e-6, atol=1e-6)
    assert np.abs(ref.grad.numpy()).max() > 0


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c[2]))
def test_second_order_matches_central_differences(name):
    fn = CASES[name][0]
    x = ddg.to_tensor(_points(24, seed=2).reshape(4, 6) / 2)
    x.stop_gradient = False
    assert gradgradcheck(fn, [x], eps=1e-6, atol=1e-5, rtol=1e-4)


def test_each_activation_is_one_node():
    x = ddg.to_tensor(np.linspace(-2, 2, 7))
    x.stop_gradient = False
    for name, (fn, _, _) in CASES.items():
        y = fn(x)
        assert y._node is not None and y._node.edges[0][0] is x, f"{name} is not a single op on its input"


def test_gradients_at_kinks_are_paddles():
    def grad_at(fn, values):
        x = ddg.to_tensor(np.array(values, dtype=np.float64))
        x.stop_gradient = False
        fn(x).sum().backward()
        return x.grad.numpy()
    np.testing.assert_array_equal(grad_at(F.leaky_relu, [0.0]), [1.0])
    np.testing.assert_array_equal(grad_at(lambda x: F.elu(x, 0.5), [0.0]), [0.5])
    np.testing.assert_allclose(grad_at(F.selu, [0.0]), [1.0507009873554805 * 1.6732632423543772])
    np.testing.assert_allclose(grad_at(lambda x: F.celu(x, 2.0), [0.0]), [1.0])
    np.testing.assert_array_equal(grad_at(F.hardswish, [-3.0, 3.0]), [0.0, 1.0])
    np.testing.assert_array_equal(grad_at(lambda x: F.hardsigmoid(x, 0.25, 0.5), [-2.0, 2.0, 0.0]), [0, 0, 0.25])
    np.testing.assert_array_equal(grad_at(F.softshrink, [0.5, -0.5, 0.6]), [0, 0, 1])
    np.testing.assert_array_equal(grad_at(F.hardshrink, [0.5, -0.5, 0.4]), [1, 1, 0])
    np.testing.assert_array_equal(grad_at(lambda x: F.thresholded_relu(x, 1.0), [1.0, 1.1]), [0, 1])
    np.testing.assert_array_equal(grad_at(F.relu, [0.0, 1e-30]), [0, 1])
    np.testing.assert_array_equal(grad_at(F.relu6, [0.0, 6.0, 5.9]), [0, 0, 1])           # strict at both kinks
    np.testing.assert_array_equal(grad_at(F.hardtanh, [-1.0, 1.0, 0.9]), [0, 0, 1])
    np.testing.assert_array_equal(grad_at(lambda x: ddg.clip(x, -1.0, 1.0), [-1.0, 1.0, 1.1]), [1, 1, 0])  # bounds kept
    np.testing.assert_array_equal(grad_at(lambda x: F.rrelu(x, training=True), [0.0]), [1.0])
    # far tails stay finite
    assert np.isfinite(grad_at(F.mish, [-100.0, 100.0])).all()
    np.testing.assert_allclose(grad_at(F.softplus, [100.0, -100.0]), [1.0, 0.0], atol=1e-30)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_half_inputs_keep_their_dtype(dtype):
    x = ddg.to_tensor(np.linspace(-3, 3, 13, dtype=np.float32)).astype(dtype)
    x.stop_gradient = False
    for name, (fn, ref, _) in CASES.items():
        y = fn(x)
        assert y.dtype == x.dtype, name
        y.sum().backward()
        assert x.grad.dtype == x.dtype, name
        x.clear_grad()
        tol = 1e-2 if dtype != "float32" else 1e-5
        np.testing.assert_allclose(y.astype("float32").numpy(), ref(x.astype("float32").numpy().astype(np.float64)),
                                   rtol=tol, atol=tol, err_msg=name)


def test_integer_input_is_computed_in_the_default_float():
    y = F.gelu(ddg.to_tensor(np.array([-1, 0, 2])))
    assert y.dtype == ddg.float32
    np.testing.assert_allclose(y.numpy(), 0.5 * np.array([-1, 0, 2]) * (1 + _erf64(np.array([-1, 0, 2]) / 2 ** 0.5)),
                               rtol=1e-6)


def test_erf_numpy_error_bound():
    """erf_numpy's stated bound: within 2e-7 of math.erf computed in float64, 3e-7 in float32,
    and relative error below 1e-10 (float64) near zero, where the series is used."""
    x = np.concatenate([np.linspace(-7, 7, 200001), np.geomspace(1e-30, 0.5, 2001),
                        -np.geomspace(1e-30, 0.5, 2001), [0.0, np.inf, -np.inf]])
    ref = _erf64(x)
    e64 = erf_numpy(x)
    assert e64.dtype == np.float64
    assert np.abs(e64 - ref).max() < 2e-7
    x32 = x.astype(np.float32)
    e32 = erf_numpy(x32)
    assert e32.dtype == np.float32
    assert np.abs(e32.astype(np.float64) - _erf64(x32.astype(np.float64))).max() < 3e-7
    small = np.abs(x) < 0.5
    nz = small & (x != 0)
    assert (np.abs(e64[nz] - ref[nz]) / np.abs(ref[nz])).max() < 1e-10
    assert (np.abs(e32[nz] - ref[nz]) / np.abs(ref[nz])).max() < 4e-7
    np.testing.assert_array_equal(erf_numpy(np.array([0.0, np.inf, -np.inf])), [0.0, 1.0, -1.0])
    assert np.isnan(erf_numpy(np.array([np.nan]))).all()


def test_erf_op_without_scipy_uses_the_vectorized_approximation(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "scipy.special", None)   # import fails as if scipy were absent
    x = np.linspace(-4, 4, 101)
    np.testing.assert_allclose(ddg.erf(ddg.to_tensor(x)).numpy(), _erf64(x), atol=2e-7)
    np.testing.assert_allclose(F.gelu(ddg.to_tensor(x)).numpy(), 0.5 * x * (1 + _erf64(x / 2 ** 0.5)), atol=2e-7)


@pytest.mark.skipif(not backend.cupy_available(),
                    reason="GPU tests need cupy and an NVIDIA GPU (cupy is not installed or sees no GPU)")
@pytest.mark.parametrize("name", sorted(CASES))
def test_device_gives_the_cpu_results(name):
    fn = CASES[name][0]
    x = _points(60, seed=3).reshape(3, 20).astype(np.float32)
    results = []
    for place in ("cpu", "gpu"):
        t = ddg.to_tensor(x, place=place, stop_gradient=False)
        y = fn(t)
        y.backward(ddg.ones_like(y) * 0.5)
        results.append((y.numpy(), t.grad.numpy()))
        assert (type(y._data) is np.ndarray) == (place == "cpu"), f"{name} left the {place}"
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_rrelu_with_given_slopes(dtype):
    """The RRelu op against its formula with fixed uniform draws (it owns and overwrites the
    array it is given, hence the copies), its gradients by central differences, and the
    training-mode function's slopes within [lower, upper] with the gradient they imply."""
    from ddg.autograd.ops.activation import RRelu
    rng = np.random.default_rng(7)
    x = _points(60, seed=4).reshape(3, 4, 5)
    u = rng.uniform(0, 1, x.shape)
    slope = 0.1 + 0.2 * u.astype(dtype).astype(np.float64)
    y = RRelu(u.astype(dtype), 0.1, 0.3)(ddg.to_tensor(x.astype(dtype))).numpy()
    assert y.dtype == dtype
    np.testing.assert_allclose(y, np.where(x >= 0, x, x * slope), rtol=1e-6 if dtype == "float32" else 1e-14)
    if dtype == "float64":
        xt = ddg.to_tensor(x, stop_gradient=False)
        assert gradcheck(lambda t: RRelu(u.copy(), 0.1, 0.3)(t), [xt], eps=1e-6, atol=1e-6, rtol=1e-5)
        assert gradgradcheck(lambda t: RRelu(u.copy(), 0.1, 0.3)(t) ** 2, [xt], eps=1e-6, atol=1e-5, rtol=1e-4)
    xt = ddg.to_tensor(x.astype(dtype).T, stop_gradient=False)        # a transposed (F-ordered) input
    y = F.rrelu(xt, 0.1, 0.3, training=True)
    g = rng.standard_normal(y.shape).astype(dtype)
    y.backward(ddg.to_tensor(g))
    xa, ya = x.astype(dtype).T, y.numpy()
    s = ya[xa < 0] / xa[xa < 0]
    assert s.min() >= 0.1 - 1e-6 and s.max() <= 0.3 + 1e-6 and s.std() > 0.03   # drawn per element
    d = np.where(xa >= 0, 1, ya / np.where(xa == 0, 1, xa))
    np.testing.assert_allclose(xt.grad.numpy(), g * d, rtol=1e-5)
    with pytest.raises(TypeError, match="rrelu"):
        F.rrelu(ddg.to_tensor(np.array([1, -2])))


@pytest.mark.parametrize("delta,is_huber", [(1.0, True), (0.3, True), (2.0, False)])
def test_smooth_l1_loss_matches_its_branches(delta, is_huber):
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((5, 7)) * 2, rng.standard_normal((5, 7))
    x[0, :3] = y[0, :3] + np.array([delta, -delta, 0.0])     # the branch boundary and d = 0
    d = x - y
    ref = np.where(np.abs(d) < delta, 0.5 * d * d, delta * (np.abs(d) - 0.5 * delta)) / (1 if is_huber else delta)
    xt = ddg.to_tensor(x, stop_gradient=False)
    out = F.smooth_l1_loss(xt, ddg.to_tensor(y), reduction="none", delta=delta, is_huber=is_huber)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-14, atol=1e-15)
    out.sum().backward()
    gref = np.where(np.abs(d) < delta, d, delta * np.sign(d)) / (1 if is_huber else delta)
    np.testing.assert_allclose(xt.grad.numpy(), gref, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_smooth_l1_loss_reductions_both_gradients_and_second_order(reduction):
    from ddg.autograd import gradcheck, gradgradcheck
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((4, 6)) * 2, rng.standard_normal((4, 6))
    d = x - y
    per = np.where(np.abs(d) < 0.5, 0.5 * d * d, 0.5 * (np.abs(d) - 0.25)) / 0.5
    xt, yt = ddg.to_tensor(x, stop_gradient=False), ddg.to_tensor(y, stop_gradient=False)
    out = F.smooth_l1_loss(xt, yt, reduction=reduction, delta=0.5, is_huber=False)
    assert out.shape == [] and out.dtype == xt.dtype
    np.testing.assert_allclose(out.numpy(), per.mean() if reduction == "mean" else per.sum(), rtol=1e-14)
    out.backward()
    g = np.clip(d, -0.5, 0.5) / 0.5 / (d.size if reduction == "mean" else 1)
    np.testing.assert_allclose(xt.grad.numpy(), g, rtol=1e-14)
    np.testing.assert_allclose(yt.grad.numpy(), -g, rtol=1e-14)
    xs, ys = (ddg.to_tensor(a[:2, :3] + 0.01, stop_gradient=False) for a in (x, y))  # off the kinks
    assert gradcheck(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, delta=0.5), [xs, ys])
    assert gradgradcheck(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, delta=0.5) ** 2, [xs, ys])
    x32 = ddg.to_tensor(x.astype("float32"))
    o32 = F.smooth_l1_loss(x32, ddg.to_tensor(y.astype("float32")), reduction=reduction, delta=0.5)
    assert o32.dtype == x32.dtype
    with pytest.raises(ValueError, match="smooth_l1_loss"):
        F.smooth_l1_loss(xt, yt, reduction="avg")


def test_maximum_minimum_split_ties_and_broadcast():
    a = ddg.to_tensor(np.array([[1.0, 2.0, 3.0], [3.0, 0.0, -1.0]]), stop_gradient=False)
    b = ddg.to_tensor(np.array([2.0, 2.0, 1.0]), stop_gradient=False)
    (ddg.maximum(a, b) * ddg.to_tensor(np.arange(1.0, 7.0).reshape(2, 3))).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[0, 1, 3], [4, 0, 0]])
    np.testing.assert_array_equal(b.grad.numpy(), [1 + 0, 1 + 5, 6])
    x = ddg.to_tensor(np.array([1.0, 2.0, 3.0]), stop_gradient=False)
    ddg.minimum(x, ddg.to_tensor(np.array([2.0, 2.0, 2.0]))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 0.5, 0])


@pytest.mark.parametrize("shape,scale,mode_kw", [((2, 3, 4, 5), 2, {}), ((1, 2, 3, 4), (3, 2), {}),
                                                  ((2, 3, 5), 4, {"data_format": "NCW"}),
                                                  ((1, 2, 2, 3, 3), 2, {"data_format": "NCDHW"})])
def test_nearest_integer_upsample_is_repeat_with_its_gradients(shape, scale, mode_kw):
    x = np.random.default_rng(5).standard_normal(shape)
    xt = ddg.to_tensor(x, stop_gradient=False)
    y = F.interpolate(xt, scale_factor=scale, mode="nearest", **mode_kw)
    ref = x
    scales = scale if isinstance(scale, tuple) else (scale,) * (x.ndim - 2)
    for ax, s in enumerate(scales, start=2):
        ref = np.repeat(ref, s, axis=ax)
    np.testing.assert_array_equal(y.numpy(), ref)
    assert gradcheck(lambda t: F.interpolate(t, scale_factor=scale, mode="nearest", **mode_kw), [xt])
    assert gradgradcheck(lambda t: F.interpolate(t, scale_factor=scale, mode="nearest", **mode_kw) ** 2, [xt])


@pytest.mark.parametrize("shape,n_w,fmt", [((2, 3, 4, 5), 3, "NCHW"), ((2, 4, 5, 3), 3, "NHWC"), ((4, 6), 1, "NCHW"),
                                            ((3, 4, 5), 4, "NCL")])
def test_prelu_values_and_gradients(shape, n_w, fmt):
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape)
    x.flat[:3] = 0.0                                   # Paddle's gradient at 0 is w's branch
    w = rng.uniform(0.1, 0.9, n_w)
    ch = 1 if fmt.startswith("NC") else -1
    wb = w.reshape([-1 if i == (ch % x.ndim) else 1 for i in range(x.ndim)]) if n_w > 1 else w
    xt, wt = ddg.to_tensor(x, stop_gradient=False), ddg.to_tensor(w, stop_gradient=False)
    y = F.prelu(xt, wt, data_format=fmt)
    np.testing.assert_allclose(y.numpy(), np.where(x > 0, x, x * wb), rtol=1e-15)
    g = rng.standard_normal(shape)
    y.backward(ddg.to_tensor(g))
    np.testing.assert_allclose(xt.grad.numpy(), np.where(x > 0, g, g * wb), rtol=1e-14)
    gw = (g * np.minimum(x, 0))
    gw = gw.sum() if n_w == 1 else gw.sum(axis=tuple(i for i in range(x.ndim) if i != ch % x.ndim))
    np.testing.assert_allclose(wt.grad.numpy(), np.reshape(gw, w.shape), rtol=1e-12)


@pytest.mark.skipif(not backend.cupy_available(),
                    reason="GPU tests need cupy and an NVIDIA GPU (cupy is not installed or sees no GPU)")
def test_rrelu_training_on_device():
    x = _points(60, seed=5).reshape(6, 10).astype(np.float32)
    xt = ddg.to_tensor(x, place="gpu", stop_gradient=False)
    y = F.rrelu(xt, 0.1, 0.3, training=True)
    assert type(y._data) is not np.ndarray
    y.backward(ddg.ones_like(y) * 0.5)
    ya, ga = y.numpy(), xt.grad.numpy()
    s = ya[x < 0] / x[x < 0]
    assert s.min() >= 0.1 - 1e-6 and s.max() <= 0.3 + 1e-6
    np.testing.assert_allclose(ga, 0.5 * np.where(x >= 0, 1, ya / x), rtol=1e-5)


@pytest.mark.parametrize("shape,n_w,fmt", [((2, 3, 4, 5), 3, "NCHW"), ((2, 4, 3), 3, "NLC"), ((3, 5), 1, "NCHW")])
def test_prelu_op_gradients_and_float32(shape, n_w, fmt):
    """The compiled PReLU op: both gradients by central differences, second order, and float32
    against the float64 formula (the weight gradient summed in float64)."""
    rng = np.random.default_rng(8)
    x = _points(int(np.prod(shape)), seed=6).reshape(shape)
    w = rng.uniform(0.1, 0.9, n_w)
    xt, wt = ddg.to_tensor(x, stop_gradient=False), ddg.to_tensor(w, stop_gradient=False)
    assert F.prelu(xt, wt, data_format=fmt)._node.name == "PRelu"
    fn = lambda a, b: F.prelu(a, b, data_format=fmt)   # noqa: E731
    assert gradcheck(fn, [xt, wt], eps=1e-6, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda a, b: fn(a, b) ** 2, [xt, wt], eps=1e-6, atol=1e-5, rtol=1e-4)
    big = rng.standard_normal((4, n_w, 50, 50) if fmt == "NCHW" and len(shape) == 4 else (40, 50, n_w))
    f = "NLC" if big.shape[-1] == n_w and len(big.shape) == 3 else "NCHW"
    x32, w32 = ddg.to_tensor(big.astype(np.float32), stop_gradient=False), ddg.to_tensor(w.astype(np.float32),
                                                                                          stop_gradient=False)
    y = F.prelu(x32, w32, data_format=f)
    g = rng.standard_normal(big.shape).astype(np.float32)
    y.backward(ddg.to_tensor(g))
    ch = 1 if f == "NCHW" else -1
    wb = w.astype(np.float32).astype(np.float64).reshape([-1 if i == ch % big.ndim else 1 for i in range(big.ndim)])
    xb = big.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(y.numpy(), np.where(xb > 0, xb, xb * wb), rtol=1e-6)
    axes = tuple(i for i in range(big.ndim) if i != ch % big.ndim)
    gw = (g * np.minimum(xb, 0)).sum(axis=axes)
    np.testing.assert_allclose(w32.grad.numpy(), gw, rtol=1e-5)
    assert w32.grad.dtype == np.float32 and x32.grad.dtype == np.float32


@pytest.mark.parametrize("value", [np.float32(-2.0), np.float32(0.5), np.zeros((0, 3), np.float32)])
def test_compiled_activations_keep_scalar_and_empty_shapes(value):
    w = ddg.to_tensor(np.array([0.25], np.float32))
    for fn in (F.sigmoid, F.relu, F.relu6, lambda t: F.rrelu(t, training=True), lambda t: F.prelu(t, w)):
        x = ddg.to_tensor(value, stop_gradient=False)
        y = fn(x)
        y.sum().backward()
        assert y.shape == x.shape and x.grad.shape == x.shape


def _glu64(x, ax):
    a, b = np.split(x, 2, ax)
    return a / (1 + np.exp(-b))


@pytest.mark.parametrize("shape,axis", [((3, 4, 6), -1), ((4, 6, 5), 1), ((6, 3), 0), ((2, 0, 4), -1)])
def test_glu_is_one_op_matching_float64_and_its_gradients(shape, axis):
    x = np.random.default_rng(4).uniform(-6, 6, shape)
    if x.size:
        x.flat[0], x.flat[-1] = -100.0, 100.0          # saturated gates stay finite
    t = ddg.to_tensor(x, stop_gradient=False)
    y = F.glu(t, axis)
    assert y._node is not None and y._node.edges[0][0] is t          # one node on its input
    np.testing.assert_allclose(y.numpy(), _glu64(x, axis), rtol=1e-13, atol=1e-300)
    y32 = F.glu(ddg.to_tensor(x.astype(np.float32)), axis).numpy()
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, _glu64(x.astype(np.float32).astype(np.float64), axis), rtol=2e-6, atol=2e-6)
    if not x.size:
        return
    small = ddg.to_tensor(x / 4, stop_gradient=False)
    assert gradcheck(lambda v: F.glu(v, axis), [small], eps=1e-6, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda v: F.glu(v, axis), [small], eps=1e-6, atol=1e-5, rtol=1e-4)
    # float32 gradients against float64 ones
    g = np.random.default_rng(5).standard_normal(y.shape)
    grads = []
    for dt in (np.float64, np.float32):
        v = ddg.to_tensor(x.astype(dt), stop_gradient=False)
        F.glu(v, axis).backward(ddg.to_tensor(g.astype(dt)))
        grads.append(v.grad.numpy())
    assert grads[1].dtype == np.float32
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_glu_half_inputs_keep_their_dtype(dtype):
    x = ddg.to_tensor(np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)).astype(dtype)
    x.stop_gradient = False
    y = F.glu(x)
    assert y.dtype == x.dtype
    y.sum().backward()
    assert x.grad.dtype == x.dtype
    np.testing.assert_allclose(y.astype("float32").numpy(), _glu64(x.astype("float32").numpy().astype(np.float64), -1),
                               rtol=1e-2, atol=1e-2)


@pytest.mark.skipif(not backend.cupy_available(),
                    reason="GPU tests need cupy and an NVIDIA GPU (cupy is not installed or sees no GPU)")
def test_glu_on_gpu_gives_the_cpu_results():
    x = np.random.default_rng(6).uniform(-5, 5, (3, 4, 6)).astype(np.float32)
    results = []
    for place in ("cpu", "gpu"):
        t = ddg.to_tensor(x, place=place, stop_gradient=False)
        y = F.glu(t, 1)
        y.backward(ddg.ones_like(y) * 0.5)
        results.append((y.numpy(), t.grad.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-6)
