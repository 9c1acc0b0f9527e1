"""``DistributedStrategy``: Paddle's switches and their configuration dicts."""
import copy

__all__ = ["DistributedStrategy"]

_CONFIGS = {
    "amp": {"init_loss_scaling": 32768.0, "incr_every_n_steps": 1000, "decr_every_n_nan_or_inf": 2,
            "incr_ratio": 2.0, "decr_ratio": 0.8, "use_dynamic_loss_scaling": True, "custom_white_list": [],
            "custom_black_list": [], "custom_black_varnames": [], "use_pure_fp16": False, "use_fp16_guard": True,
            "use_optimizer_fp16": False, "use_pure_bf16": False},
    "recompute": {"checkpoints": [], "enable_offload": False, "checkpoint_shape": [], "enable_tuning": False,
                  "refined_ops_patterns": []},
    "sharding": {"sharding_segment_strategy": "segment_broadcast_MB", "segment_broadcast_MB": 32.0,
                 "segment_anchors": [], "sharding_degree": 8, "mp_degree": 1, "dp_degree": 1, "hybrid_dp": False,
                 "gradient_merge_acc_step": 1, "optimize_offload": False, "pp_allreduce_in_optimize": False,
                 "pp_degree": 1, "optimize_cast": False, "_dp_as_optimizer_sharding": False, "stage": 1,
                 "enable_tuning": False, "use_calc_stream": False},
    "gradient_merge": {"k_steps": 1, "avg": True},
    "hybrid": {"dp_degree": -1, "mp_degree": 1, "pp_degree": 1, "sharding_degree": 1, "sep_degree": 1,
               "order": ["dp", "pp", "sharding", "sep", "mp"]},
}
# switches Paddle has that ddg's collective training does not act on (kept, so that
# scripts setting them run; fleet refuses the ones that would change the results)
_OTHER_FLAGS = {"find_unused_parameters": False, "fuse_all_reduce_ops": True, "fuse_grad_size_in_MB": 32,
                "without_graph_optimization": True, "a_sync": True, "lamb": False, "lars": False, "dgc": False,
                "localsgd": False, "adaptive_localsgd": False, "pipeline": False, "tensor_parallel": False,
                "asp": False, "fp16_allreduce": False, "heter_ccl_mode": False, "last_comm_group_size_MB": 1,
                "sync_nccl_allreduce": True, "nccl_comm_num": 1, "use_hierarchical_allreduce": False,
                "sync_batch_norm": False, "fuse_elewise_add_act_ops": False, "fuse_bn_act_ops": False,
                "enable_sequential_execution": False, "auto": False, "semi_auto": False}


class DistributedStrategy:
    """Paddle's ``paddle.distributed.fleet.DistributedStrategy``.

    The switches fleet acts on in ddg: ``amp`` (``amp_configs``), ``recompute``
    (``recompute_configs``), ``sharding`` (``sharding_configs``), ``gradient_merge``
    (``gradient_merge_configs``), ``hybrid_configs`` (``sharding_degree``),
    ``find_unused_parameters``, ``fuse_grad_size_in_MB``, ``last_comm_group_size_MB``,
    ``fp16_allreduce``. Setting a ``*_configs`` updates the named keys (an unknown key
    raises ValueError naming it); reading one returns a copy of the whole dict, with
    Paddle's defaults.
    """

    def __init__(self):
        object.__setattr__(self, "_configs", copy.deepcopy(_CONFIGS))
        object.__setattr__(self, "_flags", dict(_OTHER_FLAGS, amp=False, recompute=False, sharding=False,
                                                gradient_merge=False))

    def __getattr__(self, name):
        d = self.__dict__
        if name.endswith("_configs") and name[:-8] in d["_configs"]:
            return copy.deepcopy(d["_configs"][name[:-8]])
        if name in d["_flags"]:
            return d["_flags"][name]
        raise AttributeError(f"ddg.distributed.fleet.DistributedStrategy has no attribute {name!r}")

    def __setattr__(self, name, value):
        d = self.__dict__
        if name.endswith("_configs") and name[:-8] in d["_configs"]:
            if not isinstance(value, dict):
                raise TypeError(f"ddg.distributed.fleet.DistributedStrategy.{name} must be a dict, "
                                f"got {type(value).__name__}")
            cur = d["_configs"][name[:-8]]
            unknown = [k for k in value if k not in cur]
            if unknown:
                raise ValueError(f"ddg.distributed.fleet.DistributedStrategy.{name}: unknown key(s) "
                                 f"{unknown}; the keys are {sorted(cur)}")
            cur.update(copy.deepcopy(value))
            return
        if name in d["_flags"]:
            default = _OTHER_FLAGS.get(name, False)
            if isinstance(default, bool) and not isinstance(value, bool):
                raise TypeError(f"ddg.distributed.fleet.DistributedStrategy.{name} must be True or False, "
                                f"got {value!r}")
            d["_flags"][name] = value
            return
        raise AttributeError(f"ddg.distributed.fleet.DistributedStrategy has no attribute {name!r}")

    def __repr__(self):
        on = [k for k, v in self._flags.items() if v is True and k in ("amp", "recompute", "sharding",
                                                                     "gradient_merge")]
        return f"DistributedStrategy(on={on})"
