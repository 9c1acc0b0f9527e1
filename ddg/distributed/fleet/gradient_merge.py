"""Gradient merge: accumulate gradients over ``k_steps`` micro-batches, reduce them once,
and step once (Paddle's ``gradient_merge`` strategy)."""
from ...tensor.tensor import Tensor

__all__ = ["GradientMergeOptimizer"]


class GradientMergeOptimizer:
    """Wrap ``optimizer`` so that ``step()`` updates the parameters every ``k_steps``-th
    call only, from the gradients accumulated since the last update (averaged over the
    ``k_steps`` micro-batches when ``avg``); the calls in between do nothing, nor does
    ``clear_grad()``, so the gradients keep accumulating.

    With ``model`` (a :class:`ddg.DataParallel`), the backward passes of the first
    ``k_steps - 1`` micro-batches do not communicate (as under ``no_sync()``) and the
    last one reduces the accumulated gradient once: with equal micro-batches the update
    is exactly one step on the ``k_steps``-times larger global batch.
    """

    def __init__(self, optimizer, k_steps=1, avg=True, model=None):
        if isinstance(k_steps, bool) or not isinstance(k_steps, int) or k_steps < 1:
            raise ValueError(f"ddg.distributed.fleet: gradient_merge_configs['k_steps'] must be an int >= 1, "
                             f"got {k_steps!r}")
        self._optim = optimizer
        self.k_steps = k_steps
        self.avg = bool(avg)
        self._calls = 0
        self._model = model
        self._set_sync()

    def __getattr__(self, name):
        d = self.__dict__
        if "_optim" in d:
            return getattr(d["_optim"], name)
        raise AttributeError(name)

    def attach_model(self, model):
        """Let the micro-batches' backward passes skip the reduction except the last."""
        self._model = model
        self._set_sync()

    def _set_sync(self):
        reducer = getattr(self._model, "reducer", None)
        if reducer is not None:
            reducer.sync_enabled = (self._calls + 1) % self.k_steps == 0

    @property
    def boundary(self):
        """True when the next ``step()`` updates the parameters."""
        return (self._calls + 1) % self.k_steps == 0

    def step(self):
        update = self.boundary
        self._calls += 1
        if update:
            params = [p for g in self._optim._param_groups for p in g["params"]]
            if self.avg and self.k_steps > 1:
                for p in params:
                    if p._grad is not None:
                        g = p._grad._data
                        g /= g.dtype.type(self.k_steps) if g.dtype.kind == "f" else self.k_steps
            self._optim.step()
        self._set_sync()

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        self.step()
        params = [p for g in self._optim._param_groups for p in g["params"]]
        return [], [(p, p._grad) for p in params if isinstance(p._grad, Tensor)]

    def clear_grad(self, set_to_zero=True):
        if self._calls % self.k_steps == 0:
            self._optim.clear_grad(set_to_zero)

    clear_gradients = clear_grad

    def state_dict(self):
        out = self._optim.state_dict()
        out["gradient_merge_calls"] = self._calls
        return out

    def set_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        calls = state_dict.pop("gradient_merge_calls", None)
        if calls is not None:
            self._calls = int(calls)
            self._set_sync()
        self._optim.set_state_dict(state_dict)
