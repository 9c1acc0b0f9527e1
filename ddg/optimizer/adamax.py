"""Adamax and Adadelta, in Paddle's formulations.

Adamax (``beta1_pow = beta1^t`` kept per parameter):

    m        = beta1 * m + (1 - beta1) * g
    inf_norm = max(beta2 * inf_norm + epsilon, |g|)
    param   -= lr / (1 - beta1_pow) * m / inf_norm

Adadelta (the learning rate scales the step, as in Paddle 2.6 and later):

    avg_sq_grad   = rho * avg_sq_grad + (1 - rho) * g^2
    update        = -sqrt((avg_sq_update + epsilon) / (avg_sq_grad + epsilon)) * g
    avg_sq_update = rho * avg_sq_update + (1 - rho) * update^2
    param        += lr * update
"""
from ..tensor import backend
from .adam import _check_betas
from .optimizer import Optimizer, _scalar

__all__ = ["Adamax", "Adadelta"]


class Adamax(Optimizer):
    _acc_names = ("moment", "inf_norm")
    _scalar_accs = ("beta1_pow_acc",)

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, parameters=None,
                 weight_decay=None, grad_clip=None, name=None):
        beta1, beta2, epsilon = _check_betas("Adamax", beta1, beta2, epsilon)
        self._default_dict = {"beta1": beta1, "beta2": beta2, "epsilon": epsilon}
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _init_scalars(self, group):
        return {"beta1_pow_acc": group["beta1"]}

    def _update(self, param, p, g, lr, state, group):
        xp = backend.get_array_module(p)
        b1, b2, eps = group["beta1"], group["beta2"], group["epsilon"]
        m, u = state["moment"], state["inf_norm"]
        s = self._scratch(p, 0)
        m *= b1
        xp.multiply(g, 1.0 - b1, out=s)
        m += s
        u *= b2
        u += eps
        xp.abs(g, out=s)
        xp.maximum(u, s, out=u)
        xp.divide(m, u, out=s)
        s *= lr / (1.0 - state["beta1_pow_acc"])
        p -= s
        state["beta1_pow_acc"] = state["beta1_pow_acc"] * b1


class Adadelta(Optimizer):
    _acc_names = ("avg_squared_grad", "avg_squared_update")

    def __init__(self, learning_rate=0.001, epsilon=1e-6, rho=0.95, parameters=None, weight_decay=None,
                 grad_clip=None, name=None):
        if learning_rate is None:
            raise ValueError("ddg.optimizer.Adadelta: learning_rate is not set")
        epsilon = _scalar(epsilon, "epsilon", "Adadelta")
        rho = _scalar(rho, "rho", "Adadelta")
        if not 0 <= rho < 1:
            raise ValueError(f"ddg.optimizer.Adadelta: rho must be in [0, 1), got {rho}")
        if epsilon < 0:
            raise ValueError(f"ddg.optimizer.Adadelta: epsilon must be >= 0, got {epsilon}")
        self._default_dict = {"epsilon": epsilon, "rho": rho}
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _update(self, param, p, g, lr, state, group):
        xp = backend.get_array_module(p)
        rho, eps = group["rho"], group["epsilon"]
        sg, su = state["avg_squared_grad"], state["avg_squared_update"]
        s = self._scratch(p, 0)
        sg *= rho
        xp.multiply(g, g, out=s)
        s *= 1.0 - rho
        sg += s
        # s = -sqrt((su + eps) / (sg + eps)) * g
        xp.add(su, eps, out=s)
        s /= sg + eps
        xp.sqrt(s, out=s)
        s *= g
        s *= -1.0
        su *= rho
        su += (1.0 - rho) * (s * s)
        s *= lr
        p += s
