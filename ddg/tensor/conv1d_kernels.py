"""Compiled float32 1-D convolutions with few channels (numpy arrays), from the register
tiles of ``gemm_kernels``.

A stride-1 1-D convolution is a sum over taps j of products ``w_j [O, C] @ x`` shifted by
``j*d`` along the length. With 8-64 channels each product is too thin for OpenBLAS's
tiles (~55 GFLOP/s at 16 channels, whatever the orientation); here every output tile of 8
channels x 16 positions stays in eight 16-lane registers through all taps and channels,
each tap one pass of the tile's loop over the channels, reading the input row at the tap's
offset. Both kernels write their result in the layout the layer hands out, so no junk
columns and no transposed copies are made:

* ``conv_rows``: ``out[n, r, q] = sum_j sum_k a[j*R + r, k] * x[n, k, q + offs[j]]``: the
  forward (``a`` the weight per tap, ``x`` the padded input) and the input gradient (``a``
  the transposed weight per tap, ``x`` the padded output gradient, mirrored offsets);
* ``conv_wgrad``: ``out[j*O + o, c] (+)= sum_n sum_q g[n, o, q] * xt[n, q + j*d, c]``:
  the weight gradient per tap, the reduction over the positions in the tile's loop (the
  input position-major, ``xt`` ``[N, Lp, C]``, its rows read 16 channels at a time).

Every array argument is C-contiguous float32 (the offsets int64), so each kernel compiles
once. This module imports numba; ``conv1d.py`` imports it with the first convolution that
takes it.
"""
import numba

from .compiled import FASTMATH
from .gemm_kernels import _T1, _T8

_OPTS = {"fastmath": set(FASTMATH), "cache": True, "error_model": "numpy"}


@numba.njit(**_OPTS)
def conv_rows(a, x, out, offs):
    """``out [N, R, Q]``: ``out[n, r, q] = sum_j sum_k a[j*R + r, k] * x[n, k, q + offs[j]]``
    for ``a`` ``[T*R, K]``, ``x`` ``[N, K, W]`` (``offs[j] + Q <= W``), ``offs`` ``[T]``."""
    N, R, Q = out.shape
    K = a.shape[1]
    T = offs.shape[0]
    R8 = R - R % 8
    for n in range(N):
        xn, on = x[n], out[n]
        for b0 in range(0, Q, 16):
            nb = min(16, Q - b0)
            for i in range(0, R8, 8):
                for j in range(T):
                    _T8(a, xn, on, i, j * R + i, b0, nb, 0, K, offs[j], 1 if j > 0 else 0)
            for i in range(R8, R):
                for j in range(T):
                    _T1(a, xn, on, i, j * R + i, b0, nb, 0, K, offs[j], 1 if j > 0 else 0)


@numba.njit(**_OPTS)
def conv_wgrad(g, xt, out, taps, d):
    """``out [taps*O, C]``: ``out[j*O + o, c] = sum_n sum_q g[n, o, q] * xt[n, q + j*d, c]``
    for ``g`` ``[N, O, Q]``, ``xt`` ``[N, Lp, C]`` (``(taps - 1)*d + Q <= Lp``)."""
    N, O, Q = g.shape
    C = xt.shape[2]
    O8 = O - O % 8
    for n in range(N):
        gn, xn = g[n], xt[n]
        acc = 1 if n > 0 else 0
        for b0 in range(0, C, 16):
            nb = min(16, C - b0)
            for j in range(taps):
                c0 = j * d * C
                for i in range(0, O8, 8):
                    _T8(gn, xn, out, j * O + i, i, b0, nb, 0, Q, c0, acc)
                for i in range(O8, O):
                    _T1(gn, xn, out, j * O + i, i, b0, nb, 0, Q, c0, acc)
