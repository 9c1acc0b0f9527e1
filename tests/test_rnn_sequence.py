"""The whole-sequence recurrent op (ops.rnn.RNNSequence): forward against a float64 numpy
reference, backward against central differences and second derivatives through its
backward_graph, for every mode, direction, layout and with sequence lengths; the layers
(LSTM, GRU, SimpleRNN, cells, bidirectional, multi-layer) against the per-step graph."""
import itertools

import numpy as np
import pytest

import ddg
from ddg import nn
from ddg.autograd.gradcheck import gradcheck, gradgradcheck
from ddg.autograd.ops.rnn import RNNSequence

MODES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _sig(v):
    return 1 / (1 + np.exp(-v))


def reference(mode, reverse, x, states, w_ih, w_hh, b_ih, b_hh, lengths=None):
    """Time-major numpy float64 loop: (y [T, B, H], final states)."""
    T, B, _ = x.shape
    H = w_hh.shape[1]
    h = states[0].copy()
    c = states[1].copy() if mode == "LSTM" else None
    y = np.zeros((T, B, H))
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        gx, gh = x[t] @ w_ih.T + b_ih, h @ w_hh.T + b_hh
        if mode == "LSTM":
            i, f, g, o = np.split(gx + gh, 4, axis=1)
            cn = _sig(f) * c + _sig(i) * np.tanh(g)
            hn = _sig(o) * np.tanh(cn)
        elif mode == "GRU":
            r = _sig(gx[:, :H] + gh[:, :H])
            z = _sig(gx[:, H:2 * H] + gh[:, H:2 * H])
            cand = np.tanh(gx[:, 2 * H:] + r * gh[:, 2 * H:])
            hn = z * h + (1 - z) * cand
        else:
            pre = gx + gh
            hn = np.maximum(pre, 0) if mode == "RNN_RELU" else np.tanh(pre)
        valid = np.ones(B, bool) if lengths is None else t < np.asarray(lengths)
        h = np.where(valid[:, None], hn, h)
        if c is not None:
            c = np.where(valid[:, None], cn, c)
        y[t] = np.where(valid[:, None], hn, 0)
    return y, (h, c) if c is not None else (h,)


def _arrays(rng, mode, T, B, I, H, batch_major):
    G = MODES[mode]
    n_state = 2 if mode == "LSTM" else 1
    x = rng.standard_normal((B, T, I) if batch_major else (T, B, I))
    states = [rng.standard_normal((B, H)) * 0.5 for _ in range(n_state)]
    ws = [rng.standard_normal((G * H, I)) * 0.6, rng.standard_normal((G * H, H)) * 0.6,
          rng.standard_normal(G * H) * 0.3, rng.standard_normal(G * H) * 0.3]
    return [x] + states + ws


CASES = list(itertools.product(MODES, (False, True), (False, True), (None, (4, 1, 3))))


@pytest.mark.parametrize("mode,reverse,batch_major,lengths", CASES)
def test_forward_matches_numpy_float64(mode, reverse, batch_major, lengths):
    rng = np.random.default_rng(1)
    arrs = _arrays(rng, mode, 4, 3, 5, 3, batch_major)
    outs = RNNSequence(mode, reverse, batch_major, None if lengths is None else np.array(lengths))(
        *[ddg.to_tensor(a) for a in arrs])
    x = arrs[0].transpose(1, 0, 2) if batch_major else arrs[0]
    n_state = 2 if mode == "LSTM" else 1
    y, fin = reference(mode, reverse, x, arrs[1:1 + n_state], *arrs[1 + n_state:], lengths=lengths)
    if batch_major:
        y = y.transpose(1, 0, 2)
    np.testing.assert_allclose(outs[0].numpy(), y, rtol=1e-12, atol=1e-12)
    for got, want in zip(outs[1:], fin):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def _flat_outputs(op_args):
    mode, reverse, batch_major, lengths = op_args

    def f(*ts):
        outs = RNNSequence(mode, reverse, batch_major, lengths)(*ts)
        return ddg.concat([o.flatten() for o in outs])
    return f


@pytest.mark.parametrize("mode,reverse,batch_major,lengths", CASES)
def test_backward_matches_central_differences(mode, reverse, batch_major, lengths):
    rng = np.random.default_rng(2)
    lens = None if lengths is None else np.array(lengths)
    ts = [ddg.to_tensor(a, stop_gradient=False) for a in _arrays(rng, mode, 4, 3, 2, 2, batch_major)]
    assert gradcheck(_flat_outputs((mode, reverse, batch_major, lens)), ts, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("mode", list(MODES))
def test_second_derivatives(mode):
    rng = np.random.default_rng(3)
    ts = [ddg.to_tensor(a, stop_gradient=False) for a in _arrays(rng, mode, 3, 2, 2, 2, True)]
    assert gradgradcheck(_flat_outputs((mode, True, True, np.array([3, 2]))), ts, atol=1e-5, rtol=1e-4)


def test_only_some_outputs_and_inputs_differentiated():
    rng = np.random.default_rng(4)
    arrs = _arrays(rng, "LSTM", 3, 2, 3, 2, False)
    ts = [ddg.to_tensor(a, stop_gradient=i not in (0, 4)) for i, a in enumerate(arrs)]
    y, h, c = RNNSequence("LSTM")(*ts)
    c.sum().backward()         # y and h get no gradient
    ref = [ddg.to_tensor(a, stop_gradient=i not in (0, 4)) for i, a in enumerate(arrs)]
    RNNSequence("LSTM").composite(*ref)[2].sum().backward()
    for i in (0, 4):
        np.testing.assert_allclose(ts[i].grad.numpy(), ref[i].grad.numpy(), rtol=1e-12, atol=1e-12)
    assert ts[1].grad is None


def test_bad_shapes_name_the_op_and_shapes():
    rng = np.random.default_rng(5)
    arrs = _arrays(rng, "GRU", 3, 2, 3, 2, False)
    arrs[2] = arrs[2][:, :2]
    with pytest.raises(ValueError, match=r"RNNSequence\(GRU\).*w_ih \[6, 3\]"):
        RNNSequence("GRU")(*[ddg.to_tensor(a) for a in arrs])
    with pytest.raises(ValueError, match="mode must be one of"):
        RNNSequence("LSTMX")


# -- the layers against the per-step graph ------------------------------------------------------------------
def _per_step(layer_fn, monkeypatch):
    """Run ``layer_fn`` with every built-in cell forced onto the per-step composite."""
    from ddg.nn.layer import rnn as R
    for cls in (R.LSTMCell, R.GRUCell, R.SimpleRNNCell):
        monkeypatch.setattr(cls, "_seq_mode", lambda self: None)
    try:
        return layer_fn()
    finally:
        monkeypatch.undo()


LAYERS = [
    ("lstm", lambda: nn.LSTM(4, 3, num_layers=2, direction="bidirect")),
    ("gru", lambda: nn.GRU(4, 3, num_layers=2, time_major=True)),
    ("rnn_relu", lambda: nn.SimpleRNN(4, 3, activation="relu", direction="bidirectional")),
    ("rnn_tanh", lambda: nn.SimpleRNN(4, 3, num_layers=3)),
]


@pytest.mark.parametrize("name,make", LAYERS)
@pytest.mark.parametrize("with_lengths", [False, True])
def test_layers_match_per_step_graph(name, make, with_lengths, monkeypatch):
    ddg.seed(7)
    net = make()
    net.to(dtype="float64")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 3, 4) if net.time_major else (3, 5, 4))   # time 5, batch 3
    lens = ddg.to_tensor(np.array([5, 2, 4])) if with_lengths else None

    def run():
        xt = ddg.to_tensor(x, stop_gradient=False)
        out, st = net(xt, sequence_length=lens)
        st = [st] if not isinstance(st, tuple) else list(st)
        loss = (out * out).sum() + sum((s * s * 0.5).sum() for s in st)
        for p in net.parameters():
            p.clear_gradient()
        loss.backward()
        return [out.numpy()] + [s.numpy() for s in st] + [xt.grad.numpy()] + \
            [p.grad.numpy() for p in net.parameters()]

    fused = run()
    stepwise = _per_step(run, monkeypatch)
    for a, b in zip(fused, stepwise):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("batch", [1, 2])     # batch 1: the weight gradients as outer products
@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell, nn.SimpleRNNCell])
def test_cells_match_per_step_graph(cls, batch, monkeypatch):
    ddg.seed(8)
    cell = cls(4, 3)
    cell.to(dtype="float64")
    x = np.random.default_rng(7).standard_normal((batch, 4))

    def run():
        xt = ddg.to_tensor(x, stop_gradient=False)
        out, st = cell(xt)
        st = list(st) if isinstance(st, tuple) else [st]
        loss = (out * 2).sum() + sum((s * s).sum() for s in st)
        for p in cell.parameters():
            p.clear_gradient()
        loss.backward()
        return [out.numpy(), xt.grad.numpy()] + [p.grad.numpy() for p in cell.parameters()]

    fused = run()
    stepwise = _per_step(run, monkeypatch)
    for a, b in zip(fused, stepwise):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_float32_layer_close_to_float64():
    ddg.seed(9)
    net = nn.LSTM(6, 5, direction="bidirect")
    x = np.random.default_rng(8).standard_normal((3, 7, 6)).astype(np.float32)
    out32 = net(ddg.to_tensor(x))[0].numpy()
    net.to(dtype="float64")
    out64 = net(ddg.to_tensor(x.astype(np.float64)))[0].numpy()
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, out64, rtol=1e-5, atol=1e-6)


# -- the compiled float32 loops (ddg.tensor.rnn_kernels): LSTM, GRU, Elman ---------------------------------------------
def test_compiled_tanh_within_a_few_ulp_of_float64():
    from ddg.tensor import rnn_kernels
    x = np.concatenate([np.linspace(-12, 12, 200001), [0.0, -0.0, 1e-30, -1e-8, 3e-4, 40.0, -40.0]]).astype(np.float32)
    got = np.empty_like(x)
    rnn_kernels.tanh_f32(x, got)
    want = np.tanh(x.astype(np.float64))
    err = np.abs(got - want)
    assert err.max() <= 3e-7                                     # 5 float32 ulps of values near 1
    small = np.abs(x) < 0.5
    assert (err[small] <= 4 * np.finfo(np.float32).eps * np.abs(want[small]) + 1e-38).all()
    assert np.abs(got).max() <= 1.0
    nan = np.array([np.nan, np.inf, -np.inf], np.float32)
    out = np.empty_like(nan)
    rnn_kernels.tanh_f32(nan, out)
    assert np.isnan(out[0]) and out[1] == 1 and out[2] == -1


def _atol(mode):
    """The float32 loops' tolerance, times the reference's largest magnitude + 1. The Elman
    cell has no gates: with these weights (W_hh's spectral radius ~2.7 at H = 21) a rounding
    error grows through the steps, and numpy's own float32 path is already 2.2e-6 off."""
    return 1e-5 if mode.startswith("RNN") else 2e-6


def _set_fm_min_b(monkeypatch, b):
    """The batch size from which the compiled loops take matmul_fm, for LSTM and GRU."""
    from ddg.autograd.ops import rnn
    monkeypatch.setattr(rnn, "FM_MIN_B", b)
    monkeypatch.setattr(rnn, "LSTM_FM_MIN_B", b)
    monkeypatch.setattr(rnn, "LSTM_FM_BATCHES", ())


def _seq_run(mode, arrs, dtype, reverse, batch_major, lengths):
    """Outputs and every input's gradient of one sequence op under a fixed loss."""
    ts = [ddg.to_tensor(a.astype(dtype), stop_gradient=False) for a in arrs]
    outs = RNNSequence(mode, reverse, batch_major, lengths)(*ts)
    sum(((o * o) * (i + 1)).sum() for i, o in enumerate(outs)).backward()
    return [o.numpy() for o in outs] + [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("mode,reverse,batch_major,lengths", list(itertools.product(
    ("LSTM", "GRU", "RNN_TANH", "RNN_RELU"), (False, True), (False, True), (None, (5, 1, 3, 5)))))
def test_compiled_loops_match_float64_and_numpy_path(mode, reverse, batch_major, lengths, monkeypatch):
    from ddg.autograd.ops import rnn
    rng = np.random.default_rng(10)
    arrs = _arrays(rng, mode, 5, 4, 3, 6, batch_major)
    lens = None if lengths is None else np.array(lengths)
    got = _seq_run(mode, arrs, np.float32, reverse, batch_major, lens)          # compiled loops
    ref = _seq_run(mode, arrs, np.float64, reverse, batch_major, lens)          # numpy path, float64
    monkeypatch.setattr(rnn, "COMPILED", set())
    numpy32 = _seq_run(mode, arrs, np.float32, reverse, batch_major, lens)      # numpy path, float32
    for g, r, n in zip(got, ref, numpy32):
        assert g.dtype == np.float32 and g.shape == r.shape
        scale = np.abs(r).max() + 1
        np.testing.assert_allclose(g, r, rtol=0, atol=_atol(mode) * scale)
        np.testing.assert_allclose(g, n, rtol=0, atol=_atol(mode) * scale)
    if lengths is not None:                # outputs past a row's length are zero
        y = got[0] if batch_major else got[0].transpose(1, 0, 2)
        assert not y[1, 1:].any() and not y[2, 3:].any()


@pytest.mark.parametrize("m,k,b", [
    (3072, 300, 48), (4096, 130, 40), (28, 7, 5), (29, 13, 17), (7, 3, 1), (100, 200, 25), (6, 1, 16),
    (13, 300, 9), (512, 64, 33), (12, 129, 31), (5, 2, 64), (6, 0, 4)])
def test_six_row_panel_product(m, k, b):
    """``rnn_kernels.matmul_p6`` (the numpy loop's W_hh products on AVX2) against float64:
    whole 16-column blocks, a last block of 9-15 (masked 6x16 tile) or 1-8 columns (8 lanes),
    k in several ``P6_KB`` blocks or one, fewer than 6 rows left past the whole panels, no k;
    the panels from a weight or from its transposed view."""
    from ddg.tensor import rnn_kernels
    rng = np.random.default_rng(m * 131 + k * 7 + b)
    w = rng.standard_normal((m, k)).astype(np.float32)
    x = rng.standard_normal((k, b)).astype(np.float32)
    want = w.astype(np.float64) @ x
    tol = 1e-6 * (np.abs(w).astype(np.float64) @ np.abs(x)).max(initial=0) + 1e-30
    for ap in (rnn_kernels.panels6(w), rnn_kernels.panels6(np.ascontiguousarray(w.T).T)):
        assert ap.shape == (-(-m // 6), k, 6)
        out = np.full((m, b), np.nan, np.float32)
        rnn_kernels.matmul_p6(ap, x, out)
        assert np.abs(out - want).max(initial=0) <= tol


@pytest.mark.parametrize("m,k", [(200, 130), (6, 1), (7, 64), (5, 3), (97, 65), (12, 0), (0, 4), (192, 300)])
def test_six_row_panels_of_every_layout(m, k):
    """``rnn_kernels.panels6``: ``ap[p, k, r] = a[6p + r, k]``, zeros past a's rows, bit for
    bit, from a C-contiguous array, from the transpose of one (tiles of PACK6_K rows x
    PACK6_P panels of it, with parts of both left over), from a strided view and from a
    float64 one (float32 panels)."""
    from ddg.tensor import rnn_kernels
    a = np.random.default_rng(m + 7 * k).standard_normal((m, k)).astype(np.float32)
    P = -(-m // 6)
    want = np.zeros((P * 6, k), np.float32)
    want[:m] = a
    want = want.reshape(P, 6, k).transpose(0, 2, 1)
    wide = np.zeros((m, 2 * k), np.float32)
    wide[:, ::2] = a
    for view in (a, np.ascontiguousarray(a.T).T, wide[:, ::2], np.ascontiguousarray(a.T, np.float64).T):
        got = rnn_kernels.panels6(view)
        assert got.shape == (P, k, 6) and got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


def test_compiled_recurrent_product_and_transpose():
    from ddg.tensor import rnn_kernels
    rng = np.random.default_rng(14)
    # whole 8x16 tiles, and the rows (one at a time) and columns (8, 4, 1 at a time) they leave,
    # a last block of 17-24 columns (24 unmasked, fewer masked);
    # matmul_tn's two outputs (either may have no columns) over more rows than one pass, the
    # gate gradients as batch rows [T, B, M] or feature-major [T, M, B]
    for t, bt, m, n in ((5, 4, 24, 37), (75, 4, 17, 5), (40, 15, 43, 70), (0, 8, 8, 4)):
        a = rng.standard_normal((t, bt, m)).astype(np.float32)
        x = rng.standard_normal((t * bt, n + 3)).astype(np.float32)
        a2 = a.reshape(t * bt, m).astype(np.float64)
        for n1 in (0, n // 2, n):
            for fmaj, arr in ((False, a), (True, np.ascontiguousarray(a.transpose(0, 2, 1)))):
                o1, o2 = np.full((m, n1), np.nan, np.float32), np.full((m, n - n1), np.nan, np.float32)
                rnn_kernels.matmul_tn(arr, fmaj, x, o1, n1 + 3, o2, False)
                base = [rng.standard_normal(o.shape).astype(np.float32) for o in (o1, o2)]
                a1, a2_ = base[0].copy(), base[1].copy()      # add: the products added into them
                rnn_kernels.matmul_tn(arr, fmaj, x, a1, n1 + 3, a2_, True)
                for o, added, b0, c in ((o1, a1, base[0], 0), (o2, a2_, base[1], n1 + 3)):
                    want = a2.T @ x[:, c:c + o.shape[1]]
                    tol = 1e-5 * (np.abs(a2.T) @ np.abs(x[:, c:c + o.shape[1]])).max(initial=0)
                    assert np.abs(o - want).max(initial=0) <= tol
                    assert np.abs(added - (want + b0)).max(initial=0) <= tol + 1e-6
    for m, k, b in ((24, 6, 4), (18, 7, 5), (3, 1, 2), (40, 33, 16), (17, 9, 47), (8, 1, 32), (5, 0, 3), (19, 9, 1),
                    (21, 10, 2), (16, 5, 2), (8, 3, 1), (6, 4, 1), (41, 9, 24), (25, 7, 20), (16, 5, 8), (7, 3, 40), (40, 1024, 20),
                    (9, 5, 17), (12, 4, 56), (70, 6, 20), (130, 3, 33), (7, 2, 36), (45, 7, 12), (33, 4, 26),
                    (40, 260, 12), (33, 256, 27),
                    # 5-6 and 9-10 columns (alone or past 16) from K = 64 on: matmul_fm_t's 64x5, 64x6 and 32x10 tiles
                    (70, 64, 5), (33, 64, 6), (20, 63, 5), (45, 100, 9), (97, 64, 10), (70, 65, 21), (40, 64, 26),
                    (130, 64, 22), (64, 128, 25), (128, 64, 3),
                    # at most 3 columns (alone or past 16): the 64x3 tile
                    (65, 30, 3), (70, 200, 19), (130, 9, 2), (64, 64, 33),
                    # a batch of 7-8 from K = 192 on: the 48x8 tile
                    (70, 512, 8), (50, 600, 7), (96, 512, 24), (40, 192, 8), (50, 250, 7), (49, 191, 8),
                    # x of FM_KC_MIN_X elements or more with more rows than the output: passes of FM_KC rows
                    (40, 1100, 64), (27, 2049, 50), (20, 1300, 57), (30, 1500, 56), (9, 4097, 49),
                    # FM_KR_MIN_B columns or more: each row tile over FM_KR rows of x at a time
                    (40, 200, 48), (70, 130, 57), (33, 65, 56), (19, 300, 50), (130, 64, 64),
                    # a multiple of 16 columns from FM_SIX_MIN_B on AVX2: 6-row tiles (FM_SIX), the rows
                    # past them one by one
                    (12, 50, 48), (6, 5, 64), (5, 70, 48), (23, 129, 64), (130, 200, 96)):
        w, r = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, b)).astype(np.float32)
        out = np.full((m, b), np.nan, np.float32)
        rnn_kernels.matmul_fm(w, r, out)
        want = w.astype(np.float64) @ r.astype(np.float64)
        tol = 1e-5 * ((np.abs(w) @ np.abs(r)).max(initial=0) + 1)
        np.testing.assert_allclose(out, want, rtol=0, atol=tol)
        out = np.full((m, b), np.nan, np.float32)      # the last 1-4 or 9-12 columns from w's transpose
        rnn_kernels.matmul_fm_t(w, np.ascontiguousarray(w.T), r, out)
        np.testing.assert_allclose(out, want, rtol=0, atol=tol)
        out = np.full((m, b), np.nan, np.float32)
        rt = np.concatenate([r.T, rng.standard_normal((b, 2)).astype(np.float32)], axis=1)   # rows wider than k
        rnn_kernels.matmul_wr(w, rt, out)
        np.testing.assert_allclose(out, want, rtol=0, atol=tol)
        wt = np.full((k, m), np.nan, np.float32)
        rnn_kernels.transpose(w, wt)
        np.testing.assert_array_equal(wt, w.T)


def test_panel_product_bit_identical_to_the_tiles():
    """matmul_fm_p (the weights as panels, strips of W^T: 8 rows wide past 12 columns, the
    columns past the last 16-column block in its pass; up to 12, the column tiles on strips
    of 16 rows without AVX-512, of 32-64 with it) against matmul_fm and matmul_fm_t, bit for bit (each product sums k in
    order with fused multiply-adds), and against float64, at every batch up to 49; the
    panels from the rows and from the columns, those past the rows filled with zeros."""
    from ddg.autograd.ops import rnn
    from ddg.tensor import rnn_kernels
    rng = np.random.default_rng(31)
    for h in (128, 256):
        assert [b for b in range(70) if rnn.panel_batch(b, h)] == \
            [b for b in range(70) if (3 <= b <= 12 and h >= 256) or (b > 16 and 1 <= b % 16 <= 12)]
    for m, k in ((1, 3), (7, 40), (8, 5), (17, 9), (24, 1), (36, 64), (130, 33), (40, 300), (9, 0), (49, 20),
                 (40, 1100)):    # at 60 and 64 columns matmul_fm_t in passes of FM_KC rows of x, at 48-49
    # (and 60-64 of (40, 300)) each row tile over FM_KR rows at a time
        w = rng.standard_normal((m, k)).astype(np.float32)
        for b in list(range(1, 50)) + [60, 64]:
            width = rnn_kernels.panel_width(b)
            n = (m + width - 1) // width + (b % 3)        # more panels than needed are allowed
            pad = np.zeros((n * width, k), np.float32)
            pad[:m] = w
            want_p = pad.reshape(n, width, k).transpose(0, 2, 1)
            for of_t in (False, True):
                ap = np.full((n, k, width), np.nan, np.float32)
                (rnn_kernels.panels_t if of_t else rnn_kernels.panels)(np.ascontiguousarray(w.T) if of_t else w, ap)
                np.testing.assert_array_equal(ap, want_p)
            x = rng.standard_normal((k, b)).astype(np.float32)
            got = np.full((m, b), np.nan, np.float32)
            rnn_kernels.matmul_fm_p(ap, x, got)
            for f, args in ((rnn_kernels.matmul_fm, (w,)), (rnn_kernels.matmul_fm_t, (w, np.ascontiguousarray(w.T)))):
                ref = np.full((m, b), np.nan, np.float32)
                f(*args, x, ref)
                np.testing.assert_array_equal(got, ref)
            want = w.astype(np.float64) @ x.astype(np.float64)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * ((np.abs(w) @ np.abs(x)).max(initial=0) + 1))


def _assert_matches(got, other, ref, exact):
    """Every output and gradient in ``got`` equal to ``other``'s (bit for bit where ``exact``,
    else within float32 rounding) and within float32 rounding of the float64 ``ref``."""
    for g, o, r in zip(got, other, ref):
        tol = 2e-6 * (np.abs(r).max() + 1)
        if exact:
            np.testing.assert_array_equal(g, o)
        else:
            np.testing.assert_allclose(g, o, rtol=0, atol=tol)
        np.testing.assert_allclose(g, r, rtol=0, atol=tol)


@pytest.mark.parametrize("B,reverse,lengths,zero_h0", [(16, False, False, False), (48, True, True, False),
                                                       (20, False, True, True), (33, True, False, True)])
def test_compiled_lstm_input_projections_before_the_loop(B, reverse, lengths, zero_h0, monkeypatch):
    """From XPROJ_FM_MIN_B in the batch and XPROJ_FM_MIN_I inputs (here any) the LSTM's
    input projections of all steps come from one product before the loop, which then skips
    them (an empty ``xf``): the per-step route's values within float32 rounding, and the
    float64 path's; forward and every gradient."""
    from ddg.autograd.ops import rnn
    from ddg.tensor import rnn_kernels
    monkeypatch.setattr(rnn, "RELAYOUT_MIN_T", 0)
    monkeypatch.setattr(rnn, "BWD_KERNEL_MIN_T", 0)
    monkeypatch.setattr(rnn, "XPROJ_FM_MIN_I", 0)
    monkeypatch.setattr(rnn, "BLAS_STEPS", False)      # the compiled loop at batch 48 too
    seen = []
    fwd = rnn_kernels.lstm_forward_loop
    monkeypatch.setattr(rnn_kernels, "lstm_forward_loop", lambda *a: (seen.append(a[1].shape[0]), fwd(*a))[1])
    rng = np.random.default_rng(35)
    arrs = _arrays(rng, "LSTM", 7, B, 9, 12, reverse)
    if zero_h0:
        arrs[1], arrs[2] = np.zeros_like(arrs[1]), np.zeros_like(arrs[2])
    lens = np.arange(B) % 7 + 1 if lengths else None
    monkeypatch.setattr(rnn, "XPROJ_FM_MIN_B", 1)
    got = _seq_run("LSTM", arrs, np.float32, reverse, reverse, lens)
    monkeypatch.setattr(rnn, "XPROJ_FM_MIN_B", 1 << 30)
    steps = _seq_run("LSTM", arrs, np.float32, reverse, reverse, lens)
    assert seen == [0, 7]                # the loop given no x: the projections made before it
    _assert_matches(got, steps, _seq_run("LSTM", arrs, np.float64, reverse, reverse, lens), exact=False)


@pytest.mark.parametrize("B,reverse,lengths,zero_h0,pre,rows,need_x,parts", [
    (5, False, False, False, False, False, True, 5), (7, True, True, False, True, True, True, None),
    (6, False, True, True, False, True, False, 8), (9, True, False, True, True, False, True, 7),
    (4, True, True, False, False, False, False, None), (8, False, False, True, True, True, True, 28),
    (25, False, True, False, False, True, True, None), (40, True, False, True, False, False, True, None)])
def test_lstm_steps_by_numpy_blas(B, reverse, lengths, zero_h0, pre, rows, need_x, parts, monkeypatch):
    """From BLAS_STEPS_MIN_B in the batch (here 1; without AVX-512's compiled GEMM) the LSTM's
    feature-major steps run in a Python loop with numpy's products (the compiled loops not
    called), the input projections per step or all before it, the forward's products in one
    call or in row parts of ``parts`` rows (PART_ROWS; 4H = 28 here: a short last part, whole
    gates and parts across gates), the state gradient from W_hh's transposed copy or as
    (dp^T @ W_hh)^T (STEPS_ROWS_MIN), or (``parts`` None) W_hh's products by ``matmul_p6``
    (P6_STEPS; batch 4-7 in 8 lanes, 25 and 40 with whole 16-column blocks): the compiled
    loops' values within float32 rounding and the float64 path's; forward and every gradient,
    x's wanted or not."""
    from ddg.autograd.ops import rnn
    from ddg.tensor import rnn_kernels
    monkeypatch.setattr(rnn, "RELAYOUT_MIN_T", 0)
    monkeypatch.setattr(rnn, "BWD_KERNEL_MIN_T", 0)
    monkeypatch.setattr(rnn, "LSTM_FM_MIN_B", 1)          # feature-major at any batch
    monkeypatch.setattr(rnn, "XPROJ_FM_MIN_I", 0)
    monkeypatch.setattr(rnn, "XPROJ_FM_MIN_B", 1 if pre else 1 << 30)
    monkeypatch.setattr(rnn, "STEPS_ROWS_MIN", 0 if rows else 1 << 62)
    monkeypatch.setattr(rnn, "STATE_GRAD_ROWS_MIN", 0)   # (dp^T @ W_hh)^T where STEPS_ROWS_MIN asks
    monkeypatch.setattr(rnn, "BLAS_STEPS_MIN_B", 1)
    monkeypatch.setattr(rnn, "PART_MIN_ROWS", 1 << 62 if parts is None else 1)
    monkeypatch.setattr(rnn, "PART_ROWS", parts or 1)
    monkeypatch.setattr(rnn, "P6_STEPS", parts is None)
    monkeypatch.setattr(rnn, "P6_MIN_TB", 0)
    loops = []
    fwd, bwd = rnn_kernels.lstm_forward_loop, rnn_kernels.lstm_backward_loop
    monkeypatch.setattr(rnn_kernels, "lstm_forward_loop", lambda *a: (loops.append("f"), fwd(*a))[1])
    monkeypatch.setattr(rnn_kernels, "lstm_backward_loop", lambda *a: (loops.append("b"), bwd(*a))[1])
    rng = np.random.default_rng(38)
    T, I, H = 6, 5, 7
    arrs = _arrays(rng, "LSTM", T, B, I, H, reverse)
    if zero_h0:
        arrs[1], arrs[2] = np.zeros_like(arrs[1]), np.zeros_like(arrs[2])
    lens = np.arange(B) % T + 1 if lengths else None

    def run(dtype):
        ts = [ddg.to_tensor(a.astype(dtype), stop_gradient=(i == 0 and not need_x)) for i, a in enumerate(arrs)]
        outs = RNNSequence("LSTM", reverse, reverse, lens)(*ts)
        sum(((o * o) * (i + 1)).sum() for i, o in enumerate(outs)).backward()
        return [o.numpy() for o in outs] + [t.grad.numpy() for t in ts if not t.stop_gradient]

    monkeypatch.setattr(rnn, "BLAS_STEPS", True)
    got = run(np.float32)
    assert loops == []                    # neither compiled loop ran
    monkeypatch.setattr(rnn, "BLAS_STEPS", False)
    kern = run(np.float32)
    assert loops == ["f", "b"]
    ref = run(np.float64)
    assert len(got) == 3 + 6 + need_x
    _assert_matches(got, kern, ref, exact=False)


@pytest.mark.parametrize("mode", ("GRU", "RNN_TANH", "RNN_RELU"))
@pytest.mark.parametrize("B,H,reverse,lengths,zero_h0", [
    (12, 7, False, False, False), (13, 6, True, True, False), (25, 5, False, True, True),
    (40, 9, True, False, True), (17, 12, False, False, False)])
def test_gru_and_elman_w_hh_products_by_matmul_p6(mode, B, H, reverse, lengths, zero_h0, monkeypatch):
    """Without AVX-512's compiled GEMM (BLAS_STEPS) the GRU's and Elman RNN's per-step
    products with W_hh (forward ``W_hh @ h``, backward ``W_hh^T @ dq``) run ``matmul_p6`` on
    panels made once per call (P6_RNN; here at any H and sequence length): batch 12-17 in
    the tile's masked last columns, 25 and 40 past whole 16-column blocks; G*H rows that
    leave a partial last panel. The values are ``matmul_fm``'s within float32 rounding and
    the float64 path's; forward and every gradient."""
    from ddg.autograd.ops import rnn
    from ddg.tensor import rnn_kernels
    monkeypatch.setattr(rnn, "BLAS_STEPS", True)
    monkeypatch.setattr(rnn, "BWD_KERNEL_MIN_T", 0)
    monkeypatch.setattr(rnn, "P6_RNN_MIN_H", 1)
    monkeypatch.setattr(rnn, "P6_MIN_TB", 0)
    calls = []
    p6 = rnn_kernels.matmul_p6
    monkeypatch.setattr(rnn_kernels, "matmul_p6", lambda ap, x, out: (calls.append(ap.shape), p6(ap, x, out))[1])
    rng = np.random.default_rng(44)
    T, I = 6, 5
    arrs = _arrays(rng, mode, T, B, I, H, reverse)
    if zero_h0:
        arrs[1] = np.zeros_like(arrs[1])
    lens = np.arange(B) % T + 1 if lengths else None
    got = _seq_run(mode, arrs, np.float32, reverse, reverse, lens)
    G = MODES[mode]
    fwd = T - 1 if zero_h0 else T                 # W_hh @ 0 is not formed
    assert calls == [(-(-G * H // 6), H, 6)] * fwd + [(-(-H // 6), G * H, 6)] * T   # (h0's gradient too)
    monkeypatch.setattr(rnn, "P6_RNN", False)
    calls.clear()
    fm = _seq_run(mode, arrs, np.float32, reverse, reverse, lens)
    assert calls == []
    ref = _seq_run(mode, arrs, np.float64, reverse, reverse, lens)
    for g, f, r in zip(got, fm, ref):
        scale = np.abs(r).max() + 1
        np.testing.assert_allclose(g, f, rtol=0, atol=2e-6 * scale)
        np.testing.assert_allclose(g, r, rtol=0, atol=_atol(mode) * scale)


def test_lstm_numpy_loop_accumulates_every_gradient_of_a_stack(monkeypatch):
    """The numpy loop's gate gradients, left gate-major ``[4H, T, B]`` for the weight
    gradients' product (read in place, no transposed copy), through a 2-layer bidirectional
    LSTM whose gradients accumulate over two backward passes (added into the existing
    ``.grad``): every parameter's and x's gradient as the compiled loops give them."""
    from ddg.autograd.ops import rnn
    monkeypatch.setattr(rnn, "BLAS_STEPS_MIN_B", 1)
    seen = []
    steps = rnn._lstm_steps_backward
    monkeypatch.setattr(rnn, "_lstm_steps_backward", lambda *a: (seen.append(a[16].shape), steps(*a))[1])
    x0 = np.random.default_rng(5).standard_normal((16, 12, 20)).astype(np.float32)

    def run(blas):
        monkeypatch.setattr(rnn, "BLAS_STEPS", blas)
        ddg.seed(3)
        net = ddg.nn.LSTM(20, 40, direction="bidirect", num_layers=2)
        x = ddg.to_tensor(x0, stop_gradient=False)
        for _ in range(2):
            y, (h, c) = net(x)
            ((y * y).sum() + (h * c).sum()).backward()
        return [p.grad.numpy() for p in net.parameters()] + [x.grad.numpy()]
    got = run(True)
    assert seen and all(shape == (160, 12, 16) for shape in seen)     # the numpy loop, gate-major
    n = len(seen)
    ref = run(False)
    assert len(seen) == n                                               # the compiled loops
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=2e-5, atol=2e-5 * np.abs(r).max())


@pytest.mark.parametrize("kind,time_major", [("GRU", False), ("SimpleRNN", True), ("GRU", True)])
def test_gru_and_elman_stacks_by_matmul_p6_accumulate_every_gradient(kind, time_major, monkeypatch):
    """A 2-layer bidirectional GRU or SimpleRNN at batch 20 over 30 steps (W_hh's products by
    ``matmul_p6`` from 600 steps x batch columns, H 12 here by a lowered P6_RNN_MIN_H), its
    gradients added into ``.grad`` over two backward passes: every parameter's and x's
    gradient as ``matmul_fm``'s loops give them, and the routing as the thresholds say."""
    from ddg.autograd.ops import rnn
    from ddg.tensor import rnn_kernels
    monkeypatch.setattr(rnn, "BLAS_STEPS", True)
    monkeypatch.setattr(rnn, "P6_RNN_MIN_H", 12)
    calls = []
    p6 = rnn_kernels.matmul_p6
    monkeypatch.setattr(rnn_kernels, "matmul_p6", lambda *a: (calls.append(1), p6(*a))[1])
    B, T = 20, 30
    assert rnn._gru_elman_p6(B, T, 12) and not rnn._gru_elman_p6(B, T, 11) and not rnn._gru_elman_p6(B, 25, 12)
    x0 = np.random.default_rng(6).standard_normal((T, B, 9) if time_major else (B, T, 9)).astype(np.float32)

    def run(p6_on):
        monkeypatch.setattr(rnn, "P6_RNN", p6_on)
        ddg.seed(4)
        net = getattr(ddg.nn, kind)(9, 12, num_layers=2, direction="bidirect", time_major=time_major)
        x = ddg.to_tensor(x0, stop_gradient=False)
        for _ in range(2):
            y, h = net(x)
            ((y * y).sum() + (h * h).sum()).backward()
        return [p.grad.numpy() for p in net.parameters()] + [x.grad.numpy()]
    got = run(True)
    # passes x layers x directions x steps (forward and backward T - 1 each: the zero h0's products skipped)
    assert len(calls) == 2 * 2 * 2 * 2 * (T - 1)
    calls.clear()
    ref = run(False)
    assert not calls
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=2e-5, atol=2e-5 * np.abs(r).max())


@pytest.mark.parametrize("B,H,expected", [
    (31, 512, False), (32, 512, True), (64, 768, True), (40, 768, True), (16, 1024, False),
    (63, 1024, True), (128, 2048, True), (32, 255, False), (32, 256, True), (47, 128, False),
    (48, 64, True), (48, 16, True)])
def test_which_lstm_steps_take_numpy_products(B, H, expected, monkeypatch):
    """Without AVX-512's GEMM the numpy loop takes a batch of BLAS_STEPS_MIN_B (48) and more,
    and of BLAS_STEPS_WIDE_MIN_B (32) and more from 256 hidden features (W_hh's elements),
    with the compiled GEMM (BLAS_STEPS off) never; W_hh's products there run matmul_p6 below
    P6_MAX_B (64) in the batch over P6_MIN_TB steps x batch columns. The forward's products (where not matmul_p6's) go in
    PART_ROWS-row parts from PART_MIN_ROWS rows of the weight on, every row in exactly one
    part."""
    from ddg.autograd.ops import rnn
    monkeypatch.setattr(rnn, "BLAS_STEPS", True)
    assert rnn.blas_steps(B, 4 * H * H) is expected
    steps = -(-rnn.P6_MIN_TB // B)               # steps x batch: P6_MIN_TB columns and more
    assert rnn._p6(B, steps) is (B < 64)
    assert rnn._p6(B, steps - 1) is False        # too few steps to pay for the panels
    monkeypatch.setattr(rnn, "BLAS_STEPS", False)
    assert rnn.blas_steps(B, 4 * H * H) is False
    w, out = np.zeros((4 * H, H), np.float32), np.zeros((4 * H, B), np.float32)
    parts = rnn._row_parts(w, out)
    assert len(parts) == (1 if 4 * H < rnn.PART_MIN_ROWS else -(-4 * H // rnn.PART_ROWS))
    starts = [(p[0].ctypes.data - w.ctypes.data) // w.strides[0] for p in parts]
    assert starts == [i * rnn.PART_ROWS for i in range(len(parts))]
    assert sum(p[0].shape[0] for p in parts) == 4 * H and all(p[0].shape[0] == p[1].shape[0] for p in parts)


def _record_panels(monkeypatch):
    """A list that gets, per call of the LSTM's compiled loops, ("f" or "b", the panels of
    W_ih, the panels of W_hh) as counts (0: no panels)."""
    from ddg.tensor import rnn_kernels
    seen = []
    fwd, bwd = rnn_kernels.lstm_forward_loop, rnn_kernels.lstm_backward_loop
    monkeypatch.setattr(rnn_kernels, "lstm_forward_loop",
                        lambda *a: (seen.append(("f", a[-2].shape[0], a[-1].shape[0])), fwd(*a))[1])
    monkeypatch.setattr(rnn_kernels, "lstm_backward_loop",
                        lambda *a: (seen.append(("b", a[-2].shape[0], a[-1].shape[0])), bwd(*a))[1])
    return seen


@pytest.mark.parametrize("B,H,I,reverse,zero_h0,lengths", [
    (17, 9, 5, False, False, False), (21, 9, 3, True, True, True), (27, 16, 4, False, True, True),
    (33, 7, 6, True, False, False), (44, 12, 9, False, False, True), (24, 5, 2, True, False, True),
    (3, 9, 5, False, True, True), (5, 7, 3, True, False, True), (8, 16, 4, False, False, False),
    (10, 9, 6, True, True, False), (12, 5, 2, False, False, True)])
def test_compiled_lstm_panel_products(B, H, I, reverse, zero_h0, lengths, monkeypatch):
    """Batches of 3-12 (from PANEL_MIN_H hidden features on, here 0), and of 1-12 columns
    past a multiple of 16, run the LSTM's products by matmul_fm_p forward (W_ih, W_hh) and
    backward (their transposes), from panels (a last partial one where 4H, H or I is not a
    multiple of the width): the same bits as the other tiles (PANEL_COLS 0), and the
    float64 numpy path's values."""
    from ddg.autograd.ops import rnn
    from ddg.tensor import rnn_kernels
    monkeypatch.setattr(rnn, "RELAYOUT_MIN_T", 0)       # the weights copied at any length
    monkeypatch.setattr(rnn, "BWD_KERNEL_MIN_T", 0)
    monkeypatch.setattr(rnn, "PANEL_MIN_H", 0)      # below 16, panels from 256 hidden features on
    monkeypatch.setattr(rnn, "PANEL_MIN_I", 0)
    monkeypatch.setattr(rnn, "BLAS_STEPS", False)     # the compiled loops at batch 33 and 44 too
    seen = _record_panels(monkeypatch)
    rng = np.random.default_rng(32)
    arrs = _arrays(rng, "LSTM", 6, B, I, H, reverse)
    if zero_h0:
        arrs[1], arrs[2] = np.zeros_like(arrs[1]), np.zeros_like(arrs[2])
    lens = np.arange(B) % 6 + 1 if lengths else None
    got = _seq_run("LSTM", arrs, np.float32, reverse, reverse, lens)
    w = rnn_kernels.panel_width(B)
    n = (4 * H + w - 1) // w
    assert seen == [("f", n, n), ("b", (I + w - 1) // w, (H + w - 1) // w)]
    monkeypatch.setattr(rnn, "PANEL_COLS", 0)
    other = _seq_run("LSTM", arrs, np.float32, reverse, reverse, lens)
    assert seen[2:] == [("f", 0, 0), ("b", 0, 0)]
    _assert_matches(got, other, _seq_run("LSTM", arrs, np.float64, reverse, reverse, lens), exact=True)


@pytest.mark.parametrize("mode,T,lengths", [("LSTM", 1, None), ("GRU", 1, None), ("RNN_TANH", 2, None),
                                           ("LSTM", 3, (3, 1, 2, 3, 2)), ("GRU", 2, (2, 1, 2, 2, 1)),
                                           ("RNN_RELU", 3, None)])
def test_short_sequences_state_gradient_from_the_transposed_small_operand(mode, T, lengths, monkeypatch):
    """Below BWD_KERNEL_MIN_T steps (a cell called step by step) the state gradient
    W_hh^T @ g is formed as (g^T @ W_hh)^T from STATE_GRAD_ROWS_MIN weight elements on (here
    any): the product from the view's values within float32 rounding, the float64 path's."""
    from ddg.autograd.ops import rnn
    seen = []
    real = rnn._state_grad
    monkeypatch.setattr(rnn, "_state_grad", lambda w, g, out: (seen.append(w.size), real(w, g, out))[1])
    rng = np.random.default_rng(37)
    arrs = _arrays(rng, mode, T, 5, 4, 6, False)
    lens = None if lengths is None else np.array(lengths)
    monkeypatch.setattr(rnn, "STATE_GRAD_ROWS_MIN", 0)
    got = _seq_run(mode, arrs, np.float32, False, False, lens)
    assert seen                           # the numpy route's state gradients ran
    monkeypatch.setattr(rnn, "STATE_GRAD_ROWS_MIN", 1 << 62)
    view = _seq_run(mode, arrs, np.float32, False, False, lens)
    ref = _seq_run(mode, arrs, np.float64, False, False, lens)
    for g, v, r in zip(got, view, ref):
        tol = 2e-6 * (np.abs(r).max() + 1)
        np.testing.assert_allclose(g, r, rtol=0, atol=tol)
        np.testing.assert_allclose(g, v, rtol=0, atol=tol)


@pytest.mark.parametrize("reverse,lengths", [(False, False), (True, True), (False, True)])
def test_compiled_lstm_forward_panels_at_batch_16(reverse, lengths, monkeypatch):
    """At a batch of 16 (from PANEL_MIN_H hidden features on, here 0) the LSTM's forward
    products run matmul_fm_p from panels and its backward keeps the transposes (no panels):
    the same bits as without the forward's panels, the float64 path's values; and
    panel_forward's gate."""
    from ddg.autograd.ops import rnn
    from ddg.tensor import rnn_kernels
    B = 16
    assert [b for b in range(70) if rnn.panel_forward(b, 512)] == \
        [b for b in range(70) if rnn.panel_batch(b, 512) or b == 16]
    assert [b for b in range(70) if rnn.panel_forward(b, 128)] == [b for b in range(70) if rnn.panel_batch(b, 128)]
    monkeypatch.setattr(rnn, "RELAYOUT_MIN_T", 0)
    monkeypatch.setattr(rnn, "BWD_KERNEL_MIN_T", 0)
    monkeypatch.setattr(rnn, "PANEL_MIN_I", 0)
    seen = _record_panels(monkeypatch)
    rng = np.random.default_rng(36)
    H, I = 12, 9
    arrs = _arrays(rng, "LSTM", 6, B, I, H, reverse)
    lens = np.arange(B) % 6 + 1 if lengths else None
    monkeypatch.setattr(rnn, "PANEL_MIN_H", 0)
    got = _seq_run("LSTM", arrs, np.float32, reverse, reverse, lens)
    w = rnn_kernels.panel_width(B)
    assert seen == [("f", (4 * H + w - 1) // w, (4 * H + w - 1) // w), ("b", 0, 0)]
    monkeypatch.setattr(rnn, "PANEL_MIN_H", 1 << 30)
    other = _seq_run("LSTM", arrs, np.float32, reverse, reverse, lens)
    assert seen[2:] == [("f", 0, 0), ("b", 0, 0)]
    _assert_matches(got, other, _seq_run("LSTM", arrs, np.float64, reverse, reverse, lens), exact=True)


@pytest.mark.parametrize("mode,reverse,lengths,zero_h0,h0_grad,fm", [
    c[:3] + c[3] + c[4:] for c in itertools.product(("LSTM", "GRU", "RNN_TANH", "RNN_RELU"), (False, True), (None, (5, 1, 3, 5, 2)),
                                                    ((True, False), (True, True), (False, True)), (False, True))])
def test_compiled_loops_kernel_products_and_zero_initial_state(mode, reverse, lengths, zero_h0, h0_grad, fm,
                                                                monkeypatch):
    """The compiled products (rnn_kernels.matmul_fm, or matmul_wr for small batches)
    forward and backward on short sequences, with zero initial states (the step whose
    product is skipped, the weight-gradient block left out) or not, and the initial
    states' gradients wanted or not."""
    from ddg.autograd.ops import rnn
    monkeypatch.setattr(rnn, "BWD_KERNEL_MIN_T", 0)
    _set_fm_min_b(monkeypatch, 0 if fm else 1000)
    rng = np.random.default_rng(15)
    arrs = _arrays(rng, mode, 5, 5, 3, 6, True)
    n_state = 2 if mode == "LSTM" else 1
    for i in range(n_state if zero_h0 else 0):
        arrs[1 + i] = np.zeros_like(arrs[1 + i])
    lens = None if lengths is None else np.array(lengths)
    res = {}
    for dt in (np.float32, np.float64):
        ts = [ddg.to_tensor(a.astype(dt), stop_gradient=0 < i <= n_state and not h0_grad)
              for i, a in enumerate(arrs)]
        outs = RNNSequence(mode, reverse, True, lens)(*ts)
        sum(((o * o) * (i + 1)).sum() for i, o in enumerate(outs)).backward()
        res[dt] = [o.numpy() for o in outs] + [t.grad.numpy() for t in ts if not t.stop_gradient]
    for g, r in zip(res[np.float32], res[np.float64]):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=0, atol=_atol(mode) * (np.abs(r).max() + 1))
    assert len(res[np.float32]) == n_state + 1 + 5 + (n_state if h0_grad else 0)


@pytest.mark.parametrize("mode,H,batch_major,kernels", list(itertools.product(
    ("LSTM", "GRU", "RNN_TANH", "RNN_RELU"), (16, 21), (False, True), (False, True))))
def test_compiled_loops_hidden_blocks(mode, H, batch_major, kernels, monkeypatch):
    """Hidden sizes of whole 16-row blocks and with a remainder (the step kernels copy
    states, outputs and gradients 16 feature rows at a time), backward by the compiled
    product (the LSTM's whole-sequence loop) or by numpy's per step, against the float64
    numpy path."""
    from ddg.autograd.ops import rnn
    monkeypatch.setattr(rnn, "BWD_KERNEL_MIN_T", 0 if kernels else 1000)
    _set_fm_min_b(monkeypatch, 0 if kernels else 1000)   # with the kernels, matmul_fm at batch 3
    rng = np.random.default_rng(16)
    arrs = _arrays(rng, mode, 4, 3, 2, H, batch_major)
    lens = np.array((4, 2, 3))
    got = _seq_run(mode, arrs, np.float32, True, batch_major, lens)
    ref = _seq_run(mode, arrs, np.float64, True, batch_major, lens)
    for g, r in zip(got, ref):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=0, atol=_atol(mode) * (np.abs(r).max() + 1))


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"])
def test_compiled_loops_some_inputs_and_second_order(mode):
    rng = np.random.default_rng(11)
    arrs = _arrays(rng, mode, 3, 2, 3, 4, True)
    w_hh = 4 if mode == "LSTM" else 3
    res = {}
    for dt in (np.float32, np.float64):
        ts = [ddg.to_tensor(a.astype(dt), stop_gradient=i not in (0, w_hh)) for i, a in enumerate(arrs)]
        outs = RNNSequence(mode, True, True)(*ts)
        g_x, = ddg.grad([outs[0].sum()], [ts[0]], create_graph=True)
        (g_x * g_x).sum().backward()       # through backward_graph
        res[dt] = (outs[-1].numpy(), g_x.numpy(), ts[w_hh].grad.numpy())
        assert ts[1].grad is None
    for a, b in zip(res[np.float32], res[np.float64]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,batch_major,B,zero_h0", list(itertools.product(
    ("RNN_TANH", "RNN_RELU"), (False, True), (1, 5, 17), (False, True))))
def test_one_elman_step(mode, batch_major, B, zero_h0, monkeypatch):
    """One step of an Elman cell (T = 1: a SimpleRNNCell called step by step) on float32 numpy
    runs ``_elman_one_fwd`` / ``_elman_one_bwd`` (two products and the activation), not the
    compiled loops: the values of the float64 loop and of the float32 numpy path, for every
    input's gradient, with some inputs only, and through backward_graph (second order)."""
    from ddg.autograd.ops import rnn
    ran = []
    real = RNNSequence._elman_one_bwd
    monkeypatch.setattr(RNNSequence, "_elman_one_bwd", lambda self, *a: (ran.append(1), real(self, *a))[1])
    rng = np.random.default_rng(B + 2 * zero_h0)
    arrs = _arrays(rng, mode, 1, B, 3, 20, batch_major)
    if zero_h0:
        arrs[1] = np.zeros_like(arrs[1])
    got = _seq_run(mode, arrs, np.float32, False, batch_major, None)
    assert ran == [1]
    ref = _seq_run(mode, arrs, np.float64, False, batch_major, None)
    y, (h,) = reference(mode, False, arrs[0].transpose(1, 0, 2) if batch_major else arrs[0], arrs[1:2], *arrs[2:])
    np.testing.assert_allclose(ref[0], y.transpose(1, 0, 2) if batch_major else y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ref[1], h, rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(rnn, "COMPILED", set())
    numpy32 = _seq_run(mode, arrs, np.float32, False, batch_major, None)
    assert ran == [1]
    for g, r, n in zip(got, ref, numpy32):
        assert g.dtype == np.float32 and g.shape == r.shape
        scale = np.abs(r).max() + 1
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-5 * scale)
        np.testing.assert_allclose(g, n, rtol=0, atol=1e-5 * scale)
    monkeypatch.undo()
    res = {}
    for dt in (np.float32, np.float64):       # some inputs only; x's gradient differentiated again
        ts = [ddg.to_tensor(a.astype(dt), stop_gradient=i not in (0, 3)) for i, a in enumerate(arrs)]
        outs = RNNSequence(mode, False, batch_major)(*ts)
        g_x, = ddg.grad([(outs[0] * outs[1].reshape(outs[0].shape)).sum()], [ts[0]], create_graph=True)
        (g_x * g_x).sum().backward()
        res[dt] = (g_x.numpy(), ts[3].grad.numpy())
        assert all(ts[i].grad is None for i in (1, 2, 4, 5))
    for a, b in zip(res[np.float32], res[np.float64]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_one_relu_step_propagates_nan():
    """A NaN pre-activation stays NaN through the one-step relu (numpy's maximum), and its
    row's gradient is zero (h > 0 is false there), as in the compiled loop."""
    rng = np.random.default_rng(3)
    arrs = [a.astype(np.float32) for a in _arrays(rng, "RNN_RELU", 1, 3, 2, 4, False)]
    arrs[0][0, 1, 0] = np.nan
    ts = [ddg.to_tensor(a, stop_gradient=False) for a in arrs]
    y, h = RNNSequence("RNN_RELU")(*ts)
    assert np.isnan(y.numpy()[0, 1]).all() and np.isnan(h.numpy()[1]).all()
    assert not np.isnan(y.numpy()[0, [0, 2]]).any()
    y.sum().backward()
    assert not np.isnan(ts[1].grad.numpy()[[0, 2]]).any()


@pytest.mark.parametrize("mode,T,lengths", [("LSTM", 0, None), ("GRU", 0, None), ("LSTM", 3, (0, 3)),
                                            ("GRU", 3, (0, 2)), ("RNN_TANH", 0, None),
                                            ("RNN_RELU", 3, (0, 2))])
def test_empty_sequences_and_zero_lengths(mode, T, lengths):
    rng = np.random.default_rng(13)
    arrs = _arrays(rng, mode, T, 2, 3, 4, True)
    lens = None if lengths is None else np.array(lengths)
    got = _seq_run(mode, arrs, np.float32, False, True, lens)      # compiled loops
    ref = _seq_run(mode, arrs, np.float64, False, True, lens)      # numpy path
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=0, atol=2e-6 * (np.abs(r).max(initial=0) + 1))
    n_state = 2 if mode == "LSTM" else 1
    if T == 0:       # the states pass through, the weights get zero gradients
        for i in range(n_state):
            np.testing.assert_allclose(ref[1 + i], arrs[1 + i])
        assert not any(g.any() for g in ref[-4:])
    else:            # a row of length 0 keeps its initial state
        np.testing.assert_allclose(got[1][0], arrs[1][0], rtol=1e-6)


@pytest.mark.parametrize("wanted,zero_h0,fm,blas", list(itertools.product(((3,), (4,), (3, 4)), (False, True),
                                                                           (False, True), (None, "swap", "copy"))))
def test_compiled_lstm_weight_gradients(wanted, zero_h0, fm, blas, monkeypatch):
    """The LSTM's dW_ih and dW_hh from the saved [h_prev | x] rows in one pass
    (rnn_kernels.matmul_tn), or without AVX-512 past TN_BLAS_MIN_OUT by numpy's two
    products (``blas``: feature-major gate gradients made gate-major by
    ``rnn_kernels.swap_leading`` or by numpy's copy), one or both wanted (x's gradient not),
    with the zero initial state's step left out of dW_hh or not, both directions, the gate
    gradients as batch rows or feature-major (FM_MIN_B), against the float64 numpy path; a
    second backward adds the same again into the gradients."""
    from ddg.autograd.ops import rnn
    from ddg.tensor import gemm, rnn_kernels
    if blas:
        monkeypatch.setattr(gemm, "ENABLED", False)
    monkeypatch.setattr(rnn, "TN_BLAS_MIN_OUT", 0 if blas else 1 << 62)
    monkeypatch.setattr(rnn, "SWAP_KERNEL", blas == "swap")
    swaps, real_swap = [], rnn_kernels.swap_leading
    monkeypatch.setattr(rnn_kernels, "swap_leading", lambda *a: (swaps.append(1), real_swap(*a))[1])
    used, real_tn = [], rnn_kernels.matmul_tn
    monkeypatch.setattr(rnn_kernels, "matmul_tn", lambda *a: (used.append(1), real_tn(*a))[1])
    _set_fm_min_b(monkeypatch, 0 if fm else 1000)
    rng = np.random.default_rng(17)
    arrs = _arrays(rng, "LSTM", 4, 3, 5, 6, True)
    if zero_h0:
        arrs[1], arrs[2] = np.zeros_like(arrs[1]), np.zeros_like(arrs[2])
    for reverse in (False, True):
        res = {}
        for dt in (np.float32, np.float64):
            ts = [ddg.to_tensor(a.astype(dt), stop_gradient=i not in wanted) for i, a in enumerate(arrs)]
            outs = RNNSequence("LSTM", reverse, True)(*ts)
            sum(((o * o) * (i + 1)).sum() for i, o in enumerate(outs)).backward()
            res[dt] = [ts[i].grad.numpy().copy() for i in wanted]
            assert all(ts[i].grad is None for i in range(len(ts)) if i not in wanted)
            if dt == np.float32:     # again, added into the gradients
                outs = RNNSequence("LSTM", reverse, True)(*ts)
                sum(((o * o) * (i + 1)).sum() for i, o in enumerate(outs)).backward()
                twice = [ts[i].grad.numpy() for i in wanted]
        for g, r, g2 in zip(res[np.float32], res[np.float64], twice):
            assert g.dtype == np.float32 and g.shape == r.shape and g.flags.c_contiguous
            np.testing.assert_allclose(g, r, rtol=0, atol=2e-6 * (np.abs(r).max() + 1))
            np.testing.assert_allclose(g2, 2 * r, rtol=0, atol=4e-6 * (np.abs(r).max() + 1))
    assert bool(used) != bool(blas)       # the route asked for ran
    assert bool(swaps) == (blas == "swap")     # (batch 3: the gate gradients feature-major either way)


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 8), (7, 600, 3), (2, 256, 16), (4, 257, 24), (0, 4, 2), (5, 0, 3)])
def test_swap_leading_axes(shape):
    """``rnn_kernels.swap_leading``: ``src [T, R, B]`` into ``dst [R, T, B]``, every element,
    rows past a whole block of SWAP_ROWS included."""
    from ddg.tensor import rnn_kernels
    src = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    dst = np.full(shape[1:2] + shape[:1] + shape[2:], np.nan, np.float32)
    rnn_kernels.swap_leading(src, dst)
    np.testing.assert_array_equal(dst, src.transpose(1, 0, 2))


@pytest.mark.parametrize("mode,B,fm,IH", list(itertools.product(("LSTM", "GRU", "RNN_TANH", "RNN_RELU"), (1, 2, 3, 5),
                                                                   (False, True), ((5, 6), (24, 40)))))
def test_compiled_loops_small_batches(mode, B, fm, IH, monkeypatch):
    """Batches of 1, 2, 3 and 5 through each recurrent product (matmul_wr's 4x4, 4x2 and
    4x1 tiles, or matmul_fm's masked columns), the input projections of all steps from
    one product (below FM_MIN_B; XPROJ_ONE_MIN lowered for the larger sizes) or numpy's
    stacked matmul, and [h_prev | x] rows of 64 floats (padded for matmul_tn), with a zero
    initial state on odd batches, against the float64 numpy path."""
    from ddg.autograd.ops import rnn
    monkeypatch.setattr(rnn, "BWD_KERNEL_MIN_T", 0)
    if IH[1] > 6:
        monkeypatch.setattr(rnn, "XPROJ_ONE_MIN", 0)
    _set_fm_min_b(monkeypatch, 0 if fm else 1000)
    rng = np.random.default_rng(18)
    arrs = _arrays(rng, mode, 4, B, IH[0], IH[1], B % 2 == 0)
    if B % 2:
        arrs[1] = np.zeros_like(arrs[1])
        if mode == "LSTM":
            arrs[2] = np.zeros_like(arrs[2])
    lens = np.arange(B) % 4 + 1 if B > 2 else None
    got = _seq_run(mode, arrs, np.float32, B == 3, B % 2 == 0, lens)
    ref = _seq_run(mode, arrs, np.float64, B == 3, B % 2 == 0, lens)
    for g, r in zip(got, ref):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=0, atol=_atol(mode) * (np.abs(r).max() + 1))


@pytest.mark.parametrize("B,H,cols_max", [(2, 7, None), (3, 7, None), (4, 64, None), (5, 64, None), (5, 7, None),
                                          (6, 64, None), (6, 64, 0), (7, 7, None), (8, 7, None), (9, 64, None),
                                          (9, 7, 0), (10, 64, None), (10, 7, None), (7, 128, None), (8, 128, 0),
                                          (5, 64, "small"), (9, 7, "small")])
def test_lstm_small_batches_feature_major_or_batch_rows(B, H, cols_max, monkeypatch):
    """The LSTM's loops keep the state feature-major at batch 7 and 8 (one 8-lane vector of
    matmul_fm, no column left over) and at 3-6 and 9-10 where the weights' transposes serve
    matmul_fm_t's column tiles (W_hh of at most COLS_MAX_W_SMALL elements below batch 16,
    whatever COLS_MAX_W, the limit past it: "small"; from 64 features on the
    64x5, 64x6 and 32x10 tiles run, at 7-8 the 48x8 tile on the backward's 4H = 512 rows),
    else (batch 1-2, or COLS_MAX_W 0 below 7) they read it as batch rows; all against the
    float64 numpy path, with sequence lengths and the kernels' backward."""
    from ddg.autograd.ops import rnn
    from ddg.tensor import rnn_kernels
    monkeypatch.setattr(rnn, "RELAYOUT_MIN_T", 0)       # the weights copied at any length
    monkeypatch.setattr(rnn, "BWD_KERNEL_MIN_T", 0)
    if cols_max == "small":
        monkeypatch.setattr(rnn, "COLS_MAX_W", 0)
        cols_max = None
    elif cols_max is not None:
        monkeypatch.setattr(rnn, "COLS_MAX_W", cols_max)
        monkeypatch.setattr(rnn, "COLS_MAX_W_SMALL", cols_max)
    fm = []                                       # the loop's feature-major flag, per call
    real = rnn_kernels.lstm_forward_loop
    monkeypatch.setattr(rnn_kernels, "lstm_forward_loop", lambda *a: (fm.append(a[16]), real(*a))[1])
    rng = np.random.default_rng(19)
    arrs = _arrays(rng, "LSTM", 5, B, 4, H, True)
    lens = np.arange(B) % 5 + 1
    got = _seq_run("LSTM", arrs, np.float32, False, True, lens)
    ref = _seq_run("LSTM", arrs, np.float64, False, True, lens)
    assert fm == [B in (7, 8) or (3 <= B <= 10 and cols_max is None)]
    tol = 2e-6 if H < 64 else 1e-5          # float32 sums over 4H * (H + I) terms
    for g, r in zip(got, ref):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=0, atol=tol * (np.abs(r).max() + 1))


@pytest.mark.parametrize("B,H,reverse,zero_h0,cols_max", [(18, 9, False, True, None), (18, 9, True, False, None),
                                                          (24, 9, False, False, None), (20, 9, True, True, 0),
                                                          (12, 256, True, False, None), (28, 256, False, True, None),
                                                          (11, 256, False, False, None)])
def test_compiled_lstm_wide_batches(B, H, reverse, zero_h0, cols_max, monkeypatch):
    """The LSTM's loops at batches whose last block is 24 columns (one 8x24 tile) or 1-4 or
    9-12 columns past a multiple of 16 (formed from the weights' transposes, matmul_fm_t,
    9-12 only from 256 hidden features; COLS_MAX_W 0: by the 8- and 16-lane tiles
    instead), with and without lengths and a zero initial state, against the float64 numpy
    path."""
    from ddg.autograd.ops import rnn
    monkeypatch.setattr(rnn, "RELAYOUT_MIN_T", 0)       # the weights copied at any length
    monkeypatch.setattr(rnn, "BWD_KERNEL_MIN_T", 0)
    if cols_max is not None:
        monkeypatch.setattr(rnn, "COLS_MAX_W", cols_max)
    rng = np.random.default_rng(21)
    arrs = _arrays(rng, "LSTM", 4, B, 5, H, reverse)
    if zero_h0:
        arrs[1], arrs[2] = np.zeros_like(arrs[1]), np.zeros_like(arrs[2])
    lens = np.arange(B) % 4 + 1 if reverse else None
    got = _seq_run("LSTM", arrs, np.float32, reverse, reverse, lens)
    ref = _seq_run("LSTM", arrs, np.float64, reverse, reverse, lens)
    tol = 2e-6 if H < 64 else 1e-5          # float32 sums over 4H * (H + I) terms
    for g, r in zip(got, ref):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=0, atol=tol * (np.abs(r).max() + 1))


@pytest.mark.parametrize("T,B,H", [(1, 4, 64), (1, 20, 9), (2, 5, 40), (5, 3, 64), (6, 4, 64), (6, 20, 9), (7, 12, 33)])
def test_lstm_relayout_from_relayout_min_t_steps(T, B, H, monkeypatch):
    """Shorter sequences than RELAYOUT_MIN_T (a cell called step by step: T = 1) read the
    weights in place, longer ones from panels (batch 3-12 from PANEL_MIN_H, here 0, and
    1-12 past 16); the same values either way, against the float64 numpy path."""
    from ddg.autograd.ops import rnn
    from ddg.tensor import rnn_kernels
    monkeypatch.setattr(rnn, "PANEL_MIN_H", 0)
    monkeypatch.setattr(rnn, "BWD_KERNEL_MIN_T", 0)
    copies = []                           # per forward call: were the weights copied
    real = rnn_kernels.lstm_forward_loop
    monkeypatch.setattr(rnn_kernels, "lstm_forward_loop",
                        lambda *a: (copies.append(a[-1].size > 0 or a[-3].size > 0), real(*a))[1])
    rng = np.random.default_rng(33)
    arrs = _arrays(rng, "LSTM", T, B, 5, H, True)
    got = _seq_run("LSTM", arrs, np.float32, False, True, None)
    ref = _seq_run("LSTM", arrs, np.float64, False, True, None)
    assert copies == [T >= rnn.RELAYOUT_MIN_T]
    for g, r in zip(got, ref):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-5 * (np.abs(r).max() + 1))


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"])
def test_weight_gradients_added_where_the_engine_hands_out_an_array(mode, monkeypatch):
    """A cell called step by step with the same weights (one RNNSequence per step), as a
    user's loop over LSTMCell does: from the third step's backward on, each step's weight
    gradients go into the engine's running sum (grad_sink), and a whole sequence's into the
    weights' .grad that clear_grad left; the values of the float64 numpy path, after a
    clear_grad, and added to the gradients already there without one. Only the weights that
    want a gradient get one."""
    from ddg.autograd.ops import rnn
    sunk = []
    real = rnn.grad_sink
    monkeypatch.setattr(rnn, "grad_sink", lambda node, i: (lambda a: (sunk.append(a is not None), a)[1])(real(node, i)))
    rng = np.random.default_rng(34)
    G = MODES[mode]
    n_state = 2 if mode == "LSTM" else 1
    T, B, I, H = 6, 5, 4, 24
    xs = rng.standard_normal((T, B, I))
    h0 = [rng.standard_normal((B, H)) * 0.5 for _ in range(n_state)]
    ws = [rng.standard_normal((G * H, I)) * 0.3, rng.standard_normal((G * H, H)) * 0.3,
          rng.standard_normal(G * H) * 0.3, rng.standard_normal(G * H) * 0.3]

    def run(dtype, cell, wanted=(0, 1, 2, 3), grads=None):
        w = [ddg.to_tensor(a.astype(dtype), stop_gradient=i not in wanted) for i, a in enumerate(ws)]
        if grads is not None:           # .grad already there (zero, or an earlier step's)
            for t, g in zip(w, grads):
                if not t.stop_gradient:
                    t.grad = ddg.to_tensor(g.astype(dtype))
        x = ddg.to_tensor(xs.astype(dtype))
        st = [ddg.to_tensor(a.astype(dtype)) for a in h0]
        if cell:
            loss = 0
            for t in range(T):
                outs = RNNSequence(mode)(x[t:t + 1], *st, *w)
                st = list(outs[1:])
                loss = loss + (outs[0] * outs[0]).sum()
        else:
            outs = RNNSequence(mode)(x, *st, *w)
            loss = (outs[0] * outs[0]).sum()
        loss.backward()
        return [None if t.stop_gradient else t.grad.numpy() for t in w]

    zeros = [np.zeros_like(a) for a in ws]
    before = [rng.standard_normal(a.shape) for a in ws]
    for cell in (True, False):
        for wanted in ((0, 1, 2, 3), (1,), (0, 2)):
            ref = run(np.float64, cell, wanted)
            for grads in (None, zeros, before):
                sunk.clear()
                got = run(np.float32, cell, wanted, grads)
                for i, (g, r) in enumerate(zip(got, ref)):
                    if i not in wanted:
                        assert g is None
                        continue
                    want = r if grads is None else r + grads[i]
                    np.testing.assert_allclose(g, want, rtol=0, atol=1e-5 * (np.abs(want).max() + 1))
                weights = len([i for i in wanted if i < 2])
                if grads is not None and weights and not cell:
                    assert any(sunk)              # the whole sequence's into .grad
                if cell and weights:
                    assert sum(sunk) >= (T - 2) * weights     # every step from the third on


# -- LSTM with a projection (proj_size) ------------------------------------------------------------------------
def _proj_arrays(rng, T, B, I, H, P, batch_major):
    x = rng.standard_normal((B, T, I) if batch_major else (T, B, I))
    return [x, rng.standard_normal((B, P)) * 0.5, rng.standard_normal((B, H)) * 0.5,
            rng.standard_normal((4 * H, I)) * 0.5, rng.standard_normal((4 * H, P)) * 0.5,
            rng.standard_normal(4 * H) * 0.3, rng.standard_normal(4 * H) * 0.3, rng.standard_normal((H, P)) * 0.5]


def _proj_reference(arrs, reverse, lengths):
    """The projected LSTM step by step in float64 numpy: (y [T, B, P], h_T, c_T)."""
    x, h, c, w_ih, w_hh, b_ih, b_hh, w_ho = arrs
    T, B = x.shape[:2]
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    ys = np.zeros((T, B, w_ho.shape[1]))
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        i, f, g, o = np.split(x[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=-1)
        cn = sig(f) * c + sig(i) * np.tanh(g)
        hn = (sig(o) * np.tanh(cn)) @ w_ho
        m = np.ones((B, 1)) if lengths is None else (t < np.asarray(lengths))[:, None].astype(float)
        ys[t] = hn * m
        h, c = hn * m + h * (1 - m), cn * m + c * (1 - m)
    return ys, h, c


@pytest.mark.parametrize("reverse,batch_major,lengths", list(itertools.product((False, True), (False, True),
                                                                               (None, (4, 1, 3)))))
def test_lstm_projection_forward_and_central_differences(reverse, batch_major, lengths):
    """The projected LSTM inside the op (h = (o * tanh(c)) @ W_ho, the recurrence on h):
    forward against a float64 numpy loop, every input's gradient against central
    differences, both directions, both layouts, with sequence lengths."""
    rng = np.random.default_rng(40)
    arrs = _proj_arrays(rng, 4, 3, 2, 5, 2, batch_major)
    lens = None if lengths is None else np.array(lengths)
    outs = RNNSequence("LSTM", reverse, batch_major, lens, proj=True)(*[ddg.to_tensor(a) for a in arrs])
    x = arrs[0].transpose(1, 0, 2) if batch_major else arrs[0]
    y, h, c = _proj_reference([x] + arrs[1:], reverse, lengths)
    np.testing.assert_allclose(outs[0].numpy(), y.transpose(1, 0, 2) if batch_major else y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(outs[1].numpy(), h, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(outs[2].numpy(), c, rtol=1e-12, atol=1e-12)

    def f(*ts):
        return ddg.concat([o.flatten() for o in RNNSequence("LSTM", reverse, batch_major, lens, proj=True)(*ts)])
    ts = [ddg.to_tensor(a, stop_gradient=False) for a in arrs]
    assert gradcheck(f, ts, atol=1e-6, rtol=1e-5)


def test_lstm_projection_second_order_and_float32():
    """Second derivatives (backward_graph: the composite with the projection), and float32
    against float64 with some inputs' gradients only."""
    rng = np.random.default_rng(41)
    arrs = _proj_arrays(rng, 3, 2, 2, 3, 2, True)

    def f(*ts):
        return ddg.concat([o.flatten() for o in RNNSequence("LSTM", True, True, np.array([3, 2]), proj=True)(*ts)])
    ts = [ddg.to_tensor(a, stop_gradient=False) for a in arrs]
    assert gradgradcheck(f, ts, atol=1e-5, rtol=1e-4)
    arrs = _proj_arrays(rng, 20, 5, 6, 16, 8, False)
    for wanted in ((0, 3, 4, 5, 6, 7), (7,), (1, 2, 4)):
        res = {}
        for dt in (np.float32, np.float64):
            t32 = [ddg.to_tensor(a.astype(dt), stop_gradient=i not in wanted) for i, a in enumerate(arrs)]
            outs = RNNSequence("LSTM", False, False, None, proj=True)(*t32)
            sum(((o * o) * (i + 1)).sum() for i, o in enumerate(outs)).backward()
            res[dt] = [o.numpy() for o in outs] + [t32[i].grad.numpy() for i in wanted]
            assert all(t32[i].grad is None for i in range(8) if i not in wanted)
        for g, r in zip(res[np.float32], res[np.float64]):
            assert g.dtype == np.float32
            np.testing.assert_allclose(g, r, rtol=0, atol=2e-5 * (np.abs(r).max() + 1))


def test_lstm_projection_layers_against_the_per_step_graph():
    """nn.LSTM with proj_size (2 layers, both directions, sequence lengths, given initial
    states): outputs and states against the same weights through the composite of ordinary
    ops (the fused op's reference), float64, and a gradient for every weight, the
    projections' too; LSTMCell with proj_size called step by step against the numpy loop."""
    from ddg.autograd.composite.recurrent import rnn_sequence
    rng = np.random.default_rng(42)
    net = nn.LSTM(4, 6, num_layers=2, direction="bidirect", proj_size=3)
    net.to(dtype="float64")
    x = rng.standard_normal((2, 5, 4))
    lens = np.array([5, 3])
    h0 = rng.standard_normal((4, 2, 3))
    c0 = rng.standard_normal((4, 2, 6))
    outs = {}
    for fused in (True, False):
        for p in net.parameters():
            p.clear_grad(False)
        if not fused:
            real = RNNSequence.forward

            def composite_forward(self, *arrays):           # the op's output from the composite
                ts = [ddg.to_tensor(a) for a in arrays]
                return tuple(o.numpy() for o in rnn_sequence(self, *ts))
            RNNSequence.forward = composite_forward
        try:
            xt = ddg.to_tensor(x, stop_gradient=False)
            y, (h, c) = net(xt, (ddg.to_tensor(h0), ddg.to_tensor(c0)), sequence_length=ddg.to_tensor(lens))
            if fused:
                (y * y).sum().backward()
                outs[fused] = [y.numpy(), h.numpy(), c.numpy(), xt.grad.numpy()] + \
                    [p.grad.numpy() for p in net.parameters()]
            else:
                outs[fused] = [y.numpy(), h.numpy(), c.numpy()]
        finally:
            if not fused:
                RNNSequence.forward = real
    for a, b in zip(outs[True][:3], outs[False]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert y.shape == [2, 5, 6] and h.shape == [4, 2, 3] and c.shape == [4, 2, 6]
    assert all(np.isfinite(g).all() and g.any() for g in outs[True][3:])   # every weight reached, w_ho too
    assert len(outs[True]) == 4 + 4 * 5
    cell = nn.LSTMCell(4, 6, proj_size=3)
    cell.to(dtype="float64")
    state = None
    for t in range(3):
        out, state = cell(ddg.to_tensor(x[:, t]), state)
    assert out.shape == [2, 3] and state[1].shape == [2, 6]
    ref = _proj_reference([x[:, :3].transpose(1, 0, 2), np.zeros((2, 3)), np.zeros((2, 6))] +
                          [p.numpy() for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh,
                                               cell.weight_ho)], False, None)
    np.testing.assert_allclose(out.numpy(), ref[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state[1].numpy(), ref[2], rtol=1e-12, atol=1e-12)
