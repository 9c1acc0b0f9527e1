"""Convolution and pooling: forward against plain-loop numpy references (and PyTorch when
importable), backward against float64 central differences."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.autograd import gradcheck

RNG = np.random.default_rng(0)


def T(a, grad=False):
    return ddg.to_tensor(np.asarray(a), stop_gradient=not grad)


def rand(*shape):
    return RNG.standard_normal(shape)


# -- plain references ---------------------------------------------------------------------------
def ref_conv2d(x, w, b=None, stride=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    pt, pb, pl, pr = pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pl + pr - dil[1] * (kw - 1) - 1) // stride[1] + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow))
    for g in range(groups):
        wg = w[g * og:(g + 1) * og]
        for i in range(oh):
            for j in range(ow):
                y0, x0 = i * stride[0], j * stride[1]
                patch = xp[:, g * cg:(g + 1) * cg, y0:y0 + dil[0] * (kh - 1) + 1:dil[0],
                           x0:x0 + dil[1] * (kw - 1) + 1:dil[1]]
                out[:, g * og:(g + 1) * og, i, j] = np.einsum("nckl,ockl->no", patch, wg)
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def ref_conv2d_transpose(x, w, b=None, stride=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), groups=1, out_pad=(0, 0)):
    n, cin, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = cin // groups
    fh = (h - 1) * stride[0] + dil[0] * (kh - 1) + 1
    fw = (wd - 1) * stride[1] + dil[1] * (kw - 1) + 1
    full = np.zeros((n, og * groups, fh + out_pad[0], fw + out_pad[1]))
    for g in range(groups):
        for y in range(h):
            for xx in range(wd):
                for i in range(kh):
                    for j in range(kw):
                        contrib = np.einsum("nc,co->no", x[:, g * cg:(g + 1) * cg, y, xx],
                                            w[g * cg:(g + 1) * cg, :, i, j])
                        full[:, g * og:(g + 1) * og, y * stride[0] + i * dil[0], xx * stride[1] + j * dil[1]] += contrib
    pt, pb, pl, pr = pads
    out = full[:, :, pt:fh + out_pad[0] - pb, pl:fw + out_pad[1] - pr]
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1)
    return out


def _windows(n_in, k, s, p, ceil_mode):
    room = n_in + 2 * p - k
    o = (-(-room // s) if ceil_mode else room // s) + 1
    if ceil_mode and (o - 1) * s >= n_in + p:
        o -= 1
    return [(i * s - p, i * s - p + k) for i in range(o)]


def ref_pool2d(x, k, s, p, ceil_mode=False, kind="max", exclusive=True):
    n, c, h, w = x.shape
    rows, cols = _windows(h, k[0], s[0], p[0], ceil_mode), _windows(w, k[1], s[1], p[1], ceil_mode)
    out = np.zeros((n, c, len(rows), len(cols)))
    for i, (a, b) in enumerate(rows):
        for j, (cc, d) in enumerate(cols):
            patch = x[:, :, max(a, 0):min(b, h), max(cc, 0):min(d, w)]
            if kind == "max":
                out[:, :, i, j] = patch.max(axis=(2, 3))
            else:
                div = patch.shape[2] * patch.shape[3] if exclusive else k[0] * k[1]
                out[:, :, i, j] = patch.sum(axis=(2, 3)) / div
    return out


# -- conv2d --------------------------------------------------------------------------------------
CONV_CASES = [
    # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 3, 7, 6), (4, 3, 3, 3), 1, 0, 1, 1),
    ((2, 3, 7, 6), (4, 3, 3, 2), 2, 1, 1, 1),
    ((1, 4, 8, 7), (6, 2, 3, 3), (2, 1), (1, 2), 1, 2),
    ((2, 2, 9, 9), (3, 2, 3, 3), 1, 2, 2, 1),
    ((1, 6, 5, 5), (6, 1, 3, 3), 1, 1, 1, 6),  # depthwise
    ((2, 3, 6, 6), (2, 3, 2, 2), 2, [1, 0, 0, 1], 1, 1),  # asymmetric pads
]


def _pads4(padding):
    if isinstance(padding, int):
        return (padding,) * 4
    if len(padding) == 2:
        return (padding[0], padding[0], padding[1], padding[1])
    return tuple(padding)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


@pytest.mark.parametrize("xs,ws,stride,padding,dil,groups", CONV_CASES)
def test_conv2d_forward_matches_reference(xs, ws, stride, padding, dil, groups):
    x, w, b = rand(*xs), rand(*ws), rand(ws[0])
    y = F.conv2d(T(x), T(w), T(b), stride, padding, dil, groups)
    ref = ref_conv2d(x, w, b, _pair(stride), _pads4(padding), _pair(dil), groups)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("xs,ws,stride,padding,dil,groups", CONV_CASES[:5])
def test_conv2d_gradcheck(xs, ws, stride, padding, dil, groups):
    xs = (1,) + xs[1:]
    x, w, b = T(rand(*xs), True), T(rand(*ws) * 0.5, True), T(rand(ws[0]), True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride, padding, dil, groups), [x, w, b])


def test_conv2d_grad_without_input_grad_and_bias():
    x = T(rand(2, 3, 5, 5))
    w = T(rand(2, 3, 3, 3), True)
    assert gradcheck(lambda x, w: F.conv2d(x, w, padding=1), [x, w])


def test_conv2d_same_valid_and_nhwc():
    x, w = rand(2, 3, 7, 8), rand(4, 3, 3, 3)
    same = F.conv2d(T(x), T(w), padding="same")
    assert same.shape == [2, 4, 7, 8]
    np.testing.assert_allclose(same.numpy(), ref_conv2d(x, w, pads=(1, 1, 1, 1)), atol=1e-10)
    valid = F.conv2d(T(x), T(w), padding="VALID", stride=2)
    np.testing.assert_allclose(valid.numpy(), ref_conv2d(x, w, stride=(2, 2)), atol=1e-10)
    nhwc = F.conv2d(T(x.transpose(0, 2, 3, 1)), T(w), padding=1, data_format="NHWC")
    np.testing.assert_allclose(nhwc.numpy(), ref_conv2d(x, w, pads=(1, 1, 1, 1)).transpose(0, 2, 3, 1), atol=1e-10)
    pairs = F.conv2d(T(x), T(w), padding=[[0, 0], [0, 0], [1, 2], [0, 1]])
    np.testing.assert_allclose(pairs.numpy(), ref_conv2d(x, w, pads=(1, 2, 0, 1)), atol=1e-10)


def test_conv2d_errors():
    with pytest.raises(ValueError, match="conv2d"):
        F.conv2d(T(rand(1, 3, 5, 5)), T(rand(4, 2, 3, 3)))
    with pytest.raises(ValueError, match="groups"):
        F.conv2d(T(rand(1, 4, 5, 5)), T(rand(4, 2, 3, 3)), groups=3)
    with pytest.raises(ValueError, match="larger"):
        F.conv2d(T(rand(1, 3, 2, 2)), T(rand(4, 3, 3, 3)))
    with pytest.raises(ValueError, match="4-D"):
        F.conv2d(T(rand(3, 5, 5)), T(rand(4, 3, 3, 3)))


def test_conv_float32_stays_float32():
    x = T(rand(2, 3, 6, 6).astype(np.float32), True)
    w = T(rand(4, 3, 3, 3).astype(np.float32), True)
    y = F.conv2d(x, w, padding=1)
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32 and w.grad.dtype == np.float32


def test_conv1d_forward_and_grad():
    x, w, b = rand(2, 3, 9), rand(4, 3, 3), rand(4)
    y = F.conv1d(T(x), T(w), T(b), stride=2, padding=1, dilation=1)
    ref = ref_conv2d(x[:, :, None], w[:, :, None], b, (1, 2), (0, 0, 1, 1))[:, :, 0]
    np.testing.assert_allclose(y.numpy(), ref, atol=1e-10)
    nlc = F.conv1d(T(x.transpose(0, 2, 1)), T(w), T(b), stride=2, padding=1, data_format="NLC")
    np.testing.assert_allclose(nlc.numpy(), ref.transpose(0, 2, 1), atol=1e-10)
    assert gradcheck(lambda x, w: F.conv1d(x, w, padding=2, dilation=2, groups=1),
                     [T(rand(1, 3, 7), True), T(rand(2, 3, 3), True)])


TRANSPOSE_CASES = [
    # (x shape, w shape, stride, padding, output_padding, dilation, groups)
    ((2, 3, 4, 5), (3, 2, 3, 3), 1, 0, 0, 1, 1),
    ((1, 3, 4, 4), (3, 2, 3, 2), 2, 1, 1, 1, 1),
    ((1, 4, 3, 4), (4, 3, 3, 3), (2, 3), (1, 0), 0, 2, 2),
]


@pytest.mark.parametrize("xs,ws,stride,padding,opad,dil,groups", TRANSPOSE_CASES)
def test_conv2d_transpose(xs, ws, stride, padding, opad, dil, groups):
    x, w, b = rand(*xs), rand(*ws), rand(ws[1] * groups)
    y = F.conv2d_transpose(T(x), T(w), T(b), stride, padding, opad, dil, groups)  # Paddle's order
    ref = ref_conv2d_transpose(x, w, b, _pair(stride), _pads4(padding), _pair(dil), groups, _pair(opad))
    assert y.shape == list(ref.shape)
    np.testing.assert_allclose(y.numpy(), ref, atol=1e-10)
    assert gradcheck(lambda x, w, b: F.conv2d_transpose(x, w, b, stride, padding, opad, dil, groups),
                     [T(x[:1], True), T(w, True), T(b, True)])


def test_conv2d_transpose_is_adjoint_of_conv2d():
    x, w = rand(2, 3, 7, 7), rand(4, 3, 3, 3)
    y = rand(2, 4, 4, 4)
    fwd = F.conv2d(T(x), T(w), stride=2, padding=1).numpy()
    back = F.conv2d_transpose(T(y), T(w), stride=2, padding=1, output_size=[7, 7]).numpy()
    np.testing.assert_allclose((fwd * y).sum(), (x * back).sum(), rtol=1e-10)


def test_conv_layers_shapes_init_and_state_dict():
    ddg.seed(1)
    conv = nn.Conv2D(4, 8, 3, padding=1, groups=2)
    assert conv.weight.shape == [8, 2, 3, 3] and conv.bias.shape == [8]
    assert list(conv.state_dict()) == ["weight", "bias"]
    assert np.all(conv.bias.numpy() == 0)
    big = nn.Conv2D(64, 64, 3)
    std = big.weight.numpy().std()
    assert abs(std - np.sqrt(2.0 / (64 * 9))) < 0.1 * np.sqrt(2.0 / (64 * 9))
    y = conv(ddg.randn([2, 4, 6, 6]))
    assert y.shape == [2, 8, 6, 6]
    t = nn.Conv2DTranspose(4, 6, 3, stride=2, padding=1, output_padding=1)
    assert t.weight.shape == [4, 6, 3, 3]
    assert t(ddg.randn([1, 4, 5, 5])).shape == [1, 6, 10, 10]
    assert t(ddg.randn([1, 4, 5, 5]), output_size=[9, 9]).shape == [1, 6, 9, 9]
    c1 = nn.Conv1D(3, 5, 3, padding="same")
    assert c1(ddg.randn([2, 3, 10])).shape == [2, 5, 10]
    assert nn.Conv1DTranspose(3, 2, 4, stride=2)(ddg.randn([1, 3, 5])).shape == [1, 2, 12]
    nobias = nn.Conv2D(2, 2, 1, bias_attr=False)
    assert nobias.bias is None and list(nobias.state_dict()) == ["weight"]


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv_padding_modes(mode):
    conv = nn.Conv2D(2, 3, 3, padding=1, padding_mode=mode)
    x = rand(1, 2, 5, 6)
    npmode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode=npmode)
    ref = ref_conv2d(xp, conv.weight.numpy().astype(np.float64), conv.bias.numpy().astype(np.float64))
    np.testing.assert_allclose(conv(T(x.astype(np.float32))).numpy(), ref, rtol=1e-4, atol=1e-4)


# -- pooling -------------------------------------------------------------------------------------------
POOL_CASES = [
    # (x shape, kernel, stride, padding, ceil_mode)
    ((2, 3, 8, 8), 2, 2, 0, False),
    ((2, 2, 7, 9), 3, 2, 1, False),
    ((1, 2, 7, 7), 3, 2, 0, True),
    ((1, 2, 6, 7), (2, 3), (1, 2), (1, 1), True),
    ((1, 1, 5, 5), 2, 1, 0, False),  # overlapping windows
]


@pytest.mark.parametrize("xs,k,s,p,ceil", POOL_CASES)
def test_max_pool2d(xs, k, s, p, ceil):
    x = rand(*xs)
    y = F.max_pool2d(T(x), k, s, p, ceil_mode=ceil)
    np.testing.assert_array_equal(y.numpy(), ref_pool2d(x, _pair(k), _pair(s), _pair(p), ceil, "max"))
    assert gradcheck(lambda x: F.max_pool2d(x, k, s, p, ceil_mode=ceil), [T(x[:1], True)])


@pytest.mark.parametrize("exclusive", [True, False])
@pytest.mark.parametrize("xs,k,s,p,ceil", POOL_CASES)
def test_avg_pool2d(xs, k, s, p, ceil, exclusive):
    x = rand(*xs)
    y = F.avg_pool2d(T(x), k, s, p, ceil_mode=ceil, exclusive=exclusive)
    ref = ref_pool2d(x, _pair(k), _pair(s), _pair(p), ceil, "avg", exclusive)
    np.testing.assert_allclose(y.numpy(), ref, atol=1e-12)
    assert gradcheck(lambda x: F.avg_pool2d(x, k, s, p, ceil_mode=ceil, exclusive=exclusive), [T(x[:1], True)])


def test_max_pool_ties_go_to_first_and_mask():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 1, 1] = 5.0
    xt = T(x, True)
    y, mask = F.max_pool2d(xt, 2, 2, return_mask=True)
    np.testing.assert_array_equal(mask.numpy()[0, 0], [[5, 2], [8, 10]])
    y.sum().backward()
    g = xt.grad.numpy()[0, 0]
    assert g.sum() == 4 and g[1, 1] == 1 and g[0, 2] == 1 and g[2, 0] == 1 and g[2, 2] == 1


def test_pool_nhwc_and_1d():
    x = rand(2, 3, 6, 6)
    y = F.max_pool2d(T(x.transpose(0, 2, 3, 1)), 2, data_format="NHWC")
    np.testing.assert_array_equal(y.numpy(), ref_pool2d(x, (2, 2), (2, 2), (0, 0)).transpose(0, 2, 3, 1))
    x1 = rand(2, 3, 9)
    y1 = F.max_pool1d(T(x1), 3, 2, 1)
    np.testing.assert_array_equal(y1.numpy(), ref_pool2d(x1[:, :, None], (1, 3), (1, 2), (0, 1))[:, :, 0])
    a1 = F.avg_pool1d(T(x1), 2)
    np.testing.assert_allclose(a1.numpy(), (x1[:, :, 0:8:2] + x1[:, :, 1:8:2]) / 2)
    assert nn.MaxPool1D(2)(T(x1)).shape == [2, 3, 4]
    assert nn.AvgPool1D(3, 1, 1)(T(x1)).shape == [2, 3, 9]


def test_adaptive_pools():
    x = rand(2, 3, 7, 10)
    for osz in [(1, 1), (3, 4), (7, 5), 2]:
        o = _pair(osz)
        ref = np.zeros((2, 3) + o)
        refm = np.zeros((2, 3) + o)
        for i in range(o[0]):
            h0, h1 = (i * 7) // o[0], -(-((i + 1) * 7) // o[0])
            for j in range(o[1]):
                w0, w1 = (j * 10) // o[1], -(-((j + 1) * 10) // o[1])
                ref[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
                refm[:, :, i, j] = x[:, :, h0:h1, w0:w1].max(axis=(2, 3))
        np.testing.assert_allclose(F.adaptive_avg_pool2d(T(x), osz).numpy(), ref, atol=1e-12)
        np.testing.assert_allclose(nn.AdaptiveMaxPool2D(osz)(T(x)).numpy(), refm)
    assert gradcheck(lambda x: F.adaptive_avg_pool2d(x, (3, 4)), [T(x[:1, :1], True)])
    assert gradcheck(lambda x: F.adaptive_max_pool2d(x, (3, 4)), [T(x[:1, :1], True)])
    assert nn.AdaptiveAvgPool2D(1)(T(x)).shape == [2, 3, 1, 1]
    assert nn.AdaptiveAvgPool1D(4)(T(x[:, :, 0])).shape == [2, 3, 4]


def test_pool_layers_and_errors():
    x = ddg.randn([2, 3, 8, 8])
    assert nn.MaxPool2D(2, 2)(x).shape == [2, 3, 4, 4]
    assert nn.AvgPool2D(3, 2, 1, ceil_mode=True)(x).shape == [2, 3, 5, 5]
    with pytest.raises(ValueError, match="max_pool2d"):
        F.max_pool2d(ddg.randn([3, 8, 8]), 2)
    with pytest.raises(ValueError, match="larger"):
        F.max_pool2d(ddg.randn([1, 1, 2, 2]), 3)


# -- unfold ---------------------------------------------------------------------------------------------
def test_unfold():
    x = rand(2, 3, 6, 5)
    y = F.unfold(T(x), [3, 2], strides=[2, 1], paddings=1)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = []
    for i in range(0, 8 - 3 + 1, 2):
        for j in range(0, 7 - 2 + 1):
            cols.append(xp[:, :, i:i + 3, j:j + 2].reshape(2, -1))
    np.testing.assert_allclose(y.numpy(), np.stack(cols, axis=-1))
    assert gradcheck(lambda x: F.unfold(x, 2, 1, [1, 0, 0, 1], 2), [T(x[:1, :2], True)])
    assert nn.Unfold([2, 2])(T(x)).shape == [2, 12, 20]


def test_fold_strided_dilated_padded_against_numpy():
    """fold sums each column back into its window (overlapping windows add); its gradient is
    unfold, checked by central differences, and unfold(fold) holds for float32 too."""
    h, w, (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr) = 7, 6, (3, 2), (2, 1), (1, 2), (1, 0, 2, 1)
    oh, ow = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1, (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    x = rand(2, 3 * kh * kw, oh * ow)
    y = F.fold(T(x), [h, w], [kh, kw], [sh, sw], [pt, pl, pb, pr], [dh, dw])
    ref = np.zeros((2, 3, h + pt + pb, w + pl + pr))
    cols = x.reshape(2, 3, kh, kw, oh, ow)
    for i in range(kh):
        for j in range(kw):
            for a in range(oh):
                for b in range(ow):
                    ref[:, :, a * sh + i * dh, b * sw + j * dw] += cols[:, :, i, j, a, b]
    np.testing.assert_allclose(y.numpy(), ref[:, :, pt:pt + h, pl:pl + w], rtol=1e-12)
    assert gradcheck(lambda v: F.fold(v, [h, w], [kh, kw], [sh, sw], [pt, pl, pb, pr], [dh, dw]), [T(x[:1], True)])
    x32 = T(x.astype(np.float32), True)
    y32 = F.fold(x32, [h, w], [kh, kw], [sh, sw], [pt, pl, pb, pr], [dh, dw])
    assert y32.dtype == ddg.float32
    (y32 * y32).sum().backward()
    g = F.unfold(2 * y32.detach(), [kh, kw], [sh, sw], [pt, pl, pb, pr], [dh, dw]).numpy()
    np.testing.assert_allclose(x32.grad.numpy(), g, rtol=1e-5)
    with pytest.raises(ValueError, match="fold"):
        F.fold(T(x[:, :, :-1]), [h, w], [kh, kw], [sh, sw], [pt, pl, pb, pr], [dh, dw])


def test_lenet_step_runs():
    model = nn.Sequential(nn.Conv2D(1, 4, 5), nn.ReLU(), nn.MaxPool2D(2, 2), nn.Conv2D(4, 6, 5), nn.ReLU(),
                          nn.MaxPool2D(2, 2), nn.Flatten(), nn.Linear(96, 10))
    x = ddg.randn([3, 1, 28, 28])
    loss = F.cross_entropy(model(x), ddg.to_tensor(np.array([1, 2, 3])))
    loss.backward()
    assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in model.parameters())


def test_same_padding_gives_ceil_outputs_for_conv_and_pool():
    """'same' means ceil(n / stride) outputs, also when n is not a multiple of the stride
    (convolution and pooling share one formula)."""
    x = ddg.randn([1, 1, 5, 7])
    w = ddg.randn([1, 1, 3, 3])
    assert F.conv2d(x, w, stride=2, padding="same").shape == [1, 1, 3, 4]
    assert F.conv2d(x, w, stride=2, padding="same", dilation=2).shape == [1, 1, 3, 4]
    assert F.max_pool2d(x, 3, 2, padding="same").shape == [1, 1, 3, 4]
    assert F.avg_pool2d(x, 2, 3, padding="same").shape == [1, 1, 2, 3]


def assert_cpu_and_device_agree(cases, place, rng):
    """Each ``(fn, shape)`` of ``cases`` (``fn(x, place)`` builds its own constants on
    ``place``) on a float32 input on the CPU and on ``place``: the outputs and the input
    gradients of ``sum(y*y)`` agree within float32 round-off of their scale (sums in other
    orders)."""
    for fn, shape in cases:
        x = rng.standard_normal(shape).astype("float32")
        res = {}
        for where in ("cpu", place):
            t = ddg.to_tensor(x, place=where, stop_gradient=False)
            y = fn(t, where)
            (y * y).sum().backward()
            res[where] = (y.numpy(), t.grad.numpy())
        for a, b in zip(res[place], res["cpu"]):
            np.testing.assert_allclose(a, b, rtol=0, atol=2e-6 * np.abs(b).max())


# every convolution kind and rank with an empty batch: the output shape a batch of 2 gives,
# zero weight and bias gradients, an empty input gradient (each shape picks another path)
_EMPTY_CASES = [
    (F.conv1d, (16, 20), (16, 16, 5), dict(padding=2)),
    (F.conv1d, (16, 20), (16, 16, 5), dict(stride=2, padding=2)),
    (F.conv1d_transpose, (38, 11), (38, 5, 2), dict(stride=2, padding=[3, 2])),
    (F.conv1d_transpose, (16, 20), (16, 16, 4), dict(stride=2, padding=1)),
    (F.conv2d, (8, 5, 5), (4, 8, 3, 3), dict(padding=1)),
    (F.conv2d, (8, 9, 9), (8, 1, 3, 3), dict(stride=2, padding=1, groups=8)),
    (F.conv2d, (3, 16, 16), (8, 3, 7, 7), dict(stride=2, padding=3)),
    (F.conv2d, (8, 8, 8), (8, 8, 4, 4), dict(stride=4)),
    (F.conv2d_transpose, (8, 5, 5), (8, 4, 4, 4), dict(stride=2, padding=1)),
    (F.conv2d_transpose, (38, 5, 5), (38, 5, 2, 3), dict(stride=2, padding=1)),
    (F.conv2d_transpose, (8, 5, 5), (8, 8, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    (F.conv3d, (8, 4, 4, 4), (8, 8, 3, 3, 3), dict(padding=1)),
    (F.conv3d_transpose, (16, 4, 4, 4), (16, 16, 4, 4, 4), dict(stride=2, padding=1)),
    (F.conv3d_transpose, (64, 1, 1, 1), (64, 64, 4, 4, 4), dict(stride=2, padding=1)),
    (F.conv3d_transpose, (4, 3, 3, 3), (4, 4, 4, 4, 4), dict(stride=2, padding=1)),
    (F.conv3d_transpose, (8, 3, 3, 3), (8, 8, 2, 2, 2), dict(stride=2)),
    (F.conv3d_transpose, (8, 3, 3, 3), (8, 4, 3, 3, 3), dict(padding=1, groups=2)),
]


@pytest.mark.parametrize("f, xs, ws, kw", _EMPTY_CASES)
def test_conv_empty_batch(f, xs, ws, kw):
    rng = np.random.default_rng(0)
    w = ddg.to_tensor(rng.standard_normal(ws).astype("float32"), stop_gradient=False)
    cout = ws[1] * kw.get("groups", 1) if "transpose" in f.__name__ else ws[0]
    b = ddg.to_tensor(rng.standard_normal(cout).astype("float32"), stop_gradient=False)
    full = f(ddg.to_tensor(rng.standard_normal((2,) + xs).astype("float32")), w, b, **kw)
    x = ddg.zeros([0, *xs], "float32")
    x.stop_gradient = False
    y = f(x, w, b, **kw)
    assert y.shape == [0] + full.shape[1:]
    y.sum().backward()
    assert x.grad.shape == [0, *xs]
    assert w.grad.shape == list(ws) and not np.any(w.grad.numpy())
    assert b.grad.shape == [cout] and not np.any(b.grad.numpy())


@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "bool"])
def test_linear_and_convolutions_name_a_non_float_input(dtype):
    """Integer or bool data into Linear and every convolution (uint8 images fed as read):
    a TypeError naming the functional op and the dtype, as Paddle refuses them, where numpy's
    promotion had returned a float64 result."""
    import ddg.nn as nn
    cases = [(nn.Linear(3, 4), (2, 3), "linear"), (nn.Conv1D(3, 4, 3), (1, 3, 8), "conv1d"),
             (nn.Conv2D(3, 4, 3), (1, 3, 8, 8), "conv2d"), (nn.Conv3D(3, 4, 3), (1, 3, 4, 4, 4), "conv3d"),
             (nn.Conv1DTranspose(3, 4, 3), (1, 3, 8), "conv1d_transpose"),
             (nn.Conv2DTranspose(3, 4, 3), (1, 3, 8, 8), "conv2d_transpose"),
             (nn.Conv3DTranspose(3, 4, 3), (1, 3, 4, 4, 4), "conv3d_transpose")]
    for layer, shape, op in cases:
        with pytest.raises(TypeError, match=rf"functional\.{op}: x must be floating point .*got {dtype}"):
            layer(ddg.to_tensor(np.zeros(shape, dtype)))
    with pytest.raises(TypeError, match=rf"functional\.conv2d: weight must be floating point .*got {dtype}"):
        ddg.nn.functional.conv2d(ddg.to_tensor(np.zeros((1, 3, 8, 8), "float32")),
                                 ddg.to_tensor(np.zeros((4, 3, 3, 3), dtype)))
