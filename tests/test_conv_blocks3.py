"""5x5 and 7x7 stride-1 convolutions as a 3x3 one over four (nine) shifted copies of the
image (``conv._use_blocks3``, ``Conv2d._forward_blocks3``), on Winograd F(4x4, 3x3): forward
against the float64 loop reference, gradients against the im2col path and central
differences, float32 within round-off of float64, both input layouts, and the gate."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd.ops import conv as cv
from test_conv_kernels import _directional_check, _layouts
from test_nn_conv_pool import ref_conv2d

RNG = np.random.default_rng(11)


def T(a, grad=False, dtype="float64"):
    return ddg.to_tensor(np.asarray(a, dtype=dtype), stop_gradient=not grad)


# (x shape, output channels, kernel, pads (top, bottom, left, right)): square and ragged
# outputs (not multiples of the 4x4 tile), "same", "valid", asymmetric and kernel-sized padding
SHAPES = [
    ((16, 16, 8, 8), 16, 5, (2, 2, 2, 2)),
    ((8, 16, 13, 11), 24, 5, (2, 2, 2, 2)),
    ((8, 20, 12, 19), 16, 5, (0, 0, 0, 0)),
    ((16, 16, 10, 10), 16, 5, (1, 3, 4, 0)),
    ((8, 16, 6, 12), 20, 5, (4, 4, 0, 1)),
    ((8, 16, 10, 9), 16, 7, (3, 3, 3, 3)),
    ((8, 16, 12, 12), 20, 7, (6, 0, 2, 5)),
]


def _conv(x, w, b, pads):
    return F.conv2d(x, w, b, 1, list(pads))


def _run(x, w, b, pads, v, dtype, x_grad=True):
    xt, wt, bt = T(x, x_grad, dtype), T(w, True, dtype), T(b, True, dtype)
    y = _conv(xt, wt, bt, pads)
    (y * T(v, dtype=dtype)).sum().backward()
    return y.numpy(), (xt.grad.numpy() if x_grad else None), wt.grad.numpy(), bt.grad.numpy()


def _spy(monkeypatch):
    # the path on these small shapes: the tile-count gate (checked in test_blocks3_gate) off
    monkeypatch.setattr(cv, "BLOCKS3_MIN_TILES", 1)
    taken, real = [], cv.Conv2d._forward_blocks3
    monkeypatch.setattr(cv.Conv2d, "_forward_blocks3", lambda self, *a: taken.append(1) or real(self, *a))
    return taken


@pytest.mark.parametrize("xs,o,k,pads", SHAPES)
def test_blocks3_forward_and_gradients(xs, o, k, pads, monkeypatch):
    x = RNG.standard_normal(xs)
    w = RNG.standard_normal((o, xs[1], k, k)) / 8
    b = RNG.standard_normal(o)
    ref = ref_conv2d(x, w, b, (1, 1), pads)
    v = RNG.standard_normal(ref.shape)
    taken = _spy(monkeypatch)
    got = _run(x, w, b, pads, v, "float64")
    got32 = _run(x, w, b, pads, v, "float32")
    assert len(taken) == 2
    monkeypatch.setattr(cv, "BLOCKS3", False)               # im2col's gradients as the reference
    cols = _run(x, w, b, pads, v, "float64")
    assert len(taken) == 2
    np.testing.assert_allclose(got[0], ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    for a, a32, r in zip(got, got32, cols):
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-12 * np.abs(r).max())
        np.testing.assert_allclose(a32, r, rtol=0, atol=2e-5 * np.abs(r).max())
    monkeypatch.setattr(cv, "BLOCKS3", True)
    _directional_check(lambda x, w: (_conv(T(x), T(w), T(b), pads).numpy() * v).sum(), [x, w], got[1:3], RNG)
    assert len(taken) == 6


def test_blocks3_weight_only_gradient_and_no_bias(monkeypatch):
    # a first layer: no input gradient asked, no bias
    xs, o, k, pads = SHAPES[1]
    x, w = RNG.standard_normal(xs), RNG.standard_normal((o, xs[1], k, k)) / 8
    taken = _spy(monkeypatch)
    for dtype, tol in (("float64", 1e-12), ("float32", 2e-5)):
        xt, wt = T(x, False, dtype), T(w, True, dtype)
        y = _conv(xt, wt, None, pads)
        (y * y).sum().backward()
        ref = ref_conv2d(x, w, None, (1, 1), pads)
        np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=tol * np.abs(ref).max())
        assert xt.grad is None
        monkeypatch.setattr(cv, "BLOCKS3", False)
        w2 = T(w, True, "float64")
        y2 = _conv(T(x), w2, None, pads)
        (y2 * y2).sum().backward()
        monkeypatch.setattr(cv, "BLOCKS3", True)
        r = w2.grad.numpy()
        np.testing.assert_allclose(wt.grad.numpy(), r, rtol=0, atol=tol * np.abs(r).max())
    assert len(taken) == 2


def test_blocks3_in_both_input_layouts(monkeypatch):
    # an NCHW input and a batch-innermost one (a previous convolution's output) give the
    # same values and gradients
    xs, o, k, pads = SHAPES[0]
    x, w = RNG.standard_normal(xs), RNG.standard_normal((o, xs[1], k, k)) / 8
    ref = ref_conv2d(x, w, None, (1, 1), pads)
    taken = _spy(monkeypatch)
    for dt, tol in (("float64", 1e-12), ("float32", 2e-5)):
        grads = []
        for leaf, inp, back in _layouts(x, dt):
            wt = T(w, True, dt)
            y = _conv(inp, wt, None, pads)
            np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=tol * np.abs(ref).max())
            (y * y).sum().backward()
            grads.append((back(leaf.grad.numpy()), wt.grad.numpy()))
        for a, r in zip(*grads):
            np.testing.assert_allclose(a, r, rtol=0, atol=tol * np.abs(r).max())
    assert len(taken) == 4


def test_blocks3_second_order_through_the_generic_graph(monkeypatch):
    # backward_graph does not depend on the forward's path: a double backward is the same
    # with the path on and off
    xs, o, k, pads = SHAPES[0]
    x, w = RNG.standard_normal(xs), RNG.standard_normal((o, xs[1], k, k)) / 8
    taken = _spy(monkeypatch)
    out = []
    for on in (True, False):
        monkeypatch.setattr(cv, "BLOCKS3", on)
        xt, wt = T(x, True), T(w, True)
        y = _conv(xt, wt, None, pads)
        gx, = ddg.grad([(y * y).sum()], [xt], create_graph=True)
        (gx * gx).sum().backward()
        out.append(wt.grad.numpy())
    assert len(taken) == 1
    np.testing.assert_allclose(out[0], out[1], rtol=0, atol=1e-11 * np.abs(out[1]).max())


def _gate(xs, ws, stride=(1, 1), dil=(1, 1), groups=1, pads=(2, 2, 2, 2), dtype=np.float64):
    x, w = np.zeros(xs, dtype), np.zeros(ws, dtype)
    return cv._use_blocks3(x, w, stride, dil, groups, pads)


def test_blocks3_gate():
    assert _gate((32, 16, 8, 8), (16, 16, 5, 5))
    assert _gate((32, 16, 8, 8), (16, 16, 5, 5), dtype=np.float32)
    assert _gate((32, 32, 16, 16), (64, 32, 5, 5))
    # fewer than BLOCKS3_MIN_TILES 4x4 output tiles over the batch (64 here)
    assert not _gate((16, 16, 8, 8), (16, 16, 5, 5))
    assert not _gate((4, 32, 16, 16), (64, 32, 5, 5))
    assert _gate((32, 16, 8, 8), (16, 16, 7, 7), pads=(3, 3, 3, 3))
    # other kernels, strides, dilations, groups, padding past the kernel
    for ws in ((16, 16, 3, 3), (16, 16, 5, 3), (16, 16, 7, 5), (16, 16, 4, 4), (16, 16, 6, 6), (16, 16, 9, 9)):
        assert not _gate((32, 16, 8, 8), ws, pads=(ws[2] // 2,) * 4)
    assert not _gate((16, 16, 16, 16), (16, 16, 5, 5), stride=(2, 2))
    assert not _gate((16, 16, 16, 16), (16, 16, 5, 5), dil=(2, 2))
    assert not _gate((16, 32, 8, 8), (32, 16, 5, 5), groups=2)
    assert not _gate((32, 16, 8, 8), (16, 16, 5, 5), pads=(5, 5, 2, 2))
    # too few channels, an output under 8x8
    assert not _gate((32, 8, 8, 8), (16, 8, 5, 5))
    assert not _gate((32, 16, 7, 7), (16, 16, 5, 5))
    # blocks of tile rows narrower than BLOCKS3_MIN_COLUMNS: one 8-tile row of 32x32 at batch
    # 4 in each at 256 channels (32 columns), 512 tiles in all
    assert not _gate((4, 256, 32, 32), (256, 256, 5, 5))
    assert _gate((16, 128, 16, 16), (128, 128, 5, 5))
    # half precision reaches the op upcast; integer and mixed dtypes do not take it
    assert not _gate((32, 16, 8, 8), (16, 16, 5, 5), dtype=np.int64)
    x, w = np.zeros((32, 16, 8, 8), np.float32), np.zeros((16, 16, 5, 5))
    assert not cv._use_blocks3(x, w, (1, 1), (1, 1), 1, (2, 2, 2, 2))


def test_blocks3_switch_and_layers(monkeypatch):
    # nn.Conv2D with a 5x5 kernel takes the path; BLOCKS3 = False turns it off
    taken = _spy(monkeypatch)
    layer = ddg.nn.Conv2D(16, 16, 5, padding=2)
    x = T(RNG.standard_normal((16, 16, 8, 8)), True, "float32")
    layer(x).sum().backward()
    assert len(taken) == 1
    monkeypatch.setattr(cv, "BLOCKS3", False)
    layer(x).sum().backward()
    assert len(taken) == 1
