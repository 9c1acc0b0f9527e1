"""Training-step time of conv, recurrent and transformer nets, ddg vs PyTorch CPU
eager, over a range of sizes, single-threaded, ratios from one interleaved run.

    python bench/bench_nets.py [--rounds 5] [--only resnet,lstm,gru,transformer] [--quick]

One step = forward + loss + backward + optimizer step (SGD with momentum). Models:

* ``resnet``: conv3x3(3->C) BN ReLU, two basic blocks (conv3x3 BN ReLU conv3x3 BN, plus
  the identity, ReLU), a stride-2 basic block to 2C (1x1 stride-2 shortcut conv + BN),
  global average pool, Linear(2C, 10); batch 16, images HxH.
* ``lstm`` / ``gru``: 1-layer LSTM/GRU (input 32, hidden H) over T steps, batch 16,
  Linear(H, 10) on the last output.
* ``transformer``: 2 post-norm encoder layers (d_model D, 4 heads, feed-forward 2D,
  no dropout), sequence 32, batch 16, mean over the sequence, Linear(D, 10).

Without torch only ddg's times are printed. Both frameworks get the same model shape
(each with its own initialisation), the same data and the same number of steps; each
size is raced on its own (alternating rounds, median step time), the step count set so
that a round of ddg steps takes about ``--round-time`` seconds.
"""
import argparse
import time

import _common  # noqa: F401  (single-threaded BLAS, set before numpy loads)
from _common import race, try_torch

import numpy as np

import ddg
import ddg.nn.functional as F
from ddg import nn

BATCH = 16
RESNET_SIZES = [(16, 32), (32, 32), (64, 16), (128, 8), (256, 8), (16, 64)]
RNN_SIZES = [(64, 50), (128, 50), (256, 50), (512, 20), (1024, 10), (128, 10), (128, 200)]
TRANSFORMER_SIZES = [64, 128, 256]


# -- ResNet-style conv net ---------------------------------------------------------------------------
def _ddg_block(cin, cout, stride):
    conv1 = nn.Conv2D(cin, cout, 3, stride, 1, bias_attr=False)
    conv2 = nn.Conv2D(cout, cout, 3, 1, 1, bias_attr=False)
    bn1, bn2 = nn.BatchNorm2D(cout), nn.BatchNorm2D(cout)
    short = None
    if stride != 1 or cin != cout:
        short = nn.Sequential(nn.Conv2D(cin, cout, 1, stride, bias_attr=False), nn.BatchNorm2D(cout))

    class Block(nn.Layer):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1, self.conv2, self.bn2, self.short = conv1, bn1, conv2, bn2, short

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return F.relu(y + (x if self.short is None else self.short(x)))
    return Block()


def ddg_resnet(c, hw):
    model = nn.Sequential(nn.Conv2D(3, c, 3, 1, 1, bias_attr=False), nn.BatchNorm2D(c), nn.ReLU(),
                          _ddg_block(c, c, 1), _ddg_block(c, c, 1), _ddg_block(c, 2 * c, 2),
                          nn.AdaptiveAvgPool2D(1), nn.Flatten(), nn.Linear(2 * c, 10))
    return model, (BATCH, 3, hw, hw)


def torch_resnet(torch, c, hw):
    tnn = torch.nn

    class Block(tnn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.conv2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn1, self.bn2 = tnn.BatchNorm2d(cout), tnn.BatchNorm2d(cout)
            self.short = None
            if stride != 1 or cin != cout:
                self.short = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, bias=False), tnn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.short is None else self.short(x)))

    return tnn.Sequential(tnn.Conv2d(3, c, 3, 1, 1, bias=False), tnn.BatchNorm2d(c), tnn.ReLU(),
                          Block(c, c, 1), Block(c, c, 1), Block(c, 2 * c, 2), tnn.AdaptiveAvgPool2d(1),
                          tnn.Flatten(), tnn.Linear(2 * c, 10))


# -- recurrent nets ------------------------------------------------------------------------------------
class _DdgRnnNet(nn.Layer):
    def __init__(self, kind, hidden):
        super().__init__()
        self.rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[kind](32, hidden)
        self.fc = nn.Linear(hidden, 10)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


def torch_rnn(torch, kind, hidden):
    tnn = torch.nn

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = {"lstm": tnn.LSTM, "gru": tnn.GRU}[kind](32, hidden, batch_first=True)
            self.fc = tnn.Linear(hidden, 10)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.fc(out[:, -1])
    return Net()


# -- transformer encoder -------------------------------------------------------------------------------
class _DdgEncoder(nn.Layer):
    def __init__(self, d):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.fc = nn.Linear(d, 10)

    def forward(self, x):
        return self.fc(self.enc(x).mean(axis=1))


def torch_encoder(torch, d):
    tnn = torch.nn

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            layer = tnn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0, batch_first=True)
            self.enc = tnn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.fc = tnn.Linear(d, 10)

        def forward(self, x):
            return self.fc(self.enc(x).mean(dim=1))
    return Net()


# -- steps ---------------------------------------------------------------------------------------------
def ddg_step(model, x, y):
    xt, yt = ddg.to_tensor(x), ddg.to_tensor(y)
    o = ddg.optimizer.Momentum(0.01, 0.9, parameters=model.parameters())
    model.train()

    def step():
        F.cross_entropy(model(xt), yt).backward()
        o.step()
        o.clear_grad()
    return step


def torch_step(torch, model, x, y):
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    o = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train()

    def step():
        torch.nn.functional.cross_entropy(model(xt), yt).backward()
        o.step()
        o.zero_grad()
    return step


def cases(only, quick):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, BATCH)
    if "resnet" in only:
        for c, hw in (RESNET_SIZES[:2] if quick else RESNET_SIZES):
            x = rng.standard_normal((BATCH, 3, hw, hw)).astype(np.float32)
            yield (f"resnet C={c} {hw}x{hw}", lambda: ddg_resnet(c, hw)[0],
                   lambda t: torch_resnet(t, c, hw), x, y)
    for kind in ("lstm", "gru"):
        if kind in only:
            for h, steps in (RNN_SIZES[:2] if quick else RNN_SIZES):
                x = rng.standard_normal((BATCH, steps, 32)).astype(np.float32)
                yield (f"{kind} H={h} T={steps}", lambda: _DdgRnnNet(kind, h), lambda t: torch_rnn(t, kind, h), x, y)
    if "transformer" in only:
        for d in (TRANSFORMER_SIZES[:1] if quick else TRANSFORMER_SIZES):
            x = rng.standard_normal((BATCH, 32, d)).astype(np.float32)
            yield (f"transformer d={d}", lambda: _DdgEncoder(d), lambda t: torch_encoder(t, d), x, y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="resnet,lstm,gru,transformer")
    ap.add_argument("--quick", action="store_true", help="the first sizes of each class only")
    ap.add_argument("--round-time", type=float, default=0.25, help="seconds of ddg steps per round (sets the "
                    "step count per size)")
    args = ap.parse_args()
    torch = try_torch()
    only = set(args.only.split(","))
    print("| model | ddg ms | torch ms | ddg/torch |\n|---|---|---|---|", flush=True)
    for name, make_ddg, make_torch, x, y in cases(only, args.quick):
        fns = {"ddg": ddg_step(make_ddg(), x, y)}
        fns["ddg"]()
        t0 = time.perf_counter()
        fns["ddg"]()
        steps = max(1, min(50, round(args.round_time / (time.perf_counter() - t0))))
        if torch is not None:
            torch.manual_seed(0)
            fns["torch"] = torch_step(torch, make_torch(torch), x, y)
        r = race(fns, steps, args.rounds, warmup=2)
        d, t = r["ddg"][0], r.get("torch", (None,))[0]
        print(f"| {name} | {d * 1e3:.2f} | {'' if t is None else f'{t * 1e3:.2f}'} | "
              f"{'' if t is None else f'{d / t:.2f}'} |", flush=True)


if __name__ == "__main__":
    main()
