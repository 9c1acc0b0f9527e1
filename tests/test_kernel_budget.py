"""GPU launches per training step stay within their recorded budgets.

On a GPU ddg is bound by launches (about 15 us each; see ../shared/GPU.md), so the
number of kernels a training step issues is the figure that CI can guard without a GPU:
simcupy (tests/simgpu) counts the launches a real GPU would be given. Each model of
bench/gpu_models.py, at the "budget" sizes (every layer of the benchmark's model, at
small widths: the same launches), runs a training step (forward, cross-entropy,
backward, Adam step, clear_grad) eagerly and under ``to_static``; its count must not
exceed the budget below.

When a change lowers a count, lower its budget here (the test prints the counts with
``-s``); a change that raises one needs a reason, written next to the new budget.
On a real GPU this test skips: there CUPTI counts (``python bench/bench_gpu.py``).
"""
import importlib.util
import os

import pytest

import ddg
from ddg.tensor import backend

cp = backend.cupy_module() if backend.cupy_available() else None
pytestmark = pytest.mark.skipif(cp is None or not getattr(cp, "SIMULATED", False),
                                reason="counts launches on simcupy (tests/simgpu) only")

# Launches per training step with Adam, measured on simcupy (2026-11-22). For scale, on
# the H100 CUPTI counted 145 / 296 / 1652 for mlp / lenet / transformer, torch 32 / 65 / 310.
# 2026-11-23, fused optimizer step (ddg/optimizer/fused.py): from 131 / 272 / 1382 / 1997 / 2179.
# 2026-11-23, simcupy counts ``copyto`` (the fused step's per-parameter write-back: 73 / 170 /
# 653 / 1323 / 1076 with it), then parameters and gradients become views of the fused step's
# flat buffers: no gather or write-back, and ``Optimizer.clear_grad`` zeroes one buffer.
# Batch norm's backward no longer gets (and computes with) zeros for the batch statistics'
# gradients: resnet18 1198 -> 1038. Half-precision support drops the GPT decoder's mask casts: 873 -> 849.
BUDGETS = {
    "mlp": 60,
    "lenet": 149,
    "transformer": 518,
    "resnet18": 1038,
    "gpt": 849,
}


def _models():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "gpu_models.py")
    spec = importlib.util.spec_from_file_location("_bench_gpu_models", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _count(name, static):
    gm = _models()
    cfg = gm.sizes("budget")[name]
    ddg.seed(0)
    model = gm.DDG_MODELS[name](cfg)
    model.to("gpu")
    if static:
        ddg.jit.to_static(model)
    opt = ddg.optimizer.Adam(1e-3, parameters=model.parameters())
    xa, ya = gm.make_data(name, cfg)
    x, y = ddg.to_tensor(xa, place="gpu"), ddg.to_tensor(ya, place="gpu")

    def step():
        loss = model(x, y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    step()
    step()      # optimizer state exists, to_static has recorded and replays
    cp.launches.clear()
    step()
    count, by_name = cp.launches.count, dict(cp.launches.by_name)
    return count, by_name


@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
@pytest.mark.parametrize("name", sorted(BUDGETS))
def test_launches_per_training_step_within_budget(name, static):
    count, by_name = _count(name, static)
    top = ", ".join(f"{k} {v}" for k, v in sorted(by_name.items(), key=lambda kv: -kv[1])[:8])
    print(f"\n{name} {'static' if static else 'eager'}: {count} launches per step ({top})")
    assert count > 0
    assert count <= BUDGETS[name], (f"{name}: {count} launches per training step, over its budget of "
                                    f"{BUDGETS[name]}; most: {top}")


def test_the_count_sees_launches_and_not_views():
    a = cp.ones((4, 5), dtype=cp.float32)
    cp.launches.clear()
    a.reshape(20)
    a.T
    a[1:3]
    assert cp.launches.count == 0
    b = a * 2 + 1          # 2
    b += a                 # 1
    a[a > 0]               # 2: the comparison, the gather
    b[0] = 3               # 1
    cp.zeros((3,))         # 1: a memset
    cp.empty((3,))         # 0
    assert cp.launches.count == 7, cp.launches.by_name
