"""``ddg.DataParallel``: synchronous data-parallel training over a Communicator.

Every rank holds a replica of the same model and runs it on its own slice of the global
batch. During ``backward()`` the gradients are averaged across ranks (by a
:class:`~ddg.parallel.reducer.Reducer`, which says how), so that after ``backward()``
every replica holds the same gradient and the optimizer steps keep the replicas
identical. With world size 1 nothing is checked, hooked or communicated (mpi4py is never
imported).
"""
import contextlib

import numpy as np

from ..autograd.grad_mode import _enabled as _grad_enabled
from ..nn.layer.layers import Layer, LayerWrapper
from ..tensor.tensor import Tensor
from .comm import Communicator
from .env import get_device_communicator
from .reducer import Reducer
from .replicas import broadcast_state, broadcast_tensors, check_replicas

__all__ = ["DataParallel"]


class DataParallel(LayerWrapper):
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
        fp16_allreduce: send float32 gradients as float16 (half the bytes): the
            communicator applies the 'fp16' compression of
            :mod:`ddg.parallel.comm.compression` (relative error of order
            ``world_size * 2**-11``; values below ~6e-8 flush to zero).
            float16 and bfloat16 gradients always travel in their own dtype (2 bytes a
            value, their own bucket, divided by the world size before the sum).
        broadcast_buffers: after every training forward (grad enabled, ``train()``
            mode), overwrite the non-trainable state of every rank (buffers and the
            parameters the gradient synchronization does not cover: BatchNorm running
            statistics, frozen parameters) with rank 0's, so that every rank holds
            the same ``state_dict`` after every step, as PyTorch DDP's option of the
            same name does (default True). One broadcast per dtype and device, of a
            flat buffer. False leaves each rank its own statistics (those of its
            local batches).

    The wrapped layer is ``self._layers``; ``parameters()``, ``named_parameters()``,
    ``state_dict()`` and ``set_state_dict()`` use the wrapped layer's names
    unchanged (no ``_layers.`` prefix), so checkpoints move freely between one
    process and N ranks. ``SyncBatchNorm`` computes its statistics over the global
    batch, so they equal one process's on the whole batch; a plain ``BatchNorm``'s are
    those of rank 0's local batches (see ``broadcast_buffers``).

    The gradient synchronization is ``self.reducer`` (a :class:`ddg.parallel.Reducer`;
    None with world size 1): its ``stats`` counts steps and exposed communication time.
    """

    def __init__(self, layer, strategy=None, comm_buffer_size=25, last_comm_buffer_size=1,
                 find_unused_parameters=False, group=None, fp16_allreduce=False, broadcast_buffers=True):
        if not isinstance(layer, Layer):
            raise TypeError(f"ddg.DataParallel: layer must be a ddg.nn.Layer, got {type(layer).__name__}")
        for name, v in (("comm_buffer_size", comm_buffer_size), ("last_comm_buffer_size", last_comm_buffer_size)):
            if not isinstance(v, (int, float)) or v <= 0:
                raise ValueError(f"ddg.DataParallel: {name} must be a positive number of MB, got {v!r}")
        if group is None:
            comm = get_device_communicator()  # MPI, or NCCL with DDG_COMM=nccl|auto
        elif isinstance(group, Communicator):
            comm = group
        else:
            raise TypeError(f"ddg.DataParallel: group must be None or a ddg.parallel.Communicator, "
                            f"got {type(group).__name__}")
        super().__init__(layer)
        self._comm = comm
        self.world_size = comm.size
        self.find_unused_parameters = bool(find_unused_parameters)
        self.fp16_allreduce = bool(fp16_allreduce)
        self.broadcast_buffers = bool(broadcast_buffers)
        self.comm_buffer_size = comm_buffer_size
        self.last_comm_buffer_size = last_comm_buffer_size
        self.reducer = None
        self._join = None                     # the Join in force (see join())
        if comm.size == 1:
            return
        check_replicas(comm, layer)
        broadcast_state(comm, layer)
        params = [p for p in layer.parameters() if not p.stop_gradient]
        self._reduced = frozenset(id(p) for p in params)
        self.reducer = self._build_reducer(params, comm)

    def _build_reducer(self, params, comm):
        """The gradient synchronization of ``params`` (a subclass may return another
        object with the Reducer's interface)."""
        return Reducer(params, comm, self.comm_buffer_size, self.last_comm_buffer_size,
                       compression="fp16" if self.fp16_allreduce else None,
                       find_unused_parameters=self.find_unused_parameters)

    # ------------------------------------------------------------------ forward
    def forward(self, *inputs, **kwargs):
        reducer = self.reducer
        sync_state, root = False, 0
        if reducer is not None and _grad_enabled[0]:
            if self._join is not None:
                root = self._join.announce(self.training, reducer.sync_enabled)
            sync_state = self.training and self.broadcast_buffers
            reducer.set_batch_weight(_batch_weight(inputs, kwargs))
            reducer.mark_forward(self.training)
        out = self._layers(*inputs, **kwargs)
        if sync_state:
            self._sync_state(root)
        return out

    def _nontrainable_state(self):
        """Buffers and the parameters the reducer does not average, in model order."""
        layer = self._layers
        return [p for p in layer.parameters() if id(p) not in self._reduced] + layer.buffers()

    def _sync_state(self, root):
        broadcast_tensors(self._comm, self._nontrainable_state(), root)

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward accumulates gradients locally without communication; the
        next synchronized backward reduces the whole accumulated gradient."""
        reducer = self.reducer
        if reducer is None:
            yield
            return
        prev = reducer.sync_enabled
        reducer.sync_enabled = False
        try:
            yield
        finally:
            reducer.sync_enabled = prev

    def join(self):
        """A context for training with uneven inputs (PyTorch's ``Join``, Horovod's
        ``join()``): ``with model.join(): for x, y in my_batches: ...``.

        Ranks may run out of data at different steps. Under this context each training
        forward first takes part in a tiny all-reduce that counts the ranks still
        training. A rank whose loop has ended waits at the end of the context and
        *shadows* the others: it answers that all-reduce, the state broadcasts (from the
        lowest rank still training) and every
        gradient synchronization with zero gradients and zero weight, so the others get
        exactly the gradients they would get if it were not there (the weighted mean over
        the ranks that still have data). When no rank is left training, every rank takes
        the parameters and buffers of the lowest rank among those that trained longest,
        so all replicas end equal (the optimizer state of a rank that left early is not
        updated). Every rank must enter the context; it does not nest.
        """
        return Join(self)

    # ------------------------------------------------------------------ delegation
    def __repr__(self):
        buckets = 0 if self.reducer is None else len(self.reducer.buckets)
        return f"DataParallel(world_size={self.world_size}, buckets={buckets},\n  " + \
            "\n  ".join(repr(self._layers).split("\n")) + "\n)"

    # Paddle 2.0 compatibility: the loss scaling now happens in the all-reduce.
    def scale_loss(self, loss):
        return loss

    def apply_collective_grads(self):
        pass


def _batch_weight(inputs, kwargs):
    """Rows of the first Tensor argument (the local batch size), or 1."""
    for v in list(inputs) + list(kwargs.values()):
        if isinstance(v, Tensor):
            return float(v._data.shape[0]) if v._data.ndim else 1.0
    return 1.0


def _spanning_sync_norms(layer):
    """``(name, layer)`` of the SyncBatchNorm layers in ``layer`` whose statistics span
    more than one rank."""
    from .sync_batch_norm import SyncBatchNorm   # noqa: PLC0415 - only under join()
    found = []
    for name, m in layer.named_sublayers(include_self=True):
        if isinstance(m, SyncBatchNorm):
            try:
                spans = m._communicator().size > 1
            except ValueError:       # this rank is not in the layer's group
                spans = False
            if spans:
                found.append((repr(name) if name else "the model itself", m))
    return found


class Join:
    """The context :meth:`DataParallel.join` returns (see there)."""

    _sync_norms = ()    # the model's SyncBatchNorm layers across ranks (found at the entry)

    def __init__(self, model):
        self.model = model
        self.steps = 0          # training forwards this rank ran under the context

    def __enter__(self):
        model = self.model
        if model.reducer is not None:
            if model._join is not None:
                raise RuntimeError("ddg.DataParallel.join: this model is already joined (the context does not nest)")
            model._join = self
            self._sync_norms = _spanning_sync_norms(model._layers)
        return self

    def announce(self, training, sync):
        """A training rank's forward: this step's round of the ranks still training.
        Returns the rank whose state the state broadcast after this forward sends."""
        self.steps += 1
        return self._round(1, sync and training, training)[1]

    def _shadow(self, syncing):
        """A rank out of data answers a synchronization that ``syncing`` ranks make (a
        subclass may also take part in what follows it, e.g. a collective step)."""
        self.model.reducer.shadow_sync()

    def _round(self, active, sync, training):
        # summed over ranks: ranks still training; of those, ranks that will synchronize
        # gradients after this forward; ranks that broadcast their state after it; and
        # which ranks are still training (so the lowest of them is the broadcast's root)
        comm = self.model._comm
        state = np.zeros(3 + comm.size, dtype=np.int64)
        state[:3] = active, int(bool(sync)), int(bool(training and self.model.broadcast_buffers))
        state[3 + comm.rank] = active
        total = comm.allreduce(state, "sum")
        if self._sync_norms and 0 < total[0] < comm.size:
            # a rank out of data; every rank sees the same totals, so all refuse together
            shadow_training = total[2] > 0 if self.model.broadcast_buffers else self.model._layers.training
            self._refuse_sync_norms(training if active else shadow_training)
        live = np.flatnonzero(total[3:])
        return [int(v) for v in total[:3]], int(live[0]) if live.size else 0

    def _refuse_sync_norms(self, training):
        """A training forward while some rank is out of data cannot run a SyncBatchNorm
        that computes batch statistics: its collectives in forward and backward have no
        answer from the rank without data (PyTorch's join does not support it either).
        Raised on every rank at the same round instead of a hang until the stall timeout."""
        if not training:
            return
        names = [name for name, m in self._sync_norms
                 if (m.training if m._use_global_stats is None else not m._use_global_stats)]
        if names:
            raise RuntimeError(
                f"ddg.DataParallel.join: a rank has run out of data while the model trains with "
                f"SyncBatchNorm (layer {', '.join(names[:4])}{' ...' if len(names) > 4 else ''}): its statistics are "
                f"collectives that a rank without data cannot answer. Give every rank the same number of "
                f"batches (DistributedBatchSampler(drop_last=True)), or use BatchNorm for the uneven tail")

    def __exit__(self, etype, value, tb):
        model = self.model
        reducer = model.reducer
        if reducer is None:
            return False
        try:
            if etype is not None:
                return False            # an exception ends the job (fail fast), never shadows
            comm = model._comm
            while True:
                (active, sync, training), root = self._round(0, False, False)
                if active == 0:
                    break
                if training:
                    model._sync_state(root)
                if sync:
                    self._shadow(int(sync))
            steps = comm.allgather_object(self.steps)
            broadcast_state(comm, model._layers, root=steps.index(max(steps)))
        finally:
            model._join = None
        return False
