"""DataParallel benchmarks: sync overhead over raw MPI, overlap, weak scaling vs torch DDP.

    python bench/bench_ddp.py [--ranks 1 2] [--steps 30]

The driver launches every measurement as its own job (``mpiexec -n N python
bench/bench_ddp.py --worker ...``, one BLAS thread per rank) and writes
``bench/results/ddp.csv``, ``ddp.md`` and ``ddp.png``. Ratios are taken between
numbers measured in the same run, since absolute times on a shared machine are noise.

Measured, per model (LeNet batch 64/rank; MLP 784-1024-1024-10 batch 256/rank):

1. sync/raw: the time DataParallel needs to synchronize a step's gradients
   (its whole path: scaling, in-place ``Iallreduce`` of every bucket, wait,
   averaging, unused-parameter flags) over one raw mpi4py ``Allreduce`` of the same
   number of bytes. Both are timed back to back after a barrier; medians.
2. exposed/raw: communication time left after backward (the time spent in
   DataParallel's end-of-backward wait; per step the minimum over ranks, i.e. the
   wait of the rank that finished backward last, which excludes load imbalance)
   as a fraction of that raw all-reduce, with
   buckets launched from the grad-ready hooks during backward (overlap) and with
   every bucket launched only at the end (no overlap).
3. weak scaling: training throughput (samples/s over all ranks; forward, backward,
   Adam step) at N ranks / (N x throughput at 1 rank), for ddg and for PyTorch
   DistributedDataParallel over gloo when torch is importable (the same models).
   Control: ``ddg-nocomm`` runs the same N processes at the same time with no
   DataParallel and no communication at all; its "efficiency" is what the machine
   itself allows N single-threaded trainers (shared caches, memory bandwidth, clock),
   so ddg's efficiency divided by it is the part that data parallelism costs.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")

MODELS = {"lenet": 64, "mlp": 256}


def _load_launcher_env():
    """ddg's one list of launcher variables, loaded from its file: importing the ddg package
    would tune this process's allocator, which the torch worker must not get."""
    import importlib.util
    path = os.path.join(ROOT, "ddg", "parallel", "comm", "launcher_env.py")
    spec = importlib.util.spec_from_file_location("_ddg_launcher_env", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


launcher_env = _load_launcher_env()


# ---------------------------------------------------------------------- ddg worker
def ddg_models():
    import ddg
    import ddg.nn.functional as F
    from ddg import nn

    class ConvPool(nn.Layer):
        def __init__(self, cin, cout):
            super().__init__()
            self._conv2d = nn.Conv2D(cin, cout, 5)
            self._pool2d = nn.MaxPool2D(kernel_size=2, stride=2)

        def forward(self, x):
            return self._pool2d(F.relu(self._conv2d(x)))

    class LeNet(nn.Layer):
        def __init__(self):
            super().__init__()
            self.c1, self.c2, self.fc = ConvPool(1, 20), ConvPool(20, 50), nn.Linear(800, 10)

        def forward(self, x):
            return self.fc(ddg.flatten(self.c2(self.c1(x)), start_axis=1))

    def mlp():
        return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))

    return {"lenet": LeNet, "mlp": mlp}


def batch_for(model, n, rng):
    x = rng.standard_normal((n, 1, 28, 28) if model == "lenet" else (n, 784)).astype(np.float32)
    y = rng.integers(0, 10, size=n).astype(np.int64)
    return x, y


def ddg_worker(args):
    import ddg
    import ddg.distributed as dist
    import ddg.nn.functional as F
    dist.init_parallel_env()
    rank, world = dist.get_rank(), dist.get_world_size()
    ddg.seed(0)
    model = ddg_models()[args.model]()
    if args.worker == "ddg":
        model = ddg.DataParallel(model, comm_buffer_size=args.bucket_mb)
    opt = ddg.optimizer.Adam(learning_rate=1e-4, parameters=model.parameters())
    rng = np.random.default_rng(rank)
    x, y = batch_for(args.model, MODELS[args.model], rng)
    x, y = ddg.to_tensor(x), ddg.to_tensor(y)
    out = {"impl": args.worker, "model": args.model, "ranks": world, "batch": MODELS[args.model],
           "bucket_mb": args.bucket_mb}

    def step():
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()

    def timed_steps(n):
        times = []
        for _ in range(n):
            if world > 1:
                dist.barrier()
            t = time.perf_counter()
            step()
            times.append(time.perf_counter() - t)
        return times

    for _ in range(3):
        step()
    times = timed_steps(args.steps)
    out["step_s"] = float(np.median(times))
    out["throughput"] = world * out["batch"] / out["step_s"]
    if world > 1 and args.worker == "ddg":
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        reducer = model.reducer
        nbytes = sum(b.nbytes for b in reducer.buckets)
        out["grad_bytes"] = nbytes
        out["buckets"] = len(reducer.buckets)
        raw = np.ones(nbytes // 4, dtype=np.float32)
        # 1. sync alone vs raw Allreduce, interleaved
        F.cross_entropy(model(x), y).backward()
        t_raw, t_sync = [], []
        for _ in range(args.steps):
            comm.Barrier()
            t = time.perf_counter()
            comm.Allreduce(MPI.IN_PLACE, [raw, MPI.FLOAT], MPI.SUM)
            t_raw.append(time.perf_counter() - t)
            comm.Barrier()
            t = time.perf_counter()
            reducer.sync_now()
            t_sync.append(time.perf_counter() - t)
        opt.clear_grad()
        out["raw_allreduce_s"] = float(np.median(t_raw))
        out["sync_s"] = float(np.median(t_sync))
        # 2. exposed communication with and without overlap
        for overlap in (True, False):
            reducer.overlap = overlap
            exposed = []
            for _ in range(args.steps):
                comm.Barrier()
                reducer.stats.reset()
                F.cross_entropy(model(x), y).backward()
                # The rank that finished its backward last waits only for the
                # communication; the others also wait for it (load imbalance).
                exposed.append(comm.allreduce(reducer.stats.exposed_seconds, op=MPI.MIN))
                opt.step()
                opt.clear_grad()
            out["exposed_overlap_s" if overlap else "exposed_no_overlap_s"] = float(np.median(exposed))
        reducer.overlap = True
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


# ---------------------------------------------------------------------- torch worker
def torch_worker(args):
    import torch
    import torch.nn as tnn
    torch.set_num_threads(1)
    rank = launcher_env.launcher_rank() or 0
    world = launcher_env.launcher_world_size() or 1
    torch.manual_seed(0)
    if args.model == "lenet":
        net = tnn.Sequential(tnn.Conv2d(1, 20, 5), tnn.ReLU(), tnn.MaxPool2d(2, 2), tnn.Conv2d(20, 50, 5), tnn.ReLU(),
                             tnn.MaxPool2d(2, 2), tnn.Flatten(), tnn.Linear(800, 10))
    else:
        net = tnn.Sequential(tnn.Linear(784, 1024), tnn.ReLU(), tnn.Linear(1024, 1024), tnn.ReLU(),
                             tnn.Linear(1024, 10))
    if world > 1:
        import torch.distributed as tdist
        tdist.init_process_group("gloo", init_method=f"file://{args.store}", rank=rank, world_size=world)
        net = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.Adam(net.parameters(), lr=1e-4)
    rng = np.random.default_rng(rank)
    x, y = batch_for(args.model, MODELS[args.model], rng)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    lossf = tnn.CrossEntropyLoss()

    def step():
        loss = lossf(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    times = []
    for _ in range(args.steps):
        if world > 1:
            torch.distributed.barrier()
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    out = {"impl": "torch", "model": args.model, "ranks": world, "batch": MODELS[args.model],
           "step_s": float(np.median(times))}
    out["throughput"] = world * out["batch"] / out["step_s"]
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()


# ---------------------------------------------------------------------- driver
def launch(impl, model, n, steps, bucket_mb=25):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = "1"
    store = os.path.join(tempfile.mkdtemp(prefix="ddgbench"), "store")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", impl, "--model", model,
           "--steps", str(steps), "--store", store, "--bucket-mb", str(bucket_mb)]
    if n > 1 or impl.startswith("ddg"):
        cmd = ["mpiexec", "-n", str(n)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{impl} {model} n={n} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")


def launch_median(impl, model, n, steps, repeats, bucket_mb=25):
    """Launch a configuration ``repeats`` times; keep the run with the median step time
    (separate jobs drift by several percent on a shared machine)."""
    runs = sorted((launch(impl, model, n, steps, bucket_mb) for _ in range(repeats)), key=lambda r: r["step_s"])
    r = dict(runs[len(runs) // 2])
    r["step_s_runs"] = [round(x["step_s"] * 1e3, 2) for x in runs]
    return r


def driver(args):
    try:
        import torch  # noqa: F401
        impls = ["ddg", "ddg-nocomm", "torch"]
    except ImportError:
        impls = ["ddg", "ddg-nocomm"]
    rows = []
    for model in MODELS:
        for impl in impls:
            for n in args.ranks:
                r = launch_median(impl, model, n, args.steps, args.repeats)
                rows.append(r)
                print(json.dumps(r), flush=True)
                if impl == "ddg" and n > 1 and model == "mlp":
                    # smaller buckets: fc2's weight is sent while fc1's backward runs
                    r = launch_median(impl, model, n, args.steps, args.repeats, bucket_mb=4)
                    rows.append(r)
                    print(json.dumps(r), flush=True)
    base = {(r["impl"], r["model"]): r["throughput"] for r in rows if r["ranks"] == 1}
    for r in rows:
        r["efficiency"] = r["throughput"] / (r["ranks"] * base[(r["impl"], r["model"])])
        if "raw_allreduce_s" in r:
            raw = r["raw_allreduce_s"]
            r["sync_over_raw"] = r["sync_s"] / raw
            r["exposed_overlap_frac"] = r["exposed_overlap_s"] / raw
            r["exposed_no_overlap_frac"] = r["exposed_no_overlap_s"] / raw
    os.makedirs(RESULTS, exist_ok=True)
    keys = ["impl", "model", "ranks", "batch", "bucket_mb", "step_s", "throughput", "efficiency", "grad_bytes", "buckets",
            "raw_allreduce_s", "sync_s", "sync_over_raw", "exposed_overlap_s", "exposed_overlap_frac",
            "exposed_no_overlap_s", "exposed_no_overlap_frac"]
    with open(os.path.join(RESULTS, "ddp.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in keys})
    md = ["| impl | model | ranks | batch/rank | bucket MB | step ms | samples/s | weak-scaling eff. | grad MB | buckets | "
          "raw allreduce ms | DP sync ms | sync/raw | exposed/raw (overlap) | exposed/raw (no overlap) |",
          "|" + "---|" * 15]
    for r in rows:
        def f(k, fmt, scale=1.0):
            return format(r[k] * scale, fmt) if k in r else ""
        md.append(f"| {r['impl']} | {r['model']} | {r['ranks']} | {r['batch']} | {r.get('bucket_mb', '')} | "
                  f"{f('step_s', '.2f', 1e3)} | "
                  f"{f('throughput', '.0f')} | {f('efficiency', '.3f')} | {f('grad_bytes', '.2f', 1 / 2**20)} | "
                  f"{r.get('buckets', '')} | {f('raw_allreduce_s', '.3f', 1e3)} | {f('sync_s', '.3f', 1e3)} | "
                  f"{f('sync_over_raw', '.2f')} | {f('exposed_overlap_frac', '.2f')} | "
                  f"{f('exposed_no_overlap_frac', '.2f')} |")
    text = "\n".join(md) + "\n"
    with open(os.path.join(RESULTS, "ddp.md"), "w") as f:
        f.write(text)
    print(text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(MODELS), figsize=(5 * len(MODELS), 3.5))
        for ax, model in zip(np.atleast_1d(axes), MODELS):
            for impl in impls:
                rs = [r for r in rows if r["impl"] == impl and r["model"] == model and r.get("bucket_mb", 25) == 25]
                ax.plot([r["ranks"] for r in rs], [r["efficiency"] for r in rs], "o-", label=impl)
            ax.axhline(1.0, color="gray", lw=0.5)
            ax.set_ylim(0, 1.1)
            ax.set_title(f"{model}, batch {MODELS[model]}/rank: weak scaling")
            ax.set_xlabel("ranks"), ax.set_ylabel("efficiency"), ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(RESULTS, "ddp.png"), dpi=100)
    except ImportError:
        print("matplotlib missing: no plot")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, nargs="+", default=None)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3, help="launches per configuration (median kept)")
    p.add_argument("--worker", choices=["ddg", "ddg-nocomm", "torch"])
    p.add_argument("--model", choices=list(MODELS), default="lenet")
    p.add_argument("--store", default="")
    p.add_argument("--bucket-mb", type=float, default=25)
    args = p.parse_args()
    if args.worker in ("ddg", "ddg-nocomm"):
        ddg_worker(args)
    elif args.worker == "torch":
        torch_worker(args)
    else:
        if args.ranks is None:
            cores = os.cpu_count() or 1
            args.ranks = sorted({1, 2} | ({4} if cores >= 4 else set()) | ({8} if cores >= 8 else set()))
        driver(args)


if __name__ == "__main__":
    main()
