"""Data parallelism over MPI: communicators, the parallel environment, the gradient
reducer and DataParallel.

``ddg.distributed`` is the Paddle-named face of this package.
"""
from .comm import (REDUCE_OPS, Communicator, Request, SingleProcessCommunicator,  # noqa: F401
                   MPICommunicator, StagedCommunicator, NCCLCommunicator, HostBufferPool,
                   Compression, get_compression, get_world_communicator, launched_under_mpi,
                   cuda_aware_mpi)
from .env import (init_parallel_env, get_rank, get_world_size, ParallelEnv,  # noqa: F401
                  is_initialized, get_device_communicator)
from .reducer import Reducer, SyncStats, assign_buckets  # noqa: F401
from .data_parallel import DataParallel  # noqa: F401

from .comm import failfast as _failfast

_failfast.guard_early_failures()
