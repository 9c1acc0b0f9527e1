"""ddg.amp: auto_cast's dtypes per op, gradients through the casts, the parameter cast
cache, GradScaler's dynamics step by step, decorate O2 with float32 master weights (the
fused and per-parameter optimizer paths), checkpoints, Model.prepare(amp_configs).

Names, defaults, lists and state_dict keys were checked against Paddle 3.3.1 (CPU),
whose own CPU AMP warns and does nothing; ddg's numerics are compared with float32 and
float64 references here."""
import inspect
import json
import os

import numpy as np
import pytest

import ddg
import ddg.nn as nn
import ddg.nn.functional as F
from ddg.autograd import function as _function
from ddg.autograd.gradcheck import gradcheck

HERE = os.path.dirname(os.path.abspath(__file__))


def _t(shape, seed=0, dtype="float32", stop_gradient=True):
    rng = np.random.default_rng(seed)
    t = ddg.to_tensor(rng.standard_normal(shape).astype(dtype))
    t.stop_gradient = stop_gradient
    return t


# -- the public names and lists, as Paddle has them ---------------------------------------------
def test_public_names_and_defaults_follow_paddle():
    amp = ddg.amp
    for name in ["auto_cast", "GradScaler", "decorate", "is_float16_supported", "is_bfloat16_supported",
                 "is_autocast_enabled", "get_autocast_dtype", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype",
                 "AmpScaler", "amp_guard", "amp_decorate", "autocast", "white_list", "black_list",
                 "OptimizerState"]:
        assert hasattr(amp, name), name
    sig = inspect.signature(amp.auto_cast)
    assert list(sig.parameters) == ["enable", "custom_white_list", "custom_black_list", "level", "dtype",
                                    "use_promote"]
    assert [p.default for p in sig.parameters.values()] == [True, None, None, "O1", "float16", True]
    gs = {k: v.default for k, v in inspect.signature(amp.GradScaler).parameters.items()}
    assert gs == dict(enable=True, init_loss_scaling=65536.0, incr_ratio=2.0, decr_ratio=0.5,
                      incr_every_n_steps=2000, decr_every_n_nan_or_inf=1, use_dynamic_loss_scaling=True)
    am = {k: v.default for k, v in inspect.signature(amp.AmpScaler).parameters.items()}
    assert am["init_loss_scaling"] == 32768.0 and am["incr_every_n_steps"] == 1000
    dec = inspect.signature(amp.decorate).parameters
    assert list(dec) == ["models", "optimizers", "level", "dtype", "master_weight", "save_dtype", "master_grad",
                         "excluded_layers"]
    assert [m.value for m in amp.OptimizerState] == [0, 1, 2]
    assert ddg.is_autocast_enabled is amp.is_autocast_enabled and ddg.autocast is amp.autocast
    assert amp.is_float16_supported() is True          # ddg's CPU AMP really works (Paddle's CPU: False)
    assert amp.is_bfloat16_supported() is True         # bfloat16 comes with ml_dtypes, a dependency


def test_lists_are_paddles():
    with open(os.path.join(HERE, "paddle_amp_lists.json")) as f:
        ref = json.load(f)   # paddle.amp.white_list()/black_list() as Paddle 3.3.1 prints them
    got_w = {d: {lv: sorted(s) for lv, s in x.items()} for d, x in ddg.amp.white_list().items()}
    got_b = {d: {lv: sorted(s) for lv, s in x.items()} for d, x in ddg.amp.black_list().items()}
    assert got_w == ref["white"]
    assert got_b == ref["black"]


# -- which ops run in which dtype ----------------------------------------------------------------
def _o1_dtypes(**kw):
    x, w = _t([4, 6]), _t([6, 5], 1)
    img, k = _t([2, 3, 8, 8], 2), _t([4, 3, 3, 3], 3)
    lab = ddg.to_tensor(np.array([0, 1, 2, 3]))
    out = {}
    with ddg.amp.auto_cast(**kw):
        out["matmul"] = ddg.matmul(x, w)
        out["linear"] = F.linear(x, w)
        out["conv2d"] = F.conv2d(img, k)
        out["einsum"] = ddg.einsum("ij,jk->ik", x, w)
        out["bmm"] = ddg.bmm(_t([2, 3, 4]), _t([2, 4, 5], 1))
        h = out["matmul"]
        out["softmax"] = F.softmax(h)
        out["log_softmax"] = F.log_softmax(h)
        out["cross_entropy"] = F.cross_entropy(h, lab)
        out["exp"] = ddg.exp(h)
        out["log"] = ddg.log(ddg.abs(h) + 1)
        out["pow"] = ddg.pow(h, 2.0)
        out["mean"] = ddg.mean(h)
        out["sum"] = ddg.sum(h)
        out["layer_norm"] = F.layer_norm(h, [5])
        out["mse_loss"] = F.mse_loss(h, _t([4, 5], 4))
        out["relu_of_low"] = F.relu(h)
        out["add_low_low"] = h + h
        out["add_low_f32"] = h + _t([4, 5], 5)
        out["concat_low_f32"] = ddg.concat([h, _t([4, 5], 6)])
        out["reshape_low"] = h.reshape([5, 4])
        out["add_f32_f32"] = x + x
        out["f64_matmul"] = ddg.matmul(_t([2, 3], dtype="float64"), _t([3, 2], dtype="float64"))
    return {k: v.dtype.name for k, v in out.items()}


def test_o1_runs_white_low_black_float32_and_promotes_the_rest():
    d = _o1_dtypes()
    for op in ("matmul", "linear", "conv2d", "einsum", "bmm"):
        assert d[op] == "float16", op
    for op in ("softmax", "log_softmax", "cross_entropy", "exp", "log", "pow", "mean", "sum", "layer_norm",
               "mse_loss"):
        assert d[op] == "float32", op
    assert d["relu_of_low"] == d["add_low_low"] == d["reshape_low"] == "float16"   # follow their inputs
    assert d["add_low_f32"] == d["concat_low_f32"] == "float32"                     # the widest float
    assert d["add_f32_f32"] == "float32"
    assert d["f64_matmul"] == "float64"                                             # float64 is never cast


def test_o2_od_levels_and_use_promote():
    x = _t([3, 4])
    h16 = _t([3, 4], 1, "float16")
    with ddg.amp.auto_cast(level="O2"):
        assert (h16 + h16).dtype == "float16"
        assert (h16 + x).dtype == "float32"          # use_promote: any float32 input -> float32
        assert F.softmax(h16).dtype == "float16"     # softmax is not on the O2 black list
        assert F.relu(x).dtype == "float32"
    with ddg.amp.auto_cast(level="O2", use_promote=False):
        assert (x + x).dtype == "float16"            # everything not black-listed in low precision
        assert F.relu(x).dtype == "float16"
        assert (h16 + x).dtype == "float16"
        assert F.layer_norm(h16, [4]).dtype == "float16"   # statistics in float32, output in its input's dtype
    with ddg.amp.auto_cast(level="OD"):
        assert ddg.matmul(x, _t([4, 2])).dtype == "float16"
        assert (h16 + h16).dtype == "float32"        # OD: only the white list in low precision


def test_embedding_follows_paddles_lookup_table_entry():
    emb = nn.Embedding(10, 4)
    ids = ddg.to_tensor(np.array([[1, 2], [3, 0]]))
    ddg.amp.decorate(emb, level="O2")
    assert emb.weight.dtype == "float16"
    with ddg.amp.auto_cast(level="O2"):
        out = emb(ids)
    assert out.dtype == "float32"                    # lookup_table_v2 is on the O2 black list too
    np.testing.assert_array_equal(out.numpy(), emb.weight.numpy().astype(np.float32)[ids.numpy()])
    with ddg.amp.auto_cast(level="O2", custom_white_list={"lookup_table_v2"}):
        assert emb(ids).dtype == "float16"
    out = emb(ids)                                   # outside auto_cast: the weight's dtype
    assert out.dtype == "float16"


def test_o2_norm_statistics_are_float32():
    x = _t([4, 64], 7, "float32") * 300 + 1000       # large offset: float16 statistics would lose it
    h16 = x.astype("float16")
    with ddg.amp.auto_cast(level="O2", use_promote=False):
        y = F.layer_norm(h16, [64])
    ref = F.layer_norm(h16.astype("float32"), [64])
    np.testing.assert_allclose(y.numpy().astype(np.float32), ref.numpy(), atol=4e-3)


def test_custom_lists_disable_and_context_restore():
    x, w = _t([3, 4]), _t([4, 2], 1)
    with ddg.amp.auto_cast(custom_black_list={"matmul_v2"}):
        assert ddg.matmul(x, w).dtype == "float32"
    with ddg.amp.auto_cast(custom_white_list=["exp"]):
        assert ddg.exp(x).dtype == "float16"
    with ddg.amp.auto_cast(custom_white_list=["Softmax"]):      # ddg's class names work too
        assert F.softmax(x).dtype == "float16"
    with pytest.raises(ValueError, match="both name"):
        ddg.amp.auto_cast(custom_white_list={"exp"}, custom_black_list={"exp"})
    with pytest.raises(ValueError, match="level"):
        ddg.amp.auto_cast(level="O3")
    with pytest.raises(ValueError, match="dtype"):
        ddg.amp.auto_cast(dtype="float32")
    with ddg.amp.auto_cast():
        assert ddg.amp.is_autocast_enabled() and ddg.amp.get_autocast_dtype() == "float16"
        with ddg.amp.auto_cast(enable=False):
            assert ddg.matmul(x, w).dtype == "float32"
            assert not ddg.amp.is_autocast_enabled()
        with ddg.amp.auto_cast(level="O0"):
            assert ddg.matmul(x, w).dtype == "float32"
        assert ddg.matmul(x, w).dtype == "float16"
    assert _function._autocast[0] is None            # off again: one slot read per op
    with pytest.raises(RuntimeError):
        with ddg.amp.auto_cast():
            raise RuntimeError("boom")
    assert _function._autocast[0] is None

    @ddg.amp.auto_cast()
    def f(a, b):
        return ddg.matmul(a, b)
    assert f(x, w).dtype == "float16"
    assert ddg.matmul(x, w).dtype == "float32"
    with ddg.amp.amp_guard():
        assert ddg.matmul(x, w).dtype == "float16"
    with ddg.amp.autocast("cpu"):
        assert ddg.matmul(x, w).dtype == "float16"


# -- gradients ---------------------------------------------------------------------------------------
def test_gradients_come_back_in_each_leafs_dtype_and_match_float64():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((8, 6)).astype(np.float32)
    ws = (rng.standard_normal((6, 5)) * 0.5).astype(np.float32)
    bs = rng.standard_normal(5).astype(np.float32)
    lab = ddg.to_tensor(np.array([0, 1, 2, 3, 4, 0, 1, 2]))

    def run(dtype, amp):
        x = ddg.to_tensor(xs.astype(dtype), stop_gradient=False)
        w = ddg.to_tensor(ws.astype(dtype), stop_gradient=False)
        b = ddg.to_tensor(bs.astype(dtype), stop_gradient=False)
        with ddg.amp.auto_cast(enable=amp):
            loss = F.cross_entropy(ddg.tanh(F.linear(x, w, b)) * 3, lab)
        loss.backward()
        return loss, x.grad, w.grad, b.grad

    loss, gx, gw, gb = run("float32", True)
    ref = run("float64", False)
    assert loss.dtype == "float32"
    for g, r in zip((gx, gw, gb), ref[1:]):
        assert g.dtype == "float32"                  # a float32 leaf gets a float32 gradient
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=2e-2, atol=2e-3)
    np.testing.assert_allclose(float(loss), float(ref[0]), rtol=2e-3)
    # a float16 leaf gets a float16 gradient
    h = ddg.to_tensor(xs.astype(np.float16), stop_gradient=False)
    with ddg.amp.auto_cast():
        ddg.exp(h).sum().backward()
    assert h.grad.dtype == "float16"
    np.testing.assert_allclose(h.grad.numpy(), np.exp(xs.astype(np.float16).astype(np.float32)), rtol=2e-3)


def test_float64_is_untouched_so_gradcheck_passes_inside_auto_cast():
    x = _t([3, 4], 0, "float64", stop_gradient=False)
    w = _t([4, 2], 1, "float64", stop_gradient=False)
    with ddg.amp.auto_cast():
        assert gradcheck(lambda a, b: F.softmax(ddg.matmul(a, b)).sum(axis=0) * ddg.exp(b).mean(), (x, w))


def test_parameter_casts_are_cached_and_follow_updates():
    lin = nn.Linear(4, 4)
    casts = []
    orig = _function.Function.__call__

    def spy(self, *ts):
        if type(self).__name__ == "Cast":
            casts.append(ts[0])
        return orig(self, *ts)

    x = _t([2, 4])
    opt = ddg.optimizer.SGD(learning_rate=0.5, parameters=lin.parameters())
    _function.Function.__call__ = spy
    try:
        with ddg.amp.auto_cast():
            y1 = lin(x)
            y2 = lin(x)          # the weight and bias casts are reused
            n_params = sum(1 for c in casts if c is lin.weight or c is lin.bias)
            assert n_params == 2
            (y1.sum() + y2.sum()).backward()
            opt.step()           # the weight changes in place (version bump): cast again
            y3 = lin(x)
            y3.sum().backward()  # the first casts' graph was consumed: a fresh cast
            assert sum(1 for c in casts if c is lin.weight) == 2
    finally:
        _function.Function.__call__ = orig
    ref = F.linear(x, lin.weight, lin.bias)
    np.testing.assert_allclose(y3.numpy().astype(np.float32), ref.numpy(), rtol=5e-3, atol=5e-3)
    assert lin.weight.grad.dtype == "float32"


# -- GradScaler -------------------------------------------------------------------------------------
def _scaler_setup(seed=0):
    ddg.seed(seed)
    model = nn.Linear(3, 2)
    opt = ddg.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    return model, opt


def _scaled_step(scaler, model, opt, bad=False):
    x = _t([4, 3], 5)
    with ddg.amp.auto_cast():
        loss = model(x).mean()
    if bad:
        loss = loss * float("inf")
    with np.errstate(invalid="ignore", over="ignore"):
        scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.clear_grad()


def test_scaler_dynamics_step_by_step():
    model, opt = _scaler_setup()
    scaler = ddg.amp.GradScaler(init_loss_scaling=1024, incr_every_n_steps=3, decr_every_n_nan_or_inf=2)
    seen = []
    for bad in (False, False, False, False, True, False, True, True, True, True):
        w0 = model.weight.numpy()
        _scaled_step(scaler, model, opt, bad)
        moved = not np.array_equal(model.weight.numpy(), w0)
        assert moved is not bad                       # a skipped step leaves the parameters as they were
        seen.append((float(scaler.state_dict()["scale"][0]), scaler._incr_count, scaler._decr_count))
    assert seen == [(1024, 1, 0), (1024, 2, 0), (2048, 0, 0), (2048, 1, 0), (2048, 0, 1), (2048, 1, 0),
                    (2048, 0, 1), (1024, 0, 0), (1024, 0, 1), (512, 0, 0)]


def test_scaler_skipped_step_leaves_optimizer_state_and_unscales_once():
    model, _ = _scaler_setup()
    opt = ddg.optimizer.Adam(learning_rate=0.1, parameters=model.parameters())
    scaler = ddg.amp.GradScaler(init_loss_scaling=8.0)
    _scaled_step(scaler, model, opt)
    before = {k: v.numpy().copy() for k, v in opt.state_dict().items() if hasattr(v, "numpy")}
    w0 = model.weight.numpy()
    _scaled_step(scaler, model, opt, bad=True)
    after = {k: v.numpy() for k, v in opt.state_dict().items() if hasattr(v, "numpy")}
    assert before.keys() == after.keys()
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])
    np.testing.assert_array_equal(model.weight.numpy(), w0)
    assert scaler.state_dict()["scale"][0] == 4.0
    # unscale_ by hand, then step: the gradients are divided once
    x = _t([4, 3], 5)
    loss = model(x).mean()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    g = model.weight.grad.numpy().copy()
    model2, _ = _scaler_setup()
    model2.set_state_dict(model.state_dict())
    model2(x).mean().backward()
    np.testing.assert_allclose(g, model2.weight.grad.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="unscale_"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    opt.clear_grad()


def test_scaler_minimize_disabled_and_fixed_scaling():
    model, opt = _scaler_setup()
    scaler = ddg.amp.GradScaler(init_loss_scaling=16, incr_every_n_steps=1)
    with ddg.amp.auto_cast():
        loss = model(_t([4, 3])).mean()
    scaled = scaler.scale(loss)
    np.testing.assert_allclose(float(scaled), float(loss) * 16, rtol=1e-6)
    scaled.backward()
    scaler.minimize(opt, scaled)
    assert scaler.state_dict()["scale"][0] == 32
    off = ddg.amp.GradScaler(enable=False)
    assert off.scale(loss) is loss and off.state_dict() == {} and not off.is_enable()
    fixed = ddg.amp.GradScaler(init_loss_scaling=4, use_dynamic_loss_scaling=False)
    assert not fixed.is_use_dynamic_loss_scaling()
    _scaled_step(fixed, model, opt, bad=True)
    assert fixed.state_dict()["scale"][0] == 4
    sc = ddg.amp.GradScaler()
    sc.set_incr_ratio(3.0)
    sc.set_decr_ratio(0.25)
    sc.set_incr_every_n_steps(7)
    sc.set_decr_every_n_nan_or_inf(5)
    sc.set_init_loss_scaling(100.0)
    assert (sc.get_incr_ratio(), sc.get_decr_ratio(), sc.get_incr_every_n_steps(),
            sc.get_decr_every_n_nan_or_inf(), sc.get_init_loss_scaling()) == (3.0, 0.25, 7, 5, 100.0)
    with pytest.raises(ValueError):
        sc.set_incr_ratio(0.5)
    with pytest.raises(ValueError):
        ddg.amp.GradScaler(decr_ratio=2.0)


def test_scaler_checkpoint_round_trip(tmp_path):
    model, opt = _scaler_setup()
    scaler = ddg.amp.GradScaler(init_loss_scaling=64, incr_every_n_steps=5)
    for bad in (False, True, False, False):
        _scaled_step(scaler, model, opt, bad)
    sd = scaler.state_dict()
    assert list(sd) == ["scale", "incr_ratio", "decr_ratio", "incr_every_n_steps", "decr_every_n_nan_or_inf",
                        "incr_count", "decr_count", "use_dynamic_loss_scaling"]   # Paddle's keys, in its order
    assert sd["scale"].dtype == np.float32 and sd["scale"].shape == (1,)
    path = str(tmp_path / "scaler.pdparams")
    ddg.save(sd, path)
    fresh = ddg.amp.GradScaler()
    fresh.load_state_dict(ddg.load(path))
    assert fresh.state_dict()["scale"][0] == 32 and fresh._incr_count == 2 and fresh._incr_every_n_steps == 5
    # both continue identically
    _scaled_step(scaler, model, opt)
    model2, opt2 = _scaler_setup()
    _scaled_step(fresh, model2, opt2)
    for key in sd:
        assert np.all(scaler.state_dict()[key] == fresh.state_dict()[key]), key
    with pytest.raises(RuntimeError, match="empty"):
        ddg.amp.GradScaler().load_state_dict({})


# -- decorate O2 and master weights --------------------------------------------------------------
class _Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.ln = nn.LayerNorm(16)
        self.fc2 = nn.Linear(16, 16)
        self.bn = nn.BatchNorm1D(16)
        self.fc3 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc3(F.relu(self.bn(self.fc2(F.relu(self.ln(self.fc1(x)))))))


def test_decorate_o2_casts_all_but_norms():
    ddg.seed(0)
    net = _Net()
    opt = ddg.optimizer.Adam(parameters=net.parameters())
    out = ddg.amp.decorate(net, opt, level="O2")
    assert out[0] is net and out[1] is opt
    d = {n: p.dtype.name for n, p in net.named_parameters()}
    assert d["fc1.weight"] == d["fc2.bias"] == d["fc3.weight"] == "float16"
    assert d["ln.weight"] == d["bn.weight"] == "float32"       # Paddle keeps norms float32 for float16
    assert opt._multi_precision
    assert ddg.amp.decorate(net, level="O1") is net
    net2 = _Net()
    ddg.amp.decorate([net2], level="O2", excluded_layers=[nn.Linear])
    assert all(p.dtype == "float32" for p in net2.parameters())
    net3 = _Net()
    ddg.amp.decorate(net3, level="O2", excluded_layers=net3.fc1)
    assert net3.fc1.weight.dtype == "float32" and net3.fc2.weight.dtype == "float16"
    with pytest.raises(ValueError, match="level"):
        ddg.amp.decorate(net, level="O3")
    with pytest.raises(RuntimeError, match="DataParallel"):
        ddg.amp.decorate(ddg.DataParallel(_Net()), level="O2")


def _o2_train(opt_cls, fused, steps=4, **opt_kw):
    """O2 training with master weights next to a float32 reference that is fed the same
    (unscaled, float16) gradients: the master copies must equal the reference exactly."""
    ddg.seed(0)
    net = _Net()
    ref = _Net()
    opt = opt_cls(parameters=net.parameters(), **opt_kw)
    net, opt = ddg.amp.decorate(net, opt, level="O2")
    ref.set_state_dict({k: v.astype("float32") for k, v in net.state_dict().items()})
    ref_opt = opt_cls(parameters=ref.parameters(), **opt_kw)
    opt._use_fused = ref_opt._use_fused = fused
    scaler = ddg.amp.GradScaler(init_loss_scaling=2.0 ** 10)
    rng = np.random.default_rng(1)
    lab = ddg.to_tensor(rng.integers(0, 3, 8))
    for _ in range(steps):
        x = ddg.to_tensor(rng.standard_normal((8, 6)).astype(np.float32))
        with ddg.amp.auto_cast(level="O2"):
            loss = F.cross_entropy(net(x), lab)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        for p, q in zip(net.parameters(), ref.parameters()):
            if p.stop_gradient:   # BatchNorm's running statistics (parameters, as in Paddle)
                continue
            assert p.grad.dtype == p.dtype
            q.grad = ddg.to_tensor(p.grad.numpy().astype(np.float32))
        scaler.step(opt)
        scaler.update()
        ref_opt.step()
        opt.clear_grad()
        ref_opt.clear_grad()
    return net, opt, ref, ref_opt


@pytest.mark.parametrize("opt_cls,kw", [(ddg.optimizer.Adam, dict(learning_rate=0.01)),
                                        (ddg.optimizer.Momentum, dict(learning_rate=0.05, momentum=0.9)),
                                        (ddg.optimizer.AdamW, dict(learning_rate=0.01, weight_decay=0.1))])
@pytest.mark.parametrize("fused", [True, False])
def test_o2_master_weights_equal_float32_reference(opt_cls, kw, fused):
    net, opt, ref, ref_opt = _o2_train(opt_cls, fused, **kw)
    pairs = [(p, q) for p, q in zip(net.parameters(), ref.parameters()) if not p.stop_gradient]
    for p, q in pairs:
        master = opt._work(p)
        assert master.dtype == np.float32
        np.testing.assert_array_equal(master, q.numpy())                   # float32 math, bit for bit
        np.testing.assert_array_equal(p.numpy(), q.numpy().astype(p.dtype))  # rounded into the parameter
    for p, q in pairs:   # the accumulators are float32 and equal too
        for name, arr in ref_opt._state[id(q)].items():
            mine = opt._state[id(p)][name]
            if hasattr(arr, "dtype"):
                assert mine.dtype == np.float32
                np.testing.assert_array_equal(mine, arr)


def test_o2_fused_equals_per_parameter_path():
    a = _o2_train(ddg.optimizer.Adam, True, learning_rate=0.01)
    b = _o2_train(ddg.optimizer.Adam, False, learning_rate=0.01)
    for p, q in zip(a[0].parameters(), b[0].parameters()):
        np.testing.assert_array_equal(a[1]._work(p), b[1]._work(q))


def test_o2_optimizer_state_dict_names_and_round_trip(tmp_path):
    net, opt, _, _ = _o2_train(ddg.optimizer.Adam, True, steps=2, learning_rate=0.01)
    sd = opt.state_dict()
    w = net.fc1.weight.name
    assert f"{w}_fp32_master_0_moment1_0" in sd and f"{w}_fp32_master_0_beta2_pow_acc_0" in sd
    ln = net.ln.weight.name
    assert f"{ln}_moment1_0" in sd                        # float32 parameters keep the plain names
    assert set(sd["master_weights"]) == {p.name for p in net.parameters() if p.dtype == "float16"}
    assert all(v.dtype == "float32" for v in sd["master_weights"].values())
    path = str(tmp_path / "opt.pdopt")
    ddg.save(sd, path)
    opt2 = ddg.optimizer.Adam(learning_rate=0.01, parameters=net.parameters())
    opt2._multi_precision = True
    opt2.set_state_dict(ddg.load(path))
    for p in net.parameters():
        np.testing.assert_array_equal(opt2._work(p), opt._work(p))
    sd2 = opt2.state_dict()
    for k in sd:
        if k != "master_weights":
            np.testing.assert_array_equal(sd2[k].numpy(), sd[k].numpy())


def test_master_weight_false_and_save_dtype():
    ddg.seed(0)
    net = _Net()
    opt = ddg.optimizer.SGD(learning_rate=0.1, parameters=net.parameters())
    net, opt = ddg.amp.decorate(net, opt, level="O2", master_weight=False, save_dtype="float32")
    assert not opt._multi_precision
    with ddg.amp.auto_cast(level="O2"):
        loss = net(_t([4, 6])).mean()
    loss.backward()
    opt.step()
    assert opt._masters == {} and net.fc1.weight.dtype == "float16"
    sd = net.state_dict()
    assert all(v.dtype == "float32" for v in sd.values() if v.dtype.kind == "f")   # save_dtype
    assert net.fc1.weight.dtype == "float16"                                       # the parameters keep theirs
    np.testing.assert_array_equal(sd["fc1.weight"].numpy(), net.fc1.weight.numpy().astype(np.float32))
    with pytest.raises(ValueError, match="save_dtype"):
        ddg.amp.decorate(_Net(), level="O2", save_dtype="int8")


def test_o2_set_value_refreshes_the_master_copy():
    ddg.seed(0)
    lin = nn.Linear(2, 2)
    opt = ddg.optimizer.SGD(learning_rate=0.0, parameters=lin.parameters())
    lin, opt = ddg.amp.decorate(lin, opt, level="O2")
    lin(_t([1, 2]).astype("float16")).sum().backward()
    opt.step()
    lin.weight.set_value(np.full((2, 2), 0.5, np.float16))
    lin(_t([1, 2]).astype("float16")).sum().backward()
    opt.step()                                            # lr 0: the parameter keeps the value it was set to
    np.testing.assert_array_equal(lin.weight.numpy(), np.full((2, 2), 0.5, np.float16))


def test_o1_and_o2_train_like_float32():
    """A few dozen steps of a small classifier: fp16 O1 and O2 losses track float32's."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 6)).astype(np.float32)
    Y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1).astype(np.int64)

    def train(mode):
        ddg.seed(0)
        net = _Net()
        opt = ddg.optimizer.Adam(learning_rate=0.01, parameters=net.parameters())
        if mode == "O2":
            net, opt = ddg.amp.decorate(net, opt, level="O2")
        scaler = ddg.amp.GradScaler(enable=mode != "fp32", init_loss_scaling=1024)
        losses = []
        for i in range(30):
            x, y = ddg.to_tensor(X), ddg.to_tensor(Y)
            with ddg.amp.auto_cast(enable=mode != "fp32", level="O1" if mode != "O2" else "O2"):
                loss = F.cross_entropy(net(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.clear_grad()
            losses.append(float(loss))
        return np.array(losses)

    ref, o1, o2 = train("fp32"), train("O1"), train("O2")
    assert ref[-1] < 0.5 * ref[0]
    np.testing.assert_allclose(o1, ref, atol=0.02)
    np.testing.assert_allclose(o2, ref, atol=0.05)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_overflowing_scaled_backward_skips_the_step_without_numpy_warnings(level):
    """A loss scaled past float16's range overflows in backward on purpose: the scaler
    detects it and skips the step. numpy's RuntimeWarnings (overflow in the float16 casts,
    invalid values in the products that meet inf) would only repeat that; outside a
    scaler's backward they still come."""
    import warnings
    ddg.seed(0)
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = ddg.optimizer.Adam(learning_rate=0.01, parameters=net.parameters())
    if level == "O2":
        net, opt = ddg.amp.decorate(net, opt, level="O2")
    scaler = ddg.amp.GradScaler(init_loss_scaling=2.0 ** 30)
    x = ddg.to_tensor(np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32))
    y = ddg.to_tensor(np.arange(8) % 3)
    before = [p.numpy().copy() for p in net.parameters()]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with ddg.amp.auto_cast(level=level):
            loss = F.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        assert not all(np.isfinite(p.grad.numpy()).all() for p in net.parameters() if p.grad is not None)
        scaler.step(opt)
        scaler.update()
    assert scaler._scale == 2.0 ** 29                       # skipped, scaling halved
    for b, p in zip(before, net.parameters()):
        np.testing.assert_array_equal(p.numpy(), b)
    # the same overflow in a backward no scaler asked for still warns
    w = ddg.to_tensor(np.ones([4], np.float16), stop_gradient=False)
    loss = (w * 4.0).sum()                                  # finite; its gradient 4 * 60000 is not
    with pytest.warns(RuntimeWarning, match="overflow"):
        loss.backward(ddg.to_tensor(np.float16(60000.0)))
    assert np.isinf(w.grad.numpy()).all()


# -- hapi ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", ["O1", "O2", {"level": "O1", "init_loss_scaling": 128},
                                 {"level": "O2", "custom_black_list": ["relu"]}])
def test_model_prepare_amp_configs(cfg):
    ddg.seed(0)
    net = _Net()
    model = ddg.Model(net)
    opt = ddg.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    model.prepare(opt, nn.CrossEntropyLoss(), amp_configs=cfg)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    y = rng.integers(0, 3, (8, 1))
    level = cfg if isinstance(cfg, str) else cfg["level"]
    losses = [model.train_batch([x], [y])[0] for _ in range(3)]
    assert np.all(np.isfinite(np.ravel(losses)))
    assert (net.fc1.weight.dtype == "float16") == (level == "O2")
    assert model._scaler is not None and model._scaler.is_enable()
    if isinstance(cfg, dict) and "init_loss_scaling" in cfg:
        assert model._scaler.get_init_loss_scaling() == 128
    out = model.predict_batch([x])
    assert np.all(np.isfinite(np.asarray(out[0], dtype=np.float32)))
    with pytest.raises(ValueError):
        ddg.Model(_Net()).prepare(ddg.optimizer.SGD(parameters=_Net().parameters()), nn.CrossEntropyLoss(),
                                  amp_configs="O5")


# -- bfloat16 (runs once ddg has the dtype) ----------------------------------------------------------
def test_bf16_o1_dtypes_and_gradients():
    x, w = _t([4, 6], stop_gradient=False), _t([6, 5], 1, stop_gradient=False)
    with ddg.amp.auto_cast(dtype="bfloat16"):
        h = ddg.matmul(x, w)
        s = F.softmax(h)
        assert ddg.amp.get_autocast_dtype() == "bfloat16"
    assert h.dtype == ddg.bfloat16 and s.dtype == "float32"
    s.sum(axis=0).dot(ddg.arange(5).astype("float32")).backward()
    assert x.grad.dtype == "float32" and w.grad.dtype == "float32"


def test_bf16_scaler_turns_itself_off_and_o2_master_weights():
    model, opt = _scaler_setup()
    scaler = ddg.amp.GradScaler()
    with ddg.amp.auto_cast(dtype="bfloat16"):
        loss = model(_t([4, 3])).mean()
    with pytest.warns(UserWarning, match="bfloat16"):
        scaled = scaler.scale(loss)
    assert scaled is loss and not scaler.is_enable()
    net = _Net()
    o = ddg.optimizer.Adam(parameters=net.parameters(), learning_rate=0.01)
    net, o = ddg.amp.decorate(net, o, level="O2", dtype="bfloat16")
    assert net.fc1.weight.dtype == ddg.bfloat16 and net.ln.weight.dtype == ddg.bfloat16  # only BN stays float32
    assert net.bn.weight.dtype == "float32"
    with ddg.amp.auto_cast(level="O2", dtype="bfloat16"):
        loss = F.cross_entropy(net(_t([8, 6])), ddg.to_tensor(np.arange(8) % 3))
    loss.backward()
    w0 = o._work(net.fc1.weight).copy()
    o.step()
    assert o._work(net.fc1.weight).dtype == np.float32 and not np.array_equal(o._work(net.fc1.weight), w0)


def test_example_script_runs_its_three_parts():
    """examples/amp_train.py (Paddle's documented usage), with fewer steps."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("amp_train", os.path.join(HERE, "..", "examples", "amp_train.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    l1 = mod.train_o1(steps=6)
    l2 = mod.train_o2(steps=6)
    assert l1[-1] < l1[0] and l2[-1] < l2[0]
    mod.overflow_and_checkpoint()    # asserts the skipped step, the lower scale and the restored state


# -- GPU (cupy, or simcupy in CI) ---------------------------------------------------------------------
@pytest.mark.skipif(not ddg.tensor.backend.cupy_available(), reason="needs cupy (a GPU, or tests/simgpu's simcupy)")
@pytest.mark.parametrize("level", ["O1", "O2"])
def test_gpu_amp_step_matches_cpu_and_syncs_once(level):
    from ddg.tensor import backend
    from gpu_helpers import D2HCounter
    cp = backend.cupy_module()
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((8, 6)).astype(np.float32)
    ys = rng.integers(0, 3, 8)

    def run(place):
        ddg.seed(0)
        net = _Net()
        if place == "gpu":
            net.to("gpu")
        # Momentum, not Adam: fc2's bias feeds a BatchNorm, so its gradient is rounding noise,
        # which Adam would blow up to full +-lr steps (cupy's float16 matmul rounds otherwise
        # than numpy's float32 one)
        opt = ddg.optimizer.Momentum(learning_rate=0.01, parameters=net.parameters())
        if level == "O2":
            net, opt = ddg.amp.decorate(net, opt, level="O2")
        scaler = ddg.amp.GradScaler(init_loss_scaling=256)
        x, y = ddg.to_tensor(xs, place=place), ddg.to_tensor(ys, place=place)
        counter = D2HCounter(cp).install() if place == "gpu" else None
        try:
            for _ in range(3):
                with ddg.amp.auto_cast(level=level):
                    loss = F.cross_entropy(net(x), y)
                scaler.scale(loss).backward()
                if counter is not None:
                    counter.active = True
                scaler.step(opt)
                if counter is not None:
                    counter.active = False
                scaler.update()
                opt.clear_grad()
        finally:
            if counter is not None:
                counter.uninstall()
        return net, counter

    cpu, _ = run("cpu")
    gpu, counter = run("gpu")
    for p, q in zip(cpu.parameters(), gpu.parameters()):
        assert backend.is_gpu_array(q._data) and q.dtype == p.dtype
        np.testing.assert_allclose(backend.to_host(q._data).astype(np.float32), p.numpy().astype(np.float32),
                                   rtol=2e-2, atol=2e-3)
    if not counter.unpatched:
        assert len(counter.calls) == 3, counter.report()   # one host sync per step: the finite flag


def test_scaler_checks_a_fused_flat_gradient_buffer_as_one_array():
    """Once the fused optimizer step holds the gradients in one flat buffer, the scaler
    unscales and checks that buffer with one multiply and one sum, and still finds an inf
    planted in any one parameter's gradient."""
    from ddg.amp.grad_scaler import _flat_groups
    ddg.seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    opt = ddg.optimizer.SGD(learning_rate=0.1, parameters=net.parameters())
    x = ddg.to_tensor(np.ones((3, 4), dtype=np.float32))
    net(x).sum().backward()
    opt.step()                      # the step adopts the gradients into flat storage
    opt.clear_grad()
    scaler = ddg.amp.GradScaler(init_loss_scaling=8.0)
    with ddg.amp.auto_cast():
        loss = net(x).sum()
    scaler.scale(loss).backward()
    grads = [p.grad for p in net.parameters()]
    groups = _flat_groups(grads)
    assert len(groups) == 1 and groups[0].size == sum(p.size for p in net.parameters())
    expect = [g.numpy() / 8.0 for g in grads]
    before = [p.numpy() for p in net.parameters()]
    scaler.step(opt)
    scaler.update()
    for p, b, g in zip(net.parameters(), before, expect):
        np.testing.assert_allclose(p.numpy(), b - 0.1 * g, rtol=1e-5, atol=1e-6)
    opt.clear_grad()
    with ddg.amp.auto_cast():
        loss = net(x).sum()
    scaler.scale(loss).backward()
    net[2].bias.grad._data[1] = np.inf
    before = [p.numpy() for p in net.parameters()]
    scaler.step(opt)
    scaler.update()
    assert scaler._scale == 4.0
    for p, b in zip(net.parameters(), before):
        assert np.array_equal(p.numpy(), b)   # skipped
