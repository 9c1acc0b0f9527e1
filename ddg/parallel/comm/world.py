"""The world communicator of this job, created once: MPI under a launcher, a single
process otherwise (where mpi4py is not even imported)."""
import os

from . import launcher_env
from .single import SingleProcessCommunicator

__all__ = ["get_world_communicator"]

_WORLD = None


def get_world_communicator():
    """The communicator over all ranks of this job, created once and cached.

    Under an MPI launcher (``ddgrun``, ``mpiexec``, ``mpirun``, ``srun`` with PMI) this is
    an :class:`~.mpi.MPICommunicator` on ``COMM_WORLD``; otherwise a
    :class:`~.single.SingleProcessCommunicator`. ``DDG_FORCE_MPI=1`` forces MPI,
    ``DDG_FORCE_MPI=0`` forces a single process.

    Creating the MPI world also arms the job's fail-fast machinery (see
    :mod:`.failfast`): one rank's uncaught exception or early exit, or a collective
    stalled past ``DDG_STALL_TIMEOUT``, ends the whole job instead of hanging it.
    """
    global _WORLD
    if _WORLD is None:
        _WORLD = _create()
    return _WORLD


def _create():
    if not launcher_env.launched_under_mpi():
        return SingleProcessCommunicator()
    n = launcher_env.launcher_world_size()
    from . import failfast
    try:
        MPI = failfast.start_mpi()
    except ImportError as e:
        if n is not None and n > 1:
            raise ImportError(f"ddg: launched as one of {n} MPI ranks but mpi4py does not import "
                              f"({e}); install ddg[mpi]") from e
        return SingleProcessCommunicator()
    from .mpi import MPICommunicator
    comm = MPICommunicator(MPI.COMM_WORLD)
    if n is not None and n != comm.size:
        raise RuntimeError(_mismatch_message(n, comm.size, MPI))
    failfast.arm(comm)
    return comm


def _mismatch_message(launched, seen, MPI):
    try:
        library = MPI.Get_library_version().strip().splitlines()[0]
    except Exception:   # an MPI too old for MPI_Get_library_version
        library = "unknown"
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" in env:
        launcher = "Open MPI's mpirun"
    elif "PMI_SIZE" in env or "HYDRA_CONTROL_FD" in env:
        launcher = "a PMI launcher such as MPICH's hydra mpiexec"
    else:
        launcher = "an MPI launcher"
    import mpi4py
    return (f"ddg: the launcher and the MPI library do not match: this process was started by "
            f"{launcher} as one of {launched} ranks, but mpi4py {mpi4py.__version__}'s MPI library "
            f"({library}) sees a world of {seen}. Each rank would train alone, each believing it is "
            f"rank 0 of {seen}. Start the job with the mpiexec that belongs to the MPI mpi4py was "
            f"built with (for ddgrun: set DDG_MPIEXEC to it), or set DDG_FORCE_MPI=0 to run "
            f"single-process anyway.")
