"""Nearest and (bi)linear resizing of one or two spatial axes as one op on numpy
(``interpolate``/``Upsample`` of 3-D and 4-D inputs; cupy and 5-D inputs resample one
axis at a time with indexing ops).

The input is seen as ``[A, H, W, B]`` (channels first: A = N*C, B = 1; channels last:
A = N, B = C; one spatial axis: H = 1). Each output index along H and W reads two input
indices ``i0``, ``i1`` with weights ``1 - f``, ``f`` (nearest: ``i1 = i0``, ``f = 0``); an
integer nearest upscale is a plain repeat. Forward and backward are one compiled pass each
(``cpu_nn_kernels``: ``upsample_nearest``, ``resample_linear`` and their adjoints). The op is
linear in its input, so higher orders use its own backward and forward.
"""
import numpy as np

from ..function import Function
from ..higher import linear_backward_graph


def _kernels():
    from ...tensor import cpu_nn_kernels  # noqa: PLC0415 - imports numba on the first call
    return cpu_nn_kernels


class Resample2D(Function):
    """``x`` [A, H, W, B]-viewable -> ``out_shape``; ``taps`` = ``(ih0, ih1, fh, iw0, iw1, fw)``
    (integer indices, float weights) or ``reps`` = ``(rh, rw)`` for an integer nearest upscale."""
    save_inputs = False

    def __init__(self, view_in, view_out, out_shape, taps=None, reps=None):
        self.view_in, self.view_out, self.out_shape = tuple(view_in), tuple(view_out), tuple(out_shape)
        if taps is not None:
            taps = tuple(np.asarray(t, np.uint64 if i % 3 < 2 else np.float64) for i, t in enumerate(taps))
        self.taps, self.reps = taps, reps

    def forward(self, x):
        self.in_shape, self.dtype = x.shape, x.dtype
        return self.apply_linear(x)

    def apply_linear(self, u):
        dt = u.dtype
        x4 = np.ascontiguousarray(u).reshape(self.view_in)
        out = np.empty(self.view_out, dt)
        k = _kernels()
        if self.reps is not None:
            k.upsample_nearest(x4[..., 0], out[..., 0], *self.reps)
        else:
            ih0, ih1, fh, iw0, iw1, fw = self.taps
            k.resample_linear(x4, ih0, ih1, fh.astype(dt), iw0, iw1, fw.astype(dt), out)
        return out.reshape(self.out_shape)

    def backward(self, g):
        dt = g.dtype
        g4 = np.ascontiguousarray(g).reshape(self.view_out)
        k = _kernels()
        gx = np.zeros(self.view_in, dt)
        if self.reps is not None:
            k.upsample_nearest_backward(g4[..., 0], gx[..., 0], *self.reps)
        else:
            ih0, ih1, fh, iw0, iw1, fw = self.taps
            k.resample_linear_backward(g4, ih0, ih1, fh.astype(dt), iw0, iw1, fw.astype(dt), gx)
        return gx.reshape(self.in_shape)

    backward_graph = linear_backward_graph
