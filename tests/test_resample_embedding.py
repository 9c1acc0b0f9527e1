"""interpolate (nearest, linear, bilinear) through the Resample2D op and the embedding op:
forward against float64 numpy references, backward against central differences, second
order, channels-last layouts, and the cupy path (simcupy) giving the same results."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.autograd.ops.embedding import sparse_rows
from ddg.autograd.gradcheck import gradcheck, gradgradcheck
from ddg.tensor import backend

RNG = np.random.default_rng(11)


def _lin_matrix(n_in, n_out, align_corners, align_mode=0, nearest=False):
    """The [n_out, n_in] matrix of a 1-D resize (Paddle's conventions), built per index."""
    m = np.zeros((n_out, n_in))
    for k in range(n_out):
        if align_corners:
            src = k * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        elif nearest or align_mode == 1:
            src = k * n_in / n_out
        else:
            src = max((k + 0.5) * n_in / n_out - 0.5, 0.0)
        if nearest:
            m[k, min(int(np.floor(src)), n_in - 1)] = 1
            continue
        i0 = min(int(np.floor(src)), n_in - 1)
        i1 = min(i0 + 1, n_in - 1)
        f = src - i0
        m[k, i0] += 1 - f
        m[k, i1] += f
    return m


# (input shape, interpolate kwargs, data_format, reference matrices' arguments per spatial axis)
CASES = {
    "nearest2x": ((2, 3, 4, 5), dict(scale_factor=2, mode="nearest"), "NCHW",
                  [(4, 8, False, 0, True), (5, 10, False, 0, True)]),
    "nearest3x2_nhwc": ((2, 4, 3, 3), dict(scale_factor=(3, 2), mode="nearest"), "NHWC",
                        [(4, 12, False, 0, True), (3, 6, False, 0, True)]),
    "nearest_size": ((1, 2, 5, 4), dict(size=[3, 7], mode="nearest"), "NCHW",
                     [(5, 3, False, 0, True), (4, 7, False, 0, True)]),
    "bilinear_ac": ((2, 2, 4, 5), dict(size=[7, 9], mode="bilinear", align_corners=True), "NCHW",
                    [(4, 7, True), (5, 9, True)]),
    "bilinear_half": ((2, 2, 4, 5), dict(size=[6, 3], mode="bilinear"), "NCHW", [(4, 6, False), (5, 3, False)]),
    "bilinear_mode1_nhwc": ((1, 4, 5, 3), dict(size=[6, 7], mode="bilinear", align_mode=1), "NHWC",
                            [(4, 6, False, 1), (5, 7, False, 1)]),
    "linear": ((2, 3, 5), dict(size=9, mode="linear", align_corners=True), "NCW", [(5, 9, True)]),
    "nearest1d_nwc": ((2, 5, 3), dict(scale_factor=3, mode="nearest"), "NWC", [(5, 15, False, 0, True)]),
}


def _reference(x, fmt, mats):
    x = x.astype(np.float64)
    last = fmt.endswith("C")
    axes = list(range(1, 1 + len(mats))) if last else list(range(2, 2 + len(mats)))
    for ax, m in zip(axes, mats):
        x = np.moveaxis(np.tensordot(_lin_matrix(*m), np.moveaxis(x, ax, 0), axes=1), 0, ax)
    return x


@pytest.mark.parametrize("name", sorted(CASES))
def test_interpolate_forward_backward(name):
    shape, kw, fmt, mats = CASES[name]
    x = RNG.standard_normal(shape)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-6)):
        y = F.interpolate(ddg.to_tensor(x.astype(dtype)), data_format=fmt, **kw).numpy()
        assert y.dtype == dtype
        np.testing.assert_allclose(y, _reference(x.astype(dtype), fmt, mats), rtol=tol, atol=tol)
    xt = ddg.to_tensor(x, stop_gradient=False)
    assert gradcheck(lambda t: F.interpolate(t, data_format=fmt, **kw), [xt], eps=1e-6, atol=1e-6, rtol=1e-5)
    assert gradgradcheck(lambda t: F.interpolate(t, data_format=fmt, **kw) ** 2, [xt], eps=1e-6, atol=1e-5, rtol=1e-4)


def test_embedding_forward_backward_and_padding():
    w = RNG.standard_normal((7, 5))
    ids = np.array([[0, 3, 3, 6], [2, 3, 0, 0]])
    for dtype in (np.float64, np.float32):
        wt = ddg.to_tensor(w.astype(dtype), stop_gradient=False)
        y = F.embedding(ddg.to_tensor(ids), wt, padding_idx=3)
        ref = w.astype(dtype)[ids] * (ids != 3)[..., None]
        np.testing.assert_array_equal(y.numpy(), ref)
        g = RNG.standard_normal(y.shape).astype(dtype)
        y.backward(ddg.to_tensor(g))
        gref = np.zeros_like(w)
        np.add.at(gref, ids.reshape(-1), (g * (ids != 3)[..., None]).reshape(-1, 5))
        np.testing.assert_allclose(wt.grad.numpy(), gref, rtol=1e-6, atol=1e-6)
    wt = ddg.to_tensor(w, stop_gradient=False)
    idt = ddg.to_tensor(ids)
    assert gradcheck(lambda t: F.embedding(idt, t, padding_idx=0), [wt])
    assert gradgradcheck(lambda t: F.embedding(idt, t, padding_idx=0) ** 2, [wt])
    assert F.embedding(ddg.to_tensor(ids.astype(np.int32)), wt).shape == [2, 4, 5]


def test_embedding_sparse_gives_the_dense_gradient_and_records_the_rows():
    w = RNG.standard_normal((6, 3))
    ids = ddg.to_tensor(np.array([1, 4, 1, 0]))
    grads = []
    for sparse in (False, True):
        wt = nn.Parameter(w.copy())
        F.embedding(ids, wt, padding_idx=0, sparse=sparse).sum().backward()
        grads.append(wt.grad.numpy())
        rows = sparse_rows(wt)
        if sparse:   # the looked-up rows, sorted, without the padding row; merged over passes
            np.testing.assert_array_equal(rows, [1, 4])
            F.embedding(ddg.to_tensor(np.array([[5, 1]])), wt, sparse=True).sum().backward()
            np.testing.assert_array_equal(sparse_rows(wt), [1, 4, 5])
            wt.clear_grad()
            assert sparse_rows(wt) is None
        else:
            assert rows is None
    np.testing.assert_array_equal(grads[0], grads[1])
    np.testing.assert_array_equal(grads[0][:, 0], [0, 2, 0, 0, 1, 0])


def _lazy_adam_reference(w, steps, lazy, lr=0.1, b1=0.9, b2=0.999, eps=1e-8):
    """Adam on the gradients of sum(embedding(ids)^2): with ``lazy`` only the looked-up rows'
    moments and values change (Paddle's lazy mode), with the step's own bias correction."""
    w = w.copy()
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, ids in enumerate(steps, 1):
        ids = np.asarray(ids).ravel()
        g = np.zeros_like(w)
        np.add.at(g, ids, 2 * w[ids])
        rows = np.unique(ids) if lazy else np.arange(len(w))
        m[rows] = b1 * m[rows] + (1 - b1) * g[rows]
        v[rows] = b2 * v[rows] + (1 - b2) * g[rows] ** 2
        mh, vh = m[rows] / (1 - b1 ** t), v[rows] / (1 - b2 ** t)
        w[rows] -= lr * mh / (np.sqrt(vh) + eps)
    return w


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW"])
@pytest.mark.parametrize("fused", [True, False])
def test_lazy_adam_updates_only_the_rows_sparse_lookups_touched(opt_name, fused):
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((7, 3))
    steps = [[[1, 3, 1], [4, 3, 3]], [[0, 1, 1]], [[1, 3, 6]]]
    extra = rng.standard_normal((2, 2))
    results = {}
    for lazy, sparse in ((True, True), (False, True), (True, False)):
        emb = nn.Embedding(7, 3, sparse=sparse, dtype="float64")
        emb.weight.set_value(w0)
        other = nn.Parameter(extra.copy())          # a dense parameter in the same group
        kw = {"weight_decay": 0.0} if opt_name == "AdamW" else {}
        opt = getattr(ddg.optimizer, opt_name)(0.1, parameters=[emb.weight, other], lazy_mode=lazy, **kw)
        opt._use_fused = fused
        for ids in steps:
            y = emb(ddg.to_tensor(np.array(ids)))
            ((y * y).sum() + (other * other).sum()).backward()
            opt.step()
            opt.clear_grad()
            assert sparse_rows(emb.weight) is None
        results[lazy, sparse] = emb.weight.numpy()
        np.testing.assert_allclose(other.numpy(), _other_adam(extra, len(steps)), rtol=1e-12)
    np.testing.assert_allclose(results[True, True], _lazy_adam_reference(w0, steps, True), rtol=1e-12, atol=1e-14)
    dense = _lazy_adam_reference(w0, steps, False)
    np.testing.assert_allclose(results[False, True], dense, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(results[True, False], dense, rtol=1e-12, atol=1e-14)   # lazy needs sparse rows
    # rows 0 and 6 were looked up once each: dense Adam keeps moving them, lazy Adam does not
    assert not np.allclose(results[True, True][0], dense[0]) and np.array_equal(results[True, True][2], w0[2])


def _other_adam(x, n, lr=0.1, b1=0.9, b2=0.999, eps=1e-8):
    x = x.copy()
    m, v = np.zeros_like(x), np.zeros_like(x)
    for t in range(1, n + 1):
        g = 2 * x
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        x -= lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return x


@pytest.mark.skipif(not backend.cupy_available(),
                    reason="GPU tests need cupy and an NVIDIA GPU (cupy is not installed or sees no GPU)")
@pytest.mark.parametrize("name", sorted(CASES))
def test_device_interpolate_gives_the_cpu_results(name):
    shape, kw, fmt, _ = CASES[name]
    x = RNG.standard_normal(shape).astype(np.float32)
    res = []
    for place in ("cpu", "gpu"):
        t = ddg.to_tensor(x, place=place, stop_gradient=False)
        y = F.interpolate(t, data_format=fmt, **kw)
        y.backward(ddg.to_tensor(np.linspace(-1, 1, y.size, dtype=np.float32).reshape(y.shape), place=place))
        res.append((y.numpy(), t.grad.numpy()))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-5, atol=1e-6)
