"""NCCL as an optional, faster communicator for GPU arrays (through ``cupy.cuda.nccl``).

:class:`NCCLCommunicator` implements the :class:`~.base.Communicator` interface. Collectives on cupy arrays run on NCCL, on a dedicated CUDA stream of the
communicator; everything else goes to a *host* communicator (the MPI world
communicator by default): numpy arrays, ``scatter`` (rare, initialization only),
``barrier`` and the object collectives. The NCCL unique id is created on rank 0
and broadcast over the host communicator, so the job is launched exactly as an MPI
job (``ddgrun`` / ``mpiexec``), one GPU per rank.

Stream ordering, without host round trips:

* before a collective, the NCCL stream waits (an event, on the device) for the work
  queued so far on the current stream, so NCCL reads finished gradients;
* after a blocking collective, the current stream waits for the NCCL stream: every
  later cupy operation sees the result, and the host never blocks;
* ``iallreduce`` returns a request whose ``wait()`` makes the current stream wait for
  the collective and then synchronizes the host with the NCCL stream (so after
  ``wait()`` the data is final for anyone, MPI included); ``test()`` polls the event.

Reductions: ``'sum'``, ``'avg'``, ``'max'``, ``'min'``, ``'prod'``. ``'avg'`` uses
``ncclAvg`` where NCCL >= 2.10 provides it, else a sum followed by a division on the
device. float16 is reduced natively by NCCL (unlike MPI, which has no float16 sum).
Non-contiguous arrays are reduced through a contiguous copy that is copied back.

This module never imports cupy itself: it asks :mod:`ddg.tensor.backend`.
"""
import socket

import numpy as np

from .base import Communicator, Request
from .util import backend as _backend
from .world import get_world_communicator
from .util import check_array, check_avg_dtype, check_reduction, check_root, describe, is_gpu, normalize_op

__all__ = ["NCCLCommunicator", "nccl_available"]

# numpy dtype name -> name of cupy.cuda.nccl's datatype constant
_NCCL_TYPE_NAMES = {
    "int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32", "uint32": "NCCL_UINT32",
    "int64": "NCCL_INT64", "uint64": "NCCL_UINT64", "float16": "NCCL_FLOAT16", "bfloat16": "NCCL_BFLOAT16",
    "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
}
_NCCL_OP_NAMES = {"sum": "NCCL_SUM", "prod": "NCCL_PROD", "max": "NCCL_MAX", "min": "NCCL_MIN",
                  "avg": "NCCL_AVG"}


def nccl_available():
    """True when cupy sees a GPU and was built with NCCL."""
    return _backend().nccl_module() is not None


def _nccl_request(owner, event, array, work, finish):
    """A request for an all-reduce queued on the NCCL stream; ``event`` is recorded right
    after it. Completing it orders later work on the current stream after the collective
    (on the device), then averages / copies back."""
    def complete():
        owner._cp.cuda.get_current_stream().wait_event(event)
        if finish is not None:
            finish(work)
    return Request(owner, array, poll=lambda: event.done, block=event.synchronize, finish=complete,
                   what=("iallreduce.wait", array, "nccl"))


class NCCLCommunicator(Communicator):
    """Collectives on cupy arrays over NCCL; numpy arrays and object collectives over
    ``host`` (default: the MPI world communicator). Create it after this rank's GPU is
    selected (``ddg.distributed.init_parallel_env()`` does that); it is bound to the
    current device."""

    def __init__(self, host=None, device_id=None):
        backend = _backend()
        nccl = backend.nccl_module()
        if nccl is None:
            raise RuntimeError("ddg.parallel.NCCLCommunicator: NCCL is not usable here (no GPU, or cupy "
                               "was built without NCCL); use the MPI communicator (DDG_COMM=mpi)")
        cp = backend.cupy_module()
        self._nccl, self._cp = nccl, cp
        self.host = get_world_communicator() if host is None else host
        self.rank, self.size = self.host.rank, self.host.size
        self.device_id = cp.cuda.Device().id if device_id is None else int(device_id)
        _check_one_gpu_per_rank(self.host, self.device_id)
        uid = nccl.get_unique_id() if self.rank == 0 else None
        uid = self.host.bcast_object(uid, 0)
        with cp.cuda.Device(self.device_id):
            self.comm = nccl.NcclCommunicator(self.size, uid, self.rank)
            self.stream = cp.cuda.Stream(non_blocking=True)
        self._types = {np.dtype(k): getattr(nccl, v) for k, v in _NCCL_TYPE_NAMES.items() if hasattr(nccl, v)}
        self._ops = {k: getattr(nccl, v) for k, v in _NCCL_OP_NAMES.items() if hasattr(nccl, v)}
        try:  # ncclAvg exists from NCCL 2.10 (version code 21000)
            if nccl.get_version() < 21000:
                self._ops.pop("avg", None)
        except Exception:
            self._ops.pop("avg", None)

    # -- helpers --------------------------------------------------------------------
    def _check_device(self, array, collective):
        if array.device.id != self.device_id:
            raise ValueError(f"ddg.parallel.{collective}: array {describe(array)} is on GPU {array.device.id}, "
                             f"the NCCL communicator on GPU {self.device_id}")

    def _nccl_type(self, dtype, collective):
        t = self._types.get(np.dtype(dtype))
        if t is None:
            raise TypeError(f"ddg.parallel.{collective}: NCCL cannot reduce {np.dtype(dtype)} arrays; supported: "
                            f"{', '.join(sorted(str(d) for d in self._types))}")
        return t

    def _enter(self):
        """The NCCL stream waits (on the device) for the work queued on the current stream."""
        self.stream.wait_event(self._cp.cuda.get_current_stream().record())

    def _leave(self):
        """The current stream waits (on the device) for the collective just queued."""
        self._cp.cuda.get_current_stream().wait_event(self.stream.record())

    def _reduction(self, array, op, collective):
        """(work, nccl dtype, nccl op, finish): the contiguous array NCCL reduces in place,
        and ``finish(work)`` (or None) that averages and copies back into ``array``."""
        op = check_reduction(array, op, collective)
        self._check_device(array, collective)
        work = array if array.flags.c_contiguous else self._cp.ascontiguousarray(array)
        ntype = self._nccl_type(work.dtype, collective)
        divide = op == "avg" and "avg" not in self._ops
        nop = self._ops["sum" if divide else op]
        size = self.size
        if not divide and work is array:
            return work, ntype, nop, None

        def finish(w):
            if divide:
                w /= size
            if w is not array:
                array[...] = w
        return work, ntype, nop, finish

    # -- reductions -------------------------------------------------------------------
    def _allreduce(self, array, op):
        if not is_gpu(array):
            return self.host.allreduce(array, op)
        work, ntype, nop, finish = self._reduction(array, op, "allreduce")
        if work.size:
            self._enter()
            self.comm.allReduce(work.data.ptr, work.data.ptr, work.size, ntype, nop, self.stream.ptr)
            self._leave()
        if finish is not None:
            finish(work)
        return array

    def _iallreduce(self, array, op):
        if not is_gpu(array):
            return self.host.iallreduce(array, op)
        work, ntype, nop, finish = self._reduction(array, op, "iallreduce")
        self._enter()
        if work.size:
            self.comm.allReduce(work.data.ptr, work.data.ptr, work.size, ntype, nop, self.stream.ptr)
        return _nccl_request(self, self.stream.record(), array, work, finish)

    def reduce(self, array, root=0, op="sum"):
        if not is_gpu(array):
            return self.host.reduce(array, root, op)
        check_root(root, self.size, "reduce")
        work, ntype, nop, finish = self._reduction(array, op, "reduce")
        if work.size:
            self._enter()
            self.comm.reduce(work.data.ptr, work.data.ptr, work.size, ntype, nop, root, self.stream.ptr)
            self._leave()
        if finish is not None and self.rank == root:   # non-roots' arrays stay unchanged
            finish(work)
        return array

    def reduce_scatter(self, array, op="sum"):
        if not is_gpu(array):
            return self.host.reduce_scatter(array, op)
        check_array(array, "reduce_scatter")
        if array.ndim == 0 or array.shape[0] % self.size:
            raise ValueError(f"ddg.parallel.reduce_scatter: the first axis must be divisible by the "
                             f"world size {self.size}, got {describe(array)}")
        self._check_device(array, "reduce_scatter")
        op = normalize_op(op, "reduce_scatter")
        if op == "avg":
            check_avg_dtype(array, "reduce_scatter")
        cp = self._cp
        send = cp.ascontiguousarray(array)
        recv = cp.empty((array.shape[0] // self.size,) + tuple(array.shape[1:]), dtype=array.dtype)
        ntype = self._nccl_type(send.dtype, "reduce_scatter")
        divide = op == "avg" and "avg" not in self._ops
        if recv.size:
            self._enter()
            self.comm.reduceScatter(send.data.ptr, recv.data.ptr, recv.size, ntype,
                                    self._ops["sum" if divide else op], self.stream.ptr)
            self._leave()
        if divide:
            recv /= self.size
        return recv

    # -- data movement ------------------------------------------------------------------
    @staticmethod
    def _movable(work):
        """bool arrays travel as uint8 (same bytes)."""
        return work.view(np.uint8) if work.dtype == np.bool_ else work

    def broadcast(self, array, root=0):
        if not is_gpu(array):
            return self.host.broadcast(array, root)
        check_array(array, "broadcast")
        check_root(root, self.size, "broadcast")
        self._check_device(array, "broadcast")
        work = array if array.flags.c_contiguous else self._cp.ascontiguousarray(array)
        buf = self._movable(work)
        ntype = self._nccl_type(buf.dtype, "broadcast")
        if buf.size:
            self._enter()
            self.comm.broadcast(buf.data.ptr, buf.data.ptr, buf.size, ntype, root, self.stream.ptr)
            self._leave()
        if work is not array:
            array[...] = work
        return array

    def allgather(self, array):
        if not is_gpu(array):
            return self.host.allgather(array)
        check_array(array, "allgather")
        self._check_device(array, "allgather")
        cp = self._cp
        send = cp.ascontiguousarray(array)
        out = cp.empty((self.size,) + tuple(array.shape), dtype=array.dtype)
        sbuf, obuf = self._movable(send), self._movable(out)
        ntype = self._nccl_type(sbuf.dtype, "allgather")
        if sbuf.size:
            self._enter()
            self.comm.allGather(sbuf.data.ptr, obuf.data.ptr, sbuf.size, ntype, self.stream.ptr)
            self._leave()
        return out

    def scatter(self, arrays, root=0, out=None):
        # NCCL has no scatter; it is used at initialization only, so the host communicator
        # (which stages device arrays itself) does it.
        return self.host.scatter(arrays, root, out)

    def barrier(self):
        self.host.barrier()

    # Rarely on a training step's path: the host communicator (which stages device arrays
    # through host memory unless MPI is CUDA-aware) carries these, not NCCL.
    def gather(self, array, root=0):
        return self.host.gather(array, root)

    def alltoall(self, array):
        return self.host.alltoall(array)

    def isend(self, array, dest, tag=0):
        return self.host.isend(array, dest, tag)

    def irecv(self, array, source=None, tag=0):
        return self.host.irecv(array, source, tag)

    def split(self, ranks):
        # a subgroup communicates over the host communicator's subgroup (MPI)
        return self.host.split(ranks)

    def allgather_object(self, obj):
        return self.host.allgather_object(obj)

    def bcast_object(self, obj, root=0):
        return self.host.bcast_object(obj, root)

    def gather_object(self, obj, root=0):
        return self.host.gather_object(obj, root)

    def local_rank(self):
        lr = getattr(self.host, "local_rank", None)
        return lr() if lr is not None else 0

    def close(self):
        """Release the NCCL communicator (collective: every rank calls it)."""
        comm, self.comm = self.comm, None
        if comm is not None:
            self.stream.synchronize()
            comm.destroy()

    def __repr__(self):
        return f"<NCCLCommunicator rank={self.rank} size={self.size} device={self.device_id}>"


def _check_one_gpu_per_rank(host, device_id):
    """NCCL needs one GPU per rank: name the ranks that share one instead of NCCL's
    ``NCCL_ERROR_INVALID_USAGE`` (an object all-gather over the host communicator)."""
    seen = host.allgather_object((socket.gethostname(), int(device_id)))
    where = {}
    for r, key in enumerate(seen):
        where.setdefault(key, []).append(r)
    shared = [(key, ranks) for key, ranks in where.items() if len(ranks) > 1]
    if shared:
        said = "; ".join(f"ranks {', '.join(map(str, ranks))} share GPU {dev} on {node}"
                         for (node, dev), ranks in shared)
        raise RuntimeError(f"ddg.parallel.NCCLCommunicator: NCCL needs one GPU per rank, but {said}. "
                           f"Start at most as many ranks per node as it has GPUs, or use the MPI "
                           f"communicator (DDG_COMM=mpi), which can share a GPU.")
