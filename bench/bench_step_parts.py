"""Where a transformer training step's time goes, ddg against PyTorch CPU: the step split
into forward, backward and optimizer (interleaved, median per part), and the step's own 2-D
products raced alone, numpy's (ddg's) against torch's on the same operands. Single-threaded.

    python bench/bench_step_parts.py [--sizes 128:100,384:32] [--batch 16] [--rounds 8]

Each size ``D:S`` is ``bench_nets.py``'s transformer (2 post-norm encoder layers, d_model D,
4 heads, feed-forward 2D, no dropout, sequence S, momentum SGD). The products are recorded
from one ddg step at ``ddg.tensor.gemm.product`` (every Linear's forward and both of its
backward products go through it), copied, and each distinct shape is then called as many
times as a step calls it, by ``gemm.product`` and by ``torch.addmm`` / ``@`` in alternating
rounds (median round each). A product ratio near 1 with a step ratio near 1 says the step is
the BLAS's: what is left to gain lies outside the products only as far as the other parts
are still slower than torch's.

Without torch it prints ddg's parts only.
"""
import argparse
import collections
import sys
import time

import _common  # noqa: F401  (single-threaded BLAS, set before numpy loads)
from _common import race, try_torch

import numpy as np

import bench_nets as bn
import ddg
import ddg.nn.functional as F
from ddg.tensor import gemm


def _timed(loss_of, update):
    """A step ``f(rec)`` that appends its (forward, backward, optimizer) seconds to ``rec``:
    ``loss_of()`` the forward and loss, then its ``backward()``, then ``update()``."""
    def step(rec):
        t0 = time.perf_counter()
        loss = loss_of()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        update()
        rec.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
    return step


def step_parts(d, seq, batch, torch, rounds):
    """Median (forward, backward, optimizer) seconds per step: ddg's and torch's (or None)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, seq, d)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    model = bn._DdgEncoder(d)
    xt, yt = ddg.to_tensor(x), ddg.to_tensor(y)
    opt = ddg.optimizer.Momentum(0.01, 0.9, parameters=model.parameters())
    steps = {"ddg": _timed(lambda: F.cross_entropy(model(xt), yt), lambda: (opt.step(), opt.clear_grad()))}
    if torch is not None:
        torch.manual_seed(0)
        tmodel = bn.torch_encoder(torch, d)
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        topt = torch.optim.SGD(tmodel.parameters(), lr=0.01, momentum=0.9)
        steps["torch"] = _timed(lambda: torch.nn.functional.cross_entropy(tmodel(tx), ty),
                                lambda: (topt.step(), topt.zero_grad()))
    for f in steps.values():
        for _ in range(3):
            f([])
    times = {k: [] for k in steps}
    for _ in range(rounds):
        for k, f in steps.items():
            for _ in range(3):
                f(times[k])
    med = {k: np.median(np.array(v), axis=0) for k, v in times.items()}
    return med["ddg"], med.get("torch")


def recorded_products(d, seq, batch):
    """``{(A shape, B shape, A C-order, B C-order, bias?): (count per step, A, B, bias)}``
    from one ddg step (after two warm-up steps)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, seq, d)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    step = bn.ddg_step(bn._DdgEncoder(d), x, y)
    step()
    step()
    seen = collections.OrderedDict()
    real = gemm.product

    def spy(A, B, bias=None):
        key = (A.shape, B.shape, A.flags.c_contiguous, B.flags.c_contiguous, bias is not None)
        if key in seen:
            seen[key][0] += 1
        else:   # copies in the same memory order (a transposed view stays a transposed view)
            seen[key] = [1, A.copy(order="K"), B.copy(order="K"), None if bias is None else bias.copy()]
        return real(A, B, bias)
    patched = [m for m in list(sys.modules.values())
               if getattr(m, "__name__", "").startswith("ddg") and getattr(m, "product", None) is real]
    for m in patched:
        m.product = spy
    try:
        step()
    finally:
        for m in patched:
            m.product = real
    return seen


def race_products(seen, torch, rounds):
    """Per shape: (key, count, numpy seconds, torch seconds or None) for ``count`` calls,
    from ``_common.race``'s alternating rounds (median round)."""
    rows = []
    for key, (count, A, B, bias) in seen.items():
        fns = {"numpy": lambda A=A, B=B, bias=bias: gemm.product(A, B, bias)}
        if torch is not None:
            TA, TB = torch.from_numpy(A), torch.from_numpy(B)
            if bias is None:
                fns["torch"] = lambda TA=TA, TB=TB: TA @ TB
            else:
                Tb = torch.from_numpy(bias)
                fns["torch"] = lambda TA=TA, TB=TB, Tb=Tb: torch.addmm(Tb, TA, TB)
        r = race(fns, count, rounds, warmup=1)    # median seconds per call
        rows.append((key, count, r["numpy"][0] * count, r["torch"][0] * count if "torch" in r else None))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="128:100,384:32", help="comma-separated D:S")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    torch = try_torch()
    for spec in args.sizes.split(","):
        d, seq = (int(v) for v in spec.split(":"))
        print(f"\n## transformer d={d} S={seq} batch {args.batch}\n")
        dp, tp = step_parts(d, seq, args.batch, torch, args.rounds)
        print("| part | ddg ms | torch ms | ddg/torch |\n|---|---|---|---|")
        names = ("forward", "backward", "optimizer + clear")
        for i, name in enumerate(names):
            print(f"| {name} | {dp[i] * 1e3:.2f} | " + ("| |" if tp is None else
                  f"{tp[i] * 1e3:.2f} | {dp[i] / tp[i]:.2f} |"))
        print(f"| step | {dp.sum() * 1e3:.2f} | " + ("| |" if tp is None else
              f"{tp.sum() * 1e3:.2f} | {dp.sum() / tp.sum():.2f} |"))
        rows = race_products(recorded_products(d, seq, args.batch), torch, args.rounds)
        print("\n| product (A, B, A C-order, B C-order, bias) | per step | numpy ms | torch ms | numpy/torch |\n"
              "|---|---|---|---|---|")
        for key, count, n, t in rows:
            print(f"| {key} | {count} | {n * 1e3:.2f} | " + ("|" if t is None else f"{t * 1e3:.2f} | {n / t:.2f} |"))
        sn = sum(r[2] for r in rows)
        st = None if torch is None else sum(r[3] for r in rows)
        print(f"| all products | | {sn * 1e3:.2f} | " + ("|" if st is None else f"{st * 1e3:.2f} | {sn / st:.2f} |"))


if __name__ == "__main__":
    main()
