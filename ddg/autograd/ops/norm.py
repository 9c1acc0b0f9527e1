"""Normalization primitive shared by batch, layer, group and instance norm.

``Standardize(axes, eps)`` maps ``x`` to ``(x - mean) / sqrt(var + eps)`` with the
(biased) mean and variance taken over ``axes``. It is a primitive for speed and
memory: as a composite it would record about eight nodes and keep as many
full-size temporaries alive for backward, while here backward needs only the
output and the per-group ``1/std``:

    dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      (means over ``axes``)

The affine part (``* weight + bias``) is left to ordinary broadcasting ops. With
``stats=True`` (batch norm in training) forward also returns the batch mean and
variance (keepdims shape) as extra outputs, so that the running estimates are updated
from them with ordinary ops, which ``ddg.jit.to_static`` records and replays, without
computing the statistics twice. Their gradients are exact too (and skipped, without a
kernel, when they are None: the statistics were not differentiated):

    dx += g_mean / n + g_var * 2 * (x - mean) / n,    x - mean = xhat / rstd
"""
import numpy as np

from ...tensor import backend, gemm
from ...tensor.dtypes import upcast
from ..function import Function
from ..higher import live_input


def _kernels():
    from ...tensor import cpu_nn_kernels  # noqa: PLC0415 - imports numba on the first numpy call
    return cpu_nn_kernels


def _channel_view(a, c_axis):
    """``(a, view, perm)``: ``a`` (copied if it is not dense) and a view of it as [A, C, S]
    in memory order, C its axis ``c_axis``; ``perm`` puts a's axes in memory order (an array
    laid out like ``a`` has the same view through it)."""
    perm = sorted(range(a.ndim), key=lambda i: -a.strides[i])
    t = a.transpose(perm)
    if not t.flags.c_contiguous:
        a = np.ascontiguousarray(a)
        perm = list(range(a.ndim))
        t = a
    p = perm.index(c_axis)
    shape = t.shape
    return a, t.reshape(int(np.prod(shape[:p])), shape[p], int(np.prod(shape[p + 1:]))), perm


def _view3(b, perm, shape3):
    return b.transpose(perm).reshape(shape3)


def _like(a, g):
    """``g`` in ``a``'s layout and dtype (copied when it is not)."""
    if g.strides != a.strides or g.dtype != a.dtype or g.shape != a.shape:
        g2 = np.empty_like(a)
        gemm.copy_into(g2, g)
        return g2
    return g


class Standardize(Function):
    save_inputs = False
    save_output = True
    none_grads = True  # the statistics' gradients are None unless they were differentiated

    def __init__(self, axes, eps, stats=False):
        self.axes, self.eps, self.stats = tuple(axes), float(eps), stats

    def forward(self, x):
        if x.dtype.kind not in "fV":
            raise TypeError(f"normalization expects a floating-point input, got {x.dtype}")
        xp = backend.get_array_module(x)
        x = upcast(x)   # float16/bfloat16 statistics in float32; results in the input's dtype
        mean = x.mean(axis=self.axes, keepdims=True)
        xc = x - mean
        var = xp.mean(xc * xc, axis=self.axes, keepdims=True)
        rstd = 1.0 / xp.sqrt(var + x.dtype.type(self.eps))
        xc *= rstd
        self.rstd, self.out, self.mean = rstd, xc, mean
        if self.stats:
            return xc, mean, var
        return xc

    def backward(self, g):
        y, axes = self.out, self.axes
        if self.stats:
            g, g_mean, g_var = g
        if g is None:  # only the statistics were differentiated
            dx = backend.get_array_module(y).zeros_like(y)
        else:
            dx = self.rstd * (g - g.mean(axis=axes, keepdims=True) - y * (g * y).mean(axis=axes, keepdims=True))
        # the statistics' gradients are None unless the statistics were differentiated
        if self.stats and (g_mean is not None or g_var is not None):
            n = y.dtype.type(y.size // self.rstd.size)
            if g_mean is not None:
                dx += g_mean / n
            if g_var is not None:
                dx += g_var * (2.0 * y / self.rstd) / n
        return dx

    def backward_graph(self, g):
        # the composite (mean, variance, 1/std) recorded on the input, which is rebuilt from
        # the output as y / rstd + mean (x itself is not kept: see the module docstring)
        axes = list(self.axes)
        if self.stats:
            g, g_mean, g_var = g
        x = live_input(self, 0, self.out / self.rstd + self.mean)
        xc = x - x.mean(axis=axes, keepdim=True)
        rstd = ((xc * xc).mean(axis=axes, keepdim=True) + self.eps).rsqrt()
        y = xc * rstd
        dx = rstd * (g - g.mean(axis=axes, keepdim=True) - y * (g * y).mean(axis=axes, keepdim=True))
        if self.stats:
            n = self.out.size // self.rstd.size
            dx = dx + (g_mean + g_var * (2.0 * xc)) * (1.0 / n)
        return dx


class BatchNormAffine(Function):
    """Batch norm in training, affine part included: ``y = (x - mean) * rstd * w + b`` with
    the batch statistics over ``axes`` (every axis but the channel axis); outputs ``y``
    and, like ``Standardize(stats=True)``, the batch mean and biased variance (keepdims
    shape). ``w`` and ``b`` are per-channel vectors.

    One op instead of a standardization and two broadcasting ops. On numpy it is one
    compiled kernel each way (``cpu_nn_kernels.batch_norm_forward``/``_backward``) of 2
    whole-array passes: forward the statistics as shifted float64 sums, then
    ``y = (x - mean) * (w * rstd) + b``; backward the per-channel sums ``sum(g)``,
    ``sum(g * xhat)``, then ``dx = p g + q (x - mean) + t`` with per-channel ``p``, ``q``,
    ``t``; it keeps ``x``. On cupy forward makes 6 array passes
    (mean, x - mean, its square's mean, xhat, y = xhat * w + b), backward 6, and keeps
    ``xhat``. Every full-size result is laid out like ``x`` (so a conv net's
    batch-innermost arrays stay so).

    ``act="relu"`` makes the first output ``max(y, 0)`` (the fluid ``BatchNorm(act='relu')``):
    on numpy in the same two passes each way (forward clamps as it writes; backward zeroes
    ``g`` where ``y <= 0``, ``y`` recomputed from ``x`` with the forward's operations, so
    neither ``y`` nor a mask is kept); on cupy a clamp after the affine part and the mask
    from ``xhat * w + b`` recomputed. The pre-activation ``y`` is never a tensor, so nothing else can
    use it.
    """
    save_inputs = (1,)   # w (backward reads it); x itself is not kept, only xhat
    none_grads = True

    def __init__(self, axes, eps, act=None):
        if act not in (None, "relu"):
            raise ValueError(f"BatchNormAffine: act must be None or 'relu', got {act!r}")
        self.axes, self.eps, self.act = tuple(axes), float(eps), act

    def forward(self, x, w, b):
        if x.dtype.kind not in "fV":
            raise TypeError(f"batch_norm expects a floating-point input, got {x.dtype}")
        xp = backend.get_array_module(x)
        x = upcast(x)
        c_axis = next(i for i in range(x.ndim) if i not in self.axes)
        if xp is np:
            return self._forward_cpu(x, w, b, c_axis)
        shape = [1] * x.ndim
        shape[c_axis] = -1
        dt = x.dtype
        w = w.astype(dt, copy=False).reshape(shape)
        b = b.astype(dt, copy=False).reshape(shape)
        mean = x.mean(axis=self.axes, keepdims=True)
        xhat = xp.subtract(x, mean, out=xp.empty_like(x))
        sq = xp.multiply(xhat, xhat, out=xp.empty_like(x))
        var = sq.mean(axis=self.axes, keepdims=True)
        rstd = 1.0 / xp.sqrt(var + dt.type(self.eps))
        xhat *= rstd
        y = xp.multiply(xhat, w, out=sq)
        y += b
        if self.act == "relu":
            xp.maximum(y, 0, out=y)
            self.save_inputs = (1, 2)
        self.xhat, self.rstd, self.w, self.bx = xhat, rstd, w, b
        return y, mean, var

    def _forward_cpu(self, x, w, b, c_axis):
        # statistics in one pass (shifted float64 sums), the output in another
        relu = self.act == "relu"
        # backward reads x itself, not xhat (and b to recompute the ReLU mask)
        self.save_inputs = (0, 1, 2) if relu else (0, 1)
        dt = x.dtype
        x, x3, perm = _channel_view(x, c_axis)
        c = x3.shape[1]
        mean, var, rstd = np.empty(c), np.empty(c), np.empty(c)
        y = np.empty_like(x)
        bx = b.astype(dt, copy=False)
        _kernels().batch_norm_forward(x3, w.astype(dt, copy=False), bx, self.eps, _view3(y, perm, x3.shape), mean,
                                      var, rstd, relu)
        self.x, self.x3, self.perm, self.mean64, self.rstd64 = x, x3, perm, mean, rstd
        self.wx, self.wdt, self.bx = w.astype(dt, copy=False), w.dtype, bx
        shape = [1] * x.ndim
        shape[c_axis] = c
        return y, mean.astype(dt).reshape(shape), var.astype(dt).reshape(shape)

    def _backward_cpu(self, grads):
        g, g_mean, g_var = grads
        x, x3 = self.x, self.x3
        c = x3.shape[1]
        if g is None:
            g = np.zeros_like(x)
        g3 = _view3(_like(x, g), self.perm, x3.shape)
        gm = np.zeros(c) if g_mean is None else g_mean.reshape(-1).astype(np.float64)
        gv = np.zeros(c) if g_var is None else g_var.reshape(-1).astype(np.float64)
        gw, gb = np.empty(c), np.empty(c)
        needs = self.needs
        gx = np.empty_like(x) if needs[0] else np.empty((1, 0, 1), x.dtype)
        _kernels().batch_norm_backward(x3, g3, self.wx, self.bx, self.mean64, self.rstd64, gm, gv,
                                       self.act == "relu", _view3(gx, self.perm, x3.shape) if needs[0] else gx,
                                       gw, gb)
        wdt = self.wdt
        return (gx if needs[0] else None, gw.astype(wdt) if needs[1] else None, gb.astype(wdt) if needs[2] else None)

    def backward(self, grads):
        if getattr(self, "x3", None) is not None:
            return self._backward_cpu(grads)
        g, g_mean, g_var = grads
        xhat, rstd, w, axes = self.xhat, self.rstd, self.w, self.axes
        xp = backend.get_array_module(xhat)
        n = xhat.size // rstd.size
        needs = self.needs
        gx = gw = gb = None
        if g is None:
            g = xp.zeros_like(xhat)
        elif g.strides != xhat.strides or g.dtype != xhat.dtype:   # broadcast or another layout: x's
            g2 = xp.empty_like(xhat)
            gemm.copy_into(g2, g)
            g = g2
        if self.act == "relu":   # the mask from y recomputed with the forward's operations
            g = xp.where(xhat * w + self.bx > 0, g, xp.zeros((), g.dtype))
        db = g.sum(axis=axes, keepdims=True)
        gxh = xp.multiply(g, xhat, out=xp.empty_like(xhat))
        dw = gxh.sum(axis=axes, keepdims=True)
        if needs[1]:
            gw = dw.reshape(-1)
        if needs[2]:
            gb = db.reshape(-1)
        if needs[0]:
            scale = w * rstd
            # dx = scale * (g - db/n - xhat * dw/n), written into the g * xhat buffer
            gx = xp.multiply(xhat, scale * dw / n, out=gxh)
            xp.subtract(g * scale, gx, out=gx)
            gx -= scale * db / n
            if g_mean is not None:
                gx += g_mean / n
            if g_var is not None:
                gx += g_var * (2.0 * xhat / rstd) / n
        return gx, gw, gb

    def backward_graph(self, grads):
        # the standardization and the affine part recomputed with ops on x (rebuilt from
        # xhat) and differentiated by the engine, so every order is available
        from ..engine import grad as _grad
        from ..grad_mode import enable_grad
        # x = xhat / rstd + mean on cupy, where the mean is not kept (none of the gradients
        # depends on it); x itself on numpy
        cpu = getattr(self, "x3", None) is not None
        w = self.wx.astype(self.wdt) if cpu else self.w.reshape(-1)
        ins = [live_input(self, 0, self.x if cpu else self.xhat / self.rstd), live_input(self, 1, w),
               live_input(self, 2, self.bx.astype(self.wdt) if cpu else self.bx.reshape(-1))]
        with enable_grad():
            y, mean, var = Standardize(self.axes, self.eps, stats=True)(ins[0])
            shape = [1] * y.ndim
            shape[next(i for i in range(y.ndim) if i not in self.axes)] = -1
            y = y * ins[1].reshape(shape) + ins[2].reshape(shape)
            if self.act == "relu":   # ReLU as y times its (constant) positive mask
                y = y * (y > 0).astype(y.dtype)
        pairs = [(o, gg) for o, gg in zip((y, mean, var), grads) if gg is not None]
        targets = [t for t, need in zip(ins, self.needs) if need]
        got = iter(_grad([o for o, _ in pairs], targets, [gg for _, gg in pairs], create_graph=True,
                         allow_unused=True))
        return tuple(next(got) if need else None for need in self.needs)


class RowNorm(Function):
    """Layer, group and instance norm on numpy, affine part included: the input seen as rows
    [R, M] is standardized per row (statistics as shifted float64 sums), then
    ``y = xhat * w[j] + b[j]`` with ``j = (r % P) * K + m // (M // K)``: layer norm P = 1,
    K = M; group norm P = groups, K = channels per group; instance norm P = channels, K = 1.
    ``w``/``b`` are optional inputs (``has_w``, ``has_b``), flat with P*K entries.

    Forward is one kernel over each row (its statistics, then its output while it is in
    cache), backward one (the row's two sums, then its gradient); ``x`` is kept. Outputs
    ``y`` only (cupy keeps ``Standardize`` and broadcasting ops)."""
    save_inputs = True

    def __init__(self, rows, P, K, eps, has_w, has_b):
        self.rows, self.P, self.K, self.eps = int(rows), int(P), int(K), float(eps)
        self.has_w, self.has_b = bool(has_w), bool(has_b)

    def forward(self, x, *wb):
        if x.dtype.kind not in "fV":
            raise TypeError(f"normalization expects a floating-point input, got {x.dtype}")
        self.shape = x.shape
        x = upcast(x)
        dt = x.dtype
        x2 = np.ascontiguousarray(x).reshape(self.rows, -1)
        n = self.P * self.K
        it = iter(wb)
        w = next(it).astype(dt, copy=False).reshape(-1) if self.has_w else np.ones(n, dt)
        b = next(it).astype(dt, copy=False).reshape(-1) if self.has_b else np.zeros(n, dt)
        self.wdt = wb[0].dtype if wb else dt
        mean, rstd = np.empty(self.rows), np.empty(self.rows)
        out = np.empty_like(x2)
        _kernels().rows_norm_forward(x2, w, b, out, mean, rstd, self.P, self.K, dt.type(self.eps))
        self.x2, self.w, self.mean, self.rstd = x2, w, mean, rstd
        return out.reshape(self.shape)

    def backward(self, g):
        x2 = self.x2
        g2 = np.ascontiguousarray(g, dtype=x2.dtype).reshape(x2.shape)
        n = self.P * self.K
        gx = np.empty_like(x2)
        gw, gb = np.zeros(n), np.zeros(n)
        _kernels().rows_norm_backward(x2, self.w, g2, self.mean, self.rstd, self.P, self.K, gx, gw, gb)
        grads = [gx.reshape(self.shape)]
        i = 1
        for has, gr in ((self.has_w, gw), (self.has_b, gb)):
            if has:
                grads.append(gr.astype(self.wdt) if self.needs[i] else None)
                i += 1
        return tuple(grads) if len(grads) > 1 else grads[0]

    def backward_graph(self, g):
        # the standardization (Standardize over each row's axes) and the affine part
        # recomputed with ops on the live inputs and differentiated by the engine
        from ..engine import grad as _grad
        from ..grad_mode import enable_grad
        n_in = 1 + self.has_w + self.has_b
        ins = [live_input(self, 0, self.x2.reshape(self.shape))]
        if self.has_w:
            ins.append(live_input(self, 1, self.w))
        if self.has_b:
            ins.append(live_input(self, n_in - 1, np.zeros(self.P * self.K, self.x2.dtype)))
        with enable_grad():
            x2 = ins[0].reshape([self.rows // self.P, self.P, self.K, -1])
            y = Standardize((2, 3), self.eps)(x2)
            j = 1
            if self.has_w:
                y = y * ins[j].reshape([self.P, self.K, 1])
                j += 1
            if self.has_b:
                y = y + ins[j].reshape([self.P, self.K, 1])
            y = y.reshape(list(self.shape))
        targets = [t for t, need in zip(ins, self.needs) if need]
        got = iter(_grad([y], targets, [g], create_graph=True, allow_unused=True))
        out = tuple(next(got) if need else None for need in self.needs)
        return out if len(out) > 1 else out[0]


class WindowSum(Function):
    """``out[..., j, ...] = sum of a[..., j - before .. j + after, ...]`` along ``axis``, the
    window cut at the ends (local response normalization's sum over neighbouring channels):
    ``before + after + 1`` shifted adds, each over a contiguous slab in a dense layout. The
    op is linear; its adjoint is the same sum with the window mirrored."""
    save_inputs = False

    def __init__(self, axis, before, after):
        self.axis, self.before, self.after = axis, before, after

    def forward(self, a):
        c = a.shape[self.axis]
        out = a.copy()

        def cut(lo, hi):
            return (slice(None),) * self.axis + (slice(lo, hi),)
        for o in range(1, min(self.after, c - 1) + 1):       # the channels after j
            out[cut(0, c - o)] += a[cut(o, c)]
        for o in range(1, min(self.before, c - 1) + 1):      # the channels before j
            out[cut(o, c)] += a[cut(0, c - o)]
        return out

    def backward(self, g):
        return WindowSum(self.axis, self.after, self.before).forward(g)

    def backward_graph(self, g):
        return WindowSum(self.axis, self.after, self.before)(g)


def window_sum(x, axis, before, after):
    """``x``'s sums over the window ``[j - before, j + after]`` along ``axis`` (cut at the ends)."""
    return WindowSum(axis % x.ndim, before, after)(x)
