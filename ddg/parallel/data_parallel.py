"""``ddg.DataParallel``: synchronous data-parallel training over a Communicator.

Every rank holds a replica of the same model and runs it on its own slice of the global
batch. During ``backward()`` the gradients are averaged across ranks (by a
:class:`~ddg.parallel.reducer.Reducer`, which says how), so that after ``backward()``
every replica holds the same gradient and the optimizer steps keep the replicas
identical. With world size 1 nothing is checked, hooked or communicated (mpi4py is never
imported).
"""
import contextlib

from ..autograd.grad_mode import _enabled as _grad_enabled
from ..nn.layer.layers import Layer
from ..tensor.tensor import Tensor
from .comm import Communicator
from .env import get_device_communicator
from .reducer import Reducer
from .replicas import broadcast_state, check_replicas, sync_buffers

__all__ = ["DataParallel"]


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
        fp16_allreduce: send float32 gradients as float16 (half the bytes): the
            communicator applies the 'fp16' compression of
            :mod:`ddg.parallel.comm.compression` (relative error of order
            ``world_size * 2**-11``; values below ~6e-8 flush to zero).

    The wrapped layer is ``self._layers``; ``parameters()``, ``named_parameters()``,
    ``state_dict()`` and ``set_state_dict()`` use the wrapped layer's names
    unchanged (no ``_layers.`` prefix), so checkpoints move freely between one
    process and N ranks. In training mode, buffers (BatchNorm running statistics)
    are broadcast from rank 0 at every forward.

    The gradient synchronization is ``self.reducer`` (a :class:`ddg.parallel.Reducer`;
    None with world size 1): its ``stats`` counts steps and exposed communication time.
    """

    def __init__(self, layer, strategy=None, comm_buffer_size=25, last_comm_buffer_size=1,
                 find_unused_parameters=False, group=None, fp16_allreduce=False):
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
        super().__init__()
        # Not registered as a sublayer: state_dict keys stay those of the wrapped layer.
        object.__setattr__(self, "_layers", layer)
        self.training = layer.training
        self._comm = comm
        self.world_size = comm.size
        self.find_unused_parameters = bool(find_unused_parameters)
        self.fp16_allreduce = bool(fp16_allreduce)
        self.comm_buffer_size = comm_buffer_size
        self.last_comm_buffer_size = last_comm_buffer_size
        self.reducer = None
        if comm.size == 1:
            return
        check_replicas(comm, layer)
        broadcast_state(comm, layer)
        params = [p for p in layer.parameters() if not p.stop_gradient]
        self.reducer = Reducer(params, comm, comm_buffer_size, last_comm_buffer_size,
                               compression="fp16" if fp16_allreduce else None,
                               find_unused_parameters=find_unused_parameters)

    # ------------------------------------------------------------------ forward
    def forward(self, *inputs, **kwargs):
        reducer = self.reducer
        if reducer is not None and _grad_enabled[0]:
            if self.training:
                sync_buffers(self._comm, self._layers)
            reducer.set_batch_weight(_batch_weight(inputs, kwargs))
            reducer.mark_forward(self.training)
        return self._layers(*inputs, **kwargs)

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

    # ------------------------------------------------------------------ delegation
    def named_sublayers(self, prefix="", include_self=False, layers_set=None):
        # The wrapped layer stands in for this wrapper, so names carry no "_layers." prefix.
        return self._layers.named_sublayers(prefix, include_self, layers_set)

    def named_children(self):
        yield "_layers", self._layers

    def train(self):
        self.training = True
        self._layers.train()
        return self

    def eval(self):
        self.training = False
        self._layers.eval()
        return self

    def __getattr__(self, name):
        d = self.__dict__
        if "_layers" in d:
            return getattr(d["_layers"], name)
        raise AttributeError(f"'DataParallel' object has no attribute '{name}'")

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
