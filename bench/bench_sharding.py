"""Sharded data parallel: per-rank memory and step time of DataParallel and ZeRO stages.

    python bench/bench_sharding.py [--ranks 1 2 4] [--steps 4] [--rounds 3] [--width 2048] [--layers 12]

The driver launches each measurement as its own job (``mpiexec -n N python
bench/bench_sharding.py --worker ...``, one BLAS thread per rank) for: unsharded
``DataParallel`` (dp), ``group_sharded_parallel`` level ``'os'`` (stage 1: optimizer state
sharded), ``'os_g'`` (stage 2: and gradients) and ``'p_g_os'`` (stage 3: and parameters).
The model is an MLP of ``--layers``
square Linear layers of ``--width`` (12 x 2048 x 2048: 50.4 M float32 parameters), Adam,
8 rows per rank. Per rank (the largest over ranks) it reports the bytes of the
parameters held between steps (memory actually allocated: a stage-3 placeholder counts
one element), the most parameter bytes held at once during forward and backward
(stage 3: the own parameters plus the gathered ones), the bytes of the gradients held
after backward (DataParallel's flat buckets, or the owned gradients at stages 2-3), of
the optimizer state (Adam's moments), the peak resident set size, and the step time
(barrier, forward, backward with its communication, step: the barrier is timed so that
communication a step leaves in flight is counted where it is finished; the median over
steps of the slowest rank, then the median over ``--rounds`` jobs, the
levels alternating). Writes ``bench/results/sharding.md``.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import _common  # noqa: E402,F401  (one BLAS thread)

_MB = 1024 * 1024


def worker(args):
    import numpy as np
    import ddg
    import ddg.nn.functional as F
    from ddg import nn
    from ddg.distributed.sharding import group_sharded_parallel
    from ddg.distributed.sharding.stage3 import held_parameter_bytes
    from ddg.parallel import comm as C

    comm = C.get_world_communicator()
    ddg.seed(0)
    net = nn.Sequential(*[nn.Linear(args.width, args.width) for _ in range(args.layers)])
    opt = ddg.optimizer.Adam(1e-4, parameters=net.parameters())
    if args.level == "dp":
        model = ddg.DataParallel(net)
    else:
        level, _, option = args.level.partition("+")   # 'os+overlap': overlap_gather=True
        model, opt, _ = group_sharded_parallel(net, opt, level, overlap_gather=option == "overlap")
    params = list(net.parameters())
    peak = [held_parameter_bytes(params)]
    sharder = getattr(model, "sharder", None)
    if sharder is not None:
        # the most parameter bytes alive at once: own data, the layer gathered for
        # forward, and the arrays gathered for backward
        def probe(*_):
            gathered = {id(a): a.nbytes for a in sharder._gathered.values()}
            for a, _ in getattr(sharder, "_inflight", {}).values():   # prefetched, in flight
                if all(a is not p._data for p in params):
                    gathered[id(a)] = a.nbytes
            peak[0] = max(peak[0], held_parameter_bytes(params) + sum(gathered.values()))
        for m in net.sublayers():
            m.register_forward_pre_hook(probe)
        gather_unit = sharder._gather_unit
        sharder._gather_unit = lambda unit: (gather_unit(unit), probe())
    rng = np.random.default_rng(comm.rank)
    x = ddg.to_tensor(rng.standard_normal((8, args.width)).astype("float32"))
    y = ddg.to_tensor(rng.integers(0, args.width, 8))
    times, grad_bytes = [], 0
    for step in range(args.steps + 1):
        # the clock starts before the barrier: what a step leaves in flight (stages 1-2's
        # parameter broadcasts) and finishes in the barrier or the next forward is counted
        t = time.perf_counter()
        comm.barrier()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if step == args.steps:
            reducer = getattr(model, "reducer", None)
            if args.level in ("dp", "os") and reducer is not None:
                grad_bytes = sum(b.nbytes for b in reducer.buckets)
            else:
                seen = {}
                for p in model.parameters():
                    if p.grad is not None:
                        seen[id(p.grad._data)] = p.grad._data.nbytes
                grad_bytes = sum(seen.values())
        opt.step()
        opt.clear_grad()
        times.append(time.perf_counter() - t)
    inner = getattr(opt, "_optim", opt)
    state_bytes = sum(v.nbytes for st in inner._state.values() for v in st.values() if hasattr(v, "nbytes"))
    param_bytes = held_parameter_bytes(params)
    peak[0] = max(peak[0], param_bytes)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    mine = dict(params=param_bytes, peak_params=peak[0], grads=grad_bytes, state=state_bytes, rss=rss,
                step=float(np.median(times[1:])))
    rows = comm.allgather_object(mine) if comm.size > 1 else [mine]
    if comm.rank == 0:
        out = {k: max(r[k] for r in rows) for k in mine}
        out["numel"] = sum(p._data.size for p in model.parameters())
        print("RESULT " + json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--level", default="dp")
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--levels", nargs="+", default=["dp", "os", "os_g", "p_g_os"],
                    help="dp, os, os_g, p_g_os; os+overlap / os_g+overlap: the gather after the "
                         "step overlapping the next forward (overlap_gather=True)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=12)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    lines = ["| ranks | level | params MB | peak params MB | grads MB | optimizer state MB | peak RSS MB | step s | "
             "step / dp |", "|---|---|---|---|---|---|---|---|---|"]
    for n in args.ranks:
        # levels alternate, round after round, so that load changes on a shared machine
        # hit each alike; the step time is the median over rounds
        runs = {level: [] for level in args.levels}
        for _ in range(args.rounds):
            for level in args.levels:
                cmd = ["mpiexec", "-n", str(n), sys.executable, os.path.abspath(__file__), "--worker", "--level",
                       level, "--steps", str(args.steps), "--width", str(args.width), "--layers", str(args.layers)]
                out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
                res = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
                if out.returncode != 0 or not res:
                    raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
                runs[level].append(json.loads(res[0][7:]))
        base = None
        for level in args.levels:
            r = dict(runs[level][0])
            r["step"] = sorted(x["step"] for x in runs[level])[len(runs[level]) // 2]
            r["rss"] = max(x["rss"] for x in runs[level])
            base = r["step"] if level == "dp" else base
            ratio = f"{r['step'] / base:.2f}" if base else "-"
            line = (f"| {n} | {level} | {r['params'] / _MB:.0f} | {r['peak_params'] / _MB:.0f} | "
                    f"{r['grads'] / _MB:.0f} | {r['state'] / _MB:.0f} | "
                    f"{r['rss'] / _MB:.0f} | {r['step']:.3f} | {ratio} |")
            print(line, flush=True)
            lines.append(line)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "sharding.md"), "w") as fh:
        fh.write(f"{r['numel'] / 1e6:.1f} M parameters, Adam, float32\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
