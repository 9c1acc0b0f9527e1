"""The fused kernels against numpy float64 and central differences: the training batch
norm (BatchNormAffine, also with its ReLU), Conv2d's gradients over kernels, pads, dilations, strides and
groups, the attention op; layouts kept through ReLU's and the batch norm's backward."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd.gradcheck import gradcheck, gradgradcheck
from ddg.autograd.ops.conv import _is_chwn
from ddg.autograd.ops.norm import BatchNormAffine

SHAPES = [((4, 3, 5, 2), (0, 2, 3)), ((6, 4), (0,)), ((3, 2, 5), (0, 2)), ((2, 5, 3, 2, 2), (0, 2, 3, 4))]


def _ref(x, w, b, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    shape = [1] * x.ndim
    shape[1] = -1
    return (x - mean) / np.sqrt(var + eps) * w.reshape(shape) + b.reshape(shape), mean, var


@pytest.mark.parametrize("shape,axes", SHAPES)
def test_batch_norm_affine_forward_matches_numpy(shape, axes):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 3 + 1
    w, b = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    y, mean, var = BatchNormAffine(axes, 1e-3)(*(ddg.to_tensor(a) for a in (x, w, b)))
    for got, want in zip((y, mean, var), _ref(x, w, b, axes, 1e-3)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape,axes", SHAPES)
def test_batch_norm_affine_backward_matches_central_differences(shape, axes):
    rng = np.random.default_rng(1)
    ts = [ddg.to_tensor(a, stop_gradient=False) for a in
          (rng.standard_normal(shape), rng.standard_normal(shape[1]), rng.standard_normal(shape[1]))]

    def f(x, w, b):   # y and the two statistics, each checked
        y, mean, var = BatchNormAffine(axes, 1e-3)(x, w, b)
        return ddg.concat([y.flatten(), mean.flatten(), var.flatten()])
    assert gradcheck(f, ts, atol=1e-6, rtol=1e-5)

    def only_y(x, w, b):
        return BatchNormAffine(axes, 1e-3)(x, w, b)[0]
    assert gradcheck(only_y, ts, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(only_y, ts, atol=1e-5, rtol=1e-4)


def test_functional_batch_norm_uses_one_op_and_matches_the_composite():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 3, 3))
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    outs = []
    for fused in (True, False):
        xt = ddg.to_tensor(x, stop_gradient=False)
        wt, bt = ddg.to_tensor(w, stop_gradient=False), ddg.to_tensor(b, stop_gradient=False)
        rm, rv = ddg.zeros([3], dtype="float64"), ddg.ones([3], dtype="float64")
        if fused:
            y = F.batch_norm(xt, rm, rv, wt, bt, training=True)
            assert type(y._node).__name__ == "BatchNormAffine"
        else:   # no weight/bias: the standardization, then the affine part by hand
            y = F.batch_norm(xt, rm, rv, None, None, training=True) * wt.reshape([1, 3, 1, 1]) + \
                bt.reshape([1, 3, 1, 1])
        (y * y * y).sum().backward()
        outs.append([y.numpy(), rm.numpy(), rv.numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()])
    for a, c in zip(*outs):
        np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape,axes", SHAPES)
def test_batch_norm_relu_matches_numpy_and_central_differences(shape, axes):
    # BatchNormAffine(act='relu'): max(batch norm, 0) in the op; forward against float64
    # numpy, first and second order against central differences (y and the statistics)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape) * 3 + 1
    w, b = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    y, mean, var = BatchNormAffine(axes, 1e-3, "relu")(*(ddg.to_tensor(a) for a in (x, w, b)))
    ry, rm, rv = _ref(x, w, b, axes, 1e-3)
    for got, want in zip((y, mean, var), (np.maximum(ry, 0), rm, rv)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    assert (ry < 0).any() and (ry > 0).any()
    ts = [ddg.to_tensor(a, stop_gradient=False) for a in (x, w, b)]

    def f(x, w, b):
        y, mean, var = BatchNormAffine(axes, 1e-3, "relu")(x, w, b)
        return ddg.concat([y.flatten(), mean.flatten(), var.flatten()])
    assert gradcheck(f, ts, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda *a: BatchNormAffine(axes, 1e-3, "relu")(*a)[0], ts, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "NC"])
def test_fluid_batch_norm_relu_is_one_op_equal_to_batch_norm_then_relu(dtype, layout):
    # nn.BatchNorm(act='relu') in training: one BatchNormAffine op whose output, gradients and
    # running statistics equal BatchNorm2D then F.relu (the mask recomputed in backward)
    from ddg import nn
    rng = np.random.default_rng(6)
    shape = {"NCHW": (4, 3, 5, 6), "NHWC": (4, 5, 6, 3), "NC": (6, 3)}[layout]
    x = rng.standard_normal(shape).astype(dtype)
    w, b = rng.standard_normal(3).astype(dtype), rng.standard_normal(3).astype(dtype)
    gy = np.cos(np.arange(x.size)).reshape(shape).astype(dtype)
    res = []
    for act in ("relu", None):
        bn = nn.BatchNorm(3, act=act, momentum=0.8, dtype=dtype, data_layout="NHWC" if layout == "NHWC" else "NCHW")
        bn.weight.set_value(w)
        bn.bias.set_value(b)
        xt = ddg.to_tensor(x, stop_gradient=False)
        y = bn(xt)
        if act is None:
            y = F.relu(y)
        else:
            assert type(y._node).__name__ == "BatchNormAffine" and y._node.act == "relu"
        (y * ddg.to_tensor(gy)).sum().backward()
        res.append([y.numpy(), xt.grad.numpy(), bn.weight.grad.numpy(), bn.bias.grad.numpy(), bn._mean.numpy(),
                    bn._variance.numpy()])
    tol = 1e-12 if dtype == "float64" else 1e-5
    for a, c in zip(*res):
        np.testing.assert_allclose(a, c, rtol=tol, atol=tol)


def test_batch_norm_relu_on_the_gpu_path_matches_numpy():
    # the cupy path (clamp after the affine part, mask recomputed from xhat * w + b)
    from ddg.tensor import backend
    if not backend.cupy_available():
        pytest.skip("needs cupy (a GPU, or tests/simgpu's simcupy)")
    rng = np.random.default_rng(7)
    x, w, b = rng.standard_normal((4, 3, 5, 2)), rng.standard_normal(3), rng.standard_normal(3)
    gy = rng.standard_normal(x.shape)
    res = []
    for place in ("cpu", "gpu"):
        ts = [ddg.to_tensor(a, place=place, stop_gradient=False) for a in (x, w, b)]
        y, mean, var = BatchNormAffine((0, 2, 3), 1e-3, "relu")(*ts)
        (y * ddg.to_tensor(gy, place=place)).sum().backward()
        res.append([y.numpy(), mean.numpy(), var.numpy()] + [t.grad.numpy() for t in ts])
    for a, c in zip(*res):
        np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-12)


def test_relu_and_batch_norm_backward_keep_the_activation_layout():
    # avg-pool's gradient arrives broadcast; ReLU's and the batch norm's backward give their
    # results in the activations' (batch-innermost) layout, with the right values
    from ddg.autograd.ops.elementwise import Relu
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 4, 5, 5)).astype(np.float32)
    chwn = np.ascontiguousarray(a.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    g = np.broadcast_to(rng.standard_normal((3, 4, 1, 1)).astype(np.float32), a.shape)
    op = Relu()
    out = op.forward(chwn)
    res = op.backward(g)
    assert _is_chwn(res)
    np.testing.assert_array_equal(res, g * (a > 0))
    bn = BatchNormAffine((0, 2, 3), 1e-5)
    bn.needs = (True, True, True)
    y, _, _ = bn.forward(out, np.ones(4, np.float32), np.zeros(4, np.float32))
    assert _is_chwn(y)
    gx, gw, gb = bn.backward((g, None, None))
    assert _is_chwn(gx)
    np.testing.assert_allclose(gb, g.sum(axis=(0, 2, 3)), rtol=1e-5)


CONV_CASES = [  # (kernel, stride, padding (top, bottom, left, right), dilation, groups)
    ((3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),   # "same": gx as a convolution of gy
    ((3, 3), (1, 1), (2, 1, 1, 2), (1, 1), 1),   # asymmetric, output larger than the input
    ((3, 3), (1, 1), (0, 2, 1, 0), (1, 1), 1),   # output smaller: col2im
    ((5, 3), (1, 1), (2, 1, 0, 2), (1, 1), 1),
    ((3, 3), (1, 1), (2, 2, 1, 2), (2, 1), 1),
    ((2, 2), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((3, 3), (1, 1), (3, 0, 0, 0), (1, 1), 1),   # padding beyond the kernel's extent: the col2im path
    ((3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),
]


@pytest.mark.parametrize("kernel,stride,pads,dilation,groups", CONV_CASES)
def test_conv2d_gradients_match_central_differences(kernel, stride, pads, dilation, groups):
    from ddg.autograd.ops.conv import Conv2d
    rng = np.random.default_rng(5)
    x = ddg.to_tensor(rng.standard_normal((2, 4, 6, 5)), stop_gradient=False)
    w = ddg.to_tensor(rng.standard_normal((4, 4 // groups) + kernel), stop_gradient=False)

    def f(x, w):
        return Conv2d(stride, pads, dilation, groups)(x, w)
    assert gradcheck(f, [x, w], atol=1e-6, rtol=1e-5)
    # the forward against a direct float64 loop
    xn, wn = x.numpy(), w.numpy()
    pt, pb, pl, pr = pads
    xpad = np.pad(xn, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    y = f(x, w).numpy()
    cg, og = 4 // groups, 4 // groups
    for o in range(4):
        gi = o // og
        for i in range(y.shape[2]):
            for j in range(y.shape[3]):
                r0, c0 = i * stride[0], j * stride[1]
                win = xpad[:, gi * cg:(gi + 1) * cg, r0:r0 + dilation[0] * (kernel[0] - 1) + 1:dilation[0],
                           c0:c0 + dilation[1] * (kernel[1] - 1) + 1:dilation[1]]
                np.testing.assert_allclose(y[:, o, i, j], (win * wn[o]).sum(axis=(1, 2, 3)), rtol=1e-12,
                                           atol=1e-12)


ATTN_CASES = [  # (q shape, k shape, v shape, mask shape or None)
    ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 2), None),
    ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 2), (1, 1, 4, 6)),
    ((3, 4, 2), (3, 5, 2), (3, 5, 3), (3, 4, 5)),
    ((2, 2, 3, 2), (2, 2, 3, 2), (2, 2, 3, 4), (2, 1, 1, 3)),
]


@pytest.mark.parametrize("qs,ks,vs,ms", ATTN_CASES)
def test_attention_op_matches_numpy_and_central_differences(qs, ks, vs, ms):
    from ddg.autograd.ops.nn_ops import Attention
    rng = np.random.default_rng(6)
    arrs = [rng.standard_normal(qs), rng.standard_normal(ks), rng.standard_normal(vs)]
    if ms is not None:
        arrs.append(rng.standard_normal(ms))
    ts = [ddg.to_tensor(a, stop_gradient=False) for a in arrs]
    scale = 0.7
    out, w = Attention(scale)(*ts)
    s = arrs[0] @ np.swapaxes(arrs[1], -1, -2) * scale + (arrs[3] if ms is not None else 0)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(w.numpy(), p, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(out.numpy(), p @ arrs[2], rtol=1e-12, atol=1e-13)

    def both(*xs):   # the output and the weights, each checked
        o, wt = Attention(scale)(*xs)
        return ddg.concat([o.flatten(), wt.flatten()])
    assert gradcheck(both, ts, atol=1e-6, rtol=1e-5)

    def only_out(*xs):
        return Attention(scale)(*xs)[0]
    assert gradcheck(only_out, ts, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(only_out, ts, atol=1e-5, rtol=1e-4)


def test_multi_head_attention_fused_matches_composite_with_dropout_off(monkeypatch):
    from ddg import nn
    import ddg.nn.functional.attention as A
    ddg.seed(3)
    mha = nn.MultiHeadAttention(8, 2)
    mha.to(dtype="float64")
    x = np.random.default_rng(7).standard_normal((2, 5, 8))
    mask = ddg.to_tensor(np.tril(np.ones((5, 5), bool)))

    def run():
        xt = ddg.to_tensor(x, stop_gradient=False)
        out = mha(xt, attn_mask=mask)
        for p in mha.parameters():
            p.clear_gradient()
        (out * out).sum().backward()
        return [out.numpy(), xt.grad.numpy()] + [p.grad.numpy() for p in mha.parameters()]

    fused = run()
    monkeypatch.setattr(A, "Attention", None)
    monkeypatch.setattr(A, "_autocast", [True])   # forces the composite path
    composite = run()
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


WINO_CASES = [(6, 6, (1, 1, 1, 1)), (5, 7, (1, 1, 1, 1)), (6, 5, (0, 0, 0, 0)), (5, 5, (2, 1, 0, 2)),
              (3, 4, (2, 2, 2, 2))]


@pytest.mark.parametrize("h,w,pads", WINO_CASES)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("tile,block_bytes,keep", [(2, None, True), (4, None, True), (4, 1, True), (4, 1, False)])
def test_winograd_conv_matches_central_differences(h, w, pads, bias, tile, block_bytes, keep, monkeypatch):
    # the Winograd path (F(2x2, 3x3), or F(4x4, 3x3) in one block or one block per tile row,
    # the blocks' tiles kept for backward or recomputed there) forced on small float64 shapes
    # (odd sizes, partial tiles, asymmetric and zero pads)
    import ddg.autograd.ops.conv as CV
    monkeypatch.setattr(CV, "_use_winograd", lambda *a: True)
    monkeypatch.setattr(CV, "_wino_tile", lambda *a: tile)
    if block_bytes is not None:
        monkeypatch.setattr(CV, "_WINO_BLOCK_BYTES", block_bytes)
    if not keep:
        monkeypatch.setattr(CV, "_WINO_KEEP_BYTES", 0)
    rng = np.random.default_rng(8)
    ts = [ddg.to_tensor(rng.standard_normal((2, 3, h, w)), stop_gradient=False),
          ddg.to_tensor(rng.standard_normal((4, 3, 3, 3)), stop_gradient=False)]
    if bias:
        ts.append(ddg.to_tensor(rng.standard_normal(4), stop_gradient=False))
    op = CV.Conv2d((1, 1), pads, (1, 1), 1)
    y = op(*ts)
    assert op.wino is not None and op.wino[-1] == tile
    if tile == 4:
        several = len(CV._wino_blocks(3, 4, op.wino[2], op.wino[3], 2)) > 1
        assert (op.wino_v is None) == (several and not keep)
    pt, pb, pl, pr = pads
    xp_ = np.pad(ts[0].numpy(), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh, ow = xp_.shape[2] - 2, xp_.shape[3] - 2
    ref = sum(np.einsum("nchw,oc->nohw", xp_[:, :, i:i + oh, j:j + ow], ts[1].numpy()[:, :, i, j])
              for i in range(3) for j in range(3))
    if bias:
        ref = ref + ts[2].numpy().reshape(1, -1, 1, 1)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda *a: CV.Conv2d((1, 1), pads, (1, 1), 1)(*a), ts, atol=1e-6, rtol=1e-5)


def test_winograd4_kernels_apply_the_documented_matrices():
    # F(4x4, 3x3): A^T [(G w G^T) * (B^T d B)] A is the 3x3 correlation of a 6x6 tile, and the
    # compiled transforms compute B^T d B and A^T M A tile by tile (two tiles, two channels,
    # batch 3), the adjoints' being their transposes
    import ddg.autograd.ops.conv as CV
    from ddg.tensor import conv_kernels as K
    BT, G, AT = CV._WINO4_BT, CV._WINO4_G, CV._WINO4_AT
    rng = np.random.default_rng(11)
    d, w = rng.standard_normal((6, 6)), rng.standard_normal((3, 3))
    direct = np.array([[np.sum(d[i:i + 3, j:j + 3] * w) for j in range(4)] for i in range(4)])
    np.testing.assert_allclose(AT @ ((G @ w @ G.T) * (BT @ d @ BT.T)) @ AT.T, direct, rtol=1e-12, atol=1e-12)
    x4 = rng.standard_normal((2, 6, 10, 3))                       # [C, Hp, Wp, N]: 1 x 2 tiles
    v = K.wino4_in(x4, 1, 2)                                      # [6, 6, C, 1, 2, N]
    for c, tx, k in ((0, 0, 0), (1, 1, 2)):
        tile = x4[c, :, 4 * tx:4 * tx + 6, k]
        np.testing.assert_allclose(v[:, :, c, 0, tx, k], BT @ tile @ BT.T, rtol=1e-12, atol=1e-12)
    y = K.wino4_out_into(v, np.empty((2, 4, 8, 3)))
    np.testing.assert_allclose(y[1, :, 4:8, 2], AT @ v[:, :, 1, 0, 1, 2] @ AT.T, rtol=1e-12, atol=1e-12)
    gy = rng.standard_normal(y.shape)
    gm = K.wino4_out_adjoint(gy)                                  # <gy, out(v)> = <adjoint(gy), v>
    np.testing.assert_allclose(np.vdot(gy, y), np.vdot(gm, v), rtol=1e-12)
    gx = K.wino4_in_adjoint_add(gm, np.zeros_like(x4))
    np.testing.assert_allclose(np.vdot(gm, v), np.vdot(gx, x4), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 16])
def test_winograd4_transforms_at_every_batch_width(n, dtype):
    # the four F(4x4, 3x3) transforms split and interleave image rows by column modulo 4 in
    # one of three ways by the bytes of a pixel's N values (one 8-byte word, two, or value by
    # value): each against the matrices tile by tile in float64, and the adjoints'
    # inner-product identities, on 2 x 3 tiles of 2 channels
    import ddg.autograd.ops.conv as CV
    from ddg.tensor import conv_kernels as K
    BT, AT = CV._WINO4_BT, CV._WINO4_AT
    rng = np.random.default_rng(n)
    c, th, tw = 2, 2, 3
    x4 = rng.standard_normal((c, 4 * th + 2, 4 * tw + 2, n)).astype(dtype)
    v = K.wino4_in(x4, th, tw)
    y = K.wino4_out_into(v, np.empty((c, 4 * th, 4 * tw, n), dtype))
    tol = 1e-12 if dtype is np.float64 else 2e-6
    v64 = v.astype(np.float64)
    for ty in range(th):
        for tx in range(tw):
            tile = x4[:, 4 * ty:4 * ty + 6, 4 * tx:4 * tx + 6].astype(np.float64)
            ref = np.einsum("ia,cabn,jb->ijcn", BT, tile, BT)
            np.testing.assert_allclose(v64[:, :, :, ty, tx], ref, rtol=0, atol=tol * np.abs(ref).max())
            out = np.einsum("ia,abcn,jb->cijn", AT, v64[:, :, :, ty, tx], AT)
            np.testing.assert_allclose(y[:, 4 * ty:4 * ty + 4, 4 * tx:4 * tx + 4], out, rtol=0,
                                       atol=tol * np.abs(out).max())
    gy = rng.standard_normal(y.shape).astype(dtype)
    gm = K.wino4_out_adjoint(gy)
    gx = K.wino4_in_adjoint_add(gm, np.zeros_like(x4))
    f64 = lambda a: a.astype(np.float64).ravel()   # noqa: E731
    np.testing.assert_allclose(f64(gy) @ f64(y), f64(gm) @ v64.ravel(), rtol=10 * tol)
    np.testing.assert_allclose(f64(gm) @ v64.ravel(), f64(gx) @ f64(x4), rtol=10 * tol)


def test_winograd_size_gate():
    # at least 2**20 channel-pixel products (C*O*H*W*N), 2**19 below 32 channels
    import ddg.autograd.ops.conv as CV

    def taken(n, c, hw):
        return CV._use_winograd(np.zeros((n, c, hw, hw), np.float32), np.zeros((c, c, 3, 3), np.float32), (1, 1),
                                (1, 1), 1, (1, 1, 1, 1))
    assert taken(8, 16, 16) and taken(2, 16, 32) and taken(4, 32, 16)
    assert not taken(4, 16, 16) and not taken(2, 32, 16) and not taken(16, 16, 8)
    assert taken(64, 16, 8) and taken(32, 16, 10)     # 8x8 outputs are enough at 16 channels too
    # and at least WINO_MIN_TILES (20) 4x4 output tiles over the batch: the weight transforms
    # cost the same at any batch
    assert taken(6, 128, 8) and taken(2, 128, 16) and taken(1, 64, 32) and taken(3, 256, 10)
    assert not taken(1, 128, 8) and not taken(4, 128, 8) and not taken(1, 128, 16) and not taken(1, 256, 14)


@pytest.mark.parametrize("tile,bound", [(2, 2e-6), (4, 1.5e-5)])
def test_winograd_float32_error_bound(tile, bound, monkeypatch):
    # chosen by shape (3x3, stride 1, >= 32 channels, large enough; F(4x4, 3x3) on numpy from
    # 8x8); float32 results within ``bound`` of float64 (computed by im2col), relative to the
    # largest magnitude of each result (the float32 im2col path's error is ~5e-7, F(2x2,
    # 3x3)'s of the same order, F(4x4, 3x3)'s measured 3e-6 to 1.2e-5 at 16-256 channels)
    import ddg.autograd.ops.conv as CV
    rng = np.random.default_rng(9)
    x = rng.standard_normal((32, 32, 16, 16))
    w = rng.standard_normal((32, 32, 3, 3)) / np.sqrt(9 * 32)
    assert CV._use_winograd(x.astype(np.float32), w, (1, 1), (1, 1), 1, (1, 1, 1, 1))
    assert not CV._use_winograd(x[:16, :16, :8, :8], w[:16, :16], (1, 1), (1, 1), 1, (1, 1, 1, 1))
    f32 = x.astype(np.float32)
    assert CV._wino_tile(f32, w.astype(np.float32), 16, 16) == 4
    assert len(CV._wino_blocks(32, 32, 4, 4, 32)) == 2    # F(4x4, 3x3) here in two blocks of tile rows
    assert CV._wino_tile(f32, w.astype(np.float32), 8, 8) == 4
    assert CV._wino_tile(f32, w.astype(np.float32), 4, 8) == 2
    assert CV._wino_tile(f32.astype(np.float16), w.astype(np.float16), 16, 16) == 2
    if tile == 2:
        monkeypatch.setattr(CV, "_wino_tile", lambda *a: 2)
    got = {}
    for dt in ("float32", "float64"):
        if dt == "float64":
            monkeypatch.setattr(CV, "_use_winograd", lambda *a: False)
        X = ddg.to_tensor(x.astype(dt), stop_gradient=False)
        W = ddg.to_tensor(w.astype(dt), stop_gradient=False)
        op = CV.Conv2d((1, 1), (1, 1, 1, 1), (1, 1), 1)
        y = op(X, W)
        assert (op.wino is not None) == (dt == "float32")
        if dt == "float32":
            assert op.wino[-1] == tile
        (y * ddg.to_tensor(np.cos(np.arange(y.size)).reshape(y.shape).astype(dt))).sum().backward()
        got[dt] = [y.numpy(), X.grad.numpy(), W.grad.numpy()]
    for a, b in zip(got["float32"], got["float64"]):
        assert np.abs(a - b).max() <= bound * np.abs(b).max()


def test_winograd_on_the_gpu_path_matches_numpy(monkeypatch):
    # the same kernels on cupy arrays where cuDNN is not used (DDG_CUDNN=0, or tests/simgpu's
    # simcupy)
    from ddg.tensor import backend
    if not backend.cupy_available():
        pytest.skip("needs cupy (a GPU, or tests/simgpu's simcupy)")
    import ddg.autograd.ops.conv as CV
    monkeypatch.setattr(CV, "_use_winograd", lambda *a: True)
    monkeypatch.setattr(CV, "_cudnn_for", lambda *a: None)
    rng = np.random.default_rng(10)
    x, w = rng.standard_normal((4, 32, 8, 8)), rng.standard_normal((32, 32, 3, 3))
    res = []
    for place in ("cpu", "gpu"):
        X = ddg.to_tensor(x, place=place, stop_gradient=False)
        W = ddg.to_tensor(w, place=place, stop_gradient=False)
        op = CV.Conv2d((1, 1), (1, 1, 1, 1), (1, 1), 1)
        y = op(X, W)
        assert op.wino is not None
        y.sum().backward()
        res.append([y.numpy(), X.grad.numpy(), W.grad.numpy()])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
