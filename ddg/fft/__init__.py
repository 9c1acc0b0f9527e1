"""``ddg.fft``: Paddle's ``paddle.fft`` on numpy's and cupy's FFTs, with gradients.

Arguments, defaults and results follow Paddle: ``n``/``s`` crop or zero-pad the input
along the transformed axes, ``norm`` is ``"backward"`` (default: the inverse scales by
``1/n``), ``"ortho"`` or ``"forward"``; 32-bit inputs give complex64 (or float32), others
complex128 (or float64); integer and bool inputs are transformed as the default float
dtype. ``hfft*`` transform a Hermitian-symmetric signal given by its first half into a
real spectrum, ``ihfft*`` are their inverses.
"""
import numpy as np

from ..autograd.axes import normalize_axis as _normalize_axis
from ..autograd.ops import fft as _F
from ..autograd.ops import movement as _M
from ..autograd.ops.elementwise import cast as _cast
from ..tensor.creation import to_tensor as _to_tensor
from ..tensor.dtypes import convert_dtype as _convert_dtype
from ..tensor.dtypes import default_float as _default_float
from ..tensor.tensor import Tensor as _Tensor

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _check_norm(norm):
    if norm not in _F.DUAL_NORM:
        raise ValueError(f"Unexpected norm: {norm}. Norm should be forward, backward or ortho")
    return norm


def _input(x, op, real_only=False):
    if not isinstance(x, _Tensor):
        raise TypeError(f"ddg.fft.{op}: x must be a Tensor, got {type(x).__name__}")
    kind = x._data.dtype.kind
    if kind in "biu":
        x = _cast(x, _default_float())
    elif kind == "c" and real_only:
        raise TypeError(f"ddg.fft.{op}: x must be real, got {x.dtype}")
    elif kind not in "fc":
        raise TypeError(f"ddg.fft.{op}: unsupported dtype {x.dtype}")
    return x


def _axes_sizes(x, s, axes, op, default_axes=None):
    """Normalised axes and transform sizes (``None`` sizes: the input's)."""
    nd = x.ndim
    if s is not None and not isinstance(s, (list, tuple)):
        raise TypeError(f"ddg.fft.{op}: s must be a list or tuple of ints, got {type(s).__name__}")
    if axes is None:
        if default_axes is not None:
            axes = default_axes
        else:
            axes = list(range(nd - len(s), nd)) if s is not None else list(range(nd))
    elif isinstance(axes, int):
        axes = [axes]
    axes = [_normalize_axis(a, nd, f"fft.{op}") for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"ddg.fft.{op}: axes must be unique, got {list(axes)}")
    if s is not None:
        if len(s) != len(axes):
            raise ValueError(f"ddg.fft.{op}: s ({list(s)}) and axes ({axes}) must have the same length")
        for n in s:
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
                raise ValueError(f"Invalid FFT argument s ({list(s)}), it should be a sequence of positive ints")
    return axes, [None if s is None else int(s[i]) for i in range(len(axes))]


def _check_n(n):
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0):
        raise ValueError(f"Invalid FFT argument n({n}), it should be positive.")
    return n


def _c2c(x, s, axes, norm, inverse, op, default_axes=None, min_rank=0):
    x = _input(x, op)
    _check_norm(norm)
    if x.ndim < min_rank:
        raise ValueError(f"ddg.fft.{op}: the rank of the input ({x.ndim}) should >= {min_rank}")
    axes, sizes = _axes_sizes(x, s, axes, op, default_axes)
    sizes = [x.shape[a] if n is None else n for a, n in zip(axes, sizes)]
    return _F.FFTN("c2c", sizes, axes, norm, inverse)(x)


def _r2c(x, s, axes, norm, op, default_axes=None, min_rank=0):
    x = _input(x, op, real_only=True)
    _check_norm(norm)
    if x.ndim < min_rank:
        raise ValueError(f"ddg.fft.{op}: the rank of the input ({x.ndim}) should >= {min_rank}")
    axes, sizes = _axes_sizes(x, s, axes, op, default_axes)
    sizes = [x.shape[a] if n is None else n for a, n in zip(axes, sizes)]
    return _F.FFTN("r2c", sizes, axes, norm)(x)


def _c2r(x, s, axes, norm, op, default_axes=None, min_rank=0):
    x = _input(x, op)
    _check_norm(norm)
    if x.ndim < min_rank:
        raise ValueError(f"ddg.fft.{op}: the rank of the input ({x.ndim}) should >= {min_rank}")
    axes, sizes = _axes_sizes(x, s, axes, op, default_axes)
    sizes = [x.shape[a] for a in axes[:-1]] if s is None else sizes[:-1]
    last = 2 * (x.shape[axes[-1]] - 1) if s is None else s[-1]
    if last <= 0:
        raise ValueError(f"ddg.fft.{op}: the output length along axis {axes[-1]} would be {last}; give n or s")
    return _F.FFTN("c2r", sizes + [last], axes, norm)(x)


# -- one axis --------------------------------------------------------------------------------------
def fft(x, n=None, axis=-1, norm="backward", name=None):
    """The one-dimensional discrete Fourier transform along ``axis``."""
    return _c2c(x, None if _check_n(n) is None else [n], [axis], norm, False, "fft")


def ifft(x, n=None, axis=-1, norm="backward", name=None):
    """The inverse of ``fft``."""
    return _c2c(x, None if _check_n(n) is None else [n], [axis], norm, True, "ifft")


def rfft(x, n=None, axis=-1, norm="backward", name=None):
    """``fft`` of a real input, keeping the ``n // 2 + 1`` non-negative frequencies."""
    return _r2c(x, None if _check_n(n) is None else [n], [axis], norm, "rfft")


def irfft(x, n=None, axis=-1, norm="backward", name=None):
    """The inverse of ``rfft``: a real signal of length ``n`` (default ``2 * (m - 1)``)."""
    return _c2r(x, None if _check_n(n) is None else [n], [axis], norm, "irfft")


def hfft(x, n=None, axis=-1, norm="backward", name=None):
    """The real spectrum of a Hermitian-symmetric signal given by its first half."""
    return _c2r(_F.conj(_input(x, "hfft")), None if _check_n(n) is None else [n], [axis],
                _F.DUAL_NORM[_check_norm(norm)], "hfft")


def ihfft(x, n=None, axis=-1, norm="backward", name=None):
    """The inverse of ``hfft``: the first half of a Hermitian signal from a real one."""
    return _F.conj(_r2c(x, None if _check_n(n) is None else [n], [axis], _F.DUAL_NORM[_check_norm(norm)], "ihfft"))


# -- two axes --------------------------------------------------------------------------------------
def fft2(x, s=None, axes=(-2, -1), norm="backward", name=None):
    return _c2c(x, s, list(axes), norm, False, "fft2", min_rank=2)


def ifft2(x, s=None, axes=(-2, -1), norm="backward", name=None):
    return _c2c(x, s, list(axes), norm, True, "ifft2", min_rank=2)


def rfft2(x, s=None, axes=(-2, -1), norm="backward", name=None):
    return _r2c(x, s, list(axes), norm, "rfft2", min_rank=2)


def irfft2(x, s=None, axes=(-2, -1), norm="backward", name=None):
    return _c2r(x, s, list(axes), norm, "irfft2", min_rank=2)


def hfft2(x, s=None, axes=(-2, -1), norm="backward", name=None):
    return hfftn(x, s, list(axes), norm, _min_rank=2)


def ihfft2(x, s=None, axes=(-2, -1), norm="backward", name=None):
    return ihfftn(x, s, list(axes), norm, _min_rank=2)


# -- any number of axes ----------------------------------------------------------------------------
def fftn(x, s=None, axes=None, norm="backward", name=None):
    return _c2c(x, s, axes, norm, False, "fftn")


def ifftn(x, s=None, axes=None, norm="backward", name=None):
    return _c2c(x, s, axes, norm, True, "ifftn")


def rfftn(x, s=None, axes=None, norm="backward", name=None):
    return _r2c(x, s, axes, norm, "rfftn")


def irfftn(x, s=None, axes=None, norm="backward", name=None):
    return _c2r(x, s, axes, norm, "irfftn")


def hfftn(x, s=None, axes=None, norm="backward", name=None, _min_rank=0):
    return _c2r(_F.conj(_input(x, "hfftn")), s, axes, _F.DUAL_NORM[_check_norm(norm)], "hfftn",
                min_rank=_min_rank)


def ihfftn(x, s=None, axes=None, norm="backward", name=None, _min_rank=0):
    return _F.conj(_r2c(x, s, axes, _F.DUAL_NORM[_check_norm(norm)], "ihfftn", min_rank=_min_rank))


# -- frequencies and shifts ------------------------------------------------------------------------
def fftfreq(n, d=1.0, dtype=None, name=None):
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``."""
    _check_n(n)
    dt = _convert_dtype(dtype) or _default_float()
    return _to_tensor(np.fft.fftfreq(int(n), d).astype(dt))


def rfftfreq(n, d=1.0, dtype=None, name=None):
    """The non-negative sample frequencies of an ``n``-point ``rfft``."""
    _check_n(n)
    dt = _convert_dtype(dtype) or _default_float()
    return _to_tensor(np.fft.rfftfreq(int(n), d).astype(dt))


def _shift(x, axes, sign, op):
    if not isinstance(x, _Tensor):
        raise TypeError(f"ddg.fft.{op}: x must be a Tensor, got {type(x).__name__}")
    if axes is None:
        axes = list(range(x.ndim))
    elif isinstance(axes, int):
        axes = [axes]
    axes = [_normalize_axis(a, x.ndim, f"fft.{op}") for a in axes]
    shifts = [(x.shape[a] // 2) if sign > 0 else -(x.shape[a] // 2) for a in axes]
    return _M.roll(x, shifts, axes)


def fftshift(x, axes=None, name=None):
    """Move the zero frequency to the middle of the spectrum (along ``axes``, default all)."""
    return _shift(x, axes, 1, "fftshift")


def ifftshift(x, axes=None, name=None):
    """The inverse of ``fftshift``."""
    return _shift(x, axes, -1, "ifftshift")
