"""DataLoader worker processes (``num_workers > 0``): fetching and collating in forked
processes, batches passed back through shared memory.

Why processes: decoding and augmenting images in Python holds the GIL, so threads do
not run it in parallel. Each worker is a fork of the loading process: it inherits the
dataset (nothing is pickled on the way in), fetches the batches it is given and
collates them into numpy arrays, which travel back through files in ``/dev/shm``
(written once by the worker, mapped without a copy by the loader; ``use_shared_memory
=False`` pickles them through the result queue instead). The loader turns them into
Tensors on its own device. Workers never touch the GPU or MPI: a forked copy of an
MPI rank must not make MPI calls, so a worker ends with ``os._exit`` (no atexit
handlers, no MPI_Finalize), and a dataset should return numpy or Python data, not GPU
arrays.

Each worker seeds Python's ``random``, ``numpy.random`` and ddg's host generator with
``base_seed + worker id``, where ``base_seed`` comes from ``ddg.seed``'s value and how
many times the loader was iterated: augmentations differ between workers and epochs,
and repeat under the same ``ddg.seed``.
A worker that dies (killed, out of memory, a crash in C code) is reported by the loader
with its id, pid and exit status instead of leaving it waiting.
"""
import itertools
import multiprocessing
import os
import pickle
import queue
import random
import signal
import tempfile
import traceback
import weakref

import numpy as np

from ..tensor import backend
from .worker_info import WorkerInfo, _worker_local

__all__ = ["ProcessIter", "process_workers_available"]

_SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
_INLINE_BYTES = 1024          # smaller arrays travel pickled with the message
_END = "__ddg_dataloader_end__"
_counter = itertools.count()


def process_workers_available():
    return "fork" in multiprocessing.get_all_start_methods()


# ---------------------------------------------------------------------------
# shared-memory transport

class _Shm:
    """A numpy array stored in a shared-memory file (picklable: the file's name)."""
    __slots__ = ("path", "dtype", "shape")

    def __init__(self, path, dtype, shape):
        self.path, self.dtype, self.shape = path, dtype, shape


def _encode(obj, prefix, use_shm):
    if isinstance(obj, np.ndarray):
        if not use_shm or obj.nbytes < _INLINE_BYTES or obj.dtype.hasobject:
            return obj
        path = f"{prefix}-{os.getpid()}-{next(_counter)}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, obj.nbytes)
            with open(fd, "r+b", closefd=False) as f:
                import mmap
                mm = mmap.mmap(f.fileno(), obj.nbytes)
                np.frombuffer(mm, dtype=obj.dtype, count=obj.size).reshape(obj.shape)[...] = obj
                mm.close()
        finally:
            os.close(fd)
        # bfloat16's dtype.str is '<V2' (raw bytes): it goes by name
        return _Shm(path, "bfloat16" if obj.dtype.name == "bfloat16" else obj.dtype.str, obj.shape)
    if isinstance(obj, dict):
        return {k: _encode(v, prefix, use_shm) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_encode(v, prefix, use_shm) for v in obj) if type(obj) in (list, tuple) else obj
    return obj


def _decode(obj):
    if isinstance(obj, _Shm):
        import mmap
        nbytes = int(np.prod(obj.shape, dtype=np.int64)) * np.dtype(obj.dtype).itemsize
        fd = os.open(obj.path, os.O_RDONLY)
        try:
            os.unlink(obj.path)            # the mapping stays valid; the name goes now
            mm = mmap.mmap(fd, nbytes, prot=mmap.PROT_READ | mmap.PROT_WRITE, flags=mmap.MAP_PRIVATE)
        finally:
            os.close(fd)
        return np.frombuffer(mm, dtype=obj.dtype).reshape(obj.shape)
    if isinstance(obj, dict):
        return {k: _decode(v) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_decode(v) for v in obj)
    return obj


def _discard(obj):
    """Remove the shared-memory files of a message that will not be decoded."""
    if isinstance(obj, _Shm):
        try:
            os.unlink(obj.path)
        except OSError:
            pass
    elif isinstance(obj, dict):
        for v in obj.values():
            _discard(v)
    elif type(obj) in (list, tuple):
        for v in obj:
            _discard(v)


# ---------------------------------------------------------------------------
# the worker

def _error(wid, exc):
    text = traceback.format_exc()
    try:
        pickle.dumps(exc)
        payload = exc
    except Exception:
        payload = RuntimeError(f"{type(exc).__name__}: {exc}")
    return (payload, wid, text)


def _worker_main(loader, wid, num_workers, seed, tasks, results, slots, stop, prefix):
    """Runs in the forked worker; never returns (``os._exit``)."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)      # the loading process handles Ctrl-C
        _worker_local.info = WorkerInfo(wid, num_workers, loader.dataset, seed + wid)
        random.seed(seed + wid)
        np.random.seed((seed + wid) % 2 ** 32)
        backend.seed_host(seed + wid)
        use_shm = loader.use_shared_memory
        init_error = None
        try:
            if loader.worker_init_fn is not None:
                loader.worker_init_fn(wid)
        except BaseException as e:
            init_error = _error(wid, e)
        if loader._iterable:
            seq = 0
            try:
                if init_error is not None:
                    results.put((wid, seq, False, init_error))
                else:
                    for batch in loader._iterable_batches():
                        while not slots.acquire(timeout=0.2):
                            if stop.is_set():
                                return
                        results.put((wid, seq, True, _encode(batch, prefix, use_shm)))
                        seq += 1
                    results.put((wid, seq, True, _END))
            except BaseException as e:
                results.put((wid, seq, False, _error(wid, e)))
        else:
            while True:
                task = tasks.get()
                if task is None:
                    break
                seq, index = task
                if init_error is not None:
                    results.put((wid, seq, False, init_error))
                    continue
                try:
                    batch = loader._fetch(index)
                    results.put((wid, seq, True, _encode(batch, prefix, use_shm)))
                except BaseException as e:
                    results.put((wid, seq, False, _error(wid, e)))
        results.close()
        results.join_thread()          # everything put is flushed to the pipe
    except BaseException:
        code = 1
        traceback.print_exc()
    finally:
        os._exit(code)


# ---------------------------------------------------------------------------
# the loader's side

class _Workers:
    """The processes and queues of one iteration; ``shutdown`` is its finalizer."""

    def __init__(self):
        self.procs, self.tasks, self.slots = [], [], []
        self.results = self.stop = None
        self.prefix = None

    def shutdown(self):
        if self.stop is not None:
            self.stop.set()
        for q in self.tasks:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for p in self.procs:
            p.join(timeout=2.0)
            if p.exitcode is None:
                p.kill()
                p.join(timeout=2.0)
        if self.results is not None:
            while True:                      # batches nobody will read: remove their files
                try:
                    msg = self.results.get_nowait()
                except (queue.Empty, OSError, ValueError, EOFError):
                    break
                if msg[2]:
                    _discard(msg[3])
            self.results.close()
        for q in self.tasks:
            q.close()
        if self.prefix is not None:          # files of batches still in a pipe when a worker died
            head = os.path.basename(self.prefix) + "-"
            for name in os.listdir(_SHM_DIR):
                if name.startswith(head):
                    try:
                        os.unlink(os.path.join(_SHM_DIR, name))
                    except OSError:
                        pass


def _describe_exit(code):
    return f"killed by signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"exit status {code}"


class ProcessIter:
    """An iteration over a DataLoader with worker processes (see the module docstring)."""

    def __init__(self, loader):
        self._loader = loader
        self._convert = loader._converter()
        self._timeout = loader.timeout
        n = self._n = loader.num_workers
        self._capacity = loader.prefetch_factor * n
        ctx = multiprocessing.get_context("fork")
        w = self._w = _Workers()
        self._finalizer = weakref.finalize(self, w.shutdown)
        w.prefix = os.path.join(_SHM_DIR, f"ddg-loader-{os.getpid()}-{id(self):x}")
        w.results = ctx.Queue()
        w.stop = ctx.Event()
        # from ddg's seed and the loader's iteration count, without drawing from ddg's
        # generator (which would change the shuffled order against num_workers=0)
        loader._iterations = getattr(loader, "_iterations", 0) + 1
        seed = int(np.random.SeedSequence([backend.initial_seed() & (2 ** 63 - 1), loader._iterations])
                   .generate_state(1)[0] >> 1)
        self._stream = loader._iterable
        self._done = False
        self._ready = {}
        for wid in range(n):
            tasks = None if self._stream else ctx.SimpleQueue()
            slots = ctx.Semaphore(loader.prefetch_factor) if self._stream else None
            p = ctx.Process(target=_worker_main, name=f"ddg-DataLoader-worker-{wid}", daemon=True,
                            args=(loader, wid, n, seed, tasks, w.results, slots, w.stop, w.prefix))
            p.start()
            w.procs.append(p)
            if tasks is not None:
                w.tasks.append(tasks)
            w.slots.append(slots)
        if self._stream:
            self._alive = list(range(n))     # workers whose stream has not ended, in turn order
            self._turn = 0
            self._seq = [0] * n
        else:
            self._indices = loader._index_stream()
            self._exhausted = False
            self._sent = 0
            self._next_seq = 0
            for _ in range(self._capacity):
                if not self._send():
                    break

    def _send(self):
        if self._exhausted:
            return False
        try:
            index = next(self._indices)
        except StopIteration:
            self._exhausted = True
            return False
        self._w.tasks[self._sent % self._n].put((self._sent, index))
        self._sent += 1
        return True

    def __iter__(self):
        return self

    def _check_workers(self):
        for wid, p in enumerate(self._w.procs):
            if p.exitcode is not None and p.exitcode != 0:
                self._close()
                raise RuntimeError(f"DataLoader: worker {wid} (pid {p.pid}) died ({_describe_exit(p.exitcode)}) "
                                   f"while the loader waited for its batches")

    def _wait(self):
        waited, step = 0.0, 0.2
        while True:
            try:
                return self._w.results.get(timeout=step)
            except queue.Empty:
                waited += step
                self._check_workers()
                if self._timeout and waited >= self._timeout:
                    self._close()
                    raise RuntimeError(f"DataLoader: timed out after {self._timeout} s waiting for a batch "
                                       f"from its worker processes") from None

    def _take(self, key):
        while key not in self._ready:
            wid, seq, ok, payload = self._wait()
            self._ready[(wid, seq) if self._stream else seq] = (ok, payload)
        return self._ready.pop(key)

    def __next__(self):
        if self._done:
            raise StopIteration
        if self._stream:
            while True:
                if not self._alive:
                    self._close()
                    raise StopIteration
                wid = self._alive[self._turn % len(self._alive)]
                ok, payload = self._take((wid, self._seq[wid]))
                self._seq[wid] += 1
                if ok and isinstance(payload, str) and payload == _END:
                    self._alive.remove(wid)
                    continue
                if ok:
                    self._w.slots[wid].release()
                self._turn += 1
                break
        else:
            if self._next_seq == self._sent:      # nothing in flight and the sampler is done
                self._close()
                raise StopIteration
            ok, payload = self._take(self._next_seq)
            self._next_seq += 1
        if not ok:
            self._close()
            exc, wid, text = payload
            try:
                exc.add_note(f"(raised in DataLoader worker process {wid}; its traceback:)\n{text}")
            except AttributeError:  # Python < 3.11
                pass
            raise exc
        batch = _decode(payload)
        if not self._stream:
            self._send()
        return self._convert(batch)

    def _close(self):
        self._done = True
        for ok, payload in self._ready.values():
            if ok:
                _discard(payload)
        self._ready.clear()
        self._finalizer()

    def __del__(self):
        try:
            self._finalizer()
        except Exception:
            pass
