"""``ddg.distributed.sharding``: Paddle's ``group_sharded_parallel`` over ddg's data
parallelism: the optimizer state sharded across ranks (ZeRO stage 1, :mod:`.optimizer`),
the gradients too (stage 2, :mod:`.stage2`), and the parameters too (stage 3,
:mod:`.stage3`)."""
import os

from ...io import load, save
from ...nn.layer.layers import Layer
from ...parallel.comm import Communicator
from .model import ShardedDataParallel
from .optimizer import ShardingOptimizer, assign_owners

__all__ = ["group_sharded_parallel", "save_group_sharded_model", "save_sharded", "load_sharded",
           "ShardingOptimizer", "ShardedDataParallel", "assign_owners"]

_LEVELS = ("os", "os_g", "p_g_os")


def _communicator(group, who):
    from ...parallel.env import get_device_communicator
    if group is None:
        return get_device_communicator()
    if isinstance(group, Communicator):
        return group
    comm = getattr(group, "comm", None)
    if isinstance(comm, Communicator):
        return comm
    raise TypeError(f"ddg.distributed.sharding.{who}: group must be None, a ddg.distributed Group or a "
                    f"Communicator, got {type(group).__name__}")


def group_sharded_parallel(model, optimizer, level, scaler=None, group=None, offload=False, sync_buffers=False,
                           buffer_max_size=2 ** 23, segment_size=2 ** 20, sync_comm=False, dp_group=None,
                           exclude_layer=None, overlap_gather=False):
    """Paddle's ``paddle.distributed.sharding.group_sharded_parallel``: returns
    ``(model, optimizer, scaler)`` to train with as usual.

    ``optimizer`` becomes a :class:`ShardingOptimizer`: each rank keeps the optimizer
    state of its share of the parameters and updates only those, then each owner
    broadcasts its updated parameters (at stages 1 and 2; the step waits for them unless
    ``overlap_gather=True``, a ddg option: then each layer waits for its parameters in a
    forward pre-hook, so the broadcasts overlap the next forward, and a parameter Tensor
    read directly between the step and the next forward may still hold its previous
    value: see ``docs/sharding.md``). ``model`` becomes a
    :class:`~.model.ShardedDataParallel` over the ranks of ``group`` (the world by
    default). The parameters after each step are those of unsharded DataParallel.

    ``level``: ``'os'`` (stage 1: optimizer state; gradients all-reduced as DataParallel
    does), ``'os_g'`` (stage 2: and gradients, each summed over the ranks during
    backward and kept by its owner only, see :mod:`.stage2`), ``'p_g_os'`` (stage 3: and
    parameters, each kept on its owner and gathered layer by layer for forward and
    backward, see :mod:`.stage3`). ``buffer_max_size``: the gradient bucket size in
    bytes. ``sync_comm=True``: the step waits for the broadcasts of the updated
    parameters, and stage 3 gathers without prefetching. ``offload``, ``segment_size``
    and ``exclude_layer`` are accepted for compatibility; ``sync_buffers`` is what DataParallel always does
    (buffers broadcast from rank 0 in training forwards); ``dp_group`` (a second,
    replicating dimension) is not supported.
    """
    from ...optimizer.optimizer import Optimizer
    from ...parallel.data_parallel import DataParallel
    if not isinstance(model, Layer):
        raise TypeError(f"ddg.distributed.sharding.group_sharded_parallel: model must be a ddg.nn.Layer, "
                        f"got {type(model).__name__}")
    if isinstance(optimizer, ShardingOptimizer):
        raise ValueError("ddg.distributed.sharding.group_sharded_parallel: the optimizer is already sharded")
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"ddg.distributed.sharding.group_sharded_parallel: optimizer must be a "
                        f"ddg.optimizer.Optimizer, got {type(optimizer).__name__}")
    if level not in _LEVELS:
        raise ValueError(f"ddg.distributed.sharding.group_sharded_parallel: level must be one of "
                         f"{', '.join(map(repr, _LEVELS))}, got {level!r}")
    if dp_group is not None:
        raise NotImplementedError("ddg.distributed.sharding.group_sharded_parallel: dp_group (sharding inside "
                                  "data-parallel replicas) is not supported; shard over the whole group")
    comm = _communicator(group, "group_sharded_parallel")
    if isinstance(model, DataParallel):
        raise ValueError("ddg.distributed.sharding.group_sharded_parallel: pass the model itself, not a "
                         "DataParallel (the sharded wrapper synchronizes the gradients)")
    sharded = ShardingOptimizer(optimizer, comm)
    if not isinstance(buffer_max_size, (int, float)) or buffer_max_size <= 0:
        raise ValueError(f"ddg.distributed.sharding.group_sharded_parallel: buffer_max_size must be a positive "
                         f"number of bytes, got {buffer_max_size!r}")
    stage = _LEVELS.index(level) + 1
    sharded.gather_after_step = stage < 3
    model = ShardedDataParallel(model, sharded.owners, stage=stage, group=comm,
                                comm_buffer_size=buffer_max_size / (1024 * 1024), sync_comm=sync_comm,
                                overlap_gather=overlap_gather)
    model._attach_optimizer(sharded)
    return model, sharded, scaler


def save_group_sharded_model(model, output, optimizer=None):
    """Write ``output/model.pdmodel`` (the model's full state dict) and, with an
    optimizer, ``output/model.pdopt`` (its full state dict, gathered from every rank's
    shard): ordinary checkpoints that ``ddg.load`` and ``set_state_dict`` read with or
    without sharding, at any world size. Every rank must call it (the optimizer state is
    gathered); rank 0 writes."""
    if os.path.isfile(output):
        raise ValueError(f"ddg.distributed.sharding.save_group_sharded_model: output {output!r} is a file; it "
                         f"must be a directory")
    if optimizer is not None and not isinstance(optimizer, ShardingOptimizer):
        raise TypeError("ddg.distributed.sharding.save_group_sharded_model: optimizer must be the one "
                        "group_sharded_parallel returned")
    comm = optimizer._comm if optimizer is not None else _communicator(getattr(model, "_comm", None),
                                                                         "save_group_sharded_model")
    opt_state = optimizer.state_dict() if optimizer is not None else None
    model_state = model.state_dict()      # gathered from the owners at stage 3 (every rank calls it)
    try:
        if comm.rank == 0:
            os.makedirs(output, exist_ok=True)
            save(model_state, os.path.join(output, "model.pdmodel"))
            if opt_state is not None:
                save(opt_state, os.path.join(output, "model.pdopt"))
    finally:
        comm.barrier()


def save_sharded(model, optimizer, output):
    """Save without gathering, for optimizer states too big for one process: rank 0
    writes ``output/model.pdmodel``; every rank writes its own shard of the optimizer
    state, ``output/optimizer.rank<r>-of-<N>.pdopt`` (entries keyed by parameter
    position). :func:`load_sharded` reads them back at this or another world size.
    Every rank must call it."""
    if not isinstance(optimizer, ShardingOptimizer):
        raise TypeError("ddg.distributed.sharding.save_sharded: optimizer must be the one group_sharded_parallel "
                        "returned")
    if os.path.isfile(output):
        raise ValueError(f"ddg.distributed.sharding.save_sharded: output {output!r} is a file; it must be a "
                         f"directory")
    comm = optimizer._comm
    entries, masters, lr = optimizer._positional_shard()
    model_state = model.state_dict()      # gathered from the owners at stage 3 (every rank calls it)
    try:
        os.makedirs(output, exist_ok=True)
        if comm.rank == 0:
            save(model_state, os.path.join(output, "model.pdmodel"))
        save({"entries": entries, "masters": masters, "LR_Scheduler": lr, "world_size": comm.size},
             os.path.join(output, _shard_name(comm.rank, comm.size)))
    finally:
        comm.barrier()


def load_sharded(model, optimizer, path):
    """Load what :func:`save_sharded` wrote: the model's state on every rank, and into
    ``optimizer`` (a ShardingOptimizer, at any world size) the entries of this rank's
    parameters. At the world size of the save a rank reads its own shard only."""
    if not isinstance(optimizer, ShardingOptimizer):
        raise TypeError("ddg.distributed.sharding.load_sharded: optimizer must be the one group_sharded_parallel "
                        "returned")
    names = sorted(f for f in os.listdir(path) if f.startswith("optimizer.rank") and f.endswith(".pdopt"))
    if not names:
        raise FileNotFoundError(f"ddg.distributed.sharding.load_sharded: no optimizer.rank*.pdopt in {path!r}")
    saved_size = int(names[0].split("-of-")[1].split(".")[0])
    if len(names) != saved_size:
        raise FileNotFoundError(f"ddg.distributed.sharding.load_sharded: {path!r} holds {len(names)} of the "
                                f"{saved_size} shard files of the save")
    model.set_state_dict(load(os.path.join(path, "model.pdmodel")))
    comm = optimizer._comm
    files = [_shard_name(comm.rank, comm.size)] if saved_size == comm.size else \
        [_shard_name(r, saved_size) for r in range(saved_size)]
    parts = []
    for f in files:
        d = load(os.path.join(path, f))
        parts.append(([(int(i), s, _array(v)) for i, s, v in d["entries"]],
                      [(int(i), _array(t)) for i, t in d["masters"]], d.get("LR_Scheduler")))
    optimizer._load_positional(parts)


def _shard_name(rank, size):
    return f"optimizer.rank{rank}-of-{size}.pdopt"


def _array(v):
    import numpy as np
    from ...tensor.tensor import Tensor
    return v.numpy() if isinstance(v, Tensor) else np.asarray(v)
