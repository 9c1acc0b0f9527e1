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
