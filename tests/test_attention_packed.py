"""Self-attention's q, k and v projections as one product (ops.nn_ops.PackedLinear) and the
attention op reading them packed side by side: forward against numpy, gradients against
central differences (first and second order), and MultiHeadAttention's packed path against
its three Linear layers (masks, weights, dropout, no biases, hooks, float32)."""
import numpy as np
import pytest

import ddg
from ddg import nn
from ddg.autograd import gradcheck, gradgradcheck
from ddg.autograd.ops.nn_ops import Attention, PackedLinear

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("widths,bias", [((4, 4, 4), True), ((2, 3, 5), False)])
def test_packed_linear_matches_numpy_and_central_differences(widths, bias):
    x = RNG.standard_normal((2, 3, 4))
    ws = [RNG.standard_normal((4, w)) for w in widths]
    bs = [RNG.standard_normal(w) for w in widths] if bias else []
    ts = [ddg.to_tensor(a, stop_gradient=False) for a in [x] + ws + bs]
    out = PackedLinear(3)(*ts)
    ref = np.concatenate([x @ w + (bs[i] if bias else 0) for i, w in enumerate(ws)], axis=-1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-13, atol=1e-13)

    def f(*xs):
        return PackedLinear(3)(*xs) ** 2
    assert gradcheck(f, ts, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(f, ts, atol=1e-5, rtol=1e-4)
    ts[2].stop_gradient = True          # one weight without gradient
    out = PackedLinear(3)(*ts)
    out.sum().backward()
    assert ts[2].grad is None and ts[1].grad is not None


def test_packed_linear_rejects_bad_shapes():
    x = ddg.ones([2, 4])
    with pytest.raises(ValueError, match="packed linear"):
        PackedLinear(2)(x, ddg.ones([4, 3]), ddg.ones([5, 3]))
    with pytest.raises(ValueError, match="packed linear"):
        PackedLinear(2)(x, ddg.ones([4, 3]), ddg.ones([4, 3]), ddg.ones([3]), ddg.ones([2]))
    with pytest.raises(TypeError, match="packed linear"):
        PackedLinear(2)(x, ddg.ones([4, 3]))


@pytest.mark.parametrize("mask", [None, (1, 1, 4, 4), (2, 2, 4, 4)])
def test_packed_attention_op_matches_unpacked_and_central_differences(mask):
    qkv = RNG.standard_normal((2, 4, 3 * 6))
    e = 6
    arrs = [qkv] + ([RNG.standard_normal(mask)] if mask else [])
    ts = [ddg.to_tensor(a, stop_gradient=False) for a in arrs]
    out, w = Attention(0.4, 2, packed=True)(*ts)
    split = [ddg.to_tensor(qkv[..., i * e:(i + 1) * e]) for i in range(3)]
    ref_out, ref_w = Attention(0.4, 2)(*split, *ts[1:])
    np.testing.assert_allclose(out.numpy(), ref_out.numpy(), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(w.numpy(), ref_w.numpy(), rtol=1e-13, atol=1e-14)

    def both(*xs):
        o, wt = Attention(0.4, 2, packed=True)(*xs)
        return ddg.concat([o.flatten(), wt.flatten()])
    assert gradcheck(both, ts, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda *xs: Attention(0.4, 2, packed=True)(*xs)[0], ts, atol=1e-5, rtol=1e-4)
    # only the weights get a gradient: v's part of the packed gradient is zero
    assert gradcheck(lambda *xs: Attention(0.4, 2, packed=True)(*xs)[1], ts, atol=1e-6, rtol=1e-5)
    w = Attention(0.4, 2, packed=True)(*ts)[1]
    ts[0].clear_gradient()
    (w * w).sum().backward()
    assert (ts[0].grad.numpy()[..., 2 * e:] == 0).all()
    with pytest.raises(ValueError, match="packed"):
        Attention(0.4, 4, packed=True)(ddg.to_tensor(RNG.standard_normal((2, 4, 18))))


def _mha_run(mha, x, mask=None, seed=None):
    if seed is not None:
        ddg.seed(seed)
    xt = ddg.to_tensor(x, stop_gradient=False)
    got = mha(xt, attn_mask=mask)
    out, weights = got if isinstance(got, tuple) else (got, None)
    for p in mha.parameters():
        p.clear_gradient()
    loss = (out * out).sum() + ((weights * weights).sum() if weights is not None else 0)
    loss.backward()
    return [out.numpy()] + ([weights.numpy()] if weights is not None else []) + [xt.grad.numpy()] + \
        [p.grad.numpy() for p in mha.parameters()]


@pytest.mark.parametrize("case", ["bool_mask_weights", "float_mask", "no_bias", "dropout"])
def test_multi_head_attention_packed_path_matches_three_linears(case, monkeypatch):
    ddg.seed(5)
    mha = nn.MultiHeadAttention(8, 2, dropout=0.3 if case == "dropout" else 0.0,
                                need_weights=case == "bool_mask_weights",
                                bias_attr=False if case == "no_bias" else None)
    mha.to(dtype="float64")
    x = RNG.standard_normal((2, 5, 8))
    mask = None
    if case == "bool_mask_weights":
        mask = ddg.to_tensor(np.tril(np.ones((5, 5), bool)))
    elif case == "float_mask":
        mask = ddg.to_tensor(np.where(RNG.random((2, 1, 5, 5)) > 0.3, 0.0, -1e9))
    packed = _mha_run(mha, x, mask, seed=9)
    calls = []
    monkeypatch.setattr(nn.MultiHeadAttention, "_packed_parameters", lambda self: calls.append(1))
    three = _mha_run(mha, x, mask, seed=9)
    assert calls and len(packed) == len(three)
    for a, b in zip(packed, three):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_packed_path_only_without_hooks_and_for_self_attention():
    mha = nn.MultiHeadAttention(8, 2)
    x = ddg.to_tensor(RNG.standard_normal((2, 3, 8)).astype("float32"))
    assert mha._packed_parameters() is not None
    seen = []
    h = mha.k_proj.register_forward_post_hook(lambda layer, inputs, out: seen.append(out.shape))
    assert mha._packed_parameters() is None
    mha(x)
    assert seen == [[2, 3, 8]]
    h.remove()
    mha(x, x.clone(), x)       # key is not query: three projections
    out32 = mha(x)
    mha.to(dtype="float64")
    out64 = mha(ddg.to_tensor(x.numpy().astype("float64")))
    assert out32.dtype == ddg.float32
    np.testing.assert_allclose(out32.numpy(), out64.numpy(), rtol=1e-4, atol=1e-5)
