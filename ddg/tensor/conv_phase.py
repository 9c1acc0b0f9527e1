"""Stride-1 convolution by depth slabs of 2-D columns, and transposed convolution by
output phases on top of it (numpy float32/float64), shared by the 2-D ops of ``conv.py``
and the N-d ones of ``conv_nd.py``. Arrays are batch-innermost (``[C, *S, N]``), as in those
modules; a 2-D image is a 3-D one of depth 1.

* ``_slab_conv``: a stride-1 3-D convolution as a 2-D im2col over height and width taken at
  every depth (a kd-th of the 3-D columns), each depth offset a column range of it, kd
  products summed.
* ``phase_transpose_forward`` / ``phase_transpose_backward``: a transposed convolution whose
  kernel is a multiple of its stride as one stride-1 convolution with one output-channel
  block per output phase (see the section below).
"""
import numpy as np

from . import backend
from . import conv_kernels as K


def _cl(a, pads=None, extent=None):
    """``a`` [N, C, *S] as a C-contiguous batch-innermost array ``[C, *Sp, N]``, padded by
    ``pads`` (before_0, after_0, ...) or placed at ``pads``' leading offsets in a zero array
    of spatial size ``extent``. Without padding, free when ``a`` is already such a view."""
    xp = backend.get_array_module(a)
    nd = a.ndim - 2
    perm = tuple(range(1, nd + 2)) + (0,)
    plain = extent is None and (pads is None or not any(pads))
    compiled = 1 <= nd <= 3 and a.shape[0] > 1 and K.usable(a) and a.flags.c_contiguous
    if plain and not compiled:
        return xp.ascontiguousarray(a.transpose(perm))
    if extent is None:
        extent = tuple(a.shape[2 + i] + (pads[2 * i] + pads[2 * i + 1] if pads else 0) for i in range(nd))
    if compiled:   # an NC* array: one compiled interleaving pass (numpy's strided copy is 3-5x slower)
        out = (np.empty if plain else np.zeros)((a.shape[1],) + tuple(extent) + (a.shape[0],), dtype=a.dtype)
        K.to_batch_inner(a, out, tuple(pads[2 * i] for i in range(nd)) if pads else (0,) * nd)
        return out
    out = xp.zeros((a.shape[1],) + tuple(extent) + (a.shape[0],), dtype=a.dtype)
    out[(slice(None),) + tuple(slice(pads[2 * i], pads[2 * i] + a.shape[2 + i]) for i in range(nd))] = \
        a.transpose(perm)
    return out


def _from_cl(a):
    """``[C, *S, N]`` as the logical ``[N, C, *S]`` (a view)."""
    return a.transpose((a.ndim - 1,) + tuple(range(a.ndim - 1)))


def _slab_cols(xcl, kh, kw, dh, dw, oh, ow):
    """2-D columns over height and width only, at every depth of the batch-innermost
    ``xcl`` [C, D, H, W, N]: ``[C*kh*kw, D*P]`` with ``P = oh*ow*N``."""
    c, dp = xcl.shape[:2]
    return K.im2col(xcl, (1, kh, kw), (dp, oh, ow), (1, 1, 1), (1, dh, dw)).reshape(c * kh * kw, -1)


def _slab_apply(cols, w, d0, od, p):
    """The product of ``_slab_cols`` columns (``P = p`` columns per depth) with ``w`` [O, C,
    kd, kh, kw]: depth offset ``a`` is the column range starting at ``a*d0*p``, so the
    convolution is kd products ``cols[:, slab_a]^T @ w_a^T`` summed (the [L, O]
    orientation is the one BLAS runs fastest with few output channels); returns [O, od*p]
    C-contiguous."""
    o_n, kd = w.shape[0], w.shape[2]
    ln = od * p
    acc = None
    for a in range(kd):
        wa = np.ascontiguousarray(w[:, :, a]).reshape(o_n, -1)
        t = cols[:, a * d0 * p:a * d0 * p + ln].T @ wa.T
        if acc is None:
            acc = t
        else:
            acc += t
    return np.ascontiguousarray(acc.T)


def _slab_conv(xcl, w, d, o):
    """Stride-1 3-D convolution (one group) of the padded batch-innermost ``xcl`` [C, Dp, Hp,
    Wp, N] (numpy float32/float64) with ``w`` [O, C, kd, kh, kw] and dilation ``d``, to the
    output sizes ``o``: the result [O, OD*OH*OW*N] and the columns. The columns are a 2-D
    im2col over height and width only, taken at every padded depth (``_slab_cols``: a kd-th
    of the 3-D columns), and depth offsets are column ranges of them (``_slab_apply``)."""
    cols = _slab_cols(xcl, w.shape[3], w.shape[4], d[1], d[2], o[1], o[2])
    return _slab_apply(cols, w, d[0], o[0], o[1] * o[2] * xcl.shape[-1]), cols


def _slab_wgrad(cols, gm, w_shape, d0, od):
    """The weight gradient of ``_slab_conv`` for the output gradient ``gm`` [O, L]."""
    o_n, c, kd, kh, kw = w_shape
    p = gm.shape[1] // od
    gw = np.empty((o_n, c, kd, kh * kw), gm.dtype)
    for a in range(kd):
        gw[:, :, a] = (cols[:, a * d0 * p:a * d0 * p + gm.shape[1]] @ gm.T).T.reshape(o_n, c, kh * kw)
    return gw.reshape(w_shape)


# -- transposed convolution by phases ------------------------------------------------------------
# With stride s and a kernel of k = s*t taps per axis, output position s*j + r (phase r) of the
# uncropped transposed convolution only meets the taps s*u + r: per phase it is a stride-1
# "full" correlation of x with a t-tap kernel. All phases together are one stride-1
# convolution of x with s^nd * Cout output channels, whose results are interleaved into the
# output; its adjoints are stride-1 convolutions of the phases of the output gradient. No
# columns of inserted zeros, no strided im2col/col2im, and the products have s^nd*t^nd*Cin
# (not Cin) as their inner dimension.
def _phases_usable(x, w, s, d, groups):
    k = w.shape[2:]
    return (len(k) in (2, 3) and groups == 1 and all(v == 1 for v in d) and K.usable(x, w) and
            all(k[i] % s[i] == 0 for i in range(len(k))) and any(v > 1 for v in s))


def _as3(t, one=1):
    """A 2-D per-axis tuple with a leading depth entry ``one``; 3-D ones unchanged."""
    return tuple(t) if len(t) == 3 else (one,) + tuple(t)


def _phase_weight(w, s):
    """``w`` [Cin, Cout, *k] (k = s*t per axis) as the stride-1 weight [Cin, P*Cout, *t] with
    entry [ci, (r, co), u] = w[ci, co, s*u + r] (r the phase, row-major over the axes)."""
    cin, cout = w.shape[:2]
    nd = len(s)
    t = tuple(w.shape[2 + i] // s[i] for i in range(nd))
    v = w.reshape((cin, cout) + tuple(q for i in range(nd) for q in (t[i], s[i])))
    perm = (0,) + tuple(3 + 2 * i for i in range(nd)) + (1,) + tuple(2 + 2 * i for i in range(nd))
    return np.ascontiguousarray(v.transpose(perm)).reshape((cin, int(np.prod(s)) * cout) + t)


def _phase_weight_adjoint(g, s, cout):
    """The inverse of ``_phase_weight``: [Cin, P*Cout, *t] -> [Cin, Cout, *k]."""
    cin, nd = g.shape[0], len(s)
    t = g.shape[2:]
    v = g.reshape((cin,) + tuple(s) + (cout,) + tuple(t))
    perm = (0, nd + 1) + tuple(q for i in range(nd) for q in (nd + 2 + i, 1 + i))
    return np.ascontiguousarray(v.transpose(perm)).reshape((cin, cout) + tuple(t[i] * s[i] for i in range(nd)))


def phase_transpose_forward(x, w, s, p0, out):
    """Transposed convolution (one group, dilation 1, kernel a multiple of the stride) of
    ``x`` [N, Cin, *S] (2 or 3 spatial axes, numpy float32/float64) with ``w`` [Cin, Cout,
    *k], stride ``s``, leading crop ``p0`` and output sizes ``out``: the output as a
    batch-innermost array [Cout, *out, N] and the state ``phase_transpose_backward`` takes."""
    nd = len(s)
    n, cin = x.shape[:2]
    sp, k = tuple(x.shape[2:]), tuple(w.shape[2:])
    cout = w.shape[1]
    t = tuple(k[i] // s[i] for i in range(nd))
    extent = [max((sp[i] - 1) * s[i] + k[i], p0[i] + out[i]) for i in range(nd)]
    jn = tuple(-(-extent[i] // s[i]) for i in range(nd))
    wg = _phase_weight(w, s)                                              # [Cin, P*Cout, *t]
    wf = wg[(slice(None), slice(None)) + (slice(None, None, -1),) * nd].transpose((1, 0) + tuple(range(2, 2 + nd)))
    xm = _cl(x)                                                           # [Cin, *S, N]
    xpad = _cl(x, tuple(v for i in range(nd) for v in (t[i] - 1, jn[i] - sp[i])))
    f = _slab_conv(xpad.reshape((cin,) + _as3(xpad.shape[1:-1]) + (n,)), wf.reshape(wf.shape[:2] + _as3(t)),
                   (1, 1, 1), _as3(jn))[0]
    y = K.phase_out(f.reshape((int(np.prod(s)), cout) + jn + (n,)), out, s, p0)
    return y, (xm.reshape(cin, -1), wg, tuple(sp), jn, tuple(p0), tuple(out), tuple(s), cout)


def phase_transpose_backward(gy, state, need_x, need_w):
    """The gradients of ``phase_transpose_forward`` (x's [N, Cin, *S] as a batch-innermost
    view, w's [Cin, Cout, *k]) for the output gradient ``gy`` [N, Cout, *out]."""
    xm, wg, sp, jn, p0, _, s, cout = state
    n = gy.shape[0]
    t = wg.shape[2:]
    g = K.phase_in(gy, jn, s, p0, wg.dtype)                              # the output gradient's phases
    g5 = g.reshape((-1,) + _as3(jn) + (n,))
    s3, t3 = _as3(sp), _as3(t)
    cols = _slab_cols(g5, t3[1], t3[2], 1, 1, s3[1], s3[2])
    gx = gw = None
    w5 = wg.reshape(wg.shape[:2] + t3)
    if need_x:
        gxm = _slab_apply(cols, w5, 1, s3[0], s3[1] * s3[2] * n)
        gx = _from_cl(gxm.reshape((wg.shape[0],) + sp + (n,)))
    if need_w:
        gw = _phase_weight_adjoint(_slab_wgrad(cols, xm, w5.shape, 1, s3[0]).reshape(wg.shape), s, cout)
    return gx, gw
