"""``ddg.distributed.spawn``: start N ranks of a Python function from Python, as
Paddle's ``paddle.distributed.spawn`` does.

The ranks are a ddgrun job (``mpiexec`` underneath, each rank through ddgrun's rank
guard), so they are MPI ranks like any other: ``func`` calls
``ddg.distributed.init_parallel_env()`` and trains. ``func`` and ``args`` travel to the
ranks pickled (a function defined in the main script is found there again: the
script is imported by each rank under the name ``__mp_main__``, so its
``if __name__ == "__main__":`` block does not run again, as with multiprocessing's
"spawn" start method).
"""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

__all__ = ["spawn", "MultiprocessContext"]

_OPTIONS = ("gpus", "start_method", "backend", "ips")


class MultiprocessContext:
    """The running job of :func:`spawn`: ``join()`` waits for it and raises when a rank
    failed; ``returncode`` is its exit status once it has ended."""

    def __init__(self, proc, workdir, nprocs):
        self._proc, self._workdir, self.nprocs = proc, workdir, nprocs
        self.returncode = None

    def join(self, timeout=None):
        """Wait for every rank (at most ``timeout`` seconds: then returns False); True
        when the job has ended successfully. A failed rank raises RuntimeError (its
        traceback was printed by that rank, prefixed with its rank)."""
        try:
            rc = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        self.returncode = rc
        shutil.rmtree(self._workdir, ignore_errors=True)
        if rc != 0:
            raise RuntimeError(f"ddg.distributed.spawn: the job of {self.nprocs} rank(s) failed with exit status "
                               f"{rc} (the failing rank printed its error above)")
        return True

    def pids(self):
        return [self._proc.pid]


def _default_nprocs():
    from ..tensor import backend
    if backend.cupy_available():
        n = backend.cupy_module().cuda.runtime.getDeviceCount()
        if n > 0:
            return n
    return 1


def spawn(func, args=(), nprocs=-1, join=True, daemon=False, **options):
    """Run ``func(*args)`` on ``nprocs`` ranks (-1: one per visible GPU, else 1) and, with
    ``join=True``, wait for them (a failed rank raises RuntimeError). Options: ``gpus``
    ('0,1': the devices the ranks may use, as CUDA_VISIBLE_DEVICES); ``start_method``
    and ``backend`` are accepted for Paddle's sake and ignored (the ranks are always
    fresh MPI processes); ``daemon`` too. Returns a :class:`MultiprocessContext`."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise TypeError(f"ddg.distributed.spawn: unknown option(s) {unknown}; known: {list(_OPTIONS)}")
    if options.get("ips") not in (None, "127.0.0.1", "localhost"):
        raise ValueError("ddg.distributed.spawn starts ranks on this machine only; for several machines use "
                         "ddgrun or python -m ddg.distributed.launch --ips ...")
    if not callable(func):
        raise TypeError(f"ddg.distributed.spawn: func must be callable, got {type(func).__name__}")
    nprocs = _default_nprocs() if nprocs in (None, -1) else int(nprocs)
    if nprocs < 1:
        raise ValueError(f"ddg.distributed.spawn: nprocs must be >= 1 (or -1), got {nprocs}")
    workdir = tempfile.mkdtemp(prefix="ddg-spawn-")
    try:
        main = sys.modules.get("__main__")
        main_file = getattr(main, "__file__", None) if getattr(func, "__module__", None) == "__main__" else None
        with open(os.path.join(workdir, "job.json"), "w") as f:
            json.dump({"main_file": main_file and os.path.abspath(main_file),
                       "sys_path": [p for p in sys.path if isinstance(p, str)]}, f)
        try:
            with open(os.path.join(workdir, "job.pkl"), "wb") as f:
                pickle.dump((func, tuple(args)), f, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError) as e:
            raise TypeError(f"ddg.distributed.spawn: func and args must be picklable (a function defined at "
                            f"the top level of a module or of the main script; not a lambda or a nested "
                            f"function): {e}") from None
        env = dict(os.environ)
        if options.get("gpus"):
            env["CUDA_VISIBLE_DEVICES"] = str(options["gpus"])
        cmd = [sys.executable, "-m", "launch.ddgrun", "-n", str(nprocs),
               sys.executable, "-m", "ddg.distributed._spawn_worker", workdir]
        proc = subprocess.Popen(cmd, env=env)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    context = MultiprocessContext(proc, workdir, nprocs)
    if join:
        context.join()
    return context
