"""Data parallelism over MPI: communicators, the parallel environment (and DataParallel).

``ddg.distributed`` is the Paddle-named face of this package.
"""
from .comm import (REDUCE_OPS, Communicator, Request, SingleProcessCommunicator,  # noqa: F401
                   MPICommunicator, StagedCommunicator, HostBufferPool,
                   get_world_communicator, launched_under_mpi, cuda_aware_mpi)
from .env import (init_parallel_env, get_rank, get_world_size, ParallelEnv,  # noqa: F401
                  is_initialized)

# DataParallel is added here by its author (from .data_parallel import DataParallel).
from .data_parallel import DataParallel  # noqa: F401,E402
