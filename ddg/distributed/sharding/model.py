"""``ShardedDataParallel``: DataParallel whose gradient synchronization follows a
:class:`~.optimizer.ShardingOptimizer`'s parameter owners."""
from ...parallel.data_parallel import DataParallel, Join
from .stage2 import GradShardReducer

__all__ = ["ShardedDataParallel"]


class ShardedDataParallel(DataParallel):
    """The model side of :func:`~ddg.distributed.sharding.group_sharded_parallel`.

    ``stage`` 1: gradients are all-reduced (DataParallel's Reducer, weighted by local
    batch sizes). ``stage`` 2: each gradient is reduced onto the rank that owns the
    parameter (``owners``: ``{id(param): rank}``, a ShardingOptimizer's ``owners``) and
    dropped elsewhere (:class:`~.stage2.GradShardReducer`; parameters not in ``owners``
    belong to rank 0). ``no_sync()`` and ``join()`` work at both stages.
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

    def _attach_optimizer(self, optimizer):
        """The ShardingOptimizer whose step a joined rank out of data takes part in."""
        object.__setattr__(self, "_shard_optim", optimizer)

    @property
    def stage(self):
        return self._shard_stage

    def join(self):
        """``with model.join(): ...`` for uneven inputs, as DataParallel's. A rank whose
        data has ended keeps answering the others' gradient synchronizations and also
        takes part in the sharded step that follows each (it owns parameters the others
        need updated), so every rank must call ``optimizer.step()`` once after each
        synchronized backward. At stage 2 the mean is taken over the ranks that still
        train (the others contribute nothing)."""
        opt = self.__dict__.get("_shard_optim")
        if opt is None and self.reducer is not None:
            raise RuntimeError("ddg.distributed.sharding: join() needs the sharded optimizer; use the model and "
                               "optimizer that group_sharded_parallel (or fleet) returned")
        return _ShardedJoin(self, opt)


class _ShardedJoin(Join):
    def __init__(self, model, optimizer):
        super().__init__(model)
        self.optimizer = optimizer

    def announce(self, training, sync):
        self.steps += 1
        (_active, syncing, _training), root = self._round(1, sync and training, training)
        if self.model.stage == 2:
            self.model.reducer.sync_ranks = int(syncing)
        return root

    def _shadow(self, syncing):
        reducer = self.model.reducer
        if self.model.stage == 2:
            reducer.sync_ranks = syncing
        reducer.shadow_sync()
        self.optimizer.step()
        self.optimizer.clear_grad()
