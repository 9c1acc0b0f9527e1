"""The fused optimizer step (ddg/optimizer/fused.py) against the per-parameter path:
bit-identical parameters and state in float64, per-parameter settings honoured, and
every way a parameter or the state can be replaced between steps picked up."""
import numpy as np
import pytest

import ddg
from ddg import nn, optimizer as O

SHAPES = [(3, 4), (5,), (2, 3, 2), (1,), (7,)]


def make(dtype="float64", seed=0, attrs=False):
    rng = np.random.default_rng(seed)
    ps = []
    for i, s in enumerate(SHAPES):
        p = nn.Parameter(rng.standard_normal(s).astype(dtype))
        p.name = f"fz_{i}.w_0"
        if attrs and i == 1:
            p.optimize_attr = {"learning_rate": 0.5}
        ps.append(p)
    return ps


def grads(step, n, dtype="float64", skip=None):
    rng = np.random.default_rng(100 + step)
    return [None if skip is not None and i == skip else rng.standard_normal(s).astype(dtype)
            for i, s in enumerate(SHAPES[:n])]


def run(factory, fused, steps=4, skip_at=None, attrs=False, dtype="float64"):
    ps = make(dtype, attrs=attrs)
    opt = factory(ps)
    opt._use_fused = fused
    for t in range(steps):
        gs = grads(t, len(ps), dtype, skip=1 if t == skip_at else None)
        for p, g in zip(ps, gs):
            p.grad = None if g is None else g
            if g is None:
                p.clear_grad(set_to_zero=False)
        opt.step()
    return ps, opt


def same(a, b, rtol=0.0):
    """Bit-identical parameters and state (``rtol``: equal to rounding instead)."""
    pa, oa = a
    pb, ob = b
    for x, y in zip(pa, pb):
        assert x._data.dtype == y._data.dtype
        if rtol:
            np.testing.assert_allclose(x._data, y._data, rtol=rtol, atol=0, err_msg=x.name)
            continue
        assert np.array_equal(x._data, y._data), (x.name, np.abs(x._data - y._data).max())
    sa, sb = oa.state_dict(), ob.state_dict()
    assert sorted(sa) == sorted(sb)
    for k in sa:
        if k == "LR_Scheduler":
            assert sa[k] == sb[k]
            continue
        assert sa[k].shape == sb[k].shape, k
        if rtol:
            np.testing.assert_allclose(sa[k].numpy(), sb[k].numpy(), rtol=rtol, atol=0, err_msg=k)
        else:
            assert np.array_equal(sa[k].numpy(), sb[k].numpy()), k


def decay_fun(name):
    return not name.startswith("fz_2")


FACTORIES = {
    "sgd": lambda ps: O.SGD(0.1, parameters=ps),
    "sgd_l2": lambda ps: O.SGD(0.1, parameters=ps, weight_decay=0.01),
    "momentum": lambda ps: O.Momentum(0.1, 0.9, parameters=ps),
    "nesterov_l1_rescale": lambda ps: O.Momentum(0.1, 0.8, parameters=ps, use_nesterov=True, rescale_grad=0.5,
                                                 weight_decay=ddg.regularizer.L1Decay(0.01)),
    "adam": lambda ps: O.Adam(0.01, parameters=ps),
    "adam_amsgrad_l2": lambda ps: O.Adam(0.01, parameters=ps, amsgrad=True, weight_decay=0.02),
    "adamw": lambda ps: O.AdamW(0.01, parameters=ps, weight_decay=0.1, lr_ratio=lambda p: 0.5 if p.name.endswith(
        "3.w_0") else 1.0, apply_decay_param_fun=decay_fun),
    "adamw_sched": lambda ps: O.AdamW(O.lr.StepDecay(0.01, 2, 0.5), parameters=ps),
    "rmsprop": lambda ps: O.RMSProp(0.01, parameters=ps, momentum=0.5),
    "rmsprop_centered": lambda ps: O.RMSProp(0.01, parameters=ps, momentum=0.5, centered=True),
    "adagrad": lambda ps: O.Adagrad(0.1, parameters=ps, initial_accumulator_value=0.1),
    "lamb": lambda ps: O.Lamb(0.01, parameters=ps),
    "lamb_exclude_adapt": lambda ps: O.Lamb(0.01, parameters=ps, always_adapt=True,
                                           exclude_from_weight_decay_fn=lambda p: p.name.startswith("fz_1")),
    "lamb_no_decay": lambda ps: O.Lamb(0.01, lamb_weight_decay=0.0, parameters=ps),
    "groups": lambda ps: O.Adam(0.01, parameters=[{"params": ps[:2], "learning_rate": 0.5},
                                                  {"params": ps[2:], "weight_decay": 0.01}]),
    "clip": lambda ps: O.Momentum(0.1, parameters=ps, grad_clip=nn.ClipGradByGlobalNorm(0.5)),
    "clip_need_clip_adamw": lambda ps: (setattr(ps[2], "need_clip", False),
                                        O.AdamW(0.01, parameters=ps, grad_clip=nn.ClipGradByGlobalNorm(0.8)))[1],
    "clip_not_reached": lambda ps: O.Adam(0.01, parameters=ps, grad_clip=nn.ClipGradByGlobalNorm(1e3)),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_fused_equals_per_parameter(name):
    f = FACTORIES[name]
    fused = run(f, True, attrs=True, skip_at=2)
    assert fused[1]._flat  # the fused path was taken
    # with ClipGradByGlobalNorm the fused step sums the squares in one reduction over its
    # flat buffer, in another order than one sum per parameter: equal to rounding
    # (Lamb's per-parameter norms: float64 segment sums there, vdot on the per-parameter path)
    same(fused, run(f, False, attrs=True, skip_at=2), rtol=1e-14 if "clip" in name or "lamb" in name else 0.0)


def test_fused_float32_and_mixed_regularizers():
    f = FACTORIES["adamw"]
    same(run(f, True, dtype="float32"), run(f, False, dtype="float32"))

    def mixed(ps):
        ps[0].regularizer = ddg.regularizer.L1Decay(0.05)  # differs from the others: per-parameter path
        return O.Momentum(0.1, parameters=ps, weight_decay=0.01)
    same(run(mixed, True), run(mixed, False))


def test_fused_path_is_taken_and_state_is_flat():
    ps, opt = run(FACTORIES["adam"], True, steps=1)
    (flat,) = opt._flat.values()
    m = flat.flat["moment1"]
    assert m.size == sum(int(np.prod(s)) for s in SHAPES)
    st = opt._state[id(ps[2])]
    assert np.shares_memory(st["moment1"], m) and st["moment1"].shape == SHAPES[2]
    # the parameters themselves are not rebound
    assert all(not np.shares_memory(p._data, m) for p in ps)


def _step_both(mutate, factory=FACTORIES["adam"], steps_after=2):
    """Two steps, ``mutate(ps, opt)`` on both runs, more steps: fused == per-parameter."""
    out = []
    for fused in (True, False):
        ps, opt = run(factory, fused, steps=2)
        mutate(ps, opt)
        for t in range(steps_after):
            for p, g in zip(ps, grads(10 + t, len(ps), ps[0]._data.dtype)):
                p.grad = g
            opt.step()
        out.append((ps, opt))
    same(*out)
    return out


def test_set_value_is_seen():
    def mut(ps, opt):
        ps[1].set_value(np.full(SHAPES[1], 3.0))
    (ps, _), _ = _step_both(mut)
    assert np.abs(ps[1]._data - 3.0).max() < 0.1  # the update started from the new value


def test_rebound_data_is_seen():
    def mut(ps, opt):
        ps[0]._data = np.zeros(SHAPES[0])  # user code replacing the array
    (ps, _), _ = _step_both(mut)
    assert np.abs(ps[0]._data).max() < 0.1


def test_layer_to_dtype_is_seen():
    class Holder(nn.Layer):
        def __init__(self, ps):
            super().__init__()
            for i, p in enumerate(ps):
                self.add_parameter(f"p{i}", p)

    def mut(ps, opt):
        Holder(ps).to(dtype="float32")
    (ps, _), _ = _step_both(mut)
    assert all(p._data.dtype == np.float32 for p in ps)


def test_set_state_dict_is_seen():
    ps0, opt0 = run(FACTORIES["adamw"], True, steps=3)
    saved = {k: (v if k == "LR_Scheduler" else ddg.to_tensor(v.numpy().copy())) for k, v in opt0.state_dict().items()}

    def mut(ps, opt):
        opt.set_state_dict(saved)
        for p, q in zip(ps, ps0):
            p.set_value(q._data)
    _step_both(mut, FACTORIES["adamw"])
    # and the loaded values are what the next fused step reads
    ps, opt = run(FACTORIES["adamw"], True, steps=1)
    opt.set_state_dict(saved)
    sd = opt.state_dict()
    for k in saved:
        assert np.array_equal(sd[k].numpy(), saved[k].numpy())


def test_state_dict_format_unchanged():
    ps, opt = run(FACTORIES["adam"], True, steps=1)
    sd = opt.state_dict()
    assert sorted(sd) == sorted(f"fz_{i}.w_0_{n}_0" for i in range(len(SHAPES))
                                for n in ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc"))
    for i, s in enumerate(SHAPES):
        assert tuple(sd[f"fz_{i}.w_0_moment1_0"].shape) == s
        assert tuple(sd[f"fz_{i}.w_0_beta1_pow_acc_0"].shape) == (1,)


def test_adam_matches_numpy_formula():
    ps, opt = run(FACTORIES["adam"], True, steps=3)
    ref = make()
    for p in ref:
        p._m = np.zeros_like(p._data)
        p._v = np.zeros_like(p._data)
    for t in range(3):
        for p, g in zip(ref, grads(t, len(ref))):
            p._m = 0.9 * p._m + 0.1 * g
            p._v = 0.999 * p._v + 0.001 * g * g
            mh = p._m / (1 - 0.9 ** (t + 1))
            vh = p._v / (1 - 0.999 ** (t + 1))
            p._data = p._data - 0.01 * mh / (np.sqrt(vh) + 1e-8)
    for p, q in zip(ps, ref):
        np.testing.assert_allclose(p._data, q._data, rtol=1e-12, atol=1e-14)


def test_large_parameters_take_the_per_parameter_path_on_cpu(monkeypatch):
    from ddg.optimizer import fused
    monkeypatch.setattr(fused, "CPU_FUSE_MAX_NUMEL", 6)  # (3, 4) and (2, 3, 2) and (7,) are "large"
    for name in ("adamw", "nesterov_l1_rescale", "rmsprop_centered"):
        f = FACTORIES[name]
        a = run(f, True, attrs=True, skip_at=2)
        (flat,) = a[1]._flat.values()
        assert flat.total == 5 + 1
        same(a, run(f, False, attrs=True, skip_at=2))


def _launches_per_adam_step(**opt_kw):
    """Launches of the second Adam step over 10 and over 40 small GPU parameters (simcupy)."""
    from ddg.tensor import backend
    cp = backend.cupy_module() if backend.cupy_available() else None
    if cp is None or not getattr(cp, "SIMULATED", False):
        pytest.skip("counts launches on simcupy (tests/simgpu) only")
    counts = {}
    for n in (10, 40):
        ps = [nn.Parameter(np.ones(8, dtype=np.float32)) for _ in range(n)]
        for p in ps:
            p._data = cp.asarray(p._data)
            p.grad = cp.ones(8, dtype=cp.float32)
        opt = O.Adam(0.01, parameters=ps, **opt_kw)
        opt.step()
        cp.launches.clear()
        opt.step()
        counts[n] = cp.launches.count
    return counts


def test_gpu_launches_per_step(monkeypatch):
    """On (sim)cupy a fused step costs a constant number of launches, whatever the number
    of parameters (before: ~10 per parameter): once the parameters and gradients are
    views of the flat buffers, nothing is gathered or written back per parameter."""
    counts = _launches_per_adam_step()
    assert counts[40] == counts[10] <= 20, counts


def mlp_step_pair(steps, between=None):
    """The same small MLP trained with the fused step and with the per-parameter path,
    ``between(t, model)`` called on both before each step."""
    out = []
    for fused in (True, False):
        ddg.seed(3)
        model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
        for p in model.parameters():
            p._data = p._data.astype(np.float64)
        opt = O.AdamW(0.01, parameters=model.parameters(), weight_decay=0.05)
        opt._use_fused = fused
        rng = np.random.default_rng(7)
        for t in range(steps):
            if between is not None:
                between(t, model, opt)
            for _ in range(2 if t % 3 == 1 else 1):  # some steps accumulate two backward passes
                x = ddg.to_tensor(rng.standard_normal((5, 6)))
                (model(x) ** 2).mean().backward()
            opt.step()
            opt.clear_grad(set_to_zero=(t % 4 != 2))
        out.append((model, opt))
    return out


def test_parameters_and_gradients_become_views_of_the_flat_buffers():
    (fm, fo), (pm, po) = mlp_step_pair(6)
    (flat,) = fo._flat.values()
    for p in fm.parameters():
        assert p._data.base is flat.p, p.name
    x = ddg.to_tensor(np.ones((2, 6)))
    fm(x).sum().backward()
    fo.step()
    for p in fm.parameters():
        assert p._grad._data.base is flat.gown, p.name
    fo.clear_grad()
    assert all(not p.grad.numpy().any() for p in fm.parameters())
    pm(x).sum().backward()
    po.step()
    for a, b in zip(fm.parameters(), pm.parameters()):
        assert np.array_equal(a.numpy(), b.numpy()), a.name


def test_parameters_replaced_between_steps_are_adopted_again():
    def between(t, model, opt):
        if t == 3:
            w = model[0].weight
            w.set_value(w.numpy() * 0.5)
            model[2].bias._data = model[2].bias._data + 1.0  # rebinding, as a user might
    (fm, fo), (pm, _) = mlp_step_pair(7, between)
    for a, b in zip(fm.parameters(), pm.parameters()):
        assert np.array_equal(a.numpy(), b.numpy()), a.name
    (flat,) = fo._flat.values()
    assert all(p._data.base is flat.p for p in fm.parameters())


def test_a_parameter_array_held_elsewhere_is_updated_in_place():
    """A kept view of a parameter (or its array held by the user) must see every update:
    such a parameter keeps its own array and is written back each step."""
    held = {}

    def between(t, model, opt):
        if t == 0 and opt._use_fused:
            held["t"] = model[0].weight.T       # a ddg view tensor, kept
            held["a"] = model[2].weight._data    # the raw array, kept
    (fm, fo), (pm, _) = mlp_step_pair(5, between)
    (flat,) = fo._flat.values()
    assert fm[0].weight._data.base is not flat.p and fm[2].weight._data.base is not flat.p
    assert fm[0].bias._data.base is flat.p
    assert np.array_equal(held["t"].numpy(), fm[0].weight.numpy().T)
    assert held["a"] is fm[2].weight._data
    for a, b in zip(fm.parameters(), pm.parameters()):
        assert np.array_equal(a.numpy(), b.numpy()), a.name


def test_a_gradient_fetched_before_clear_grad_is_the_live_one():
    (fm, fo), _ = mlp_step_pair(2)
    x = ddg.to_tensor(np.ones((2, 6)))
    fm(x).sum().backward()
    fo.step()
    g = fm[0].weight.grad
    fo.clear_grad()
    assert g is fm[0].weight.grad and not g.numpy().any()
    fm(x).sum().backward()
    assert np.array_equal(g.numpy(), fm[0].weight.grad.numpy()) and g.numpy().any()


def test_global_norm_clip_with_parameters_outside_the_flat_buffer(monkeypatch):
    """The global norm counts the gradients the fused step leaves to the per-parameter
    path (large ones on the CPU) too, and clips them by the same factor."""
    from ddg.optimizer import fused
    monkeypatch.setattr(fused, "CPU_FUSE_MAX_NUMEL", 6)
    for name in ("clip", "clip_need_clip_adamw"):
        f = FACTORIES[name]
        a = run(f, True, attrs=True, skip_at=2)
        assert a[1]._flat
        same(a, run(f, False, attrs=True, skip_at=2), rtol=1e-14)


def test_the_gradients_are_left_as_backward_made_them():
    """Clipping, rescale_grad and weight decay work on the fused step's own copy: the
    parameters' .grad (adopted into flat storage) keep their values."""
    ddg.seed(5)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = O.Momentum(0.1, parameters=model.parameters(), rescale_grad=0.5, weight_decay=0.01,
                     grad_clip=nn.ClipGradByGlobalNorm(0.1))
    x = ddg.to_tensor(np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32))
    for t in range(3):
        (model(x) ** 2).sum().backward()
        before = [p.grad.numpy() for p in model.parameters()]
        opt.step()
        for p, g in zip(model.parameters(), before):
            assert np.array_equal(p.grad.numpy(), g), p.name
        opt.clear_grad()
    (flat,) = opt._flat.values()
    assert all(p._grad._data.base is flat.gown for p in model.parameters())


def test_global_norm_clip_costs_constant_launches(monkeypatch):
    counts = _launches_per_adam_step(grad_clip=nn.ClipGradByGlobalNorm(1.0))
    assert counts[40] == counts[10] <= 26, counts

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rule", ["sgd", "momentum", "nesterov", "adam", "amsgrad"])
def test_compiled_update_is_bitwise_the_numpy_rule(rule, dtype):
    """The one-pass compiled updates (ddg/tensor/optim_kernels.py) give exactly the numpy
    rule's values, NaN and zeros included, so every path agrees bit for bit."""
    from ddg.optimizer.adam import update_moments
    from ddg.tensor import optim_kernels as K
    rng = np.random.default_rng(4)
    n = K.MIN_SIZE + 37
    p, g, m, v, vm = (rng.standard_normal(n).astype(dtype) for _ in range(5))
    v, vm = np.abs(v), np.abs(vm)
    g[5], vm[7], v[11] = np.nan, np.nan, np.nan
    g[9] = m[9] = v[9] = 0
    assert K.usable(p, g, m, scalars=(0.9, 0.01)) and not K.usable(p, g, scalars=(np.float64(0.9),))
    assert not K.usable(p[:100], g[:100]) and not K.usable(p, g.astype("float16"))
    want = [a.copy() for a in (p, m, v, vm)]
    got = [a.copy() for a in (p, m, v, vm)]
    s = np.empty_like(p)
    if rule == "sgd":
        np.multiply(g, 0.01, out=s)
        want[0] -= s
        K.sgd(got[0], g, 0.01)
    elif rule in ("momentum", "nesterov"):
        P, V = want[0], want[1]
        V *= 0.9
        V += g
        if rule == "nesterov":
            np.multiply(V, 0.9, out=s)
            s += g
            s *= 0.01
        else:
            np.multiply(V, 0.01, out=s)
        P -= s
        K.momentum(got[0], g, got[1], 0.9, 0.01, rule == "nesterov")
    else:
        P, M, V, VM = want
        update_moments(np, M, V, g, 0.9, 0.999, s)
        if rule == "amsgrad":
            np.maximum(VM, V, out=VM)
            V = VM
        np.sqrt(V, out=s)
        s += 7e-9
        np.divide(M, s, out=s)
        s *= 0.0123
        P -= s
        K.adam(got[0], g, got[1], got[2], got[3] if rule == "amsgrad" else None, 0.9, 0.999, 0.0123, 7e-9)
    for a, b in zip(want, got):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
