"""The compiled convolution and pooling loops (``ddg.autograd.ops.conv_kernels``): forward
against float64 plain-loop references, backward against central differences, second-order
gradients through ``backward_graph``, float32 within round-off of float64."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd import gradcheck, gradgradcheck
from test_nn_conv_pool import _pads4, _pair, ref_conv2d

RNG = np.random.default_rng(3)


def T(a, grad=False, dtype="float64"):
    return ddg.to_tensor(np.asarray(a, dtype=dtype), stop_gradient=not grad)


# (x shape, channel multiplier, kernel, stride, padding, dilation)
DEPTHWISE = [
    ((2, 3, 7, 8), 1, (3, 3), 1, 1, 1),
    ((3, 4, 9, 9), 2, (3, 3), 2, 1, 1),
    ((2, 2, 8, 7), 1, (5, 3), 1, [2, 1], (2, 1)),
    ((1, 2, 7, 7), 3, (3, 3), (3, 2), 0, 1),
    ((2, 3, 6, 6), 1, (2, 2), 1, [1, 0, 0, 1], 1),     # asymmetric pads
]


@pytest.mark.parametrize("xs,mult,k,stride,padding,dil", DEPTHWISE)
def test_depthwise_forward_float64_and_float32(xs, mult, k, stride, padding, dil):
    c = xs[1]
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((c * mult, 1) + k), RNG.standard_normal(c * mult)
    ref = ref_conv2d(x, w, b, _pair(stride), _pads4(padding), _pair(dil), c)
    y = F.conv2d(T(x), T(w), T(b), stride, padding, dil, c).numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)
    y32 = F.conv2d(T(x, dtype="float32"), T(w, dtype="float32"), T(b, dtype="float32"), stride, padding, dil, c)
    assert y32.dtype == ddg.float32
    np.testing.assert_allclose(y32.numpy(), ref, rtol=0, atol=2e-6 * np.abs(ref).max())


@pytest.mark.parametrize("xs,mult,k,stride,padding,dil", DEPTHWISE)
def test_depthwise_gradients(xs, mult, k, stride, padding, dil):
    c = xs[1]
    x = T(RNG.standard_normal(xs), True)
    w = T(RNG.standard_normal((c * mult, 1) + k), True)
    b = T(RNG.standard_normal(c * mult), True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride, padding, dil, c), [x, w, b])
    # only one of the two gradients asked for
    assert gradcheck(lambda w: F.conv2d(T(x.numpy()), w, None, stride, padding, dil, c), [w])
    assert gradcheck(lambda x: F.conv2d(x, T(w.numpy()), None, stride, padding, dil, c), [x])


def test_depthwise_float32_gradients_match_float64():
    x, w = RNG.standard_normal((4, 8, 12, 12)), RNG.standard_normal((8, 1, 3, 3))
    grads = {}
    for dt in ("float64", "float32"):
        xt, wt = T(x, True, dt), T(w, True, dt)
        (F.conv2d(xt, wt, None, 1, 1, 1, 8) ** 2).sum().backward()
        grads[dt] = (xt.grad.numpy(), wt.grad.numpy())
    for a, r in zip(grads["float32"], grads["float64"]):
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-5 * np.abs(r).max())


def test_depthwise_second_order():
    x = T(RNG.standard_normal((2, 3, 6, 6)), True)
    w = T(RNG.standard_normal((3, 1, 3, 3)), True)
    assert gradgradcheck(lambda x, w: ddg.tanh(F.conv2d(x, w, None, 2, 1, 1, 3)), [x, w])
