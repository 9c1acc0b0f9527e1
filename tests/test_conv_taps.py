"""Few-channel 3x3, 5x5 and 7x7 convolutions as products of shifted windows (``ddg.tensor.conv_taps``,
the register tiles ``gemm_kernels.conv_rows`` / ``conv_wgrad_rows``): where ``Conv2d`` takes
them, output and the three gradients against float64 references (an einsum per tap, and
ddg's own float64 path, whose gradients are checked by central differences in
test_nn_conv_pool), over channel counts 8-32, batches, image sizes, pads and layouts that reach
every tail of the tiles; and the gate (``takes``) against the measured range."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.tensor import conv_taps, gemm, gemm_kernels

RNG = np.random.default_rng(11)


@pytest.fixture
def on_avx2(monkeypatch):
    """The switches as an AVX2 CPU has them (the suite turns ``gemm.ENABLED`` on, which keeps
    this path off), one BLAS thread, and a count of the window products run."""
    monkeypatch.setattr(gemm, "ENABLED", False)
    monkeypatch.setattr(gemm, "FUSED", True)
    monkeypatch.setattr(gemm, "blas_threads", lambda: 1)
    calls = []
    real = gemm_kernels.conv_rows
    monkeypatch.setattr(gemm_kernels, "conv_rows", lambda *a: (calls.append(a[0].shape), real(*a))[1])
    return calls


def _reference(x, w, b, pads, gy):
    """float64 ``(y, gx, gw, gb)`` of the convolution, one einsum per tap."""
    x, w, gy = x.astype(np.float64), w.astype(np.float64), gy.astype(np.float64)
    n, c, h, wd = x.shape
    kh, kw = w.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), pads[:2], pads[2:]))
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    y = np.zeros((n, w.shape[0], oh, ow))
    gxp = np.zeros_like(xp)
    gw = np.zeros(w.shape)
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i:i + oh, j:j + ow]
            y += np.einsum("oc,nchw->nohw", w[:, :, i, j], win)
            gw[:, :, i, j] = np.einsum("nohw,nchw->oc", gy, win)
            gxp[:, :, i:i + oh, j:j + ow] += np.einsum("oc,nohw->nchw", w[:, :, i, j], gy)
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y, gxp[:, :, pads[0]:pads[0] + h, pads[2]:pads[2] + wd], gw, gy.sum(axis=(0, 2, 3))


# (batch, in channels, out channels, height, width, pads (top, bottom, left, right)): output rows
# of ow * batch values ending in a whole 16-column block, a partial one of more than 8 or of at
# most 8 (the one-vector tile); weight gradient columns (out channels) 8-64: tiles of 8, 16
# and 24 columns, whole and masked
FAMILY = [
    (16, 16, 16, 32, 32, (1, 1, 1, 1)),     # a ResNet stage on CIFAR-sized images
    (16, 12, 24, 16, 16, (1, 1, 1, 1)),
    (16, 8, 16, 12, 12, (1, 1, 1, 1)),
    (1, 16, 16, 10, 9, (1, 1, 1, 1)),       # rows of 9 values: one partial block of 9
    (3, 8, 12, 9, 7, (0, 2, 1, 0)),         # asymmetric pads, rows of 21 (16 + 5)
    (1, 12, 8, 6, 11, (2, 2, 2, 2)),        # pad 2 (the output larger than the input)
    (5, 20, 12, 10, 10, (1, 0, 0, 1)),
    (2, 12, 20, 7, 13, (0, 0, 0, 0)),       # no padding, 20 columns (16 + 4)
    (3, 24, 12, 6, 6, (1, 1, 1, 1)),        # 24 input channels: 24 rows of the input gradient
    (4, 12, 16, 8, 8, (1, 1, 2, 0)),
    (2, 16, 32, 8, 8, (1, 1, 1, 1)),        # 32 output channels: two whole 16-column blocks
    (2, 32, 12, 9, 5, (1, 1, 1, 1)),        # 32 input channels (288 taps), rows of 10 values
    (1, 8, 16, 100, 100, (1, 1, 1, 1)),     # 10^4 terms per weight gradient value: summed per row
    (2, 8, 40, 6, 7, (1, 1, 1, 1)),         # weight gradient columns 16 + 24
    (1, 8, 64, 5, 6, (1, 1, 1, 1)),         # 24 + 24 + 16
]


# 5x5 and 7x7 kernels (and the two mixed): pads up to the kernel's size less one per side;
# taps 25-49 per input channel, so the weight gradient's inner length (taps x channels) is a
# multiple of 3 only where the channels are (12, 24: the 3-row, 24-column tile) and of 4
# otherwise (8, 16, 20, 32: the 4-row tiles)
WIDE = [
    (4, 16, 16, 12, 12, (2, 2, 2, 2), (5, 5)),
    (3, 8, 16, 9, 11, (1, 3, 0, 4), (5, 5)),
    (2, 12, 24, 8, 8, (2, 2, 2, 2), (5, 5)),       # 300 taps, 24 columns: the 3-row tile
    (2, 8, 24, 8, 9, (2, 2, 2, 2), (5, 5)),        # 200 taps, 24 columns: not a multiple of 3, 4-row tiles
    (1, 32, 12, 7, 6, (4, 4, 4, 4), (5, 5)),       # the output larger than the input
    (2, 20, 8, 10, 13, (0, 0, 0, 0), (5, 5)),
    (2, 16, 12, 9, 9, (3, 3, 3, 3), (7, 7)),
    (1, 24, 24, 11, 10, (6, 6, 0, 1), (7, 7)),     # 1176 taps, 24 columns
    (3, 8, 8, 8, 10, (2, 2, 3, 3), (5, 7)),
    (2, 12, 16, 10, 6, (3, 3, 2, 2), (7, 5)),
]


@pytest.mark.parametrize("n,c,o,h,wd,pads,k", [f + ((3, 3),) for f in FAMILY] + WIDE)
@pytest.mark.parametrize("layout", ["nchw", "chwn"])
def test_taps_forward_and_gradients_against_float64(n, c, o, h, wd, pads, k, layout, on_avx2):
    taps = k[0] * k[1]
    x = RNG.standard_normal((n, c, h, wd)).astype(np.float32)
    w = (RNG.standard_normal((o, c) + k) / np.sqrt(taps * c)).astype(np.float32)
    b = RNG.standard_normal(o).astype(np.float32)
    if layout == "chwn":     # batch-innermost, as a conv net's own activations are laid out
        x = np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    xt, wt, bt = (ddg.to_tensor(a, stop_gradient=False) for a in (x, w, b))
    y = F.conv2d(xt, wt, bt, padding=[pads[0], pads[1], pads[2], pads[3]])
    assert y.dtype == ddg.float32 and len(on_avx2) == 1 and on_avx2[0] == (o, taps * c)
    gy = RNG.standard_normal(y.shape).astype(np.float32)
    (y * ddg.to_tensor(gy)).sum().backward()
    assert len(on_avx2) == 2 and on_avx2[1] == (c, taps * o)    # the input gradient's product
    ry, rgx, rgw, rgb = _reference(x, w, b, pads, gy)
    for got, ref in ((y.numpy(), ry), (xt.grad.numpy(), rgx), (wt.grad.numpy(), rgw), (bt.grad.numpy(), rgb)):
        assert got.dtype == np.float32 and got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-6 * np.abs(ref).max())


@pytest.mark.parametrize("n,o,h,wd,pads,k", [(4, 16, 12, 12, (2, 2, 2, 2), 5), (2, 8, 9, 13, (0, 4, 1, 3), 5),
                                             (3, 12, 10, 10, (3, 3, 3, 3), 7), (1, 16, 8, 11, (6, 0, 2, 2), 7)])
@pytest.mark.parametrize("layout", ["nchw", "chwn"])
def test_taps_three_channel_first_layer_against_float64(n, o, h, wd, pads, k, layout, on_avx2):
    """A 3-channel (RGB) first layer, 5x5 or 7x7: the input and the weight with a zero fourth
    channel for the tiles; output and all three gradients against float64, none of the padding
    channel's values leaking into them."""
    x = RNG.standard_normal((n, 3, h, wd)).astype(np.float32)
    w = (RNG.standard_normal((o, 3, k, k)) / k).astype(np.float32)
    b = RNG.standard_normal(o).astype(np.float32)
    if layout == "chwn":
        x = np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    xt, wt, bt = (ddg.to_tensor(a, stop_gradient=False) for a in (x, w, b))
    y = F.conv2d(xt, wt, bt, padding=list(pads))
    gy = RNG.standard_normal(y.shape).astype(np.float32)
    (y * ddg.to_tensor(gy)).sum().backward()
    assert on_avx2 == [(o, k * k * 4), (4, k * k * o)]
    ry, rgx, rgw, rgb = _reference(x, w, b, pads, gy)
    for got, ref in ((y.numpy(), ry), (xt.grad.numpy(), rgx), (wt.grad.numpy(), rgw), (bt.grad.numpy(), rgb)):
        assert got.dtype == np.float32 and got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-6 * np.abs(ref).max())


@pytest.mark.parametrize("need", ["x", "w"])
def test_taps_one_gradient_matches_ddg_float64(need, on_avx2):
    """Only one of the gradients asked for (a frozen weight, a stem's input): the one asked
    for against ddg's float64 path, the other not computed."""
    x = RNG.standard_normal((6, 16, 12, 12))
    w = RNG.standard_normal((16, 16, 3, 3)) / 12
    grads = {}
    for dt in ("float64", "float32"):
        xt = ddg.to_tensor(x.astype(dt), stop_gradient=need != "x")
        wt = ddg.to_tensor(w.astype(dt), stop_gradient=need != "w")
        y = F.conv2d(xt, wt, padding=1)
        (y * y).sum().backward()
        grads[dt] = (xt if need == "x" else wt).grad.numpy()
        assert (wt if need == "x" else xt).grad is None
    assert len(on_avx2) == (2 if need == "x" else 1)      # float32 only: forward (+ input gradient)
    ref = grads["float64"]
    np.testing.assert_allclose(grads["float32"], ref, rtol=0, atol=2e-5 * np.abs(ref).max())


def test_taps_in_a_conv_batchnorm_block_trains_as_float64(on_avx2):
    """A few SGD steps of conv + BatchNorm + ReLU + conv (16 channels) in float32 on this
    path stay within round-off of the same steps in float64 (another path)."""
    from ddg import nn
    params = {}
    for dt in ("float64", "float32"):
        ddg.seed(5)
        net = nn.Sequential(nn.Conv2D(16, 16, 3, padding=1, bias_attr=False), nn.BatchNorm2D(16), nn.ReLU(),
                            nn.Conv2D(16, 16, 3, padding=1), nn.AdaptiveAvgPool2D(1), nn.Flatten(), nn.Linear(16, 4))
        if dt == "float64":
            net.to(dtype="float64")
        opt = ddg.optimizer.SGD(0.05, parameters=net.parameters())
        data = np.random.default_rng(2)
        for _ in range(3):
            x = ddg.to_tensor(data.standard_normal((8, 16, 10, 10)).astype(dt))
            lab = ddg.to_tensor(data.integers(0, 4, 8))
            F.cross_entropy(net(x), lab).backward()
            opt.step()
            opt.clear_grad()
        params[dt] = [p.numpy().astype(np.float64) for p in net.parameters()]
    assert len(on_avx2) == 3 * 3     # two convs' forwards and the second one's input gradient, per step
    for got, ref in zip(params["float32"], params["float64"]):
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-5 * max(1.0, np.abs(ref).max()))


def _takes(c, o, hw, n=16, pads=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1), groups=1, k=3, dtype=np.float32):
    x = np.zeros((n, c, hw, hw), dtype)
    w = np.zeros((o, c // groups, k, k), dtype)
    return conv_taps.takes(x, w, groups, stride, dilation, pads)


def test_taps_gate_follows_the_measured_range(on_avx2, monkeypatch):
    # taken: at most 384 channel pairs (512 up to 32x32), 8 channels or more on both sides and
    # 12 on one
    for c, o, hw in [(8, 16, 32), (12, 12, 32), (12, 24, 16), (16, 8, 64), (16, 16, 32), (16, 16, 64), (16, 16, 8),
                     (16, 12, 64), (24, 16, 32), (16, 24, 64), (12, 32, 32), (8, 32, 32), (16, 32, 32), (32, 16, 16)]:
        assert _takes(c, o, hw), (c, o, hw)
    # left to the other paths: 8 -> 8, 4 channels, 24 -> 24, 32 -> 32, 16 -> 32 past 32x32,
    # channel counts off multiples of 4
    for c, o, hw in [(8, 8, 32), (4, 16, 32), (24, 24, 32), (32, 32, 16), (16, 32, 48), (32, 16, 64), (10, 16, 32),
                     (16, 14, 32), (12, 48, 16)]:
        assert not _takes(c, o, hw), (c, o, hw)
    # 32 -> 32 only where the batch has few output positions (Winograd's products few columns)
    assert _takes(32, 32, 32, n=2) and _takes(32, 32, 16, n=8) and _takes(24, 24, 16, n=4)
    assert not _takes(32, 32, 32, n=4) and not _takes(32, 32, 16, n=16) and not _takes(64, 32, 8, n=1)
    # the three input rows of every channel that each row tile reads again fit in L2
    assert _takes(16, 16, 32, n=32) and _takes(16, 16, 64, n=16) and _takes(12, 24, 64, n=16)
    assert not _takes(16, 16, 32, n=64) and not _takes(16, 16, 64, n=32) and not _takes(8, 16, 64, n=32)
    assert not _takes(16, 16, 32, stride=(2, 2))
    assert not _takes(16, 16, 32, dilation=(2, 2))
    assert not _takes(16, 16, 32, groups=2)
    # 5x5 and 7x7: 8 to 32 channels on both sides, any batch and image size (the path otherwise
    # is im2col); past 32 channels, other kernel sizes and pads of the kernel's size left alone
    for c, o, hw, n in [(8, 8, 32, 32), (16, 16, 32, 32), (16, 16, 64, 64), (32, 32, 16, 64), (12, 32, 8, 16),
                        (32, 8, 28, 1)]:
        assert _takes(c, o, hw, n=n, k=5, pads=(2, 2, 2, 2)) and _takes(c, o, hw, n=n, k=7, pads=(3, 3, 3, 3))
    for c, o in [(4, 16), (16, 36), (64, 64), (32, 64), (16, 14)]:
        assert not _takes(c, o, 32, k=5, pads=(2, 2, 2, 2)), (c, o)
    assert not _takes(16, 16, 32, k=4, pads=(2, 1, 2, 1)) and not _takes(16, 16, 32, k=9, pads=(4, 4, 4, 4))
    assert _takes(16, 16, 32, k=5, pads=(4, 4, 0, 4)) and not _takes(16, 16, 32, k=5, pads=(5, 5, 2, 2))
    assert not _takes(16, 16, 32, k=5, pads=(2, 2, 2, 2), stride=(2, 2))
    # 3-channel first layers: 5x5 and 7x7 to 8-16 channels (other first layers have their own paths)
    assert _takes(3, 16, 32, n=32, k=5, pads=(2, 2, 2, 2)) and _takes(3, 8, 64, k=7, pads=(3, 3, 3, 3))
    for c, o, k in [(3, 32, 5), (3, 16, 3), (1, 16, 5), (2, 16, 5), (3, 4, 5), (3, 64, 7), (3, 14, 5)]:
        assert not _takes(c, o, 32, k=k, pads=(k // 2,) * 4), (c, o, k)
    assert not _takes(16, 16, 32, pads=(3, 3, 1, 1))
    assert not _takes(16, 16, 3, pads=(0, 0, 0, 0))        # an output smaller than 4x4
    assert not _takes(16, 16, 32, dtype=np.float64)
    assert _takes(16, 16, 32, n=1) and _takes(12, 12, 32, pads=(0, 2, 2, 0))
    monkeypatch.setattr(gemm, "blas_threads", lambda: 2)   # a multi-threaded BLAS keeps Winograd's products
    assert not _takes(16, 16, 32)
    monkeypatch.setattr(gemm, "blas_threads", lambda: 1)
    monkeypatch.setattr(gemm, "ENABLED", True)              # an AVX-512 CPU: not measured there
    assert not _takes(16, 16, 32)
    monkeypatch.setattr(gemm, "ENABLED", False)
    monkeypatch.setattr(gemm, "FUSED", False)               # DDG_CPU_GEMM=0
    assert not _takes(16, 16, 32)
