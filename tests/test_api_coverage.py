"""ddg's coverage of Paddle 2.6's core public API never drops below the measured figure.

The name table (``tests/paddle_api_names.json``) was generated once from PaddlePaddle
2.6.2 by ``tools/api_coverage.py --generate``; this test needs no Paddle. Raise a floor
when you add names (``python tools/api_coverage.py`` prints the figures)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tools"))
import api_coverage  # noqa: E402

# measured coverage in percent, per module (the figures docs/paddle.md reports)
FLOORS = {
    "paddle": 97.3,
    "paddle.Tensor": 94.1,
    "paddle.nn": 97.0,
    "paddle.nn.functional": 97.5,
    "paddle.optimizer": 100.0,
    "paddle.optimizer.lr": 100.0,
    "paddle.nn.initializer": 100.0,
    "paddle.jit": 100.0,
    "paddle.text": 100.0,
    "paddle.fft": 100.0,
    "paddle.distribution": 100.0,
    "paddle.profiler": 90.0,
}


def test_coverage_stays_at_or_above_the_measured_figures():
    res = api_coverage.coverage()
    low = {}
    for m, floor in FLOORS.items():
        have, wanted = res[m][0], res[m][1]
        pct = 100 * len(have) / len(wanted)
        if pct + 1e-9 < floor - 0.05:
            low[m] = (round(pct, 1), floor, res[m][2])
    assert not low, "coverage dropped below the recorded figure (module: now, floor, missing):\n" + \
        "\n".join(f"{m}: {p}% < {f}%; missing {miss}" for m, (p, f, miss) in low.items())


def test_every_exclusion_group_matches_a_name():
    # a stale pattern would hide nothing but read as if it did
    table = api_coverage.load_table()
    import fnmatch
    keys = [f"{m}:{n}" for m, ns in table["modules"].items() for n in ns]
    for reason, pats in api_coverage.EXCLUDED.items():
        for p in pats:
            assert any(fnmatch.fnmatchcase(k, p) for k in keys), f"exclusion {p!r} ({reason}) matches no Paddle name"


def test_the_counter_sees_a_missing_name():
    table = {"generated_from": "test", "modules": {m: [] for m in api_coverage.ALL_MODULES}}
    table["modules"]["paddle"] = ["add", "no_such_name_in_ddg", "CUDAPinnedPlace"]
    have, wanted, missing, skip = api_coverage.coverage(table)["paddle"]
    assert have == ["add"] and missing == ["no_such_name_in_ddg"] and skip == ["CUDAPinnedPlace"]
