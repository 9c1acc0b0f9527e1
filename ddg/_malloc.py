"""Keep glibc from handing large temporaries back to the OS every step.

By default glibc serves allocations above 128 KiB-32 MiB (a dynamic threshold) with
mmap and returns them with munmap, so a training step that allocates the same
activations each iteration page-faults them in again every time (measured on seed
002's two-layer net: 185 faults per step, about half the step time). Raising the
mmap threshold and the trim threshold keeps freed blocks in the heap for reuse.
Applied once at import, on glibc only, unless the user already chose with the
MALLOC_* environment variables or sets DDG_KEEP_MALLOC=1.
"""
import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def tune():
    if sys.platform != "linux" or os.environ.get("DDG_KEEP_MALLOC") == "1":
        return False
    if any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024) == 1
        ok &= libc.mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024) == 1
        return bool(ok)
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return False


TUNED = tune()
