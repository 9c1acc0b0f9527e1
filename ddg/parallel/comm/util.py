"""Argument checks and array helpers shared by every communicator."""
import numpy as np

REDUCE_OPS = ("sum", "avg", "max", "min", "prod")


def normalize_op(op, collective):
    """The canonical op string; accepts any case and objects whose str() is an op name."""
    name = op if isinstance(op, str) else getattr(op, "value", op)
    name = str(name).lower()
    if name not in REDUCE_OPS:
        raise ValueError(f"ddg.parallel.{collective}: unknown reduce op {op!r}; "
                         f"expected one of {', '.join(REDUCE_OPS)}")
    return name


def describe(array):
    """'float32[4, 3]': a short description for error and stall messages."""
    shape = ", ".join(str(d) for d in getattr(array, "shape", ()))
    return f"{getattr(array, 'dtype', type(array).__name__)}[{shape}]"


def check_array(array, collective):
    if not hasattr(array, "dtype") or not hasattr(array, "shape") or isinstance(array, np.generic):
        raise TypeError(f"ddg.parallel.{collective}: expected a numpy or cupy array, "
                        f"got {type(array).__name__}")


def check_avg_dtype(array, collective):
    if array.dtype.kind not in "fcV":
        raise TypeError(f"ddg.parallel.{collective}: op='avg' needs a floating-point array, "
                        f"got {describe(array)}; use op='sum' and divide yourself")


def check_root(root, size, collective):
    if not isinstance(root, (int, np.integer)) or not 0 <= root < size:
        raise ValueError(f"ddg.parallel.{collective}: root/src must be a rank in [0, {size}), got {root!r}")


def check_peer(peer, size, rank, what, allow_any=False):
    """A point-to-point partner: a rank in [0, size) other than this one."""
    if peer is None and allow_any:
        return
    if not isinstance(peer, (int, np.integer)) or not 0 <= peer < size:
        raise ValueError(f"ddg.parallel.{what}: the peer must be a rank in [0, {size}), got {peer!r}")
    if peer == rank:
        raise ValueError(f"ddg.parallel.{what}: rank {rank} cannot {what} to or from itself (it would wait forever)")


def check_group_ranks(ranks, size, what="split"):
    """The member list of a subgroup: distinct ranks of the parent, as a tuple of ints."""
    try:
        out = tuple(int(r) for r in ranks)
    except (TypeError, ValueError):
        raise TypeError(f"ddg.parallel.{what}: ranks must be a list of ints, got {ranks!r}") from None
    if len(set(out)) != len(out) or any(not 0 <= r < size for r in out):
        raise ValueError(f"ddg.parallel.{what}: ranks must be distinct ranks in [0, {size}), got {list(out)}")
    return out


def check_rows(array, size, collective):
    check_array(array, collective)
    if array.ndim == 0 or array.shape[0] != size:
        raise ValueError(f"ddg.parallel.{collective}: needs an array whose first axis is the number of ranks "
                         f"({size}), got {describe(array)}")


_backend_mod = None


def backend():
    """ddg.tensor.backend, imported on first use (it is the only module that imports cupy)."""
    global _backend_mod
    if _backend_mod is None:
        from ddg.tensor import backend as b
        _backend_mod = b
    return _backend_mod


def is_gpu(array):
    # Fast path: plain numpy arrays are by far the common case.
    if type(array) is np.ndarray:
        return False
    return backend().is_gpu_array(array)


def array_module(array):
    return np if type(array) is np.ndarray else backend().get_array_module(array)


def sync_gpu(*arrays):
    """Wait for the GPU stream when any of ``arrays`` lives on the device: called right
    before MPI reads/writes device memory, after the last kernel that produced the buffer
    (a contiguous copy, a float32 cast, a stack) has been queued."""
    if any(a is not None and is_gpu(a) for a in arrays):
        backend().synchronize()


def check_reduction(array, op, collective):
    """Check a reduction's arguments; returns the canonical op name."""
    check_array(array, collective)
    op = normalize_op(op, collective)
    if op == "avg":
        check_avg_dtype(array, collective)
    return op
