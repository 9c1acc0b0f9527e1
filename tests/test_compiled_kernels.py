"""The numba kernel machinery (``ddg.tensor.compiled``): lazy import, same results as the
Python loop, IEEE NaN/Inf kept under the fast-math flags, and a disk cache that ranks
compiling at once leave whole."""
import ast
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

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
    """Two processes meet a new kernel at the same moment (each says it is ready, then waits
    for a start file): one compiles it, the other waits for its lock and loads what it wrote."""
    mod = tmp_path / "kmod.py"
    mod.write_text(textwrap.dedent("""
        import os, sys, time
        import numpy as np
        from ddg.tensor.compiled import kernel

        @kernel
        def twice(x, out):
            for i in range(x.size):
                out[i] = 2 * x[i] + np.tanh(x[i]) * 0
            for i in range(x.size):
                out[i] = out[i] + np.sqrt(x[i] * x[i]) * 0

        x = np.arange(5.0)
        out = np.empty_like(x)
        if len(sys.argv) > 1:
            open(sys.argv[1] + "." + sys.argv[2], "w").close()
            while not os.path.exists(sys.argv[1]):
                time.sleep(0.001)
        twice(x, out)
        assert out.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0], out
        stats = twice.dispatcher().stats
        print("ok", sum(stats.cache_misses.values()), sum(stats.cache_hits.values()))
    """))
    root = os.path.dirname(os.path.dirname(os.path.abspath(ddg.__file__)))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), root]))
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, str(mod), str(go), str(i)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    deadline = time.monotonic() + 60
    while not all(os.path.exists(f"{go}.{i}") for i in range(2)) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    counts = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.startswith("ok"), err
        counts.append(tuple(int(v) for v in out.split()[1:]))
    assert sorted(counts) == [(0, 1), (1, 0)], counts      # one compile, one load
    cached = [f for _, _, files in os.walk(tmp_path / "cache") for f in files]
    assert any(f.endswith(".nbi") for f in cached) and any(f.endswith(".nbc") for f in cached), cached
    # a later process loads from the cache and still computes the right thing
    res = subprocess.run([sys.executable, str(mod)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.split() == ["ok", "0", "1"], res.stderr


def test_machine_lock_gives_up_after_its_wait(monkeypatch, tmp_path):
    """A holder that never lets go (a rank stopped mid-compile) delays the others by at most
    LOCK_WAIT seconds, then they compile without it; a released lock is taken again."""
    import fcntl
    from ddg.tensor import compiled
    monkeypatch.setattr(compiled.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(compiled, "LOCK_WAIT", 0.3)
    with compiled._machine_lock(fcntl, "k") as held:
        assert held.fd is not None
        code = ("import fcntl, time, sys\n"
                "from ddg.tensor import compiled\n"
                "compiled.tempfile.gettempdir = lambda: sys.argv[1]\n"
                "compiled.LOCK_WAIT = 0.3\n"
                "t = time.monotonic()\n"
                "with compiled._machine_lock(fcntl, 'k') as lk:\n"
                "    print(lk.fd is None, round(time.monotonic() - t, 1))\n")
        res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
        got, waited = res.stdout.split()
        assert res.returncode == 0 and got == "True" and 0.3 <= float(waited) < 5, res.stderr
    with compiled._machine_lock(fcntl, "k") as again:
        assert again.fd is not None


def _compiled_functions(tree):
    """Names a module binds to numba-compiled functions: ``@numba.njit``/``@kernel``
    definitions and module-level aliases of them (``_gemm = gemm``)."""
    def compiled(fn):
        for d in fn.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name in ("njit", "jit", "kernel"):
                return True
        return False
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and compiled(n)}
    for n in tree.body:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in names:
            names.update(t.id for t in n.targets if isinstance(t, ast.Name))
    return names


def _tensor_modules():
    """``{module name: AST}`` of ``ddg/tensor``'s modules, where the kernels live."""
    folder = os.path.join(os.path.dirname(ddg.__file__), "tensor")
    trees = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name)) as f:
                trees[name[:-3]] = ast.parse(f.read())
    return trees


def _array_valued(value, fn):
    """Whether ``value``, the right side of ``a[...] = value`` in ``fn``, may be an array: an
    indexing, a call (but a scalar's constructor on constants), arithmetic, or a local name
    bound to anything but a number (a tuple unpacking included). ``fn``'s parameters count
    as scalars (``zero`` arguments): the scan cannot see their types."""
    if isinstance(value, ast.Call) and value.args and all(isinstance(a, ast.Constant) for a in value.args):
        return False      # a scalar made from a constant: np.float32(0.0)
    if isinstance(value, (ast.Subscript, ast.Call, ast.BinOp, ast.Attribute)):
        return True
    if not isinstance(value, ast.Name):
        return False
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and any(value.id in {x.id for x in ast.walk(t) if isinstance(x, ast.Name)}
                                             for t in n.targets):
            v = n.value
            constant = isinstance(v, ast.Constant) or (isinstance(v, ast.UnaryOp) and isinstance(v.operand, ast.Constant))
            made = isinstance(v, ast.Call) and not v.args[1:] and all(isinstance(a, ast.Constant) for a in v.args)
            if not (constant or made):
                return True
    return False


def _a_slice(value):
    """Whether ``value`` is a slice of an array (``b[i, j:k]``): an array whatever it is
    stored into (``a[i] = b[i, j:k]`` copies a row as ``a[i, :] = ...`` does)."""
    return isinstance(value, ast.Subscript) and any(isinstance(x, ast.Slice) for x in ast.walk(value.slice))


def test_kernels_copy_arrays_by_loops_not_slice_assignment():
    """No compiled function assigns an array to an array slice (``a[:] = b``, ``a[i, j:k] =
    b[i]``, ``a[i] = b[i, j:k]``): numba compiles that statement's shape-mismatch error, whose message formatting
    (string joins, ``repr`` of ints) took ~6.5 s to compile in every process that compiled
    such a kernel, and links its IR into every caller (the first LSTM forward + backward
    compiled in 45 s with it, 37 without). Scalar fills (``a[:] = 0.0``) have no such path;
    copies are written as loops."""
    bad, checked = [], 0
    for mod, tree in _tensor_modules().items():
        kernels = _compiled_functions(tree) | {
            n.name for n in tree.body if isinstance(n, ast.FunctionDef)
            and any(getattr(d, "id", "") == "jitable" for d in n.decorator_list)}
        for fn in tree.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name in kernels):
                continue
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Subscript) for t in n.targets):
                    checked += 1
                    sliced = any(isinstance(x, ast.Slice) for t in n.targets for x in ast.walk(t))
                    if (sliced and _array_valued(n.value, fn)) or _a_slice(n.value):
                        bad.append(f"{mod}.{fn.name} line {n.lineno}: {ast.unparse(n)}")
    assert checked > 300, checked     # the scan saw the kernels' stores
    assert not bad, "\n".join(bad)


def test_kernels_call_kernels_without_literal_constants():
    """A kernel that calls another compiled kernel passes no literal int or bool (``0``,
    ``False``): numba compiles the callee once more for each literal combination (a
    ``Literal[int](0)`` signature) and links every variant into its callers; those variants
    cost ~13 s of CPU in a cold suite. ``compiled.I0``/``NO``/``YES`` are the constants
    to pass instead (numpy scalars type as plain int64 / bool)."""
    trees = _tensor_modules()
    exported = {mod: _compiled_functions(tree) for mod, tree in trees.items()}
    bad, checked = [], 0
    for mod, tree in trees.items():
        callees = set(exported[mod])
        for n in tree.body:       # compiled functions imported from sibling modules
            if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module in exported:
                callees.update(a.asname or a.name for a in n.names if a.name in exported[n.module])
        for fn in tree.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name in exported[mod]):
                continue
            for call in ast.walk(fn):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in callees:
                    checked += 1
                    lits = [ast.unparse(a) for a in call.args
                            if isinstance(a, ast.Constant) and type(a.value) in (int, bool)]
                    if lits:
                        bad.append(f"{mod}.{fn.name}: {call.func.id}(... {', '.join(lits)} ...) line {call.lineno}")
    assert checked > 50, checked      # the scan found the kernels' calls to kernels
    assert not bad, "\n".join(bad)


def test_row_max8_keeps_the_scalar_rule():
    """``gemm_kernels.row_max8`` (8-lane vectors, then the lanes and the tail) gives what the
    scalar ``softmax_kernels.row_max`` gives at every length around the vector width: the
    maximum, infinities included; a NaN after the first value never wins (numpy's
    ``nanmax``), a NaN first gives NaN."""
    import numba
    from ddg.tensor.gemm_kernels import row_max8
    from ddg.tensor.softmax_kernels import row_max
    vector_max = numba.njit(lambda r: row_max8(r))
    rng = np.random.default_rng(5)
    for n in list(range(1, 42)) + [199, 200, 256, 1001]:
        for case in range(4):
            r = rng.standard_normal(n).astype(np.float32) * 10
            if case == 1:
                r[rng.integers(n)] = np.nan
            elif case == 2:
                r[0] = np.nan
            elif case == 3:
                r[rng.integers(n)], r[rng.integers(n)] = np.inf, -np.inf
            got, scalar = vector_max(r), row_max(r)
            assert np.isnan(got) == np.isnan(scalar) and (np.isnan(got) or got == scalar), (n, case, r)
            if not np.isnan(r[0]):
                assert got == np.nanmax(r), (n, case)
            else:
                assert np.isnan(got)


def test_as_float32_reinterprets_the_low_32_bits():
    import numba
    from ddg.tensor.gemm_kernels import as_float32
    cast = numba.njit(lambda b: as_float32(b))
    cast32 = numba.njit(lambda b: as_float32(np.int32(b)))
    for bits in (0, 1, 1 << 23, 127 << 23, (127 << 23) | 12345, 0x7F800000, 0x7FC00000, 0x80000000, 0xFFFFFFFF,
                 -1, (5 << 32) | (126 << 23)):
        want = np.array([bits & 0xFFFFFFFF], np.uint32).view(np.float32)[0]
        got = cast(bits)
        assert np.array([got], np.float32).view(np.uint32)[0] == np.array([want]).view(np.uint32)[0], hex(bits)
        if -(1 << 31) <= bits < (1 << 31):
            assert np.array([cast32(bits)], np.float32).view(np.uint32)[0] == np.array([want]).view(np.uint32)[0]


_BLAS_PROBE = """
import sys
import numpy as np
if sys.argv[1] == "numba-first":       # numba's registries loaded before ddg's kernels: no hook
    import numba
    numba.njit(lambda a: a + 1)(np.ones(2))
import ddg
from ddg.tensor import compiled, softmax_kernels as SK
x = np.random.default_rng(0).standard_normal((4, 9)).astype(np.float32)
got = SK.softmax_last(x.copy(), False, 1.0)
e = np.exp(x - x.max(1, keepdims=True))
assert np.allclose(got, e / e.sum(1, keepdims=True), atol=1e-6)
import numba, numba.np.arraymath as am
loaded = "scipy.linalg" in sys.modules
assert not any(isinstance(f, compiled._DeferBlasProbe) for f in sys.meta_path)
if sys.argv[1] == "ddg-first":         # numba's own np.dot, its real BLAS check run now
    @numba.njit
    def dot(a, b):
        return np.dot(a, b)
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(dot(a, b), a @ b)
print(int(loaded), int(am._HAVE_BLAS), int("scipy.linalg" in sys.modules))
"""


@pytest.mark.parametrize("order", ["ddg-first", "numba-first"])
def test_kernels_load_without_scipy_linalg_and_numba_blas_still_works(order):
    """Running a ddg kernel does not import scipy.linalg (numba's import-time BLAS probe, about
    half a second of CPU per process); numba's own np.dot in a user's kernel compiles and is
    right afterwards, scipy then imported by numba's real check. Where numba loaded its
    registries before ddg, nothing is hooked and numba imports scipy.linalg as it always did."""
    pytest.importorskip("scipy")
    res = subprocess.run([sys.executable, "-c", _BLAS_PROBE, order], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    loaded, have_blas, after = res.stdout.split()
    assert (loaded, have_blas, after) == ("0" if order == "ddg-first" else "1", "1", "1")
