"""The wider Paddle nn API: 3-D convolution and pooling, and the
rearrangements, unpooling, random and in-place activations, distances and losses
(ddg/nn/functional/rearrange.py, unpooling.py, ...). Forward against numpy
references, backward against float64 central differences, the same results on every
backend (simcupy included); values that Paddle's conventions decide were checked
against Paddle 3.3.1."""
import itertools

import numpy as np
import pytest

import ddg
import ddg.nn as nn
import ddg.nn.functional as F
from ddg.autograd import gradcheck, gradgradcheck


def _np_conv3d(x, w, b, stride, pads, dil, groups):
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pads])
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    k = w.shape[2:]
    out_sz = [(x.shape[2 + i] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(3)]
    out = np.zeros((n, o) + tuple(out_sz))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for pos in itertools.product(*[range(s) for s in out_sz]):
            sl = tuple(slice(pos[i] * stride[i], pos[i] * stride[i] + dil[i] * (k[i] - 1) + 1, dil[i]) for i in range(3))
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            out[(slice(None), oc) + pos] = (patch * w[oc]).sum(axis=(1, 2, 3, 4))
    return out + (0 if b is None else b.reshape(1, -1, 1, 1, 1))


def _np_conv3d_transpose(x, w, stride, pads, groups, out_sz):
    n, cin = x.shape[:2]
    cg, og = cin // groups, w.shape[1]
    k = w.shape[2:]
    full = [out_sz[i] + 2 * pads[i] + k[i] for i in range(3)]
    out = np.zeros((n, og * groups) + tuple(full))
    for ci in range(cin):
        g = ci // cg
        for pos in itertools.product(*[range(s) for s in x.shape[2:]]):
            for kk in itertools.product(*[range(s) for s in k]):
                idx = tuple(pos[i] * stride[i] + kk[i] for i in range(3))
                out[(slice(None), slice(g * og, (g + 1) * og)) + idx] += x[(slice(None), ci) + pos][:, None] * \
                    w[(ci, slice(None)) + kk][None]
    return out[(slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + out_sz[i]) for i in range(3))]


def _np_pool3d(x, k, s, p, kind):
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p)] * 3, constant_values=fill)
    ones = np.pad(np.ones(x.shape[2:]), [(p, p)] * 3)
    o = [(xp.shape[2 + i] - k) // s + 1 for i in range(3)]
    out = np.zeros(x.shape[:2] + tuple(o))
    for pos in itertools.product(*[range(v) for v in o]):
        sl = tuple(slice(pos[i] * s, pos[i] * s + k) for i in range(3))
        win = xp[(slice(None), slice(None)) + sl]
        out[(slice(None), slice(None)) + pos] = win.max(axis=(2, 3, 4)) if kind == "max" else \
            win.sum(axis=(2, 3, 4)) / ones[sl].sum()
    return out


ROWS = [
    ("conv3d", lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2), groups=2),
     lambda x, w, b: _np_conv3d(x, w, b, (1, 2, 1), (1, 0, 1), (1, 1, 2), 2), [(2, 4, 3, 4, 5), (4, 2, 2, 2, 2), (4,)]),
    ("conv3d_transpose", lambda x, w: F.conv3d_transpose(x, w, stride=2, padding=1, groups=2),
     lambda x, w: _np_conv3d_transpose(x, w, (2, 2, 2), (1, 1, 1), 2, [2, 2, 4]), [(1, 4, 2, 2, 3), (4, 1, 2, 2, 2)]),
    ("max_pool3d", lambda x: F.max_pool3d(x, 2, 2, 1), lambda x: _np_pool3d(x, 2, 2, 1, "max"), [(2, 2, 3, 4, 3)]),
    ("avg_pool3d", lambda x: F.avg_pool3d(x, 3, 2, 1), lambda x: _np_pool3d(x, 3, 2, 1, "avg"), [(2, 2, 5, 4, 3)]),
    ("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 1)),
     lambda x: np.stack([np.stack([x[:, :, d0:d1, h0:h1].mean(axis=(2, 3, 4)) for h0, h1 in ((0, 2), (1, 3), (2, 4))],
                                  -1) for d0, d1 in ((0, 2), (1, 3))], -2)[..., None], [(2, 2, 3, 4, 2)]),
    ("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, (1, 3, 2)),
     lambda x: np.stack([np.stack([x[:, :, :, h0:h1, w0:w1].max(axis=(2, 3, 4)) for w0, w1 in ((0, 2), (1, 3))], -1)
                         for h0, h1 in ((0, 2), (1, 3), (2, 4))], -2)[:, :, None], [(2, 2, 2, 4, 3)]),
]


@pytest.mark.parametrize("name,fn,ref,shapes", ROWS, ids=[r[0] for r in ROWS])
def test_forward_matches_numpy(name, fn, ref, shapes, rng):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out = fn(*[ddg.to_tensor(a) for a in arrays])
    want = ref(*arrays)
    assert out.shape == list(want.shape)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    assert out.dtype == np.float32


@pytest.mark.parametrize("name,fn,ref,shapes", ROWS, ids=[r[0] for r in ROWS])
def test_backward_matches_central_differences(name, fn, ref, shapes, rng):
    inputs = [ddg.to_tensor(rng.standard_normal(s), stop_gradient=False) for s in shapes]
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("name,fn,ref,shapes", ROWS, ids=[r[0] for r in ROWS])
def test_same_results_on_every_backend(name, fn, ref, shapes, place, rng):
    arrays = [rng.standard_normal(s) for s in shapes]
    cpu = [ddg.to_tensor(a, stop_gradient=False) for a in arrays]
    dev = [ddg.to_tensor(a, place=place, stop_gradient=False) for a in arrays]
    out_cpu, out_dev = fn(*cpu), fn(*dev)
    assert out_dev.place == ddg.tensor.place.parse_place(place)
    np.testing.assert_allclose(out_dev.numpy(), out_cpu.numpy(), rtol=1e-10, atol=1e-12)
    v = np.random.default_rng(1).standard_normal(out_cpu.shape)
    out_cpu.backward(ddg.to_tensor(v))
    out_dev.backward(ddg.to_tensor(v, place=place))
    for c, d in zip(cpu, dev):
        np.testing.assert_allclose(d.grad.numpy(), c.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_conv3d_layers_and_pool_masks(rng):
    x = ddg.to_tensor(rng.standard_normal((2, 3, 4, 5, 4)).astype(np.float32))
    conv = nn.Conv3D(3, 4, 3, padding=1, data_format="NCDHW")
    assert conv.weight.shape == [4, 3, 3, 3, 3] and conv(x).shape == [2, 4, 4, 5, 4]
    convt = nn.Conv3DTranspose(3, 2, 2, stride=2)
    assert convt.weight.shape == [3, 2, 2, 2, 2] and convt(x).shape == [2, 2, 8, 10, 8]
    assert convt(x, output_size=[9, 11, 9]).shape == [2, 2, 9, 11, 9]
    y = F.conv3d(ddg.to_tensor(np.moveaxis(x.numpy(), 1, -1)), conv.weight, conv.bias, padding=1, data_format="NDHWC")
    np.testing.assert_allclose(np.moveaxis(y.numpy(), -1, 1), conv(x).numpy(), rtol=1e-5, atol=1e-5)
    assert nn.MaxPool3D(2)(x).shape == [2, 3, 2, 2, 2] and nn.AvgPool3D(2, ceil_mode=True)(x).shape == [2, 3, 2, 3, 2]
    assert nn.AdaptiveAvgPool3D(1)(x).shape == [2, 3, 1, 1, 1] and nn.AdaptiveMaxPool3D((2, 1, 2))(x).shape == [2, 3, 2, 1, 2]
    # the mask holds each maximum's flat index into D*H*W, as in Paddle
    m, mask = F.max_pool3d(x, 2, 2, return_mask=True)
    flat = x.numpy().reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, mask.numpy().reshape(2, 3, -1), 2),
                                  m.numpy().reshape(2, 3, -1))
    assert mask.dtype == np.int32
    with pytest.raises(ValueError, match=r"conv3d.*\[2, 3, 4, 5\]"):
        F.conv3d(ddg.ones([2, 3, 4, 5]), conv.weight)
    with pytest.raises(ValueError, match="conv3d.*channels"):
        F.conv3d(ddg.ones([2, 2, 4, 5, 4]), conv.weight)


# -- numpy references --------------------------------------------------------------------------
def _np_lrn(x, size=3, alpha=0.1, beta=0.75, k=1.0):
    sq = x ** 2
    c = x.shape[1]
    s = np.stack([sq[:, max(0, j - size // 2):min(c, j + (size - 1) // 2 + 1)].sum(1) for j in range(c)], 1)
    return x / (k + alpha / size * s) ** beta


def _np_fold(x, out_hw, k):
    n, ck, _ = x.shape
    c = ck // (k * k)
    oh, ow = out_hw[0] - k + 1, out_hw[1] - k + 1
    out = np.zeros((n, c) + tuple(out_hw))
    cols = x.reshape(n, c, k, k, oh, ow)
    for i in range(k):
        for j in range(k):
            out[:, :, i:i + oh, j:j + ow] += cols[:, :, i, j]
    return out


def _np_mml(x, lab, w):
    n, c = x.shape
    out = np.zeros(n)
    for i in range(n):
        m = np.maximum(0, 0.8 - x[i, lab[i]] + x[i]) ** 2 * w[lab[i]]
        m[lab[i]] = 0
        out[i] = m.sum() / c
    return out


def _np_ctc(x, labels, il, ll, blank=0):
    """Per-sample CTC loss by the textbook alpha recursion on probabilities."""
    lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    out = []
    for n in range(x.shape[1]):
        ext = [blank]
        for v in labels[n, :ll[n]]:
            ext += [v, blank]
        y = np.exp(lp[:il[n], n])
        a = np.zeros(len(ext))
        a[0] = y[0, ext[0]]
        if len(ext) > 1:
            a[1] = y[0, ext[1]]
        for t in range(1, il[n]):
            b = np.zeros_like(a)
            for s in range(len(ext)):
                v = a[s] + (a[s - 1] if s >= 1 else 0)
                if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                    v += a[s - 2]
                b[s] = v * y[t, ext[s]]
            a = b
        out.append(-np.log(a[-1] + (a[-2] if len(ext) > 1 else 0)))
    return np.array(out)


_CTC_LAB = np.array([[1, 2, 2], [3, 1, 0]])
_IDX4 = np.array([1, 0, 3])

FROWS = [
    ("pairwise_distance", lambda x, y: F.pairwise_distance(x, y, 3.0),
     lambda x, y: (np.abs(x - y + 1e-6) ** 3).sum(-1) ** (1 / 3), [(3, 4), (3, 4)]),
    ("pixel_unshuffle", lambda x: F.pixel_unshuffle(x, 2),
     lambda x: x.reshape(2, 2, 2, 2, 3, 2).transpose(0, 1, 3, 5, 2, 4).reshape(2, 8, 2, 3), [(2, 2, 4, 6)]),
    ("channel_shuffle", lambda x: F.channel_shuffle(x, 3),
     lambda x: x.reshape(2, 3, 2, 2, 2).transpose(0, 2, 1, 3, 4).reshape(2, 6, 2, 2), [(2, 6, 2, 2)]),
    ("maxout", lambda x: F.maxout(x, 2), lambda x: x.reshape(2, 2, 2, 3, 2).max(2), [(2, 4, 3, 2)]),
    ("local_response_norm", lambda x: F.local_response_norm(x, 3, 0.1), _np_lrn, [(2, 5, 2, 3)]),
    ("gaussian_nll_loss", lambda x, y, v: F.gaussian_nll_loss(x, y, v.abs() + 0.5, full=True, reduction="none"),
     lambda x, y, v: 0.5 * (np.log(np.abs(v) + 0.5) + (x - y) ** 2 / (np.abs(v) + 0.5)) + 0.5 * np.log(2 * np.pi),
     [(3, 4), (3, 4), (3, 4)]),
    ("poisson_nll_loss", lambda x, y: F.poisson_nll_loss(x, y.abs() * 3, reduction="none"),
     lambda x, y: np.exp(x) - np.abs(y) * 3 * x, [(3, 4), (3, 4)]),
    ("multi_margin_loss", lambda x, w: F.multi_margin_loss(x, ddg.to_tensor(_IDX4), 2, 0.8, w, "none"),
     lambda x, w: _np_mml(x, _IDX4, w), [(3, 4), (4,)]),
    ("triplet_margin_with_distance_loss",
     lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, lambda u, v: ((u - v) ** 2).sum(-1), 0.5,
                                                         reduction="none"),
     lambda a, p, n: np.maximum(((a - p) ** 2).sum(-1) - ((a - n) ** 2).sum(-1) + 0.5, 0), [(3, 4)] * 3),
    ("bilinear", lambda a, b, w, c: F.bilinear(a, b, w, c), lambda a, b, w, c: np.einsum("ni,oij,nj->no", a, w, b) + c,
     [(3, 2), (3, 4), (5, 2, 4), (1, 5)]),
    ("fold", lambda x: F.fold(x, [4, 5], 2), lambda x: _np_fold(x, (4, 5), 2), [(2, 8, 12)]),
    ("max_unpool2d", lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_mask=True), 2),
     lambda x: np.where(x == np.repeat(np.repeat(x.reshape(2, 3, 2, 2, 2, 2).max((3, 5)), 2, 2), 2, 3), x, 0),
     [(2, 3, 4, 4)]),
    ("temporal_shift", lambda x: F.temporal_shift(x, 2, 0.25),
     lambda x: np.concatenate([np.concatenate([np.zeros((2, 1, 1, 2, 2)), x.reshape(2, 2, 4, 2, 2)[:, :1, :1]], 1),
                               np.concatenate([x.reshape(2, 2, 4, 2, 2)[:, 1:, 1:2], np.zeros((2, 1, 1, 2, 2))], 1),
                               x.reshape(2, 2, 4, 2, 2)[:, :, 2:]], 2).reshape(4, 4, 2, 2), [(4, 4, 2, 2)]),
    ("ctc_loss", lambda x: F.ctc_loss(x, ddg.to_tensor(_CTC_LAB), ddg.to_tensor([6, 5]), ddg.to_tensor([3, 2]),
                                      reduction="none"),
     lambda x: _np_ctc(x, _CTC_LAB, [6, 5], [3, 2]), [(6, 2, 5)]),
    ("margin_cross_entropy", lambda x: F.margin_cross_entropy(x.tanh(), ddg.to_tensor(_IDX4), 1.0, 0.3, 0.1, 4.0,
                                                               reduction="none"),
     lambda x: _np_arcface(np.tanh(x), _IDX4, 1.0, 0.3, 0.1, 4.0), [(3, 4)]),
]


def _np_arcface(c, lab, m1, m2, m3, s):
    z = c.copy()
    for i, k in enumerate(lab):
        z[i, k] = np.cos(m1 * np.arccos(c[i, k]) + m2) - m3
    z *= s
    lp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return -lp[np.arange(len(lab)), lab][:, None]


@pytest.mark.parametrize("name,fn,ref,shapes", FROWS, ids=[r[0] for r in FROWS])
def test_functional_forward_matches_numpy(name, fn, ref, shapes, rng):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out = fn(*[ddg.to_tensor(a) for a in arrays])
    want = ref(*[a.astype(np.float64) for a in arrays])
    assert out.shape == list(want.shape)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    assert out.dtype == np.float32


@pytest.mark.parametrize("name,fn,ref,shapes", FROWS, ids=[r[0] for r in FROWS])
def test_functional_backward_matches_central_differences(name, fn, ref, shapes, rng):
    inputs = [ddg.to_tensor(rng.standard_normal(s), stop_gradient=False) for s in shapes]
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("name,fn,ref,shapes", FROWS, ids=[r[0] for r in FROWS])
def test_functional_same_results_on_every_backend(name, fn, ref, shapes, place, rng):
    arrays = [rng.standard_normal(s) for s in shapes]
    cpu = [ddg.to_tensor(a, stop_gradient=False) for a in arrays]
    dev = [ddg.to_tensor(a, place=place, stop_gradient=False) for a in arrays]
    out_cpu = fn(*cpu)
    if place != "cpu":
        ddg.set_device(place)
    try:
        out_dev = fn(*dev)
    finally:
        ddg.set_device("cpu")
    assert out_dev.place == ddg.tensor.place.parse_place(place)
    np.testing.assert_allclose(out_dev.numpy(), out_cpu.numpy(), rtol=1e-10, atol=1e-12)
    v = np.random.default_rng(1).standard_normal(out_cpu.shape)
    out_cpu.backward(ddg.to_tensor(v))
    out_dev.backward(ddg.to_tensor(v, place=place))
    for c, d in zip(cpu, dev):
        np.testing.assert_allclose(d.grad.numpy(), c.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("nd", [1, 3])
def test_max_unpool_scatters_to_the_pooled_positions_first_and_second_order(nd):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3) + (4,) * nd)
    pool = getattr(F, f"max_pool{nd}d")
    unpool = getattr(F, f"max_unpool{nd}d")
    y, idx = pool(ddg.to_tensor(x), 2, return_mask=True)
    out = unpool(y, idx, 2).numpy()
    ref = np.zeros((6, 4 ** nd))
    np.put_along_axis(ref, idx.numpy().reshape(6, -1).astype(np.int64), y.numpy().reshape(6, -1), 1)
    np.testing.assert_array_equal(out, ref.reshape(out.shape))
    assert (out != 0).sum() == y.size  # each window's max, back at its place
    yt = ddg.to_tensor(y.numpy(), stop_gradient=False)
    assert gradcheck(lambda t: unpool(t, idx, 2), [yt])
    assert ddg.autograd.gradgradcheck(lambda t: unpool(t, idx, 2) ** 2, [yt])


def test_ctc_edge_lengths_repeats_and_impossible_alignments():
    # samples: a repeated label (needs a blank between), no time steps and no label, no time
    # steps with a label (impossible), too few steps for a repeat (impossible), the full length
    x = np.random.default_rng(3).standard_normal((5, 5, 4))
    lab = np.array([[2, 2, 0], [0, 0, 0], [1, 0, 0], [3, 3, 0], [1, 2, 3]])
    il, ll = [5, 0, 0, 2, 5], [2, 0, 1, 2, 3]
    args = (ddg.to_tensor(lab), ddg.to_tensor(il), ddg.to_tensor(ll))
    for dtype, tol in (("float64", 1e-12), ("float32", 1e-5)):
        xt = ddg.to_tensor(x.astype(dtype), stop_gradient=False)
        loss = F.ctc_loss(xt, *args, reduction="none")
        assert loss.dtype == xt.dtype
        got = loss.numpy()
        np.testing.assert_allclose(got[[0, 4]], _np_ctc(x[:, [0, 4]], lab[[0, 4]], [5, 5], [2, 3]), rtol=tol)
        assert got[1] == 0 and np.isposinf(got[2]) and np.isposinf(got[3])
        zt = ddg.to_tensor(x.astype(dtype), stop_gradient=False)
        z = F.ctc_loss(zt, *args, reduction="sum", zero_infinity=True)
        np.testing.assert_allclose(z.item(), got[[0, 4]].sum(), rtol=tol)
        z.backward()
        g = zt.grad.numpy()
        assert np.isfinite(g).all() and not g[:, 1:4].any() and g[:, 0].any() and g[:, 4].any()
        assert not g[1:, 1].any() and not g[:, 3].any()  # samples 1-3: no path, no gradient
    with pytest.raises(ValueError, match="ctc_loss"):
        F.ctc_loss(ddg.to_tensor(x), ddg.to_tensor(-lab), *args[1:])
    with pytest.raises(ValueError, match="non-negative"):
        F.ctc_loss(ddg.to_tensor(x), args[0], ddg.to_tensor([5, 0, 0, -1, 5]), args[2])
    with pytest.raises(ValueError, match="label columns"):
        F.ctc_loss(ddg.to_tensor(x), args[0], args[1], ddg.to_tensor([2, 0, 1, 2, 4]))


def test_values_paddle_printed():
    # Paddle 3.3.1: ctc_loss normalises raw scores itself (same loss for x and log_softmax(x)), mean
    # divides by the label lengths; these inputs gave [8.45387949, 6.19035567] and 2.95656883294824
    x = np.random.default_rng(0).standard_normal((6, 2, 5))
    args = (ddg.to_tensor(_CTC_LAB.astype("int32")), ddg.to_tensor([6, 5]), ddg.to_tensor([3, 2]))
    np.testing.assert_allclose(F.ctc_loss(ddg.to_tensor(x), *args, reduction="none").numpy(),
                               [8.45387949, 6.19035567], rtol=1e-8)
    np.testing.assert_allclose(F.ctc_loss(F.log_softmax(ddg.to_tensor(x)), *args).item(), 2.95656883294824, rtol=1e-8)
    assert nn.CTCLoss()(ddg.to_tensor(x), *args).item() == pytest.approx(2.95656883294824)
    ids = ddg.to_tensor([[[2, 2], [6, 1]], [[3, 9], [6, 1]], [[0, 1], [9, 0]]])
    parents = ddg.to_tensor([[[0, 0], [1, 1]], [[1, 0], [1, 0]], [[0, 0], [0, 1]]])
    assert F.gather_tree(ids, parents).tolist() == [[[2, 2], [1, 6]], [[3, 3], [6, 1]], [[0, 1], [9, 0]]]


def test_nn_layers_shapes_and_modes(rng):
    x = ddg.to_tensor(rng.standard_normal((2, 4, 6, 6)).astype(np.float32))
    assert nn.PixelUnshuffle(2)(x).shape == [2, 16, 3, 3] and nn.ChannelShuffle(2)(x).shape == [2, 4, 6, 6]
    assert nn.Maxout(2)(x).shape == [2, 2, 6, 6] and nn.Unflatten(1, [2, 2])(x).shape == [2, 2, 2, 6, 6]
    np.testing.assert_allclose(nn.Softmax2D()(x).numpy().sum(1), 1.0, rtol=1e-6)
    assert nn.LocalResponseNorm(3)(x).shape == x.shape and nn.PairwiseDistance()(x, x).shape == [2, 4, 6]
    m, idx = F.max_pool2d(x, 2, return_mask=True)
    assert nn.MaxUnPool2D(2)(m, idx).shape == [2, 4, 6, 6]
    m1, i1 = F.max_pool1d(x[:, :, 0], 2, return_mask=True)
    assert nn.MaxUnPool1D(2)(m1, i1).shape == [2, 4, 6]
    m3, i3 = F.max_pool3d(ddg.unsqueeze(x, 2), (1, 2, 2), return_mask=True)
    assert nn.MaxUnPool3D((1, 2, 2))(m3, i3).shape == [2, 4, 1, 6, 6]
    assert nn.Fold([4, 4], 2)(ddg.ones([1, 8, 9])).shape == [1, 2, 4, 4]
    assert nn.InstanceNorm3D(4)(ddg.unsqueeze(x, 2)).shape == [2, 4, 1, 6, 6]
    bil = nn.Bilinear(3, 4, 5)
    assert bil.weight.shape == [5, 3, 4] and bil.bias.shape == [1, 5]
    assert bil(ddg.ones([2, 3]), ddg.ones([2, 4])).shape == [2, 5]
    # random layers: training draws, eval is deterministic
    for layer in (nn.AlphaDropout(0.5), nn.RReLU(), nn.Dropout3D(0.5)):
        z = ddg.unsqueeze(x, 2) if isinstance(layer, nn.Dropout3D) else x
        layer.eval()
        np.testing.assert_array_equal(layer(z).numpy(), layer(z).numpy())
        layer.train()
        assert layer(z).shape == z.shape
    np.testing.assert_allclose(F.rrelu(x, training=False).numpy(),
                               np.where(x.numpy() >= 0, x.numpy(), x.numpy() * (1 / 8 + 1 / 3) / 2), rtol=1e-6)
    ddg.seed(0)
    big = ddg.to_tensor(rng.standard_normal(20000).astype(np.float32))
    y = F.alpha_dropout(big, 0.2).numpy()
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05          # SELU's moments kept
    g = F.gumbel_softmax(x, hard=True)
    assert set(np.unique(g.numpy())) <= {0.0, 1.0} and np.all(g.numpy().sum(-1) == 1)
    labels, centers = F.class_center_sample(ddg.to_tensor([3, 7, 3, 1]), 10, 5)
    assert centers.shape == [5] and set([1, 3, 7]) <= set(centers.tolist())
    assert [centers.tolist()[i] for i in labels.tolist()] == [3, 7, 3, 1]


def test_in_place_activations_and_spectral_norm(rng):
    x = ddg.to_tensor([-1.0, 0.5, 2.0])
    assert F.relu_(x) is x and x.tolist() == [0.0, 0.5, 2.0]
    F.hardtanh_(x, 0.0, 1.0)
    assert x.tolist() == [0.0, 0.5, 1.0]
    F.softmax_(x)
    np.testing.assert_allclose(x.numpy().sum(), 1.0, rtol=1e-6)
    sn = nn.SpectralNorm([4, 6], dim=1, power_iters=30)
    w = ddg.to_tensor(rng.standard_normal((4, 6)).astype(np.float32))
    out = sn(w)
    np.testing.assert_allclose(np.linalg.svd(out.numpy(), compute_uv=False)[0], 1.0, rtol=1e-4)
    assert all(p.stop_gradient for p in sn.parameters())


def test_soft_margin_loss_one_op_against_numpy_and_differences():
    """Per element log(1 + exp(-y x)) in float64 (large |x| included: no overflow), its
    first and second gradients by central differences, and one node before the reduction."""
    from ddg.autograd import gradgradcheck
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 5)) * 3
    x[0, 0], x[0, 1] = 800.0, -800.0
    y = np.where(rng.random((3, 5)) < 0.5, -1.0, 1.0)
    got = F.soft_margin_loss(ddg.to_tensor(x), ddg.to_tensor(y), reduction="none").numpy()
    np.testing.assert_allclose(got, np.logaddexp(0.0, -y * x), rtol=1e-13)
    xs, ys = x[1:] / 3, rng.normal(size=(2, 5))
    f = lambda a, b: F.soft_margin_loss(a, b, reduction="sum")  # noqa: E731
    assert gradcheck(f, [ddg.to_tensor(xs, stop_gradient=False), ddg.to_tensor(ys, stop_gradient=False)])
    assert gradgradcheck(f, [ddg.to_tensor(xs, stop_gradient=False), ddg.to_tensor(ys, stop_gradient=False)])
    with pytest.raises(ValueError, match="soft_margin_loss"):
        F.soft_margin_loss(ddg.to_tensor(x), ddg.to_tensor(y[:2]))


def _np_mml_any(x, lab, p, margin, w):
    n, c = x.shape
    out = np.zeros(n)
    for i in range(n):
        m = np.maximum(0, margin - x[i, lab[i]] + x[i]) ** p
        m[lab[i]] = 0
        out[i] = m.sum() / c * (1.0 if w is None else w[lab[i]])
    return out


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_multi_margin_loss_one_op_values_first_and_second_order(p, reduction, weighted):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4))
    lab = np.array([1, 0, 3, 3, 2])
    w = rng.uniform(0.5, 2.0, 4) if weighted else None
    per = _np_mml_any(x, lab, p, 0.7, w)
    want = {"mean": per.mean(), "sum": per.sum(), "none": per}[reduction]

    def fn(xt, *wt):
        return F.multi_margin_loss(xt, ddg.to_tensor(lab), p, 0.7, wt[0] if wt else None, reduction)

    for dt, tol in ((np.float64, 1e-13), (np.float32, 2e-6)):
        args = [ddg.to_tensor(x.astype(dt))] + ([ddg.to_tensor(w.astype(dt))] if weighted else [])
        out = fn(*args)
        assert out.dtype == dt and out._node is None
        np.testing.assert_allclose(out.numpy(), want, rtol=tol, atol=tol)
    # away from the hinge's kinks (|margin - x_y + x_j| > 1e-3) for the finite differences
    inputs = [ddg.to_tensor(x, stop_gradient=False)] + ([ddg.to_tensor(w, stop_gradient=False)] if weighted else [])
    y = fn(*inputs)
    assert y._node is not None and y._node.edges[0][0] is inputs[0]          # one node
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


def test_multi_margin_loss_rejects_bad_labels_and_shapes():
    x = ddg.to_tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(IndexError, match="multi_margin_loss.*label 3"):
        F.multi_margin_loss(x, ddg.to_tensor(np.array([0, 3])))
    with pytest.raises(ValueError, match="multi_margin_loss"):
        F.multi_margin_loss(x, ddg.to_tensor(np.array([0, 1, 2])))
    with pytest.raises(ValueError, match="multi_margin_loss.*weight"):
        F.multi_margin_loss(x, ddg.to_tensor(np.array([0, 1])), weight=ddg.to_tensor(np.ones(2, np.float32)))


@pytest.mark.parametrize("reduction,norm", [("mean", False), ("sum", True), ("none", True)])
def test_ctc_loss_reductions_gradients_and_backends(reduction, norm, place):
    """One op from the scores to the reduced loss: values against the per-sample reference,
    gradients against central differences, and the device path against the CPU's."""
    x = np.random.default_rng(7).standard_normal((6, 2, 5))
    il, ll = np.array([6, 5]), np.array([3, 2])
    per = _np_ctc(x, _CTC_LAB, il, ll)
    if norm:
        per = per / il
    want = {"mean": (per / ll).mean(), "sum": per.sum(), "none": per}[reduction]

    def fn(t, where="cpu"):
        args = [ddg.to_tensor(a, place=where) for a in (_CTC_LAB, il, ll)]
        return F.ctc_loss(t, *args, reduction=reduction, norm_by_times=norm)

    out = fn(ddg.to_tensor(x))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)
    assert out._node is None and fn(ddg.to_tensor(x, stop_gradient=False))._node.edges[0] is not None
    if place == "cpu":
        assert gradcheck(fn, [ddg.to_tensor(x, stop_gradient=False)], eps=1e-6, atol=1e-6, rtol=1e-5)
        return
    res = []
    for where in ("cpu", place):
        t = ddg.to_tensor(x, place=where, stop_gradient=False)
        y = fn(t, where)
        y.backward(ddg.to_tensor(np.linspace(0.5, 1.5, y.size).reshape(y.shape), place=where))
        res.append((y.numpy(), t.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 9])
@pytest.mark.parametrize("shape,fmt", [((2, 7, 3), "NCL"), ((2, 3, 2, 3), "NHWC"), ((1, 6, 2, 2, 2), "NCDHW"),
                                       ((2, 1, 3, 2), "NCHW")])
def test_local_response_norm_windows(size, shape, fmt):
    """Every window size, also wider than the channels, on each layout: float64 values against
    the reference, the window's gradient by central differences."""
    rng = np.random.default_rng(size)
    x = rng.standard_normal(shape)
    ca = x.ndim - 1 if fmt[-1] == "C" else 1
    want = np.moveaxis(_np_lrn(np.moveaxis(x, ca, 1), size, 0.4, 0.6, 1.5), 1, ca)
    got = F.local_response_norm(ddg.to_tensor(x), size, 0.4, 0.6, 1.5, data_format=fmt)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    xt = ddg.to_tensor(x, stop_gradient=False)
    assert ddg.autograd.gradcheck(lambda t: F.local_response_norm(t, size, 0.4, 0.6, 1.5, data_format=fmt), [xt])


def test_local_response_norm_second_order():
    x = ddg.to_tensor(np.random.default_rng(0).standard_normal((2, 5, 2)), stop_gradient=False)
    assert ddg.autograd.gradgradcheck(lambda t: F.local_response_norm(t, 4, 0.5, 0.75, 1.0, data_format="NCL"), [x])
