"""The numba kernel machinery (``ddg.tensor.compiled``): lazy import, same results as the
Python loop, IEEE NaN/Inf kept under the fast-math flags, and a disk cache that ranks
compiling at once leave whole."""
import os
import subprocess
import sys
import textwrap

import numpy as np

import ddg
from ddg.tensor.compiled import kernel


@kernel
def _axpy(a, x, y, out):
    for i in range(x.size):
        out[i] = a * x[i] + y[i]


@kernel
def _sum(x):
    s = 0.0
    for i in range(x.size):
        s += x[i]
    return s


def test_kernel_matches_python_loop_and_numpy():
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x, y = rng.standard_normal(1001).astype(dtype), rng.standard_normal(1001).astype(dtype)
        out, ref = np.empty_like(x), np.empty_like(x)
        _axpy(dtype(1.5), x, y, out)
        _axpy.py_func(dtype(1.5), x, y, ref)
        # fused multiply-add may round once where numpy rounds twice: one ulp of the inputs
        tol = dict(rtol=1e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(out, ref, **tol)
        np.testing.assert_allclose(out, 1.5 * x + y, **tol)


def test_nan_and_inf_propagate_under_fast_math():
    x = np.array([1.0, np.nan, 2.0])
    assert np.isnan(_sum(x))
    assert _sum(np.array([1.0, np.inf])) == np.inf
    out = np.empty(3)
    _axpy(2.0, np.array([np.inf, 1.0, np.nan]), np.zeros(3), out)
    assert out[0] == np.inf and out[1] == 2.0 and np.isnan(out[2])


def test_import_ddg_does_not_import_numba():
    code = "import sys, ddg; print('numba' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "False"


def test_ranks_compiling_at_once_share_a_whole_cache(tmp_path):
    mod = tmp_path / "kmod.py"
    mod.write_text(textwrap.dedent("""
        import numpy as np
        from ddg.tensor.compiled import kernel

        @kernel
        def twice(x, out):
            for i in range(x.size):
                out[i] = 2 * x[i]

        x = np.arange(5.0)
        out = np.empty_like(x)
        twice(x, out)
        assert out.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0], out
        print("ok")
    """))
    root = os.path.dirname(os.path.dirname(os.path.abspath(ddg.__file__)))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), root]))
    procs = [subprocess.Popen([sys.executable, str(mod)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "ok", err
    cached = [f for _, _, files in os.walk(tmp_path / "cache") for f in files]
    assert any(f.endswith(".nbi") for f in cached) and any(f.endswith(".nbc") for f in cached), cached
    # a later process loads from the cache and still computes the right thing
    res = subprocess.run([sys.executable, str(mod)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
