"""Lamb (layer-wise adaptive moments, Paddle's formulation):

    m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g^2
    r = (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon) + wd * param
    ratio = ||param|| / ||r||   (1 when either norm is 0, or when wd == 0 and not always_adapt)
    param -= lr * ratio * r

``wd`` is ``lamb_weight_decay``, 0 for parameters where
``exclude_from_weight_decay_fn(param)`` is True.

The fused step (a group's flat buffers) takes both norms of every parameter at once:
one ``bincount`` per norm sums the squares per parameter, and the ratios are spread back
over the elements with one gather. The per-parameter norms are summed in float64 there
(``vdot`` in the parameter's dtype on the per-parameter path), so the two paths agree to
rounding, not bit for bit.
"""
import numpy as np

from ..tensor import backend
from .adam import _check_betas, update_moments
from .fused import per_element
from .optimizer import Optimizer, _scalar

__all__ = ["Lamb"]


class Lamb(Optimizer):
    _acc_names = ("moment1", "moment2")
    _scalar_accs = ("beta1_pow_acc", "beta2_pow_acc")

    def __init__(self, learning_rate=0.001, lamb_weight_decay=0.01, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 parameters=None, grad_clip=None, exclude_from_weight_decay_fn=None, multi_precision=False,
                 always_adapt=False, name=None):
        beta1, beta2, epsilon = _check_betas("Lamb", beta1, beta2, epsilon)
        wd = _scalar(lamb_weight_decay, "lamb_weight_decay", "Lamb")
        if not (wd >= 0 and np.isfinite(wd)):
            raise ValueError(f"ddg.optimizer.Lamb: lamb_weight_decay must be a finite number >= 0, got {wd!r}")
        if exclude_from_weight_decay_fn is not None and not callable(exclude_from_weight_decay_fn):
            raise TypeError("ddg.optimizer.Lamb: exclude_from_weight_decay_fn must be a callable(param) -> bool")
        self._default_dict = {"beta1": beta1, "beta2": beta2, "epsilon": epsilon, "lamb_weight_decay": wd}
        self._exclude_fn = exclude_from_weight_decay_fn
        self._always_adapt = bool(always_adapt)
        super().__init__(learning_rate, parameters, None, grad_clip, name)
        self._multi_precision = bool(multi_precision)

    def _init_scalars(self, group):
        return {"beta1_pow_acc": group["beta1"], "beta2_pow_acc": group["beta2"]}

    def _update(self, param, p, g, lr, state, group):
        xp = backend.get_array_module(p)
        b1, b2, eps = group["beta1"], group["beta2"], group["epsilon"]
        wd = float(group["lamb_weight_decay"])
        if self._exclude_fn is not None and self._exclude_fn(param):
            wd = 0.0
        b1p, b2p = state["beta1_pow_acc"], state["beta2_pow_acc"]
        m, v = state["moment1"], state["moment2"]
        s = self._scratch(p, 0)
        update_moments(xp, m, v, g, b1, b2, s)
        # r = m_hat / (sqrt(v_hat) + eps) + wd * p, built in s
        xp.multiply(v, 1.0 / (1.0 - b2p), out=s)
        xp.sqrt(s, out=s)
        s += eps
        xp.divide(m, s, out=s)
        s *= 1.0 / (1.0 - b1p)
        if wd:
            t = self._scratch(p, 1)
            xp.multiply(p, wd, out=t)
            s += t
        if wd > 0 or self._always_adapt:
            # norms stay on the device (no host sync on GPUs)
            pn = xp.sqrt(xp.vdot(p.ravel(), p.ravel()))
            rn = xp.sqrt(xp.vdot(s.ravel(), s.ravel()))
            ok = (pn > 0) & (rn > 0)
            ratio = xp.where(ok, pn / xp.where(ok, rn, 1), 1).astype(p.dtype)
            s *= ratio * lr
        else:
            s *= lr
        p -= s
        state["beta1_pow_acc"] = b1p * b1
        state["beta2_pow_acc"] = b2p * b2

    def _fused_update(self, params, p, g, lrs, states, flat, group, xp):
        b1, b2, eps = group["beta1"], group["beta2"], group["epsilon"]
        wd = float(group["lamb_weight_decay"])
        wds = [0.0 if self._exclude_fn is not None and self._exclude_fn(q) else wd for q in params]
        c1, c2 = [], []
        for st in states:
            b1p, b2p = st["beta1_pow_acc"], st["beta2_pow_acc"]
            c1.append(1.0 / (1.0 - b1p))
            c2.append(1.0 / (1.0 - b2p))
            st["beta1_pow_acc"] = b1p * b1
            st["beta2_pow_acc"] = b2p * b2
        m, v = flat.flat["moment1"], flat.flat["moment2"]
        s = flat.s
        update_moments(xp, m, v, g, b1, b2, s)
        xp.multiply(v, per_element(xp, c2, flat, p), out=s)
        xp.sqrt(s, out=s)
        s += eps
        xp.divide(m, s, out=s)
        s *= per_element(xp, c1, flat, p)
        if any(wds):
            xp.multiply(p, per_element(xp, wds, flat, p), out=g)  # g is the step's own copy
            s += g
        adapt = [w > 0 or self._always_adapt for w in wds]
        lr = per_element(xp, lrs, flat, p)
        if any(adapt):
            xp.multiply(p, p, out=g)
            pn = xp.sqrt(flat.segment_sums(xp, g))
            xp.multiply(s, s, out=g)
            rn = xp.sqrt(flat.segment_sums(xp, g))
            mask = np.asarray(adapt)
            ok = (pn > 0) & (rn > 0) & (mask if xp is np else xp.asarray(mask))
            ratio = xp.where(ok, pn / xp.where(ok, rn, 1), 1).astype(p.dtype)
            s *= flat.per_parameter(xp, ratio)
        s *= lr
        p -= s
