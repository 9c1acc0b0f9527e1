"""The gradient reducer behind :class:`ddg.DataParallel`: buckets, their all-reduce during
backward, and the weighted mean.

How the gradients travel
------------------------
* The trainable parameters are taken in REVERSE registration order (roughly the order in
  which backward finishes them) and packed into flat *buckets* of about ``bucket_cap_mb``
  (one dtype and one device per bucket; the first bucket is capped at
  ``first_bucket_cap_mb`` so that the first all-reduce starts early):
  :func:`assign_buckets`, a pure function. Each parameter's ``.grad`` is a view into its
  bucket, so the engine accumulates gradients straight into the flat buffer: no packing
  copy before the all-reduce, no unpacking copy after it.
* A grad-ready hook on every parameter counts down its bucket; when a bucket is complete
  its non-blocking all-reduce starts. Buckets are always *launched* in bucket order (a
  bucket that completes early waits for its predecessors), so every rank issues the same
  collectives in the same order. Each hook also calls ``test()`` on the requests in
  flight, which drives MPI's progress engine while backward computes the next gradients
  (communication overlaps computation).
* When backward completes, the remaining buckets are launched and all are waited.

Bucket layout: ``[gradients ... | one "has a gradient" flag per parameter | weight]``.
The flags and the weight ride along in the same all-reduce (no extra collective):

* flag: 1 when the parameter has a gradient on this rank (reached by this backward, or
  holding one from before). A parameter with a global flag sum of 0 had no gradient on
  any rank and keeps ``grad = None``, exactly as in one process. Parameters not reached
  on this rank (Python control flow) are marked ready at once, from the engine's
  backward-begin callback, and contribute their current local value (zero if they had
  none): no hang, no drift.
* weight: the local batch size (set by :meth:`Reducer.set_batch_weight`), so the result
  is the batch-size-weighted mean ``sum_r n_r g_r / sum_r n_r``: the gradient of the
  mean loss over the whole global batch even when ranks hold uneven slices. With equal
  slices it is the plain mean over ranks. To avoid an extra pass over the data,
  gradients are scaled by ``n_r / m`` where ``m`` is the global mean weight of the
  previous synchronized step (identical on every rank); in the usual case of equal,
  constant batches that factor is exactly 1 and is skipped.

Invariant (gradient accumulation)
---------------------------------
After a synchronized backward, each bucket holds, on every rank, the weighted mean over
ranks of the gradients accumulated locally since the last ``clear_grad``. Proof sketch:
before a synced backward, rank r's bucket is ``S + L_r`` where ``S`` (the result of
earlier synced passes) is identical on all ranks and ``L_r`` is what was accumulated
locally since (under ``no_sync()``, and this pass's gradient). The weighted mean of
``S + L_r`` is ``S + mean_w(L_r)`` because the weights sum to one: an already-averaged
part is never scaled again. So ``no_sync()`` accumulation followed by one synced backward
gives the mean of the accumulated sums, and several synced backwards without
``clear_grad`` give the sum of their means, both exactly as one process on the
concatenated batches would.

Communication happens only for backward passes that reach these parameters, so other
models trained in the same process are left alone.
"""
import time
import weakref
from dataclasses import dataclass

import numpy as np

from .. import flags as _flags
from ..autograd import engine
from ..autograd.ops.embedding import unite_sparse_rows
from ..tensor import backend
from ..tensor.tensor import Tensor
from .comm import get_compression
from .comm.compression import HALF_WIRE

__all__ = ["Reducer", "SyncStats", "assign_buckets"]

_MB = 1024 * 1024


def assign_buckets(items, bucket_cap, first_bucket_cap):
    """Group ``items`` into buckets; returns a list of lists of item indices.

    ``items`` is a sequence of ``(nbytes, key)`` in launch order; ``key`` (say dtype and
    device) separates items that cannot share a flat buffer. Keys are taken in order of
    first appearance; within a key the order is kept. A bucket is closed when the next
    item would take it past its cap: ``first_bucket_cap`` bytes for the very first bucket,
    ``bucket_cap`` for the others (an item larger than the cap gets a bucket of its own).
    """
    groups = {}
    for i, (_, key) in enumerate(items):
        groups.setdefault(key, []).append(i)
    buckets = []
    for members in groups.values():
        cur, size = [], 0
        for i in members:
            nbytes = items[i][0]
            cap = first_bucket_cap if not buckets else bucket_cap
            if cur and size + nbytes > cap:
                buckets.append(cur)
                cur, size = [], 0
            cur.append(i)
            size += nbytes
        if cur:
            buckets.append(cur)
    return buckets


class Bucket:
    """A flat buffer holding the gradients of some parameters, their flags and a weight."""

    def __init__(self, index, params):
        self.index = index
        self.params = params
        first = params[0]._data
        xp = backend.get_array_module(first)
        self.numel = sum(int(p._data.size) for p in params)
        k = len(params)
        self.data = xp.zeros(self.numel + k + 1, dtype=first.dtype)
        self.grads = self.data[:self.numel]
        self.flags = self.data[self.numel:self.numel + k]
        self.views = []
        off = 0
        for p in params:
            n = int(p._data.size)
            self.views.append(self.data[off:off + n].reshape(p._data.shape))
            off += n
        # One persistent Tensor per parameter wrapping its view: ``p._grad is bound[i]``
        # tells whether the parameter's gradient currently lives in this bucket.
        self.bound = [Tensor._wrap(v) for v in self.views]
        self.pending = 0
        self.request = None
        # On a GPU the weight arithmetic stays on the device (no synchronizing reads),
        # and the flags are read back only when some parameter had no gradient here.
        self.on_device = xp is not np
        self.all_local = True   # every parameter had a gradient on this rank (so every flag sum >= 1)
        self.local_finite = True  # FLAGS_check_nan_inf: this rank's gradients were finite before the all-reduce
        # float16/bfloat16 buckets travel as they are (2 bytes a value, summed in their own
        # precision); their gradients are divided by the world size BEFORE the sum, so that
        # a float16 sum cannot overflow where the mean fits (``prediv``; 1 otherwise)
        self.half = first.dtype.itemsize == 2 and first.dtype.kind in "fV"
        self.prediv = 1

    def set_flags(self, has_grad):
        """Write this rank's "has a gradient" flags (a list of bools) into the payload."""
        self.all_local = all(has_grad)
        if self.all_local:
            self.flags.fill(1)              # one kernel on a GPU, no host-to-device copy
        elif self.on_device:
            self.flags.set(np.asarray(has_grad, dtype=self.flags.dtype))
        else:
            self.flags[...] = has_grad

    @property
    def nbytes(self):
        return int(self.data.nbytes)


@dataclass
class SyncStats:
    """Counters a reducer keeps (read them; reset with ``reset()``).

    ``steps``: synchronized backward passes finished. ``exposed_seconds``: wall time from
    the end of those backward passes to their gradients being final, i.e. communication
    that computation did not hide. ``early_launches``: buckets whose all-reduce started
    while backward was still running.
    """
    steps: int = 0
    exposed_seconds: float = 0.0
    early_launches: int = 0

    def reset(self):
        self.steps, self.exposed_seconds, self.early_launches = 0, 0.0, 0


def install_sync_hooks(sync, buckets, grad_hook=None):
    """The engine hooks a bucketed gradient synchronization needs; returns their handles.

    ``sync`` (held weakly) has ``_active``, ``_param_ready(bucket)``,
    ``_on_backward_begin(leaves)`` and ``_on_backward_complete()``. ``grad_hook``, when
    given, is registered on every parameter of the buckets (before its readiness hook)."""
    ref = weakref.ref(sync)
    handles = []
    for b in buckets:
        for p in b.params:
            if grad_hook is not None:
                handles.append(p.register_hook(grad_hook))

            def ready(_leaf, b=b):
                r = ref()
                if r is not None and r._active:
                    r._param_ready(b)
            handles.append(p.register_grad_ready_hook(ready))

    def begin(leaves):
        r = ref()
        if r is not None:
            r._on_backward_begin(leaves)

    def complete():
        r = ref()
        if r is not None and r._active:
            r._on_backward_complete()

    handles.append(engine.register_backward_begin_callback(begin))
    handles.append(engine.register_backward_complete_callback(complete))
    return handles


class Reducer:
    """All-reduces the gradients of ``params`` over ``comm`` during backward.

    Args:
        params: the trainable parameters, in registration order.
        comm: a :class:`ddg.parallel.Communicator` with more than one rank.
        bucket_cap_mb, first_bucket_cap_mb: bucket sizes in MB (see the module docstring).
        compression: how the payload travels ('none', 'fp16' or a
            :class:`~ddg.parallel.comm.Compression`); the communicator applies it.
        find_unused_parameters: a rank whose backward reaches none of ``params`` still
            joins the synchronization its training forward owes (see
            :meth:`mark_forward`), instead of leaving the other ranks waiting.
        overlap: start each bucket's all-reduce as soon as it is complete (default); with
            False every bucket is launched when backward ends (for measurements).

    Existing gradients are moved into the buckets. The hooks are removed when the reducer
    is garbage-collected or :meth:`remove` is called.
    """

    def __init__(self, params, comm, bucket_cap_mb=25, first_bucket_cap_mb=1, compression=None,
                 find_unused_parameters=False, overlap=True):
        self.comm = comm
        self.world_size = comm.size
        self.compression = get_compression(compression)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.overlap = bool(overlap)
        self.sync_enabled = True      # False inside DataParallel.no_sync()
        self.stats = SyncStats()
        self._params = list(reversed(params))
        self._param_set = set(self._params)
        self._weight = 1.0            # local batch size of the latest forward
        self._mean_weight = 1.0       # global mean weight of the previous synced step
        self._owed = False            # a training forward ran; its sync has not happened yet
        self._active = False
        self._next = 0                # first bucket not yet launched
        self._first_open = 0          # first launched bucket whose request is not known done
        self.buckets = self._build(bucket_cap_mb * _MB, first_bucket_cap_mb * _MB)
        self._handles = self._install_hooks()
        weakref.finalize(self, _remove_handles, self._handles)

    # ------------------------------------------------------------------ construction
    def _build(self, cap, first_cap):
        params = self._params
        items = [(p._data.nbytes, (p._data.dtype, backend.is_gpu_array(p._data))) for p in params]
        buckets = []
        for i, members in enumerate(assign_buckets(items, cap, first_cap)):
            b = Bucket(i, [params[j] for j in members])
            for slot, p in enumerate(b.params):
                # Keep an existing gradient: copy it into the bucket and bind the view.
                if p._grad is not None:
                    b.views[slot][...] = p._grad._data
                    p._grad = b.bound[slot]
            buckets.append(b)
        return buckets

    def _install_hooks(self):
        return install_sync_hooks(self, self.buckets)

    def remove(self):
        """Remove the reducer's hooks: its parameters' backward no longer communicates."""
        _remove_handles(self._handles)
        self._handles.clear()

    # ------------------------------------------------------------------ forward side
    def set_batch_weight(self, weight):
        """This rank's weight in the mean of the next synchronized backward (its local
        batch size)."""
        self._weight = float(weight)

    def mark_forward(self, training):
        """A forward ran; in training, its backward owes a synchronization (used with
        ``find_unused_parameters``)."""
        self._owed = bool(training)

    # ------------------------------------------------------------------ backward
    def _on_backward_begin(self, leaves):
        if self._active:
            # The previous pass raised before completing: finish its requests first.
            self._finish()
        if self._param_set.isdisjoint(leaves) and not (self.find_unused_parameters and self._owed):
            return                      # another model's backward
        self._owed = False
        sync = self.sync_enabled
        for b in self.buckets:
            has_grad = []
            for slot, p in enumerate(b.params):
                reached = p in leaves
                g = p._grad
                bound = b.bound[slot]
                if g is not bound:
                    if g is None:
                        b.views[slot][...] = 0
                        if reached:                      # the engine accumulates into the view
                            p._grad = bound
                    else:                                # a gradient the user assigned
                        if tuple(g._data.shape) != tuple(p._data.shape):
                            raise ValueError(f"ddg.DataParallel: parameter {p.name} has shape {p.shape} "
                                             f"but its .grad has shape {g.shape}")
                        b.views[slot][...] = g._data
                        p._grad = bound
                if sync:
                    has_grad.append(reached or p._grad is not None)
            if sync:
                b.set_flags(has_grad)
                b.pending = sum(1 for p in b.params if p in leaves)
                b.request = None
        if not sync:
            return
        self._active = True
        self._next = 0
        self._first_open = 0
        if self.overlap:
            self._launch_ready()

    def _param_ready(self, bucket):
        bucket.pending -= 1
        if self.overlap:
            if bucket.pending == 0 and bucket.index == self._next:
                self._launch_ready()
            else:
                self._progress()

    def _launch_ready(self):
        buckets = self.buckets
        i = start = self._next
        while i < len(buckets) and buckets[i].pending <= 0:
            self._launch(buckets[i])
            i += 1
        self._next = i
        self.stats.early_launches += i - start
        self._progress()

    def _progress(self):
        """Let MPI advance the requests in flight (a cheap, non-blocking test)."""
        buckets = self.buckets
        i = self._first_open
        while i < self._next and buckets[i].request.test():
            i += 1
        self._first_open = i
        for j in range(i + 1, self._next):      # later requests may progress too
            buckets[j].request.test()

    def _launch(self, b):
        # A Python float on the CPU; on a GPU, after the first synced step, a 0-d float64
        # device array (the previous step's global weight never leaves the device).
        scale = self._weight / self._mean_weight
        b.data[-1] = scale
        div = b.prediv = self.world_size if b.half else 1
        if not isinstance(scale, float):
            b.grads *= (scale / div).astype(b.grads.dtype)    # rounded as a Python float would be
        elif scale != div:
            _scale(b.grads, scale / div)
        if _flags.check_nan_inf[0]:
            b.local_finite = _all_finite(b.grads)
        b.request = self.comm.iallreduce(b.data, "sum", HALF_WIRE if b.half else self.compression)

    def _on_backward_complete(self):
        t0 = time.perf_counter()
        self._launch_all()
        self._finish()
        self.stats.exposed_seconds += time.perf_counter() - t0
        self.stats.steps += 1

    def _launch_all(self):
        for i in range(self._next, len(self.buckets)):
            self._launch(self.buckets[i])
        self._next = len(self.buckets)

    def _finish(self):
        """Wait for every launched bucket and turn sums into weighted means."""
        self._active = False
        total = None
        for b in self.buckets[:self._next]:
            b.request.wait()
            b.request = None
            if b.on_device:
                xp = backend.get_array_module(b.data)
                total = b.data[-1].astype(np.float64)     # sum over ranks of n_r / m, on the device
                b.grads *= (b.prediv / xp.where(total > 0, total, 1.0)).astype(b.grads.dtype)
            else:
                total = float(b.data[-1])           # sum over ranks of n_r / m
                if total > 0 and total != b.prediv:
                    _scale(b.grads, b.prediv / total)
            if b.all_local:
                continue                        # every flag sum >= 1; grads are bound already
            flags = backend.to_host(b.flags)    # on a GPU: one small read, only in this case
            for slot, p in enumerate(b.params):
                if flags[slot] == 0:
                    p._grad = None              # no rank had a gradient: as in one process
                elif p._grad is None:
                    p._grad = b.bound[slot]
        if total is not None:
            m = self._mean_weight
            if not isinstance(total, float):
                xp = backend.get_array_module(total)
                self._mean_weight = xp.where(total > 0, total * m / self.world_size, m)
            elif total > 0:
                self._mean_weight = total * m / self.world_size
        launched, self._next = self._next, 0
        unite_sparse_rows(self._params, self.comm)
        if _flags.check_nan_inf[0]:
            self._check_finite(self.buckets[:launched])

    def _check_finite(self, buckets):
        """FLAGS_check_nan_inf: raise if a reduced gradient holds nan/inf. Every rank holds
        the same reduced values, so every rank raises together (nobody is left waiting)."""
        bad, local = [], True
        for b in buckets:
            local = local and b.local_finite
            if _all_finite(b.grads):
                continue
            for p, v in zip(b.params, b.views):
                if not _all_finite(v):
                    bad.append(f"{p.name} {list(v.shape)}")
        if not bad:
            return
        where = ("this rank's own gradients were finite: another rank's were not, or the sum over "
                 f"{self.world_size} ranks overflowed {buckets[0].grads.dtype}") if local else \
            "this rank's own gradients already were not finite"
        raise RuntimeError(f"ddg.DataParallel: after the all-reduce the gradients of {len(bad)} parameter(s) "
                           f"hold nan or inf (FLAGS_check_nan_inf is on): {', '.join(bad[:8])}"
                           f"{' ...' if len(bad) > 8 else ''}; {where}")

    def shadow_sync(self):
        """Join the next synchronization with nothing to contribute (zero gradients, zero
        weight, no flags): what a rank that has run out of data does under
        ``DataParallel.join()`` while the others still train."""
        for b in self.buckets:
            b.data.fill(0)
            b.all_local = False
        self._weight = 0.0
        self._active, self._next, self._first_open = True, 0, 0
        self._launch_all()
        self._finish()

    def sync_now(self):
        """Synchronize the current gradients now, outside backward, through the same path
        as a backward pass (the benchmark times the synchronization alone with it)."""
        for b in self.buckets:
            b.set_flags([p._grad is not None for p in b.params])
        self._active, self._next, self._first_open = True, 0, 0
        self._launch_all()
        self._finish()


def _scale(arr, f):
    """``arr *= f`` in place; 2-byte floats are multiplied in float32 and rounded once
    (numpy would widen a bfloat16 array times a Python float to float32)."""
    if arr.dtype.itemsize == 2:
        arr[...] = arr.astype(np.float32) * np.float32(f)
    else:
        arr *= f


def _all_finite(arr):
    return bool(backend.get_array_module(arr).isfinite(arr).all())


def _remove_handles(handles):
    for h in handles:
        h.remove()

