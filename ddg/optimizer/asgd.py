"""ASGD (stochastic average gradient, as Paddle's ``optimizer.ASGD``), with ``n = batch_num``
stored gradients per parameter and ``m`` the step count:

    i = m % n;  d += g - y[i];  y[i] = g;  m += 1
    param -= lr * d / min(m, n)

(``g`` already holds the weight decay, as in every ddg optimizer.) Only for training where
each of the ``n`` batches comes back every ``n`` steps in the same order.
"""
from ..tensor import backend
from .optimizer import Optimizer

__all__ = ["ASGD"]


class ASGD(Optimizer):
    def __init__(self, learning_rate=0.001, batch_num=1, parameters=None, weight_decay=None, grad_clip=None,
                 multi_precision=False, name=None):
        if learning_rate is None:
            raise ValueError("ddg.optimizer.ASGD: learning_rate is not set")
        if batch_num is None or isinstance(batch_num, bool) or not isinstance(batch_num, int) or batch_num <= 0:
            raise ValueError(f"ddg.optimizer.ASGD: batch_num must be a positive int, got {batch_num!r}")
        self._n = batch_num
        self._default_dict = {}
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
        self._multi_precision = bool(multi_precision)

    _acc_names = ("d", "y")
    _scalar_accs = ("m",)

    def _init_state(self, param, group):
        work = self._work(param)
        xp = backend.get_array_module(work)
        d = self._zeros_like(work)
        return {"d": d, "y": xp.zeros((self._n,) + tuple(work.shape), dtype=d.dtype), "m": 0}

    def _update(self, param, p, g, lr, state, group):
        m = int(state["m"])
        d, y = state["d"], state["y"][m % self._n]
        d -= y
        d += g
        y[...] = g
        state["m"] = m + 1
        p -= (lr / min(m + 1, self._n)) * d
