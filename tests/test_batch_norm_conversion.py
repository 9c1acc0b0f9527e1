"""``SyncBatchNorm.convert_sync_batchnorm`` keeps what the model computes: every batch
norm kind and argument, in training and eval mode, gives the same outputs, gradients and
updated statistics (bit for bit, on one rank) before and after the conversion, with the
same state_dict. Also the fluid-style ``BatchNorm``'s own modes against numpy."""
import itertools
import warnings

import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn

CHANNELS = 3


def _input_shape(fmt, ndim):
    """A small input of rank ``ndim`` with CHANNELS on the axis ``fmt`` puts them."""
    spatial = [4, 3, 2][:ndim - 2]
    if fmt in ("NLC", "NHWC", "NDHWC"):
        return [5] + spatial + [CHANNELS]
    return [5, CHANNELS] + spatial


def _kinds():
    """(id, factory, input rank) over every batch norm class, format and argument."""
    out = []
    dims = {nn.BatchNorm1D: {"NC": 2, "NCL": 3, "NLC": 3}, nn.BatchNorm2D: {"NCHW": 4, "NHWC": 4},
            nn.BatchNorm3D: {"NCDHW": 5, "NDHWC": 5}}
    for cls, fmts in dims.items():
        for (fmt, ndim), ugs, affine in itertools.product(fmts.items(), (None, True, False),
                                                          ("both", "no_weight", "no_bias")):
            kw = dict(data_format=fmt, use_global_stats=ugs, momentum=0.7, epsilon=1e-3)
            if affine == "no_weight":
                kw["weight_attr"] = False
            elif affine == "no_bias":
                kw["bias_attr"] = False
            out.append((f"{cls.__name__}-{fmt}-ugs{ugs}-{affine}",
                        lambda cls=cls, kw=kw: cls(CHANNELS, **kw), fmt, ndim))
    fluid = [dict(act="relu"), dict(act="sigmoid", momentum=0.5), dict(act="tanh", data_layout="NHWC"),
             dict(act="hard_swish", data_layout="NHWC", momentum=0.6),
             dict(is_test=True), dict(is_test=True, act="relu"), dict(use_global_stats=True, act="relu"),
             dict(trainable_statistics=True), dict(param_attr=False, bias_attr=False, act="relu"),
             dict(moving_mean_name="mm", moving_variance_name="mv", in_place=True, epsilon=1e-2),
             dict(dtype="float64")]
    for kw, ndim in itertools.product(fluid, (2, 3, 4, 5)):
        fmt = "NHWC" if kw.get("data_layout") == "NHWC" else "NCHW"
        if ndim == 2 and fmt == "NHWC":
            continue
        name = "-".join(f"{k}={v}" for k, v in kw.items())
        out.append((f"BatchNorm-{name}-{ndim}d", lambda kw=kw: nn.BatchNorm(CHANNELS, **kw), fmt, ndim))
    return out


KINDS = _kinds()


def _pair(factory, rng):
    """Two identical layers with non-trivial parameters and running statistics."""
    a, b = factory(), factory()
    for p, q in zip(a.parameters(), b.parameters()):
        v = rng.uniform(0.5, 1.5, p.shape) if p.name.endswith(("w_2",)) else rng.standard_normal(p.shape)
        p.set_value(v.astype(p.dtype))
        q.set_value(v.astype(q.dtype))
    return a, b


def _step(layer, x, g):
    """Forward and backward with cotangent ``g``: (output, input grad, param grads, state)."""
    xt = ddg.to_tensor(x, stop_gradient=False)
    y = layer(xt)
    (y * ddg.to_tensor(g)).sum().backward()
    grads = [None if p.grad is None else p.grad.numpy().copy() for p in layer.parameters()]
    for p in layer.parameters():
        p.clear_grad()
    state = {k: v.numpy().copy() for k, v in layer.state_dict().items()}
    return y.numpy(), xt.grad.numpy(), grads, state


@pytest.mark.parametrize("kind", KINDS, ids=[k[0] for k in KINDS])
def test_conversion_keeps_the_function(kind):
    _, factory, fmt, ndim = kind
    rng = np.random.default_rng(0)
    ddg.set_default_dtype("float64")
    try:
        before, after = _pair(factory, rng)
        initially_training = before.training
        keys = list(before.state_dict())
        params = list(after.parameters())
        conv = nn.SyncBatchNorm.convert_sync_batchnorm(after)
        assert isinstance(conv, nn.SyncBatchNorm)
        assert conv.training == initially_training          # is_test starts in eval mode, as Paddle
        assert list(conv.state_dict()) == keys
        assert all(p is q for p, q in zip(conv.parameters(), params))   # the same Parameter objects
        shape = _input_shape(fmt, ndim)
        # the initial mode, then training, then eval: two steps each
        for mode in (None, "train", "train", "eval", "eval"):
            if mode is not None:
                getattr(before, mode)()
                getattr(conv, mode)()
            x = rng.standard_normal(shape) * 2 + 0.5
            g = rng.standard_normal(shape)
            ref, got = _step(before, x, g), _step(conv, x, g)
            np.testing.assert_array_equal(got[0], ref[0])
            np.testing.assert_array_equal(got[1], ref[1])
            for a, b in zip(got[2], ref[2]):
                assert (a is None) == (b is None)
                if a is not None:
                    np.testing.assert_array_equal(a, b)
            for k in keys:
                np.testing.assert_array_equal(got[3][k], ref[3][k], err_msg=k)
    finally:
        ddg.set_default_dtype("float32")


def test_checkpoints_load_both_ways():
    def net():
        ddg.seed(5)
        return nn.Sequential(nn.Conv2D(2, 3, 1), nn.BatchNorm(3, act="relu"), nn.Conv2D(3, 4, 1, groups=1),
                             nn.BatchNorm2D(4, weight_attr=False), nn.Flatten(), nn.BatchNorm1D(4 * 9))
    x = ddg.to_tensor(np.random.default_rng(1).standard_normal((4, 2, 3, 3)).astype(np.float32))
    plain = net()
    plain(x)                                   # move the statistics away from their initial values
    synced = nn.SyncBatchNorm.convert_sync_batchnorm(net())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert synced.set_state_dict(plain.state_dict()) == ([], [])
        plain.eval(), synced.eval()
        np.testing.assert_array_equal(synced(x).numpy(), plain(x).numpy())
        synced.train()
        synced(x * 2)
        back = net()
        assert back.set_state_dict(synced.state_dict()) == ([], [])
    for (k, a), (k2, b) in zip(back.state_dict().items(), synced.state_dict().items()):
        assert k == k2
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_tree_walk_hooks_shared_layers_and_data_parallel():
    ddg.seed(0)
    shared = nn.BatchNorm1D(4)
    calls = []
    shared.register_forward_post_hook(lambda layer, inp, out: calls.append(type(layer).__name__))
    model = nn.Sequential(nn.Linear(4, 4), shared, nn.Sequential(nn.Linear(4, 4), shared))
    conv = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert conv is model
    assert isinstance(model[1], nn.SyncBatchNorm) and model[2][1] is model[1]   # still one layer
    model(ddg.randn([3, 4]))
    assert calls == ["SyncBatchNorm"] * 2
    dp = ddg.DataParallel(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1D(4)))
    assert nn.SyncBatchNorm.convert_sync_batchnorm(dp) is dp
    assert isinstance(dp._layers[1], nn.SyncBatchNorm)
    assert nn.SyncBatchNorm.convert_sync_batchnorm(nn.Linear(2, 2)).__class__ is nn.Linear


def test_unconvertible_batch_norms_are_left_with_a_warning():
    class Scaled(nn.BatchNorm2D):
        def forward(self, x):
            return super().forward(x) * 2

    class WithExtra(nn.BatchNorm2D):
        def __init__(self, n):
            super().__init__(n)
            self.gain = self.create_parameter([n])

    class Renamed(nn.BatchNorm2D):          # only its constructor differs: converted
        def __init__(self, n):
            super().__init__(n, momentum=0.5)

    model = nn.Sequential(Scaled(2), nn.Sequential(WithExtra(2)), Renamed(2))
    with pytest.warns(UserWarning) as record:
        nn.SyncBatchNorm.convert_sync_batchnorm(model)
    text = " | ".join(str(w.message) for w in record)
    assert "left 0 (Scaled)" in text and "redefines forward" in text, text
    assert "left 1.0 (WithExtra)" in text and "gain" in text, text
    assert len(record) == 2
    assert type(model[0]) is Scaled and type(model[1][0]) is WithExtra
    assert isinstance(model[2], nn.SyncBatchNorm) and model[2]._momentum == 0.5


def test_converted_layer_keeps_the_input_checks():
    conv = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm2D(3))
    with pytest.raises(ValueError, match="rank 4"):
        conv(ddg.ones([2, 3, 4]))
    with pytest.raises(ValueError, match="channels"):
        conv(ddg.ones([2, 4, 2, 2]))
    with pytest.raises(ValueError, match="act must name"):
        nn.BatchNorm(3, act="no_such_activation")
    with pytest.raises(ValueError, match="act must name"):
        nn.BatchNorm(3, act=F.relu)


# ---------------------------------------------------------------------- fluid BatchNorm vs numpy
def _np_bn(x, mean, var, w, b, eps):
    s = [1, -1] + [1] * (x.ndim - 2)
    return (x - mean.reshape(s)) / np.sqrt(var.reshape(s) + eps) * w.reshape(s) + b.reshape(s)


@pytest.mark.parametrize("act", [None, "relu"])
def test_fluid_batch_norm_modes_follow_paddle(act):
    """Paddle's dygraph BatchNorm: is_test only starts in eval mode; trainable_statistics
    uses (and updates from) batch statistics in eval mode; use_global_stats never does."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 3, 2, 2)) * 2 + 1
    bm, bv = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    f = (lambda v: np.maximum(v, 0)) if act else (lambda v: v)
    one, zero = np.ones(3), np.zeros(3)
    ddg.set_default_dtype("float64")
    try:
        for kw, train, uses_batch in [({"is_test": True}, None, False), ({"is_test": True}, True, True),
                                      ({"trainable_statistics": True}, False, True),
                                      ({"use_global_stats": True}, True, False), ({}, True, True),
                                      ({}, False, False)]:
            bn = nn.BatchNorm(3, act=act, momentum=0.8, **kw)
            if train is not None:
                bn.train() if train else bn.eval()
            y = bn(ddg.to_tensor(x)).numpy()
            if uses_batch:
                np.testing.assert_allclose(y, f(_np_bn(x, bm, bv, one, zero, 1e-5)), rtol=1e-12, atol=1e-12)
                np.testing.assert_allclose(bn._mean.numpy(), 0.2 * bm, rtol=1e-12, atol=1e-15)
                np.testing.assert_allclose(bn._variance.numpy(), 0.8 + 0.2 * bv, rtol=1e-12)
            else:
                np.testing.assert_allclose(y, f(_np_bn(x, zero, one, one, zero, 1e-5)), rtol=1e-12, atol=1e-12)
                np.testing.assert_array_equal(bn._mean.numpy(), zero)
                np.testing.assert_array_equal(bn._variance.numpy(), one)
    finally:
        ddg.set_default_dtype("float32")


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


# Paddle's activation ops, as a fluid-style ``act`` names them (numpy float64 formulas)
ACTS = {
    "relu": lambda v: np.maximum(v, 0), "relu6": lambda v: np.clip(v, 0, 6), "sigmoid": _sigmoid,
    "tanh": np.tanh, "swish": lambda v: v * _sigmoid(v), "hard_swish": lambda v: v * np.clip(v + 3, 0, 6) / 6,
    "hard_sigmoid": lambda v: np.clip(0.2 * v + 0.5, 0, 1), "logsigmoid": lambda v: np.log(_sigmoid(v)),
    "tanh_shrink": lambda v: v - np.tanh(v), "brelu": lambda v: np.clip(v, 0, 24),
    "stanh": lambda v: 1.7159 * np.tanh(0.67 * v), "softsign": lambda v: v / (1 + np.abs(v)),
}


@pytest.mark.parametrize("act", sorted(ACTS))
def test_fluid_act_names_are_paddles_activation_ops(act):
    x = np.linspace(-12, 30, 48).reshape(4, 3, 2, 2)
    ddg.set_default_dtype("float64")
    try:
        bn = nn.BatchNorm(3, act=act)
        bn.eval()
        y = bn(ddg.to_tensor(x)).numpy()
        conv = nn.SyncBatchNorm.convert_sync_batchnorm(bn)
        np.testing.assert_array_equal(conv(ddg.to_tensor(x)).numpy(), y)
    finally:
        ddg.set_default_dtype("float32")
    np.testing.assert_allclose(y, ACTS[act](x / np.sqrt(1 + 1e-5)), rtol=1e-12, atol=1e-12)
