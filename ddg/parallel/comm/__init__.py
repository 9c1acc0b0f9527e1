"""Communicators: the collectives data-parallel training needs, on numpy or cupy arrays.

One small interface (:class:`Communicator`, in ``base``) and its implementations, in the
manner of chainermn's communicators:

* ``single``: :class:`SingleProcessCommunicator`, world size 1, every collective the
  identity; it never imports mpi4py, so a plain ``python train.py`` needs no MPI.
* ``mpi``: :class:`MPICommunicator`, mpi4py's buffer methods on numpy arrays, cupy arrays
  directly when MPI is CUDA-aware.
* ``staged``: :class:`StagedCommunicator`, device arrays through reusable (pinned) host
  buffers and a host communicator.
* ``nccl``: :class:`NCCLCommunicator`, cupy arrays over NCCL.

Beside them: ``compression`` (how an all-reduce's payload travels: 'none', 'fp16'),
``pool`` (reusable host buffers), ``launcher_env`` (the one list of launcher environment
variables), ``world`` (the job's world communicator) and ``failfast`` (one rank's failure
ends the job).
"""
from .base import REDUCE_OPS, Communicator, Request
from .compression import Compression, FP16Compression, NoCompression, get_compression
from .launcher_env import launched_under_mpi
from .mpi import MPICommunicator, cuda_aware_mpi
from .nccl import NCCLCommunicator, nccl_available
from .pool import HostBufferPool
from .single import SingleProcessCommunicator
from .staged import StagedCommunicator
from .world import get_world_communicator

__all__ = [
    "REDUCE_OPS", "Communicator", "Request", "SingleProcessCommunicator", "MPICommunicator",
    "StagedCommunicator", "NCCLCommunicator", "HostBufferPool", "Compression", "NoCompression",
    "FP16Compression", "get_compression", "get_world_communicator", "launched_under_mpi",
    "cuda_aware_mpi", "nccl_available",
]
