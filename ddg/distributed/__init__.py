"""``ddg.distributed``: the Paddle-named collectives on Tensors, over ddg.parallel.

Every function works on the world (``group=None``), on a :class:`Group` made by
:func:`new_group`, or on a :class:`ddg.parallel.Communicator` passed as ``group``.
As in Paddle, ranks given with a Group (``src``, ``dst``, ``peer``) are global ranks,
and a rank outside the group returns at once from the group's collectives. Tensor
collectives work on the tensor's array in place, as Paddle's do, and the same in a
single process (world size 1), where no MPI is needed.

Also here: :func:`spawn` (start N local ranks of a function from Python) and
``python -m ddg.distributed.launch`` (Paddle's launcher flags, over ddgrun).
"""
import os
import pickle
import zlib

import numpy as np

from ..io import save
from ..parallel.comm import Communicator, get_world_communicator
from ..parallel.env import ParallelEnv, get_rank, get_world_size, init_parallel_env, is_initialized
from ..tensor import backend
from ..tensor.tensor import Tensor
from .spawn import MultiprocessContext, spawn

__all__ = [
    "init_parallel_env", "get_rank", "get_world_size", "ParallelEnv", "is_initialized", "is_available",
    "ReduceOp", "Group", "new_group", "get_group", "destroy_process_group", "get_backend",
    "all_reduce", "broadcast", "all_gather", "all_gather_object", "broadcast_object_list", "reduce",
    "scatter", "scatter_object_list", "gather", "reduce_scatter", "alltoall", "alltoall_single",
    "send", "recv", "isend", "irecv", "send_object_list", "recv_object_list", "P2POp", "batch_isend_irecv",
    "barrier", "wait", "save_checkpoint", "join", "spawn", "MultiprocessContext",
]


class ReduceOp:
    """Reduction operators for :func:`all_reduce`, :func:`reduce` and :func:`reduce_scatter`."""
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PROD = "prod"
    AVG = "avg"


# ---------------------------------------------------------------------------------- groups
class Group:
    """A set of ranks that run collectives among themselves (Paddle's ``Group``).

    ``ranks`` are global ranks in group order; ``rank`` is this process's rank in the
    group (-1 when it is not a member); ``nranks`` (also ``world_size``) the group size;
    ``id`` its number (0: the world)."""

    def __init__(self, rank_in_group, id, ranks, comm=None, name=None):  # noqa: A002 - Paddle's name
        self.rank = rank_in_group
        self.id = id
        self.ranks = list(ranks)
        self.nranks = self.world_size = len(self.ranks)
        self.name = name if name is not None else ("_default_pg0" if id == 0 else f"group_{id}")
        self.comm = comm            # the communicator over the members; None elsewhere

    def is_member(self):
        return self.rank >= 0

    def get_group_rank(self, rank):
        """The group rank of global ``rank``, or -1 if it is not a member."""
        return self.ranks.index(rank) if rank in self.ranks else -1

    def get_global_rank(self, rank):
        if not 0 <= rank < self.nranks:
            raise ValueError(f"ddg.distributed.Group.get_global_rank: rank {rank} is not in [0, {self.nranks})")
        return self.ranks[rank]

    @property
    def backend(self):
        return get_backend(self)

    @property
    def process_group(self):
        return self.comm

    def __repr__(self):
        return f"Group(id={self.id}, rank={self.rank}, nranks={self.nranks}, ranks={self.ranks})"


_groups = {}


def _world_group():
    g = _groups.get(0)
    if g is None:
        comm = get_world_communicator()
        g = _groups[0] = Group(comm.rank, 0, range(comm.size), comm)
    return g


def new_group(ranks=None, backend=None, timeout=None, **kwargs):
    """A :class:`Group` of the global ``ranks`` (all ranks when None). Collective: every
    rank calls it with the same list, members and non-members alike (as in Paddle)."""
    world = _world_group()
    ranks = list(range(world.nranks)) if ranks is None else [int(r) for r in ranks]
    comm = world.comm.split(ranks)
    gid = max(_groups) + 1
    g = Group(ranks.index(world.rank) if world.rank in ranks else -1, gid, ranks, comm)
    _groups[gid] = g
    return g


def get_group(id=0):  # noqa: A002 - Paddle's name
    """The group with this ``id`` (0: the world)."""
    if id == 0:
        return _world_group()
    if id not in _groups:
        raise ValueError(f"ddg.distributed.get_group: no group with id {id}; ids: {sorted(_groups) or [0]}")
    return _groups[id]


def destroy_process_group(group=None):
    """Release ``group``'s communicator; with None, every group made by :func:`new_group`
    (the world's communicator lives until the process ends)."""
    targets = [g for g in list(_groups.values()) if g.id != 0] if group is None else [group]
    for g in targets:
        if g.id == 0:
            continue
        if g.comm is not None:
            g.comm.free()
            g.comm = None
        _groups.pop(g.id, None)


def get_backend(group=None):
    """'MPI', 'NCCL' or 'SINGLE' (one process): what carries ``group``'s collectives."""
    comm = _comm(group, "get_backend")
    if comm is None:
        return "MPI"
    name = type(comm).__name__
    return "NCCL" if name.startswith("NCCL") else "SINGLE" if name.startswith("Single") else "MPI"


def is_available():
    """Whether distributed training can run here: always (one process needs no MPI)."""
    return True


def _comm(group, fn):
    """The communicator for ``group``; None when this rank is not a member of it."""
    if group is None:
        return get_world_communicator()
    if isinstance(group, Group):
        if group.id != 0 and group.id not in _groups:
            raise ValueError(f"ddg.distributed.{fn}: group {group.id} was destroyed")
        return group.comm if group.id != 0 else _world_group().comm
    if isinstance(group, Communicator):
        return group
    raise TypeError(f"ddg.distributed.{fn}: group must be None (the world), a Group or a "
                    f"ddg.parallel.Communicator, got {type(group).__name__}")


def _local(rank, group, fn, what="rank"):
    """A rank as the group's communicator counts it: Paddle gives global ranks with a
    Group; a Communicator (or the world) takes its own."""
    if isinstance(group, Group) and group.id != 0:
        r = group.get_group_rank(rank)
        if r < 0:
            raise ValueError(f"ddg.distributed.{fn}: {what} {rank} is not in {group}")
        return r
    return rank


def _array_of(tensor, fn):
    data = getattr(tensor, "_data", None)
    if data is None:
        raise TypeError(f"ddg.distributed.{fn}: expected a ddg Tensor, got {type(tensor).__name__}")
    return data


#: whether the tensor collectives check that the ranks agree (``DDG_CHECK_COLLECTIVES=0``: off,
#: saving one small all-reduce per call)
_CHECK = [os.environ.get("DDG_CHECK_COLLECTIVES", "1") != "0"]

_CALLS = {fn: i for i, fn in enumerate(("all_reduce", "broadcast", "all_gather", "reduce", "scatter", "gather",
                                        "reduce_scatter", "alltoall"))}
_OPS = {"sum": 0, "max": 1, "min": 2, "prod": 3, "avg": 4}
_DTYPE_CODES = {}


def _dtype_code(dtype):
    """A number for ``dtype`` that every process gives alike (numpy's ``dtype.num`` of a
    registered extension type such as bfloat16 depends on the order of registration)."""
    code = _DTYPE_CODES.get(dtype)
    if code is None:
        code = _DTYPE_CODES[dtype] = zlib.crc32(f"{dtype.name}|{dtype.str}".encode())
    return code


def _agree(comm, fn, array, **args):
    """Check, before a tensor collective, that every rank of ``comm`` calls the same
    collective on a tensor of the same shape and dtype with the same root and reduction:
    one all-reduce of a few int64s (a call takes ~30 us more on one node;
    ``DDG_CHECK_COLLECTIVES=0`` skips it).
    Where they differ every rank raises the same ValueError, naming each rank's call,
    instead of MPI truncating a message, summing mismatched buffers, or one rank waiting
    in another collective."""
    if comm.size == 1 or not _CHECK[0]:
        return
    shape = array.shape
    key = [_CALLS[fn], _dtype_code(array.dtype), len(shape)] + list(shape[:6]) + [0] * (6 - len(shape[:6]))
    key.append(int(np.prod(shape[6:])) if len(shape) > 6 else 0)
    key += [_OPS.get(v, -2) if isinstance(v, str) else int(v) if isinstance(v, (int, np.integer)) else -3
            for _, v in sorted(args.items())]
    # the same on every rank exactly when the maxima of key and -key are this rank's own
    both = np.array(key + [-v for v in key], dtype=np.int64)
    # a rank stuck here is reported (stall watchdog) as stuck in this very call
    watched = getattr(comm, "inner", comm)
    detail = "; ".join(f"{k}={v}" for k, v in sorted(args.items()))
    watched._label = (fn, array, f"{detail}{'; ' if detail else ''}checking that the ranks agree")
    try:
        agreed = (comm.allreduce(both.copy(), "max") == both).all()
    finally:
        watched._label = None
    if agreed:
        return
    mine = (fn, str(array.dtype), tuple(int(d) for d in shape), tuple(sorted(args.items())))
    calls = "; ".join(f"rank {r}: {f}({d}{list(sh)}{''.join(f', {k}={v!r}' for k, v in a)})"
                      for r, (f, d, sh, a) in enumerate(comm.allgather_object(mine)))
    raise ValueError(f"ddg.distributed.{fn}: the ranks disagree about this collective ({calls}); every rank "
                     f"must call the same collective with the same shape, dtype, root and op")


def _new_tensor(array):
    """A Tensor around ``array`` without copying it (keeps its device)."""
    return Tensor._wrap(array)


def _check_list(value, fn, name):
    if not isinstance(value, list):
        raise TypeError(f"ddg.distributed.{fn}: {name} must be a list, got {type(value).__name__}")


def _stack(tensors, fn, nranks):
    if len(tensors) != nranks:
        raise ValueError(f"ddg.distributed.{fn}: needs one tensor per rank ({nranks}), got {len(tensors)}")
    arrays = [_array_of(t, fn) for t in tensors]
    shapes = {(tuple(a.shape), a.dtype) for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"ddg.distributed.{fn}: the tensors must share shape and dtype, got "
                         f"{sorted((str(d), s) for s, d in shapes)}")
    return backend.get_array_module(arrays[0]).stack(arrays)


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


def _done(sync_op):
    return None if sync_op else _Task()


# ---------------------------------------------------------------------------------- collectives
def all_reduce(tensor, op=ReduceOp.SUM, group=None, sync_op=True):
    """Reduce ``tensor`` over all ranks, in place. With ``sync_op=False`` the reduction
    runs in the background; call ``.wait()`` on the returned task before reading it."""
    data = _array_of(tensor, "all_reduce")
    comm = _comm(group, "all_reduce")
    if comm is None:
        return _done(sync_op)
    _agree(comm, "all_reduce", data, op=op)
    if sync_op:
        comm.allreduce(data, op)
        return None
    return _Task(comm.iallreduce(data, op))


def broadcast(tensor, src=0, group=None, sync_op=True):
    """Overwrite ``tensor`` on every rank with rank ``src``'s values, in place."""
    comm = _comm(group, "broadcast")
    if comm is not None:
        data, root = _array_of(tensor, "broadcast"), _local(src, group, "broadcast", "src")
        _agree(comm, "broadcast", data, src=root)
        comm.broadcast(data, root)
    return _done(sync_op)


def all_gather(tensor_list, tensor, group=None, sync_op=True):
    """Append one Tensor per rank (rank order) with that rank's ``tensor`` to ``tensor_list``."""
    _check_list(tensor_list, "all_gather", "tensor_list")
    comm = _comm(group, "all_gather")
    if comm is not None:
        data = _array_of(tensor, "all_gather")
        _agree(comm, "all_gather", data)
        gathered = comm.allgather(data)
        tensor_list.extend(_new_tensor(gathered[r]) for r in range(gathered.shape[0]))
    return _done(sync_op)


def all_gather_object(object_list, obj, group=None):
    """Append every rank's picklable ``obj`` (rank order) to ``object_list``."""
    _check_list(object_list, "all_gather_object", "object_list")
    comm = _comm(group, "all_gather_object")
    if comm is not None:
        object_list.extend(comm.allgather_object(obj))


def broadcast_object_list(object_list, src=0, group=None):
    """Replace the contents of ``object_list`` on every rank with rank ``src``'s, in place."""
    _check_list(object_list, "broadcast_object_list", "object_list")
    comm = _comm(group, "broadcast_object_list")
    if comm is not None:
        object_list[:] = comm.bcast_object(object_list, _local(src, group, "broadcast_object_list", "src"))


def reduce(tensor, dst=0, op=ReduceOp.SUM, group=None, sync_op=True):
    """Reduce ``tensor`` over all ranks onto rank ``dst`` (in place there); the other
    ranks' tensors are left unchanged."""
    comm = _comm(group, "reduce")
    if comm is not None:
        data, root = _array_of(tensor, "reduce"), _local(dst, group, "reduce", "dst")
        _agree(comm, "reduce", data, dst=root, op=op)
        comm.reduce(data, root, op)
    return _done(sync_op)


def scatter(tensor, tensor_list=None, src=0, group=None, sync_op=True):
    """Rank ``src`` passes ``tensor_list`` (one Tensor per rank); every rank receives its
    own into ``tensor``, in place."""
    comm = _comm(group, "scatter")
    if comm is None:
        return _done(sync_op)
    root = _local(src, group, "scatter", "src")
    arrays = None
    if comm.rank == root:
        if tensor_list is None:
            raise ValueError("ddg.distributed.scatter: the src rank must pass tensor_list")
        arrays = [_array_of(t, "scatter") for t in tensor_list]
    out = _array_of(tensor, "scatter")
    _agree(comm, "scatter", out, src=root)
    comm.scatter(arrays, root, out=out)
    return _done(sync_op)


def scatter_object_list(out_object_list, in_object_list=None, src=0, group=None):
    """Rank ``src`` passes one picklable object per rank in ``in_object_list``;
    ``out_object_list`` becomes ``[this rank's object]`` on every rank."""
    _check_list(out_object_list, "scatter_object_list", "out_object_list")
    comm = _comm(group, "scatter_object_list")
    if comm is None:
        return
    root = _local(src, group, "scatter_object_list", "src")
    objs = None
    if comm.rank == root:
        if in_object_list is None or len(in_object_list) != comm.size:
            objs = ValueError(f"ddg.distributed.scatter_object_list: the src rank must pass one object per rank "
                              f"({comm.size}), got {None if in_object_list is None else len(in_object_list)}")
        else:
            objs = list(in_object_list)
    objs = comm.bcast_object(objs, root)          # the error, if any, reaches every rank
    if isinstance(objs, Exception):
        raise objs
    out_object_list[:] = [objs[comm.rank]]


def gather(tensor, gather_list=None, dst=0, group=None, sync_op=True):
    """Gather every rank's ``tensor`` onto rank ``dst``, appended to its ``gather_list``
    in rank order (other ranks may pass None)."""
    comm = _comm(group, "gather")
    if comm is None:
        return _done(sync_op)
    root = _local(dst, group, "gather", "dst")
    if comm.rank == root:
        _check_list(gather_list, "gather", "gather_list on the dst rank")
    data = _array_of(tensor, "gather")
    _agree(comm, "gather", data, dst=root)
    got = comm.gather(data, root)
    if got is not None:
        gather_list.extend(_new_tensor(got[r]) for r in range(got.shape[0]))
    return _done(sync_op)


def reduce_scatter(tensor, tensor_list, op=ReduceOp.SUM, group=None, sync_op=True):
    """Reduce ``tensor_list`` (one tensor per rank, the same on every rank in shape) over
    the ranks; rank r receives the reduction of everyone's ``tensor_list[r]`` in
    ``tensor``, in place."""
    _check_list(tensor_list, "reduce_scatter", "tensor_list")
    comm = _comm(group, "reduce_scatter")
    if comm is None:
        return _done(sync_op)
    out = _array_of(tensor, "reduce_scatter")
    stacked = _stack(tensor_list, "reduce_scatter", comm.size)
    if tuple(stacked.shape[1:]) != tuple(out.shape):
        raise ValueError(f"ddg.distributed.reduce_scatter: tensor has shape {list(out.shape)}, the blocks "
                         f"{list(stacked.shape[1:])}")
    _agree(comm, "reduce_scatter", stacked, op=op)
    out[...] = comm.reduce_scatter(stacked, op)[0]
    tensor._bump()
    return _done(sync_op)


def alltoall(out_tensor_list, in_tensor_list, group=None, sync_op=True):
    """Rank r sends ``in_tensor_list[j]`` to rank j and receives rank j's
    ``in_tensor_list[r]`` as ``out_tensor_list[j]``. Paddle 3's argument order (out
    first); Paddle 2.6 had (in, out): when one list is empty and the other full, the
    empty one is the output, so code written either way works. An empty output list is
    filled; a full one is written in place."""
    _check_list(out_tensor_list, "alltoall", "out_tensor_list")
    _check_list(in_tensor_list, "alltoall", "in_tensor_list")
    if not in_tensor_list and out_tensor_list:
        in_tensor_list, out_tensor_list = out_tensor_list, in_tensor_list
    comm = _comm(group, "alltoall")
    if comm is None:
        return _done(sync_op)
    stacked = _stack(in_tensor_list, "alltoall", comm.size)
    _agree(comm, "alltoall", stacked)
    got = comm.alltoall(stacked)
    if not out_tensor_list:
        out_tensor_list.extend(_new_tensor(got[r]) for r in range(comm.size))
    else:
        if len(out_tensor_list) != comm.size:
            raise ValueError(f"ddg.distributed.alltoall: out_tensor_list needs {comm.size} tensors, "
                             f"got {len(out_tensor_list)}")
        for r, t in enumerate(out_tensor_list):
            _array_of(t, "alltoall")[...] = got[r]
            t._bump()
    return _done(sync_op)


def alltoall_single(out_tensor, in_tensor, in_split_sizes=None, out_split_sizes=None, group=None, sync_op=True):
    """``in_tensor`` split along its first axis (equally, or by ``in_split_sizes``): block
    j goes to rank j; ``out_tensor`` receives rank j's block for this rank as its j-th
    block (equal, or sized by ``out_split_sizes``), in place."""
    comm = _comm(group, "alltoall_single")
    if comm is None:
        return _done(sync_op)
    src, dst = _array_of(in_tensor, "alltoall_single"), _array_of(out_tensor, "alltoall_single")
    n = comm.size
    ins = _splits(src, in_split_sizes, n, "in")
    outs = _splits(dst, out_split_sizes, n, "out")
    if in_split_sizes is None and out_split_sizes is None and src.shape == dst.shape:
        dst[...] = comm.alltoall(src.reshape((n, -1) + tuple(src.shape[1:]))).reshape(dst.shape)
    else:
        # uneven blocks: every pair exchanges its block point to point
        me = comm.rank
        if outs[me + 1] - outs[me] != ins[me + 1] - ins[me]:
            raise ValueError(f"ddg.distributed.alltoall_single: rank {me} keeps a block of {ins[me + 1] - ins[me]} "
                             f"rows but expects {outs[me + 1] - outs[me]}")
        reqs = []
        xp = backend.get_array_module(dst)
        for k in range(1, n):
            to, frm = (me + k) % n, (me - k) % n
            reqs.append(comm.isend(xp.ascontiguousarray(src[ins[to]:ins[to + 1]]), to, tag=_TAG_ALLTOALL))
            buf = xp.empty((outs[frm + 1] - outs[frm],) + tuple(dst.shape[1:]), dst.dtype)
            reqs.append(comm.irecv(buf, frm, tag=_TAG_ALLTOALL).then(
                (lambda b, a, z: lambda: dst.__setitem__(slice(a, z), b))(buf, outs[frm], outs[frm + 1])))
        dst[outs[me]:outs[me + 1]] = src[ins[me]:ins[me + 1]]
        for r in reqs:
            r.wait()
    out_tensor._bump()
    return _done(sync_op)


_TAG_ALLTOALL = 7001


def _splits(array, sizes, n, which):
    rows = array.shape[0] if array.ndim else 0
    if sizes is None:
        if rows % n:
            raise ValueError(f"ddg.distributed.alltoall_single: the {which} tensor's first axis ({rows}) does "
                             f"not split into {n} equal blocks; pass {which}_split_sizes")
        sizes = [rows // n] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n or sum(sizes) != rows or min(sizes) < 0:
        raise ValueError(f"ddg.distributed.alltoall_single: {which}_split_sizes {sizes} must be {n} sizes "
                         f"summing to {rows}")
    return np.concatenate([[0], np.cumsum(sizes)]).tolist()


# ---------------------------------------------------------------------------------- point to point
def isend(tensor, dst, group=None):
    """Start sending ``tensor`` to rank ``dst``; returns a task (``wait()`` it)."""
    comm = _comm(group, "isend")
    if comm is None:
        return _Task()
    return _Task(comm.isend(_array_of(tensor, "isend"), _local(dst, group, "isend", "dst")))


def irecv(tensor, src=None, group=None):
    """Start receiving into ``tensor`` from rank ``src`` (None: any); returns a task."""
    comm = _comm(group, "irecv")
    if comm is None:
        return _Task()
    src = None if src is None else _local(src, group, "irecv", "src")
    data = _array_of(tensor, "irecv")
    return _Task(comm.irecv(data, src).then(tensor._bump))


def send(tensor, dst=0, group=None, sync_op=True):
    """Send ``tensor`` to rank ``dst`` (a matching :func:`recv` receives it)."""
    task = isend(tensor, dst, group)
    if sync_op:
        task.wait()
        return None
    return task


def recv(tensor, src=0, group=None, sync_op=True):
    """Receive into ``tensor`` (in place) what rank ``src`` sends."""
    task = irecv(tensor, src, group)
    if sync_op:
        task.wait()
        return None
    return task


class P2POp:
    """One send or receive for :func:`batch_isend_irecv`: ``op`` is :func:`isend` or
    :func:`irecv`, ``peer`` a (global) rank."""

    def __init__(self, op, tensor, peer, group=None):
        if op not in (isend, irecv):
            raise ValueError("ddg.distributed.P2POp: op must be ddg.distributed.isend or ddg.distributed.irecv")
        self.op, self.tensor, self.peer, self.group = op, tensor, peer, group


def batch_isend_irecv(p2p_op_list):
    """Start every operation of the list; returns their tasks (``wait()`` each)."""
    if not isinstance(p2p_op_list, (list, tuple)) or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise TypeError("ddg.distributed.batch_isend_irecv: expects a list of P2POp")
    return [p.op(p.tensor, p.peer, p.group) for p in p2p_op_list]


def send_object_list(object_list, dst=None, group=None, dst_in_group=None):
    """Send a list of picklable objects to rank ``dst`` (or ``dst_in_group``)."""
    _check_list(object_list, "send_object_list", "object_list")
    comm = _comm(group, "send_object_list")
    if comm is None:
        return
    dst = dst_in_group if dst_in_group is not None else _local(dst, group, "send_object_list", "dst")
    payload = np.frombuffer(pickle.dumps(list(object_list), protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
    comm.send(np.array([payload.size], np.int64), dst, tag=_TAG_OBJECTS)
    comm.send(payload, dst, tag=_TAG_OBJECTS)


def recv_object_list(object_list, src=None, group=None, src_in_group=None):
    """Receive what :func:`send_object_list` sent into ``object_list`` (replacing its
    contents). Objects are unpickled: receive only from ranks of your own job."""
    _check_list(object_list, "recv_object_list", "object_list")
    comm = _comm(group, "recv_object_list")
    if comm is None:
        return
    src = src_in_group if src_in_group is not None else (None if src is None else
                                                          _local(src, group, "recv_object_list", "src"))
    n = np.empty(1, np.int64)
    comm.recv(n, src, tag=_TAG_OBJECTS)
    payload = np.empty(int(n[0]), np.uint8)
    comm.recv(payload, src, tag=_TAG_OBJECTS)
    object_list[:] = pickle.loads(payload.tobytes())


_TAG_OBJECTS = 7002


# ---------------------------------------------------------------------------------- the rest
def join(model):
    """``model.join()`` for a :class:`ddg.DataParallel` model: the context for training
    with uneven inputs (see :meth:`ddg.DataParallel.join`)."""
    return model.join()


def barrier(group=None):
    """Wait until every rank (of ``group``) has reached this point."""
    comm = _comm(group, "barrier")
    if comm is not None:
        comm.barrier()


def wait(tensor, group=None, use_calc_stream=True):
    """Wait for the work queued on ``tensor`` (ddg's collectives return when done unless
    a task was asked for: this synchronizes the GPU stream for a GPU tensor)."""
    if backend.is_gpu_array(_array_of(tensor, "wait")):
        backend.synchronize()


def save_checkpoint(obj, path, rank=0, group=None):
    """``ddg.save(obj, path)`` on ``rank`` only, then a barrier, so that every rank can
    read the file once this returns."""
    comm = _comm(group, "save_checkpoint")
    if comm is None:
        return
    try:
        if comm.rank == _local(rank, group, "save_checkpoint"):
            save(obj, path)
    finally:
        comm.barrier()


def __getattr__(name):
    # ``paddle.distributed.launch`` is the launcher module (``python -m ...launch``); it,
    # ``elastic``, ``fleet``, ``sharding`` and ``DataParallel`` are imported on first use, so
    # that importing ddg.distributed stays light (no launcher, no ddg.nn)
    if name in ("launch", "elastic", "fleet", "sharding"):
        import importlib
        return importlib.import_module("." + name, __name__)
    if name == "DataParallel":
        from ..parallel.data_parallel import DataParallel
        return DataParallel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
