"""``gemm.blas_add_product``: ``C += A @ B`` by numpy's own BLAS with beta = 1, the route by
which a Linear's (and a recurrent layer's) weight gradient is added into the weight's
``.grad`` where the compiled kernel does not take the product (every CPU without AVX-512).
Every operand layout and both float dtypes against float64 numpy, what it declines (C left
untouched), a library that fails the first-use check, and the Linear's gradients through it."""
import numpy as np
import pytest

import ddg
from ddg.tensor import gemm

if gemm._gemm64(np.float32) is None:     # MKL or another BLAS: the route is declined, tested below
    pytestmark = pytest.mark.skipif(True, reason="numpy's BLAS has no 64-bit-integer cblas_sgemm")


def _layout(rng, rows, cols, form, dt):
    """A ``[rows, cols]`` operand: C-contiguous, the transpose of a C-contiguous array, or
    columns sliced out of a wider C-contiguous matrix (rows of unit stride, a longer lead)."""
    if form == "c":
        return rng.standard_normal((rows, cols)).astype(dt)
    if form == "t":
        return rng.standard_normal((cols, rows)).astype(dt).T
    return rng.standard_normal((rows, cols + 7)).astype(dt)[:, 3:3 + cols]


FORMS = [(fa, fb) for fa in ("c", "t", "s") for fb in ("c", "t", "s")]


@pytest.fixture
def any_size(monkeypatch):
    """The size rule off: every output taken (the rule itself is tested on its own)."""
    monkeypatch.setattr(gemm, "ADD_MIN_OUT", 0)
    monkeypatch.setattr(gemm, "ADD_MIN_SIDE", 1)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (1, 9, 5), (6, 1, 4), (5, 8, 1), (13, 17, 19), (64, 160, 96),
                                   (40, 700, 33)])
def test_adds_the_product_for_every_layout(any_size, dt, M, K, N):
    """Into zeros: numpy's product (bit for bit where numpy makes the same gemm call, every
    side longer than 1); into a full C: C + A @ B against float64, the operands unchanged."""
    rng = np.random.default_rng(M * 100 + K + N)
    tol = 1e-5 if dt == np.float32 else 1e-12
    for fa, fb in FORMS:
        A, B = _layout(rng, M, K, fa, dt), _layout(rng, K, N, fb, dt)
        A0, B0 = A.copy(), B.copy()
        want = A.astype(np.float64) @ B.astype(np.float64)
        C = np.zeros((M, N), dt)
        assert gemm.blas_add_product(A, B, C), (fa, fb)
        np.testing.assert_allclose(C, want, rtol=tol, atol=tol * K)
        if min(M, K, N) > 1:
            np.testing.assert_array_equal(C, A @ B)
        C0 = rng.standard_normal((M, N)).astype(dt)
        C = C0.copy()
        assert gemm.blas_add_product(A, B, C)
        np.testing.assert_allclose(C, C0.astype(np.float64) + want, rtol=tol, atol=tol * (K + 1))
        np.testing.assert_array_equal(A, A0)
        np.testing.assert_array_equal(B, B0)


def test_declines_what_it_cannot_add_and_leaves_c_alone(any_size):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((6, 5)).astype(np.float32)
    B = rng.standard_normal((5, 4)).astype(np.float32)
    wide = rng.standard_normal((6, 9)).astype(np.float32)
    readonly = np.zeros((6, 4), np.float32)
    readonly.flags.writeable = False
    cases = [
        (A.astype(np.float64), B, np.zeros((6, 4), np.float32)),          # dtypes differ
        (A.astype(np.float16), B.astype(np.float16), np.zeros((6, 4), np.float16)),
        (A.astype(np.int32), B.astype(np.int32), np.zeros((6, 4), np.int32)),
        (A, B, np.zeros((4, 6), np.float32).T),                           # C not C-contiguous
        (A, B, readonly),
        (A, B, np.zeros((6, 5), np.float32)),                             # C's shape
        (A, B[:4], np.zeros((6, 4), np.float32)),                         # inner sizes differ
        (A, B[:0], np.zeros((6, 4), np.float32)),
        (A[:, :0], B[:0], np.zeros((6, 4), np.float32)),                  # nothing to add
        (A[:, ::2], B[::2], np.zeros((6, 4), np.float32)),                # strided columns: a copy
        (A[None], B, np.zeros((1, 6, 4), np.float32)),
        (wide[:, :5], B, wide[:, 5:]),                                    # C overlaps A (and is strided)
        (list(A), B, np.zeros((6, 4), np.float32)),
    ]
    for a, b, c in cases:
        before = c.copy()
        assert not gemm.blas_add_product(a, b, c)
        np.testing.assert_array_equal(c, before)
    shared = np.zeros((6, 6), np.float32)
    assert not gemm.blas_add_product(shared[:, :5], np.ones((5, 6), np.float32), shared)   # C is A's memory


def test_a_library_that_fails_the_check_is_not_used(any_size, monkeypatch):
    """A ``cblas_sgemm`` whose integers are not 64-bit (or that computes anything else) fails
    the first-use check: every call then declines; without the symbol likewise."""
    calls = []

    class Fake:
        def __init__(self):
            self.argtypes, self.restype = None, None

        def __call__(self, *args):
            calls.append(args)      # adds nothing

    for found in (Fake(), None):
        monkeypatch.setattr(gemm, "_add_gemm", {})
        monkeypatch.setattr(gemm, "_blas_function", lambda names, found=found: found)
        C = np.zeros((3, 2), np.float32)
        assert not gemm.blas_add_product(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32), C)
        assert not C.any() and gemm._add_gemm[np.float32] is None
    assert len(calls) == 1      # the check's one call, then never again


def test_small_outputs_are_left_to_numpy():
    """Outputs under ADD_MIN_OUT elements or with a side under ADD_MIN_SIDE are declined (the
    call costs more than the pass it saves); from there on taken."""
    rng = np.random.default_rng(4)
    side = gemm.ADD_MIN_SIDE
    for (M, N), taken in (((256, 255), False), ((256, 256), True), ((1 << 16, side - 1), False),
                          ((side, gemm.ADD_MIN_OUT // side), True)):
        A = rng.standard_normal((M, 3)).astype(np.float32)
        B = rng.standard_normal((3, N)).astype(np.float32)
        C = np.zeros((M, N), np.float32)
        assert gemm.blas_add_product(A, B, C) == taken, (M, N)
        np.testing.assert_array_equal(C, A @ B if taken else 0)


def _spy(monkeypatch, name, taken):
    """Wrap ``gemm.<name>`` (the compiled kernel off, an AVX2 CPU's route) so that each call
    appends ``taken(result)`` to the list returned."""
    monkeypatch.setattr(gemm, "ENABLED", False)
    used = []
    real = getattr(gemm, name)

    def spy(*args):
        out = real(*args)
        used.append(taken(out))
        return out
    monkeypatch.setattr(gemm, name, spy)
    return used


def _linear(dt, n_in, n_out):
    """An ``nn.Linear`` with parameters of dtype ``dt``."""
    ddg.set_default_dtype("float64" if dt == np.float64 else "float32")
    try:
        return ddg.nn.Linear(n_in, n_out)
    finally:
        ddg.set_default_dtype("float32")


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_linear_weight_gradient_added_into_grad_by_blas(any_size, monkeypatch, dt):
    """Without the compiled kernel (no AVX-512), from the second backward on the Linear's
    weight gradient is added into the same ``.grad`` array by BLAS: after clear_grad bit for
    bit the first backward's, without it twice that; the bias and input gradients as before."""
    used = _spy(monkeypatch, "blas_add_product", bool)
    rng = np.random.default_rng(5)
    lin = _linear(dt, 33, 20)
    x = ddg.to_tensor(rng.standard_normal((3, 13, 33)).astype(dt), stop_gradient=False)
    g = rng.standard_normal((3, 13, 20)).astype(dt)
    want = x.numpy().reshape(-1, 33).astype(np.float64).T @ g.reshape(-1, 20)
    lin(x).backward(ddg.to_tensor(g))
    assert used == []                                   # no .grad yet: a new array
    first = [t.grad.numpy().copy() for t in (lin.weight, lin.bias, x)]
    tol = 1e-5 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(first[0], want, rtol=tol, atol=tol)
    arr = lin.weight.grad._data
    lin.clear_gradients()
    x.clear_grad()
    lin(x).backward(ddg.to_tensor(g))
    assert used == [True] and lin.weight.grad._data is arr and arr.dtype == dt
    for t, f in zip((lin.weight, lin.bias, x), first):
        np.testing.assert_array_equal(t.grad.numpy(), f)
    lin(x).backward(ddg.to_tensor(g))                   # no clear_grad: added to the first
    assert used == [True, True]
    for t, f in zip((lin.weight, lin.bias, x), first):
        np.testing.assert_allclose(t.grad.numpy(), 2 * f, rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (6, 1, 4), (13, 17, 19), (64, 160, 96), (40, 700, 33)])
def test_bias_product_for_every_layout(any_size, dt, M, K, N):
    """``bias_product``: ``A @ B + bias`` with the bias as BLAS's starting values, every
    operand layout, against float64; bit for bit numpy's ``A @ B + bias`` while the inner
    index fits one block (the sum and the bias rounded once either way)."""
    rng = np.random.default_rng(M * 1000 + K * 10 + N)
    bias = rng.standard_normal(N).astype(dt)
    tol = 1e-5 if dt == np.float32 else 1e-12
    for fa, fb in FORMS:
        A, B = _layout(rng, M, K, fa, dt), _layout(rng, K, N, fb, dt)
        got = gemm.bias_product(A, B, bias)
        assert got is not None and got.dtype == dt and got.shape == (M, N) and got.flags.c_contiguous, (fa, fb)
        want = A.astype(np.float64) @ B.astype(np.float64) + bias
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * K)
        if K <= 160:
            np.testing.assert_array_equal(got, A @ B + bias)


def test_bias_product_declines():
    """None (numpy's product and add then run) for a bias that is not one ``[N]`` vector of
    A's dtype, operands of mixed dtypes or not numpy's, and outputs under the size rule."""
    rng = np.random.default_rng(7)
    A = rng.standard_normal((300, 20)).astype(np.float32)
    B = rng.standard_normal((20, 300)).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    assert gemm.bias_product(A, B, b) is not None
    for args in ((A, B, b[None]), (A, B, b[:299]), (A, B, b.astype(np.float64)), (A.astype(np.float64), B, b),
                 (A, B.astype(np.float16), b), (A, list(B), b), (A[:, :0], B[:0], b), (A[:200], B, b),
                 (A, B[:, :15], b[:15])):
        assert gemm.bias_product(*args) is None


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_linear_forward_starts_from_the_bias(monkeypatch, dt):
    """A Linear layer's forward on numpy's BLAS (no AVX-512 kernel) takes ``bias_product``
    at sizes past the rule, 2-D and 3-D inputs, and gives the float64 result."""
    used = _spy(monkeypatch, "bias_product", lambda out: out is not None)
    rng = np.random.default_rng(8)
    lin = _linear(dt, 48, 300)
    w, b = lin.weight.numpy().astype(np.float64), lin.bias.numpy().astype(np.float64)
    tol = 1e-5 if dt == np.float32 else 1e-12
    for shape in ((256, 48), (4, 80, 48)):
        x = rng.standard_normal(shape).astype(dt)
        y = lin(ddg.to_tensor(x)).numpy()
        assert y.dtype == dt
        np.testing.assert_allclose(y, x.astype(np.float64) @ w + b, rtol=tol, atol=tol)
    assert used == [True, True]
