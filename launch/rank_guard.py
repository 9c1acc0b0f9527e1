"""One rank of a ``ddgrun`` job: runs the user's script (or ``-m module``) as ``python``
would, with a guard armed before the first line of it.

Why: MPICH's mpiexec ends a job when a rank dies of a signal, but not when a rank that
never initialized MPI exits with an error: the other ranks then wait for it in their
first collective forever. ``import ddg`` arms such a guard itself (see
``ddg.parallel.comm.failfast.guard_early_failures``), but a rank can fail before it
imports ddg (an ``ImportError`` of another package on one node, a bad path, a typo).
Under this guard, an uncaught exception or a non-zero ``sys.exit`` before ddg's world
communicator exists prints the error, tagged with the rank, and a line that ddgrun
watches for (:data:`MARKER`): ddgrun then stops mpiexec, ending every rank, and exits
with that rank's status. Once the world exists, ddg's own fail-fast (MPI_Abort on an
uncaught exception, goodbyes at exit) takes over.

Usage (ddgrun writes this for you): ``python [options] rank_guard.py script.py [args]``
or ``python [options] rank_guard.py -m module [args]``. It imports nothing of ddg but
the launcher-variable list, loaded by file path (``import ddg`` may be what fails).
"""
import importlib.util
import os
import runpy
import sys
import traceback

_HERE = os.path.abspath(__file__)
# The line ddgrun reads on the job's stdout (launch/ddgrun.py matches it).
MARKER = "[ddgrun] rank {rank} failed before the job's first collective (exit status {code}); ending the job"


def _launcher_env():
    """ddg's launcher-variable module, loaded from its file (None if it cannot be)."""
    path = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "ddg", "parallel", "comm", "launcher_env.py")
    try:
        spec = importlib.util.spec_from_file_location("_ddg_launcher_env", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (OSError, ImportError):
        return None
    return module


_ENV = _launcher_env()


def _under_mpi():
    return _ENV is None or _ENV.launched_under_mpi()


def _rank():
    rank = None if _ENV is None else _ENV.launcher_rank()
    if rank is None:
        return "0" if not _under_mpi() else "?"
    return rank


def _world_armed():
    """True once ddg created the world communicator (its fail-fast is then in charge)."""
    failfast = sys.modules.get("ddg.parallel.comm.failfast")
    return failfast is not None and failfast.armed()


_console = [None]      # the job's stdout when this rank's output goes to a log file


def _report(code):
    """Tell ddgrun (on the job's stdout, which it reads) that this rank failed with ``code``."""
    sys.stderr.flush()
    sys.stdout.flush()
    line = (MARKER.format(rank=_rank(), code=code) + "\n").encode()
    os.write(_console[0] if _console[0] is not None else sys.stdout.fileno(), line)


def _log_to_dir(log_dir):
    """``DDG_LOG_DIR`` (python -m ddg.distributed.launch --log_dir): this rank's stdout
    and stderr go to ``log_dir/workerlog.<rank>``."""
    os.makedirs(log_dir, exist_ok=True)
    fd = os.open(os.path.join(log_dir, f"workerlog.{_rank()}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    _console[0] = os.dup(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _user_frames(tb):
    """The traceback without this file's and runpy's frames on top."""
    def ours(filename):
        return filename in (_HERE, "<frozen runpy>") or os.path.basename(filename) == "runpy.py"
    while tb is not None and ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def _excepthook(kind, value, tb):
    lines = traceback.format_exception(kind, value, _user_frames(tb))
    rank = _rank()
    sys.stderr.write("".join(f"[rank {rank}] {line}" for chunk in lines for line in chunk.splitlines(True)))
    _report(1)                                   # Python then exits with status 1


_excepthook.ddgrun_rank_guard = True             # ddg's own early guard leaves this one in place


def _node_threads():
    """The thread counts ddgrun chose (``DDG_AUTO_THREADS``, not the user's), set again
    from this node's cores and the number of ranks the launcher started on it: ddgrun
    only knows the machine it runs on, and across nodes they may differ."""
    auto = os.environ.pop("DDG_AUTO_THREADS", "")
    ranks = None if _ENV is None else _ENV.launcher_local_size()
    if not auto or not ranks:
        return
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    for var in auto.split(","):
        os.environ[var] = str(max(1, cores // ranks))


def main(argv):
    if not argv:
        sys.exit("usage: rank_guard.py (script.py | -m module) [args...]")
    _node_threads()
    if os.environ.get("DDG_LOG_DIR"):
        _log_to_dir(os.environ["DDG_LOG_DIR"])
    if _under_mpi():
        sys.excepthook = _excepthook
    try:
        if argv[0] == "-m":
            if len(argv) < 2:
                sys.exit("rank_guard.py: -m needs a module name")
            sys.argv = [argv[1]] + argv[2:]
            sys.path[0] = os.getcwd()               # what `python -m` puts first
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))   # what `python script.py` puts first
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0) and _under_mpi() and not _world_armed():
            _report(e.code if isinstance(e.code, int) else 1)
        raise


if __name__ == "__main__":
    main(sys.argv[1:])
