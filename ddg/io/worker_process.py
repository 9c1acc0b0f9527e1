"""DataLoader worker processes (``num_workers > 0``): fetching and collating in forked
processes, batches passed back through shared memory.

Why processes: decoding and augmenting images in Python holds the GIL, so threads do
not run it in parallel. Each worker is a fork of the loading process: it inherits the
dataset (nothing is pickled on the way in), fetches the batches it is given and
collates them into numpy arrays, which travel back through shared memory: one block
per batch, written once by the worker and mapped without a copy by the loader. A block
has no name (a memfd on Linux): its descriptor is passed over a socket, so no kill of
the loader or a worker at any moment leaves a file in ``/dev/shm`` (``use_shared_memory
=False`` pickles the arrays through the result queue instead). The loader turns them into
Tensors on its own device. Workers never touch the GPU or MPI: a forked copy of an
MPI rank must not make MPI calls, so a worker ends with ``os._exit`` (no atexit
handlers, no MPI_Finalize), and a dataset should return numpy or Python data, not GPU
arrays.

Each worker seeds Python's ``random``, ``numpy.random`` and ddg's host generator with
``base_seed + worker id``, where ``base_seed`` comes from ``ddg.seed``'s value and how
many times the loader was iterated: augmentations differ between workers and epochs,
and repeat under the same ``ddg.seed``.
A worker that dies (killed, out of memory, a crash in C code) is reported by the loader
with its id, pid and exit status instead of leaving it waiting; a loading process that
dies takes its workers with it at once (:func:`_die_with_parent`), so that a launcher
sees a killed rank end as fast as one without workers. (On Linux that signal follows the
thread that started the iteration: iterate a loader in a thread that lives as long as
the iteration, as a training loop does.)
"""
import multiprocessing
import mmap
import os
import pickle
import queue
import random
import signal
import socket
import tempfile
import threading
import time
import traceback
import weakref

import numpy as np

from ..tensor import backend
from .worker_info import WorkerInfo, _worker_local

__all__ = ["ProcessIter", "process_workers_available"]

_SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
_INLINE_BYTES = 1024          # smaller arrays travel pickled with the message
_END = "__ddg_dataloader_end__"


def process_workers_available():
    return "fork" in multiprocessing.get_all_start_methods()


# ---------------------------------------------------------------------------
# shared-memory transport

class _Shm:
    """A numpy array at ``offset`` in a batch's shared-memory block."""
    __slots__ = ("offset", "dtype", "shape")

    def __init__(self, offset, dtype, shape):
        self.offset, self.dtype, self.shape = offset, dtype, shape


class _Packed:
    """A batch whose large arrays live in one anonymous shared-memory block of
    ``nbytes``; the block's file descriptor travels beside the message, on the worker's
    socket (``fd`` is set by the loader when it takes the message off the queue)."""
    __slots__ = ("nbytes", "tree", "fd")

    def __init__(self, nbytes, tree):
        self.nbytes, self.tree, self.fd = nbytes, tree, None


_ALIGN = 64


def _layout(obj, arrays, offset):
    """``obj`` with each large array replaced by its ``_Shm`` place; ``arrays`` collects
    (place, array); returns (tree, end offset)."""
    if isinstance(obj, np.ndarray):
        if obj.nbytes < _INLINE_BYTES or obj.dtype.hasobject:
            return obj, offset
        # bfloat16's dtype.str is '<V2' (raw bytes): it goes by name
        place = _Shm(offset, "bfloat16" if obj.dtype.name == "bfloat16" else obj.dtype.str, obj.shape)
        arrays.append((place, obj))
        return place, offset + -(-obj.nbytes // _ALIGN) * _ALIGN
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out[k], offset = _layout(v, arrays, offset)
        return out, offset
    if type(obj) in (list, tuple):
        items = []
        for v in obj:
            item, offset = _layout(v, arrays, offset)
            items.append(item)
        return type(obj)(items), offset
    return obj, offset


def _anonymous_file(nbytes):
    """A file descriptor of ``nbytes`` of shared memory that has no name, so that no
    kill at any moment can leave it behind (memfd on Linux; elsewhere a file in the
    shared-memory folder, named after the loading process, unlinked as soon as it is
    created)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("ddg-loader", getattr(os, "MFD_CLOEXEC", 0))
    else:
        fd, path = tempfile.mkstemp(prefix=f"ddg-loader-{os.getppid()}-", dir=_SHM_DIR)
        os.unlink(path)
    try:
        os.ftruncate(fd, nbytes)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _encode(obj, sock):
    """The message for a collated batch. Its large arrays are copied into one nameless
    shared-memory block whose descriptor is sent on ``sock`` (before the message itself
    is queued, so that the loader finds it there when it reads the message)."""
    arrays = []
    tree, nbytes = _layout(obj, arrays, 0)
    if not arrays:
        return obj
    fd = _anonymous_file(nbytes)
    try:
        mm = mmap.mmap(fd, nbytes)
        try:
            for place, a in arrays:
                np.frombuffer(mm, dtype=a.dtype, count=a.size, offset=place.offset).reshape(a.shape)[...] = a
        finally:
            mm.close()
        socket.send_fds(sock, [b"f"], [fd])
    finally:
        os.close(fd)
    return _Packed(nbytes, tree)


def _receive(payload, sock):
    """Attach the descriptor of a ``_Packed`` message, read from its worker's socket."""
    if isinstance(payload, _Packed):
        _, fds, _, _ = socket.recv_fds(sock, 1, 1)
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise RuntimeError("DataLoader: a worker's shared-memory block did not arrive with its batch")
        payload.fd = fds[0]
    return payload


def _rebuild(obj, mm):
    if isinstance(obj, _Shm):
        count = int(np.prod(obj.shape, dtype=np.int64))
        return np.frombuffer(mm, dtype=obj.dtype, count=count, offset=obj.offset).reshape(obj.shape)
    if isinstance(obj, dict):
        return {k: _rebuild(v, mm) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_rebuild(v, mm) for v in obj)
    return obj


def _decode(payload):
    if not isinstance(payload, _Packed):
        return payload
    try:
        # private: the batch's arrays are writable without touching the worker's pages
        mm = mmap.mmap(payload.fd, payload.nbytes, prot=mmap.PROT_READ | mmap.PROT_WRITE, flags=mmap.MAP_PRIVATE)
    finally:
        _discard(payload)
    return _rebuild(payload.tree, mm)


def _discard(payload):
    """Release the shared memory of a message (its descriptor) once taken or unused."""
    if isinstance(payload, _Packed) and payload.fd is not None:
        fd, payload.fd = payload.fd, None
        os.close(fd)


# ---------------------------------------------------------------------------
# dying with the loading process

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid):
    """Make this worker end as soon as the process that started it does, however that
    one ends (SIGKILL by the out-of-memory killer included): on Linux the kernel sends
    SIGKILL at the parent's death (``prctl(PR_SET_PDEATHSIG)``); everywhere a daemon
    thread checks the parent pid ten times a second as well. An orphan would otherwise
    keep the rank's output pipes open, and the launcher would not see the rank end."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:        # died before the prctl took effect
        os._exit(1)

    def watch():
        while True:
            time.sleep(0.1)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="ddg-DataLoader-parent-watch", daemon=True).start()


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


def _worker_main(loader, wid, num_workers, seed, tasks, results, slots, stop, sock, parent_pid):
    """Runs in the forked worker; never returns (``os._exit``)."""
    code = 0
    try:
        _die_with_parent(parent_pid)
        signal.signal(signal.SIGINT, signal.SIG_IGN)      # the loading process handles Ctrl-C
        _worker_local.info = WorkerInfo(wid, num_workers, loader.dataset, seed + wid)
        random.seed(seed + wid)
        np.random.seed((seed + wid) % 2 ** 32)
        backend.seed_host(seed + wid)
        pack = (lambda batch: _encode(batch, sock)) if loader.use_shared_memory else (lambda batch: batch)
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
                        results.put((wid, seq, True, pack(batch)))
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
                    results.put((wid, seq, True, pack(batch)))
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
        self.socks = []                      # the loader's ends of the workers' sockets

    def shutdown(self):
        if self.stop is not None:
            self.stop.set()
        for sock in self.socks:              # a worker blocked sending a block gets EPIPE;
            sock.close()                     # descriptors still in flight go with them
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
            while True:                      # batches nobody will read
                try:
                    self.results.get_nowait()
                except (queue.Empty, OSError, ValueError, EOFError):
                    break
            self.results.close()
        for q in self.tasks:
            q.close()


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
        w.results = ctx.Queue()
        w.stop = ctx.Event()
        # from ddg's seed and the loader's iteration count, without drawing from ddg's
        # generator (which would change the shuffled order against num_workers=0)
        seed = int(np.random.SeedSequence([backend.initial_seed() & (2 ** 63 - 1), loader._iterations])
                   .generate_state(1)[0] >> 1)
        self._stream = loader._iterable
        self._done = False
        self._ready = {}
        for wid in range(n):
            tasks = None if self._stream else ctx.SimpleQueue()
            slots = ctx.Semaphore(loader.prefetch_factor) if self._stream else None
            mine, theirs = socket.socketpair()
            mine.settimeout(30.0)            # a block is sent before its message: never waits long
            w.socks.append(mine)
            p = ctx.Process(target=_worker_main, name=f"ddg-DataLoader-worker-{wid}", daemon=True,
                            args=(loader, wid, n, seed, tasks, w.results, slots, w.stop, theirs, os.getpid()))
            try:
                p.start()
            finally:
                theirs.close()
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
            if ok:
                payload = _receive(payload, self._w.socks[wid])
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
