"""Normalization primitive shared by batch, layer, group and instance norm.

``Standardize(axes, eps)`` maps ``x`` to ``(x - mean) / sqrt(var + eps)`` with the
(biased) mean and variance taken over ``axes``. It is a primitive for speed and
memory: as a composite it would record about eight nodes and keep as many
full-size temporaries alive for backward, while here backward needs only the
output and the per-group ``1/std``:

    dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      (means over ``axes``)

The affine part (``* weight + bias``) is left to ordinary broadcasting ops. The batch
statistics stay on the instance (``self.mean``, ``self.var``) after forward so that
batch norm can update its running estimates without computing them twice.
"""
from ...tensor import backend
from ..function import Function


class Standardize(Function):
    save_inputs = False
    save_output = True

    def __init__(self, axes, eps):
        self.axes, self.eps = tuple(axes), float(eps)

    def forward(self, x):
        if x.dtype.kind != "f":
            raise TypeError(f"normalization expects a floating-point input, got {x.dtype}")
        xp = backend.get_array_module(x)
        mean = x.mean(axis=self.axes, keepdims=True)
        xc = x - mean
        var = xp.mean(xc * xc, axis=self.axes, keepdims=True)
        rstd = 1.0 / xp.sqrt(var + x.dtype.type(self.eps))
        xc *= rstd
        self.mean, self.var, self.rstd, self.out = mean, var, rstd, xc
        return xc

    def backward(self, g):
        y, axes = self.out, self.axes
        return self.rstd * (g - g.mean(axis=axes, keepdims=True) - y * (g * y).mean(axis=axes, keepdims=True))
