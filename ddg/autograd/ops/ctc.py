"""Connectionist temporal classification: the loss and its gradient by the forward-backward
recursions in log space. On numpy they are compiled loops (``tensor/ctc_kernels.py``); on
cupy whole-array steps vectorised over the batch and the extended label positions (one
Python step per time step). One node from the scores to the reduced loss: the log-softmax
over the classes before the recursions and the reduction after them are part of the op."""
import numpy as np

from ...tensor import backend
from ...tensor.dtypes import upcast
from ..function import Function


def _kernels():
    from ...tensor import ctc_kernels  # noqa: PLC0415 - imports numba on the first numpy call
    return ctc_kernels


def _lse(*arrays):
    xp = backend.get_array_module(arrays[0])
    m = arrays[0]
    for a in arrays[1:]:
        m = xp.maximum(m, a)
    safe = xp.where(xp.isfinite(m), m, 0)
    total = 0
    for a in arrays:
        total = total + xp.exp(a - safe)
    with np.errstate(divide="ignore"):
        return xp.where(xp.isfinite(m), safe + xp.log(total), m)


class CTCLoss(Function):
    """Negative log-likelihood of the scores ``x`` ``[T, N, C]`` (normalised over the classes by
    a log-softmax first) per sample, then ``reduction``: ``none`` (``[N]``), ``sum``, or ``mean``
    (each sample's loss divided by its label length, at least 1, then averaged); with
    ``norm_by_times`` each sample's loss is divided by its input length first. The labels and
    lengths are host arrays fixed at construction."""

    def __init__(self, labels, input_lengths, label_lengths, blank, zero_infinity, reduction="none",
                 norm_by_times=False):
        n = labels.shape[0]
        if len(input_lengths) != n or len(label_lengths) != n:
            raise ValueError(f"ddg.ctc_loss: {n} label rows but {len(input_lengths)} input lengths and "
                             f"{len(label_lengths)} label lengths")
        if (input_lengths < 0).any() or (label_lengths < 0).any():
            raise ValueError(f"ddg.ctc_loss: input and label lengths must be non-negative, got "
                             f"{input_lengths.tolist()} and {label_lengths.tolist()}")
        s = int(label_lengths.max()) if n else 0
        if s > labels.shape[1]:
            raise ValueError(f"ddg.ctc_loss: a label length ({s}) exceeds the {labels.shape[1]} label columns")
        ext = np.full((n, 2 * s + 1), blank, dtype=np.int64)
        # the labels at the odd positions, blanks past each row's length
        ext[:, 1::2] = np.where(np.arange(s)[None, :] < label_lengths[:, None], labels[:, :s], blank)
        # a label may skip the blank before it when it differs from the one two back
        skip = np.zeros_like(ext, dtype=bool)
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
        self.ext, self.skip = ext, skip
        self.il, self.ll, self.blank, self.zero_inf = input_lengths, label_lengths, blank, zero_infinity
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"ddg.ctc_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        # each sample's loss is multiplied by ``weights`` before the sum (none: returned as is)
        w = np.ones(n)
        if norm_by_times:
            with np.errstate(divide="ignore"):
                w = w / input_lengths
        if reduction == "mean":
            w = w / (np.maximum(label_lengths, 1) * max(n, 1))
        self.reduction, self.norm, self.weights = reduction, bool(norm_by_times), w

    def forward(self, x):
        out = self._nll(x)
        xp = backend.get_array_module(out)
        w = self.weights if xp is np else xp.asarray(self.weights)
        if self.reduction == "none":
            return (out * w).astype(x.dtype, copy=False) if self.norm else out.astype(x.dtype, copy=False)
        return (out * w).sum().astype(x.dtype)

    def backward(self, g):
        xp = backend.get_array_module(g)
        w = self.weights if xp is np else xp.asarray(self.weights)
        gx = self._grad(g * w)
        xp = backend.get_array_module(gx)
        if xp is not np:   # through the log-softmax: minus softmax times each row's sum
            gx = gx - xp.exp(self.lp) * gx.sum(axis=-1, keepdims=True)
        return gx.astype(self.dtype, copy=False)

    def _nll(self, x):
        """Per-sample -log p of the scores ``x`` (kept for backward: the log-softmax ``lp`` and
        the recursions' tables)."""
        xp = backend.get_array_module(x)
        self.dtype = x.dtype
        if xp is np:
            lp, self.prob = _kernels().log_softmax(x)
        else:
            x = upcast(x)
            m = x.max(axis=-1, keepdims=True)
            m = xp.where(xp.isfinite(m), m, 0)
            lp = x - m
            lp = lp - xp.log(xp.exp(lp).sum(axis=-1, keepdims=True))
        return self._recursions(lp)

    def _recursions(self, lp):
        xp = backend.get_array_module(lp)
        t_max, n, c = lp.shape
        if self.il.max(initial=0) > t_max:
            raise ValueError(f"ddg.ctc_loss: an input length ({self.il.max()}) exceeds the {t_max} time steps")
        if n and self.ext.min(initial=0) < 0:
            raise ValueError(f"ddg.ctc_loss: labels must be non-negative, got {self.ext.min()}")
        if n and self.ext.max(initial=0) >= c:
            raise ValueError(f"ddg.ctc_loss: a label ({self.ext.max()}) is not below the {c} classes")
        lext = 2 * self.ll + 1
        if xp is np:  # compiled recursions (float64), one loop per sample over its own length
            self.kernel_args = (self.ext, self.skip, lext, self.il.astype(np.int64))
            ll, self.alpha, self.beta = _kernels().ctc_forward(lp, *self.kernel_args)
            loss = -ll
            if self.zero_inf:
                loss = np.where(np.isfinite(loss), loss, 0)
            self.lp, self.logp = lp, ll
            return loss
        ext = xp.asarray(self.ext)
        skip = xp.asarray(self.skip)
        valid = xp.asarray(np.arange(ext.shape[1])[None, :] < lext[:, None])
        rows = xp.arange(n)[:, None]
        ninf = xp.asarray(-np.inf, dtype=lp.dtype)
        il = xp.asarray(self.il)
        emit = [lp[t][rows, ext] for t in range(t_max)]            # [N, S'] per step
        alpha = xp.full((t_max, n, ext.shape[1]), -np.inf, dtype=lp.dtype)
        a0 = xp.full((n, ext.shape[1]), -np.inf, dtype=lp.dtype)
        a0[:, 0] = emit[0][:, 0] if t_max else ninf
        if ext.shape[1] > 1 and t_max:
            a0[:, 1] = emit[0][:, 1]
        if t_max:
            alpha[0] = xp.where(valid, a0, ninf)
        for t in range(1, t_max):
            prev = alpha[t - 1]
            s1 = xp.concatenate([xp.full((n, 1), -np.inf, dtype=lp.dtype), prev[:, :-1]], 1)
            s2 = xp.concatenate([xp.full((n, 2), -np.inf, dtype=lp.dtype), prev[:, :-2]], 1)
            s2 = xp.where(skip, s2, ninf)
            alpha[t] = xp.where(valid, _lse(prev, s1, s2) + emit[t], ninf)
        beta = xp.full_like(alpha, -np.inf)
        end = xp.asarray(lext - 1)
        pos = xp.arange(ext.shape[1])[None, :]
        for t in range(t_max - 1, -1, -1):
            last = (il - 1 == t)[:, None]
            init = xp.where((pos == end[:, None]) | (pos == end[:, None] - 1), emit[t], ninf)
            if t + 1 < t_max:
                nxt = beta[t + 1]
                n1 = xp.concatenate([nxt[:, 1:], xp.full((n, 1), -np.inf, dtype=lp.dtype)], 1)
                n2 = xp.concatenate([nxt[:, 2:], xp.full((n, 2), -np.inf, dtype=lp.dtype)], 1)
                skip_next = xp.concatenate([skip[:, 2:], xp.zeros((n, 2), dtype=bool)], 1)
                n2 = xp.where(skip_next, n2, ninf)
                rec = _lse(nxt, n1, n2) + emit[t]
            else:
                rec = xp.full((n, ext.shape[1]), -np.inf, dtype=lp.dtype)
            beta[t] = xp.where(valid & (t < il)[:, None], xp.where(last, init, rec), ninf)
        ll = _lse(beta[0][:, 0], beta[0][:, 1]) if ext.shape[1] > 1 else beta[0][:, 0]
        empty = xp.asarray(np.where(self.ll == 0, 0.0, -np.inf).astype(lp.dtype))
        ll = xp.where(il > 0, ll, empty)
        loss = -ll
        if self.zero_inf:
            loss = xp.where(xp.isfinite(loss), loss, 0)
        self.lp, self.alpha, self.beta, self.logp = lp, alpha, beta, ll
        return loss.astype(lp.dtype, copy=False)

    def _grad(self, g):
        """The gradient of ``sum(g * loss)`` with respect to the scores (numpy) or to ``lp``
        (cupy: ``backward`` takes it through the log-softmax)."""
        xp = backend.get_array_module(g)
        if xp is np:
            ext, _, lext, il = self.kernel_args
            return _kernels().ctc_grad(self.lp, ext, lext, il, self.alpha, self.beta, self.logp, g,
                                       prob=self.prob)
        t_max, n, c = self.lp.shape
        ext = xp.asarray(self.ext)
        ab = self.alpha + self.beta                                  # T, N, S'
        # log of the sum, over the extended positions holding class k, of exp(alpha + beta)
        m = xp.max(ab, axis=2, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)
        w = xp.exp(ab - m)
        acc = xp.zeros((t_max, n, c), dtype=ab.dtype)
        tt = xp.arange(t_max)[:, None]
        nn = xp.arange(n)[None, :]
        for s in range(ext.shape[1]):
            acc[tt, nn, ext[None, :, s]] += w[:, :, s]       # one class per (t, n) for each s: no collisions
        with np.errstate(divide="ignore", invalid="ignore"):
            lacc = xp.log(acc) + m
            # d(-log p)/d(log y_t(k)) = -exp(lse_{s: l'_s = k}(alpha + beta) - log p - log y_t(k)): alpha and
            # beta both include the emission y_t(l'_s) once
            grad = -xp.exp(lacc - self.logp[None, :, None] - self.lp)
        ok = xp.isfinite(lacc) & xp.isfinite(self.logp)[None, :, None]
        grad = xp.where(ok, grad, grad.dtype.type(0))
        return (grad * g[None, :, None]).astype(self.lp.dtype, copy=False)
