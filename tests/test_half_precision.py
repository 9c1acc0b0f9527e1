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
