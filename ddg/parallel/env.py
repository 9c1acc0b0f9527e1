"""The parallel environment: who am I, how many are we, which GPU is mine.

``init_parallel_env()`` is what a training script calls once, on every rank. Under
MPI it also makes failures loud and prompt:

* an uncaught exception on any rank prints that rank's traceback (every line
  prefixed ``[rank R] ``) and aborts the whole job, instead of leaving the other
  ranks waiting forever in their next collective;
* with ``DDG_STALL_TIMEOUT=<seconds>`` a watchdog thread reports a collective that
  has not finished within that time (``[rank R] stalled for N s in allreduce (...)``),
  which usually means the ranks disagree about which collectives to call.
"""
import os
import sys
import threading
import time
import traceback

from .comm import MPICommunicator, get_world_communicator

__all__ = ["init_parallel_env", "get_rank", "get_world_size", "ParallelEnv",
           "is_initialized", "install_abort_excepthook", "StallWatchdog"]

_ENV = None          # the ParallelEnv created by init_parallel_env
_LOCAL = None        # (local_rank, device_id), computed once collectively
_WATCHDOG = None


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
    local_rank = comm.local_rank() if isinstance(comm, MPICommunicator) else 0
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
        comm = get_world_communicator()
        if isinstance(comm, MPICommunicator):
            install_abort_excepthook(comm.rank)
            timeout = _stall_timeout()
            if timeout > 0:
                start_stall_watchdog(comm, timeout)
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


# ---------------------------------------------------------------------------
# Abort the whole job on one rank's uncaught exception

_hook_installed = False


def install_abort_excepthook(rank):
    """Make an uncaught exception print a rank-prefixed traceback and abort all ranks."""
    global _hook_installed
    if _hook_installed:
        return
    previous = sys.excepthook

    def hook(etype, value, tb):
        try:
            text = "".join(traceback.format_exception(etype, value, tb))
            sys.stderr.write("".join(f"[rank {rank}] {line}\n" for line in text.splitlines()))
            sys.stderr.flush()
            sys.stdout.flush()
        except Exception:
            previous(etype, value, tb)
        finally:
            # Give the launcher a moment to forward the traceback: on Abort, mpiexec may
            # tear the job down before it has drained this rank's stderr pipe.
            time.sleep(0.2)
            from mpi4py import MPI
            MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook
    _hook_installed = True


# ---------------------------------------------------------------------------
# Stall watchdog

def _stall_timeout():
    raw = os.environ.get("DDG_STALL_TIMEOUT", "0").strip() or "0"
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"DDG_STALL_TIMEOUT must be a number of seconds, got {raw!r}") from None


def _format_what(what):
    """('allreduce', array, 'sum') -> 'allreduce (float32[1024], op=sum)'."""
    if not isinstance(what, tuple):
        return str(what)
    name, array, extra = what
    details = []
    if array is not None and hasattr(array, "dtype"):
        details.append(f"{array.dtype}[{', '.join(str(d) for d in array.shape)}]")
    if extra:
        extra = str(extra)
        details.append(extra if "=" in extra else f"op={extra}")
    return f"{name} ({', '.join(details)})" if details else name


class StallWatchdog:
    """A daemon thread that reports collectives running longer than ``timeout`` seconds.

    It only reads the communicator's ``_busy_what``/``_busy_since`` attributes and
    never calls MPI, so it cannot disturb the collectives it watches. Each stall
    is reported once.
    """

    def __init__(self, comm, timeout, stream=None, period=None):
        self.comm = comm
        self.timeout = float(timeout)
        self.stream = stream
        self.period = period if period is not None else min(1.0, max(0.05, self.timeout / 4))
        self._reported = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddg-stall-watchdog", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()

    def check(self, now=None):
        """Report the current stall if any; returns the message printed, or None."""
        comm = self.comm
        since = comm._busy_since
        what = comm._busy_what
        if not since or since == self._reported:
            return None
        waited = (time.monotonic() if now is None else now) - since
        if waited < self.timeout:
            return None
        self._reported = since
        msg = f"[rank {comm.rank}] stalled for {waited:.0f} s in {_format_what(what)}\n"
        stream = self.stream or sys.stderr
        stream.write(msg)
        stream.flush()
        return msg

    def _run(self):
        while not self._stop.wait(self.period):
            try:
                self.check()
            except Exception:  # never let the watchdog kill anything
                pass


def start_stall_watchdog(comm, timeout):
    """Start (once) the watchdog for ``comm``."""
    global _WATCHDOG
    if _WATCHDOG is None:
        _WATCHDOG = StallWatchdog(comm, timeout).start()
    return _WATCHDOG
