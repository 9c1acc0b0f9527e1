"""``ddg.distributed``: the Paddle-named collectives on Tensors, over ddg.parallel.

Every function works on the world communicator (``group=None``) or on a
:class:`ddg.parallel.Communicator` passed as ``group``. Tensor collectives operate
on the tensor's array in place, as Paddle's do, and work the same in a single
process (world size 1), where no MPI is needed.
"""
from .io import save
from .parallel.comm import Communicator, get_world_communicator
from .parallel.env import ParallelEnv, get_rank, get_world_size, init_parallel_env, is_initialized
from .tensor.tensor import Tensor

__all__ = [
    "init_parallel_env", "get_rank", "get_world_size", "ParallelEnv", "is_initialized",
    "ReduceOp", "all_reduce", "broadcast", "all_gather", "all_gather_object",
    "broadcast_object_list", "reduce", "scatter", "barrier", "save_checkpoint", "join",
]


class ReduceOp:
    """Reduction operators for :func:`all_reduce` and :func:`reduce`."""
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PROD = "prod"
    AVG = "avg"


def _comm(group):
    if group is None:
        return get_world_communicator()
    if isinstance(group, Communicator):
        return group
    raise TypeError(f"ddg.distributed: group must be None (the world) or a ddg.parallel.Communicator, "
                    f"got {type(group).__name__}")


def _array_of(tensor, fn):
    data = getattr(tensor, "_data", None)
    if data is None:
        raise TypeError(f"ddg.distributed.{fn}: expected a ddg Tensor, got {type(tensor).__name__}")
    return data


def _new_tensor(array):
    """A Tensor around ``array`` without copying it (keeps its device)."""
    return Tensor._wrap(array)


class _Task:
    """What the collectives return when ``sync_op=False``: ``wait()`` finishes them."""

    def __init__(self, request=None):
        self._request = request

    def wait(self):
        if self._request is not None:
            self._request.wait()
        return True

    def is_completed(self):
        return self._request is None or self._request.test()


def all_reduce(tensor, op=ReduceOp.SUM, group=None, sync_op=True):
    """Reduce ``tensor`` over all ranks, in place. With ``sync_op=False`` the reduction
    runs in the background; call ``.wait()`` on the returned task before reading it."""
    data = _array_of(tensor, "all_reduce")
    comm = _comm(group)
    if sync_op:
        comm.allreduce(data, op)
        return None
    return _Task(comm.iallreduce(data, op))


def broadcast(tensor, src=0, group=None, sync_op=True):
    """Overwrite ``tensor`` on every rank with rank ``src``'s values, in place."""
    _comm(group).broadcast(_array_of(tensor, "broadcast"), src)
    return None if sync_op else _Task()


def all_gather(tensor_list, tensor, group=None, sync_op=True):
    """Append one Tensor per rank (rank order) with that rank's ``tensor`` to ``tensor_list``."""
    if not isinstance(tensor_list, list):
        raise TypeError(f"ddg.distributed.all_gather: tensor_list must be a list, got {type(tensor_list).__name__}")
    gathered = _comm(group).allgather(_array_of(tensor, "all_gather"))
    tensor_list.extend(_new_tensor(gathered[r]) for r in range(gathered.shape[0]))
    return None if sync_op else _Task()


def all_gather_object(object_list, obj, group=None):
    """Append every rank's picklable ``obj`` (rank order) to ``object_list``."""
    if not isinstance(object_list, list):
        raise TypeError(f"ddg.distributed.all_gather_object: object_list must be a list, "
                        f"got {type(object_list).__name__}")
    object_list.extend(_comm(group).allgather_object(obj))


def broadcast_object_list(object_list, src=0, group=None):
    """Replace the contents of ``object_list`` on every rank with rank ``src``'s, in place."""
    if not isinstance(object_list, list):
        raise TypeError(f"ddg.distributed.broadcast_object_list: object_list must be a list, "
                        f"got {type(object_list).__name__}")
    object_list[:] = _comm(group).bcast_object(object_list, src)


def reduce(tensor, dst=0, op=ReduceOp.SUM, group=None, sync_op=True):
    """Reduce ``tensor`` over all ranks onto rank ``dst`` (in place there); the other
    ranks' tensors are left unchanged."""
    _comm(group).reduce(_array_of(tensor, "reduce"), dst, op)
    return None if sync_op else _Task()


def scatter(tensor, tensor_list=None, src=0, group=None, sync_op=True):
    """Rank ``src`` passes ``tensor_list`` (one Tensor per rank); every rank receives its
    own into ``tensor``, in place."""
    comm = _comm(group)
    arrays = None
    if comm.rank == src:
        if tensor_list is None:
            raise ValueError("ddg.distributed.scatter: the src rank must pass tensor_list")
        arrays = [_array_of(t, "scatter") for t in tensor_list]
    comm.scatter(arrays, src, out=_array_of(tensor, "scatter"))
    return None if sync_op else _Task()


def join(model):
    """``model.join()`` for a :class:`ddg.DataParallel` model: the context for training
    with uneven inputs (see :meth:`ddg.DataParallel.join`)."""
    return model.join()


def barrier(group=None):
    """Wait until every rank has reached this point."""
    _comm(group).barrier()


def save_checkpoint(obj, path, rank=0, group=None):
    """``ddg.save(obj, path)`` on ``rank`` only, then a barrier, so that every rank can
    read the file once this returns."""
    comm = _comm(group)
    try:
        if comm.rank == rank:
            save(obj, path)
    finally:
        comm.barrier()
