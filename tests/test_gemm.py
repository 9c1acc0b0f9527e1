"""The compiled float32 products of Linear and matmul (ddg/tensor/gemm_kernels.py) and the
rule that picks them (ddg/tensor/gemm.py): every operand form against float64 numpy at
odd and empty shapes, with and without packing and blocking; the dispatch (one BLAS
thread only, float32 numpy 2-D operands that need no copy, large enough products);
Linear and matmul forward, backward and second order with the kernel forced on small
shapes, against float64; AMP dtypes and cupy untouched."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ddg
from ddg.tensor import backend, gemm

gk = pytest.importorskip("ddg.tensor.gemm_kernels")

SHAPES = [(1, 1, 1), (0, 5, 3), (4, 0, 3), (3, 5, 0), (13, 17, 19), (8, 16, 16), (37, 65, 33), (9, 40, 70),
          (9, 1024, 40)]     # rows of 4 KB: a transposed B packed 8 rows at a time


def _ref(a, b, bias=None):
    out = a.astype(np.float64) @ b.astype(np.float64)
    return out if bias is None else out + bias.astype(np.float64)


def _close(got, want, k):
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * max(k, 1))


@pytest.mark.parametrize("M,K,N", SHAPES)
def test_kernel_forms_against_float64(M, K, N):
    rng = np.random.default_rng(M * 100 + K * 10 + N)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal((1, N)).astype(np.float32)
    C = rng.standard_normal((M, N)).astype(np.float32)
    want, want_b = _ref(A, B), _ref(A, B, bias)
    for a_t in (False, True):
        a = np.ascontiguousarray(A.T) if a_t else A
        for b_t in (False, True):
            b = np.ascontiguousarray(B.T) if b_t else B
            for pack_a, pack_b in ((False, False), (False, True), (True, False), (True, True)):
                for kc, mc, qb in ((512, 256, 1 << 20), (16, 8, 2), (512, 8, 1)):   # one pass, or blocks with tails
                    out = np.full((M, N), np.nan, np.float32)
                    gk.gemm(a, a_t, b, b_t, out, out, 0, pack_a, pack_b, kc, mc, qb, gemm._NONE)
                    _close(out, want, K)
                    out = C.copy()                                 # added into
                    gk.gemm(a, a_t, b, b_t, out, out, 1, pack_a, pack_b, kc, mc, qb, gemm._NONE)
                    _close(out, want + C, K)
                    out = np.full((M, N), np.nan, np.float32)
                    sums = np.full(N, np.nan, np.float32)     # B's column sums on the way
                    gk.gemm(a, a_t, b, b_t, out, bias, 2, pack_a, pack_b, kc, mc, qb, sums)
                    _close(out, want_b, K)
                    _close(sums, B.astype(np.float64).sum(axis=0), K)


@pytest.mark.parametrize("M,K,N", [(8, 5, 3), (16, 40, 37), (24, 300, 16), (64, 17, 40), (40, 1, 70)])
def test_transposed_a_read_in_place_from_any_alignment(M, K, N):
    """A = a.T read in place from an ``a`` whose rows start 0-7 floats past a 32-byte
    boundary (numpy's large arrays start 16 bytes into a line, numba's on 32 bytes): the
    same bits at every offset, float64's values, with one pass or blocks, set, added into
    or from a bias."""
    rng = np.random.default_rng(M + K + N)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = rng.standard_normal((M, N)).astype(np.float32)
    bias = rng.standard_normal((1, N)).astype(np.float32)
    raw = np.empty(K * M + 64, np.float32)
    base = (-raw.ctypes.data // 4) % 16               # raw[base] starts a 64-byte line
    for kc, qb in ((512, 1 << 20), (16, 2)):
        got = []
        for off in range(8):
            a = raw[base + off:base + off + K * M].reshape(K, M)
            a[...] = A.T
            assert (a.ctypes.data // 4) % 8 == off
            outs = [np.full((M, N), np.nan, np.float32), C.copy(), np.full((M, N), np.nan, np.float32)]
            for init, out in enumerate(outs):
                gk.gemm(a, True, B, False, out, bias if init == 2 else out, init, False, True, kc, 8, qb, gemm._NONE)
            got.append(outs)
        for outs in got[1:]:
            for o, o0 in zip(outs, got[0]):
                np.testing.assert_array_equal(o, o0)
        _close(got[0][0], _ref(A, B), K)
        _close(got[0][1], _ref(A, B) + C, K)
        _close(got[0][2], _ref(A, B, bias), K)


def test_aligned_empty_starts_on_a_line():
    for n in (0, 1, 15, 16, 1000, 123457):
        a = gk.aligned_empty(n)
        assert a.shape == (n,) and a.dtype == np.float32 and a.ctypes.data % 64 == 0


@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (13, 20, 37), (16, 128, 64), (9, 700, 100), (24, 33, 16)])
def test_window_products_against_float64(M, K, N):
    """``gemm_rows``: row k of B read from any offset ``tab[k]`` of a flat array, A's columns
    from ``k_first`` on, the output columns ``col0:col0+N`` written, set, added into or
    started from a bias (the rest of ``out`` untouched), blocked in k and in column blocks;
    B given 2-D or flat."""
    rng = np.random.default_rng(M * 7 + K + N)
    a = rng.standard_normal((M, K + 5)).astype(np.float32)
    b = rng.standard_normal((40, 3 * N + 7)).astype(np.float32)
    flat = b.reshape(-1)
    for k_first, col0 in ((0, 0), (5, 3), (2, 17)):
        tab = rng.integers(0, flat.size - N + 1, K + k_first).astype(np.int64)
        B = np.stack([flat[t:t + N] for t in tab[k_first:]])
        want = a[:, k_first:k_first + K].astype(np.float64) @ B
        bias = rng.standard_normal((1, col0 + N)).astype(np.float32)
        for init, kc, qb in ((0, 512, 8), (1, 7, 2), (2, 64, 1)):
            out = rng.standard_normal((M, col0 + N + 4)).astype(np.float32)
            before = out.copy()
            gk.gemm_rows(a, b if init else flat, tab, out, col0, N, bias if init == 2 else out, init, k_first, kc, qb)
            base = {0: 0, 1: before[:, col0:col0 + N], 2: bias[:, col0:]}[init]
            _close(out[:, col0:col0 + N], want + base, K)
            np.testing.assert_array_equal(out[:, :col0], before[:, :col0])
            np.testing.assert_array_equal(out[:, col0 + N:], before[:, col0 + N:])


@pytest.fixture
def forced(monkeypatch):
    """The kernel taken at any size (one BLAS thread reported), its calls counted."""
    calls = []
    real = gk.gemm

    def counting(*args):
        calls.append(args[0].shape)
        return real(*args)

    monkeypatch.setattr(gk, "gemm", counting)
    monkeypatch.setattr(gemm, "blas_threads", lambda: 1)
    monkeypatch.setattr(gemm, "MIN_DIM", 1)
    monkeypatch.setattr(gemm, "MIN_MACS", 0)
    return calls


def test_product_operand_forms(forced):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((21, 34)).astype(np.float32)
    B = rng.standard_normal((34, 19)).astype(np.float32)
    bias = rng.standard_normal(19).astype(np.float32)
    want = _ref(A, B)
    At, Bt = np.ascontiguousarray(A.T), np.ascontiguousarray(B.T)
    for a in (A, At.T):           # C-contiguous, or the transpose of one (read in place)
        for b in (B, Bt.T):
            _close(gemm.product(a, b), want, 34)
            _close(gemm.product(a, b, bias), _ref(A, B, bias), 34)
    assert len(forced) == 8
    # a strided view (would need a copy), float64, 1-D, read-only: numpy's product
    wide = np.zeros((21, 68), np.float32)
    wide[:, ::2] = A
    ro = A.copy()
    ro.flags.writeable = False
    forced.clear()
    _close(gemm.product(wide[:, ::2], B), want, 34)
    got64 = gemm.product(A.astype(np.float64), B.astype(np.float64))
    assert got64.dtype == np.float64
    np.testing.assert_allclose(got64, want, rtol=1e-12)
    _close(gemm.product(ro, B), want, 34)
    assert forced == []


def test_dispatch_rules(monkeypatch):
    calls = []
    real = gk.gemm
    monkeypatch.setattr(gk, "gemm", lambda *a: (calls.append(1), real(*a))[1])
    rng = np.random.default_rng(1)
    A = rng.standard_normal((96, 96)).astype(np.float32)
    B = rng.standard_normal((96, 96)).astype(np.float32)
    assert 96 ** 3 >= gemm.MIN_MACS
    want = _ref(A, B)
    for threads, taken in ((1, True), (2, False), (16, False), (None, False)):
        monkeypatch.setattr(gemm, "blas_threads", lambda t=threads: t)
        calls.clear()
        _close(gemm.product(A, B), want, 96)
        assert bool(calls) == taken, threads
    monkeypatch.setattr(gemm, "blas_threads", lambda: 1)
    calls.clear()
    gemm.product(A[:8, :8], B[:8, :8])                    # too small: numpy
    gemm.product(A[:, :8].copy(), B[:8])                  # K under MIN_DIM
    gemm.product(np.ones((96, 96), np.float32), np.ones((96, gemm.MAX_N + 16), np.float32))  # N past MAX_N
    gemm.product(np.ones((96, gemm.MAX_T + 8), np.float32).T, np.ones((96, 32), np.float32))  # x^T with M past MAX_T
    gemm.product(np.ones((16, gemm.T_WIDE_MAX + 8), np.float32).T, np.ones((16, gemm.T_WIDE_MIN), np.float32))
    assert not calls
    # ... unless both sides are wide and neither past T_WIDE_MAX
    _close(gemm.product(np.ones((16, gemm.MAX_T + 8), np.float32).T, np.ones((16, gemm.T_WIDE_MIN), np.float32)),
           np.full((gemm.MAX_T + 8, gemm.T_WIDE_MIN), 16.0), 16)
    assert len(calls) == 1
    calls.clear()
    a32 = np.ones((32, 512), np.float32)
    _close(gemm.product(a32, np.ones((512, 512), np.float32)), np.full((32, 512), 512.0), 512)   # the kernel
    _close(gemm.product(a32, np.ones((512, 512), np.float32).T), np.full((32, 512), 512.0), 512)
    assert len(calls) == 2
    _close(gemm.product(a32, np.ones((512, 1024), np.float32)), np.full((32, 1024), 512.0), 512)
    assert len(calls) == 2       # few rows times a large B: numpy
    _close(gemm.product(a32, np.ones((1024, 512), np.float32).T), np.full((32, 1024), 512.0), 512)
    assert len(calls) == 3       # ... unless B is transposed: the kernel, on the transposed product
    _close(gemm.product(np.ones((512, 32), np.float32).T, np.ones((512, 1024), np.float32)),
           np.full((32, 1024), 512.0), 512)
    assert len(calls) == 4       # ... and x^T of a weight gradient takes the kernel
    monkeypatch.setattr(gemm, "ENABLED", False)
    gemm.product(A, B)
    assert len(calls) == 4


def test_weight_gradient_packs_wide_transposed_a(monkeypatch):
    """x^T @ g with at least PACK_AT_MIN rows and columns, or rows of x a multiple of 4 KB and
    at least PACK_AT_4K_N columns, copies x^T to panels (rows past the last 8 read in place);
    other outputs read it in place. Both against float64."""
    flags = []
    real = gk.gemm
    monkeypatch.setattr(gk, "gemm", lambda *a: (flags.append(a[7]), real(*a))[1])
    monkeypatch.setattr(gemm, "blas_threads", lambda: 1)
    rng = np.random.default_rng(7)
    for M, N, packed in ((gemm.PACK_AT_MIN + 3, gemm.PACK_AT_MIN + 16, True), (gemm.PACK_AT_MIN + 3, 40, False),
                         (gemm.PACK_AT_MIN - 8, gemm.PACK_AT_MIN, False),
                         (1024, gemm.PACK_AT_4K_N, True), (1024, gemm.PACK_AT_4K_N - 16, False),   # rows of 4 KB
                         (1040, gemm.PACK_AT_4K_N, False)):
        x = rng.standard_normal((24, M)).astype(np.float32)
        g = rng.standard_normal((24, N)).astype(np.float32)
        flags.clear()
        gw, gb = gemm.weight_grads(x, g)
        assert flags == [packed], (M, N)
        _close(gw, _ref(x.T, g), 24)
        _close(gb, g.astype(np.float64).sum(axis=0), 24)


@pytest.mark.parametrize("M,K,N", [(16, 64, 64), (17, 300, 301), (33, 1024, 40), (100, 257, 515), (9, 16, 200),
                                   (40, 96, 96), (64, 512, 512), (200, 512, 512)])
def test_transposed_output_products(forced, M, K, N):
    """``A @ W^T`` (W C-contiguous) runs as ``(W @ A^T)^T`` where W has at least
    TRANS_OUT_RATIO times the elements of A and the output together, else on W^T's panels;
    either way the values of float64's product, a new C-contiguous array. A Linear layer's
    input gradient takes the same route."""
    rng = np.random.default_rng(M + K + N)
    A = rng.standard_normal((M, K)).astype(np.float32)
    W = rng.standard_normal((N, K)).astype(np.float32)
    flipped = K * N >= gemm.TRANS_OUT_RATIO * M * (K + N)
    got = gemm.product(A, W.T)
    _close(got, _ref(A, W.T), K)
    assert got.flags.c_contiguous and not np.may_share_memory(got, A)
    assert forced == [(N, K) if flipped else (M, K)]     # the kernel's left operand: W in place, or A
    forced.clear()
    x = ddg.to_tensor(A, stop_gradient=False)
    w = ddg.to_tensor(np.ascontiguousarray(W.T), stop_gradient=False)
    g = rng.standard_normal((M, N)).astype(np.float32)
    (ddg.matmul(x, w) * ddg.to_tensor(g)).sum().backward()
    _close(x.grad.numpy(), _ref(g, W), N)
    _close(w.grad.numpy(), _ref(A.T, g), M)


@pytest.mark.parametrize("shape", [(1, 1), (8, 8), (13, 37), (64, 18), (40, 1025), (9, 16)])
def test_transposed_copies_every_layout(shape):
    """``gemm.transposed`` is exactly ``a.T``: float32 with contiguous rows (C-contiguous, a
    column slice, rows reversed: the 8x8 shuffle blocks), float32 strided along the row
    and float64 (the element-wise kernel)."""
    rng = np.random.default_rng(shape[0] * 7 + shape[1])
    m, n = shape
    wide = rng.standard_normal((m, n + 5)).astype(np.float32)
    every_other = wide[:, :2 * (n // 2):2] if n > 1 else wide[:, :1]
    for a in (wide[:, :n].copy(), wide[:, 3:3 + n], wide[::-1, 2:2 + n], every_other, wide[:, :n].astype(np.float64)):
        got = gemm.transposed(a)
        assert got.flags.c_contiguous and got.dtype == a.dtype
        np.testing.assert_array_equal(got, a.T)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 16, 17, 16), (2, 3, 64, 43), (5, 4096), (3, 7, 11, 13, 9), (129, 128)])
def test_relayout_between_c_order_and_batch_innermost(shape, dt):
    """``gemm.relayout_into`` copies an array between C order and the storage with axis 0
    innermost, both ways, exactly (every rank 2-5, both float dtypes, row counts off the
    transpose's 8-row blocks); ``c_contiguous`` gives the C-ordered copy of either."""
    rng = np.random.default_rng(sum(shape))
    a = rng.standard_normal(shape).astype(dt)
    last = tuple(range(1, a.ndim)) + (0,)
    first = (a.ndim - 1,) + tuple(range(a.ndim - 1))
    inner = np.empty(a.shape[1:] + a.shape[:1], dt).transpose(first)     # axis 0 stored last
    assert a.size >= gemm.RELAYOUT_MIN and inner.transpose(last).flags.c_contiguous
    assert gemm.relayout_into(inner, a)
    np.testing.assert_array_equal(inner, a)
    back = np.empty(shape, dt)
    assert gemm.relayout_into(back, inner)
    np.testing.assert_array_equal(back, a)
    got = gemm.c_contiguous(inner)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, a)
    assert gemm.c_contiguous(a) is a


def test_relayout_declines_and_leaves_the_target():
    """What ``relayout_into`` does not copy (False, target untouched): small arrays, other
    dtypes or shapes, one row, layouts other than the two, non-numpy arrays;
    ``c_contiguous`` then still copies by numpy."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 8, 16, 16)).astype(np.float32)

    def inner(x):
        return np.empty(x.shape[1:] + x.shape[:1], x.dtype).transpose(3, 0, 1, 2)
    small = a[:, :1, :4, :4].copy()
    cases = [(inner(small), small),                                         # under RELAYOUT_MIN
             (inner(a).astype(np.float64), a),                              # dtypes differ
             (inner(a.astype(np.int32)), a.astype(np.int32)),                # not a float array
             (inner(a)[:, :, :, :8], a[:, :, :, :8].copy()),                 # target neither layout
             (np.empty_like(a), a),                                          # both C order
             (np.empty((8, 16, 16, 16), np.float32), a),                     # shapes differ
             (np.empty((1, 2 ** 15), np.float32), rng.standard_normal((1, 2 ** 15)).astype(np.float32)),
             (np.empty_like(a).transpose(0, 2, 3, 1).transpose(0, 3, 1, 2), a)]   # channels-last
    for dst, src in cases:
        before = dst.copy()
        assert not gemm.relayout_into(dst, src)
        np.testing.assert_array_equal(dst, before)
    assert not gemm.relayout_into([[1.0]], a) and not gemm.relayout_into(inner(a), a.tolist())
    strided = a.transpose(0, 2, 3, 1)
    got = gemm.c_contiguous(strided)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, strided)


def test_blas_thread_query(monkeypatch):
    n = gemm.blas_threads()
    assert n is None or n >= 1
    monkeypatch.setattr(gemm, "_query", [lambda: 3])
    assert gemm.blas_threads() == 3
    monkeypatch.setattr(gemm, "_query", [None])           # no BLAS library found: the environment
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(gemm.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert gemm.blas_threads() is None
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert gemm.blas_threads() == 1


def test_suite_pins_one_blas_thread():
    """conftest sets numpy's BLAS to one thread whatever the environment said (the fused ops'
    choice, checked by their tests, depends on it); ``set_blas_threads`` changes what the
    library runs, as its own query reads it back, in a process started with 2 threads."""
    assert gemm.blas_threads() in (None, 1)
    code = ("import numpy as np; from ddg.tensor import gemm; np.ones((4, 4)) @ np.ones((4, 4)); "
            "before = gemm.blas_threads(); found = gemm.set_blas_threads(1); print(before, found, gemm.blas_threads())")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    before, found, after = out.stdout.split()
    if found == "True":     # a BLAS that takes the setting: OpenBLAS (numpy's wheels) or MKL
        assert after == "1" and before in ("1", "2"), out.stdout
    else:
        assert after == before, out.stdout


def _linear_graph(x, w, b, g):
    """Forward, first and second order of Linear (and matmul of the same operands)."""
    X = ddg.to_tensor(x, stop_gradient=False)
    W = ddg.to_tensor(w, stop_gradient=False)
    Bv = ddg.to_tensor(b, stop_gradient=False)
    G = ddg.to_tensor(g)
    y = ddg.nn.functional.linear(X, W, Bv)
    gx, gw, gb = ddg.grad((y * G).sum(), [X, W, Bv], create_graph=True)
    second = ddg.grad((gx * gx).sum() + (gw * gw).sum(), [W, X])
    z = ddg.matmul(X.reshape([-1, x.shape[-1]]), W, transpose_y=False)
    zx, zw = ddg.grad((z * G.reshape([-1, g.shape[-1]])).sum(), [X, W])
    zt = ddg.matmul(W, X.reshape([-1, x.shape[-1]]), transpose_x=True, transpose_y=True)
    (ztw,) = ddg.grad((zt * G.reshape([-1, g.shape[-1]]).T).sum(), [W])
    return [t.numpy() for t in (y, gx, gw, gb, second[0], second[1], z, zx, zw, ztw)]


def test_linear_and_matmul_against_float64(forced):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 7, 19)).astype(np.float32)
    w = rng.standard_normal((19, 23)).astype(np.float32)
    b = rng.standard_normal(23).astype(np.float32)
    g = rng.standard_normal((3, 7, 23)).astype(np.float32)
    got = _linear_graph(x, w, b, g)
    assert len(forced) >= 8               # forward, both gradients, the second order's products
    n = len(forced)
    want = _linear_graph(*(v.astype(np.float64) for v in (x, w, b, g)))
    assert len(forced) == n               # float64: numpy's products
    for a, e in zip(got, want):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("tx,ty", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_transposed_forms(forced, tx, ty):
    """2-D matmul with either operand transposed, and a batch folded into rows by one
    matrix: values and both gradients against float64 (every product form runs the kernel)."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal((21, 18) if tx else (18, 21)).astype(np.float32)
    b = rng.standard_normal((25, 21) if ty else (21, 25)).astype(np.float32)
    g = rng.standard_normal((18, 25)).astype(np.float32)
    res = []
    for dt in (np.float32, np.float64):
        A, B = ddg.to_tensor(a.astype(dt), stop_gradient=False), ddg.to_tensor(b.astype(dt), stop_gradient=False)
        y = ddg.matmul(A, B, transpose_x=tx, transpose_y=ty)
        (y * ddg.to_tensor(g.astype(dt))).sum().backward()
        res.append([y.numpy(), A.grad.numpy(), B.grad.numpy()])
    assert len(forced) == 3
    for got, want in zip(*res):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    if not tx:                  # [3, 6, 21] batch times one matrix: folded into [18, 21] rows
        forced.clear()
        A3 = ddg.to_tensor(a.reshape(3, 6, 21), stop_gradient=False)
        B = ddg.to_tensor(b, stop_gradient=False)
        y = ddg.matmul(A3, B, transpose_y=ty)
        (y * ddg.to_tensor(g.reshape(3, 6, 25))).sum().backward()
        assert len(forced) == 3
        bb = (b.T if ty else b).astype(np.float64)
        np.testing.assert_allclose(y.numpy().reshape(18, 25), a @ bb, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(A3.grad.numpy().reshape(18, 21), g @ bb.T, rtol=2e-5, atol=2e-5)
        gb = a.T.astype(np.float64) @ g
        np.testing.assert_allclose(B.grad.numpy(), gb.T if ty else gb, rtol=2e-5, atol=2e-5)


def test_linear_gradient_central_differences(forced):
    """The loss sum(G * linear(x, W, b)) is linear in each input, so a central difference
    with a large step is exact up to float32 rounding."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 17)).astype(np.float32)
    w = rng.standard_normal((17, 9)).astype(np.float32)
    b = rng.standard_normal(9).astype(np.float32)
    g = rng.standard_normal((5, 9)).astype(np.float32)
    X, W, Bv = (ddg.to_tensor(v, stop_gradient=False) for v in (x, w, b))
    (ddg.nn.functional.linear(X, W, Bv) * ddg.to_tensor(g)).sum().backward()
    loss = lambda x_, w_, b_: float((ddg.nn.functional.linear(*map(ddg.to_tensor, (x_, w_, b_))).numpy()  # noqa: E731
                                     .astype(np.float64) * g).sum())
    for k, (arr, grad) in enumerate(((x, X.grad), (w, W.grad), (b, Bv.grad))):
        for idx in [(0,) * arr.ndim, tuple(s - 1 for s in arr.shape), tuple(s // 2 for s in arr.shape)]:
            args = [x, w, b]
            hi, lo = arr.copy(), arr.copy()
            hi[idx] += 0.5
            lo[idx] -= 0.5
            args[k] = hi
            up = loss(*args)
            args[k] = lo
            np.testing.assert_allclose(up - loss(*args), grad.numpy()[idx], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_few_row_products(dt, monkeypatch):
    """numpy's slow product forms taken another way: one inner index (an outer product,
    the same values as the product) and few rows times a transposed matrix of at least
    FEW_ROWS_MIN_B elements (through the transposes, C order; here any size); against
    float64, and Linear's gradients at batch 1 and 3 by central differences (float64)."""
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((7, 1)).astype(dt), rng.standard_normal((1, 9)).astype(dt)
    got = gemm.few_rows_product(a, b)
    assert got.dtype == dt and got.flags.c_contiguous
    np.testing.assert_array_equal(got, (a.astype(np.float64) * b.astype(np.float64)).astype(dt))   # rounded once
    a = rng.standard_normal((3, 40)).astype(dt)
    w = rng.standard_normal((25, 40)).astype(dt)
    bias = rng.standard_normal(25).astype(dt)
    assert gemm.few_rows_product(a, w.T) is None              # under FEW_ROWS_MIN_B: numpy's own
    monkeypatch.setattr(gemm, "FEW_ROWS_MIN_B", w.size)
    assert gemm.few_rows_product(a, w.T) is not None and gemm.few_rows_product(a, w) is None
    assert gemm.few_rows_product(rng.standard_normal((gemm.FEW_ROWS, 40)).astype(dt), w.T) is None
    got = gemm.product(a, w.T, bias)
    assert got.dtype == dt and got.flags.c_contiguous
    np.testing.assert_allclose(got, _ref(a, w.T, bias), rtol=1e-5 if dt == np.float32 else 1e-12, atol=1e-5)
    for n in (1, 3):
        x, w, b = (ddg.to_tensor(rng.standard_normal(s), stop_gradient=False) for s in ((n, 6), (6, 5), (5,)))
        assert ddg.autograd.gradcheck(lambda *t: ddg.nn.functional.linear(*t), [x, w, b])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_amp_dtypes_unchanged(forced, dtype, monkeypatch):
    rng = np.random.default_rng(4)
    x = ddg.to_tensor(rng.standard_normal((6, 20)).astype(np.float32)).astype(dtype)
    w = ddg.to_tensor(rng.standard_normal((20, 12)).astype(np.float32)).astype(dtype)
    got = ddg.nn.functional.linear(x, w)
    assert forced                          # upcast to float32, then the kernel
    monkeypatch.setattr(gemm, "ENABLED", False)
    want = ddg.nn.functional.linear(x, w)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.astype("float32").numpy(), want.astype("float32").numpy(), rtol=1e-2, atol=1e-2)


@pytest.mark.skipif(not backend.cupy_available(), reason="needs cupy (a GPU, or simcupy)")
def test_linear_on_gpu_keeps_cupy_products(monkeypatch):
    monkeypatch.setattr(gemm, "blas_threads", lambda: 1)
    monkeypatch.setattr(gk, "gemm", lambda *a: pytest.fail("the CPU kernel ran on device arrays"))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    X = ddg.to_tensor(x, place="gpu", stop_gradient=False)
    W = ddg.to_tensor(w, place="gpu", stop_gradient=False)
    y = ddg.nn.functional.linear(X, W)
    y.sum().backward()
    np.testing.assert_allclose(y.numpy(), _ref(x, w), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(W.grad.numpy(), x.T.astype(np.float64) @ np.ones((64, 64)), rtol=1e-4, atol=1e-4)


@pytest.fixture
def stacked(forced, monkeypatch):
    """``forced``, with the stacked kernel's calls counted (their stack sizes)."""
    calls = []
    real = gk.gemm_stack

    def counting(*args):
        calls.append(args[0].shape[0])
        return real(*args)

    monkeypatch.setattr(gk, "gemm_stack", counting)
    return calls


@pytest.mark.parametrize("lead", [(5,), (2, 3)])
def test_stack_product_forms_against_float64(stacked, monkeypatch, lead):
    """Stacks of products (attention's batches and heads) in one kernel call: every operand
    form (C-contiguous or the last-two-axes transpose of one), odd sizes, against float64;
    strided, float64, mismatched or small stacks left to numpy (None)."""
    monkeypatch.setattr(gemm, "STACK_MIN_M", 8)
    monkeypatch.setattr(gemm, "STACK_MIN_N", 8)
    rng = np.random.default_rng(len(lead))
    M, K, N = 37, 19, 41
    a = rng.standard_normal(lead + (M, K)).astype(np.float32)
    b = rng.standard_normal(lead + (K, N)).astype(np.float32)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    for x in (a, np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)):
        for y in (b, np.swapaxes(np.ascontiguousarray(np.swapaxes(b, -1, -2)), -1, -2)):
            got = gemm.stack_product(x, y)
            assert got.flags.c_contiguous
            _close(got, want, K)
    assert stacked == [int(np.prod(lead))] * 4
    wide = np.zeros(lead + (M, 2 * K), np.float32)
    wide[..., ::2] = a
    assert gemm.stack_product(wide[..., ::2], b) is None                  # strided: would need a copy
    assert gemm.stack_product(a.astype(np.float64), b.astype(np.float64)) is None
    assert gemm.stack_product(a[:1], b) is None                           # batches differ
    assert gemm.stack_product(a[..., :7, :], b) is None                   # fewer than STACK_MIN_M rows
    assert gemm.stack_product(a, b[..., :7]) is None                      # fewer than STACK_MIN_N columns
    monkeypatch.setattr(gemm, "blas_threads", lambda: 2)
    assert gemm.stack_product(a, b) is None


@pytest.mark.parametrize("kind", ["mha", "mask", "bshd", "weights"])
def test_attention_on_the_stacked_kernel(stacked, monkeypatch, kind):
    """Attention forward, every input gradient and the mask's with its products on the
    stacked kernel (heads copied out of the projections) equal numpy's matmul path, and the
    kernel really ran (the fused attention kernel, which would take these shapes, off)."""
    from ddg.autograd.ops.nn_ops import Attention
    monkeypatch.setattr(Attention, "FUSED_MAX_L", 0)
    monkeypatch.setattr(gemm, "STACK_MIN_M", 8)
    monkeypatch.setattr(gemm, "STACK_MIN_N", 8)
    rng = np.random.default_rng(3)
    B, L, H, d = 2, 21, 3, 16
    arrays = [rng.standard_normal((B, L, H * d)).astype(np.float32) for _ in range(3)]
    mask = rng.standard_normal((B, H, L, L)).astype(np.float32)
    gout = rng.standard_normal((B, L, H * d)).astype(np.float32)

    def run():
        q, k, v = (ddg.to_tensor(a, stop_gradient=False) for a in arrays)
        m = ddg.to_tensor(mask, stop_gradient=False)
        extra = []
        if kind == "bshd":
            q4, k4, v4 = (t.reshape([B, L, H, d]) for t in (q, k, v))
            out = ddg.nn.functional.scaled_dot_product_attention(q4, k4, v4).reshape([B, L, H * d])
        else:
            mha = ddg.nn.MultiHeadAttention(H * d, H, need_weights=kind == "weights")
            for p, w in zip(mha.parameters(), np.random.default_rng(9).standard_normal((8, H * d, H * d))):
                p.set_value(w[:p.shape[0]].reshape(p.shape).astype(np.float32) * 0.2 if p.ndim == 2 else
                            w[0, :p.shape[0]].astype(np.float32) * 0.1)
            res = mha(q, k, v, attn_mask=m if kind == "mask" else None)
            out, extra = (res[0], [res[1]]) if kind == "weights" else (res, [])
        loss = (out * ddg.to_tensor(gout)).sum() + sum((w * w).sum() for w in extra)
        ins = [q, k, v] + ([m] if kind == "mask" else [])
        return [out.numpy()] + [g.numpy() for g in ddg.grad(loss, ins)]

    got = run()
    assert len(stacked) == 6      # forward q k^T and p v; backward p^T g, g v^T, ds k, ds^T q
    monkeypatch.setattr(gemm, "STACK_MIN_M", 10 ** 9)
    stacked.clear()
    want = run()
    assert stacked == []
    for a, e in zip(got, want):
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=2e-5)


def test_avx2_row_groups_in_a_subprocess():
    """The register tiles as a CPU without AVX-512 compiles them (``gemm_kernels._row_groups``:
    an 8 x 16 tile's rows in two groups, ``_ctile``'s vectors and columns, ``_ptile``'s block and
    extra columns each in loops of their own, whole tiles without masks), on any x86 CPU with
    AVX2, against float64 (tests/avx2_tiles_check.py); the suite's other tests run the host's
    own form."""
    import os
    import platform
    import subprocess
    import sys
    umath = getattr(np, "_core", None) or np.core      # numpy 2, numpy 1
    if platform.machine() not in ("x86_64", "AMD64") or not umath._multiarray_umath.__cpu_features__.get("AVX2"):
        pytest.skip("needs an x86 CPU with AVX2")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, DDG_VECTOR_BITS="256", NUMBA_CPU_NAME="haswell")
    env.pop("NUMBA_CPU_FEATURES", None)
    r = subprocess.run([sys.executable, os.path.join(here, "avx2_tiles_check.py")], env=env, capture_output=True,
                       text=True, timeout=300, cwd=os.path.dirname(here))
    assert r.returncode == 0 and r.stdout.split() == ["ok", "256"], r.stdout + r.stderr


def test_row_groups_fit_the_registers(monkeypatch):
    """Every row once, in order, in groups of about equal size whose accumulators fit beside
    one row's right-hand vectors and a broadcast: 16 registers of 256 bits, 32 of 512."""
    for bits, vregs in ((256, 16), (512, 32)):
        monkeypatch.setattr(gk, "VECTOR_BITS", bits)
        monkeypatch.setattr(gk, "_VREGS", vregs)
        for rows in (1, 3, 8, 16):
            for widths in ((16,), (8,), (8, 8, 8), (16, 8)):
                groups = gk._row_groups(rows, widths)
                per_row = sum(-(-w * 32 // bits) for w in widths)
                assert [r for g in groups for r in g] == list(range(rows))
                assert max(len(g) for g in groups) - min(len(g) for g in groups) <= 1
                assert all(len(g) * per_row + per_row + 2 <= vregs or len(g) == 1 for g in groups)
    monkeypatch.setattr(gk, "VECTOR_BITS", 256)
    monkeypatch.setattr(gk, "_VREGS", 16)
    assert [list(g) for g in gk._row_groups(8, (16,))] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    monkeypatch.setattr(gk, "VECTOR_BITS", 512)
    monkeypatch.setattr(gk, "_VREGS", 32)
    assert [list(g) for g in gk._row_groups(8, (16,))] == [list(range(8))]


def test_kernel_default_follows_avx512_and_the_environment():
    """``gemm.ENABLED`` defaults to whether the CPU has AVX-512F (numpy's own dispatch says);
    ``DDG_CPU_GEMM=1`` / ``0`` sets it either way (a fresh process each: it is read at import),
    and ``0`` alone switches off the fused ops' tiles (``gemm.FUSED``)."""
    import os
    import subprocess
    import sys
    umath = getattr(np, "_core", None) or np.core
    host = bool(umath._multiarray_umath.__cpu_features__.get("AVX512F"))
    assert gemm._host_avx512() is host
    for value, want, fused in (("1", True, True), ("0", False, False), ("", host, True)):
        env = dict(os.environ, DDG_CPU_GEMM=value)
        r = subprocess.run([sys.executable, "-c", "from ddg.tensor import gemm; print(gemm.ENABLED, gemm.FUSED)"],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.split() == [str(want), str(fused)], (value, r.stdout, r.stderr)
