"""CPU kernels of the CTC loss: the forward-backward (alpha/beta) recursions in log space
and the gradient with respect to the log-probabilities, one compiled loop per sample over
its own time steps and extended label positions, and the log-softmax over the classes that
comes before them. Everything runs in float64 (the caller converts), so each kernel compiles
one signature. This module imports numba; ``ops/ctc.py`` imports it on the first numpy call."""
import math

import numpy as np

import numba

from .compiled import FASTMATH, kernel


def _lse3_py(a, b, c):
    """log(exp(a) + exp(b) + exp(c)) with the largest factored out: its term is 1 and a -inf
    term adds nothing, so at most two exponentials (one where a term is -inf)."""
    ninf = -np.inf
    if a < b:
        a, b = b, a
    if a < c:
        a, c = c, a
    if a == ninf:
        return ninf
    tot = 1.0
    if b != ninf:
        tot += math.exp(b - a)
    if c != ninf:
        tot += math.exp(c - a)
    return a + math.log(tot)


_lse3 = numba.njit(_lse3_py, fastmath=set(FASTMATH), cache=True)


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
                alpha[t, b, s] = _lse3(a0, a1, a2) + lp[t, b, ext[b, s]]
        t = tb - 1
        beta[t, b, ln - 1] = lp[t, b, ext[b, ln - 1]]
        if ln > 1:
            beta[t, b, ln - 2] = lp[t, b, ext[b, ln - 2]]
        for t in range(tb - 2, -1, -1):
            for s in range(ln):
                c1 = beta[t + 1, b, s + 1] if s + 1 < ln else ninf
                c2 = beta[t + 1, b, s + 2] if s + 2 < ln and skip[b, s + 2] else ninf
                c0 = beta[t + 1, b, s]
                beta[t, b, s] = _lse3(c0, c1, c2) + lp[t, b, ext[b, s]]
        c0 = beta[0, b, 0]
        c1 = beta[0, b, 1] if ln > 1 else ninf
        m = max(c0, c1)
        if m != ninf:
            m += math.log(math.exp(c0 - m) + math.exp(c1 - m))
        logp[b] = m


def _lse3_py(a, b, c):
    """log(exp(a) + exp(b) + exp(c)) with the largest factored out: its term is 1 and a -inf
    term adds nothing, so at most two exponentials (one where a term is -inf)."""
    ninf = -np.inf
    if a < b:
        a, b = b, a
    if a < c:
        a, c = c, a
    if a == ninf:
        return ninf
    tot = 1.0
    if b != ninf:
        tot += math.exp(b - a)
    if c != ninf:
        tot += math.exp(c - a)
    return a + math.log(tot)


_lse3 = numba.njit(_lse3_py, fastmath=set(FASTMATH), cache=True)


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
                alpha[t, b, s] = _lse3(a0, a1, a2) + lp[t, b, ext[b, s]]
        t = tb - 1
        beta[t, b, ln - 1] = lp[t, b, ext[b, ln - 1]]
        if ln > 1:
            beta[t, b, ln - 2] = lp[t, b, ext[b, ln - 2]]
        for t in range(tb - 2, -1, -1):
            for s in range(ln):
                c1 = beta[t + 1, b, s + 1] if s + 1 < ln else ninf
                c2 = beta[t + 1, b, s + 2] if s + 2 < ln and skip[b, s + 2] else ninf
                c0 = beta[t + 1, b, s]
                beta[t, b, s] = _lse3(c0, c1, c2) + lp[t, b, ext[b, s]]
        c0 = beta[0, b, 0]
        c1 = beta[0, b, 1] if ln > 1 else ninf
        m = max(c0, c1)
        if m != ninf:
            m += math.log(math.exp(c0 - m) + math.exp(c1 - m))
        logp[b] = m


@kernel
def _log_softmax(x, lp):
    # lp [R, C] = x [R, C] minus each row's log-sum-exp (float64)
    rows, c = x.shape
    for r in range(rows):
        xr = x[r]
        m = -np.inf
        for k in range(c):
            if xr[k] > m:
                m = xr[k]
        if not math.isfinite(m):   # a row of -inf, or with inf or NaN: no distribution
            for k in range(c):
                lp[r, k] = np.nan
            continue
        tot = 0.0
        for k in range(c):
            tot += math.exp(xr[k] - m)
        m += math.log(tot)
        for k in range(c):
            lp[r, k] = xr[k] - m


@kernel
def _log_softmax(x, lp, prob):
    # lp [R, C] = x [R, C] minus each row's log-sum-exp, prob = exp(lp) (float64)
    rows, c = x.shape
    for r in range(rows):
        xr = x[r]
        pr = prob[r]
        m = -np.inf
        for k in range(c):
            if xr[k] > m:
                m = xr[k]
        if not math.isfinite(m):   # a row of -inf, or with inf or NaN: no distribution
            for k in range(c):
                lp[r, k] = np.nan
                pr[k] = np.nan
            continue
        tot = 0.0
        for k in range(c):
            e = math.exp(xr[k] - m)
            pr[k] = e
            tot += e
        inv = 1.0 / tot
        m += math.log(tot)
        for k in range(c):
            lp[r, k] = xr[k] - m
            pr[k] *= inv


@kernel
def _ctc_grad(lp, prob, ext, lext, il, alpha, beta, logp, g, grad, acc, scores):
    # grad [T, N, C] zeros on entry: d(-log p)/d lp[t, b, k] times g[b]; acc [C] scratch. With
    # ``scores`` lp is the log-softmax of the op's input (``prob`` its exponential) and the
    # gradient is taken through it: each row's gradient minus prob times the row's sum
    n, c = lp.shape[1], lp.shape[2]
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
            base = m - logp[b]
            tot = 0.0
            for s in range(ln):
                k = ext[b, s]
                if acc[k] >= 0.0:   # each class once (then marked done with -1)
                    # alpha and beta both hold the emission lp[t, b, k] once: divide one out
                    v = -acc[k] * math.exp(base - lp[t, b, k]) * g[b]
                    grad[t, b, k] = v
                    tot += v
                    acc[k] = -1.0
            if scores:
                pr = prob[t, b]
                gr = grad[t, b]
                for k in range(c):
                    gr[k] -= pr[k] * tot


def log_softmax(x):
    """``x`` [T, N, C] normalised over the classes, in float64: the log-probabilities and the
    probabilities."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    lp, prob = np.empty_like(x), np.empty_like(x)
    c = x.shape[-1]
    _log_softmax(x.reshape(-1, c), lp.reshape(-1, c), prob.reshape(-1, c))
    return lp, prob


def ctc_forward(lp, ext, skip, lext, il):
    """Per-sample log-likelihood ``[N]`` and the alpha/beta tables ``[T, N, S]`` (float64) of
    ``lp`` ``[T, N, C]`` given the extended labels (see ``ops.ctc.CTCLoss``)."""
    lp = np.ascontiguousarray(lp, dtype=np.float64)
    shape = (lp.shape[0], lp.shape[1], ext.shape[1])
    alpha, beta = np.full(shape, -np.inf), np.full(shape, -np.inf)
    logp = np.empty(lp.shape[1])
    _ctc_alpha_beta(lp, ext, skip, lext, il, alpha, beta, logp)
    return logp, alpha, beta


def ctc_grad(lp, ext, lext, il, alpha, beta, logp, g, prob=None):
    """The gradient of ``sum(g * -logp)`` with respect to ``lp`` (float64 ``[T, N, C]``), or,
    given ``prob`` = exp(lp), with respect to the scores whose log-softmax ``lp`` is."""
    lp = np.ascontiguousarray(lp, dtype=np.float64)
    grad = np.zeros(lp.shape)
    _ctc_grad(lp, lp if prob is None else prob, ext, lext, il, alpha, beta, logp,
              np.ascontiguousarray(g, dtype=np.float64).reshape(-1), grad, np.zeros(lp.shape[2]), prob is not None)
    return grad
