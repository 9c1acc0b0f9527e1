"""Training-step time of small models: ddg vs PyTorch CPU eager (when
installed) vs hand-written numpy, single-threaded, measured in one run.

    python bench/bench_models.py [--rounds 5]

Models: MLP 128-256-256-1 (batch 64, MSE, SGD), MLP 784-1024-1024-10 (batch 256,
cross-entropy, SGD) and the MNIST LeNet (batch 64, cross-entropy, Adam). Each
framework runs the same number of steps in alternating rounds and the median step
time is reported, so that load changes on a shared machine hit all of them alike.
"""
import argparse
import time

import _common  # noqa: F401  (single-threaded BLAS, set before numpy loads)
from _common import try_torch

import numpy as np

import ddg
import ddg.nn.functional as F
from ddg import nn


def ddg_mlp(sizes, batch, loss, opt="sgd"):
    rng = np.random.default_rng(0)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    x = ddg.to_tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32))
    if loss == "mse":
        y = ddg.to_tensor(rng.standard_normal((batch, sizes[-1])).astype(np.float32))
    else:
        y = ddg.to_tensor(rng.integers(0, sizes[-1], batch))
    o = ddg.optimizer.SGD(0.01, parameters=model.parameters())

    def step():
        out = model(x)
        lv = F.mse_loss(out, y) if loss == "mse" else F.cross_entropy(out, y)
        lv.backward()
        o.step()
        o.clear_grad()
    return step


def numpy_mlp(sizes, batch, loss):
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((a, b)).astype(np.float32) * np.sqrt(2 / a) for a, b in zip(sizes[:-1], sizes[1:])]
    bs = [np.zeros(b, np.float32) for b in sizes[1:]]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    if loss == "mse":
        y = rng.standard_normal((batch, sizes[-1])).astype(np.float32)
    else:
        y = rng.integers(0, sizes[-1], batch)
    lr = np.float32(0.01)

    def step():
        acts = [x]
        h = x
        for i, (w, b) in enumerate(zip(ws, bs)):
            h = h @ w + b
            if i < len(ws) - 1:
                h = np.maximum(h, 0)
            acts.append(h)
        if loss == "mse":
            g = (2.0 / h.size) * (h - y)
        else:
            e = np.exp(h - h.max(1, keepdims=True))
            e /= e.sum(1, keepdims=True)
            e[np.arange(batch), y] -= 1
            g = e / batch
        for i in range(len(ws) - 1, -1, -1):
            gw = acts[i].T @ g
            gb = g.sum(0)
            if i:
                g = (g @ ws[i].T) * (acts[i] > 0)
            ws[i] -= lr * gw
            bs[i] -= lr * gb
    return step


def torch_mlp(torch, sizes, batch, loss):
    tnn = torch.nn
    rng = np.random.default_rng(0)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [tnn.Linear(a, b), tnn.ReLU()]
    model = tnn.Sequential(*layers[:-1])
    x = torch.from_numpy(rng.standard_normal((batch, sizes[0])).astype(np.float32))
    if loss == "mse":
        y = torch.from_numpy(rng.standard_normal((batch, sizes[-1])).astype(np.float32))
        lf = tnn.functional.mse_loss
    else:
        y = torch.from_numpy(rng.integers(0, sizes[-1], batch))
        lf = tnn.functional.cross_entropy
    o = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        lv = lf(model(x), y)
        lv.backward()
        o.step()
        o.zero_grad()
    return step


class LeNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.c1, self.p1 = nn.Conv2D(1, 20, 5), nn.MaxPool2D(2, 2)
        self.c2, self.p2 = nn.Conv2D(20, 50, 5), nn.MaxPool2D(2, 2)
        self.fc = nn.Linear(800, 10)

    def forward(self, x):
        x = self.p1(F.relu(self.c1(x)))
        x = self.p2(F.relu(self.c2(x)))
        return self.fc(ddg.flatten(x, 1))


def ddg_lenet():
    rng = np.random.default_rng(0)
    model = LeNet()
    x = ddg.to_tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = ddg.to_tensor(rng.integers(0, 10, 64))
    o = ddg.optimizer.Adam(1e-3, parameters=model.parameters())

    def step():
        F.cross_entropy(model(x), y).backward()
        o.step()
        o.clear_grad()
    return step


def torch_lenet(torch):
    tnn = torch.nn
    model = tnn.Sequential(tnn.Conv2d(1, 20, 5), tnn.ReLU(), tnn.MaxPool2d(2, 2), tnn.Conv2d(20, 50, 5), tnn.ReLU(),
                           tnn.MaxPool2d(2, 2), tnn.Flatten(), tnn.Linear(800, 10))
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 64))
    o = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        tnn.functional.cross_entropy(model(x), y).backward()
        o.step()
        o.zero_grad()
    return step


def race(fns, steps, rounds):
    """Median seconds per step of each fn, in alternating rounds."""
    for f in fns.values():
        for _ in range(3):
            f()
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            for _ in range(steps):
                f()
            times[k].append((time.perf_counter() - t) / steps)
    return {k: sorted(v)[len(v) // 2] for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch = try_torch()
    rows = []
    cases = [("MLP 128-256-256-1, b64, SGD", [128, 256, 256, 1], 64, "mse", 50),
             ("MLP 784-1024-1024-10, b256, SGD", [784, 1024, 1024, 10], 256, "ce", 5)]
    for name, sizes, batch, loss, steps in cases:
        fns = {"ddg": ddg_mlp(sizes, batch, loss), "numpy": numpy_mlp(sizes, batch, loss)}
        if torch is not None:
            fns["torch"] = torch_mlp(torch, sizes, batch, loss)
        rows.append((name, race(fns, steps, args.rounds)))
    fns = {"ddg": ddg_lenet()}
    if torch is not None:
        fns["torch"] = torch_lenet(torch)
    rows.append(("LeNet (MNIST), b64, Adam", race(fns, 5, args.rounds)))

    print("| model | ddg ms | numpy ms | torch ms | ddg/numpy | ddg/torch |\n|---|---|---|---|---|---|")
    for name, r in rows:
        d, n, t = r["ddg"], r.get("numpy"), r.get("torch")
        print(f"| {name} | {d * 1e3:.3f} | {'' if n is None else f'{n * 1e3:.3f}'} | "
              f"{'' if t is None else f'{t * 1e3:.3f}'} | {'' if n is None else f'{d / n:.2f}'} | "
              f"{'' if t is None else f'{d / t:.2f}'} |")
    print("\ntargets: MLP <= 0.9x torch; big MLP <= 1.05x numpy; LeNet <= 0.8x torch")


if __name__ == "__main__":
    main()
