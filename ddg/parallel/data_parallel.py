"""``ddg.DataParallel``: synchronous data-parallel training over a Communicator.

Every rank holds a replica of the same model and runs it on its own slice of the
global batch. During ``backward()`` the gradients are averaged across ranks, so
that after ``backward()`` every replica holds the same gradient and the optimizer
steps keep the replicas identical.

How the gradients travel
------------------------
* At construction the trainable parameters are taken in REVERSE registration order
  (roughly the order in which backward finishes them) and packed into flat
  *buckets* of about ``comm_buffer_size`` MB (one dtype and one device per bucket;
  the first bucket is capped at ``last_comm_buffer_size`` MB so that the first
  all-reduce starts early). Each parameter's ``.grad`` is a view into its bucket,
  so the engine accumulates gradients straight into the flat buffer: no packing
  copy before the all-reduce, no unpacking copy after it.
* A grad-ready hook on every parameter counts down its bucket; when a bucket is
  complete its non-blocking all-reduce starts. Buckets are always *launched* in
  bucket order (a bucket that completes early waits for its predecessors), so every
  rank issues the same collectives in the same order. Each hook also calls
  ``test()`` on the requests in flight, which is what drives MPI's progress engine
  while backward computes the next gradients (communication overlaps computation).
* When backward completes, the remaining buckets are launched and all are waited.

Bucket layout: ``[gradients ... | one "has a gradient" flag per parameter | weight]``.
The flags and the weight ride along in the same all-reduce (no extra collective):

* flag: 1 when the parameter has a gradient on this rank (reached by this backward,
  or holding one from before). A parameter with a global flag sum of 0 had no
  gradient on any rank and keeps ``grad = None``, exactly as in one process.
  Parameters not reached on this rank (Python control flow) are marked ready
  immediately, from the engine's backward-begin callback, and contribute their
  current local value (zero if they had none): no hang, no drift.
* weight: the local batch size (rows of the first Tensor argument of the latest
  ``forward``), so the result is the batch-size-weighted mean
  ``sum_r n_r g_r / sum_r n_r`` -- the gradient of the mean loss over the whole
  global batch even when ranks hold uneven slices (e.g. 32 samples on 3 ranks).
  With equal slices it is the plain mean over ranks. To avoid an extra pass over
  the data, gradients are scaled by ``n_r / m`` where ``m`` is the global mean
  weight of the previous synchronized step (identical on every rank); in the usual
  case of equal, constant batches that factor is exactly 1 and is skipped.

Invariant (gradient accumulation)
---------------------------------
After a synchronized backward, each bucket holds, on every rank, the weighted mean
over ranks of the gradients accumulated locally since the last ``clear_grad``.
Proof sketch: before a synced backward, rank r's bucket is ``S + L_r`` where ``S``
(the result of earlier synced passes) is identical on all ranks and ``L_r`` is what
was accumulated locally since (under ``no_sync()``, and this pass's gradient). The
weighted mean of ``S + L_r`` is ``S + mean_w(L_r)`` because the weights sum to one:
an already-averaged part is never scaled again. So ``no_sync()`` accumulation
followed by one synced backward gives the mean of the accumulated sums, and
several synced backwards without ``clear_grad`` give the sum of their means, both
exactly as one process on the concatenated batches would.

Communication happens only for backward passes that reach this model's
parameters, so other models trained in the same process are left alone. With
world size 1 no hooks are installed and nothing is communicated (mpi4py is never
imported).
"""
import contextlib
import time
import weakref

import numpy as np

from ..autograd import engine
from ..autograd.grad_mode import _enabled as _grad_enabled
from ..nn.layer.layers import Layer
from ..tensor import backend
from ..tensor.tensor import Tensor
from .comm import Communicator, MPICommunicator
from .comm_nccl import get_device_communicator

__all__ = ["DataParallel"]

_MB = 1024 * 1024


class _Bucket:
    """A flat buffer holding the gradients of some parameters, their flags and a weight."""

    def __init__(self, index, params, xp, dtype):
        self.index = index
        self.params = params
        self.numel = sum(int(p._data.size) for p in params)
        k = len(params)
        self.data = xp.zeros(self.numel + k + 1, dtype=dtype)
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
        self.half = None        # float16 send buffer (fp16_allreduce), made on first use
        self.used_half = False  # whether the request in flight carries self.half
        self.pre = 1.0          # the factor the payload was pre-scaled by (fp16 path)
        # On a GPU the weight arithmetic stays on the device (no synchronizing reads),
        # and the flags are read back only when some parameter had no gradient here.
        self.on_device = xp is not np
        self.all_local = True   # every parameter had a gradient on this rank (so every flag sum >= 1)

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


class DataParallel(Layer):
    """Run ``layer`` data-parallel over all ranks (Paddle's ``paddle.DataParallel``).

    Args:
        layer: the model (a :class:`ddg.nn.Layer`) to replicate; every rank must
            build the same architecture (checked; a mismatch raises ValueError on
            every rank naming the first differing rank and parameter).
        strategy: accepted for Paddle compatibility and ignored.
        comm_buffer_size: bucket size in MB (default 25).
        last_comm_buffer_size: size in MB of the first bucket to be all-reduced
            (the one holding the last layers' gradients; default 1).
        find_unused_parameters: parameters unused on some ranks are always handled
            (cheaply), without this flag. With it, a rank whose backward reaches NONE of
            the model's parameters (say, an early-exit branch that skips every layer)
            still joins the synchronization that its training forward owes, contributing
            no gradient, instead of leaving the other ranks waiting. Each training forward
            is then followed by exactly one synchronization at the next backward.
        group: a :class:`ddg.parallel.Communicator` (default: the world over MPI, or NCCL
            when ``DDG_COMM=nccl`` or ``auto`` and cupy has NCCL).
        fp16_allreduce: send float32 gradients as float16 (half the bytes). Each
            value is rounded to float16 before the sum (relative error about
            ``2**-11``) and each partial sum is rounded again, so the averaged
            gradient has a relative error of order ``world_size * 2**-11``
            (absolute values below ~6e-8 flush to zero). Gradients are pre-divided
            by the world size so that the float16 sum cannot overflow.

    The wrapped layer is ``self._layers``; ``parameters()``, ``named_parameters()``,
    ``state_dict()`` and ``set_state_dict()`` use the wrapped layer's names
    unchanged (no ``_layers.`` prefix), so checkpoints move freely between one
    process and N ranks. In training mode, buffers (BatchNorm running statistics)
    are broadcast from rank 0 at every forward.
    """

    def __init__(self, layer, strategy=None, comm_buffer_size=25, last_comm_buffer_size=1,
                 find_unused_parameters=False, group=None, fp16_allreduce=False):
        if not isinstance(layer, Layer):
            raise TypeError(f"ddg.DataParallel: layer must be a ddg.nn.Layer, got {type(layer).__name__}")
        for name, v in (("comm_buffer_size", comm_buffer_size), ("last_comm_buffer_size", last_comm_buffer_size)):
            if not isinstance(v, (int, float)) or v <= 0:
                raise ValueError(f"ddg.DataParallel: {name} must be a positive number of MB, got {v!r}")
        super().__init__()
        d = self.__dict__
        d["_layers"] = layer              # not registered: keeps state_dict keys unprefixed
        d["training"] = layer.training
        if group is None:
            comm = get_device_communicator()  # MPI, or NCCL with DDG_COMM=nccl|auto
        elif isinstance(group, Communicator):
            comm = group
        else:
            raise TypeError(f"ddg.DataParallel: group must be None or a ddg.parallel.Communicator, "
                            f"got {type(group).__name__}")
        d["_comm"] = comm
        d["world_size"] = comm.size
        d["find_unused_parameters"] = bool(find_unused_parameters)
        d["fp16_allreduce"] = bool(fp16_allreduce)
        d["comm_buffer_size"] = comm_buffer_size
        d["last_comm_buffer_size"] = last_comm_buffer_size
        d["_sync"] = True
        d["_multi"] = comm.size > 1
        d["_buckets"] = []
        d["_active"] = False
        d["_overlap"] = True          # False: launch everything at the end (benchmarks)
        d["_owed"] = False            # a training forward ran; its sync has not happened yet
        d["_weight"] = 1.0            # local batch size of the latest forward
        d["_mean_weight"] = 1.0       # global mean weight of the previous synced step
        d["_stats"] = {"exposed_s": 0.0, "steps": 0}
        if not self._multi:
            return                    # world size 1: nothing to check, sync or hook
        self._check_replicas()
        self._broadcast_state()
        self._build_buckets()
        self._install_hooks()

    # ------------------------------------------------------------------ construction
    def _describe_model(self):
        desc = [("param", n, tuple(p.shape), p.dtype.str, bool(p.trainable))
                for n, p in self._layers.named_parameters()]
        desc += [("buffer", n, tuple(b.shape), b.dtype.str, True) for n, b in self._layers.named_buffers()]
        return desc

    def _check_replicas(self):
        """Every rank must hold the same parameters and buffers; raise on ALL ranks if not."""
        mine = self._describe_model()
        everyone = self._comm.allgather_object(mine)
        ref = everyone[0]
        for r, desc in enumerate(everyone[1:], start=1):
            if desc == ref:
                continue
            for i in range(max(len(ref), len(desc))):
                a = ref[i] if i < len(ref) else None
                b = desc[i] if i < len(desc) else None
                if a != b:
                    def fmt(e):
                        if e is None:
                            return "nothing"
                        kind, name, shape, dt, trainable = e
                        extra = "" if trainable else " (not trainable)"
                        return f"{kind} {name!r} {np.dtype(dt).name}{list(shape)}{extra}"
                    raise ValueError(
                        f"ddg.DataParallel: the model differs across ranks: at position {i}, rank 0 has "
                        f"{fmt(a)} but rank {r} has {fmt(b)} (rank 0 has {len(ref)} parameters+buffers, "
                        f"rank {r} has {len(desc)}). Every rank must build the same model.")

    def _broadcast_state(self):
        comm = self._comm
        for t in list(self._layers.parameters()) + list(self._layers.buffers()):
            comm.broadcast(t._data, 0)
            t._vc[0] += 1

    def _build_buckets(self):
        params = [p for p in self._layers.parameters() if not p.stop_gradient]
        params.reverse()
        caps = (self.last_comm_buffer_size * _MB, self.comm_buffer_size * _MB)
        groups = {}       # (dtype, device kind) -> parameters still to place, in order
        order = []
        for p in params:
            key = (p._data.dtype, backend.is_gpu_array(p._data))
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(p)
        # Fill buckets group by group; within a group keep reverse registration order.
        buckets = []
        for key in order:
            cur, size = [], 0
            for p in groups[key]:
                cap = caps[0] if not buckets else caps[1]
                if cur and size + p._data.nbytes > cap:
                    buckets.append(cur)
                    cur, size = [], 0
                cur.append(p)
                size += p._data.nbytes
            if cur:
                buckets.append(cur)
        out = []
        for i, ps in enumerate(buckets):
            xp = backend.get_array_module(ps[0]._data)
            b = _Bucket(i, ps, xp, ps[0]._data.dtype)
            for slot, p in enumerate(ps):
                # Keep an existing gradient: copy it into the bucket and bind the view.
                if p._grad is not None:
                    b.views[slot][...] = p._grad._data
                    p._grad = b.bound[slot]
            out.append(b)
        self.__dict__["_buckets"] = out
        self.__dict__["_params"] = params

    def _install_hooks(self):
        ref = weakref.ref(self)
        handles = []
        for b in self._buckets:
            for p in b.params:
                def ready(_leaf, b=b):
                    dp = ref()
                    if dp is not None and dp._active:
                        dp._param_ready(b)
                handles.append(p.register_grad_ready_hook(ready))

        def begin(leaves):
            dp = ref()
            if dp is not None:
                dp._on_backward_begin(leaves)

        def complete():
            dp = ref()
            if dp is not None and dp._active:
                dp._on_backward_complete()

        handles.append(engine.register_backward_begin_callback(begin))
        handles.append(engine.register_backward_complete_callback(complete))
        self.__dict__["_handles"] = handles
        weakref.finalize(self, _remove_handles, handles)

    # ------------------------------------------------------------------ forward
    def forward(self, *inputs, **kwargs):
        if self._multi and _grad_enabled[0]:
            if self.training:
                self._sync_buffers()
            self.__dict__["_weight"] = _batch_weight(inputs, kwargs)
            self.__dict__["_owed"] = self.training
        return self._layers(*inputs, **kwargs)

    def _sync_buffers(self):
        comm = self._comm
        for b in self._layers.buffers():
            if b._data.size:
                comm.broadcast(b._data, 0)
                b._vc[0] += 1

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward accumulates gradients locally without communication; the
        next synchronized backward reduces the whole accumulated gradient."""
        prev = self._sync
        self.__dict__["_sync"] = False
        try:
            yield
        finally:
            self.__dict__["_sync"] = prev

    # ------------------------------------------------------------------ backward
    def _on_backward_begin(self, leaves):
        if self._active:
            # The previous pass raised before completing: finish its requests first.
            self._finish()
        reached_any = False
        for p in self._params:
            if p in leaves:
                reached_any = True
                break
        if not reached_any and not (self.find_unused_parameters and self._owed):
            return                      # another model's backward
        self.__dict__["_owed"] = False
        sync = self._sync
        for b in self._buckets:
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
        d = self.__dict__
        d["_active"] = True
        d["_next"] = 0
        d["_first_open"] = 0
        if self._overlap:
            self._launch_ready()

    def _param_ready(self, bucket):
        bucket.pending -= 1
        if self._overlap:
            if bucket.pending == 0 and bucket.index == self._next:
                self._launch_ready()
            else:
                self._progress()

    def _launch_ready(self):
        buckets = self._buckets
        i = self._next
        while i < len(buckets) and buckets[i].pending <= 0:
            self._launch(buckets[i])
            i += 1
        self.__dict__["_next"] = i
        self._progress()

    def _progress(self):
        """Let MPI advance the requests in flight (a cheap, non-blocking test)."""
        buckets = self._buckets
        i = self._first_open
        while i < self._next and buckets[i].request.test():
            i += 1
        self.__dict__["_first_open"] = i
        j = i + 1
        while j < self._next:       # later requests may progress too
            buckets[j].request.test()
            j += 1

    def _launch(self, b):
        # A Python float on the CPU; on a GPU, after the first synced step, a 0-d float64
        # device array (the previous step's global weight never leaves the device).
        scale = self._weight / self._mean_weight
        b.data[-1] = scale
        comm = self._comm
        if self.fp16_allreduce and b.data.dtype == np.float32:
            xp = backend.get_array_module(b.data)
            if b.half is None:
                b.half = xp.empty(b.data.shape, dtype=np.float16)
            pre = 1.0 / self.world_size          # keeps the float16 sum from overflowing
            b.pre = pre
            b.used_half = True
            xp.multiply(b.grads, scale * pre, out=b.half[:b.numel], casting="unsafe")
            b.half[b.numel:] = b.data[b.numel:]
            b.request = _half_iallreduce(comm, b.half)
        else:
            b.pre = 1.0
            b.used_half = False
            if not isinstance(scale, float):
                b.grads *= scale.astype(b.grads.dtype)    # rounded as a Python float would be
            elif scale != 1.0:
                b.grads *= scale
            b.request = comm.iallreduce(b.data, "sum")

    def _on_backward_complete(self):
        t0 = time.perf_counter()
        self._launch_all()
        self._finish()
        st = self._stats
        st["exposed_s"] += time.perf_counter() - t0
        st["steps"] += 1

    def _launch_all(self):
        buckets = self._buckets
        for i in range(self._next, len(buckets)):
            self._launch(buckets[i])
        self.__dict__["_next"] = len(buckets)

    def _finish(self):
        """Wait for every launched bucket and turn sums into weighted means."""
        d = self.__dict__
        d["_active"] = False
        total = None
        for b in self._buckets[:self._next]:
            b.request.wait()
            b.request = None
            if b.used_half:
                b.data[...] = b.half
            if b.on_device:
                xp = backend.get_array_module(b.data)
                total = b.data[-1].astype(np.float64)     # sum over ranks of n_r / m, on the device
                denom = total * b.pre
                b.grads *= (1.0 / xp.where(denom > 0, denom, 1.0)).astype(b.grads.dtype)
            else:
                total = float(b.data[-1])           # sum over ranks of n_r / m
                denom = total * b.pre
                if denom > 0 and denom != 1.0:
                    b.grads *= 1.0 / denom
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
                d["_mean_weight"] = xp.where(total > 0, total * m / self.world_size, m)
            elif total > 0:
                d["_mean_weight"] = total * m / self.world_size
        d["_next"] = 0

    def _allreduce_grads(self):
        """Synchronize the current gradients now, outside backward, through the same
        path as a backward pass (used by the benchmark to time the sync alone)."""
        if not self._multi:
            return
        for b in self._buckets:
            b.set_flags([p._grad is not None for p in b.params])
        d = self.__dict__
        d["_active"], d["_next"], d["_first_open"] = True, 0, 0
        self._launch_all()
        self._finish()

    # ------------------------------------------------------------------ delegation
    def named_sublayers(self, prefix="", include_self=False, layers_set=None):
        # The wrapped layer stands in for this wrapper, so names carry no "_layers." prefix.
        return self._layers.named_sublayers(prefix, include_self, layers_set)

    def named_children(self):
        yield "_layers", self._layers

    def train(self):
        self.__dict__["training"] = True
        self._layers.train()
        return self

    def eval(self):
        self.__dict__["training"] = False
        self._layers.eval()
        return self

    def __getattr__(self, name):
        d = self.__dict__
        if "_layers" in d:
            return getattr(d["_layers"], name)
        raise AttributeError(f"'DataParallel' object has no attribute '{name}'")

    def __repr__(self):
        return f"DataParallel(world_size={self.world_size}, buckets={len(self._buckets)},\n  " + \
            "\n  ".join(repr(self._layers).split("\n")) + "\n)"

    # Paddle 2.0 compatibility: the loss scaling now happens in the all-reduce.
    def scale_loss(self, loss):
        return loss

    def apply_collective_grads(self):
        pass


def _remove_handles(handles):
    for h in handles:
        h.remove()


def _batch_weight(inputs, kwargs):
    """Rows of the first Tensor argument (the local batch size), or 1."""
    for v in list(inputs) + list(kwargs.values()):
        if isinstance(v, Tensor):
            return float(v._data.shape[0]) if v._data.ndim else 1.0
    return 1.0


# ---------------------------------------------------------------------- float16 sum
_HALF_OP = None


def _half_sum(inbuf, inoutbuf, datatype):
    a = np.frombuffer(inbuf, dtype=np.float16)
    b = np.frombuffer(inoutbuf, dtype=np.float16)
    np.add(b, a, out=b)        # numpy adds float16 in float32 and rounds once


class _HalfRequest:
    __slots__ = ("_req", "_comm", "_array", "_done")

    def __init__(self, req, comm, array):
        self._req, self._comm, self._array, self._done = req, comm, array, False

    def test(self):
        if not self._done:
            self._done = self._req.Test()
        return self._done

    def wait(self):
        if not self._done:
            comm = self._comm
            comm._begin(("iallreduce.wait", self._array, "sum(float16)"))
            try:
                self._req.Wait()
            finally:
                comm._end()
            self._done = True
        return self._array


def _half_iallreduce(comm, array):
    """A float16 all-reduce that sends float16 bytes (MPI has no float16 sum, so the
    sum is a user-defined op). Falls back to the communicator's own float16
    reduction (computed in float32) for other communicators or device arrays."""
    global _HALF_OP
    if isinstance(comm, MPICommunicator) and type(array) is np.ndarray:
        MPI = comm._MPI
        if _HALF_OP is None:
            _HALF_OP = MPI.Op.Create(_half_sum, commute=True)
        req = comm.comm.Iallreduce(MPI.IN_PLACE, [array, MPI.UINT16_T], _HALF_OP)
        return _HalfRequest(req, comm, array)
    return comm.iallreduce(array, "sum")
