"""SGD: ``param -= lr * grad``."""
import numpy as np

from ..tensor import optim_kernels
from .optimizer import Optimizer

__all__ = ["SGD"]


class SGD(Optimizer):
    def __init__(self, learning_rate=0.001, parameters=None, weight_decay=None, grad_clip=None,
                 multi_precision=False, name=None):
        self._default_dict = {}
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
        self._multi_precision = bool(multi_precision)

    def _rule(self, xp, p, g, acc, s, lr, group):
        if xp is np and optim_kernels.usable(p, g, scalars=(lr,)):
            optim_kernels.sgd(p, g, lr)      # the same, in one pass
            return
        xp.multiply(g, lr, out=s)
        p -= s
