"""Softmax and log-softmax over the last axis of numpy float32/float64 arrays run compiled
row loops (ddg/tensor/softmax_kernels.py); other axes, dtypes and cupy keep the numpy/cupy
expression. Both paths against a float64 reference, the gradient against central
differences, and the edge values a row can hold (-inf entries, NaN, one element)."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd import gradcheck, gradgradcheck
from ddg.tensor import softmax_kernels as SK

RNG = np.random.default_rng(7)


def _ref(x, axis, log):
    x = x.astype(np.float64)
    s = x - x.max(axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return s - np.log(np.exp(s).sum(axis=axis, keepdims=True)) if log else \
            np.exp(s) / np.exp(s).sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype,tol", [("float32", 2e-6), ("float64", 1e-13)])
def test_last_axis_kernel_and_other_axis_agree_with_float64(log, dtype, tol):
    fn = F.log_softmax if log else F.softmax
    x = (RNG.standard_normal((3, 5, 37)) * 4).astype(dtype)
    assert SK.rows_of(x, -1) is not None and SK.rows_of(x, 1) is None and SK.rows_of(x.T, -1) is None
    for axis in (-1, 1):
        t = ddg.to_tensor(x, stop_gradient=False)
        y = fn(t, axis=axis)
        assert y.dtype == t.dtype
        np.testing.assert_allclose(y.numpy(), _ref(x, axis, log), rtol=tol, atol=tol)
        w = RNG.standard_normal(x.shape)
        (y * ddg.to_tensor(w.astype(dtype))).sum().backward()
        # the exact gradient from the float64 output: J^T w
        p = np.exp(_ref(x, axis, True))
        ref = w - p * w.sum(axis=axis, keepdims=True) if log else p * (w - (w * p).sum(axis=axis, keepdims=True))
        np.testing.assert_allclose(t.grad.numpy(), ref, rtol=20 * tol, atol=20 * tol)


@pytest.mark.parametrize("log", [False, True])
def test_last_axis_gradients_against_central_differences(log):
    fn = F.log_softmax if log else F.softmax
    x = ddg.to_tensor(RNG.standard_normal((2, 3, 6)), stop_gradient=False)
    assert gradcheck(lambda x: fn(x, axis=-1), [x])
    assert gradgradcheck(lambda x: fn(x, axis=-1) ** 2, [x])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rows_with_inf_nan_one_element_and_0d(dtype):
    x = RNG.standard_normal((4, 6))
    x[0, :3] = -np.inf       # masked entries: probability 0, log-probability -inf
    x[1, 2] = np.nan         # a NaN spreads over its row, as in numpy
    w = RNG.standard_normal(x.shape)
    for fn, log in ((F.softmax, False), (F.log_softmax, True)):
        t = ddg.to_tensor(x.astype(dtype), stop_gradient=False)
        y = fn(t)
        np.testing.assert_allclose(y.numpy(), _ref(x, -1, log), rtol=1e-6, atol=1e-7)  # equal_nan, inf exact
        (y * ddg.to_tensor(w.astype(dtype))).sum().backward()
        gx = t.grad.numpy()
        assert np.isnan(gx[1]).all() and np.isfinite(gx[[0, 2, 3]]).all()
        # d softmax_j / d x_j = p_j (1 - p_j) = 0 there; d log_softmax_j / d x_j = 1 - p_j = 1
        np.testing.assert_allclose(gx[0, :3], w[0, :3] if log else 0, rtol=1e-6)
    edge = np.array([[np.nan, 1.0, 2.0], [-np.inf, -np.inf, -np.inf]], dtype=dtype)  # NaN first; all masked
    assert np.isnan(F.softmax(ddg.to_tensor(edge)).numpy()).all()
    assert np.isnan(F.log_softmax(ddg.to_tensor(edge)).numpy()).all()
    one = ddg.to_tensor(np.array([[3.0], [-1.0]], dtype=dtype))
    np.testing.assert_array_equal(F.softmax(one).numpy(), [[1.0], [1.0]])
    np.testing.assert_array_equal(F.log_softmax(one).numpy(), [[0.0], [0.0]])
    np.testing.assert_array_equal(F.softmax(ddg.to_tensor(np.array(2.0, dtype=dtype)), axis=0).numpy(), 1.0)


def test_float32_exp_and_scale_over_the_whole_range():
    # rows spread over [-80, 80] after the shift: the kernel's own exp against float64,
    # rows shorter and longer than its eight running maxima, and the scale factor
    for n in (3, 8, 37, 300):
        x = (RNG.standard_normal((6, n)) * 30).astype(np.float32)
        for scale in (1.0, 0.3):
            ref = _ref(x.astype(np.float64) * scale, -1, False)
            got = SK.softmax_last(x, False, scale)
            # float32 rounding of the shifted input d costs |d| * 6e-8 relative (5e-6 at p = 1e-30)
            big, mid = ref > 1e-30, ref > 1e-4
            np.testing.assert_allclose(got[big], ref[big], rtol=5e-6)
            np.testing.assert_allclose(got[mid], ref[mid], rtol=1e-6)
            assert np.abs(got - ref)[~big].max(initial=0) < 1e-30
            lg, p = SK.softmax_last(x, True, scale)
            np.testing.assert_allclose(lg, _ref(x.astype(np.float64) * scale, -1, True), rtol=1e-6, atol=2e-6)
            np.testing.assert_allclose(p, got, rtol=1e-6, atol=1e-37)
    # exp(d) itself on a dense grid of d <= 0, down to where float32 leaves the normal range
    d = np.linspace(-87.3, 0.0, 30001).astype(np.float32)
    e, bits = np.vectorize(SK.exp_parts)(d)
    k = (bits.astype(np.int64) >> 23) - 127                  # bits: the float32 pattern of 2**k
    got = e.astype(np.float64) * np.exp2(k.astype(np.float64))
    np.testing.assert_allclose(got, np.exp(d.astype(np.float64)), rtol=2e-7)
    two = np.stack([np.zeros_like(d), d], axis=1)     # softmax([0, d]) = [1, e^d] / (1 + e^d)
    np.testing.assert_allclose(SK.softmax_last(two, False)[:, 1], 1 / (1 + np.exp(-d.astype(np.float64))),
                               rtol=3e-7)



@pytest.mark.parametrize("n", [1, 5, 16, SK._SHORT, SK._SHORT + 1, 64, 130])
@pytest.mark.filterwarnings("ignore:invalid value")
def test_softmax_block_and_group_kernels(n):
    # float32 softmax rows: up to _SHORT values the block kernel (blocks of _BLOCK rows,
    # transposed), longer ones the group kernel (_GROUP // n rows at a time). Row counts
    # below, at and across a block/group boundary, scaled, against float64 and against the
    # one-row-at-a-time kernel; masked entries (-inf), a NaN, a fully masked row, a +inf
    for rows in (1, SK._BLOCK, 2 * SK._BLOCK + 3):
        x = (RNG.standard_normal((rows, n)) * 20).astype(np.float32)
        if rows > 4 and n > 2:
            x[0, 1] = -np.inf
            x[1, -1] = np.nan
            x[2, :] = -np.inf
            x[3, 0] = np.inf
            x[-1, :2] = -np.inf
        for scale in (1.0, 0.125):
            ref = _ref(x.astype(np.float64) * scale, -1, False)
            got = SK.softmax_last(x, False, scale)
            assert np.array_equal(np.isnan(got), np.isnan(ref))
            ok = ~np.isnan(ref)
            big = ok & (ref > 1e-30)
            np.testing.assert_allclose(got[big], ref[big], rtol=5e-6)
            assert np.abs(got - ref)[ok & ~big].max(initial=0) < 1e-30
            # log-softmax from the same kernel: its softmax output is the plain one, bit for bit,
            # and the log values agree with float64 (-inf where the probability is 0)
            lg, p = SK.softmax_last(x, True, scale)
            assert np.array_equal(p, got, equal_nan=True)
            lref = _ref(x.astype(np.float64) * scale, -1, True)
            assert np.array_equal(np.isnan(lg), np.isnan(lref))
            fin = np.isfinite(lref)
            assert np.array_equal(lg[~fin & ~np.isnan(lref)], lref[~fin & ~np.isnan(lref)])
            np.testing.assert_allclose(lg[fin], lref[fin], rtol=2e-6, atol=2e-6)

def test_scaled_gradient():
    x = RNG.standard_normal((5, 11)).astype(np.float32)
    ref = SK.softmax_last(x, False, 0.5)
    g = RNG.standard_normal(x.shape).astype(np.float32)
    want = 0.5 * ref * (g - (g * ref).sum(-1, keepdims=True))
    np.testing.assert_allclose(SK.softmax_last_grad(ref, g.copy(), False, 0.5), want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("heads,mask", [(None, None), (None, "bool"), (2, "float"), (2, "bool")])
def test_attention_float32_kernels_against_float64(heads, mask):
    # the float32 op (compiled softmax rows, in place) against the float64 op, whose own
    # test checks it against numpy and central differences; masks with fully masked keys
    from ddg.autograd.ops.nn_ops import Attention
    from ddg.nn.functional.attention import _convert_attention_mask
    shape = (3, 5, 8) if heads else (3, 2, 5, 4)
    arrs = [RNG.standard_normal(shape) for _ in range(3)]
    m = None
    if mask:
        keep = RNG.random((1, 1, 5, 5) if heads else (3, 1, 5, 5)) > 0.4
        keep[..., 0] = True
        keep[..., 3] = False                                 # a key nobody attends to
        m = keep if mask == "bool" else np.where(keep, RNG.standard_normal(keep.shape), -np.inf)
    got = {}
    for dtype in ("float32", "float64"):
        ts = [ddg.to_tensor(a.astype(dtype), stop_gradient=False) for a in arrs]
        if m is not None:
            mt = ddg.to_tensor(m if m.dtype == bool else m.astype(dtype))
            ts.append(_convert_attention_mask(mt, dtype))
            if m.dtype != bool:
                ts[-1].stop_gradient = False
        op = Attention(0.6) if heads is None else Attention(0.6, heads)
        out, w = op(*ts)
        w2 = RNG.standard_normal(w.shape) if dtype == "float32" else w2
        g2 = RNG.standard_normal(out.shape) if dtype == "float32" else g2
        ((out * ddg.to_tensor(g2.astype(dtype))).sum() + (w * ddg.to_tensor(w2.astype(dtype))).sum()).backward()
        got[dtype] = [out.numpy(), w.numpy()] + [t.grad.numpy() for t in ts if not t.stop_gradient]
    if mask:
        assert (got["float32"][1][..., 3] == 0).all()
    assert len(got["float32"]) == len(got["float64"]) == 5 + (mask == "float")
    for a, b in zip(got["float32"], got["float64"]):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def test_attention_heads_gradients_written_into_merged_layout():
    # with heads on numpy the products write into [batch, L, E] arrays' strided views:
    # central differences for both outputs, the weights alone (v gets no gradient), and
    # an input without gradient
    from ddg.autograd.ops.nn_ops import Attention
    ts = [ddg.to_tensor(RNG.standard_normal((2, 3, 4)), stop_gradient=False) for _ in range(3)]

    def both(*xs):
        o, w = Attention(0.8, 2)(*xs)
        return ddg.concat([o.flatten(), w.flatten()])
    assert gradcheck(both, ts, atol=1e-6, rtol=1e-5)
    assert gradcheck(lambda *xs: Attention(0.8, 2)(*xs)[1], ts, atol=1e-6, rtol=1e-5)
    ts[1].stop_gradient = True
    Attention(0.8, 2)(*ts)[0].sum().backward()
    assert ts[1].grad is None and ts[0].grad.shape == [2, 3, 4] and ts[2].grad.shape == [2, 3, 4]


@pytest.mark.parametrize("shape,axis", [((2, 5, 3, 4), 1), ((3, 7, 37), 0), ((4, 1, 6), 1), ((2, 3, 4, 5), -3)])
@pytest.mark.filterwarnings("ignore:invalid value")
def test_other_axis_float32_kernel_edges(shape, axis):
    # float32 over an axis before the last: compiled loops along the last axis
    x = RNG.standard_normal(shape) * 20
    assert SK.mid_of(x.astype("float32"), axis) is not None and SK.mid_of(x, axis) is None
    flat = np.moveaxis(x, axis, -1).reshape(-1, shape[axis])
    flat[0, :] = -np.inf                               # all masked: NaN
    flat[1, 0] = -np.inf                               # one masked: probability 0
    if flat.shape[0] > 3:
        flat[2, -1] = np.nan                           # NaN spreads over its slice
    x = np.moveaxis(flat.reshape(np.moveaxis(x, axis, -1).shape), -1, axis).astype("float32").astype(np.float64)
    w = RNG.standard_normal(shape)
    for fn, log in ((F.softmax, False), (F.log_softmax, True)):
        t = ddg.to_tensor(x.astype("float32"), stop_gradient=False)
        y = fn(t, axis=axis)
        ref = _ref(x, axis, log)
        got = y.numpy().astype(np.float64)
        assert np.array_equal(np.isnan(got), np.isnan(ref))
        ok = ~np.isnan(ref) & (np.abs(ref) > 1e-30)
        np.testing.assert_allclose(got[ok], ref[ok], rtol=5e-6, atol=2e-6 if log else 0)
        (y * ddg.to_tensor(w.astype("float32"))).sum().backward()
        with np.errstate(invalid="ignore"):
            p = np.exp(_ref(x, axis, True))
            want = w - p * w.sum(axis=axis, keepdims=True) if log else \
                p * (w - (w * p).sum(axis=axis, keepdims=True))
        gx = t.grad.numpy()
        fin = np.isfinite(want)
        assert np.array_equal(np.isfinite(gx), fin)
        np.testing.assert_allclose(gx[fin], want[fin], rtol=1e-4, atol=1e-5)
    if len(shape) == 4:
        got = ddg.nn.Softmax2D()(ddg.to_tensor(x.astype("float32"))).numpy()
        np.testing.assert_allclose(got, _ref(x, -3, False), rtol=5e-6, atol=1e-7)
