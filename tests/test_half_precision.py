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
