"""Convolution and pooling with ``padding='same'``/``'valid'`` (every stride and dilation,
1-D/2-D/3-D, transposed), the matrix-product family (``matmul`` with and without
transposes, ``mm``, ``bmm``, ``dot``, ``inner``, ``outer``, ``einsum``), the reductions
(every axis form, ``keepdim``) and the shape ops on inputs of rank 0 to 4 with
broadcasting give Paddle's results, or refuse where Paddle refuses.

The reference ``paddle_op_sweeps.json`` was recorded from Paddle 3.3.1 by ``op_reference.py``
(see there for the fingerprints).
"""
import json

import numpy as np
import pytest

import ddg
from op_reference import TABLE, all_cases, fingerprint

with open(TABLE) as _f:
    REFERENCE = json.load(_f)["cases"]
CASES = all_cases()


def test_the_table_covers_every_case():
    assert sorted(CASES) == sorted(REFERENCE)


def _family(key):
    if ":" in key:
        return key.split(":")[0]
    return "conv" if "conv" in key else "pool" if "pool" in key else "products"


@pytest.mark.parametrize("family", ["conv", "pool", "products", "reduce", "shape", "einsum"])
def test_sweep_matches_paddle(family):
    keys = [k for k in CASES if _family(k) == family]
    wrong = {}
    for key in keys:
        fn, args = CASES[key]
        ref = REFERENCE[key]
        try:
            got = fingerprint(fn(ddg, *args).numpy())
        except Exception as e:  # noqa: BLE001 - any refusal, its kind checked below
            if "error" not in ref:
                wrong[key] = f"ddg raised {type(e).__name__}: {e}"
            continue
        if "error" in ref:
            wrong[key] = f"Paddle raises {ref['error']}, ddg returned shape {got['shape']}"
        elif got["shape"] != ref["shape"] or got["dtype"] != ref["dtype"] or \
                not np.allclose(got["fp"], ref["fp"], rtol=1e-9, atol=1e-9, equal_nan=True):
            wrong[key] = f"ddg {got}, paddle {ref}"
    assert not wrong, f"{len(wrong)} of {len(keys)} cases differ from Paddle:\n" + "\n".join(
        f"{k}: {v}" for k, v in sorted(wrong.items()))


@pytest.mark.parametrize("op", ["mm", "matmul", "dot", "inner", "outer"])
def test_products_backward_matches_central_differences(op):
    """Backward of every shape pair Paddle accepts, against float64 central differences."""
    from op_reference import MATMUL_SHAPES, _inputs
    checked = 0
    for sa, sb in MATMUL_SHAPES:
        if "error" in REFERENCE[f"{op}/{sa}x{sb}"]:
            continue
        a, b = (ddg.to_tensor(v, stop_gradient=False) for v in _inputs(7, sa, sb))
        assert ddg.autograd.gradcheck(getattr(ddg, op), (a, b)), (op, sa, sb)
        checked += 1
    assert checked >= 2


def test_einsum_backward_matches_central_differences():
    """Every equation of the sweep (``...`` broadcasting, diagonals, traces included)."""
    from op_reference import EINSUMS, _inputs
    for eq, shapes in EINSUMS:
        ts = [ddg.to_tensor(a, stop_gradient=False) for a in _inputs(9, *shapes)]
        assert ddg.autograd.gradcheck(lambda *xs: ddg.einsum(eq, *xs), ts), eq
    a = ddg.to_tensor(np.ones([2, 1, 1, 3]), stop_gradient=False)   # a size-1 "..." axis broadcast
    b = ddg.to_tensor(np.ones([4, 3, 2]), stop_gradient=False)
    assert ddg.einsum("...ij,...jk->...ik", a, b).shape == [2, 4, 1, 2]
    assert ddg.autograd.gradcheck(lambda x, y: ddg.einsum("...ij,...jk->...ik", x, y), (a, b))
