"""``decorate``: an optimizer wrapped for static mixed precision (see ``ddg.static.amp``)."""
from .fp16_lists import AutoMixedPrecisionLists


class OptimizerWithMixedPrecision:
    """An optimizer wrapped by ``decorate``: the loss-scaling settings are kept
    (``get_loss_scaling``, ``amp_lists``...), everything else is the wrapped optimizer's."""

    def __init__(self, optimizer, amp_lists, level, dtype, init_loss_scaling, use_dynamic_loss_scaling,
                 incr_every_n_steps, decr_every_n_nan_or_inf, incr_ratio, decr_ratio, use_promote):
        self._optimizer = optimizer
        self._amp_lists = amp_lists or AutoMixedPrecisionLists(dtype=dtype)
        self._amp_level, self._amp_dtype = level, dtype
        self._init_loss_scaling = float(init_loss_scaling)
        self._use_dynamic_loss_scaling = use_dynamic_loss_scaling
        self._incr_every_n_steps, self._decr_every_n_nan_or_inf = incr_every_n_steps, decr_every_n_nan_or_inf
        self._incr_ratio, self._decr_ratio = incr_ratio, decr_ratio
        self._use_promote = use_promote

    def get_loss_scaling(self):
        return self._init_loss_scaling

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        return self._optimizer.minimize(loss, startup_program, parameters, no_grad_set)

    def __getattr__(self, name):
        return getattr(self.__dict__["_optimizer"], name)


def decorate(optimizer, amp_lists=None, level="O1", dtype="float16", master_weight=None, master_grad=False,
             init_loss_scaling=2 ** 16, incr_every_n_steps=2000, decr_every_n_nan_or_inf=1, incr_ratio=2.0,
             decr_ratio=0.5, use_dynamic_loss_scaling=None, use_amp_guard=False, use_promote=False):
    """Paddle 3's ``static.amp.decorate``: wraps ``optimizer`` (see
    ``OptimizerWithMixedPrecision``)."""
    if level not in ("O1", "O2"):
        raise ValueError(f"ddg.static.amp.decorate: level must be 'O1' or 'O2', got {level!r}")
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"ddg.static.amp.decorate: dtype must be 'float16' or 'bfloat16', got {dtype!r}")
    if use_dynamic_loss_scaling is None:
        use_dynamic_loss_scaling = dtype == "float16"
    return OptimizerWithMixedPrecision(optimizer, amp_lists, level, dtype, init_loss_scaling,
                                       use_dynamic_loss_scaling, incr_every_n_steps, decr_every_n_nan_or_inf,
                                       incr_ratio, decr_ratio, use_promote)
