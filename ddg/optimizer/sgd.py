"""SGD: ``param -= lr * grad``."""
from .optimizer import Optimizer

__all__ = ["SGD"]


class SGD(Optimizer):
    def __init__(self, learning_rate=0.001, parameters=None, weight_decay=None, grad_clip=None,
                 multi_precision=False, name=None):
        self._default_dict = {}
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
        self._multi_precision = bool(multi_precision)

    def _rule(self, xp, p, g, acc, s, lr, group):
        xp.multiply(g, lr, out=s)
        p -= s
