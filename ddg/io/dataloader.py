"""``DataLoader``: batches of a dataset as Tensors, optionally prefetched by workers.

The batch pipeline has three steps:

1. indices: the batch sampler yields lists of indices (map-style datasets), or the
   dataset's own stream is cut into batches (``IterableDataset``);
2. collate: ``collate_fn`` (default :func:`default_collate_fn`) turns a list of samples
   into one batch of stacked arrays;
3. convert: arrays in the batch become ddg Tensors on the current place.

With ``num_workers > 0``, step 1 stays in the calling thread (so random orders come
from the same generator draws as without workers), step 2's fetching and collating run
in worker processes (forked, as Paddle's: Python-level decoding and augmentation hold
the GIL; see :mod:`ddg.io.worker_process`), or in worker threads where there is no
``fork`` or with ``DDG_DATALOADER_WORKERS=thread``, and step 3 runs in the calling
thread (device placement is per thread in cupy).
"""
import itertools
import numbers
import os
import queue
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Mapping, Sequence

import numpy as np

from ..tensor import backend
from .dataset import IterableDataset
from .worker_info import WorkerInfo, _worker_local, get_worker_info  # noqa: F401
from .sampler import BatchSampler, SequenceSampler

__all__ = ["DataLoader", "default_collate_fn", "default_convert_fn", "get_worker_info"]


# ---------------------------------------------------------------------------
# collate

def _tensor_class():
    from ..tensor.tensor import Tensor
    return Tensor


def default_collate_fn(batch):
    """Stack a list of samples into one batch, field by field.

    numpy arrays are stacked along a new axis 0 (keeping their dtype), Tensors likewise
    (on their own device), Python ints become int64, floats float64 (as in Paddle), bools bool; tuples
    and lists of fields become lists of batched fields, dicts dicts; strings stay lists.
    The result holds arrays; the DataLoader makes them Tensors.
    """
    if len(batch) == 0:
        raise ValueError("default_collate_fn: empty batch")
    sample = batch[0]
    Tensor = _tensor_class()
    if isinstance(sample, Tensor):
        arrays = [s._data for s in batch]
        return backend.get_array_module(*arrays).stack(arrays, axis=0)
    if isinstance(sample, backend.ARRAY_TYPES):
        return backend.get_array_module(*batch).stack(batch, axis=0)
    if isinstance(sample, np.generic):
        return np.stack([np.asarray(s) for s in batch], axis=0)
    if isinstance(sample, bool):
        return np.array(batch, dtype=np.bool_)
    if isinstance(sample, numbers.Integral):
        return np.array(batch, dtype=np.int64)
    if isinstance(sample, numbers.Real):  # Paddle: Python floats batch as float64
        return np.array(batch, dtype=np.float64)
    if isinstance(sample, (str, bytes)):
        return list(batch)
    if isinstance(sample, Mapping):
        return {k: default_collate_fn([s[k] for s in batch]) for k in sample}
    if isinstance(sample, Sequence):
        n = len(sample)
        if any(len(s) != n for s in batch):
            raise ValueError("default_collate_fn: samples in a batch have different numbers of fields: {}"
                             .format(sorted({len(s) for s in batch})))
        return [default_collate_fn(list(field)) for field in zip(*batch)]
    raise TypeError("default_collate_fn: cannot batch samples of type {}; expected numpy arrays, "
                    "Tensors, numbers, strings, or lists/tuples/dicts of them (or pass collate_fn=)"
                    .format(type(sample).__name__))


def default_convert_fn(sample):
    """For ``batch_size=None``: a single sample as arrays, without a batch axis."""
    Tensor = _tensor_class()
    if isinstance(sample, (Tensor, str, bytes) + backend.ARRAY_TYPES):
        return sample
    if isinstance(sample, np.generic):
        return np.asarray(sample)
    if isinstance(sample, Mapping):
        return {k: default_convert_fn(v) for k, v in sample.items()}
    if isinstance(sample, (list, tuple)):
        return [default_convert_fn(v) for v in sample]
    return sample


def _to_tensors(obj, Tensor, to_tensor):
    if isinstance(obj, Tensor):
        return obj
    if isinstance(obj, backend.ARRAY_TYPES):
        if obj.dtype.kind in "biufc" or obj.dtype.name == "bfloat16":
            return to_tensor(obj)
        return obj
    if isinstance(obj, Mapping):
        return {k: _to_tensors(v, Tensor, to_tensor) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_tensors(v, Tensor, to_tensor) for v in obj]
    return obj


# ---------------------------------------------------------------------------
# the loader

_warned_replicated = [False]


# How many ranks the job has: set by the top-level package to a function of the parallel
# layer (which sits above ddg.io); 1 without it.
job_world_size = [lambda: 1]


def _warn_if_every_rank_reads_all():
    """``DataLoader(shuffle=True)`` without a distributed sampler in a job of several
    ranks: each rank iterates over the whole dataset (in its own order unless seeded
    alike), which is rarely what data-parallel training wants. Said once per process."""
    if _warned_replicated[0]:
        return
    n = job_world_size[0]()
    if n > 1:
        _warned_replicated[0] = True
        warnings.warn(f"DataLoader(shuffle=True) in a job of {n} ranks: every rank iterates over the whole "
                      f"dataset. To give each rank its own part, pass "
                      f"batch_sampler=ddg.io.DistributedBatchSampler(dataset, batch_size, shuffle=True)",
                      UserWarning, stacklevel=3)


class DataLoader:
    """Iterates over ``dataset`` in batches of Tensors (Paddle's ``paddle.io.DataLoader``).

    Give either ``batch_sampler`` or ``batch_size``/``shuffle``/``drop_last``;
    ``batch_size=None`` yields single samples without a batch axis. Samples that are
    tuples or lists come out as lists of batched Tensors. ``num_workers > 0`` fetches
    and collates in that many worker processes (threads with
    ``DDG_DATALOADER_WORKERS=thread``), keeping ``prefetch_factor * num_workers``
    batches in flight, in order; ``use_shared_memory`` (default True) passes their
    arrays through shared memory, else pickled through a pipe. ``feed_list``,
    ``places``, ``return_list``, ``use_buffer_reader`` and ``persistent_workers`` are
    accepted for Paddle compatibility and have no effect (batches go to the current
    place; workers start for each iteration).
    """

    def __init__(self, dataset, feed_list=None, places=None, return_list=True, batch_sampler=None,
                 batch_size=1, shuffle=False, drop_last=False, collate_fn=None, num_workers=0,
                 use_buffer_reader=True, prefetch_factor=2, use_shared_memory=True, timeout=0,
                 worker_init_fn=None, persistent_workers=False):
        self.dataset = dataset
        self.feed_list = feed_list
        self.places = places
        self.return_list = return_list
        self.collate_fn = collate_fn
        self.use_buffer_reader = use_buffer_reader
        self.use_shared_memory = use_shared_memory
        self.worker_init_fn = worker_init_fn
        self.persistent_workers = persistent_workers
        if not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError("DataLoader: num_workers must be a non-negative int, got {!r}".format(num_workers))
        if not isinstance(prefetch_factor, numbers.Integral) or prefetch_factor <= 0:
            raise ValueError("DataLoader: prefetch_factor must be a positive int, got {!r}"
                             .format(prefetch_factor))
        if timeout < 0:
            raise ValueError("DataLoader: timeout must be >= 0, got {!r}".format(timeout))
        self.num_workers = int(num_workers)
        self.prefetch_factor = int(prefetch_factor)
        mode = os.environ.get("DDG_DATALOADER_WORKERS", "process").strip().lower()
        if mode not in ("process", "thread"):
            raise ValueError(f"DataLoader: DDG_DATALOADER_WORKERS must be 'process' or 'thread', got {mode!r}")
        from .worker_process import process_workers_available
        self.worker_mode = mode if process_workers_available() else "thread"
        self.timeout = timeout
        self._iterable = isinstance(dataset, IterableDataset)

        if self._iterable:
            if batch_sampler is not None:
                raise ValueError("DataLoader: an IterableDataset cannot be used with a batch_sampler")
            if shuffle:
                raise ValueError("DataLoader: an IterableDataset cannot be shuffled (shuffle=True); "
                                 "shuffle inside the dataset's __iter__ instead")
            self.batch_sampler = None
            self.batch_size = batch_size
            self.drop_last = drop_last
            if batch_size is not None:
                BatchSampler(sampler=[], batch_size=batch_size, drop_last=drop_last)  # validates
        elif batch_sampler is not None:
            if shuffle or drop_last:
                raise ValueError("DataLoader: batch_sampler is mutually exclusive with shuffle and drop_last")
            self.batch_sampler = batch_sampler
            self.batch_size = getattr(batch_sampler, "batch_size", None)
            self.drop_last = getattr(batch_sampler, "drop_last", False)
        elif batch_size is None:
            if shuffle or drop_last:
                raise ValueError("DataLoader: shuffle and drop_last need a batch_size")
            self.batch_sampler = None
            self._sampler = SequenceSampler(dataset)
            self.batch_size = None
            self.drop_last = False
        else:
            self.batch_sampler = BatchSampler(dataset=dataset, shuffle=shuffle, batch_size=batch_size,
                                              drop_last=drop_last)
            if shuffle:
                _warn_if_every_rank_reads_all()
            self.batch_size = batch_size
            self.drop_last = drop_last
        self._auto_collate = self.batch_size is not None or (batch_sampler is not None)
        if collate_fn is None:
            collate_fn = default_collate_fn if self._auto_collate else default_convert_fn
        self._collate = collate_fn
        self._iterations = 0          # iterations started (seeds the worker processes)
        self._position = 0            # batches handed out by the current iteration
        self._active = False          # an iteration started and not yet exhausted
        self._start = None            # (generator state, sampler epoch) when it started
        self._resume = None           # a position to resume the next iteration from

    def __len__(self):
        if self._iterable:
            raise TypeError("DataLoader over an IterableDataset has no len()")
        if self.batch_sampler is None:
            return len(self.dataset)
        return len(self.batch_sampler)

    def __iter__(self):
        resume, self._resume = self._resume, None
        if resume is not None and resume["active"]:
            self._start = (resume["rng"], resume["epoch"])
            self._position = resume["position"]
        else:
            self._start = (backend.get_rng_state(), getattr(self.batch_sampler, "epoch", None))
            self._position = 0
        self._skip = self._position if resume is not None and resume["active"] else None
        self._iterations += 1
        self._active = True
        if self.num_workers == 0:
            it = _SingleThreadIter(self)
        elif self.worker_mode == "process":
            from .worker_process import ProcessIter
            it = ProcessIter(self)
        else:
            it = _ThreadedIter(self)
        return _Tracked(it, self)

    # -- where an iteration is, to resume it in a restarted process ---------------
    def position_state(self):
        """Where this loader is: the batches its current iteration has handed out, and
        what that iteration's order came from (the global generator's state and the
        batch sampler's epoch when it started). :meth:`set_position_state` in a fresh
        process makes the next iteration continue from there, skipping the batches
        already handed out without loading them; ``ddg.distributed.elastic.State``
        saves this with each commit."""
        if self._iterable and self._active:
            raise ValueError("DataLoader.position_state: a loader over an IterableDataset cannot "
                             "resume inside an iteration (its stream has no positions); commit between epochs")
        rng, epoch = self._start if self._start is not None else (None, None)
        return {"active": self._active, "position": self._position, "rng": rng, "epoch": epoch,
                "iterations": self._iterations - (1 if self._active else 0),
                "sampler_epoch": getattr(self.batch_sampler, "epoch", None)}

    def set_position_state(self, state):
        """Resume from :meth:`position_state`'s ``state`` (see there)."""
        self._iterations = int(state["iterations"])
        self._resume = dict(state) if state["active"] else None
        if state.get("sampler_epoch") is not None and hasattr(self.batch_sampler, "epoch"):
            self.batch_sampler.epoch = state["sampler_epoch"]
        self._active = False

    def __call__(self):
        return self.__iter__()

    # -- the pieces both iterators use ---------------------------------------------
    def _index_stream(self):
        """What to fetch, one item per batch: index lists, or single indices. A resumed
        iteration draws its order as the interrupted one did (from the generator state
        and sampler epoch it started with) and leaves out what that one handed out."""
        source = self.batch_sampler if self.batch_sampler is not None else self._sampler
        skip, self._skip = getattr(self, "_skip", None), None
        if skip is None:
            # not a resumed iteration; its order is drawn now, when the iteration starts
            # (as with workers), so that a commit at any point comes after the draw
            it = iter(source)
            return itertools.chain(list(itertools.islice(it, 1)), it)
        rng, epoch = self._start
        if epoch is not None and hasattr(source, "epoch"):
            source.epoch = epoch
        now = backend.get_rng_state()
        backend.set_rng_state(rng)
        try:
            it = iter(source)
            head = list(itertools.islice(it, skip + 1))   # draws the order now, then restores
        finally:
            backend.set_rng_state(now)
        return itertools.chain(head[skip:], it)

    def _fetch(self, index):
        if self._auto_collate:
            return self._collate([self.dataset[i] for i in index])
        return self._collate(self.dataset[index])

    def _iterable_batches(self):
        """Batches cut from an IterableDataset's stream (collated)."""
        it = iter(self.dataset)
        if self.batch_size is None:
            for sample in it:
                yield self._collate(sample)
            return
        batch = []
        for sample in it:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self._collate(batch)
                batch = []
        if batch and not self.drop_last:
            yield self._collate(batch)

    def _converter(self):
        Tensor = _tensor_class()
        from ..tensor.creation import to_tensor
        return lambda batch: _to_tensors(batch, Tensor, to_tensor)


class _Tracked:
    """An iteration that keeps its loader's position up to date (the iterators of each
    kind of worker do the loading; their attributes show through)."""

    def __init__(self, it, loader):
        self._it, self._loader = it, loader

    def __iter__(self):
        return self

    def __next__(self):
        loader = self._loader
        try:
            batch = next(self._it)
        except StopIteration:
            loader._active = False
            raise
        loader._position += 1
        return batch

    def __getattr__(self, name):
        if name in ("_it", "_loader"):
            raise AttributeError(name)
        return getattr(self._it, name)


class _SingleThreadIter:
    def __init__(self, loader):
        self._convert = loader._converter()
        if loader._iterable:
            self._batches = loader._iterable_batches()
        else:
            self._batches = (loader._fetch(index) for index in loader._index_stream())

    def __iter__(self):
        return self

    def __next__(self):
        return self._convert(next(self._batches))


class _WorkerState:
    """What the worker threads share with the iterator; holds no reference to the
    iterator itself, so dropping the iterator lets its finalizer stop the workers."""

    def __init__(self):
        self.tasks = queue.Queue()
        self.results = queue.Queue()
        self.stop = threading.Event()
        self.threads = []

    def shutdown(self):
        self.stop.set()
        for _ in self.threads:
            self.tasks.put(None)
        me = threading.current_thread()
        deadline = time.monotonic() + 5.0
        for t in self.threads:
            if t is not me:
                t.join(timeout=max(0.0, deadline - time.monotonic()))


def _init_worker(wid, num_workers, loader):
    _worker_local.info = WorkerInfo(wid, num_workers, loader.dataset)
    if loader.worker_init_fn is not None:
        loader.worker_init_fn(wid)


def _error_payload(wid):
    return (wid, traceback.format_exc())


def _map_worker(state, loader, wid, num_workers):
    try:
        _init_worker(wid, num_workers, loader)
    except BaseException as e:  # report and serve every task with the error
        init_error = (e, _error_payload(wid))
    else:
        init_error = None
    while not state.stop.is_set():
        task = state.tasks.get()
        if task is None or state.stop.is_set():
            return
        seq, index = task
        if init_error is not None:
            state.results.put((seq, False, init_error))
            continue
        try:
            batch = loader._fetch(index)
        except BaseException as e:
            state.results.put((seq, False, (e, _error_payload(wid))))
        else:
            state.results.put((seq, True, batch))


def _stream_worker(state, loader):
    """One thread reading an IterableDataset: at most ``capacity`` batches waiting."""
    seq = 0
    sem = state.slots
    try:
        _init_worker(0, 1, loader)
        for batch in loader._iterable_batches():
            while not sem.acquire(timeout=0.1):
                if state.stop.is_set():
                    return
            if state.stop.is_set():
                return
            state.results.put((seq, True, batch))
            seq += 1
    except BaseException as e:
        state.results.put((seq, False, (e, _error_payload(0))))
        return
    state.results.put((seq, True, _END))


_END = object()


class _ThreadedIter:
    def __init__(self, loader):
        self._loader = loader
        self._convert = loader._converter()
        self._timeout = loader.timeout
        self._capacity = loader.prefetch_factor * loader.num_workers
        state = self._state = _WorkerState()
        self._finalizer = weakref.finalize(self, state.shutdown)
        self._next_seq = 0  # next batch to hand out
        self._sent = 0  # tasks given to workers
        self._ready = {}
        self._done = False
        if loader._iterable:
            self._stream = True
            state.slots = threading.Semaphore(self._capacity)
            t = threading.Thread(target=_stream_worker, args=(state, loader),
                                 name="ddg-DataLoader-stream", daemon=True)
            state.threads.append(t)
            t.start()
        else:
            self._stream = False
            self._indices = loader._index_stream()
            self._exhausted = False
            n = loader.num_workers
            for wid in range(n):
                t = threading.Thread(target=_map_worker, args=(state, loader, wid, n),
                                     name="ddg-DataLoader-worker-{}".format(wid), daemon=True)
                state.threads.append(t)
                t.start()
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
        self._state.tasks.put((self._sent, index))
        self._sent += 1
        return True

    def __iter__(self):
        return self

    def _wait(self):
        """The next result from the workers, honouring the loader's timeout."""
        waited = 0.0
        step = 0.1
        while True:
            try:
                return self._state.results.get(timeout=step)
            except queue.Empty:
                waited += step
                if self._timeout and waited >= self._timeout:
                    self._close()
                    raise RuntimeError("DataLoader: timed out after {} s waiting for a batch from its "
                                       "workers".format(self._timeout)) from None
                if not any(t.is_alive() for t in self._state.threads):
                    try:
                        return self._state.results.get_nowait()
                    except queue.Empty:
                        self._close()
                        raise RuntimeError("DataLoader: all worker threads exited unexpectedly") from None

    def __next__(self):
        if self._done:
            raise StopIteration
        if not self._stream and self._next_seq == self._sent:  # nothing in flight, sampler done
            self._close()
            raise StopIteration
        while self._next_seq not in self._ready:
            seq, ok, payload = self._wait()
            self._ready[seq] = (ok, payload)
        ok, payload = self._ready.pop(self._next_seq)
        self._next_seq += 1
        if not ok:
            self._close()
            exc, (wid, text) = payload
            try:
                exc.add_note("(raised in DataLoader worker thread {}; its traceback:)\n{}".format(wid, text))
            except AttributeError:  # Python < 3.11
                pass
            raise exc
        if self._stream:
            if payload is _END:
                self._close()
                raise StopIteration
            self._state.slots.release()
        else:
            self._send()
        return self._convert(payload)

    def _close(self):
        self._done = True
        self._ready.clear()
        self._finalizer()

    def __del__(self):
        try:
            self._finalizer()
        except Exception:
            pass
