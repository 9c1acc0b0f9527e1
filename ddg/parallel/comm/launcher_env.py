"""What MPI launchers put in each rank's environment: the one list ddg, its tests and
its benchmarks read.

mpiexec/mpirun (MPICH's hydra, Intel MPI, Open MPI, PMIx, MVAPICH) and Cray's PALS set
some of these variables in every rank they start. Their presence tells ddg that it runs
under a launcher (and so should use MPI); their values give the rank and world size
before MPI is initialized (the launcher's view, which :func:`check_launcher_matches`
compares with MPI's own).

This module imports nothing but the standard library, so a test harness can use it
before anything else.
"""
import os

__all__ = ["RANK_VARS", "SIZE_VARS", "LOCAL_RANK_VARS", "LOCAL_SIZE_VARS", "LAUNCHER_VARS",
           "launched_under_mpi", "launcher_rank", "launcher_world_size", "launcher_local_rank",
           "launcher_local_size", "without_launcher", "YIELD_VAR", "idle_wait_env"]

# Variables that carry this process's rank, most specific first.
RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK", "PALS_RANKID")
# Variables that carry the world size, to tell "launched with -n 4" from "-n 1".
SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
# This process's rank among the ranks on its node, and how many ranks its node has.
LOCAL_RANK_VARS = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK")
LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE")
# Every variable a launcher sets that would make a child process believe it is a rank.
LAUNCHER_VARS = RANK_VARS + SIZE_VARS + LOCAL_RANK_VARS + LOCAL_SIZE_VARS + (
    "HYDRA_CONTROL_FD", "HYDI_CONTROL_FD", "PMI_FD", "PMI_PORT", "PMI_HOSTNAME", "PMI_ID",
    "PMIX_NAMESPACE", "PMIX_SERVER_URI2", "PMIX_SERVER_URI21", "PMIX_SERVER_URI3", "PMIX_SERVER_URI4",
)
# Detection uses the variables every launcher is known to set in its ranks.
_DETECT_VARS = RANK_VARS + SIZE_VARS + ("MPI_LOCALRANKID", "MPI_LOCALNRANKS", "HYDRA_CONTROL_FD",
                                       "HYDI_CONTROL_FD")


def launched_under_mpi(environ=None):
    """True when this process was started by an MPI launcher.

    ``DDG_FORCE_MPI=1`` says yes and ``DDG_FORCE_MPI=0`` says no whatever the launcher."""
    env = os.environ if environ is None else environ
    forced = env.get("DDG_FORCE_MPI", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    return any(k in env for k in _DETECT_VARS)


def _first_int(env, names):
    for k in names:
        try:
            return int(env[k])
        except (KeyError, ValueError):
            continue
    return None


def launcher_rank(environ=None):
    """This process's rank as the launcher set it, or None outside a launcher."""
    return _first_int(os.environ if environ is None else environ, RANK_VARS)


def launcher_world_size(environ=None):
    """The number of ranks the launcher started, or None when it does not say."""
    return _first_int(os.environ if environ is None else environ, SIZE_VARS)


def launcher_local_rank(environ=None):
    """This process's rank on its node as the launcher set it, or None when it does not say."""
    return _first_int(os.environ if environ is None else environ, LOCAL_RANK_VARS)


def launcher_local_size(environ=None):
    """How many ranks the launcher started on this node, or None when it does not say."""
    return _first_int(os.environ if environ is None else environ, LOCAL_SIZE_VARS)


def without_launcher(environ=None, also=("DDG_FORCE_MPI",)):
    """A copy of the environment with every launcher variable (and ``also``) removed, for
    starting a child process that must not believe it is an MPI rank."""
    env = os.environ if environ is None else environ
    drop = set(LAUNCHER_VARS) | set(also)
    return {k: v for k, v in env.items() if k not in drop}


# MPICH's switch for how a rank waiting inside MPI lets go of its core: 0 (MPICH's default)
# spins, calling sched_yield now and then; 1 sleeps (nanosleep) between polls.
YIELD_VAR = "MPIR_CVAR_ENABLE_HEAVY_YIELD"


def idle_wait_env(environ=None, cpus=None, ranks=None):
    """The variables to set before ``MPI_Init`` so that waiting ranks sleep instead of spin:
    ``{YIELD_VAR: "1"}`` when more ranks share this node (``ranks``, default the launcher's
    count) than it has CPUs (``cpus``, default ``os.cpu_count()``), else ``{}``; also ``{}``
    when the variable is set already (the user's choice stands) or the count is unknown.
    ddgrun asks it too, before the ranks exist, with its own count (launch/ddgrun.py).

    With more ranks than cores, a rank spinning in a collective holds a core that the rank
    it waits for needs (3 ranks on 2 cores ran the MPI tests with a fifth to a quarter
    less CPU time sleeping). With a core per rank, spinning answers sooner and is left alone. The
    whole node's CPU count is used, not this process's affinity: a launcher that binds each
    rank to its own core narrows every rank's affinity to one without oversubscribing. Open
    MPI makes the same choice by itself (``mpi_yield_when_idle``)."""
    env = os.environ if environ is None else environ
    if YIELD_VAR in env:
        return {}
    ranks = launcher_local_size(env) if ranks is None else ranks
    cpus = os.cpu_count() if cpus is None else cpus
    if ranks is None or not cpus or ranks <= cpus:
        return {}
    return {YIELD_VAR: "1"}
