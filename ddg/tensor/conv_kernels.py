"""Compiled (numba) CPU loops of the convolution and pooling primitives, for the work numpy
does in many whole-array passes or with a matrix product of a poor shape. numpy
float32/float64 arrays only (``usable``): cupy arrays and half dtypes keep the whole-array
paths of ``conv.py``, ``conv_nd.py`` and ``pooling.py``.

The convolution loops work on the batch-innermost layout of ``conv.py`` (an image is
``[C, H, W, N]`` C-contiguous): an output row ``[OW, N]`` is a contiguous run, and for a
window stride of 1 so is the input run a kernel offset multiplies, so the innermost loop is
a multiply-add (or copy) over ``OW*N`` elements that the compiler vectorizes. Rows are taken
as slices, so that the innermost index starts at 0 (numba then drops its negative-index
check, which otherwise keeps the loop scalar: measured 5x).

* depthwise convolution (``groups == C``; output channel ``o`` reads input channel
  ``o // mult``): per output row and kernel offset one multiply-add of a row, the same
  scatter for the input gradient, row dot products for the weight gradient;
* im2col / col2im over up to three spatial axes (2-D is ``kd = od = 1``): one gather /
  scatter-add pass;
* the four tile transforms of Winograd F(4x4, 3x3) (``conv.py``'s matrices) over a range of
  tile rows, each element read and written once (F(2x2, 3x3), which numpy float32/float64
  no longer take, keeps the whole-array version of ``conv.py`` that cupy runs);
* pooling over one box per output (3-D pooling, adaptive max pooling), max with its
  argmax for the backward.
"""
import numpy as np

from .compiled import jitable, kernel


@kernel
def _direct_fwd(x, w, y, geom):
    """Grouped direct convolution: ``y[o, oy, ox, n] = sum_qij w[o, q, i, j] *
    x[(o // og)*cg + q, oy*sh + i*dh, ox*sw + j*dw, n]`` on flat C-contiguous arrays: ``x``
    [C, Hp, Wp, N] (padded), ``w`` [O, cg, kh, kw], ``y`` [O, OH, OW, N] (overwritten).
    ``geom`` = (Hp, Wp, N, O, OH, OW, kh, kw, sh, sw, dh, dw, og, cg): ``og``/``cg`` output /
    input channels per group (depthwise: cg = 1, og = the channel multiplier). Padding is
    in ``x`` (measured 2x faster than skipping the padding's taps, which shortens rows
    unevenly)."""
    hp, wp, n, o_n, oh, ow, kh, kw, sh, sw, dh, dw, og, cg = geom
    row = ow * n
    for o in range(o_n):
        c0 = (o // og) * cg
        for oy in range(oh):
            yr = y[(o * oh + oy) * row:(o * oh + oy + 1) * row]
            yr[:] = 0.0
            for q in range(cg):
                for i in range(kh):
                    x0 = ((c0 + q) * hp + oy * sh + i * dh) * wp * n
                    for j in range(kw):
                        wv = w[((o * cg + q) * kh + i) * kw + j]
                        if sw == 1:
                            xr = x[x0 + j * dw * n:x0 + j * dw * n + row]
                            for k in range(row):
                                yr[k] += wv * xr[k]
                        else:
                            a = x0 + j * dw * n
                            xr = x[a:a + ((ow - 1) * sw + 1) * n]
                            for ox in range(ow):
                                for k in range(n):
                                    yr[ox * n + k] += wv * xr[ox * sw * n + k]


@kernel
def _direct_bwd(x, w, gy, gx, gw, geom, need_x, need_w, zero):
    """Gradients of ``_direct_fwd`` (same layouts) for the output gradient ``gy``: ``gx``
    [C, Hp, Wp, N] (zeroed by the caller) gains ``w * gy`` at every tap (``need_x``), ``gw``
    [O, cg, kh, kw] (float64, overwritten) the dot products of ``gy`` with the taps' input
    rows (``need_w``): per row in the input's dtype (``zero`` is a 0 of it), summed in
    float64."""
    hp, wp, n, o_n, oh, ow, kh, kw, sh, sw, dh, dw, og, cg = geom
    row = ow * n
    gw[:] = 0.0
    for o in range(o_n):
        c0 = (o // og) * cg
        for oy in range(oh):
            gr = gy[(o * oh + oy) * row:(o * oh + oy + 1) * row]
            for q in range(cg):
                for i in range(kh):
                    x0 = ((c0 + q) * hp + oy * sh + i * dh) * wp * n
                    for j in range(kw):
                        t = ((o * cg + q) * kh + i) * kw + j
                        wv = w[t]
                        s = zero
                        if sw == 1:
                            a = x0 + j * dw * n
                            if need_w:
                                xr = x[a:a + row]
                                for k in range(row):
                                    s += gr[k] * xr[k]
                            if need_x:
                                gxr = gx[a:a + row]
                                for k in range(row):
                                    gxr[k] += wv * gr[k]
                        else:
                            a = x0 + j * dw * n
                            e = a + ((ow - 1) * sw + 1) * n
                            if need_w:
                                xr = x[a:e]
                                for ox in range(ow):
                                    for k in range(n):
                                        s += gr[ox * n + k] * xr[ox * sw * n + k]
                            if need_x:
                                gxr = gx[a:e]
                                for ox in range(ow):
                                    for k in range(n):
                                        gxr[ox * sw * n + k] += wv * gr[ox * n + k]
                        gw[t] += s


_PLANE_CHUNK = 2048   # elements of a plane's accumulator kept in L1 while every tap adds into it


@kernel
def _plane_fwd(x, w, live, y, acc, geom):
    """Stride-1 grouped direct convolution over whole image planes: ``x`` [B, C, Hp, Wp, N]
    (padded), ``w`` [O, cg, kh, kw], ``y`` [B, O, OH, OW, N] (overwritten), flat C-contiguous
    (batch-innermost images are B = 1, NCHW ones N = 1); ``acc`` a scratch plane of
    ``L = (OH-1)*Wp*N + OW*N`` elements; only the taps with ``live`` nonzero are taken (the
    others are zero weights by construction). The output is accumulated on the padded width
    (output pixel (oy, ox) at ``(oy*Wp + ox)*N``), where every kernel offset is one shift of
    the whole input plane: each three taps are one pass over ``L`` contiguous elements (in
    chunks that stay in cache) adding three shifted products (the last ones one per pass);
    the ``Wp - OW`` junk columns of each row are dropped when the rows are copied into
    ``y``. ``geom`` = (B, C, Hp, Wp, N, O, OH, OW, kh, kw, dh, dw, og, cg)."""
    nb, c_n, hp, wp, n, o_n, oh, ow, kh, kw, dh, dw, og, cg = geom
    rw = wp * n
    row = ow * n
    ln = (oh - 1) * rw + row
    d1 = dw * n
    plane = hp * rw
    nt = cg * kh * kw
    lw = np.empty(nt, np.int64)
    lx = np.empty(nt, np.int64)
    lg = np.empty(nt, np.int64)
    qbeg = np.empty(cg + 1, np.int64)
    for b in range(nb):
        for o in range(o_n):
            # output channel o's live taps in (q, i, j) order: weight index, input offset from the
            # group's first channel, gather offset into g; the list's start per input channel
            nl = 0
            for q in range(cg):
                qbeg[q] = nl
                for i in range(kh):
                    for j in range(kw):
                        t = ((o * cg + q) * kh + i) * kw + j
                        if live[t]:
                            lw[nl] = t
                            lx[nl] = q * plane + i * dh * rw + j * d1
                            lg[nl] = 0 - i * dh * rw - j * d1
                            nl += 1
            qbeg[cg] = nl
            c0 = (o // og) * cg
            xb = (b * c_n + c0) * plane
            for s0 in range(0, ln, _PLANE_CHUNK):
                m = min(s0 + _PLANE_CHUNK, ln) - s0
                a = acc[s0:s0 + m]
                a[:] = 0.0
                for u in range(0, nl - 2, 3):
                    w0, w1, w2 = w[lw[u]], w[lw[u + 1]], w[lw[u + 2]]
                    x0 = x[xb + lx[u] + s0:xb + lx[u] + s0 + m]
                    x1 = x[xb + lx[u + 1] + s0:xb + lx[u + 1] + s0 + m]
                    x2 = x[xb + lx[u + 2] + s0:xb + lx[u + 2] + s0 + m]
                    for k in range(m):
                        a[k] += w0 * x0[k] + w1 * x1[k] + w2 * x2[k]
                for u in range(nl - nl % 3, nl):
                    wv = w[lw[u]]
                    xr = x[xb + lx[u] + s0:xb + lx[u] + s0 + m]
                    for k in range(m):
                        a[k] += wv * xr[k]
            for oy in range(oh):
                y0 = ((b * o_n + o) * oh + oy) * row
                yr = y[y0:y0 + row]
                ar = acc[oy * rw:oy * rw + row]
                for k in range(row):
                    yr[k] = ar[k]


@kernel
def _plane_bwd(x, w, live, gy, gx, gw, g, geom, need_x, need_w, zero):
    """Gradients of ``_plane_fwd`` for the output gradient ``gy`` [B, O, OH, OW, N]. Each
    output channel's gradient is first laid on the padded width in ``g`` (the scratch, zero
    but for those rows: ``M = (kh-1)*dh*Wp*N + (kw-1)*dw*N`` zeros, then the plane [Hp, Wp,
    N] with the gradient's rows at its top left, junk columns and rows below zero). The
    weight gradient ``gw`` [O, cg, kh, kw] (float64, overwritten, 0 at taps not live;
    ``need_w``) gets the dot products of ``g`` with the shifted input, three taps per pass
    (per chunk in the input's dtype, ``zero`` a 0 of it, summed in float64). The input
    gradient ``gx`` [B, C, Hp, Wp, N] (every element written; ``need_x``) is the adjoint as
    a gather: input position p gains ``w[i, j] * g[p - i*dh*Wp*N - j*dw*N]`` (the zeros of
    ``g`` stand in for out-of-range outputs), three taps of an input channel per pass over
    its plane (each channel's plane zeroed in cache by its group's first output channel)."""
    nb, c_n, hp, wp, n, o_n, oh, ow, kh, kw, dh, dw, og, cg = geom
    rw = wp * n
    row = ow * n
    ln = (oh - 1) * rw + row
    d1 = dw * n
    rs = dh * rw
    mg = (kh - 1) * rs + (kw - 1) * d1
    plane = hp * rw
    nt = cg * kh * kw
    lw = np.empty(nt, np.int64)
    lx = np.empty(nt, np.int64)
    lg = np.empty(nt, np.int64)
    qbeg = np.empty(cg + 1, np.int64)
    gw[:] = 0.0
    g[:] = 0.0
    gc = g[mg:mg + ln]
    for b in range(nb):
        for o in range(o_n):
            # output channel o's live taps in (q, i, j) order: weight index, input offset from the
            # group's first channel, gather offset into g; the list's start per input channel
            nl = 0
            for q in range(cg):
                qbeg[q] = nl
                for i in range(kh):
                    for j in range(kw):
                        t = ((o * cg + q) * kh + i) * kw + j
                        if live[t]:
                            lw[nl] = t
                            lx[nl] = q * plane + i * rs + j * d1
                            lg[nl] = mg - i * rs - j * d1
                            nl += 1
            qbeg[cg] = nl
            c0 = (o // og) * cg
            xb = (b * c_n + c0) * plane
            for oy in range(oh):
                y0 = ((b * o_n + o) * oh + oy) * row
                src = gy[y0:y0 + row]
                dst = gc[oy * rw:oy * rw + row]
                for k in range(row):
                    dst[k] = src[k]
            if need_w:
                for s0 in range(0, ln, _PLANE_CHUNK):
                    m = min(s0 + _PLANE_CHUNK, ln) - s0
                    gk = gc[s0:s0 + m]
                    for u in range(0, nl - 2, 3):
                        x0 = x[xb + lx[u] + s0:xb + lx[u] + s0 + m]
                        x1 = x[xb + lx[u + 1] + s0:xb + lx[u + 1] + s0 + m]
                        x2 = x[xb + lx[u + 2] + s0:xb + lx[u + 2] + s0 + m]
                        a0 = a1 = a2 = zero
                        for k in range(m):
                            gv = gk[k]
                            a0 += gv * x0[k]
                            a1 += gv * x1[k]
                            a2 += gv * x2[k]
                        gw[lw[u]] += a0
                        gw[lw[u + 1]] += a1
                        gw[lw[u + 2]] += a2
                    for u in range(nl - nl % 3, nl):
                        xr = x[xb + lx[u] + s0:xb + lx[u] + s0 + m]
                        a0 = zero
                        for k in range(m):
                            a0 += gk[k] * xr[k]
                        gw[lw[u]] += a0
            if need_x:
                for q in range(cg):
                    gq = gx[xb + q * plane:xb + (q + 1) * plane]
                    if o % og == 0:   # the group's first output channel: the plane starts at 0
                        gq[:] = 0.0
                    u0, u1 = qbeg[q], qbeg[q + 1]
                    for u in range(u0, u1 - 2, 3):
                        w0, w1, w2 = w[lw[u]], w[lw[u + 1]], w[lw[u + 2]]
                        g0 = g[lg[u]:lg[u] + plane]
                        g1 = g[lg[u + 1]:lg[u + 1] + plane]
                        g2 = g[lg[u + 2]:lg[u + 2] + plane]
                        for k in range(plane):
                            gq[k] += w0 * g0[k] + w1 * g1[k] + w2 * g2[k]
                    for u in range(u1 - (u1 - u0) % 3, u1):
                        wv = w[lw[u]]
                        gj = g[lg[u]:lg[u] + plane]
                        for k in range(plane):
                            gq[k] += wv * gj[k]


@kernel
def _to_batch_inner(x, out, geom):
    """An NC(D)HW C-contiguous ``x`` [N, C, D, H, W] written into the interior of the
    batch-innermost ``out`` [C, Dp, Hp, Wp, N] at offsets (d0, h0, w0) (the rest of ``out`` is
    left as it is): per (channel, depth, row) the N input rows are read contiguously and
    interleaved into one output row (numpy's strided copy runs its inner loop over the N
    elements of one pixel). ``geom`` = (N, C, D, H, W, Dp, Hp, Wp, d0, h0, w0)."""
    n_n, c_n, d_n, h_n, w_n, dp, hp, wp, d0, h0, w0 = geom
    for c in range(c_n):
        for z in range(d_n):
            for y in range(h_n):
                o = (((c * dp + z + d0) * hp + y + h0) * wp + w0) * n_n
                orow = out[o:o + w_n * n_n]
                for n in range(n_n):
                    s = (((n * c_n + c) * d_n + z) * h_n + y) * w_n
                    src = x[s:s + w_n]
                    for q in range(w_n):
                        orow[q * n_n + n] = src[q]


@kernel
def _phase_out(f, y, geom):
    """Interleave the phases of a transposed convolution into its output: ``f`` [P, C, Jd, Jh,
    Jw, N] (phase p = (rd*sh + rh)*sw + rw), ``y`` [C, OD, OH, OW, N] (overwritten), output
    position z (per axis) taken from phase (z + p0) % s at j = (z + p0) // s. Per output row
    and width phase one strided run. ``geom`` = (P, C, Jd, Jh, Jw, N, OD, OH, OW, sd, sh, sw,
    p0d, p0h, p0w)."""
    _, c_n, jd_n, jh_n, jw_n, n, od, oh, ow, sd, sh, sw, pd, ph_, pw = geom
    for c in range(c_n):
        for z in range(od):
            rd, jd = (z + pd) % sd, (z + pd) // sd
            for yy in range(oh):
                rh, jh = (yy + ph_) % sh, (yy + ph_) // sh
                yr = y[((c * od + z) * oh + yy) * ow * n:((c * od + z) * oh + yy + 1) * ow * n]
                for rw in range(sw):
                    x0 = (rw - pw) % sw                    # first output column of this phase
                    j0 = (x0 + pw) // sw
                    cnt = (ow - x0 + sw - 1) // sw if x0 < ow else 0
                    src = (((((rd * sh + rh) * sw + rw) * c_n + c) * jd_n + jd) * jh_n + jh) * jw_n + j0
                    fr = f[src * n:(src + cnt) * n]
                    if n == 1:   # batch 1: one strided run
                        if cnt == 0:
                            continue
                        yq = yr[x0:x0 + (cnt - 1) * sw + 1:sw]
                        for q in range(cnt):
                            yq[q] = fr[q]
                        continue
                    for q in range(cnt):
                        for k in range(n):
                            yr[(x0 + q * sw) * n + k] = fr[q * n + k]


@kernel
def _phase_in(gy, g, geom):
    """The adjoint of ``_phase_out`` reading the output gradient in its own dense layout:
    ``gy`` [N, C, OD, OH, OW] as a flat buffer with element strides (bn, bc, bz, by, bx) (the
    last five entries of ``geom``; NCDHW, batch-innermost, ...) into ``g`` [P, C, Jd, Jh, Jw, N]
    (zeroed by the caller; otherwise ``_phase_out``'s ``geom``)."""
    _, c_n, jd_n, jh_n, jw_n, n_n, od, oh, ow, sd, sh, sw, pd, ph_, pw, bn, bc, bz, by, bx = geom
    for c in range(c_n):
        for z in range(od):
            rd, jd = (z + pd) % sd, (z + pd) // sd
            for yy in range(oh):
                rh, jh = (yy + ph_) % sh, (yy + ph_) // sh
                s0 = c * bc + z * bz + yy * by
                for rw in range(sw):
                    x0 = (rw - pw) % sw
                    j0 = (x0 + pw) // sw
                    cnt = (ow - x0 + sw - 1) // sw if x0 < ow else 0
                    d = (((((rd * sh + rh) * sw + rw) * c_n + c) * jd_n + jd) * jh_n + jh) * jw_n + j0
                    gr = g[d * n_n:(d + cnt) * n_n]
                    if n_n == 1:   # batch 1: a plain strided run (the loop over N would stay scalar)
                        if cnt == 0:
                            continue
                        gs = gy[s0 + x0 * bx:s0 + (x0 + (cnt - 1) * sw) * bx + 1:sw * bx]
                        for q in range(cnt):
                            gr[q] = gs[q]
                        continue
                    for q in range(cnt):   # one run of g written in order, the N entries of gy read
                        s = s0 + (x0 + q * sw) * bx
                        for n in range(n_n):
                            gr[q * n_n + n] = gy[s + n * bn]


@kernel
def _phase_out_planes(f, y, geom):
    """``_phase_out`` for NCHW planes: the phases ``f`` (plane (b, p, c) of Jh rows of Jw at
    ``b*fb + (p*C + c)*fpc``, phase p = rh*sw + rw) into ``y`` [B, C, OH, OW] (overwritten),
    output position z (per axis) taken from phase (z + p0) % s at j = (z + p0) // s; per output
    row and width phase one run read in order. ``geom`` = (B, C, Jh, Jw, OH, OW, sh, sw, p0h,
    p0w, fb, fpc)."""
    nb, c_n, jh_n, jw_n, oh, ow, sh, sw, ph_, pw, fb, fpc = geom
    for b in range(nb):
        for c in range(c_n):
            for yy in range(oh):
                rh, jh = (yy + ph_) % sh, (yy + ph_) // sh
                yr = y[((b * c_n + c) * oh + yy) * ow:((b * c_n + c) * oh + yy + 1) * ow]
                for rw in range(sw):
                    x0 = (rw - pw) % sw
                    j0 = (x0 + pw) // sw
                    cnt = (ow - x0 + sw - 1) // sw if x0 < ow else 0
                    src = b * fb + ((rh * sw + rw) * c_n + c) * fpc + jh * jw_n + j0
                    fr = f[src:src + cnt]
                    for q in range(cnt):
                        yr[x0 + q * sw] = fr[q]


@kernel
def _phase_in_planes(gy, g, geom):
    """The adjoint of ``_phase_out_planes``: ``gy`` [B, C, OH, OW] as a flat buffer with
    element strides (bb, bc, by, bx) (the last four entries of ``geom``) into the phases ``g``
    (zeroed by the caller; otherwise ``_phase_out_planes``' ``geom``)."""
    nb, c_n, jh_n, jw_n, oh, ow, sh, sw, ph_, pw, fb, fpc, bb, bc, by, bx = geom
    for b in range(nb):
        for c in range(c_n):
            for yy in range(oh):
                rh, jh = (yy + ph_) % sh, (yy + ph_) // sh
                s0 = b * bb + c * bc + yy * by
                for rw in range(sw):
                    x0 = (rw - pw) % sw
                    j0 = (x0 + pw) // sw
                    cnt = (ow - x0 + sw - 1) // sw if x0 < ow else 0
                    d = b * fb + ((rh * sw + rw) * c_n + c) * fpc + jh * jw_n + j0
                    gr = g[d:d + cnt]
                    for q in range(cnt):
                        gr[q] = gy[s0 + (x0 + q * sw) * bx]


@kernel
def _wino4_out_phase(m, y, geom):
    """``_wino4_out`` of the phases of a transposed convolution computed as Winograd windows,
    interleaved into its output in the same pass: the products ``m`` [6, 6, P*C*th,
    tw*Jd*N] (phase p = (rd*sh + rh)*sw + rw; along height and width each phase's window
    starts at its first output position, along depth at j = 0) to the output ``y`` [C, OH,
    OW, OD, N] (overwritten): output position z takes phase (z + p0) % s at j = (z + p0) // s,
    less the phase's window origin along height and width. Per channel, tile row and phase,
    ``A^T M A``'s column transform, then per window row the row transform over the whole
    product row (every tile, depth and batch entry: the innermost loop runs over tw*Jd*N
    values whatever the batch) into a buffer of that row's four tile columns, which is then
    copied to the output positions (window rows, columns and depths past the output are
    dropped). Channel and tile row outermost: the output rows being written stay in cache
    across the phases. ``geom`` = (C, th, tw, Jd, N, OD, OH, OW, sd, sh, sw, p0d, p0h, p0w)."""
    c_n, th, tw, jd_n, n, od, oh, ow, sd, sh, sw, pd, ph_, pw = geom
    nn = jd_n * n
    ln = tw * nn
    f2, f4, f8 = np.float32(2.0), np.float32(4.0), np.float32(8.0)
    s = np.empty((4, 6, ln), y.dtype)
    t = np.empty((4, ln), y.dtype)
    xs = sw * od * n
    zs = sd * n
    for c in range(c_n):
        for ty in range(th):
            for rd in range(sd):
                z0 = (rd - pd) % sd
                if z0 >= od:
                    continue
                cz = (od - z0 + sd - 1) // sd
                j0 = (z0 + pd) // sd
                for rh in range(sh):
                    orgh = ((rh - ph_) % sh + ph_) // sh
                    for rw in range(sw):
                        x0 = (rw - pw) % sw
                        cnt = (ow - x0 + sw - 1) // sw if x0 < ow else 0
                        if cnt == 0:
                            continue
                        cols = min(cnt, 4 * tw)
                        r = ((((rd * sh + rh) * sw + rw) * c_n + c) * th) + ty
                        for j in range(6):
                            m0, m1, m2, m3, m4, m5 = m[0, j, r], m[1, j, r], m[2, j, r], m[3, j, r], m[4, j, r], m[5, j, r]
                            s0, s1, s2, s3 = s[0, j], s[1, j], s[2, j], s[3, j]
                            for q in range(ln):
                                a1, a2, a3, a4 = m1[q], m2[q], m3[q], m4[q]
                                s0[q] = m0[q] + a1 + a2 + a3 + a4
                                s1[q] = a1 - a2 + f2 * (a3 - a4)
                                s2[q] = a1 + a2 + f4 * (a3 + a4)
                                s3[q] = a1 - a2 + f8 * (a3 - a4) + m5[q]
                        for a in range(4):
                            yy = (4 * ty + a + orgh) * sh + rh - ph_
                            if yy < 0 or yy >= oh:
                                continue
                            sa0, sa1, sa2, sa3, sa4, sa5 = s[a, 0], s[a, 1], s[a, 2], s[a, 3], s[a, 4], s[a, 5]
                            t0, t1, t2, t3 = t[0], t[1], t[2], t[3]
                            for q in range(ln):
                                a1, a2, a3, a4 = sa1[q], sa2[q], sa3[q], sa4[q]
                                t0[q] = sa0[q] + a1 + a2 + a3 + a4
                                t1[q] = a1 - a2 + f2 * (a3 - a4)
                                t2[q] = a1 + a2 + f4 * (a3 + a4)
                                t3[q] = a1 - a2 + f8 * (a3 - a4) + sa5[q]
                            base = ((c * oh + yy) * ow + x0) * od * n + z0 * n
                            if cz == 1:   # one depth: per tile column its four output columns, N values each
                                full = cols - cols % 4
                                for tx in range(full // 4):
                                    sq = tx * nn + j0 * n
                                    dq = base + 4 * tx * xs
                                    for k in range(n):
                                        y[dq + k] = t0[sq + k]
                                        y[dq + xs + k] = t1[sq + k]
                                        y[dq + 2 * xs + k] = t2[sq + k]
                                        y[dq + 3 * xs + k] = t3[sq + k]
                                for col in range(full, cols):
                                    tr = t[col & 3]
                                    src = (col >> 2) * nn + j0 * n
                                    dst = base + col * xs
                                    for k in range(n):
                                        y[dst + k] = tr[src + k]
                                continue
                            for col in range(cols):        # output column x0 + col*sw
                                tr = t[col & 3]
                                src = (col >> 2) * nn + j0 * n
                                dst = base + col * xs
                                if n == 1:
                                    for i in range(cz):
                                        y[dst + i * zs] = tr[src + i]
                                elif n == 2:
                                    for i in range(cz):
                                        y[dst + i * zs] = tr[src + 2 * i]
                                        y[dst + i * zs + 1] = tr[src + 2 * i + 1]
                                else:
                                    for i in range(cz):
                                        for k in range(n):
                                            y[dst + i * zs + k] = tr[src + i * n + k]


@kernel
def _wino4_out_phase_adj(gy, gm, geom):
    """The adjoint of ``_wino4_out_phase``: the output gradient ``gy`` [N, C, OD, OH, OW]
    (a flat buffer with element strides (bn, bc, bz, by, bx), the last five entries of
    ``geom``) to the products' gradients ``gm`` [6, 6, P*C*th, tw*Jd*N] (overwritten). Per
    channel, tile row and phase, each window row's values are copied from ``gy`` into a
    buffer of its four tile columns (zero where no output position maps), the adjoint row
    transform runs over the whole row (tw*Jd*N values innermost), then the adjoint column
    transform writes ``gm``. Otherwise ``_wino4_out_phase``'s ``geom``."""
    c_n, th, tw, jd_n, n, od, oh, ow, sd, sh, sw, pd, ph_, pw, bn, bc, bz, by, bx = geom
    nn = jd_n * n
    ln = tw * nn
    bq = sw * bx
    zero = gm.dtype.type(0)
    f2, f4, f8 = np.float32(2.0), np.float32(4.0), np.float32(8.0)
    gs = np.empty((4, 6, ln), gm.dtype)
    e = np.empty((4, ln), gm.dtype)
    for c in range(c_n):
        for ty in range(th):
            for rd in range(sd):
                z0 = (rd - pd) % sd
                cz = (od - z0 + sd - 1) // sd if z0 < od else 0
                j0 = (z0 + pd) // sd
                for rh in range(sh):
                    orgh = ((rh - ph_) % sh + ph_) // sh
                    for rw in range(sw):
                        x0 = (rw - pw) % sw
                        cnt = (ow - x0 + sw - 1) // sw if x0 < ow else 0
                        cols = min(cnt, 4 * tw)
                        for a in range(4):
                            yy = (4 * ty + a + orgh) * sh + rh - ph_
                            for b in range(4):
                                eb = e[b]
                                for q in range(ln):
                                    eb[q] = zero
                            if 0 <= yy < oh and cz == 1:   # one depth: per tile column its four output columns
                                base = c * bc + z0 * bz + yy * by + x0 * bx
                                full = cols - cols % 4
                                e0_, e1_, e2_, e3_ = e[0], e[1], e[2], e[3]
                                for k in range(n):
                                    sk = base + k * bn
                                    for tx in range(full // 4):
                                        src = sk + 4 * tx * bq
                                        dst = tx * nn + j0 * n + k
                                        e0_[dst] = gy[src]
                                        e1_[dst] = gy[src + bq]
                                        e2_[dst] = gy[src + 2 * bq]
                                        e3_[dst] = gy[src + 3 * bq]
                                    for col in range(full, cols):
                                        e[col & 3, (col >> 2) * nn + j0 * n + k] = gy[sk + col * bq]
                            elif 0 <= yy < oh:
                                base = c * bc + z0 * bz + yy * by + x0 * bx
                                for k in range(n):    # along gy's rows: strided column reads
                                    for i in range(cz):
                                        src = base + k * bn + i * sd * bz
                                        dst = (j0 + i) * n + k
                                        for col in range(cols):   # output column x0 + col*sw
                                            e[col & 3, (col >> 2) * nn + dst] = gy[src + col * bq]
                            s0, s1, s2, s3, s4, s5 = gs[a, 0], gs[a, 1], gs[a, 2], gs[a, 3], gs[a, 4], gs[a, 5]
                            ea, eb_, ec, ed = e[0], e[1], e[2], e[3]
                            for q in range(ln):
                                e0, e1, e2, e3 = ea[q], eb_[q], ec[q], ed[q]
                                s0[q] = e0
                                s1[q] = e0 + e1 + e2 + e3
                                s2[q] = e0 - e1 + e2 - e3
                                s3[q] = e0 + f2 * e1 + f4 * e2 + f8 * e3
                                s4[q] = e0 - f2 * e1 + f4 * e2 - f8 * e3
                                s5[q] = e3
                        r = ((((rd * sh + rh) * sw + rw) * c_n + c) * th) + ty
                        for j in range(6):
                            u0, u1, u2, u3 = gs[0, j], gs[1, j], gs[2, j], gs[3, j]
                            g0, g1, g2, g3, g4, g5 = gm[0, j, r], gm[1, j, r], gm[2, j, r], gm[3, j, r], gm[4, j, r], gm[5, j, r]
                            for q in range(ln):
                                e0, e1, e2, e3 = u0[q], u1[q], u2[q], u3[q]
                                g0[q] = e0
                                g1[q] = e0 + e1 + e2 + e3
                                g2[q] = e0 - e1 + e2 - e3
                                g3[q] = e0 + f2 * e1 + f4 * e2 + f8 * e3
                                g4[q] = e0 - f2 * e1 + f4 * e2 - f8 * e3
                                g5[q] = e3


@kernel
def _col2im3(cols, out, geom):
    """Columns ``[C, kd, kh, kw, od, oh, ow, N]`` summed into ``out`` [C, Dp, Hp, Wp, N]
    (zeroed by the caller; flat C-contiguous arrays): column (a, i, j, z, y, x) lands at
    (z*sd + a*dd, y*sh + i*dh, x*sw + j*dw). ``geom`` = (C, kd, kh, kw, od, oh, ow, N, Dp, Hp,
    Wp, sd, sh, sw, dd, dh, dw). For stride 1 along the width each (offset, output row)
    adds one contiguous run of ``ow*N`` elements."""
    c_n, kd, kh, kw, od, oh, ow, n, dp, hp, wp, sd, sh, sw, dd, dh, dw = geom
    row = ow * n
    src = 0
    for c in range(c_n):
        for a in range(kd):
            for i in range(kh):
                for j in range(kw):
                    for z in range(od):
                        for y in range(oh):
                            dst = (((c * dp + z * sd + a * dd) * hp + y * sh + i * dh) * wp + j * dw) * n
                            cr = cols[src:src + row]
                            if sw == 1:
                                orow = out[dst:dst + row]
                                for k in range(row):
                                    orow[k] += cr[k]
                            else:   # one row slice, indexed from 0 (no slice per pixel)
                                orow = out[dst:dst + ((ow - 1) * sw + 1) * n]
                                for x in range(ow):
                                    for k in range(n):
                                        orow[x * sw * n + k] += cr[x * n + k]
                            src += row


@kernel
def _im2col3(x, cols, geom):
    """The adjoint of ``_col2im3`` (same flat layouts and ``geom``): ``cols`` [C, kd, kh, kw,
    od, oh, ow, N] (overwritten) gathers the padded input ``x`` [C, Dp, Hp, Wp, N]."""
    c_n, kd, kh, kw, od, oh, ow, n, dp, hp, wp, sd, sh, sw, dd, dh, dw = geom
    row = ow * n
    dst = 0
    for c in range(c_n):
        for a in range(kd):
            for i in range(kh):
                for j in range(kw):
                    for z in range(od):
                        for y in range(oh):
                            src = (((c * dp + z * sd + a * dd) * hp + y * sh + i * dh) * wp + j * dw) * n
                            cr = cols[dst:dst + row]
                            if sw == 1:
                                xr = x[src:src + row]
                                for k in range(row):
                                    cr[k] = xr[k]
                            else:
                                xr = x[src:src + ((ow - 1) * sw + 1) * n]
                                for q in range(ow):
                                    for k in range(n):
                                        cr[q * n + k] = xr[q * sw * n + k]
                            dst += row


def im2col(x, kernel, out, stride, dilation):
    """Columns [C, kd, kh, kw, od, oh, ow, N] of the padded ``x`` [C, Dp, Hp, Wp, N] (C-contiguous,
    numpy float32/float64) for windows ``kernel`` at ``stride``/``dilation``, ``out`` =
    (od, oh, ow) output positions."""
    c, dp, hp, wp, n = x.shape
    cols = np.empty((c,) + tuple(kernel) + tuple(out) + (n,), x.dtype)
    _im2col3(x.reshape(-1), cols.reshape(-1), (c,) + tuple(kernel) + tuple(out) + (n, dp, hp, wp) + tuple(stride) +
             tuple(dilation))
    return cols


def col2im(cols, out, stride, dilation):
    """``cols`` [C, kd, kh, kw, od, oh, ow, N] summed into the zero ``out`` [C, Dp, Hp, Wp, N]
    (both C-contiguous, numpy float32/float64) at the windows of ``stride``/``dilation``."""
    c, kd, kh, kw, od, oh, ow, n = cols.shape
    _, dp, hp, wp, _ = out.shape
    _col2im3(cols.reshape(-1), out.reshape(-1), (c, kd, kh, kw, od, oh, ow, n, dp, hp, wp) + tuple(stride) +
             tuple(dilation))


@kernel
def _pool_fwd(x, xs, geom, bins, cnt, div, y):
    """Mean of ``x`` over one box per output. ``x`` flat with element strides ``xs`` =
    (n, c, d, h, w) of a logical [N, C, D, H, W]; ``geom`` = (N, C, H, W, OD, OH, OW);
    ``bins`` [3, 2, O] int64: per spatial axis the [start, end) of each output's window,
    clipped to the input; ``cnt`` [3, O] float64: per axis the count a mean divides by (the
    divisor is their product, or ``div`` when > 0). ``y`` [N, C, OD, OH, OW] flat
    (overwritten). Means are summed in float64. Window rows are read as (strided) slices
    indexed from 0 (no negative-index check per element)."""
    n_n, c_n, h_n, w_n, od, oh, ow = geom
    o = 0
    for n in range(n_n):
        for c in range(c_n):
            base = n * xs[0] + c * xs[1]
            for a in range(od):
                d0, d1 = bins[0, 0, a], bins[0, 1, a]
                for i in range(oh):
                    h0, h1 = bins[1, 0, i], bins[1, 1, i]
                    for j in range(ow):
                        w0, w1 = bins[2, 0, j], bins[2, 1, j]
                        acc = 0.0
                        for d in range(d0, d1):
                            for h in range(h0, h1):
                                p = base + d * xs[2] + h * xs[3]
                                xr = x[p + w0 * xs[4]:p + (w1 - 1) * xs[4] + 1:xs[4]]
                                for t in range(w1 - w0):
                                    acc += xr[t]
                        y[o] = acc / (div if div > 0 else cnt[0, a] * cnt[1, i] * cnt[2, j])
                        o += 1


@kernel
def _pool_bwd(g, gx, geom, bins, cnt, div):
    """The adjoint of ``_pool_fwd``: ``g`` [N, C, OD, OH, OW] flat, ``gx`` [N, C, D, H, W]
    flat C-contiguous (zeroed by the caller) gains each output's gradient spread over its
    window divided by the mean's divisor."""
    n_n, c_n, h_n, w_n, od, oh, ow = geom
    plane = gx.size // (n_n * c_n)
    o = 0
    for q in range(n_n * c_n):
        base = q * plane
        for a in range(od):
            d0, d1 = bins[0, 0, a], bins[0, 1, a]
            for i in range(oh):
                h0, h1 = bins[1, 0, i], bins[1, 1, i]
                for j in range(ow):
                    w0, w1 = bins[2, 0, j], bins[2, 1, j]
                    v = g[o] / (div if div > 0 else cnt[0, a] * cnt[1, i] * cnt[2, j])
                    for d in range(d0, d1):
                        for h in range(h0, h1):
                            p = base + (d * h_n + h) * w_n
                            for w in range(w0, w1):
                                gx[p + w] += v
                    o += 1


def flat_strided(a):
    """``a`` as (flat buffer, element strides) without a copy when its memory is one dense
    block in some axis order (NCHW, batch-innermost, ...), else after a C-contiguous copy."""
    order = sorted(range(a.ndim), key=lambda i: -a.strides[i])
    b = a.transpose(order)
    if not b.flags.c_contiguous:
        a = np.ascontiguousarray(a)
        b = a
    return b.reshape(-1), tuple(st // a.itemsize for st in a.strides)


def pool_forward(x, bins, cnt, div):
    """Mean pooling of ``x`` [N, C, *S] (1 to 3 spatial axes, numpy float32/float64,
    any dense layout) over per-axis windows ``bins`` (list of (starts, ends) int arrays,
    clipped to the input) with per-axis mean counts ``cnt`` (list of float arrays) or the
    divisor ``div`` (> 0). Returns the C-contiguous output [N, C, *O] and the state
    ``pool_backward`` takes."""
    nd = x.ndim - 2
    n, c = x.shape[:2]
    x5 = x[(slice(None), slice(None)) + (None,) * (3 - nd)]
    sp = x5.shape[2:]
    o = [1] * (3 - nd) + [len(b[0]) for b in bins]
    size = max(o)
    bb = np.zeros((3, 2, size), np.int64)
    cc = np.ones((3, size), np.float64)
    for ax in range(3):
        if ax < 3 - nd:
            bb[ax, 1, 0] = 1
            continue
        st, en = bins[ax - (3 - nd)]
        bb[ax, 0, :len(st)], bb[ax, 1, :len(en)] = st, en
        if cnt is not None:
            cc[ax, :len(st)] = cnt[ax - (3 - nd)]
    xf, xs = flat_strided(x5)
    y = np.empty((n, c) + tuple(o), x.dtype)
    geom = (n, c, sp[1], sp[2], o[0], o[1], o[2])
    _pool_fwd(xf, xs, geom, bb, cc, float(div or 0.0), y.reshape(-1))
    return y.reshape((n, c) + tuple(o[3 - nd:])), (bb, cc, geom)


def pool_backward(g, x_shape, state, div):
    """The input gradient [N, C, *S] (C-contiguous) of ``pool_forward`` for the output
    gradient ``g``; ``state`` is the second value ``pool_forward`` returned."""
    bb, cc, geom = state
    gx = np.zeros(x_shape, g.dtype)
    _pool_bwd(np.ascontiguousarray(g).reshape(-1), gx.reshape(-1), geom, bb, cc, float(div or 0.0))
    return gx


def usable(*arrays):
    """Whether the compiled loops take these arrays: numpy float32/float64, one dtype."""
    dt = arrays[0].dtype
    return all(type(a) is np.ndarray and a.dtype == dt for a in arrays) and dt in (np.float32, np.float64)


def _geom(x4, w, groups, stride, dilation, oh, ow):
    c, hp, wp, n = x4.shape
    o, cg, kh, kw = w.shape
    return (hp, wp, n, o, oh, ow, kh, kw, stride[0], stride[1], dilation[0], dilation[1], o // groups, cg)


def direct_forward(x4, w, groups, stride, dilation, oh, ow):
    """Grouped direct convolution of the padded ``x4`` [C, Hp, Wp, N] (C-contiguous) with
    ``w`` [O, C/groups, kh, kw]: the output [N, O, OH, OW] (a batch-innermost view)."""
    y = np.empty((w.shape[0], oh, ow, x4.shape[3]), x4.dtype)
    _direct_fwd(x4.reshape(-1), np.ascontiguousarray(w).reshape(-1), y.reshape(-1),
                _geom(x4, w, groups, stride, dilation, oh, ow))
    return y.transpose(3, 0, 1, 2)


def direct_backward(x4, w, gy, groups, stride, dilation, need_x, need_w):
    """Gradients of ``direct_forward`` for the output gradient ``gy`` [N, O, OH, OW]: the
    padded input's gradient [N, C, Hp, Wp] (a batch-innermost view) and the weight gradient,
    each None unless asked for."""
    oh, ow = gy.shape[2:]
    g4 = np.ascontiguousarray(gy.astype(x4.dtype, copy=False).transpose(1, 2, 3, 0))
    gx = np.zeros_like(x4) if need_x else x4[:0]
    gw = np.empty(w.size, np.float64)
    _direct_bwd(x4.reshape(-1), np.ascontiguousarray(w).reshape(-1), g4.reshape(-1), gx.reshape(-1), gw,
                _geom(x4, w, groups, stride, dilation, oh, ow), bool(need_x), bool(need_w), x4.dtype.type(0))
    return (gx.transpose(3, 0, 1, 2) if need_x else None,
            gw.astype(w.dtype).reshape(w.shape) if need_w else None)


# -- Winograd F(4x4, 3x3) tile transforms (6x6 input tiles at a stride of 4, 4x4 output tiles) ----------
# The matrices (interpolation points 0, +-1, +-2 and infinity) are those of ``conv.py``'s
# ``_WINO4_*``; each kernel reads and writes every element once, like the F(2x2, 3x3) ones. The
# constants are float32 scalars: exact in both dtypes, and a float64 array keeps float64 sums.
# Column passes and the batch. A pixel of an image row [W, N] is a run of N values, and a
# tile's six columns (stride 4) are six such runs: with a small batch the loop over N is too
# short to vectorize. So a row is first split by column modulo 4 into four contiguous rows
# (one pass: N = 2 or 4 float32 values per pixel move as one or two 8-byte words, which
# vectorizes as a 4-way deinterleave), and the tile loop then runs over whole contiguous rows
# (tile tx's columns 4tx + m are entry tx of split row m, columns 4tx + 4, 4tx + 5 entry tx + 1
# of rows 0 and 1). The output side does the reverse: the tile loop writes four contiguous
# rows, then one pass interleaves them into the image row. Measured on one row of 14 to 112
# tiles, the column pass went 1.46 -> 0.66 ms (N = 2), 1.17 -> 0.64 (N = 4), 0.94 -> 0.55
# (N = 16), per 1200 rows.
@jitable
def _split4(row, d, n, u, t01, t23):
    """A row of pixels (``n`` values each) split by column modulo 4: ``d[k]`` [tiles*n] gets
    pixels 4*tx + k, for ``t01`` tiles into ``d[0]``, ``d[1]`` and ``t23`` into ``d[2]``,
    ``d[3]``. ``u``: 8-byte words per pixel; at 1 and 2 the pixels move as int64 words."""
    if u == 1:
        s64, e64 = row.view(np.int64), d.view(np.int64)
        e0, e1, e2, e3 = e64[0], e64[1], e64[2], e64[3]
        for tx in range(t01):
            e0[tx] = s64[4 * tx]
            e1[tx] = s64[4 * tx + 1]
        for tx in range(t23):
            e2[tx] = s64[4 * tx + 2]
            e3[tx] = s64[4 * tx + 3]
    elif u == 2:
        s64, e64 = row.view(np.int64), d.view(np.int64)
        e0, e1, e2, e3 = e64[0], e64[1], e64[2], e64[3]
        for tx in range(t01):
            e0[2 * tx] = s64[8 * tx]
            e0[2 * tx + 1] = s64[8 * tx + 1]
            e1[2 * tx] = s64[8 * tx + 2]
            e1[2 * tx + 1] = s64[8 * tx + 3]
        for tx in range(t23):
            e2[2 * tx] = s64[8 * tx + 4]
            e2[2 * tx + 1] = s64[8 * tx + 5]
            e3[2 * tx] = s64[8 * tx + 6]
            e3[2 * tx + 1] = s64[8 * tx + 7]
    else:
        d0, d1, d2, d3 = d[0], d[1], d[2], d[3]
        for tx in range(t01):
            q0, p0 = tx * n, 4 * tx * n
            for k in range(n):
                d0[q0 + k] = row[p0 + k]
                d1[q0 + k] = row[p0 + n + k]
        for tx in range(t23):
            q0, p0 = tx * n, 4 * tx * n
            for k in range(n):
                d2[q0 + k] = row[p0 + 2 * n + k]
                d3[q0 + k] = row[p0 + 3 * n + k]


@jitable
def _merge4(row, d, n, u, t01, t23):
    """The inverse of ``_split4``: pixels 4*tx + k of ``row`` written from ``d[k]``."""
    if u == 1:
        s64, e64 = row.view(np.int64), d.view(np.int64)
        e0, e1, e2, e3 = e64[0], e64[1], e64[2], e64[3]
        for tx in range(t01):
            s64[4 * tx] = e0[tx]
            s64[4 * tx + 1] = e1[tx]
        for tx in range(t23):
            s64[4 * tx + 2] = e2[tx]
            s64[4 * tx + 3] = e3[tx]
    elif u == 2:
        s64, e64 = row.view(np.int64), d.view(np.int64)
        e0, e1, e2, e3 = e64[0], e64[1], e64[2], e64[3]
        for tx in range(t01):
            s64[8 * tx] = e0[2 * tx]
            s64[8 * tx + 1] = e0[2 * tx + 1]
            s64[8 * tx + 2] = e1[2 * tx]
            s64[8 * tx + 3] = e1[2 * tx + 1]
        for tx in range(t23):
            s64[8 * tx + 4] = e2[2 * tx]
            s64[8 * tx + 5] = e2[2 * tx + 1]
            s64[8 * tx + 6] = e3[2 * tx]
            s64[8 * tx + 7] = e3[2 * tx + 1]
    else:
        d0, d1, d2, d3 = d[0], d[1], d[2], d[3]
        for tx in range(t01):
            q0, p0 = tx * n, 4 * tx * n
            for k in range(n):
                row[p0 + k] = d0[q0 + k]
                row[p0 + n + k] = d1[q0 + k]
        for tx in range(t23):
            q0, p0 = tx * n, 4 * tx * n
            for k in range(n):
                row[p0 + 2 * n + k] = d2[q0 + k]
                row[p0 + 3 * n + k] = d3[q0 + k]


@kernel
def _wino4_in(x, v, geom):
    """``V = B^T d B`` of the 6x6 tiles ``d`` (stride 4) in tile rows ``ty0 <= ty < ty1`` of the
    padded image ``x`` [C, Hp, Wp, N] given as rows [C*Hp, Wp*N]; ``v`` [6, 6, C*bt, tw*N]
    (bt = ty1 - ty0, overwritten); ``geom`` = (C, Hp, ty0, ty1, tw, N). Per tile row: the row
    transform over whole image rows into a scratch block, then per row the split by column
    modulo 4 and the column transform over the split rows."""
    c_n, hp, ty0, ty1, tw, n = geom
    bt = ty1 - ty0
    wn = x.shape[1]
    f2, f4, f5 = np.float32(2.0), np.float32(4.0), np.float32(5.0)
    t = np.empty((6, wn), x.dtype)
    t0, t1, t2, t3, t4, t5 = t[0], t[1], t[2], t[3], t[4], t[5]
    d = np.empty((4, (tw + 1) * n), x.dtype)
    d0, d1, d2, d3 = d[0], d[1], d[2], d[3]
    u = n * x.itemsize // 8 if (n * x.itemsize) % 8 == 0 else 0     # 8-byte words per pixel
    for c in range(c_n):
        for ty in range(ty0, ty1):
            r = c * hp + 4 * ty
            r0, r1, r2, r3, r4, r5 = x[r], x[r + 1], x[r + 2], x[r + 3], x[r + 4], x[r + 5]
            for q in range(wn):
                a0, a1, a2, a3, a4, a5 = r0[q], r1[q], r2[q], r3[q], r4[q], r5[q]
                t0[q] = f4 * a0 - f5 * a2 + a4
                t1[q] = a3 + a4 - f4 * (a1 + a2)
                t2[q] = f4 * (a1 - a2) + a4 - a3
                t3[q] = f2 * (a3 - a1) + a4 - a2
                t4[q] = f2 * (a1 - a3) + a4 - a2
                t5[q] = f4 * a1 - f5 * a3 + a5
            o = c * bt + ty - ty0
            for i in range(6):
                _split4(t[i], d, n, u, tw + 1, tw)
                v0, v1, v2, v3, v4, v5 = v[i, 0, o], v[i, 1, o], v[i, 2, o], v[i, 3, o], v[i, 4, o], v[i, 5, o]
                for q in range(tw * n):
                    a0, a1, a2, a3, a4, a5 = d0[q], d1[q], d2[q], d3[q], d0[q + n], d1[q + n]
                    v0[q] = f4 * a0 - f5 * a2 + a4
                    v1[q] = a3 + a4 - f4 * (a1 + a2)
                    v2[q] = f4 * (a1 - a2) + a4 - a3
                    v3[q] = f2 * (a3 - a1) + a4 - a2
                    v4[q] = f2 * (a1 - a3) + a4 - a2
                    v5[q] = f4 * a1 - f5 * a3 + a5


@kernel
def _wino4_in_adj(gv, out, geom):
    """The adjoint of ``_wino4_in``: tile gradients ``gv`` [6, 6, C*bt, tw*N] of tile rows ``ty0``
    to ``ty1`` added into the image rows ``out`` [C*Hp, Wp*N] (overlapping tiles add). The
    adjoint column transform writes four contiguous rows split by column modulo 4 (a tile's
    columns 4tx + 4, 4tx + 5 added into entry tx + 1 of rows 0 and 1), interleaved into the
    scratch row in one pass."""
    c_n, hp, ty0, ty1, tw, n = geom
    bt = ty1 - ty0
    wn = out.shape[1]
    f2, f4, f5 = np.float32(2.0), np.float32(4.0), np.float32(5.0)
    gr = np.empty((6, wn), out.dtype)
    d = np.empty((4, (tw + 1) * n), out.dtype)
    d0, d1, d2, d3 = d[0], d[1], d[2], d[3]
    e4, e5 = np.empty(tw * n, out.dtype), np.empty(tw * n, out.dtype)
    u = n * out.itemsize // 8 if (n * out.itemsize) % 8 == 0 else 0
    for c in range(c_n):
        for ty in range(ty0, ty1):
            o = c * bt + ty - ty0
            for i in range(6):
                gi = gr[i]
                h0, h1, h2, h3, h4, h5 = gv[i, 0, o], gv[i, 1, o], gv[i, 2, o], gv[i, 3, o], gv[i, 4, o], gv[i, 5, o]
                for q in range(tw * n):
                    g0, g1, g2, g3, g4, g5 = h0[q], h1[q], h2[q], h3[q], h4[q], h5[q]
                    d0[q] = f4 * g0
                    d1[q] = f4 * (g2 - g1 + g5) + f2 * (g4 - g3)
                    d2[q] = -(f5 * g0 + f4 * (g1 + g2) + g3 + g4)
                    d3[q] = g1 - g2 + f2 * (g3 - g4) - f5 * g5
                    e4[q] = g0 + g1 + g2 + g3 + g4
                    e5[q] = g5
                for q in range(n):
                    d0[tw * n + q] = 0.0
                    d1[tw * n + q] = 0.0
                for q in range(tw * n):   # columns 4tx + 4, 4tx + 5: entry tx + 1 of rows 0 and 1
                    d0[q + n] += e4[q]
                    d1[q + n] += e5[q]
                _merge4(gi, d, n, u, tw + 1, tw)
                for q in range((4 * tw + 2) * n, wn):   # columns past the tiles (none when Wp = 4tw + 2)
                    gi[q] = 0.0
            r = c * hp + 4 * ty
            o0, o1, o2, o3, o4, o5 = out[r], out[r + 1], out[r + 2], out[r + 3], out[r + 4], out[r + 5]
            r0, r1, r2, r3, r4, r5 = gr[0], gr[1], gr[2], gr[3], gr[4], gr[5]
            for q in range(wn):
                g0, g1, g2, g3, g4, g5 = r0[q], r1[q], r2[q], r3[q], r4[q], r5[q]
                o0[q] += f4 * g0
                o1[q] += f4 * (g2 - g1 + g5) + f2 * (g4 - g3)
                o2[q] -= f5 * g0 + f4 * (g1 + g2) + g3 + g4
                o3[q] += g1 - g2 + f2 * (g3 - g4) - f5 * g5
                o4[q] += g0 + g1 + g2 + g3 + g4
                o5[q] += g5


@kernel
def _wino4_out(m, y, geom):
    """``Y = A^T M A`` per tile: products ``m`` [6, 6, O*bt, tw*N] of tile rows ``ty0 <= ty < ty1``
    to their output rows in ``y`` [O*4*th, 4*tw*N] (overwritten); ``geom`` = (O, th, ty0, ty1,
    tw, N)."""
    o_n, th, ty0, ty1, tw, n = geom
    bt = ty1 - ty0
    f2, f4, f8 = np.float32(2.0), np.float32(4.0), np.float32(8.0)
    s = np.empty((4, 6, tw * n), y.dtype)
    d = np.empty((4, tw * n), y.dtype)
    d0, d1, d2, d3 = d[0], d[1], d[2], d[3]
    u = n * y.itemsize // 8 if (n * y.itemsize) % 8 == 0 else 0
    for o in range(o_n):
        for ty in range(ty0, ty1):
            r = o * bt + ty - ty0
            for j in range(6):
                m0, m1, m2, m3, m4, m5 = m[0, j, r], m[1, j, r], m[2, j, r], m[3, j, r], m[4, j, r], m[5, j, r]
                s0, s1, s2, s3 = s[0, j], s[1, j], s[2, j], s[3, j]
                for q in range(tw * n):
                    a1, a2, a3, a4 = m1[q], m2[q], m3[q], m4[q]
                    s0[q] = m0[q] + a1 + a2 + a3 + a4
                    s1[q] = a1 - a2 + f2 * (a3 - a4)
                    s2[q] = a1 + a2 + f4 * (a3 + a4)
                    s3[q] = a1 - a2 + f8 * (a3 - a4) + m5[q]
            for a in range(4):
                yr = y[o * 4 * th + 4 * ty + a]
                sa0, sa1, sa2, sa3, sa4, sa5 = s[a, 0], s[a, 1], s[a, 2], s[a, 3], s[a, 4], s[a, 5]
                for q in range(tw * n):   # the output columns split by column modulo 4
                    a1, a2, a3, a4 = sa1[q], sa2[q], sa3[q], sa4[q]
                    d0[q] = sa0[q] + a1 + a2 + a3 + a4
                    d1[q] = a1 - a2 + f2 * (a3 - a4)
                    d2[q] = a1 + a2 + f4 * (a3 + a4)
                    d3[q] = a1 - a2 + f8 * (a3 - a4) + sa5[q]
                _merge4(yr, d, n, u, tw, tw)


@kernel
def _wino4_out_adj(gy, gm, geom):
    """The adjoint of ``_wino4_out``: output-gradient rows ``gy`` [O*4*th, 4*tw*N] of tile rows
    ``ty0`` to ``ty1`` to the products' gradients ``gm`` [6, 6, O*bt, tw*N] (overwritten)."""
    o_n, th, ty0, ty1, tw, n = geom
    bt = ty1 - ty0
    f2, f4, f8 = np.float32(2.0), np.float32(4.0), np.float32(8.0)
    gs = np.empty((4, 6, tw * n), gy.dtype)
    d = np.empty((4, tw * n), gy.dtype)
    d0, d1, d2, d3 = d[0], d[1], d[2], d[3]
    u = n * gy.itemsize // 8 if (n * gy.itemsize) % 8 == 0 else 0
    for o in range(o_n):
        for ty in range(ty0, ty1):
            for a in range(4):
                g = gy[o * 4 * th + 4 * ty + a]
                s0, s1, s2, s3, s4, s5 = gs[a, 0], gs[a, 1], gs[a, 2], gs[a, 3], gs[a, 4], gs[a, 5]
                _split4(g, d, n, u, tw, tw)   # the gradient row split by column modulo 4
                for q in range(tw * n):
                    e0, e1, e2, e3 = d0[q], d1[q], d2[q], d3[q]
                    s0[q] = e0
                    s1[q] = e0 + e1 + e2 + e3
                    s2[q] = e0 - e1 + e2 - e3
                    s3[q] = e0 + f2 * e1 + f4 * e2 + f8 * e3
                    s4[q] = e0 - f2 * e1 + f4 * e2 - f8 * e3
                    s5[q] = e3
            r = o * bt + ty - ty0
            for j in range(6):
                u0, u1, u2, u3 = gs[0, j], gs[1, j], gs[2, j], gs[3, j]
                m0, m1, m2, m3, m4, m5 = gm[0, j, r], gm[1, j, r], gm[2, j, r], gm[3, j, r], gm[4, j, r], gm[5, j, r]
                for q in range(tw * n):
                    e0, e1, e2, e3 = u0[q], u1[q], u2[q], u3[q]
                    m0[q] = e0
                    m1[q] = e0 + e1 + e2 + e3
                    m2[q] = e0 - e1 + e2 - e3
                    m3[q] = e0 + f2 * e1 + f4 * e2 + f8 * e3
                    m4[q] = e0 - f2 * e1 + f4 * e2 - f8 * e3
                    m5[q] = e3


def wino4_in(x4, th, tw, ty0=0, ty1=None):
    """``B^T d B`` of the 6x6 tiles (stride 4) in tile rows ``ty0`` to ``ty1`` (default: all
    ``th``) of the padded ``x4`` [C, 4*th+2, 4*tw+2, N] (C-contiguous): [6, 6, C, bt, tw, N]."""
    c, hp, wp, n = x4.shape
    ty1 = th if ty1 is None else ty1
    v = np.empty((6, 6, c, ty1 - ty0, tw, n), x4.dtype)
    _wino4_in(x4.reshape(c * hp, wp * n), v.reshape(6, 6, c * (ty1 - ty0), tw * n), (c, hp, ty0, ty1, tw, n))
    return v


def wino4_in_adjoint_add(gv, out, ty0=0):
    """The adjoint of ``wino4_in``: the tile gradients [6, 6, C, bt, tw, N] (C-contiguous) of tile
    rows ``ty0`` to ``ty0 + bt`` added into the image ``out`` [C, Hp, Wp, N] (C-contiguous)."""
    c, bt, tw, n = gv.shape[2:]
    hp, wp = out.shape[1:3]
    _wino4_in_adj(gv.reshape(6, 6, c * bt, tw * n), out.reshape(c * hp, wp * n), (c, hp, ty0, ty0 + bt, tw, n))
    return out


def wino4_out_into(m, y, ty0=0):
    """``A^T M A`` of the products [6, 6, O, bt, tw, N] (C-contiguous) of tile rows ``ty0`` to
    ``ty0 + bt``, written into their rows of the output ``y`` [O, 4*th, 4*tw, N] (C-contiguous)."""
    o, bt, tw, n = m.shape[2:]
    h4 = y.shape[1]
    _wino4_out(m.reshape(6, 6, o * bt, tw * n), y.reshape(o * h4, 4 * tw * n), (o, h4 // 4, ty0, ty0 + bt, tw, n))
    return y


def wino4_out_adjoint(gy, ty0=0, ty1=None):
    """The adjoint of ``wino4_out_into``: the rows of tile rows ``ty0`` to ``ty1`` (default: all)
    of [O, 4*th, 4*tw, N] (C-contiguous) -> [6, 6, O, bt, tw, N]."""
    o, h4, w4, n = gy.shape
    th, tw = h4 // 4, w4 // 4
    ty1 = th if ty1 is None else ty1
    gm = np.empty((6, 6, o, ty1 - ty0, tw, n), gy.dtype)
    _wino4_out_adj(gy.reshape(o * h4, w4 * n), gm.reshape(6, 6, o * (ty1 - ty0), tw * n), (o, th, ty0, ty1, tw, n))
    return gm


def _plane_geom(x5, w, groups, dilation, oh, ow):
    nb, c, hp, wp, n = x5.shape
    o, cg, kh, kw = w.shape
    return (nb, c, hp, wp, n, o, oh, ow, kh, kw, dilation[0], dilation[1], o // groups, cg)


def _live(w, live):
    """The taps to take, one byte per weight: all of them unless ``live`` (a mask of ``w``'s
    shape) says otherwise."""
    return np.ones(w.size, np.uint8) if live is None else np.ascontiguousarray(live, np.uint8).reshape(-1)


def plane_forward(x5, w, groups, dilation, oh, ow, live=None):
    """Stride-1 grouped direct convolution (``_plane_fwd``) of the padded ``x5`` [B, C, Hp,
    Wp, N] (C-contiguous; B = 1 for a batch-innermost image, N = 1 for NCHW) with ``w``
    [O, C/groups, kh, kw], skipping the taps where the mask ``live`` is 0 (weights that are
    zero by construction): the output [B, O, OH, OW, N] (C-contiguous)."""
    nb, _, _, wp, n = x5.shape
    y = np.empty((nb, w.shape[0], oh, ow, n), x5.dtype)
    acc = np.empty((oh - 1) * wp * n + ow * n, x5.dtype)
    _plane_fwd(x5.reshape(-1), np.ascontiguousarray(w).reshape(-1), _live(w, live), y.reshape(-1), acc,
               _plane_geom(x5, w, groups, dilation, oh, ow))
    return y


def plane_backward(x5, w, g5, groups, dilation, need_x, need_w, live=None):
    """Gradients of ``plane_forward`` for the output gradient ``g5`` [B, O, OH, OW, N]
    (C-contiguous, the input's dtype): the padded input's gradient [B, C, Hp, Wp, N] and the
    weight gradient (0 at the taps ``live`` leaves out), each None unless asked for."""
    oh, ow = g5.shape[2:4]
    hp, wp, n = x5.shape[2:]
    kh, kw = w.shape[2:]
    gx = np.empty_like(x5) if need_x else x5[:0]
    gw = np.empty(w.size, np.float64)
    g = np.empty(((kh - 1) * dilation[0] * wp + (kw - 1) * dilation[1] + hp * wp) * n, x5.dtype)
    _plane_bwd(x5.reshape(-1), np.ascontiguousarray(w).reshape(-1), _live(w, live), g5.reshape(-1), gx.reshape(-1),
               gw, g, _plane_geom(x5, w, groups, dilation, oh, ow), bool(need_x), bool(need_w), x5.dtype.type(0))
    return (gx if need_x else None), (gw.astype(w.dtype).reshape(w.shape) if need_w else None)


def to_batch_inner(x, out, offsets):
    """Write the C-contiguous ``x`` [N, C, *S] (1 to 3 spatial axes, numpy float32/float64)
    into ``out`` [C, *Sp, N] (C-contiguous, same dtype) at the spatial ``offsets``."""
    nd = x.ndim - 2
    one = (1,) * (3 - nd)
    n, c = x.shape[:2]
    sp, spo, off = one + tuple(x.shape[2:]), one + tuple(out.shape[1:-1]), (0,) * (3 - nd) + tuple(offsets)
    _to_batch_inner(x.reshape(-1), out.reshape(-1), (n, c) + sp + spo + off)


def _phase_geom(f_shape, out, s, p0):
    nd = len(s)
    one = (1,) * (3 - nd)
    zero = (0,) * (3 - nd)
    return (f_shape[0], f_shape[1]) + one + tuple(f_shape[2:2 + nd]) + (f_shape[-1],) + one + tuple(out) + one + \
        tuple(s) + zero + tuple(p0)


def phase_out(f, out, s, p0):
    """The output [C, *out, N] of the phases ``f`` [P, C, *J, N] (C-contiguous, numpy
    float32/float64) of a transposed convolution with stride ``s`` cropped at ``p0``."""
    y = np.empty((f.shape[1],) + tuple(out) + (f.shape[-1],), f.dtype)
    _phase_out(f.reshape(-1), y.reshape(-1), _phase_geom(f.shape, out, s, p0))
    return y


def phase_out_planes(f, nb, c, j, out, s, p0, batch_major=True):
    """The output [B, C, *out] (NCHW) of the phases ``f`` of a 2-D transposed convolution with
    stride ``s`` cropped at ``p0`` (C-contiguous, numpy float32/float64): [B, P, C, Jh, Jw]
    when ``batch_major``, else [P, C, B, Jh, Jw]."""
    y = np.empty((nb, c) + tuple(out), f.dtype)
    pl = j[0] * j[1]
    st = (int(np.prod(s)) * c * pl, pl) if batch_major else (pl, nb * pl)
    _phase_out_planes(f.reshape(-1), y.reshape(-1), (nb, c) + tuple(j) + tuple(out) + tuple(s) + tuple(p0) + st)
    return y


def phase_in_planes(gy, j, s, p0, dtype, batch_major=True, tail=0, out=None):
    """The phases of the output gradient ``gy`` [B, C, OH, OW] (any dense layout, read in
    place), zero where no output position maps: [B, P, C, Jh, Jw] when ``batch_major``, else
    [P, C, B, Jh, Jw]; its buffer is followed by ``tail`` zeros (for shifted views). With
    ``out`` (a zeroed C-contiguous array of that size and dtype), written there."""
    nb, c = gy.shape[:2]
    p = int(np.prod(s))
    flat, st = flat_strided(gy.astype(dtype, copy=False))
    pl = j[0] * j[1]
    shape = ((nb, p, c) if batch_major else (p, c, nb)) + tuple(j)
    if out is not None:
        g = out.reshape(shape)
    else:
        g = np.zeros(int(np.prod(shape)) + tail, dtype)[:int(np.prod(shape))].reshape(shape)
    fs = (p * c * pl, pl) if batch_major else (pl, nb * pl)
    _phase_in_planes(flat, g.reshape(-1), (nb, c) + tuple(j) + tuple(gy.shape[2:]) + tuple(s) + tuple(p0) + fs + st)
    return g


def wino4_out_phase(m, c, th, tw, jd, n, out, s, p0):
    """The output [C, OH, OW, OD, N] (``out`` = (OD, OH, OW)) of a 3-D transposed convolution
    with stride ``s`` cropped at ``p0`` from the Winograd products [6, 6, P*C, th, tw, Jd*N]
    (C-contiguous, numpy float32/float64) of its phase windows (see ``_wino4_out_phase``):
    ``wino4_out_into`` and the phase interleave in one pass."""
    y = np.empty((c,) + tuple(out[1:]) + (out[0], n), m.dtype)
    wino4_out_phase_into(m, y, th, tw, jd, n, out, s, p0)
    return y


def wino4_out_phase_into(m, y, th, tw, jd, n, out, s, p0):
    """``wino4_out_phase`` written into ``y`` [C, OH, OW, OD, N] (C-contiguous, overwritten);
    ``m`` holds the products of those C channels (any C-contiguous shape of that size)."""
    _wino4_out_phase(m.reshape(6, 6, -1, tw * jd * n), y.reshape(-1),
                     (y.shape[0], th, tw, jd, n) + tuple(out) + tuple(s) + tuple(p0))


def wino4_out_phase_adjoint(gy, c, th, tw, jd, s, p0, dtype):
    """The adjoint of ``wino4_out_phase``: the output gradient ``gy`` [N, C, OD, OH, OW] (any
    layout; read in place when dense) to the products' gradients [6, 6, P*C, th, tw, Jd*N]."""
    flat, st = flat_strided(gy.astype(dtype, copy=False))
    n, p = gy.shape[0], int(np.prod(s))
    gm = np.empty((6, 6, p * c, th, tw, jd * n), dtype)
    _wino4_out_phase_adj(flat, gm.reshape(6, 6, -1, tw * jd * n),
                         (c, th, tw, jd, n) + tuple(gy.shape[2:]) + tuple(s) + tuple(p0) + st)
    return gm


def phase_in(gy, j, s, p0, dtype):
    """The phases [P, C, *J, N] of the output gradient ``gy`` [N, C, *out] (any layout; read
    in place when dense, NCHW or batch-innermost), zero where no output position maps."""
    n, c = gy.shape[:2]
    flat, st = flat_strided(gy.astype(dtype, copy=False))
    st = st[:2] + (0,) * (5 - len(st)) + st[2:]                 # a 2-D one: depth 1
    g = np.zeros((int(np.prod(s)), c) + tuple(j) + (n,), dtype)
    _phase_in(flat, g.reshape(-1), _phase_geom(g.shape, gy.shape[2:], s, p0) + st)
    return g
