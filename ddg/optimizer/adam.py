"""Adam and AdamW, with Paddle's formulation of the bias correction.

At step t (``beta1_pow = beta1^t``, ``beta2_pow = beta2^t``, kept per parameter):

    m     = beta1 * m + (1 - beta1) * g
    v     = beta2 * v + (1 - beta2) * g^2
    lr_t  = lr * sqrt(1 - beta2_pow) / (1 - beta1_pow)
    param -= lr_t * m / (sqrt(v) + epsilon * sqrt(1 - beta2_pow))

which equals the textbook ``lr * m_hat / (sqrt(v_hat) + epsilon)`` exactly (epsilon is
scaled by sqrt(1 - beta2^t) so that it applies to the bias-corrected v). With
``amsgrad`` the denominator uses ``v_max = max(v_max, v)``.

AdamW decouples the weight decay (as Paddle's kernel): with ``lr' = lr * lr_ratio(param)``,
``param *= 1 - lr' * coeff`` and then the Adam update with ``lr'``; parameters for
which ``apply_decay_param_fun(param.name)`` is False are not decayed.

``lazy_mode``: for a parameter whose gradient came from sparse embedding lookups
(``Embedding(sparse=True)``, which records the rows it looked up), the moments and the
parameter are updated on those rows only, the other rows keeping their moments (Paddle's
lazy mode with a SelectedRows gradient); any other parameter gets the usual update. The bias
correction is the step's own, as in the dense update: Paddle 3.3.1's sparse Adam kernel
applies the next step's (``beta^(t+1)``; its first step moves a touched row by 0.744 lr
instead of lr), ddg does not copy that. AdamW's decoupled decay still scales every row.
"""
import math

import numpy as np

from ..autograd.ops.embedding import sparse_rows
from ..tensor import backend, optim_kernels
from ..tensor.tensor import Tensor
from .fused import per_element
from .optimizer import Optimizer, _scalar

__all__ = ["Adam", "AdamW"]


def _check_betas(owner, beta1, beta2, epsilon):
    beta1 = _scalar(beta1, "beta1", owner)
    beta2 = _scalar(beta2, "beta2", owner)
    epsilon = _scalar(epsilon, "epsilon", owner)
    if not 0 <= beta1 < 1:
        raise ValueError(f"ddg.optimizer.{owner}: beta1 must be in [0, 1), got {beta1}")
    if not 0 <= beta2 < 1:
        raise ValueError(f"ddg.optimizer.{owner}: beta2 must be in [0, 1), got {beta2}")
    if epsilon < 0:
        raise ValueError(f"ddg.optimizer.{owner}: epsilon must be >= 0, got {epsilon}")
    return beta1, beta2, epsilon


def update_moments(xp, m, v, g, b1, b2, scratch):
    """In place: ``m = b1*m + (1-b1)*g`` and ``v = b2*v + (1-b2)*g*g`` (Adam's and Lamb's
    moment estimates), using ``scratch`` instead of temporaries."""
    m *= b1
    xp.multiply(g, 1.0 - b1, out=scratch)
    m += scratch
    v *= b2
    xp.multiply(g, g, out=scratch)
    scratch *= 1.0 - b2
    v += scratch


class Adam(Optimizer):
    _acc_names = ("moment1", "moment2")
    _scalar_accs = ("beta1_pow_acc", "beta2_pow_acc")

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, parameters=None,
                 weight_decay=None, grad_clip=None, lazy_mode=False, multi_precision=False, use_multi_tensor=False,
                 amsgrad=False, name=None):
        beta1, beta2, epsilon = _check_betas(type(self).__name__, beta1, beta2, epsilon)
        # lazy_mode changes the update of parameters with sparse embedding rows (see the module docstring)
        defaults = getattr(self, "_default_dict", {})
        defaults.update(beta1=beta1, beta2=beta2, epsilon=epsilon, lazy_mode=bool(lazy_mode))
        self._default_dict = defaults
        self._amsgrad = bool(amsgrad)
        if self._amsgrad:
            self._acc_names = self._acc_names + ("moment2_max",)
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
        self._multi_precision = bool(multi_precision)

    def _init_scalars(self, group):
        return {"beta1_pow_acc": group["beta1"], "beta2_pow_acc": group["beta2"]}

    def _core(self, xp, p, g, acc, s, lr_t, eps_t, group):
        """The update with the bias corrections folded into ``lr_t`` and ``eps_t`` (floats
        for one parameter, per-element arrays for a flat group whose corrections differ)."""
        m, v = acc["moment1"], acc["moment2"]
        vmax = acc["moment2_max"] if self._amsgrad else None
        b1, b2 = group["beta1"], group["beta2"]
        if xp is np and optim_kernels.usable(p, g, m, v, *(() if vmax is None else (vmax,)),
                                             scalars=(b1, b2, lr_t, eps_t)):
            optim_kernels.adam(p, g, m, v, vmax, b1, b2, lr_t, eps_t)   # the same, in one pass
            return
        update_moments(xp, m, v, g, b1, b2, s)
        if self._amsgrad:
            vmax = acc["moment2_max"]
            xp.maximum(vmax, v, out=vmax)
            v = vmax
        xp.sqrt(v, out=s)
        s += eps_t
        xp.divide(m, s, out=s)
        s *= lr_t
        p -= s

    @staticmethod
    def _corrections(lr, state, group):
        """(lr_t, eps_t) from the parameter's beta powers, which then advance a step."""
        b1p, b2p = state["beta1_pow_acc"], state["beta2_pow_acc"]
        corr2 = math.sqrt(1.0 - b2p)
        state["beta1_pow_acc"] = b1p * group["beta1"]
        state["beta2_pow_acc"] = b2p * group["beta2"]
        return lr * corr2 / (1.0 - b1p), group["epsilon"] * corr2

    def _update(self, param, p, g, lr, state, group):
        lr_t, eps_t = self._corrections(lr, state, group)
        rows = sparse_rows(param) if group.get("lazy_mode") else None
        if rows is not None and p.ndim >= 1 and rows.size < p.shape[0]:
            # lazy: the rows sparse lookups touched, gathered, updated and written back
            xp = backend.get_array_module(p)
            rows = xp.asarray(rows)
            acc = {k: state[k][rows] for k in self._acc_names}
            pr = p[rows]
            self._core(xp, pr, g[rows], acc, xp.empty_like(pr), lr_t, eps_t, group)
            p[rows] = pr
            for k, a in acc.items():
                state[k][rows] = a
            return
        self._core(backend.get_array_module(p), p, g, state, self._scratch(p, 0), lr_t, eps_t, group)

    def _apply_group(self, pairs, gi, lr):
        # a parameter with sparse rows under lazy_mode takes the per-parameter path
        if self._param_groups[gi].get("lazy_mode") and self._use_fused and any(
                sparse_rows(p) is not None for p, g in pairs if g is not None):
            self._use_fused = False
            try:
                return super()._apply_group(pairs, gi, lr)
            finally:
                self._use_fused = True
        return super()._apply_group(pairs, gi, lr)

    def _fused_update(self, params, p, g, lrs, states, flat, group, xp):
        pairs = [self._corrections(lr, st, group) for lr, st in zip(lrs, states)]
        self._core(xp, p, g, flat.flat, flat.s, per_element(xp, [c[0] for c in pairs], flat, p),
                   per_element(xp, [c[1] for c in pairs], flat, p), group)


class AdamW(Adam):
    _decoupled_weight_decay = True

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, parameters=None, weight_decay=0.01,
                 lr_ratio=None, apply_decay_param_fun=None, grad_clip=None, lazy_mode=False, multi_precision=False,
                 amsgrad=False, name=None):
        if isinstance(weight_decay, Tensor):
            weight_decay = _scalar(weight_decay, "weight_decay", "AdamW")
        if weight_decay is None:
            weight_decay = 0.0
        if isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float)):
            raise TypeError(f"ddg.optimizer.AdamW: weight_decay (the decoupled coefficient) must be a float, "
                            f"got {type(weight_decay).__name__}")
        if lr_ratio is not None and not callable(lr_ratio):
            raise TypeError("ddg.optimizer.AdamW: lr_ratio must be a callable(param) -> float")
        if apply_decay_param_fun is not None and not callable(apply_decay_param_fun):
            raise TypeError("ddg.optimizer.AdamW: apply_decay_param_fun must be a callable(name) -> bool")
        self._coeff = float(weight_decay)
        self._lr_ratio = lr_ratio
        self._apply_decay_param_fun = apply_decay_param_fun
        super().__init__(learning_rate, beta1, beta2, epsilon, parameters, float(weight_decay), grad_clip, lazy_mode,
                         multi_precision, False, amsgrad, name)

    def _update(self, param, p, g, lr, state, group):
        if self._lr_ratio is not None:
            lr = lr * float(self._lr_ratio(param))
        coeff = float(group["weight_decay"] or 0.0)
        if coeff and (self._apply_decay_param_fun is None or self._apply_decay_param_fun(param.name)):
            p *= 1.0 - lr * coeff
        super()._update(param, p, g, lr, state, group)

    def _fused_update(self, params, p, g, lrs, states, flat, group, xp):
        if self._lr_ratio is not None:
            lrs = [lr * float(self._lr_ratio(q)) for lr, q in zip(lrs, params)]
        coeff = float(group["weight_decay"] or 0.0)
        if coeff:
            fun = self._apply_decay_param_fun
            factors = [1.0 - lr * coeff if fun is None or fun(q.name) else 1.0 for lr, q in zip(lrs, params)]
            p *= per_element(xp, factors, flat, p)
        super()._fused_update(params, p, g, lrs, states, flat, group, xp)
