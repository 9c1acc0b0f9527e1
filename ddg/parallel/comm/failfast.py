"""Fail fast: under MPI, one rank's failure ends the whole job, never a hang.

Armed once, when the MPI world communicator is created (:func:`arm`), so it covers every
way of using ddg (``init_parallel_env()``, a bare ``DataParallel``, ``ddg.distributed``):

* **An uncaught exception** on any rank prints that rank's traceback (every line prefixed
  ``[rank R] ``) and aborts the job (``MPI_Abort``), instead of leaving the other ranks
  waiting forever in their next collective. Before the world exists (an error between
  ``import ddg`` and the first collective), the rank kills itself with SIGKILL, which
  every launcher answers by ending the job (:func:`guard_early_failures`, installed when
  ``ddg.parallel`` is imported under a launcher).
* **A rank that ends while others wait for it** (its program finished early, or called
  ``sys.exit``, with any code): at exit each rank tells the others it is leaving, then
  waits for all of them in an exit barrier. A rank stuck in a collective that sees such a
  goodbye for ``exit_grace`` seconds reports who left and aborts the job. The exit wait
  is bounded too: a rank still waiting there after ``DDG_STALL_TIMEOUT`` names the ranks
  that have not finished and aborts the job, and once every rank is at its exit, goodbyes
  that take longer than a few seconds to arrive are given up on (one line says so) and the
  rank exits with its own status. The handshake works the same on one node and across
  nodes (see :func:`_leave`).
* **A rank that never starts MPI** (it failed before ``import ddg``, under a plain
  ``mpiexec``): the others wait inside ``MPI_Init`` for it, in C, where no Python thread
  runs. :func:`start_mpi` imports mpi4py (which calls ``MPI_Init``) with a watchdog
  process beside it that, past ``DDG_STALL_TIMEOUT``, says so and kills the waiting rank,
  which the launcher answers by ending the job.
* **A stalled collective**: the watchdog reports a collective that has not finished
  within ``DDG_STALL_TIMEOUT`` seconds (default 300; ``0`` turns the watchdog off) with
  its rank, name, dtype and shape, then aborts the job. That usually means the ranks
  disagree about which collectives to call (a rank that skipped an all-reduce).

The watchdog is a daemon thread. It reads the communicator's :meth:`activity` and, for
goodbyes, probes a duplicate of the world communicator; it never touches a collective in
progress. Goodbye detection needs MPI's ``THREAD_MULTIPLE`` (mpi4py's default); without
it only the stall timeout applies.
"""
import atexit
import os
import select
import signal
import sys
import threading
import time
import traceback

from .launcher_env import idle_wait_env, launched_under_mpi, launcher_rank

__all__ = ["arm", "armed", "stall_timeout", "StallWatchdog", "install_abort_excepthook",
           "guard_early_failures", "start_mpi", "DEFAULT_STALL_TIMEOUT"]

DEFAULT_STALL_TIMEOUT = 300.0
_GOODBYE_TAG = 7411
_EXIT_GRACE = 3.0
_EXIT_DRAIN = 5.0      # seconds the goodbyes may take once every rank has reached its exit

_armed = None          # the StallWatchdog (or True when the watchdog is off) once armed
_hook_installed = False


def _seconds(env, name, default, hint):
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds{hint}, got {raw!r}") from None
    if not value >= 0:
        raise ValueError(f"{name} must be >= 0 seconds{hint}, got {raw!r}")
    return value


def stall_timeout(environ=None):
    """Seconds from ``DDG_STALL_TIMEOUT`` (default 300; 0 = off)."""
    return _seconds(os.environ if environ is None else environ, "DDG_STALL_TIMEOUT", DEFAULT_STALL_TIMEOUT,
                    " (0 = off)")


def exit_grace(environ=None):
    """Seconds from ``DDG_EXIT_GRACE`` (default 3): how long a rank stuck in a collective
    waits after another rank has left before it reports that rank and ends the job. The
    grace covers a collective the leaving rank completed just before it left."""
    return _seconds(os.environ if environ is None else environ, "DDG_EXIT_GRACE", _EXIT_GRACE, "")


def armed():
    """Whether :func:`arm` ran: the world communicator exists and failures end the job
    through it (launch/rank_guard.py asks)."""
    return _armed is not None


def arm(comm):
    """Install the fail-fast machinery for ``comm`` (an MPICommunicator on the world);
    idempotent. Collective: every rank calls it when it creates the world communicator."""
    global _armed
    if _armed is not None:
        return
    install_abort_excepthook(comm.rank, comm.abort)
    timeout = stall_timeout()
    if timeout <= 0:
        _armed = True
        return
    bye = _goodbye_channel(comm)
    watchdog = StallWatchdog(comm, timeout, on_stall=lambda msg: _abort(comm), goodbye=bye,
                             exit_grace=exit_grace())
    _armed = watchdog.start()
    if bye is not None:
        atexit.register(_leave, bye, watchdog, timeout)


def _abort(comm):
    sys.stderr.flush()
    time.sleep(0.2)    # let the launcher forward what this rank printed
    comm.abort(1)


# ---------------------------------------------------------------------------
# Abort the whole job on one rank's uncaught exception

def install_abort_excepthook(rank, abort):
    """Make an uncaught exception print a rank-prefixed traceback, then call ``abort(1)``."""
    global _hook_installed
    _abort_with[:] = [rank, abort]
    if _hook_installed:
        return
    previous = sys.excepthook

    def hook(etype, value, tb):
        rank, abort = _abort_with
        try:
            text = "".join(traceback.format_exception(etype, value, tb))
            sys.stderr.write("".join(f"[rank {rank}] {line}\n" for line in text.splitlines()))
            sys.stderr.flush()
            sys.stdout.flush()
        except Exception:      # a broken stderr: fall back to the default printing
            previous(etype, value, tb)
        finally:
            # Give the launcher a moment to forward the traceback: on Abort, mpiexec may
            # tear the job down before it has drained this rank's stderr pipe.
            time.sleep(0.2)
            abort(1)

    sys.excepthook = hook
    _hook_installed = True


_abort_with = []


def _kill_self(code):
    # Before MPI is initialized there is nothing to abort, and MPICH's hydra waits forever
    # for a rank that exits with an error before connecting to it; a rank killed by a
    # signal, though, makes every launcher end the whole job at once.
    os.kill(os.getpid(), signal.SIGKILL)


def guard_early_failures():
    """Under an MPI launcher, before the world communicator exists: an uncaught exception
    prints the traceback and kills this rank with SIGKILL, so the launcher ends the job
    instead of the other ranks waiting for this one forever. :func:`arm` replaces the
    kill with ``MPI_Abort`` once the world exists. Under ddgrun, whose rank guard
    (launch/rank_guard.py) already watches for such failures, that guard stays in charge."""
    if _hook_installed or not launched_under_mpi() or getattr(sys.excepthook, "ddgrun_rank_guard", False):
        return
    rank = launcher_rank()
    install_abort_excepthook("?" if rank is None else rank, _kill_self)


# ---------------------------------------------------------------------------
# Goodbyes: a rank at exit tells the others, then waits for them

class _Goodbye:
    """A duplicate of the world communicator that carries only goodbye messages."""

    def __init__(self, comm, mpi_comm, MPI):
        self.rank, self.size = comm.rank, comm.size
        self.comm, self.MPI = mpi_comm, MPI
        self.left = None                 # the first rank seen leaving

    def someone_left(self):
        """The rank of a goodbye waiting here, or None (a non-blocking probe)."""
        if self.left is None:
            status = self.MPI.Status()
            if self.comm.Iprobe(source=self.MPI.ANY_SOURCE, tag=_GOODBYE_TAG, status=status):
                self.left = status.Get_source()
        return self.left


def _goodbye_channel(comm):
    MPI = _mpi()
    if comm.size < 2 or MPI.Query_thread() != MPI.THREAD_MULTIPLE:
        return None
    return _Goodbye(comm, comm.comm.Dup(), MPI)


def _mpi():
    from mpi4py import MPI
    return MPI


def start_mpi(timeout=None):
    """``from mpi4py import MPI`` (which runs ``MPI_Init``), never waiting forever.

    ``MPI_Init`` returns only once every rank of the job has called it. A rank that died
    before (an ``ImportError`` on one node, a crash before ``import ddg``) leaves the
    others inside it, in C and holding the GIL, so no thread of this process can help.
    A forked watchdog process (forked before MPI starts, so MPI never sees it) waits for
    a byte on a pipe; if ``MPI_Init`` has not returned after ``timeout`` seconds
    (``DDG_STALL_TIMEOUT``, default 300; 0: wait as long as it takes), it prints why and
    kills this rank with SIGKILL, and the launcher ends the job.

    Before MPI starts, a node with more ranks than CPUs gets MPICH's sleeping wait
    (:func:`~.launcher_env.idle_wait_env`)."""
    if "mpi4py.MPI" in sys.modules:
        return _mpi()
    os.environ.update(idle_wait_env())     # read by MPI_Init: oversubscribed ranks sleep when waiting
    timeout = stall_timeout() if timeout is None else timeout
    if not timeout or not hasattr(os, "fork"):
        return _mpi()
    rank = launcher_rank()
    # everything the child needs is built here: after fork it only makes system calls
    # (another thread may hold the import lock or a malloc lock at the fork)
    read_end, write_end = os.pipe()
    parent = os.getpid()
    msg = (f"[rank {rank}] ddg: MPI_Init has not returned after {timeout:g} s (DDG_STALL_TIMEOUT): "
           f"some rank of this job never started MPI (it probably failed before `import ddg`: look "
           f"for its traceback above). Ending this rank.\n").encode()
    child = os.fork()
    if child == 0:  # the watchdog: only os calls from here on
        try:
            os.close(write_end)
            ready, _, _ = select.select([read_end], [], [], timeout)
            if not ready:
                os.write(2, msg)
                os.kill(parent, signal.SIGKILL)
        finally:
            os._exit(0)
    os.close(read_end)
    try:
        return _mpi()
    finally:
        try:
            os.write(write_end, b"k")
        except OSError:  # the watchdog is gone already
            pass
        os.close(write_end)
        os.waitpid(child, 0)


def _leave(bye, watchdog, timeout):
    """At exit: tell every rank this one is leaving, wait (at most ``timeout`` seconds, the
    stall timeout) until all have reached their exit too, then collect their goodbyes
    (at most :data:`_EXIT_DRAIN` seconds) before MPI is finalized.

    Nothing here waits on a point-to-point receive from ``ANY_SOURCE``: over MPICH's
    network path (UCX, ranks on different nodes) such a receive posted after a barrier
    never matches a message that arrived before it. The goodbyes are received from each
    rank by name, and posted before the exit barrier, so each one is an expected message.
    Whether every rank has arrived is the barrier's answer, not the goodbyes': if they
    cannot be collected in time, this rank says so in one line and exits anyway with its
    own status."""
    MPI = bye.MPI
    if MPI.Is_finalized():
        return
    watchdog.stop()
    comm = bye.comm
    others = [r for r in range(bye.size) if r != bye.rank]
    note = bytearray(1)
    sinks = [bytearray(1) for _ in others]
    sends = [comm.Isend([note, MPI.BYTE], dest=r, tag=_GOODBYE_TAG) for r in others]
    recvs = [comm.Irecv([sink, MPI.BYTE], source=r, tag=_GOODBYE_TAG) for sink, r in zip(sinks, others)]
    barrier = comm.Ibarrier()
    start = time.monotonic()
    if not _poll(barrier.Test, start + timeout):
        missing = [r for r, req in zip(others, recvs) if not req.Test()]
        sys.stderr.write(
            f"[rank {bye.rank}] ddg: this rank's program ended {timeout:g} s ago, but "
            f"rank{'s' if len(missing) != 1 else ''} {', '.join(map(str, missing)) or '?'} "
            f"{'have' if len(missing) != 1 else 'has'} not finished yet (DDG_STALL_TIMEOUT); ending the job\n")
        _abort(watchdog.comm)
        return
    everything = recvs + sends
    if not _poll(lambda: MPI.Request.Testall(everything), time.monotonic() + _EXIT_DRAIN):
        missing = [r for r, req in zip(others, recvs) if not req.Test()]
        sys.stderr.write(
            f"[rank {bye.rank}] ddg: every rank reached its exit, but the exit handshake did not "
            f"complete within {_EXIT_DRAIN:g} s (goodbyes from ranks {missing} not received); "
            f"exiting anyway\n")
        sys.stderr.flush()
        for req in recvs:
            if req != MPI.REQUEST_NULL:
                req.Cancel()
        for req in everything:
            if req != MPI.REQUEST_NULL:
                req.Free()


def _poll(done, deadline):
    """Call ``done()`` until it is true (returns True) or ``deadline`` passes (False)."""
    pause = 0.0005
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.01)
    return True


# ---------------------------------------------------------------------------
# The watchdog

def format_activity(what):
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
    """A daemon thread that watches ``comm``'s blocking calls.

    A call running longer than ``timeout`` seconds is reported once on ``stream``
    (default stderr) and passed to ``on_stall(message)``. With a ``goodbye`` channel, a
    call stuck for ``exit_grace`` seconds while another rank has left is reported the same
    way. Without ``on_stall`` the watchdog only reports.
    """

    def __init__(self, comm, timeout, stream=None, period=None, on_stall=None, goodbye=None,
                 exit_grace=_EXIT_GRACE):
        self.comm = comm
        self.timeout = float(timeout)
        self.stream = stream
        self.period = period if period is not None else min(1.0, max(0.05, self.timeout / 4))
        self.on_stall = on_stall
        self.goodbye = goodbye
        self.exit_grace = min(float(exit_grace), self.timeout)
        self._reported = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddg-stall-watchdog", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def check(self, now=None):
        """Report the current stall if any; returns the message printed, or None."""
        busy = self.comm.activity()
        if busy is None:
            return None
        what, since = busy
        if since == self._reported:
            return None
        waited = (time.monotonic() if now is None else now) - since
        if waited >= self.timeout:
            reason = (f"; ending the job (DDG_STALL_TIMEOUT={self.timeout:g} s). The ranks probably "
                      f"disagree about which collectives to call" if self.on_stall else "")
        elif waited >= self.exit_grace and self.goodbye is not None and self.goodbye.someone_left() is not None:
            reason = (f" while rank {self.goodbye.left} has already left (its program ended or "
                      f"called sys.exit); ending the job. If the ranks have different numbers of "
                      f"batches, train under `with model.join():` (ddg.DataParallel)")
        else:
            return None
        self._reported = since
        msg = f"[rank {self.comm.rank}] stalled for {waited:.0f} s in {format_activity(what)}{reason}\n"
        stream = self.stream or sys.stderr
        stream.write(msg)
        stream.flush()
        if self.on_stall is not None:
            self.on_stall(msg)
        return msg

    def _run(self):
        while not self._stop.wait(self.period):
            try:
                self.check()
            except Exception:  # never let the watchdog kill anything by accident
                pass
