"""ddg.optimizer, ddg.optimizer.lr and ddg.nn.ClipGradBy*: every update rule against
its formula written out in numpy, schedules against hand-computed sequences, state
round trips bit for bit."""
import copy
import re
import math

import numpy as np
import pytest

import ddg
from ddg import nn
from ddg.nn import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue
from ddg.nn.param_attr import ParamAttr
from ddg.optimizer import lr as L
from ddg.regularizer import L1Decay, L2Decay

SHAPES = [(3, 4), (5,)]
STEPS = 4


def make_params(seed=0, dtype=np.float64, names=("w", "b")):
    rng = np.random.default_rng(seed)
    return [nn.Parameter(rng.standard_normal(s).astype(dtype), name=f"{n}_{seed}") for s, n in zip(SHAPES, names)]


def grads_seq(seed=1, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]


def run(opt, params, gseq):
    for gs in gseq:
        for p, g in zip(params, gs):
            p.grad = g.copy()
        opt.step()
        opt.clear_grad()
    return [p.numpy() for p in params]


def reference(rule, params, gseq, **kw):
    """Apply ``rule(i_param, p, g, state, t)`` in plain numpy."""
    ps = [p.numpy().copy() for p in params]
    states = [dict() for _ in ps]
    for t, gs in enumerate(gseq, start=1):
        for i, (p, g) in enumerate(zip(ps, gs)):
            ps[i] = rule(i, p, g.copy(), states[i], t)
    return ps


def check(got, want, rtol=1e-12, atol=1e-12):
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------- rules
def test_sgd_with_l2_weight_decay():
    params, gseq = make_params(), grads_seq()
    want = reference(lambda i, p, g, s, t: p - 0.1 * (g + 0.01 * p), params, gseq)
    got = run(ddg.optimizer.SGD(0.1, parameters=params, weight_decay=0.01), params, gseq)
    check(got, want)


def test_sgd_l1_decay_and_param_regularizer_wins():
    params, gseq = make_params(), grads_seq()
    params[1].regularizer = L2Decay(0.5)  # the ParamAttr regularizer overrides the optimizer's

    def rule(i, p, g, s, t):
        return p - 0.1 * (g + (0.02 * np.sign(p) if i == 0 else 0.5 * p))
    want = reference(rule, params, gseq)
    got = run(ddg.optimizer.SGD(0.1, parameters=params, weight_decay=L1Decay(0.02)), params, gseq)
    check(got, want)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum(nesterov):
    params, gseq = make_params(), grads_seq()
    lr, mu, wd, rs = 0.05, 0.9, 1e-3, 0.5

    def rule(i, p, g, s, t):
        g = rs * g + wd * p
        v = s["v"] = mu * s.get("v", 0.0) + g
        return p - lr * (g + mu * v) if nesterov else p - lr * v
    want = reference(rule, params, gseq)
    opt = ddg.optimizer.Momentum(lr, mu, parameters=params, use_nesterov=nesterov, weight_decay=wd, rescale_grad=rs)
    check(run(opt, params, gseq), want)


def _adam_rule(lr, b1, b2, eps, amsgrad=False, coeff=0.0):
    def rule(i, p, g, s, t):
        p = p - lr * coeff * p
        m = s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        v = s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        if amsgrad:
            v = s["vmax"] = np.maximum(s.get("vmax", 0.0), v)
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        return p - lr * m_hat / (np.sqrt(v_hat) + eps)  # textbook form == Paddle's form
    return rule


@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam(amsgrad):
    params, gseq = make_params(), grads_seq()
    want = reference(_adam_rule(0.01, 0.8, 0.95, 1e-3, amsgrad), params, gseq)
    opt = ddg.optimizer.Adam(0.01, beta1=0.8, beta2=0.95, epsilon=1e-3, parameters=params, amsgrad=amsgrad)
    check(run(opt, params, gseq), want)


def test_adam_coupled_weight_decay():
    params, gseq = make_params(), grads_seq()
    base = _adam_rule(0.01, 0.9, 0.999, 1e-8)
    want = reference(lambda i, p, g, s, t: base(i, p, g + 0.1 * p, s, t), params, gseq)
    check(run(ddg.optimizer.Adam(0.01, parameters=params, weight_decay=0.1), params, gseq), want)


def test_adamw_decoupled_decay_fun_and_lr_ratio():
    params, gseq = make_params(), grads_seq()
    decayed = _adam_rule(0.02, 0.9, 0.999, 1e-8, coeff=0.1)
    plain_half = _adam_rule(0.01, 0.9, 0.999, 1e-8)
    want = reference(lambda i, p, g, s, t: (decayed if i == 0 else plain_half)(i, p, g, s, t), params, gseq)
    opt = ddg.optimizer.AdamW(0.02, parameters=params, weight_decay=0.1,
                              apply_decay_param_fun=lambda name: name.startswith("w"),
                              lr_ratio=lambda p: 1.0 if p.name.startswith("w") else 0.5)
    check(run(opt, params, gseq), want)


@pytest.mark.parametrize("centered,momentum", [(False, 0.0), (True, 0.9)])
def test_rmsprop(centered, momentum):
    params, gseq = make_params(), grads_seq()
    lr, rho, eps = 0.01, 0.9, 1e-6

    def rule(i, p, g, s, t):
        ms = s["ms"] = rho * s.get("ms", 0.0) + (1 - rho) * g * g
        if centered:
            mg = s["mg"] = rho * s.get("mg", 0.0) + (1 - rho) * g
            denom = np.sqrt(ms - mg * mg + eps)
        else:
            denom = np.sqrt(ms + eps)
        mom = s["mom"] = momentum * s.get("mom", 0.0) + lr * g / denom
        return p - mom
    want = reference(rule, params, gseq)
    opt = ddg.optimizer.RMSProp(lr, rho=rho, epsilon=eps, momentum=momentum, centered=centered, parameters=params)
    check(run(opt, params, gseq), want)


def test_adagrad():
    params, gseq = make_params(), grads_seq()

    def rule(i, p, g, s, t):
        mom = s["m"] = s.get("m", 0.1) + g * g
        return p - 0.1 * g / (np.sqrt(mom) + 1e-6)
    want = reference(rule, params, gseq)
    opt = ddg.optimizer.Adagrad(0.1, parameters=params, initial_accumulator_value=0.1)
    check(run(opt, params, gseq), want)


def test_lamb_with_exclusion():
    params, gseq = make_params(), grads_seq()
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-6, 0.01

    def rule(i, p, g, s, t):
        w = wd if i == 0 else 0.0  # the bias is excluded (and then not adapted)
        m = s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        v = s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        r = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + w * p
        ratio = np.linalg.norm(p) / np.linalg.norm(r) if w > 0 else 1.0
        return p - lr * ratio * r
    want = reference(rule, params, gseq)
    opt = ddg.optimizer.Lamb(lr, lamb_weight_decay=wd, parameters=params,
                             exclude_from_weight_decay_fn=lambda p: p.name.startswith("b"))
    check(run(opt, params, gseq), want)


# ----------------------------------------------------------- groups, multipliers, skipping
def test_groups_param_lr_and_skipping():
    params, gseq = make_params(), grads_seq()
    frozen = nn.Parameter(np.ones(3), name="frozen", trainable=False)
    nograd = nn.Parameter(np.ones(2), name="nograd")
    params[0].optimize_attr["learning_rate"] = 2.0
    opt = ddg.optimizer.Momentum(0.1, 0.5, parameters=[
        {"params": [params[0], nograd]},
        {"params": [params[1], frozen], "learning_rate": 0.1, "momentum": 0.0, "weight_decay": 0.2},
    ])

    def rule(i, p, g, s, t):
        if i == 0:
            v = s["v"] = 0.5 * s.get("v", 0.0) + g
            return p - 0.1 * 2.0 * v
        return p - 0.1 * 0.1 * (g + 0.2 * p)
    want = reference(rule, params, gseq)
    for gs in gseq:
        for p, g in zip(params, gs):
            p.grad = g.copy()
        frozen.grad = np.ones(3)
        opt.step()
        opt.clear_grad()
    check([p.numpy() for p in params], want)
    np.testing.assert_array_equal(frozen.numpy(), np.ones(3))
    np.testing.assert_array_equal(nograd.numpy(), np.ones(2))
    assert nograd.grad is None
    assert opt._param_groups[0]["momentum"] == 0.5  # defaults filled into groups


def test_step_updates_in_place_and_bumps_version():
    p = make_params()[0]
    before, vc = p._data, p._vc[0]
    p.grad = np.ones(SHAPES[0])
    opt = ddg.optimizer.Adam(0.1, parameters=[p])
    opt.step()
    assert p._data is before and p._vc[0] == vc + 1
    g = p.grad.numpy().copy()
    opt.step()
    np.testing.assert_array_equal(p.grad.numpy(), g)  # the gradient itself is never modified


def test_float32_stays_float32():
    params = make_params(dtype=np.float32)
    gseq = grads_seq(dtype=np.float32)
    for cls in (ddg.optimizer.SGD, ddg.optimizer.Adam, ddg.optimizer.AdamW, ddg.optimizer.Lamb):
        run(cls(0.01, parameters=params), params, gseq)
        assert all(p.dtype == np.float32 for p in params)
    run(ddg.optimizer.RMSProp(0.01, parameters=params, weight_decay=0.1), params, gseq)
    assert all(p.dtype == np.float32 for p in params)


def test_clear_grad_and_minimize():
    params, gseq = make_params(), grads_seq()
    opt = ddg.optimizer.SGD(0.1, parameters=params)
    for p, g in zip(params, gseq[0]):
        p.grad = g.copy()
    before = [p.numpy().copy() for p in params]
    ops, pg = opt.minimize(None)
    assert [id(p) for p, _ in pg] == [id(p) for p in params]
    check([p.numpy() for p in params], [b - 0.1 * g for b, g in zip(before, gseq[0])])
    opt.clear_grad()
    assert all(float(np.abs(p.grad.numpy()).sum()) == 0 for p in params)
    opt.clear_grad(set_to_zero=False)
    assert all(p.grad is None for p in params)


def test_minimize_with_real_backward():
    ddg.seed(3)
    layer = nn.Linear(4, 2)
    opt = ddg.optimizer.SGD(0.5, parameters=layer.parameters())
    x = ddg.to_tensor(np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32))
    w0 = layer.weight.numpy().copy()
    loss = (layer(x) ** 2).mean()
    loss.backward()
    g = layer.weight.grad.numpy().copy()
    opt.minimize(loss)
    np.testing.assert_allclose(layer.weight.numpy(), w0 - 0.5 * g, rtol=1e-6)


# --------------------------------------------------------------------------- lr handling
def test_get_set_lr_and_scheduler_driven_lr():
    params, gseq = make_params(), grads_seq()
    opt = ddg.optimizer.SGD(0.1, parameters=params)
    assert opt.get_lr() == 0.1
    opt.set_lr(0.2)
    assert opt.get_lr() == 0.2 and opt._learning_rate == 0.2
    with pytest.raises(TypeError):
        opt.set_lr("fast")
    sched = L.StepDecay(0.1, step_size=1, gamma=0.5)
    opt = ddg.optimizer.SGD(sched, parameters=params)
    with pytest.raises(RuntimeError):
        opt.set_lr(0.3)
    want = [p.numpy().copy() for p in params]
    lrs = []
    for gs in gseq:
        lrs.append(opt.get_lr())
        want = [w - lrs[-1] * g for w, g in zip(want, gs)]
        for p, g in zip(params, gs):
            p.grad = g.copy()
        opt.step()
        sched.step()
    assert lrs == [0.1, 0.05, 0.025, 0.0125]
    check([p.numpy() for p in params], want)


def test_bad_arguments():
    params = make_params()
    with pytest.raises(TypeError):
        ddg.optimizer.SGD(0.1, parameters=params[0])
    with pytest.raises(TypeError):
        ddg.optimizer.SGD("x", parameters=params)
    with pytest.raises(ValueError):
        ddg.optimizer.SGD(0.1, parameters=[params[0], params[0]])
    with pytest.raises(ValueError):
        ddg.optimizer.Adam(0.1, beta1=1.5, parameters=params)
    with pytest.raises(TypeError):
        ddg.optimizer.SGD(0.1, parameters=params, weight_decay="l2")
    with pytest.raises(ValueError):
        ddg.optimizer.SGD(0.1).step()
    p = params[0]
    p.grad = np.ones((2, 2))
    with pytest.raises(ValueError, match="shape"):
        ddg.optimizer.SGD(0.1, parameters=[p]).step()


# ---------------------------------------------------------------------------- state dicts
OPTIMIZERS = {
    "sgd": lambda ps, lr: ddg.optimizer.SGD(lr, parameters=ps),
    "momentum": lambda ps, lr: ddg.optimizer.Momentum(lr, 0.9, parameters=ps, use_nesterov=True),
    "adam": lambda ps, lr: ddg.optimizer.Adam(lr, parameters=ps, amsgrad=True),
    "adamw": lambda ps, lr: ddg.optimizer.AdamW(lr, parameters=ps),
    "rmsprop": lambda ps, lr: ddg.optimizer.RMSProp(lr, parameters=ps, centered=True, momentum=0.5),
    "adagrad": lambda ps, lr: ddg.optimizer.Adagrad(lr, parameters=ps),
    "lamb": lambda ps, lr: ddg.optimizer.Lamb(lr, parameters=ps),
}


def _train(model, opt, sched, xs, ys):
    for x, y in zip(xs, ys):
        loss = ((model(ddg.to_tensor(x)) - ddg.to_tensor(y)) ** 2).mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
        sched.step()


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_state_dict_resume_is_bit_identical(kind, tmp_path):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((6, 8, 5)).astype(np.float32)
    ys = rng.standard_normal((6, 8, 2)).astype(np.float32)

    def build():
        ddg.seed(11)
        model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2))
        sched = L.LinearWarmup(L.CosineAnnealingDecay(0.01, T_max=4), warmup_steps=2, start_lr=0.0, end_lr=0.01)
        return model, OPTIMIZERS[kind](model.parameters(), sched), sched

    model, opt, sched = build()
    _train(model, opt, sched, xs, ys)
    straight = [p.numpy().copy() for p in model.parameters()]

    model, opt, sched = build()
    _train(model, opt, sched, xs[:3], ys[:3])
    path = str(tmp_path / "ckpt.pdopt")
    ddg.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
    sd = opt.state_dict()
    if kind == "adam":
        assert any(k.endswith("_moment1_0") for k in sd) and any(k.endswith("_beta2_pow_acc_0") for k in sd)
    assert "LR_Scheduler" in sd and "LinearWarmup_LR" in sd["LR_Scheduler"]

    model2, opt2, sched2 = build()  # new names (linear_2...), matched by position
    ck = ddg.load(path)
    model2.set_state_dict(ck["model"])
    opt2.set_state_dict(ck["opt"])
    assert sched2.last_epoch == 3 and opt2.get_lr() == opt.get_lr()
    _train(model2, opt2, sched2, xs[3:], ys[3:])
    for a, b in zip(straight, [p.numpy() for p in model2.parameters()]):
        np.testing.assert_array_equal(a, b)


def test_state_dict_matched_by_name():
    params, gseq = make_params(), grads_seq()
    opt = ddg.optimizer.Adam(0.01, parameters=params)
    run(opt, params, gseq[:2])
    sd = copy.deepcopy(opt.state_dict())
    assert set(sd) == {f"{p.name}_{n}_0" for p in params
                       for n in ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc")}
    np.testing.assert_allclose(sd[f"{params[0].name}_beta1_pow_acc_0"].numpy(), [0.9 ** 3])
    copies = [nn.Parameter(p.numpy().copy(), name=p.name) for p in params]
    opt2 = ddg.optimizer.Adam(0.01, parameters=copies[::-1])  # other order: names decide
    opt2.set_state_dict(sd)
    a = run(opt, params, gseq[2:])
    b = run(opt2, copies, gseq[2:])
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


# ---------------------------------------------------------------------------------- clipping
def _pairs(seed=0):
    rng = np.random.default_rng(seed)
    ps = [nn.Parameter(np.zeros(s), name=f"c{i}") for i, s in enumerate(SHAPES)]
    gs = [ddg.to_tensor(rng.standard_normal(s) * 3) for s in SHAPES]
    return ps, gs


def test_clip_by_global_norm():
    ps, gs = _pairs()
    norm = math.sqrt(sum(float((g.numpy() ** 2).sum()) for g in gs))
    out = ClipGradByGlobalNorm(1.0)(list(zip(ps, gs)))
    for (_, c), g in zip(out, gs):
        np.testing.assert_allclose(c.numpy(), g.numpy() / norm, rtol=1e-12)
    out = ClipGradByGlobalNorm(norm * 2)(list(zip(ps, gs)))  # under the limit: unchanged
    for (_, c), g in zip(out, gs):
        np.testing.assert_array_equal(c.numpy(), g.numpy())
    ps[1].need_clip = False  # excluded from the norm and untouched
    n0 = float(np.sqrt((gs[0].numpy() ** 2).sum()))
    out = ClipGradByGlobalNorm(1.0)(list(zip(ps, gs)))
    np.testing.assert_allclose(out[0][1].numpy(), gs[0].numpy() / n0, rtol=1e-12)
    assert out[1][1] is gs[1]


def test_clip_by_norm_and_value():
    ps, gs = _pairs()
    out = ClipGradByNorm(1.0)(list(zip(ps, gs)))
    for (_, c), g in zip(out, gs):
        np.testing.assert_allclose(c.numpy(), g.numpy() / np.linalg.norm(g.numpy()), rtol=1e-12)
    out = ClipGradByValue(0.5)(list(zip(ps, gs)))
    for (_, c), g in zip(out, gs):
        np.testing.assert_array_equal(c.numpy(), np.clip(g.numpy(), -0.5, 0.5))
    out = ClipGradByValue(1.0, min=0.2)(list(zip(ps, gs)))
    np.testing.assert_array_equal(out[0][1].numpy(), np.clip(gs[0].numpy(), 0.2, 1.0))
    with pytest.raises(ValueError):
        ClipGradByNorm(-1.0)
    with pytest.raises(ValueError):
        ClipGradByValue(-1.0)


def test_optimizer_applies_clip_before_decay():
    params, gseq = make_params(), grads_seq()
    want = [p.numpy().copy() for p in params]
    for gs in gseq:
        norm = math.sqrt(sum(float((g ** 2).sum()) for g in gs))
        scale = 0.5 / max(norm, 0.5)
        want = [w - 0.1 * (g * scale + 0.01 * w) for w, g in zip(want, gs)]
    opt = ddg.optimizer.SGD(0.1, parameters=params, weight_decay=0.01, grad_clip=ClipGradByGlobalNorm(0.5))
    check(run(opt, params, gseq), want)


def test_clip_grad_norm_in_place():
    from ddg.nn.clip import clip_grad_norm_
    ps, gs = _pairs()
    for p, g in zip(ps, gs):
        p.grad = g.numpy().copy()
    total = clip_grad_norm_(ps, 1.0)
    norm = math.sqrt(sum(float((g.numpy() ** 2).sum()) for g in gs))
    np.testing.assert_allclose(float(total.numpy()), norm, rtol=1e-6)
    got = math.sqrt(sum(float((p.grad.numpy() ** 2).sum()) for p in ps))
    np.testing.assert_allclose(got, 1.0, rtol=1e-5)


# ------------------------------------------------------------------------------- schedules
def seq(sched, n=8, metric=None):
    out = []
    for _ in range(n):
        out.append(sched())
        sched.step()
    return out


def test_simple_schedules():
    np.testing.assert_allclose(seq(L.StepDecay(1.0, 3, 0.5)), [1, 1, 1, .5, .5, .5, .25, .25])
    np.testing.assert_allclose(seq(L.MultiStepDecay(1.0, [2, 5], 0.1)), [1, 1, .1, .1, .1, .01, .01, .01])
    np.testing.assert_allclose(seq(L.ExponentialDecay(2.0, 0.5)), [2 * .5 ** i for i in range(8)])
    np.testing.assert_allclose(seq(L.PiecewiseDecay([2, 4], [1.0, 0.5, 0.1])), [1, 1, .5, .5, .1, .1, .1, .1])
    np.testing.assert_allclose(seq(L.NaturalExpDecay(1.0, 0.5)), [math.exp(-0.5 * i) for i in range(8)])
    np.testing.assert_allclose(seq(L.InverseTimeDecay(1.0, 0.5)), [1 / (1 + 0.5 * i) for i in range(8)])
    np.testing.assert_allclose(seq(L.LambdaDecay(2.0, lambda e: 0.9 ** e)), [2 * 0.9 ** i for i in range(8)])
    np.testing.assert_allclose(seq(L.MultiplicativeDecay(2.0, lambda e: 0.5)), [2 * 0.5 ** i for i in range(8)])
    noam = [2.0 * 16 ** -0.5 * min(1.0 if e == 0 else e ** -0.5, e * 4 ** -1.5) for e in range(8)]
    np.testing.assert_allclose(seq(L.NoamDecay(16, 4, learning_rate=2.0)), noam)


def test_polynomial_decay():
    want = [(1.0 - 0.1) * (1 - min(e, 4) / 4) ** 2 + 0.1 for e in range(8)]
    np.testing.assert_allclose(seq(L.PolynomialDecay(1.0, 4, end_lr=0.1, power=2.0)), want)
    cyc = []
    for e in range(8):
        span = 4 * max(1, math.ceil(e / 4))
        cyc.append(0.9 * (1 - e / span) + 0.1)
    np.testing.assert_allclose(seq(L.PolynomialDecay(1.0, 4, end_lr=0.1, cycle=True)), cyc)


def test_cosine_annealing_and_closed_form():
    got = seq(L.CosineAnnealingDecay(1.0, T_max=4, eta_min=0.1), n=5)
    want = [0.1 + 0.9 * (1 + math.cos(math.pi * e / 4)) / 2 for e in range(5)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    s = L.CosineAnnealingDecay(1.0, T_max=4, eta_min=0.1)
    s.step(3)
    assert abs(s() - want[3]) < 1e-12


def test_linear_warmup_over_scheduler_and_float():
    np.testing.assert_allclose(seq(L.LinearWarmup(0.5, 4, 0.0, 1.0), n=6), [0, .25, .5, .75, .5, .5])
    inner = L.StepDecay(1.0, 2, 0.5)
    np.testing.assert_allclose(seq(L.LinearWarmup(inner, 2, 0.0, 1.0), n=7), [0, .5, 1, 1, .5, .5, .25])


def test_one_cycle():
    s = L.OneCycleLR(1.0, total_steps=10, divide_factor=10, end_learning_rate=0.01, phase_pct=0.3,
                     anneal_strategy="linear")
    got = seq(s, n=10)
    up = [0.1 + (1.0 - 0.1) * e / 2 for e in range(3)]  # phase end at step 0.3*10-1 = 2
    down = [1.0 + (0.01 - 1.0) * (e - 2) / 7 for e in range(3, 10)]
    np.testing.assert_allclose(got, up + down, rtol=1e-12)
    cos = seq(L.OneCycleLR(1.0, total_steps=10), n=10)
    assert abs(cos[0] - 0.04) < 1e-12 and abs(cos[2] - 1.0) < 1e-12 and abs(cos[9] - 1e-4) < 1e-12


def test_cyclic_lr_triangular():
    got = seq(L.CyclicLR(0.1, 1.1, step_size_up=2), n=8)
    np.testing.assert_allclose(got, [0.1, 0.6, 1.1, 0.6, 0.1, 0.6, 1.1, 0.6])


def test_reduce_on_plateau():
    s = L.ReduceOnPlateau(1.0, patience=1, factor=0.5, cooldown=1)
    lrs = []
    for m in [5, 4, 4, 4, 4, 4, 4, 3]:
        s.step(ddg.to_tensor([float(m)]))
        lrs.append(s())
    # bad epochs at 3 and 4 -> reduce at the 2nd bad one; cooldown skips epoch 5; then 6, 7 bad
    assert lrs == [1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25]
    mx = L.ReduceOnPlateau(1.0, mode="max", patience=0, threshold=0.1, threshold_mode="abs", min_lr=0.3)
    for m in [1.0, 1.05, 1.2, 1.0]:
        mx.step(m)
    # 1.05 is not better than 1.0 by 0.1 -> lr 0.5; 1.2 is; 1.0 is not -> max(0.25, min_lr) = 0.3
    assert mx() == 0.3
    st = mx.state_dict()
    fresh = L.ReduceOnPlateau(1.0, mode="max")
    fresh.set_state_dict(st)
    assert fresh() == mx() and fresh.best == mx.best and fresh.last_epoch == 4
    with pytest.raises(ValueError):
        L.ReduceOnPlateau(1.0, factor=2.0)


def test_scheduler_state_and_errors():
    s = L.StepDecay(1.0, 2)
    for _ in range(3):
        s.step()
    t = L.StepDecay(1.0, 2)
    t.set_state_dict(s.state_dict())
    assert (t.last_epoch, t()) == (3, s())
    with pytest.raises(ValueError):
        L.StepDecay(1.0, 0)
    with pytest.raises(ValueError):
        L.PiecewiseDecay([1, 2], [1.0])
    with pytest.raises(TypeError):
        L.LambdaDecay(1.0, 3)


# ---------------------------------------------------------------------------
# inputs that would train nothing, or train the wrong way, raise (Paddle accepts them)

OPTIMIZER_CLASSES = ["SGD", "Momentum", "Adam", "AdamW", "RMSProp", "Adagrad", "Adamax", "Adadelta", "RAdam", "NAdam",
              "Lamb"]


@pytest.mark.parametrize("name", OPTIMIZER_CLASSES)
def test_optimizers_refuse_empty_parameters_and_bad_learning_rates(name):
    cls = getattr(ddg.optimizer, name)
    lin = ddg.nn.Linear(2, 2)
    for empty in ([], (), iter([]), [{"params": []}], [{"params": []}, {"params": []}]):
        with pytest.raises(ValueError, match=rf"ddg.optimizer.{name}: parameters is empty"):
            cls(learning_rate=0.1, parameters=empty)
    with pytest.raises(ValueError, match="more than once"):
        cls(learning_rate=0.1, parameters=[lin.weight, lin.bias, lin.weight])
    for bad in (-0.1, -1e-12, float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError, match=rf"ddg.optimizer.{name}: learning_rate must be a finite number >= 0, "
                                             rf"got {re.escape(repr(bad))}"):
            cls(learning_rate=bad, parameters=lin.parameters())
        with pytest.raises(ValueError, match="group learning_rate must be a finite number >= 0"):
            cls(learning_rate=0.1, parameters=[{"params": lin.parameters(), "learning_rate": bad}])
        opt = cls(learning_rate=0.1, parameters=lin.parameters())
        with pytest.raises(ValueError, match="set_lr value must be a finite number >= 0"):
            opt.set_lr(bad)
        assert opt.get_lr() == 0.1
    cls(learning_rate=0.0, parameters=lin.parameters())          # a frozen run is allowed
    decay = "lamb_weight_decay" if name == "Lamb" else "weight_decay"      # Lamb's own name for it
    for bad in (-0.01, float("nan")):
        with pytest.raises(ValueError, match=rf"ddg.optimizer.{name}: {decay} must be a finite number >= 0"):
            cls(learning_rate=0.1, parameters=lin.parameters(), **{decay: bad})


@pytest.mark.parametrize("sched", ["StepDecay", "ExponentialDecay", "CosineAnnealingDecay", "NaturalExpDecay"])
def test_schedulers_refuse_negative_learning_rates(sched):
    args = {"StepDecay": dict(step_size=2), "ExponentialDecay": dict(gamma=0.9),
            "CosineAnnealingDecay": dict(T_max=3), "NaturalExpDecay": dict(gamma=0.1)}[sched]
    for bad in (-0.5, float("nan")):
        with pytest.raises(ValueError, match=rf"ddg.optimizer.lr.{sched}: learning_rate must be a finite number"):
            getattr(ddg.optimizer.lr, sched)(learning_rate=bad, **args)


def test_momentum_refuses_negative_momentum():
    lin = ddg.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"ddg.optimizer.Momentum: momentum must be >= 0, got -0.5"):
        ddg.optimizer.Momentum(learning_rate=0.1, momentum=-0.5, parameters=lin.parameters())
