"""Shared helpers for the benchmarks: single-threaded BLAS, the repository's own ddg first
on the path (whatever ddg the interpreter has installed), timing, page faults."""
import os
import sys

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import resource  # noqa: E402
import time  # noqa: E402


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def bench(fn, repeats=7, number=None, min_time=0.2):
    """Median seconds per call of ``fn`` over ``repeats`` runs of ``number`` calls, and
    minor page faults per call in the timed runs."""
    if number is None:
        number = 1
        while True:
            t = time.perf_counter()
            for _ in range(number):
                fn()
            if time.perf_counter() - t > min_time / 5 or number > 1e6:
                break
            number *= 4
    times = []
    f0 = minor_faults()
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    faults = (minor_faults() - f0) / (repeats * number)
    times.sort()
    return times[len(times) // 2], faults


def try_torch():
    try:
        import torch
        torch.set_num_threads(1)
        return torch
    except ImportError:
        return None


def race(fns, steps, rounds, warmup=3):
    """Median seconds per call of each fn, measured in alternating rounds so that load
    changes on a shared machine hit every contender alike. Also minor page faults per
    call."""
    for f in fns.values():
        for _ in range(warmup):
            f()
    times = {k: [] for k in fns}
    faults = {k: 0 for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            f0 = minor_faults()
            t = time.perf_counter()
            for _ in range(steps):
                f()
            times[k].append((time.perf_counter() - t) / steps)
            faults[k] += minor_faults() - f0
    return {k: (sorted(v)[len(v) // 2], faults[k] / (steps * rounds)) for k, v in times.items()}


def best_of(fn, number, repeats=9):
    """Minimum seconds per call over repeats (timeit's convention for micro-benchmarks)."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t) / number)
    return best
