"""``ddg.incubate.optimizer`` (and ``ddg.incubate.LookAhead``/``ModelAverage``): Paddle's
incubating optimizers, with Paddle's update rules (``paddle/incubate/optimizer``)."""
import contextlib

import numpy as np

from ..autograd.grad_mode import no_grad
from ..optimizer.lbfgs import LBFGS

__all__ = ["LookAhead", "ModelAverage", "LBFGS"]


def _with_grads(params):
    return [p for p in params if p.trainable and p.grad is not None]


class LookAhead:
    """Lookahead (Zhang et al. 2019) around ``inner_optimizer``: after each inner step, on
    the first step the slow weights take the fast ones; every ``k``-th step both become
    ``slow + alpha * (fast - slow)``."""

    def __init__(self, inner_optimizer, alpha=0.5, k=5, name=None):
        if inner_optimizer is None:
            raise ValueError("ddg.incubate.LookAhead: inner_optimizer cannot be None")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"ddg.incubate.LookAhead: alpha must be in [0, 1], got {alpha}")
        if not isinstance(k, int) or k <= 0:
            raise ValueError(f"ddg.incubate.LookAhead: k must be a positive int, got {k!r}")
        self.inner_optimizer, self.alpha, self.k, self.name = inner_optimizer, alpha, k, name
        self.type = "lookahead"
        self._parameter_list = list(inner_optimizer._parameter_list or ())
        self._slow = {}
        self._global_step = 0

    @no_grad()
    def step(self):
        self.inner_optimizer.step()
        self._global_step += 1
        for p in _with_grads(self._parameter_list):
            slow = self._slow.get(id(p))
            if slow is None:
                slow = self._slow[id(p)] = p._data * 0
            if self._global_step == 1:
                slow[...] = p._data
            if self._global_step % self.k == 0:
                slow[...] = self.alpha * p._data + (1.0 - self.alpha) * slow
                p._data[...] = slow
                p._bump()

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        loss.backward()
        self.step()

    def clear_grad(self, set_to_zero=True):
        self.inner_optimizer.clear_grad(set_to_zero)

    def get_lr(self):
        return self.inner_optimizer.get_lr()

    def set_lr(self, value):
        self.inner_optimizer.set_lr(value)

    def state_dict(self):
        return self.inner_optimizer.state_dict()

    def set_state_dict(self, state_dict):
        self.inner_optimizer.set_state_dict(state_dict)


class ModelAverage:
    """Averages each parameter over a sliding window of its recent values (Paddle's
    ``average_accumulates``): ``step()`` after the optimizer's step accumulates them;
    ``with model_average.apply():`` puts the averages in the parameters (and restores the
    trained values after the block, or by ``restore()`` with ``need_restore=False``).

    The window restarts once it holds at least ``min_average_window`` values and at least
    ``min(max_average_window, num_updates * average_window_rate)``."""

    _MAX_NUM_ACCUMULATES = 16384

    def __init__(self, average_window_rate, parameters=None, min_average_window=10000, max_average_window=10000,
                 name=None):
        if parameters is None:
            raise ValueError("ddg.incubate.ModelAverage: needs parameters in dygraph mode")
        if min_average_window > max_average_window:
            raise ValueError(f"ddg.incubate.ModelAverage: min_average_window ({min_average_window}) > "
                             f"max_average_window ({max_average_window})")
        self.average_window = average_window_rate
        self.min_average_window, self.max_average_window = min_average_window, max_average_window
        self.name, self.type = name, "average_accumulates"
        self._parameter_list = list(parameters)
        self._acc = {}

    def _state(self, p):
        st = self._acc.get(id(p))
        if st is None:
            zeros = p._data * 0
            st = self._acc[id(p)] = {"sum_1": zeros.copy(), "sum_2": zeros.copy(), "sum_3": zeros.copy(),
                                     "restore": zeros.copy(), "num_accumulates": 0, "old_num_accumulates": 0,
                                     "num_updates": 0}
        return st

    @no_grad()
    def step(self):
        for p in _with_grads(self._parameter_list):
            st = self._state(p)
            st["num_updates"] += 1
            st["num_accumulates"] += 1
            st["sum_1"] += p._data
            if st["num_updates"] % self._MAX_NUM_ACCUMULATES == 0:
                st["sum_2"] += st["sum_1"]
                st["sum_1"][...] = 0
            # (Paddle's kernel takes the window bound as an integer: the product truncated)
            if st["num_accumulates"] >= self.min_average_window and st["num_accumulates"] >= min(
                    self.max_average_window, int(st["num_updates"] * self.average_window)):
                st["sum_3"][...] = st["sum_1"] + st["sum_2"]
                st["sum_1"][...] = 0
                st["sum_2"][...] = 0
                st["old_num_accumulates"], st["num_accumulates"] = st["num_accumulates"], 0

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        self.step()

    def clear_grad(self, set_to_zero=True):
        for p in self._parameter_list:
            p.clear_gradient(set_to_zero)

    @contextlib.contextmanager
    def apply(self, executor=None, need_restore=True):
        with no_grad():
            for p in self._parameter_list:
                st = self._state(p)
                st["restore"][...] = p._data
                total = st["num_accumulates"] + st["old_num_accumulates"]
                avg = (st["sum_1"] + st["sum_2"] + st["sum_3"]).astype(np.float32) / np.float32(total)
                p._data[...] = avg.astype(p._data.dtype)
                p._bump()
        try:
            yield
        finally:
            if need_restore:
                self.restore()

    @no_grad()
    def restore(self, executor=None):
        for p in self._parameter_list:
            st = self._state(p)
            p._data[...] = st["restore"]
            p._bump()
