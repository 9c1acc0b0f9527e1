"""Run by ``test_gemm.test_avx2_row_groups_in_a_subprocess`` with ``DDG_VECTOR_BITS=256`` and
``NUMBA_CPU_NAME=haswell``: the register tiles as AVX2 gets them (rows, columns and vectors
in groups that fit 16 registers, whole-vector tiles without masks) on any x86 CPU with AVX2,
each against float64 numpy. Prints ``ok`` and the vector width it compiled for."""
import numba
import numpy as np

from ddg.tensor import gemm_kernels as gk

assert gk.VECTOR_BITS == 256, gk.VECTOR_BITS
T8, TT8 = gk._tile(8, False, True), gk._tile(8, True, True)
W8, H16 = gk._tile(8, False, lanes=(8, 8, 8), masked=False), gk._tile(16, False, lanes=8)
C45, P3 = gk._ctile(4, 5), gk._ptile(3)


@numba.njit(cache=False)
def run(a, at, x, out, bias, nb, tmp, p, out2, out3, at40, tmp40):
    T8(a, x, out, bias, 0, 0, 0, nb, 0, a.shape[1], 0, 2)     # bias + A[:8] @ x[:, :nb] (masked past nb)
    TT8(at, x, out, bias, 16, 8, 0, nb, 0, at.shape[0], 0, 0)   # rows 16..24 = A[8:16] @ x[:, :nb], A read from a.T
    W8(a, x, out, 8, 0, 16, 24, 0, a.shape[1], 0, 0)          # rows 8..16, columns 16..40
    H16(a, x, out3, 0, 0, 0, nb // 2, 0, a.shape[1], 0, 1)     # out3[:16, :nb/2] += A[:16] @ x[:, :nb/2]
    C45(at, x, tmp, 0, 0, 5, at.shape[0])                      # tmp[j] = A[:64] @ x[:, j], j < 5
    C45(at40, x, tmp40, 0, 0, 5, at.shape[0])                  # 40 rows: the last vectors masked
    P3(p, x, out2, 0, 0, 16, 3, p.shape[0])                    # A[:8] from its panel: 16 columns and 3 more


rng = np.random.default_rng(1)
K = 37
a = rng.standard_normal((64, K)).astype(np.float32)
x = rng.standard_normal((K, 48)).astype(np.float32)
bias = rng.standard_normal((1, 48)).astype(np.float32)
A, X = a.astype(np.float64), x.astype(np.float64)
for nb in (16, 11):
    out, tmp, out2 = np.zeros((64, 48), np.float32), np.zeros((5, 64), np.float32), np.zeros((8, 48), np.float32)
    out3 = rng.standard_normal((16, 48)).astype(np.float32)
    o3 = out3.astype(np.float64)
    tmp40 = np.full((5, 64), np.nan, np.float32)
    run(a, np.ascontiguousarray(a.T), x, out, bias, nb, tmp, np.ascontiguousarray(a[:8].T), out2, out3,
        np.ascontiguousarray(a[:40].T), tmp40)
    close = {"rtol": 1e-5, "atol": 1e-4}
    np.testing.assert_allclose(out[:8, :nb], bias[0, :nb] + A[:8] @ X[:, :nb], **close)
    np.testing.assert_allclose(out[16:24, :nb], A[8:16] @ X[:, :nb], **close)
    assert not out[:8, nb:16].any() and not out[16:24, nb:16].any()
    np.testing.assert_allclose(out[8:16, 16:40], A[:8] @ X[:, 16:40], **close)
    np.testing.assert_allclose(out3[:, :nb // 2], o3[:, :nb // 2] + A[:16] @ X[:, :nb // 2], **close)
    np.testing.assert_allclose(out3[:, nb // 2:], o3[:, nb // 2:])
    np.testing.assert_allclose(tmp, (A @ X[:, :5]).T, **close)
    np.testing.assert_allclose(tmp40[:, :40], (A[:40] @ X[:, :5]).T, **close)
    assert not tmp40[:, 40:].any()
    np.testing.assert_allclose(out2[:, :19], A[:8] @ X[:, :19], **close)
# a convolution's window products (``conv_taps``): the taps' windows as B's rows (forward,
# input gradient), then as A's rows (weight gradient); rows of 30 values (16 + 14) and of 27
# (16 + 11), 20 output channels (16 + 4: the one-vector tile)
from ddg.tensor import conv_taps  # noqa: E402

xc = rng.standard_normal((3, 12, 7, 9)).astype(np.float32)
wc = rng.standard_normal((20, 12, 3, 3)).astype(np.float32)
pads = (1, 0, 2, 1)
yc, state = conv_taps.forward(xc, wc, None, pads, 6, 10)
gy = rng.standard_normal(yc.shape).astype(np.float32)
gx, gw = conv_taps.backward(state, gy, True, True)
xp = np.pad(xc.astype(np.float64), ((0, 0), (0, 0), pads[:2], pads[2:]))
ry, rgx, rgw = np.zeros(yc.shape), np.zeros(xp.shape), np.zeros(wc.shape)
for i in range(3):
    for j in range(3):
        ry += np.einsum("oc,nchw->nohw", wc[:, :, i, j].astype(np.float64), xp[:, :, i:i + 6, j:j + 10])
        rgw[:, :, i, j] = np.einsum("nohw,nchw->oc", gy.astype(np.float64), xp[:, :, i:i + 6, j:j + 10])
        rgx[:, :, i:i + 6, j:j + 10] += np.einsum("oc,nohw->nchw", wc[:, :, i, j].astype(np.float64), gy)
for got, ref in ((yc, ry), (gx, rgx[:, :, 1:8, 2:11]), (gw, rgw)):
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
print("ok", gk.VECTOR_BITS)
