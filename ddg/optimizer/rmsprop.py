"""RMSProp (Paddle's formulation: epsilon inside the square root, lr inside the momentum):

    mean_square = rho * mean_square + (1 - rho) * g^2
    centered:  mean_grad = rho * mean_grad + (1 - rho) * g
               moment = momentum * moment + lr * g / sqrt(mean_square - mean_grad^2 + epsilon)
    else:      moment = momentum * moment + lr * g / sqrt(mean_square + epsilon)
    param -= moment
"""
from .optimizer import Optimizer, _scalar

__all__ = ["RMSProp"]


class RMSProp(Optimizer):
    def __init__(self, learning_rate, rho=0.95, epsilon=1e-6, momentum=0.0, centered=False, parameters=None,
                 weight_decay=None, grad_clip=None, name=None):
        if learning_rate is None:
            raise ValueError("ddg.optimizer.RMSProp: learning_rate is not set")
        rho = _scalar(rho, "rho", "RMSProp")
        epsilon = _scalar(epsilon, "epsilon", "RMSProp")
        momentum = _scalar(momentum, "momentum", "RMSProp")
        if not 0.0 <= rho:
            raise ValueError(f"ddg.optimizer.RMSProp: rho must be >= 0, got {rho}")
        if not 0.0 <= epsilon:
            raise ValueError(f"ddg.optimizer.RMSProp: epsilon must be >= 0, got {epsilon}")
        if not 0.0 <= momentum:
            raise ValueError(f"ddg.optimizer.RMSProp: momentum must be >= 0, got {momentum}")
        self._centered = bool(centered)
        self._acc_names = ("momentum", "mean_square") + (("mean_grad",) if self._centered else ())
        self._default_dict = {"rho": rho, "epsilon": epsilon, "momentum": momentum, "centered": self._centered}
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)

    def _rule(self, xp, p, g, acc, s, lr, group):
        rho, eps, mu = group["rho"], group["epsilon"], group["momentum"]
        ms, mom = acc["mean_square"], acc["momentum"]
        ms *= rho
        xp.multiply(g, g, out=s)
        s *= 1.0 - rho
        ms += s
        if self._centered:
            mg = acc["mean_grad"]
            mg *= rho
            xp.multiply(g, 1.0 - rho, out=s)
            mg += s
            xp.multiply(mg, mg, out=s)
            xp.subtract(ms, s, out=s)
            s += eps
        else:
            xp.add(ms, eps, out=s)
        xp.sqrt(s, out=s)
        xp.divide(g, s, out=s)
        s *= lr
        mom *= mu
        mom += s
        p -= mom
