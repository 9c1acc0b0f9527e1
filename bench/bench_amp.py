"""Mixed precision on the CPU: float16 O1/O2 vs float32 steps of the transformer of
bench/gpu_models.py on numpy, and the trained loss of fp16 O1/O2 against float32.

    python bench/bench_amp.py                  # CPU-sized transformer, 200-step agreement
    python bench/bench_amp.py --size full      # bench_gpu.py's transformer size
    python bench/bench_amp.py --steps 200 --no-speed

Expect AMP to be SLOWER on numpy: numpy has no float16 BLAS (its float16 matmul is a
plain loop, converting every element), so the ratio measures what casting costs there,
not a speed-up; the point of ddg's CPU AMP is to run and check AMP programs without a
GPU. On a GPU (cupy) the same code runs the white-listed products in float16 on cuBLAS.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from _common import bench  # noqa: E402
import ddg  # noqa: E402
import gpu_models as G  # noqa: E402

CPU_SIZE = dict(batch=8, seq=32, d_model=64, heads=4, ff=256, layers=2, vocab=200, classes=10)
AGREE_SIZE = dict(batch=16, seq=16, d_model=32, heads=4, ff=64, layers=2, vocab=50, classes=4)


def build(mode, cfg, lr=1e-3):
    ddg.seed(0)
    model = G.DdgTransformer(cfg)
    opt = ddg.optimizer.Adam(learning_rate=lr, parameters=model.parameters())
    if mode == "O2":
        model, opt = ddg.amp.decorate(model, opt, level="O2")
    scaler = ddg.amp.GradScaler(enable=mode != "fp32", init_loss_scaling=1024)
    return model, opt, scaler


def step_fn(mode, model, opt, scaler, x, y):
    level = "O2" if mode == "O2" else "O1"

    def step():
        with ddg.amp.auto_cast(enable=mode != "fp32", level=level):
            loss = model(x, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.clear_grad()
        return loss
    return step


def speed(cfg):
    xs, ys = G.make_data("transformer", cfg)
    x, y = ddg.to_tensor(xs), ddg.to_tensor(ys)
    times = {}
    for mode in ("fp32", "O1", "O2"):
        model, opt, scaler = build(mode, cfg)
        fn = step_fn(mode, model, opt, scaler, x, y)
        fn()
        times[mode], _ = bench(fn, repeats=5, min_time=0.5)
    print(f"transformer {cfg}")
    print("| mode | step (ms) | / fp32 |")
    print("|---|---|---|")
    for mode, t in times.items():
        print(f"| {mode} | {t * 1e3:.1f} | {t / times['fp32']:.2f} |")


def task(cfg, steps, seed=1):
    """A learnable task: the class is the most frequent token's bucket."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))
        hot = rng.integers(0, cfg["vocab"], cfg["batch"])
        x[:, : cfg["seq"] // 2] = hot[:, None]
        y = hot * cfg["classes"] // cfg["vocab"]
        yield ddg.to_tensor(x.astype(np.int64)), ddg.to_tensor(y.astype(np.int64))


def agreement(steps):
    curves = {}
    for mode in ("fp32", "O1", "O2"):
        model, opt, scaler = build(mode, AGREE_SIZE, lr=3e-3)
        losses = []
        for x, y in task(AGREE_SIZE, steps):
            losses.append(float(step_fn(mode, model, opt, scaler, x, y)()))
        curves[mode] = np.array(losses)
    ref = curves["fp32"]
    k = max(1, steps // 10)
    print(f"trained loss after {steps} steps (mean of the last {k}), small transformer {AGREE_SIZE}")
    print("| mode | first loss | final loss | max abs diff vs fp32 over the curve |")
    print("|---|---|---|---|")
    for mode, c in curves.items():
        print(f"| {mode} | {c[0]:.4f} | {c[-k:].mean():.4f} | {np.abs(c - ref).max():.4f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=["cpu", "full"], default="cpu")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--no-agreement", action="store_true")
    a = ap.parse_args()
    if not a.no_speed:
        speed(CPU_SIZE if a.size == "cpu" else G.sizes()["transformer"])
    if not a.no_agreement:
        agreement(a.steps)


if __name__ == "__main__":
    main()
