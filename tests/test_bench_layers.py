"""The layer sweep (bench/bench_layers.py) covers every public ddg.nn layer: each one is
benched or listed in NO_COUNTERPART with its reason, and every case runs (ddg side, small
size) so that a broken case cannot hide in the sweep's table."""
import importlib.util
import inspect
import os

import numpy as np
import pytest

import ddg
import ddg.nn as nn

_PATH = os.path.join(os.path.dirname(__file__), "..", "bench", "bench_layers.py")


def _sweep():
    spec = importlib.util.spec_from_file_location("bench_layers_sweep", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SWEEP = _sweep()


def _public_layers():
    return {n for n in dir(nn) if not n.startswith("_") and inspect.isclass(getattr(nn, n))
            and issubclass(getattr(nn, n), nn.Layer)}


def test_every_public_layer_is_benched_or_has_a_reason():
    benched = {SWEEP.layer_name(c) for c in SWEEP.LAYERS}
    listed = set(SWEEP.NO_COUNTERPART)
    public = _public_layers()
    missing = public - benched - listed
    assert not missing, (f"public ddg.nn layers missing from bench/bench_layers.py: {sorted(missing)}; add a "
                         f"case to LAYERS, or to NO_COUNTERPART with the reason it has no torch counterpart")
    assert not (benched & listed), f"both benched and listed as not benchable: {sorted(benched & listed)}"
    stale = (benched | listed) - public
    assert not stale, f"the sweep names layers ddg.nn does not have: {sorted(stale)}"
    assert all(isinstance(r, str) and len(r) > 5 for r in SWEEP.NO_COUNTERPART.values())


@pytest.mark.parametrize("case", sorted(SWEEP.LAYERS))
def test_sweep_case_runs(case):
    ddg.seed(0)
    step = SWEEP.build(case, "s")["ddg"]
    step()
    grads = [t.grad for t in step.tensors if not t.stop_gradient]
    assert grads and all(g is not None for g in grads), f"{case}: backward gave no gradient"
    assert all(np.isfinite(g.numpy()).all() for g in grads)


def test_sweep_reports_every_case(capsys):
    SWEEP.main(["--only", "ReLU,Conv2D", "--sizes", "s", "--rounds", "1", "--min-time", "0.0001"])
    out = capsys.readouterr().out
    for case in ("ReLU", "Conv2D", "Conv2D/depthwise"):
        assert f"| {case} |" in out
    assert "error" not in out
