"""CPU kernels compiled with numba, for the loops numpy cannot express in one or two
whole-array passes (an activation with its derivative, a normalization's statistics and
update, a direct convolution, a recurrent cell's step).

How a kernel is written and used::

    from ..tensor.compiled import kernel

    @kernel
    def _gelu_fwd(x, out):          # plain Python over numpy arrays, numba's subset
        for i in range(x.size):
            ...

    _gelu_fwd(x.ravel(), out.ravel())   # numpy arrays only; cupy takes its own path

- **Lazy.** ``import ddg`` does not import numba; the first call of any kernel does (about
  0.15 s), and the first call of each kernel for a given argument-type signature compiles it
  (a fraction of a second). Later calls cost a dispatch of a few microseconds.
- **Cached on disk** (numba's ``cache=True``): beside this package's sources in
  ``__pycache__`` where that is writable, else in numba's per-user cache directory, or in
  ``NUMBA_CACHE_DIR`` when set. numba writes each cache file under a temporary name and renames
  it into place, so ranks that compile the same kernel at once each write a whole file and the
  last rename wins; a reader never sees half a file.
- **Compiled once per machine.** Processes that meet a kernel's new signature at once (the
  ranks of a job on its first run) take turns on a lock file per kernel (``fcntl.flock``, in
  the temporary directory, :func:`_machine_lock`): the first compiles and writes the cache,
  the others then load it instead of compiling the same code beside it. A process that
  waits past :data:`LOCK_WAIT` seconds compiles without the lock; a lock's holder that dies
  releases it with its last file descriptor.
- **No scipy.linalg at load.** numba's import-time probe for BLAS-backed ``np.dot`` imported
  ``scipy.linalg`` in every process that ran a kernel; :class:`_DeferBlasProbe` lets that probe
  find scipy without importing it (a process running one cached kernel: 2.02 -> 1.46 s of CPU).
- **One thread** per kernel (no ``parallel=True``): ranks already fill the cores, and the
  BLAS thread count of the benchmarks is the kernel's too.
- **Helpers** shared by kernels: ``@jitable`` on a module-level function makes it callable
  from kernels (numba's ``register_jitable``, compiled into each caller). It is registered
  when the first kernel compiles, so a module of kernels still imports without numba.
- **IEEE semantics kept**: the default fast-math flags allow contraction, reassociation and
  approximate functions but not ``nnan``/``ninf``, so NaN and infinity propagate as they do in
  numpy (``FLAGS_check_nan_inf`` and AMP's overflow checks rely on it).
"""
import functools
import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
import time

import numpy as np

# fast-math without the no-NaN/no-Inf assumptions
FASTMATH = frozenset({"contract", "reassoc", "afn", "arcp", "nsz"})

# Constant arguments for calls from one kernel to another. A literal (``0``, ``False``) makes
# numba compile the callee once more, specialized to that value (``Literal[int](0)``), beside
# the signature Python's calls compile, and link every variant into its callers; numpy
# scalars type as plain int64 and bool, so every caller shares one compiled callee (the
# literal variants took ~13 s of CPU in a cold suite)
I0, NO, YES = np.int64(0), np.bool_(False), np.bool_(True)

_lock = threading.Lock()


def _numba():
    import numba  # noqa: PLC0415 - imported on the first kernel call, not with ddg
    return numba


_helpers = []    # @jitable functions not yet registered with numba


def jitable(fn):
    """Mark a module-level helper that kernels call; returns ``fn`` itself (still plain
    Python where Python calls it)."""
    _helpers.append(fn)
    return fn


def _register_helpers():
    if _helpers:
        from numba.extending import register_jitable  # noqa: PLC0415 - with the first kernel
        while _helpers:
            register_jitable(_helpers.pop())


def kernel(fn=None, **options):
    """Decorate a module-level function as a lazily compiled, disk-cached numba kernel.
    ``options`` go to ``numba.njit`` (defaults: ``cache=True``, ``fastmath=FASTMATH``,
    ``nogil=True``). The undecorated function stays reachable as ``.py_func`` (for tests
    that compare the compiled loop with the Python one)."""
    if fn is None:
        return functools.partial(kernel, **options)
    opts = {"cache": True, "fastmath": set(FASTMATH), "nogil": True}
    opts.update(options)
    compiled = []

    @functools.wraps(fn)
    def call(*args):
        if not compiled:
            with _lock:
                if not compiled:
                    _register_helpers()
                    dispatcher = _numba().njit(**opts)(fn)
                    if opts.get("cache"):
                        _compile_under_machine_lock(dispatcher)
                    compiled.append(dispatcher)
        return compiled[0](*args)

    call.py_func = fn
    call.dispatcher = lambda: compiled[0] if compiled else None
    return call


LOCK_WAIT = 120.0    # seconds a process waits for another's compile of the same kernel


def _compile_under_machine_lock(dispatcher):
    """Make ``dispatcher`` look in the disk cache and compile (on a miss) under an
    inter-process lock of its own. numba calls ``compile`` only for a signature this
    process has not loaded yet; the call that finds one goes straight to the compiled code."""
    try:
        import fcntl  # noqa: PLC0415 - POSIX only; elsewhere every process compiles, as numba does
    except ImportError:
        return
    unlocked = dispatcher.compile
    fn = dispatcher.py_func
    where = getattr(getattr(dispatcher, "_cache", None), "_cache_path", "") or ""
    key = hashlib.sha1(f"{where}|{fn.__module__}|{fn.__qualname__}".encode()).hexdigest()[:20]

    def compile_locked(sig):
        with _machine_lock(fcntl, key):
            return unlocked(sig)

    dispatcher.compile = compile_locked


class _DeferBlasProbe:
    """A one-shot import hook: numba's ``numba.np.arraymath`` calls ``ensure_blas()`` while it
    is imported (at the first compile or cache load of any kernel), only to note whether
    BLAS-backed ``np.dot`` is available; ``ensure_blas`` imports ``scipy.linalg`` to tell
    (about 0.5 s of CPU in every process that runs a kernel, where scipy is installed: each
    rank of a job, each DataLoader worker). ddg's kernels call no BLAS through numba. When
    the import of ``numba.np.arraymath`` starts, this wraps ``numba.np.linalg.ensure_blas`` so
    that the probe made during that import finds scipy by its package spec alone (no import);
    every later call (numba's linear-algebra functions, at their typing) runs numba's own
    check, so a kernel that uses BLAS still gets it and its errors. Removes itself once it
    fires; does nothing if numba's layout differs."""

    @classmethod
    def install(cls):
        if "numba.np.arraymath" not in sys.modules and not any(isinstance(f, cls) for f in sys.meta_path):
            sys.meta_path.insert(0, cls())

    def find_spec(self, name, path=None, target=None):
        if name != "numba.np.arraymath":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        try:
            import numba.np.linalg as linalg  # noqa: PLC0415 - arraymath imports it next anyway
            real = linalg.ensure_blas
        except (ImportError, AttributeError):
            return None

        def ensure_blas():
            probing = sys.modules.get("numba.np.arraymath")
            if probing is not None and not hasattr(probing, "_HAVE_BLAS") \
                    and importlib.util.find_spec("scipy") is not None:
                return None     # arraymath's import-time probe: scipy is there
            return real()

        linalg.ensure_blas = ensure_blas
        return None             # the usual finders load arraymath, which binds the wrapper


_DeferBlasProbe.install()


class _machine_lock:
    """``with _machine_lock(fcntl, key):`` holds the lock file ``key`` in the temporary
    directory (one per user), waiting at most :data:`LOCK_WAIT` seconds; past that, or
    where the file cannot be made, the body runs without it."""

    def __init__(self, fcntl, key):
        self.fcntl, self.key, self.fd = fcntl, key, None

    def __enter__(self):
        fcntl = self.fcntl
        try:
            folder = os.path.join(tempfile.gettempdir(), f"ddg-kernel-locks-{os.getuid()}")
            os.makedirs(folder, exist_ok=True)
            fd = os.open(os.path.join(folder, self.key), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return self
        deadline, pause = time.monotonic() + LOCK_WAIT, 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.fd = fd
                return self
            except OSError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    return self
                time.sleep(pause)
                pause = min(2 * pause, 0.1)

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)       # closing the descriptor releases the lock
            self.fd = None
