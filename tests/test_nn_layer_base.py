"""nn.Layer registration, traversal, state dicts, hooks, containers, ParamAttr and initializers."""
import re
import warnings

import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.nn import initializer as I


class Block(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.scale = self.create_parameter([3], default_initializer=I.Constant(2.0))
        self.register_buffer("count", ddg.zeros([1]))
        self.register_buffer("scratch", ddg.zeros([2]), persistable=False)
        self.fc2 = nn.Linear(3, 2, bias_attr=False)

    def forward(self, x):
        return self.fc2(self.fc1(x) * self.scale)


def test_registration_order_and_names():
    b = Block()
    names = [n for n, _ in b.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]  # own params first, then sublayers
    assert list(b.state_dict().keys()) == ["scale", "count", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert [n for n, _ in b.named_sublayers()] == ["fc1", "fc2"]
    assert len(b.children()) == 2 and len(b.sublayers(include_self=True)) == 3
    assert [n for n, _ in b.named_buffers()] == ["count", "scratch"]
    assert b.fc2.bias is None


def test_shared_parameter_listed_once():
    a = nn.Linear(2, 2)
    s = nn.Sequential(a, nn.ReLU(), a)
    assert len(s.parameters()) == 2


def test_state_dict_round_trip_and_errors():
    ddg.seed(1)
    src, dst = Block(), Block()
    x = ddg.randn([5, 4])
    dst.set_state_dict(src.state_dict())
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())
    bad = dict(src.state_dict())
    bad["fc1.weight"] = ddg.zeros([9, 9])
    with pytest.raises(ValueError, match=r"fc1\.weight.*\[9, 9\].*\[4, 3\]"):
        dst.set_state_dict(bad)
    partial = {k: v for k, v in src.state_dict().items() if k != "scale"}
    partial["extra.thing"] = ddg.zeros([1])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        missing, unexpected = dst.set_state_dict(partial)
    assert missing == ["scale"] and unexpected == ["extra.thing"]
    assert "scale" in str(w[0].message) and "extra.thing" in str(w[0].message)


def test_train_eval_apply_hooks_and_clear_gradients():
    b = Block()
    b.eval()
    assert not b.training and not b.fc1.training
    b.train()
    assert b.fc2.training
    seen = []
    b.apply(lambda layer: seen.append(type(layer).__name__))
    assert seen == ["Linear", "Linear", "Block"]
    calls = []
    h1 = b.register_forward_pre_hook(lambda layer, inp: calls.append("pre"))
    h2 = b.register_forward_post_hook(lambda layer, inp, out: out * 0)
    out = b(ddg.ones([1, 4]))
    assert calls == ["pre"] and float(out.abs().sum()) == 0.0
    h1.remove()
    h2.remove()
    out = b(ddg.ones([1, 4]))
    out.sum().backward()
    assert b.fc1.weight.grad is not None
    b.clear_gradients()
    assert float(b.fc1.weight.grad.abs().sum()) == 0.0


def test_to_dtype_keeps_parameter_objects():
    b = Block()
    p = b.fc1.weight
    b.to(dtype="float64")
    assert b.fc1.weight is p and p.dtype == ddg.float64
    assert b(ddg.ones([1, 4], dtype="float64")).dtype == ddg.float64


def test_repr_tree():
    text = repr(Block())
    assert text.startswith("Block(\n  (fc1): Linear(in_features=4, out_features=3")


def test_containers():
    seq = nn.Sequential(("a", nn.Linear(2, 3)), ("b", nn.ReLU()))
    assert isinstance(seq["a"], nn.Linear) and len(seq) == 2 and isinstance(seq[1], nn.ReLU)
    ll = nn.LayerList([nn.Linear(2, 2) for _ in range(3)])
    ll.append(nn.Linear(2, 2))
    assert len(ll) == 4 and len(ll.parameters()) == 8
    ld = nn.LayerDict({"x": nn.Linear(1, 1)})
    ld["y"] = nn.Linear(1, 1)
    assert list(ld.keys()) == ["x", "y"] and "y" in ld
    pl = nn.ParameterList([ddg.nn.Layer().create_parameter([2]) for _ in range(2)])
    assert len(pl.parameters()) == 2


def test_param_attr_and_trainable():
    lin = nn.Linear(3, 2, weight_attr=ddg.ParamAttr(name="w", initializer=I.Constant(0.5), learning_rate=0.1,
                                                     trainable=False))
    assert lin.weight.name == "w" and lin.weight.stop_gradient and not lin.weight.trainable
    assert lin.weight.optimize_attr["learning_rate"] == 0.1
    np.testing.assert_array_equal(lin.weight.numpy(), np.full((3, 2), 0.5))
    assert float(lin.bias.abs().sum()) == 0


@pytest.mark.parametrize("init,check", [
    (I.Constant(3.0), lambda a: np.all(a == 3.0)),
    (I.Normal(1.0, 0.5), lambda a: abs(a.mean() - 1) < 0.05 and abs(a.std() - 0.5) < 0.05),
    (I.TruncatedNormal(0.0, 1.0), lambda a: np.abs(a).max() <= 2.0 and abs(a.std() - 0.88) < 0.05),
    (I.Uniform(-2, 2), lambda a: a.min() >= -2 and a.max() <= 2 and abs(a.std() - 4 / np.sqrt(12)) < 0.05),
    (I.XavierUniform(), lambda a: np.abs(a).max() <= np.sqrt(6 / (200 + 300))),
    (I.XavierNormal(), lambda a: abs(a.std() - np.sqrt(2 / 500)) < 0.005),
    (I.KaimingUniform(), lambda a: np.abs(a).max() <= np.sqrt(6 / 200)),
    (I.KaimingNormal(), lambda a: abs(a.std() - np.sqrt(2 / 200)) < 0.01),
])
def test_initializers_statistics(init, check):
    p = nn.Layer().create_parameter([200, 300], default_initializer=init)
    assert check(p.numpy())


def test_assign_initializer_and_seeded_reproducibility():
    p = nn.Layer().create_parameter([2, 2], default_initializer=I.Assign(np.eye(2)))
    np.testing.assert_array_equal(p.numpy(), np.eye(2))
    ddg.seed(7)
    a = nn.Linear(5, 5).weight.numpy()
    ddg.seed(7)
    np.testing.assert_array_equal(nn.Linear(5, 5).weight.numpy(), a)


def test_losses_match_numpy():
    F = nn.functional
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((6, 4))
    labels = np.array([0, 3, 1, 1, 2, 0])
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    x = ddg.to_tensor(logits, stop_gradient=False)
    y = ddg.to_tensor(labels)
    np.testing.assert_allclose(F.cross_entropy(x, y).numpy(), -logp[np.arange(6), labels].mean())
    np.testing.assert_allclose(F.cross_entropy(x, y.reshape([6, 1]), reduction="sum").numpy(),
                               -logp[np.arange(6), labels].sum())
    w = np.array([1.0, 2.0, 0.5, 3.0])
    got = F.cross_entropy(x, y, weight=ddg.to_tensor(w)).numpy()
    np.testing.assert_allclose(got, -(w[labels] * logp[np.arange(6), labels]).sum() / w[labels].sum())
    y_ign = ddg.to_tensor(np.array([0, -100, 1, 1, -100, 0]))
    keep = np.array([0, 2, 3, 5])
    # Paddle 3 divides by all N when ignore_index is negative (the ignored samples count as 0)
    np.testing.assert_allclose(F.cross_entropy(x, y_ign).numpy(), -logp[keep, labels[keep]].sum() / 6)
    np.testing.assert_allclose(F.cross_entropy(x, ddg.to_tensor(np.array([0, 2, 1, 1, 2, 0])), ignore_index=2).numpy(),
                               -logp[keep, labels[keep]].mean())
    soft = np.exp(rng.standard_normal((6, 4)))
    soft /= soft.sum(1, keepdims=True)
    np.testing.assert_allclose(F.cross_entropy(x, ddg.to_tensor(soft), soft_label=True).numpy(),
                               -(soft * logp).sum(1).mean())
    np.testing.assert_allclose(F.nll_loss(ddg.to_tensor(logp), y).numpy(), -logp[np.arange(6), labels].mean())
    a, b = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    ta, tb = ddg.to_tensor(a), ddg.to_tensor(b)
    np.testing.assert_allclose(F.mse_loss(ta, tb).numpy(), ((a - b) ** 2).mean())
    np.testing.assert_allclose(F.l1_loss(ta, tb, reduction="none").numpy(), np.abs(a - b))
    d = np.abs(a - b)
    np.testing.assert_allclose(F.smooth_l1_loss(ta, tb).numpy(), np.where(d < 1, 0.5 * d * d, d - 0.5).mean())
    p = 1 / (1 + np.exp(-a))
    t = (b > 0).astype(np.float64)
    bce = -(t * np.log(p) + (1 - t) * np.log(1 - p))
    np.testing.assert_allclose(F.binary_cross_entropy(ddg.to_tensor(p), ddg.to_tensor(t)).numpy(), bce.mean())
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(ta, ddg.to_tensor(t)).numpy(), bce.mean())
    q = np.abs(b) / np.abs(b).sum()
    np.testing.assert_allclose(F.kl_div(ta, ddg.to_tensor(q), reduction="sum").numpy(), (q * (np.log(q) - a)).sum())


@pytest.mark.parametrize("loss", [
    lambda x, y: nn.functional.cross_entropy(x, y),
    lambda x, y: nn.functional.cross_entropy(x, y, weight=ddg.to_tensor([1.0, 2.0, 0.5, 3.0], dtype="float64")),
    lambda x, y: nn.functional.cross_entropy(x, y, label_smoothing=0.1),
    lambda x, y: nn.functional.nll_loss(nn.functional.log_softmax(x), y),
])
def test_loss_gradients(loss):
    x = ddg.to_tensor(np.random.default_rng(3).standard_normal((5, 4)), stop_gradient=False)
    y = ddg.to_tensor(np.array([0, 3, 1, 2, 2]))
    assert ddg.autograd.gradcheck(lambda t: loss(t, y), [x])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_wide_rows_extreme_logits_against_float64(dtype):
    # rows of 3000 classes with large, -inf and equal logits, an ignored sample and labels
    # in int32: loss and gradient against the float64 formula
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((7, 3000)) * 4).astype(dtype)
    x[1, ::3] = -np.inf
    x[2] = 0.0
    x[3, 5] = 1e4 if dtype == "float64" else 80.0
    x[4] *= 30
    y = rng.integers(0, 3000, 7).astype(np.int32)
    y[1] = 4
    y[3] = 5
    y[5] = -100
    xd = ddg.to_tensor(x, stop_gradient=False)
    per = nn.functional.cross_entropy(xd, ddg.to_tensor(y), reduction="none")
    (per.reshape([7]) * ddg.to_tensor(np.arange(1, 8, dtype=dtype))).sum().backward()
    x64 = x.astype(np.float64)
    m = x64.max(1, keepdims=True)
    logp = x64 - m - np.log(np.exp(x64 - m).sum(1, keepdims=True))
    keep = y != -100
    ref = np.where(keep, -logp[np.arange(7), np.where(keep, y, 0)], 0.0)
    tol = 2e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(per.numpy().reshape(7), ref, rtol=tol, atol=tol)
    onehot = np.eye(3000)[np.where(keep, y, 0)]
    gref = (np.exp(logp) - onehot) * (keep * np.arange(1, 8))[:, None]
    np.testing.assert_allclose(xd.grad.numpy(), gref, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("classes", [1, 5, 8, 13, 67])
def test_cross_entropy_row_max_at_every_lane_and_in_the_tail(classes):
    # the row maximum is found over eight interleaved lanes plus a tail: put the largest
    # logit (far above the rest: shifted by a wrong maximum, exp would saturate) at every
    # position
    rows = classes
    x = np.random.default_rng(3).standard_normal((rows, classes)).astype(np.float32)
    x[np.arange(rows), np.arange(rows)] = 200.0
    y = np.arange(rows) % classes
    xd = ddg.to_tensor(x, stop_gradient=False)
    per = nn.functional.cross_entropy(xd, ddg.to_tensor(y), reduction="none")
    per.sum().backward()
    x64 = x.astype(np.float64)
    logp = x64 - x64.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    np.testing.assert_allclose(per.numpy().reshape(rows), -logp[np.arange(rows), y], rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(xd.grad.numpy(), np.exp(logp) - np.eye(classes)[y], rtol=2e-6, atol=2e-5)


def test_cross_entropy_nan_logit_gives_nan_loss_for_its_row_only():
    x = np.random.default_rng(4).standard_normal((3, 21)).astype(np.float32)
    x[0, 0] = np.nan
    x[1, 17] = np.nan
    per = nn.functional.cross_entropy(ddg.to_tensor(x), ddg.to_tensor(np.array([3, 3, 3])), reduction="none")
    out = per.numpy().reshape(3)
    assert np.isnan(out[0]) and np.isnan(out[1]) and np.isfinite(out[2])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_weights_ignore_index_images_and_second_order(reduction):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 4, 2))             # [N, C, d]: 6 samples of 4 classes
    lab = np.array([[0, 3], [2, 2], [1, 3]])
    wts = np.array([1.0, 2.0, 0.5, 3.0])
    flat_x, flat_l = x.transpose(0, 2, 1).reshape(6, 4), lab.reshape(6)
    keep = flat_l != 3                               # ignore_index=3
    per = np.where(keep, -flat_x[np.arange(6), np.where(keep, flat_l, 0)] * wts[np.where(keep, flat_l, 0)], 0)
    ref = {"mean": per.sum() / (wts[flat_l] * keep).sum(), "sum": per.sum(), "none": per.reshape(3, 2)}[reduction]
    args = dict(weight=ddg.to_tensor(wts), ignore_index=3, reduction=reduction)
    xt = ddg.to_tensor(x, stop_gradient=False)
    out = F.nll_loss(xt, ddg.to_tensor(lab), **args)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-14)
    assert ddg.autograd.gradcheck(lambda t: F.nll_loss(t, ddg.to_tensor(lab), **args), [xt])
    assert ddg.autograd.gradgradcheck(lambda t: F.nll_loss(t, ddg.to_tensor(lab), **args) ** 2, [xt])
    every_ignored = F.nll_loss(ddg.to_tensor(x[:1, :, :1]), ddg.to_tensor(np.array([[3]])), **args)
    assert not np.isnan(every_ignored.numpy()).any() and not every_ignored.numpy().any()


def test_sigmoid_cross_entropy_losses_extreme_logits_both_gradients_second_order():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 4)) * 3
    x[0, :2] = [800.0, -800.0]           # exp(|x|) would overflow: the stable form stays finite
    y = rng.uniform(size=(3, 4))
    ref = np.logaddexp(0, x) - x * y      # softplus(x) - x y
    xt, yt = ddg.to_tensor(x, stop_gradient=False), ddg.to_tensor(y, stop_gradient=False)
    out = F.binary_cross_entropy_with_logits(xt, yt, reduction="none")
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-13)
    out.backward(ddg.ones_like(out))
    np.testing.assert_allclose(xt.grad.numpy(), 0.5 + 0.5 * np.tanh(x / 2) - y, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(yt.grad.numpy(), -x, rtol=1e-15)
    np.testing.assert_allclose(F.multi_label_soft_margin_loss(ddg.to_tensor(x), ddg.to_tensor(y), reduction="none")
                               .numpy(), ref.mean(-1), rtol=1e-13)
    xs, ys = ddg.to_tensor(x[1:], stop_gradient=False), ddg.to_tensor(y[1:], stop_gradient=False)
    for fn in (lambda a, b: F.binary_cross_entropy_with_logits(a, b, weight=ddg.to_tensor(y[1:])),
               lambda a, b: F.multi_label_soft_margin_loss(a, b, reduction="sum")):
        assert ddg.autograd.gradcheck(fn, [xs, ys])
        assert ddg.autograd.gradgradcheck(fn, [xs, ys])


def test_binary_cross_entropy_clipped_ends_both_gradients_second_order():
    rng = np.random.default_rng(10)
    x, y = rng.uniform(size=(3, 4)), rng.uniform(size=(3, 4))
    x[0, :2] = [0.0, 1.0]                 # log(0) clipped at 1e-12: finite, no gradient through the clip
    cx, c1x = np.maximum(x, 1e-12), np.maximum(1 - x, 1e-12)
    xt, yt = ddg.to_tensor(x, stop_gradient=False), ddg.to_tensor(y, stop_gradient=False)
    out = F.binary_cross_entropy(xt, yt, reduction="none")
    np.testing.assert_allclose(out.numpy(), -(y * np.log(cx) + (1 - y) * np.log(c1x)), rtol=1e-14)
    out.backward(ddg.ones_like(out))
    gx = np.where(1 - x >= 1e-12, (1 - y) / c1x, 0) - np.where(x >= 1e-12, y / cx, 0)
    np.testing.assert_allclose(xt.grad.numpy(), gx, rtol=1e-14)
    np.testing.assert_allclose(yt.grad.numpy(), np.log(c1x) - np.log(cx), rtol=1e-14)
    xs, ys = ddg.to_tensor(x[1:] * 0.8 + 0.1, stop_gradient=False), ddg.to_tensor(y[1:], stop_gradient=False)
    fn = lambda a, b: F.binary_cross_entropy(a, b, weight=ddg.to_tensor(y[1:]))  # noqa: E731
    assert ddg.autograd.gradcheck(fn, [xs, ys])
    assert ddg.autograd.gradgradcheck(fn, [xs, ys])
    for loss, ref in ((F.binary_cross_entropy, -(0.6 * np.log(0.3) + 0.4 * np.log(0.7))),
                      (F.binary_cross_entropy_with_logits, np.logaddexp(0, 0.3) - 0.18),
                      (F.smooth_l1_loss, 0.5 * 0.09)):    # 0-d inputs
        s = ddg.to_tensor(np.float64(0.3), stop_gradient=False)
        out = loss(s, ddg.to_tensor(np.float64(0.6 if loss is not F.smooth_l1_loss else 0.0)))
        out.backward()
        assert out.item() == pytest.approx(ref, rel=1e-14) and s.grad.shape == []


def test_loss_errors():
    F = nn.functional
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(ddg.ones([2]), ddg.ones([2]), reduction="avg")
    with pytest.raises(ValueError, match="label shape"):
        F.cross_entropy(ddg.ones([4, 3]), ddg.to_tensor([0, 1]))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        F.cross_entropy(ddg.ones([2, 3]), ddg.to_tensor([0, 5]))
    with pytest.raises(ValueError, match="linear"):
        nn.Linear(3, 2)(ddg.ones([2, 4]))


# ---------------------------------------------------------------------------
# losses refuse labels that make the loss meaningless (PyTorch raises; Paddle returns a value)

def _t(a):
    return ddg.to_tensor(np.asarray(a))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("form", ["functional", "layer"])
def test_binary_cross_entropy_refuses_values_outside_0_1(dtype, form):
    bce = F.binary_cross_entropy if form == "functional" else nn.BCELoss()
    p = _t(np.array([[0.3, 0.6], [0.1, 0.9]], dtype))
    for bad, shown in ((2.0, "0 to 2"), (-1.0, "-1 to 1"), (1.0001, "0 to 1.0001"), (np.nan, "nan to nan")):
        label = np.array([[1.0, 0.0], [0.0, 1.0]], dtype)
        label[0, 0] = bad
        with pytest.raises(ValueError, match=rf"binary_cross_entropy: label must lie in \[0, 1\], got values "
                                             rf"from {re.escape(shown)}"):
            bce(p, _t(label))
        bad_p = np.array([[0.3, 0.6], [0.1, 0.9]], dtype)
        bad_p[1, 1] = bad
        with pytest.raises(ValueError, match=r"binary_cross_entropy: input must lie in \[0, 1\]"):
            bce(_t(bad_p), _t(np.ones((2, 2), dtype)))
    with pytest.raises(TypeError, match="label must be a floating-point Tensor, got dtype int64"):
        bce(p, _t(np.array([[1, 0], [0, 1]])))
    # the edges and soft targets are fine, and the value is the formula's
    label = np.array([[0.0, 1.0], [0.25, 1.0]], dtype)
    got = float(bce(p, _t(label)))
    pp = p.numpy().astype(np.float64)
    want = -np.mean(label * np.log(pp) + (1 - label) * np.log(1 - pp))
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("form", ["functional", "layer"])
def test_nll_loss_refuses_labels_out_of_range_or_not_integers(form):
    nll = F.nll_loss if form == "functional" else nn.NLLLoss()
    logp = F.log_softmax(_t(np.random.default_rng(0).standard_normal((4, 3))), axis=1)
    for bad in (3, -1, 7):
        with pytest.raises(ValueError, match=rf"nll_loss: label values must lie in \[0, 3\) .*got \[{bad}\]"):
            nll(logp, _t(np.array([0, bad, 2, 1])))
    with pytest.raises(TypeError, match="nll_loss: label must be an integer Tensor of class indices, got dtype float"):
        nll(logp, _t(np.array([0.0, 1.0, 2.0, 1.0])))
    with pytest.raises(ValueError, match=r"nll_loss: label shape \[3\] does not fit input shape \[4, 3\]"):
        nll(logp, _t(np.array([0, 1, 2])))
    ok = nll(logp, _t(np.array([0, -100, 2, 1])))          # ignore_index is allowed
    lp = logp.numpy()
    np.testing.assert_allclose(float(ok), -(lp[0, 0] + lp[2, 2] + lp[3, 1]) / 3, rtol=1e-6)


def test_cross_entropy_refuses_fractional_float_labels():
    logits = _t(np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32))
    with pytest.raises(ValueError, match="cross_entropy: label has dtype float32 with values that are not whole"):
        F.cross_entropy(logits, _t(np.array([0.0, 1.5, 2.0], np.float32)))
    # whole-number float labels stay accepted, as in Paddle (cast to int64)
    a = float(F.cross_entropy(logits, _t(np.array([0.0, 1.0, 3.0], np.float32))))
    b = float(F.cross_entropy(logits, _t(np.array([0, 1, 3]))))
    assert a == b
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 4\)"):
        F.cross_entropy(logits, _t(np.array([0, 4, 1])))


@pytest.mark.parametrize("make,layer", [
    (lambda: ddg.nn.Linear(-3, 4), "Linear"), (lambda: ddg.nn.Linear(3.5, 2), "Linear"),
    (lambda: ddg.nn.BatchNorm2D(-2), "BatchNorm2D"), (lambda: ddg.nn.LayerNorm(-2), "LayerNorm"),
    (lambda: ddg.nn.Bilinear(-1, 2, 3), "Bilinear"), (lambda: ddg.nn.Embedding(-1, 4), "Embedding"),
    (lambda: ddg.nn.Conv2D(-1, 4, 3), "Conv2D")])
def test_negative_layer_sizes_name_the_layer(make, layer):
    """A negative or fractional size given to a layer is a ValueError naming the layer (before,
    numpy's "negative dimensions are not allowed" or "math domain error" from inside)."""
    with pytest.raises(ValueError, match=rf"ddg\.nn\.{layer}: "):
        make()
    assert ddg.nn.Linear(3, 0).weight.shape == [3, 0]      # an empty layer stays allowed, as in Paddle


def test_create_parameter_names_itself_on_a_bad_shape():
    for shape in ([-1, 3], [2.5, 3]):
        with pytest.raises(ValueError, match=r"ddg\.create_parameter: shape must be non-negative integers"):
            ddg.create_parameter(shape, "float32")
    assert ddg.create_parameter([2, 3.0], "float32").shape == [2, 3]
