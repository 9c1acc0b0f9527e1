"""1-D convolutions and 1-D transposed convolutions (one group, numpy float32/float64) on the
compiled register tiles of ``conv1d_kernels`` (float32, gates ``_kernel_pays`` and
``_kernel_transpose_pays``) or as three matrix products on channel-major arrays, for
``Conv2d`` / ``Conv2dTranspose`` on a height-1 image with a height-1 kernel.

Convolution, input ``x`` [N, C, 1, L], weight ``w`` [O, C, 1, k], stride s, dilation d:

* forward: the input padded into ``[N, C, Lp]``, its columns ``[C*k, N*OL]`` one strided
  copy (entry ``[(c, j), (n, l)] = xpad[n, c, l*s + j*d]``), the output ``w [O, C*k] @ cols``
  as ``[O, N*OL]`` (handed out as a transposed view ``[N, O, 1, OL]``);
* weight gradient: ``gy [O, N*OL] @ cols^T``, written in the weight's own layout when the
  weight is large (``GW_DIRECT_MIN``), where a transposed result would cost a transposing
  pass over it when the gradient is accumulated;
* input gradient: at stride 1 with a weight of at most half the columns' size, the
  convolution of the padded output gradient with the flipped, transposed kernel (its
  columns are one strided copy, the product ``[C, O*k] @ gcols``; 0.86-0.9x the time of the
  scatter below at 32-64 channels on 6-10 positions); otherwise (e.g. 512 channels on 12
  positions, where the flipped weight copy cost more than the whole product; 0.95-0.97x at
  256 channels on 49) ``w^T @ gy`` as columns, overlap-added into the padded input (k
  strided adds);
* float32 where ``_kernel_pays``: the compiled register tiles (see ``_kernel_forward``; a
  stride below the kernel over the input's phases, ``_kernel_strided_forward``), in the
  layer's own layouts;
* at stride 1 with at most ``SHIFT_MAX_C`` channels otherwise (float64): shifted products on
  channel-major rows of the input, without columns (see ``_shift_forward``).

Transposed convolution (the adjoint), input ``x`` [N, Cin, 1, L], weight ``[Cin, Cout, 1,
k]``: forward ``w^T @ x`` as columns ``[Cout*k, N*L]`` overlap-added into the output (k
strided adds), backward the output gradient's columns (one strided copy) times ``w`` for the
input gradient and times ``x`` for the weight gradient (float32 where
``_kernel_transpose_pays``: the stride's phases on the compiled tiles instead, see
``_kernel_transpose_forward``). No copy of the weight is made
(the phase products of ``conv_phase`` gather the weight into phase order both ways and
write the weight gradient through an index permutation: at 512 channels that cost more
than the products).
"""
import numpy as np

from . import conv_kernels as K

#: weights of at least this many elements get their gradient as ``gy @ cols^T`` in their own
#: layout; smaller ones as ``(cols @ gy^T)^T`` (OpenBLAS ran that orientation up to 1.5x faster
#: on long, thin operands, and transposing a small gradient is cheap)
GW_DIRECT_MIN = 1 << 16

#: the column and shifted products take a convolution from this many input and output channels
#: (fewer: the whole-plane loop and the per-sample columns of ``conv.py``; the compiled tiles
#: have their own gate, ``_kernel_pays``)
MIN_CHANNELS = 9

#: where the shifted products do not apply, a convolution takes the columns here when its
#: weight has at least this many times the input's elements
COLS_WEIGHT_RATIO = 2

#: a transposed convolution takes this path from this many input or output channels; fewer go
#: to the phases of ``conv_phase`` (whole planes up to 8 channels, column products up to 128;
#: from 16 to 128 channels the two ran within 0.84-1.13x of each other)
TRANSPOSE_MIN_CHANNELS = 129
#: ... and at batches up to this from 9 channels in and out (the input is channel-major as it
#: comes at batch 1: 0.86-0.97x the phases' time)
TRANSPOSE_SMALL_BATCH = 1


def usable(x, w, b, groups, pads, stride, ol, dilation=1):
    """Whether ``Conv2d`` runs ``x`` [N, C, H, W] with ``w`` as a 1-D convolution here (to
    ``ol`` outputs at ``stride``): the compiled tiles or the shifted products where they pay, the columns for a
    weight at least twice the input's size. Smaller weights keep the batch-innermost im2col
    (with short sequences the strided copies here run on short rows: 1.12-1.36x its time at
    32-64 channels on 6-10 positions)."""
    if not (x.ndim == 4 and x.shape[2] == 1 and w.shape[2] == 1 and groups == 1 and pads[0] == pads[1] == 0
            and K.usable(x, w, *b)):
        return False
    lp = x.shape[3] + pads[2] + pads[3]
    n, c = x.shape[:2]
    if _kernel_pays(x, c, w.shape[0], w.shape[3], stride, ol, dilation):
        return True
    if min(c, w.shape[0]) < MIN_CHANNELS:
        return False
    return _shifts_pay(n, c, w.shape[0], w.shape[3], stride, lp, ol) or w.size >= COLS_WEIGHT_RATIO * x.size


def _cols(a, k, s, d, ol):
    """The columns ``[C*k, N*ol]`` of ``a`` [N, C, Lp] (C-contiguous): entry ``[(c, j), (n, l)]
    = a[n, c, l*s + j*d]``."""
    n, c, lp = a.shape
    e = a.itemsize
    v = np.lib.stride_tricks.as_strided(a, (c, k, n, ol), (lp * e, d * e, c * lp * e, s * e))
    return np.ascontiguousarray(v).reshape(c * k, n * ol)


def _overlap_add(cols, n, c, k, l, s, d, lp):
    """The adjoint of ``_cols``: ``cols`` [C*k, N*l] added into a zero ``[N, C, lp]`` at
    positions ``i*s + j*d``."""
    out = np.zeros((n, c, lp), cols.dtype)
    ov = out.transpose(1, 0, 2)
    c4 = cols.reshape(c, k, n, l)
    for j in range(k):
        ov[:, :, j * d:j * d + (l - 1) * s + 1:s] += c4[:, j]
    return out


def _channel_major(a):
    """``a`` [N, C, L] as the C-contiguous matrix ``[C, N*L]`` (free at batch 1)."""
    n, c, l = a.shape
    return np.ascontiguousarray(a.transpose(1, 0, 2)).reshape(c, n * l)


def _wgrad(g, cols):
    """``g [A, K] @ cols[B, K]^T`` as a C-contiguous ``[A, B]`` array."""
    if g.shape[0] * cols.shape[0] >= GW_DIRECT_MIN:
        return g @ cols.T
    return np.ascontiguousarray((cols @ g.T).T)


def _shifts_pay(n, c, o, k, stride, lp, ol):
    """Whether a convolution runs as shifted products (``_shift_forward``): stride 1, at most
    ``SHIFT_MAX_C`` channels, a padded input of at least ``SHIFT_MIN_SIZE`` elements (on
    smaller ones the 2k products' calls cost more than im2col's copies: 1.1x its time at
    [8, 16, 64]) and the junk columns (``lp - ol`` of every ``lp``) at most an eighth of the
    products."""
    return (stride == 1 and k > 1 and max(c, o) <= SHIFT_MAX_C and n * c * lp >= SHIFT_MIN_SIZE
            and 8 * (lp - ol) <= lp)


def _kernel_pays(x, c, o, k, stride, ol, dilation=1):
    """Whether a convolution runs on the compiled tiles (``_kernel_forward``): float32, stride
    1 (or a stride below the kernel without dilation: ``_kernel_strided_forward``, up to
    ``KERNEL_MAX_C`` channels: at 256 channels, k=3 s=2, 0.75x the column products' speed),
    at least ``KERNEL_MIN_C`` input channels (the tile's loop runs over them: 0.35-0.8x the
    plane loop's speed at 1-4, 1.4-2.3x at 8) and, at 8, as many outputs (8-row tiles: 8 ->
    2-6 channels ran 0.64-0.71x the plane loop's speed; 16 -> 1 2.1x im2col's), at least ``KERNEL_MIN_L`` outputs per sample
    (a tile spans 16 positions: on 10 positions 1.2x the time of the column products at 64
    channels, on 6 1.3x at 32), at most ``KERNEL_MAX_C`` channels in and out, or up to
    ``KERNEL_WIDE_C`` with at least ``KERNEL_WIDE_COLS`` outputs over the batch (the weight's
    transposed copies cost a pass over it each: 0.6x OpenBLAS's time at 512 channels on 4 x
    16 positions, 0.87x at 256 on 8 x 49; 1.08-1.24x at 192-256 channels on 1024-4096)."""
    if not (k > 1 and x.dtype == np.float32 and ol >= KERNEL_MIN_L and c >= KERNEL_MIN_C
            and (c > KERNEL_MIN_C or o >= KERNEL_MIN_C)):
        return False
    if stride > 1:
        return dilation == 1 and stride < k and max(c, o) <= KERNEL_MAX_C
    return max(c, o) <= KERNEL_MAX_C or max(c, o) <= KERNEL_WIDE_C and x.shape[0] * ol >= KERNEL_WIDE_COLS


def forward(x, w, b, stride, pads, dilation, ol):
    """``Conv2d`` of ``x`` [N, C, 1, L] with ``w`` [O, C, 1, k] (bias ``b``: () or (b,)),
    stride, dilation and (left, right) padding along the length, to ``ol`` outputs: the output
    [N, O, 1, ol] and the state ``backward`` takes."""
    n, c, _, l = x.shape
    o, _, _, k = w.shape
    pl, pr = pads
    s, d = stride, dilation
    lp = l + pl + pr
    if _kernel_pays(x, c, o, k, s, ol, d):
        if s > 1:
            return _kernel_strided_forward(x, w, b, s, pads, ol)
        return _kernel_forward(x, w, b, pads, d, ol)
    if _shifts_pay(n, c, o, k, s, lp, ol):
        return _shift_forward(x, w, b, pads, d, ol)
    if pl or pr:
        xp = np.zeros((n, c, lp), x.dtype)
        xp[:, :, pl:pl + l] = x[:, :, 0]
    else:
        xp = np.ascontiguousarray(x[:, :, 0])
    cols = _cols(xp, k, s, d, ol)
    y = w.reshape(o, c * k) @ cols                                   # [O, N*ol]
    if b:
        y += b[0].reshape(o, 1)
    return y.reshape(o, n, 1, ol).transpose(1, 0, 2, 3), (cols, w, (n, c, l), pads, s, d, ol)


def backward(state, gy, need_x, need_w):
    """The gradients of ``forward`` (x's [N, C, 1, L], w's [O, C, 1, k]) for ``gy`` [N, O, 1, ol]."""
    if isinstance(state[0], str):
        back = {"tiles": _kernel_backward, "strided tiles": _kernel_strided_backward}.get(state[0], _shift_backward)
        return back(state, gy, need_x, need_w)
    cols, w, (n, c, l), (pl, pr), s, d, ol = state
    o, k = w.shape[0], w.shape[3]
    g2 = _channel_major(gy.reshape(n, o, ol).astype(w.dtype, copy=False))     # [O, N*ol]
    gx = gw = None
    if need_w:
        gw = _wgrad(g2, cols).reshape(w.shape)
    if need_x:
        fh = d * (k - 1)
        if s == 1 and max(pl, pr) <= fh and 2 * w.size <= cols.size:
            # the convolution of the padded output gradient with the flipped, transposed kernel
            lg = l + fh
            gp = np.zeros((n, o, lg), w.dtype)
            gp[:, :, fh - pl:fh - pl + ol] = g2.reshape(o, n, ol).transpose(1, 0, 2)
            wf = np.ascontiguousarray(w[:, :, 0, ::-1].transpose(1, 0, 2)).reshape(c, o * k)
            gxm = wf @ _cols(gp, k, 1, d, l)                                       # [C, N*L]
            gx = gxm.reshape(c, n, 1, l).transpose(1, 0, 2, 3)
        else:
            gc = w.reshape(o, c * k).T @ g2                                        # [C*k, N*ol]
            gx = _overlap_add(gc, n, c, k, ol, s, d, l + pl + pr)[:, :, None, pl:pl + l]
    return gx, gw


# -- stride 1 with few channels: shifted products, no columns ------------------------------------
# The input is copied once, padded, into a channel-major row per channel, ``xc`` [C, N*Lp + fh]
# (fh = d*(k-1) trailing zeros); output position i of sample n sits at column n*Lp + i of the
# products, and tap j is the shift j*d: ``y = sum_j w_j [O, C] @ xc[:, j*d:j*d + N*Lp]``, whose
# columns i >= ol of each sample are junk (dropped by the view handed out). The columns (k times
# the input) are never written; their copy and product cost 1.3x these k products at 16
# channels on 400 positions. Backward lays the output gradient on the same columns (junk zero,
# fh zeros before it): the input gradient is ``sum_j w_j^T @ g`` shifted back by j*d, the
# weight gradient k products ``g @ xc_j^T``.
SHIFT_MAX_C = 128
SHIFT_MIN_SIZE = 1 << 15


def _shift_forward(x, w, b, pads, d, ol):
    n, c, _, l = x.shape
    o, k = w.shape[0], w.shape[3]
    pl, pr = pads
    lp, fh = l + pl + pr, d * (k - 1)
    m = n * lp
    xc = np.zeros((c, m + fh), x.dtype)
    xc[:, :m].reshape(c, n, lp)[:, :, pl:pl + l] = x[:, :, 0].transpose(1, 0, 2)
    wj = np.ascontiguousarray(w[:, :, 0].transpose(2, 0, 1))                      # [k, O, C]
    y = wj[0] @ xc[:, :m]
    t = np.empty_like(y)
    for j in range(1, k):
        np.matmul(wj[j], xc[:, j * d:j * d + m], out=t)
        y += t
    if b:
        y += b[0].reshape(o, 1)
    y = y.reshape(o, n, 1, lp)[:, :, :, :ol].transpose(1, 0, 2, 3)
    return y, ("shift", xc, w, (n, c, l), pads, d, ol)


#: elements of the input's columns built at a time for the weight gradient of the shifted
#: products (a cache-sized block)
SHIFT_GW_BLOCK = 1 << 17


def _shift_wgrad(g, xc, k, d, m):
    """The weight gradient ``[O, C*k]`` of the shifted products for the output gradient ``g``
    [O, m] (junk columns zero): the input's columns built a block of ``SHIFT_GW_BLOCK``
    elements at a time (one strided copy each, in cache) and multiplied as they come; the k
    products ``g @ xc_j^T`` over all m columns ran 1.4x slower (16 channels, 12928 columns)."""
    c, o = xc.shape[0], g.shape[0]
    e = xc.itemsize
    b = max(64, min(m, SHIFT_GW_BLOCK // (c * k)))
    buf = np.empty(c * k * b, xc.dtype)
    acc = np.zeros((c * k, o), xc.dtype)
    for s0 in range(0, m, b):
        bl = min(b, m - s0)
        blk = buf[:c * k * bl].reshape(c, k, bl)
        np.copyto(blk, np.lib.stride_tricks.as_strided(xc[:, s0:], (c, k, bl), (xc.strides[0], d * e, e)))
        acc += blk.reshape(c * k, bl) @ g[:, s0:s0 + bl].T
    return np.ascontiguousarray(acc.T)


def _shift_backward(state, gy, need_x, need_w):
    _, xc, w, (n, c, l), (pl, pr), d, ol = state
    o, k = w.shape[0], w.shape[3]
    lp, fh = l + pl + pr, d * (k - 1)
    m = n * lp
    g = np.zeros((o, fh + m), w.dtype)
    g[:, fh:].reshape(o, n, lp)[:, :, :ol] = gy[:, :, 0].transpose(1, 0, 2)
    gx = gw = None
    if need_w:
        gw = _shift_wgrad(g[:, fh:], xc, k, d, m).reshape(w.shape)
    if need_x:
        wt = np.ascontiguousarray(w[:, :, 0].transpose(2, 1, 0))                  # [k, C, O]
        gxf = wt[0] @ g[:, fh:]
        t = np.empty_like(gxf)
        for j in range(1, k):
            np.matmul(wt[j], g[:, fh - j * d:fh - j * d + m], out=t)
            gxf += t
        gx = gxf.reshape(c, n, 1, lp)[:, :, :, pl:pl + l].transpose(1, 0, 2, 3)
    return gx, gw


# -- stride 1, float32, few channels: compiled register tiles -----------------------------------
# ``conv1d_kernels.conv_rows`` keeps an output tile of 8 channels x 16 positions in registers
# through every tap and input channel; the output comes out as [N, O, ol], the input gradient
# as [N, C, L] (the same kernel on the transposed weight and the padded output gradient, at
# mirrored offsets), the weight gradient per tap from the input laid position-major. 16
# channels on 32 x 400 positions: forward, input and weight gradient 0.38 / 0.38 / 0.37 ms
# (copies included) against 0.61 / 0.62 / 0.68 for the shifted products; ~100-117 GFLOP/s in
# the kernels from 16 to 128 channels.
KERNEL_MAX_C = 128
KERNEL_MIN_C = 8
KERNEL_MIN_L = 16
KERNEL_WIDE_C = 384
KERNEL_WIDE_COLS = 1024


#: elements of the two operands of ``conv1d_kernels.conv_wgrad`` taken a chunk of samples at a
#: time (about half of L2)
WGRAD_CHUNK = 1 << 17


#: weights of ``conv1d_kernels.conv_rows`` up to this many elements stay in L1: each block of
#: 16 output positions goes through every row tile in turn
ROWS_L1_WEIGHT = 1 << 12
#: larger weights stream once per this many elements of the input's blocks (in L2)
ROWS_L2_INPUT = 1 << 16


def _row_units(a, k, span):
    """Blocks of 16 output positions per pass of ``conv_rows`` over the weight ``a`` (``k``
    input rows, taps reaching ``span`` positions past a block)."""
    if a.size <= ROWS_L1_WEIGHT:
        return 1
    return max(1, ROWS_L2_INPUT // (k * (16 + span)))


def _wgrad_chunk(g, xt):
    """Samples per chunk of ``conv_wgrad`` for ``g`` [N, O, Q] and ``xt`` [N, Lp, C]."""
    return max(1, WGRAD_CHUNK // max(1, g.shape[1] * g.shape[2] + xt.shape[1] * xt.shape[2]))


def _kernel_array(a, dtype=None):
    """``a`` as a C-contiguous, writable array for the kernels (a read-only one, such as a
    broadcast gradient of ones, would compile them once more for that type)."""
    a = np.ascontiguousarray(a, dtype=dtype)
    return a if a.flags.writeable else a.copy()


def _kernel_forward(x, w, b, pads, d, ol):
    from . import conv1d_kernels as CK  # noqa: PLC0415 - numba is imported with the first such convolution
    n, c, _, l = x.shape
    o, k = w.shape[0], w.shape[3]
    pl, pr = pads
    lp = l + pl + pr
    if pl or pr:
        xp = np.zeros((n, c, lp), x.dtype)
        xp[:, :, pl:pl + l] = x[:, :, 0]
    else:
        xp = _kernel_array(x[:, :, 0])
    wj = np.ascontiguousarray(w[:, :, 0].transpose(2, 0, 1)).reshape(-1)          # [k, O, C]
    y = np.empty((n, o, ol), x.dtype)
    CK.conv_rows(wj, c, 1, o * c, xp, y, 0, int(d), int(k), _row_units(wj, c, d * (k - 1)))
    if b:
        y += b[0].reshape(o, 1)
    return y.reshape(n, o, 1, ol), ("tiles", xp, w, (n, c, l), pads, d, ol)


def _kernel_backward(state, gy, need_x, need_w):
    from . import conv1d_kernels as CK  # noqa: PLC0415
    _, xp, w, (n, c, l), (pl, pr), d, ol = state
    o, k = w.shape[0], w.shape[3]
    fh = d * (k - 1)
    g = _kernel_array(gy.reshape(n, o, ol), dtype=w.dtype)
    gx = gw = None
    if need_w:
        xt = np.ascontiguousarray(xp.transpose(0, 2, 1))                                # [N, Lp, C]
        gwj = np.zeros((k * o, c), w.dtype)
        CK.conv_wgrad(g, xt, gwj, int(k), int(d), _wgrad_chunk(g, xt))
        gw = np.ascontiguousarray(gwj.reshape(k, o, c).transpose(1, 2, 0)).reshape(w.shape)
    if need_x:
        # gx[n, c, q] = sum_j w_j^T @ gy[n, :, q + pl - j*d], gy padded by fh zeros in front
        gp = np.zeros((n, o, max(fh + pl + l, fh + ol)), w.dtype)
        gp[:, :, fh:fh + ol] = g
        # the transposed weight per tap, [k, C, O] (read in place, the weight's strides ran
        # the kernel 0.7-0.8x as fast from 192 channels on)
        wt = np.ascontiguousarray(w[:, :, 0].transpose(2, 1, 0)).reshape(-1)
        gxm = np.empty((n, c, l), w.dtype)
        CK.conv_rows(wt, o, 1, c * o, gp, gxm, int(fh + pl), -int(d), int(k), _row_units(wt, o, fh))
        gx = gxm.reshape(n, c, 1, l)
    return gx, gw


def _kernel_strided_forward(x, w, b, s, pads, ol):
    """Stride s > 1 (below the kernel, no dilation) on the compiled tiles: tap ``j = s*t + r``
    reads phase r of the padded input at shift t, so the convolution is a stride-1 one of
    ``T = ceil(k/s)`` taps over the input's phases taken as ``s*C`` input channels
    (``xph`` ``[N, s*C, M]``, the weight ``[T, O, s*C]`` zero where ``s*t + r >= k``)."""
    from . import conv1d_kernels as CK  # noqa: PLC0415
    n, c, _, l = x.shape
    o, k = w.shape[0], w.shape[3]
    pl = pads[0]
    t = -(-k // s)
    m = ol + t - 1
    xph = np.zeros((n, s, c, m), x.dtype)
    for r, m0, p0, cnt in _phase_spans(s, pl, l):
        cnt = min(cnt, m - m0)
        if cnt > 0:
            xph[:, r, :, m0:m0 + cnt] = x[:, :, 0, p0:p0 + s * (cnt - 1) + 1:s]
    wp = np.zeros((o, c, t * s), w.dtype)
    wp[:, :, :k] = w[:, :, 0]
    a = np.ascontiguousarray(wp.reshape(o, c, t, s).transpose(2, 0, 3, 1)).reshape(-1)   # [T, O, s, C]
    y = np.empty((n, o, ol), x.dtype)
    CK.conv_rows(a, s * c, 1, o * s * c, xph.reshape(n, s * c, m), y, 0, 1, int(t), _row_units(a, s * c, t - 1))
    if b:
        y += b[0].reshape(o, 1)
    return y.reshape(n, o, 1, ol), ("strided tiles", xph, wp, (n, c, l), pl, s, k, ol)


def _kernel_strided_backward(state, gy, need_x, need_w):
    from . import conv1d_kernels as CK  # noqa: PLC0415
    _, xph, wp, (n, c, l), pl, s, k, ol = state
    o, t, m = wp.shape[0], wp.shape[2] // s, xph.shape[3]
    g = _kernel_array(gy.reshape(n, o, ol), dtype=wp.dtype)
    gx = gw = None
    if need_x:
        # the input's phases: gxph[n, (r, c), m] = sum_t W_t^T @ gy[n, :, m - t]
        spans = _phase_spans(s, pl, l)
        mx = max(m0 + cnt for _, m0, _, cnt in spans)
        gp = np.zeros((n, o, max(mx, ol) + t - 1), wp.dtype)
        gp[:, :, t - 1:t - 1 + ol] = g
        a = np.ascontiguousarray(wp.reshape(o, c, t, s).transpose(2, 3, 1, 0)).reshape(-1)   # [T, s, C, O]
        gxph = np.empty((n, s, c, mx), wp.dtype)
        CK.conv_rows(a, o, 1, s * c * o, gp, gxph.reshape(n, s * c, mx), int(t - 1), -1, int(t),
                     _row_units(a, o, t - 1))
        gxm = np.empty((n, c, l), wp.dtype)
        for r, m0, p0, cnt in spans:
            if cnt:
                gxm[:, :, p0::s] = gxph[:, r, :, m0:m0 + cnt]
        gx = gxm.reshape(n, c, 1, l)
    if need_w:
        xt = np.ascontiguousarray(xph.transpose(0, 3, 1, 2)).reshape(n, m, s * c)            # [N, M, s*C]
        gwt = np.zeros((t * o, s * c), wp.dtype)
        CK.conv_wgrad(g, xt, gwt, int(t), 1, _wgrad_chunk(g, xt))
        # gwt[t*O + o, r*C + c] = gw[o, c, s*t + r]
        gw = gwt.reshape(t, o, s, c).transpose(1, 3, 0, 2).reshape(o, c, t * s)[:, :, :k]
        gw = np.ascontiguousarray(gw).reshape(o, c, 1, k)
    return gx, gw


def transpose_usable(x, w, b, groups, pads, stride=1, dilation=1):
    """Whether ``Conv2dTranspose`` runs ``x`` [N, Cin, H, W] with ``w`` [Cin, Cout, kh, kw]
    as a 1-D transposed convolution here (the compiled phases of ``_kernel_transpose_pays``
    or the column products)."""
    if not (x.ndim == 4 and x.shape[2] == 1 and w.shape[2] == 1 and groups == 1 and pads[0] == pads[1] == 0
            and K.usable(x, w, *b)):
        return False
    return (_kernel_transpose_pays(x, w, stride, dilation)
            or max(w.shape[:2]) >= TRANSPOSE_MIN_CHANNELS
            or x.shape[0] <= TRANSPOSE_SMALL_BATCH and min(w.shape[:2]) > 8)


def transpose_forward(x, w, b, stride, pads, dilation, ol):
    """``Conv2dTranspose`` of ``x`` [N, Cin, 1, L] with ``w`` [Cin, Cout, 1, k], stride,
    dilation and (left, right) crop, to ``ol`` outputs: the output [N, Cout, 1, ol] and the
    state ``transpose_backward`` takes."""
    if _kernel_transpose_pays(x, w, stride, dilation):
        return _kernel_transpose_forward(x, w, b, stride, pads[0], ol)
    n, cin, _, l = x.shape
    cout, k = w.shape[1], w.shape[3]
    pl = pads[0]
    s, d = stride, dilation
    lf = max((l - 1) * s + d * (k - 1) + 1, pl + ol)
    xm = _channel_major(x[:, :, 0])                                                 # [Cin, N*L]
    cols = w.reshape(cin, cout * k).T @ xm                                          # [Cout*k, N*L]
    y = _overlap_add(cols, n, cout, k, l, s, d, lf)[:, :, None, pl:pl + ol]
    if b:
        y += b[0].reshape(1, cout, 1, 1)
    return y, (xm, w, (n, cin, l), pl, s, d, ol, lf)


def transpose_backward(state, gy, need_x, need_w):
    """The gradients of ``transpose_forward`` for the output gradient ``gy`` [N, Cout, 1, ol]."""
    if isinstance(state[0], str):
        return _kernel_transpose_backward(state, gy, need_x, need_w)
    xm, w, (n, cin, l), pl, s, d, ol, lf = state
    cout, k = w.shape[1], w.shape[3]
    gp = np.zeros((n, cout, lf), w.dtype)
    gp[:, :, pl:pl + ol] = gy[:, :, 0]
    gc = _cols(gp, k, s, d, l)                                                       # [Cout*k, N*L]
    gx = gw = None
    if need_x:
        gx = (w.reshape(cin, cout * k) @ gc).reshape(cin, n, 1, l).transpose(1, 0, 2, 3)
    if need_w:
        gw = _wgrad(xm, gc).reshape(w.shape)
    return gx, gw


# -- transposed, float32, few channels: the phases on the compiled tiles ----------------------
# With a kernel a multiple of the stride s (T = k/s taps per phase) and no dilation, output
# position u = s*m + r of the uncropped output is ``sum_t w[:, :, r + s*t]^T @ x[:, m - t]``: a
# stride-1 convolution of T taps per phase r, one ``conv_rows`` call per phase over the
# phase's outputs inside the crop, written into the output by a strided copy. The input
# gradient is ``conv_rows`` on the output gradient split into its phases (rows (phase,
# channel), ``[N, s*Cout, Mg]``), the weight gradient ``conv_wgrad`` of the input against the
# same phases laid position-major (``[N, Mg, s*Cout]``).
#: at most this many channels in and out; at least ``KERNEL_MIN_L`` input positions
TRANSPOSE_KERNEL_MAX_C = 128


def _kernel_transpose_pays(x, w, stride, dilation):
    """float32, no dilation, a kernel a multiple of the stride, at least ``KERNEL_MIN_L``
    input positions, more than ``KERNEL_MIN_C`` channels in or out, or that many in and out
    (1.6x the phases' speed at 8 and at 3 <-> 16, 1.8x at 16 -> 2; 0.84x at 8 -> 2, 1.0x at
    2 -> 8, 0.6x at 2), at most ``TRANSPOSE_KERNEL_MAX_C`` channels in and out or up to
    ``KERNEL_WIDE_C`` with at least ``KERNEL_WIDE_COLS`` input positions over the batch (at
    256 channels 1.15x the adjoint's speed on 64 x 16 positions, 0.86x on 8 x 49)."""
    k, c = w.shape[3], max(w.shape[:2])
    if not (x.dtype == np.float32 and dilation == 1 and k % stride == 0 and x.shape[3] >= KERNEL_MIN_L
            and (c > KERNEL_MIN_C or min(w.shape[:2]) >= KERNEL_MIN_C)):
        return False
    return c <= TRANSPOSE_KERNEL_MAX_C or c <= KERNEL_WIDE_C and x.shape[0] * x.shape[3] >= KERNEL_WIDE_COLS


def _phase_weight(w, s):
    """``w`` [Cin, Cout, 1, k] as ``[T, s, Cout, Cin]``: entry ``[t, r, co, ci] = w[ci, co, 0, r + s*t]``."""
    cin, cout, _, k = w.shape
    return w[:, :, 0].reshape(cin, cout, k // s, s).transpose(2, 3, 1, 0)


def _phase_spans(s, pl, ol):
    """Per phase r of the stride s, ``(r, m0, p0, cnt)``: phase position m (uncropped output
    position ``s*m + r``) is output position ``s*m + r - pl``; the phase's first inside the crop
    is ``m0`` (output position ``p0``), and it has ``cnt`` of the ``ol`` outputs."""
    spans = []
    for r in range(s):
        m0 = max(0, -(-(pl - r) // s))
        p0 = s * m0 + r - pl
        spans.append((r, m0, p0, max(0, -(-(ol - p0) // s))))
    return spans


def _kernel_transpose_forward(x, w, b, s, pl, ol):
    from . import conv1d_kernels as CK  # noqa: PLC0415
    n, cin, _, l = x.shape
    cout, k = w.shape[1], w.shape[3]
    t = k // s
    spans = _phase_spans(s, pl, ol)
    xp = np.zeros((n, cin, max([l] + [m0 + cnt for _, m0, _, cnt in spans]) + t - 1), x.dtype)
    xp[:, :, t - 1:t - 1 + l] = x[:, :, 0]
    a = np.ascontiguousarray(_phase_weight(w, s)).reshape(-1)      # [T, s, Cout, Cin]
    y = np.empty((n, cout, ol), x.dtype)
    for r, m0, p0, cnt in spans:
        # the phase's outputs inside the crop only (one call per phase: the phases start at
        # different positions; on 16 inputs at stride 2 a shared start made 17 per phase, two
        # tiles of 16 where one does)
        if cnt:
            ph = np.empty((n, cout, cnt), x.dtype)
            ar = a[r * cout * cin:]
            CK.conv_rows(ar, cin, 1, s * cout * cin, xp, ph, int(t - 1 + m0), -1, int(t), _row_units(a, cin, t - 1))
            y[:, :, p0::s] = ph
    if b:
        y += b[0].reshape(1, cout, 1)
    return y.reshape(n, cout, 1, ol), ("tiles", x, w, s, pl, ol)


def _kernel_transpose_backward(state, gy, need_x, need_w):
    from . import conv1d_kernels as CK  # noqa: PLC0415
    _, x, w, s, pl, ol = state
    n, cin, _, l = x.shape
    cout, k = w.shape[1], w.shape[3]
    t = k // s
    mg = max(l + t - 1, -(-(pl + ol) // s))
    # the uncropped output gradient (zero outside the crop) by phase
    g = gy[:, :, 0]
    spans = _phase_spans(s, pl, ol)
    gph = np.zeros((n, s, cout, mg), w.dtype)
    for r, m0, p0, cnt in spans:
        gph[:, r, :, m0:m0 + cnt] = g[:, :, p0:p0 + s * (cnt - 1) + 1:s]
    gph = gph.reshape(n, s * cout, mg)
    gx = gw = None
    if need_x:
        a = np.ascontiguousarray(_phase_weight(w, s).transpose(0, 3, 1, 2)).reshape(-1)   # [T, Cin, s*Cout]
        gxm = np.empty((n, cin, l), w.dtype)
        CK.conv_rows(a, s * cout, 1, cin * s * cout, gph, gxm, 0, 1, int(t), _row_units(a, s * cout, t - 1))
        gx = gxm.reshape(n, cin, 1, l)
    if need_w:
        # gw[ci, co, r + s*t'] = sum gph[n, (r, co), q] * x[n, ci, q - t']: the input laid
        # position-major with t - 1 zero rows in front, tap j = t - 1 - t' its shift j (with a
        # position-major copy of the phases instead, the backward took 1.17-1.22x this time at
        # 64-128 channels on 4 x 1024 positions)
        xt = np.zeros((n, mg + t - 1, cin), w.dtype)
        xt[:, t - 1:t - 1 + l] = x[:, :, 0].transpose(0, 2, 1)
        gwt = np.zeros((t * s * cout, cin), w.dtype)
        CK.conv_wgrad(gph, xt, gwt, int(t), 1, _wgrad_chunk(gph, xt))
        # gwt[j*s*Cout + r*Cout + co, ci] = gw[ci, co, r + s*(t - 1 - j)]
        gw = gwt.reshape(t, s, cout, cin)[::-1].transpose(3, 2, 0, 1)
        gw = np.ascontiguousarray(gw).reshape(w.shape)
    return gx, gw
