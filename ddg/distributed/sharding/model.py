"""``ShardedDataParallel``: DataParallel whose gradient synchronization follows a
:class:`~.optimizer.ShardingOptimizer`'s parameter owners."""
from ...autograd.function import _recorder
from ...autograd.grad_mode import _enabled as _grad_enabled
from ...parallel.data_parallel import DataParallel, Join
from .stage2 import GradShardReducer
from .stage3 import ParamSharder

__all__ = ["ShardedDataParallel"]


class ShardedDataParallel(DataParallel):
    """The model side of :func:`~ddg.distributed.sharding.group_sharded_parallel`.

    ``stage`` 1: gradients are all-reduced (DataParallel's Reducer, weighted by local
    batch sizes). ``stage`` 2: each gradient is summed over the ranks (weighted by local
    batch sizes too) and kept by the
    rank that owns the parameter (``owners``: ``{id(param): rank}``, a ShardingOptimizer's ``owners``) and
    dropped elsewhere (:class:`~.stage2.GradShardReducer`; parameters not in ``owners``
    belong to rank 0). ``stage`` 3: as stage 2, and each parameter's data is kept on its
    owner only, gathered layer by layer for forward and backward
    (:class:`~.stage3.ParamSharder`); ``state_dict()`` gathers the full values
    (collective) and ``set_state_dict`` keeps this rank's. ``no_sync()`` works at every
    stage, and so does ``join()`` (at stage 3 replicating the parameters for an uneven
    tail).
    """

    def __init__(self, layer, owners, stage=1, group=None, sync_comm=False, overlap_gather=False, **kwargs):
        if stage not in (1, 2, 3):
            raise ValueError(f"ddg.distributed.sharding.ShardedDataParallel: stage must be 1, 2 or 3, got {stage!r}")
        object.__setattr__(self, "_shard_stage", stage)
        object.__setattr__(self, "_shard_owners", dict(owners))
        object.__setattr__(self, "_sharder", None)
        object.__setattr__(self, "_sync_comm", bool(sync_comm))
        object.__setattr__(self, "_overlap_gather", bool(overlap_gather) and not sync_comm)
        super().__init__(layer, group=group, **kwargs)
        if stage == 3 and self.reducer is not None:
            params = [p for p in layer.parameters() if not p.stop_gradient]
            owner = {id(p): self._shard_owners.get(id(p), 0) for p in params}
            object.__setattr__(self, "_sharder", ParamSharder(layer, params, owner, self._comm))
            self._sharder.sync = bool(sync_comm)

    def _build_reducer(self, params, comm):
        if self._shard_stage == 1:
            return super()._build_reducer(params, comm)
        owners = self._shard_owners
        return GradShardReducer(params, comm, lambda p: owners.get(id(p), 0), self.comm_buffer_size,
                                self.find_unused_parameters)

    def _attach_optimizer(self, optimizer):
        """The ShardingOptimizer whose step a joined rank out of data takes part in. At
        stages 1 and 2 with ``overlap_gather`` its step returns with the gather of the
        updated parameters in flight, and a forward pre-hook on each layer waits for that
        layer's parameters just before it runs (a state-dict hook and
        :meth:`parameters` wait for all of them)."""
        object.__setattr__(self, "_shard_optim", optimizer)
        for h in self.__dict__.get("_gather_handles", ()):
            h.remove()
        handles = []
        object.__setattr__(self, "_gather_handles", handles)
        if self._shard_stage == 3 or self.reducer is None or not optimizer.gather_after_step \
                or not self.__dict__.get("_overlap_gather"):
            optimizer.overlap_gather = False
            return
        optimizer.overlap_gather = True
        mine = {id(p) for p in optimizer._params}
        seen = set()
        for sub in self._layers.sublayers(include_self=True):
            ps = [p for p in sub._parameters.values() if p is not None and id(p) in mine and id(p) not in seen]
            if ps:
                seen.update(map(id, ps))
                handles.append(sub.register_forward_pre_hook(_wait_hook(optimizer, ps)))
        handles.append(self._layers.register_state_dict_hook(lambda state: optimizer.wait_gather()))

    def _wait_gather(self):
        opt = self.__dict__.get("_shard_optim")
        if opt is not None:
            opt.wait_gather()

    def named_parameters(self, prefix="", include_sublayers=True):
        """As Layer's, with the values of the last step's gather (waited for here)."""
        self._wait_gather()
        return super().named_parameters(prefix, include_sublayers)

    def parameters(self, include_sublayers=True):
        self._wait_gather()
        return super().parameters(include_sublayers)

    @property
    def stage(self):
        return self._shard_stage

    @property
    def sharder(self):
        """The stage-3 :class:`~.stage3.ParamSharder` (None at stages 1-2 and on one rank)."""
        return self._sharder

    def forward(self, *inputs, **kwargs):
        sharder = self._sharder
        if sharder is None:
            return super().forward(*inputs, **kwargs)
        sharder.begin_forward()
        try:
            out = super().forward(*inputs, **kwargs)
        finally:
            sharder.end_forward()
        if _grad_enabled[0]:
            sharder.check_forward(out)
        return out

    def state_dict(self, destination=None, include_sublayers=True, structured_name_prefix="", use_hook=True):
        """The model's state dict; at stage 3 with every parameter's full value, gathered
        from its owner (every rank must call it)."""
        self._wait_gather()
        state = super().state_dict(destination, include_sublayers, structured_name_prefix, use_hook)
        sharder = self._sharder
        if sharder is None or sharder.loading:
            return state
        return sharder.gather_state(state)

    def set_state_dict(self, state_dict, use_structured_name=True):
        """Load a full state dict; at stage 3 each rank keeps the values of its own
        parameters (the others' pass through scratch arrays, dropped after)."""
        self._wait_gather()
        sharder = self._sharder
        if sharder is None:
            return super().set_state_dict(state_dict, use_structured_name)
        with sharder.writable():
            return super().set_state_dict(state_dict, use_structured_name)

    set_dict = set_state_dict
    load_dict = set_state_dict

    def join(self):
        """``with model.join(): ...`` for uneven inputs, as DataParallel's. A rank whose
        data has ended keeps answering the others' gradient synchronizations and also
        takes part in the sharded step that follows each (it owns parameters the others
        need updated), so every rank must call ``optimizer.step()`` once after each
        synchronized backward. At stages 2 and 3 the mean is taken over the ranks that
        still train (the others contribute nothing). At stage 3, from the first round in
        which some rank is out of data (and at the block's exit), every rank gathers all
        parameters and holds them until the block ends (:meth:`ParamSharder.replicate`:
        the memory of unsharded parameters during the uneven tail); the steps then
        broadcast the owners' updated values to all, and at the exit each rank drops the
        parameters it does not own again."""
        opt = self.__dict__.get("_shard_optim")
        if opt is None and self.reducer is not None:
            raise RuntimeError("ddg.distributed.sharding: join() needs the sharded optimizer; use the model and "
                               "optimizer that group_sharded_parallel (or fleet) returned")
        return _ShardedJoin(self, opt)


def _wait_hook(optimizer, params):
    def hook(layer, inputs):
        if _recorder[0] is not None:
            # ddg.jit replays do not run hooks: from here on the step waits for its gather
            optimizer.overlap_gather = False
            optimizer.wait_gather()
            return
        optimizer.wait_gather(params)
    return hook


class _ShardedJoin(Join):
    def __init__(self, model, optimizer):
        super().__init__(model)
        self.optimizer = optimizer

    def _round(self, active, sync, training):
        totals, root = super()._round(active, sync, training)
        sharder = self.model.sharder
        # stage 3: once a rank is out of data (the same totals on every rank), or at the
        # exit's last round, every rank holds every parameter until the block ends
        if sharder is not None and not sharder.replicated and totals[0] < self.model._comm.size:
            sharder.replicate()
            if self.optimizer is not None:
                self.optimizer.gather_after_step = True
        return totals, root

    def __exit__(self, etype, value, tb):
        # the exit broadcasts the parameters of the rank that trained longest: with their
        # last step's values
        if self.optimizer is not None and etype is None:
            self.optimizer.wait_gather()
        try:
            return super().__exit__(etype, value, tb)
        finally:
            sharder = self.model.sharder
            if sharder is not None and sharder.replicated:
                if self.optimizer is not None:
                    self.optimizer.wait_gather()
                    self.optimizer.gather_after_step = False
                sharder.shard()

    def _shadow(self, syncing):
        self.model.reducer.shadow_sync()
        self.optimizer.step()
        self.optimizer.clear_grad()
