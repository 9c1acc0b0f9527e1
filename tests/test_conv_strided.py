"""Strided depthwise convolution by polyphase components (``ddg.tensor.conv_strided``):
the path is taken, forward against the float64 loop reference in both input layouts,
backward against central differences, second order through ``backward_graph``, half
precision through the float32 path."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd import gradcheck, gradgradcheck
from ddg.tensor import conv_strided
from test_nn_conv_pool import _pads4, _pair, ref_conv2d

RNG = np.random.default_rng(11)


def T(a, grad=False, dtype="float64"):
    return ddg.to_tensor(np.asarray(a, dtype=dtype), stop_gradient=not grad)


@pytest.fixture
def spy(monkeypatch):
    calls = []
    orig = conv_strided.forward

    def forward(*a):
        calls.append(a[0].shape)
        return orig(*a)
    monkeypatch.setattr(conv_strided, "forward", forward)
    return calls


# (x shape, channel multiplier, kernel, stride, padding): even and odd sizes, every phase
# count, asymmetric pads, a kernel that is and one that is not a multiple of the stride
CASES = [
    ((2, 3, 8, 8), 1, (3, 3), 2, 1),
    ((3, 2, 7, 9), 2, (3, 3), 2, 1),
    ((2, 3, 9, 8), 1, (4, 4), 2, 1),
    ((2, 2, 10, 11), 1, (5, 5), 3, 2),
    ((2, 3, 7, 6), 1, (3, 2), (2, 1), [0, 2, 1, 0]),
    ((1, 2, 6, 7), 1, (3, 3), 2, 0),
]


def _layouts(x, dt):
    a = T(x, True, dt)
    b = T(x.transpose(1, 2, 3, 0), True, dt)
    return [(a, a, lambda g: g), (b, b.transpose([3, 0, 1, 2]), lambda g: g.transpose(3, 0, 1, 2))]


@pytest.mark.parametrize("xs,mult,k,stride,padding", CASES)
def test_polyphase_forward_and_input_gradient_in_both_layouts(spy, xs, mult, k, stride, padding):
    c = xs[1]
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((c * mult, 1) + k), RNG.standard_normal(c * mult)
    ref = ref_conv2d(x, w, b, _pair(stride), _pads4(padding), (1, 1), c)
    gy = RNG.standard_normal(ref.shape)
    # input gradient of sum(y * gy): the adjoint of the (linear in x) reference, column by column
    gx_ref = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[i] = 1.0
        gx_ref[i] = (ref_conv2d(e, w, None, _pair(stride), _pads4(padding), (1, 1), c) * gy).sum()
    for dt, tol in (("float64", 1e-12), ("float32", 3e-6)):
        for leaf, inp, back in _layouts(x, dt):
            wt, bt = T(w, True, dt), T(b, True, dt)
            y = F.conv2d(inp, wt, bt, stride, padding, 1, c)
            assert y.dtype == getattr(ddg, dt)
            np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=tol * np.abs(ref).max())
            (y * T(gy, dtype=dt)).sum().backward()
            gx = leaf.grad.numpy()
            np.testing.assert_allclose(back(gx), gx_ref, rtol=0, atol=tol * np.abs(gx_ref).max())
            np.testing.assert_allclose(bt.grad.numpy(), gy.sum(axis=(0, 2, 3)), rtol=1e-6)
    assert len(spy) == 4


@pytest.mark.parametrize("xs,mult,k,stride,padding", CASES[:4])
def test_polyphase_gradients_central_differences(spy, xs, mult, k, stride, padding):
    c = xs[1]
    x = T(RNG.standard_normal((1,) + xs[1:]), True)
    w = T(RNG.standard_normal((c * mult, 1) + k), True)
    b = T(RNG.standard_normal(c * mult), True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride, padding, 1, c), [x, w, b])
    assert gradcheck(lambda w: F.conv2d(T(x.numpy()), w, None, stride, padding, 1, c), [w])
    assert gradcheck(lambda x: F.conv2d(x, T(w.numpy()), None, stride, padding, 1, c), [x])
    assert spy


def test_polyphase_second_order(spy):
    x = T(RNG.standard_normal((2, 2, 6, 5)), True)
    w = T(RNG.standard_normal((4, 1, 3, 3)), True)
    assert gradgradcheck(lambda x, w: ddg.tanh(F.conv2d(x, w, None, 2, 1, 1, 2)), [x, w])
    assert spy


def test_polyphase_input_gradient_is_dense_and_half_precision_works(spy):
    x, w = RNG.standard_normal((4, 3, 9, 9)), RNG.standard_normal((3, 1, 3, 3))
    xt = T(x, True, "float32")
    F.conv2d(xt, T(w, dtype="float32"), None, 2, 1, 1, 3).sum().backward()
    g = xt.grad.numpy()
    assert g.shape == x.shape
    ref = ref_conv2d(x, w, None, (2, 2), (1, 1, 1, 1), (1, 1), 3)
    for dt in ("float16", "bfloat16"):
        xh = T(x, True, dt)
        yh = F.conv2d(xh, T(w, dtype=dt), None, 2, 1, 1, 3)
        assert yh.dtype == getattr(ddg, dt)
        np.testing.assert_allclose(yh.numpy().astype(np.float64), ref, rtol=0, atol=0.05 * np.abs(ref).max())
        yh.sum().backward()
        assert xh.grad.dtype == getattr(ddg, dt)
        np.testing.assert_allclose(xh.grad.numpy().astype(np.float64), g, rtol=0, atol=0.02 * np.abs(g).max())


def test_strides_the_path_leaves_to_the_direct_loop(spy):
    # a stride larger than the kernel, a dilation, and narrow groups keep the direct loop
    x = RNG.standard_normal((2, 4, 9, 9))
    for w_shape, stride, dil, groups in (((4, 1, 2, 2), 3, 1, 4), ((4, 1, 3, 3), 2, 2, 4), ((4, 2, 3, 3), 2, 1, 2)):
        w = RNG.standard_normal(w_shape)
        y = F.conv2d(T(x), T(w), None, stride, 1, dil, groups).numpy()
        np.testing.assert_allclose(y, ref_conv2d(x, w, None, _pair(stride), (1, 1, 1, 1), _pair(dil), groups),
                                   rtol=1e-12, atol=1e-12)
    assert not spy
