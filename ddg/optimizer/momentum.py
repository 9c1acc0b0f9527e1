"""Momentum (Paddle's formulation, the learning rate outside the velocity):

    velocity = momentum * velocity + grad
    param   -= lr * velocity                          (use_nesterov=False)
    param   -= lr * (grad + momentum * velocity)      (use_nesterov=True)

``grad`` is ``rescale_grad * grad + weight-decay term``.
"""
import numpy as np

from ..tensor import optim_kernels
from .optimizer import Optimizer, _scalar

__all__ = ["Momentum"]


class Momentum(Optimizer):
    _acc_names = ("velocity",)

    def __init__(self, learning_rate=0.001, momentum=0.9, parameters=None, use_nesterov=False, weight_decay=None,
                 grad_clip=None, multi_precision=False, rescale_grad=1.0, use_multi_tensor=False, name=None):
        if learning_rate is None:
            raise ValueError("ddg.optimizer.Momentum: learning_rate is not set")
        momentum = _scalar(momentum, "momentum", "Momentum")
        if not momentum >= 0:
            raise ValueError(f"ddg.optimizer.Momentum: momentum must be >= 0, got {momentum!r}")
        self._default_dict = {"momentum": momentum, "use_nesterov": bool(use_nesterov)}
        self._rescale_grad = _scalar(rescale_grad, "rescale_grad", "Momentum")
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
        self._multi_precision = bool(multi_precision)

    def _rule(self, xp, p, g, acc, s, lr, group):
        mu = group["momentum"]
        v = acc["velocity"]
        if xp is np and optim_kernels.usable(p, g, v, scalars=(mu, lr)):
            optim_kernels.momentum(p, g, v, mu, lr, group["use_nesterov"])   # the same, in one pass
            return
        v *= mu
        v += g
        if group["use_nesterov"]:
            xp.multiply(v, mu, out=s)
            s += g
            s *= lr
        else:
            xp.multiply(v, lr, out=s)
        p -= s
