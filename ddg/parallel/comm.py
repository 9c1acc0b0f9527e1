"""Communicators: the collectives data-parallel training needs, on numpy or cupy arrays.

Three implementations share one small interface (:class:`Communicator`):

* :class:`SingleProcessCommunicator` -- world size 1; every collective is the
  identity. It never imports mpi4py, so a plain ``python train.py`` needs no MPI.
* :class:`MPICommunicator` -- wraps an ``mpi4py`` communicator and uses only its
  *buffer* methods (``Allreduce``, ``Iallreduce``, ``Bcast`` ...), so array data is
  never pickled. numpy dtypes are mapped to MPI datatypes explicitly. cupy arrays
  go straight to MPI when the library is CUDA-aware, otherwise through
  :class:`StagedCommunicator`.
* :class:`StagedCommunicator` -- runs collectives on "device" arrays by copying
  them into reusable host buffers, calling an inner (host) communicator and
  copying the result back. The copies are injected callables, so the logic is
  exercised in the tests with numpy arrays standing in for device arrays.

Array collectives reduce *in place* (``allreduce``, ``broadcast``, ``reduce``) or
return a new array (``allgather``, ``reduce_scatter``, ``scatter``). Reduction
ops are the strings ``'sum'``, ``'avg'``, ``'max'``, ``'min'``, ``'prod'``.

Every blocking call (and every request ``wait()``) records what it is doing and
since when in two attributes, ``_busy_what`` and ``_busy_since``; the stall
watchdog of :mod:`ddg.parallel.env` reads them from a daemon thread.
"""
import os
import time

import numpy as np

__all__ = [
    "REDUCE_OPS", "Communicator", "Request", "SingleProcessCommunicator",
    "MPICommunicator", "StagedCommunicator", "HostBufferPool",
    "get_world_communicator", "launched_under_mpi", "cuda_aware_mpi",
]

REDUCE_OPS = ("sum", "avg", "max", "min", "prod")

_now = time.monotonic

# Environment variables set by common MPI launchers (MPICH/hydra, Intel MPI,
# Open MPI, PMIx, MVAPICH, Cray PALS) in every rank's environment.
_LAUNCHER_ENV_VARS = (
    "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
    "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "HYDRA_CONTROL_FD", "HYDI_CONTROL_FD",
    "MV2_COMM_WORLD_SIZE", "PALS_RANKID",
)
# Variables that carry the world size, to tell "launched with -n 4" from "-n 1".
_LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


def _normalize_op(op, collective):
    """The canonical op string; accepts any case and objects whose str() is an op name."""
    name = op if isinstance(op, str) else getattr(op, "value", op)
    name = str(name).lower()
    if name not in REDUCE_OPS:
        raise ValueError(f"ddg.parallel.{collective}: unknown reduce op {op!r}; "
                         f"expected one of {', '.join(REDUCE_OPS)}")
    return name


def _describe(array):
    """'float32[4, 3]' -- a short description used in error and stall messages."""
    shape = ", ".join(str(d) for d in getattr(array, "shape", ()))
    return f"{getattr(array, 'dtype', type(array).__name__)}[{shape}]"


def _check_array(array, collective):
    if not hasattr(array, "dtype") or not hasattr(array, "shape") or isinstance(array, np.generic):
        raise TypeError(f"ddg.parallel.{collective}: expected a numpy or cupy array, "
                        f"got {type(array).__name__}")


def _check_avg_dtype(array, collective):
    if array.dtype.kind not in "fc":
        raise TypeError(f"ddg.parallel.{collective}: op='avg' needs a floating-point array, "
                        f"got {_describe(array)}; use op='sum' and divide yourself")


_backend_mod = None


def _backend():
    """ddg.tensor.backend, imported on first use (it is the only module that imports cupy)."""
    global _backend_mod
    if _backend_mod is None:
        from ddg.tensor import backend
        _backend_mod = backend
    return _backend_mod


def _is_gpu(array):
    # Fast path: plain numpy arrays are by far the common case.
    if type(array) is np.ndarray:
        return False
    return _backend().is_gpu_array(array)


def _xp(array):
    return np if type(array) is np.ndarray else _backend().get_array_module(array)


def _sync_gpu(*arrays):
    """Wait for the GPU stream when any of ``arrays`` lives on the device: called right
    before MPI reads/writes device memory (CUDA-aware path), after the last kernel that
    produced the buffer (a contiguous copy, a float32 cast, a stack) has been queued."""
    if any(a is not None and _is_gpu(a) for a in arrays):
        _backend().synchronize()


# ---------------------------------------------------------------------------
# Requests

class Request:
    """A non-blocking collective in flight. ``wait()`` returns the reduced array."""

    def wait(self):
        raise NotImplementedError

    def test(self):
        """True when the operation has completed (finishing it if so); never blocks."""
        raise NotImplementedError


class _DoneRequest(Request):
    """A request that completed when it was created."""
    __slots__ = ("_array",)

    def __init__(self, array):
        self._array = array

    def wait(self):
        return self._array

    def test(self):
        return True


# ---------------------------------------------------------------------------
# The interface

class Communicator:
    """The collective interface. Subclasses implement every method.

    ``rank``/``size`` describe the process group. Array arguments are numpy or
    cupy arrays; all ranks must pass arrays of the same shape and dtype (only the
    root's array matters for ``broadcast``).
    """
    rank = 0
    size = 1
    # Read by the stall watchdog: what the blocking call in progress is and when it began.
    _busy_what = None
    _busy_since = 0.0

    def allreduce(self, array, op="sum"):
        """Reduce ``array`` over all ranks, in place; returns ``array``."""
        raise NotImplementedError

    def iallreduce(self, array, op="sum"):
        """Start an in-place all-reduce; returns a :class:`Request`."""
        raise NotImplementedError

    def broadcast(self, array, root=0):
        """Overwrite ``array`` on every rank with root's, in place; returns ``array``."""
        raise NotImplementedError

    def allgather(self, array):
        """A new array of shape ``(size,) + array.shape``: row ``r`` is rank r's array."""
        raise NotImplementedError

    def reduce_scatter(self, array, op="sum"):
        """Reduce ``array`` (first axis divisible by size) over ranks; return this rank's
        block of ``array.shape[0] // size`` rows."""
        raise NotImplementedError

    def reduce(self, array, root=0, op="sum"):
        """Reduce onto ``root``, in place there; other ranks' arrays are left unchanged."""
        raise NotImplementedError

    def scatter(self, arrays, root=0, out=None):
        """Root passes ``size`` equally-shaped arrays (others pass None); every rank gets
        its own as a new array, or written into ``out`` when given."""
        raise NotImplementedError

    def barrier(self):
        raise NotImplementedError

    def allgather_object(self, obj):
        """A list with every rank's (picklable) object, in rank order."""
        raise NotImplementedError

    def bcast_object(self, obj, root=0):
        """Root's object on every rank."""
        raise NotImplementedError

    def gather_object(self, obj, root=0):
        """The list of every rank's object on root; None elsewhere."""
        raise NotImplementedError

    # Watchdog bookkeeping: two attribute writes, cheap enough for every call.
    def _begin(self, what):
        self._busy_what = what
        self._busy_since = _now()

    def _end(self):
        self._busy_since = 0.0

    def __repr__(self):
        return f"<{type(self).__name__} rank={self.rank} size={self.size}>"


# ---------------------------------------------------------------------------
# Single process

class SingleProcessCommunicator(Communicator):
    """World size 1, rank 0. Every collective is the identity; no MPI involved."""
    rank = 0
    size = 1

    def allreduce(self, array, op="sum"):
        _check_array(array, "allreduce")
        if _normalize_op(op, "allreduce") == "avg":
            _check_avg_dtype(array, "allreduce")
        return array

    def iallreduce(self, array, op="sum"):
        return _DoneRequest(self.allreduce(array, op))

    def broadcast(self, array, root=0):
        _check_array(array, "broadcast")
        _check_root(root, 1, "broadcast")
        return array

    def allgather(self, array):
        _check_array(array, "allgather")
        return _xp(array).expand_dims(array, 0).copy()

    def reduce_scatter(self, array, op="sum"):
        _check_array(array, "reduce_scatter")
        op = _normalize_op(op, "reduce_scatter")
        if op == "avg":
            _check_avg_dtype(array, "reduce_scatter")
        if array.ndim == 0:
            raise ValueError(f"ddg.parallel.reduce_scatter: needs an array with a first axis, "
                             f"got {_describe(array)}")
        return array.copy()

    def reduce(self, array, root=0, op="sum"):
        _check_array(array, "reduce")
        _check_root(root, 1, "reduce")
        if _normalize_op(op, "reduce") == "avg":
            _check_avg_dtype(array, "reduce")
        return array

    def scatter(self, arrays, root=0, out=None):
        _check_root(root, 1, "scatter")
        if arrays is None or len(arrays) != 1:
            raise ValueError(f"ddg.parallel.scatter: root must pass a list of 1 array (world size 1), "
                             f"got {None if arrays is None else len(arrays)}")
        src = arrays[0]
        _check_array(src, "scatter")
        if out is None:
            return src.copy()
        if tuple(out.shape) != tuple(src.shape):
            raise ValueError(f"ddg.parallel.scatter: out is {_describe(out)} but the scattered "
                             f"arrays are {_describe(src)}")
        out[...] = src
        return out

    def barrier(self):
        pass

    def allgather_object(self, obj):
        return [obj]

    def bcast_object(self, obj, root=0):
        _check_root(root, 1, "bcast_object")
        return obj

    def gather_object(self, obj, root=0):
        _check_root(root, 1, "gather_object")
        return [obj]


def _check_root(root, size, collective):
    if not isinstance(root, (int, np.integer)) or not 0 <= root < size:
        raise ValueError(f"ddg.parallel.{collective}: root/src must be a rank in [0, {size}), got {root!r}")


# ---------------------------------------------------------------------------
# Reusable host buffers

class HostBufferPool:
    """Reusable host staging buffers, keyed by size in bytes.

    ``acquire(nbytes)`` hands out a free 1-D uint8 numpy array of exactly that many
    bytes (allocating with ``alloc`` only when none is free); ``release`` returns it.
    A buffer is never handed out twice at once, so several non-blocking
    collectives of the same size can be in flight together.
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


def _pinned_alloc(nbytes):
    """A numpy uint8 array backed by page-locked host memory (fast, async-capable copies)."""
    cp = _backend().cupy_module()
    mem = cp.cuda.alloc_pinned_memory(max(nbytes, 1))
    return np.frombuffer(mem, dtype=np.uint8, count=nbytes)


# ---------------------------------------------------------------------------
# MPI

def _mpi():
    from mpi4py import MPI
    return MPI


_MPI_TYPES = None
_MPI_OPS = None


def _mpi_tables():
    """numpy dtype -> MPI datatype, op name -> MPI op (built once, after mpi4py imports)."""
    global _MPI_TYPES, _MPI_OPS
    if _MPI_TYPES is None:
        MPI = _mpi()
        _MPI_TYPES = {
            np.dtype(np.float32): MPI.FLOAT,
            np.dtype(np.float64): MPI.DOUBLE,
            np.dtype(np.int8): MPI.INT8_T,
            np.dtype(np.int16): MPI.INT16_T,
            np.dtype(np.int32): MPI.INT32_T,
            np.dtype(np.int64): MPI.INT64_T,
            np.dtype(np.uint8): MPI.UINT8_T,
            np.dtype(np.uint16): MPI.UINT16_T,
            np.dtype(np.uint32): MPI.UINT32_T,
            np.dtype(np.uint64): MPI.UINT64_T,
            np.dtype(np.bool_): MPI.C_BOOL,
            np.dtype(np.complex64): MPI.C_FLOAT_COMPLEX,
            np.dtype(np.complex128): MPI.C_DOUBLE_COMPLEX,
            # float16 has no MPI type. Data movement treats it as opaque 2-byte
            # words; reductions are done in float32 (see _HALF below).
            np.dtype(np.float16): MPI.UINT16_T,
        }
        _MPI_OPS = {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}
    return _MPI_TYPES, _MPI_OPS


_HALF = np.dtype(np.float16)
_BOOL = np.dtype(np.bool_)


def _mpi_type(dtype, collective):
    types, _ = _mpi_tables()
    t = types.get(np.dtype(dtype))
    if t is None:
        raise TypeError(f"ddg.parallel.{collective}: dtype {np.dtype(dtype)} is not supported; "
                        f"supported: {', '.join(sorted(str(d) for d in types))}")
    return t


def _mpi_op(op, dtype, collective):
    """The MPI op for ``op`` on arrays of ``dtype`` (bool and complex need care)."""
    MPI = _mpi()
    _, ops = _mpi_tables()
    if dtype == _BOOL:
        # MPI defines only logical ops on C_BOOL: sum/max are OR, prod/min are AND
        # (the same results numpy's add/maximum/multiply/minimum give on bools).
        if op == "avg":
            _check_avg_dtype(np.empty(0, dtype), collective)
        return MPI.LOR if op in ("sum", "max") else MPI.LAND
    if dtype.kind == "c" and op in ("max", "min"):
        raise TypeError(f"ddg.parallel.{collective}: op={op!r} is undefined for complex dtype {dtype}")
    if op == "avg":
        _check_avg_dtype(np.empty(0, dtype), collective)
    return ops[op]


_cuda_aware = None


def cuda_aware_mpi():
    """Whether the MPI library can read and write GPU memory directly.

    ``DDG_CUDA_AWARE_MPI=1|0`` decides; otherwise ask the library through
    mpi4py's ``Query_cuda_support`` (MPIX extension) when mpi4py has it; otherwise
    assume it cannot (staging through host memory is always correct).
    """
    global _cuda_aware
    if _cuda_aware is None:
        forced = os.environ.get("DDG_CUDA_AWARE_MPI", "").strip()
        if forced in ("0", "1"):
            _cuda_aware = forced == "1"
        else:
            query = getattr(_mpi(), "Query_cuda_support", None)
            try:
                _cuda_aware = bool(query()) if query is not None else False
            except Exception:
                _cuda_aware = False
    return _cuda_aware


class _MPIRequest(Request):
    """An in-flight ``Iallreduce`` plus what to do when it completes
    (average, cast float32 back to float16, copy into a non-contiguous target)."""
    __slots__ = ("_comm", "_req", "_array", "_work", "_finish", "_what", "_done")

    def __init__(self, comm, req, array, work, finish, what):
        self._comm, self._req, self._array = comm, req, array
        self._work, self._finish, self._what = work, finish, what
        self._done = False

    def wait(self):
        if not self._done:
            comm = self._comm
            comm._begin(self._what)
            try:
                self._req.Wait()
            finally:
                comm._end()
            self._complete()
        return self._array

    def test(self):
        if self._done:
            return True
        if self._req.Test():
            self._complete()
            return True
        return False

    def _complete(self):
        self._done = True
        if self._finish is not None:
            self._finish(self._work)


class MPICommunicator(Communicator):
    """Collectives over an mpi4py communicator with the buffer (uppercase) methods.

    Non-contiguous arrays are reduced through a contiguous copy that is copied back.
    float16 reductions run in float32 through reusable staging buffers and are
    rounded to float16 once, at the end. cupy arrays are passed to MPI directly
    (after synchronizing the current stream) when MPI is CUDA-aware, else staged
    through pinned host buffers by an internal :class:`StagedCommunicator`.
    """

    def __init__(self, mpi_comm=None):
        MPI = _mpi()
        self.comm = MPI.COMM_WORLD if mpi_comm is None else mpi_comm
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self._MPI = MPI
        self._pool = HostBufferPool()     # float32 staging for float16 reductions
        self._staged = None               # GPU staging, built on first device array
        self._in_place = MPI.IN_PLACE
        # Fast path for the common case (contiguous numpy array, op spelled exactly):
        # (dtype, op) -> (MPI datatype, MPI op), for every combination that needs
        # no staging or conversion. float16 and invalid combinations are absent
        # and take the general path, which also produces the errors.
        types, _ = _mpi_tables()
        self._fast = {}
        for dt in types:
            if dt == _HALF:
                continue
            for op in REDUCE_OPS:
                try:
                    self._fast[(dt, op)] = (types[dt], _mpi_op(op, dt, "allreduce"))
                except TypeError:
                    pass

    # -- helpers ------------------------------------------------------------
    def _divide(self, work, write=True):
        if write:
            work /= self.size

    def _gpu_route(self, array):
        """None for arrays MPI can take directly, else the staging communicator.
        Also synchronizes the GPU stream before MPI touches device memory."""
        if not _is_gpu(array):
            return None
        if cuda_aware_mpi():
            _backend().synchronize()
            return None
        if self._staged is None:
            self._staged = StagedCommunicator.for_cupy(self)
        return self._staged

    def _reduction_buffer(self, array, op, collective):
        """Returns (work, mpi_type, mpi_op, finish): the contiguous array MPI reduces,
        and ``finish(work, write=True)`` (or None when nothing is left to do) that
        averages and moves ``work`` back into ``array`` and releases staging buffers."""
        op = _normalize_op(op, collective)
        dtype = array.dtype
        if dtype == _HALF:
            # Reduce in float32 in a reusable buffer; round once on the way back.
            xp = _xp(array)
            if xp is np:
                buf = self._pool.acquire(array.size * 4)
                work = self._pool.view(buf, np.float32, array.shape)
                work[...] = array
            else:
                buf, work = None, array.astype(np.float32, order="C")
            mop = _mpi_op(op, np.dtype(np.float32), collective)
            pool = self._pool

            def finish(w, write=True):
                if write:
                    if op == "avg":
                        w /= self.size
                    array[...] = w
                if buf is not None:
                    pool.release(buf)
            return work, self._MPI.FLOAT, mop, finish

        mtype = _mpi_type(dtype, collective)
        mop = _mpi_op(op, dtype, collective)
        contiguous = array.flags.c_contiguous
        work = array if contiguous else _xp(array).ascontiguousarray(array)
        if op == "avg":
            def finish(w, write=True):
                if write:
                    w /= self.size
                    if w is not array:
                        array[...] = w
        elif not contiguous:
            def finish(w, write=True):
                if write:
                    array[...] = w
        else:
            finish = None
        return work, mtype, mop, finish

    # -- reductions ---------------------------------------------------------
    def allreduce(self, array, op="sum"):
        if type(array) is np.ndarray and array.flags.c_contiguous:
            spec = self._fast.get((array.dtype, op))
            if spec is not None:
                self._busy_what = ("allreduce", array, op)
                self._busy_since = _now()
                try:
                    self.comm.Allreduce(self._in_place, [array, spec[0]], spec[1])
                finally:
                    self._busy_since = 0.0
                if op == "avg":
                    array /= self.size
                return array
        _check_array(array, "allreduce")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.allreduce(array, op)
        work, mtype, mop, finish = self._reduction_buffer(array, op, "allreduce")
        _sync_gpu(work)
        self._begin(("allreduce", array, op))
        try:
            self.comm.Allreduce(self._MPI.IN_PLACE, [work, mtype], mop)
        finally:
            self._end()
        if finish is not None:
            finish(work)
        return array

    def iallreduce(self, array, op="sum"):
        if type(array) is np.ndarray and array.flags.c_contiguous:
            spec = self._fast.get((array.dtype, op))
            if spec is not None:
                req = self.comm.Iallreduce(self._in_place, [array, spec[0]], spec[1])
                return _MPIRequest(self, req, array, array, self._divide if op == "avg" else None,
                                   ("iallreduce.wait", array, op))
        _check_array(array, "iallreduce")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.iallreduce(array, op)
        work, mtype, mop, finish = self._reduction_buffer(array, op, "iallreduce")
        _sync_gpu(work)
        req = self.comm.Iallreduce(self._MPI.IN_PLACE, [work, mtype], mop)
        return _MPIRequest(self, req, array, work, finish, ("iallreduce.wait", array, op))

    def reduce(self, array, root=0, op="sum"):
        _check_array(array, "reduce")
        _check_root(root, self.size, "reduce")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.reduce(array, root, op)
        work, mtype, mop, finish = self._reduction_buffer(array, op, "reduce")
        _sync_gpu(work)
        is_root = self.rank == root
        self._begin(("reduce", array, op))
        try:
            if is_root:
                self.comm.Reduce(self._MPI.IN_PLACE, [work, mtype], mop, root=root)
            else:
                self.comm.Reduce([work, mtype], None, mop, root=root)
        finally:
            self._end()
        if finish is not None:
            finish(work, write=is_root)   # non-roots only release staging buffers
        return array

    def reduce_scatter(self, array, op="sum"):
        _check_array(array, "reduce_scatter")
        if array.ndim == 0 or array.shape[0] % self.size:
            raise ValueError(f"ddg.parallel.reduce_scatter: the first axis must be divisible by the "
                             f"world size {self.size}, got {_describe(array)}")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.reduce_scatter(array, op)
        op = _normalize_op(op, "reduce_scatter")
        xp = _xp(array)
        out_shape = (array.shape[0] // self.size,) + tuple(array.shape[1:])
        half = array.dtype == _HALF
        work_dtype = np.dtype(np.float32) if half else array.dtype
        send = xp.ascontiguousarray(array, dtype=work_dtype)
        recv = xp.empty(out_shape, dtype=work_dtype)
        mtype = _mpi_type(work_dtype, "reduce_scatter")
        mop = _mpi_op(op, work_dtype, "reduce_scatter")
        _sync_gpu(send)
        self._begin(("reduce_scatter", array, op))
        try:
            self.comm.Reduce_scatter_block([send, mtype], [recv, mtype], mop)
        finally:
            self._end()
        if op == "avg":
            recv /= self.size
        return recv.astype(_HALF) if half else recv

    # -- data movement ------------------------------------------------------
    def broadcast(self, array, root=0):
        _check_array(array, "broadcast")
        _check_root(root, self.size, "broadcast")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.broadcast(array, root)
        mtype = _mpi_type(array.dtype, "broadcast")
        work = array if array.flags.c_contiguous else _xp(array).ascontiguousarray(array)
        _sync_gpu(work)
        self._begin(("broadcast", array, f"root={root}"))
        try:
            self.comm.Bcast([work, mtype], root=root)
        finally:
            self._end()
        if work is not array:
            array[...] = work
        return array

    def allgather(self, array):
        _check_array(array, "allgather")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.allgather(array)
        mtype = _mpi_type(array.dtype, "allgather")
        xp = _xp(array)
        send = xp.ascontiguousarray(array)
        out = xp.empty((self.size,) + tuple(array.shape), dtype=array.dtype)
        _sync_gpu(send)
        self._begin(("allgather", array, ""))
        try:
            self.comm.Allgather([send, mtype], [out, mtype])
        finally:
            self._end()
        return out

    def scatter(self, arrays, root=0, out=None):
        _check_root(root, self.size, "scatter")
        # Root validates its list and broadcasts the block's shape/dtype (a few bytes
        # of metadata, never array data), so a bad call raises on every rank
        # instead of leaving the others waiting.
        meta = _scatter_meta(arrays, self.size) if self.rank == root else None
        self._begin(("scatter", out, f"root={root}"))
        try:
            meta = self.comm.bcast(meta, root=root)
        finally:
            self._end()
        if isinstance(meta, str):
            raise ValueError(meta)
        shape, dtype, src_on_gpu = meta
        dtype = np.dtype(dtype)
        if out is not None:
            _check_array(out, "scatter")
            if tuple(out.shape) != shape or out.dtype != dtype:
                raise ValueError(f"ddg.parallel.scatter: out is {_describe(out)} but the scattered "
                                 f"blocks are {dtype}[{', '.join(map(str, shape))}]")
        # The result lives on the GPU when `out` does (or, without `out`, when the
        # root's arrays did). MPI touches device memory only when CUDA-aware;
        # otherwise the data travels through host memory. Scatter is rare
        # (initialization), so the host copies here are not pooled.
        gpu_result = _is_gpu(out) if out is not None else src_on_gpu
        direct = gpu_result and cuda_aware_mpi()
        if direct:
            xp = _backend().cupy_module()
            _backend().synchronize()
        else:
            xp = np
        mtype = _mpi_type(dtype, "scatter")
        send = None
        if self.rank == root:
            send = xp.stack([xp.asarray(a) if direct else _backend().to_host(a) for a in arrays])
        recv = xp.empty(shape, dtype=dtype)
        _sync_gpu(send, recv)
        self._begin(("scatter", recv, f"root={root}"))
        try:
            self.comm.Scatter(None if send is None else [send, mtype], [recv, mtype], root=root)
        finally:
            self._end()
        if gpu_result and not direct:
            recv = _backend().cupy_module().asarray(recv)
        if out is None:
            return recv
        out[...] = recv
        return out

    def barrier(self):
        self._begin(("barrier", None, ""))
        try:
            self.comm.Barrier()
        finally:
            self._end()

    # -- picklable objects (small metadata, never tensors' data) -------------
    def allgather_object(self, obj):
        self._begin(("allgather_object", None, ""))
        try:
            return self.comm.allgather(obj)
        finally:
            self._end()

    def bcast_object(self, obj, root=0):
        _check_root(root, self.size, "bcast_object")
        self._begin(("bcast_object", None, f"root={root}"))
        try:
            return self.comm.bcast(obj, root=root)
        finally:
            self._end()

    def gather_object(self, obj, root=0):
        _check_root(root, self.size, "gather_object")
        self._begin(("gather_object", None, f"root={root}"))
        try:
            return self.comm.gather(obj, root=root)
        finally:
            self._end()

    def local_rank(self):
        """This process's rank among the ranks on its node (a collective call)."""
        node = self.comm.Split_type(self._MPI.COMM_TYPE_SHARED, key=self.rank)
        try:
            return node.Get_rank()
        finally:
            node.Free()


def _scatter_meta(arrays, size):
    """(shape, dtype, on_gpu) of the blocks root scatters, or an error message."""
    if arrays is None or len(arrays) != size:
        n = None if arrays is None else len(arrays)
        return f"ddg.parallel.scatter: root must pass a list of {size} arrays (one per rank), got {n}"
    first = arrays[0]
    if not hasattr(first, "shape"):
        return f"ddg.parallel.scatter: expected arrays, got {type(first).__name__}"
    for i, a in enumerate(arrays):
        if not hasattr(a, "shape") or tuple(a.shape) != tuple(first.shape) or a.dtype != first.dtype:
            return (f"ddg.parallel.scatter: all arrays must have the same shape and dtype; "
                    f"array 0 is {_describe(first)}, array {i} is {_describe(a)}")
    return tuple(int(d) for d in first.shape), first.dtype.str, bool(_is_gpu(first))


# ---------------------------------------------------------------------------
# Staging device arrays through host memory

class StagedCommunicator(Communicator):
    """Collectives on device arrays through reusable host buffers and a host communicator.

    ``inner`` is a communicator on host (numpy) arrays. The callables decide what a
    device is:

    * ``to_host(dev, host)``: copy device array ``dev`` into numpy array ``host``
      (same shape and dtype, C-contiguous), synchronously;
    * ``to_device(host, dev)``: copy numpy ``host`` into device array ``dev``, in
      place, and return only when done (the host buffer is reused right after);
    * ``new_device(host)``: a new device array with ``host``'s contents;
    * ``alloc(nbytes)``: a 1-D uint8 numpy array (pinned memory for cupy).

    :meth:`for_cupy` builds the real one; the tests build one from numpy copies.
    """

    def __init__(self, inner, to_host, to_device, new_device, alloc=None):
        self.inner = inner
        self.rank = inner.rank
        self.size = inner.size
        self._to_host = to_host
        self._to_device = to_device
        self._new_device = new_device
        self.pool = HostBufferPool(alloc)

    @classmethod
    def for_cupy(cls, inner):
        def to_host(dev, host):
            cp = _backend().cupy_module()
            cp.ascontiguousarray(dev).get(out=host)   # synchronous device-to-host copy

        def to_device(host, dev):
            cp = _backend().cupy_module()
            if dev.flags.c_contiguous:
                dev.set(host)
            else:
                dev[...] = cp.asarray(host)
            cp.cuda.get_current_stream().synchronize()  # host buffer is reused next

        def new_device(host):
            return _backend().cupy_module().array(host)

        return cls(inner, to_host, to_device, new_device, alloc=_pinned_alloc)

    # Stage one device array into a pooled host buffer: returns (buf, host view).
    def _stage_in(self, array):
        buf = self.pool.acquire(array.nbytes)
        host = self.pool.view(buf, array.dtype, array.shape)
        self._to_host(array, host)
        return buf, host

    def _inplace(self, name, array, call):
        _check_array(array, name)
        buf, host = self._stage_in(array)
        try:
            call(host)
            self._to_device(host, array)
        finally:
            self.pool.release(buf)
        return array

    def allreduce(self, array, op="sum"):
        return self._inplace("allreduce", array, lambda h: self.inner.allreduce(h, op))

    def broadcast(self, array, root=0):
        return self._inplace("broadcast", array, lambda h: self.inner.broadcast(h, root))

    def reduce(self, array, root=0, op="sum"):
        _check_array(array, "reduce")
        buf, host = self._stage_in(array)
        try:
            self.inner.reduce(host, root, op)
            if self.rank == root:
                self._to_device(host, array)
        finally:
            self.pool.release(buf)
        return array

    def iallreduce(self, array, op="sum"):
        _check_array(array, "iallreduce")
        buf, host = self._stage_in(array)
        try:
            req = self.inner.iallreduce(host, op)
        except BaseException:
            self.pool.release(buf)
            raise
        return _StagedRequest(self, req, array, host, buf)

    def allgather(self, array):
        _check_array(array, "allgather")
        buf, host = self._stage_in(array)
        try:
            return self._new_device(self.inner.allgather(host))
        finally:
            self.pool.release(buf)

    def reduce_scatter(self, array, op="sum"):
        _check_array(array, "reduce_scatter")
        buf, host = self._stage_in(array)
        try:
            return self._new_device(self.inner.reduce_scatter(host, op))
        finally:
            self.pool.release(buf)

    def scatter(self, arrays, root=0, out=None):
        host_list = None
        if arrays is not None:
            host_list = []
            for a in arrays:
                h = np.empty(a.shape, a.dtype)
                self._to_host(a, h)
                host_list.append(h)
        got = self.inner.scatter(host_list, root)
        if out is None:
            return self._new_device(got)
        self._to_device(np.ascontiguousarray(got), out)
        return out

    def barrier(self):
        self.inner.barrier()

    def allgather_object(self, obj):
        return self.inner.allgather_object(obj)

    def bcast_object(self, obj, root=0):
        return self.inner.bcast_object(obj, root)

    def gather_object(self, obj, root=0):
        return self.inner.gather_object(obj, root)


class _StagedRequest(Request):
    """A host-side request whose result is copied back to the device on completion."""
    __slots__ = ("_staged", "_req", "_array", "_host", "_buf", "_done")

    def __init__(self, staged, req, array, host, buf):
        self._staged, self._req, self._array = staged, req, array
        self._host, self._buf = host, buf
        self._done = False

    def wait(self):
        if not self._done:
            self._req.wait()
            self._complete()
        return self._array

    def test(self):
        if self._done:
            return True
        if self._req.test():
            self._complete()
            return True
        return False

    def _complete(self):
        self._done = True
        try:
            self._staged._to_device(self._host, self._array)
        finally:
            self._staged.pool.release(self._buf)


# ---------------------------------------------------------------------------
# The world

_WORLD = None


def launched_under_mpi(environ=None):
    """True when this process was started by an MPI launcher (or DDG_FORCE_MPI=1)."""
    env = os.environ if environ is None else environ
    forced = env.get("DDG_FORCE_MPI", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    return any(k in env for k in _LAUNCHER_ENV_VARS)


def _launcher_world_size(environ=None):
    env = os.environ if environ is None else environ
    for k in _LAUNCHER_SIZE_VARS:
        try:
            return int(env[k])
        except (KeyError, ValueError):
            continue
    return None


def get_world_communicator():
    """The communicator over all ranks of this job, created once and cached.

    Under an MPI launcher (``ddgrun``, ``mpiexec``, ``mpirun``, ``srun`` with PMI)
    this is an :class:`MPICommunicator` on ``COMM_WORLD``; otherwise a
    :class:`SingleProcessCommunicator`, and mpi4py is not even imported.
    ``DDG_FORCE_MPI=1`` forces MPI, ``DDG_FORCE_MPI=0`` forces a single process.
    """
    global _WORLD
    if _WORLD is None:
        if launched_under_mpi():
            try:
                from mpi4py import MPI  # noqa: F401
            except ImportError as e:
                n = _launcher_world_size()
                if n is not None and n > 1:
                    raise ImportError(f"ddg: launched as one of {n} MPI ranks but mpi4py does not import "
                                      f"({e}); install ddg[mpi]") from e
                _WORLD = SingleProcessCommunicator()
            else:
                _WORLD = MPICommunicator(MPI.COMM_WORLD)
        else:
            _WORLD = SingleProcessCommunicator()
    return _WORLD
