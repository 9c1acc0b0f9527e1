"""``ddg.distributed.fleet``: Paddle's collective-training front end.

``fleet.init(is_collective=True, strategy=...)`` starts the parallel environment;
``fleet.distributed_model(model)`` wraps the model for data parallelism and
``fleet.distributed_optimizer(optimizer)`` the optimizer, both as the strategy says:

* ``sharding`` (``sharding_configs['stage']`` 1-3, or ``hybrid_configs['sharding_degree']``
  > 1): the optimizer state (stage 1), also the gradients (2) and the parameters (3)
  are sharded across the ranks (:mod:`ddg.distributed.sharding`);
* ``gradient_merge`` (``k_steps``, ``avg``): one update and one gradient reduction every
  ``k_steps`` steps (:mod:`.gradient_merge`);
* ``amp``: the model's forward runs under ``ddg.amp.auto_cast`` with ``amp_configs``'
  lists (``use_pure_fp16``/``use_pure_bf16``: level O2, the model and optimizer
  decorated with master weights); ``fleet.distributed_scaler(scaler)`` returns the
  GradScaler unchanged (its inf/nan check already agrees across ranks);
* ``recompute``: in dynamic graph mode, segments are chosen by calling
  ``fleet.utils.recompute(fn, *args)`` in the model's forward, as in Paddle.

``worker_index``, ``worker_num``, ``is_first_worker``, ``barrier_worker``,
``local_rank``, ``worker_endpoints`` describe the job.
"""
import os

from ...amp import auto_cast
from ...nn.layer.layers import Layer, LayerWrapper
from ...parallel.env import get_rank, get_world_size, init_parallel_env
from .strategy import DistributedStrategy
from . import utils  # noqa: F401
from .utils import recompute  # noqa: F401

__all__ = ["init", "DistributedStrategy", "distributed_model", "distributed_optimizer", "distributed_scaler",
           "worker_index", "worker_num", "is_first_worker", "barrier_worker", "is_worker", "is_server",
           "local_rank", "worker_endpoints", "world_size", "rank", "Fleet", "fleet", "utils", "recompute"]


class Fleet:
    """The state behind the module-level functions (``fleet.fleet`` is the one instance)."""

    def __init__(self):
        self._strategy = None
        self._initialized = False
        self._model = None
        self._optimizer = None
        self._owners = None     # the parameter owners a sharded model was built with

    def init(self, role_maker=None, is_collective=False, strategy=None, log_level="INFO"):
        if strategy is not None and not isinstance(strategy, DistributedStrategy):
            raise TypeError(f"ddg.distributed.fleet.init: strategy must be a DistributedStrategy, "
                            f"got {type(strategy).__name__}")
        self._strategy = strategy if strategy is not None else DistributedStrategy()
        self._model = self._optimizer = self._owners = None
        self._check_strategy(self._strategy)
        init_parallel_env()
        self._initialized = True
        return self

    @staticmethod
    def _check_strategy(s):
        unsupported = [k for k in ("pipeline", "tensor_parallel", "dgc", "localsgd", "adaptive_localsgd",
                                   "lamb", "lars", "asp") if getattr(s, k)]
        hybrid = s.hybrid_configs
        for k in ("mp_degree", "pp_degree", "sep_degree"):
            if hybrid[k] > 1:
                unsupported.append(f"hybrid_configs['{k}']={hybrid[k]}")
        if unsupported:
            raise NotImplementedError(f"ddg.distributed.fleet: the strategy asks for {', '.join(unsupported)}; "
                                      f"ddg trains data parallel only (with sharding, gradient merge, amp and "
                                      f"recompute)")

    def _need_init(self, what):
        if not self._initialized:
            raise RuntimeError(f"ddg.distributed.fleet.{what}: call fleet.init(is_collective=True) first")
        return self._strategy

    # ------------------------------------------------------------------ job facts
    def worker_index(self):
        return get_rank()

    def worker_num(self):
        return get_world_size()

    def is_first_worker(self):
        return get_rank() == 0

    def is_worker(self):
        return True

    def is_server(self):
        return False

    def local_rank(self):
        from ...parallel.comm import get_world_communicator
        return get_world_communicator().local_rank() if get_world_size() > 1 else 0

    def worker_endpoints(self, to_string=False):
        eps = os.environ.get("PADDLE_TRAINER_ENDPOINTS")
        eps = eps.split(",") if eps else [f"127.0.0.1:{6170 + r}" for r in range(get_world_size())]
        return ",".join(eps) if to_string else eps

    def barrier_worker(self):
        from ...parallel.comm import get_world_communicator
        if get_world_size() > 1:
            get_world_communicator().barrier()

    # ------------------------------------------------------------------ wrapping
    def _sharded(self, s):
        degree = s.hybrid_configs["sharding_degree"]
        if degree > 1 and degree != get_world_size():
            raise NotImplementedError(f"ddg.distributed.fleet: hybrid_configs['sharding_degree']={degree} with "
                                      f"{get_world_size()} ranks; ddg shards over all ranks (sharding_degree 1 or "
                                      f"the world size)")
        if not (s.sharding or degree > 1):
            return False
        stage = s.sharding_configs["stage"]
        if stage not in (1, 2, 3):
            raise ValueError(f"ddg.distributed.fleet: sharding_configs['stage'] must be 1, 2 or 3, got {stage!r}")
        return True

    @staticmethod
    def _stage(s):
        """The ZeRO stage: ``sharding_configs['stage']``; 2 when only
        ``hybrid_configs['sharding_degree']`` asks for sharding with stage 1."""
        stage = s.sharding_configs["stage"]
        return 2 if stage == 1 and s.hybrid_configs["sharding_degree"] > 1 else stage

    def distributed_model(self, model):
        from ...parallel.data_parallel import DataParallel
        s = self._need_init("distributed_model")
        if not isinstance(model, Layer):
            raise TypeError(f"ddg.distributed.fleet.distributed_model: model must be a ddg.nn.Layer, "
                            f"got {type(model).__name__}")
        if s.amp:
            model = self._amp_model(model, s)
        if not isinstance(model, DataParallel):
            kw = dict(find_unused_parameters=s.find_unused_parameters, comm_buffer_size=s.fuse_grad_size_in_MB,
                      last_comm_buffer_size=s.last_comm_group_size_MB, fp16_allreduce=s.fp16_allreduce)
            if self._sharded(s):
                model = self._sharded_model(model, s, kw)
            else:
                model = DataParallel(model, **kw)
        self._model = model
        if self._optimizer is not None and hasattr(self._optimizer, "attach_model"):
            self._optimizer.attach_model(model)
        return model

    def _sharded_model(self, model, s, kw):
        """ShardedDataParallel with the owners of the sharded optimizer (made already, or
        computed here for the one distributed_optimizer will make)."""
        from ...parallel.env import get_device_communicator
        from ..sharding import ShardedDataParallel, ShardingOptimizer, assign_owners
        opt = self._optimizer
        while opt is not None and not isinstance(opt, ShardingOptimizer):
            opt = getattr(opt, "_optim", None)
        comm = get_device_communicator()
        if opt is not None:
            owners = opt.owners
        else:
            params = [p for p in model.parameters() if not p.stop_gradient]
            owners = dict(zip(map(id, params), assign_owners([p._data.size for p in params], comm.size)))
            self._owners = owners
        model = ShardedDataParallel(model, owners, stage=self._stage(s), group=comm, **kw)
        if opt is not None:
            model._attach_optimizer(opt)
        return model

    def _amp_model(self, model, s):
        from ...amp import decorate
        cfg = s.amp_configs
        pure = cfg["use_pure_fp16"] or cfg["use_pure_bf16"]
        dtype = "bfloat16" if cfg["use_pure_bf16"] else "float16"
        if pure:
            model = decorate(models=model, level="O2", dtype=dtype)
        return _AutoCastForward(model, "O2" if pure else "O1", dtype, cfg["custom_white_list"],
                                cfg["custom_black_list"])

    def distributed_optimizer(self, optimizer, strategy=None):
        if strategy is not None:
            if not isinstance(strategy, DistributedStrategy):
                raise TypeError(f"ddg.distributed.fleet.distributed_optimizer: strategy must be a "
                                f"DistributedStrategy, got {type(strategy).__name__}")
            self._check_strategy(strategy)
            self._strategy = strategy
        s = self._need_init("distributed_optimizer")
        opt = optimizer
        if s.amp and (s.amp_configs["use_pure_fp16"] or s.amp_configs["use_pure_bf16"]):
            opt._multi_precision = True
        if self._sharded(s):
            from ...parallel.env import get_device_communicator
            from ..sharding import ShardingOptimizer
            params = [p for g in opt._param_groups for p in g["params"]]
            owners = self._owners if self._owners is not None and all(id(p) in self._owners for p in params) \
                else None
            opt = ShardingOptimizer(opt, get_device_communicator(), owners)
            opt.gather_after_step = self._stage(s) < 3
            if hasattr(self._model, "_attach_optimizer"):
                self._model._attach_optimizer(opt)
        if s.gradient_merge and s.gradient_merge_configs["k_steps"] != 1:
            from .gradient_merge import GradientMergeOptimizer
            cfg = s.gradient_merge_configs
            opt = GradientMergeOptimizer(opt, cfg["k_steps"], cfg["avg"], model=self._model)
        self._optimizer = opt
        return opt

    def distributed_scaler(self, scaler):
        return scaler


class _AutoCastForward(LayerWrapper):
    """The model, its forward run under ``auto_cast`` (fleet's ``amp`` strategy);
    parameter names and state dict keys are the model's own."""

    def __init__(self, layer, level, dtype, white, black):
        super().__init__(layer)
        self._cast = dict(level=level, dtype=dtype, custom_white_list=set(white), custom_black_list=set(black))

    def forward(self, *args, **kwargs):
        with auto_cast(**self._cast):
            return self._layers(*args, **kwargs)


fleet = Fleet()
init = fleet.init
worker_index = fleet.worker_index
worker_num = fleet.worker_num
is_first_worker = fleet.is_first_worker
is_worker = fleet.is_worker
is_server = fleet.is_server
barrier_worker = fleet.barrier_worker
local_rank = fleet.local_rank
worker_endpoints = fleet.worker_endpoints
distributed_model = fleet.distributed_model
distributed_optimizer = fleet.distributed_optimizer
distributed_scaler = fleet.distributed_scaler
world_size = worker_num
rank = worker_index
