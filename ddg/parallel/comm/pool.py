"""Reusable host buffers for staging and for float16 reductions."""
import numpy as np

from .util import backend

__all__ = ["HostBufferPool", "pinned_alloc"]


class HostBufferPool:
    """Reusable host staging buffers, keyed by size in bytes.

    ``acquire(nbytes)`` hands out a free 1-D uint8 numpy array of exactly that many bytes
    (allocating with ``alloc`` only when none is free); ``release`` returns it. A buffer is
    never handed out twice at once, so several non-blocking collectives of the same size
    can be in flight together.
    """

    def __init__(self, alloc=None):
        self._alloc = alloc or (lambda n: np.empty(n, dtype=np.uint8))
        self._free = {}
        self.allocations = 0  # how many buffers were ever allocated (for tests)

    def acquire(self, nbytes):
        free = self._free.get(nbytes)
        if free:
            return free.pop()
        self.allocations += 1
        return self._alloc(nbytes)

    def release(self, buf):
        self._free.setdefault(buf.nbytes, []).append(buf)

    def view(self, buf, dtype, shape):
        """``buf`` seen as a C-contiguous array of ``dtype`` and ``shape``."""
        return buf.view(dtype).reshape(shape)


def pinned_alloc(nbytes):
    """A numpy uint8 array backed by page-locked host memory (fast, async-capable copies)."""
    cp = backend().cupy_module()
    mem = cp.cuda.alloc_pinned_memory(max(nbytes, 1))
    return np.frombuffer(mem, dtype=np.uint8, count=nbytes)
