"""Adagrad:

    moment += g^2
    param  -= lr * g / (sqrt(moment) + epsilon)
"""
from .optimizer import Optimizer, _scalar

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    _acc_names = ("moment",)

    def __init__(self, learning_rate, epsilon=1e-6, parameters=None, weight_decay=None, grad_clip=None, name=None,
                 initial_accumulator_value=0.0):
        if learning_rate is None:
            raise ValueError("ddg.optimizer.Adagrad: learning_rate is not set")
        epsilon = _scalar(epsilon, "epsilon", "Adagrad")
        self._initial = _scalar(initial_accumulator_value, "initial_accumulator_value", "Adagrad")
        if self._initial < 0:
            raise ValueError(f"ddg.optimizer.Adagrad: initial_accumulator_value must be >= 0, got {self._initial}")
        self._default_dict = {"epsilon": epsilon}
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _init_state(self, param, group):
        return {"moment": self._zeros_like(self._work(param), self._initial)}

    def _rule(self, xp, p, g, acc, s, lr, group):
        mom = acc["moment"]
        xp.multiply(g, g, out=s)
        mom += s
        xp.sqrt(mom, out=s)
        s += group["epsilon"]
        xp.divide(g, s, out=s)
        s *= lr
        p -= s
