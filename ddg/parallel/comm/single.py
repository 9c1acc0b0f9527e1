"""World size 1: every collective is the identity, and MPI is never imported."""
from .base import Communicator, Request
from .util import (array_module, check_array, check_group_ranks, check_peer, check_reduction, check_root,
                   check_rows, describe)

__all__ = ["SingleProcessCommunicator"]


class SingleProcessCommunicator(Communicator):
    """World size 1, rank 0. Every collective is the identity (after the same argument
    checks the MPI communicator makes, so a bad call fails here too)."""
    rank = 0
    size = 1

    def _allreduce(self, array, op):
        check_reduction(array, op, "allreduce")
        return array

    def _iallreduce(self, array, op):
        return Request.completed(self._allreduce(array, op))

    def iallreduce(self, array, op="sum", compression=None):
        # one rank: nothing travels, so nothing is compressed (and nothing rounded)
        return Request.completed(self._allreduce(array, op))

    def allreduce(self, array, op="sum", compression=None):
        return self._allreduce(array, op)

    def broadcast(self, array, root=0):
        check_array(array, "broadcast")
        check_root(root, 1, "broadcast")
        return array

    def allgather(self, array):
        check_array(array, "allgather")
        return array_module(array).expand_dims(array, 0).copy()

    def reduce_scatter(self, array, op="sum"):
        check_reduction(array, op, "reduce_scatter")
        if array.ndim == 0:
            raise ValueError(f"ddg.parallel.reduce_scatter: needs an array with a first axis, "
                             f"got {describe(array)}")
        return array.copy()

    def reduce(self, array, root=0, op="sum"):
        check_reduction(array, op, "reduce")
        check_root(root, 1, "reduce")
        return array

    def scatter(self, arrays, root=0, out=None):
        check_root(root, 1, "scatter")
        if arrays is None or len(arrays) != 1:
            raise ValueError(f"ddg.parallel.scatter: root must pass a list of 1 array (world size 1), "
                             f"got {None if arrays is None else len(arrays)}")
        src = arrays[0]
        check_array(src, "scatter")
        if out is None:
            return src.copy()
        if tuple(out.shape) != tuple(src.shape):
            raise ValueError(f"ddg.parallel.scatter: out is {describe(out)} but the scattered "
                             f"arrays are {describe(src)}")
        out[...] = src
        return out

    def gather(self, array, root=0):
        check_array(array, "gather")
        check_root(root, 1, "gather")
        return array_module(array).expand_dims(array, 0).copy()

    def alltoall(self, array):
        check_rows(array, 1, "alltoall")
        return array.copy()

    def barrier(self):
        pass

    def isend(self, array, dest, tag=0):
        check_array(array, "send")
        check_peer(dest, 1, 0, "send")

    def irecv(self, array, source=None, tag=0):
        check_array(array, "recv")
        check_peer(0 if source is None else source, 1, 0, "recv")

    def split(self, ranks):
        return SingleProcessCommunicator() if check_group_ranks(ranks, 1) else None

    def allgather_object(self, obj):
        return [obj]

    def bcast_object(self, obj, root=0):
        check_root(root, 1, "bcast_object")
        return obj

    def gather_object(self, obj, root=0):
        check_root(root, 1, "gather_object")
        return [obj]
