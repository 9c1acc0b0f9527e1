"""The compiled convolution and pooling loops (``ddg.tensor.conv_kernels``): forward
against float64 plain-loop references, backward against central differences, second-order
gradients through ``backward_graph``, float32 within round-off of float64."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd import gradcheck, gradgradcheck
from test_nn_conv_pool import _pads4, _pair, assert_cpu_and_device_agree, ref_conv2d, ref_conv2d_transpose

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
    ((2, 3, 8, 9), 1, (3, 5), 1, [1, 2], (1, 2)),       # 5-wide kernel rows, dilated
    ((2, 2, 9, 8), 2, (5, 5), 1, 2, 1),                 # 5x5, two outputs per input channel
    ((1, 2, 6, 7), 1, (1, 4), 1, [0, 0, 2, 1], 1),      # a 4-wide row (one offset per pass)
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


# (x shape, groups, output channels, kernel, stride, padding, dilation): narrow groups
GROUPED = [
    ((2, 6, 7, 8), 3, 9, (3, 3), 1, 1, 1),
    ((2, 8, 9, 7), 2, 4, (3, 2), (2, 1), [1, 0, 2, 1], (1, 2)),
]


@pytest.mark.parametrize("xs,groups,o,k,stride,padding,dil", GROUPED)
def test_grouped_direct_forward_and_gradients(xs, groups, o, k, stride, padding, dil):
    c = xs[1]
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((o, c // groups) + k), RNG.standard_normal(o)
    ref = ref_conv2d(x, w, b, _pair(stride), _pads4(padding), _pair(dil), groups)
    np.testing.assert_allclose(F.conv2d(T(x), T(w), T(b), stride, padding, dil, groups).numpy(), ref,
                               rtol=1e-12, atol=1e-12)
    y32 = F.conv2d(T(x, dtype="float32"), T(w, dtype="float32"), T(b, dtype="float32"), stride, padding, dil, groups)
    np.testing.assert_allclose(y32.numpy(), ref, rtol=0, atol=2e-6 * np.abs(ref).max())
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride, padding, dil, groups),
                     [T(x[:1], True), T(w, True), T(b, True)])


def _layouts(x, dt):
    """Leaves holding ``x`` [N, C, H, W] as NCHW and as batch-innermost ([C, H, W, N], used
    through a transposed view), with the view each convolution takes and a way back to NCHW."""
    a = T(x, True, dt)
    b = T(x.transpose(1, 2, 3, 0), True, dt)
    view = b.transpose([3, 0, 1, 2])
    assert view._data.strides[0] == view._data.itemsize   # batch innermost
    return [(a, a, lambda g: g), (b, view, lambda g: g.transpose(3, 0, 1, 2))]


@pytest.mark.parametrize("groups,mult", [(4, 1), (4, 2), (2, 1)])
def test_stride1_plane_path_in_both_layouts(groups, mult):
    # a batch-innermost input and an NCHW one take the same whole-plane loop in their own
    # layouts: same values, same gradients
    c, o = 4, 4 * mult
    x = RNG.standard_normal((3, c, 7, 6))
    w = RNG.standard_normal((o, c // groups, 3, 3))
    ref = ref_conv2d(x, w, None, (1, 1), (1, 1, 2, 0), (2, 1), groups)
    for dt, tol in (("float64", 1e-12), ("float32", 2e-6)):
        grads = []
        for leaf, inp, back in _layouts(x, dt):
            wt = T(w, True, dt)
            y = F.conv2d(inp, wt, None, 1, [1, 1, 2, 0], (2, 1), groups)
            np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=tol * np.abs(ref).max())
            (y * y).sum().backward()
            grads.append((back(leaf.grad.numpy()), wt.grad.numpy()))
        for a, r in zip(*grads):
            np.testing.assert_allclose(a, r, rtol=0, atol=tol * np.abs(r).max())
    (a, _, _), (c, _, _) = _layouts(x[:2], "float64")
    wt = T(w, True)
    assert gradcheck(lambda x, w: F.conv2d(x, w, None, 1, 1, (1, 2), groups), [a, wt])
    assert gradcheck(lambda x, w: F.conv2d(x.transpose([3, 0, 1, 2]), w, None, 1, 1, (1, 2), groups), [c, wt])


@pytest.mark.parametrize("c,o,k,pads,dil", [(3, 5, (3, 3), (1, 1, 1, 1), (1, 1)), (1, 4, (5, 3), (2, 1, 0, 2), (1, 2)),
                                            (8, 3, (3, 3), (2, 2, 2, 2), (2, 2))])
def test_few_channel_dense_conv_on_the_plane_loop(c, o, k, pads, dil, monkeypatch):
    # one group, few input channels: the whole-plane loop forced on small float64 shapes
    # (both layouts), against the reference and central differences
    import ddg.autograd.ops.conv as CV
    monkeypatch.setattr(CV, "_few_channels_plane", lambda *a: True)
    x, w, b = RNG.standard_normal((2, c, 5, 6)), RNG.standard_normal((o, c) + k), RNG.standard_normal(o)
    ref = ref_conv2d(x, w, b, (1, 1), pads, dil, 1)
    for leaf, inp, back in _layouts(x, "float64"):
        op = CV.Conv2d((1, 1), pads, dil, 1)
        y = op(inp, T(w), T(b))
        assert op.plane is not None
        np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)
    ts = [T(x[:1], True), T(w, True), T(b, True)]
    assert gradcheck(lambda *a: CV.Conv2d((1, 1), pads, dil, 1)(*a), ts, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda x, w: ddg.tanh(CV.Conv2d((1, 1), pads, dil, 1)(x, w)), ts[:2])


@pytest.mark.parametrize("c,o,hw,plane", [(3, 16, 16, True), (8, 8, 32, True), (4, 8, 16, False), (8, 8, 24, False),
                                          (12, 8, 32, False)])
def test_few_channel_dense_conv_chosen_by_shape_float32(c, o, hw, plane):
    # the shapes that take the plane loop, and float32 values and gradients equal to the
    # float64 reference within float32 round-off
    import ddg.autograd.ops.conv as CV
    x, w = RNG.standard_normal((2, c, hw, hw)), RNG.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)
    X, W = T(x, True, "float32"), T(w, True, "float32")
    op = CV.Conv2d((1, 1), (1, 1, 1, 1), (1, 1), 1)
    y = op(X, W)
    assert (op.plane is not None) == plane
    op_first_layer = CV.Conv2d((1, 1), (1, 1, 1, 1), (1, 1), 1)
    op_first_layer(T(x, False, "float32"), W)
    assert op_first_layer.plane is None   # no input gradient: im2col
    g = np.cos(np.arange(y.size)).reshape(y.shape)
    (y * T(g, dtype="float32")).sum().backward()
    X64, W64 = T(x, True), T(w, True)
    y64 = F.conv2d(X64, W64, None, 1, 1)
    (y64 * T(g)).sum().backward()
    for a, r in ((y.numpy(), y64.numpy()), (X.grad.numpy(), X64.grad.numpy()), (W.grad.numpy(), W64.grad.numpy())):
        assert np.abs(a - r).max() <= 2e-6 * np.abs(r).max()


@pytest.mark.parametrize("c,o,k,stride,pads,dil", [(3, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
                                                 (1, 2, (5, 3), (2, 1), (2, 0, 1, 3), (1, 2)),
                                                 (2, 3, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),
                                                 (4, 5, (2, 3), (3, 2), (0, 1, 4, 0), (2, 1))])
def test_per_sample_columns_path_forward_and_gradients(c, o, k, stride, pads, dil, monkeypatch):
    # the per-sample NCHW columns path (conv_sample) forced on small float64 shapes: values
    # against the reference, the input, weight and bias gradients against central
    # differences, and second order
    import ddg.autograd.ops.conv as CV
    from ddg.tensor import conv_sample
    monkeypatch.setattr(conv_sample, "pays", lambda x, w, g, *a: conv_sample.usable(x, w, g))
    monkeypatch.setattr(conv_sample, "CHUNK", 7)    # several column blocks per sample
    x, w, b = RNG.standard_normal((2, c, 9, 8)), RNG.standard_normal((o, c) + k), RNG.standard_normal(o)
    op = CV.Conv2d(stride, pads, dil, 1)
    y = op(T(x), T(w), T(b))
    assert op.poly is not None and op.poly[0] is conv_sample.backward
    np.testing.assert_allclose(y.numpy(), ref_conv2d(x, w, b, stride, pads, dil, 1), rtol=1e-12, atol=1e-12)
    ts = [T(x[:1], True), T(w, True), T(b, True)]
    assert gradcheck(lambda *a: CV.Conv2d(stride, pads, dil, 1)(*a), ts, atol=1e-6, rtol=1e-5)
    # the bias's gradient alone (it comes off the weight gradient's product)
    assert gradcheck(lambda b: CV.Conv2d(stride, pads, dil, 1)(T(x[:1]), T(w), b), [ts[2]], atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda x, w: ddg.tanh(CV.Conv2d(stride, pads, dil, 1)(x, w)), ts[:2])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_stem_output_in_c_order_meets_batch_innermost_layers(dtype, monkeypatch):
    """A stem (per-sample columns, C-ordered output) into BatchNorm, ReLU, a padded 3x3
    convolution and a residual add with that convolution's batch-innermost output, plus a
    BatchNorm and a PReLU of the stem added to it: the copies between the two layouts (the
    padded input, the adds, the gradients of ReLU, PReLU, BatchNorm and the stem) go by the
    blocked transpose (``gemm.relayout_into``) and give the values and gradients of numpy's
    copies bit for bit."""
    from ddg import nn
    from ddg.tensor import conv_sample, gemm
    rng = np.random.default_rng(7)
    x = rng.standard_normal((16, 3, 32, 32)).astype(dtype)
    g = rng.standard_normal((16, 16, 32, 32)).astype(dtype)
    taken = []
    real = gemm.relayout_into

    def spy(dst, src):
        done = real(dst, src)
        taken.append(done)
        return done

    def run():
        ddg.seed(5)
        before = ddg.get_default_dtype()
        ddg.set_default_dtype(dtype)
        try:
            stem, bn, conv = nn.Conv2D(3, 16, 3, padding=1), nn.BatchNorm2D(16), nn.Conv2D(16, 16, 3, padding=1)
            bn2, prelu = nn.BatchNorm2D(16), nn.PReLU(16)
        finally:
            ddg.set_default_dtype(before)
        X = ddg.to_tensor(x)                        # data: no input gradient, as a first layer's
        s = stem(X)
        assert s._node.poly[0] is conv_sample.backward and s._data.flags.c_contiguous
        h = F.relu(bn(s))
        c = conv(h)
        assert not c._data.flags.c_contiguous        # the block's convolution: batch-innermost
        y = F.relu(c + h) + bn2(s) + prelu(s)
        (y * ddg.to_tensor(g)).sum().backward()
        # the gradients, and BatchNorm's running statistics (parameters without a gradient)
        return [y.numpy()] + [(p.numpy() if p.stop_gradient else p.grad.numpy())
                              for layer in (stem, bn, conv, bn2, prelu) for p in layer.parameters()]
    monkeypatch.setattr(conv_sample, "pays", lambda x, w, g, *a: conv_sample.usable(x, w, g))
    monkeypatch.setattr(gemm, "relayout_into", spy)
    fast = run()
    assert sum(taken) >= 7, taken      # the padded input, 3 adds, the gradients of ReLU, PReLU and BatchNorm
    monkeypatch.setattr(gemm, "RELAYOUT_MIN", 1 << 60)       # every copy numpy's
    taken.clear()
    slow = run()
    assert not any(taken)
    for a, b in zip(fast, slow):
        assert a.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(a, b)
    # the stem's own backward with a batch-innermost output gradient: C-ordered by the blocked
    # transpose, the same input and weight gradients as from a C-ordered one
    monkeypatch.setattr(gemm, "RELAYOUT_MIN", 1 << 14)
    w = rng.standard_normal((16, 3, 3, 3)).astype(dtype)
    state = conv_sample.forward(x, w, None, (1, 1), (1, 1, 1, 1), (1, 1), 32, 32)[1]
    gy = np.ascontiguousarray(g.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    taken.clear()
    got = conv_sample.backward(state, gy, True, True)
    assert taken == [True]
    for a, b in zip(got, conv_sample.backward(state, g, True, True)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("c,hw,k,stride,x_grad,path", [(3, 32, 3, 1, False, "sample"), (1, 36, 5, 1, False, "sample"),
                                                       (3, 64, 7, 2, False, "stem"), (3, 64, 7, 2, True, "stem"),
                                                       (3, 64, 3, 2, True, "sample"), (3, 32, 3, 1, True, None),
                                                       (1, 28, 5, 1, False, None), (3, 8, 3, 1, False, None),
                                                       (8, 32, 3, 1, False, None)])
def test_per_sample_columns_path_chosen_for_stems_float32(c, hw, k, stride, x_grad, path):
    # few input channels on large outputs take the per-sample path (a stride-1 input with a
    # gradient the plane loop first; a strided one with few output channels for its kernel
    # the components of conv_strided); float32 values and gradients equal the float64
    # reference within round-off
    import ddg.autograd.ops.conv as CV
    from ddg.tensor import conv_sample, conv_strided
    o = 12 if k == 3 else 6
    x, w = RNG.standard_normal((3, c, hw, hw)), RNG.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)
    X, W = T(x, x_grad, "float32"), T(w, True, "float32")
    op = CV.Conv2d((stride, stride), (k // 2,) * 4, (1, 1), 1)
    y = op(X, W)
    taken = {conv_sample.backward: "sample", conv_strided._poly_backward: "stem"}.get(op.poly[0]) if op.poly else None
    assert taken == path
    g = np.cos(np.arange(y.size)).reshape(y.shape)
    (y * T(g, dtype="float32")).sum().backward()
    X64, W64 = T(x, x_grad), T(w, True)
    y64 = F.conv2d(X64, W64, None, stride, k // 2)
    (y64 * T(g)).sum().backward()
    pairs = [(y.numpy(), y64.numpy()), (W.grad.numpy(), W64.grad.numpy())]
    if x_grad:
        pairs.append((X.grad.numpy(), X64.grad.numpy()))
    for a, r in pairs:
        assert np.abs(a - r).max() <= 2e-6 * np.abs(r).max()


@pytest.mark.parametrize("c,groups,o,dil,n", [(3, 3, 6, 1, 8), (6, 2, 4, (2, 1), 3), (4, 4, 4, 1, 2)])
def test_small_nchw_planes_run_batch_innermost(monkeypatch, c, groups, o, dil, n):
    # stride 1 on small NCHW planes (batch >= 2): converted to batch-innermost for the plane
    # loop, the input gradient converted back; same values and gradients as the NCHW plane
    # loop and the float64 reference
    from ddg.autograd.ops import conv as C
    assert n >= C.PLANE_BATCH_INNER_MIN_N
    x, b = RNG.standard_normal((n, c, 5, 6)), RNG.standard_normal(o)
    w = RNG.standard_normal((o, c // groups, 3, 3))
    ref = ref_conv2d(x, w, b, (1, 1), (1, 2, 1, 0), _pair(dil), groups)
    got = {}
    for limit in (C.PLANE_BATCH_INNER_MAX, 0):
        monkeypatch.setattr(C, "PLANE_BATCH_INNER_MAX", limit)
        for dt, tol in (("float64", 1e-12), ("float32", 2e-6)):
            xt, wt, bt = T(x, True, dt), T(w, True, dt), T(b, True, dt)
            y = F.conv2d(xt, wt, bt, 1, [1, 2, 1, 0], dil, groups)
            assert (y._data.strides[0] == y._data.itemsize) == (limit > 0)   # batch-innermost output
            np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=tol * np.abs(ref).max())
            (y * y).sum().backward()
            assert xt.grad._data.flags.c_contiguous   # the input's gradient in the input's NCHW layout
            got[limit, dt] = [t.grad.numpy() for t in (xt, wt, bt)]
    for dt, tol in (("float64", 1e-12), ("float32", 2e-5)):
        for a, r in zip(got[C.PLANE_BATCH_INNER_MAX, dt], got[0, "float64"]):
            np.testing.assert_allclose(a, r, rtol=0, atol=tol * np.abs(r).max())
    monkeypatch.undo()
    xs = T(x[:, :, :4, :4], True)
    assert gradcheck(lambda x, w: F.conv2d(x, w, None, 1, 1, dil, groups), [xs, T(w, True)])


def test_pointwise_conv_in_both_layouts_and_inplace_guard():
    # 1x1 stride-1: one product per sample on an NCHW input, one over the whole
    # batch-innermost image otherwise; same values and gradients either way
    x, w, b = RNG.standard_normal((3, 5, 4, 6)), RNG.standard_normal((7, 5, 1, 1)), RNG.standard_normal(7)
    ref = ref_conv2d(x, w, b, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    for dt, tol in (("float64", 1e-12), ("float32", 2e-6)):
        grads = []
        for leaf, inp, back in _layouts(x, dt):
            wt, bt = T(w, True, dt), T(b, True, dt)
            y = F.conv2d(inp, wt, bt)
            np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=tol * np.abs(ref).max())
            (y * y).sum().backward()
            grads.append((back(leaf.grad.numpy()), wt.grad.numpy(), bt.grad.numpy()))
        for a, r in zip(*grads):
            np.testing.assert_allclose(a, r, rtol=0, atol=tol * np.abs(r).max())
    wt, bt = T(w, True), T(b, True)
    (a, _, _), (c, _, _) = _layouts(x[:2], "float64")
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b), [a, wt, bt])
    assert gradcheck(lambda x, w: F.conv2d(x.transpose([3, 0, 1, 2]), w), [c, wt])
    assert gradgradcheck(lambda x, w: ddg.tanh(F.conv2d(x, w)), [T(x[:1], True), wt])
    # backward reads the input array itself: writing into it is caught
    h = T(x, True) * 1.0
    y = F.conv2d(h, wt)
    with ddg.no_grad():
        h[0] = 0.0
    with pytest.raises(RuntimeError, match="modified in place"):
        y.sum().backward()


def test_depthwise_float32_gradients_match_float64():
    x, w = RNG.standard_normal((4, 8, 12, 12)), RNG.standard_normal((8, 1, 3, 3))
    grads = {}
    for dt in ("float64", "float32"):
        xt, wt = T(x, True, dt), T(w, True, dt)
        (F.conv2d(xt, wt, None, 1, 1, 1, 8) ** 2).sum().backward()
        grads[dt] = (xt.grad.numpy(), wt.grad.numpy())
    for a, r in zip(grads["float32"], grads["float64"]):
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-5 * np.abs(r).max())


def test_bias_gradient_channel_sums_in_every_layout():
    # the depthwise paths' bias gradient: a product with ones for NCHW and batch-innermost
    # arrays, numpy's sum for other layouts, dtypes and shapes
    from ddg.autograd.ops.conv import _channel_sums
    g = RNG.standard_normal((3, 5, 4, 6))
    ref = g.sum(axis=(0, 2, 3))
    for a in (g, np.ascontiguousarray(g.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2), np.asfortranarray(g),
              g[:, :, ::2], g.astype(np.float32), g.astype(np.float16)):
        r = a.sum(axis=(0, 2, 3)) if a.shape != g.shape else ref
        got = _channel_sums(a)
        assert got.shape == (5,) and got.dtype == a.dtype
        np.testing.assert_allclose(got, r, rtol=0, atol={8: 1e-12, 4: 1e-5, 2: 0.05}[a.itemsize] * np.abs(r).max())


def test_depthwise_second_order():
    x = T(RNG.standard_normal((2, 3, 6, 6)), True)
    w = T(RNG.standard_normal((3, 1, 3, 3)), True)
    assert gradgradcheck(lambda x, w: ddg.tanh(F.conv2d(x, w, None, 2, 1, 1, 3)), [x, w])


# (x shape, w shape, stride, padding, output_padding): kernels a multiple of the stride
PHASES_2D = [
    ((2, 3, 5, 4), (3, 4, 4, 4), 2, 1, 0),
    ((1, 2, 4, 3), (2, 3, 4, 6), (2, 3), [1, 0, 2, 1], (1, 2)),
    ((2, 2, 3, 5), (2, 2, 2, 4), (1, 2), 0, 0),
]


@pytest.mark.parametrize("xs,ws,stride,padding,opad", PHASES_2D)
def test_conv2d_transpose_by_phases(xs, ws, stride, padding, opad, monkeypatch):
    import ddg.tensor.conv_phase as CP
    monkeypatch.setattr(CP, "PHASE_WORK_MAX", float("inf"))   # these small images take the phases too
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal(ws), RNG.standard_normal(ws[1])
    ref = ref_conv2d_transpose(x, w, b, _pair(stride), _pads4(padding), (1, 1), 1, _pair(opad))
    y = F.conv2d_transpose(T(x), T(w), T(b), stride, padding, opad)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)
    y32 = F.conv2d_transpose(T(x, dtype="float32"), T(w, dtype="float32"), T(b, dtype="float32"), stride, padding,
                             opad)
    np.testing.assert_allclose(y32.numpy(), ref, rtol=0, atol=2e-6 * np.abs(ref).max())
    assert gradcheck(lambda x, w, b: F.conv2d_transpose(x, w, b, stride, padding, opad),
                     [T(x[:1], True), T(w, True), T(b, True)])
    assert gradcheck(lambda w: F.conv2d_transpose(T(x[:1]), w, None, stride, padding, opad), [T(w, True)])
    assert gradgradcheck(lambda x, w: ddg.tanh(F.conv2d_transpose(x, w, None, stride, padding, opad)),
                         [T(x[:1, :, :3, :3], True), T(w, True)])


@pytest.mark.parametrize("xs,ws,stride,padding,opad", PHASES_2D + [
    ((3, 9, 6, 7), (9, 10, 4, 4), 2, 1, 0),          # rows past the last 8-row tile, odd batch
    ((5, 12, 8, 8), (12, 16, 4, 4), 2, 1, 1),        # taps' shifts off the 64-byte lines
    ((2, 4, 5, 6), (4, 3, 6, 4), (3, 2), [2, 1, 0, 1], 0)])
@pytest.mark.parametrize("rows", [True, False])
def test_conv2d_transpose_phases_compiled_products(xs, ws, stride, padding, opad, rows, monkeypatch):
    """float32 on one BLAS thread: the phases' products by ``gemm_kernels.gemm_rows`` on
    shifted windows (forward: one per output row or height phase; backward: the input
    gradient and each tap's weight gradient, one per input row or whole), output and both
    gradients against the float64 phases."""
    import ddg.tensor.conv_phase as CP
    from ddg.tensor import gemm, gemm_kernels
    calls = []
    real = gemm_kernels.gemm_rows
    monkeypatch.setattr(gemm_kernels, "gemm_rows", lambda *a: (calls.append(1), real(*a))[1])
    monkeypatch.setattr(gemm, "blas_threads", lambda: 1)
    monkeypatch.setattr(CP, "_phase_wino_usable", lambda *a: False)
    monkeypatch.setattr(CP, "TAPS_MIN_ROWS", 0)     # the small test products take it too
    monkeypatch.setattr(CP, "by_rows", lambda *a: rows)   # row by row, or whole planes
    s2, p4, op = _pair(stride), _pads4(padding), _pair(opad)
    out = tuple((xs[2 + i] - 1) * s2[i] - p4[2 * i] - p4[2 * i + 1] + ws[2 + i] + op[i] for i in range(2))
    x, w = RNG.standard_normal(xs), RNG.standard_normal(ws)
    gy = RNG.standard_normal((xs[0], ws[1]) + out)
    got = {}
    for dt in (np.float64, np.float32):
        y, st = CP.phase_transpose_forward(x.astype(dt), w.astype(dt), s2, (p4[0], p4[2]), out)
        gx, gw = CP.phase_transpose_backward(gy.astype(dt), st, True, True)
        got[dt] = [np.moveaxis(y, -1, 0), gx, gw]
    taps = (ws[2] // s2[0]) * (ws[3] // s2[1])
    fwd = out[0] if rows else min(s2[0], out[0])           # per output row, or per height phase
    assert len(calls) == fwd + (xs[2] + taps * xs[2] if rows else 1 + taps)   # backward per input row, or whole
    monkeypatch.setattr(CP, "TAPS_MIN_ROWS", 16)    # fewer rows in a product: im2col and numpy
    calls.clear()
    y, st = CP.phase_transpose_forward(x.astype(np.float32), w.astype(np.float32), s2, (p4[0], p4[2]), out)
    CP.phase_transpose_backward(gy.astype(np.float32), st, True, True)
    fwd_rows, bwd_rows = s2[1] * ws[1], min(ws[0], s2[0] * s2[1] * ws[1])
    assert len(calls) == (fwd if fwd_rows >= 16 else 0) + (0 if bwd_rows < 16 else len(calls))
    for g, r in zip(got[np.float32], got[np.float64]):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=0, atol=3e-6 * np.abs(r).max())


def test_conv2d_transpose_phases_gate(monkeypatch):
    # a 4x4 image with kernel 4, stride 2 gives uncropped phases of 5x5 positions (1.56x the
    # columns' work): the columns' path; 16x16 (1.13x) takes the phases; from
    # PHASE_COLS_MIN_CIN input channels with at most PHASE_PIXELS_PER_CIN input positions per
    # channel (a weight larger than the columns) the columns' path again. All against the reference.
    # (More than PHASE_PLANE_MAX_C channels: fewer take the whole-plane phases.)
    import ddg.tensor.conv_phase as CP
    calls = []
    real = CP.phase_transpose_forward
    monkeypatch.setattr(ddg.autograd.ops.conv, "phase_transpose_forward",
                        lambda *a: calls.append(a[0].shape) or real(*a))
    for n, c, hw, phased in ((2, 10, 4, False), (2, 10, 16, True), (1, 64, 8, False), (1, 64, 12, True),
                                (1, 40, 6, True)):
        x, w = RNG.standard_normal((n, c, hw, hw)), RNG.standard_normal((c, 9, 4, 4))
        assert CP.phases_pay(x, w, (2, 2)) is phased
        ref = ref_conv2d_transpose(x, w, None, (2, 2), (1, 1, 1, 1), (1, 1), 1, (0, 0))
        calls.clear()
        y = F.conv2d_transpose(T(x), T(w), None, 2, 1)
        assert bool(calls) is phased
        np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)
    # many channels on few pixels: the columns' gradients against the phases' (forced), and the
    # half dtypes (computed in float32) through the same gate
    from ddg.tensor.dtypes import bfloat16
    x, w = RNG.standard_normal((1, 64, 8, 8)), RNG.standard_normal((64, 9, 4, 4))
    gy = RNG.standard_normal((1, 9, 16, 16))

    def grads():
        xt, wt = T(x, True), T(w, True)
        F.conv2d_transpose(xt, wt, None, 2, 1).backward(T(gy))
        return xt.grad.numpy(), wt.grad.numpy()

    cols = grads()
    monkeypatch.setattr(ddg.autograd.ops.conv, "phases_pay", lambda *a: True)
    calls.clear()
    phased = grads()
    assert calls
    for a, b in zip(cols, phased):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11)
    monkeypatch.undo()
    ref = ref_conv2d_transpose(x, w, None, (2, 2), (1, 1, 1, 1), (1, 1), 1, (0, 0))
    for dt, tol in ((np.float16, 2e-2), (bfloat16, 6e-2)):
        yl = F.conv2d_transpose(ddg.to_tensor(x.astype(dt)), ddg.to_tensor(w.astype(dt)), None, 2, 1)
        assert yl.numpy().dtype == dt
        np.testing.assert_allclose(yl.numpy().astype(np.float64), ref, rtol=0, atol=tol * np.abs(ref).max())


# (path, x shape, w shape, stride, padding, output_padding): the NCHW phases, few channels on
# whole planes ("plane"), 1-D ones as column products ("cols")
PHASES_NCHW = [
    ("plane", (2, 3, 5, 4), (3, 4, 4, 4), 2, 1, 0),
    ("plane", (1, 2, 4, 3), (2, 3, 4, 6), (2, 3), [1, 0, 2, 1], (1, 2)),
    ("plane", (2, 2, 1, 7), (2, 3, 1, 4), (1, 2), [0, 1], 0),       # a 1-D one (height 1)
    ("plane", (2, 2, 3, 4), (2, 2, 4, 4), 2, [0, 3], 1),            # a crop past the stride
    ("cols", (2, 9, 1, 7), (9, 10, 1, 4), (1, 2), [0, 1], 0),
    ("cols", (3, 10, 1, 5), (10, 9, 1, 6), (1, 3), [0, 2], (0, 1)),
    ("cols", (2, 9, 1, 4), (9, 9, 1, 4), (1, 2), [0, 3], (0, 1)),    # a crop past the stride
    ("cols", (2, 9, 5, 4), (9, 10, 2, 2), 2, 0, 0),                   # kernel = stride: one tap per phase
    ("cols", (2, 9, 4, 3), (9, 10, 2, 3), (2, 3), [1, 0, 0, 1], (1, 2)),
    ("k3", (2, 3, 5, 4), (3, 4, 3, 3), 2, 1, 1),                     # 3x3 stride 2: the exact phases
    ("k3", (3, 2, 4, 6), (2, 5, 3, 3), 2, 1, 0),
    ("k3", (1, 16, 3, 5), (16, 2, 3, 3), 2, 1, (1, 0)),
]


@pytest.mark.parametrize("path,xs,ws,stride,padding,opad", PHASES_NCHW)
def test_conv2d_transpose_phases_nchw(path, xs, ws, stride, padding, opad, monkeypatch):
    import ddg.tensor.conv_phase as CP
    monkeypatch.setattr(CP, "PHASE_PLANE_MIN_PIXELS", 0)      # these small images take the plane loop too
    calls = []
    name = f"phase_{path}_forward"
    real = getattr(CP, name)
    monkeypatch.setattr(ddg.autograd.ops.conv, name, lambda *a: calls.append(1) or real(*a))
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal(ws), RNG.standard_normal(ws[1])
    ref = ref_conv2d_transpose(x, w, b, _pair(stride), _pads4(padding), (1, 1), 1, _pair(opad))
    y = F.conv2d_transpose(T(x), T(w), T(b), stride, padding, opad)
    assert calls
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)
    for dt, tol in (("float32", 2e-6), ("float16", 2e-2)):
        yl = F.conv2d_transpose(T(x, dtype=dt), T(w, dtype=dt), T(b, dtype=dt), stride, padding, opad)
        assert yl.dtype == getattr(ddg, dt)
        np.testing.assert_allclose(yl.numpy().astype(np.float64), ref, rtol=0, atol=tol * np.abs(ref).max())
    assert gradcheck(lambda x, w, b: F.conv2d_transpose(x, w, b, stride, padding, opad),
                     [T(x, True), T(w, True), T(b, True)])
    assert gradgradcheck(lambda x, w: ddg.tanh(F.conv2d_transpose(x, w, None, stride, padding, opad)),
                         [T(x[:1], True), T(w, True)])
    # the output gradient read in its own layout: NCHW, a batch-innermost view, a non-dense slice
    gy = RNG.standard_normal(y.shape)
    grads = []
    for g in (gy, np.ascontiguousarray(gy.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2),
              np.repeat(gy, 2, axis=3)[..., ::2]):
        xt, wt = T(x, True), T(w, True)
        F.conv2d_transpose(xt, wt, None, stride, padding, opad).backward(ddg.to_tensor(g))
        grads.append((xt.grad.numpy(), wt.grad.numpy()))
    for gx, gw in grads[1:]:
        np.testing.assert_allclose(gx, grads[0][0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gw, grads[0][1], rtol=1e-12, atol=1e-12)


def test_phase_k3_gate():
    # 3x3 stride 2 padding 1 to 2H - 1 or 2H: the exact phases with few channels, or on images of
    # at least 16x16; other kernels, strides, paddings, sizes and groups keep their paths
    import ddg.tensor.conv_phase as CP

    def takes(c, hw, k=3, s=(2, 2), pads=(1, 1, 1, 1), out=None, groups=1, dt=np.float32):
        x, w = np.zeros((2, c, hw, hw), dt), np.zeros((c, c // groups, k, k), dt)
        return CP.phase_k3_usable(x, w, s, pads, (1, 1), groups, out or (2 * hw, 2 * hw))
    assert takes(16, 8) and takes(8, 32) and takes(64, 16) and takes(16, 8, out=(15, 16))
    assert not takes(32, 8) and not takes(16, 8, out=(17, 16)) and not takes(16, 8, k=4)
    assert not takes(16, 8, s=(2, 1)) and not takes(16, 8, pads=(0, 0, 0, 0)) and not takes(16, 8, groups=2)
    assert not takes(16, 8, dt=np.float16)


@pytest.mark.parametrize("shape,stride,p0", [((3, 2, 9, 7), (2, 3), (1, 2)), ((2, 3, 5, 6, 7), (2, 1, 2), (1, 0, 1)),
                                              ((1, 2, 9, 7), (2, 3), (1, 2)), ((1, 3, 5, 6, 7), (2, 1, 2), (1, 0, 1))])
def test_phase_gather_reads_any_layout(shape, stride, p0):
    # the output gradient's phases from an NC(D)HW array, a batch-innermost view and a
    # non-dense slice alike, against the definition g[r, c, j, n] = gy[n, c, s*j + r - p0]
    from ddg.tensor import conv_kernels as K
    nd = len(stride)
    out = shape[2:]
    j = tuple((out[i] + p0[i] + stride[i] - 1) // stride[i] for i in range(nd))
    gy = RNG.standard_normal(shape)
    ref = np.zeros((int(np.prod(stride)), shape[1]) + j + (shape[0],))
    for p, r in enumerate(np.ndindex(*stride)):
        for jj in np.ndindex(*j):
            pos = tuple(stride[i] * jj[i] + r[i] - p0[i] for i in range(nd))
            if all(0 <= pos[i] < out[i] for i in range(nd)):
                ref[(p, slice(None)) + jj] = gy[(slice(None), slice(None)) + pos].T
    chwn = np.ascontiguousarray(np.moveaxis(gy, 0, -1))
    wide = np.zeros(shape[:-1] + (shape[-1] + 3,))
    wide[..., 1:-2] = gy
    for a in (gy, np.moveaxis(chwn, -1, 0), wide[..., 1:-2]):
        for dt in (np.float64, np.float32):
            g = K.phase_in(a.astype(dt) if dt is np.float32 else a, j, stride, p0, dt)
            np.testing.assert_allclose(g, ref, rtol=0, atol=1e-6 if dt is np.float32 else 0)


@pytest.mark.parametrize("n,c,out,stride,p0", [(3, 2, (9, 7), (2, 3), (1, 2)), (1, 2, (9, 7), (2, 3), (1, 2)),
                                                (1, 3, (5, 6, 7), (2, 1, 2), (1, 0, 1)), (2, 2, (4, 5, 6), (2, 2, 2), (1, 1, 0))])
def test_phase_interleave(n, c, out, stride, p0):
    # the phases f [P, C, *J, N] interleaved into the output, against y[c, s*j + r - p0, n] = f[r, c, j, n]
    from ddg.tensor import conv_kernels as K
    nd = len(stride)
    j = tuple((out[i] + p0[i] + stride[i] - 1) // stride[i] for i in range(nd))
    f = RNG.standard_normal((int(np.prod(stride)), c) + j + (n,))
    ref = np.full((c,) + out + (n,), np.nan)
    for p, r in enumerate(np.ndindex(*stride)):
        for jj in np.ndindex(*j):
            pos = tuple(stride[i] * jj[i] + r[i] - p0[i] for i in range(nd))
            if all(0 <= pos[i] < out[i] for i in range(nd)):
                ref[(slice(None),) + pos] = f[(p, slice(None)) + jj]
    for dt in (np.float64, np.float32):
        np.testing.assert_array_equal(K.phase_out(f.astype(dt), out, stride, p0), ref.astype(dt))


def test_wino_phase_adjoint_reads_any_layout():
    # the Winograd phases' output-transform adjoint gives the same products' gradients for
    # an NCDHW gradient and a batch-innermost view of it
    from ddg.tensor import conv_kernels as K
    gy = RNG.standard_normal((3, 4, 2, 11, 13))
    chwn = np.moveaxis(np.ascontiguousarray(np.moveaxis(gy, 0, -1)), -1, 0)
    geo = (4, 3, 2, 2, (2, 2, 2), (1, 0, 1), np.float64)
    np.testing.assert_array_equal(K.wino4_out_phase_adjoint(gy, *geo), K.wino4_out_phase_adjoint(chwn, *geo))


def _directional_check(f, args, grads, rng):
    # <grad, d> against the central difference of f along a random direction d, per argument
    for i, (a, g) in enumerate(zip(args, grads)):
        d = rng.standard_normal(a.shape)
        eps = 1e-4
        hi = [b + eps * d if j == i else b for j, b in enumerate(args)]
        lo = [b - eps * d if j == i else b for j, b in enumerate(args)]
        np.testing.assert_allclose((g * d).sum(), (f(*hi) - f(*lo)) / (2 * eps), rtol=1e-7)


# (x shape, w shape, stride, padding, output_padding): 3-D and 2-D, kernels of twice the
# stride along height and width, >= 16 channels, windows >= 8, product columns and tiles that
# pass the gate (2-D: >= 256 columns): the phases as F(4x4, 3x3) Winograd
PHASES_WINO = [
    ((4, 16, 7, 9, 10), (16, 8, 2, 4, 6), (2, 2, 3), (0, 1, 2), (1, 1, 1)),
    ((6, 16, 4, 9, 8), (16, 4, 3, 4, 6), (1, 2, 3), (0, 0, 1), (0, 1, 2)),
    ((13, 16, 17, 15), (16, 4, 4, 6), (2, 3), (1, 2), (1, 1)),
    ((16, 16, 16, 16), (16, 4, 4, 4), (2, 2), (1, 1), (0, 0)),
]


@pytest.mark.parametrize("xs,ws,stride,padding,opad", PHASES_WINO)
def test_conv_transpose_phases_by_winograd(xs, ws, stride, padding, opad, monkeypatch):
    import ddg.tensor.conv_phase as CP
    op = F.conv3d_transpose if len(xs) == 5 else F.conv2d_transpose
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal(ws) / 8, RNG.standard_normal(ws[1])
    v = None

    def run(dtype):
        xt, wt, bt = T(x, True, dtype), T(w, True, dtype), T(b, True, dtype)
        y = op(xt, wt, bt, stride, padding, opad)
        nonlocal v
        v = RNG.standard_normal(y.shape) if v is None else v
        (y * T(v, dtype=dtype)).sum().backward()
        return y.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()

    taken, real = [], CP._phase_wino_forward
    monkeypatch.setattr(CP, "_phase_wino_forward", lambda *a: taken.append(1) or real(*a))
    with monkeypatch.context() as mp:
        mp.setattr(CP, "PHASE_WINO_BLOCK", 1)      # products and output transform one channel at a time
        got = run("float64")
    got32 = run("float32")
    assert len(taken) == 2
    monkeypatch.setattr(CP, "_phase_wino_usable", lambda *a: False)   # the phases' column products
    ref = run("float64")
    for a, a32, r in zip(got, got32, ref):
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-12 * np.abs(r).max())
        np.testing.assert_allclose(a32, r, rtol=0, atol=2e-5 * np.abs(r).max())
    # and the adjoint of the loop reference of conv3d: <conv_transpose(x), v> = <x, conv3d(v)>
    # (a 2-D one as depth 1)
    lift = len(xs) == 4
    cv = _ref_conv3d(v[:, :, None] if lift else v, w[:, :, None] if lift else w, ((1,) if lift else ()) + stride,
                     ((0,) if lift else ()) + padding, (1, 1, 1), 1)
    cv = cv[:, :, 0] if lift else cv
    bb = b.reshape((1, -1) + (1,) * (len(xs) - 2))
    np.testing.assert_allclose((got[0] - bb).ravel() @ v.ravel(), (x * cv).sum(), rtol=1e-11)
    monkeypatch.undo()
    _directional_check(lambda x, w: (op(T(x), T(w), T(b), stride, padding, opad).numpy() * v).sum(), [x, w],
                       got[1:3], RNG)


@pytest.mark.parametrize("stride,pad,k", [((2, 2, 2), (1, 1, 1), (4, 4, 4)), ((2, 1, 3), (0, 1, 2), (2, 3, 3))])
def test_conv3d_transpose_by_phases(stride, pad, k):
    # the adjoint of conv3d (whose strided path is the 3-D im2col), its gradients, float32
    x, w = RNG.standard_normal((2, 3, 7, 6, 8)), RNG.standard_normal((4, 3) + k)
    y = F.conv3d(T(x), T(w), None, stride, pad).numpy()
    v = RNG.standard_normal(y.shape)
    xt = F.conv3d_transpose(T(v), T(w), None, stride, pad, output_size=x.shape[2:]).numpy()
    np.testing.assert_allclose((y * v).sum(), (x * xt).sum(), rtol=1e-12)
    x32 = F.conv3d_transpose(T(v, dtype="float32"), T(w, dtype="float32"), None, stride, pad,
                             output_size=x.shape[2:]).numpy()
    np.testing.assert_allclose(x32, xt, rtol=0, atol=2e-6 * np.abs(xt).max())
    vt, wt = T(v[:1, :, :3, :3, :3], True), T(w, True)
    assert gradcheck(lambda v, w: F.conv3d_transpose(v, w, None, stride, pad), [vt, wt])


def _ref_conv3d_transpose(x, w, stride, pad, out):
    """Transposed 3-D convolution by one scatter-add per kernel offset, cropped to ``out``."""
    n, _, *sp = x.shape
    k = w.shape[2:]
    full = np.zeros((n, w.shape[1]) + tuple((sp[i] - 1) * stride + k[i] + pad + out[i] for i in range(3)))
    for off in np.ndindex(*k):
        sl = tuple(slice(off[i], off[i] + stride * (sp[i] - 1) + 1, stride) for i in range(3))
        full[(slice(None), slice(None)) + sl] += np.einsum("nc...,co->no...", x, w[(slice(None), slice(None)) + off])
    return full[:, :, pad:pad + out[0], pad:pad + out[1], pad:pad + out[2]]


@pytest.mark.parametrize("stride,pad,k", [((2, 2, 2), (1, 1, 1), (4, 4, 4)), ((2, 1, 3), (0, 1, 2), (2, 3, 3))])
def test_conv3d_transpose_phase_backward_by_depth_blocks(stride, pad, k, monkeypatch):
    # few input channels: the backward's two products by blocks of depth slabs (one slab a
    # block here), against the loop reference and central differences
    import ddg.tensor.conv_phase as CP
    monkeypatch.setattr(CP, "PHASE_SLAB_BLOCK", 1)
    taken, real = [], CP._slab_backward_blocks
    monkeypatch.setattr(CP, "_slab_backward_blocks", lambda *a: taken.append(1) or real(*a))
    x, w = RNG.standard_normal((2, 2, 4, 3, 5)), RNG.standard_normal((2, 3) + k)
    out = tuple((x.shape[2 + i] - 1) * stride[i] - 2 * pad[i] + k[i] for i in range(3))
    ref = _ref_conv3d_transpose_strided(x, w, stride, pad, out)
    v = RNG.standard_normal(ref.shape)
    xt, wt = T(x, True), T(w, True)
    y = F.conv3d_transpose(xt, wt, None, stride, pad)
    np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    (y * T(v)).sum().backward()
    assert taken
    _directional_check(lambda x, w: (F.conv3d_transpose(T(x), T(w), None, stride, pad).numpy() * v).sum(), [x, w],
                       [xt.grad.numpy(), wt.grad.numpy()], RNG)
    x32, w32 = T(x, True, "float32"), T(w, True, "float32")
    (F.conv3d_transpose(x32, w32, None, stride, pad) * T(v, dtype="float32")).sum().backward()
    for a, r in ((x32.grad.numpy(), xt.grad.numpy()), (w32.grad.numpy(), wt.grad.numpy())):
        np.testing.assert_allclose(a, r, rtol=0, atol=2e-6 * np.abs(r).max())


def _ref_conv3d_transpose_strided(x, w, stride, pad, out):
    """Transposed 3-D convolution with per-axis stride and padding, one scatter-add per kernel
    offset, cropped to ``out``."""
    n, _, *sp = x.shape
    k = w.shape[2:]
    full = np.zeros((n, w.shape[1]) + tuple((sp[i] - 1) * stride[i] + k[i] for i in range(3)))
    for off in np.ndindex(*k):
        sl = tuple(slice(off[i], off[i] + stride[i] * (sp[i] - 1) + 1, stride[i]) for i in range(3))
        full[(slice(None), slice(None)) + sl] += np.einsum("nc...,co->no...", x, w[(slice(None), slice(None)) + off])
    return full[:, :, pad[0]:pad[0] + out[0], pad[1]:pad[1] + out[1], pad[2]:pad[2] + out[2]]


# (x shape, Cout, padding, output_padding): 4x4x4 stride 2, >= 16 channels: Winograd F(2, 2)
# on the output phases; odd and even positions per phase, crops 0-2
PHASES_W22 = [((2, 16, 3, 4, 5), 16, 1, 0), ((1, 16, 5, 3, 4), 17, 0, 1), ((1, 18, 4, 4, 3), 16, 2, 1)]


def _check_w22(xs, cout, k, scale, pad, opad, monkeypatch, one_row_blocks=False):
    """conv3d_transpose stride 2 (kernel k) through ``conv_w22.forward``: float64 against the
    reference, float32 against float64, the bias gradient, directional derivatives of x and
    w; with ``one_row_blocks`` the float64 run takes one row of tiles per block. Returns
    ``(x, w, b, ref, taken)``, ``taken`` a list growing with each ``conv_w22.forward`` call."""
    import ddg.tensor.conv_w22 as W22
    taken, real = [], W22.forward
    monkeypatch.setattr(W22, "forward", lambda *a: taken.append(1) or real(*a))
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((xs[1], cout) + (k,) * 3) / scale, RNG.standard_normal(cout)
    out = tuple((xs[2 + i] - 1) * 2 - 2 * pad + k + opad for i in range(3))
    ref = _ref_conv3d_transpose(x, w, 2, pad, out) + b.reshape(1, -1, 1, 1, 1)
    v = RNG.standard_normal(ref.shape)
    got = {}
    for dt in ("float64", "float32"):
        with monkeypatch.context() as mp:
            if dt == "float64" and one_row_blocks:
                mp.setattr(W22, "W22_BLOCK", 1)       # one row of tiles per block
                mp.setattr(W22, "W22_BLOCK_MIN_TILES", 1)
            xt, wt, bt = T(x, True, dt), T(w, True, dt), T(b, True, dt)
            y = F.conv3d_transpose(xt, wt, bt, 2, pad, opad)
            (y * T(v, dtype=dt)).sum().backward()
        got[dt] = (y.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy())
    assert len(taken) == 2 and got["float64"][2].shape == w.shape
    np.testing.assert_allclose(got["float64"][0], ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    for a, r in zip(got["float32"], got["float64"]):
        np.testing.assert_allclose(a, r, rtol=0, atol=2e-6 * np.abs(r).max())
    np.testing.assert_allclose(got["float64"][3], v.sum(axis=(0, 2, 3, 4)), rtol=1e-12)
    _directional_check(lambda x, w: (F.conv3d_transpose(T(x), T(w), T(b), 2, pad, opad).numpy() * v).sum(), [x, w],
                       got["float64"][1:3], RNG)
    return x, w, b, ref, taken


@pytest.mark.parametrize("xs,cout,pad,opad", PHASES_W22)
def test_conv3d_transpose_by_winograd_f22(xs, cout, pad, opad, monkeypatch):
    x, w, b, ref, taken = _check_w22(xs, cout, 4, 8, pad, opad, monkeypatch, one_row_blocks=True)
    # float16 takes the adjoint's array path: the same result within its round-off
    calls = len(taken)
    y16 = F.conv3d_transpose(T(x, dtype="float16"), T(w, dtype="float16"), None, 2, pad, opad).numpy()
    assert len(taken) == calls
    np.testing.assert_allclose(y16.astype(np.float64), ref - b.reshape(1, -1, 1, 1, 1), rtol=0,
                               atol=1e-2 * np.abs(ref).max())


@pytest.mark.parametrize("cin,cout", [(32, 40), (3, 5)])
def test_conv3d_transpose_winograd_f22_phase_taps(cin, cout):
    # the phases' taps of the weight and their adjoint (one copy per tap from 1024 values a
    # tap) against the gathers by the cached flat indices
    import ddg.tensor.conv_w22 as W22
    w = RNG.standard_normal((cin, cout, 4, 4, 4)).astype("float32")
    idx, inv = W22._weight_index(w.shape)
    np.testing.assert_array_equal(W22._phase_taps(w), np.take(w.reshape(-1), idx).reshape(8, 8, -1))
    g8 = RNG.standard_normal((8, 8, cin * cout))
    np.testing.assert_array_equal(W22._phase_taps_adjoint(g8, w.shape), np.take(g8.reshape(-1), inv).reshape(w.shape))
    np.testing.assert_array_equal(W22._phase_taps_adjoint(W22._phase_taps(w), w.shape), w)


def test_conv3d_transpose_winograd_f22_gate():
    import ddg.tensor.conv_w22 as W22

    def takes(xs, cout=None, dt=np.float32, k=4, s=2):
        x, w = np.empty(xs, dt), np.empty((xs[1], cout or xs[1]) + (k,) * 3, dt)
        return W22.usable(x, w, (s,) * 3, (1, 1, 1), 1)
    assert takes((1, 32, 10, 10, 10)) and takes((2, 8, 20, 20, 20)) and takes((1, 128, 8, 8, 8), 64)
    assert not takes((1, 4, 10, 10, 10)) and not takes((1, 32, 10, 10, 10), 3)          # thin products
    assert not takes((1, 32, 10, 10, 10), dt=np.float16) and not takes((1, 32, 8, 8, 8), k=3)
    assert not takes((1, 32, 10, 10, 10), s=1)


def test_conv3d_transpose_many_channels_on_few_positions_take_the_adjoint(monkeypatch):
    import ddg.tensor.conv_phase as CP
    assert not CP.phases_pay_3d(np.empty((1, 64, 4, 4, 4))) and not CP.phases_pay_3d(np.empty((2, 256, 4, 4, 4)))
    assert CP.phases_pay_3d(np.empty((2, 64, 4, 4, 4))) and CP.phases_pay_3d(np.empty((1, 32, 2, 2, 2)))
    # a weight of at most 64 x 64 with >= 8 output channels keeps the F(2, 2) phases
    assert CP.phases_pay_3d(np.empty((1, 64, 4, 4, 4)), 64) and CP.phases_pay_3d(np.empty((1, 64, 4, 4, 2)), 8)
    assert not CP.phases_pay_3d(np.empty((1, 64, 4, 4, 4)), 128) and not CP.phases_pay_3d(np.empty((1, 64, 4, 4, 4)), 4)
    assert not CP.phases_pay_3d(np.empty((1, 96, 4, 4, 4)), 96)
    import ddg.autograd.ops.conv_nd as CN
    monkeypatch.setattr(CN, "phase_transpose_forward", lambda *a: pytest.fail("took the phases"))
    x, w, b = RNG.standard_normal((1, 64, 2, 3, 1)), RNG.standard_normal((64, 3, 4, 4, 4)) / 8, RNG.standard_normal(3)
    ref = _ref_conv3d_transpose(x, w, 2, 1, (4, 6, 2)) + b.reshape(1, -1, 1, 1, 1)
    np.testing.assert_allclose(F.conv3d_transpose(T(x), T(w), T(b), 2, 1).numpy(), ref, rtol=0,
                               atol=1e-13 * np.abs(ref).max())
    v = RNG.standard_normal(ref.shape)
    xt, wt = T(x, True), T(w, True)
    (F.conv3d_transpose(xt, wt, T(b), 2, 1) * T(v)).sum().backward()
    _directional_check(lambda x, w: (F.conv3d_transpose(T(x), T(w), T(b), 2, 1).numpy() * v).sum(), [x, w],
                       [xt.grad.numpy(), wt.grad.numpy()], RNG)
    # 64 -> 8: a small weight keeps the F(2, 2) phases on one position per channel
    monkeypatch.undo()
    import ddg.tensor.conv_w22 as W22
    taken, real = [], W22.forward
    monkeypatch.setattr(W22, "forward", lambda *a: taken.append(1) or real(*a))
    x, w = RNG.standard_normal((1, 64, 2, 2, 2)), RNG.standard_normal((64, 8, 4, 4, 4)) / 8
    ref = _ref_conv3d_transpose(x, w, 2, 1, (4, 4, 4))
    np.testing.assert_allclose(F.conv3d_transpose(T(x), T(w), None, 2, 1).numpy(), ref, rtol=0,
                               atol=1e-13 * np.abs(ref).max())
    assert taken


def test_conv3d_transpose_winograd_f22_agrees_on_device(place):
    w = (RNG.standard_normal((16, 16, 4, 4, 4)) / 8).astype("float32")
    assert_cpu_and_device_agree([(lambda x, p: F.conv3d_transpose(x, ddg.to_tensor(w, place=p), None, 2, 1),
                                  (1, 16, 3, 4, 3))], place, RNG)



# (x shape, Cout, kernel = stride, output_padding): 3-D transposed convolutions whose windows
# tile the output: one product per sample and an interleave of its taps (U-Net upsampling
# 2x2x2, C -> C/2; mixed kernels, a margin of output_padding, batch 1 and 3, 1x1x1)
TILES_3D = [((2, 4, 3, 2, 3), 2, (2, 2, 2), (0, 0, 0)), ((3, 3, 2, 3, 2), 4, (2, 1, 3), (1, 0, 2)),
            ((1, 5, 2, 2, 3), 3, (1, 1, 1), (0, 0, 0))]


@pytest.mark.parametrize("xs,cout,k,opad", TILES_3D)
def test_conv3d_transpose_kernel_equal_to_stride(xs, cout, k, opad, monkeypatch):
    import ddg.tensor.conv_phase as CP
    import ddg.autograd.ops.conv_nd as CN
    taken, real = [], CP.tile_transpose_forward
    monkeypatch.setattr(CN, "tile_transpose_forward", lambda *a: taken.append(1) or real(*a))
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((xs[1], cout) + k), RNG.standard_normal(cout)
    out = tuple(xs[2 + i] * k[i] + opad[i] for i in range(3))
    ref = _ref_conv3d_transpose_strided(x, w, k, (0, 0, 0), out) if not any(opad) else None
    if ref is None:   # the output_padding margin: no tap reaches it, the bias alone
        ref = np.zeros((xs[0], cout) + out)
        ref[:, :, :out[0] - opad[0], :out[1] - opad[1], :out[2] - opad[2]] = \
            _ref_conv3d_transpose_strided(x, w, k, (0, 0, 0), tuple(o - p for o, p in zip(out, opad)))
    ref = ref + b.reshape(1, -1, 1, 1, 1)
    v = RNG.standard_normal(ref.shape)
    got = {}
    for dt in ("float64", "float32"):
        xt, wt, bt = T(x, True, dt), T(w, True, dt), T(b, True, dt)
        y = F.conv3d_transpose(xt, wt, bt, k, 0, opad)
        (y * T(v, dtype=dt)).sum().backward()
        got[dt] = (y.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy())
    assert len(taken) == 2
    np.testing.assert_allclose(got["float64"][0], ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    for a, r in zip(got["float32"], got["float64"]):
        np.testing.assert_allclose(a, r, rtol=0, atol=2e-6 * np.abs(r).max())
    np.testing.assert_allclose(got["float64"][3], v.sum(axis=(0, 2, 3, 4)), rtol=1e-12)
    _directional_check(lambda x, w: (F.conv3d_transpose(T(x), T(w), T(b), k, 0, opad).numpy() * v).sum(), [x, w],
                       got["float64"][1:3], RNG)
    # float16 and bfloat16 (computed in float32): the same result within their round-off
    from ddg.tensor.dtypes import bfloat16
    for dt, tol in ((np.float16, 1e-2), (bfloat16, 6e-2)):
        xt = T(x, True, dt)
        y = F.conv3d_transpose(xt, T(w, dtype=dt), T(b, dtype=dt), k, 0, opad)
        (y * T(v, dtype=dt)).sum().backward()
        assert y.numpy().dtype == dt and xt.grad.numpy().dtype == dt
        np.testing.assert_allclose(y.numpy().astype(np.float64), ref, rtol=0, atol=tol * np.abs(ref).max())
        np.testing.assert_allclose(xt.grad.numpy().astype(np.float64), got["float64"][1], rtol=0,
                                   atol=tol * np.abs(got["float64"][1]).max())
    # backward reads the input array itself: writing into it is caught
    h = T(x, True) * 1.0
    y = F.conv3d_transpose(h, T(w, True), None, k, 0, opad)
    with ddg.no_grad():
        h[0] = 0.0
    with pytest.raises(RuntimeError, match="modified in place"):
        y.sum().backward()
    xt = T(x, True)
    F.conv3d_transpose(xt, T(w), None, k, 0, opad).sum().backward()      # the input gradient alone
    np.testing.assert_allclose(xt.grad.numpy(), w.sum(axis=(1, 2, 3, 4)).reshape(1, -1, 1, 1, 1)
                               * np.ones(xs), rtol=1e-12)


def test_conv3d_transpose_kernel_equal_to_stride_agrees_on_device(place, monkeypatch):
    import ddg.tensor.conv_phase as CP
    import ddg.autograd.ops.conv_nd as CN
    taken, real = [], CP.tile_transpose_forward
    monkeypatch.setattr(CN, "tile_transpose_forward", lambda *a: taken.append(1) or real(*a))
    w, b = RNG.standard_normal((6, 3, 2, 2, 2)).astype("float32"), RNG.standard_normal(3).astype("float32")
    assert_cpu_and_device_agree([(lambda x, p: F.conv3d_transpose(x, ddg.to_tensor(w, place=p),
                                                                 ddg.to_tensor(b, place=p), 2), (2, 6, 3, 2, 4))],
                                place, RNG)
    assert len(taken) == 2


# (x shape, Cout, kernel, padding, dilation): stride-1 3-D transposed convolutions that run as
# the convolution with the flipped kernel (Winograd for 3x3 planes with >= 16 channels, depth
# slabs otherwise), uneven paddings within the kernel's extent
AS_CONV_3D = [((2, 16, 3, 8, 8), 16, (3, 3, 3), (1, 1, 0, 2, 1, 1), (1, 1, 1)),
              ((3, 2, 3, 4, 3), 3, (2, 3, 2), (0, 1, 2, 0, 1, 0), (1, 1, 2))]


@pytest.mark.parametrize("xs,cout,k,pads,dil", AS_CONV_3D)
def test_conv3d_transpose_stride1_as_convolution(xs, cout, k, pads, dil, monkeypatch):
    import ddg.autograd.ops.conv_nd as CN
    taken, real = [], CN.ConvNd.forward
    monkeypatch.setattr(CN.ConvNd, "forward", lambda *a: taken.append(1) or real(*a))
    wino, real_wino = [], CN._wino3_forward
    monkeypatch.setattr(CN, "_wino3_forward", lambda *a: wino.append(1) or real_wino(*a))
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((xs[1], cout) + k), RNG.standard_normal(cout)
    ext = [dil[i] * (k[i] - 1) for i in range(3)]
    out = tuple(xs[2 + i] + ext[i] - pads[2 * i] - pads[2 * i + 1] for i in range(3))
    full = np.zeros((xs[0], cout) + tuple(xs[2 + i] + ext[i] for i in range(3)))
    for off in np.ndindex(*k):
        sl = tuple(slice(off[i] * dil[i], off[i] * dil[i] + xs[2 + i]) for i in range(3))
        full[(slice(None), slice(None)) + sl] += np.einsum("nc...,co->no...", x, w[(slice(None), slice(None)) + off])
    ref = full[:, :, pads[0]:pads[0] + out[0], pads[2]:pads[2] + out[1], pads[4]:pads[4] + out[2]]
    ref = ref + b.reshape(1, -1, 1, 1, 1)
    pd = list(pads)
    v = RNG.standard_normal(ref.shape)
    got = {}
    for dt in ("float64", "float32"):
        xt, wt, bt = T(x, True, dt), T(w, True, dt), T(b, True, dt)
        y = F.conv3d_transpose(xt, wt, bt, 1, pd, dilation=dil)
        (y * T(v, dtype=dt)).sum().backward()
        got[dt] = (y.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy())
    assert len(taken) == 2 and len(wino) == (2 if xs[1] >= 16 else 0)
    np.testing.assert_allclose(got["float64"][0], ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    for a, r in zip(got["float32"], got["float64"]):   # Winograd's float32 round-off is a few times the direct sum's
        np.testing.assert_allclose(a, r, rtol=0, atol=(1e-5 if wino else 2e-6) * np.abs(r).max())
    np.testing.assert_allclose(got["float64"][3], v.sum(axis=(0, 2, 3, 4)), rtol=1e-12)
    _directional_check(lambda x, w: (F.conv3d_transpose(T(x), T(w), T(b), 1, pd, dilation=dil).numpy() * v).sum(),
                       [x, w], got["float64"][1:3], RNG)
    from ddg.tensor.dtypes import bfloat16
    for dt, tol in ((np.float16, 1e-2), (bfloat16, 6e-2)):
        y = F.conv3d_transpose(T(x, dtype=dt), T(w, dtype=dt), T(b, dtype=dt), 1, pd, dilation=dil).numpy()
        np.testing.assert_allclose(y.astype(np.float64), ref, rtol=0, atol=tol * np.abs(ref).max())


def test_conv3d_transpose_stride1_gate():
    import ddg.autograd.ops.conv_nd as CN

    def takes(xs, k=3, pad=1, s=1, cout=None, dt=np.float32):
        op = CN.ConvTransposeNd((s,) * 3, (pad,) * 6, (1, 1, 1), 1,
                                tuple((v - 1) * s + k - 2 * pad for v in xs[2:]))
        return op._as_conv_usable(np.empty(xs, dt), np.empty((xs[1], cout or xs[1]) + (k,) * 3, dt), 1)
    assert takes((8, 16, 8, 8, 8)) and takes((1, 64, 8, 8, 8)) and takes((2, 8, 6, 6, 6), k=4, pad=3)
    assert not takes((1, 128, 4, 4, 4)) and not takes((2, 64, 6, 6, 6))        # few positions per channel
    assert not takes((8, 16, 8, 8, 8), s=2) and not takes((8, 16, 8, 8, 8), pad=3)  # stride 2; padding past the kernel
    assert not takes((8, 16, 8, 8, 8), dt=np.float16)


@pytest.mark.parametrize("xs,cout,pad,opad", [((2, 8, 5, 5, 6), 9, 1, 1), ((1, 8, 7, 6, 7), 8, 0, 0)])
def test_conv3d_transpose_k3_stride2_as_padded_k4(xs, cout, pad, opad, monkeypatch):
    # 3x3x3 stride 2 with many input positions per channel: the 4x4x4 kernel with a zero last
    # tap per axis, by its F(2, 2) phases
    x, w, b, ref, _ = _check_w22(xs, cout, 3, 4, pad, opad, monkeypatch)
    from ddg.tensor.dtypes import bfloat16
    for dt, tol in ((np.float16, 1e-2), (bfloat16, 6e-2)):
        y = F.conv3d_transpose(T(x, dtype=dt), T(w, dtype=dt), T(b, dtype=dt), 2, pad, opad).numpy()
        np.testing.assert_allclose(y.astype(np.float64), ref, rtol=0, atol=tol * np.abs(ref).max())


def test_conv3d_transpose_k3_stride2_gate():
    import ddg.autograd.ops.conv_nd as CN

    def takes(xs, cout=None, k=3, s=2, dt=np.float32):
        x, w = np.empty(xs, dt), np.empty((xs[1], cout or xs[1]) + (k,) * 3, dt)
        return CN._pad_k3_usable(x, w, (s,) * 3, (1, 1, 1), 1)
    assert takes((2, 16, 8, 8, 8)) and takes((1, 32, 12, 12, 12)) and takes((2, 8, 16, 16, 16))
    assert not takes((1, 64, 8, 8, 8)) and not takes((2, 64, 4, 4, 4))       # few positions per channel
    assert not takes((2, 4, 16, 16, 16)) and not takes((2, 16, 8, 8, 8), cout=4)  # thin products
    assert not takes((2, 16, 16, 16, 16), cout=8) and takes((2, 16, 8, 8, 8), cout=32)  # fewer out than in
    assert not takes((2, 16, 8, 8, 8), k=5) and not takes((2, 16, 8, 8, 8), s=3)
    assert not takes((2, 16, 8, 8, 8), dt=np.float16)

# -- N-d convolution ------------------------------------------------------------------------------
def _ref_conv3d(x, w, stride, pad, dil, groups):
    n, c, *sp = x.shape
    o, cg, *k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in pad))
    out_sp = [(sp[i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(3)]
    out = np.zeros((n, o) + tuple(out_sp))
    og = o // groups
    for oo in range(o):
        gi = oo // og
        for a in range(k[0]):
            for i in range(k[1]):
                for j in range(k[2]):
                    sl = tuple(slice(t * dil[q], t * dil[q] + stride[q] * (out_sp[q] - 1) + 1, stride[q])
                               for q, t in enumerate((a, i, j)))
                    patch = xp[(slice(None), slice(gi * cg, (gi + 1) * cg)) + sl]
                    out[:, oo] += np.einsum("nc...,c->n...", patch, w[oo, :, a, i, j])
    return out


def test_conv3d_float32_and_float64_against_loops():
    x, w = RNG.standard_normal((2, 4, 5, 6, 7)), RNG.standard_normal((6, 2, 3, 2, 3))
    for stride, pad, dil in (((1, 1, 1), (1, 0, 1), (1, 1, 1)), ((2, 1, 2), (0, 1, 1), (1, 2, 1))):
        ref = _ref_conv3d(x, w, stride, pad, dil, 2)
        y = F.conv3d(T(x), T(w), None, stride, pad, dil, 2).numpy()
        np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)
        y32 = F.conv3d(T(x, dtype="float32"), T(w, dtype="float32"), None, stride, pad, dil, 2).numpy()
        np.testing.assert_allclose(y32, ref, rtol=0, atol=2e-6 * np.abs(ref).max())


@pytest.mark.parametrize("pad,dil", [((1, 0, 1), (1, 1, 1)), ((2, 1, 0), (2, 1, 1)), ((3, 0, 0), (1, 1, 1))])
def test_stride1_conv3d_depth_slabs(pad, dil):
    # stride 1, one group: depth slabs of 2-D columns, the input gradient as a convolution
    # of the output gradient (padding 3 > the kernel's extent takes the 3-D columns)
    x, w, b = RNG.standard_normal((2, 3, 6, 5, 4)), RNG.standard_normal((4, 3, 3, 2, 3)), RNG.standard_normal(4)
    ref = _ref_conv3d(x, w, (1, 1, 1), pad, dil, 1) + b.reshape(1, -1, 1, 1, 1)
    np.testing.assert_allclose(F.conv3d(T(x), T(w), T(b), 1, pad, dil).numpy(), ref, rtol=1e-12, atol=1e-12)
    y32 = F.conv3d(T(x, dtype="float32"), T(w, dtype="float32"), T(b, dtype="float32"), 1, pad, dil).numpy()
    np.testing.assert_allclose(y32, ref, rtol=0, atol=2e-6 * np.abs(ref).max())
    assert gradcheck(lambda x, w, b: F.conv3d(x, w, b, 1, pad, dil), [T(x[:1], True), T(w, True), T(b, True)])
    grads = []
    for dt in ("float64", "float32"):
        xt, wt = T(x, True, dt), T(w, True, dt)
        (F.conv3d(xt, wt, None, 1, pad, dil) ** 2).sum().backward()
        grads.append((xt.grad.numpy(), wt.grad.numpy()))
    for a, r in zip(grads[1], grads[0]):
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-5 * np.abs(r).max())


@pytest.mark.parametrize("xs,ws,pad,dil", [((2, 16, 4, 9, 10), (16, 16, 3, 3, 3), (1, 1, 1), (1, 1, 1)),
                                            ((1, 16, 5, 10, 8), (17, 16, 2, 3, 3), (1, 0, 2), (2, 1, 1)),
                                            ((8, 16, 3, 6, 6), (16, 16, 3, 3, 3), (1, 1, 1), (1, 1, 1))])
def test_conv3d_winograd_over_height_and_width(xs, ws, pad, dil, monkeypatch):
    # kd x 3 x 3, stride 1, >= 16 channels, planes >= 8x8 (6x6 at batch 8): F(4x4, 3x3) per
    # depth offset
    import ddg.autograd.ops.conv_nd as CN
    taken, real = [], CN._wino3_forward
    monkeypatch.setattr(CN, "_wino3_forward", lambda *a: taken.append(1) or real(*a))
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal(ws) / 12, RNG.standard_normal(ws[0])
    ref = _ref_conv3d(x, w, (1, 1, 1), pad, dil, 1) + b.reshape(1, -1, 1, 1, 1)
    xt, wt, bt = T(x, True), T(w, True), T(b, True)
    y = F.conv3d(xt, wt, bt, 1, pad, dil)
    assert taken
    np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    # backward: against central differences along a random direction of x and of w
    v = RNG.standard_normal(ref.shape)
    (y * T(v)).sum().backward()
    for arr, grad, which in ((x, xt.grad.numpy(), 0), (w, wt.grad.numpy(), 1)):
        dirn = RNG.standard_normal(arr.shape)
        eps = 1e-4

        def f(e):
            args = [x, w]
            args[which] = arr + e * dirn
            return (F.conv3d(T(args[0]), T(args[1]), T(b), 1, pad, dil).numpy() * v).sum()
        fd = (f(eps) - f(-eps)) / (2 * eps)
        np.testing.assert_allclose((grad * dirn).sum(), fd, rtol=1e-7)
    np.testing.assert_allclose(bt.grad.numpy(), v.sum(axis=(0, 2, 3, 4)), rtol=1e-12)
    # float32 within F(4x4, 3x3)'s round-off of float64, gradients too
    x32, w32 = T(x, True, "float32"), T(w, True, "float32")
    y32 = F.conv3d(x32, w32, T(b, dtype="float32"), 1, pad, dil)
    assert y32.dtype == ddg.float32
    np.testing.assert_allclose(y32.numpy(), ref, rtol=0, atol=2e-5 * np.abs(ref).max())
    (y32 * T(v, dtype="float32")).sum().backward()
    for a, r in ((x32.grad.numpy(), xt.grad.numpy()), (w32.grad.numpy(), wt.grad.numpy())):
        np.testing.assert_allclose(a, r, rtol=0, atol=2e-5 * np.abs(r).max())


def test_conv3d_transpose_is_the_adjoint_of_conv3d():
    # <conv(x), y> == <x, conv_transpose(y)> for the same weight, stride, padding, dilation
    x, w = RNG.standard_normal((2, 4, 7, 6, 5)), RNG.standard_normal((3, 4, 3, 2, 3))
    stride, pad, dil = (2, 1, 2), (1, 0, 1), (1, 2, 1)
    y = F.conv3d(T(x), T(w), None, stride, pad, dil).numpy()
    v = RNG.standard_normal(y.shape)
    xt = F.conv3d_transpose(T(v), T(w), None, stride, pad, output_size=x.shape[2:], dilation=dil).numpy()
    np.testing.assert_allclose((y * v).sum(), (x * xt).sum(), rtol=1e-12)
    vt, wt = T(v, True), T(w, True)
    assert gradcheck(lambda v, w: F.conv3d_transpose(v, w, None, stride, pad, output_size=x.shape[2:],
                                                     dilation=dil), [vt, wt])


# -- pooling ----------------------------------------------------------------------------------------
def _ref_pool3d(x, k, s, pad, ceil, kind, exclusive=True, divisor=None):
    n, c, *sp = x.shape
    outs = []
    for i in range(3):
        room = sp[i] + 2 * pad[i] - k[i]
        o = (-(-room // s[i]) if ceil else room // s[i]) + 1
        if ceil and (o - 1) * s[i] >= sp[i] + pad[i]:
            o -= 1
        outs.append(o)
    y = np.zeros((n, c) + tuple(outs))
    for idx in np.ndindex(*outs):
        lo = [idx[i] * s[i] - pad[i] for i in range(3)]
        sl = tuple(slice(max(lo[i], 0), min(lo[i] + k[i], sp[i])) for i in range(3))
        win = x[(slice(None), slice(None)) + sl].reshape(n, c, -1)
        if kind == "max":
            y[(slice(None), slice(None)) + idx] = win.max(-1)
        else:
            cnt = divisor or (win.shape[-1] if exclusive else
                              np.prod([min(lo[i] + k[i], sp[i] + pad[i]) - max(lo[i], -pad[i]) for i in range(3)]))
            y[(slice(None), slice(None)) + idx] = win.sum(-1) / cnt
    return y


@pytest.mark.parametrize("k,s,pad,ceil", [((2, 2, 2), (2, 2, 2), (0, 0, 0), False),
                                          ((3, 2, 3), (2, 1, 2), (1, 0, 1), True)])
def test_pool3d_against_loops_and_gradients(k, s, pad, ceil):
    x = RNG.standard_normal((2, 3, 6, 5, 7))
    ym = F.max_pool3d(T(x), k, s, pad, ceil_mode=ceil).numpy()
    np.testing.assert_allclose(ym, _ref_pool3d(x, k, s, pad, ceil, "max"), rtol=0, atol=0)
    for exclusive, div in ((True, None), (False, None), (True, 5)):
        ya = F.avg_pool3d(T(x), k, s, pad, ceil_mode=ceil, exclusive=exclusive, divisor_override=div).numpy()
        np.testing.assert_allclose(ya, _ref_pool3d(x, k, s, pad, ceil, "avg", exclusive, div), rtol=1e-12, atol=1e-14)
        assert gradcheck(lambda t: F.avg_pool3d(t, k, s, pad, ceil_mode=ceil, exclusive=exclusive,
                                                divisor_override=div), [T(x[:1, :2], True)])
    assert gradcheck(lambda t: F.max_pool3d(t, k, s, pad, ceil_mode=ceil), [T(x[:1, :2], True)])
    y32 = F.avg_pool3d(T(x, dtype="float32"), k, s, pad, ceil_mode=ceil).numpy()
    np.testing.assert_allclose(y32, _ref_pool3d(x, k, s, pad, ceil, "avg"), rtol=0, atol=1e-6)


@pytest.mark.parametrize("k,ceil", [((2, 2, 2), False), ((1, 3, 2), True)])
def test_pool3d_disjoint_windows_float32_values_and_gradients(k, ceil):
    """stride = kernel without padding (the disjoint-window kernel): float32 forward against the
    loops, the max gradient at each mask position, the mean's spread over each window and
    zero on the rows no window covers."""
    shape = (2, 3, 4, 6, 8) if ceil else (2, 3, 5, 7, 9)
    x = RNG.standard_normal(shape).astype(np.float32)
    t = T(x, True)
    y, mask = F.max_pool3d(t, k, k, 0, return_mask=True, ceil_mode=ceil)
    np.testing.assert_array_equal(y.numpy(), _ref_pool3d(x.astype(np.float64), k, k, (0, 0, 0), ceil, "max"))
    g = RNG.standard_normal(y.shape).astype(np.float32)
    y.backward(T(g))
    ref = np.zeros((6, x[0, 0].size), np.float32)
    np.put_along_axis(ref, mask.numpy().reshape(6, -1).astype(np.int64), g.reshape(6, -1), 1)
    np.testing.assert_array_equal(t.grad.numpy(), ref.reshape(shape))
    t = T(x, True)
    ya = F.avg_pool3d(t, k, k, 0, ceil_mode=ceil)
    np.testing.assert_allclose(ya.numpy(), _ref_pool3d(x.astype(np.float64), k, k, (0, 0, 0), ceil, "avg"),
                               rtol=1e-6, atol=1e-6)
    ya.backward(T(g))
    o = g.shape[2:]
    spread = np.zeros(shape, np.float32)
    spread[:, :, :o[0] * k[0], :o[1] * k[1], :o[2] * k[2]] = (
        g.repeat(k[0], 2).repeat(k[1], 3).repeat(k[2], 4) / np.prod(k))
    np.testing.assert_allclose(t.grad.numpy(), spread, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float64", "float32"])   # the general pass, the disjoint-window kernel
def test_max_pool3d_ties_nan_and_mask(dtype):
    x = np.zeros((1, 1, 2, 2, 4), dtype)
    x[0, 0, 1, 1, 3] = np.nan
    x[0, 0, 1, 0, 2] = 7.0                                     # a NaN wins over a larger number before it
    t = T(x, True)
    y, mask = F.max_pool3d(t, 2, 2, return_mask=True)
    assert mask.numpy().tolist() == [[[[[0, 15]]]]]          # the first of the tied zeros; the NaN
    assert np.isnan(y.numpy()[0, 0, 0, 0, 1]) and y.numpy()[0, 0, 0, 0, 0] == 0
    y.sum().backward()
    g = np.zeros_like(x)
    g[0, 0, 0, 0, 0] = g[0, 0, 1, 1, 3] = 1
    np.testing.assert_array_equal(t.grad.numpy(), g)


def _ref_adaptive(x, sizes, kind):
    sp = x.shape[2:]
    y = np.zeros(x.shape[:2] + tuple(sizes))
    for idx in np.ndindex(*sizes):
        sl = tuple(slice(i * n // o, -(-((i + 1) * n) // o)) for i, n, o in zip(idx, sp, sizes))
        win = x[(slice(None), slice(None)) + sl].reshape(x.shape[0], x.shape[1], -1)
        y[(slice(None), slice(None)) + idx] = win.max(-1) if kind == "max" else win.mean(-1)
    return y


@pytest.mark.parametrize("shape,sizes", [((2, 3, 10), (4,)), ((2, 3, 7, 9), (3, 4)), ((1, 2, 5, 6, 7), (2, 4, 3)),
                                         ((2, 3, 64), (2,)), ((2, 3, 8, 6), (4, 3)), ((1, 2, 4, 6, 4), (2, 3, 2))])
def test_adaptive_pools_against_loops_and_gradients(shape, sizes):
    """Bins of uneven and (the last three) of even sizes; long 1-D bins take numpy's argmax."""
    x = RNG.standard_normal(shape)
    nd = len(sizes)
    fmax = getattr(F, f"adaptive_max_pool{nd}d")
    favg = getattr(F, f"adaptive_avg_pool{nd}d")
    out = sizes[0] if nd == 1 else sizes
    np.testing.assert_array_equal(fmax(T(x), out).numpy(), _ref_adaptive(x, sizes, "max"))
    np.testing.assert_allclose(favg(T(x), out).numpy(), _ref_adaptive(x, sizes, "avg"), rtol=1e-12, atol=1e-14)
    y, mask = fmax(T(x), out, return_mask=True)
    flat = x.reshape(x.shape[0], x.shape[1], -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, mask.numpy().reshape(*x.shape[:2], -1), 2),
                                  y.numpy().reshape(*x.shape[:2], -1))
    # ties: every bin constant, so the gradient goes to each bin's first element
    first = np.zeros(x.shape[2:])
    for idx in np.ndindex(*sizes):
        first[tuple(i * n // o for i, n, o in zip(idx, x.shape[2:], sizes))] = 1
    for dt in (np.float64, np.float32):
        xt = T(np.ones(x.shape, dt), True)
        fmax(xt, out).sum().backward()
        np.testing.assert_array_equal(xt.grad.numpy(), np.broadcast_to(first, x.shape))
    # float32 (the row kernel): the loops' maxima, the mask, and the float64 path's gradient
    x32 = x.astype(np.float32)
    t32 = T(x32, True)
    y32, m32 = fmax(t32, out, return_mask=True)
    np.testing.assert_array_equal(y32.numpy(), _ref_adaptive(x32.astype(np.float64), sizes, "max"))
    np.testing.assert_array_equal(np.take_along_axis(x32.reshape(*x.shape[:2], -1),
                                                     m32.numpy().reshape(*x.shape[:2], -1), 2),
                                  y32.numpy().reshape(*x.shape[:2], -1))
    g = RNG.standard_normal(y32.shape)
    y32.backward(T(g.astype(np.float32)))
    t64 = T(x32.astype(np.float64), True)
    fmax(t64, out).backward(T(g))
    np.testing.assert_allclose(t32.grad.numpy(), t64.grad.numpy(), rtol=1e-6, atol=1e-6)
    small = T(x[:1, :2], True)
    assert gradcheck(lambda t: favg(t, out), [small])
    assert gradcheck(lambda t: fmax(t, out), [small])
    assert gradgradcheck(lambda t: ddg.tanh(fmax(t, out)) + ddg.tanh(favg(t, out)), [small])


def test_kernels_and_array_paths_agree_on_device(place):
    """On the GPU (cupy; simcupy in CI) the array paths run: the same results as the compiled
    loops on the CPU, forward and backward."""
    w2, w3, w3t = (RNG.standard_normal(s).astype("float32") for s in ((8, 1, 3, 3), (6, 4, 3, 3, 3), (4, 3, 4, 4, 4)))
    cases = [
        (lambda x, p: F.conv2d(x, ddg.to_tensor(w2, place=p), None, 2, 1, 1, 4), (2, 4, 9, 9)),
        (lambda x, p: F.conv3d(x, ddg.to_tensor(w3, place=p), None, 1, 1), (2, 4, 5, 5, 5)),
        (lambda x, p: F.conv3d_transpose(x, ddg.to_tensor(w3t, place=p), None, 2, 1), (2, 4, 3, 4, 3)),
        (lambda x, p: F.max_pool3d(x, 2, 2, ceil_mode=True), (2, 3, 5, 5, 5)),
        (lambda x, p: F.avg_pool3d(x, 3, 2, 1, exclusive=False), (2, 3, 5, 5, 5)),
        (lambda x, p: F.adaptive_max_pool2d(x, (3, 4)), (2, 3, 7, 9)),
        (lambda x, p: F.adaptive_avg_pool3d(x, (2, 3, 2)), (2, 3, 5, 7, 5)),
    ]
    assert_cpu_and_device_agree(cases, place, RNG)



@pytest.mark.parametrize("wshape,xshape,tol", [((16, 8, 3, 3), (4, 16, 9, 9), 1.5e-5),
                                               ((8, 10, 3, 3), (2, 20, 5, 5), 2e-6)])
def test_grouped_paths_agree_on_device(wshape, xshape, tol, place):
    """Grouped Winograd at batch 4 (8 channels per group; within its float32 bound)
    and the grouped im2col backward (columns scattered back) against the device's array paths
    (cupy; simcupy in CI)."""
    rng = np.random.default_rng(5)
    w, x = rng.standard_normal(wshape).astype("float32"), rng.standard_normal(xshape).astype("float32")
    res = {}
    for where in ("cpu", place):
        t = ddg.to_tensor(x, place=where, stop_gradient=False)
        wt = ddg.to_tensor(w, place=where, stop_gradient=False)
        y = F.conv2d(t, wt, None, 1, 1, 1, 2)
        (y * y).sum().backward()
        res[where] = (y.numpy(), t.grad.numpy(), wt.grad.numpy())
    for a, b in zip(res[place], res["cpu"]):
        np.testing.assert_allclose(a, b, rtol=0, atol=tol * np.abs(b).max())


@pytest.mark.parametrize("bias,xs,d", [(False, (2, 3, 6, 8), 2), (True, (2, 3, 6, 8), 2), (True, (1, 2, 16, 18), 2),
                                       (False, (2, 2, 7, 8), 3), (True, (1, 2, 22, 24), 3), (False, (1, 2, 11, 14), 2),
                                       (True, (1, 2, 12, 10), 3)])
def test_dilated_same_conv_as_winograd_on_residue_classes(bias, xs, d, monkeypatch):
    # 3x3, dilation d, padding d: run as Winograd over the d*d row/column residue classes
    # (forced on small shapes, sizes that are and are not multiples of d: F(2x2, 3x3) on
    # classes below 4x4, F(4x4, 3x3) on larger ones, its tiles partly past the edge of
    # 6x7 and 4x4 classes); forward against the float64 loop,
    # backward against central differences, second order through backward_graph, float32
    # against float64
    import ddg.autograd.ops.conv as CV
    monkeypatch.setattr(CV, "_use_phases", lambda x, w, s, dl, g, p: tuple(dl) == (d, d) and tuple(p) == (d,) * 4)
    _check_dilated_same(xs, bias, d, lambda op: op.phases is not None and op.phases.wino[-1] == (
        4 if min(-(-xs[2] // d), -(-xs[3] // d)) >= 4 else 2))


@pytest.mark.parametrize("bias,xs,d", [(False, (2, 3, 10, 10), 2), (True, (1, 2, 11, 14), 2), (False, (2, 2, 13, 8), 3)])
def test_dilated_same_conv_as_one_image_of_residue_classes(bias, xs, d, monkeypatch):
    # 3x3, dilation d, padding d: the residue classes laid out as one image with zero rows and
    # columns between them, an undilated convolution padded by 1 (forced, its Winograd
    # forced too; sizes that are and are not multiples of d); forward against the float64
    # loop, float32 within Winograd's bound, backward against central differences, second
    # order through backward_graph
    import ddg.autograd.ops.conv as CV
    monkeypatch.setattr(CV, "_use_phases", lambda *a: False)
    monkeypatch.setattr(CV, "_use_tiled", lambda x, w, s, dl, g, p: tuple(dl) == (d, d) and tuple(p) == (d,) * 4)
    monkeypatch.setattr(CV, "_use_winograd", lambda x, w, s, dl, g, p: tuple(dl) == (1, 1) and w.shape[2:] == (3, 3))
    _check_dilated_same(xs, bias, d, lambda op: op.tiled is not None and op.tiled.wino is not None)


def _check_dilated_same(xs, bias, d, on_path):
    """A 3x3 convolution with dilation and padding d (4 output channels) on the path
    ``on_path(op)`` says it took: forward against the float64 loop, float32 within
    Winograd's bound, backward by central differences, second order through
    backward_graph (without bias)."""
    import ddg.autograd.ops.conv as CV
    x, w, b = RNG.standard_normal(xs), RNG.standard_normal((4, xs[1], 3, 3)), RNG.standard_normal(4)
    ts = [T(x, True), T(w, True)] + ([T(b, True)] if bias else [])
    op = CV.Conv2d((1, 1), (d,) * 4, (d, d), 1)
    y = op(*ts)
    assert on_path(op)
    ref = ref_conv2d(x, w, b if bias else None, (1, 1), (d,) * 4, (d, d), 1)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)
    y32 = CV.Conv2d((1, 1), (d,) * 4, (d, d), 1)(*[T(t.numpy(), dtype="float32") for t in ts])
    np.testing.assert_allclose(y32.numpy(), ref, rtol=0, atol=2e-5 * np.abs(ref).max())
    assert gradcheck(lambda *a: CV.Conv2d((1, 1), (d,) * 4, (d, d), 1)(*a), ts)
    if not bias:
        assert gradgradcheck(lambda x, w: ddg.tanh(F.conv2d(x, w, None, 1, d, d)), ts)


def test_dilated_same_conv_one_image_gate():
    # the one-image layout where the classes' own gate says no: 5x5 classes from batch 4 and
    # 2**21 products, not where its tiles cover more than twice the image
    import ddg.autograd.ops.conv as CV

    def taken(xs, o, d=2):
        args = (np.zeros(xs, np.float32), np.zeros((o, xs[1], 3, 3), np.float32), (1, 1), (d, d), 1, (d,) * 4)
        return CV._use_tiled(*args) and not CV._use_phases(*args)
    assert taken((16, 48, 10, 10), 48) and taken((32, 96, 10, 10), 96) and taken((16, 32, 15, 15), 32, 3)
    assert not taken((2, 64, 12, 12), 64) and not taken((8, 32, 9, 9), 32) and not taken((4, 96, 13, 13), 96, 3)
    assert not CV._use_tiled(np.zeros((16, 48, 10, 10), np.float32), np.zeros((48, 48, 3, 3), np.float32), (1, 1),
                             (2, 2), 1, (1, 1, 1, 1))


def test_dilated_same_conv_gate():
    # Winograd on the residue classes from 16 channels, 8x8 classes (4x4 in a large enough
    # class batch) and 2**19 products
    import ddg.autograd.ops.conv as CV

    def taken(xs, o, d=2):
        return CV._use_phases(np.zeros(xs, np.float32), np.zeros((o, xs[1], 3, 3), np.float32), (1, 1), (d, d), 1,
                              (d,) * 4)
    assert taken((8, 16, 16, 16), 16) and taken((2, 16, 32, 32), 16) and taken((4, 64, 16, 16), 64)
    assert taken((8, 16, 15, 18), 16) and taken((8, 32, 32, 32), 32, 3) and taken((4, 16, 22, 24), 16, 3)
    assert not taken((2, 16, 16, 16), 16) and not taken((8, 16, 8, 8), 16) and not taken((64, 8, 16, 16), 16)
    # classes of 4-7 a side: from a class batch of 16, not at 5 (tiles 2.6x the class)
    assert taken((8, 32, 21, 32), 32, 3) and taken((64, 96, 12, 12), 96) and taken((8, 128, 8, 8), 128) and taken((8, 64, 12, 12), 64, 3)
    assert taken((16, 32, 14, 14), 32)
    assert not taken((32, 96, 10, 10), 96) and not taken((2, 64, 12, 12), 64) and not taken((64, 16, 6, 6), 16)


@pytest.mark.parametrize("shape,sizes", [((2, 3, 10), (4,)), ((2, 3, 7, 9), (3, 4)), ((1, 2, 5, 6, 7), (2, 4, 3))])
def test_adaptive_avg_pool_separable_products_match_the_whole_matrix(shape, sizes, monkeypatch):
    """Small pools are one product with the whole pool's matrix, larger ones a product per
    axis: the per-axis path (forced here) gives the loops' values and the same gradients."""
    from ddg.autograd.ops import pooling as P
    x = RNG.standard_normal(shape)
    favg = getattr(F, f"adaptive_avg_pool{len(sizes)}d")
    out = sizes[0] if len(sizes) == 1 else sizes
    g = RNG.standard_normal(x.shape[:2] + tuple(sizes))
    res = []
    for full in (P.AdaptiveAvgPool._FULL, 0):
        monkeypatch.setattr(P.AdaptiveAvgPool, "_FULL", full)
        t = T(x, True)
        y = favg(t, out)
        np.testing.assert_allclose(y.numpy(), _ref_adaptive(x, sizes, "avg"), rtol=1e-12, atol=1e-14)
        y.backward(T(g))
        res.append(t.grad.numpy())
    np.testing.assert_allclose(res[1], res[0], rtol=1e-12, atol=1e-14)
    assert gradgradcheck(lambda v: ddg.tanh(favg(v, out)), [T(x[:1, :2], True)])


@pytest.mark.parametrize("h,w,pads,n,groups,fold", [
    (6, 5, (1, 1, 1, 1), 2, 2, False), (5, 6, (2, 0, 1, 2), 2, 2, False), (6, 5, (1, 1, 1, 1), 2, 2, True),
    (5, 6, (2, 0, 1, 2), 1, 3, True), (9, 7, (1, 1, 0, 2), 3, 2, True)])
def test_grouped_winograd_matches_loops_and_central_differences(h, w, pads, n, groups, fold, monkeypatch):
    # the per-group Winograd path forced on small float64 shapes (odd sizes, asymmetric pads),
    # with the groups as batch entries of the transforms (fold) or not
    import ddg.autograd.ops.conv as CV
    monkeypatch.setattr(CV, "_use_grouped_winograd", lambda *a: True)
    monkeypatch.setattr(CV, "GWINO_FOLD_BELOW", 100 if fold else 0)
    x, wt = RNG.standard_normal((n, 2 * groups, h, w)), RNG.standard_normal((3 * groups, 2, 3, 3))
    b = RNG.standard_normal(3 * groups)
    ts = [T(x, True), T(wt, True), T(b, True)]
    op = CV.Conv2d((1, 1), pads, (1, 1), groups)
    y = op(*ts)
    assert op.gwino is not None and op.gwino[-1] is fold
    ref = ref_conv2d(x, wt, b, (1, 1), pads, (1, 1), groups)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda *a: CV.Conv2d((1, 1), pads, (1, 1), groups)(*a), ts, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda x, w: ddg.tanh(CV.Conv2d((1, 1), pads, (1, 1), groups)(x, w)), ts[:2])
    y32 = CV.Conv2d((1, 1), pads, (1, 1), groups)(*[T(t.numpy(), dtype="float32") for t in ts])
    np.testing.assert_allclose(y32.numpy(), ref, rtol=0, atol=1.5e-5 * np.abs(ref).max())
    # a batch-innermost input and a non-dense output gradient: the same gradients
    gy = RNG.standard_normal(y.shape)
    grads = []
    for xa, g in ((x, gy), (np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2),
                            np.repeat(gy, 2, axis=3)[..., ::2])):
        xt, wt2 = T(xa, True), T(wt, True)
        CV.Conv2d((1, 1), pads, (1, 1), groups)(xt, wt2).backward(ddg.to_tensor(g))
        grads.append((xt.grad.numpy(), wt2.grad.numpy()))
    for a, r in zip(grads[1], grads[0]):
        np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-12)


def test_grouped_winograd_chosen_by_shape_float32_error_bound():
    import ddg.autograd.ops.conv as CV
    x = RNG.standard_normal((2, 32, 12, 10))
    w = RNG.standard_normal((32, 16, 3, 3)) / np.sqrt(9 * 16)
    assert CV._use_grouped_winograd(x.astype(np.float32), w.astype(np.float32), (1, 1), (1, 1), 2, (1, 1, 1, 1))
    x4 = np.zeros((4, 16, 12, 10), np.float32)
    assert CV._use_grouped_winograd(x4, w[:16, :8].astype(np.float32), (1, 1), (1, 1), 2,
                                    (1, 1, 1, 1))   # 8 channels per group, batch 4
    assert not CV._use_grouped_winograd(x[:, :16].astype(np.float32), w[:16, :8].astype(np.float32), (1, 1), (1, 1),
                                        2, (1, 1, 1, 1))   # 8 per group at batch 2: plane loop
    assert not CV._use_grouped_winograd(x[:, :8], w[:8, :4], (1, 1), (1, 1), 2, (1, 1, 1, 1))   # 4: plane loop
    got = {}
    for dt in ("float32", "float64"):
        X, W = T(x, True, dt), T(w, True, dt)
        op = CV.Conv2d((1, 1), (1, 1, 1, 1), (1, 1), 2)
        y = op(X, W)
        assert op.gwino is not None
        (y * T(np.cos(np.arange(y.size)).reshape(y.shape), dtype=dt)).sum().backward()
        got[dt] = [y.numpy(), X.grad.numpy(), W.grad.numpy()]
    ref = ref_conv2d(x, w, None, (1, 1), (1, 1, 1, 1), (1, 1), 2)
    np.testing.assert_allclose(got["float64"][0], ref, rtol=1e-12, atol=1e-12)
    for a, r in zip(got["float32"], got["float64"]):
        assert np.abs(a - r).max() <= 1.5e-5 * np.abs(r).max()   # F(4x4, 3x3)'s float32 bound


@pytest.mark.parametrize("k,pads,dil", [((3, 2), (1, 0, 0, 1), (1, 2)), ((5, 3), (2, 2, 1, 1), (1, 1))])
def test_grouped_stride1_im2col_backward(k, pads, dil):
    # more than 8 channels per group and no Winograd shape: im2col forward, per group the
    # weight gradient and the input gradient's columns (scattered back by col2im)
    import ddg.autograd.ops.conv as CV
    x, w, b = RNG.standard_normal((2, 20, 6, 7)), RNG.standard_normal((4, 10) + k), RNG.standard_normal(4)
    ts = [T(x[:1], True), T(w, True), T(b, True)]
    op = CV.Conv2d((1, 1), pads, dil, 2)
    y = op(T(x), T(w), T(b))
    assert op.gwino is None and op.plane is None and op._grouped_stride1()
    np.testing.assert_allclose(y.numpy(), ref_conv2d(x, w, b, (1, 1), pads, dil, 2), rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda *a: CV.Conv2d((1, 1), pads, dil, 2)(*a), ts, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("shape,pads", [((3, 2, 5), (2, 1)), ((2, 3, 4, 5), (0, 1, 2, 0)), ((2, 2, 3, 4, 5), None),
                                        ((1, 2, 3, 4), (1, 1, 1, 1))])
def test_batch_innermost_copy(shape, pads):
    # the compiled NC* -> [C, *S, N] copy (with zero padding) against numpy's
    from ddg.tensor.conv_phase import _cl
    nd = len(shape) - 2
    for dt in ("float32", "float64"):
        a = RNG.standard_normal(shape).astype(dt)
        ref = np.pad(a, ((0, 0), (0, 0)) + tuple((pads[2 * i], pads[2 * i + 1]) if pads else (0, 0)
                                                  for i in range(nd)))
        got = _cl(a, pads)
        assert got.dtype == a.dtype and got.flags.c_contiguous
        np.testing.assert_array_equal(got, ref.transpose(tuple(range(1, nd + 2)) + (0,)))


def _phase_w_index(c, hf, wf, jd, n, out, s, p0):
    # flat index into the window phases [P, C, Hf, Wf, Jd, N] of each output value [C, OH,
    # OW, OD, N]: position z takes phase (z + p0) % s at j = (z + p0) // s, less the window
    # origin along height and width
    od, oh, ow = out
    ax = []
    for i, size in ((0, od), (1, oh), (2, ow)):
        z = np.arange(size)
        r, j = (z + p0[i]) % s[i], (z + p0[i]) // s[i]
        if i:
            j = j - ((r - p0[i]) % s[i] + p0[i]) // s[i]
        ax.append((r, j))
    (rd, jd_), (rh, jh), (rw, jw) = ax
    ci, yy, xx, zz, k = np.ix_(np.arange(c), np.arange(oh), np.arange(ow), np.arange(od), np.arange(n))
    p = (rd[zz] * s[1] + rh[yy]) * s[2] + rw[xx]
    return ((((p * c + ci) * hf + jh[yy]) * wf + jw[xx]) * jd + jd_[zz]) * n + k


# (C, th, tw, Jd, N, out (OD, OH, OW), stride, p0): ragged outputs, crops 0 and 1, strides 1-3
WINO_PHASE_GEOMS = [
    (3, 2, 2, 5, 2, (8, 13, 14), (2, 2, 2), (1, 1, 0)),
    (2, 2, 3, 8, 3, (7, 15, 22), (1, 2, 3), (0, 1, 2)),
    (2, 2, 2, 6, 1, (10, 15, 13), (2, 2, 2), (1, 0, 1)),
    # depth 1 (2-D), whole and partial last tiles of output columns, batch 1, 3 and 16
    (2, 2, 3, 1, 3, (1, 15, 22), (1, 2, 3), (0, 1, 2)),
    (3, 2, 2, 1, 16, (1, 14, 16), (1, 2, 2), (0, 1, 1)),
    (2, 2, 2, 1, 1, (1, 13, 13), (1, 2, 2), (0, 1, 0)),
]


def test_phase_wino_gate_weighs_tile_fill_and_product_width():
    # 4x4x4 stride 2 padding 1 transposed convolutions: Winograd where its multiplications
    # against the column products' (less for wider products) stay under the gate
    import ddg.tensor.conv_phase as CP

    def takes(n, c, sz):
        x, w = np.zeros((n, c, sz, sz, sz), np.float32), np.zeros((c, c, 4, 4, 4), np.float32)
        return CP._phase_wino_usable(x, w, (2, 2, 2), (1, 1, 1), (2 * sz,) * 3)
    assert takes(1, 32, 12) and takes(2, 16, 8) and takes(2, 16, 16) and takes(1, 32, 24)
    assert not takes(1, 32, 10)                    # 99 columns, 10-wide windows in three tiles
    assert not takes(4, 32, 9) and not takes(1, 64, 8)
    assert not takes(2, 8, 20)                     # 8 channels: the phases' columns
    assert not CP._phase_wino_usable(np.zeros((1, 32, 12, 12, 12), np.float64), np.zeros((32, 32, 4, 4, 4), np.float32),
                                     (2, 2, 2), (1, 1, 1), (24,) * 3)

    def takes2(n, c, sz):    # a 2-D one as depth 1: by the products' width (tiles * N) and the batch
        return CP._phase_wino_usable(np.zeros((n, c, 1, sz, sz), np.float32), np.zeros((c, c, 1, 4, 4), np.float32),
                                     (1, 2, 2), (0, 1, 1), (1, 2 * sz, 2 * sz))
    assert takes2(16, 32, 16) and takes2(4, 64, 32) and takes2(8, 32, 16)       # 256, 256, 128 columns
    assert not takes2(2, 64, 32) and not takes2(16, 64, 8) and not takes2(4, 64, 16)   # 128 (batch 2), 64, 64
    assert not takes2(8, 32, 14)                   # 128 columns, windows of 14 in four tiles


@pytest.mark.parametrize("c,th,tw,jd,n,out,s,p0", WINO_PHASE_GEOMS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_wino4_out_phase_fused_matches_two_passes(c, th, tw, jd, n, out, s, p0, dtype):
    # the fused output transform + phase interleave (and its adjoint) against wino4_out_into
    # followed by a numpy gather of the interleave (and wino4_out_adjoint of its scatter)
    import ddg.tensor.conv_kernels as K
    p = int(np.prod(s))
    m = RNG.standard_normal((6, 6, p * c, th, tw, jd * n)).astype(dtype)
    f = np.empty((p * c, 4 * th, 4 * tw, jd * n), dtype)
    K.wino4_out_into(m, f)
    idx = _phase_w_index(c, 4 * th, 4 * tw, jd, n, out, s, p0)
    y = K.wino4_out_phase(m, c, th, tw, jd, n, out, s, p0)
    assert y.shape == (c, out[1], out[2], out[0], n)
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(y, f.reshape(-1)[idx], rtol=tol, atol=tol * np.abs(f).max())
    gy = RNG.standard_normal((n, c) + tuple(out)).astype(dtype)
    g = np.zeros(f.size, dtype)
    g[idx] = gy.transpose(1, 3, 4, 2, 0)          # each output position maps to one phase value
    ref = K.wino4_out_adjoint(g.reshape(f.shape))
    got = K.wino4_out_phase_adjoint(gy, c, th, tw, jd, s, p0, dtype)
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())
    # adjoint identity: <fused(m), gy> = <m, fused_adjoint(gy)>
    lhs = float((y.astype(np.float64) * gy.transpose(1, 3, 4, 2, 0)).sum())
    np.testing.assert_allclose(lhs, float((m.astype(np.float64) * got).sum()), rtol=1e-4 if dtype == np.float32 else 1e-11)


@pytest.mark.parametrize("c,o,k,hw,n", [(3, 4, (2, 2), (8, 8), 2), (2, 3, (4, 4), (9, 11), 3), (1, 2, (2, 3), (7, 9), 2),
                                        (5, 2, (3, 1), (6, 5), 1), (2, 2, (8, 8), (8, 8), 2)])
def test_tiling_windows_path_forward_and_gradients(c, o, k, hw, n):
    # kernel = stride without padding: the windows tile the image (conv_patch); values
    # against the reference (also with rows and columns past the last whole window), the
    # input, weight and bias gradients by central differences, second order
    import ddg.autograd.ops.conv as CV
    from ddg.tensor import conv_patch
    x, w, b = RNG.standard_normal((n, c) + hw), RNG.standard_normal((o, c) + k), RNG.standard_normal(o)
    op = CV.Conv2d(k, (0, 0, 0, 0), (1, 1), 1)
    y = op(T(x), T(w), T(b))
    assert op.poly is not None and op.poly[0] is conv_patch.backward
    np.testing.assert_allclose(y.numpy(), ref_conv2d(x, w, b, k, (0, 0, 0, 0), (1, 1), 1), rtol=1e-12, atol=1e-12)
    ts = [T(x[:1], True), T(w, True), T(b, True)]
    assert gradcheck(lambda *a: CV.Conv2d(k, (0, 0, 0, 0), (1, 1), 1)(*a), ts, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda x, w: ddg.tanh(CV.Conv2d(k, (0, 0, 0, 0), (1, 1), 1)(x, w)), ts[:2])


@pytest.mark.parametrize("x_grad", [True, False])
def test_tiling_windows_path_float32_and_gradient_layouts(x_grad):
    # float32 against the float64 reference; the output gradient in NCHW (copied) and in the
    # output's own layout (a view), and a transposed (non-contiguous) input
    x = RNG.standard_normal((3, 16, 4, 3)).transpose(0, 3, 1, 2)     # [3, 3, 16, 4], not contiguous
    w = RNG.standard_normal((8, 3, 4, 2)) / 5
    for own_layout in (False, True):
        X, W = T(x, x_grad, "float32"), T(w, True, "float32")
        y = F.conv2d(X, W, stride=(4, 2))
        g = np.cos(np.arange(y.size)).reshape(y.shape)
        gt = T(g, dtype="float32")
        if own_layout:
            gt = y * 0 + gt          # an elementwise op keeps y's layout
        y.backward(gt)
        X64, W64 = T(x, x_grad), T(w, True)
        y64 = F.conv2d(X64, W64, stride=(4, 2))
        y64.backward(T(g))
        pairs = [(y.numpy(), y64.numpy()), (W.grad.numpy(), W64.grad.numpy())]
        if x_grad:
            pairs.append((X.grad.numpy(), X64.grad.numpy()))
        else:
            assert X.grad is None
        for a, r in pairs:
            assert np.abs(a - r).max() <= 2e-6 * np.abs(r).max()


@pytest.mark.parametrize("k,s,pad,ceil", [((2, 2), (2, 2), (0, 0, 0, 0), False), ((3, 3), (2, 2), (1, 1, 1, 1), False),
                                          ((3, 2), (1, 2), (1, 1, 0, 1), True), ((4, 4), (3, 3), (2, 1, 2, 2), True),
                                          ((1, 3), (2, 1), (0, 0, 1, 1), False), ((5, 5), (4, 4), (2, 2, 2, 2), True)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_pool2d_compiled_windows_match_the_strided_passes(k, s, pad, ceil, dtype, monkeypatch):
    # the compiled per-window loops (pool_kernels) against the strided-slice passes on the
    # same inputs, ties included (values on a coarse grid): max values, masks and gradients,
    # means (exclusive, inclusive, divisor_override) and their gradients
    from ddg.autograd.ops import pooling as P
    x = np.round(RNG.standard_normal((2, 3, 9, 11)) * 2).astype(dtype)
    g = RNG.standard_normal((2, 3) + tuple(P._pool_geometry(x.shape, k, s, pad, ceil)[:2])).astype(dtype)
    results = []
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(P, "_compiled_2d", lambda *a: None)
        out = []
        op = P.MaxPool2d(k, s, pad, ceil)
        t = T(x, True, dtype)
        y = op(t)
        assert (op.pos is not None) == compiled
        out += [y.numpy(), op.mask()]
        y.backward(T(g, dtype=dtype))
        out.append(t.grad.numpy())
        for excl, div in ((True, None), (False, None), (True, 3)):
            op = P.AvgPool2d(k, s, pad, ceil, excl, div)
            t = T(x, True, dtype)
            y = op(t)
            assert (op.compiled is not None) == (compiled and min(s) > 1)
            y.backward(T(g, dtype=dtype))
            out += [y.numpy(), t.grad.numpy()]
        results.append(out)
    tol = 1e-12 if dtype == "float64" else 1e-5
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("k,s,pad,ceil", [((2, 2), (2, 2), (0, 0, 0, 0), False), ((3, 3), (2, 2), (1, 1, 1, 1), False),
                                          ((3, 2), (1, 2), (1, 1, 0, 1), True), ((4, 4), (3, 3), (2, 1, 2, 2), True)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_max_pool2d_batch_innermost_input_matches_nchw(k, s, pad, ceil, dtype):
    # an input stored [C, H, W, N] (the im2col convolutions' activations) runs the compiled
    # loops in place (pool_kernels.max2d_bi): the same maxima, masks, gradients (for an
    # output gradient in either layout) and adjoint as the NCHW kernel, ties and NaN included
    from ddg.autograd.ops import pooling as P
    x = np.round(RNG.standard_normal((5, 3, 9, 11)) * 2).astype(dtype)
    x[1, 2, 4, 5] = x[3, 0, 0, 0] = np.nan
    oh, ow = P._pool_geometry(x.shape, k, s, pad, ceil)[:2]
    g = RNG.standard_normal((5, 3, oh, ow)).astype(dtype)
    u = RNG.standard_normal(x.shape).astype(dtype)
    results = []
    for inner in (False, True, True):
        op = P.MaxPool2d(k, s, pad, ceil)
        t = T(x, True, dtype)
        if inner:         # the same values stored batch-innermost
            t._data = np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
        y = op(t)
        assert op.batch_inner == inner and op.pos is not None
        if inner:
            assert y._data.transpose(1, 2, 3, 0).flags.c_contiguous
        out = [y.numpy(), op.mask(), op.apply_linear(u)]
        gt = T(g, dtype=dtype)
        if len(results) == 2:   # an output gradient stored batch-innermost too
            gt._data = np.ascontiguousarray(g.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
        y.backward(gt)
        results.append(out + [t.grad.numpy()])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_max_pool2d_compiled_nan_ties_mask_and_second_order():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 1, 1] = np.nan
    x[0, 0, 0, 1] = 3.0                               # a NaN wins over a larger number before it
    x[0, 0, 2, 3] = x[0, 0, 3, 2] = 2.0               # tied maxima: the first in row-major order
    t = T(x, True)
    y, mask = F.max_pool2d(t, 2, 2, return_mask=True)
    assert mask.numpy().tolist() == [[[[5, 2], [8, 11]]]]
    assert np.isnan(y.numpy()[0, 0, 0, 0]) and y.numpy()[0, 0, 1, 1] == 2.0
    y.sum().backward()
    gx = np.zeros_like(x)
    gx[0, 0, 1, 1] = gx[0, 0, 0, 2] = gx[0, 0, 2, 0] = gx[0, 0, 2, 3] = 1
    np.testing.assert_array_equal(t.grad.numpy(), gx)
    xs = T(RNG.standard_normal((1, 2, 5, 6)), True)
    assert gradgradcheck(lambda v: ddg.tanh(F.max_pool2d(v, 3, 2, 1)), [xs])
    assert gradgradcheck(lambda v: ddg.tanh(F.avg_pool2d(v, 3, 2, 1, exclusive=False)), [xs])


def test_weight_gradient_in_the_weights_layout(monkeypatch):
    # from WGRAD_DIRECT_MIN weight elements the im2col weight gradient is g @ cols^T,
    # C-contiguous; below it the transposed product: the same values either way
    import ddg.autograd.ops.conv as CV
    g, cols = RNG.standard_normal((6, 40)), RNG.standard_normal((12, 40))
    for lim, contiguous in ((0, True), (10**9, False)):
        monkeypatch.setattr(CV, "WGRAD_DIRECT_MIN", lim)
        gw = CV._wgrad(g, cols, 1)
        assert gw.flags.c_contiguous is contiguous
        np.testing.assert_allclose(gw, g @ cols.T, rtol=1e-12, atol=1e-12)
    x, w = RNG.standard_normal((2, 3, 5, 6)), RNG.standard_normal((4, 3, 3, 2))
    grads = []
    for lim in (0, 10**9):
        monkeypatch.setattr(CV, "WGRAD_DIRECT_MIN", lim)
        wt = T(w, True)
        F.conv2d(T(x), wt, None, (2, 1), 1).backward(T(np.cos(np.arange(2 * 4 * 3 * 7)).reshape(2, 4, 3, 7)))
        grads.append(wt.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda w: F.conv2d(T(x), w, None, (2, 1), 1), [T(w, True)])
