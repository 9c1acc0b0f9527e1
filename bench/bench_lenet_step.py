"""LeNet (the MNIST model of the examples) training step: ddg vs PyTorch eager, single thread.

One step = forward + cross-entropy + backward + a plain SGD update written inline
(so the optimizer package does not enter the measurement), batch 64 of 1x28x28.
Prints the median step time of each and the ratio ddg / torch (lower is better).

    python bench/bench_lenet_step.py [--steps 60] [--batch 64] [--profile]
"""
import os

# one BLAS/OpenMP thread for both frameworks: must be set before numpy is imported
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ddg  # noqa: E402
import ddg.nn.functional as F  # noqa: E402
from ddg import nn  # noqa: E402


class LeNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2D(1, 20, 5)
        self.pool1 = nn.MaxPool2D(2, 2)
        self.conv2 = nn.Conv2D(20, 50, 5)
        self.pool2 = nn.MaxPool2D(2, 2)
        self.fc = nn.Linear(800, 10)

    def forward(self, x):
        x = self.pool1(F.relu(self.conv1(x)))
        x = self.pool2(F.relu(self.conv2(x)))
        return self.fc(ddg.flatten(x, start_axis=1))


def time_steps(step, n):
    for _ in range(2):
        step()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def ddg_step_fn(x, y, lr=0.01):
    model = LeNet()
    params = model.parameters()
    xt, yt = ddg.to_tensor(x), ddg.to_tensor(y)

    def step():
        loss = F.cross_entropy(model(xt), yt)
        loss.backward()
        for p in params:
            p._data -= lr * p.grad._data
            p.grad._data[...] = 0
        return loss

    return step


def torch_step_fn(x, y, lr=0.01):
    import torch
    torch.set_num_threads(1)
    tnn = torch.nn

    class TLeNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = tnn.Conv2d(1, 20, 5)
            self.conv2 = tnn.Conv2d(20, 50, 5)
            self.fc = tnn.Linear(800, 10)

        def forward(self, x):
            x = torch.max_pool2d(torch.relu(self.conv1(x)), 2, 2)
            x = torch.max_pool2d(torch.relu(self.conv2(x)), 2, 2)
            return self.fc(torch.flatten(x, 1))

    model = TLeNet()
    params = list(model.parameters())
    xt, yt = torch.tensor(x), torch.tensor(y)

    def step():
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
                p.grad.zero_()
        return loss

    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--profile", action="store_true", help="cProfile the ddg step")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, args.batch).astype(np.int64)

    step = ddg_step_fn(x, y)
    if args.profile:
        import cProfile
        import pstats
        for _ in range(3):
            step()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(20):
            step()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(15)
        return
    try:
        import torch  # noqa: F401
        tstep = torch_step_fn(x, y)
    except ImportError:
        tstep = None
    # interleave the two in rounds so that load changes on a shared machine hit both alike
    t_ddg, t_torch = [], []
    for _ in range(max(1, args.steps // 10)):
        t_ddg.append(time_steps(step, 10))
        if tstep is not None:
            t_torch.append(time_steps(tstep, 10))
    t_ddg = float(np.median(t_ddg))
    print(f"ddg   LeNet train step (batch {args.batch}, 1 thread): {t_ddg * 1e3:7.2f} ms")
    if tstep is None:
        print("torch not importable: no ratio")
        return
    t_torch = float(np.median(t_torch))
    print(f"torch LeNet train step (batch {args.batch}, 1 thread): {t_torch * 1e3:7.2f} ms")
    print(f"ratio ddg/torch: {t_ddg / t_torch:.2f}  (target <= 0.8)")

if __name__ == "__main__":
    main()
