"""Collectives over mpi4py, with its buffer (uppercase) methods: array data is never pickled.

numpy dtypes are mapped to MPI datatypes explicitly. cupy arrays go straight to MPI when
the library is CUDA-aware (after the stream is synchronized), otherwise through a
:class:`~.staged.StagedCommunicator` over pinned host buffers.
"""
import os
import time

import numpy as np

from ...tensor.dtypes import bfloat16 as _bfloat16
from .base import Communicator, Request
from .pool import HostBufferPool
from .staged import StagedCommunicator
from .util import (REDUCE_OPS, array_module, backend, check_array, check_avg_dtype, check_group_ranks, check_peer,
                   check_root, check_rows, describe, is_gpu, normalize_op, sync_gpu)

__all__ = ["MPICommunicator", "cuda_aware_mpi"]

_now = time.monotonic


def _mpi():
    from mpi4py import MPI
    return MPI


_MPI_TYPES = None
_MPI_OPS = None
_HALF = np.dtype(np.float16)
_BF16 = _bfloat16
_HALFS = (_HALF, _BF16)   # the 2-byte floats: no MPI type, no MPI sum
_BOOL = np.dtype(np.bool_)


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
            # float16 and bfloat16 have no MPI type. Data movement treats them as opaque
            # 2-byte words; reductions run in float32, or, for wire payloads (DataParallel's
            # half buckets, 'fp16' compression), through _half_sum_op on the 2-byte words.
            _HALF: MPI.UINT16_T,
            _BF16: MPI.UINT16_T,
        }
        _MPI_OPS = {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}
    return _MPI_TYPES, _MPI_OPS


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
            check_avg_dtype(np.empty(0, dtype), collective)
        return MPI.LOR if op in ("sum", "max") else MPI.LAND
    if dtype.kind == "c" and op in ("max", "min"):
        raise TypeError(f"ddg.parallel.{collective}: op={op!r} is undefined for complex dtype {dtype}")
    if op == "avg":
        check_avg_dtype(np.empty(0, dtype), collective)
    return ops[op]


_HALF_SUM = {}


def _half_sum_op(dtype=_HALF):
    """A user-defined MPI op summing 2-byte float words of ``dtype`` (float16 or bfloat16;
    MPI has neither type nor their sum): each combine of two buffers adds them in float32
    and rounds the result once to ``dtype``. So a buffer crosses the network in 2 bytes a
    value, and an all-reduce over n ranks rounds n-1 times (once for 2 ranks), as NCCL's
    half-precision sums do."""
    dtype = np.dtype(dtype)
    op = _HALF_SUM.get(dtype)
    if op is None:
        def half_sum(inbuf, inoutbuf, datatype):
            a = np.frombuffer(inbuf, dtype=dtype)
            b = np.frombuffer(inoutbuf, dtype=dtype)
            t = a.astype(np.float32)
            t += b                 # float32 sum (b widened exactly) ...
            b[...] = t             # ... rounded once to the 2-byte dtype
        op = _HALF_SUM[dtype] = _mpi().Op.Create(half_sum, commute=True)
    return op


_cuda_aware = None


def cuda_aware_mpi():
    """Whether the MPI library can read and write GPU memory directly.

    ``DDG_CUDA_AWARE_MPI=1|0`` decides; otherwise ask the library through mpi4py's
    ``Query_cuda_support`` (MPIX extension) when mpi4py has it; otherwise assume it
    cannot (staging through host memory is always correct).
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
            except Exception:   # an MPIX query an MPI library does not implement
                _cuda_aware = False
    return _cuda_aware


def _mpi_request(comm, req, result, finish, what):
    return Request(comm, result, poll=req.Test, block=req.Wait, finish=finish, what=what)


class MPICommunicator(Communicator):
    """Collectives over an mpi4py communicator with the buffer (uppercase) methods.

    Non-contiguous arrays are reduced through a contiguous copy that is copied back.
    float16 reductions run in float32 through reusable staging buffers and are rounded
    to float16 once, at the end. cupy arrays are passed to MPI directly (after
    synchronizing the current stream) when MPI is CUDA-aware, else staged through pinned
    host buffers by an internal :class:`StagedCommunicator`.
    """

    def __init__(self, mpi_comm=None):
        MPI = _mpi()
        self.comm = MPI.COMM_WORLD if mpi_comm is None else mpi_comm
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self._pool = HostBufferPool()     # float32 staging for float16 reductions
        self._staged = None               # GPU staging, built on first device array
        self._in_place = MPI.IN_PLACE
        self._any_source = _AnySourceReceives(self)
        self._float = MPI.FLOAT
        # Fast path for the common case (contiguous numpy array, op spelled exactly):
        # (dtype, op) -> (MPI datatype, MPI op), for every combination that needs no
        # staging or conversion. float16 and invalid combinations are absent and take
        # the general path, which also produces the errors.
        types, _ = _mpi_tables()
        self._fast = {}
        for dt in types:
            if dt in _HALFS:
                continue
            for op in REDUCE_OPS:
                try:
                    self._fast[(dt, op)] = (types[dt], _mpi_op(op, dt, "allreduce"))
                except TypeError:
                    pass

    # -- helpers ------------------------------------------------------------
    def _gpu_route(self, array, host_op=False):
        """None for arrays MPI can take directly, else the staging communicator.
        Also synchronizes the GPU stream before MPI touches device memory. ``host_op``:
        the reduction is a user-defined op written in numpy, which must see host memory
        even where MPI is CUDA-aware."""
        if not is_gpu(array):
            return None
        if cuda_aware_mpi() and not host_op:
            backend().synchronize()
            return None
        if self._staged is None:
            self._staged = StagedCommunicator.for_cupy(self)
        return self._staged

    def _reduction_buffer(self, array, op, collective):
        """Returns (work, mpi_type, mpi_op, finish): the contiguous array MPI reduces, and
        ``finish(write=True)`` (or None when nothing is left to do) that averages and moves
        ``work`` back into ``array`` and releases staging buffers."""
        op = normalize_op(op, collective)
        dtype = array.dtype
        size = self.size
        if dtype in _HALFS:
            # Reduce in float32 in a reusable buffer; round once on the way back.
            xp = array_module(array)
            if xp is np:
                buf = self._pool.acquire(array.size * 4)
                work = self._pool.view(buf, np.float32, array.shape)
                work[...] = array
            else:
                buf, work = None, array.astype(np.float32, order="C")
            mop = _mpi_op(op, np.dtype(np.float32), collective)
            pool = self._pool

            def finish(write=True):
                if write:
                    if op == "avg":
                        _divide(work, size)
                    array[...] = work
                if buf is not None:
                    pool.release(buf)
            return work, self._float, mop, finish

        mtype = _mpi_type(dtype, collective)
        mop = _mpi_op(op, dtype, collective)
        contiguous = array.flags.c_contiguous
        work = array if contiguous else array_module(array).ascontiguousarray(array)
        if op == "avg":
            def finish(write=True):
                if write:
                    _divide(work, size)
                    if work is not array:
                        array[...] = work
        elif not contiguous:
            def finish(write=True):
                if write:
                    array[...] = work
        else:
            finish = None
        return work, mtype, mop, finish

    # -- reductions ---------------------------------------------------------
    def _allreduce(self, array, op):
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
        check_array(array, "allreduce")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.allreduce(array, op)
        work, mtype, mop, finish = self._reduction_buffer(array, op, "allreduce")
        sync_gpu(work)
        with self._busy(("allreduce", array, op)):
            self.comm.Allreduce(self._in_place, [work, mtype], mop)
        if finish is not None:
            finish()
        return array

    def _iallreduce(self, array, op):
        if type(array) is np.ndarray and array.flags.c_contiguous:
            spec = self._fast.get((array.dtype, op))
            if spec is not None:
                req = self.comm.Iallreduce(self._in_place, [array, spec[0]], spec[1])
                finish = None
                if op == "avg":
                    size = self.size

                    def finish():
                        np.divide(array, size, out=array)
                return _mpi_request(self, req, array, finish, ("iallreduce.wait", array, op))
        check_array(array, "iallreduce")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.iallreduce(array, op)
        work, mtype, mop, finish = self._reduction_buffer(array, op, "iallreduce")
        sync_gpu(work)
        req = self.comm.Iallreduce(self._in_place, [work, mtype], mop)
        return _mpi_request(self, req, array, finish, ("iallreduce.wait", array, op))

    def _iallreduce_wire(self, wire):
        """float16 and bfloat16 payloads are summed in their own precision (a user-defined
        op), so only their 2 bytes a value travel; device payloads are staged first, then
        summed the same way."""
        if wire.dtype not in _HALFS:
            return self._iallreduce(wire, "sum")
        staged = self._gpu_route(wire, host_op=True)
        if staged is not None:
            return staged._iallreduce_wire(wire)
        req = self.comm.Iallreduce(self._in_place, [wire, _mpi_type(wire.dtype, "iallreduce")],
                                   _half_sum_op(wire.dtype))
        return _mpi_request(self, req, wire, None, ("iallreduce.wait", wire, f"sum({wire.dtype})"))

    def reduce(self, array, root=0, op="sum"):
        check_array(array, "reduce")
        check_root(root, self.size, "reduce")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.reduce(array, root, op)
        work, mtype, mop, finish = self._reduction_buffer(array, op, "reduce")
        sync_gpu(work)
        is_root = self.rank == root
        with self._busy(("reduce", array, op)):
            if is_root:
                self.comm.Reduce(self._in_place, [work, mtype], mop, root=root)
            else:
                self.comm.Reduce([work, mtype], None, mop, root=root)
        if finish is not None:
            finish(write=is_root)   # non-roots only release staging buffers
        return array

    def ireduce(self, array, root=0, op="sum"):
        check_array(array, "ireduce")
        check_root(root, self.size, "ireduce")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.ireduce(array, root, op)
        work, mtype, mop, finish = self._reduction_buffer(array, op, "ireduce")
        sync_gpu(work)
        is_root = self.rank == root
        if is_root:
            req = self.comm.Ireduce(self._in_place, [work, mtype], mop, root=root)
        else:
            req = self.comm.Ireduce([work, mtype], None, mop, root=root)
        done = None
        if finish is not None:
            def done():
                finish(write=is_root)     # non-roots only release staging buffers
        return _mpi_request(self, req, array, done, ("ireduce.wait", array, f"{op} to rank {root}"))

    def reduce_scatter(self, array, op="sum"):
        check_array(array, "reduce_scatter")
        if array.ndim == 0 or array.shape[0] % self.size:
            raise ValueError(f"ddg.parallel.reduce_scatter: the first axis must be divisible by the "
                             f"world size {self.size}, got {describe(array)}")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.reduce_scatter(array, op)
        op = normalize_op(op, "reduce_scatter")
        xp = array_module(array)
        out_shape = (array.shape[0] // self.size,) + tuple(array.shape[1:])
        half = array.dtype in _HALFS
        work_dtype = np.dtype(np.float32) if half else array.dtype
        send = xp.ascontiguousarray(array, dtype=work_dtype)
        recv = xp.empty(out_shape, dtype=work_dtype)
        mtype = _mpi_type(work_dtype, "reduce_scatter")
        mop = _mpi_op(op, work_dtype, "reduce_scatter")
        sync_gpu(send)
        with self._busy(("reduce_scatter", array, op)):
            self.comm.Reduce_scatter_block([send, mtype], [recv, mtype], mop)
        if op == "avg":
            recv /= self.size
        return recv.astype(array.dtype) if half else recv

    # -- data movement ------------------------------------------------------
    def broadcast(self, array, root=0):
        check_array(array, "broadcast")
        check_root(root, self.size, "broadcast")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.broadcast(array, root)
        mtype = _mpi_type(array.dtype, "broadcast")
        work = array if array.flags.c_contiguous else array_module(array).ascontiguousarray(array)
        sync_gpu(work)
        with self._busy(("broadcast", array, f"root={root}")):
            self.comm.Bcast([work, mtype], root=root)
        if work is not array:
            array[...] = work
        return array

    def ibroadcast(self, array, root=0):
        check_array(array, "ibroadcast")
        check_root(root, self.size, "ibroadcast")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.ibroadcast(array, root)
        mtype = _mpi_type(array.dtype, "ibroadcast")
        work = array if array.flags.c_contiguous else array_module(array).ascontiguousarray(array)
        sync_gpu(work)
        req = self.comm.Ibcast([work, mtype], root=root)
        finish = None
        if work is not array:
            def finish():
                array[...] = work
        return _mpi_request(self, req, array, finish, ("ibroadcast.wait", array, f"root={root}"))

    def iallgather(self, array):
        check_array(array, "iallgather")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.iallgather(array)
        mtype = _mpi_type(array.dtype, "iallgather")
        xp = array_module(array)
        send = xp.ascontiguousarray(array)
        out = xp.empty((self.size,) + tuple(array.shape), dtype=array.dtype)
        sync_gpu(send)
        req = self.comm.Iallgather([send, mtype], [out, mtype])
        # `finish` holds `send` (a contiguous copy, maybe) until the gather has completed
        return _mpi_request(self, req, out, lambda: send, ("iallgather.wait", array, ""))

    def allgather(self, array):
        check_array(array, "allgather")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.allgather(array)
        mtype = _mpi_type(array.dtype, "allgather")
        xp = array_module(array)
        send = xp.ascontiguousarray(array)
        out = xp.empty((self.size,) + tuple(array.shape), dtype=array.dtype)
        sync_gpu(send)
        with self._busy(("allgather", array, "")):
            self.comm.Allgather([send, mtype], [out, mtype])
        return out

    def scatter(self, arrays, root=0, out=None):
        check_root(root, self.size, "scatter")
        # Root validates its list and broadcasts the block's shape/dtype (a few bytes of
        # metadata, never array data), so a bad call raises on every rank instead of
        # leaving the others waiting.
        meta = _scatter_meta(arrays, self.size) if self.rank == root else None
        with self._busy(("scatter", out, f"root={root}")):
            meta = self.comm.bcast(meta, root=root)
        if isinstance(meta, str):
            raise ValueError(meta)
        shape, dtype, src_on_gpu = meta
        dtype = np.dtype(dtype)
        if out is not None:
            check_array(out, "scatter")
            if tuple(out.shape) != shape or out.dtype != dtype:
                raise ValueError(f"ddg.parallel.scatter: out is {describe(out)} but the scattered "
                                 f"blocks are {dtype}[{', '.join(map(str, shape))}]")
        # The result lives on the GPU when `out` does (or, without `out`, when the root's
        # arrays did). MPI touches device memory only when CUDA-aware; otherwise the data
        # travels through host memory. Scatter is rare (initialization), so the host
        # copies here are not pooled.
        gpu_result = is_gpu(out) if out is not None else src_on_gpu
        direct = gpu_result and cuda_aware_mpi()
        if direct:
            xp = backend().cupy_module()
            backend().synchronize()
        else:
            xp = np
        mtype = _mpi_type(dtype, "scatter")
        send = None
        if self.rank == root:
            send = xp.stack([xp.asarray(a) if direct else backend().to_host(a) for a in arrays])
        recv = xp.empty(shape, dtype=dtype)
        sync_gpu(send, recv)
        with self._busy(("scatter", recv, f"root={root}")):
            self.comm.Scatter(None if send is None else [send, mtype], [recv, mtype], root=root)
        if gpu_result and not direct:
            recv = backend().cupy_module().asarray(recv)
        if out is None:
            return recv
        out[...] = recv
        return out

    def gather(self, array, root=0):
        check_array(array, "gather")
        check_root(root, self.size, "gather")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.gather(array, root)
        mtype = _mpi_type(array.dtype, "gather")
        xp = array_module(array)
        send = xp.ascontiguousarray(array)
        out = xp.empty((self.size,) + tuple(array.shape), dtype=array.dtype) if self.rank == root else None
        sync_gpu(send)
        with self._busy(("gather", array, f"root={root}")):
            self.comm.Gather([send, mtype], None if out is None else [out, mtype], root=root)
        return out

    def alltoall(self, array):
        check_rows(array, self.size, "alltoall")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.alltoall(array)
        mtype = _mpi_type(array.dtype, "alltoall")
        xp = array_module(array)
        send = xp.ascontiguousarray(array)
        out = xp.empty_like(send)
        sync_gpu(send)
        with self._busy(("alltoall", array, "")):
            self.comm.Alltoall([send, mtype], [out, mtype])
        return out

    def barrier(self):
        with self._busy(("barrier", None, "")):
            self.comm.Barrier()

    # -- point to point ----------------------------------------------------------
    def isend(self, array, dest, tag=0):
        check_array(array, "send")
        check_peer(dest, self.size, self.rank, "send")
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.isend(array, dest, tag)
        work = array if array.flags.c_contiguous else array_module(array).ascontiguousarray(array)
        sync_gpu(work)
        req = self.comm.Isend([work, _mpi_type(array.dtype, "send")], dest=dest, tag=tag)
        # `finish` holds `work` (a contiguous copy, maybe) until the send has completed
        return _mpi_request(self, req, array, lambda: work, ("send", array, f"to rank {dest}"))

    def irecv(self, array, source=None, tag=0):
        check_array(array, "recv")
        check_peer(source, self.size, self.rank, "recv", allow_any=True)
        staged = self._gpu_route(array)
        if staged is not None:
            return staged.irecv(array, source, tag)
        direct = array.flags.c_contiguous
        work = array if direct else array_module(array).empty(array.shape, array.dtype)
        buf = [work, _mpi_type(array.dtype, "recv")]

        def finish():
            if not direct:
                array[...] = work
        if source is None:
            return self._any_source.irecv(buf, tag, array, finish)
        req = self.comm.Irecv(buf, source=source, tag=tag)
        return _mpi_request(self, req, array, finish, ("recv", array, f"from rank {source}"))

    # -- subgroups -----------------------------------------------------------------
    def split(self, ranks):
        ranks = check_group_ranks(ranks, self.size)
        MPI = _mpi()
        member = self.rank in ranks
        with self._busy(("split", None, f"ranks={list(ranks)}")):
            # every rank must name the same members: checked (a few bytes, at group creation)
            lists = self.comm.allgather(ranks)
            if any(other != ranks for other in lists):
                raise ValueError("ddg.parallel.split: every rank must pass the same ranks; got " +
                                 "; ".join(f"rank {r}: {list(v)}" for r, v in enumerate(lists)))
            sub = self.comm.Split(0 if member else MPI.UNDEFINED, key=ranks.index(self.rank) if member else 0)
        return MPICommunicator(sub) if member else None

    def free(self):
        if self.comm != _mpi().COMM_WORLD:
            self.comm.Free()

    # -- picklable objects (small metadata, never tensors' data) -------------
    def _objects(self, name, root, call):
        with self._busy((name, None, "" if root is None else f"root={root}")):
            return call()

    def allgather_object(self, obj):
        return self._objects("allgather_object", None, lambda: self.comm.allgather(obj))

    def bcast_object(self, obj, root=0):
        check_root(root, self.size, "bcast_object")
        return self._objects("bcast_object", root, lambda: self.comm.bcast(obj, root=root))

    def gather_object(self, obj, root=0):
        check_root(root, self.size, "gather_object")
        return self._objects("gather_object", root, lambda: self.comm.gather(obj, root=root))

    # -- the group -------------------------------------------------------------
    def local_rank(self):
        """This process's rank among the ranks on its node (a collective call)."""
        node = self.comm.Split_type(_mpi().COMM_TYPE_SHARED, key=self.rank)
        try:
            return node.Get_rank()
        finally:
            node.Free()

    def abort(self, code=1):
        """End every rank of the job now (MPI_Abort)."""
        self.comm.Abort(code)


class _AnySourceReceives:
    """Receives from any rank, matched by probing instead of posting ``MPI_ANY_SOURCE``.

    With MPICH 5.0.2 over UCX (ranks on different nodes), a receive from ``ANY_SOURCE``
    posted after a barrier never matches a message that arrived before it, while probes
    from any rank do see it. So such a receive is posted from the matched probe
    (``MPI_Improbe`` + ``MPI_Imrecv``) when it is tested or waited on. Receives with the
    same tag match in the order they were started, as posted ones would; a receive from a
    named rank started later may take a message first (it is posted at once)."""

    def __init__(self, owner):
        self.owner = owner
        self.pending = []          # [buffer, tag, request or None], in the order started

    def irecv(self, buf, tag, array, finish):
        entry = [buf, tag, None]
        self.pending.append(entry)

        def poll():
            if entry[2] is None:
                self._match()
            return entry[2] is not None and entry[2].Test()

        def block():
            pause = 0.0002
            while not poll():
                time.sleep(pause)
                pause = min(pause * 2, 0.005)
        return Request(self.owner, array, poll=poll, block=block, finish=finish,
                       what=("recv", array, "from any rank"))

    def _match(self):
        """Give each waiting receive, oldest first, a message that has arrived for its tag."""
        MPI = _mpi()
        waiting_tags = set()
        for entry in list(self.pending):
            buf, tag, _ = entry
            if tag in waiting_tags:
                continue
            message = self.owner.comm.Improbe(source=MPI.ANY_SOURCE, tag=tag)
            if message is None:
                waiting_tags.add(tag)       # later receives of this tag wait behind this one
                continue
            entry[2] = message.Irecv(buf)
            self.pending = [e for e in self.pending if e is not entry]


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
                    f"array 0 is {describe(first)}, array {i} is {describe(a)}")
    dtype = first.dtype.name if first.dtype == _BF16 else first.dtype.str   # bfloat16's str is '|V2'
    return tuple(int(d) for d in first.shape), dtype, bool(is_gpu(first))


def _divide(work, size):
    """``work /= size`` in place (a closure cannot rebind the name it divides)."""
    array_module(work).divide(work, size, out=work)
