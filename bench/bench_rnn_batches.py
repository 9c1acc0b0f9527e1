"""LSTM / GRU / SimpleRNN training steps at batch sizes off the multiples of 16, ddg vs PyTorch CPU,
single-threaded, ratios from one interleaved run (``bench_nets.py``'s models: one layer,
input 32, hidden H, Linear(H, 10) on the last output, SGD with momentum).

    python bench/bench_rnn_batches.py [--kind lstm] [--hidden 64,128,256,384,512,768,1024]
                                      [--batches 17,20,23,25,28,33,37] [--steps-t 20] [--rounds 3]

``bench_nets.py --batch N`` runs its own sizes at one batch; this grid is where the
recurrent products leave columns past a multiple of 16 (batch 17-28, 33-44, ...) or have
fewer than 16 (``--batches 3,5,8,9,11,12``), the cases ``docs/cpu_kernels.md``'s panels
section is about. Prints a table of ddg/torch per hidden size (rows) and batch (columns).
"""
import argparse

import _common  # noqa: F401  (single-threaded BLAS, set before numpy loads)
from _common import try_torch

import numpy as np

import bench_nets as bn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", default="lstm", choices=("lstm", "gru", "rnn"))
    ap.add_argument("--hidden", default="64,128,256,384,512,768,1024")
    ap.add_argument("--batches", default="17,20,23,25,28,33,37")
    ap.add_argument("--steps-t", type=int, default=20, help="sequence length")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--round-time", type=float, default=0.25, help="seconds of ddg steps per round")
    args = ap.parse_args()
    torch = try_torch()
    batches = [int(b) for b in args.batches.split(",")]
    rng = np.random.default_rng(0)
    print(f"{args.kind}, T = {args.steps_t}: ddg / torch" if torch is not None else f"{args.kind}: ddg ms")
    print("| H \\ batch | " + " | ".join(map(str, batches)) + " |\n|---|" + "---|" * len(batches), flush=True)
    for h in (int(v) for v in args.hidden.split(",")):
        cells = []
        for b in batches:
            x = rng.standard_normal((b, args.steps_t, 32)).astype(np.float32)
            y = rng.integers(0, 10, b)
            d, t = bn.race_case(lambda: bn.ddg_step(bn._DdgRnnNet(args.kind, h), x, y),
                                lambda tm: bn.torch_step(tm, bn.torch_rnn(tm, args.kind, h), x, y),
                                torch, args.rounds, args.round_time)
            cells.append(f"{d / t:.2f}" if t is not None else f"{d * 1e3:.2f}")
        print(f"| {h} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
