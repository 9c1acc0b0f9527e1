"""Rprop (resilient backpropagation, full-batch), as Paddle's ``optimizer.Rprop``: each
element has its own step size ``lr_e`` (starting at ``learning_rate``) and remembers its
previous gradient ``prev``:

    same sign as prev:      lr_e = min(lr_e * etas[1], lr_max);  param -= sign(g) * lr_e
    opposite sign:          lr_e = max(lr_e * etas[0], lr_min);  g = 0 (param unchanged)
    prev or g zero:         param -= sign(g) * lr_e
    prev = g
"""
from .optimizer import Optimizer, _scalar

__all__ = ["Rprop"]


class Rprop(Optimizer):
    _acc_names = ("prev", "lrs")

    def __init__(self, learning_rate=0.001, learning_rate_range=(1e-5, 50), parameters=None, etas=(0.5, 1.2),
                 grad_clip=None, multi_precision=False, name=None):
        if learning_rate is None:
            raise ValueError("ddg.optimizer.Rprop: learning_rate is not set")
        lo, hi = (_scalar(v, "learning_rate_range", "Rprop") for v in learning_rate_range)
        lr0 = learning_rate if isinstance(learning_rate, (int, float)) else None
        if lr0 is not None and not 0.0 < lo <= lr0 <= hi:
            raise ValueError(f"ddg.optimizer.Rprop: '0.0 < learning_rate_range[0] <= learning_rate <= "
                             f"learning_rate_range[1]' must be true, got range {tuple(learning_rate_range)} and "
                             f"learning_rate {learning_rate}")
        dec, inc = (_scalar(v, "etas", "Rprop") for v in etas)
        if not 0.0 < dec < 1.0 < inc:
            raise ValueError(f"ddg.optimizer.Rprop: '0.0 < etas[0] < 1.0 < etas[1]' must be true, got {tuple(etas)}")
        self._default_dict = {"lr_min": lo, "lr_max": hi, "eta_minus": dec, "eta_plus": inc}
        super().__init__(learning_rate, parameters, None, grad_clip, name)
        self._multi_precision = bool(multi_precision)

    def _init_state(self, param, group):
        work = self._work(param)
        return {"prev": self._zeros_like(work), "lrs": self._zeros_like(work, float(self.get_lr()))}

    def _rule(self, xp, p, g, acc, s, lr, group):
        prev, lrs = acc["prev"], acc["lrs"]
        xp.multiply(prev, g, out=s)
        up, down = s > 0, s < 0
        lrs[up] = xp.minimum(lrs[up] * group["eta_plus"], group["lr_max"])
        lrs[down] = xp.maximum(lrs[down] * group["eta_minus"], group["lr_min"])
        prev[...] = g
        prev[down] = 0
        xp.sign(prev, out=s)
        s *= lrs
        p -= s
