"""Gradient sharding (ZeRO stage 2): each gradient is reduced to the one rank that owns
its parameter's optimizer state, during backward, and released everywhere else.

:class:`GradShardReducer` takes the place of DataParallel's all-reduce Reducer (same
interface: ``sync_enabled``, ``set_batch_weight``, ``mark_forward``, ``stats``,
``remove``). The trainable parameters, in reverse registration order (roughly the order
in which backward finishes them), are grouped into buckets of consecutive parameters with
the same owner, dtype and device, of about ``bucket_cap_mb``. When backward has finished
every parameter of a bucket (grad-ready hooks), and every earlier bucket has gone, the
bucket's gradients are packed with one "has a gradient" flag per parameter and a
non-blocking sum over the ranks starts, which runs while backward goes on (buckets are
launched in bucket order on every rank): the communicator's ``iallreduce`` by default,
or with ``reduce_to_owner`` its ``ireduce`` onto the bucket's owner, half the bytes.
MPICH's reduce measured 3 to 9 times slower than its all-reduce on 16 MB over shared
memory (2 and 4 ranks), which made the reduce the slower choice on one node. The ranks that do not own the bucket drop their ``.grad`` (``None``) when
it is packed; each grad-ready hook tests the requests in flight, and the owner takes
the mean over ranks into its ``.grad`` when a request completes (at the latest when
backward ends). Between backward and the step a rank holds the gradients of its own
shard only (during backward, also the packed buffers in flight).

The mean is weighted by the ranks' local batch sizes, as DataParallel's
(:mod:`ddg.parallel.reducer`): the gradient of the mean loss over the whole global batch
even where ranks hold uneven slices. A leaf hook scales each gradient contribution as it
arrives by ``(n_r / m) / world_size`` (``n_r`` this rank's latest batch size, ``m`` the
mean batch size of the previous synchronization, the same on every rank: with equal,
constant batches exactly ``1 / world_size``), so that what is reduced is linear in what
every rank accumulated. Each bucket carries the ranks' ``n_r / m`` in one more slot; where
their sum ``T`` is not ``world_size``, the owner rescales what this synchronization added by
``world_size / T``. What its ``.grad`` held before the window of backward passes (several
synchronized passes without ``clear_grad``) is kept apart from that: the owner copies a
nonzero gradient at the window's first contribution. Local accumulation (``no_sync()``,
gradient merge) and several synchronized backward passes without ``clear_grad`` therefore
give the sums of the weighted means, as DataParallel does. The hook scales only during
``backward()`` passes (from the engine's begin callback to the pass's end), so ``ddg.grad``
returns the local gradients. A rank out of data under ``join()`` contributes weight 0: the
mean is over the ranks that still train.
"""
import weakref

import numpy as np


from ...autograd import engine
from ...autograd.ops.embedding import unite_sparse_rows
from ...parallel.reducer import SyncStats, assign_buckets, install_sync_hooks
from ...tensor import backend
from ...tensor.tensor import Tensor

__all__ = ["GradShardReducer"]

_MB = 1024 * 1024


class _Bucket:
    def __init__(self, index, params, root):
        self.index, self.params, self.root = index, params, root
        self.sizes = [int(p._data.size) for p in params]
        self.numel = sum(self.sizes)
        self.pending = 0


class GradShardReducer:
    """Reduces the gradients of ``params`` onto their owners during backward (see the
    module docstring). ``owner``: a function from a parameter to its owner rank."""

    def __init__(self, params, comm, owner, bucket_cap_mb=25, find_unused_parameters=False):
        self.comm = comm
        self.rank, self.world_size = comm.rank, comm.size
        self.sync_enabled = True
        self.find_unused_parameters = bool(find_unused_parameters)
        self.stats = SyncStats()
        self._params = list(reversed(params))
        self._param_set = set(self._params)
        self._owner = {id(p): int(owner(p)) for p in self._params}
        self._owed = False
        self._active = False
        self._next = 0
        self._weight = 1.0               # this rank's local batch size (latest forward)
        self._mean_weight = 1.0          # mean batch size of the previous synchronization
        self._total = None               # sum of the ranks' n_r / m in this synchronization
        # the window of backward passes since the last synchronization: parameters this
        # rank owns whose first contribution arrived (-> a copy of their nonzero .grad from
        # before the window, or None)
        self._before = {}
        self._inflight = []              # (bucket, buffer, request), in launch order
        # the collective: a reduce onto the bucket's owner (half the bytes) or an
        # all-reduce (see the module docstring for why the all-reduce is the default)
        self.reduce_to_owner = False
        items = [(p._data.nbytes, (self._owner[id(p)], p._data.dtype, backend.is_gpu_array(p._data)))
                 for p in self._params]
        # buckets: runs of consecutive parameters with the same key (owner, dtype, device)
        runs, start = [], 0
        for i in range(1, len(items) + 1):
            if i == len(items) or items[i][1] != items[start][1]:
                runs.append(list(range(start, i)))
                start = i
        self.buckets = []
        for run in runs:
            sub = assign_buckets([items[j] for j in run], bucket_cap_mb * _MB, bucket_cap_mb * _MB)
            for members in sub:
                ps = [self._params[run[j]] for j in members]
                self.buckets.append(_Bucket(len(self.buckets), ps, self._owner[id(ps[0])]))
        # whether the gradient hook scales: from the start of each backward() pass that
        # reaches the engine's begin callbacks (ddg.grad does not) to its end
        self._scaling = [False]
        self._handles = self._install_hooks()
        weakref.finalize(self, _remove_handles, self._handles)

    def _install_hooks(self):
        on = self._scaling
        handles = []
        for p in self._params:
            handles.append(p.register_hook(self._scale_hook(p, on)))
        return handles + install_sync_hooks(self, self.buckets)

    def _scale_hook(self, p, on):
        ref = weakref.ref(self)
        mine = self._owner[id(p)] == self.rank

        def scale(g):
            r = ref()
            if r is None or not on[0]:
                return None                  # ddg.grad outside backward(): the local gradient
            if mine and id(p) not in r._before:
                r._keep_before(p)    # the window's first contribution: .grad predates it
            f = r._factor()
            a = g._data
            if a.dtype.itemsize == 2:    # float16/bfloat16: in float32, rounded once (as DataParallel)
                return Tensor._wrap((a.astype(np.float32) * np.float32(f)).astype(a.dtype))
            return Tensor._wrap(a * a.dtype.type(f))
        return scale

    def _keep_before(self, p):
        """Note what an owned parameter's ``.grad`` holds before this window's
        contributions: a copy where it is nonzero (None: nothing to keep apart)."""
        g = p._grad
        a = None if g is None else g._data
        self._before[id(p)] = a.copy() if a is not None and (type(a) is not np.ndarray or a.any()) else None

    def _factor(self):
        """The scale of a local gradient contribution: ``(n_r / m) / world_size``."""
        return (self._weight / self._mean_weight) / self.world_size

    def remove(self):
        _remove_handles(self._handles)
        self._handles.clear()

    # ------------------------------------------------------------------ forward side
    def set_batch_weight(self, weight):
        """This rank's weight in the mean of the next synchronization (its local batch
        size), as DataParallel's Reducer."""
        self._weight = float(weight)

    def mark_forward(self, training):
        self._owed = bool(training)

    # ------------------------------------------------------------------ backward
    def _on_backward_begin(self, leaves):
        if not self._scaling[0]:
            self._scaling[0] = True
            engine.queue_callback(self._end_pass)
        if self._active:
            self._launch_rest()       # the previous pass raised before completing
        if self._param_set.isdisjoint(leaves) and not (self.find_unused_parameters and self._owed):
            return
        self._owed = False
        if not self.sync_enabled:
            return
        for b in self.buckets:
            b.pending = sum(1 for p in b.params if p in leaves)
        self._active = True
        self._next = 0
        self._launch_ready()

    def _end_pass(self):
        self._scaling[0] = False

    def _param_ready(self, bucket):
        bucket.pending -= 1
        if bucket.pending == 0 and bucket.index == self._next:
            self._launch_ready()
        elif self._inflight:
            self._progress()

    def _launch_ready(self):
        buckets = self.buckets
        i = self._next
        while i < len(buckets) and buckets[i].pending <= 0:
            self._launch(buckets[i])
            i += 1
        self._next = i
        self._progress()

    def _launch_rest(self):
        for i in range(self._next, len(self.buckets)):
            self._launch(self.buckets[i])
        self._next = len(self.buckets)
        self._active = False
        self._wait_all()

    def _on_backward_complete(self):
        self._launch_rest()
        self.stats.steps += 1

    def sync_now(self):
        """Reduce the current gradients now, outside backward."""
        self._next = 0
        self._launch_rest()

    def _launch(self, b, shadow=False):
        """Pack the bucket's gradients (with their flags and this rank's weight) and start
        summing them over the ranks; a rank that does not own the bucket drops its
        gradients at once."""
        first = b.params[0]._data
        xp = backend.get_array_module(first)
        k = len(b.params)
        buf = xp.empty(b.numel + k + 1, dtype=first.dtype)     # every slot is written below
        off = 0
        for slot, (p, n) in enumerate(zip(b.params, b.sizes)):
            g = None if shadow else p._grad
            if g is not None:
                buf[off:off + n] = g._data.reshape(-1)
                buf[b.numel + slot] = 1
            else:
                buf[off:off + n] = 0
                buf[b.numel + slot] = 0
            off += n
        if self.rank == b.root and not shadow:
            for p in b.params:
                if id(p) not in self._before:
                    self._keep_before(p)    # no contribution reached it in this window
        # n_r / m: 1 for equal, constant batches; 0 for a rank out of data under join()
        buf[-1] = 0 if shadow else self._weight / self._mean_weight
        if self.rank != b.root:
            for p in b.params:
                p._grad = None           # this rank does not update it: release the memory
        if self.reduce_to_owner:
            req = self.comm.ireduce(buf, b.root, "sum")
        else:
            req = self.comm.iallreduce(buf, "sum")
        self._inflight.append((b, buf, req))

    def _progress(self):
        """Let the requests in flight advance (a non-blocking test); finish, in launch
        order, those that have completed."""
        inflight = self._inflight
        while inflight and inflight[0][2].test():
            self._complete(*inflight.pop(0))
        for entry in inflight[1:]:
            entry[2].test()

    def _wait_all(self):
        inflight = self._inflight
        while inflight:
            b, buf, req = inflight.pop(0)
            req.wait()
            self._complete(b, buf, req)
        unite_sparse_rows(self._params, self.comm)   # lazy updates: every rank's looked-up rows
        self._end_window()

    def _end_window(self):
        """After a synchronization: the next backward pass opens a new window, and the
        mean batch size becomes this one's (every rank read the same sum; with
        ``reduce_to_owner`` only owners do, so the mean stays 1 there)."""
        self._before.clear()
        total, self._total = self._total, None
        if total is not None and total > 0 and not self.reduce_to_owner:
            self._mean_weight = total * self._mean_weight / self.world_size

    def _complete(self, b, buf, _req):
        """The owner takes the summed gradients (rescaled where the ranks' weights did not
        sum to ``world_size``); the other ranks drop the buffer, reading the weights' sum
        once per synchronization."""
        if self.rank != b.root:
            if self._total is None and not self.reduce_to_owner:
                self._total = float(backend.to_host(buf[-1:])[0])
            return
        tail = backend.to_host(buf[b.numel:])
        flags, total = tail[:-1], float(tail[-1])
        self._total = total
        w = self.world_size
        rescale = total > 0 and total != w
        off = 0
        for slot, (p, n) in enumerate(zip(b.params, b.sizes)):
            view = buf[off:off + n].reshape(p._data.shape)
            off += n
            if flags[slot] == 0:
                p._grad = None           # no rank had a gradient: as in one process
                continue
            if rescale:
                # this synchronization's part (what the window added) times w / total;
                # what .grad held before the window stays as it was
                before = self._before.get(id(p))
                f = view.dtype.type(w / total)
                if before is None:
                    view *= f
                else:
                    view -= before
                    view *= f
                    view += before
            if p._grad is not None and p._grad._data.shape == view.shape:
                p._grad._data[...] = view
            else:
                p._grad = Tensor._wrap(view)

    def shadow_sync(self):
        """Join a synchronization with nothing to contribute (a rank out of data under
        ``join()``): zeros and no flags; as an owner, receive the others' mean."""
        for b in self.buckets:
            self._launch(b, shadow=True)
        self._wait_all()
        self._next = 0
        self._active = False


def _remove_handles(handles):
    for h in handles:
        h.remove()


