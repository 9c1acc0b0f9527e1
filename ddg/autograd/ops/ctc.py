"""Connectionist temporal classification: the loss and its gradient by the forward-backward
recursions in log space. On numpy they are compiled loops (``tensor/ctc_kernels.py``); on
cupy whole-array steps vectorised over the batch and the extended label positions (one
Python step per time step)."""
import numpy as np

from ...tensor import backend
from ...tensor import ctc_kernels as _K
from ..function import Function


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
    """Per-sample negative log-likelihood ``[N]`` of ``log_probs`` ``[T, N, C]``; the labels and
    lengths are host arrays fixed at construction."""

    def __init__(self, labels, input_lengths, label_lengths, blank, zero_infinity):
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

    def forward(self, lp):
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
            ll, self.alpha, self.beta = _K.ctc_forward(lp, *self.kernel_args)
            loss = -ll
            if self.zero_inf:
                loss = np.where(np.isfinite(loss), loss, 0)
            self.lp, self.logp = lp, ll
            return loss.astype(lp.dtype)
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

    def backward(self, g):
        xp = backend.get_array_module(g)
        if xp is np:
            ext, _, lext, il = self.kernel_args
            return _K.ctc_grad(self.lp, ext, lext, il, self.alpha, self.beta, self.logp, g).astype(self.lp.dtype)
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
