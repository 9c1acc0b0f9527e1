"""DataLoader workers: a dataset whose samples cost Python-level work (it holds the GIL,
as decoding and augmentation written in Python do), read with no workers, with worker
threads and with worker processes. Ratios from one run:

    python bench/bench_dataloader.py [--workers 2] [--samples 256] [--repeats 3]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from ddg.io import DataLoader, Dataset  # noqa: E402


class PythonWork(Dataset):
    def __init__(self, n, work):
        self.n, self.work = n, work

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        acc = 0
        for k in range(self.work):
            acc += (k * i) % 7
        return np.full((3, 32, 32), acc, np.float32), np.int64(i % 10)


def epoch(mode, workers, ds):
    os.environ["DDG_DATALOADER_WORKERS"] = mode
    t = time.perf_counter()
    for _ in DataLoader(ds, batch_size=32, num_workers=workers):
        pass
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--work", type=int, default=20000, help="Python loop iterations per sample")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    ds = PythonWork(args.samples, args.work)
    t = {"none": [], "threads": [], "processes": []}
    for _ in range(args.repeats):
        t["none"].append(epoch("process", 0, ds))
        t["threads"].append(epoch("thread", args.workers, ds))
        t["processes"].append(epoch("process", args.workers, ds))
    med = {k: statistics.median(v) for k, v in t.items()}
    print(f"{args.samples} samples, {os.cpu_count()} cores, {args.workers} workers; median epoch seconds "
          f"and speed-up over no workers:")
    for k in ("none", "threads", "processes"):
        print(f"  {k:10s} {med[k]:.3f} s   {med['none'] / med[k]:.2f}x")


if __name__ == "__main__":
    main()
