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
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mpi4py import MPI  # noqa: E402

from ddg.parallel.comm import MPICommunicator  # noqa: E402

SIZES = [("1 KB", 1 << 10), ("1 MB", 1 << 20), ("16 MB", 16 << 20)]


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


if __name__ == "__main__":
    main()
