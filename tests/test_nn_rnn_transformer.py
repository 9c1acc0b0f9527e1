"""Recurrent layers (SimpleRNN / LSTM / GRU and their cells) and attention / transformer
layers: forward against numpy step-by-step references (and torch's, in test_torch_reference.py),
gradients against central differences, shapes, masks, caches, a small training loop."""
import numpy as np
import pytest

import ddg
from ddg import nn
from ddg.autograd import gradcheck


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _t(a, grad=False):
    t = ddg.to_tensor(np.asarray(a))
    t.stop_gradient = not grad
    return t


def _np(t):
    return t.numpy().astype(np.float64)


# -- numpy references (Paddle's formulas, one direction, batch-major) -------------------------------------
def ref_lstm(x, h, c, wih, whh, bih, bhh):
    outs = []
    for t in range(x.shape[1]):
        g = x[:, t] @ wih.T + bih + h @ whh.T + bhh
        i, f, gg, o = np.split(g, 4, axis=-1)
        c = _sig(f) * c + _sig(i) * np.tanh(gg)
        h = _sig(o) * np.tanh(c)
        outs.append(h)
    return np.stack(outs, 1), h, c


def ref_gru(x, h, wih, whh, bih, bhh):
    outs = []
    for t in range(x.shape[1]):
        xr, xz, xc = np.split(x[:, t] @ wih.T + bih, 3, axis=-1)
        hr, hz, hc = np.split(h @ whh.T + bhh, 3, axis=-1)
        r, z = _sig(xr + hr), _sig(xz + hz)
        cand = np.tanh(xc + r * hc)
        h = z * h + (1 - z) * cand
        outs.append(h)
    return np.stack(outs, 1), h


def ref_rnn(x, h, wih, whh, bih, bhh, act):
    outs = []
    for t in range(x.shape[1]):
        h = act(x[:, t] @ wih.T + bih + h @ whh.T + bhh)
        outs.append(h)
    return np.stack(outs, 1), h


def _cell_w(cell):
    return [_np(p) for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]


@pytest.fixture(autouse=True)
def _seed():
    ddg.seed(7)
    yield


RNG = np.random.default_rng(0)


# -- recurrent layers --------------------------------------------------------------------------------------
def test_lstm_matches_numpy_reference_with_initial_states():
    m = nn.LSTM(3, 5)
    x = RNG.standard_normal((2, 4, 3)).astype("float32")
    h0 = RNG.standard_normal((1, 2, 5)).astype("float32")
    c0 = RNG.standard_normal((1, 2, 5)).astype("float32")
    out, (h, c) = m(_t(x), (_t(h0), _t(c0)))
    ro, rh, rc = ref_lstm(x, h0[0], c0[0], *_cell_w(m[0].cell))
    assert out.shape == [2, 4, 5] and h.shape == [1, 2, 5] and c.shape == [1, 2, 5]
    np.testing.assert_allclose(out.numpy(), ro, atol=1e-5)
    np.testing.assert_allclose(h.numpy()[0], rh, atol=1e-5)
    np.testing.assert_allclose(c.numpy()[0], rc, atol=1e-5)


def test_gru_and_simple_rnn_match_numpy_reference():
    x = RNG.standard_normal((3, 5, 4)).astype("float32")
    h0 = RNG.standard_normal((1, 3, 6)).astype("float32")
    g = nn.GRU(4, 6)
    out, h = g(_t(x), _t(h0))
    ro, rh = ref_gru(x, h0[0], *_cell_w(g[0].cell))
    np.testing.assert_allclose(out.numpy(), ro, atol=1e-5)
    np.testing.assert_allclose(h.numpy()[0], rh, atol=1e-5)
    for act, fn in (("tanh", np.tanh), ("relu", lambda v: np.maximum(v, 0))):
        r = nn.SimpleRNN(4, 6, activation=act)
        out, h = r(_t(x), _t(h0))
        ro, rh = ref_rnn(x, h0[0], *_cell_w(r[0].cell), fn)
        np.testing.assert_allclose(out.numpy(), ro, atol=1e-5)
        np.testing.assert_allclose(h.numpy()[0], rh, atol=1e-5)


def test_bidirectional_two_layer_shapes_and_reference():
    x = RNG.standard_normal((2, 5, 3)).astype("float32")
    m = nn.LSTM(3, 4, num_layers=2, direction="bidirect")
    out, (h, c) = m(_t(x))
    assert out.shape == [2, 5, 8] and h.shape == [4, 2, 4] and c.shape == [4, 2, 4]
    # layer 0 by hand: forward direction, and backward direction on the time-reversed input
    z = np.zeros((2, 4))
    of, hf, cf = ref_lstm(x, z, z, *_cell_w(m[0].cell_fw))
    ob, hb, cb = ref_lstm(x[:, ::-1], z, z, *_cell_w(m[0].cell_bw))
    l0 = np.concatenate([of, ob[:, ::-1]], -1)
    of1, hf1, _ = ref_lstm(l0, z, z, *_cell_w(m[1].cell_fw))
    ob1, hb1, _ = ref_lstm(l0[:, ::-1], z, z, *_cell_w(m[1].cell_bw))
    np.testing.assert_allclose(out.numpy(), np.concatenate([of1, ob1[:, ::-1]], -1), atol=1e-5)
    np.testing.assert_allclose(h.numpy(), np.stack([hf, hb, hf1, hb1]), atol=1e-5)
    g = nn.GRU(3, 4, num_layers=2, direction="bidirectional", time_major=True)
    out, h = g(_t(x.transpose(1, 0, 2)))
    assert out.shape == [5, 2, 8] and h.shape == [4, 2, 4]


def test_parameter_names_layouts_and_cells():
    m = nn.LSTM(3, 4, num_layers=2, direction="bidirect")
    keys = list(m.state_dict().keys())
    assert keys[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert "weight_ih_l1_reverse" in keys and "0.cell_fw.weight_ih" in keys and "1.cell_bw.bias_hh" in keys
    assert m.state_dict()["weight_ih_l1"].shape == [16, 8] and m.state_dict()["weight_hh_l0"].shape == [16, 4]
    assert len(m.parameters()) == 16  # the flat names alias the cells' parameters
    assert "0.cell.weight_ih" in nn.GRU(3, 4).state_dict()
    bound = 1 / np.sqrt(4)
    assert all(np.abs(p.numpy()).max() <= bound for p in m.parameters())
    # cells called directly agree with one step of the network
    x = RNG.standard_normal((2, 3)).astype("float32")
    cell = nn.LSTMCell(3, 4)
    h, (h2, c2) = cell(_t(x))
    rh = ref_lstm(x[:, None], np.zeros((2, 4)), np.zeros((2, 4)), *_cell_w(cell))[1]
    np.testing.assert_allclose(h.numpy(), rh, atol=1e-5)
    assert h2 is h and c2.shape == [2, 4]
    gcell = nn.GRUCell(3, 4)
    h0 = RNG.standard_normal((2, 4)).astype("float32")
    out, st = gcell(_t(x), _t(h0))
    np.testing.assert_allclose(out.numpy(), ref_gru(x[:, None], h0, *_cell_w(gcell))[1], atol=1e-5)
    # a custom cell through the generic RNN wrapper
    out, st = nn.RNN(nn.SimpleRNNCell(3, 4), is_reverse=True)(_t(RNG.standard_normal((2, 5, 3)).astype("float32")))
    assert out.shape == [2, 5, 4] and st.shape == [2, 4]


def test_bias_attr_false_and_bad_inputs():
    m = nn.GRU(3, 4, bias_ih_attr=False, bias_hh_attr=False)
    assert "bias_ih_l0" not in m.state_dict() and m[0].cell.bias_ih.stop_gradient
    assert np.all(m[0].cell.bias_hh.numpy() == 0)
    with pytest.raises(ValueError, match="direction"):
        nn.LSTM(3, 4, direction="sideways")
    with pytest.raises(ValueError, match=r"LSTM.*\[batch, time, 3\]"):
        nn.LSTM(3, 4)(_t(np.zeros((2, 5, 7), "float32")))
    with pytest.raises(ValueError, match="initial state has shape"):
        nn.GRU(3, 4)(_t(np.zeros((2, 5, 3), "float32")), _t(np.zeros((2, 2, 4), "float32")))


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_recurrent_layers_and_cells_name_a_non_float_input(dtype):
    """Integer or bool inputs to the built-in recurrent layers, their cells and the RNN
    wrapper over a built-in cell: a TypeError naming the layer and the dtype (before, a
    numpy casting error from inside the sequence op, or an error while building that error)."""
    x3, x2 = _t(np.zeros((2, 5, 3), dtype)), _t(np.zeros((2, 3), dtype))
    for make in (nn.LSTM, nn.GRU, nn.SimpleRNN):
        with pytest.raises(TypeError, match=rf"{make.__name__}: inputs must be floating point .*got {dtype}"):
            make(3, 4)(x3)
    for make in (nn.LSTMCell, nn.GRUCell, nn.SimpleRNNCell):
        with pytest.raises(TypeError, match=rf"{make.__name__}: inputs must be floating point .*got {dtype}"):
            make(3, 4)(x2)
        with pytest.raises(TypeError, match=rf"{make.__name__}: inputs must be floating point .*got {dtype}"):
            nn.RNN(make(3, 4))(x3)


@pytest.mark.parametrize("direction", ["forward", "bidirect"])
def test_sequence_length_masking(direction):
    m = nn.LSTM(3, 4, direction=direction)
    x = RNG.standard_normal((3, 6, 3)).astype("float32")
    lens = np.array([6, 2, 4])
    out, (h, c) = m(_t(x), sequence_length=_t(lens))
    for b, n in enumerate(lens):  # each sample as if run alone on its valid prefix
        ob, (hb, cb) = m(_t(x[b:b + 1, :n]))
        np.testing.assert_allclose(out.numpy()[b, :n], ob.numpy()[0], atol=1e-5)
        assert np.all(out.numpy()[b, n:] == 0)
        np.testing.assert_allclose(h.numpy()[:, b], hb.numpy()[:, 0], atol=1e-5)
        np.testing.assert_allclose(c.numpy()[:, b], cb.numpy()[:, 0], atol=1e-5)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "SimpleRNN"])
def test_gradcheck_tiny_rnn(kind):
    m = getattr(nn, kind)(2, 3, direction="bidirect").to(dtype="float64")
    x = _t(RNG.standard_normal((2, 3, 2)), grad=True)
    lens = _t(np.array([3, 2]))

    def f(x, *params):
        out, st = m(x, sequence_length=lens)
        last = st[0] if kind == "LSTM" else st
        return ddg.concat([out.reshape([-1]), last.reshape([-1])])

    assert gradcheck(f, [x] + m.parameters())


def test_lstm_trains_on_tiny_sequence_task():
    # predict the sum of a sequence's values: loss falls within 3 SGD steps
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (16, 5, 1)).astype("float32")
    y = x.sum(1)
    rnn, head = nn.LSTM(1, 8), nn.Linear(8, 1)
    params = rnn.parameters() + head.parameters()
    losses = []
    for _ in range(3):
        out, (h, c) = rnn(_t(x))
        loss = ((head(h[0]) - _t(y)) ** 2).mean()
        loss.backward()
        losses.append(float(loss.numpy()))
        for p in params:
            assert p.grad is not None
            p._data -= 0.3 * p.grad._data
            p.clear_grad()
    assert losses[-1] < losses[0]


# -- attention ---------------------------------------------------------------------------------------------
def ref_mha(m, q, k, v, mask_add=None):
    W = {n: (_np(getattr(m, n).weight), _np(getattr(m, n).bias)) for n in ("q_proj", "k_proj", "v_proj", "out_proj")}
    H, d = m.num_heads, m.head_dim

    def heads(a, n):
        p = a @ W[n][0] + W[n][1]
        return p.reshape(a.shape[0], a.shape[1], H, d).transpose(0, 2, 1, 3)

    Q, K, V = heads(q, "q_proj"), heads(k, "k_proj"), heads(v, "v_proj")
    s = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(d)
    if mask_add is not None:
        s = s + mask_add
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    o = (w @ V).transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], H * d)
    return o @ W["out_proj"][0] + W["out_proj"][1], w


def test_mha_matches_numpy_with_masks():
    m = nn.MultiHeadAttention(8, 2, kdim=5, vdim=3, need_weights=True)
    q = RNG.standard_normal((2, 4, 8)).astype("float32")
    k = RNG.standard_normal((2, 6, 5)).astype("float32")
    v = RNG.standard_normal((2, 6, 3)).astype("float32")
    out, w = m(_t(q), _t(k), _t(v))
    ro, rw = ref_mha(m, q, k, v)
    assert out.shape == [2, 4, 8] and w.shape == [2, 2, 4, 6]
    np.testing.assert_allclose(out.numpy(), ro, atol=1e-5)
    np.testing.assert_allclose(w.numpy(), rw, atol=1e-5)
    # bool mask: True = attend; broadcast over batch and heads
    keep = RNG.random((4, 6)) > 0.4
    keep[:, 0] = True
    out, w = m(_t(q), _t(k), _t(v), attn_mask=_t(keep))
    ro, rw = ref_mha(m, q, k, v, np.where(keep, 0.0, -1e9))
    np.testing.assert_allclose(out.numpy(), ro, atol=1e-5)
    assert np.all(w.numpy()[..., ~keep] < 1e-6)
    # float mask: added to the scores; int mask behaves like bool
    fmask = RNG.standard_normal((2, 1, 4, 6)).astype("float32")
    out, _ = m(_t(q), _t(k), _t(v), attn_mask=_t(fmask))
    np.testing.assert_allclose(out.numpy(), ref_mha(m, q, k, v, fmask)[0], atol=1e-5)
    out_i, _ = m(_t(q), _t(k), _t(v), attn_mask=_t(keep.astype("int64")))
    out_b, _ = m(_t(q), _t(k), _t(v), attn_mask=_t(keep))
    np.testing.assert_allclose(out_i.numpy(), out_b.numpy(), atol=1e-6)
    assert [n for n, _ in m.named_sublayers()] == ["q_proj", "k_proj", "v_proj", "out_proj"]
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiHeadAttention(6, 4)


def test_mha_gradcheck_and_self_attention_default():
    m = nn.MultiHeadAttention(4, 2).to(dtype="float64")
    x = _t(RNG.standard_normal((2, 3, 4)), grad=True)
    mask = _t(np.tril(np.ones((3, 3), bool)))
    assert gradcheck(lambda x, *p: m(x, attn_mask=mask), [x] + m.parameters())
    np.testing.assert_allclose(m(x).numpy(), m(x, x, x).numpy())


def test_mha_incremental_cache_matches_causal_full_pass():
    m = nn.MultiHeadAttention(8, 2)
    x = RNG.standard_normal((2, 5, 8)).astype("float32")
    full = m(_t(x), attn_mask=_t(np.tril(np.ones((5, 5), bool)))).numpy()
    cache = m.gen_cache(_t(x))
    assert cache.k.shape == [2, 2, 0, 4]
    steps = []
    for t in range(5):
        o, cache = m(_t(x[:, t:t + 1]), cache=cache)
        steps.append(o.numpy())
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    mem = RNG.standard_normal((2, 7, 8)).astype("float32")
    static = m.gen_cache(_t(mem), type=nn.MultiHeadAttention.StaticCache)
    o, same = m(_t(x), cache=static)
    assert same is static
    np.testing.assert_allclose(o.numpy(), m(_t(x), _t(mem), _t(mem)).numpy(), atol=1e-5)


def test_scaled_dot_product_attention():
    F = nn.functional
    q = RNG.standard_normal((2, 4, 3, 5))  # [batch, seq, heads, head_dim]
    k = RNG.standard_normal((2, 6, 3, 5))
    v = RNG.standard_normal((2, 6, 3, 5))
    out = F.scaled_dot_product_attention(_t(q), _t(k), _t(v), is_causal=True)
    Q, K, V = (a.transpose(0, 2, 1, 3) for a in (q, k, v))
    s = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(5) + np.where(np.tril(np.ones((4, 6)), 2) > 0, 0, -1e9)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    np.testing.assert_allclose(out.numpy(), (w @ V).transpose(0, 2, 1, 3), atol=1e-10)
    qt = _t(q, grad=True)
    assert gradcheck(lambda a: F.scaled_dot_product_attention(a, _t(k), _t(v)), [qt])


def test_causal_attention_skips_the_masked_products(monkeypatch):
    """is_causal without another mask: the op multiplies row blocks only with the keys they
    may see. Same values and gradients as the full products under the same causal mask
    given as attn_mask (also with dropout, under one seed), the values against float64
    numpy (float32 too), the gradients against central differences."""
    from ddg.autograd.ops.nn_ops import Attention
    F = nn.functional
    used = []
    blocks = Attention._causal_blocks
    monkeypatch.setattr(Attention, "_causal_blocks", staticmethod(lambda lq, lk: used.append(blocks(lq, lk))
                                                                  or used[-1]))
    rng = np.random.default_rng(11)
    q, k, v = rng.standard_normal((2, 70, 2, 3)), rng.standard_normal((2, 90, 2, 3)), rng.standard_normal((2, 90, 2, 4))
    g = rng.standard_normal((2, 70, 2, 4))
    allowed = np.tril(np.ones((70, 90), bool), 20)
    Q, K, V = (a.transpose(0, 2, 1, 3) for a in (q, k, v))
    s = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(3) + np.where(allowed, 0, -1e9)
    w = np.exp(s - s.max(-1, keepdims=True))
    ref = ((w / w.sum(-1, keepdims=True)) @ V).transpose(0, 2, 1, 3)
    for p in (0.0, 0.3):
        got = {}
        for how in ("causal", "mask"):
            ts = [_t(a, grad=True) for a in (q, k, v)]
            ddg.seed(5)
            out = F.scaled_dot_product_attention(*ts, dropout_p=p, is_causal=how == "causal",
                                                 attn_mask=None if how == "causal" else _t(allowed))
            (out * _t(g)).sum().backward()
            got[how] = [out.numpy()] + [t.grad.numpy() for t in ts]
        for a, b in zip(got["causal"], got["mask"]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        if p == 0.0:
            np.testing.assert_allclose(got["causal"][0], ref, atol=1e-10)
    assert used and used[0] == [(0, 35, 55), (35, 70, 90)]
    out32 = F.scaled_dot_product_attention(*[_t(a.astype(np.float32)) for a in (q, k, v)], is_causal=True)
    np.testing.assert_allclose(out32.numpy(), ref, atol=2e-5)
    small = [_t(rng.standard_normal((1, 64, 1, 1)), grad=True) for _ in range(3)]
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), small)
    assert blocks(63, 63) is None
    from ddg.nn.functional.attention import _causal_mask
    m = _causal_mask(70, 90, np.zeros(1, np.float32))     # built once per shape and dtype, read-only
    assert m is _causal_mask(70, 90, np.zeros(1, np.float32)) and not m.flags.writeable
    np.testing.assert_array_equal(m == 0, allowed)
    assert m.dtype == np.float32 and _causal_mask(70, 90, np.zeros(1)).dtype == np.float64


def test_bool_mask_in_float16_stays_finite():
    """A bool attention mask made additive in float16 uses -65504 (1e9 is inf there, and
    the kept positions' 0 * inf was NaN): values and gradients finite and close to the
    float32 ones."""
    F = nn.functional
    rng = np.random.default_rng(12)
    q, k, v = (rng.standard_normal((2, 5, 2, 4)).astype(np.float32) for _ in range(3))
    mask = _t(np.tril(np.ones((5, 5), bool)))
    got = {}
    for dt in ("float16", "float32"):
        ts = [_t(a).astype(dt) for a in (q, k, v)]
        for t in ts:
            t.stop_gradient = False
        out = F.scaled_dot_product_attention(*ts, attn_mask=mask)
        out.astype("float32").sum().backward()
        got[dt] = [out.astype("float32").numpy()] + [t.grad.astype("float32").numpy() for t in ts]
    for a, b in zip(got["float16"], got["float32"]):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, atol=2e-2)


# -- transformer layers (need LayerNorm and Dropout from ddg.nn) -------------------------------------------


@pytest.mark.parametrize("normalize_before", [False, True])
def test_transformer_encoder_shapes_and_grads(normalize_before):
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, normalize_before=normalize_before)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8) if normalize_before else None)
    names = [n for n, _ in layer.named_children()]
    for n in ("self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1", "dropout2"):
        assert n in names
    assert enc.layers[0] is layer and len(enc.layers) == 2
    assert "layers.1.self_attn.q_proj.weight" in enc.state_dict()
    x = _t(RNG.standard_normal((2, 5, 8)).astype("float32"), grad=True)
    mask = _t(RNG.random((2, 1, 5, 5)) > 0.2)
    out = enc(x, src_mask=mask)
    assert out.shape == [2, 5, 8]
    (out * out).sum().backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None and np.isfinite(p.grad.numpy()).all(), name
    assert x.grad is not None
    enc.eval()
    a, b = enc(x).numpy(), enc(x).numpy()
    np.testing.assert_allclose(a, b)  # no dropout in eval mode


def test_transformer_decoder_and_full_model():
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=16,
                           dropout=0.0)
    src = _t(RNG.standard_normal((2, 6, 8)).astype("float32"))
    tgt = _t(RNG.standard_normal((2, 4, 8)).astype("float32"))
    tgt_mask = model.generate_square_subsequent_mask(4)
    assert tgt_mask.shape == [4, 4] and np.isneginf(tgt_mask.numpy()[0, 1])
    out = model(src, tgt, tgt_mask=tgt_mask)
    assert out.shape == [2, 4, 8]
    out.mean().backward()
    assert all(p.grad is not None for p in model.parameters())
    # incremental decoding with caches reproduces the masked full pass
    model.eval()
    memory = model.encoder(src)
    full = model.decoder(tgt, memory, tgt_mask=tgt_mask).numpy()
    cache = model.decoder.gen_cache(memory)
    steps = []
    for t in range(4):
        o, cache = model.decoder(tgt[:, t:t + 1], memory, cache=cache)
        steps.append(o.numpy())
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)


def test_rnn_dropout_between_layers():
    m = nn.GRU(3, 4, num_layers=2, dropout=0.5)
    x = _t(RNG.standard_normal((2, 5, 3)).astype("float32"))
    m.eval()
    a, b = m(x)[0].numpy(), m(x)[0].numpy()
    np.testing.assert_allclose(a, b)
    m.train()
    assert not np.allclose(m(x)[0].numpy(), a)


def test_transformer_encoder_trains():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 4, 8)).astype("float32")
    y = x[:, ::-1].copy()
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 1)
    losses = []
    for _ in range(3):
        loss = ((enc(_t(x)) - _t(y)) ** 2).mean()
        loss.backward()
        losses.append(float(loss.numpy()))
        for p in enc.parameters():
            p._data -= 0.05 * p.grad._data
            p.clear_grad()
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("mask_shape", [None, (2, 1, 4, 5)])
def test_attention_op_splitting_heads_matches_split_op_and_differences(mask_shape):
    from ddg.autograd.ops.nn_ops import Attention
    from ddg.autograd.gradcheck import gradgradcheck
    rng = np.random.default_rng(12)
    arrs = [rng.standard_normal((2, 4, 6)), rng.standard_normal((2, 5, 6)), rng.standard_normal((2, 5, 4))]
    if mask_shape is not None:
        arrs.append(rng.standard_normal(mask_shape))
    ts = [_t(a, grad=True) for a in arrs]
    out, w = Attention(0.6, heads=2)(*ts)
    split = [a.reshape(2, a.shape[1], 2, -1).transpose(0, 2, 1, 3) for a in arrs[:3]]
    ro, rw = Attention(0.6)(*[_t(a) for a in split + arrs[3:]])
    assert out.shape == [2, 4, 4] and w.shape == [2, 2, 4, 5]
    np.testing.assert_allclose(out.numpy(), ro.numpy().transpose(0, 2, 1, 3).reshape(2, 4, 4), rtol=1e-12)
    np.testing.assert_allclose(w.numpy(), rw.numpy(), rtol=1e-12)

    def both(*xs):
        o, wt = Attention(0.6, heads=2)(*xs)
        return ddg.concat([(o * o).flatten(), wt.flatten()])
    assert gradcheck(both, ts, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda *xs: Attention(0.6, heads=2)(*xs)[0], ts, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="2 heads"):
        Attention(0.6, heads=2)(_t(arrs[0][..., :5]), _t(arrs[1][..., :5]), ts[2])


@pytest.mark.parametrize("heads", [None, 2])
def test_attention_op_dropout_matches_composite_and_differences(heads):
    # dropout on the weights inside the op: the draw of F.dropout (same seed, same masks),
    # so the op equals matmul/softmax/dropout/matmul; central differences with the mask
    # fixed by reseeding; first and second order
    from ddg.autograd.ops.nn_ops import Attention
    from ddg.autograd.gradcheck import gradgradcheck
    rng = np.random.default_rng(8)
    parts = [rng.standard_normal((2, 5, 4)) for _ in range(3)]
    mask = rng.standard_normal((2, 1, 5, 5))
    split = [a.reshape(2, 5, 2, 2).transpose(0, 2, 1, 3) for a in parts]

    def op(*xs):
        ddg.seed(11)
        return Attention(0.5, heads=heads, dropout=0.4)(*xs)
    ins = [_t(a if heads else a.copy(), grad=True) for a in (parts if heads else split)]
    out, w = op(*ins, _t(mask))
    ddg.seed(11)
    q, k, v = (_t(a) for a in split)
    rw = nn.functional.dropout(nn.functional.softmax(q.matmul(k, transpose_y=True) * 0.5 + _t(mask), axis=-1), 0.4)
    ro = rw.matmul(v)
    if heads:
        ro = ro.transpose([0, 2, 1, 3]).reshape([2, 5, 4])
    np.testing.assert_allclose(w.numpy(), rw.numpy(), rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), ro.numpy(), rtol=1e-12, atol=1e-15)
    assert (w.numpy() == 0).mean() > 0.2
    ins.append(_t(mask, grad=True))

    def both(*xs):
        o, wt = op(*xs)
        return ddg.concat([(o * o).flatten(), wt.flatten()])
    assert gradcheck(both, ins, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda *xs: op(*xs)[0], ins, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("mask_shape", [None, (3, 2, 4, 5), (3, 1, 1, 5), (4, 5), (1, 2, 4, 5)])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_attention_op_chunked_batch_matches_whole_and_differences(monkeypatch, mask_shape, dropout):
    """A numpy heads attention run chunk by chunk along the batch (``CHUNK_BYTES`` small:
    one or two batch rows per chunk) gives the whole-batch values, weights and every
    gradient (the weights' gradient too; a mask with and without the batch axis; dropout
    drawn as one); a mask that wants its gradient takes the whole-batch backward; float64
    central differences on the chunked path."""
    from ddg.autograd.ops.nn_ops import Attention
    monkeypatch.setattr(Attention, "FUSED_MAX_L", 0)      # float32 without a mask: the fused kernel's (below)
    rng = np.random.default_rng(21)
    arrs = [rng.standard_normal((3, 4, 6)), rng.standard_normal((3, 5, 6)), rng.standard_normal((3, 5, 4))]
    if mask_shape is not None:
        arrs.append(rng.standard_normal(mask_shape))
    gw = rng.standard_normal((3, 2, 4, 5))

    chunks = []
    real = Attention._chunked_backward

    def spy(self, *args):
        chunks.append(self.chunk)
        return real(self, *args)
    monkeypatch.setattr(Attention, "_chunked_backward", spy)

    def run(chunk_bytes, dtype, mask_grad):
        monkeypatch.setattr(Attention, "CHUNK_BYTES", chunk_bytes)
        ts = [_t(a.astype(dtype), grad=i < 3 or mask_grad) for i, a in enumerate(arrs)]
        ddg.seed(5)
        out, w = Attention(0.7, heads=2, dropout=dropout)(*ts)
        loss = (out * out).sum() + (w * _t(gw.astype(dtype))).sum()
        return [out.numpy(), w.numpy()] + [g.numpy() for g in ddg.grad(loss, ts if mask_grad else ts[:3])]

    for mask_grad in (False, True) if mask_shape else (False,):
        for dtype, tol in ((np.float64, 1e-12), (np.float32, 2e-6)):
            chunks.clear()
            whole = run(1 << 30, dtype, mask_grad)
            assert chunks == []
            part = run(2 * 4 * 5 * np.dtype(dtype).itemsize, dtype, mask_grad)      # one batch row per chunk
            assert chunks == ([] if mask_grad else [1])     # the mask's gradient: the whole-batch backward
            for a, e in zip(part, whole):
                np.testing.assert_allclose(a, e, rtol=tol, atol=tol)
    monkeypatch.setattr(Attention, "CHUNK_BYTES", 2 * 2 * 4 * 5 * 8)          # two rows, then one
    ins = [_t(a, grad=i < 3) for i, a in enumerate(arrs)]
    chunks.clear()

    def both(*xs):
        ddg.seed(5)
        o, wt = Attention(0.7, heads=2, dropout=dropout)(*xs)
        return ddg.concat([(o * o).flatten(), wt.flatten()])
    assert gradcheck(both, ins, atol=1e-6, rtol=1e-5)
    assert chunks and set(chunks) == {2}


@pytest.mark.parametrize("batch,heads,lq,lk,d,dv", [(2, 2, 4, 5, 3, 2), (3, 4, 32, 32, 16, 16), (2, 3, 9, 25, 24, 40),
                                                    (1, 1, 33, 70, 64, 8), (2, 2, 26, 3, 17, 33), (2, 2, 10, 9, 16, 7),
                                                    (1, 2, 64, 40, 130, 72)])
@pytest.mark.parametrize("dropout", [0.0, 0.4])
@pytest.mark.parametrize("needs", [(True, True, True), (False, True, False), (True, False, True), (False, False, True)])
@pytest.mark.parametrize("mask", [None, "full", "keys", "rows", "heads", "causal"])
def test_attention_fused_kernel_against_float64(monkeypatch, batch, heads, lq, lk, d, dv, dropout, needs, mask):
    """The fused kernel (float32 heads attention) against the float64 path: values, weights
    and the gradients of whichever inputs want one, from the values' and the weights'
    gradients, with dropout drawn as the other path draws it; odd lengths and head sizes (row
    tails, masked column blocks), Lq != Lk, dv != d; additive masks of every broadcast
    (whole, a padding mask [batch, 1, 1, Lk], one [Lq, Lk] for all, per head [1, heads,
    Lq, Lk]) and the causal one (its zero weights skipped where Lk >= Lq, rows with no key
    left uniform where Lk < Lq, as numpy's softmax makes them). Taken exactly where
    ``_fuses`` says, and its weights feed a second-order gradient as the other path's do."""
    from ddg.autograd.ops.nn_ops import Attention
    from ddg.tensor import attention_kernels as AK
    calls = []
    real = AK.forward

    def spy(*args):
        calls.append(args[3])
        return real(*args)
    monkeypatch.setattr(AK, "forward", spy)
    rng = np.random.default_rng(lq * 31 + d)
    arrs = [rng.standard_normal((batch, lq, heads * d)), rng.standard_normal((batch, lk, heads * d)),
            rng.standard_normal((batch, lk, heads * dv))]
    gw = rng.standard_normal((batch, heads, lq, lk))
    mshape = {None: None, "full": (batch, heads, lq, lk), "keys": (batch, 1, 1, lk), "rows": (lq, lk),
              "heads": (1, heads, lq, lk), "causal": (lq, lk)}[mask]
    m = None if mask is None else rng.standard_normal(mshape) * 2
    causal = mask == "causal"
    if causal:
        m = np.where(np.arange(lk)[None, :] > np.arange(lq)[:, None] + lk - lq, -1e9, 0.0)

    def run(dtype):
        ts = [_t(a.astype(dtype), grad=need) for a, need in zip(arrs, needs)]
        ddg.seed(3)
        out, w = Attention(0.45, heads=heads, dropout=dropout, causal=causal)(
            *ts, *([] if m is None else [_t(m.astype(dtype))]))
        loss = (out * out).sum() + (w * _t(gw.astype(dtype))).sum()
        wanted = [t for t, need in zip(ts, needs) if need]
        return [out.numpy(), w.numpy()] + [g.numpy() for g in ddg.grad(loss, wanted)]

    if causal and lk < lq:
        # queries that see no key: the mask alone (-1e9) in every score, whose float32 sum
        # drops the score (uniform weights) where float64 keeps it: the float32 numpy path
        monkeypatch.setattr(Attention, "FUSED_MAX_L", 0)
        ref = run(np.float32)
        monkeypatch.undo()
        monkeypatch.setattr(AK, "forward", spy)
    else:
        ref = run(np.float64)
    assert calls == []
    got = run(np.float32)
    assert calls == [heads]
    for a, e in zip(got, ref):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=2e-5 * max(1.0, np.abs(e).max()))
    if needs[0] and not (causal and lk < lq):        # second order through the fused forward's saved weights
        def grad_norm(dtype):
            q, k, v = (_t(a.astype(dtype), grad=True) for a in arrs)
            ddg.seed(3)
            extra = [] if m is None else [_t(m.astype(dtype))]
            out, _ = Attention(0.45, heads=heads, dropout=dropout, causal=causal)(q, k, v, *extra)
            gq, = ddg.grad((out * out).sum(), [q], create_graph=True)
            return ddg.grad((gq * gq).sum(), [k])[0].numpy()
        calls.clear()
        e = grad_norm(np.float64)
        a = grad_norm(np.float32)
        assert calls == [heads]
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(e).max()))


@pytest.mark.parametrize("m,width,c0,n", [(8, 8, 0, 8), (32, 768, 192, 192), (37, 300, 75, 75), (5, 40, 3, 13),
                                           (16, 17, 1, 16), (9, 64, 56, 8)])
def test_attention_head_transpose_blocks_and_edges(m, width, c0, n):
    """The fused kernel's head transpose (``transpose32`` of a head's column slice: 8x8
    shuffle blocks, element-by-element edges) is exactly ``a[:, c0:c0+n].T``, whatever the
    sizes' remainders mod 8."""
    from ddg.tensor import gemm_kernels as gk
    a = np.random.default_rng(m * width + n).standard_normal((m, width)).astype(np.float32)
    out = np.full((n, m), np.nan, np.float32)
    gk.transpose32(a[:, c0:c0 + n], out)
    np.testing.assert_array_equal(out, a[:, c0:c0 + n].T)


def test_attention_fused_kernel_gate(monkeypatch):
    """The fused kernel takes float32 numpy heads attention within FUSED_MAX_L positions and
    FUSED_MAX_D-wide heads (short sequences only with narrow heads, long ones with wider
    heads), with one BLAS thread, and without AVX-512 within FUSED_AVX2_MAX_L positions and
    FUSED_MAX_D-wide heads; float64, longer sequences, wider heads, a mask that wants its
    gradient, or the kernels switched off keep the numpy products; a mask that does not
    broadcast is named."""
    from ddg.autograd.ops.nn_ops import Attention
    from ddg.tensor import attention_kernels as AK
    from ddg.tensor import gemm
    calls = []
    real = AK.forward
    monkeypatch.setattr(AK, "forward", lambda *a: (calls.append(a[0].shape), real(*a))[1])
    rng = np.random.default_rng(4)

    def fused(lq, lk, d, mask=False, dtype=np.float32, mask_grad=False, causal=False, heads=2):
        calls.clear()
        q, k, v = (_t(rng.standard_normal((2, n, heads * d)).astype(dtype), grad=True) for n in (lq, lk, lk))
        args = (q, k, v) + ((_t(np.zeros((lq, lk), dtype), grad=mask_grad),) if mask else ())
        Attention(0.3, heads=heads, causal=causal)(*args)
        return bool(calls)
    top_l, top_d = Attention.FUSED_MAX_L, Attention.FUSED_MAX_D
    assert fused(7, 9, 5) and fused(top_l, top_l, top_d) and fused(8, 8, 4, mask=True)
    assert not fused(top_l + 1, 8, 4) and not fused(8, top_l + 1, 4) and not fused(8, 8, top_d + 1)
    # short sequences only with narrow heads
    min_l, narrow = Attention.FUSED_MIN_L, Attention.FUSED_NARROW_D
    assert fused(min_l - 1, 3, narrow) and fused(2, min_l, top_d) and not fused(min_l - 1, min_l - 1, narrow + 1)
    # wider heads from FUSED_WIDE_MIN_L positions, not where a projection's rows are a multiple of 4 KB
    wide_l, wide_d = Attention.FUSED_WIDE_MIN_L, Attention.FUSED_WIDE_D
    assert fused(wide_l, 5, wide_d) and not fused(wide_l - 1, wide_l - 1, top_d + 1)
    assert not fused(wide_l, wide_l, wide_d + 1) and not fused(wide_l, 5, 512)
    assert fused(wide_l, 5, 96, heads=8) and not fused(wide_l, 5, 128, heads=8)      # rows of 3 KB, of 4 KB
    assert not fused(8, 8, 4, dtype=np.float64) and not fused(8, 8, 4, mask=True, mask_grad=True)
    # a causal mask at any length (below 64 queries and from there, where the numpy path cuts row blocks)
    assert fused(63, 63, 4, mask=True, causal=True) and fused(96, 96, 4, mask=True, causal=True)
    with pytest.raises(ValueError, match="mask"):
        qkv = [_t(np.zeros((2, 5, 8), np.float32)) for _ in range(3)]
        Attention(0.3, heads=2)(*qkv, _t(np.zeros((3, 5), np.float32)))
    # without AVX-512 (the products on numpy's BLAS) up to FUSED_AVX2_MAX_L positions and no wide heads
    monkeypatch.setattr(gemm, "ENABLED", False)
    avx2_l = Attention.FUSED_AVX2_MAX_L
    assert fused(min_l, avx2_l, top_d) and fused(min_l - 1, 3, narrow) and fused(96, 96, 4, mask=True, causal=True)
    assert not fused(avx2_l + 1, 8, 4) and not fused(8, avx2_l + 1, 4) and not fused(wide_l, 5, top_d + 1)
    assert not fused(min_l - 1, min_l - 1, narrow + 1) and not fused(8, 8, 4, dtype=np.float64)
    # DDG_CPU_GEMM=0: numpy's products everywhere
    monkeypatch.setattr(gemm, "FUSED", False)
    assert not fused(8, 8, 4) and not fused(min_l, min_l, top_d)


def test_attention_fused_kernel_bshd_and_read_only_inputs(monkeypatch):
    """scaled_dot_product_attention's [batch, L, heads, d] strided views and read-only
    arrays reach the fused kernel (as writeable copies) and give float64's results."""
    from ddg.autograd.ops.nn_ops import Attention
    from ddg.tensor import attention_kernels as AK
    calls = []
    real = AK.forward
    monkeypatch.setattr(AK, "forward", lambda *a: (calls.append((a[3], a[0].flags.writeable)), real(*a))[1])
    rng = np.random.default_rng(8)
    packed = rng.standard_normal((2, 6, 3, 2, 5))          # [batch, L, (q, k, v), heads, d]

    def sdpa(dtype):
        pk = _t(packed.astype(dtype), grad=True)
        out = ddg.nn.functional.scaled_dot_product_attention(pk[:, :, 0], pk[:, :, 1], pk[:, :, 2])
        return [out.numpy(), ddg.grad((out * out).sum(), [pk])[0].numpy()]
    ref = sdpa(np.float64)
    assert calls == []
    got = sdpa(np.float32)
    assert calls == [(2, True)]
    for a, e in zip(got, ref):
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=2e-5)

    arrs = [rng.standard_normal((2, n, 10)) for n in (6, 7, 7)]
    g = rng.standard_normal((2, 6, 10))

    def op(dtype):
        ins = [a.astype(dtype) for a in arrs]
        for a in ins:
            a.flags.writeable = False
        f = Attention(0.5, heads=2)
        f.needs = (True, True, True)
        out, w = f.forward(*ins)
        return [out, w] + list(f.backward((g.astype(dtype), None)))
    calls.clear()
    ref = op(np.float64)
    got = op(np.float32)
    assert calls == [(2, True)]
    for a, e in zip(got, ref):
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=2e-5)


def test_attention_op_bshd_layout_and_sdpa_differences():
    # [batch, L, heads, d] inputs (scaled_dot_product_attention's layout, here strided views
    # of one packed array as unbind gives them, v with its own head size) against the op on
    # transposed copies; central differences of q, k, v and a float mask, first and second order
    from ddg.autograd.ops.nn_ops import Attention
    from ddg.autograd.gradcheck import gradgradcheck
    rng = np.random.default_rng(9)
    packed = rng.standard_normal((2, 4, 2, 2, 3))
    q, k = packed[:, :, 0], packed[:, :, 1]
    v, mask = rng.standard_normal((2, 4, 2, 5)), rng.standard_normal((2, 1, 4, 4))
    out, w = Attention(0.6, bshd=True)(_t(q), _t(k), _t(v), _t(mask))
    ro, rw = Attention(0.6)(*[_t(a.transpose(0, 2, 1, 3).copy()) for a in (q, k, v)], _t(mask))
    assert out.shape == [2, 4, 2, 5]
    np.testing.assert_allclose(out.numpy(), ro.numpy().transpose(0, 2, 1, 3), rtol=1e-12)
    np.testing.assert_allclose(w.numpy(), rw.numpy(), rtol=1e-12)
    ts = [_t(a, grad=True) for a in (q, k, v, mask)]
    F = nn.functional
    assert gradcheck(lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c[..., :3], attn_mask=m, is_causal=True),
                     ts, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda *xs: Attention(0.6, bshd=True)(*xs)[0], ts, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="heads, d"):
        Attention(0.6, bshd=True)(_t(q[..., 0]), _t(k), _t(v))


class _PlainCell(nn.RNNCellBase):
    """A user's cell (not a built-in one): the RNN wrapper's generic per-step path."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3 + 4, 4)

    @property
    def state_shape(self):
        return (4,)

    def forward(self, x, h):
        h = ddg.tanh(self.lin(ddg.concat([x, h], axis=-1)))
        return h, h


@pytest.mark.parametrize("lengths", [[6, 1], [-1, 2], [2, 9]])
def test_sequence_lengths_outside_the_steps_are_an_error(lengths):
    """sequence_length past the input's 5 steps or negative: a ValueError naming the range, in
    the built-in layers (both directions), the RNN wrapper over a built-in cell and over a
    user's cell (Paddle 3.3.1 corrupted its heap on a length past the steps). Lengths 0 and 5
    run."""
    x = _t(np.zeros((2, 5, 3), "float32"))
    lens = ddg.to_tensor(np.array(lengths))
    for net in (nn.LSTM(3, 4), nn.GRU(3, 4, direction="bidirect"), nn.SimpleRNN(3, 4), nn.RNN(nn.GRUCell(3, 4)),
                nn.RNN(_PlainCell())):
        with pytest.raises(ValueError, match=r"sequence_length must lie in \[0, 5\]"):
            net(x, sequence_length=lens)
        net(x, sequence_length=ddg.to_tensor(np.array([0, 5])))
