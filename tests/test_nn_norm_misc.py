"""Normalization, dropout, embedding, pad, normalize, interpolate: forward against numpy
references (and PyTorch when importable), backward against central differences."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(1)


def T(a, grad=False):
    return ddg.to_tensor(np.asarray(a), stop_gradient=not grad)


def rand(*shape):
    return RNG.standard_normal(shape)


# -- batch norm -------------------------------------------------------------------------------------
def test_batch_norm_train_eval_and_running_stats():
    x = rand(4, 3, 5, 5) * 2 + 1
    bn = nn.BatchNorm2D(3, momentum=0.8).to(dtype="float64")
    assert list(bn.state_dict()) == ["weight", "bias", "_mean", "_variance"]
    y = bn(T(x)).numpy()
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))  # biased, Paddle's running-variance convention
    ref = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(y, ref, atol=1e-10)
    np.testing.assert_allclose(bn._mean.numpy(), 0.2 * mean, atol=1e-12)
    np.testing.assert_allclose(bn._variance.numpy(), 0.8 + 0.2 * var, atol=1e-12)
    bn.eval()
    y_eval = bn(T(x)).numpy()
    rm, rv = bn._mean.numpy(), bn._variance.numpy()
    np.testing.assert_allclose(y_eval, (x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5),
                               atol=1e-10)
    np.testing.assert_allclose(bn._mean.numpy(), rm)  # eval does not update


def test_batch_norm_gradcheck_and_1d():
    x, w, b = T(rand(4, 3, 2, 2), True), T(rand(3), True), T(rand(3), True)
    rm, rv = T(np.zeros(3)), T(np.ones(3))
    assert gradcheck(lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=True), [x, w, b])
    assert gradcheck(lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=False), [x, w, b])
    x2 = rand(6, 4)
    bn1 = nn.BatchNorm1D(4)
    y = bn1(T(x2.astype(np.float32))).numpy()
    np.testing.assert_allclose(y, (x2 - x2.mean(0)) / np.sqrt(x2.var(0) + 1e-5), atol=1e-4)
    assert nn.BatchNorm1D(4)(T(rand(2, 4, 7).astype(np.float32))).shape == [2, 4, 7]
    nhwc = F.batch_norm(T(x2.reshape(6, 1, 1, 4)), T(np.zeros(4)), T(np.ones(4)), training=True,
                        data_format="NHWC")
    np.testing.assert_allclose(nhwc.numpy().reshape(6, 4), (x2 - x2.mean(0)) / np.sqrt(x2.var(0) + 1e-5), atol=1e-10)
    with pytest.raises(ValueError, match="batch_norm"):
        F.batch_norm(T(rand(2, 3, 4)), T(np.zeros(5)), T(np.ones(5)), training=True)
    old = nn.BatchNorm(3)
    assert old(ddg.randn([2, 3, 4, 4])).shape == [2, 3, 4, 4]
    assert sorted(old.state_dict()) == ["_mean", "_variance", "bias", "weight"]


def test_batch_norm_use_global_stats_in_training():
    bn = nn.BatchNorm2D(2, use_global_stats=True)
    x = ddg.randn([3, 2, 4, 4])
    np.testing.assert_allclose(bn(x).numpy(), x.numpy() / np.sqrt(1 + 1e-5), rtol=1e-5)
    np.testing.assert_array_equal(bn._mean.numpy(), 0)


# -- layer / group / instance norm ---------------------------------------------------------------------------
def test_layer_norm():
    x = rand(2, 3, 4)
    ln = nn.LayerNorm([3, 4]).to(dtype="float64")
    assert ln.weight.shape == [12]
    y = ln(T(x)).numpy()
    m = x.mean(axis=(1, 2), keepdims=True)
    v = x.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(y, (x - m) / np.sqrt(v + 1e-5), atol=1e-10)
    w, b = T(rand(4), True), T(rand(4), True)
    assert gradcheck(lambda x, w, b: F.layer_norm(x, 4, w, b), [T(x, True), w, b])
    with pytest.raises(ValueError, match="layer_norm"):
        F.layer_norm(T(x), [5])


def test_group_and_instance_norm():
    x = rand(2, 6, 3, 3)
    y = F.group_norm(T(x), 3).numpy()
    xr = x.reshape(2, 3, -1)
    ref = ((xr - xr.mean(-1, keepdims=True)) / np.sqrt(xr.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(y, ref, atol=1e-10)
    w, b = T(rand(6), True), T(rand(6), True)
    assert gradcheck(lambda x, w, b: F.group_norm(x, 2, 1e-5, w, b), [T(x[:1, :, :2, :2], True), w, b])
    gn = nn.GroupNorm(3, 6)
    assert gn(T(x.astype(np.float32))).shape == [2, 6, 3, 3]
    with pytest.raises(ValueError, match="GroupNorm"):
        nn.GroupNorm(4, 6)
    inst = F.instance_norm(T(x)).numpy()
    m, v = x.mean(axis=(2, 3), keepdims=True), x.var(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(inst, (x - m) / np.sqrt(v + 1e-5), atol=1e-10)
    assert nn.InstanceNorm2D(6)(T(x.astype(np.float32))).shape == [2, 6, 3, 3]


# -- dropout ----------------------------------------------------------------------------------------------
def test_dropout_modes_and_seed():
    x = ddg.ones([200, 50])
    ddg.seed(5)
    a = F.dropout(x, 0.3).numpy()
    ddg.seed(5)
    b = F.dropout(x, 0.3).numpy()
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a)) <= {0.0, np.float32(1 / 0.7)}
    assert abs((a == 0).mean() - 0.3) < 0.02
    np.testing.assert_array_equal(F.dropout(x, 0.3, training=False).numpy(), 1.0)
    down = F.dropout(x, 0.3, mode="downscale_in_infer").numpy()
    assert set(np.unique(down)) <= {0.0, 1.0}
    np.testing.assert_allclose(F.dropout(x, 0.3, training=False, mode="downscale_in_infer").numpy(), 0.7)
    rows = F.dropout(x, 0.5, axis=0).numpy()
    assert np.all((rows == 0).all(axis=1) | (rows != 0).all(axis=1))
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), 0)
    layer = nn.Dropout(0.5)
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), 1.0)
    with pytest.raises(ValueError, match="dropout"):
        F.dropout(x, 1.5)
    xg = T(np.ones((4, 4)), True)
    ddg.seed(2)
    out = F.dropout(xg, 0.5)
    out.sum().backward()
    np.testing.assert_array_equal(xg.grad.numpy(), out.numpy())
    d2 = F.dropout2d(ddg.ones([4, 8, 3, 3]), 0.5).numpy()
    assert np.all((d2 == 0).all(axis=(2, 3)) | (d2 != 0).all(axis=(2, 3)))


# -- embedding ----------------------------------------------------------------------------------------------
def test_embedding():
    ddg.seed(0)
    emb = nn.Embedding(10, 4, padding_idx=2)
    np.testing.assert_array_equal(emb.weight.numpy()[2], 0)
    ids = ddg.to_tensor(np.array([[1, 2, 3], [3, 3, 9]]))
    with ddg.no_grad():
        emb.weight.set_value(np.arange(40, dtype=np.float32).reshape(10, 4))
    out = emb(ids)
    assert out.shape == [2, 3, 4]
    np.testing.assert_array_equal(out.numpy()[0, 1], 0)  # padding row gives zeros
    np.testing.assert_array_equal(out.numpy()[1, 2], np.arange(36, 40))
    out.sum().backward()
    g = emb.weight.grad.numpy()
    np.testing.assert_array_equal(g[:, 0], [0, 1, 0, 3, 0, 0, 0, 0, 0, 1])
    w = T(rand(5, 3), True)
    assert gradcheck(lambda w: F.embedding(ddg.to_tensor(np.array([0, 4, 4, 1])), w, padding_idx=-1), [w])
    with pytest.raises(ValueError, match="embedding"):
        F.embedding(ddg.to_tensor(np.array([7])), w)
    with pytest.raises(TypeError, match="embedding"):
        F.embedding(T(np.array([1.0])), w)


# -- pad -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,npmode", [("constant", "constant"), ("reflect", "reflect"),
                                         ("replicate", "edge"), ("circular", "wrap")])
def test_pad_modes(mode, npmode):
    x = rand(2, 3, 4, 5)
    y = F.pad(T(x), [1, 2, 2, 1], mode=mode)  # [left, right, top, bottom]
    np.testing.assert_array_equal(y.numpy(), np.pad(x, ((0, 0), (0, 0), (2, 1), (1, 2)), mode=npmode))
    assert gradcheck(lambda x: F.pad(x, [1, 2, 2, 1], mode=mode), [T(x[:1, :1], True)])
    layer = nn.Pad2D([1, 1, 0, 2], mode=mode)
    assert layer(T(x)).shape == [2, 3, 6, 7]


def test_pad_constant_all_dims_value_and_nhwc():
    x = rand(2, 3)
    y = F.pad(T(x), [1, 0, 0, 2], value=7.0)
    np.testing.assert_array_equal(y.numpy(), np.pad(x, ((1, 0), (0, 2)), constant_values=7.0))
    x4 = rand(1, 4, 5, 2)
    y4 = F.pad(T(x4), [1, 2, 3, 0], mode="reflect", data_format="NHWC")
    np.testing.assert_array_equal(y4.numpy(), np.pad(x4, ((0, 0), (3, 0), (1, 2), (0, 0)), mode="reflect"))
    x3 = rand(2, 3, 6)
    np.testing.assert_array_equal(nn.Pad1D([2, 1], mode="replicate")(T(x3)).numpy(),
                                  np.pad(x3, ((0, 0), (0, 0), (2, 1)), mode="edge"))
    with pytest.raises(ValueError, match="pad"):
        F.pad(T(x4), [1, 2, 3], mode="reflect")


@pytest.mark.parametrize("mode,npmode", [("constant", "constant"), ("reflect", "reflect"),
                                         ("replicate", "edge"), ("circular", "wrap")])
def test_pad_3d_every_side_first_and_second_order(mode, npmode):
    # pads as wide as each mode allows, on three axes at once: the borders of one axis are
    # copied from (and their gradient added back onto) the already padded other axes
    x = rand(1, 2, 3, 4, 3)
    pads = [2, 1, 0, 3, 2, 2]  # [left, right, top, bottom, front, back]
    kw = {"value": 0.5} if mode == "constant" else {}
    ref = np.pad(x, ((0, 0), (0, 0), (2, 2), (0, 3), (2, 1)), mode=npmode,
                 **({"constant_values": 0.5} if mode == "constant" else {}))
    np.testing.assert_array_equal(F.pad(T(x), pads, mode=mode, **kw).numpy(), ref)
    xs = T(x[:, :1], True)
    assert gradcheck(lambda x: F.pad(x, pads, mode=mode, **kw), [xs])
    assert gradgradcheck(lambda x: F.pad(x, pads, mode=mode, **kw) ** 2, [xs])
    if mode in ("reflect", "circular"):  # reflect: pad < size, circular: pad <= size (H is 4)
        with pytest.raises(ValueError, match="pad"):
            F.pad(T(x), [0, 0, 4 if mode == "reflect" else 5, 0, 0, 0], mode=mode)


# -- normalize -----------------------------------------------------------------------------------------------
def test_normalize():
    x = rand(3, 4)
    np.testing.assert_allclose(F.normalize(T(x)).numpy(), x / np.linalg.norm(x, axis=1, keepdims=True))
    np.testing.assert_allclose(F.normalize(T(x), p=1, axis=0).numpy(), x / np.abs(x).sum(0, keepdims=True))
    z = T(np.zeros((2, 3)), True)
    out = F.normalize(z)
    out.sum().backward()
    assert np.isfinite(z.grad.numpy()).all() and np.all(out.numpy() == 0)
    assert gradcheck(lambda x: F.normalize(x, axis=-1), [T(x, True)])


# -- interpolate -------------------------------------------------------------------------------------------------
def _ref_linear_axis(x, axis, n_out, align_corners, align_mode=0):
    n_in = x.shape[axis]
    k = np.arange(n_out)
    if align_corners:
        src = k * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0)
    elif align_mode == 0:
        src = np.maximum((k + 0.5) * n_in / n_out - 0.5, 0)
    else:
        src = k * n_in / n_out
    i0 = np.minimum(np.floor(src).astype(int), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = (src - i0).reshape([-1 if d == axis else 1 for d in range(x.ndim)])
    return np.take(x, i0, axis) * (1 - lam) + np.take(x, i1, axis) * lam


def test_interpolate_nearest_and_bilinear():
    x = rand(2, 3, 4, 5)
    y = F.interpolate(T(x), scale_factor=2, mode="nearest").numpy()
    np.testing.assert_array_equal(y, x.repeat(2, axis=2).repeat(2, axis=3))
    y = F.interpolate(T(x), size=[3, 7], mode="nearest").numpy()
    ri, ci = np.floor(np.arange(3) * 4 / 3).astype(int), np.floor(np.arange(7) * 5 / 7).astype(int)
    np.testing.assert_array_equal(y, x[:, :, ri][:, :, :, ci])
    for ac in (False, True):
        y = F.interpolate(T(x), size=[7, 9], mode="bilinear", align_corners=ac).numpy()
        ref = _ref_linear_axis(_ref_linear_axis(x, 2, 7, ac), 3, 9, ac)
        np.testing.assert_allclose(y, ref, atol=1e-12)
    y = F.interpolate(T(x), size=[6, 6], mode="bilinear", align_mode=1).numpy()
    np.testing.assert_allclose(y, _ref_linear_axis(_ref_linear_axis(x, 2, 6, False, 1), 3, 6, False, 1), atol=1e-12)
    assert gradcheck(lambda x: F.interpolate(x, size=[5, 3], mode="bilinear"), [T(x[:1, :1], True)])
    assert gradcheck(lambda x: F.interpolate(x, scale_factor=2), [T(x[:1, :1], True)])
    assert nn.Upsample(scale_factor=2, mode="bilinear")(T(x)).shape == [2, 3, 8, 10]
    assert nn.UpsamplingBilinear2D(size=[8, 8])(T(x)).shape == [2, 3, 8, 8]
    lin = F.interpolate(T(x[:, :, 0]), size=9, mode="linear", align_corners=True).numpy()
    np.testing.assert_allclose(lin, _ref_linear_axis(x[:, :, 0], 2, 9, True), atol=1e-12)
    with pytest.raises(ValueError, match="interpolate"):
        F.interpolate(T(x), size=[2, 2], mode="trilinear")


@pytest.mark.parametrize("mode,npmode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
@pytest.mark.parametrize("shape,pads,fmt", [((2, 3, 7), [2, 3], None), ((2, 3, 5, 4), [1, 2, 3, 0], None),
                                            ((2, 5, 4, 3), [1, 2, 3, 0], "NHWC"),
                                            ((1, 2, 3, 4, 5), [1, 2, 0, 3, 2, 1], None),
                                            ((1, 3, 4, 5, 2), [1, 2, 0, 3, 2, 1], "NDHWC")])
def test_pad_float32_values_and_gradient_are_the_gather_and_its_adjoint(mode, npmode, shape, pads, fmt):
    """Every padded element is a copy of one input element: the output is np.pad's, and the
    gradient adds each output's gradient onto its source (a bincount over np.pad of indices)."""
    x = rand(*shape).astype(np.float32)
    nd = len(shape) - 2
    spatial = list(range(1, 1 + nd)) if fmt else list(range(2, 2 + nd))
    widths = [(0, 0)] * len(shape)
    for k, ax in enumerate(reversed(spatial)):
        widths[ax] = (pads[2 * k], pads[2 * k + 1])
    t = T(x, True)
    y = F.pad(t, pads, mode=mode, data_format=fmt)
    assert y.dtype == ddg.float32
    np.testing.assert_array_equal(y.numpy(), np.pad(x, widths, mode=npmode))
    g = rand(*y.shape).astype(np.float32)
    y.backward(T(g))
    src = np.pad(np.arange(x.size).reshape(shape), widths, mode=npmode)
    ref = np.bincount(src.ravel(), weights=g.ravel().astype(np.float64), minlength=x.size).reshape(shape)
    assert t.grad.dtype == ddg.float32
    np.testing.assert_allclose(t.grad.numpy(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dt,stat_dt", [("float32", "float32"), ("float64", "float64"), ("float32", "float64")])
@pytest.mark.parametrize("momentum", [0.9, 0.1, 0.0, 1.0])
def test_running_stat_update_on_arrays_equals_the_ops(dt, stat_dt, momentum):
    """The running statistics are updated on the arrays while nothing watches the ops, and
    by ops (which ``to_static`` records) while something does (here the nan check): the
    same values to the bit, the same dtype, the version bumped either way."""
    from ddg import dispatch
    from ddg.nn.functional import norm as N
    rng = np.random.default_rng(3)
    r0 = rng.standard_normal(37).astype(dt)
    stat = ddg.to_tensor(rng.standard_normal((1, 37, 1, 1)).astype(stat_dt))
    fast, ops = ddg.to_tensor(r0.copy()), ddg.to_tensor(r0.copy())
    v0 = fast._vc[0]
    N._update(fast, stat, momentum)
    with dispatch.intercept(dispatch.CHECK_NAN_INF, True):
        N._update(ops, stat, momentum)
    assert fast.dtype == ops.dtype == getattr(ddg, dt)
    np.testing.assert_array_equal(fast.numpy(), ops.numpy())
    assert fast._vc[0] == v0 + 1
