"""All-reduce overhead of ddg's communicator over raw mpi4py, measured in one run.

    mpiexec -n 2 python bench/bench_allreduce.py [--repeats 50]

For float32 buffers of 1 KB, 1 MB and 16 MB it times, interleaved in every
repetition (so that machine noise hits all three alike):

* raw:   ``MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, [a, MPI.FLOAT], MPI.SUM)``
* ddg:   ``MPICommunicator.allreduce(a, 'sum')``
* async: ``MPICommunicator.iallreduce(a, 'sum').wait()``

and prints, from rank 0, the median time per call and the ratios to raw as a
markdown table. Absolute times on a shared machine are noise; the ratios are the
result.

A second table times float16 and bfloat16 gradients the way DataParallel sends them
(``iallreduce(a, 'sum', 'half')``: 2 bytes a value, summed by a user-defined MPI op in
float32 per combine) against float32 buffers of as many VALUES, and the plain
``allreduce`` of a half array (summed in float32: 4 bytes a value on the wire).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mpi4py import MPI  # noqa: E402

from ddg.parallel.comm import MPICommunicator  # noqa: E402
from ddg.tensor.dtypes import bfloat16  # noqa: E402

SIZES = [("1 KB", 1 << 10), ("1 MB", 1 << 20), ("16 MB", 16 << 20)]


HALF_SIZES = [("256 K values", 1 << 18), ("4 M values", 1 << 22)]


def half_rows(comm, world, repeats):
    """(label, dtype, wire bytes, t_float32, t_half_wire, t_half_plain) per size and dtype."""
    rows = []
    for label, n in HALF_SIZES:
        reps = repeats if n < (1 << 21) else max(5, repeats // 5)
        for dtype in (np.dtype(np.float16), bfloat16):
            a32 = np.full(n, comm.rank + 1.0, dtype=np.float32)
            ah = np.full(n, comm.rank + 1.0, dtype=dtype)

            def f32():
                comm.iallreduce(a32, "sum").wait()

            def wire():
                comm.iallreduce(ah, "sum", "half").wait()

            def plain():
                comm.allreduce(ah, "sum")

            variants = [f32, wire, plain]
            times = {f: [] for f in variants}
            for f in variants:
                f()
            for _ in range(reps):
                for f in variants:
                    a32.fill(comm.rank + 1.0)
                    ah.fill(comm.rank + 1.0)
                    world.Barrier()
                    t0 = time.perf_counter()
                    f()
                    times[f].append(time.perf_counter() - t0)
            expect = comm.size * (comm.size + 1) / 2
            assert np.all(ah.astype(np.float32) == expect), "half allreduce gave a wrong result"
            med = {f: float(np.median(t)) for f, t in times.items()}
            rows.append((label, str(dtype), reps, med[f32], med[wire], med[plain]))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=50, help="timed repetitions per size (fewer for 16 MB)")
    args = p.parse_args()

    world = MPI.COMM_WORLD
    comm = MPICommunicator(world)
    rows = []
    for label, nbytes in SIZES:
        a = np.full(nbytes // 4, comm.rank + 1.0, dtype=np.float32)
        repeats = args.repeats if nbytes < (8 << 20) else max(5, args.repeats // 5)

        def raw():
            world.Allreduce(MPI.IN_PLACE, [a, MPI.FLOAT], MPI.SUM)

        def ddg():
            comm.allreduce(a, "sum")

        def ddg_async():
            comm.iallreduce(a, "sum").wait()

        variants = [raw, ddg, ddg_async]
        times = {f: [] for f in variants}
        for f in variants:          # warm-up (connection setup, page faults)
            f()
        for _ in range(repeats):
            for f in variants:
                a.fill(comm.rank + 1.0)
                world.Barrier()
                t0 = time.perf_counter()
                f()
                times[f].append(time.perf_counter() - t0)
        # Correctness guard: the last result must be the sum over ranks.
        expect = comm.size * (comm.size + 1) / 2
        assert np.all(a == expect), "allreduce gave a wrong result"
        med = {f: float(np.median(t)) for f, t in times.items()}
        rows.append((label, repeats, med[raw], med[ddg], med[ddg_async]))

    if comm.rank == 0:
        print(f"All-reduce (float32, sum) on {comm.size} ranks; median of repeats, "
              f"ratios measured in this run\n")
        print("| size | repeats | raw mpi4py (us) | ddg allreduce (us) | ddg / raw "
              "| ddg iallreduce+wait (us) | iallreduce / raw |")
        print("|---|---|---|---|---|---|---|")
        for label, reps, t_raw, t_ddg, t_async in rows:
            print(f"| {label} | {reps} | {t_raw * 1e6:.1f} | {t_ddg * 1e6:.1f} | {t_ddg / t_raw:.2f} "
                  f"| {t_async * 1e6:.1f} | {t_async / t_raw:.2f} |")

    hrows = half_rows(comm, world, args.repeats)
    if comm.rank == 0:
        print(f"\nHalf-precision gradients (sum) on {comm.size} ranks, same number of values as float32; "
              f"wire bytes / float32 bytes: 0.5 for 'half', 1.0 for the plain all-reduce (float32 staging)\n")
        print("| values | dtype | repeats | float32 iallreduce (us) | 'half' wire (us) | 'half' / float32 "
              "| plain allreduce (us) | plain / float32 |")
        print("|---|---|---|---|---|---|---|---|")
        for label, dt, reps, t32, tw, tp in hrows:
            print(f"| {label} | {dt} | {reps} | {t32 * 1e6:.1f} | {tw * 1e6:.1f} | {tw / t32:.2f} "
                  f"| {tp * 1e6:.1f} | {tp / t32:.2f} |")


if __name__ == "__main__":
    main()
