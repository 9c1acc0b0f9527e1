"""Data parallelism over MPI: communicators, the parallel environment, the gradient
reducer and DataParallel.

``ddg.distributed`` is the Paddle-named face of this package. Importing it is light (no
``ddg.nn``): ``import ddg`` imports it to arm the early-failure guard under a launcher
(see :func:`ddg.parallel.comm.failfast.guard_early_failures`); the layers
(:class:`DataParallel`, :class:`SyncBatchNorm`) load on first use.
"""
import importlib as _importlib

from .comm import (REDUCE_OPS, Communicator, Request, SingleProcessCommunicator,  # noqa: F401
                   MPICommunicator, StagedCommunicator, NCCLCommunicator, HostBufferPool,
                   Compression, get_compression, get_world_communicator, launched_under_mpi,
                   cuda_aware_mpi)
from .comm import failfast as _failfast
from .env import (init_parallel_env, get_rank, get_world_size, ParallelEnv,  # noqa: F401
                  is_initialized, get_device_communicator)

_LAYERS = {"DataParallel": ".data_parallel", "SyncBatchNorm": ".sync_batch_norm",
           "Reducer": ".reducer", "SyncStats": ".reducer", "assign_buckets": ".reducer"}


def __getattr__(name):
    if name in _LAYERS:
        return getattr(_importlib.import_module(_LAYERS[name], __name__), name)
    raise AttributeError(f"module 'ddg.parallel' has no attribute {name!r}")


_failfast.guard_early_failures()
