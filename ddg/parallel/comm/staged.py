"""Collectives on device arrays through reusable host buffers and a host communicator."""
import numpy as np

from .base import Communicator, Request
from .pool import HostBufferPool, pinned_alloc
from .util import backend, check_array, check_rows

__all__ = ["StagedCommunicator"]


class StagedCommunicator(Communicator):
    """Collectives on device arrays through reusable host buffers and a host communicator.

    ``inner`` is a communicator on host (numpy) arrays. The callables decide what a device
    is:

    * ``to_host(dev, host)``: copy device array ``dev`` into numpy array ``host`` (same
      shape and dtype, C-contiguous), synchronously;
    * ``to_device(host, dev)``: copy numpy ``host`` into device array ``dev``, in place,
      and return only when done (the host buffer is reused right after);
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
        self._alloc = alloc
        self.pool = HostBufferPool(alloc)

    @classmethod
    def for_cupy(cls, inner):
        def to_host(dev, host):
            cp = backend().cupy_module()
            cp.ascontiguousarray(dev).get(out=host)   # synchronous device-to-host copy

        def to_device(host, dev):
            cp = backend().cupy_module()
            if dev.flags.c_contiguous:
                dev.set(host)
            else:
                dev[...] = cp.asarray(host)
            cp.cuda.get_current_stream().synchronize()  # host buffer is reused next

        def new_device(host):
            return backend().cupy_module().array(host)

        return cls(inner, to_host, to_device, new_device, alloc=pinned_alloc)

    # Stage one device array into a pooled host buffer: returns (buf, host view).
    def _stage_in(self, array):
        buf = self.pool.acquire(array.nbytes)
        host = self.pool.view(buf, array.dtype, array.shape)
        self._to_host(array, host)
        return buf, host

    def _inplace(self, name, array, call):
        check_array(array, name)
        buf, host = self._stage_in(array)
        try:
            call(host)
            self._to_device(host, array)
        finally:
            self.pool.release(buf)
        return array

    def _allreduce(self, array, op):
        return self._inplace("allreduce", array, lambda h: self.inner.allreduce(h, op))

    def broadcast(self, array, root=0):
        return self._inplace("broadcast", array, lambda h: self.inner.broadcast(h, root))

    def reduce(self, array, root=0, op="sum"):
        check_array(array, "reduce")
        buf, host = self._stage_in(array)
        try:
            self.inner.reduce(host, root, op)
            if self.rank == root:
                self._to_device(host, array)
        finally:
            self.pool.release(buf)
        return array

    def _staged_request(self, array, start, name="iallreduce", copy_back=True):
        """Stage ``array`` in, start ``start(host)`` (an inner request), and copy the result
        back to the device when it completes (unless ``copy_back`` is False)."""
        check_array(array, name)
        buf, host = self._stage_in(array)
        try:
            inner = start(host)
        except BaseException:
            self.pool.release(buf)
            raise

        def finish():
            try:
                if copy_back:
                    self._to_device(host, array)
            finally:
                self.pool.release(buf)
        # no owner: the inner request records its wait for the stall watchdog itself
        return Request(None, array, poll=inner.test, block=inner.wait, finish=finish)

    def _iallreduce(self, array, op):
        return self._staged_request(array, lambda h: self.inner.iallreduce(h, op))

    def _iallreduce_wire(self, wire):
        return self._staged_request(wire, self.inner._iallreduce_wire)

    def ireduce(self, array, root=0, op="sum"):
        return self._staged_request(array, lambda h: self.inner.ireduce(h, root, op), "ireduce",
                                    copy_back=self.rank == root)

    def ibroadcast(self, array, root=0):
        return self._staged_request(array, lambda h: self.inner.ibroadcast(h, root), "ibroadcast",
                                    copy_back=self.rank != root)

    def iallgather(self, array):
        check_array(array, "iallgather")
        buf, host = self._stage_in(array)
        try:
            inner = self.inner.iallgather(host)
        except BaseException:
            self.pool.release(buf)
            raise
        req = None

        def finish():
            self.pool.release(buf)
            req._result = self._new_device(inner.wait())
        req = Request(None, None, poll=inner.test, block=inner.wait, finish=finish)
        return req

    def allgather(self, array):
        check_array(array, "allgather")
        buf, host = self._stage_in(array)
        try:
            return self._new_device(self.inner.allgather(host))
        finally:
            self.pool.release(buf)

    def reduce_scatter(self, array, op="sum"):
        check_array(array, "reduce_scatter")
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

    def gather(self, array, root=0):
        check_array(array, "gather")
        buf, host = self._stage_in(array)
        try:
            got = self.inner.gather(host, root)
            return None if got is None else self._new_device(got)
        finally:
            self.pool.release(buf)

    def alltoall(self, array):
        check_rows(array, self.size, "alltoall")
        buf, host = self._stage_in(array)
        try:
            return self._new_device(self.inner.alltoall(host))
        finally:
            self.pool.release(buf)

    def barrier(self):
        self.inner.barrier()

    def isend(self, array, dest, tag=0):
        check_array(array, "send")
        buf, host = self._stage_in(array)
        try:
            inner = self.inner.isend(host, dest, tag)
        except BaseException:
            self.pool.release(buf)
            raise
        return Request(None, array, poll=inner.test, block=inner.wait, finish=lambda: self.pool.release(buf))

    def irecv(self, array, source=None, tag=0):
        check_array(array, "recv")
        buf = self.pool.acquire(array.nbytes)
        host = self.pool.view(buf, array.dtype, array.shape)
        try:
            inner = self.inner.irecv(host, source, tag)
        except BaseException:
            self.pool.release(buf)
            raise

        def finish():
            try:
                self._to_device(host, array)
            finally:
                self.pool.release(buf)
        return Request(None, array, poll=inner.test, block=inner.wait, finish=finish)

    def split(self, ranks):
        sub = self.inner.split(ranks)
        if sub is None:
            return None
        return StagedCommunicator(sub, self._to_host, self._to_device, self._new_device, self._alloc)

    def free(self):
        self.inner.free()

    def allgather_object(self, obj):
        return self.inner.allgather_object(obj)

    def bcast_object(self, obj, root=0):
        return self.inner.bcast_object(obj, root)

    def gather_object(self, obj, root=0):
        return self.inner.gather_object(obj, root)

    def local_rank(self):
        return self.inner.local_rank()

    def activity(self):
        return self.inner.activity()

