"""ddg against PyTorch's results, recorded in tests/torch_reference.npz by
tests/torch_reference.py (the suite itself needs no torch): convolution, transposed
convolution, pooling, interpolation, norms, padding, LSTM/GRU and LSTM with projections."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn

import torch_reference as ref

REF = ref.load()


def T(a, grad=False):
    t = ddg.to_tensor(a)
    t.stop_gradient = not grad
    return t


def test_reference_holds_every_case_with_its_stored_inputs():
    assert sorted(REF) == sorted(ref.CASES)
    for case, inputs in ref.INPUTS.items():
        for name, a in inputs.items():
            stored = REF[case]["input:" + name]
            assert stored.shape == a.shape and stored.dtype == a.dtype


def test_convolution_and_pooling():
    r = REF["conv"]
    x, w, b, wt = (r["input:" + k] for k in ("x", "w", "b", "wt"))
    np.testing.assert_allclose(F.conv2d(T(x), T(w), T(b), stride=2, padding=1, dilation=(1, 2), groups=2).numpy(),
                               r["conv2d"], atol=1e-10)
    np.testing.assert_allclose(F.conv2d_transpose(T(x), T(wt), stride=2, padding=1, output_padding=1,
                                                  groups=2).numpy(), r["conv_transpose2d"], atol=1e-10)
    np.testing.assert_array_equal(F.max_pool2d(T(x), 3, 2, 1, ceil_mode=True).numpy(), r["max_pool2d"])
    np.testing.assert_allclose(F.avg_pool2d(T(x), 3, 2, 1, exclusive=True).numpy(), r["avg_pool2d_exclusive"],
                               atol=1e-12)
    np.testing.assert_allclose(F.adaptive_avg_pool2d(T(x), (4, 3)).numpy(), r["adaptive_avg_pool2d"], atol=1e-12)
    xd, wd = T(x, True), T(w, True)
    F.max_pool2d(F.relu(F.conv2d(xd, wd, padding=1, groups=2)), 2).sum().backward()
    np.testing.assert_allclose(xd.grad.numpy(), r["net_grad_x"], atol=1e-10)
    np.testing.assert_allclose(wd.grad.numpy(), r["net_grad_w"], atol=1e-10)


def test_interpolation_norms_padding():
    r = REF["norm"]
    x = T(r["input:x"])
    np.testing.assert_allclose(F.interpolate(x, size=[8, 4], mode="bilinear", align_corners=False).numpy(),
                               r["bilinear"], atol=1e-12)
    np.testing.assert_allclose(F.interpolate(x, size=[8, 4], mode="bilinear", align_corners=True).numpy(),
                               r["bilinear_align_corners"], atol=1e-12)
    np.testing.assert_array_equal(F.interpolate(x, size=[9, 13]).numpy(), r["nearest"])
    np.testing.assert_allclose(F.layer_norm(x, [5, 6]).numpy(), r["layer_norm"], atol=1e-10)
    np.testing.assert_allclose(F.group_norm(x, 3).numpy(), r["group_norm"], atol=1e-10)
    np.testing.assert_array_equal(F.pad(x, [1, 2, 2, 1], mode="reflect").numpy(), r["pad_reflect"])
    np.testing.assert_allclose(F.normalize(x, axis=1).numpy(), r["normalize"], atol=1e-12)


def _load_torch_parameters(model, r):
    """torch's parameter names are also ddg's (Paddle keeps both spellings)."""
    sd = model.state_dict()
    names = [k[len("param:"):] for k in r if k.startswith("param:")]
    assert names
    for name in names:
        sd[name].set_value(r["param:" + name])


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_two_layer_bidirectional_rnn(kind):
    r = REF[kind.lower()]
    m = getattr(nn, kind)(3, 5, num_layers=2, direction="bidirect")
    _load_torch_parameters(m, r)
    x, h0 = T(r["input:x"]), T(r["input:h0"])
    if kind == "LSTM":
        out, (h, c) = m(x, (h0, T(r["input:c0"])))
        np.testing.assert_allclose(c.numpy(), r["c"], atol=1e-5)
    else:
        out, h = m(x, h0)
    np.testing.assert_allclose(out.numpy(), r["out"], atol=1e-5)
    np.testing.assert_allclose(h.numpy(), r["h"], atol=1e-5)


@pytest.mark.filterwarnings("ignore:LSTM with projections")
def test_lstm_with_projection():
    r = REF["lstm_proj"]
    m = nn.LSTM(3, 5, proj_size=2)
    cell = m[0].cell
    for name, p in (("weight_ih_l0", cell.weight_ih), ("weight_hh_l0", cell.weight_hh),
                    ("bias_ih_l0", cell.bias_ih), ("bias_hh_l0", cell.bias_hh)):
        p.set_value(r["param:" + name])
    cell.weight_ho.set_value(np.ascontiguousarray(r["param:weight_hr_l0"].T))   # Paddle: h @ weight_ho
    out, (h, c) = m(T(r["input:x"]))
    assert out.shape == [2, 4, 2] and h.shape == [1, 2, 2] and c.shape == [1, 2, 5]
    np.testing.assert_allclose(out.numpy(), r["out"], atol=1e-5)
    np.testing.assert_allclose(h.numpy(), r["h"], atol=1e-5)
    np.testing.assert_allclose(c.numpy(), r["c"], atol=1e-5)
