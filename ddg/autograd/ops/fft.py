"""Discrete Fourier transforms (``ddg.fft``) and the parts of complex tensors (``real``,
``imag``, ``conj``), with gradients.

Gradients of complex tensors follow PyTorch's and Paddle's convention: the gradient of a
real loss ``L`` with respect to a complex ``z`` is ``dL/dRe(z) + i dL/dIm(z)``. For a
C-linear map this is the adjoint applied to the output gradient, and the adjoint of a
transform with normalisation ``norm`` is the opposite transform with the dual
normalisation (``backward`` <-> ``forward``, ``ortho`` <-> ``ortho``).
"""
import numpy as np

from ...tensor import backend
from ..function import Function

DUAL_NORM = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def complex_dtype(dtype):
    """The complex dtype of a transform's result: complex64 for 32-bit inputs, else complex128."""
    return np.dtype(np.complex64) if np.dtype(dtype) in (np.float32, np.complex64) else np.dtype(np.complex128)


def real_dtype(dtype):
    return np.dtype(np.float32) if np.dtype(dtype) in (np.float32, np.complex64) else np.dtype(np.float64)


def _resize(xp, a, axes, sizes):
    """``a`` cropped or zero-padded along ``axes`` to ``sizes`` (numpy's rule for ``s``/``n``)."""
    if all(a.shape[ax] == n for ax, n in zip(axes, sizes)):
        return a
    index = [slice(None)] * a.ndim
    pad = [(0, 0)] * a.ndim
    for ax, n in zip(axes, sizes):
        if a.shape[ax] > n:
            index[ax] = slice(0, n)
        else:
            pad[ax] = (0, n - a.shape[ax])
    a = a[tuple(index)]
    if any(p != (0, 0) for p in pad):
        a = xp.pad(a, pad)
    return a


class FFTN(Function):
    """One transform over ``axes`` with sizes ``s``: ``kind`` is ``'c2c'`` (``inverse``:
    ifftn), ``'r2c'`` (rfftn) or ``'c2r'`` (irfftn, ``s[-1]`` the real output length)."""
    save_inputs = False
    keep_half = False

    def __init__(self, kind, s, axes, norm, inverse=False):
        self.kind, self.s, self.axes, self.norm, self.inverse = kind, tuple(s), tuple(axes), norm, inverse

    @property
    def name(self):
        return {"c2c": "ifftn" if self.inverse else "fftn", "r2c": "rfftn", "c2r": "irfftn"}[self.kind]

    def forward(self, a):
        xp = backend.get_array_module(a)
        self.in_shape, self.in_real = a.shape, a.dtype.kind != "c"
        s, axes, norm = self.s, self.axes, self.norm
        if self.kind == "c2c":
            out = (xp.fft.ifftn if self.inverse else xp.fft.fftn)(a, s=s, axes=axes, norm=norm)
            return out.astype(complex_dtype(a.dtype), copy=False)
        if self.kind == "r2c":
            return xp.fft.rfftn(a, s=s, axes=axes, norm=norm).astype(complex_dtype(a.dtype), copy=False)
        return xp.fft.irfftn(a, s=s, axes=axes, norm=norm).astype(real_dtype(a.dtype), copy=False)

    def backward(self, g):
        xp = backend.get_array_module(g)
        s, axes, dual = self.s, self.axes, DUAL_NORM[self.norm]
        if self.kind == "c2c":
            gx = (xp.fft.fftn if self.inverse else xp.fft.ifftn)(g, s=s, axes=axes, norm=dual)
            sizes = [self.in_shape[ax] for ax in axes]
        elif self.kind == "r2c":
            full = _resize(xp, g, axes[-1:], s[-1:])  # the spectrum's other half is not an output: zeros
            gx = xp.fft.ifftn(full, s=s, axes=axes, norm=dual)
            sizes = [self.in_shape[ax] for ax in axes]
        else:
            gx = xp.fft.rfftn(g, s=s, axes=axes, norm=dual)
            # each bin but the zero-frequency (and, for an even length, the Nyquist) one stands
            # for itself and its conjugate mirror in the real output
            n = s[-1]
            last = axes[-1]
            hi = gx.shape[last] - (1 if n % 2 == 0 else 0)
            if hi > 1:
                index = [slice(None)] * gx.ndim
                index[last] = slice(1, hi)
                gx[tuple(index)] *= 2
            sizes = [self.in_shape[ax] for ax in axes]
        gx = _resize(xp, gx, axes, sizes)
        if self.in_real:
            gx = gx.real
        return gx


class Real(Function):
    save_inputs = False
    keep_half = False

    def forward(self, a):
        self.dtype = a.dtype
        return backend.get_array_module(a).real(a).copy()

    def backward(self, g):
        return g.astype(self.dtype) if self.dtype.kind == "c" else g


class Imag(Function):
    save_inputs = False
    keep_half = False

    def forward(self, a):
        self.dtype = a.dtype
        return backend.get_array_module(a).imag(a).copy()

    def backward(self, g):
        if self.dtype.kind != "c":
            return None
        return (1j * g).astype(self.dtype)


class Conj(Function):
    save_inputs = False
    keep_half = False

    def forward(self, a):
        return backend.get_array_module(a).conj(a)

    def backward(self, g):
        return backend.get_array_module(g).conj(g)


def real(x, name=None):
    """The real part of ``x`` (``x`` itself, as a copy, for a real tensor)."""
    return Real()(x)


def imag(x, name=None):
    """The imaginary part of ``x`` (zeros for a real tensor)."""
    return Imag()(x)


def conj(x, name=None):
    """The complex conjugate of ``x`` (``x`` for a real tensor)."""
    return Conj()(x)
