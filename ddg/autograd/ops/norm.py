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
from ...tensor import backend
from ...tensor.dtypes import upcast
from ..function import Function
from ..higher import live_input


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

    One op instead of a standardization and two broadcasting ops: forward makes 6
    whole-array passes (mean, x - mean, its square's mean, xhat, y = xhat * w + b),
    backward 6 (the two per-channel sums ``sum(g)``, ``sum(g * xhat)`` and
    ``dx = g * (w * rstd) - xhat * k - m``, with per-channel ``k`` and ``m``), every
    full-size result laid out like ``x`` (so a conv net's batch-innermost arrays stay so).
    """
    save_inputs = (1,)   # w (backward reads it); x itself is not kept, only xhat
    none_grads = True

    def __init__(self, axes, eps):
        self.axes, self.eps = tuple(axes), float(eps)

    def forward(self, x, w, b):
        if x.dtype.kind not in "fV":
            raise TypeError(f"batch_norm expects a floating-point input, got {x.dtype}")
        xp = backend.get_array_module(x)
        x = upcast(x)
        c_axis = next(i for i in range(x.ndim) if i not in self.axes)
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
        self.xhat, self.rstd, self.w = xhat, rstd, w
        return y, mean, var

    def backward(self, grads):
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
            g2[...] = g
            g = g2
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
        # x = xhat / rstd + mean; the mean is not kept, and none of the gradients depends on it
        ins = [live_input(self, 0, self.xhat / self.rstd), live_input(self, 1, self.w.reshape(-1)),
               live_input(self, 2, self.w.reshape(-1) * 0)]
        with enable_grad():
            y, mean, var = Standardize(self.axes, self.eps, stats=True)(ins[0])
            shape = [1] * y.ndim
            shape[next(i for i in range(y.ndim) if i not in self.axes)] = -1
            y = y * ins[1].reshape(shape) + ins[2].reshape(shape)
        pairs = [(o, gg) for o, gg in zip((y, mean, var), grads) if gg is not None]
        targets = [t for t, need in zip(ins, self.needs) if need]
        got = iter(_grad([o for o, _ in pairs], targets, [gg for _, gg in pairs], create_graph=True,
                         allow_unused=True))
        return tuple(next(got) if need else None for need in self.needs)
