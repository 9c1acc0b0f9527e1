"""Shared helpers for the benchmarks: single-threaded BLAS, timing, page faults."""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

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
