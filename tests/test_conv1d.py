"""1-D convolutions and 1-D transposed convolutions as column products (``ddg.tensor.conv1d``):
each variant forced on small shapes, forward against the float64 reference, backward against
central differences, second order through ``backward_graph``, float32 within round-off of
float64, half precision, and the same results on the device's array paths."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd import gradcheck, gradgradcheck
from ddg.tensor import conv1d as C1
from test_nn_conv_pool import assert_cpu_and_device_agree, ref_conv2d, ref_conv2d_transpose

RNG = np.random.default_rng(11)


def T(a, grad=False, dtype="float64"):
    return ddg.to_tensor(np.asarray(a, dtype=dtype), stop_gradient=not grad)


def _ref1d(x, w, b, s, p, d):
    return ref_conv2d(x[:, :, None], w[:, :, None], b, (1, s), (0, 0) + tuple(p), (1, d), 1)[:, :, 0]


def _ref1d_t(x, w, b, s, p, d, opad):
    return ref_conv2d_transpose(x[:, :, None], w[:, :, None], b, (1, s), (0, 0) + tuple(p), (1, d), 1,
                                (0, opad))[:, :, 0]


def _spy(monkeypatch, name):
    calls = []
    real = getattr(C1, name)
    monkeypatch.setattr(C1, name, lambda *a: calls.append(1) or real(*a))
    return calls


# (variant, x shape, output channels, kernel, stride, (left, right) padding, dilation):
# "cols" the column product (input gradient as the convolution of the output gradient at stride
# 1, else overlap-added), "scatter" a weight larger than the columns (input gradient
# overlap-added), "shift" the shifted products
CONV = [
    ("cols", (2, 3, 11), 5, 5, 1, (2, 2), 1),
    ("cols", (3, 4, 13), 2, 3, 2, (1, 0), 1),
    ("cols", (2, 3, 17), 4, 3, 1, (3, 1), 2),
    ("cols", (2, 3, 10), 3, 4, 3, (0, 2), 2),
    ("scatter", (1, 3, 6), 20, 3, 1, (1, 1), 1),
    ("scatter", (2, 2, 5), 12, 2, 1, (0, 1), 2),
    ("shift", (2, 3, 40), 5, 5, 1, (2, 2), 1),
    ("shift", (2, 3, 50), 4, 3, 1, (3, 1), 2),
    ("shift", (3, 4, 64), 4, 2, 1, (0, 1), 1),
]


@pytest.mark.parametrize("variant,xs,o,k,s,p,d", CONV)
def test_conv1d_columns(variant, xs, o, k, s, p, d, monkeypatch):
    monkeypatch.setattr(C1, "MIN_CHANNELS", 1)
    monkeypatch.setattr(C1, "COLS_WEIGHT_RATIO", 0)
    monkeypatch.setattr(C1, "SHIFT_MAX_C", 10**6 if variant == "shift" else 0)
    monkeypatch.setattr(C1, "SHIFT_MIN_SIZE", 0)
    monkeypatch.setattr(C1, "SHIFT_GW_BLOCK", 1)     # the weight gradient's columns in blocks of 64
    monkeypatch.setattr(C1, "KERNEL_MAX_C", 0)       # float32 too (the compiled tiles: test_conv1d_tiles)
    fwd = _spy(monkeypatch, "forward")
    shift = _spy(monkeypatch, "_shift_forward")
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((o, xs[1], k)), RNG.standard_normal(o)
    ref = _ref1d(x, w, b, s, p, d)
    y = F.conv1d(T(x), T(w), T(b), s, list(p), d)
    assert fwd and bool(shift) is (variant == "shift")
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)
    for dt, tol in (("float32", 2e-6), ("float16", 2e-2), ("bfloat16", 2e-2)):
        yl = F.conv1d(T(x, dtype=dt), T(w, dtype=dt), T(b, dtype=dt), s, list(p), d)
        assert yl.dtype == getattr(ddg, dt)
        np.testing.assert_allclose(yl.numpy().astype(np.float64), ref, rtol=0, atol=tol * np.abs(ref).max())
    if variant == "scatter":   # the input gradient overlap-added from w^T gy (the weight is the larger)
        assert o * xs[1] * k > xs[1] * k * xs[0] * y.shape[2]
    assert gradcheck(lambda x, w, b: F.conv1d(x, w, b, s, list(p), d), [T(x, True), T(w, True), T(b, True)])
    assert gradcheck(lambda x: F.conv1d(x, T(w), None, s, list(p), d), [T(x, True)])
    assert gradcheck(lambda w: F.conv1d(T(x), w, None, s, list(p), d), [T(w, True)])
    assert gradgradcheck(lambda x, w: ddg.tanh(F.conv1d(x, w, None, s, list(p), d)), [T(x[:1], True), T(w, True)])


@pytest.mark.parametrize("direct", [False, True])
def test_conv1d_weight_gradient_layouts(direct, monkeypatch):
    # the weight gradient in either product orientation: C-contiguous, the same values
    monkeypatch.setattr(C1, "MIN_CHANNELS", 1)
    monkeypatch.setattr(C1, "COLS_WEIGHT_RATIO", 0)
    monkeypatch.setattr(C1, "GW_DIRECT_MIN", 0 if direct else 10**9)
    x, w = RNG.standard_normal((2, 3, 9)), RNG.standard_normal((4, 3, 3))
    for shift in (0, 10**6):
        monkeypatch.setattr(C1, "SHIFT_MAX_C", shift)
        monkeypatch.setattr(C1, "SHIFT_MIN_SIZE", 0)
        xt, wt = T(x, True), T(w, True)
        gy = RNG.standard_normal((2, 4, 9))
        F.conv1d(xt, wt, None, 1, 1).backward(ddg.to_tensor(gy))
        assert wt.grad.numpy().flags.c_contiguous
        gw = np.zeros_like(w)
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1)))
        for j in range(3):
            gw[:, :, j] = np.einsum("nol,ncl->oc", gy, xp[:, :, j:j + 9])
        np.testing.assert_allclose(wt.grad.numpy(), gw, rtol=1e-12, atol=1e-12)


# (x shape, output channels, kernel, stride, (left, right) crop, dilation, output padding)
TRANSPOSED = [
    ((2, 3, 7), 4, 4, 2, (1, 1), 1, 0),
    ((3, 4, 5), 2, 6, 3, (0, 2), 1, 1),
    ((2, 3, 6), 5, 3, 2, (1, 0), 2, 1),
    ((1, 2, 8), 3, 3, 1, (2, 2), 1, 0),
    ((2, 3, 4), 2, 5, 4, (3, 1), 1, 2),
]


@pytest.mark.parametrize("xs,o,k,s,p,d,opad", TRANSPOSED)
def test_conv1d_transpose_adjoint(xs, o, k, s, p, d, opad, monkeypatch):
    monkeypatch.setattr(C1, "TRANSPOSE_MIN_CHANNELS", 1)
    fwd = _spy(monkeypatch, "transpose_forward")
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((xs[1], o, k)), RNG.standard_normal(o)
    ref = _ref1d_t(x, w, b, s, p, d, opad)
    y = F.conv1d_transpose(T(x), T(w), T(b), s, list(p), opad, dilation=d)
    assert fwd
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)
    for dt, tol in (("float32", 2e-6), ("float16", 2e-2), ("bfloat16", 2e-2)):
        yl = F.conv1d_transpose(T(x, dtype=dt), T(w, dtype=dt), T(b, dtype=dt), s, list(p), opad, dilation=d)
        assert yl.dtype == getattr(ddg, dt)
        np.testing.assert_allclose(yl.numpy().astype(np.float64), ref, rtol=0, atol=tol * np.abs(ref).max())

    def f(x, w, b=None):
        return F.conv1d_transpose(x, w, b, s, list(p), opad, dilation=d)
    assert gradcheck(f, [T(x, True), T(w, True), T(b, True)])
    assert gradcheck(lambda x: f(x, T(w)), [T(x, True)])
    assert gradcheck(lambda w: f(T(x), w), [T(w, True)])
    if opad == 0:
        assert gradgradcheck(lambda x, w: ddg.tanh(f(x, w)), [T(x[:1], True), T(w, True)])
    # the output gradient read in any layout: dense, a transposed copy, a strided slice
    gy = RNG.standard_normal(y.shape)
    grads = []
    for g in (gy, np.ascontiguousarray(gy.transpose(2, 1, 0)).transpose(2, 1, 0), np.repeat(gy, 2, axis=2)[..., ::2]):
        xt, wt = T(x, True), T(w, True)
        f(xt, wt).backward(ddg.to_tensor(g))
        grads.append((xt.grad.numpy(), wt.grad.numpy()))
    for gx, gw in grads[1:]:
        np.testing.assert_allclose(gx, grads[0][0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gw, grads[0][1], rtol=1e-12, atol=1e-12)


# (x shape, output channels, kernel, stride, (left, right) padding, dilation): 8-row tiles and
# single rows, 16-lane blocks and masked remainders (channels for the weight gradient,
# positions for the rest), padding wider than the kernel's reach on either side; strides
# below the kernel (the input's phases as channels, taps past the kernel zero)
TILES = [
    ((2, 3, 40), 13, 5, 1, (2, 2), 1),
    ((3, 20, 37), 9, 3, 1, (3, 1), 2),
    ((1, 17, 19), 8, 4, 1, (0, 6), 1),
    ((2, 3, 40), 5, 5, 2, (2, 2), 1),
    ((2, 10, 53), 9, 4, 3, (1, 0), 1),
    ((1, 4, 37), 17, 3, 2, (0, 2), 1),
]


@pytest.mark.parametrize("xs,o,k,s,p,d", TILES)
def test_conv1d_tiles(xs, o, k, s, p, d, monkeypatch):
    # float32 (and half precision, computed in float32): the compiled tiles of
    # conv1d_kernels, forward, both gradients, the bias's and a second-order gradient against
    # float64 (whose gradients test_conv1d_columns checks by central differences)
    monkeypatch.setattr(C1, "KERNEL_MIN_C", 1)
    name = "_kernel_forward" if s == 1 else "_kernel_strided_forward"
    tiles = _spy(monkeypatch, name)
    tiles_bwd = _spy(monkeypatch, name.replace("forward", "backward"))
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((o, xs[1], k)), RNG.standard_normal(o)
    _check_tiles(lambda x, w, b=None: F.conv1d(x, w, b, s, list(p), d), x, w, b, _ref1d(x, w, b, s, p, d),
                 tiles, tiles_bwd)


def _check_tiles(f, x, w, b, ref, tiles, tiles_bwd):
    """``f(x, w, b)`` on the compiled tiles (``tiles``/``tiles_bwd`` record their calls):
    float32 and half precision forward against the float64 reference ``ref``; float32's
    input, weight, bias and second-order gradients against float64's; an empty batch."""
    for dt, tol in (("float32", 2e-6), ("float16", 2e-2), ("bfloat16", 2e-2)):
        n_calls = len(tiles)
        yl = f(T(x, dtype=dt), T(w, dtype=dt), T(b, dtype=dt))
        assert yl.dtype == getattr(ddg, dt) and len(tiles) == n_calls + 1
        np.testing.assert_allclose(yl.numpy().astype(np.float64), ref, rtol=0, atol=tol * np.abs(ref).max())
    gy = RNG.standard_normal(ref.shape)
    v = RNG.standard_normal(x.shape)
    grads = {}
    for dt in ("float64", "float32"):
        xt, wt, bt = T(x, True, dt), T(w, True, dt), T(b, True, dt)
        # the output gradient as a strided view: the kernels take a contiguous copy
        g = ddg.to_tensor(np.ascontiguousarray(gy.transpose(2, 1, 0)).transpose(2, 1, 0).astype(dt))
        grads[dt] = [a.numpy() for a in ddg.grad(f(xt, wt, bt), [xt, wt, bt], g)]
        gx = ddg.grad(f(xt, wt, bt), [xt], g, create_graph=True)[0]
        grads[dt] += [a.numpy() for a in ddg.grad((gx * T(v, dtype=dt)).sum(), [wt, bt], allow_unused=True)[:1]]
    assert len(tiles) == 5 and tiles_bwd
    for a32, a64 in zip(grads["float32"], grads["float64"]):
        np.testing.assert_allclose(a32, a64, rtol=0, atol=2e-6 * np.abs(a64).max())
    # an empty batch: zero weight gradient
    xt, wt = T(np.zeros((0,) + x.shape[1:]), True, "float32"), T(w, True, "float32")
    f(xt, wt).sum().backward()
    assert xt.grad.shape == [0, *x.shape[1:]] and not wt.grad.numpy().any()


# (x shape, output channels, kernel, stride, (left, right) crop, output padding)
TRANSPOSED_TILES = [
    ((2, 3, 20), 13, 4, 2, (1, 1), 0),
    ((1, 9, 17), 5, 6, 3, (0, 2), 2),
    ((2, 20, 16), 3, 3, 1, (2, 0), 0),
    ((3, 4, 18), 8, 2, 2, (0, 1), 1),
]


@pytest.mark.parametrize("xs,o,k,s,p,opad", TRANSPOSED_TILES)
def test_conv1d_transpose_tiles(xs, o, k, s, p, opad, monkeypatch):
    # a kernel a multiple of the stride, float32 (and half precision): the phases on the
    # compiled tiles, against float64 (checked by central differences in
    # test_conv1d_transpose_adjoint) forward, both gradients, the bias's and second order
    monkeypatch.setattr(C1, "KERNEL_MIN_C", 1)
    tiles = _spy(monkeypatch, "_kernel_transpose_forward")
    tiles_bwd = _spy(monkeypatch, "_kernel_transpose_backward")
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((xs[1], o, k)), RNG.standard_normal(o)
    _check_tiles(lambda x, w, b=None: F.conv1d_transpose(x, w, b, s, list(p), opad), x, w, b,
                 _ref1d_t(x, w, b, s, p, 1, opad), tiles, tiles_bwd)


def test_conv1d_gates():
    # the sweep's shapes: which variant each takes
    def conv(n, c, length, o=None, k=5, pads=(0, 0, 2, 2), groups=1):
        o = o or c
        x, w = np.zeros((n, c, 1, length), np.float32), np.zeros((o, c // groups, 1, k), np.float32)
        if not C1.usable(x, w, (), groups, pads, 1, length):
            return "other"
        if C1._kernel_pays(x, c, o, k, 1, length):
            return "tiles"
        return "shift" if C1._shifts_pay(n, c, o, k, 1, length + 4, length) else "cols"
    assert conv(4, 512, 12) == "cols" and conv(8, 256, 49) == "cols"
    assert conv(32, 16, 400) == "tiles" and conv(2, 128, 784) == "tiles" and conv(1, 48, 2304) == "tiles"
    assert conv(8, 16, 64) == "tiles" and conv(32, 16, 16) == "tiles"
    assert conv(64, 192, 16) == "tiles" and conv(8, 192, 49) == "cols" and conv(2, 512, 1024) == "other"
    # strided: below the kernel and without dilation
    x, w = np.zeros((16, 64, 1, 512), np.float32), np.zeros((64, 64, 1, 5), np.float32)
    assert C1._kernel_pays(x, 64, 64, 5, 2, 256) and C1.usable(x, w, (), 1, (0, 0, 2, 2), 2, 256)
    assert not C1._kernel_pays(x, 64, 64, 5, 2, 256, 2) and not C1._kernel_pays(x, 64, 64, 5, 5, 103)
    assert conv(32, 8, 1024) == "tiles" and conv(32, 4, 1024, o=16) == "other" and conv(32, 16, 1024, o=4) == "tiles"
    assert conv(32, 8, 1024, o=4) == "other"
    assert conv(4, 64, 256, groups=4) == "other"
    assert conv(32, 64, 10) == "other" and conv(64, 32, 6, k=3, pads=(0, 0, 1, 1)) == "other"   # short, small weight
    x = np.zeros((4, 512, 1, 12), np.float32)
    assert C1.transpose_usable(x, np.zeros((512, 512, 1, 4), np.float32), (), 1, (0, 0, 1, 1))
    assert not C1.transpose_usable(x[:, :64], np.zeros((64, 64, 1, 4), np.float32), (), 1, (0, 0, 1, 1))
    assert C1.transpose_usable(x[:1, :48], np.zeros((48, 48, 1, 4), np.float32), (), 1, (0, 0, 1, 1))   # batch 1
    assert not C1.transpose_usable(x[:1, :8], np.zeros((8, 48, 1, 4), np.float32), (), 1, (0, 0, 1, 1))
    # the compiled phases: float32, a kernel a multiple of the stride, no dilation, >= 16 positions
    x = np.zeros((32, 16, 1, 400), np.float32)
    w = np.zeros((16, 16, 1, 4), np.float32)
    assert C1._kernel_transpose_pays(x, w, 2, 1) and C1.transpose_usable(x, w, (), 1, (0, 0, 1, 1), 2, 1)
    assert not C1._kernel_transpose_pays(x, w[..., :3], 2, 1) and not C1._kernel_transpose_pays(x, w, 2, 2)
    assert not C1._kernel_transpose_pays(x.astype(np.float64), w.astype(np.float64), 2, 1)
    assert not C1._kernel_transpose_pays(x[..., :12], w, 2, 1)
    assert C1._kernel_transpose_pays(x[:, :3], w[:3], 2, 1) and not C1._kernel_transpose_pays(x[:, :4], w[:4, :4], 2, 1)
    assert C1._kernel_transpose_pays(x[:, :8], w[:8, :8], 2, 1) and not C1._kernel_transpose_pays(x[:, :8], w[:8, :2], 2, 1)
    x, w = np.zeros((64, 256, 1, 16), np.float32), np.zeros((256, 256, 1, 4), np.float32)
    assert C1._kernel_transpose_pays(x, w, 2, 1) and not C1._kernel_transpose_pays(x[:8], w, 2, 1)


def test_conv1d_paths_agree_on_device(place, monkeypatch):
    """On the GPU (cupy; simcupy in CI) the array paths run: the same results as the column
    products on the CPU, forward and backward."""
    monkeypatch.setattr(C1, "MIN_CHANNELS", 1)
    monkeypatch.setattr(C1, "COLS_WEIGHT_RATIO", 0)
    monkeypatch.setattr(C1, "TRANSPOSE_MIN_CHANNELS", 1)
    monkeypatch.setattr(C1, "SHIFT_MIN_SIZE", 0)
    w1, wt = RNG.standard_normal((6, 4, 5)).astype("float32"), RNG.standard_normal((4, 3, 4)).astype("float32")
    w8 = RNG.standard_normal((8, 8, 5)).astype("float32")
    cases = [
        (lambda x, p: F.conv1d(x, ddg.to_tensor(w1, place=p), None, 1, 2), (2, 4, 40)),     # shifted products
        (lambda x, p: F.conv1d(x, ddg.to_tensor(w8, place=p), None, 1, 2), (2, 8, 40)),     # compiled tiles
        (lambda x, p: F.conv1d(x, ddg.to_tensor(w1, place=p), None, 2, 1), (2, 4, 9)),      # columns
        (lambda x, p: F.conv1d(x, ddg.to_tensor(w8, place=p), None, 2, 2), (2, 8, 40)),     # strided tiles
        (lambda x, p: F.conv1d_transpose(x, ddg.to_tensor(wt, place=p), None, 2, 1), (2, 4, 7)),
        (lambda x, p: F.conv1d_transpose(x, ddg.to_tensor(wt, place=p), None, 2, 1), (2, 4, 20)),   # phases
    ]
    assert_cpu_and_device_agree(cases, place, RNG)


@pytest.mark.parametrize("shift", [0, 10**6])
def test_conv1d_channel_last_and_empty_batch(shift, monkeypatch):
    # an NLC input (a transposed view inside) and an empty batch through either variant
    monkeypatch.setattr(C1, "MIN_CHANNELS", 1)
    monkeypatch.setattr(C1, "COLS_WEIGHT_RATIO", 0)
    monkeypatch.setattr(C1, "SHIFT_MAX_C", shift)
    monkeypatch.setattr(C1, "SHIFT_MIN_SIZE", 0)
    x, w = RNG.standard_normal((2, 40, 3)), RNG.standard_normal((4, 3, 5))
    ref = _ref1d(x.transpose(0, 2, 1), w, None, 1, (2, 2), 1).transpose(0, 2, 1)
    np.testing.assert_allclose(F.conv1d(T(x), T(w), None, 1, 2, data_format="NLC").numpy(), ref,
                               rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda x: F.conv1d(x, T(w), None, 1, 2, data_format="NLC"), [T(x[:1, :12], True)])
    xt, wt = T(np.zeros((0, 3, 40)), True), T(w, True)
    y = F.conv1d(xt, wt, None, 1, 2)
    y.sum().backward()
    assert y.shape == [0, 4, 40] and xt.grad.shape == [0, 3, 40] and not wt.grad.numpy().any()
