"""Paddle's semantics: values, dtypes and errors as Paddle 3.3.1 gives them. The expected values
were printed by the real Paddle 3.3.1 (CPU) on the same inputs; CI has no Paddle, so
they are written out here."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn

T = ddg.to_tensor


def _logits():
    return T(np.arange(12, dtype="float32").reshape(4, 3) / 7, stop_gradient=False)


# -- cross_entropy -------------------------------------------------------------------
def test_cross_entropy_mean_with_negative_ignore_index_divides_by_n():
    x = _logits()
    loss = F.cross_entropy(x, T([0, -100, 2, 1]))
    loss.backward()
    np.testing.assert_allclose(loss.numpy(), 0.82905257, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), [[-0.17824911, 0.08276932, 0.09547979], [0, 0, 0],
                                                [0.07175089, 0.08276932, -0.15452021],
                                                [0.07175089, -0.16723067, 0.09547979]], rtol=1e-5, atol=1e-7)
    # ignore_index -1 (negative too): all N count
    np.testing.assert_allclose(F.cross_entropy(x, T([0, -1, 2, 1]), ignore_index=-1).numpy(),
                               F.cross_entropy(x, T([0, -1, 2, 1]), ignore_index=-1, reduction="sum").numpy() / 4)
    np.testing.assert_allclose(F.cross_entropy(x, T([0, -100, -100, 1])).numpy(), 0.588416, rtol=1e-6)
    assert F.cross_entropy(x, T([-100] * 4)).numpy() == 0.0


def test_cross_entropy_mean_with_weight_or_nonnegative_ignore_index():
    x = _logits()
    loss = F.cross_entropy(x, T([0, -100, 2, 1]), weight=T([1.0, 2.0, 3.0]))
    loss.backward()
    np.testing.assert_allclose(loss.numpy(), 1.0577844, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), [[-0.11883274, 0.05517955, 0.06365319], [0, 0, 0],
                                                [0.14350179, 0.16553864, -0.30904043],
                                                [0.09566786, -0.22297424, 0.12730639]], rtol=1e-5, atol=1e-7)
    # ignore_index >= 0: divided by the kept samples
    np.testing.assert_allclose(F.cross_entropy(x, T([0, 5, 2, 1]), ignore_index=5).numpy(), 1.1054034, rtol=1e-6)
    np.testing.assert_allclose(F.nll_loss(F.log_softmax(x), T([0, -100, 2, 1])).numpy(), 1.1054034, rtol=1e-6)


def test_cross_entropy_shapes_axis_and_label_types():
    x = _logits()
    none = F.cross_entropy(x, T([0, -100, 2, 1]).reshape([4, 1]), reduction="none")
    assert none.shape == [4, 1]
    np.testing.assert_allclose(none.numpy().ravel(), [1.2482606, 0.0, 0.9625463, 1.1054034], rtol=1e-6)
    assert F.cross_entropy(x, T([0, -100, 2, 1]), reduction="none").shape == [4]
    np.testing.assert_allclose(F.cross_entropy(x, T([0, -100, 2, 1]), reduction="sum").numpy(), 3.3162103,
                               rtol=1e-6)
    # float-typed hard labels are cast (Paddle accepts them)
    np.testing.assert_allclose(F.cross_entropy(x, T([0.0, 2.0, 1.0, 1.0])).numpy(), 1.1054034, rtol=1e-6)
    np.testing.assert_allclose(F.cross_entropy(x, T([[0.0], [2.0], [1.0], [1.0]])).numpy(), 1.1054034, rtol=1e-6)
    # soft labels with class weights: weighted sum over the total weight; 'none' keeps the axis
    hard = T([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]])
    np.testing.assert_allclose(F.cross_entropy(x, hard, soft_label=True, weight=T([1.0, 2.0, 3.0])).numpy(),
                               1.0260384, rtol=1e-6)
    none = F.cross_entropy(x, hard, soft_label=True, weight=T([1.0, 2.0, 3.0]), reduction="none")
    assert none.shape == [4, 1]
    np.testing.assert_allclose(none.numpy().ravel(), [1.2482606, 2.2108068, 2.8876388, 2.8876390], rtol=1e-6)


def test_cross_entropy_axis1_segmentation_layout():
    x = T(np.arange(24, dtype="float32").reshape(2, 3, 4) / 7, stop_gradient=False)
    lab = T([[0, 2, 1, -100], [1, 1, 0, 2]])
    loss = F.cross_entropy(x, lab, axis=1)
    np.testing.assert_allclose(loss.numpy(), 1.0540483, rtol=1e-6)
    assert F.cross_entropy(x, lab, axis=1, reduction="none").shape == [2, 4]
    assert F.cross_entropy(x, lab.unsqueeze(1), axis=1, reduction="none").shape == [2, 1, 4]
    np.testing.assert_allclose(F.cross_entropy(x, lab.unsqueeze(1), axis=1).numpy(), 1.0540483, rtol=1e-6)
    np.testing.assert_allclose(F.cross_entropy(x, lab, axis=1, weight=T([1.0, 2.0, 3.0])).numpy(), 1.0413612,
                               rtol=1e-6)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy()[0], [[-0.10384, 0.02116, 0.02116, 0.0],
                                                   [0.03748, 0.03748, -0.08752, 0.0],
                                                   [0.06636, -0.05864, 0.06636, 0.0]], atol=1e-5)


# -- names ---------------------------------------------------------------------------
def test_automatic_parameter_names_follow_paddle():
    lin = nn.Linear(2, 3)
    scope = lin.full_name()
    assert lin.weight.name == f"{scope}.w_0" and lin.bias.name == f"{scope}.b_0"
    assert scope.startswith("linear_")
    conv = nn.Conv2D(1, 2, 3)
    assert conv.full_name().startswith("conv2d_") and conv.bias.name.endswith(".b_0")
    bn = nn.BatchNorm2D(3)
    s = bn.full_name()
    assert s.startswith("batch_norm2d_")
    assert [bn.weight.name, bn.bias.name, bn._mean.name, bn._variance.name] == [
        f"{s}.w_0", f"{s}.b_0", f"{s}.w_1", f"{s}.w_2"]
    assert nn.Conv2DTranspose(1, 1, 1).full_name().startswith("conv2d_transpose_")
    assert nn.LayerNorm(3).full_name().startswith("layer_norm_")
    assert nn.PReLU().full_name().startswith("p_re_lu_")
    names = [p.name for p in nn.GRU(2, 3).parameters()]
    cell = names[0].split(".")[0]
    assert cell.startswith("gru_cell_") and names == [f"{cell}.w_0", f"{cell}.w_1", f"{cell}.b_0", f"{cell}.b_1"]


def test_name_keyed_decay_skips_biases():
    lin = nn.Linear(2, 2)
    opt = ddg.optimizer.AdamW(learning_rate=0.1, parameters=lin.parameters(), weight_decay=0.5,
                              apply_decay_param_fun=lambda n: not n.endswith(".b_0"))
    b0 = lin.bias.numpy()
    lin(T(np.zeros((1, 2), "float32"))).sum().backward()
    lin.bias.grad.zero_()
    opt.step()
    np.testing.assert_array_equal(lin.bias.numpy(), b0)  # no gradient, no decay


# -- small silent differences ------------------------------------------------------------
def test_multiplicative_decay_get_lr_is_pure():
    s = ddg.optimizer.lr.MultiplicativeDecay(0.5, lambda e: 0.9)
    assert s.get_lr() == s.get_lr() == s() == 0.5
    s.step()
    assert s.get_lr() == pytest.approx(0.45) and s.get_lr() == pytest.approx(0.45) and s.last_lr == pytest.approx(0.45)
    s.step()
    assert s.get_lr() == pytest.approx(0.405) and s.last_lr == pytest.approx(0.405)


def test_numpy_returns_a_copy():
    t = T([1.0, 2.0])
    a = t.numpy()
    a[0] = 5
    assert t.numpy()[0] == 1.0


def test_default_float_dtype_for_full_and_new_layers():
    assert ddg.full([2, 2], 3).dtype == ddg.float32
    assert ddg.full([2], True).dtype == ddg.bool
    assert ddg.full([2], 3, "int32").dtype == ddg.int32
    old = ddg.get_default_dtype()
    try:
        ddg.set_default_dtype("float64")
        assert ddg.nn.Linear(2, 3).weight.dtype == ddg.float64
        assert ddg.nn.Conv2D(1, 1, 1).bias.dtype == ddg.float64
        assert ddg.nn.BatchNorm2D(2)._mean.dtype == ddg.float64
        assert ddg.full([2], 3).dtype == ddg.float64

        class M(nn.Layer):
            def __init__(self):
                super().__init__()
                self.w = self.create_parameter([2])
        assert M().w.dtype == ddg.float64
    finally:
        ddg.set_default_dtype(old)
    assert ddg.nn.Linear(2, 3).weight.dtype == ddg.float32


def test_dtype_as_second_positional_argument():
    assert ddg.zeros([2, 3], "int64").dtype == ddg.int64
    assert ddg.ones([2], "int32").dtype == ddg.int32
    assert ddg.rand([2], "float64").dtype == ddg.float64
    assert ddg.randn([2], "float64").dtype == ddg.float64
    assert ddg.empty([2], "int64").dtype == ddg.int64
    assert ddg.zeros(2, 3).shape == [2, 3]  # PyTorch varargs still work


def test_bitwise_operators_on_ints():
    a, b = T([5, 3, -2]), T([3, 6, 1])
    assert (a & b).tolist() == [1, 2, 0] and (a & b).dtype == ddg.int64
    assert (a | b).tolist() == [7, 7, -1]
    assert (~a).tolist() == [-6, -4, 1]
    assert (a ^ b).tolist() == [6, 5, -1]
    bb = T([True, False])
    assert (~bb).tolist() == [False, True] and (bb & bb).dtype == ddg.bool


def test_mean_of_int_tensors():
    m = ddg.mean(T([5, 3, -2]))
    assert m.dtype == ddg.int64 and m.item() == 2
    assert T([-1, -2]).mean().item() == -1 and T([-1, -4]).mean().item() == -2  # toward zero
    assert T([1, 2], dtype="int32").mean().dtype == ddg.int32


def test_python_float_labels_batch_as_float64():
    class D(ddg.io.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return np.ones(2, "float32"), float(i), i, np.float32(i)
    x, f, i, f32 = next(iter(ddg.io.DataLoader(D(), batch_size=2)))
    assert (x.dtype, f.dtype, i.dtype, f32.dtype) == (ddg.float32, ddg.float64, ddg.int64, ddg.float32)


_KINKS = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, -2.5, 2.5], "float32")


@pytest.mark.parametrize("fn,expect", [
    (F.relu6, [0, 0, 0, 0, 1, 1, 1, 0, 0, 1]),
    (lambda x: F.leaky_relu(x, 0.1), [0.1, 0.1, 0.1, 1, 1, 1, 1, 1, 0.1, 1]),
    (F.elu, [0.04978704, 0.36787945, 0.60653067, 1, 1, 1, 1, 1, 0.08208501, 1]),
    (lambda x: F.elu(x, 0.5), [0.02489352, 0.18393973, 0.30326533, 0.5, 1, 1, 1, 1, 0.0410425, 1]),
    (F.hardswish, [0, 1 / 6, 1 / 3, 0.5, 2 / 3, 5 / 6, 1, 1, -1 / 3, 4 / 3]),
    (F.hardtanh, [0, 0, 1, 1, 1, 0, 0, 0, 0, 0]),
    (lambda x: F.hardtanh(x, -3.0, 3.0), [0, 1, 1, 1, 1, 1, 0, 0, 1, 1]),
    (lambda x: ddg.clip(x, -1.0, 1.0), [0, 1, 1, 1, 1, 1, 0, 0, 0, 0]),
    (lambda x: F.hardsigmoid(x, 0.25, 0.5), [0, 0.25, 0.25, 0.25, 0.25, 0.25, 0, 0, 0, 0]),
    (F.relu, [0, 0, 0, 0, 1, 1, 1, 1, 0, 1]),
])
def test_activation_gradients_at_kinks(fn, expect):
    x = T(_KINKS, stop_gradient=False)
    fn(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), expect, rtol=1e-6, atol=1e-7)


# -- type promotion (Paddle 3) -------------------------------------------------------------
def test_mixed_dtypes_follow_paddle3():
    i64, i32 = T([1, 2]), T([1, 2], dtype="int32")
    f32, f64 = T([1.5, 2.0]), T([1.0, 2.0], dtype="float64")
    for a, b in ((i64, f32), (f32, i64), (i32, i64), (f32, i32), (T([True, False]), i64), (i64, f64)):
        with pytest.raises(TypeError, match=f"{a.dtype} and {b.dtype}"):
            a + b
    with pytest.raises(TypeError, match="ddg.maximum"):
        ddg.maximum(i64, f32)
    with pytest.raises(TypeError, match="ddg.where"):
        ddg.where(T([True, False]), i64, f32)
    with pytest.raises(TypeError, match="ddg.equal"):
        i32 == i64  # noqa: B015
    for xs in ([i64, f32], [i32, i64], [f32, f64]):
        with pytest.raises(TypeError, match="ddg.concat"):
            ddg.concat(xs)
    with pytest.raises(TypeError, match="ddg.stack"):
        ddg.stack([i64, f32])
    assert (f32 + f64).dtype == ddg.float64 and (f64 * f32).dtype == ddg.float64
    assert ddg.where(T([True, False]), f32, f64).dtype == ddg.float64
    assert (f32 < f64).dtype == ddg.bool
    # 0-d tensors act as scalars
    assert (i32 + T(1)).dtype == ddg.int32
    assert (f32 + T(1)).dtype == ddg.float32 and (T(1) + f32).dtype == ddg.float32
    assert (i64 + T(1.0, dtype="float64")).dtype == ddg.float64
    assert (f32 * T(2.0, dtype="float64")).dtype == ddg.float32
    assert (T(1.0) + f64).dtype == ddg.float64
    assert (T(1, dtype="int32") + T(1)).dtype == ddg.int64 and (T(1.0) + T(1)).dtype == ddg.float32
    # Python and numpy scalars
    assert (i64 * 1.5).dtype == ddg.float32 and (i32 + 1).dtype == ddg.int32
    assert (f32 + np.float64(1)).dtype == ddg.float32 and (i64 + np.float64(1.5)).dtype == ddg.float32
    assert (i64 / i64).dtype == ddg.float32 and (i64 // i64).dtype == ddg.int64


def test_zero_d_results_stay_float32():
    """numpy 1.x promoted 0-d float32 arrays with Python scalars to float64 (run this file
    under numpy 1.26 to see it fail without the fix)."""
    x = T(np.random.default_rng(0).random((4, 3)).astype("float32"), stop_gradient=False)
    lab = T([0, 1, 2, 1])
    outs = [F.cross_entropy(x, lab), F.nll_loss(F.log_softmax(x), lab), F.kl_div(x, x, "batchmean"),
            F.mse_loss(x, x * 2, "sum"), x.std(), x.var(), x.sum() / 3, 3 / x.sum(), x.sum() * 2, 2 ** x.sum(),
            x.sum() + 1, 1 - x.sum(), x.sum() ** 2, x.sum() * np.float64(0.5)]
    assert [str(o.dtype) for o in outs] == ["float32"] * len(outs)


# -- augmented assignment -----------------------------------------------------------------
def test_augmented_assignment_rebinds_like_paddle():
    b = T([1.0, 2.0])
    c = b
    b += T([1.0, 1.0])
    assert c.tolist() == [1.0, 2.0] and b.tolist() == [2.0, 3.0] and b is not c
    x = T([1, 2])
    x += 1.5  # a new tensor, so it may change dtype
    assert x.dtype == ddg.float32 and x.tolist() == [2.5, 3.5]
    w = T([1.0, 2.0], stop_gradient=False)
    h = w
    h += 1  # a leaf that requires grad, in grad mode: a new non-leaf tensor (Paddle)
    assert not h.is_leaf and w.tolist() == [1.0, 2.0]
    h.sum().backward()
    assert w.grad.tolist() == [1.0, 1.0]
    p = ddg.randn(3, requires_grad=True)
    alias = p
    with ddg.no_grad():
        p -= 0.1 * ddg.ones([3])  # PyTorch-style manual SGD: in place, stays the leaf
    assert p is alias and p.is_leaf and not p.stop_gradient


_UNARY = ["exp", "log", "log1p", "sqrt", "rsqrt", "square", "sin", "cos", "tan", "tanh", "sigmoid", "erf", "abs",
          "neg", "asin", "acos", "atan", "sinh", "cosh", "asinh", "atanh", "log2", "log10", "expm1", "reciprocal",
          "trunc", "floor", "sign", "logsumexp", "sum", "mean", "prod", "max", "cumsum"]
_F_UNARY = ["relu", "relu6", "leaky_relu", "elu", "gelu", "silu", "hardswish", "hardtanh", "hardsigmoid", "softplus", "mish",
            "log_sigmoid", "softsign", "tanhshrink", "selu", "celu", "softshrink", "hardshrink", "thresholded_relu"]


@pytest.mark.parametrize("name", _UNARY + ["F." + n for n in _F_UNARY])
def test_zero_d_float32_stays_float32(name):
    """Forward and backward of a 0-d float32 tensor stay float32 (numpy 1.x would turn
    ``1 / a`` or ``a * 2`` of a 0-d float32 array into float64)."""
    fn = getattr(F, name[2:]) if name.startswith("F.") else getattr(ddg, name)
    x = T(np.float32(0.6), stop_gradient=False)
    y = fn(x)
    assert y.dtype == ddg.float32
    y.backward()
    assert x.grad.dtype == ddg.float32


# -- activations: values and gradients as Paddle 3.3.1 prints them ----------
_SHRINK_X = np.array([-1.0, -0.5, -0.2, 0.0, 0.2, 0.5, 1.0, 2.0], "float32")


@pytest.mark.parametrize("fn,out,grad", [
    (F.hardshrink, [-1.0, -0.5, 0.0, 0.0, 0.0, 0.5, 1.0, 2.0], [1, 1, 0, 0, 0, 1, 1, 1]),
    (F.softshrink, [-0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.5], [1, 0, 0, 0, 0, 0, 1, 1]),
    (F.thresholded_relu, [0, 0, 0, 0, 0, 0, 0, 2.0], [0, 0, 0, 0, 0, 0, 0, 1]),
    (lambda x: F.celu(x, 0.5), [-0.43233237, -0.31606027, -0.16483998, 0.0, 0.2, 0.5, 1.0, 2.0],
     [0.13533528, 0.36787945, 0.67032003, 1, 1, 1, 1, 1]),
    (F.selu, [-1.1113306, -0.6917582, -0.3186893, 0.0, 0.21014021, 0.5253505, 1.050701, 2.101402],
     [0.6467687, 1.0663412, 1.43941, 1.7580993, 1.050701, 1.050701, 1.050701, 1.050701]),
    (nn.SELU(), [-1.1113306, -0.6917582, -0.3186893, 0.0, 0.21014021, 0.5253505, 1.050701, 2.101402], None),
    (nn.CELU(0.5), [-0.43233237, -0.31606027, -0.16483998, 0.0, 0.2, 0.5, 1.0, 2.0], None),
    (nn.Softshrink(), [-0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.5], None),
    (nn.Hardshrink(), [-1.0, -0.5, 0.0, 0.0, 0.0, 0.5, 1.0, 2.0], None),
    (nn.ThresholdedReLU(), [0, 0, 0, 0, 0, 0, 0, 2.0], None),
])
def test_new_activations_match_paddle(fn, out, grad):
    x = T(_SHRINK_X, stop_gradient=False)
    y = fn(x)
    np.testing.assert_allclose(y.numpy(), out, rtol=1e-5, atol=1e-7)
    if grad is not None:
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-5, atol=1e-7)


def test_new_activations_gradcheck_away_from_kinks():
    from ddg.autograd import gradcheck
    x = T(np.array([-1.7, -0.9, -0.31, 0.33, 0.8, 1.9]), stop_gradient=False)
    for f in (F.selu, lambda t: F.celu(t, 0.7), F.softshrink, F.hardshrink, lambda t: F.thresholded_relu(t, 0.5)):
        assert gradcheck(f, [x])


# -- sorting, triangles, diagonals, norms (values and gradients printed by Paddle 3.3.1) ---------
def _weighted_grad(y, src):
    """d/dsrc of sum(y * [1, 2, 3, ...]), the probe used to print Paddle's gradients."""
    w = T(np.arange(1, y.size + 1, dtype="float32").reshape(y.shape))
    (y * w).sum().backward()
    g = src.grad.numpy().tolist()
    src.clear_grad(set_to_zero=False)
    return g


def test_sort_argsort_topk_match_paddle():
    x = T(np.array([[3.0, 1.0, 2.0, 1.0], [0.5, -1.0, 4.0, 4.0]], "float32"), stop_gradient=False)
    y = ddg.sort(x, axis=1)
    assert y.tolist() == [[1.0, 1.0, 2.0, 3.0], [-1.0, 0.5, 4.0, 4.0]]
    assert _weighted_grad(y, x) == [[4.0, 1.0, 3.0, 2.0], [6.0, 5.0, 7.0, 8.0]]
    y = ddg.sort(x, axis=1, descending=True)
    assert _weighted_grad(y, x) == [[1.0, 3.0, 2.0, 4.0], [7.0, 8.0, 5.0, 6.0]]
    assert ddg.argsort(x, axis=1).tolist() == [[1, 3, 2, 0], [1, 0, 2, 3]]
    assert ddg.argsort(x, axis=0, descending=True).tolist() == [[0, 0, 1, 1], [1, 1, 0, 0]]
    v, i = ddg.topk(x, 2)
    assert v.tolist() == [[3.0, 2.0], [4.0, 4.0]] and i.tolist() == [[0, 2], [2, 3]] and i.dtype == ddg.int64
    assert _weighted_grad(v, x) == [[1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 3.0, 4.0]]
    v, i = ddg.topk(x, 1, axis=0, largest=False)
    assert v.tolist() == [[0.5, -1.0, 2.0, 1.0]] and i.tolist() == [[1, 1, 0, 0]]


def test_triangles_diagonals_kron_match_paddle():
    m = T(np.arange(1, 13, dtype="float32").reshape(3, 4), stop_gradient=False)
    assert ddg.tril(m).tolist() == [[1, 0, 0, 0], [5, 6, 0, 0], [9, 10, 11, 0]]
    assert ddg.triu(m, 1).tolist() == [[0, 2, 3, 4], [0, 0, 7, 8], [0, 0, 0, 12]]
    assert _weighted_grad(ddg.tril(m, -1), m) == [[0, 0, 0, 0], [5, 0, 0, 0], [9, 10, 0, 0]]
    d = ddg.diagonal(m, 1)
    assert d.tolist() == [2, 7, 12] and _weighted_grad(d, m) == [[0, 1, 0, 0], [0, 0, 2, 0], [0, 0, 0, 3]]
    assert ddg.trace(m).item() == 18.0
    v = T([1.0, 2.0, 3.0], stop_gradient=False)
    assert ddg.diag(v, 1, 9).tolist() == [[9, 1, 9, 9], [9, 9, 2, 9], [9, 9, 9, 3], [9, 9, 9, 9]]
    assert _weighted_grad(ddg.diag(v, -1), v) == [5.0, 10.0, 15.0]
    assert ddg.diag(m, -1).tolist() == [5.0, 10.0]
    a = T([[1.0, 2.0], [3.0, 4.0]], stop_gradient=False)
    k = ddg.kron(a, T([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]]))
    assert k.shape == [6, 4] and k.tolist()[2] == [2.0, 2.0, 4.0, 4.0]
    assert _weighted_grad(k, a) == [[45.0, 57.0], [117.0, 129.0]]
    g1, g2 = ddg.meshgrid(T([1.0, 2.0]), T([3.0, 4.0, 5.0]))
    assert g1.tolist() == [[1, 1, 1], [2, 2, 2]] and g2.tolist() == [[3, 4, 5], [3, 4, 5]]
    assert [t.tolist() for t in ddg.unstack(m[:2, :2], axis=1)] == [[1, 5], [2, 6]]
    assert ddg.add_n([m, m, m]).tolist()[0] == [3, 6, 9, 12]


def test_norm_and_nan_to_num_match_paddle():
    m = T(np.arange(1, 13, dtype="float32").reshape(3, 4), stop_gradient=False)
    for p, val in ((None, 25.495098), ("fro", 25.495098), (2, 25.495098), (1, 78.0), (3, 18.255613),
                   (float("inf"), 12.0), (float("-inf"), 1.0), (0, 12.0)):
        np.testing.assert_allclose(ddg.norm(m, p=p).numpy(), val, rtol=1e-6)
    np.testing.assert_allclose(ddg.norm(m, p=2, axis=1).numpy(), [5.4772258, 13.190906, 21.118711], rtol=1e-6)
    y = ddg.norm(m, p=3, axis=0, keepdim=True)
    assert y.shape == [1, 4]
    np.testing.assert_allclose(_weighted_grad(y, m)[2], [0.89916807, 1.7478694, 2.5474381, 3.3019269], rtol=1e-5)
    n = T([np.nan, np.inf, -np.inf, 1.5], stop_gradient=False)
    out = ddg.nan_to_num(n)
    np.testing.assert_allclose(out.numpy(), [0.0, 3.4028235e38, -3.4028235e38, 1.5], rtol=1e-6)
    assert ddg.nan_to_num(n, 1.0, 2.0, -3.0).tolist() == [1.0, 2.0, -3.0, 1.5]
    ddg.nan_to_num(n).sum().backward()
    assert n.grad.tolist() == [0.0, 0.0, 0.0, 1.0]


# -- small APIs tutorials use (values printed by Paddle 3.3.1) ------------------------------------
def test_loss_helpers_and_glu_match_paddle():
    lab = T([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(F.label_smooth(lab).numpy(), [[1 / 30, 0.93333334, 1 / 30], [0.93333334, 1 / 30, 1 / 30]],
                               rtol=1e-6)
    np.testing.assert_allclose(F.label_smooth(lab, prior_dist=T([[0.2, 0.3, 0.5]]), epsilon=0.2).numpy(),
                               [[0.04, 0.86, 0.1], [0.84, 0.06, 0.1]], rtol=1e-6)
    assert F.square_error_cost(T([1.0, 2.0]), T([0.0, 4.0])).tolist() == [1.0, 4.0]
    p = T([[0.2], [0.9]], stop_gradient=False)
    loss = F.log_loss(p, T([[0.0], [1.0]]))
    loss.sum().backward()
    assert loss.shape == [2, 1]
    np.testing.assert_allclose(loss.numpy().ravel(), [0.22301853, 0.10524942], rtol=1e-6)
    np.testing.assert_allclose(p.grad.numpy().ravel(), [1.2498437, -1.1109877], rtol=1e-6)
    x = T(np.arange(8, dtype="float32").reshape(2, 4) / 4, stop_gradient=False)
    y = F.glu(x)
    (y * T([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    np.testing.assert_allclose(y.numpy(), [[0.0, 0.16979468], [0.8175745, 1.0649409]], rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), [[0.62245935, 1.3583574, 0.0, 0.10894749],
                                                [2.4527233, 3.4078109, 0.4474394, 0.6306464]], rtol=1e-5)
    assert nn.GLU()(x).shape == [2, 2]
    np.testing.assert_allclose(nn.CosineSimilarity(axis=0)(T([1.0, 2.0]), T([2.0, 1.0])).numpy(), 0.8, rtol=1e-6)
    assert nn.MarginRankingLoss(0.5)(T([1.0, 2.0]), T([2.0, 1.0]), T([1.0, -1.0])).item() == 1.5
    np.testing.assert_allclose(nn.Hardsigmoid()(T([-1.0, 0.0, 1.0])).numpy(), [1 / 3, 0.5, 2 / 3], rtol=1e-6)
    np.testing.assert_allclose(nn.Silu()(T([1.0])).numpy(), [0.7310586], rtol=1e-6)


def test_pixel_shuffle_and_zero_pad_match_paddle():
    x = T(np.arange(16, dtype="float32").reshape(1, 4, 2, 2))
    y = F.pixel_shuffle(x, 2)
    assert y.shape == [1, 1, 4, 4]
    assert y.numpy().ravel().tolist() == [0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15]
    y = nn.PixelShuffle(2, "NHWC")(T(np.arange(16, dtype="float32").reshape(1, 2, 2, 4)))
    assert y.shape == [1, 4, 4, 1]
    assert y.numpy().ravel().tolist() == [0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15]
    z = F.zeropad2d(T(np.ones((1, 1, 2, 2), "float32")), [1, 0, 0, 2])
    assert z.numpy()[0, 0].tolist() == [[0, 1, 1], [0, 1, 1], [0, 0, 0], [0, 0, 0]]
    assert nn.ZeroPad2D(1)(T(np.ones((1, 1, 1, 1), "float32"))).shape == [1, 1, 3, 3]


def test_new_lr_schedules_match_paddle():
    s = ddg.optimizer.lr.LinearLR(0.5, total_steps=4, start_factor=0.25, end_factor=1.0)
    got = []
    for _ in range(7):
        got.append(s())
        s.step()
    np.testing.assert_allclose(got, [0.125, 0.21875, 0.3125, 0.40625, 0.5, 0.5, 0.5])
    s = ddg.optimizer.lr.CosineAnnealingWarmRestarts(0.5, T_0=3, T_mult=2, eta_min=0.1)
    got = []
    for _ in range(12):
        got.append(s())
        s.step()
    np.testing.assert_allclose(got, [0.5, 0.4, 0.2, 0.5, 0.47320508, 0.4, 0.3, 0.2, 0.12679492, 0.5, 0.49318517,
                                     0.47320508], rtol=1e-7)
    s = ddg.optimizer.lr.CosineAnnealingWarmRestarts(0.5, T_0=3, T_mult=2, eta_min=0.1)
    s.step(7)
    assert s() == pytest.approx(0.2) and s.last_epoch == 7
    s = ddg.optimizer.lr.CosineAnnealingWarmRestarts(1.0, T_0=2)
    got = []
    for _ in range(5):
        got.append(s())
        s.step()
    np.testing.assert_allclose(got, [1.0, 0.5, 1.0, 0.5, 1.0])


def test_nn_utils_match_paddle():
    lin = nn.Linear(2, 2)
    lin.weight.set_value(np.eye(2, dtype="float32"))
    (lin(T([[1.0, 2.0]])) * 10).sum().backward()
    n = nn.utils.clip_grad_norm_(lin.parameters(), 1.0)
    np.testing.assert_allclose(n.numpy(), 34.641018, rtol=1e-6)  # the norm before clipping, as Paddle
    np.testing.assert_allclose(lin.weight.grad.numpy(), [[0.2886751, 0.2886751], [0.5773502, 0.5773502]], rtol=1e-5)
    v = nn.utils.parameters_to_vector([T([[1.0, 2.0]]), T([3.0])])
    assert v.tolist() == [1.0, 2.0, 3.0]
    a, b = ddg.zeros([1, 2]), ddg.zeros([1])
    nn.utils.vector_to_parameters(v, [a, b])
    assert a.tolist() == [[1.0, 2.0]] and b.tolist() == [3.0]


def test_create_parameter_assign_retain_grads_inplace():
    w = ddg.create_parameter([2, 3], "float32")
    assert w.name.startswith("create_parameter_") and w.name.endswith(".w_0") and not w.stop_gradient
    assert w.numpy().std() > 0
    b = ddg.create_parameter([3], "float32", is_bias=True)
    assert b.name.endswith(".b_0") and b.tolist() == [0.0, 0.0, 0.0]
    assert ddg.create_parameter([1], "float64", name="mine").name == "mine"
    assert ddg.assign(np.array([1, 2])).dtype == ddg.int64 and ddg.assign([1.5]).dtype == ddg.float64
    out = ddg.zeros([2])
    assert ddg.assign(T([1.0, 2.0]), out) is out and out.tolist() == [1.0, 2.0]
    a = T([1.0, 2.0], stop_gradient=False)
    h = a * 2
    h.retain_grads()
    (h * h).sum().backward()
    assert h.grad.tolist() == [4.0, 8.0]
    t = T([[1.0, 4.0]])
    u = t
    t.sqrt_()
    assert u.tolist() == [[1.0, 2.0]] and t is u
    assert t.reshape_([2]) is t and u.shape == [2]
    assert t.unsqueeze_(0) is t and t.shape == [1, 2]
    t.squeeze_()
    assert t.shape == [2]
    a = T([1.0, 2.0], stop_gradient=False)
    c = a * 1
    c.exp_()
    c.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [2.7182817, 7.389056], rtol=1e-6)
    with pytest.raises(RuntimeError, match="leaf"):
        a.exp_()


def test_numel_is_a_0d_int64_tensor():
    n = ddg.ones([2, 3]).numel()
    assert isinstance(n, ddg.Tensor) and n.shape == [] and n.dtype == ddg.int64 and int(n) == 6
    assert list(range(n)) == list(range(6)) and ddg.numel(ddg.ones([4])).item() == 4


def test_einsum_and_inverse_match_paddle():
    a = T(np.arange(6, dtype="float32").reshape(2, 3) / 3, stop_gradient=False)
    b = T(np.arange(12, dtype="float32").reshape(3, 4) / 5)
    y = ddg.einsum("ij,jk", a, b)  # implicit output: the letters used once, sorted ("ik")
    (y * y).sum().backward()
    np.testing.assert_allclose(y.numpy(), [[1.33333, 1.53333, 1.73333, 1.93333], [3.73333, 4.53333, 5.33333, 6.13333]],
                               rtol=1e-5)
    np.testing.assert_allclose(a.grad.numpy(), [[4.32, 14.77334, 25.22667], [13.44, 45.01334, 76.58667]], rtol=1e-5)
    np.testing.assert_allclose(ddg.einsum("ij->j", a).numpy(), [1.0, 1.66667, 2.33333], rtol=1e-5)
    assert ddg.einsum("ba", a).shape == [3, 2]
    np.testing.assert_array_equal(ddg.einsum("ii->i", T([[1.0, 2.0], [3.0, 4.0]])).numpy(), [1.0, 4.0])
    with pytest.raises(ValueError, match="diagonal"):
        ddg.einsum("ii->i", ddg.ones([2, 3]))
    m = T([[2.0, 1.0], [1.0, 3.0]], stop_gradient=False)
    inv = ddg.inverse(m)
    (inv * T([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    np.testing.assert_allclose(inv.numpy(), [[0.6, -0.2], [-0.2, 0.4]], rtol=1e-6)
    np.testing.assert_allclose(m.grad.numpy(), [[0.08, -0.16], [-0.36, -0.28]], rtol=1e-5, atol=1e-7)


def test_repeat_slice_gather_unique_bincount_match_paddle():
    x = T(np.arange(6, dtype="float32").reshape(2, 3), stop_gradient=False)
    y = ddg.repeat_interleave(x, 2, axis=1)
    (y * T(np.arange(12, dtype="float32").reshape(2, 6))).sum().backward()
    assert y.tolist() == [[0, 0, 1, 1, 2, 2], [3, 3, 4, 4, 5, 5]]
    assert x.grad.tolist() == [[1, 5, 9], [13, 17, 21]]
    assert ddg.repeat_interleave(x, 2).shape == [12]
    assert ddg.repeat_interleave(x, T([1, 0, 2]), axis=1).tolist() == [[0, 2, 2], [3, 5, 5]]
    assert ddg.slice(x, axes=[1], starts=[1], ends=[3]).tolist() == [[1, 2], [4, 5]]
    assert ddg.slice(x, [0, 1], [1, -2], [2, 10]).tolist() == [[4, 5]]
    x.clear_grad(set_to_zero=False)
    y = ddg.gather_nd(x, T([[0, 1], [1, 2]]))
    y.sum().backward()
    assert y.tolist() == [1, 5] and x.grad.tolist() == [[0, 1, 0], [0, 0, 1]]
    assert ddg.gather_nd(x, T([[1]])).tolist() == [[3, 4, 5]]
    u = T([2, 3, 3, 1, 5, 3])
    assert ddg.unique(u).tolist() == [1, 2, 3, 5] and ddg.unique(u).dtype == ddg.int64
    got = ddg.unique(u, return_index=True, return_inverse=True, return_counts=True)
    assert [t.tolist() for t in got] == [[1, 2, 3, 5], [3, 0, 1, 4], [1, 2, 2, 0, 3, 2], [1, 1, 3, 1]]
    got = ddg.unique(T([[1, 2], [1, 2], [0, 1]]), axis=0, return_inverse=True)
    assert [t.tolist() for t in got] == [[[0, 1], [1, 2]], [1, 1, 0]]
    assert ddg.bincount(T([1, 1, 3])).tolist() == [0, 2, 0, 1]
    w = ddg.bincount(T([1, 1, 3]), weights=T([0.5, 1.0, 2.0]), minlength=5)
    assert w.tolist() == [0.0, 1.5, 0.0, 2.0, 0.0] and w.dtype == ddg.float32


_LG = np.array([[0.3, -1.2, 2.0], [1.5, 0.1, -0.4]], "float32")
_LB = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], "float32")
_PM = np.array([[1.0, -1.0, 1.0], [-1.0, 1.0, -1.0]], "float32")
_B = np.array([[1.0, 0.5, 1.0], [0.2, 1.0, 0.3]], "float32")
_N = np.array([[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]], "float32")


@pytest.mark.parametrize("fn,value,grad", [
    (lambda x: F.sigmoid_focal_loss(x, T(_LB)), 0.987401,
     [[-0.048102, 0.025564, -0.001218], [0.721068, -0.064964, 0.122671]]),
    (lambda x: F.sigmoid_focal_loss(x, T(_LB), normalizer=T([2.0]), alpha=0.5, gamma=1.0, reduction="mean"),
     0.092292, [[-0.013192, 0.004184, -0.001147], [0.038424, -0.016098, 0.011846]]),
    (lambda x: F.soft_margin_loss(x, T(_PM)), 0.633898,
     [[-0.070926, 0.038579, -0.019867], [0.136262, -0.07917, 0.066885]]),
    (lambda x: F.hinge_embedding_loss(x, T(_PM), margin=1.0), 1.0,
     [[0.166667, -0.166667, 0.166667], [0.0, 0.166667, -0.166667]]),
    (lambda x: F.cosine_embedding_loss(x, T(_B), T([1, -1]), margin=0.1), 0.293689,
     [[-0.128675, -0.123164, -0.054597], [0.007996, 0.298861, 0.104701]]),
    (lambda x: F.triplet_margin_loss(x, T(_B), T(_N), margin=1.0), 1.246797,
     [[-0.261541, -0.028929, -0.075438], [0.232046, -0.001296, 0.200395]]),
    (lambda x: F.triplet_margin_loss(x, T(_B), T(_N), p=1, swap=True, reduction="sum"), 5.299996,
     [[-1, -1, 1], [1, -1, -1]]),
    (lambda x: F.multi_label_soft_margin_loss(x, T(_LB)), 0.633898,
     [[-0.070926, 0.038579, -0.019867], [0.136262, -0.07917, 0.066885]]),
    (lambda x: F.multi_label_soft_margin_loss(x, T(_LB), weight=T([1.0, 2.0, 0.5]), reduction="sum"), 1.463699,
     [[-0.141852, 0.154317, -0.019867], [0.272525, -0.316681, 0.066885]]),
    (lambda x: nn.TripletMarginLoss()(x, T(_B), T(_N)), 1.246797, None),
    (lambda x: nn.SoftMarginLoss()(x, T(_PM)), 0.633898, None),
    (lambda x: nn.HingeEmbeddingLoss()(x, T(_PM)), 1.0, None),
    (lambda x: nn.CosineEmbeddingLoss(0.1)(x, T(_B), T([1, -1])), 0.293689, None),
    (lambda x: nn.MultiLabelSoftMarginLoss()(x, T(_LB)), 0.633898, None),
])
def test_more_losses_match_paddle(fn, value, grad):
    x = T(_LG, stop_gradient=False)
    y = fn(x)
    np.testing.assert_allclose(y.numpy(), value, rtol=1e-5)  # Paddle's values printed to 6 decimals
    if grad is not None:
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-4, atol=2e-6)


def test_sequence_mask_and_new_optimizers_match_paddle():
    assert F.sequence_mask(T([1, 3, 0]), maxlen=4).tolist() == [[1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]]
    m = F.sequence_mask(T([1, 3]))
    assert m.tolist() == [[1, 0, 0], [1, 1, 1]] and m.dtype == ddg.int64
    assert F.sequence_mask(T([1, 3]), dtype="float32").dtype == ddg.float32
    for opt_cls, kw, expect in [
            (ddg.optimizer.Adamax, {}, [0.7154995, -1.7076483, 2.7050097]),
            (ddg.optimizer.Adadelta, {}, [0.99864346, -1.9986433, 2.9986432]),
            (ddg.optimizer.Adadelta, {"rho": 0.9, "epsilon": 1e-3}, [0.9695075, -1.9693874, 2.969358])]:
        w = ddg.create_parameter([3], "float32",
                                 default_initializer=nn.initializer.Assign(np.array([1.0, -2.0, 3.0], "float32")))
        opt = opt_cls(learning_rate=0.1, parameters=[w], **kw)
        for _ in range(3):
            (w * w * T([1.0, 2.0, 3.0])).sum().backward()
            opt.step()
            opt.clear_grad()
        np.testing.assert_allclose(w.numpy(), expect, rtol=1e-6)


def test_cumprod_scatter_put_along_axis_match_paddle():
    x = T([[1.0, 2.0, 0.0], [3.0, -1.0, 2.0]], stop_gradient=False)
    y = ddg.cumprod(x, dim=1)
    assert y.tolist() == [[1, 2, 0], [3, -3, -6]]
    assert _weighted_grad(y, x) == [[5.0, 2.0, 6.0], [-13.0, 51.0, -18.0]]  # exact at the 0 too
    y = ddg.cumprod(x, dim=0)
    assert _weighted_grad(y, x) == [[13.0, -3.0, 15.0], [4.0, 10.0, 0.0]]
    assert ddg.cumprod(x).tolist() == [1.0, 2.0, 0.0, 0.0, 0.0, 0.0]
    base = T([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], stop_gradient=False)
    upd = T([[10.0, 20.0], [30.0, 40.0]], stop_gradient=False)
    for overwrite, index, out, gbase, gupd in [
            (True, [2, 0], [[30, 40], [3, 4], [10, 20]], [[0, 0], [3, 4], [0, 0]], [[5, 6], [1, 2]]),
            (False, [1, 1], [[1, 2], [40, 60], [5, 6]], [[1, 2], [0, 0], [5, 6]], [[3, 4], [3, 4]]),
            (True, [1, 1], [[1, 2], [30, 40], [5, 6]], [[1, 2], [0, 0], [5, 6]], [[3, 4], [3, 4]])]:
        y = ddg.scatter(base, T(index), upd, overwrite=overwrite)
        assert y.tolist() == out and _weighted_grad(y, base) == gbase and upd.grad.tolist() == gupd
        upd.clear_grad(set_to_zero=False)
    a = T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], stop_gradient=False)
    v = T([[9.0], [8.0]], stop_gradient=False)
    y = ddg.put_along_axis(a, T([[1], [2]]), v, 1)
    assert y.tolist() == [[1, 9, 3], [4, 5, 8]] and _weighted_grad(y, a) == [[1, 0, 3], [4, 5, 0]]
    assert v.grad.tolist() == [[2.0], [6.0]]
    y = ddg.put_along_axis(a, T([[1], [2]]), 7.0, 1, reduce="add")
    assert y.tolist() == [[1, 9, 3], [4, 5, 13]] and _weighted_grad(y, a) == [[1, 2, 3], [4, 5, 6]]
    y = ddg.scatter_nd_add(a, T([[0, 1], [1, 2], [0, 1]]), T([1.0, 2.0, 3.0]))
    assert y.tolist() == [[1, 6, 3], [4, 5, 8]] and _weighted_grad(y, a) == [[1, 2, 3], [4, 5, 6]]
    ddg.seed(3)
    s = ddg.multinomial(T([0.1, 0.0, 0.9]), 50, replacement=True)
    assert s.dtype == ddg.int64 and s.shape == [50] and 1 not in s.tolist()
    s = ddg.multinomial(T([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]), 2)
    assert s.shape == [2, 2] and all(len(set(r)) == 2 for r in s.tolist()) and 2 not in s.tolist()[0]


def test_positional_arguments_mean_what_they_mean_in_paddle():
    x = T(np.ones((1, 2, 3, 3), "float32"))
    w = T(np.ones((2, 1, 2, 2), "float32"))
    # Paddle: conv2d_transpose(x, weight, bias, stride, padding, output_padding, dilation, groups)
    y = F.conv2d_transpose(x, w, None, 1, 0, 0, 2, 2)
    assert y.shape == [1, 2, 5, 5]  # dilation 2 (H: (3-1) + 2*(2-1) + 1), groups 2
    layer = nn.Conv2DTranspose(2, 2, 2, 1, 0, 0, 2, 2)
    assert layer._dilation in (2, [2, 2], (2, 2)) and layer._groups == 2
    emb = T(np.arange(6, dtype="float32").reshape(3, 2))
    assert F.embedding(T([0, 2]), emb, None, None).tolist() == [[0, 1], [4, 5]]  # (padding_idx, max_norm, ...)
    assert F.one_hot(T([0, 2])).shape == [2, 3]  # num_classes=-1: max + 1 (Paddle 3)
    np.testing.assert_allclose(ddg.round(T([1.2345, -2.5, 2.5]), decimals=2).numpy(), [1.23, -2.5, 2.5], rtol=1e-6)
    assert ddg.round(T([-2.5, 2.5, 0.5])).tolist() == [-2.0, 2.0, 0.0]  # half to even, as Paddle
    ddg.seed(seed=0)
    u = ddg.uniform([1000])
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0  # Paddle 3's default range [0, 1)
    assert ddg.shape(input=T([[1, 2]])).tolist() == [1, 2]


@pytest.mark.parametrize("opt_cls,kw,after1,after6,after8", [
    ("RAdam", {}, [0.8, -1.2, 1.2], [0.19951805, 0.50723976, -1.3379337], [0.19408399, 0.50823092, -1.335825]),
    ("NAdam", {}, [0.89435482, -1.8943548, 2.8943548], [0.56043851, -1.5379589, 2.531136],
     [0.43778813, -1.3950274, 2.3822892]),
    ("NAdam", {"momentum_decay": 0.01}, [0.89435101, -1.894351, 2.894351], [0.56049126, -1.5380297, 2.5312123],
     [0.43785053, -1.3951342, 2.3824098]),
])
def test_radam_nadam_match_paddle(opt_cls, kw, after1, after6, after8):
    w = ddg.create_parameter([3], "float32",
                             default_initializer=nn.initializer.Assign(np.array([1.0, -2.0, 3.0], "float32")))
    opt = getattr(ddg.optimizer, opt_cls)(learning_rate=0.1, parameters=[w], **kw)
    hist = []
    for _ in range(8):
        (w * w * T([1.0, 2.0, 3.0])).sum().backward()
        opt.step()
        opt.clear_grad()
        hist.append(w.numpy().copy())
    for got, want in ((hist[0], after1), (hist[5], after6), (hist[7], after8)):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_orthogonal_and_dirac_initializers():
    I = nn.initializer
    for shape, gain in (([3, 5], 2.0), ([5, 3], 1.0), ([4, 2, 3], 1.0)):
        w = ddg.create_parameter(shape, "float64", default_initializer=I.Orthogonal(gain=gain)).numpy()
        a = w.reshape(shape[0], -1)
        small = a @ a.T if a.shape[0] <= a.shape[1] else a.T @ a
        np.testing.assert_allclose(small, gain ** 2 * np.eye(min(a.shape)), atol=1e-12)
    # Paddle 3.3.1's Dirac on these shapes
    w = ddg.create_parameter([4, 2, 3], "float32", default_initializer=I.Dirac()).numpy()
    assert w.tolist() == [[[0, 1, 0], [0, 0, 0]], [[0, 0, 0], [0, 1, 0]], [[0, 0, 0], [0, 0, 0]], [[0, 0, 0], [0, 0, 0]]]
    w = ddg.create_parameter([4, 2, 3, 3], "float32", default_initializer=I.Dirac(groups=2)).numpy()
    assert np.argwhere(w == 1).tolist() == [[0, 0, 1, 1], [1, 1, 1, 1], [2, 0, 1, 1], [3, 1, 1, 1]]
    x = T(np.random.default_rng(0).random((1, 2, 5)).astype("float32"))
    conv = nn.Conv1D(2, 2, 3, padding=1, weight_attr=ddg.ParamAttr(initializer=I.Dirac()), bias_attr=False)
    np.testing.assert_allclose(conv(x).numpy(), x.numpy(), rtol=1e-6)  # the identity


def test_linalg_matches_paddle():
    L = ddg.linalg
    A = T([[2.0, 1.0], [1.0, 3.0]], stop_gradient=False)
    d = L.det(A)
    d.backward()
    assert d.item() == pytest.approx(5.0) and np.allclose(A.grad.numpy(), [[3, -1], [-1, 2]])
    A.clear_grad(set_to_zero=False)
    np.testing.assert_allclose(L.slogdet(T([[-2.0, 1.0], [1.0, 3.0]])).numpy(), [-1.0, 1.9459101], rtol=1e-6)
    b = T([[1.0], [2.0]], stop_gradient=False)
    x = L.solve(A, b)
    (x * T([[1.0], [2.0]])).sum().backward()
    np.testing.assert_allclose(x.numpy(), [[0.2], [0.6]], rtol=1e-6)
    np.testing.assert_allclose(A.grad.numpy(), [[-0.04, -0.12], [-0.12, -0.36]], rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), [[0.2], [0.6]], rtol=1e-6)
    A.clear_grad(set_to_zero=False)
    y = L.matrix_power(A, 3)
    y.sum().backward()
    assert y.tolist() == [[15, 20], [20, 35]] and A.grad.tolist() == [[29, 37], [37, 46]]
    np.testing.assert_allclose(L.matrix_power(A, -1).numpy(), [[0.6, -0.2], [-0.2, 0.4]], rtol=1e-6)
    assert L.matrix_power(A, 0).tolist() == [[1, 0], [0, 1]]
    np.testing.assert_allclose(L.vector_norm(T([[3.0, 4.0], [1.0, 1.0]]), p=2, axis=1).numpy(), [5.0, 1.4142135])
    np.testing.assert_allclose(L.vector_norm(T([[3.0, 4.0], [1.0, 1.0]])).numpy(), 5.196152, rtol=1e-6)
    assert L.multi_dot([T([[1.0, 2.0]]), T([[1.0], [1.0]]), T([[3.0, 4.0]])]).tolist() == [[9.0, 12.0]]
    np.testing.assert_allclose(L.inv(A).numpy(), [[0.6, -0.2], [-0.2, 0.4]], rtol=1e-6)
    np.testing.assert_allclose(L.norm(T([3.0, 4.0])).numpy(), 5.0)


def test_var_correction_as_paddle3():
    x = T([[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]])
    np.testing.assert_allclose(ddg.var(x).numpy(), 8.0, rtol=1e-6)
    np.testing.assert_allclose(ddg.var(x, unbiased=False).numpy(), 6.6666665, rtol=1e-6)
    np.testing.assert_allclose(ddg.var(x, correction=0).numpy(), 6.6666665, rtol=1e-6)
    np.testing.assert_allclose(ddg.var(x, axis=1, correction=2).numpy(), [4.666667, 18.666668], rtol=1e-6)
    with pytest.raises(ValueError, match="only one"):
        ddg.var(x, unbiased=True, correction=0)


_GS_X = np.arange(24, dtype="float32").reshape(1, 2, 3, 4) / 7
_GS_GRID = np.array([[[[-1.2, -0.9], [0.3, 0.1], [0.95, 0.4]], [[-0.5, 0.7], [0.0, 0.0], [1.0, 1.0]]]], "float32")
_GS_PADDLE = {  # (output, d/dx, d/dgrid) of sum(y * [1, 2, ...]) printed by Paddle 3.3.1
    ('bilinear', 'zeros', True): [[0.04, 0.90714, 1.21786, 1.07857, 0.78571, 1.57143, 1.24, 2.62143, 2.93214, 2.79286, 2.5, 3.28571], [0.63, 0.0, 0.0, 0.0, 0.37, 3.49, 4.345, 1.665, 0.7, 2.11, 0.28, 7.11, 4.41, 0.0, 0.0, 0.0, 1.24, 8.11, 12.745, 4.995, 1.75, 5.29, 1.03, 15.33], [18.68572, 3.2, 2.14286, 5.71429, 2.57143, 6.85714, 3.0, 8.0, 3.42857, 9.14286, -73.28572, -48.85714]],
    ('bilinear', 'zeros', False): [[0.0, 0.95714, 0.80571, 1.15357, 0.78571, 0.39286, 0.11143, 2.67143, 1.83429, 2.78214, 2.5, 0.82143], [0.065, 0.0, 0.0, 0.0, 0.0, 2.5, 4.03, 0.89, 1.9, 1.9, 0.27, 2.61, 0.455, 0.0, 0.0, 0.0, 0.0, 5.5, 11.62, 2.84, 4.75, 4.75, 1.08, 6.36], [15.6, 1.8, 2.85714, 8.57143, -63.08571, 6.17143, 3.8, -51.21428, 4.57143, 13.71428, -48.85714, -36.64286]],
    ('bilinear', 'border', False): [[0.0, 0.95714, 1.34286, 1.21429, 0.78571, 1.57143, 1.71429, 2.67143, 3.05714, 2.92857, 2.5, 3.28571], [1.0, 0.0, 0.0, 0.0, 0.0, 2.5, 4.03, 1.37, 2.0, 2.0, 0.27, 7.83, 7.0, 0.0, 0.0, 0.0, 0.0, 5.5, 11.62, 4.28, 5.0, 5.0, 1.08, 17.52], [0.0, 0.0, 2.85714, 8.57143, -0.0, 10.28572, 4.0, -0.0, 4.57143, 13.71428, -0.0, -0.0]],
    ('bilinear', 'reflection', False): [[0.0, 0.95714, 1.34286, 1.21429, 0.78571, 1.57143, 1.71429, 2.67143, 3.05714, 2.92857, 2.5, 3.28571], [1.0, 0.0, 0.0, 0.0, 0.0, 2.5, 4.03, 1.37, 2.0, 2.0, 0.27, 7.83, 7.0, 0.0, 0.0, 0.0, 0.0, 5.5, 11.62, 4.28, 5.0, 5.0, 1.08, 17.52], [-0.0, 0.0, 2.85714, 8.57143, -0.0, 10.28572, 4.0, -0.0, 4.57143, 13.71428, -0.0, -0.0]],
    ('nearest', 'zeros', False): [[0.0, 0.85714, 1.57143, 1.14286, 0.85714, 0.0, 0.0, 2.57143, 3.28571, 2.85714, 2.57143, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0, 0.0, 4.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 19.0, 0.0, 10.0, 0.0, 0.0, 9.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]],
    ('nearest', 'reflection', True): [[0.0, 0.85714, 1.0, 1.28571, 0.85714, 1.57143, 1.71429, 2.57143, 2.71429, 3.0, 2.57143, 3.28571], [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0, 3.0, 0.0, 4.0, 0.0, 6.0, 7.0, 0.0, 0.0, 0.0, 0.0, 0.0, 19.0, 9.0, 0.0, 10.0, 0.0, 12.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]],
}


@pytest.mark.parametrize("key", list(_GS_PADDLE))
def test_grid_sample_matches_paddle(key):
    mode, padding_mode, align_corners = key
    x = T(_GS_X, stop_gradient=False)
    grid = T(_GS_GRID, stop_gradient=False)
    y = F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    assert y.shape == [1, 2, 2, 3]
    (y * T(np.arange(1, 13, dtype="float32").reshape(y.shape))).sum().backward()
    out, gx, gg = _GS_PADDLE[key]
    np.testing.assert_allclose(y.numpy().ravel(), out, atol=2e-5)
    np.testing.assert_allclose(x.grad.numpy().ravel(), gx, atol=2e-5)
    if mode == "bilinear":
        np.testing.assert_allclose(grid.grad.numpy().ravel(), gg, rtol=1e-4, atol=1e-4)


def test_affine_grid_and_spatial_transformer_match_paddle():
    theta = T([[[0.8, -0.3, 0.1], [0.2, 0.9, -0.2]]], stop_gradient=False)
    g = F.affine_grid(theta, [1, 2, 3, 4], align_corners=False)
    assert g.shape == [1, 3, 4, 2]
    np.testing.assert_allclose(g.numpy().ravel()[:8], [-0.3, -0.95, 0.1, -0.85, 0.5, -0.75, 0.9, -0.65], atol=1e-5)
    y = F.grid_sample(T(_GS_X), g, align_corners=False)
    y.sum().backward()
    np.testing.assert_allclose(theta.grad.numpy(), [[[-4.125, 4.161900043487549, 0.6142799854278564], [-1.2321399450302124, -2.8285698890686035, 24.814279556274414]]], rtol=1e-4)


def test_grid_sample_gradcheck():
    from ddg.autograd import gradcheck
    rng = np.random.default_rng(0)
    x = T(rng.standard_normal((1, 2, 3, 4)), stop_gradient=False)
    grid = T(rng.uniform(-1.1, 1.1, (1, 2, 3, 2)), stop_gradient=False)
    for pm in ("zeros", "border", "reflection"):
        assert gradcheck(lambda a, g: F.grid_sample(a, g, padding_mode=pm, align_corners=False), [x, grid])


def test_new_tensor_methods():
    x = T([[1.0, 0.0, 3.0]])
    assert x.count_nonzero().item() == 2
    assert x.take_along_axis(T([[2]]), 1).tolist() == [[3.0]]
    assert x.slice([1], [1], [3]).tolist() == [[0.0, 3.0]]
    assert x.floor_mod(2.0).tolist() == [[1.0, 0.0, 1.0]]
    assert x.sort(axis=1).tolist() == [[0.0, 1.0, 3.0]] and x.argsort(axis=1).tolist() == [[1, 0, 2]]
    assert x.cumprod(1).tolist() == [[1.0, 0.0, 0.0]] and x.tril().shape == [1, 3]
