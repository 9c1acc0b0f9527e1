"""to_static vs eager: training-step time ratios, measured in one run.

Models (single-threaded BLAS, CPU):
  * the tutorial's two-layer net: N=64, 1000-100-10, relu, sum-of-squares loss, SGD;
  * MLP 128-256-256-1, batch 64, MSE loss, SGD;
  * LeNet (the MNIST net), batch 64, cross-entropy, SGD.

A step is forward + backward + optimizer step + clear_grad. Eager and static models
start from the same weights; the ratio static/eager is what matters (target <= 0.7
for the two small nets, never above 1.0). The last two columns time the same step
hand-written in numpy (two small nets only): the floor for any replay of the same
kernels, which shows how much of a step is framework overhead at all.

    python bench/bench_static.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import bench  # noqa: E402  (sets the BLAS thread variables before numpy loads)

import numpy as np  # noqa: E402

import ddg  # noqa: E402
import ddg.nn.functional as F  # noqa: E402
from ddg import nn  # noqa: E402


class TwoLayer(nn.Layer):
    def __init__(self):
        super().__init__()
        self.w1 = self.create_parameter([1000, 100])
        self.w2 = self.create_parameter([100, 10])

    def forward(self, x, y):
        y_pred = ddg.matmul(F.relu(ddg.matmul(x, self.w1)), self.w2)
        return ((y_pred - y) ** 2).sum()


class MLP(nn.Layer):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, x, y):
        return F.mse_loss(self.net(x), y)


class LeNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2D(1, 20, 5)
        self.c2 = nn.Conv2D(20, 50, 5)
        self.fc = nn.Linear(800, 10)

    def forward(self, x, y):
        x = F.max_pool2d(F.relu(self.c1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2, 2)
        return F.cross_entropy(self.fc(ddg.flatten(x, 1)), y)


def _data(name):
    rng = np.random.default_rng(0)
    if name == "two-layer":
        return rng.standard_normal((64, 1000)).astype(np.float32), rng.standard_normal((64, 10)).astype(np.float32)
    if name == "mlp":
        return rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal((64, 1)).astype(np.float32)
    return rng.standard_normal((64, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, (64,)).astype(np.int64)


def _numpy_step(name, model, xa, ya, lr):
    """The same training step hand-written in numpy (no framework at all): the floor that
    any replay of the recorded ops can approach but not beat, since the matmuls dominate.
    None for LeNet (its convolutions would need an im2col of their own)."""
    if name == "lenet":
        return None
    ws = [p.numpy().copy() for p in model.parameters()]

    def step():
        acts, h = [], xa
        if name == "two-layer":
            w1, w2 = ws
            a = xa @ w1
            r = np.maximum(a, 0)
            d = r @ w2 - ya
            loss = (d * d).sum()  # noqa: F841
            g = 2 * d
            gw2 = r.T @ g
            g = (g @ w2.T) * (a > 0)
            grads = [xa.T @ g, gw2]
        else:  # MLP: parameters are w0, b0, w1, b1, w2, b2
            for i in range(3):
                acts.append(h)
                h = h @ ws[2 * i] + ws[2 * i + 1]
                if i < 2:
                    h = np.maximum(h, 0)
            d = h - ya
            loss = (d * d).mean()  # noqa: F841
            g = d * (2.0 / d.size)
            grads = [None] * 6
            for i in (2, 1, 0):
                grads[2 * i], grads[2 * i + 1] = acts[i].T @ g, g.sum(0)
                if i:
                    g = (g @ ws[2 * i].T) * (acts[i] > 0)
        for w, gr in zip(ws, grads):
            w -= lr * gr
    return step


def _step_fn(model, forward, x, y, lr):
    opt = ddg.optimizer.SGD(learning_rate=lr, parameters=model.parameters())

    def step():
        loss = forward(x, y)
        loss.backward()
        opt.step()
        opt.clear_grad()
    return step


def main():
    cases = [("two-layer", TwoLayer, 1e-6), ("mlp", MLP, 1e-3), ("lenet", LeNet, 1e-3)]
    print(f"{'model':10s} {'eager ms':>9s} {'static ms':>10s} {'ratio':>6s} {'numpy ms':>9s} {'numpy/eager':>11s}")
    for name, cls, lr in cases:
        ddg.seed(0)
        eager = cls()
        static = cls()
        static.set_state_dict(eager.state_dict())
        ddg.jit.to_static(static)
        xa, ya = _data(name)
        x, y = ddg.to_tensor(xa), ddg.to_tensor(ya)
        e_step = _step_fn(eager, eager, x, y, lr)
        s_step = _step_fn(static, static, x, y, lr)
        n_step = _numpy_step(name, eager, xa, ya, lr)
        for _ in range(3):
            e_step()
            s_step()
        # interleave the measurements so drifts of the machine hit all alike
        te, ts, tn = [], [], []
        for _ in range(3):
            te.append(bench(e_step, repeats=3)[0])
            ts.append(bench(s_step, repeats=3)[0])
            if n_step is not None:
                tn.append(bench(n_step, repeats=3)[0])
        e, s = min(te), min(ts)
        floor = f"{min(tn) * 1e3:9.3f} {min(tn) / e:11.2f}" if tn else f"{'-':>9s} {'-':>11s}"
        print(f"{name:10s} {e * 1e3:9.3f} {s * 1e3:10.3f} {s / e:6.2f} {floor}")


if __name__ == "__main__":
    main()
