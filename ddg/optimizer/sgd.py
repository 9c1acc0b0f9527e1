"""SGD: ``param -= lr * grad``."""
from ..tensor import backend
from .fused import per_element
from .optimizer import Optimizer

__all__ = ["SGD"]


class SGD(Optimizer):
    def __init__(self, learning_rate=0.001, parameters=None, weight_decay=None, grad_clip=None,
                 multi_precision=False, name=None):
        self._default_dict = {}
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
        self._multi_precision = bool(multi_precision)

    def _update(self, param, p, g, lr, state, group):
        xp = backend.get_array_module(p)
        s = self._scratch(p, 0)
        xp.multiply(g, lr, out=s)
        p -= s

    def _fused_update(self, params, p, g, lrs, states, flat, group, xp):
        g *= per_element(xp, lrs, flat, p)
        p -= g
