"""CPU kernels of the CTC loss: the forward-backward (alpha/beta) recursions in log space
and the gradient with respect to the log-probabilities, one compiled loop per sample over
its own time steps and extended label positions. Everything runs in float64 (the caller
converts), so each kernel compiles one signature."""
import math

import numpy as np

from .compiled import kernel


@kernel
def _ctc_alpha_beta(lp, ext, skip, lext, il, alpha, beta, logp):
    # lp [T, N, C]; ext/skip [N, S] (the label with blanks between and around, and whether
    # position s may be reached from s - 2); alpha/beta [T, N, S] filled with -inf on entry
    ninf = -np.inf
    n = lp.shape[1]
    for b in range(n):
        ln = lext[b]
        tb = il[b]
        if tb == 0:
            logp[b] = 0.0 if ln == 1 else ninf
            continue
        alpha[0, b, 0] = lp[0, b, ext[b, 0]]
        if ln > 1:
            alpha[0, b, 1] = lp[0, b, ext[b, 1]]
        for t in range(1, tb):
            for s in range(ln):
                a1 = alpha[t - 1, b, s - 1] if s >= 1 else ninf
                a2 = alpha[t - 1, b, s - 2] if skip[b, s] else ninf
                a0 = alpha[t - 1, b, s]
                m = max(a0, max(a1, a2))
                if m != ninf:  # log(exp(a0) + exp(a1) + exp(a2)), the max factored out
                    m += math.log(math.exp(a0 - m) + math.exp(a1 - m) + math.exp(a2 - m))
                alpha[t, b, s] = m + lp[t, b, ext[b, s]]
        t = tb - 1
        beta[t, b, ln - 1] = lp[t, b, ext[b, ln - 1]]
        if ln > 1:
            beta[t, b, ln - 2] = lp[t, b, ext[b, ln - 2]]
        for t in range(tb - 2, -1, -1):
            for s in range(ln):
                c1 = beta[t + 1, b, s + 1] if s + 1 < ln else ninf
                c2 = beta[t + 1, b, s + 2] if s + 2 < ln and skip[b, s + 2] else ninf
                c0 = beta[t + 1, b, s]
                m = max(c0, max(c1, c2))
                if m != ninf:
                    m += math.log(math.exp(c0 - m) + math.exp(c1 - m) + math.exp(c2 - m))
                beta[t, b, s] = m + lp[t, b, ext[b, s]]
        c0 = beta[0, b, 0]
        c1 = beta[0, b, 1] if ln > 1 else ninf
        m = max(c0, c1)
        if m != ninf:
            m += math.log(math.exp(c0 - m) + math.exp(c1 - m))
        logp[b] = m


@kernel
def _ctc_grad(lp, ext, lext, il, alpha, beta, logp, g, grad, acc):
    # grad [T, N, C] zeros on entry: d(-log p)/d lp[t, b, k] times g[b]; acc [C] scratch
    n = lp.shape[1]
    for b in range(n):
        if not math.isfinite(logp[b]):
            continue
        ln = lext[b]
        for t in range(il[b]):
            m = -np.inf
            for s in range(ln):
                v = alpha[t, b, s] + beta[t, b, s]
                if v > m:
                    m = v
            if not math.isfinite(m):
                continue
            for s in range(ln):
                acc[ext[b, s]] = 0.0
            for s in range(ln):
                acc[ext[b, s]] += math.exp(alpha[t, b, s] + beta[t, b, s] - m)
            for s in range(ln):
                k = ext[b, s]
                # alpha and beta both hold the emission lp[t, b, k] once: divide one out
                grad[t, b, k] = -acc[k] * math.exp(m - logp[b] - lp[t, b, k]) * g[b]


def ctc_forward(lp, ext, skip, lext, il):
    """Per-sample log-likelihood ``[N]`` and the alpha/beta tables ``[T, N, S]`` (float64) of
    ``lp`` ``[T, N, C]`` given the extended labels (see ``ops.ctc.CTCLoss``)."""
    lp = np.ascontiguousarray(lp, dtype=np.float64)
    shape = (lp.shape[0], lp.shape[1], ext.shape[1])
    alpha, beta = np.full(shape, -np.inf), np.full(shape, -np.inf)
    logp = np.empty(lp.shape[1])
    _ctc_alpha_beta(lp, ext, skip, lext, il, alpha, beta, logp)
    return logp, alpha, beta


def ctc_grad(lp, ext, lext, il, alpha, beta, logp, g):
    """The gradient of ``sum(g * -logp)`` with respect to ``lp`` (float64 ``[T, N, C]``)."""
    lp = np.ascontiguousarray(lp, dtype=np.float64)
    grad = np.zeros(lp.shape)
    _ctc_grad(lp, ext, lext, il, alpha, beta, logp, np.ascontiguousarray(g, dtype=np.float64).reshape(-1),
              grad, np.zeros(lp.shape[2]))
    return grad
