"""ddg.distributed.fleet in one process: recompute (gradients of the plain forward,
dropout included, every way of calling it), DistributedStrategy, gradient merge, and
group_sharded_parallel at world size 1."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.distributed import fleet
from ddg.distributed.fleet.utils import recompute, recompute_sequential
from ddg.distributed.sharding import assign_owners, group_sharded_parallel


def _blocks(dropout=0.5, dtype="float64"):
    ddg.seed(1)
    prev = ddg.get_default_dtype()
    ddg.set_default_dtype(dtype)
    try:
        return (nn.Linear(6, 16),
                nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Dropout(dropout), nn.Linear(16, 16)),
                nn.Linear(16, 3))
    finally:
        ddg.set_default_dtype(prev)


X = np.random.default_rng(0).standard_normal((5, 6))


def _grads(mode):
    """Gradients of every parameter and of the input, and a draw made after backward
    (the random stream must be where the plain run leaves it)."""
    a, b, c = _blocks()
    ddg.seed(7)
    x = ddg.to_tensor(X, stop_gradient=False)
    h = a(x)
    if mode == "plain":
        h = b(h)
    elif mode == "layer":
        h = recompute(b, h)
    elif mode == "function":
        h = recompute(lambda t, scale=1.0: b(t) * scale, h, scale=1.0)
    elif mode == "nested":
        h = recompute(lambda t: recompute(b, t), h)
    elif mode == "sequential":
        h = recompute_sequential({"segments": 2}, b, h)
    loss = (c(h) ** 2).sum()
    loss.backward()
    after = ddg.rand([3]).numpy()
    return [p.grad.numpy() for m in (a, b, c) for p in m.parameters()] + [x.grad.numpy(), after]


@pytest.mark.parametrize("mode", ["layer", "function", "nested", "sequential"])
def test_recompute_gradients_equal_plain(mode):
    want = _grads("plain")
    got = _grads(mode)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)


def test_recompute_keyword_tensor_with_its_own_graph():
    """A Tensor with a graph of its own given as a keyword argument and also used
    outside the segment: its gradient is counted once, and the outer graph is intact
    whichever order the backward reaches the two uses in."""
    def run(use, first):
        a, b, c = _blocks(dropout=0.0)
        x = ddg.to_tensor(X, stop_gradient=False)
        side = a(x) * 2.0                        # outer graph, used inside and outside
        h = a(x)

        def seg(t, extra=None):
            return b(t) + extra
        h = recompute(seg, h, extra=side) if use else seg(h, extra=side)
        parts = [(c(h) ** 2).sum(), (side ** 2).sum()]
        (parts[0] + parts[1] if first else parts[1] + parts[0]).backward()
        return [p.grad.numpy() for m in (a, b, c) for p in m.parameters()] + [x.grad.numpy()]
    for first in (True, False):
        for g, w in zip(run(True, first), run(False, first)):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


def test_recompute_under_auto_cast():
    """The rerun happens under the auto_cast policy of the first run (bfloat16 matmuls
    here), even though backward runs outside the context."""
    def run(use):
        a, b, c = _blocks(dropout=0.0, dtype="float32")
        x = ddg.to_tensor(X.astype("float32"), stop_gradient=False)
        with ddg.amp.auto_cast(level="O1", dtype="bfloat16"):
            h = recompute(b, a(x)) if use else b(a(x))
            assert h.dtype == ddg.bfloat16
            out = c(h)
        (out.astype("float32") ** 2).sum().backward()
        return [p.grad.numpy() for m in (a, b, c) for p in m.parameters()] + [x.grad.numpy()]
    for g, w in zip(run(True), run(False)):
        np.testing.assert_array_equal(g, w)


def test_recompute_without_rng_preservation_draws_new_masks():
    """preserve_rng_state=False: the rerun draws fresh dropout masks, so the gradients
    differ from the plain forward's (the case preservation exists for)."""
    a, b, c = _blocks()
    ddg.seed(7)
    h = recompute(b, a(ddg.to_tensor(X)), preserve_rng_state=False)
    (c(h) ** 2).sum().backward()
    want = _grads("plain")
    assert not np.allclose(a.weight.grad.numpy(), want[0])


def test_recompute_multiple_outputs_and_frozen_inputs():
    ddg.seed(3)
    lin = nn.Linear(4, 4)
    x = ddg.to_tensor(np.arange(8.0, dtype=np.float32).reshape(2, 4), stop_gradient=False)
    k = ddg.to_tensor(np.ones((2, 4), dtype=np.float32))           # needs no gradient

    def f(u, v):
        y = lin(u)
        return y * v, y.sum()
    p, s = f(x, k)
    (p.sum() + s * 2).backward()
    want = [lin.weight.grad.numpy().copy(), lin.bias.grad.numpy().copy(), x.grad.numpy().copy()]
    lin.clear_gradients()
    x.clear_grad()
    p, s = recompute(f, x, k)
    assert k.grad is None and not p.stop_gradient
    (p.sum() + s * 2).backward()
    for g, w in zip([lin.weight.grad.numpy(), lin.bias.grad.numpy(), x.grad.numpy()], want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    with ddg.no_grad():
        assert recompute(lin, x).stop_gradient
    with pytest.raises(TypeError, match="recompute: function must be callable"):
        recompute(3, x)
    with pytest.raises(TypeError, match="must return a Tensor"):
        recompute(lambda t: "no", x)


def test_strategy_configs():
    s = fleet.DistributedStrategy()
    assert s.gradient_merge_configs == {"k_steps": 1, "avg": True}
    assert s.sharding_configs["stage"] == 1 and s.amp_configs["init_loss_scaling"] == 32768.0
    s.amp_configs = {"use_pure_fp16": True}
    assert s.amp_configs["use_pure_fp16"] and s.amp_configs["incr_ratio"] == 2.0
    with pytest.raises(ValueError, match="unknown key.*'k_step'"):
        s.gradient_merge_configs = {"k_step": 2}
    with pytest.raises(TypeError, match="must be True or False"):
        s.amp = 1
    with pytest.raises(AttributeError, match="no attribute 'ampp'"):
        s.ampp = True
    s.pipeline = True
    with pytest.raises(NotImplementedError, match="pipeline"):
        fleet.init(is_collective=True, strategy=s)


def test_fleet_single_process_gradient_merge():
    """k_steps=3 with avg: three micro-batches, one update, equal to one step on the
    three of them together (the mean loss); the steps in between leave the parameters."""
    def net():
        ddg.seed(2)
        prev = ddg.get_default_dtype()
        ddg.set_default_dtype("float64")
        try:
            return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
        finally:
            ddg.set_default_dtype(prev)
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((12, 6)), rng.integers(0, 3, 12)
    ref = net()
    ropt = ddg.optimizer.Adam(0.1, parameters=ref.parameters())
    for s in range(2):
        rows = slice(6 * s, 6 * s + 6)
        F.cross_entropy(ref(ddg.to_tensor(x[rows])), ddg.to_tensor(y[rows])).backward()
        ropt.step()
        ropt.clear_grad()
    s = fleet.DistributedStrategy()
    s.gradient_merge = True
    s.gradient_merge_configs = {"k_steps": 3}
    fleet.init(is_collective=True, strategy=s)
    assert fleet.worker_num() == 1 and fleet.worker_index() == 0 and fleet.is_first_worker()
    fleet.barrier_worker()
    model = fleet.distributed_model(net())
    opt = fleet.distributed_optimizer(ddg.optimizer.Adam(0.1, parameters=model.parameters()))
    start = [p.numpy().copy() for p in model.parameters()]
    for m in range(6):
        rows = slice(2 * m, 2 * m + 2)
        F.cross_entropy(model(ddg.to_tensor(x[rows])), ddg.to_tensor(y[rows])).backward()
        opt.step()
        opt.clear_grad()
        if m == 1:
            assert all(np.array_equal(a, p.numpy()) for a, p in zip(start, model.parameters()))
    for a, b in zip(ref.parameters(), model.parameters()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="k_steps.*>= 1"):
        s.gradient_merge_configs = {"k_steps": 0}
        fleet.distributed_optimizer(ddg.optimizer.SGD(0.1, parameters=model.parameters()), strategy=s)


def test_group_sharded_single_process_and_errors():
    ddg.seed(2)
    net = nn.Linear(4, 2)
    with pytest.raises(ValueError, match="level must be one of"):
        group_sharded_parallel(net, ddg.optimizer.SGD(0.1, parameters=net.parameters()), "os_x")
    with pytest.raises(TypeError, match="optimizer must be a ddg.optimizer.Optimizer"):
        group_sharded_parallel(net, object(), "os")
    model, opt, scaler = group_sharded_parallel(net, ddg.optimizer.Adam(0.1, parameters=net.parameters()), "os")
    assert scaler is None and opt.owned_parameters == list(net.parameters())
    model(ddg.ones([3, 4])).sum().backward()
    opt.step()
    assert sorted(opt.state_dict()) == sorted(opt._optim.state_dict())


def test_assign_owners_balances():
    assert assign_owners([5, 3, 3, 1], 2) == [0, 1, 1, 0]
    assert assign_owners([1] * 7, 3) == [0, 1, 2, 0, 1, 2, 0]
    owners = assign_owners([100, 1, 1, 1, 1], 2)
    assert owners[0] == 0 and owners[1:] == [1, 1, 1, 1]


def _run_example(args, n=None, tmp=None):
    import os
    import subprocess
    import sys
    from conftest import ROOT
    from ddg.parallel.comm import launcher_env
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    for k in launcher_env.LAUNCHER_VARS + ("DDG_FORCE_MPI",):
        env.pop(k, None)
    cmd = [sys.executable] + args if n is None else \
        [sys.executable, os.path.join(ROOT, "launch", "ddgrun.py"), "-n", str(n), sys.executable] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)


@pytest.mark.parametrize("n", [None, 2])
def test_paddle_examples_run(n, tmp_path):
    """Paddle's fleet quick start and group_sharded_parallel example, one process and
    under ddgrun -n 2; the sharded checkpoint is an ordinary one."""
    out = _run_example(["examples/fleet_quickstart.py"], n)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"fleet quick start done on {n or 1} worker(s)" in out.stdout
    assert out.stdout.count("[Epoch 0, batch 2]") == (n or 1)
    out = _run_example(["examples/group_sharded.py", str(tmp_path)], n)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "step 2 loss" in out.stdout
    model = ddg.nn.Linear(1000, 1000)
    model.set_state_dict(ddg.load(str(tmp_path / "model.pdmodel")))
    opt = ddg.optimizer.AdamW(0.001, parameters=model.parameters())
    opt.set_state_dict(ddg.load(str(tmp_path / "model.pdopt")))
    assert len(opt._state) == 2


@pytest.mark.parametrize("pure", [False, True])
def test_fleet_amp_strategy(pure):
    """strategy.amp: the model's forward runs under auto_cast with amp_configs' lists
    (O2 with use_pure_fp16: float16 parameters, master weights in the optimizer); the
    state dict keeps the model's own names."""
    def net():
        ddg.seed(3)
        return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = ddg.to_tensor(np.random.default_rng(0).standard_normal((4, 8)).astype("float32"))
    s = fleet.DistributedStrategy()
    s.amp = True
    s.amp_configs = {"use_pure_fp16": pure, "custom_black_list": ["relu"]}
    fleet.init(is_collective=True, strategy=s)
    model = fleet.distributed_model(net())
    opt = fleet.distributed_optimizer(ddg.optimizer.Adam(0.01, parameters=model.parameters()))
    ref = net()
    if pure:
        ref = ddg.amp.decorate(models=ref, level="O2")
    with ddg.amp.auto_cast(level="O2" if pure else "O1", custom_black_list={"relu"}):
        want = ref(x)
    out = model(x)
    assert out.dtype == want.dtype == ddg.float16
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    assert sorted(model.state_dict()) == sorted(ref.state_dict())
    out.astype("float32").sum().backward()
    opt.step()
    assert len(opt._masters) == (4 if pure else 0)
    assert {p.dtype for p in model.parameters()} == {ddg.float16 if pure else ddg.float32}
