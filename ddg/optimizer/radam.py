"""RAdam and NAdam, in Paddle's formulations (``t`` the step, kept per parameter).

RAdam (``rho_inf = 2 / (1 - beta2) - 1``):

    m, v   = Adam's moment estimates
    m_hat  = m / (1 - beta1^t)
    rho_t  = rho_inf - 2 t beta2^t / (1 - beta2^t)
    rho_t > 5:  param -= lr * m_hat * r_t * sqrt(1 - beta2^t) / (sqrt(v) + epsilon),
                r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
    else:       param -= lr * m_hat

NAdam (``psi = momentum_decay``):

    mu_t   = beta1 * (1 - 0.5 * 0.96^(t psi)),  mu_{t+1} likewise
    m, v   = Adam's moment estimates
    m_hat  = mu_{t+1} m / (1 - prod_{i<=t+1} mu_i) + (1 - mu_t) g / (1 - prod_{i<=t} mu_i)
    param -= lr * m_hat / (sqrt(v / (1 - beta2^t)) + epsilon)
"""
import math

from ..tensor import backend
from .adam import _check_betas, update_moments
from .optimizer import Optimizer, _scalar

__all__ = ["RAdam", "NAdam"]


class RAdam(Optimizer):
    _acc_names = ("moment1", "moment2")
    _scalar_accs = ("step",)

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, parameters=None,
                 weight_decay=None, grad_clip=None, name=None):
        beta1, beta2, epsilon = _check_betas("RAdam", beta1, beta2, epsilon)
        self._default_dict = {"beta1": beta1, "beta2": beta2, "epsilon": epsilon}
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _init_scalars(self, group):
        return {"step": 0}

    def _update(self, param, p, g, lr, state, group):
        xp = backend.get_array_module(p)
        b1, b2, eps = group["beta1"], group["beta2"], group["epsilon"]
        t = state["step"] + 1
        state["step"] = t
        m, v = state["moment1"], state["moment2"]
        s = self._scratch(p, 0)
        update_moments(xp, m, v, g, b1, b2, s)
        b2t = b2 ** t
        rho_inf = 2.0 / (1.0 - b2) - 1.0
        rho_t = rho_inf - 2.0 * t * b2t / (1.0 - b2t)
        step = lr / (1.0 - b1 ** t)
        if rho_t > 5.0:
            r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            xp.sqrt(v, out=s)
            s += eps
            xp.divide(m, s, out=s)
            s *= step * r * math.sqrt(1.0 - b2t)
        else:
            xp.multiply(m, step, out=s)
        p -= s


class NAdam(Optimizer):
    _acc_names = ("moment1", "moment2")
    _scalar_accs = ("step", "mu_product")

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, epsilon=1e-8, momentum_decay=0.004,
                 parameters=None, weight_decay=None, grad_clip=None, name=None):
        beta1, beta2, epsilon = _check_betas("NAdam", beta1, beta2, epsilon)
        momentum_decay = _scalar(momentum_decay, "momentum_decay", "NAdam")
        if momentum_decay < 0:
            raise ValueError(f"ddg.optimizer.NAdam: momentum_decay must be >= 0, got {momentum_decay}")
        self._default_dict = {"beta1": beta1, "beta2": beta2, "epsilon": epsilon, "momentum_decay": momentum_decay}
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _init_scalars(self, group):
        return {"step": 0, "mu_product": 1.0}

    def _update(self, param, p, g, lr, state, group):
        xp = backend.get_array_module(p)
        b1, b2, eps, psi = group["beta1"], group["beta2"], group["epsilon"], group["momentum_decay"]
        t = state["step"] + 1
        state["step"] = t
        mu_t = b1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        prod_t = state["mu_product"] * mu_t
        state["mu_product"] = prod_t
        m, v = state["moment1"], state["moment2"]
        s = self._scratch(p, 0)
        update_moments(xp, m, v, g, b1, b2, s)
        # denominator sqrt(v / (1 - beta2^t)) + eps, kept in s2
        s2 = self._scratch(p, 1)
        xp.multiply(v, 1.0 / (1.0 - b2 ** t), out=s2)
        xp.sqrt(s2, out=s2)
        s2 += eps
        xp.multiply(m, mu_next / (1.0 - prod_t * mu_next), out=s)
        s += g * ((1.0 - mu_t) / (1.0 - prod_t))
        s /= s2
        s *= lr
        p -= s
