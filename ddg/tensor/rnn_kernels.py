"""Compiled steps of ``RNNSequence`` for float32 numpy arrays (LSTM, GRU and Elman).

Each kernel is one time step over the whole batch: every gate, the state update and the
saved activations (forward), or every gate gradient (backward), in a few vectorized loops
where the numpy path makes a dozen ufunc calls. The step's product with ``W_hh`` is
``matmul_fm`` below, register tiles written as LLVM IR (numba's ``np.dot`` needs scipy,
which ddg does not depend on, and OpenBLAS repacks the weights on every call); the LSTM's
``lstm_forward_loop`` / ``lstm_backward_loop`` run every step, products included, in one
call, and ``matmul_tn`` forms its weight gradients.

Layouts: the state, the gates and the saved activations are feature-major, ``[K, B]`` per
step (``xgt``, ``act`` ``[T, G*H, B]``, ``cs``/``tcs``/``hcs`` ``[T, H, B]``: each step's
block is contiguous, so a step touches a few pages, not one per feature row; the LSTM
writes ``act`` over the input projections); the products read the state and the gate
gradients in that layout. What feeds the weight gradients is saved as batch rows, ``hp``
``[T, B, H]`` (the state before each step; the LSTM's rows are ``[h_prev | x]``,
``[T, B, H + I]``, the kernels write the first H columns) and ``dp``/``dq``
``[T, B, G*H]``, so that all steps form one ``[T*B, .]`` matrix (the LSTM's backward loop
with ``matmul_fm`` leaves ``dp`` feature-major, ``[T, 4H, B]``, which ``matmul_tn`` reads
as well). ``y`` and ``gy`` are
laid out like x (``[B, T, H]`` when ``bm``, else ``[T, B, H]``). ``valid[t, b]`` is False
past row b's length: the state is carried, the output is zero and no gradient enters the
step (``has_mask`` False skips the checks). Every array argument is C-contiguous
float32, so each kernel compiles once (one signature). Each loop touches few arrays: a
loop over all four gates of a row at offsets unknown at compile time needs more alias
checks than LLVM makes and stays scalar.

``tanh`` (and ``sigmoid(x) = tanh(x/2)/2 + 1/2``) is the float32 rational approximation
that Eigen and XLA use (degree 13/6, clamped to [-7.9988, 7.9988], where float32 tanh
rounds to +-1): within 3e-7 of float64 ``np.tanh`` (tested), NaN propagating, and free of
libm calls, so the loops vectorize (numba's ``np.tanh`` calls libm per element, ~15x
slower than numpy's SIMD ``tanh``). ``error_model="numpy"``: a division carries no
zero-check branch, which would also keep the loops scalar. float64 keeps the numpy path.

This module imports numba; ``rnn.py`` imports it only when a float32 numpy sequence runs.
"""
import numba
import numpy as np

from .compiled import FASTMATH, I0, kernel
from .gemm_kernels import (_C3, _C4, _C5, _C6, _C8, _C10, _C12, _H1, _H8, _H16, _P1, _P2, _P3, _P4, _P6, _P8,
                           _P10, _P12, _Q6, _Q6H, _Q6M, _S3, _S4, _S5, _S6, _S8, _S10, _S12, _T1, _T8, _TT1, _TT8,
                           _TT8P, _W8, _t8x8, _tile, VECTOR_BITS, prefetch)
from .gemm_kernels import transpose  # noqa: F401 - rnn_kernels.transpose

_F = np.float32
_CLAMP = _F(7.99881172180175781)
_A1, _A3, _A5, _A7 = _F(4.89352455891786e-03), _F(6.37261928875436e-04), _F(1.48572235717979e-05), \
    _F(5.12229709037114e-08)
_A9, _A11, _A13 = _F(-8.60467152213735e-11), _F(2.00018790482477e-13), _F(-2.76076847742355e-16)
_B0, _B2, _B4, _B6 = _F(4.89352518554385e-03), _F(2.26843463243900e-03), _F(1.18534705686654e-04), \
    _F(1.19825839466702e-06)
_HALF, _ONE, _ZERO = _F(0.5), _F(1.0), _F(0.0)


def _tanh_py(x):
    x = min(max(x, -_CLAMP), _CLAMP)
    x2 = x * x
    p = x2 * _A13 + _A11
    p = x2 * p + _A9
    p = x2 * p + _A7
    p = x2 * p + _A5
    p = x2 * p + _A3
    p = x2 * p + _A1
    q = x2 * _B6 + _B4
    q = x2 * q + _B2
    q = x2 * q + _B0
    return x * p / q


# error_model="numpy": a float division by zero gives inf/nan instead of raising, so the
# division carries no branch and the loops vectorize
_OPTS = {"fastmath": set(FASTMATH), "cache": True, "error_model": "numpy"}
_tanh = numba.njit(_tanh_py, **_OPTS)


@numba.njit(**_OPTS)
def _sig(x):
    return _tanh(x * _HALF) * _HALF + _HALF


@numba.njit(**_OPTS)
def _save_state(dst, src):
    """``dst [B, K] = src [K, B].T`` (a step's feature-major block saved as batch rows), 16
    rows of ``src`` at a time: column by column over the whole of ``src`` would read every
    line of it B times, from L2 once ``src`` outgrows L1 (2x slower at K=1024, B=16)."""
    K, B = src.shape
    K16 = K - K % 16
    for j0 in range(0, K16, 16):
        for b in range(B):
            d = dst[b]
            for j in range(16):
                d[j0 + j] = src[j0 + j, b]
    for b in range(B):
        d = dst[b]
        for j in range(K16, K):
            d[j] = src[j, b]


@numba.njit(**_OPTS)
def _write_output(y, t, ht, valid, bm):
    """Step t's output, laid out like x (``bm``: batch-major), from the feature-major state
    ``ht`` [H, B]; zero on rows past their length."""
    H, B = ht.shape
    H16 = H - H % 16
    for j0 in range(0, H16, 16):     # 16 rows of ht at a time, as in _save_state
        for b in range(B):
            yr = y[b, t] if bm else y[t, b]
            if valid[t, b]:
                for j in range(16):
                    yr[j0 + j] = ht[j0 + j, b]
            else:
                for j in range(16):
                    yr[j0 + j] = _ZERO
    for b in range(B):
        yr = y[b, t] if bm else y[t, b]
        for j in range(H16, H):
            yr[j] = ht[j, b] if valid[t, b] else _ZERO


@numba.njit(**_OPTS)
def _add_output_grad(gy, t, dht, valid, bm):
    """Adds step t's output gradient (laid out like x) into the state gradient ``dht``
    [H, B], on rows within their length."""
    H, B = dht.shape
    H16 = H - H % 16
    for j0 in range(0, H16, 16):     # 16 rows of dht at a time, as in _save_state
        for b in range(B):
            if valid[t, b]:
                gyr = gy[b, t] if bm else gy[t, b]
                for j in range(16):
                    dht[j0 + j, b] += gyr[j0 + j]
    for b in range(B):
        if valid[t, b]:
            gyr = gy[b, t] if bm else gy[t, b]
            for j in range(H16, H):
                dht[j, b] += gyr[j]


@kernel(error_model="numpy")
def tanh_f32(x, out):
    """The approximation over a 1-D float32 array (for tests)."""
    for i in range(x.shape[0]):
        out[i] = _tanh(x[i])


@numba.njit(**_OPTS)
def _gate_act(a, g, bb, s):
    """``a = tanh((g + a + bb) * s) * s + 1 - s`` over 1-D arrays: ``s = 1/2`` the sigmoid,
    1 tanh. One flat loop of its own per gate vectorizes whole (a loop over a row's batch
    columns leaves the columns past the last multiple of 16 scalar, a third of them at
    batch 24; one loop per gate inside a loop over the four gates stayed scalar)."""
    for k in range(a.shape[0]):
        a[k] = _tanh((g[k] + (a[k] + bb[k])) * s) * s + (_ONE - s)


@numba.njit(**_OPTS)   # also called by the whole-sequence loops below
def lstm_step_forward(gt, bias, t, tn, valid, has_mask, ht, ct, act, cs, tcs, hp_next, y, bm):
    """Step t of an LSTM, feature-major: ``gt`` ``[4H, B]`` holds ``W_hh @ h``, ``act[t]``
    (``act`` ``[T, 4H, B]``) the step's input projections, ``bias`` ``[4H, B]`` the sum of both
    biases (gates i, f, g, o) in every column (so that each gate is one flat loop); ``ht``,
    ``ct`` ``[H, B]`` hold the state before the step and are updated in place. Replaces
    ``act[t]`` by the gate activations (in place: a step reads and writes the same cache
    lines, not a second buffer) and writes the cell state ``cs[t]``, ``tanh(c)``
    ``tcs[t]``, the output ``y`` at step t (laid out like x) and, unless ``tn < 0``, the new
    state as the state before the next step, ``hp_next[tn]`` (``[B, H]``)."""
    H, B = ht.shape
    n = H * B
    at = act[t]
    a = at.reshape(4 * n)
    # sigmoid(x) = tanh(x/2)/2 + 1/2 on i, f, o; tanh on g
    g, bb = gt.reshape(4 * n), bias.reshape(4 * n)
    _gate_act(a[:2 * n], g[:2 * n], bb[:2 * n], _HALF)
    _gate_act(a[2 * n:3 * n], g[2 * n:3 * n], bb[2 * n:3 * n], _ONE)
    _gate_act(a[3 * n:], g[3 * n:], bb[3 * n:], _HALF)
    cp, hp, c, tc = ct.reshape(n), ht.reshape(n), cs[t].reshape(n), tcs[t].reshape(n)
    for k in range(n):
        c[k] = a[n + k] * cp[k] + a[k] * a[2 * n + k]
    if has_mask:                     # past a row's length the state is carried
        for j in range(H):
            for b in range(B):
                if not valid[t, b]:
                    c[j * B + b] = cp[j * B + b]
    for k in range(n):
        tc[k] = _tanh(c[k])
    for k in range(n):
        cp[k] = c[k]
    if has_mask:
        for j in range(H):
            for b in range(B):
                if valid[t, b]:
                    hp[j * B + b] = a[3 * n + j * B + b] * tc[j * B + b]
    else:
        for k in range(n):
            hp[k] = a[3 * n + k] * tc[k]
    _write_output(y, t, ht, valid, bm)
    if tn >= 0:
        _save_state(hp_next[tn], ht)


@numba.njit(**_OPTS)   # also called by the whole-sequence loops below
def lstm_step_backward(gy, has_gy, t, valid, has_mask, act, cp, tcs, dht, dct, dp, scratch, save, bm):
    """The gate gradients of step t of ``lstm_step_forward``: ``gy`` the output's gradient
    (laid out like x; ignored unless ``has_gy``), ``cp`` ``[H, B]`` the cell state before
    the step, ``dht``, ``dct`` ``[H, B]`` the gradients of the state after it (``dct``
    becomes the one before it; the caller forms ``dht`` before it as ``W_hh^T @ dp``, plus
    ``dht`` itself on rows past their length). Writes ``scratch`` ``[4H, B]`` (the gate
    pre-activations' gradients, zero past a row's length) and, where ``save``, its
    transpose to ``dp[t]`` (``[B, 4H]``)."""
    H, B = dht.shape
    n = H * B
    if has_gy:
        _add_output_grad(gy, t, dht, valid, bm)
    a, tc, c0 = act[t].reshape(4 * n), tcs[t].reshape(n), cp.reshape(n)
    dh, dc, p = dht.reshape(n), dct.reshape(n), scratch.reshape(4 * n)
    keep = dc.copy() if has_mask else dc     # dc of the rows past their length passes through
    for k in range(n):           # the cell state's gradient
        o, x = a[3 * n + k], tc[k]
        dc[k] += dh[k] * o * (_ONE - x * x)
    for k in range(n):           # do
        o = a[3 * n + k]
        p[3 * n + k] = dh[k] * tc[k] * o * (_ONE - o)
    for k in range(n):           # dg
        g = a[2 * n + k]
        p[2 * n + k] = dc[k] * a[k] * (_ONE - g * g)
    for k in range(n):           # df
        f = a[n + k]
        p[n + k] = dc[k] * c0[k] * f * (_ONE - f)
    for k in range(n):           # di
        i = a[k]
        p[k] = dc[k] * a[2 * n + k] * i * (_ONE - i)
    for k in range(n):           # on to the cell state before the step
        dc[k] *= a[n + k]
    if has_mask:
        for j in range(H):
            for b in range(B):
                if not valid[t, b]:
                    dc[j * B + b] = keep[j * B + b]
                    for q in range(4):
                        p[q * n + j * B + b] = _ZERO
    if save:
        _save_state(dp[t], scratch)


@kernel(error_model="numpy")
def gru_step_forward(gt, xgt, b_ih, b_hh, t, tn, valid, has_mask, ht, act, hcs, hp, y, bm):
    """Step t of a GRU, feature-major: ``gt`` ``[3H, B]`` holds ``W_hh @ h`` (and is
    overwritten), ``xgt`` ``[T, 3H, B]`` the input projections (gates r, z, c), ``b_ih``,
    ``b_hh`` ``[3H]`` the biases; ``ht`` ``[H, B]`` holds the state before the step and is updated
    in place. Writes the activations ``act[t]`` (r, z, c), the candidate's recurrent part
    ``hcs[t]`` (``W_hc h + b_hc``), the output ``y`` at step t (laid out like x) and, unless
    ``tn < 0``, the new state as the state before the next step, ``hp[tn]`` (``[B, H]``)."""
    H, B = ht.shape
    n = H * B
    for j in range(3 * H):
        gr, bb = gt[j], b_hh[j]
        for b in range(B):
            gr[b] += bb
    for j in range(H):
        cr, gr = hcs[t, j], gt[2 * H + j]
        for b in range(B):
            cr[b] = gr[b]
    for j in range(3 * H):
        gr, xr, bi = gt[j], xgt[t, j], b_ih[j]
        if j < 2 * H:
            for b in range(B):
                gr[b] += xr[b] + bi
        else:
            for b in range(B):
                gr[b] = xr[b] + bi
    g, a, hc, h = gt.reshape(3 * n), act[t].reshape(3 * n), hcs[t].reshape(n), ht.reshape(n)
    for k in range(2 * n):
        a[k] = _sig(g[k])
    for k in range(n):
        a[2 * n + k] = _tanh(g[2 * n + k] + a[k] * hc[k])
    if has_mask:
        for j in range(H):
            for b in range(B):
                if valid[t, b]:
                    k = j * B + b
                    h[k] = a[2 * n + k] + a[n + k] * (h[k] - a[2 * n + k])
    else:
        for k in range(n):
            c = a[2 * n + k]
            h[k] = c + a[n + k] * (h[k] - c)
    _write_output(y, t, ht, valid, bm)
    if tn >= 0:
        _save_state(hp[tn], ht)


@kernel(error_model="numpy")
def gru_step_backward(gy, has_gy, t, valid, has_mask, act, hcs, hp, dht, sp, sq, dp, dq, bm):
    """The gate gradients of step t of ``gru_step_forward``: ``gy`` the output's gradient
    (laid out like x; ignored unless ``has_gy``), ``dht`` ``[H, B]`` the gradient of the
    state after the step, replaced by its part ``z * dh`` of the state before it (the
    caller adds ``W_hh^T @ sq``). Writes ``sp`` ``[3H, B]``, the gradients of the input
    side's pre-activations (r, z, c), and ``sq``, those of ``W_hh @ h + b_hh`` (zero past a
    row's length), and their transposes to ``dp[t]`` and ``dq[t]`` (``[B, 3H]``); ``hp[t]``
    is the state before the step (``[B, H]``)."""
    H, B = dht.shape
    n = H * B
    if has_gy:
        _add_output_grad(gy, t, dht, valid, bm)
    a, hc, dh, p, q = act[t].reshape(3 * n), hcs[t].reshape(n), dht.reshape(n), sp.reshape(3 * n), \
        sq.reshape(3 * n)
    hpr = hp[t]
    for j in range(H):               # dz = dh * (h_prev - c)
        for b in range(B):
            k = j * B + b
            p[n + k] = dh[k] * (hpr[b, j] - a[2 * n + k])
    for k in range(n):
        z = a[n + k]
        p[n + k] *= z * (_ONE - z)
    for k in range(n):               # the candidate's pre-activation
        c = a[2 * n + k]
        p[2 * n + k] = dh[k] * (_ONE - a[n + k]) * (_ONE - c * c)
    for k in range(n):               # dr
        r = a[k]
        p[k] = p[2 * n + k] * hc[k] * r * (_ONE - r)
    for k in range(2 * n):
        q[k] = p[k]
    for k in range(n):
        q[2 * n + k] = p[2 * n + k] * a[k]
    if has_mask:
        for j in range(H):
            for b in range(B):
                if valid[t, b]:
                    dh[j * B + b] *= a[n + j * B + b]
                else:
                    for g in range(3):
                        p[g * n + j * B + b] = _ZERO
                        q[g * n + j * B + b] = _ZERO
    else:
        for k in range(n):
            dh[k] *= a[n + k]
    _save_state(dp[t], sp)
    _save_state(dq[t], sq)


@kernel(error_model="numpy")
def elman_step_forward(gt, xgt, bias, t, tn, valid, has_mask, relu, ht, act, hp, y, bm):
    """Step t of an Elman RNN, feature-major: ``gt`` ``[H, B]`` holds ``W_hh @ h`` (and is
    overwritten), ``xgt`` ``[T, H, B]`` the input projections, ``bias`` ``[H]`` ``b_ih +
    b_hh``; ``ht`` ``[H, B]`` holds the state before the step and is updated in place (rows
    past their length keep it). Writes ``act[t]``, the activation ``tanh`` (``relu``:
    ``max(., 0)``) of every row, the output at step t (laid out like x) and, unless ``tn <
    0``, the new state as the state before the next step, ``hp[tn]`` (``[B, H]``)."""
    H, B = ht.shape
    for j in range(H):
        gr, xr, a, bb = gt[j], xgt[t, j], act[t, j], bias[j]
        if relu:
            for b in range(B):
                v = (xr[b] + bb) + gr[b]
                a[b] = _ZERO if v < _ZERO else v          # NaN stays NaN, as numpy's maximum
        else:
            for b in range(B):
                a[b] = _tanh((xr[b] + bb) + gr[b])
    if has_mask:
        for j in range(H):
            hr, a = ht[j], act[t, j]
            for b in range(B):
                if valid[t, b]:
                    hr[b] = a[b]
    else:
        for j in range(H):
            hr, a = ht[j], act[t, j]
            for b in range(B):
                hr[b] = a[b]
    _write_output(y, t, ht, valid, bm)
    if tn >= 0:
        _save_state(hp[tn], ht)


@kernel(error_model="numpy")
def elman_step_backward(gy, has_gy, t, valid, has_mask, relu, act, dht, sp, dp, bm):
    """The pre-activation gradient of step t of ``elman_step_forward``: ``gy`` the output's
    gradient (laid out like x; ignored unless ``has_gy``), ``dht`` ``[H, B]`` the gradient of
    the state after the step, replaced by its part of the state before it that does not
    pass through the step (the rows past their length; zero elsewhere: the caller adds
    ``W_hh^T @ sp``). Writes ``sp`` ``[H, B]`` (zero past a row's length) and its transpose
    to ``dp[t]`` (``[B, H]``)."""
    H, B = dht.shape
    if has_gy:
        _add_output_grad(gy, t, dht, valid, bm)
    for j in range(H):
        dr, a, p = dht[j], act[t, j], sp[j]
        if relu:
            for b in range(B):
                p[b] = dr[b] * (_ONE if a[b] > _ZERO else _ZERO)
        else:
            for b in range(B):
                p[b] = dr[b] * (_ONE - a[b] * a[b])
    if has_mask:
        for j in range(H):
            dr, p = dht[j], sp[j]
            for b in range(B):
                if valid[t, b]:
                    dr[b] = _ZERO
                else:
                    p[b] = _ZERO
    else:
        dht[:] = _ZERO
    _save_state(dp[t], sp)


# -- the recurrent product ---------------------------------------------------------------------------
# OpenBLAS packs the whole weight matrix on every call; with a batch of a few columns that
# packing is a large part of the step. ``matmul_fm`` reads the weights in place and keeps an
# 8-row x 16-column output tile in eight 16-lane vector registers: per k, one vector load
# of the right-hand side's row, eight broadcast weights and eight fused multiply-adds, no
# horizontal sums (a dot-product form vectorized over k pays one per output, as much as its
# multiplies at K=128). The tiles (LLVM IR, ``gemm_kernels._tile``) are shared with the
# Linear layer's products: 8 rows, then the rows left over one at a time, 16 columns at a
# time (masked at the end); ``_TT8``/``_TT1`` read A = a.T, 8 neighbours of a row of a (the
# weight gradients' products).
_KC = 256    # rows of a and x per pass (the pass's block of x stays in L2)
_TN_COLS = 256   # matmul_tn's columns of x per block (256 x 256 floats: 256 KB of L2)


#: rows of the source per block in ``swap_leading``: each block's rows are read as one
#: stream per step while its destinations fill T x B-float runs
SWAP_ROWS = 256


@kernel(error_model="numpy")
def swap_leading(src, dst):
    """``dst [R, T, B] = src [T, R, B]`` transposed in its two leading axes (the LSTM's
    feature-major gate gradients gate-major for OpenBLAS's weight-gradient products), the
    rows in blocks of ``SWAP_ROWS``. numpy's strided copy writes dst in order and so reads
    each B-float run from another step's plane, a page apart: ``[150, 800, 8]`` 2.2 ms,
    ``[50, 4096, 8]`` 12.8 ms against 0.6 and 2.4 here (1 thread, Zen 3)."""
    T, R, B = src.shape
    for r0 in range(0, R, SWAP_ROWS):
        r1 = min(R, r0 + SWAP_ROWS)
        for t in range(T):
            s = src[t]
            for r in range(r0, r1):
                d = dst[r, t]
                sr = s[r]
                for b in range(B):
                    d[b] = sr[b]


@numba.njit(**_OPTS)
def _tn_row(panel, xs, out, i, kc, c0, acc):
    """Row ``i`` of ``out`` over all its columns, A's row in column 0 of ``panel``."""
    N = out.shape[1]
    for b0 in range(0, N, 16):
        _TT1(panel, xs, out, i, 0, b0, min(16, N - b0), 0, kc, c0, acc)


@numba.njit(**_OPTS)
def matmul_tn(a, fmaj, x, out1, c1, out2, add):
    """``out1 [M, N1] = A.T @ x[:, :N1]`` and ``out2 [M, N2] = A.T @ x[:, c1:c1 + N2]`` with
    ``A`` ``[T*B, M]`` the gate gradients of all steps, ``a`` ``[T, B, M]`` (batch rows) or
    ``[T, M, B]`` (``fmaj``: feature-major, as the loop leaves them), ``x`` ``[T*B, L]``,
    all C-contiguous float32 (an output may have no columns): the weight gradients,
    ``dp^T @ [h_prev | x]`` (``add``: added into the outputs, else written), in passes of
    about ``_KC`` rows (whole steps). Per pass, every 8 columns of ``A`` are copied to a
    contiguous panel (read in place, rows 2-4 KB apart fall in the same L1 sets), and the
    outputs are formed ``_TN_COLS`` columns at a time: that block of the pass's rows of x
    stays in L2 while every panel passes over it. Where the outputs are read (a later
    pass, or ``add``) each tile prefetches the rows of out the next one starts from (out
    outgrows L2; a tile waited for them: [2048, 1024] at T*B = 800 93-97 -> 98-101 GFLOP/s
    with both changes)."""
    T = a.shape[0]
    B, M = (a.shape[2], a.shape[1]) if fmaj else (a.shape[1], a.shape[2])
    M8 = M - M % 8
    if T == 0 or B == 0:
        if not add:
            out1[:] = _ZERO
            out2[:] = _ZERO
        return
    ks = max(1, _KC // B)                  # steps per pass
    ap = np.empty((M8 // 8, ks * B, 8), np.float32)
    panel = np.empty((ks * B, 8), np.float32)     # one column of A at a time, past the last 8
    for t0 in range(0, T, ks):
        t1 = min(t0 + ks, T)
        kc = (t1 - t0) * B
        xs = x[t0 * B:t1 * B]
        acc = 1 if t0 > 0 or add else 0
        for p in range(M8 // 8):
            for tt in range(t0, t1):
                at = a[tt]
                for b in range(B):
                    pk = ap[p, (tt - t0) * B + b]
                    for r in range(8):
                        pk[r] = at[8 * p + r, b] if fmaj else at[b, 8 * p + r]
        for o in range(2):
            out = out1 if o == 0 else out2
            c0 = 0 if o == 0 else c1
            N = out.shape[1]
            for n0 in range(0, N, _TN_COLS):
                n1 = min(n0 + _TN_COLS, N)
                for p in range(M8 // 8):
                    for b0 in range(n0, n1, 16):
                        if acc:      # the next tile's rows of out, read at its start (from L3 or memory)
                            nb0, np8 = (b0 + 16, 8 * p) if b0 + 16 < n1 else (n0, 8 * p + 8)
                            if np8 < M8:
                                for r in range(8):
                                    prefetch(out, (np8 + r) * N + nb0)
                        _TT8(ap[p], xs, out, 8 * p, 0, b0, min(16, n1 - b0), 0, kc, c0, acc)
        for ii in range(M8, M):
            for tt in range(t0, t1):
                at = a[tt]
                for b in range(B):
                    panel[(tt - t0) * B + b, 0] = at[ii, b] if fmaj else at[b, ii]
            _tn_row(panel, xs, out1, ii, kc, I0, acc)
            _tn_row(panel, xs, out2, ii, kc, c1, acc)


# matmul_fm_t's row tiles read all of x for every 8 rows of a; where x is larger than L2 holds
# beside the rest (the backward's [H, 4H] @ [4H, B]: x 512 KB at H 512, batch 64) each tile's
# pass came from L3, and on AVX2 twice (the tile's rows in two groups). Where x has at least
# FM_KC_MIN_X elements and more rows than the output, from FM_SIX_MIN_B columns on (below,
# batch 32 at H 1024 ran 1.07x as long), in passes over FM_KC rows of x (the
# output read and written again per pass, each sum still formed in the same order: the same
# bits): x's block stays in L2 and a 16-column strip of it in L1 for both groups. Zen 3, 1
# thread, interleaved, GFLOP/s one pass -> passes, [H x 4H] @ [4H x B]: H 256 / 384 / 512 / 768
# / 1024 at B 64 62 -> 73, 45 -> 56, 41 -> 52, 44 -> 57, 45 -> 53; at B 128 49 -> 68, 42 -> 64,
# 35 -> 47, 45 -> 55, 59 -> 64; at B 32 H 512 / 768 / 1024 73 -> 78, 64 -> 66, 46 -> 43. The
# forward's [4H x H] @ [H x B] (fewer rows of x than of the output) took 1.14-1.30x as long in
# passes (the output, up to 2 MB, read back from L3 each time) and stays one pass
# Measured on AVX2 only: with AVX-512 (one row group, Zen 4's 1 MB of L2) one pass stays
FM_KC, FM_KC_MIN_X = 512, (1 << 16) if VECTOR_BITS < 512 else 1 << 62
# Otherwise, from FM_KR_MIN_B columns on, each 8-row tile runs its blocks over FM_KR rows of x
# at a time (the tile's sums carried in out between them, same order, same bits): a 16-column
# strip of those rows (4 KB) stays in L1 for both of AVX2's row groups and every block, where
# a whole strip (K x 64 bytes, 32 KB at H 512) went back to L2 between them. Zen 3, 1 thread,
# 20-step loops of [4H x H] @ [H x B] (each step's x written first, as the forward's state),
# interleaved, time against one pass: B 48 at H 512 / 640 / 768 / 1024 0.67 / 0.76 / 0.60-0.65
# / 0.76; B 64 at H 384-1024 0.88-0.98; B 128 H 256 / 1024 1.02 / 0.88; B 32 1.02-1.21 and B 16
# 0.97-1.02 stay one pass
FM_KR, FM_KR_MIN_B = 64, 48 if VECTOR_BITS < 512 else 1 << 62
# On AVX2 a batch that is a multiple of 16, from FM_SIX_MIN_B on, takes 6-row tiles instead
# (``_T6``, whole vectors: 12 accumulators in one group, where the 8-row tile runs two groups
# of 8 and reads each strip of x twice), each over FM_KR rows of x at a time, the rows past
# the last multiple of 6 one by one. Same bits. Interleaved against the 8-row tiles above,
# 20-step loops: forward [4H x H] @ [H x B] at H 128-1024, B 16 / 32 / 48 / 64 / 128
# 0.85-0.99 / 0.83-1.00 / 0.84 / 0.86-0.95 / 0.91; backward [H x 4H] @ [4H x B] 0.89-1.02.
# Whole training steps (the kernels before these three rules loaded beside these, switched
# in one process, 11 rounds): LSTM 512:512:20:48 0.61-0.85, 512:512:20:64 0.89-0.96,
# 768:768:20:64 0.88, GRU 512:512:20:64 0.76-0.93, LSTM 256:256:100:64 0.96-1.02; at batches
# 16 and 32 the 6-row tiles and the passes ran 1.04-1.07 (LSTM 128:128:50:32,
# 1024:1024:20:16, GRU 256:256:50:32), so below FM_SIX_MIN_B neither applies
FM_SIX, FM_SIX_MIN_B = VECTOR_BITS < 512, 48
_T6 = _tile(6, False, masked=False) if FM_SIX else _T8     # (AVX-512 never calls it)


@numba.njit(**_OPTS)   # also called by the whole-sequence loops below
def matmul_fm(a, x, out):
    """``out [M, B] = a [M, K] @ x [K, B]`` (C-contiguous float32; the state or gate
    gradients feature-major as the right-hand side)."""
    matmul_fm_t(a, np.empty((0, 0), np.float32), x, out)


@numba.njit(**_OPTS)
def _col_rows(n):
    """The output rows of the column tile that takes ``n`` <= 12 columns (``_col_tile``)."""
    return 64 if n <= 6 else (48 if n <= 8 else 32)


@numba.njit(**_OPTS)
def _col_tile(at, x, out, tmp, i, b0, n, K, oi, rows):
    """``out[oi:oi+rows, b0:b0+n] = A[i:i+rows] @ x[:K, b0:b0+n]`` with ``A = at.T``, n <= 12
    columns by the column tile for n (``_C*``: ``_col_rows(n)`` rows of A, vectors along
    them), through ``tmp`` ``[12, 64]`` (the tile's output is column-major)."""
    if n <= 3:
        _C3(at, x, tmp, i, b0, n, K)
    elif n <= 4:
        _C4(at, x, tmp, i, b0, n, K)
    elif n == 5:
        _C5(at, x, tmp, i, b0, n, K)
    elif n == 6:
        _C6(at, x, tmp, i, b0, n, K)
    elif n <= 8:
        _C8(at, x, tmp, i, b0, n, K)
    elif n <= 10:
        _C10(at, x, tmp, i, b0, n, K)
    else:
        _C12(at, x, tmp, i, b0, n, K)
    for j in range(n):
        for r in range(rows):
            out[oi + r, b0 + j] = tmp[j, r]


@numba.njit(**_OPTS)   # also called by the whole-sequence loops below
def matmul_fm_t(a, at, x, out):
    """``matmul_fm``, given also ``at = a.T`` (C-contiguous ``[K, M]``, or empty): at most 6
    or 9-12 columns left past the 16-column tiles (batch 3-6, 9-12, 17-22, 28, 33-38, ...)
    are then formed with vectors along the rows (``_C3``, ``_C4``, ``_C5``, ``_C6``,
    ``_C10``, ``_C12``), at a multiply-add per column (at most 3 by ``_C3``: [512, 128] @
    [128, 3] 5.7-7.4 -> 5.0-5.1 us against ``_C4`` repeating its last column), instead of
    in a 16- or 8-lane tile with 4 or more of its lanes masked; 5-6 and 9-10 columns only
    where K >= 64 (at K = 32 the 8- and 16-lane tiles stay faster), 11-12 only where K >=
    256 (with fewer the 32x12 tile's
    short loops and scattered stores cost more than the masked lanes: 14 -> 25 us at
    [1536, 32] and batch 12); a batch of 7-8 (``_C8``) where K >= 192 (the forward's
    ``[4H, H] @ [H, 8]``: H = 256 / 320 / 384 / 448 46-49 / 72-77 / 103-110 / 139-150 ->
    43-44 / 65 / 91-92 / 125 us; at K = 128 the 8-lane tiles stay faster, 11.6-12.3
    against 12.5)."""
    M, K = a.shape
    B = x.shape[1]
    if K == 0:
        out[:] = _ZERO
        return
    cols = at.shape[0] == K and at.shape[1] == M
    M8 = M - M % 8
    bf = 0                           # the whole 16-column blocks end here
    while B - bf >= 16 and B - bf != 24:
        bf += 16
    nt = B - bf                      # the columns left: none, 1-15 or 24
    if cols and nt > 0 and (nt <= 4 or (K >= 64 and (nt <= 6 or 9 <= nt <= 10)) or (8 < nt <= 12 and K >= 256)
                            or (nt <= 8 and bf == 0 and K >= 192)):
        tmp = np.empty((12, 64), np.float32)
        step = _col_rows(nt)
        for i in range(0, M, step):
            _col_tile(at, x, out, tmp, i, bf, nt, K, i, min(step, M - i))
        nt = 0
    if bf == 0 and 0 < nt <= 8:      # a batch of at most 8: 16-row tiles of 8 lanes
        _fm_h(a, x, out, I0, nt)
        return
    # each row tile over every block (the tile's rows of a read once, kept in L1 for all of
    # them; x, up to 2 MB, streams from L2) and the columns left (24 in one tile of three
    # 8-lane vectors, at most 8 in an 8-lane tile, 9-15 in a masked 16-lane one); one pass
    # over a per block instead ran 5-15% slower ([4096, 1024] @ [1024, 64] 89 -> 104
    # GFLOP/s, [512, 128] @ [128, 64] 108 -> 115). Where x is larger than FM_KC_MIN_X
    # elements, in passes over FM_KC rows of x; else from FM_KR_MIN_B columns each tile over
    # FM_KR rows at a time; on AVX2 whole 16-column blocks in 6-row tiles (FM_SIX, see there)
    kc = FM_KC if K > M and K * B >= FM_KC_MIN_X and B >= FM_SIX_MIN_B else K
    six = FM_SIX and nt == 0 and B >= FM_SIX_MIN_B
    kr = FM_KR if B >= FM_KR_MIN_B and (six or kc == K) else K
    R = 6 if six else 8
    MR = M - M % R
    end = bf + nt
    for k0 in range(0, K, kc):
        k1 = min(K, k0 + kc)
        for i in range(0, MR, R):
            for j0 in range(k0, k1, kr):
                j1 = min(k1, j0 + kr)
                acc = 1 if j0 > 0 else 0
                for b0 in range(0, bf, 16):
                    if six:
                        _T6(a, x, out, i, i, b0, 16, j0, j1, 0, acc)
                    else:
                        _T8(a, x, out, i, i, b0, 16, j0, j1, 0, acc)
                if nt == 24:
                    _W8(a, x, out, i, i, bf, 24, j0, j1, 0, acc)
                elif nt > 8:
                    _T8(a, x, out, i, i, bf, nt, j0, j1, 0, acc)
                elif nt > 0:
                    _H8(a, x, out, i, i, bf, nt, j0, j1, 0, acc)
        acc = 1 if k0 > 0 else 0
        for i in range(MR, M):
            for b0 in range(0, end, 16):
                if end - b0 > 8:
                    _T1(a, x, out, i, i, b0, min(16, end - b0), k0, k1, 0, acc)
                else:
                    _H1(a, x, out, i, i, b0, end - b0, k0, k1, 0, acc)


@numba.njit(**_OPTS)
def _fm_h(a, x, out, b0, nb):
    """``matmul_fm``'s columns ``b0..b0+nb`` (nb <= 8) in 8-lane tiles."""
    M, K = a.shape
    M8 = M - M % 8
    # 16 rows at a time, unless the rows of a lie a multiple of 4 KB apart: 16 streams then
    # share one set of the 8-way L1 (8 rows do not overflow it)
    M16 = M - M % 16 if K % 1024 else 0
    for i in range(0, M16, 16):
        _H16(a, x, out, i, i, b0, nb, 0, K, 0, 0)
    for i in range(M16, M8, 8):
        _H8(a, x, out, i, i, b0, nb, 0, K, 0, 0)
    for i in range(M8, M):
        _H1(a, x, out, i, i, b0, nb, 0, K, 0, 0)


# The columns left past the last multiple of 16 in a batch: ``matmul_fm_t`` forms them in a
# pass of their own over the weights, from their transposes (whose rows lie 4H floats apart:
# every k another page, and at 4H a multiple of 1024 the same cache sets; at H = 768 batch 11
# a forward loop took 15-45 ms from run to run) or in a 16- or 8-lane tile with most lanes
# masked, and that pass streams all of W from L3 again for a few columns: at H = 576, batch 17
# took 1.33x batch 16's time (1.66x without the transposes). ``matmul_fm_p`` reads the weights
# from panels instead, strips of W^T each contiguous, ``[K, width]``: past 16 columns 8 rows
# wide, the last 16-column block and the columns past it in one pass (``gemm_kernels._P*``:
# batch 17 at 1.07x batch 16's time, 21 at 1.38x); a batch of at most 12 by the column tiles
# (``_C*``) on strips as wide as their rows (64, 48 or 32): at H = 1024 batch 3 / 8 / 12
# 1.6 / 2.7 / 3.0 ms from the transposes, 0.46 / 0.74 / 1.1 from the strips.
# Without AVX-512 the strips are 16 rows wide (``_STRIP``, below).
def panel_width(B):
    """The panel width ``matmul_fm_p`` wants for B columns: 8 past 12, else ``_STRIP`` (on
    AVX2) or the rows of the column tile that B takes."""
    return 8 if B > 12 else (_STRIP if _STRIP else _col_rows(B))


#: on AVX2, a batch of at most 12 reads 16-row panels, one 16-lane vector of the column tile
#: (``gemm_kernels._S*``): the wider panels' tiles make a pass per vector there, each over
#: one line of every panel row (see ``_S*``); 0 where AVX-512 takes a wide panel in one pass
_STRIP = 16 if VECTOR_BITS < 512 else 0


@numba.njit(**_OPTS)
def _strip_tile(at, x, out, tmp, i, b0, n, K, oi, rows):
    """``_col_tile`` from A's 16-row panel ``at`` (``[K, 16]``, ``at[k, r] = A[r, k]``), by
    the one-vector column tile for n (``_S*``)."""
    if n <= 3:
        _S3(at, x, tmp, i, b0, n, K)
    elif n <= 4:
        _S4(at, x, tmp, i, b0, n, K)
    elif n == 5:
        _S5(at, x, tmp, i, b0, n, K)
    elif n == 6:
        _S6(at, x, tmp, i, b0, n, K)
    elif n <= 8:
        _S8(at, x, tmp, i, b0, n, K)
    elif n <= 10:
        _S10(at, x, tmp, i, b0, n, K)
    else:
        _S12(at, x, tmp, i, b0, n, K)
    for j in range(n):
        for r in range(rows):
            out[oi + r, b0 + j] = tmp[j, r]


# matmul_fm_p's strip tile, chosen here so that numba types and compiles only the one this
# CPU uses (a branch on _STRIP inside the kernel compiled both tile sets into it)
_panel_tile = _strip_tile if _STRIP else _col_tile


@numba.njit(**_OPTS)
def panels(a, ap):
    """``ap [P, K, W]``: ``ap[p, k, c] = a[pW + c, k]`` (zero past a's rows, for every panel
    up to P >= ceil(M / W); W a multiple of 8), from ``a`` ``[M, K]``, by 8x8 shuffle
    transposes of 8 rows read in step."""
    M, K = a.shape
    W = ap.shape[2]
    K8 = K - K % 8
    for p in range(ap.shape[0]):
        d = ap[p]
        for c0 in range(0, W, 8):
            r0 = p * W + c0
            if r0 + 8 <= M:
                for k0 in range(0, K8, 8):
                    _t8x8(a, r0, k0, d, k0, c0)
                for k in range(K8, K):
                    for r in range(8):
                        d[k, c0 + r] = a[r0 + r, k]
            else:
                for k in range(K):
                    for r in range(8):
                        d[k, c0 + r] = a[r0 + r, k] if r0 + r < M else _ZERO


def panels_t(a, ap):
    """``panels`` of ``a.T``: ``ap[p, k, c] = a[k, pW + c]`` (zero past a's columns), from
    ``a`` ``[K, M]``: each strip is W contiguous floats of every row of ``a``, copied by
    numpy (one strided copy for the whole strips), 8 wide by ``_panels8_t``."""
    K, M = a.shape
    P, _, W = ap.shape
    if W == 8:
        _panels8_t(a, ap)
        return
    full = min(M // W, P)
    if full:
        np.copyto(ap[:full], a[:, :full * W].reshape(K, full, W).transpose(1, 0, 2))
    if full < P:
        ap[full:] = 0
        if M > full * W:
            ap[full, :, :M - full * W] = a[:, full * W:]


@numba.njit(**_OPTS)
def _panels8_t(a, ap):
    """``panels_t`` 8 wide: 64 rows of ``a`` at a time (their lines stay in L2 while every
    panel takes its 64 lines from them; row by row, each row scatters to every panel:
    [2304, 576] 0.72 ms against 0.39)."""
    K, M = a.shape
    M8 = M - M % 8
    for k0 in range(0, K, 64):
        k1 = min(k0 + 64, K)
        for p in range(ap.shape[0]):
            d = ap[p]
            if 8 * p + 8 <= M8:
                for k in range(k0, k1):
                    ar, dk = a[k], d[k]
                    for r in range(8):
                        dk[r] = ar[8 * p + r]
            else:
                for k in range(k0, k1):
                    for r in range(8):
                        d[k, r] = a[k, 8 * p + r] if 8 * p + r < M else _ZERO


@numba.njit(**_OPTS)
def _fm_p_wide(ap, x, o, i, p, B, K):
    """Rows ``i..i+8`` of ``o`` from the 8-row panel ``p``, B > 12 columns: the 16-column
    blocks, the last with the 1-12 columns past it (``_P*``), or 13-15 in a masked 16-lane
    tile."""
    pp = ap[p]
    nt = B % 16
    bl = B - nt - (16 if 0 < nt <= 12 else 0)     # the blocks run alone
    for b0 in range(0, bl, 16):
        _TT8P(pp, x, o, i, 0, b0, 16, 0, K, 0, 0)
    if nt > 12:
        _TT8P(pp, x, o, i, 0, bl, nt, 0, K, 0, 0)
    elif nt == 1:
        _P1(pp, x, o, i, bl, bl + 16, nt, K)
    elif nt == 2:
        _P2(pp, x, o, i, bl, bl + 16, nt, K)
    elif nt == 3:
        _P3(pp, x, o, i, bl, bl + 16, nt, K)
    elif nt == 4:
        _P4(pp, x, o, i, bl, bl + 16, nt, K)
    elif nt > 0 and nt <= 6:
        _P6(pp, x, o, i, bl, bl + 16, nt, K)
    elif nt > 0 and nt <= 8:
        _P8(pp, x, o, i, bl, bl + 16, nt, K)
    elif nt > 0 and nt <= 10:
        _P10(pp, x, o, i, bl, bl + 16, nt, K)
    elif nt > 0:
        _P12(pp, x, o, i, bl, bl + 16, nt, K)


@numba.njit(**_OPTS)   # also called by the whole-sequence loops below
def matmul_fm_p(ap, x, out):
    """``out [M, B] = A @ x`` (``x`` ``[K, B]``) with A given by its ``panels`` ``ap`` of
    width ``panel_width(B)`` (at least ``ceil(M / width)`` of them), any B: past 12 columns,
    per 8-row panel the 16-column blocks with the last one's 1-12 columns past it in the
    same pass; up to 12, the column tile of B's columns on each strip (into a scratch, then
    copied: the tile's output is column-major)."""
    M, B = out.shape
    K = x.shape[0]
    W = ap.shape[2]
    if B == 0 or M == 0:
        return
    if K == 0:
        out[:] = _ZERO
        return
    if B > 12:
        tmp = np.empty((8, B), np.float32)
        for p in range((M + 7) // 8):
            if 8 * p + 8 <= M:
                _fm_p_wide(ap, x, out, 8 * p, p, B, K)
            else:
                _fm_p_wide(ap, x, tmp, I0, p, B, K)
                for r in range(M - 8 * p):
                    for b in range(B):
                        out[8 * p + r, b] = tmp[r, b]
        return
    tmp = np.empty((12, 64), np.float32)
    for p in range((M + W - 1) // W):
        _panel_tile(ap[p], x, out, tmp, I0, I0, B, K, p * W, min(W, M - p * W))


def panels6(a):
    """``a`` ``[M, K]`` as the 6-row panels ``matmul_p6`` reads, ``[ceil(M / 6), K, 6]``:
    ``ap[p, k, r] = a[6p + r, k]``, zero past a's rows (``a`` C-contiguous or the transpose
    of a C-contiguous array, as W_hh^T; other layouts are copied first)."""
    M, K = a.shape
    ap = np.empty((-(-M // 6), K, 6), np.float32)
    if a.dtype == np.float32 and a.T.flags.c_contiguous and not a.flags.c_contiguous:
        _pack6(a.T, True, ap)
    else:
        _pack6(np.ascontiguousarray(a, np.float32), False, ap)
    return ap


#: ``_pack6``'s tiles of a transposed source: rows of it by panels
PACK6_K, PACK6_P = 64, 16


@kernel(error_model="numpy")
def _pack6(w, trans, ap):
    """``panels6`` of ``A = w`` (``w`` ``[M, K]``) or, where ``trans``, of ``A = w.T`` (``w``
    ``[K, M]``), into ``ap``. Rows of A: six rows read side by side, each panel written in
    order. Columns of w: tiles of PACK6_K rows x PACK6_P panels, so that the reads stay in
    a few KB of w and every panel gets runs of PACK6_K lines; numpy's strided copies took
    about twice as long (1 thread, [3072, 768] 5.0 -> 2.2 ms, its transpose 9.3 -> 3.6-4.5,
    [512, 512] 0.51 -> 0.12)."""
    P, K, _ = ap.shape
    M = w.shape[1] if trans else w.shape[0]
    full = M // 6
    if trans:
        for k0 in range(0, K, PACK6_K):
            k1 = min(K, k0 + PACK6_K)
            for p0 in range(0, full, PACK6_P):
                for p in range(p0, min(full, p0 + PACK6_P)):
                    d = ap[p]
                    for k in range(k0, k1):
                        wk, dk = w[k], d[k]
                        for r in range(6):
                            dk[r] = wk[6 * p + r]
    else:
        for p in range(full):
            r0, r1, r2, r3, r4, r5 = w[6 * p], w[6 * p + 1], w[6 * p + 2], w[6 * p + 3], w[6 * p + 4], w[6 * p + 5]
            d = ap[p]
            for k in range(K):
                dk = d[k]
                dk[0], dk[1], dk[2], dk[3], dk[4], dk[5] = r0[k], r1[k], r2[k], r3[k], r4[k], r5[k]
    for p in range(full, P):          # the last rows, zero past M
        for k in range(K):
            for r in range(6):
                i = 6 * p + r
                ap[p, k, r] = (w[k, i] if trans else w[i, k]) if i < M else _ZERO


#: the k block of ``matmul_p6``: a 16-column stripe of x (8 KB) and the panel's block (3 KB) in L1
P6_KB = 128


@numba.njit(**_OPTS)
def _p6_rows(ap, p, x, o, i, B, K, kb):
    """Rows ``i..i+6`` of ``o`` from panel ``p``: every column, k in blocks of ``kb``."""
    a = ap[p]
    nt = B % 16
    bw = B - nt
    for k0 in range(0, K, kb):
        k1 = min(K, k0 + kb)
        acc = np.int64(1) if k0 > 0 else I0
        for b0 in range(0, bw, 16):
            _Q6(a, x, o, i, I0, b0, np.int64(16), k0, k1, I0, acc)
        if nt > 8:
            _Q6M(a, x, o, i, I0, bw, nt, k0, k1, I0, acc)
        elif nt > 0:
            _Q6H(a, x, o, i, I0, bw, nt, k0, k1, I0, acc)


@numba.njit(**_OPTS)
def matmul_p6(ap, x, out):
    """``out [M, B] = A @ x`` (``x`` ``[K, B]``) with A given by its ``panels6`` ``ap``
    (``[ceil(M / 6), K, 6]``), for AVX2: per panel a 6-row x 16-column register tile, k in
    blocks of ``P6_KB`` (the numpy loop's recurrent products, ``rnn._lstm_steps_*``)."""
    M, B = out.shape
    K = x.shape[0]
    if B == 0 or M == 0:
        return
    if K == 0:
        out[:] = _ZERO
        return
    full = M // 6
    for p in range(full):
        _p6_rows(ap, p, x, out, 6 * p, B, K, P6_KB)
    if full * 6 < M:
        tmp = np.empty((6, B), np.float32)
        _p6_rows(ap, full, x, tmp, I0, B, K, P6_KB)
        for r in range(M - 6 * full):
            for b in range(B):
                out[6 * full + r, b] = tmp[r, b]


# With a few batch columns the tiles above waste most of their 16 lanes (a quarter used at
# batch 4); ``matmul_wr`` vectorizes over k instead, each 4x4 output tile 16 dot products
# of a weight row with a row of ``rt``, the right-hand side as batch rows (the state and
# gate gradients the step kernels save for the weight gradients), summed in registers;
# the columns past the last multiple of 4 in 4x2 and 4x1 tiles while the weight rows are in
# L1, batches 1 and 2 in 8-row tiles.
@numba.njit(**_OPTS)   # also called by the whole-sequence loops below
def matmul_wr(w, rt, out):
    """``out [M, B] = w [M, K] @ rt[:, :K].T`` (``rt`` ``[B, >= K]``)."""
    M, K = w.shape
    B = rt.shape[0]
    M4, B4 = M - M % 4, B - B % 4
    if B == 1:                       # 8x1 tiles: 9 loads per 8 multiply-adds
        M4 = M - M % 8
        x0 = rt[0]
        for i in range(0, M4, 8):
            w0, w1, w2, w3, w4, w5, w6, w7 = w[i], w[i + 1], w[i + 2], w[i + 3], w[i + 4], w[i + 5], w[i + 6], \
                w[i + 7]
            s00 = s10 = s20 = s30 = s40 = s50 = s60 = s70 = _ZERO
            for k in range(K):
                c0 = x0[k]
                s00 += w0[k] * c0
                s10 += w1[k] * c0
                s20 += w2[k] * c0
                s30 += w3[k] * c0
                s40 += w4[k] * c0
                s50 += w5[k] * c0
                s60 += w6[k] * c0
                s70 += w7[k] * c0
            out[i, 0], out[i + 1, 0], out[i + 2, 0], out[i + 3, 0] = s00, s10, s20, s30
            out[i + 4, 0], out[i + 5, 0], out[i + 6, 0], out[i + 7, 0] = s40, s50, s60, s70
    if B == 2:                       # 8x2 tiles: 10 loads per 16 multiply-adds
        M4 = M - M % 8
        x0, x1 = rt[0], rt[1]
        for i in range(0, M4, 8):
            w0, w1, w2, w3, w4, w5, w6, w7 = w[i], w[i + 1], w[i + 2], w[i + 3], w[i + 4], w[i + 5], w[i + 6], \
                w[i + 7]
            s00 = s10 = s20 = s30 = s40 = s50 = s60 = s70 = _ZERO
            s01 = s11 = s21 = s31 = s41 = s51 = s61 = s71 = _ZERO
            for k in range(K):
                c0, c1 = x0[k], x1[k]
                a0, a1, a2, a3, a4, a5, a6, a7 = w0[k], w1[k], w2[k], w3[k], w4[k], w5[k], w6[k], w7[k]
                s00 += a0 * c0
                s01 += a0 * c1
                s10 += a1 * c0
                s11 += a1 * c1
                s20 += a2 * c0
                s21 += a2 * c1
                s30 += a3 * c0
                s31 += a3 * c1
                s40 += a4 * c0
                s41 += a4 * c1
                s50 += a5 * c0
                s51 += a5 * c1
                s60 += a6 * c0
                s61 += a6 * c1
                s70 += a7 * c0
                s71 += a7 * c1
            out[i, 0], out[i + 1, 0], out[i + 2, 0], out[i + 3, 0] = s00, s10, s20, s30
            out[i + 4, 0], out[i + 5, 0], out[i + 6, 0], out[i + 7, 0] = s40, s50, s60, s70
            out[i, 1], out[i + 1, 1], out[i + 2, 1], out[i + 3, 1] = s01, s11, s21, s31
            out[i + 4, 1], out[i + 5, 1], out[i + 6, 1], out[i + 7, 1] = s41, s51, s61, s71
    for i in range(0, M4 if B > 2 else 0, 4):
        w0, w1, w2, w3 = w[i], w[i + 1], w[i + 2], w[i + 3]
        for b in range(0, B4, 4):
            x0, x1, x2, x3 = rt[b], rt[b + 1], rt[b + 2], rt[b + 3]
            s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = _ZERO
            s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = _ZERO
            for k in range(K):
                a0, a1, a2, a3 = w0[k], w1[k], w2[k], w3[k]
                c0, c1, c2, c3 = x0[k], x1[k], x2[k], x3[k]
                s00 += a0 * c0
                s01 += a0 * c1
                s02 += a0 * c2
                s03 += a0 * c3
                s10 += a1 * c0
                s11 += a1 * c1
                s12 += a1 * c2
                s13 += a1 * c3
                s20 += a2 * c0
                s21 += a2 * c1
                s22 += a2 * c2
                s23 += a2 * c3
                s30 += a3 * c0
                s31 += a3 * c1
                s32 += a3 * c2
                s33 += a3 * c3
            o0, o1, o2, o3 = out[i], out[i + 1], out[i + 2], out[i + 3]
            o0[b], o0[b + 1], o0[b + 2], o0[b + 3] = s00, s01, s02, s03
            o1[b], o1[b + 1], o1[b + 2], o1[b + 3] = s10, s11, s12, s13
            o2[b], o2[b + 1], o2[b + 2], o2[b + 3] = s20, s21, s22, s23
            o3[b], o3[b + 1], o3[b + 2], o3[b + 3] = s30, s31, s32, s33
        # the columns left over, while the four weight rows are in L1 (a pass of its own
        # would stream the weights from L3 again: batch 5 took 6x batch 4's time at H=512)
        o0, o1, o2, o3 = out[i], out[i + 1], out[i + 2], out[i + 3]
        b = B4
        if B - b >= 2:               # a 4x2 tile
            x0, x1 = rt[b], rt[b + 1]
            s00 = s01 = s10 = s11 = s20 = s21 = s30 = s31 = _ZERO
            for k in range(K):
                a0, a1, a2, a3 = w0[k], w1[k], w2[k], w3[k]
                c0, c1 = x0[k], x1[k]
                s00 += a0 * c0
                s01 += a0 * c1
                s10 += a1 * c0
                s11 += a1 * c1
                s20 += a2 * c0
                s21 += a2 * c1
                s30 += a3 * c0
                s31 += a3 * c1
            o0[b], o0[b + 1], o1[b], o1[b + 1] = s00, s01, s10, s11
            o2[b], o2[b + 1], o3[b], o3[b + 1] = s20, s21, s30, s31
            b += 2
        if b < B:                    # a 4x1 tile
            x0 = rt[b]
            s00 = s10 = s20 = s30 = _ZERO
            for k in range(K):
                c0 = x0[k]
                s00 += w0[k] * c0
                s10 += w1[k] * c0
                s20 += w2[k] * c0
                s30 += w3[k] * c0
            o0[b], o1[b], o2[b], o3[b] = s00, s10, s20, s30
    for i in range(M4, M):           # the rows left over by the 4- or 8-row tiles
        wr, orow = w[i], out[i]
        for b in range(B):
            x = rt[b]
            s = _ZERO
            for k in range(K):
                s += wr[k] * x[k]
            orow[b] = s


# -- whole-sequence loops ------------------------------------------------------------------------------
# One call runs every step (product and step kernel) instead of two Python-level calls
# per step: ~2-3 us of call overhead each.
@numba.njit(**_OPTS)
def lstm_forward_loop(w_ih, xf, w_hh, bias, order, first, valid, has_mask, ht, ct, act, cs, tcs, hp, y, gt, fm,
                      bm, wih_t, whh_t, pih, phh):
    """Every step of ``lstm_step_forward`` in ``order`` (int64 ``[T]``), each after
    ``gt = W_hh @ h`` by ``matmul_fm`` on the feature-major state ``ht`` (``fm``), else by
    ``matmul_wr`` on the saved rows ``hp[t]`` (zero, without the product, at step
    ``first``: a zero initial state; -1 for none). With ``fm`` the step's input projection
    ``act[t] = W_ih @ xf[t]`` (``xf`` ``[T, I, B]``, x feature-major) is formed here too,
    just before the step reads it, unless ``xf`` is empty (``rnn.XPROJ_FM_MIN_B``); else
    ``act`` holds them all on entry. ``wih_t``, ``whh_t``:
    the weights' transposes for ``matmul_fm_t`` (or empty arrays); ``pih``, ``phh``: the
    weights' ``panels`` for ``matmul_fm_p``, which then forms the products (or empty)."""
    T = order.shape[0]
    for k in range(T):
        t = order[k]
        tn = order[k + 1] if k + 1 < T else -1
        if fm and xf.shape[0] == 0:
            pass         # act holds every step's projection already (one product before the loop)
        elif fm and pih.shape[0] > 0:
            matmul_fm_p(pih, xf[t], act[t])
        elif fm:
            matmul_fm_t(w_ih, wih_t, xf[t], act[t])
        if t == first:
            gt[:] = _ZERO
        else:
            if fm and phh.shape[0] > 0:
                matmul_fm_p(phh, ht, gt)
            elif fm:
                matmul_fm_t(w_hh, whh_t, ht, gt)
            else:
                matmul_wr(w_hh, hp[t], gt)
        lstm_step_forward(gt, bias, t, tn, valid, has_mask, ht, ct, act, cs, tcs, hp, y, bm)


@numba.njit(**_OPTS)
def lstm_backward_loop(gy, has_gy, order, last, valid, has_mask, act, cs, c0t, tcs, whh_t, dht, tmp, dct, dp,
                       scratch, dbs, wih_t, dxf, need_dx, fm, bm, w_ih, w_hh, pih_t, phh_t):
    """Every step of ``lstm_step_backward``, last step first, each followed by the state
    gradient before the step, ``W_hh^T @ dp[t]`` (``whh_t`` the contiguous ``W_hh^T``; rows
    past their length keep theirs), down to step index ``last`` of ``order`` (0, or 1 when
    the first step's product, which only feeds ``h0``'s gradient, is not wanted). With
    ``fm`` the gate gradients are written feature-major straight into ``dp`` ``[T, 4H, B]``
    and the product is ``matmul_fm`` on them, and where ``need_dx`` the input's gradient
    ``dxf[t] = W_ih^T @ dp[t]`` (``wih_t`` ``[I, 4H]``, ``dxf`` ``[T, I, B]``) is formed
    while they are in L1; else they go to ``scratch`` ``[4H, B]``, are saved as batch rows
    ``dp[t]`` (``[T, B, 4H]``) and the product is ``matmul_wr`` on those. ``c0t`` is the
    initial cell state ``[H, B]``; ``tmp`` ``[H, B]`` is scratch; the result is left in
    ``dht`` and ``dct``. ``dbs`` ``[4H, B]`` gets the sum of every step's gate gradients
    (the bias gradient once summed over the batch: added while the step's block is in L1,
    not in a pass over all of ``dp`` afterwards). ``w_ih``, ``w_hh``: the weights (the
    transposes of ``wih_t``, ``whh_t``) for ``matmul_fm_t``, or empty arrays; ``pih_t``,
    ``phh_t``: the ``panels`` of ``wih_t`` and ``whh_t`` for ``matmul_fm_p`` (or empty), which
    then forms those products (``wih_t`` and ``whh_t`` may then be empty)."""
    T = order.shape[0]
    H, B = dht.shape
    n4 = 4 * H * B
    db = dbs.reshape(n4)
    db[:] = _ZERO
    cur, nxt = dht, tmp
    for k in range(T - 1, -1, -1):
        t = order[k]
        cp = cs[order[k - 1]] if k > 0 else c0t
        g = dp[t] if fm else scratch
        lstm_step_backward(gy, has_gy, t, valid, has_mask, act, cp, tcs, cur, dct, dp, g, not fm, bm)
        sc = g.reshape(n4)
        for q in range(n4):
            db[q] += sc[q]
        if fm and need_dx and pih_t.shape[0] > 0:
            matmul_fm_p(pih_t, g, dxf[t])
        elif fm and need_dx:
            matmul_fm_t(wih_t, w_ih, g, dxf[t])
        if k < last:
            break
        if fm and phh_t.shape[0] > 0:
            matmul_fm_p(phh_t, g, nxt)
        elif fm:
            matmul_fm_t(whh_t, w_hh, g, nxt)
        else:
            matmul_wr(whh_t, dp[t], nxt)
        if has_mask:
            for j in range(H):
                for b in range(B):
                    if not valid[t, b]:
                        nxt[j, b] = cur[j, b]
        cur, nxt = nxt, cur
    if cur is not dht:
        for j in range(H):
            for b in range(B):
                dht[j, b] = cur[j, b]
