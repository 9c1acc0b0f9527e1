"""``ShardedDataParallel``: DataParallel whose gradient synchronization follows a
:class:`~.optimizer.ShardingOptimizer`'s parameter owners."""
from ...parallel.data_parallel import DataParallel
from .stage2 import GradShardReducer

__all__ = ["ShardedDataParallel"]


class ShardedDataParallel(DataParallel):
    """The model side of :func:`~ddg.distributed.sharding.group_sharded_parallel`.

    ``stage`` 1: gradients are all-reduced (DataParallel's Reducer, weighted by local
    batch sizes). ``stage`` 2: each gradient is reduced onto the rank that owns the
    parameter (``owners``: ``{id(param): rank}``, a ShardingOptimizer's ``owners``) and
    dropped elsewhere (:class:`~.stage2.GradShardReducer`; parameters not in ``owners``
    belong to rank 0). ``no_sync()`` works at both stages; ``join()`` does not (the sharded
    optimizer step is itself collective, so a rank out of data cannot skip it).
    """

    def __init__(self, layer, owners, stage=1, group=None, **kwargs):
        if stage not in (1, 2):
            raise ValueError(f"ddg.distributed.sharding.ShardedDataParallel: stage must be 1 or 2, got {stage!r}")
        object.__setattr__(self, "_shard_stage", stage)
        object.__setattr__(self, "_shard_owners", dict(owners))
        super().__init__(layer, group=group, **kwargs)

    def _build_reducer(self, params, comm):
        if self._shard_stage == 1:
            return super()._build_reducer(params, comm)
        owners = self._shard_owners
        return GradShardReducer(params, comm, lambda p: owners.get(id(p), 0), self.comm_buffer_size,
                                self.find_unused_parameters)

    @property
    def stage(self):
        return self._shard_stage

    def join(self):
        raise NotImplementedError("ddg.distributed.sharding: join() is not supported with a sharded optimizer "
                                  "(its step is collective: every rank must take it)")
