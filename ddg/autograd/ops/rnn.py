"""Recurrent primitives: one op runs a whole sequence through one direction of one layer of
an Elman RNN (tanh or relu), an LSTM or a GRU, as cuDNN's RNN does.

Forward makes the input projection of every step ONE matrix product
(``x[T*B, I] @ W_ih^T + b``), then loops over time inside the op: per step one product
``h @ W_hh^T`` and a handful of whole-array calls writing into preallocated ``[T, B, ...]``
buffers (no graph nodes, no per-gate ops). Backward runs backpropagation through time in
one loop (per step one product ``dP_t @ W_hh``) and then forms every weight gradient with
one product over all steps (``dP[T*B, G*H]^T @ x``, ``dP^T @ h_prev``).

The sigmoid gates are computed as ``sigmoid(p) = (tanh(p / 2) + 1) / 2``: one ``tanh`` over
the whole gate block, with a per-column scale ``s`` (1/2 on sigmoid columns, 1 on tanh
columns) applied to the projections, then ``a * s + (1 - s)``; the scaled copy of ``W_hh^T``
is made once per call. Backward works with the unscaled weights and the saved
activations.

Float32 sequences on numpy (every mode: LSTM, GRU, Elman) run compiled per-step kernels
instead (``ddg.tensor.rnn_kernels``, modes in ``COMPILED``): a feature-major state ``[H, B]``,
per step one product ``W_hh @ h`` (``rnn_kernels.matmul_fm``) and one kernel for all gates;
backward one kernel and one product ``W_hh^T @ dP`` per step (``matmul_fm`` on a transposed
copy of ``W_hh`` from ``BWD_KERNEL_MIN_T`` steps, else numpy's), then the weight gradients
with one product over all steps; the LSTM runs all steps in one compiled call each way
and forms ``dW_hh`` and ``dW_ih`` in one pass (``rnn_kernels.matmul_tn``). A zero initial
state skips the first step's product, and the first step's backward product is skipped
when ``h0`` needs no gradient.

Paddle's gate layouts: LSTM ``(i, f, g, o)``, ``c = f*c + i*g``, ``h = o*tanh(c)``; GRU
``(r, z, c)``, ``r, z = sigmoid(x_rz + h_rz)``, ``c = tanh(x_c + r * (W_hc h + b_hc))``,
``h = z*h + (1-z)*c``; the Elman cell ``h = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``.

Sequence lengths (``lengths``, one per batch row) mask the steps past a row's length: the
state is carried over unchanged and the output is zero there, in both directions (the
reverse direction therefore starts at a row's last valid step).

Higher-order gradients (``create_graph=True``) are taken by recomputing the sequence with
ordinary ddg ops (``RNNSequence.backward_graph``), so every order of derivative is
available, at the per-step graph's cost.
"""
import numpy as np

from ...tensor import backend
from ...tensor.dtypes import upcast
from ...tensor import gemm
from ...tensor.gemm import transposed
from ..engine import IN_GRAD, grad_sink
from ..function import Function
from ..higher import live_input

MODES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}

# modes whose float32 numpy sequences run the compiled time loops of rnn_kernels (tests
# clear it to compare those loops with the numpy path)
COMPILED = {"LSTM", "GRU", "RNN_TANH", "RNN_RELU"}

# the compiled loops' recurrent products are rnn_kernels.matmul_fm (faster than numpy's
# matmul at every hidden size); backward it reads a transposed copy of W_hh, made from this
# many steps on (fewer run numpy's matmul on the transposed view: the copy costs what the
# kernel saves in ~2 steps at H=128 and ~3 at 1024). Tests lower it to run the kernel on
# short sequences.
BWD_KERNEL_MIN_T = 4
# from this batch size on the recurrent products are matmul_fm (16 batch columns per vector),
# below it rnn_kernels.matmul_wr (vectorized over k)
FM_MIN_B = 12
# the same for the LSTM, whose products form 9-12 batch columns with the column tile of
# matmul_fm_t (a training step at batch 11, H=512, T=50: 1.05x torch's CPU time against 1.15
# with matmul_wr; at batch 9 and 10 matmul_wr stays as fast), and at the batches of
# LSTM_FM_BATCHES, which fill one 8-lane vector (matmul_fm's last-block tile) with no column
# left over: training steps (T=10-200, H=64-1024, against torch) at batch 8 0.60-1.0x torch
# where matmul_wr ran 0.68-1.12 (H=128 T=200 1.12 -> 0.96, H=512 0.92 -> 0.94), at batch 7
# 0.88-1.0 against 0.98-1.13; at batch 6 mixed (H=128 1.10 -> 1.03, H=512 0.92 -> 1.03)
LSTM_FM_MIN_B = 11
LSTM_FM_BATCHES = (7, 8)
# ... and at these batches where matmul_fm_t's column tiles serve them (W_hh of at most
# COLS_MAX_W elements, _cols_left): training steps at H=128 T=200, batch 3/4/5/6/9/10,
# 1.42/1.08/1.12/1.04/1.08/1.07 -> 0.99/0.86/0.91/0.94/0.97/0.97 of torch against matmul_wr;
# feature-major without them (H >= 768) ran 1.1-1.4x matmul_wr's time
LSTM_FM_COLS = (3, 4, 5, 6, 9, 10)
# below FM_MIN_B, the input projections of all steps come from one product (and a transposed
# copy) from a W_ih of this many elements on (or at batch 1), else from numpy's stacked matmul
XPROJ_ONE_MIN = 1 << 17
# ... and so do the LSTM's from XPROJ_FM_MIN_B in the batch and XPROJ_FM_MIN_I input features
# (else formed step by step in its loop, just before each step reads them). Training steps,
# both routes in one process (11 rounds), one product / per step: I:H:T:B 512:512:20:48 0.93,
# 512:512:20:64 0.97, 1024:1024:10:48 0.95; with fewer inputs the per-step blocks won (the
# relayout to [T, 4H, B] costs more than the product saves): 256:256:50:48 1.05,
# 128:256:50:64 1.10, 64:128:100:64 1.18
XPROJ_FM_MIN_B, XPROJ_FM_MIN_I = 48, 512


# below 16 in the batch, the compiled LSTM's products form batches of 3-6, 9-12 and 7-8 with
# vectors along the weights' rows (rnn_kernels.matmul_fm_t, from their transposes) where W_hh
# has at most this many elements: beyond, the transposes' rows lie so far apart that reading
# 64 floats from each costs more than the masked lanes saved (1.2-1.3x slower at H=1024,
# 0.75-0.93x the time at H=384-512). Where panel_batch says yes (below 16 from PANEL_MIN_H
# hidden features on, and 1-12 columns past 16 at any size) matmul_fm_p forms them from strips
# of the transposes instead, and the transposes are not made (_cols_left's answer only counts
# where panel_batch says no)
COLS_MAX_W = 1 << 20
# ... or, below 16 in the batch (every column of the product a left-over one), this many
# (H <= 790): [4H, H] @ [H, B] at H = 640 (W_hh 1.6M), batch 5 / 8 174 / 266 us by the column
# tiles against 298 / 296 without; training steps against torch, this limit against 1.7M: H =
# 768 batch 3 / 4 / 5 / 8 1.13 / 0.97 / 1.12 / 1.00 -> 1.00 / 0.94 / 0.97 / 0.91; past it mixed
# (H = 896 batch 3 / 5 / 8 1.01 / 1.00 / 0.86 -> 0.97 / 0.86 / 0.87, H = 832 batch 6 0.94 ->
# 1.02) and at H = 1024 slower (batch 3 / 5 0.86 / 0.93 -> 1.11 / 1.08)
COLS_MAX_W_SMALL = 2500000


# the LSTM's products at batches of 1 to this many columns past a multiple of 16 (17-28, 33-44,
# ...), and of 3 to this many from PANEL_MIN_H hidden features on, run rnn_kernels.matmul_fm_p,
# from strips of the weights' transposes (training steps against torch, T = 20: H = 768 batch 3 /
# 5 / 11 0.89 / 0.94 / 1.15 -> 0.68 / 0.71 / 0.89, H = 1024 batch 3 / 9 0.79 / 0.74 -> 0.55 / 0.63,
# H = 512 within noise; H = 576 batch 17 1.13 -> 0.90). Below PANEL_MIN_H the small batches keep
# matmul_fm_t's tiles, faster on short rows (H = 128 batch 8 / 12: 0.74 / 0.83 against 0.83 / 0.88)
PANEL_COLS = 12
PANEL_MIN_H = 256
# the input projection's product by panels too (forward) from this many input features on, below
# 16 in the batch (the column tiles pay on longer rows, as in matmul_fm_t's rules)
PANEL_MIN_I = 64
# the LSTM's forward copies its weights to panels or transposes (above) only from this many
# steps on; shorter sequences read them in place (matmul_fm, matmul_wr). A cell called step by
# step (T = 1) paid a copy of both weights per call: training steps of LSTMCell loops at H 128-1024,
# batch 3-12, 10-22 % faster without it; whole sequences, copy / no copy: T 2-4 0.99-1.17, T 5-6
# 0.93-1.08, T 8 0.88-1.01
RELAYOUT_MIN_T = 6

# The LSTM's weight gradients without AVX-512 (Zen 3, AVX2): matmul_tn's tiles ran at 41-45
# GFLOP/s where OpenBLAS's two products, with the feature-major gate gradients copied to rows
# first, took 0.70-0.95 of its time from about this many weight-gradient elements (4H x (H +
# I)) on (training steps, T/B/H/I: 20/32/1024/128 137 -> 95 ms, 100/16/256/128 28 -> 24,
# 200/16/128/128 18.5 -> 17.6); below it matmul_tn stayed ahead (200/16/64/64 5.5 against
# 6.9 ms, 50/8/128/32 1.5 against 1.8)
TN_BLAS_MIN_OUT = 100_000
#: ... where the gate gradients come feature-major ([T, 4H, B], the compiled loops' below
#: batch 32-48), ``rnn_kernels.swap_leading`` makes them gate-major for those products
#: instead of numpy's strided copy: the weight gradients' time in training steps (one
#: process, median of 9), I:H:T:B 200:200:150:8 16.6 -> 14.3 ms, 128:1024:50:8 67.0 -> 63.2,
#: 32:512:50:24 46.3 -> 43.4, 64:768:30:24 59.1 -> 57.7 and 60.2 -> 57.0
SWAP_KERNEL = True


def panel_batch(B, H):
    """Whether the LSTM's products with B columns (a batch of B) and H hidden features run
    ``matmul_fm_p``."""
    return (3 <= B <= PANEL_COLS and H >= PANEL_MIN_H) or (B > 16 and 1 <= B % 16 <= PANEL_COLS)


def panel_forward(B, H):
    """Whether the LSTM's forward products run ``matmul_fm_p``: where ``panel_batch`` says,
    and at a batch of exactly 16 from ``PANEL_MIN_H`` hidden features on. There the forward's
    ``[4H, H] @ [H, 16]`` ran 25 % faster from panels than by ``matmul_fm`` on the weight in
    place ([2048 x 512] @ [512 x 16] 49.6 -> 62.0 GFLOP/s); training steps, forward panels /
    without, in one process, two to three runs: 2-layer LSTM H 512 T 50 0.84-0.96
    (bidirectional 0.91), I/H/T 256/256/100 0.97-0.98, 384/384/50 0.97-1.00, 1024/1024/10
    0.97-1.05, input 32 at H 256-1024 0.975-0.99. At 32-64 columns the product
    gains as much alone but the steps did not (256/256/50/32 1.07-1.10, 512/512/20/48
    0.90-1.07, 512/512/20/64 0.98-1.02, 128/1024/20/32 0.93-0.95). The backward's ``W^T @ dp``
    (an inner index of 4H) keeps the transposes: with panels it ran 0.99-1.11."""
    return panel_batch(B, H) or (B == 16 and H >= PANEL_MIN_H)


def _cols_left(B, w_size):
    r = B % 16
    return ((B >= 3 and 1 <= r <= 4) or 5 <= r <= 6 or 9 <= r <= 12 or B in (7, 8)) \
        and w_size <= (COLS_MAX_W_SMALL if B < 16 else COLS_MAX_W)


def _lstm_fm(B, H, w_size, relayout=True):
    """Whether the LSTM's compiled loops of batch B run matmul_fm (the state feature-major)."""
    return B >= LSTM_FM_MIN_B or B in LSTM_FM_BATCHES or \
        (relayout and (panel_batch(B, H) or (B in LSTM_FM_COLS and _cols_left(B, w_size))))


def _panels(K, w, B, of_t=False):
    """``rnn_kernels.panels`` of ``w`` (``[M, K]``), or with ``of_t`` of ``w.T``: the
    panels ``matmul_fm_p`` reads for B columns."""
    m, k = (w.shape[1], w.shape[0]) if of_t else w.shape
    width = K.panel_width(B)
    ap = np.empty(((m + width - 1) // width, k, width), w.dtype)
    (K.panels_t if of_t else K.panels)(w, ap)
    return ap


#: from this many elements of W_hh on, the short sequences' (and cells') state gradient
#: ``W_hh^T @ g`` is formed as ``(g^T @ W_hh)^T`` (``_state_grad``)
STATE_GRAD_ROWS_MIN = 1 << 19


def _state_grad(w_hh, g, out):
    """``out [H, B] = W_hh^T @ g`` (``g`` ``[G*H, B]``) for the backward's numpy route (fewer
    than ``BWD_KERNEL_MIN_T`` steps: a cell called step by step). OpenBLAS's product with the
    large weight read transposed ran 1.1-3.2x the time of ``g^T @ W_hh`` (the small operand
    transposed instead) from ``STATE_GRAD_ROWS_MIN`` weight elements on (1 thread, [G*H, H] with
    batch B: 3x512 batch 16 660 -> 592 us, 4x512 1322 -> 924, 3x768 2939 -> 1919, 4x1024
    12190 -> 4792, 3x1024 batch 8 7226 -> 2283, 1x1024 1115 -> 729, 4x512 batch 32 2189 ->
    1439); below it the view's product was as fast or faster (1x512 batch 16 162 against
    198 us, 3x256 batch 64 394 against 431)."""
    if w_hh.size >= STATE_GRAD_ROWS_MIN and type(g) is np.ndarray:
        np.copyto(out, (g.T @ w_hh).T)
    else:
        np.matmul(w_hh.T, g, out=out)


#: The LSTM's feature-major steps at a batch of BLAS_STEPS_MIN_B and more, without AVX-512's
#: compiled GEMM (``gemm.ENABLED`` off: rnn_kernels' tiles then run in 6-row AVX2 tiles), in a
#: Python loop whose products are numpy's (OpenBLAS), the step kernels compiled as before:
#: there OpenBLAS formed ``W_hh @ h`` and ``W_hh^T @ dp`` in 0.77-0.95 of the tiles' time
#: (Zen 3, 1 thread, H 256-1024 at batch 64 and 128; at batch 16-32 the tiles stay 1.1-1.6x
#: faster), and a few microseconds of Python per step are nothing beside them. Training steps,
#: one process, loop / steps: I:H:T:B 64:1024:10:64 0.95, 512:512:20:64 0.96, 256:256:50:48
#: 0.93, 128:128:50:64 0.87, 128:256:30:128 0.83, 1024:1024:10:48 0.96; 256:512:20:56 1.00
BLAS_STEPS = not gemm.ENABLED
BLAS_STEPS_MIN_B = 48
#: ... and from BLAS_STEPS_WIDE_MIN_B where W_hh has BLAS_STEPS_WIDE_MIN_W elements (H 256) or
#: more, since the W_hh products below 64 columns run ``matmul_p6`` (P6_STEPS below): loop /
#: compiled steps at I:H:T:B 32:768:20:40 0.94, 64:768:30:40 0.82, 32:512:40:32 0.94,
#: 128:1024:20:32 0.94, 256:512:20:40 1.05 and 0.90, 32:256:50:32 0.99, 128:384:30:32 0.86,
#: 32:640:30:36 1.01 (before ``matmul_p6``, batch 40 at H 768 1.03-1.06); with fewer hidden
#: features the loop's Python per step shows (64:64:200:32 1.18, 128:128:50:32 1.09,
#: 32:64:100:40 1.02, 32:32:50:40 1.12), and below 32 the compiled loops stay at any H
#: (128:768:20:24 0.97, 64:512:50:24 1.04, 64:1024:20:16 1.13)
BLAS_STEPS_WIDE_MIN_B, BLAS_STEPS_WIDE_MIN_W = 32, 1 << 18
#: ... and from this many elements of W_hh the backward's state gradient is ``(dp^T @ W_hh)^T``,
#: the weight read in place, instead of a product with a transposed copy of it (I:H:T:B
#: 64:1024:10:64 0.96, 1024:1024:10:48 0.98 of the time; at H 512-768 within noise, 1.00-1.04)
STEPS_ROWS_MIN = 1 << 22


def blas_steps(B, w_size):
    """Whether the LSTM's feature-major steps at batch B run in the numpy loop (``w_size``:
    W_hh's elements)."""
    return BLAS_STEPS and (B >= BLAS_STEPS_MIN_B or (B >= BLAS_STEPS_WIDE_MIN_B and w_size >= BLAS_STEPS_WIDE_MIN_W))


#: The numpy loop's forward products with a weight of PART_MIN_ROWS rows (4H) or more go in
#: parts of PART_ROWS rows. OpenBLAS formed ``[3072-4096 x H] @ [H x 48-128]`` (H 768-1024)
#: at ~36-44 GFLOP/s in one call and at ~42-50 in 768-row parts, whose output blocks stay in
#: L2 (the recurrent products' time in the loop, both forms in one process, I:H:T:B:
#: 256:768:20:48 -16 % and -13 %, 32:768:20:48 -15 %, 64:1024:10:64 -16 %, 1024:1024:10:48
#: -12 %, 64:1024:10:96 -16 %, 128:768:20:128 -8 %); at H 512 the parts were 7 % slower and at
#: H 640 (1024-row parts) even. docs/cpu_kernels.md has the table.
PART_MIN_ROWS, PART_ROWS = 3072, 768


def _row_parts(w, out):
    """``(rows of w, the same rows of out)`` pairs for ``out = w @ x`` (``_lstm_steps_forward``)."""
    m = w.shape[0]
    if m < PART_MIN_ROWS:
        return ((w, out),)
    return tuple((w[i:i + PART_ROWS], out[i:i + PART_ROWS]) for i in range(0, m, PART_ROWS))


#: ... and below P6_MAX_B in the batch W_hh's products there (forward and backward) by
#: ``rnn_kernels.matmul_p6``, a 6-row x 16-column AVX2 tile on W_hh's panels made once per call,
#: instead of numpy's. Training steps, p6 / numpy, in one process: I:H:T:B 32:768:20:48 0.94,
#: 0.93, 256:768:20:48 0.94, 32:512:40:48 0.90, 128:1024:50:48 0.98, 256:256:50:48 0.96,
#: 100:1024:30:40 1.01, 0.95, 32:1024:20:40 0.95; at batch 64 even (64:1024:10:64 0.98,
#: 512:512:20:64 0.99, 128:128:50:64 1.03), from 96 slower (64:768:20:96 1.09, 64:512:40:128
#: 1.02 and 1.03), where OpenBLAS's products have columns enough. The panels cost a copy of
#: W_hh per call (forward and backward), which short sequences do not earn back: from
#: P6_MIN_TB steps x batch columns on (T x B 576-768: 64:512:12:48 0.87, 64:768:16:48 0.89,
#: 64:1024:24:32 0.88; below: 1024:1024:10:48 1.02, 32:768:5:40 1.06, 64:1024:5:48 1.10)
P6_STEPS, P6_MAX_B, P6_MIN_TB = True, 64, 512


def _p6(B, T):
    """Whether the numpy loop's W_hh products at batch B over T steps run ``matmul_p6``."""
    return P6_STEPS and B < P6_MAX_B and T * B >= P6_MIN_TB


#: The GRU's and the Elman RNN's per-step products with W_hh (their loops are Python either
#: way) by ``matmul_p6`` too, under the same batch and steps x batch rules, without AVX-512
#: (BLAS_STEPS), from P6_RNN_MIN_H hidden features, in place of ``matmul_fm``'s 8-row tiles
#: (two 4-row passes on AVX2). Training steps, one process, p6 / fm, I:H:T:B: rnn
#: 128:512:50:48 0.95, 64:1024:30:32 0.87, 32:256:100:32 0.93, 128:768:40:40 0.94,
#: 64:512:50:16 0.89, 32:256:100:12 0.90; gru 64:512:50:48 0.80, 128:1024:20:32 0.92,
#: 32:768:40:48 0.89, 64:256:50:32 0.84, 32:192:100:40 0.94, 64:512:50:16 0.97; at H 64-128
#: within 2 % either way (rnn 64:128:100:48 0.99, 32:64:200:32 1.01, gru 64:64:200:32 1.00)
P6_RNN, P6_RNN_MIN_H = True, 128


def _gru_elman_p6(B, T, H):
    """Whether the GRU's or the Elman RNN's W_hh products (batch B, T steps, H features) run
    ``matmul_p6``."""
    return P6_RNN and BLAS_STEPS and H >= P6_RNN_MIN_H and _p6(B, T)


def _lstm_steps_forward(K, w_ih, xf, w_hh, bias, order, first, valid, has_mask, st, act, aux, hp, y, gt, bm):
    """``rnn_kernels.lstm_forward_loop``'s steps (feature-major) with the products by numpy
    (W_hh's by ``matmul_p6`` where ``P6_STEPS``)."""
    ht, ct = st
    order = list(order)
    per_step = xf.shape[0] > 0
    p6 = K.panels6(w_hh) if _p6(gt.shape[1], len(order)) else None
    rec = _row_parts(w_hh, gt) if p6 is None else ()
    for k, t in enumerate(order):
        tn = order[k + 1] if k + 1 < len(order) else -1
        if per_step:
            for w, o in _row_parts(w_ih, act[t]):
                np.matmul(w, xf[t], out=o)
        if t == first:
            gt.fill(0)
        elif p6 is not None:
            K.matmul_p6(p6, ht, gt)
        else:
            for w, o in rec:
                np.matmul(w, ht, out=o)
        K.lstm_step_forward(gt, bias, t, tn, valid, has_mask, ht, ct, act, aux[0], aux[1], hp, y, bm)


def _lstm_steps_backward(K, gy, has_gy, order, last, valid, has_mask, act, cs, c0t, tcs, w_hh, whh_t, dht, tmp,
                         dct, dp, g, dbs, wih_t, dxf, need_dx, bm, whh_p=None):
    """``rnn_kernels.lstm_backward_loop``'s steps (feature-major) with the products by numpy.
    Each step's gate gradients are formed in the scratch ``g`` ``[4H, B]`` (in L2 for the
    products that read them) and copied into step t's columns of ``dp`` ``[4H, T, B]``, the
    layout the weight gradients' one product reads without a transposed copy of all of it
    (``_lstm_weight_grads``: 49 ms of a 1150 ms step at I:H:T:B 128:1024:50:48). ``whh_p``: the
    ``panels6`` of ``W_hh^T`` for ``matmul_p6`` (``P6_STEPS``), which then forms the state
    gradient."""
    dbs.fill(0)
    cur, nxt = dht, tmp
    for k in range(len(order) - 1, -1, -1):
        t = order[k]
        K.lstm_step_backward(gy, has_gy, t, valid, has_mask, act, cs[order[k - 1]] if k else c0t, tcs, cur, dct,
                             dp, g, False, bm)
        dp[:, t] = g
        dbs += g
        if need_dx:
            np.matmul(wih_t, g, out=dxf[t])
        if k < last:
            break
        if whh_p is not None:
            K.matmul_p6(whh_p, g, nxt)
        elif whh_t is None:                # (dp^T @ W_hh)^T: W_hh past STATE_GRAD_ROWS_MIN
            _state_grad(w_hh, g, nxt)
        else:
            np.matmul(whh_t, g, out=nxt)
        if has_mask:                       # rows past their length keep theirs
            np.copyto(nxt, cur, where=~valid[t])
        cur, nxt = nxt, cur
    if cur is not dht:
        dht[...] = cur


def _tn(a, b):
    """``a.T @ b`` for 2-D arrays (a weight gradient over all steps) by ``gemm.product``: on
    numpy the compiled kernel, then ``gemm.few_rows_product``'s forms where numpy's own
    product is slow (a single row's outer product), then numpy's."""
    return gemm.product(a.T, b)


class RNNSequence(Function):
    """One direction of one recurrent layer over a whole sequence.

    Inputs: ``x`` ``[T, B, I]`` (``[B, T, I]`` with ``batch_major=True``), ``h0`` ``[B, H]``,
    for LSTM ``c0`` ``[B, H]``, then ``w_ih [G*H, I]``, ``w_hh [G*H, H]``, ``b_ih [G*H]``,
    ``b_hh [G*H]``. Outputs: ``y`` (x's layout, ``H`` features), ``h_T`` and for LSTM
    ``c_T`` (the state after the last step processed: step 0 when ``reverse``)."""
    save_inputs = True            # backward reads x, the initial states and both weights
    none_grads = True

    def __init__(self, mode, reverse=False, batch_major=False, lengths=None, proj=False):
        if mode not in MODES:
            raise ValueError(f"RNNSequence: mode must be one of {sorted(MODES)}, got {mode!r}")
        if proj and mode != "LSTM":
            raise ValueError(f"RNNSequence: a projection (proj=True) is an LSTM's only, not {mode}'s")
        self.mode, self.reverse, self.batch_major, self.lengths = mode, bool(reverse), bool(batch_major), lengths
        self.proj = bool(proj)

    # -- forward -------------------------------------------------------------------------------------
    def forward(self, x, *rest):
        if self.proj:
            return self._proj_forward(x, *rest)
        lstm = self.mode == "LSTM"
        n_state = 2 if lstm else 1
        if len(rest) != n_state + 4:
            raise ValueError(f"RNNSequence({self.mode}) takes x, {n_state} initial state(s) and 4 weights, got "
                             f"{1 + len(rest)} inputs")
        states, (w_ih, w_hh, b_ih, b_hh) = rest[:n_state], rest[n_state:]
        if type(x) is np.ndarray:  # numpy has no half-precision BLAS: float32 arithmetic
            x, w_ih, w_hh, b_ih, b_hh = (upcast(a) for a in (x, w_ih, w_hh, b_ih, b_hh))
            states = tuple(upcast(s) for s in states)
        xp = backend.get_array_module(x)
        dt = x.dtype
        if x.ndim != 3:
            raise ValueError(f"RNNSequence: x must be 3-D, got shape {x.shape}")
        xt = x.transpose(1, 0, 2) if self.batch_major else x          # [T, B, I] (a view)
        T, B, I = xt.shape
        G = MODES[self.mode]
        H = w_hh.shape[1]
        if w_ih.shape != (G * H, I) or w_hh.shape != (G * H, H) or b_ih.shape != (G * H,) or \
                b_hh.shape != (G * H,):
            raise ValueError(f"RNNSequence({self.mode}): with input size {I} and hidden size {H} the weights must "
                             f"be w_ih [{G * H}, {I}], w_hh [{G * H}, {H}], biases [{G * H}]; got "
                             f"{list(w_ih.shape)}, {list(w_hh.shape)}, {list(b_ih.shape)}, {list(b_hh.shape)}")
        for s in states:
            if s.shape != (B, H):
                raise ValueError(f"RNNSequence({self.mode}): initial states must be [batch={B}, hidden={H}], got "
                                 f"{list(s.shape)}")
        w_ih, w_hh, b_ih, b_hh = (a.astype(dt, copy=False) for a in (w_ih, w_hh, b_ih, b_hh))
        states = tuple(s.astype(dt, copy=False) for s in states)

        self.x, self.w_ih, self.w_hh, self.b_ih, self.b_hh = x, w_ih, w_hh, b_ih, b_hh
        self.geom = (T, B, I, H, G)
        self.compiled = xp is np and dt == np.float32 and self.mode in COMPILED
        self.one = None
        if self.compiled and T == 1 and G == 1 and self.lengths is None:
            self.states = states
            return self._elman_one_fwd(xt[0], states[0], w_ih, w_hh, b_ih, b_hh)
        if self.compiled:
            return self._compiled_fwd(xt, states, w_ih, w_hh, b_ih, b_hh, T, B, I, H, G)
        # the input projection of every step at once, time-major [T, B, G*H] (a view when batch-major)
        bias = b_ih if self.mode == "GRU" else b_ih + b_hh
        xg = x.reshape(-1, I) @ w_ih.T
        xg += bias
        xg = self._tm(xg.reshape(x.shape[:2] + (G * H,)))
        keep = self._masks(xp, T, B, dt)
        order = range(T - 1, -1, -1) if self.reverse else range(T)
        run = {"LSTM": self._lstm_fwd, "GRU": self._gru_fwd}.get(self.mode, self._elman_fwd)
        S, final = run(xp, xg, states, w_hh, b_hh, order, keep, T, B, H, dt)
        self.S, self.states, self.keep, self.order = S, states, keep, order
        if self.lengths is not None:        # outputs past a row's length are zero
            y = S.copy()
            for t, m in enumerate(keep):
                if m is not None:
                    y[t] *= m
            S = y
        return (self._xl(S),) + final

    # -- LSTM with a projection (proj_size) -------------------------------------------------------------
    # Inputs x, h0 [B, P], c0 [B, H], w_ih [4H, I], w_hh [4H, P], b_ih, b_hh [4H], w_ho [H, P]:
    # per step the gates from x's projection and h @ W_hh^T, c = f*c + i*g, r = o*tanh(c), and
    # the new state h = r @ W_ho ([B, P], also the output). Every step in this op on numpy or
    # cupy arrays (per step two products and a few whole-array calls), the weight gradients
    # with one product each over all steps, as the unprojected paths do.
    def _proj_forward(self, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_ho):
        if type(x) is np.ndarray:  # numpy has no half-precision BLAS: float32 arithmetic
            x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_ho = (upcast(a) for a in (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_ho))
        xp = backend.get_array_module(x)
        dt = x.dtype
        if x.ndim != 3:
            raise ValueError(f"RNNSequence: x must be 3-D, got shape {x.shape}")
        xt = x.transpose(1, 0, 2) if self.batch_major else x
        T, B, I = xt.shape
        H, P = w_ho.shape if w_ho.ndim == 2 else (-1, -1)
        if w_ho.ndim != 2 or w_ih.shape != (4 * H, I) or w_hh.shape != (4 * H, P) or b_ih.shape != (4 * H,) \
                or b_hh.shape != (4 * H,) or h0.shape != (B, P) or c0.shape != (B, H):
            raise ValueError(f"RNNSequence(LSTM, proj): with input size {I}, batch {B} and w_ho [hidden, proj] = "
                             f"{list(w_ho.shape)} the inputs must be w_ih [4*hidden, {I}], w_hh [4*hidden, proj], "
                             f"biases [4*hidden], h0 [{B}, proj], c0 [{B}, hidden]; got {list(w_ih.shape)}, "
                             f"{list(w_hh.shape)}, {list(b_ih.shape)}, {list(b_hh.shape)}, {list(h0.shape)}, "
                             f"{list(c0.shape)}")
        w_ih, w_hh, b_ih, b_hh, w_ho, h0, c0 = (a.astype(dt, copy=False)
                                               for a in (w_ih, w_hh, b_ih, b_hh, w_ho, h0, c0))
        self.x, self.w_ih, self.w_hh, self.b_ih, self.b_hh, self.w_ho = x, w_ih, w_hh, b_ih, b_hh, w_ho
        self.states, self.geom = (h0, c0), (T, B, I, H, 4)
        self.compiled = False
        keep = self._masks(xp, T, B, dt)
        order = range(T - 1, -1, -1) if self.reverse else range(T)
        xg = (gemm.product(xt.reshape(-1, I), w_ih.T) + (b_ih + b_hh)).reshape(T, B, 4 * H)
        whh_t = xp.ascontiguousarray(w_hh.T)
        A = xp.empty((T, B, 4 * H), dt)     # gate activations (i, f, g, o)
        C = xp.empty((T, B, H), dt)         # cell state after each step
        TC = xp.empty((T, B, H), dt)        # tanh(c)
        R = xp.empty((T, B, H), dt)         # o * tanh(c), before the projection
        S = xp.empty((T, B, P), dt)         # state (and output) after each step
        HP = xp.empty((T, B, P), dt)        # state before each step
        h, c = h0, c0
        for t in order:
            HP[t] = h
            a = A[t]
            xp.add(xg[t], gemm.product(h, whh_t), out=a)
            for sg in (a[:, :2 * H], a[:, 3 * H:]):   # sigmoid(v) = tanh(v / 2) / 2 + 1 / 2 on i, f, o
                sg *= 0.5
                xp.tanh(sg, out=sg)
                sg *= 0.5
                sg += 0.5
            xp.tanh(a[:, 2 * H:3 * H], out=a[:, 2 * H:3 * H])
            ct, tc, rt = C[t], TC[t], R[t]
            xp.multiply(a[:, H:2 * H], c, out=ct)
            ct += a[:, :H] * a[:, 2 * H:3 * H]
            xp.tanh(ct, out=tc)
            xp.multiply(a[:, 3 * H:], tc, out=rt)
            ht = S[t]
            ht[...] = gemm.product(rt, w_ho)
            if keep[t] is not None:
                self._carry(ct, c, keep[t])
                self._carry(ht, h, keep[t])
            h, c = ht, ct
        self.A, self.C, self.TC, self.R, self.S, self.HP = A, C, TC, R, S, HP
        self.keep, self.order = keep, order
        y = S
        if self.lengths is not None:        # outputs past a row's length are zero
            y = S.copy()
            for t, m in enumerate(keep):
                if m is not None:
                    y[t] *= m
        return self._xl(y), h, c

    def _proj_backward(self, gy, ghT, gcT):
        A, C, TC, R, S, HP = self.A, self.C, self.TC, self.R, self.S, self.HP
        xp = backend.get_array_module(S)
        dt = S.dtype
        T, B, I, H, _ = self.geom
        P = self.w_ho.shape[1]
        keep = self.keep
        gy = None if gy is None else self._tm(gy.astype(dt, copy=False))
        dh = xp.zeros((B, P), dt) if ghT is None else ghT.astype(dt, copy=True)
        dc = xp.zeros((B, H), dt) if gcT is None else gcT.astype(dt, copy=True)
        dP = xp.zeros((T, B, 4 * H), dt)    # gate pre-activation gradients (zero past a row's length)
        DH = xp.zeros((T, B, P), dt)        # the state's gradient at each step where it was computed
        order = list(self.order)
        for k in range(T - 1, -1, -1):
            t = order[k]
            m = keep[t]
            g = dh if gy is None else (dh + gy[t] if m is None else dh + gy[t] * m)
            cprev = self.states[1] if k == 0 else C[order[k - 1]]
            if m is not None:
                g_on = g * m
            else:
                g_on = g
            DH[t] = g_on
            dr = gemm.product(g_on, self.w_ho.T)
            a = A[t]
            i, f, gg, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
            tc = TC[t]
            dct = dc + dr * o * (1 - tc * tc) if m is None else dc * m + dr * o * (1 - tc * tc)
            p = dP[t]
            xp.multiply(dr * tc, o * (1 - o), out=p[:, 3 * H:])
            xp.multiply(dct * gg, i * (1 - i), out=p[:, :H])
            xp.multiply(dct * cprev, f * (1 - f), out=p[:, H:2 * H])
            xp.multiply(dct * i, 1 - gg * gg, out=p[:, 2 * H:3 * H])
            if m is not None:
                p *= m
                dc = dct * f + dc * (1 - m)
                dh = gemm.product(p, self.w_hh) + g * (1 - m)
            else:
                dc = dct * f
                dh = gemm.product(p, self.w_hh)
        needs = self.needs
        out = [None] * len(needs)
        dPm = self._xl(dP).reshape(-1, 4 * H)
        x = self.x
        if needs[0]:
            out[0] = gemm.product(dPm, self.w_ih).reshape(x.shape)
        out[1] = dh if needs[1] else None
        out[2] = dc if needs[2] else None
        if needs[3]:
            out[3] = _tn(dPm, x.reshape(-1, I))
        if needs[4]:
            out[4] = _tn(dP.reshape(-1, 4 * H), HP.reshape(-1, P))
        if needs[5] or needs[6]:
            db = dP.reshape(-1, 4 * H).sum(axis=0)
            out[5] = db if needs[5] else None
            out[6] = (db.copy() if needs[5] else db) if needs[6] else None
        if needs[7]:
            out[7] = _tn(R.reshape(-1, H), DH.reshape(-1, P))
        return tuple(out)

    # -- one Elman step (a SimpleRNNCell called step by step) --------------------------------------------
    # A cell in a Python loop runs this op once per step, T = 1. The compiled loops below pay ~25
    # numpy calls of set-up per call (feature-major copies of the state, per-step buffers) for
    # one step; an Elman step is two products, the bias and the activation, and its backward
    # the activation's derivative and four products. SimpleRNNCell loops (batch 4-16, H 64-256,
    # 1 thread) went from 1.07-1.32x torch's step time to 0.80-1.02.
    def _elman_one_fwd(self, x1, h0, w_ih, w_hh, b_ih, b_hh):
        pre = gemm.product(x1, w_ih.T)                   # [B, H]
        if h0.any():                                     # W_hh @ 0 is not computed
            pre += gemm.product(h0, w_hh.T)
        pre += b_ih + b_hh
        h = np.maximum(pre, 0, out=pre) if self.mode == "RNN_RELU" else np.tanh(pre, out=pre)
        self.one = (x1, h0, h)
        y = h.reshape(self.x.shape[:2] + (h.shape[1],))  # [1, B, H] or [B, 1, H]
        return y.copy(), h.copy()

    def _elman_one_bwd(self, gy, ghT):
        x1, h0, h = self.one
        B, H = h.shape
        dt = h.dtype
        if gy is None and ghT is None:
            g = np.zeros((B, H), dt)
        elif gy is None:
            g = ghT.astype(dt, copy=True)
        else:
            g = gy.reshape(B, H).astype(dt, copy=True)
            if ghT is not None:
                g += ghT
        if self.mode == "RNN_RELU":
            dp = g * (h > 0)
        else:
            dp = g * (1 - h * h)
        needs = self.needs
        out = [None] * len(needs)
        if needs[0]:
            out[0] = gemm.product(dp, self.w_ih).reshape(self.x.shape)
        if needs[1]:
            out[1] = gemm.product(dp, self.w_hh)
        if needs[2]:
            out[2] = self._weight_grad(2, dp, x1)
        if needs[3]:
            out[3] = self._weight_grad(3, dp, h0)
        if needs[4] or needs[5]:
            db = dp.sum(axis=0)
            out[4] = db if needs[4] else None
            out[5] = (db.copy() if needs[4] else db) if needs[5] else None
        return tuple(out)

    # -- compiled float32 loops (rnn_kernels) ----------------------------------------------------------
    def _valid(self, T, B):
        """``[T, B]`` bool: step t of row b is within the row's length."""
        if self.lengths is None:
            return np.ones((T, B), bool)
        lens = np.asarray(self.lengths).reshape(-1)
        if lens.shape[0] != B:
            raise ValueError(f"RNNSequence: {lens.shape[0]} sequence lengths for a batch of {B}")
        return np.arange(T)[:, None] < lens[None, :]

    # The compiled loops keep the state feature-major ([H, B]): the step's product is
    # W_hh [G*H, H] @ h [H, B] (and W_hh^T @ dP backward), by rnn_kernels.matmul_fm, whose
    # 16-lane registers run along the batch; the weight gradients' products read the state
    # and the gate gradients saved as batch rows.
    def _compiled_fwd(self, xt, states, w_ih, w_hh, b_ih, b_hh, T, B, I, H, G):
        from ...tensor import rnn_kernels as K
        lstm = self.mode == "LSTM"
        dt = xt.dtype
        order = range(T - 1, -1, -1) if self.reverse else range(T)
        valid = self._valid(T, B)
        has_mask = not valid.all()
        # every step's input projection, [T, G*H, B]: one block per step (the step kernels
        # add the biases), from a contiguous [T, I, B] copy of x (numpy's stacked matmul ran
        # 1.6x faster on it than on the strided view). The LSTM with matmul_fm forms each
        # block inside its loop, just before the step (OpenBLAS repacks W_ih for every step
        # of a stacked matmul: 1.4x matmul_fm's time at I=H=256 T=50); the GRU's from batch
        # 12 come from numpy's stacked matmul. The LSTM kernel turns each block into the
        # step's gate activations in place.
        relayout = T >= RELAYOUT_MIN_T
        fm = _lstm_fm(B, H, w_hh.size, relayout) if lstm else B >= FM_MIN_B
        # the state before each step as batch rows; the LSTM keeps x's rows beside them
        # ([T, B, H + I]: h, then x), so that one product over all steps gives both weight
        # gradients (the kernels read and write the first H columns of each row). Rows of a
        # multiple of 64 floats get 16 more (unused): matmul_tn reads a column block down
        # 256 rows, which at a stride of 4 KB (H = I = 512) all fall in one L1 set (1.5x
        # slower)
        pad = 16 if lstm and (H + I) % 64 == 0 else 0
        hp = np.empty((T, B, H + I + pad if lstm else H), dt)
        if lstm:
            hp[:, :, H:H + I] = xt
        pre = lstm and fm and B >= XPROJ_FM_MIN_B and I >= XPROJ_FM_MIN_I   # all steps' projections first
        if not pre and (fm or (B > 1 and G * H * I < XPROJ_ONE_MIN)):
            xf = np.ascontiguousarray(xt.transpose(0, 2, 1))
            xgt = np.empty((T, G * H, B), dt) if lstm and fm else np.matmul(w_ih, xf)
        else:
            # a few batch columns and a large W_ih: one product over all steps' rows, then
            # each step's block transposed (the stacked matmul's T products with B columns
            # each repack W_ih: 5.5x slower at B=2 T=256 I=512; with a small W_ih the
            # transposed copy costs more than the repacking saves, 2.4x at B=4 H=I=128)
            xf = np.empty((0 if pre else 1, 1, 1), dt)     # (none: the LSTM loop then skips them)
            rows = hp.reshape(T * B, hp.shape[2])[:, H:H + I] if lstm else xt.reshape(T * B, I)
            xgt = np.empty((T, G * H, B), dt)
            if T and B:
                # (the compiled product on a contiguous copy of the rows: 1.1x OpenBLAS's time
                # on the strided view, [1024 x 256] @ [256 x 1024] 92 -> 103 GFLOP/s)
                r = gemm.product(np.ascontiguousarray(rows), w_ih.T).reshape(T, B, G * H)
                np.copyto(xgt, r.transpose(0, 2, 1))
        st = [np.array(s.T, dt, order="C") for s in states]
        act = xgt if lstm else np.empty((T, G * H, B), dt)
        aux = [np.empty((T, H, B), dt) for _ in range(2 if lstm else G - 2)]  # c, tanh(c) | W_hc h + b_hc
        y = np.empty(self.x.shape[:2] + (H,), dt)
        gt = np.empty((G * H, B), dt)
        w_hh, bm = np.ascontiguousarray(w_hh), self.batch_major
        if T:
            hp[order[0], :, :H] = states[0]
        first = order[0] if T and not st[0].any() else None     # W_hh @ 0 is not computed
        nxt = list(order)[1:] + [-1]
        if lstm:
            # [4H, B], the sum of both biases in every column: the kernel's gate activations
            # are then one flat loop per gate (a loop over a row's few batch columns leaves
            # those past the last multiple of 16 scalar)
            bias = np.ascontiguousarray(np.repeat((b_ih + b_hh)[:, None], B, axis=1))
        else:
            b_ih, b_hh = np.ascontiguousarray(b_ih), np.ascontiguousarray(b_hh)
        self.w_t = None
        if lstm and fm and blas_steps(B, w_hh.size):  # a Python loop, numpy's BLAS forming the products
            _lstm_steps_forward(K, np.ascontiguousarray(w_ih), xf, w_hh, bias, order, first, valid, has_mask, st,
                                act, aux, hp, y, gt, bm)
        elif lstm:                         # every step in one compiled call
            w_ih = np.ascontiguousarray(w_ih)
            none = np.empty((0, 0), dt)
            wt = (none, none)
            pan = (np.empty((0, 0, 8), dt),) * 2
            if fm and relayout and panel_forward(B, H):   # matmul_fm_p, on strips of the weights' transposes
                pan = (_panels(K, w_ih, B) if (B > 16 or I >= PANEL_MIN_I) and not pre else pan[0], _panels(K, w_hh, B))
            elif fm and relayout and _cols_left(B, w_hh.size):   # W^T for matmul_fm_t (kept for backward)
                # (gemm.transposed: float32 by 8x8 shuffle blocks, [1792 x 448] 0.4 -> 0.25 ms)
                wt = (transposed(w_ih), transposed(w_hh))
                self.w_t = wt
            K.lstm_forward_loop(w_ih, xf, w_hh, bias, np.array(order, np.int64),
                                -1 if first is None else first, valid, has_mask, st[0], st[1], act, aux[0], aux[1], hp,
                                y, gt, fm, bm, wt[0] if w_ih.size <= COLS_MAX_W else none, wt[1], pan[0], pan[1])
        else:
            elman, relu = G == 1, self.mode == "RNN_RELU"
            bias = b_ih + b_hh if elman else None
            p6 = K.panels6(w_hh) if fm and _gru_elman_p6(B, T, H) else None
            for t, tn in zip(order, nxt):
                if t == first:
                    gt.fill(0)
                elif p6 is not None:
                    K.matmul_p6(p6, st[0], gt)
                elif fm:
                    K.matmul_fm(w_hh, st[0], gt)
                else:                    # on the state saved as batch rows
                    K.matmul_wr(w_hh, hp[t], gt)
                if elman:
                    K.elman_step_forward(gt, xgt, bias, t, tn, valid, has_mask, relu, st[0], act, hp, y, bm)
                else:
                    K.gru_step_forward(gt, xgt, b_ih, b_hh, t, tn, valid, has_mask, st[0], act, aux[0], hp, y, bm)
        self.h0_zero = first is not None
        self.states, self.order, self.valid, self.has_mask = states, order, valid, has_mask
        self.xt, self.act, self.aux, self.hp = xt, act, aux, hp
        return (y,) + tuple(np.ascontiguousarray(s.T) for s in st)

    def _compiled_bwd(self, gy, ghT, gcT):
        from ...tensor import rnn_kernels as K
        T, B, I, H, G = self.geom
        lstm = self.mode == "LSTM"
        dt = self.act.dtype
        has_gy = gy is not None
        gy = np.ascontiguousarray(gy, dt) if has_gy else np.zeros((1, 1, 1), dt)
        dht = np.zeros((H, B), dt) if ghT is None else np.array(ghT.T, dt, order="C")
        sp, tmp = np.empty((G * H, B), dt), np.empty((H, B), dt)
        valid, has_mask, act, aux, order, bm = self.valid, self.has_mask, self.act, self.aux, list(self.order), \
            self.batch_major
        # per step dh = W_hh^T @ dp: rnn_kernels.matmul_fm on a contiguous copy of W_hh^T and
        # the step's feature-major gate gradients where the steps pay for the copy; else
        # numpy's matmul on the view (BLAS reads it transposed while packing)
        kern = T >= BWD_KERNEL_MIN_T
        # the LSTM's loop with matmul_fm leaves the gate gradients feature-major, [T, 4H, B]
        # (written where the step computes them: a transposed copy of each step's block cost
        # 1.4 ms of 6.4 at H=128 T=200); else they are saved as batch rows, [T, B, G*H]
        fmaj = lstm and kern and _lstm_fm(B, H, self.w_hh.size)
        steps = fmaj and blas_steps(B, self.w_hh.size)   # a Python loop, numpy's BLAS forming the products
        # the numpy loop leaves them gate-major over all steps, [4H, T, B] (_lstm_steps_backward)
        dpt = np.empty((G * H, T, B) if steps else (T, G * H, B) if fmaj else (T, B, G * H), dt)
        dxf = None
        w_t = getattr(self, "w_t", None)      # the transposes the LSTM's forward made
        pan = fmaj and not steps and panel_batch(B, H)    # matmul_fm_p's panels of W^T instead of W^T
        whh_p = None
        # the GRU's and Elman RNN's W_hh^T @ dq by matmul_p6 (AVX2, batch 12-63)
        rp6 = not lstm and kern and B >= FM_MIN_B and _gru_elman_p6(B, T, H)
        if pan:
            whh_t = np.empty((0, 0), dt)
        elif rp6 or (steps and _p6(B, T)):
            whh_t, whh_p = None, K.panels6(self.w_hh.T)     # matmul_p6 forms W_hh^T @ dp
        elif steps and self.w_hh.size >= STEPS_ROWS_MIN:
            whh_t = None                     # (dp^T @ W_hh)^T per step, no transposed copy
        elif kern and w_t is not None:
            whh_t = w_t[1]
        elif kern:
            whh_t = transposed(np.ascontiguousarray(self.w_hh))
        else:
            whh_t = self.w_hh.T
        last = 0 if self.needs[1] else 1     # the product of the first step only feeds h0's gradient
        if lstm:
            dct = np.zeros((H, B), dt) if gcT is None else np.array(gcT.T, dt, order="C")
            c0t = np.array(self.states[1].T, dt, order="C")
            cs, tcs = aux
            if kern:                       # every step in one compiled call
                dbs = np.empty((G * H, B), dt)
                need_dx = fmaj and self.needs[0]    # W_ih^T @ dp per step, while dp[t] is in L1
                if need_dx and pan:
                    wih_t, dxf = np.empty((0, 0), dt), np.empty((T, I, B), dt)
                elif need_dx and w_t is not None:
                    wih_t, dxf = w_t[0], np.empty((T, I, B), dt)
                elif need_dx:
                    wih_t, dxf = transposed(np.ascontiguousarray(self.w_ih)), np.empty((T, I, B), dt)
                else:
                    wih_t = np.empty((1, 1), dt)
                # the weights themselves as the transposes of W^T for matmul_fm_t's last columns
                none = np.empty((0, 0), dt)
                wts = (none, none)
                pts = (np.empty((0, 0, 8), dt),) * 2
                if pan:
                    pts = (_panels(K, np.ascontiguousarray(self.w_ih), B, True) if need_dx else pts[0],
                           _panels(K, np.ascontiguousarray(self.w_hh), B, True))
                elif fmaj and _cols_left(B, self.w_hh.size):
                    wts = (np.ascontiguousarray(self.w_ih) if self.w_ih.size <= COLS_MAX_W else none,
                           np.ascontiguousarray(self.w_hh))
                if steps:
                    _lstm_steps_backward(K, gy, has_gy, order, last, valid, has_mask, act, cs, c0t, tcs,
                                         np.ascontiguousarray(self.w_hh), whh_t, dht, tmp, dct, dpt, sp, dbs, wih_t,
                                         dxf, need_dx, bm, whh_p)
                else:
                    K.lstm_backward_loop(gy, has_gy, np.array(order, np.int64), last, valid, has_mask, act, cs, c0t,
                                         tcs, whh_t, dht, tmp, dct, dpt, sp, dbs, wih_t,
                                         dxf if need_dx else np.empty((1, 1, 1), dt), need_dx, fmaj, bm, wts[0],
                                         wts[1], pts[0], pts[1])
            else:
                for k in range(T - 1, -1, -1):
                    t = order[k]
                    K.lstm_step_backward(gy, has_gy, t, valid, has_mask, act, cs[order[k - 1]] if k else c0t, tcs,
                                         dht, dct, dpt, sp, True, bm)
                    if k < last:
                        break
                    _state_grad(self.w_hh, sp, tmp)
                    if has_mask:                  # rows past their length keep their dh
                        np.copyto(tmp, dht, where=~valid[t])
                    dht, tmp = tmp, dht
            dqt = dpt
        else:
            # the gradients of the recurrent side's pre-activations (W_hh @ h + b_hh): the
            # GRU's own, the Elman cell's those of the input side
            elman, relu = G == 1, self.mode == "RNN_RELU"
            dqt, sq = (dpt, sp) if elman else (np.empty((T, B, G * H), dt), np.empty((G * H, B), dt))
            for k in range(T - 1, -1, -1):
                t = order[k]
                if elman:
                    K.elman_step_backward(gy, has_gy, t, valid, has_mask, relu, act, dht, sp, dpt, bm)
                else:
                    K.gru_step_backward(gy, has_gy, t, valid, has_mask, act, aux[0], self.hp, dht, sp, sq, dpt, dqt,
                                        bm)
                if k < last:
                    break
                if rp6:
                    K.matmul_p6(whh_p, sq, tmp)
                elif kern and B >= FM_MIN_B:
                    K.matmul_fm(whh_t, sq, tmp)
                elif kern:
                    K.matmul_wr(whh_t, dqt[t], tmp)
                else:
                    _state_grad(self.w_hh, sq, tmp)
                dht += tmp
        # every input's gradient with one product over all steps
        needs = self.needs
        out = [None] * len(needs)
        # the rows [T*B, G*H] (not where the numpy loop left them gate-major: it formed x's
        # gradient and the bias sums itself)
        dp, dq = (None, None) if steps else (dpt.reshape(T * B, G * H), dqt.reshape(T * B, G * H))
        if needs[0] and dxf is not None:     # [T, I, B] from the loop
            out[0] = np.ascontiguousarray(dxf.transpose(2, 0, 1) if bm else dxf.transpose(0, 2, 1))
        elif needs[0]:
            dx = gemm.product(dp, self.w_ih).reshape(T, B, I)
            out[0] = np.ascontiguousarray(dx.transpose(1, 0, 2)) if bm else dx
        out[1] = np.ascontiguousarray(dht.T) if needs[1] else None
        if lstm and needs[2]:
            out[2] = np.ascontiguousarray(dct.T)
        k = 3 if lstm else 2
        if lstm:
            self._lstm_weight_grads(dpt, fmaj, out, k, gate_major=steps)
        elif needs[k]:                        # time-major rows of x (a copy when x is batch-major)
            out[k] = self._weight_grad(k, dp, self.xt.reshape(T * B, I))
        if needs[k + 1] and not lstm:
            dqs, hp = dq, self.hp.reshape(T * B, H)
            if self.h0_zero:                  # the step whose previous state is h0 = 0 adds nothing
                rows = slice(0, (T - 1) * B) if self.reverse else slice(B, T * B)
                dqs, hp = dq[rows], hp[rows]
            out[k + 1] = self._weight_grad(k + 1, dqs, hp)
        if needs[k + 2] or needs[k + 3]:
            ones = np.ones(T * B, dt)        # column sums as BLAS gemv: faster than numpy's sum(axis=0)
            if lstm:                         # one bias gradient for both, the loop's per-step sums if it ran
                db = dbs.sum(axis=1) if kern else ones @ dp
                out[k + 2] = db if needs[k + 2] else None
                out[k + 3] = (db.copy() if needs[k + 2] else db) if needs[k + 3] else None
            else:
                out[k + 2] = ones @ dp if needs[k + 2] else None
                out[k + 3] = ones @ dq if needs[k + 3] else None
        return tuple(out)

    def _weight_grad(self, i, a, b):
        """Input i's weight gradient ``a.T @ b``, added by the compiled product into the
        array ``grad_sink`` hands out (a .grad, or the sum of a cell loop's earlier steps),
        then ``IN_GRAD``; else a new array."""
        into = grad_sink(self, i)
        if into is None:
            return _tn(a, b)
        got = gemm.weight_grads(a, b, False, into)
        if got is None:
            into += _tn(a, b)
        elif got[0] is not into:
            into += got[0]
        return IN_GRAD

    def _lstm_weight_grads(self, dpt, fmaj, out, k, gate_major=False):
        """``dW_hh`` and ``dW_ih`` (into ``out[k + 1]``, ``out[k]``, where needed) from the
        gate gradients ``dpt`` (``[4H, T, B]`` where ``gate_major``, the numpy loop's; else
        ``[T, 4H, B]`` where ``fmaj``, else ``[T, B, 4H]``) and the
        saved rows ``[h_prev | x]`` (``[T*B, H + I]``) in one pass over all steps,
        ``dp^T @ [h_prev | x]`` by ``rnn_kernels.matmul_tn`` (0.95x OpenBLAS's two products
        at H=128 T=200, 0.94x at H=256 T=50, with AVX-512); without AVX-512 (``gemm.ENABLED``
        off), from ``TN_BLAS_MIN_OUT`` elements on, by numpy's two products instead."""
        from ...tensor import rnn_kernels as K
        T, B, I, H, G = self.geom
        needs = self.needs
        if not (needs[k] or needs[k + 1]):
            return
        dt = dpt.dtype
        hx = self.hp.reshape(T * B, self.hp.shape[2])      # [h_prev | x | padding]
        steps, first = slice(0, T), None
        if self.h0_zero and needs[k + 1] and T:   # the step whose previous state is h0 = 0 adds nothing to dW_hh
            first = T - 1 if self.reverse else 0
            steps = slice(0, T - 1) if self.reverse else slice(1, T)
        # added straight into the weights' gradient arrays where the engine hands out both
        # (grad_sink: a .grad, or the sum of a cell loop's earlier steps), else new arrays
        sinks = [grad_sink(self, i) if needs[i] else None for i in (k, k + 1)]
        add = all(a is not None and a.dtype == dt for a, need in zip(sinks, needs[k:k + 2]) if need)
        dw_ih, dw_hh = ((a if add and need else np.empty((G * H, n if need else 0), dt))
                        for a, need, n in zip(sinks, needs[k:k + 2], (I, H)))
        rows = hx[steps.start * B:steps.stop * B]
        if not gate_major and (gemm.ENABLED or G * H * (H + I) < TN_BLAS_MIN_OUT):
            K.matmul_tn(dpt[steps], fmaj, rows, dw_hh, H, dw_ih, add)
        else:   # OpenBLAS's two products (dp^T contiguous: one copy where feature-major, none gate-major)
            d = dpt[:, steps] if gate_major else dpt[steps]
            if gate_major:
                dpt_t = d.reshape(G * H, rows.shape[0])
            elif not fmaj:
                dpt_t = d.reshape(rows.shape[0], G * H).T
            elif SWAP_KERNEL:
                dpt_t = np.empty((G * H, d.shape[0], B), dt)
                K.swap_leading(d, dpt_t)
                dpt_t = dpt_t.reshape(G * H, rows.shape[0])
            else:
                dpt_t = d.transpose(1, 0, 2).reshape(G * H, rows.shape[0])
            for need, dw, cols in ((needs[k + 1], dw_hh, slice(0, H)), (needs[k], dw_ih, slice(H, H + I))):
                if need and add:
                    if not gemm.blas_add_product(dpt_t, rows[:, cols], dw):
                        dw += dpt_t @ rows[:, cols]
                elif need:
                    np.matmul(dpt_t, rows[:, cols], out=dw)
        if needs[k] and first is not None:
            g = dpt[:, first] if gate_major else dpt[first] if fmaj else dpt[first].T     # [4H, B]
            dw_ih += g @ hx[first * B:(first + 1) * B, H:H + I]
        out[k] = (IN_GRAD if add else dw_ih) if needs[k] else None
        out[k + 1] = (IN_GRAD if add else dw_hh) if needs[k + 1] else None

    # -- layout helpers: buffers are laid out like x (batch-major or time-major) and indexed by time
    def _tm(self, a):
        """Array ``a`` in x's layout as a time-major view."""
        return a.transpose(1, 0, 2) if self.batch_major else a

    _xl = _tm   # and back (the transpose is its own inverse)

    def _buf(self, xp, T, B, K, dt):
        """A fresh ``[T, B, K]`` time-major view of a buffer laid out like x."""
        return xp.empty((B, T, K), dt).transpose(1, 0, 2) if self.batch_major else xp.empty((T, B, K), dt)

    def _masks(self, xp, T, B, dt):
        """Per step, None when every row is valid, else the [B, 1] float mask (1 = valid)."""
        if self.lengths is None:
            return [None] * T
        lens = np.asarray(self.lengths).reshape(-1)             # host array (given by the layer)
        if lens.shape[0] != B:
            raise ValueError(f"RNNSequence: {lens.shape[0]} sequence lengths for a batch of {B}")
        valid = np.arange(T)[:, None] < lens[None, :]              # [T, B]
        full = valid.all(axis=1).tolist()
        m = xp.asarray(valid.astype(dt)[:, :, None])
        return [None if full[t] else m[t] for t in range(T)]

    @staticmethod
    def _carry(new, old, m):
        """``new`` where the row is valid (m = 1), ``old`` elsewhere, in place into ``new``."""
        new -= old
        new *= m
        new += old

    def _elman_fwd(self, xp, xg, states, w_hh, b_hh, order, keep, T, B, H, dt):
        relu = self.mode == "RNN_RELU"
        whh_t = w_hh.T
        S = self._buf(xp, T, B, H, dt)          # state after each step
        h = states[0]
        for t in order:
            st = S[t]
            xp.matmul(h, whh_t, out=st)
            st += xg[t]
            if relu:
                xp.maximum(st, 0, out=st)
            else:
                xp.tanh(st, out=st)
            if keep[t] is not None:
                self._carry(st, h, keep[t])
            h = st
        return S, (h,)

    def _lstm_fwd(self, xp, xg, states, w_hh, b_hh, order, keep, T, B, H, dt):
        s = xp.full(4 * H, 0.5, dtype=dt)        # column scale: 1/2 on the sigmoid gates (i, f, o)
        s[2 * H:3 * H] = 1.0
        one_minus_s = 1 - s
        whh_s = (w_hh * s[:, None]).T            # [H, 4H] (a view), scaled once per call
        xg *= s                                  # the projections of all steps, scaled in one pass
        A = self._buf(xp, T, B, 4 * H, dt)       # gate activations (i, f, g, o)
        C = self._buf(xp, T, B, H, dt)           # cell state after each step
        TC = self._buf(xp, T, B, H, dt)          # tanh(c)
        S = self._buf(xp, T, B, H, dt)           # hidden state after each step
        tmp = xp.empty((B, H), dt)
        h, c = states
        for t in order:
            a = A[t]
            xp.matmul(h, whh_s, out=a)
            a += xg[t]
            xp.tanh(a, out=a)
            a *= s
            a += one_minus_s
            ct, tc, ht = C[t], TC[t], S[t]
            xp.multiply(a[:, H:2 * H], c, out=ct)
            xp.multiply(a[:, :H], a[:, 2 * H:3 * H], out=tmp)
            ct += tmp
            xp.tanh(ct, out=tc)
            xp.multiply(a[:, 3 * H:], tc, out=ht)
            if keep[t] is not None:
                self._carry(ct, c, keep[t])
                self._carry(ht, h, keep[t])
            h, c = ht, ct
        self.A, self.C, self.TC = A, C, TC
        return S, (h, c)

    def _gru_fwd(self, xp, xg, states, w_hh, b_hh, order, keep, T, B, H, dt):
        s = xp.full(3 * H, 0.5, dtype=dt)        # column scale: 1/2 on the sigmoid gates (r, z)
        s[2 * H:] = 1.0
        whh_s = (w_hh * s[:, None]).T
        bhh_s = b_hh * s
        xg *= s
        HG = self._buf(xp, T, B, 3 * H, dt)      # h @ W_hh^T + b_hh (scaled on r, z)
        RZ = self._buf(xp, T, B, 2 * H, dt)      # r, z
        CC = self._buf(xp, T, B, H, dt)          # candidate c
        S = self._buf(xp, T, B, H, dt)
        h = states[0]
        for t in order:
            hg, rz, c, ht, xt = HG[t], RZ[t], CC[t], S[t], xg[t]
            xp.matmul(h, whh_s, out=hg)
            hg += bhh_s
            xp.add(xt[:, :2 * H], hg[:, :2 * H], out=rz)
            xp.tanh(rz, out=rz)
            rz *= 0.5
            rz += 0.5
            xp.multiply(rz[:, :H], hg[:, 2 * H:], out=c)
            c += xt[:, 2 * H:]
            xp.tanh(c, out=c)
            xp.subtract(h, c, out=ht)
            ht *= rz[:, H:]
            ht += c
            if keep[t] is not None:
                self._carry(ht, h, keep[t])
            h = ht
        self.HG, self.RZ, self.CC = HG, RZ, CC
        return S, (h,)

    # -- backward ------------------------------------------------------------------------------------
    def backward(self, grads):
        if self.proj:
            return self._proj_backward(*grads)
        lstm = self.mode == "LSTM"
        gy, ghT = grads[0], grads[1]
        gcT = grads[2] if lstm else None
        T, B, I, H, G = self.geom
        if self.one is not None:
            return self._elman_one_bwd(gy, ghT)
        if self.compiled:
            return self._compiled_bwd(gy, ghT, gcT)
        S = self.S
        xp = backend.get_array_module(S)
        dt = S.dtype
        gy = None if gy is None else self._tm(gy.astype(dt, copy=False))
        dh = xp.zeros((B, H), dt) if ghT is None else ghT.astype(dt, copy=True)
        order = list(self.order)
        # the state before each step, laid out like x
        hprev = self._buf(xp, T, B, H, dt)
        if T:
            hprev[order[0]] = self.states[0]
        if self.reverse:
            hprev[:-1] = S[1:]
        else:
            hprev[1:] = S[:-1]
        dc = None
        if lstm:
            dc = xp.zeros((B, H), dt) if gcT is None else gcT.astype(dt, copy=True)
            dP, dh, dc = self._lstm_bwd(xp, gy, dh, dc, hprev, order, T, B, H, dt)
            dHG = dP
        elif self.mode == "GRU":
            dP, dHG, dh = self._gru_bwd(xp, gy, dh, hprev, order, T, B, H, dt)
        else:
            dP, dh = self._elman_bwd(xp, gy, dh, order, T, B, H, dt)
            dHG = dP
        return self._weight_grads(dP, dHG, hprev, dh, dc)

    def _weight_grads(self, dP, dHG, hprev, dh, dc):
        """Every input's gradient from the time-major views ``dP`` (input-side
        pre-activations), ``dHG`` (recurrent side) and ``hprev`` of buffers laid out like x,
        and the initial states' gradients ``dh``, ``dc``: one product over all steps each."""
        T, B, I, H, G = self.geom
        x, w_ih = self.x, self.w_ih
        lstm = self.mode == "LSTM"
        needs = self.needs
        n_state = 2 if lstm else 1
        out = [None] * len(needs)
        dPm = self._xl(dP).reshape(-1, G * H)
        if needs[0]:
            out[0] = (dPm @ w_ih).reshape(x.shape)
        out[1] = dh if needs[1] else None
        if lstm:
            out[2] = dc if needs[2] else None
        k = 1 + n_state
        if needs[k]:
            out[k] = _tn(dPm, x.reshape(-1, I))
        dHm = dPm if dHG is dP else self._xl(dHG).reshape(-1, G * H)
        if needs[k + 1]:
            out[k + 1] = _tn(dHm, self._xl(hprev).reshape(-1, H))
        if needs[k + 2]:
            out[k + 2] = dPm.sum(axis=0)
        if needs[k + 3]:
            out[k + 3] = dHm.sum(axis=0)
        return tuple(out)

    def _step_grad(self, gy, dh, t):
        """The hidden-state gradient at step t: the carried one plus the output's."""
        if gy is None:
            return dh
        m = self.keep[t]
        return dh + gy[t] if m is None else dh + gy[t] * m

    def _elman_bwd(self, xp, gy, dh, order, T, B, H, dt):
        S = self.S
        if self.mode == "RNN_RELU":
            D = (S > 0).astype(dt)
        else:
            D = 1 - S * S
        dP = self._buf(xp, T, B, H, dt)
        for t in reversed(order):
            g = self._step_grad(gy, dh, t)
            p = dP[t]
            xp.multiply(g, D[t], out=p)
            m = self.keep[t]
            if m is not None:
                p *= m
            dh = p @ self.w_hh
            if m is not None:
                dh += g * (1 - m)
        return dP, dh

    def _lstm_bwd(self, xp, gy, dh, dc, hprev, order, T, B, H, dt):
        A, C, TC = self.A, self.C, self.TC
        ai, af, ag, ao = A[:, :, :H], A[:, :, H:2 * H], A[:, :, 2 * H:3 * H], A[:, :, 3 * H:]
        # whole-sequence factors, so that each step's gate gradients are two products:
        # (di, df, dg) = dc * Q with Q = (g * i(1-i), c_prev * f(1-f), i * (1-g^2)) and
        # do = dh * tanh(c) * o(1-o); dh reaches dc through OT = o * (1 - tanh(c)^2)
        cprev = self._buf(xp, T, B, H, dt)
        if T:
            cprev[order[0]] = self.states[1]
        if self.reverse:
            cprev[:-1] = C[1:]
        else:
            cprev[1:] = C[:-1]
        Q = self._buf(xp, T, B, 3 * H, dt)
        xp.multiply(ag, ai * (1 - ai), out=Q[:, :, :H])
        xp.multiply(cprev, af * (1 - af), out=Q[:, :, H:2 * H])
        xp.multiply(ai, 1 - ag * ag, out=Q[:, :, 2 * H:])
        TCD = TC * ao * (1 - ao)
        OT = ao * (1 - TC * TC)
        dP = self._buf(xp, T, B, 4 * H, dt)
        for t in reversed(order):
            g = self._step_grad(gy, dh, t)
            p = dP[t]
            xp.multiply(g, TCD[t], out=p[:, 3 * H:])                                     # do
            dct = g * OT[t]
            dct += dc
            xp.multiply(dct[:, None, :], Q[t].reshape(B, 3, H), out=p[:, :3 * H].reshape(B, 3, H))  # di, df, dg
            m = self.keep[t]
            if m is None:
                dc = dct * af[t]
                dh = p @ self.w_hh
            else:
                p *= m
                nm = 1 - m
                dc_new = dct * af[t]
                dc_new *= m
                dc_new += dc * nm
                dc = dc_new
                dh_new = p @ self.w_hh
                dh_new += g * nm
                dh = dh_new
        return dP, dh, dc

    def _gru_bwd(self, xp, gy, dh, hprev, order, T, B, H, dt):
        HG, RZ, CC = self.HG, self.RZ, self.CC
        Drz = RZ * (1 - RZ)
        Dc = 1 - CC * CC
        dP = self._buf(xp, T, B, 3 * H, dt)      # gradient of the input-side pre-activations
        dHG = self._buf(xp, T, B, 3 * H, dt)     # ... and of h @ W_hh^T + b_hh
        for t in reversed(order):
            g = self._step_grad(gy, dh, t)
            rz, c, p, q = RZ[t], CC[t], dP[t], dHG[t]
            xp.subtract(hprev[t], c, out=p[:, H:2 * H])
            p[:, H:2 * H] *= g                                     # dz
            dhz = g * rz[:, H:]                                    # through h = z * h_prev + ...
            dcc = g - dhz                                          # (1 - z) * g
            xp.multiply(dcc, Dc[t], out=p[:, 2 * H:])              # d(candidate pre-activation)
            xp.multiply(p[:, 2 * H:], HG[t][:, 2 * H:], out=p[:, :H])   # dr
            p[:, :2 * H] *= Drz[t]
            m = self.keep[t]
            if m is not None:
                p *= m
            q[:, :2 * H] = p[:, :2 * H]
            xp.multiply(p[:, 2 * H:], rz[:, :H], out=q[:, 2 * H:])
            dh = q @ self.w_hh
            if m is None:
                dh += dhz
            else:
                dhz *= m
                dh += dhz
                dh += g * (1 - m)
        return dP, dHG, dh

    # -- higher-order gradients ------------------------------------------------------------------
    def backward_graph(self, grads):
        # the sequence recomputed with ordinary ops on the op's inputs (as graph Tensors), and
        # its vector-Jacobian product recorded by the engine itself
        from ..engine import grad as _grad
        from ..grad_mode import enable_grad
        arrays = (self.x,) + tuple(self.states) + (self.w_ih, self.w_hh, self.b_ih, self.b_hh) + \
            ((self.w_ho,) if self.proj else ())
        ins = [live_input(self, i, a) for i, a in enumerate(arrays)]
        with enable_grad():
            outs = self.composite(*ins)
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None]
        targets = [t for t, need in zip(ins, self.needs) if need]
        if not pairs:
            return tuple(None for _ in self.needs)
        got = iter(_grad([o for o, _ in pairs], targets, [g for _, g in pairs], create_graph=True,
                         allow_unused=True))
        return tuple(next(got) if need else None for need in self.needs)

    def composite(self, *inputs):
        """The same sequence written with ordinary ddg ops (``composite.rnn_sequence``)."""
        from ..composite import rnn_sequence
        return rnn_sequence(self, *inputs)
