"""ddg on the GPU vs PyTorch on the GPU: training-step time and memory, in one run.

For each model, a training step (forward + loss + backward + Adam step + clear_grad)
is timed in

  * ddg eager      (cupy arrays on the GPU, cuDNN convolutions where cupy has cuDNN),
  * ddg static     (the same model after ``ddg.jit.to_static``: traced once, replayed),
  * torch eager    (the same architecture on ``cuda``),

and the ratios measured in this run are printed as a markdown table (absolute times
on shared machines are noise; ratios from one run are what to compare).

Models (bench/gpu_models.py, the same architectures in ddg and torch):
  * mlp          784-1024-1024-10, ReLU, batch 256, cross-entropy;
  * lenet        LeNet-5 (conv 6@5x5 pad 2, pool, conv 16@5x5, pool, 120-84-10), batch 256;
  * transformer  embedding (vocab 1000) + 4 post-norm encoder layers (d_model 256,
                 8 heads, feed-forward 1024, no dropout), mean over the sequence,
                 linear 10; sequence 128, batch 32, cross-entropy;
  * resnet18     ResNet-18 with BatchNorm on 32x32 images (3x3 stem, no max pool), batch 128;
  * gpt          GPT-style decoder: 6 pre-norm layers, d_model 512, 8 heads, GELU
                 feed-forward 2048, causal mask, sequence 256, batch 16, vocabulary 1000,
                 next-token cross-entropy.

Kernels per step: on a real GPU with torch, the CUDA device activities (kernels,
memsets, memcpys) of one step as CUPTI reports them through ``torch.profiler``, which
sees cupy's launches as well as torch's; on simcupy, its count of launches
(``cupy.launches``, a floor of a real GPU's count; see tests/simgpu).

Timing: ``--warmup`` steps first (cuDNN handles, kernel compilation, optimizer state,
the static trace), then ``--repeats`` runs of ``--steps`` steps each; the device is
synchronized at the end of each run (cupy's current stream / torch.cuda.synchronize)
and the median time per step is reported. The frameworks are measured interleaved,
run by run, so that drifts of the machine hit them alike.

Memory (per model and framework, after freeing the caches):
  * ddg: cupy's default memory pool -- ``total_bytes()`` (bytes the pool holds from the
    device; it only grows while running, so its value after the runs is the peak
    footprint) and the largest ``used_bytes()`` sampled after forward and after
    backward in every step (live arrays; a lower bound of the true peak);
  * torch: ``torch.cuda.max_memory_allocated()`` (live tensors, exact peak) and
    ``max_memory_reserved()`` (its caching allocator's footprint).
  The comparable pairs are pool total vs torch reserved, sampled used vs torch allocated.

Usage (on a machine with an NVIDIA GPU, cupy and torch with CUDA):

    python bench/bench_gpu.py                    # all models, writes nothing
    python bench/bench_gpu.py --out bench/results/gpu.md
    python bench/bench_gpu.py --models lenet --steps 50 --repeats 5
    python bench/bench_gpu.py --smoke            # tiny sizes; also runs on the CPU (checks the script)

Every (model, framework) pair runs in its own try block: a failure is reported in the
table instead of ending the run.
"""
import argparse
import os
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import ddg  # noqa: E402
from ddg.tensor import backend  # noqa: E402
from gpu_models import DDG_MODELS, MODELS, make_data, sizes, torch_model  # noqa: E402

MiB = 1024.0 * 1024.0


# -- runners -------------------------------------------------------------------------------------
class Runner:
    """One (model, framework): ``step()`` runs one training step, ``sync()`` waits for the
    device, ``memory()`` returns (footprint MiB, live peak MiB)."""
    label = ""

    def sync(self):
        pass


class DdgRunner(Runner):
    def __init__(self, name, cfg, place, static):
        self.label = "ddg static" if static else "ddg eager"
        self.place = place
        self.gpu = place == "gpu"
        self.pool = backend.cupy_module().get_default_memory_pool() if self.gpu else None
        if self.pool is not None:
            backend.synchronize()
            self.pool.free_all_blocks()
        ddg.seed(0)
        model = DDG_MODELS[name](cfg)
        model.to(place)
        if static:
            ddg.jit.to_static(model)
        self.model = model
        self.opt = ddg.optimizer.Adam(1e-3, parameters=model.parameters())
        xa, ya = make_data(name, cfg)
        self.x = ddg.to_tensor(xa, place=place)
        self.y = ddg.to_tensor(ya, place=place)
        self.peak_used = 0

    def _sample(self):
        if self.pool is not None:
            used = self.pool.used_bytes()
            if used > self.peak_used:
                self.peak_used = used

    def step(self):
        loss = self.model(self.x, self.y)
        self._sample()
        loss.backward()
        self._sample()
        self.opt.step()
        self.opt.clear_grad()
        return loss

    def sync(self):
        if self.gpu:
            backend.synchronize()

    def memory(self):
        if self.pool is None:
            return None, None
        return self.pool.total_bytes() / MiB, self.peak_used / MiB


class TorchRunner(Runner):
    label = "torch eager"

    def __init__(self, torch, name, cfg, device):
        self.torch, self.device = torch, device
        self.cuda = device.startswith("cuda")
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        torch.manual_seed(0)
        self.model = torch_model(torch, name, cfg).to(device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        xa, ya = make_data(name, cfg)
        self.x = torch.from_numpy(xa).to(device)
        self.y = torch.from_numpy(ya).to(device)

    def step(self):
        loss = self.model(self.x, self.y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def memory(self):
        if not self.cuda:
            return None, None
        return self.torch.cuda.max_memory_reserved() / MiB, self.torch.cuda.max_memory_allocated() / MiB


def count_kernels(runner, torch):
    """Kernels (GPU activities) of one training step, or None where nothing can count them."""
    cp = backend.cupy_module() if isinstance(runner, DdgRunner) and runner.gpu else None
    if cp is not None and getattr(cp, "SIMULATED", False):
        cp.launches.clear()
        runner.step()
        return cp.launches.count
    if torch is None or not torch.cuda.is_available() or not (getattr(runner, "gpu", False)
                                                               or getattr(runner, "cuda", False)):
        return None
    from torch.profiler import ProfilerActivity, profile
    runner.sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        runner.step()
        runner.sync()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def time_runs(runners, steps, repeats, warmup):
    """Median seconds per step for each runner; runs interleaved across runners."""
    for r in runners:
        for _ in range(warmup):
            r.step()
        r.sync()
    times = {r.label: [] for r in runners}
    for _ in range(repeats):
        for r in runners:
            r.sync()
            t = time.perf_counter()
            for _ in range(steps):
                r.step()
            r.sync()
            times[r.label].append((time.perf_counter() - t) / steps)
    return {k: statistics.median(v) for k, v in times.items()}


def check_losses(runners):
    """Every framework's loss after the runs, for a glance that all of them train."""
    out = {}
    for r in runners:
        loss = r.step()
        r.sync()
        out[r.label] = float(loss.item())
    return out


# -- report ---------------------------------------------------------------------------------------
def _fmt(v, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    return f"{v:.3f}{unit}" if v < 10 else f"{v:.1f}{unit}"


def _ratio(a, b):
    return None if a is None or b is None or not b else a / b


def environment(torch, place):
    lines = [f"- python {sys.version.split()[0]}, numpy {np.__version__}"]
    if place == "gpu":
        cp = backend.cupy_module()
        try:
            name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"]
            name = name.decode() if isinstance(name, bytes) else name
        except Exception:
            name = "?"
        lines.append(f"- GPU: {name}; cupy {cp.__version__}; cuDNN through cupy: "
                     f"{'yes' if backend.cudnn_module() is not None else 'no (im2col kernels)'}; "
                     f"CUPY_TF32={os.environ.get('CUPY_TF32', 'unset')}")
        if getattr(cp, "SIMULATED", False):
            lines.append("- **simcupy** (tests/simgpu): a numpy stand-in for cupy; this checks the script, "
                         "the numbers mean nothing")
    else:
        lines.append("- no GPU: CPU smoke run (numpy vs torch CPU); the numbers mean nothing")
    if torch is not None:
        lines.append(f"- torch {torch.__version__}" + (f", CUDA {torch.version.cuda}, cuDNN "
                                                      f"{torch.backends.cudnn.version()}"
                                                      if place == "gpu" else ""))
    else:
        lines.append("- torch: not installed or without CUDA (torch columns n/a)")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ",".join(MODELS))
    ap.add_argument("--steps", type=int, default=20, help="steps per timed run (default 20)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per framework (default 5)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes and few steps; runs on the CPU too")
    ap.add_argument("--out", default=None, help="also write the markdown report to this file")
    args = ap.parse_args(argv)
    if args.smoke:
        args.steps, args.repeats, args.warmup = min(args.steps, 2), min(args.repeats, 2), min(args.warmup, 1)

    place = "gpu" if backend.cupy_available() else "cpu"
    if place == "cpu" and not args.smoke:
        print("bench_gpu: no GPU here (cupy missing or sees no GPU); run it on a GPU machine, "
              "or pass --smoke to check the script on the CPU.")
        return 0
    try:
        import torch
    except ImportError:
        torch = None
    torch_device = "cuda" if place == "gpu" else "cpu"
    if torch is not None and place == "gpu" and not torch.cuda.is_available():
        print("bench_gpu: torch has no CUDA here; torch columns will be n/a")
        torch = None
    if place == "gpu":
        ddg.set_device("gpu")

    cfgs = sizes("smoke" if args.smoke else "full")
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    rows, notes = [], []
    for name in names:
        if name not in cfgs:
            notes.append(f"- unknown model {name!r} skipped")
            continue
        cfg = cfgs[name]
        builders = [("ddg eager", lambda: DdgRunner(name, cfg, place, static=False)),
                    ("ddg static", lambda: DdgRunner(name, cfg, place, static=True))]
        if torch is not None:
            builders.append(("torch eager", lambda: TorchRunner(torch, name, cfg, torch_device)))
        times, mem, losses, kernels = {}, {}, {}, {}
        for label, build in builders:
            # each framework alone for its memory figures (pools emptied before it starts) ...
            try:
                r = build()
                times[label] = time_runs([r], args.steps, args.repeats, args.warmup)[label]
                mem[label] = r.memory()
                losses.update(check_losses([r]))
                try:
                    kernels[label] = count_kernels(r, torch)
                except Exception as e:  # a profiler that does not work here
                    notes.append(f"- {name} / {label}: kernels not counted ({type(e).__name__}: {e})")
                del r
            except Exception as e:  # report, keep going
                times[label] = f"error: {type(e).__name__}: {str(e)[:80]}"
                mem[label] = (None, None)
                notes.append(f"- {name} / {label}: {type(e).__name__}: {e}\n```\n{traceback.format_exc()[-1500:]}```")
        # ... then all together, interleaved, for the time ratios
        ok = [b for b in builders if not isinstance(times.get(b[0]), str)]
        if len(ok) > 1:
            try:
                runners = [b() for _, b in ok]
                times.update(time_runs(runners, args.steps, args.repeats, args.warmup))
                del runners
            except Exception as e:
                notes.append(f"- {name}: interleaved timing failed ({type(e).__name__}: {e}); "
                             f"times are from the separate runs")
        rows.append((name, times, mem, losses, kernels))

    def ms(label, times):
        v = times.get(label)
        return v if isinstance(v, str) else (None if v is None else v * 1e3)

    head = ("| model | ddg eager ms | ddg static ms | torch ms | eager/torch | static/torch | static/eager "
            "| ddg pool MiB | torch reserved MiB | ddg used MiB (sampled) | torch allocated MiB "
            "| used/allocated | kernels/step ddg eager, static, torch |")
    lines = ["# ddg vs PyTorch on the GPU: training step (Adam)", "", environment(torch, place), "",
             f"{args.steps} steps x {args.repeats} runs after {args.warmup} warm-up steps; median per step.", "",
             head, "|" + "---|" * 13]
    for name, times, mem, losses, kernels in rows:
        e, s, t = ms("ddg eager", times), ms("ddg static", times), ms("torch eager", times)
        num = [x if not isinstance(x, str) else None for x in (e, s, t)]
        (dp, du), (tp, tu) = mem.get("ddg eager", (None, None)), mem.get("torch eager", (None, None))
        cells = [name, _fmt(e), _fmt(s), _fmt(t), _fmt(_ratio(num[0], num[2])), _fmt(_ratio(num[1], num[2])),
                 _fmt(_ratio(num[1], num[0])), _fmt(dp), _fmt(tp), _fmt(du), _fmt(tu), _fmt(_ratio(du, tu)),
                 ", ".join("n/a" if kernels.get(k) is None else str(kernels[k])
                           for k in ("ddg eager", "ddg static", "torch eager"))]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Ratios below 1 favour ddg (times) / ddg (memory). Memory is for the eager models, each "
              "measured alone after emptying the caches.", "",
              "Final losses (a glance that every framework trains the same problem): " +
              "; ".join(f"{n}: " + ", ".join(f"{k} {v:.4f}" for k, v in lo.items()) for n, _, _, lo, _ in rows)]
    if notes:
        lines += ["", "Notes:"] + notes
    report = "\n".join(lines)
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
