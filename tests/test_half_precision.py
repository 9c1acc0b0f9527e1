"""float16 and bfloat16 as first-class dtypes: every primitive of the op table and the
main nn families run in the input's 2-byte dtype, forward against numpy in float64
and backward against ddg's float64 gradients (which test_ops_table checks against
central differences), on every backend (simcupy too)."""
import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg.autograd import engine
from ddg.tensor.dtypes import bfloat16

from test_ops_table import ROWS, _data

HALF = [pytest.param(np.dtype(np.float16), id="float16"), pytest.param(bfloat16, id="bfloat16")]
# relative to the size of the values: a few roundings at each dtype's epsilon
# (bfloat16 eps 7.8e-3, float16 eps 9.8e-4)
TOL = {np.dtype(np.float16): 4e-3, bfloat16: 3e-2}

# rows whose float64 reference is ill-conditioned at 2-byte precision: their inputs
# are rounded first, but a few more roundings inside change the result by more than
# the tolerance (a determinant of a near-singular matrix...); they still run and keep
# their dtype, with the tolerance widened
LOOSE = {"inverse": 4, "det": 4, "slogdet": 4, "solve": 4, "solve_vec": 4, "cumprod": 2, "cumprod_flat": 2,
         "cumprod_zero": 2, "var": 2, "std": 2, "prod": 2, "logsumexp": 2, "pow": 2, "rpow_scalar": 2,
         "norm_p3": 2, "tan": 2, "acosh": 2, "atanh": 2}


def _close(got, want, tol, what):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    err = float(np.abs(got - want).max()) if want.size else 0.0
    assert err <= tol * scale, f"{what}: max abs error {err:.3g} > {tol * scale:.3g}"


def _rounded(shapes, domain, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [_data(s, domain, rng).astype(dtype) for s in shapes]


def _run(fn, arrays, place, v=None):
    ins = [ddg.to_tensor(a, place=place, stop_gradient=False) for a in arrays]
    out = fn(*ins)
    if v is None:
        v = np.random.default_rng(1).standard_normal(out.shape)
    grads = engine.grad([out], ins, [ddg.to_tensor(v.astype(out.dtype) if out.dtype.kind != "b" else v,
                                                   place=place)], allow_unused=True)
    return out, grads, v


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name,fn,ref,shapes,domain", ROWS, ids=[r[0] for r in ROWS])
def test_op_table_in_half_precision(name, fn, ref, shapes, domain, dtype, place):
    tol = TOL[dtype] * LOOSE.get(name, 1)
    half = _rounded(shapes, domain, dtype)
    wide = [a.astype(np.float64) for a in half]
    out, grads, v = _run(fn, half, place)
    assert out.dtype == dtype, f"{name}: {dtype} input gave {out.dtype}"
    _close(out.numpy().astype(np.float64), ref(*wide), tol, f"{name} forward")
    out64, grads64, _ = _run(fn, wide, "cpu", v.astype(dtype).astype(np.float64))
    for i, (g, g64) in enumerate(zip(grads, grads64)):
        if g64 is None:
            continue
        assert g is not None and g.dtype == dtype, f"{name}: gradient {i} is {None if g is None else g.dtype}"
        assert g.place == out.place
        _close(g.numpy().astype(np.float64), g64.numpy(), 2 * tol, f"{name} gradient {i}")


def _labels(n, c):
    return ddg.to_tensor(np.arange(n) % c)


def _bn(x):
    rm = ddg.zeros([x.shape[1]], dtype=x.dtype).to(x.place)
    rv = ddg.ones([x.shape[1]], dtype=x.dtype).to(x.place)
    y = F.batch_norm(x, rm, rv, training=True, momentum=0.5)
    assert rm.dtype == x.dtype and rv.dtype == x.dtype
    return y + rm.reshape([1, -1, 1, 1]) * 0 + rv.reshape([1, -1, 1, 1]) * 0


def _dropout(x):
    ddg.seed(7)
    return F.dropout(x, p=0.4, training=True)


# name, function of the inputs, input shapes, domain; the reference is the same function
# in float64 (its float64 results and gradients are checked in the nn test files)
NN_ROWS = [
    ("layer_norm", lambda x, w, b: F.layer_norm(x, [5], w, b), [(3, 4, 5), (5,), (5,)], "any"),
    ("batch_norm_train", _bn, [(4, 3, 2, 2)], "any"),
    ("group_norm", lambda x: F.group_norm(x, 2), [(2, 4, 3, 3)], "any"),
    ("instance_norm", lambda x: F.instance_norm(x), [(2, 3, 4, 4)], "any"),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), [(2, 3, 4, 6)], "any"),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, stride=1, padding=1), [(2, 3, 4, 5)], "any"),
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, 1), [(2, 3, 4, 4)], "any"),
    ("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 1)), [(2, 3, 4, 5, 3)], "any"),
    ("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 3), [(2, 3, 7)], "any"),
    ("max_pool3d", lambda x: F.max_pool3d(x, 2, 2), [(2, 3, 4, 4, 5)], "any"),
    ("avg_pool3d", lambda x: F.avg_pool3d(x, 2, 2), [(2, 3, 4, 4, 5)], "any"),
    ("pad_reflect", lambda x: F.pad(x, [1, 2], mode="reflect"), [(2, 3, 6)], "any"),
    ("multi_margin_loss", lambda x: F.multi_margin_loss(x, ddg.to_tensor(np.array([0, 2, 4]))), [(3, 5)], "any"),
    ("conv2d_groups", lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=2), [(2, 4, 5, 5), (6, 2, 3, 3)],
     "any"),
    ("conv2d_transpose", lambda x, w, b: F.conv2d_transpose(x, w, b, stride=2, padding=1),
     [(2, 3, 3, 3), (3, 2, 3, 3), (2,)], "any"),
    ("conv1d", lambda x, w: F.conv1d(x, w, padding=1), [(2, 3, 7), (4, 3, 3)], "any"),
    ("cross_entropy", lambda x: F.cross_entropy(x, _labels(6, 5).to(x.place)), [(6, 5)], "any"),
    ("cross_entropy_none_weight", lambda x: F.cross_entropy(
        x, _labels(6, 5).to(x.place), weight=ddg.to_tensor([1, 2, 1, .5, 1], dtype=x.dtype).to(x.place),
        reduction="none"), [(6, 5)], "any"),
    ("cross_entropy_soft", lambda x, y: F.cross_entropy(x, F.softmax(y), soft_label=True), [(4, 5), (4, 5)],
     "any"),
    ("nll_loss", lambda x: F.nll_loss(F.log_softmax(x), _labels(6, 4).to(x.place)), [(6, 4)], "any"),
    ("mse_loss", F.mse_loss, [(3, 4), (3, 4)], "any"),
    ("l1_loss", F.l1_loss, [(3, 4), (3, 4)], "away"),
    ("bce_with_logits", lambda x, y: F.binary_cross_entropy_with_logits(x, F.sigmoid(y)), [(3, 4), (3, 4)], "any"),
    ("smooth_l1", F.smooth_l1_loss, [(3, 4), (3, 4)], "any"),
    ("embedding", lambda w: F.embedding(ddg.to_tensor([[0, 2], [2, 3]]).to(w.place), w), [(4, 3)], "any"),
    ("dropout", _dropout, [(4, 6)], "any"),
    ("gelu", F.gelu, [(3, 4)], "any"),
    ("gelu_tanh", lambda x: F.gelu(x, approximate=True), [(3, 4)], "any"),
    ("silu", F.silu, [(3, 4)], "any"),
    ("softplus", F.softplus, [(3, 4)], "any"),
    ("elu", F.elu, [(3, 4)], "away"),
    ("selu", F.selu, [(3, 4)], "away"),
    ("leaky_relu", F.leaky_relu, [(3, 4)], "away"),
    ("hardswish", F.hardswish, [(3, 4)], "away"),
    ("hardsigmoid", F.hardsigmoid, [(3, 4)], "away"),
    ("relu6", lambda x: F.relu6(x * 4), [(3, 4)], "away"),
    ("mish", F.mish, [(3, 4)], "any"),
    ("log_sigmoid", F.log_sigmoid, [(3, 4)], "any"),
    ("softsign", F.softsign, [(3, 4)], "any"),
    ("tanhshrink", F.tanhshrink, [(3, 4)], "any"),
    ("prelu", lambda x, w: F.prelu(x, w), [(2, 3, 4), (3,)], "away"),
    ("glu", F.glu, [(3, 4)], "any"),
    ("attention", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     [(2, 4, 2, 8), (2, 4, 2, 8), (2, 4, 2, 8)], "any"),
]


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name,fn,shapes,domain", NN_ROWS, ids=[r[0] for r in NN_ROWS])
def test_nn_families_in_half_precision(name, fn, shapes, domain, dtype, place):
    tol = TOL[dtype] * 2
    half = _rounded(shapes, domain, dtype)
    wide = [a.astype(np.float64) for a in half]
    out, grads, v = _run(fn, half, place)
    assert out.dtype == dtype, f"{name}: {dtype} input gave {out.dtype}"
    out64, grads64, _ = _run(fn, wide, "cpu", v.astype(dtype).astype(np.float64))
    _close(out.numpy().astype(np.float64), out64.numpy(), tol, f"{name} forward")
    for i, (g, g64) in enumerate(zip(grads, grads64)):
        if g64 is None:
            continue
        assert g is not None and g.dtype == dtype, f"{name}: gradient {i} is {None if g is None else g.dtype}"
        _close(g.numpy().astype(np.float64), g64.numpy(), 2 * tol, f"{name} gradient {i}")


# -- dtypes, promotion, creation, conversion, I/O ---------------------------------------------
def test_bfloat16_names_and_float_kind():
    assert ddg.bfloat16 == bfloat16 and str(ddg.bfloat16) == "bfloat16"
    for spelling in ("bfloat16", "paddle.bfloat16", ddg.bfloat16, "bf16"):
        assert ddg.zeros([2], dtype=spelling).dtype == bfloat16
    assert ddg.zeros([2], "half").dtype == np.float16
    x = ddg.ones([2], "bfloat16")
    assert x.is_floating_point() and x.element_size() == 2 and x.dtype == "bfloat16"
    with pytest.raises(TypeError, match="unsupported dtype"):
        ddg.zeros([2], "float8_e4m3fn")   # another ml_dtypes type: not a ddg dtype
    ddg.set_default_dtype("bfloat16")
    try:
        assert ddg.get_default_dtype() == "bfloat16"
        assert ddg.to_tensor([1.5]).dtype == bfloat16 and ddg.nn.Linear(2, 2).weight.dtype == bfloat16
    finally:
        ddg.set_default_dtype("float32")


# Paddle 3.3.1 (CPU), printed there: the dtype of a + b
PROMOTION = [
    ("bfloat16", [3], "float16", [3], "float32"),
    ("float16", [3], "bfloat16", [3], "float32"),
    ("bfloat16", [3], "float32", [3], "float32"),
    ("bfloat16", [3], "float64", [3], "float64"),
    ("float16", [3], "float32", [3], "float32"),
    ("float32", [], "bfloat16", [3], "bfloat16"),     # a 0-d tensor acts as a scalar
    ("bfloat16", [], "float32", [3], "float32"),
    ("float16", [], "float32", [3], "float32"),
    ("bfloat16", [], "float16", [3], "float16"),
    ("int64", [3], "bfloat16", [], "bfloat16"),       # a 0-d float beside an integer tensor
]


@pytest.mark.parametrize("da,sa,db,sb,want", PROMOTION)
def test_promotion_with_half_dtypes_as_paddle(da, sa, db, sb, want):
    a, b = ddg.ones(sa, da), ddg.ones(sb, db)
    assert (a + b).dtype == want and (b + a).dtype == want


def test_half_with_integers_and_scalars():
    x = ddg.ones([3], "bfloat16")
    with pytest.raises(TypeError, match="bfloat16"):
        x + ddg.ones([3], "int64")
    for y in (x * 2.5, 2.5 - x, x / 3, x ** 2, 2.0 ** x, ddg.clip(x, 0.2, 0.7), ddg.where(x > 0, x, 0.5)):
        assert y.dtype == bfloat16
    assert (x * 2.5).numpy().astype(np.float32).tolist() == [2.5] * 3
    h = ddg.ones([3], "float16")
    assert (h * 2.5).dtype == np.float16 and (h + 1).dtype == np.float16


@pytest.mark.parametrize("dtype", HALF)
def test_creation_and_casts(dtype, place):
    name = str(dtype)
    made = [ddg.zeros([2, 3], name), ddg.ones([2], name), ddg.full([2], 3.5, name), ddg.empty([2], name),
            ddg.arange(0, 4, dtype=name), ddg.linspace(0, 1, 5, dtype=name), ddg.eye(3, dtype=name),
            ddg.rand([3], name), ddg.randn([3], name), ddg.uniform([3], name), ddg.to_tensor([1.5, 2], name),
            ddg.zeros_like(ddg.ones([2], name)), ddg.full_like(ddg.ones([2], name), 2.0),
            ddg.to_tensor(np.ones(2, dtype))]
    assert all(t.dtype == dtype for t in made)
    np.testing.assert_array_equal(ddg.arange(0, 4, dtype=name).numpy().astype(np.float32), [0, 1, 2, 3])
    x = ddg.to_tensor([1.5, -2.25, 3.0], place=place, stop_gradient=False)
    h = x.astype(name)
    assert h.dtype == dtype and ddg.cast(x, name).dtype == dtype and x.to(dtype=name).dtype == dtype
    assert h.place == x.place
    (h.astype("float32") * 3).sum().backward()          # the cast's gradient comes back in float32
    assert x.grad.dtype == np.float32 and x.grad.numpy().tolist() == [3.0] * 3
    assert h.numpy().dtype == dtype and h.tolist() == [1.5, -2.25, 3.0] and h[0].item() == 1.5


def test_printing_shows_float_values():
    for name in ("bfloat16", "float16"):
        s = repr(ddg.to_tensor([1.5, 2.25, 3.0], dtype=name))
        assert f"dtype={name}" in s and "[1.50000000, 2.25000000, 3.        ]" in s, s


def test_save_load_and_paddle_files(tmp_path):
    import pickle
    x = ddg.to_tensor([1.5, -2.25, 3.0e38, 1e-30], dtype="bfloat16")
    state = {"b": x, "h": x[:2].astype("float16"), "scalar": x[0], "nested": [x[1:]]}
    ddg.save(state, str(tmp_path / "s.pdparams"))
    back = ddg.load(str(tmp_path / "s.pdparams"))
    assert back["b"].dtype == bfloat16 and back["h"].dtype == np.float16 and back["nested"][0].dtype == bfloat16
    assert back["b"].numpy().view(np.uint16).tolist() == x.numpy().view(np.uint16).tolist()   # bit for bit
    assert back["scalar"].shape == []
    # paddle.save writes a bfloat16 tensor as the uint16 array of its bits (what its numpy() gives);
    # paddle.load gives bfloat16 tensors back, and so does ddg.load
    bits = np.array([16320, 16400, 16448], dtype=np.uint16)      # 1.5, 2.25, 3.0
    blob = {"w": bits, "h": np.array([1.5, 2.25], np.float16), "StructuredToParameterName@@": {"w": "linear_0.w_0"}}
    (tmp_path / "p.pdparams").write_bytes(pickle.dumps(blob, protocol=4))
    got = ddg.load(str(tmp_path / "p.pdparams"))
    assert got["w"].dtype == bfloat16 and got["w"].tolist() == [1.5, 2.25, 3.0] and got["w"].name == "linear_0.w_0"
    assert got["h"].dtype == np.float16
    raw = ddg.load(str(tmp_path / "p.pdparams"), return_numpy=True)
    assert raw["w"].dtype == np.uint16      # as Paddle's return_numpy


def test_layer_casts_and_dataloader():
    m = nn_model = ddg.nn.Sequential(ddg.nn.Linear(3, 4), ddg.nn.BatchNorm1D(4))
    m.bfloat16(excluded_layers=[m[1]])
    assert m[0].weight.dtype == bfloat16 and m[1].weight.dtype == np.float32 and m[1]._mean.dtype == np.float32
    nn_model.float16()
    assert all(p.dtype == np.float16 for p in nn_model.parameters())
    assert all(b.dtype == np.float16 for b in nn_model.buffers())
    nn_model.float()
    assert all(p.dtype == np.float32 for p in nn_model.parameters())

    class D(ddg.io.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return np.full((3, 400), i + 0.5, bfloat16), np.float16(i)   # > 1 KiB: shared memory
    for workers in (0, 2):
        batches = list(ddg.io.DataLoader(D(), batch_size=2, num_workers=workers))
        assert [(type(a), a.dtype, b.dtype, a.shape) for a, b in batches] == \
            [(ddg.Tensor, bfloat16, np.float16, [2, 3, 400])] * 2
        assert np.array_equal(batches[1][0].numpy()[:, 0, 0].astype(np.float32), [2.5, 3.5])


def test_dlpack_refuses_bfloat16_on_the_cpu_clearly():
    from ddg.utils import dlpack
    with pytest.raises(TypeError, match="bfloat16"):
        dlpack.to_dlpack(ddg.ones([2], "bfloat16"))
    h = ddg.from_dlpack(dlpack.to_dlpack(ddg.ones([2], "float16")))
    assert h.dtype == np.float16


@pytest.mark.parametrize("dtype", HALF)
def test_reductions_accumulate_in_float32(dtype):
    n = 4096
    x = ddg.full([n], 1.0 + 1 / 64, str(dtype))     # exactly representable in both
    want = n * (1.0 + 1 / 64)
    # numpy's own half sum drifts far (bfloat16 stops growing at 256 + ...); ddg's does not
    assert x.sum().dtype == dtype and abs(float(x.sum()) - want) <= TOL[dtype] * want / 4
    assert abs(float(x.mean()) - (1.0 + 1 / 64)) <= 1e-2
    assert abs(float(ddg.cumsum(x)[-1]) - want) <= TOL[dtype] * want / 4
    assert x.sum(dtype="float32").dtype == np.float32 and float(x.sum(dtype="float32")) == want


@pytest.mark.parametrize("dtype", HALF)
def test_training_a_half_model(dtype):
    """Adam on an MLP in float16/bfloat16: parameters, gradients and optimizer steps stay
    in the dtype, and the loss goes down."""
    ddg.seed(0)
    m = ddg.nn.Sequential(ddg.nn.Linear(8, 16), ddg.nn.GELU(), ddg.nn.LayerNorm(16), ddg.nn.Linear(16, 3))
    m.to(dtype=str(dtype))
    opt = ddg.optimizer.AdamW(learning_rate=0.02, parameters=m.parameters())
    rng = np.random.default_rng(0)
    x = ddg.to_tensor(rng.standard_normal((32, 8)).astype(dtype))
    y = ddg.to_tensor(rng.integers(0, 3, 32))
    losses = []
    for _ in range(30):
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
        assert loss.dtype == dtype
    assert all(p.dtype == dtype for p in m.parameters())
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("dtype", HALF)
def test_intermediate_gradients_keep_the_dtype(dtype):
    """Gradients reaching non-leaf tensors (hooks, retain_grads) are in their dtype too,
    through ops with Python and numpy scalars."""
    x = ddg.to_tensor(np.linspace(0.5, 1.5, 6).astype(dtype), stop_gradient=False)
    consumers = [lambda m: m * 1.5, lambda m: m / 3.0, lambda m: m ** 2.5, lambda m: 2.0 ** m,
                 lambda m: 3.0 / m, ddg.erf, lambda m: m - 0.25]
    mids = [x + 0.0 for _ in consumers]
    total = 0.0
    for m, c in zip(mids, consumers):
        m.retain_grads()       # its gradient is what the consumer's backward returns
        total = total + c(m).sum()
    total.backward()
    assert [m.grad.dtype for m in mids] == [dtype] * len(mids)
    assert x.grad.dtype == dtype
