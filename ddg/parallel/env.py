"""The parallel environment: who am I, how many are we, which GPU is mine.

``init_parallel_env()`` is what a training script calls once, on every rank: it binds
this rank's GPU. The world communicator it creates also makes failures loud and prompt
(see :mod:`ddg.parallel.comm.failfast`), as does any other first use of the world.

:func:`get_device_communicator` picks the communicator for device gradients (MPI or
NCCL).
"""
import os

from .comm import NCCLCommunicator, get_world_communicator, nccl_available

__all__ = ["init_parallel_env", "get_rank", "get_world_size", "ParallelEnv",
           "is_initialized", "get_device_communicator"]

_ENV = None          # the ParallelEnv created by init_parallel_env
_LOCAL = None        # (local_rank, device_id), computed once collectively
_NCCL_WORLD = []


class ParallelEnv:
    """A snapshot of this rank's place in the job (Paddle's ``ParallelEnv``).

    Attributes: ``rank``, ``world_size`` (alias ``nranks``), ``local_rank`` (rank
    among the processes on this node), ``device_id`` (the GPU this rank uses; 0
    without GPUs). Creating one initializes the parallel environment if needed,
    which under MPI is a collective call: do it on every rank.
    """

    def __init__(self):
        comm = get_world_communicator()
        if _LOCAL is None:
            _setup_local(comm)
        self.rank = comm.rank
        self.world_size = comm.size
        self.local_rank, self.device_id = _LOCAL

    @property
    def nranks(self):
        return self.world_size

    # Paddle spellings
    @property
    def dev_id(self):
        return self.device_id

    @property
    def trainer_id(self):
        return self.rank

    def __repr__(self):
        return (f"ParallelEnv(rank={self.rank}, world_size={self.world_size}, "
                f"local_rank={self.local_rank}, device_id={self.device_id})")


def _setup_local(comm):
    """Find the local rank (shared-memory split under MPI) and bind this rank's GPU."""
    global _LOCAL
    local_rank = comm.local_rank()
    from ddg.tensor import backend
    device_id = 0
    n_gpus = backend.cuda_device_count() if backend.cupy_available() else 0
    if n_gpus > 0:
        device_id = local_rank % n_gpus
        from ddg.tensor.place import bind_gpu
        bind_gpu(device_id)                 # 'gpu' now means this rank's GPU
    _LOCAL = (local_rank, device_id)


def init_parallel_env():
    """Initialize data-parallel training (idempotent) and return the :class:`ParallelEnv`.

    Without an MPI launcher this is a world of one process and MPI is not touched.
    """
    global _ENV
    if _ENV is None:
        _ENV = ParallelEnv()
    return _ENV


def is_initialized():
    """True once :func:`init_parallel_env` has run in this process."""
    return _ENV is not None


def get_rank():
    """This process's rank in the world (0 without MPI)."""
    return get_world_communicator().rank


def get_world_size():
    """The number of ranks in the job (1 without MPI)."""
    return get_world_communicator().size


def get_device_communicator(kind=None):
    """The communicator data-parallel training should use for device gradients.

    ``kind``: ``'mpi'`` -- the world communicator (MPI;
    CUDA-aware or staged through pinned host buffers for GPU arrays; a single-process
    communicator without a launcher); ``'nccl'`` -- an :class:`NCCLCommunicator` over
    the world (an error where NCCL is not usable); ``'auto'`` -- NCCL when cupy has it
    and the world has more than one rank, else MPI. ``None`` reads the environment
    variable ``DDG_COMM`` (default ``'mpi'``). The NCCL communicator is created once
    (after ``init_parallel_env()`` has bound this rank's GPU) and cached."""
    if kind is None:
        kind = os.environ.get("DDG_COMM", "") or "mpi"
    name = str(kind).strip().lower()
    if name not in ("auto", "mpi", "nccl"):
        raise ValueError(f"ddg.parallel.get_device_communicator: kind must be 'auto', 'mpi' or 'nccl' "
                         f"(or DDG_COMM set to one of them), got {kind!r}")
    if name == "auto":
        name = "nccl" if nccl_available() and get_world_communicator().size > 1 else "mpi"
    if name == "mpi":
        return get_world_communicator()
    if not _NCCL_WORLD:
        if not nccl_available():
            raise RuntimeError("ddg.parallel.get_device_communicator: 'nccl' was asked for but NCCL is not "
                               "usable here (no GPU, or cupy was built without NCCL); use 'mpi'")
        init_parallel_env()                       # binds this rank's GPU before NCCL starts
        _NCCL_WORLD.append(NCCLCommunicator())
    return _NCCL_WORLD[0]
