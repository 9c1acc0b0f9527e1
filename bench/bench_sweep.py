"""Training steps at sizes you name, ddg against PyTorch CPU: one interleaved race per size
(``bench_nets.race_case``), single-threaded, ratio ddg / torch. For checking a model class at
sizes ``bench_nets.py``'s grid does not hold (heads, feed-forward width, input size, batch).

    python bench/bench_sweep.py transformer:128:4:512:200:16 lstm:128:1024:50:8 resnet:16:32:64
    python bench/bench_sweep.py --rounds 7 transformer:128:4:512:50:32:0:10

Each size is ``class:numbers``:

* ``transformer:d:heads:ff:S:B[:norm_first[:dropout %]]``: 2 encoder layers (post-norm unless
  ``norm_first`` is 1, dropout 0 unless given, in percent), the mean over the sequence, then
  ``Linear(d, 10)``; momentum SGD.
* ``lstm:I:H:T:B``, ``gru:I:H:T:B``, ``rnn:I:H:T:B``: one layer of input size I and H hidden
  features over T steps, ``Linear(H, 10)`` on the last step's output; momentum SGD.
* ``resnet:C:px:B``: ``bench_nets``'s ResNet-style net of width C on px x px images.
* ``vgg:C:px:B[:k]``: two VGG-style stages of width C and 2C, each two k x k convolutions
  (k 3 unless given, padding k // 2) with BatchNorm and ReLU, then a 2x2 max pool; then
  ``Linear`` to 10 classes.

Without torch it prints ddg's times only.
"""
import argparse
import sys

import _common  # noqa: F401  (single-threaded BLAS, set before numpy loads)
from _common import try_torch

import numpy as np

import bench_nets as bn
from ddg import nn


class _Encoder(nn.Layer):
    def __init__(self, d, heads, ff, norm_first, dropout):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=dropout, normalize_before=norm_first)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.fc = nn.Linear(d, 10)

    def forward(self, x):
        return self.fc(self.enc(x).mean(axis=1))


def _torch_encoder(torch, d, heads, ff, norm_first, dropout):
    tnn = torch.nn

    class Encoder(tnn.Module):
        def __init__(self):
            super().__init__()
            layer = tnn.TransformerEncoderLayer(d, heads, ff, dropout=dropout, batch_first=True,
                                                norm_first=norm_first)
            self.enc = tnn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.fc = tnn.Linear(d, 10)

        def forward(self, x):
            return self.fc(self.enc(x).mean(dim=1))
    return Encoder()


_DDG_RNN = {"lstm": "LSTM", "gru": "GRU", "rnn": "SimpleRNN"}
_TORCH_RNN = {"lstm": "LSTM", "gru": "GRU", "rnn": "RNN"}


class _Recurrent(nn.Layer):
    def __init__(self, kind, inputs, hidden):
        super().__init__()
        self.rnn = getattr(nn, _DDG_RNN[kind])(inputs, hidden)
        self.fc = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc(self.rnn(x)[0][:, -1])


def _torch_recurrent(torch, kind, inputs, hidden):
    tnn = torch.nn

    class Recurrent(tnn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(tnn, _TORCH_RNN[kind])(inputs, hidden, batch_first=True)
            self.fc = tnn.Linear(hidden, 10)

        def forward(self, x):
            return self.fc(self.rnn(x)[0][:, -1])
    return Recurrent()


def _vgg(lib, c, hw, k):
    """The ``vgg`` class's net in ``lib`` (``ddg.nn`` or ``torch.nn``)."""
    torch_side = lib is not nn
    conv = (lambda a, b: lib.Conv2d(a, b, k, 1, k // 2)) if torch_side else (lambda a, b: nn.Conv2D(a, b, k, 1, k // 2))
    norm = lib.BatchNorm2d if torch_side else nn.BatchNorm2D
    pool = lib.MaxPool2d if torch_side else nn.MaxPool2D
    layers, cin = [], 3
    for width in (c, 2 * c):
        for _ in range(2):
            layers += [conv(cin, width), norm(width), lib.ReLU()]
            cin = width
        layers.append(pool(2, 2))
    side = hw // 4
    layers += [lib.Flatten(), lib.Linear(cin * side * side, 10)]
    return lib.Sequential(*layers)


#: the numbers each class takes: (required, optional)
_ARITY = {"transformer": (5, 2), "lstm": (4, 0), "gru": (4, 0), "rnn": (4, 0), "resnet": (3, 0), "vgg": (3, 1)}


def parse(spec):
    """``(kind, numbers)`` from ``class:n1:n2:...``; a ValueError that names the spec and what
    its class takes otherwise."""
    kind, *rest = spec.split(":")
    if kind not in _ARITY:
        raise ValueError(f"bench_sweep: unknown class {kind!r} in {spec!r} (one of {', '.join(_ARITY)})")
    need, extra = _ARITY[kind]
    try:
        nums = [int(v) for v in rest]
    except ValueError:
        raise ValueError(f"bench_sweep: {spec!r}: the sizes must be integers") from None
    if not need <= len(nums) <= need + extra or min(nums, default=1) < 0:
        raise ValueError(f"bench_sweep: {spec!r}: {kind} takes {need}{f'-{need + extra}' if extra else ''} "
                         f"non-negative sizes (see this script's docstring)")
    return kind, nums


def case(spec, seed=0):
    """``(make_ddg, make_torch)`` for one size: factories of a training step each (torch's
    takes the torch module)."""
    kind, nums = parse(spec)
    rng = np.random.default_rng(seed)
    if kind == "transformer":
        d, heads, ff, seq, batch = nums[:5]
        norm_first = bool(nums[5]) if len(nums) > 5 else False
        dropout = nums[6] / 100 if len(nums) > 6 else 0.0
        x = rng.standard_normal((batch, seq, d)).astype(np.float32)
        y = rng.integers(0, 10, batch)
        return (lambda: bn.ddg_step(_Encoder(d, heads, ff, norm_first, dropout), x, y),
                lambda t: bn.torch_step(t, _torch_encoder(t, d, heads, ff, norm_first, dropout), x, y))
    if kind == "vgg":
        c, hw, batch = nums[:3]
        k = nums[3] if len(nums) > 3 else 3
        x = rng.standard_normal((batch, 3, hw, hw)).astype(np.float32)
        y = rng.integers(0, 10, batch)
        return (lambda: bn.ddg_step(_vgg(nn, c, hw, k), x, y),
                lambda t: bn.torch_step(t, _vgg(t.nn, c, hw, k), x, y))
    if kind == "resnet":
        c, hw, batch = nums
        x = rng.standard_normal((batch, 3, hw, hw)).astype(np.float32)
        y = rng.integers(0, 10, batch)
        return (lambda: bn.ddg_step(bn.ddg_resnet(c, hw)[0], x, y),
                lambda t: bn.torch_step(t, bn.torch_resnet(t, c, hw), x, y))
    inputs, hidden, steps, batch = nums
    x = rng.standard_normal((batch, steps, inputs)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    return (lambda: bn.ddg_step(_Recurrent(kind, inputs, hidden), x, y),
            lambda t: bn.torch_step(t, _torch_recurrent(t, kind, inputs, hidden), x, y))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", nargs="+", help="class:numbers, e.g. transformer:128:4:512:200:16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--round-time", type=float, default=1.0, help="seconds of ddg steps per round")
    args = ap.parse_args(argv)
    try:
        specs = [(s, parse(s)) for s in args.sizes]
    except ValueError as e:
        ap.error(str(e))
    torch = try_torch()
    print("| size | ddg ms | torch ms | ddg/torch |\n|---|---|---|---|", flush=True)
    for spec, _ in specs:
        make_ddg, make_torch = case(spec)
        d, t = bn.race_case(make_ddg, make_torch, torch, args.rounds, args.round_time)
        print(f"| {spec} | {d * 1e3:.2f} | {'' if t is None else f'{t * 1e3:.2f}'} | "
              f"{'' if t is None else f'{d / t:.2f}'} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
