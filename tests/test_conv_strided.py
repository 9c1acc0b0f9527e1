"""Strided depthwise convolution (``ddg.tensor.conv_strided``, the per-plane loop and the
batch-innermost polyphase components, each test run with both): the path is taken, forward
against the float64 loop reference in both input layouts, backward against central
differences, second order through ``backward_graph``, half precision through the float32
path."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd import gradcheck, gradgradcheck
from ddg.tensor import conv_phase, conv_strided
from test_nn_conv_pool import _pads4, _pair, assert_cpu_and_device_agree, ref_conv2d

RNG = np.random.default_rng(11)


def T(a, grad=False, dtype="float64"):
    return ddg.to_tensor(np.asarray(a, dtype=dtype), stop_gradient=not grad)


@pytest.fixture(params=["plane", "components"])
def spy(monkeypatch, request):
    """Records the strided depthwise path's calls, with the small test shapes sent to the
    per-plane loop or to the batch-innermost components (each test runs with both)."""
    calls = []
    orig = conv_strided.forward
    inner = "_plane_forward" if request.param == "plane" else "_poly_forward"
    orig_inner = getattr(conv_strided, inner)
    taken = []

    def forward(*a):
        calls.append(a[0].shape)
        n = len(taken)
        out = orig(*a)
        # the plane loop takes dense NCHW inputs only
        assert len(taken) == n + (request.param == "components" or a[0].flags.c_contiguous), "path not taken"
        return out

    def spy_inner(*a):
        taken.append(1)
        return orig_inner(*a)
    monkeypatch.setattr(conv_strided, "forward", forward)
    monkeypatch.setattr(conv_strided, inner, spy_inner)
    monkeypatch.setattr(conv_strided, "PLANE_MIN_OW", 0 if request.param == "plane" else 10 ** 9)
    return calls


# (x shape, channel multiplier, kernel, stride, padding): even and odd sizes, every phase
# count, asymmetric pads, a kernel that is and one that is not a multiple of the stride
DW_CASES = [
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


@pytest.mark.parametrize("xs,mult,k,stride,padding", DW_CASES)
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
            # the bias gradient: a sum of float32 values, compared relative to their magnitudes
            np.testing.assert_allclose(bt.grad.numpy(), gy.sum(axis=(0, 2, 3)), rtol=0,
                                       atol=tol * np.abs(gy).sum(axis=(0, 2, 3)).max())
    assert len(spy) == 4


@pytest.mark.parametrize("xs,mult,k,stride,padding", DW_CASES[:4])
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


@pytest.fixture
def dense_spy(monkeypatch):
    calls = []
    orig = conv_strided.dense_forward

    def forward(*a):
        calls.append(a[0].shape)
        return orig(*a)
    monkeypatch.setattr(conv_strided, "dense_forward", forward)
    monkeypatch.setattr(conv_strided, "MIN_COLUMNS", 0)   # small test shapes take the path too
    return calls


# (x shape, output channels, kernel, stride, padding): kernels that are multiples of the stride
DENSE_CASES = [
    ((2, 3, 8, 8), 4, (4, 4), 2, 1),
    ((2, 2, 7, 9), 3, (4, 2), 2, [0, 2, 1, 0]),
    ((1, 2, 9, 9), 2, (3, 3), 3, 1),
    ((2, 2, 6, 7), 3, (2, 4), (1, 2), [1, 0, 0, 1]),
]


@pytest.mark.parametrize("xs,o,k,stride,padding", DENSE_CASES)
def test_dense_components_forward_and_gradients(dense_spy, xs, o, k, stride, padding):
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((o, xs[1]) + k), RNG.standard_normal(o)
    ref = ref_conv2d(x, w, b, _pair(stride), _pads4(padding), (1, 1), 1)
    for dt, tol in (("float64", 1e-12), ("float32", 3e-6)):
        for leaf, inp, back in _layouts(x, dt):
            y = F.conv2d(inp, T(w, dtype=dt), T(b, dtype=dt), stride, padding)
            assert y.dtype == getattr(ddg, dt)
            np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=tol * np.abs(ref).max())
    xt, wt, bt = T(x, True), T(w, True), T(b, True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride, padding), [xt, wt, bt])
    assert gradcheck(lambda w: F.conv2d(T(x), w, None, stride, padding), [wt])
    assert gradcheck(lambda x: F.conv2d(x, T(w), None, stride, padding), [xt])
    # a batch-innermost input gives the same gradients
    (_, _, _), (leaf, view, back) = _layouts(x, "float64")
    wt2 = T(w, True)
    (F.conv2d(view, wt2, None, stride, padding) ** 2).sum().backward()
    xt3, wt3 = T(x, True), T(w, True)
    (F.conv2d(xt3, wt3, None, stride, padding) ** 2).sum().backward()
    np.testing.assert_allclose(back(leaf.grad.numpy()), xt3.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(wt2.grad.numpy(), wt3.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert len(dense_spy) >= 8


@pytest.mark.parametrize("xs,o,k,stride,padding", DENSE_CASES + [
    ((3, 5, 12, 10), 19, (4, 4), 2, 1),             # rows past the last 8-row tile, odd batch
    ((5, 8, 16, 16), 16, (4, 4), 2, [2, 1, 0, 1]),   # taps' shifts off the 64-byte lines
    ((2, 3, 9, 12), 9, (6, 4), (3, 2), 2)])
@pytest.mark.parametrize("rows", [True, False])
def test_dense_components_compiled_products(dense_spy, monkeypatch, xs, o, k, stride, padding, rows):
    """float32 on one BLAS thread: every product by ``gemm_kernels.gemm_rows`` (the taps'
    windows read in place; the forward and the weight gradient output row by output row, or
    over whole planes), forward and both gradients in either input layout against the
    float64 components."""
    from ddg.tensor import gemm, gemm_kernels
    calls = []
    real = gemm_kernels.gemm_rows
    monkeypatch.setattr(gemm_kernels, "gemm_rows", lambda *a: (calls.append(a[0].shape), real(*a))[1])
    monkeypatch.setattr(gemm, "blas_threads", lambda: 1)
    monkeypatch.setattr(conv_strided, "TAPS_MIN_ROWS", 0)     # the small test products take it too
    monkeypatch.setattr(conv_phase, "by_rows", lambda *a: rows)     # output row by row, or whole planes
    x, w = RNG.standard_normal(xs), RNG.standard_normal((o, xs[1]) + k)
    gy = RNG.standard_normal(F.conv2d(T(x), T(w), None, stride, padding).shape)
    want = []
    for dt in ("float64", "float32"):
        for leaf, inp, back in _layouts(x, dt):
            wt = T(w, True, dt)
            y = F.conv2d(inp, wt, None, stride, padding)
            (y * T(gy, dtype=dt)).sum().backward()
            got = [y.numpy(), back(leaf.grad.numpy()), wt.grad.numpy()]
            if dt == "float64":
                want = want or got
                continue
            for g, r in zip(got, want):
                assert g.dtype == np.float32
                np.testing.assert_allclose(g, r, rtol=0, atol=3e-6 * np.abs(r).max())
    taps, oh = k[0] * k[1] // (_pair(stride)[0] * _pair(stride)[1]), gy.shape[2] if rows else 1
    assert len(calls) == 2 * (oh + 1 + taps * oh)      # per layout: forward and each tap (by output rows), input grad
    monkeypatch.setattr(conv_strided, "TAPS_MIN_ROWS", 16)    # fewer rows: numpy's products
    calls.clear()
    xt, wt = T(x, True, "float32"), T(w, True, "float32")
    F.conv2d(xt, wt, None, stride, padding).sum().backward()
    assert calls == [] if min(o, xs[1] * np.prod(_pair(stride))) < 16 else calls


def test_dense_components_second_order_and_half_precision(dense_spy):
    x, w = T(RNG.standard_normal((2, 2, 6, 6)), True), T(RNG.standard_normal((3, 2, 4, 4)), True)
    assert gradgradcheck(lambda x, w: ddg.tanh(F.conv2d(x, w, None, 2, 1)), [x, w])
    xn, wn = RNG.standard_normal((2, 3, 8, 8)), RNG.standard_normal((4, 3, 4, 4))
    ref = ref_conv2d(xn, wn, None, (2, 2), (1, 1, 1, 1), (1, 1), 1)
    for dt in ("float16", "bfloat16"):
        xh = T(xn, True, dt)
        yh = F.conv2d(xh, T(wn, dtype=dt), None, 2, 1)
        assert yh.dtype == getattr(ddg, dt)
        np.testing.assert_allclose(yh.numpy().astype(np.float64), ref, rtol=0, atol=0.05 * np.abs(ref).max())
        yh.sum().backward()
        assert xh.grad.dtype == getattr(ddg, dt) and xh.grad.shape == [2, 3, 8, 8]
    assert dense_spy


def test_dense_components_chosen_by_shape():
    # long products take the components, short ones (deep layers on small images) im2col
    w = np.zeros((8, 4, 4, 4), np.float32)
    assert conv_strided.dense_usable(np.zeros((16, 4, 32, 32), np.float32), w, 1, (2, 2), (1, 1), 16, 16)
    assert not conv_strided.dense_usable(np.zeros((2, 64, 4, 4), np.float32), np.zeros((8, 64, 4, 4), np.float32),
                                         1, (2, 2), (1, 1), 2, 2)
    # 3x3 stride 2 (not a multiple), dilation, groups, float16 and stride 1 keep the other paths
    x = np.zeros((16, 4, 32, 32), np.float32)
    assert not conv_strided.dense_usable(x, np.zeros((8, 4, 3, 3), np.float32), 1, (2, 2), (1, 1), 16, 16)
    assert not conv_strided.dense_usable(x, w, 1, (2, 2), (2, 2), 16, 16)
    assert not conv_strided.dense_usable(x, np.zeros((8, 2, 4, 4), np.float32), 2, (2, 2), (1, 1), 16, 16)
    assert not conv_strided.dense_usable(x.astype(np.float16), w.astype(np.float16), 1, (2, 2), (1, 1), 16, 16)
    assert not conv_strided.dense_usable(x, w, 1, (1, 1), (1, 1), 16, 16)


def test_plane_loop_reads_any_output_gradient_layout():
    # an NCHW input goes plane by plane; its backward reads a batch-innermost output gradient
    # through its strides and copies any other layout: the same gradients each way
    x, w = RNG.standard_normal((3, 2, 9, 8)), RNG.standard_normal((4, 1, 3, 3))
    y, state = conv_strided._plane_forward(x, w, (2, 2), (1, 1, 1, 1), 5, 4)
    np.testing.assert_allclose(y, ref_conv2d(x, w, None, (2, 2), (1, 1, 1, 1), (1, 1), 2), rtol=0, atol=1e-12)
    gy = RNG.standard_normal(y.shape)
    gx, gw = conv_strided._plane_backward(state, gy, True, True)
    for g in (np.ascontiguousarray(gy.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2), np.asfortranarray(gy)):
        gx2, gw2 = conv_strided._plane_backward(state, g, True, True)
        np.testing.assert_allclose(gx2, gx, rtol=0, atol=1e-12)
        np.testing.assert_allclose(gw2, gw, rtol=0, atol=1e-12)
    assert conv_strided._plane_backward(state, gy, False, True)[0] is None
    gx3, gw3 = conv_strided._plane_backward(state, gy, True, False)
    assert gw3 is None
    np.testing.assert_allclose(gx3, gx, rtol=0, atol=1e-12)
    np.testing.assert_allclose(conv_strided._plane_backward(state, gy, False, True)[1], gw, rtol=0, atol=1e-12)


@pytest.fixture
def stem_spy(monkeypatch):
    calls = []
    orig = conv_strided.stem_forward

    def forward(*a):
        calls.append(a[0].shape)
        return orig(*a)
    monkeypatch.setattr(conv_strided, "stem_forward", forward)
    monkeypatch.setattr(conv_strided, "STEM_MIN_PIXELS", 0)   # small test shapes take the path too
    return calls


# (x shape, output channels, kernel, stride, padding): first-layer shapes, a kernel that is
# not a multiple of the stride, asymmetric pads and strides
STEM_CASES = [
    ((2, 3, 11, 10), 4, (7, 7), 2, 3),
    ((2, 1, 9, 8), 3, (5, 5), 2, 2),
    ((3, 2, 7, 9), 2, (3, 3), 2, [0, 2, 1, 0]),
    ((2, 3, 8, 7), 3, (3, 2), (2, 1), 1),
]


@pytest.mark.parametrize("xs,o,k,stride,padding", STEM_CASES)
def test_stem_components_forward_and_gradients(stem_spy, xs, o, k, stride, padding):
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((o, xs[1]) + k), RNG.standard_normal(o)
    ref = ref_conv2d(x, w, b, _pair(stride), _pads4(padding), (1, 1), 1)
    for dt, tol in (("float64", 1e-12), ("float32", 3e-6)):
        for leaf, inp, back in _layouts(x, dt):
            y = F.conv2d(inp, T(w, dtype=dt), T(b, dtype=dt), stride, padding)
            assert y.dtype == getattr(ddg, dt)
            np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=tol * np.abs(ref).max())
    n = len(stem_spy)
    assert n >= 4
    xt, wt, bt = T(x[:1], True), T(w, True), T(b, True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride, padding), [xt, wt, bt])
    # an input without a gradient (a first layer): the weight's alone
    assert gradcheck(lambda w: F.conv2d(T(x[:1]), w, None, stride, padding), [wt])
    # a batch-innermost input gets its gradient in its own layout, with the same values
    (_, _, _), (leaf, view, back) = _layouts(x, "float64")
    (F.conv2d(view, T(w), None, stride, padding) ** 2).sum().backward()
    xt3 = T(x, True)
    (F.conv2d(xt3, T(w), None, stride, padding) ** 2).sum().backward()
    np.testing.assert_allclose(back(leaf.grad.numpy()), xt3.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert len(stem_spy) > n + 2


def test_stem_components_second_order_and_half_precision(stem_spy):
    x, w = T(RNG.standard_normal((2, 2, 7, 6)), True), T(RNG.standard_normal((3, 2, 5, 5)), True)
    assert gradgradcheck(lambda x, w: ddg.tanh(F.conv2d(x, w, None, 2, 2)), [x, w])
    xn, wn = RNG.standard_normal((2, 3, 12, 12)), RNG.standard_normal((4, 3, 7, 7))
    ref = ref_conv2d(xn, wn, None, (2, 2), (3, 3, 3, 3), (1, 1), 1)
    for dt in ("float16", "bfloat16"):
        xh = T(xn, True, dt)
        yh = F.conv2d(xh, T(wn, dtype=dt), None, 2, 3)
        assert yh.dtype == getattr(ddg, dt)
        np.testing.assert_allclose(yh.numpy().astype(np.float64), ref, rtol=0, atol=0.05 * np.abs(ref).max())
        yh.sum().backward()
        assert xh.grad.dtype == getattr(ddg, dt) and xh.grad.shape == [2, 3, 12, 12]
    assert stem_spy


def test_stem_components_chosen_by_shape():
    # few input and output channels with a large kernel on large outputs; else the columns
    x = np.zeros((32, 3, 64, 64), np.float32)
    pays = conv_strided.stem_pays
    assert pays(x, np.zeros((8, 3, 7, 7), np.float32), 1, (2, 2), (1, 1), 32, 32)
    assert pays(x, np.zeros((24, 3, 5, 5), np.float32), 1, (2, 2), (1, 1), 32, 32)
    assert pays(x, np.zeros((8, 3, 3, 3), np.float32), 1, (2, 2), (1, 1), 32, 32)
    assert not pays(x, np.zeros((32, 3, 7, 7), np.float32), 1, (2, 2), (1, 1), 32, 32)
    # without an input gradient the columns have no input gradient product: more output channels
    assert pays(x, np.zeros((32, 3, 7, 7), np.float32), 1, (2, 2), (1, 1), 32, 32, False)
    assert not pays(x, np.zeros((48, 3, 7, 7), np.float32), 1, (2, 2), (1, 1), 32, 32, False)
    assert not pays(x, np.zeros((16, 3, 3, 3), np.float32), 1, (2, 2), (1, 1), 32, 32, False)
    assert not pays(x, np.zeros((16, 3, 3, 3), np.float32), 1, (2, 2), (1, 1), 32, 32)
    assert not pays(x, np.zeros((8, 3, 7, 7), np.float32), 1, (1, 1), (1, 1), 64, 64)
    assert not pays(x, np.zeros((8, 3, 7, 7), np.float32), 1, (2, 2), (2, 2), 32, 32)
    assert not pays(x[:, :1], np.zeros((8, 1, 7, 7), np.float32), 1, (2, 2), (1, 1), 16, 16)
    x5 = np.zeros((32, 5, 64, 64), np.float32)
    assert not pays(x5, np.zeros((8, 5, 7, 7), np.float32), 1, (2, 2), (1, 1), 32, 32)
    assert not pays(x.astype(np.float16), np.zeros((8, 3, 7, 7), np.float16), 1, (2, 2), (1, 1), 32, 32)


@pytest.mark.parametrize("plane_min_ow", [0, 10 ** 9])
def test_strided_paths_agree_with_the_device_paths(place, monkeypatch, plane_min_ow):
    """The paths of this module forced on small shapes (the stem components, the depthwise
    plane loop or components) on the CPU, against the array paths on ``place`` (cupy's;
    simcupy in CI): the same outputs and gradients."""
    monkeypatch.setattr(conv_strided, "STEM_MIN_PIXELS", 0)
    monkeypatch.setattr(conv_strided, "PLANE_MIN_OW", plane_min_ow)
    w7, wd = RNG.standard_normal((4, 3, 7, 7)).astype("float32"), RNG.standard_normal((6, 1, 3, 3)).astype("float32")
    cases = [(lambda x, p: F.conv2d(x, ddg.to_tensor(w7, place=p), None, 2, 3), (2, 3, 12, 11)),
             (lambda x, p: F.conv2d(x, ddg.to_tensor(wd, place=p), None, 2, 1, 1, 6), (3, 6, 9, 8))]
    assert_cpu_and_device_agree(cases, place, RNG)


def test_first_layers_take_the_per_sample_columns_before_the_dense_components():
    # 4x4 stride 2 on a 3-channel image (a DCGAN discriminator's first layer): the per-sample
    # columns; with 8 input channels the components
    import ddg.autograd.ops.conv as CV
    from ddg.tensor import conv_sample
    for c, taken in ((3, conv_sample.backward), (8, conv_strided.dense_backward)):
        x, w = RNG.standard_normal((2, c, 64, 64)), RNG.standard_normal((16, c, 4, 4))
        op = CV.Conv2d((2, 2), (1, 1, 1, 1), (1, 1), 1)
        y = op(T(x, dtype="float32"), T(w, dtype="float32"))
        assert op.poly[0] is taken
        ref = ref_conv2d(x[:1, :, :12, :12], w, None, (2, 2), (1, 0, 1, 0), (1, 1), 1)   # the top-left corner
        np.testing.assert_allclose(y.numpy()[:1, :, :5, :5], ref[:, :, :5, :5], rtol=0, atol=3e-6 * np.abs(ref).max())


@pytest.mark.parametrize("shape,k,padding", [((3, 4, 19, 18), 3, 1), ((2, 3, 20, 22), 3, 0), ((2, 3, 20, 22), 4, 2),
                                             ((2, 3, 21, 19), 5, 2)])
def test_components_and_plane_loop_agree_on_larger_planes(monkeypatch, shape, k, padding):
    # outputs above 8x8 (the components read the output gradient through the interleaving
    # copy there, through the split below), even and odd widths, padding even and odd: the
    # same values and gradients either way, the output against the float64 reference
    c = shape[1]
    x, w, b = RNG.standard_normal(shape), RNG.standard_normal((c, 1, k, k)), RNG.standard_normal(c)
    res = {}
    for pm in (0, 10 ** 9):
        monkeypatch.setattr(conv_strided, "PLANE_MIN_OW", pm)
        xt, wt, bt = T(x, True), T(w, True), T(b, True)
        y = F.conv2d(xt, wt, bt, 2, padding, 1, c)
        (y * y).sum().backward()
        res[pm] = (y.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy())
    ref = ref_conv2d(x, w, b, (2, 2), (padding,) * 4, (1, 1), c)
    np.testing.assert_allclose(res[0][0], ref, rtol=1e-12, atol=1e-12)
    for a, r in zip(res[10 ** 9], res[0]):
        np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-12)
