"""The nn names added for Paddle API coverage: 3-D convolution and pooling, and the
layers, functions and losses of ddg/nn/functional/extra.py. Forward against numpy
references, backward against float64 central differences, the same results on every
backend (simcupy included); values that Paddle's conventions decide were checked
against Paddle 3.3.1."""
import itertools

import numpy as np
import pytest

import ddg
import ddg.nn as nn
import ddg.nn.functional as F
from ddg.autograd import gradcheck


def _np_conv3d(x, w, b, stride, pads, dil, groups):
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pads])
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    k = w.shape[2:]
    out_sz = [(x.shape[2 + i] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(3)]
    out = np.zeros((n, o) + tuple(out_sz))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for pos in itertools.product(*[range(s) for s in out_sz]):
            sl = tuple(slice(pos[i] * stride[i], pos[i] * stride[i] + dil[i] * (k[i] - 1) + 1, dil[i]) for i in range(3))
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            out[(slice(None), oc) + pos] = (patch * w[oc]).sum(axis=(1, 2, 3, 4))
    return out + (0 if b is None else b.reshape(1, -1, 1, 1, 1))


def _np_conv3d_transpose(x, w, stride, pads, groups, out_sz):
    n, cin = x.shape[:2]
    cg, og = cin // groups, w.shape[1]
    k = w.shape[2:]
    full = [out_sz[i] + 2 * pads[i] + k[i] for i in range(3)]
    out = np.zeros((n, og * groups) + tuple(full))
    for ci in range(cin):
        g = ci // cg
        for pos in itertools.product(*[range(s) for s in x.shape[2:]]):
            for kk in itertools.product(*[range(s) for s in k]):
                idx = tuple(pos[i] * stride[i] + kk[i] for i in range(3))
                out[(slice(None), slice(g * og, (g + 1) * og)) + idx] += x[(slice(None), ci) + pos][:, None] * \
                    w[(ci, slice(None)) + kk][None]
    return out[(slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + out_sz[i]) for i in range(3))]


def _np_pool3d(x, k, s, p, kind):
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p)] * 3, constant_values=fill)
    ones = np.pad(np.ones(x.shape[2:]), [(p, p)] * 3)
    o = [(xp.shape[2 + i] - k) // s + 1 for i in range(3)]
    out = np.zeros(x.shape[:2] + tuple(o))
    for pos in itertools.product(*[range(v) for v in o]):
        sl = tuple(slice(pos[i] * s, pos[i] * s + k) for i in range(3))
        win = xp[(slice(None), slice(None)) + sl]
        out[(slice(None), slice(None)) + pos] = win.max(axis=(2, 3, 4)) if kind == "max" else \
            win.sum(axis=(2, 3, 4)) / ones[sl].sum()
    return out


ROWS = [
    ("conv3d", lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2), groups=2),
     lambda x, w, b: _np_conv3d(x, w, b, (1, 2, 1), (1, 0, 1), (1, 1, 2), 2), [(2, 4, 3, 4, 5), (4, 2, 2, 2, 2), (4,)]),
    ("conv3d_transpose", lambda x, w: F.conv3d_transpose(x, w, stride=2, padding=1, groups=2),
     lambda x, w: _np_conv3d_transpose(x, w, (2, 2, 2), (1, 1, 1), 2, [2, 2, 4]), [(1, 4, 2, 2, 3), (4, 1, 2, 2, 2)]),
    ("max_pool3d", lambda x: F.max_pool3d(x, 2, 2, 1), lambda x: _np_pool3d(x, 2, 2, 1, "max"), [(2, 2, 3, 4, 3)]),
    ("avg_pool3d", lambda x: F.avg_pool3d(x, 3, 2, 1), lambda x: _np_pool3d(x, 3, 2, 1, "avg"), [(2, 2, 5, 4, 3)]),
    ("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 1)),
     lambda x: np.stack([np.stack([x[:, :, d0:d1, h0:h1].mean(axis=(2, 3, 4)) for h0, h1 in ((0, 2), (1, 3), (2, 4))],
                                  -1) for d0, d1 in ((0, 2), (1, 3))], -2)[..., None], [(2, 2, 3, 4, 2)]),
    ("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, (1, 3, 2)),
     lambda x: np.stack([np.stack([x[:, :, :, h0:h1, w0:w1].max(axis=(2, 3, 4)) for w0, w1 in ((0, 2), (1, 3))], -1)
                         for h0, h1 in ((0, 2), (1, 3), (2, 4))], -2)[:, :, None], [(2, 2, 2, 4, 3)]),
]


@pytest.mark.parametrize("name,fn,ref,shapes", ROWS, ids=[r[0] for r in ROWS])
def test_forward_matches_numpy(name, fn, ref, shapes, rng):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out = fn(*[ddg.to_tensor(a) for a in arrays])
    want = ref(*arrays)
    assert out.shape == list(want.shape)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    assert out.dtype == np.float32


@pytest.mark.parametrize("name,fn,ref,shapes", ROWS, ids=[r[0] for r in ROWS])
def test_backward_matches_central_differences(name, fn, ref, shapes, rng):
    inputs = [ddg.to_tensor(rng.standard_normal(s), stop_gradient=False) for s in shapes]
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("name,fn,ref,shapes", ROWS, ids=[r[0] for r in ROWS])
def test_same_results_on_every_backend(name, fn, ref, shapes, place, rng):
    arrays = [rng.standard_normal(s) for s in shapes]
    cpu = [ddg.to_tensor(a, stop_gradient=False) for a in arrays]
    dev = [ddg.to_tensor(a, place=place, stop_gradient=False) for a in arrays]
    out_cpu, out_dev = fn(*cpu), fn(*dev)
    assert out_dev.place == ddg.tensor.place.parse_place(place)
    np.testing.assert_allclose(out_dev.numpy(), out_cpu.numpy(), rtol=1e-10, atol=1e-12)
    v = np.random.default_rng(1).standard_normal(out_cpu.shape)
    out_cpu.backward(ddg.to_tensor(v))
    out_dev.backward(ddg.to_tensor(v, place=place))
    for c, d in zip(cpu, dev):
        np.testing.assert_allclose(d.grad.numpy(), c.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_conv3d_layers_and_pool_masks(rng):
    x = ddg.to_tensor(rng.standard_normal((2, 3, 4, 5, 4)).astype(np.float32))
    conv = nn.Conv3D(3, 4, 3, padding=1, data_format="NCDHW")
    assert conv.weight.shape == [4, 3, 3, 3, 3] and conv(x).shape == [2, 4, 4, 5, 4]
    convt = nn.Conv3DTranspose(3, 2, 2, stride=2)
    assert convt.weight.shape == [3, 2, 2, 2, 2] and convt(x).shape == [2, 2, 8, 10, 8]
    assert convt(x, output_size=[9, 11, 9]).shape == [2, 2, 9, 11, 9]
    y = F.conv3d(ddg.to_tensor(np.moveaxis(x.numpy(), 1, -1)), conv.weight, conv.bias, padding=1, data_format="NDHWC")
    np.testing.assert_allclose(np.moveaxis(y.numpy(), -1, 1), conv(x).numpy(), rtol=1e-5, atol=1e-5)
    assert nn.MaxPool3D(2)(x).shape == [2, 3, 2, 2, 2] and nn.AvgPool3D(2, ceil_mode=True)(x).shape == [2, 3, 2, 3, 2]
    assert nn.AdaptiveAvgPool3D(1)(x).shape == [2, 3, 1, 1, 1] and nn.AdaptiveMaxPool3D((2, 1, 2))(x).shape == [2, 3, 2, 1, 2]
    # the mask holds each maximum's flat index into D*H*W, as in Paddle
    m, mask = F.max_pool3d(x, 2, 2, return_mask=True)
    flat = x.numpy().reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, mask.numpy().reshape(2, 3, -1), 2),
                                  m.numpy().reshape(2, 3, -1))
    assert mask.dtype == np.int32
    with pytest.raises(ValueError, match=r"conv3d.*\[2, 3, 4, 5\]"):
        F.conv3d(ddg.ones([2, 3, 4, 5]), conv.weight)
    with pytest.raises(ValueError, match="conv3d.*channels"):
        F.conv3d(ddg.ones([2, 2, 4, 5, 4]), conv.weight)
