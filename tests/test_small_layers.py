"""Layers whose cost at small sizes is mostly per call: the cosine embedding loss
(``nn_ops.CosineEmbeddingLoss``), 3-D max pooling (``pool_kernels.max3d``), fold
(``ops.fold.Fold``). Forward against float64 numpy, gradients against
central differences, second order, 2-byte floats, and the device (simcupy in CI) against
the CPU."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(30)


def T(a, grad=False, dtype=None, place=None):
    a = np.asarray(a) if dtype is None else np.asarray(a).astype(dtype)
    t = ddg.to_tensor(a) if place is None else ddg.to_tensor(a, place=place)
    t.stop_gradient = not grad
    return t


# -- cosine embedding loss ------------------------------------------------------------------------
def _cel_ref(x1, x2, lab, margin, reduction):
    x1, x2 = np.atleast_2d(x1.astype(np.float64)), np.atleast_2d(x2.astype(np.float64))
    cos = (x1 * x2).sum(-1) / np.sqrt(((x1 * x1).sum(-1) + 1e-11) * ((x2 * x2).sum(-1) + 1e-11))
    per = np.where(lab == 1, 1 - cos, np.where(lab == -1, np.maximum(cos - margin, 0), 0.0))
    return {"mean": per.mean, "sum": per.sum, "none": lambda: per}[reduction]()


def _cel_inputs(shape):
    x1 = RNG.standard_normal(shape)
    x2 = RNG.standard_normal(shape)
    rows = shape[0] if len(shape) == 2 else 1
    lab = np.resize([1, -1, -1, 0, 1], rows)        # 0: neither label, no loss
    return x1, x2, lab


@pytest.mark.parametrize("shape", [(9, 6), (5,)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cosine_embedding_loss_against_float64(shape, reduction):
    x1, x2, lab = _cel_inputs(shape)
    if len(shape) == 2:
        x2[2] = x1[2] * 0.5     # cos 1 under label -1: past any margin below 1
    margin = 0.2
    ref = _cel_ref(x1, x2, lab, margin, reduction)
    for dt, tol in (("float64", 1e-12), ("float32", 2e-6)):
        y = F.cosine_embedding_loss(T(x1, dtype=dt), T(x2, dtype=dt), T(lab), margin, reduction)
        assert y.dtype == getattr(ddg, dt) and y.shape == list(np.shape(ref))
        np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=tol)
    lt = T(lab)
    assert gradcheck(lambda a, b: F.cosine_embedding_loss(a, b, lt, margin, reduction), [T(x1, True), T(x2, True)])
    assert gradgradcheck(lambda a, b: F.cosine_embedding_loss(a, b, lt, margin, reduction),
                         [T(x1, True), T(x2, True)])


def test_cosine_embedding_loss_is_one_node_and_paddles_errors():
    x1, x2, lab = _cel_inputs((4, 3))
    a, b = T(x1, True, "float32"), T(x2, True, "float32")
    y = F.cosine_embedding_loss(a, b, T(lab))
    assert type(y._node).__name__ == "CosineEmbeddingLoss"
    y.backward()
    assert a.grad.dtype == ddg.float32 and b.grad.shape == [4, 3]
    with pytest.raises(ValueError, match="cosine_embedding_loss: label must be 1-D"):
        F.cosine_embedding_loss(a, b, T(lab[:, None]))
    with pytest.raises(ValueError, match=r"cosine_embedding_loss: input1 and input2 .*\[4, 3\] and \[4, 2\]"):
        F.cosine_embedding_loss(a, T(x2[:, :2], dtype="float32"), T(lab))
    with pytest.raises(ValueError, match=r"label \[3\] does not match the 4 rows"):
        F.cosine_embedding_loss(a, b, T(lab[:3]))
    with pytest.raises(ValueError, match="reduction must be"):
        F.cosine_embedding_loss(a, b, T(lab), reduction="avg")


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_cosine_embedding_loss_in_two_byte_floats(dt):
    x1, x2, lab = _cel_inputs((6, 8))
    res = {}
    for d in (dt, "float32"):
        a, b = T(x1, dtype="float32").astype(d), T(x2, dtype="float32").astype(d)
        a.stop_gradient = b.stop_gradient = False
        y = F.cosine_embedding_loss(a, b, T(lab), 0.1, "none")
        (y * T(np.arange(6.0), dtype="float32").astype(d)).sum().backward()
        assert y.dtype == a.dtype == a.grad.dtype
        res[d] = [t.astype("float32").numpy() for t in (y, a.grad, b.grad)]
    tol = 1e-2 if dt == "float16" else 6e-2
    for u, v in zip(res[dt], res["float32"]):
        np.testing.assert_allclose(u, v, rtol=0, atol=tol * max(1.0, np.abs(v).max()))


@pytest.mark.skipif(not ddg.tensor.backend.cupy_available(),
                    reason="GPU tests need cupy and an NVIDIA GPU (cupy is not installed or sees no GPU)")
def test_cosine_embedding_loss_on_the_device_gives_the_cpu_results():
    x1, x2, lab = _cel_inputs((7, 5))
    res = {}
    for place in ("cpu", "gpu"):
        a, b = T(x1, True, "float32", place), T(x2, True, "float32", place)
        y = F.cosine_embedding_loss(a, b, T(lab, place=place), 0.1)
        y.backward()
        assert (type(y._data) is np.ndarray) == (place == "cpu")
        res[place] = [t.numpy() for t in (y, a.grad, b.grad)]
    for u, v in zip(res["gpu"], res["cpu"]):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


# -- 3-D max pooling (pool_kernels.max3d, its backward max2d_adjoint) ------------------------------
def _max3d_ref(x, k, s, pad, ceil):
    """Per window (clipped to the input) the first maximal element in row-major order, the
    first NaN where there is one: values and flat indices in the volume."""
    n, c, *sp = x.shape
    outs = []
    for i in range(3):
        room = sp[i] + 2 * pad[i] - k[i]
        o = (-(-room // s[i]) if ceil else room // s[i]) + 1
        if ceil and (o - 1) * s[i] >= sp[i] + pad[i]:
            o -= 1
        outs.append(o)
    y, idx = np.zeros((n, c) + tuple(outs), x.dtype), np.zeros((n, c) + tuple(outs), np.int64)
    flat = np.arange(np.prod(sp)).reshape(sp)
    for o in np.ndindex(*outs):
        sl = tuple(slice(max(o[i] * s[i] - pad[i], 0), min(o[i] * s[i] - pad[i] + k[i], sp[i])) for i in range(3))
        win = x[(slice(None), slice(None)) + sl].reshape(n, c, -1)
        pos = flat[sl].reshape(-1)
        nan = np.isnan(win)
        first = np.where(nan.any(-1), nan.argmax(-1), np.nanargmax(np.where(nan, -np.inf, win), -1))
        y[(slice(None), slice(None)) + o] = np.take_along_axis(win, first[..., None], -1)[..., 0]
        idx[(slice(None), slice(None)) + o] = pos[first]
    return y, idx


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("shape,k,s,pad,ceil", [
    ((2, 3, 5, 6, 7), (2, 2, 2), (2, 2, 2), (0, 0, 0), False),    # the unrolled 2x2x2 loop, rows left over
    ((1, 2, 5, 6, 7), (3, 2, 3), (2, 1, 2), (1, 0, 1), True),     # the general loop: padding, ceil mode
    ((1, 2, 4, 4, 4), (2, 2, 2), (2, 2, 2), (1, 1, 1), False),    # 2x2x2 windows across the padding
])
def test_max_pool3d_first_maximum_nan_and_gradient(dt, shape, k, s, pad, ceil):
    x = RNG.integers(-3, 3, shape).astype(dt)                     # many ties
    x.reshape(-1)[RNG.choice(x.size, 6, replace=False)] = np.nan
    x[0, 0, 0, 0, 0] = x[0, 0, 1, 1, 1] = np.nan                 # a window starting with a NaN, then another
    yr, ir = _max3d_ref(x, k, s, pad, ceil)
    t = T(x, True)
    y, mask = F.max_pool3d(t, k, s, pad, return_mask=True, ceil_mode=ceil)
    np.testing.assert_array_equal(y.numpy(), yr)
    np.testing.assert_array_equal(mask.numpy(), ir)
    g = RNG.standard_normal(yr.shape).astype(dt)
    y.backward(T(g))
    ref = np.zeros((shape[0] * shape[1], int(np.prod(shape[2:]))), dt)
    np.add.at(ref, (np.arange(ref.shape[0])[:, None], ir.reshape(ref.shape[0], -1)), g.reshape(ref.shape[0], -1))
    np.testing.assert_allclose(t.grad.numpy(), ref.reshape(shape), rtol=1e-6, atol=0)


# -- fold (ops.fold.Fold) --------------------------------------------------------------------------
FOLDS = [  # out (h, w), kernel, stride, dilation, Paddle paddings [top, left, bottom, right]
    ((7, 7), (2, 2), (2, 2), (1, 1), (0, 0, 0, 0)),     # disjoint, a row and a column left uncovered
    ((8, 9), (2, 2), (3, 3), (1, 1), (0, 0, 0, 0)),     # disjoint with gaps between the windows
    ((4, 4), (2, 2), (1, 1), (2, 2), (0, 0, 0, 0)),     # dilated windows interleaved, each pixel once
    ((6, 5), (2, 2), (2, 2), (1, 1), (1, 0, 1, 1)),     # disjoint over padding
    ((5, 6), (3, 2), (1, 2), (1, 1), (1, 1, 0, 0)),     # overlapping rows, padding
    ((5, 6), (3, 3), (1, 1), (1, 1), (1, 0, 1, 2)),     # stride 1 (the compiled loops), padding
]


def _fold_blocks(hw, k, s, d, p):
    return [(hw[a] + p[a] + p[a + 2] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a in range(2)]


def _fold_ref(x, hw, k, s, d, p):
    (h, w), (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr) = hw, k, s, d, p
    oh, ow = _fold_blocks(hw, k, s, d, p)
    n = x.shape[0]
    cols = x.astype(np.float64).reshape(n, -1, kh, kw, oh, ow)
    ref = np.zeros((n, cols.shape[1], h + pt + pb, w + pl + pr))
    for i, j, a, b in np.ndindex(kh, kw, oh, ow):
        ref[:, :, a * sh + i * dh, b * sw + j * dw] += cols[:, :, i, j, a, b]
    return ref[:, :, pt:pt + h, pl:pl + w]


def _fold(geo):
    hw, k, s, d, p = geo
    return lambda v: F.fold(v, list(hw), list(k), list(s), list(p), list(d))


@pytest.mark.parametrize("geo", FOLDS)
def test_fold_against_float64_loops_and_gradients(geo):
    oh, ow = _fold_blocks(*geo)
    k = geo[1]
    x = RNG.standard_normal((2, 3 * k[0] * k[1], oh * ow))
    ref, fn = _fold_ref(x, *geo), _fold(geo)
    for dt, tol in (("float64", 1e-13), ("float32", 1e-5)):
        y = fn(T(x, dtype=dt))
        assert y.dtype == getattr(ddg, dt)
        np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=tol)
    assert gradcheck(fn, [T(x[:1], True)])
    assert gradgradcheck(lambda v: fn(v) * fn(v), [T(x[:1, :k[0] * k[1]], True)])


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_fold_in_two_byte_floats(dt):
    geo = FOLDS[4]
    oh, ow = _fold_blocks(*geo)
    x = RNG.standard_normal((2, 12, oh * ow)).astype(np.float32)
    t = T(x, dtype="float32").astype(dt)
    t.stop_gradient = False
    y = _fold(geo)(t)
    (y * y).sum().backward()
    assert y.dtype == t.grad.dtype == t.dtype
    np.testing.assert_allclose(y.astype("float32").numpy(), _fold_ref(x, *geo), rtol=0, atol=0.05)
    g = F.unfold(2 * y.detach().astype("float32"), list(geo[1]), list(geo[2]), list(geo[4]), list(geo[3]))
    np.testing.assert_allclose(t.grad.astype("float32").numpy(), g.numpy(), rtol=0, atol=0.1)


@pytest.mark.skipif(not ddg.tensor.backend.cupy_available(),
                    reason="GPU tests need cupy and an NVIDIA GPU (cupy is not installed or sees no GPU)")
@pytest.mark.parametrize("geo", [FOLDS[0], FOLDS[4]])
def test_fold_on_the_device_gives_the_cpu_results(geo):
    oh, ow = _fold_blocks(*geo)
    x = RNG.standard_normal((2, 3 * geo[1][0] * geo[1][1], oh * ow)).astype(np.float32)
    res = {}
    for place in ("cpu", "gpu"):
        t = T(x, True, place=place)
        y = _fold(geo)(t)
        (y * y).sum().backward()
        assert (type(y._data) is np.ndarray) == (place == "cpu")
        res[place] = (y.numpy(), t.grad.numpy())
    for u, v in zip(res["gpu"], res["cpu"]):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-6)


# -- channel dropout (nn_ops.Dropout, the compiled scale_rows) -------------------------------------
@pytest.mark.parametrize("dt", ["float32", "float64", "float16"])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC", "strided"])
def test_dropout2d_values_gradient_and_nan(dt, fmt):
    x = RNG.standard_normal((3, 8, 4, 5)).astype(dt)
    x[:, :, 1, 2] = np.nan                           # every channel: a dropped one stays NaN (x * 0)
    if fmt == "strided":                             # a non-contiguous input
        leaf = T(np.concatenate([x, x], axis=3), True)
        t, xv = leaf[:, :, :, ::2], np.concatenate([x, x], axis=3)[:, :, :, ::2]
    else:
        xv = x if fmt == "NCHW" else x.transpose(0, 2, 3, 1).copy()
        leaf = t = T(xv, True)
    y = F.dropout2d(t, 0.4, data_format="NHWC" if fmt == "NHWC" else "NCHW")
    mask = y._node.mask
    assert mask.shape == ((3, 1, 1, 8) if fmt == "NHWC" else (3, 8, 1, 1)) and mask.dtype == x.dtype
    kept = mask.reshape(-1) != 0
    assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(np.unique(mask), [0, 1 / 0.6], rtol=1e-3)
    np.testing.assert_array_equal(y.numpy(), xv * mask)
    g = RNG.standard_normal(y.shape).astype(dt)
    y.backward(T(g))
    gx = leaf.grad.numpy()
    np.testing.assert_array_equal(gx[:, :, :, ::2] if fmt == "strided" else gx, g * mask)


# -- adaptive max pooling (pool_kernels.max3d over Paddle's bins) ----------------------------------
def _adaptive_ref(x, sizes):
    """Per bin the first maximal element (the first NaN where there is one): values, flat indices."""
    n, c, *sp = x.shape
    y, idx = np.zeros((n, c) + tuple(sizes), x.dtype), np.zeros((n, c) + tuple(sizes), np.int64)
    flat = np.arange(np.prod(sp)).reshape(sp)
    for o in np.ndindex(*sizes):
        sl = tuple(slice(i * m // s, -(-((i + 1) * m) // s)) for i, m, s in zip(o, sp, sizes))
        win, pos = x[(slice(None), slice(None)) + sl].reshape(n, c, -1), flat[sl].reshape(-1)
        nan = np.isnan(win)
        first = np.where(nan.any(-1), nan.argmax(-1), np.nanargmax(np.where(nan, -np.inf, win), -1))
        y[(slice(None), slice(None)) + o] = np.take_along_axis(win, first[..., None], -1)[..., 0]
        idx[(slice(None), slice(None)) + o] = pos[first]
    return y, idx


@pytest.mark.parametrize("shape,sizes", [((2, 3, 7, 6, 8), (3, 2, 3)),    # short rows: branch-free steps
                                         ((1, 2, 6, 5, 21), (2, 2, 2)),    # rows of 11: row maxima first
                                         ((2, 3, 9, 11), (4, 3)), ((2, 3, 30), (4,))])
def test_adaptive_max_pool_first_maximum_nan_and_gradient(shape, sizes):
    x = RNG.integers(-3, 3, shape).astype("float32")
    x.reshape(-1)[RNG.choice(x.size, x.size // 40, replace=False)] = np.nan
    yr, ir = _adaptive_ref(x, sizes)
    assert np.isnan(yr).any() and not np.isnan(yr).all()
    fn = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}[len(sizes)]
    t = T(x, True)
    y, mask = fn(t, sizes, return_mask=True)
    np.testing.assert_array_equal(y.numpy(), yr)
    np.testing.assert_array_equal(mask.numpy(), ir)
    g = RNG.standard_normal(yr.shape).astype("float32")
    y.backward(T(g))
    p = shape[0] * shape[1]
    ref = np.zeros((p, int(np.prod(shape[2:]))), np.float32)
    np.add.at(ref, (np.arange(p)[:, None], ir.reshape(p, -1)), g.reshape(p, -1))
    np.testing.assert_allclose(t.grad.numpy(), ref.reshape(shape), rtol=1e-6, atol=0)
    xd = T(RNG.standard_normal(shape), True)
    assert gradgradcheck(lambda v: fn(v, sizes) * fn(v, sizes), [xd])


# -- max unpooling (nn_ops.MaxUnpool: one node, the index check inside) -----------------------------
def test_max_unpool3d_is_one_node_and_checks_its_indices():
    x = RNG.standard_normal((2, 3, 4, 4, 6)).astype("float32")
    y, idx = F.max_pool3d(T(x), 2, 2, return_mask=True)
    assert idx.dtype == ddg.int32
    yt = T(y.numpy(), True)
    out = F.max_unpool3d(yt, idx, 2, output_size=[5, 4, 6])          # a trailing row no window covers
    assert type(out._node).__name__ == "MaxUnpool" and out.shape == [2, 3, 5, 4, 6]
    ref = np.zeros((6, 5 * 4 * 6), np.float32)
    np.put_along_axis(ref, idx.numpy().reshape(6, -1).astype(np.int64), y.numpy().reshape(6, -1), 1)
    np.testing.assert_array_equal(out.numpy(), ref.reshape(2, 3, 5, 4, 6))
    g = RNG.standard_normal(out.shape).astype("float32")
    out.backward(T(g))
    np.testing.assert_array_equal(yt.grad.numpy(), np.take_along_axis(
        g.reshape(6, -1), idx.numpy().reshape(6, -1).astype(np.int64), 1).reshape(y.shape))
    bad = idx.numpy().copy()
    bad[0, 0, 0, 0, 0] = 2 * 4 * 6
    with pytest.raises(ValueError, match=r"max_unpool3d: indices out of range for an output of size \[2, 4, 6\]"):
        F.max_unpool3d(yt, T(bad), 2, output_size=[2, 4, 6])
    with pytest.raises(TypeError, match="max_unpool3d: indices must be integers"):
        F.max_unpool3d(yt, T(idx.numpy().astype("float32")), 2)


# -- the p = 2 pairwise distance of the triplet losses (nn_ops.PairwiseDistance) --------------------
@pytest.mark.parametrize("shape", [(6, 5), (2, 3, 4), (7,)])
def test_pairwise_distance_against_float64_and_second_order(shape):
    x, y = RNG.standard_normal(shape), RNG.standard_normal(shape)
    ref = np.sqrt(((x - y + 1e-6) ** 2).sum(-1))
    for dt, tol in (("float64", 1e-12), ("float32", 2e-6)):
        d = F.pairwise_distance(T(x, True, dtype=dt), T(y, dtype=dt))
        assert type(d._node).__name__ == "PairwiseDistance" and d.dtype == getattr(ddg, dt)
        np.testing.assert_allclose(d.numpy(), ref, rtol=tol, atol=0)
    assert gradcheck(lambda a, b: F.pairwise_distance(a, b), [T(x, True), T(y, True)])
    assert gradgradcheck(lambda a, b: F.pairwise_distance(a, b), [T(x, True), T(y, True)])
    yc = T(y)                                        # a constant second input
    assert gradgradcheck(lambda a: F.pairwise_distance(a, yc) ** 2, [T(x, True)])


def test_triplet_losses_on_the_fused_distance():
    a, p, n = (RNG.standard_normal((8, 6)) for _ in range(3))
    dist = lambda u, v: np.sqrt(((u - v + 1e-6) ** 2).sum(-1))   # noqa: E731
    ref = np.maximum(dist(a, p) - np.minimum(dist(a, n), dist(p, n)) + 1.0, 0).mean()
    for fn in (lambda *t: F.triplet_margin_loss(*t, swap=True),
               lambda *t: F.triplet_margin_with_distance_loss(*t, swap=True)):
        ts = [T(v, True) for v in (a, p, n)]
        y = fn(*ts)
        np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12)
        assert gradcheck(fn, [T(v, True) for v in (a, p, n)])


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_pairwise_distance_in_two_byte_floats(dt):
    x, y = RNG.standard_normal((5, 16)).astype(np.float32), RNG.standard_normal((5, 16)).astype(np.float32)
    res = {}
    for d in (dt, "float32"):
        a, b = T(x, dtype="float32").astype(d), T(y, dtype="float32").astype(d)
        a.stop_gradient = False
        out = F.pairwise_distance(a, b)
        out.sum().backward()
        assert out.dtype == a.grad.dtype == a.dtype
        res[d] = (out.astype("float32").numpy(), a.grad.astype("float32").numpy())
    for u, v in zip(res[dt], res["float32"]):
        np.testing.assert_allclose(u, v, rtol=0, atol=3e-2 * max(1.0, np.abs(v).max()))


@pytest.mark.skipif(not ddg.tensor.backend.cupy_available(),
                    reason="GPU tests need cupy and an NVIDIA GPU (cupy is not installed or sees no GPU)")
def test_pairwise_distance_on_the_device_gives_the_cpu_results():
    x, y = RNG.standard_normal((6, 9)).astype(np.float32), RNG.standard_normal((6, 9)).astype(np.float32)
    res = {}
    for place in ("cpu", "gpu"):
        a, b = T(x, True, place=place), T(y, True, place=place)
        d = F.pairwise_distance(a, b)
        (d * d).sum().backward()
        assert (type(d._data) is np.ndarray) == (place == "cpu")
        res[place] = (d.numpy(), a.grad.numpy(), b.grad.numpy())
    for u, v in zip(res["gpu"], res["cpu"]):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
