"""Compiled float32 1-D convolutions with few channels (numpy arrays), from the register
tiles of ``gemm_kernels``.

A stride-1 1-D convolution is a sum over taps j of products ``w_j [O, C] @ x`` shifted by
``j*d`` along the length. With 8-64 channels each product is too thin for OpenBLAS's
tiles (~55 GFLOP/s at 16 channels, whatever the orientation); here every output tile of 8
channels x 16 positions stays in eight 16-lane registers through all taps and channels,
each tap one pass of the tile's loop over the channels, reading the input row at the tap's
offset. Both kernels write their result in the layout the layer hands out, so no junk
columns and no transposed copies are made:

* ``conv_rows``: ``out[n, r, q] = sum_j sum_k a[r*ra + k*ka + j*ta] * x[n, k, q + off0 +
  j*step]``: the forward (``a`` the weight ``[O, C, k]`` read in place, ``x`` the padded
  input) and the input gradient (the same weight with the roles of its strides swapped,
  ``x`` the padded output gradient, mirrored offsets);
* ``conv_wgrad``: ``out[j*O + o, c] (+)= sum_n sum_q g[n, o, q] * xt[n, q + j*d, c]``:
  the weight gradient per tap, the reduction over the positions in the tile's loop (the
  input position-major, ``xt`` ``[N, Lp, C]``, its rows read 16 channels at a time).

Every array argument is C-contiguous float32 (the offsets int64), so each kernel compiles
once. This module imports numba; ``conv1d.py`` imports it with the first convolution that
takes it.
"""
import numba
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .compiled import FASTMATH
from .gemm_kernels import _V_I32, _V_I64, _k_loop, _lanes_below, _masked_or_whole, _row_groups, _splat, _vector_ops

_OPTS = {"fastmath": set(FASTMATH), "cache": True, "error_model": "numpy"}


def _tap_tile(rows, lanes=16):
    """An intrinsic ``tile(a, x, out, i, ai, b0, nb, K, c0, xstep, taps, ra, ka, ta, acc)`` on
    C-contiguous float32 arrays, ``a`` flat: ``out[i + r, b0:b0+nb] (+)= sum_{t < taps} sum_{k
    < K} a[(ai + r)*ra + k*ka + t*ta] * x[k, c0 + t*xstep + b0:...]`` (nb <= ``lanes``
    columns: masked loads and stores; ``a`` read in any layout through its strides; added to
    ``out`` where ``acc`` is nonzero), the accumulators in registers through every tap
    (``gemm_kernels._tile`` loads and stores them once per call, here once per tile). A tap
    can be a convolution's tap (a shift ``xstep`` along the row) or a sample (``xstep`` and
    ``ta`` a sample's extent)."""
    def codegen(context, builder, signature, args):
        i, ai, b0, nb, kk, c0, xstep, taps, ra, ka, ta, accf = args[3:]
        arrs = [context.make_array(t)(context, builder, v) for t, v in zip(signature.args[:3], args[:3])]
        ad, xd, od = (r.data for r in arrs)
        ldx, ldo = (builder.extract_value(r.shape, 1) for r in arrs[1:])
        vt, fma, mload, mstore = _vector_ops(builder.module, lanes)
        zero = ir.Constant(vt, [0.0] * lanes)
        align = ir.Constant(_V_I32, 4)
        mask = _lanes_below(builder, nb, lanes)
        izero = ir.Constant(_V_I64, 0)

        def group(rs, masked=True):     # rows rs of the tile, their accumulators through every tap and k
            def mload_(p):
                return builder.call(mload, [p, align, mask, zero]) if masked else builder.load(p, align=4)
            optr = [builder.bitcast(builder.gep(od, [builder.add(builder.mul(builder.add(i, ir.Constant(_V_I64, r)),
                                                                             ldo), b0)]), vt.as_pointer())
                    for r in rs]
            from_out = builder.icmp_signed("!=", accf, izero)
            init = [builder.select(from_out, mload_(p), zero) for p in optr]

            def tap(t, tacc):
                arow = [builder.gep(ad, [builder.add(builder.mul(builder.add(ai, ir.Constant(_V_I64, r)), ra),
                                                     builder.mul(t, ta))]) for r in rs]
                xcol = builder.gep(xd, [builder.add(builder.add(c0, b0), builder.mul(t, xstep))])

                def step(k, acc):
                    xk = mload_(builder.bitcast(builder.gep(xcol, [builder.mul(k, ldx)]), vt.as_pointer()))
                    return [builder.call(fma, [_splat(builder, builder.load(builder.gep(arow[n], [builder.mul(k, ka)]),
                                                                            align=4), lanes), xk, acc[n]])
                            for n in range(len(rs))]
                return _k_loop(builder, "tap_k", izero, kk, tacc, step)
            new = _k_loop(builder, "tap", izero, taps, init, tap)
            for r in range(len(rs)):
                if masked:
                    builder.call(mstore, [new[r], optr[r], align, mask])
                else:
                    builder.store(new[r], optr[r], align=4)

        def emit(masked):
            for rs in _row_groups(rows, (lanes,)):
                group(rs, masked)
        _masked_or_whole(builder, builder.icmp_signed("==", nb, ir.Constant(_V_I64, lanes)), emit)
        return context.get_dummy_value()

    @intrinsic
    def tile(typingctx, a, x, out, i, ai, b0, nb, kk, c0, xstep, taps, ra, ka, ta, acc):
        i64 = types.int64
        return types.void(a, x, out, *([i64] * 12)), codegen
    return tile


_P8, _P1 = _tap_tile(8), _tap_tile(1)
# the weight gradient's blocks of at most 8 channels (8 channels, the last 8 of 24) in 8-lane
# vectors: half the multiply-adds of a 16-lane tile with half its lanes masked (8 channels on
# 32 x 1000 positions 0.35 -> 0.24 ms; in conv_rows, for a row's last positions, the extra
# branch cost the long rows 4-6 %)
_Q8, _Q1 = _tap_tile(8, lanes=8), _tap_tile(1, lanes=8)


@numba.njit(**_OPTS)
def conv_rows(a, ra, ka, ta, x, out, off0, step, taps, units):
    """``out [N, R, Q]``: ``out[n, r, q] = sum_{j < taps} sum_k a[r*ra + k*ka + j*ta] * x[n, k,
    q + off0 + j*step]`` for the flat weight ``a``, ``x`` ``[N, K, W]`` (every offset in
    ``[0, W - Q]``). The output's 16-position blocks (over all samples) go ``units`` at a
    time through every row tile: a weight too large for L1 then streams once per ``units``
    blocks, their input slices staying in L2."""
    N, R, Q = out.shape
    K = x.shape[1]
    R8 = R - R % 8
    nbq = (Q + 15) // 16
    for u0 in range(0, N * nbq, units):
        u1 = min(u0 + units, N * nbq)
        for i in range(0, R8 + (R - R8), 8):
            for u in range(u0, u1):
                n = u // nbq
                b0 = 16 * (u - n * nbq)
                nb = min(16, Q - b0)
                if i < R8:
                    _P8(a, x[n], out[n], i, i, b0, nb, K, off0, step, taps, ra, ka, ta, 0)
                else:
                    for r in range(i, R):
                        _P1(a, x[n], out[n], r, r, b0, nb, K, off0, step, taps, ra, ka, ta, 0)


@numba.njit(**_OPTS)
def conv_wgrad(g, xt, out, taps, d, nc):
    """``out [taps*O, C]``: ``out[j*O + o, c] += sum_n sum_q g[n, o, q] * xt[n, q + j*d, c]``
    for ``g`` ``[N, O, Q]``, ``xt`` ``[N, Lp, C]`` (``(taps - 1)*d + Q <= Lp``), ``nc``
    samples at a time: each output tile sums over a chunk's samples in registers (the
    samples as the tile's taps), its inputs staying in L2, and a large weight's gradient
    passes through the caches once per chunk. The caller zeroes ``out``: the tiles always
    add onto it (a start-from-zero flag known only at run time made the kernel take about
    twice as long to compile)."""
    N, O, Q = g.shape
    Lp, C = xt.shape[1], xt.shape[2]
    O8 = O - O % 8
    gf = g.reshape(N * O * Q)
    xf = xt.reshape(N * Lp, C)
    for n0 in range(0, N, nc):
        n1 = min(n0 + nc, N)
        gn, xn = gf[n0 * O * Q:], xf[n0 * Lp:]
        for b0 in range(0, C, 16):
            nb = min(16, C - b0)
            for j in range(taps):
                c0 = j * d * C
                if nb > 8:
                    for i in range(0, O8, 8):
                        _P8(gn, xn, out, j * O + i, i, b0, nb, Q, c0, Lp * C, n1 - n0, Q, 1, O * Q, 1)
                    for i in range(O8, O):
                        _P1(gn, xn, out, j * O + i, i, b0, nb, Q, c0, Lp * C, n1 - n0, Q, 1, O * Q, 1)
                else:
                    for i in range(0, O8, 8):
                        _Q8(gn, xn, out, j * O + i, i, b0, nb, Q, c0, Lp * C, n1 - n0, Q, 1, O * Q, 1)
                    for i in range(O8, O):
                        _Q1(gn, xn, out, j * O + i, i, b0, nb, Q, c0, Lp * C, n1 - n0, Q, 1, O * Q, 1)
