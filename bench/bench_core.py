"""Eager overhead of the core: tiny-op cost with and without recording, and the
two-layer training step of the PyTorch tutorial (manual updates), against raw numpy
(and torch when installed), measured in one run. Ratios are what count; absolute times on shared machines are noise.

    python bench/bench_core.py
"""
import _common  # noqa: F401  (single-threaded BLAS, set before numpy loads)
from _common import best_of, race, try_torch

import numpy as np

import ddg


def tiny_ops():
    a_np, b_np = np.ones(4, np.float32), np.ones(4, np.float32)
    a, b = ddg.to_tensor(a_np), ddg.to_tensor(b_np)
    ar = ddg.to_tensor(a_np, stop_gradient=False)
    n = 20000
    rows = {"numpy add (4 elements)": best_of(lambda: a_np + b_np, n),
            "ddg add, no recording": best_of(lambda: a + b, n),
            "ddg add, recording": best_of(lambda: ar + b, n)}
    torch = try_torch()
    if torch is not None:
        ta, tb = torch.ones(4), torch.ones(4)
        tr = torch.ones(4, requires_grad=True)
        rows["torch add, no recording"] = best_of(lambda: ta + tb, n)
        rows["torch add, recording"] = best_of(lambda: tr + tb, n)
    return rows


N, D_IN, H, D_OUT = 64, 1000, 100, 10


def two_layer():
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((N, D_IN)).astype(np.float32)
    y_np = rng.standard_normal((N, D_OUT)).astype(np.float32)
    w1_0 = rng.standard_normal((D_IN, H)).astype(np.float32)
    w2_0 = rng.standard_normal((H, D_OUT)).astype(np.float32)
    lr = 1e-6

    # hand-written numpy: forward, backward, SGD update
    w1n, w2n = w1_0.copy(), w2_0.copy()

    def numpy_step():
        h = x_np @ w1n
        h_relu = np.maximum(h, 0)
        y_pred = h_relu @ w2n
        diff = y_pred - y_np
        grad_y = 2.0 * diff
        grad_w2 = h_relu.T @ grad_y
        grad_h = grad_y @ w2n.T
        grad_h[h < 0] = 0
        grad_w1 = x_np.T @ grad_h
        w1n.__isub__(lr * grad_w1)
        w2n.__isub__(lr * grad_w2)

    # ddg, written as the tutorial writes it (PyTorch spellings)
    x, y = ddg.to_tensor(x_np), ddg.to_tensor(y_np)
    w1 = ddg.to_tensor(w1_0, stop_gradient=False)
    w2 = ddg.to_tensor(w2_0, stop_gradient=False)

    def ddg_step():
        loss = (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()
        loss.backward()
        with ddg.no_grad():
            w1.subtract_(lr * w1.grad)
            w2.subtract_(lr * w2.grad)
            w1.grad.zero_()
            w2.grad.zero_()

    fns = {"numpy two-layer step": numpy_step, "ddg two-layer step": ddg_step}
    torch = try_torch()
    if torch is not None:
        tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)
        tw1 = torch.tensor(w1_0, requires_grad=True)
        tw2 = torch.tensor(w2_0, requires_grad=True)

        def torch_step():
            loss = (tx.mm(tw1).clamp(min=0).mm(tw2) - ty).pow(2).sum()
            loss.backward()
            with torch.no_grad():
                tw1.sub_(lr * tw1.grad)
                tw2.sub_(lr * tw2.grad)
                tw1.grad.zero_()
                tw2.grad.zero_()
        fns["torch two-layer step"] = torch_step
    return race(fns, steps=100, rounds=9)


def main():
    print("Tiny ops: minimum over 9 repeats of 20,000 calls. Steps: median of 9 alternating rounds of "
          "100 steps each.")
    print(f"ddg {ddg.__version__}, numpy {np.__version__}, allocator tuned at import: "
          f"{ddg._malloc.TUNED}\n")
    ops = tiny_ops()
    print("| tiny op | us per call |\n|---|---|")
    for k, v in ops.items():
        print(f"| {k} | {v * 1e6:.2f} |")
    base = ops["numpy add (4 elements)"]
    print(f"\nrecording overhead above numpy: {(ops['ddg add, recording'] - base) * 1e6:.2f} us "
          f"(target <= 2 us); without recording: {(ops['ddg add, no recording'] - base) * 1e6:.2f} us")
    steps = two_layer()
    print("\n| two-layer step (N=64, 1000-100-10) | ms | page faults/step |\n|---|---|---|")
    for k, (t, f) in steps.items():
        print(f"| {k} | {t * 1e3:.3f} | {f:.1f} |")
    d = steps["ddg two-layer step"][0]
    print(f"\nddg / hand-written numpy (same process, allocator tuned): "
          f"{d / steps['numpy two-layer step'][0]:.2f} (target <= 1.2)")
    if "torch two-layer step" in steps:
        print(f"ddg / torch: {d / steps['torch two-layer step'][0]:.2f} (target <= 0.8)")


if __name__ == "__main__":
    main()
