"""Data types. A ddg dtype is a numpy dtype object, so ``x.dtype == ddg.float32``,
``x.dtype == 'float32'`` and ``str(x.dtype)`` all behave as a numpy user expects.

``bfloat16`` is ``ml_dtypes``' numpy extension dtype (the one cupy 14 uses too). Its
``kind`` is ``'V'``, not ``'f'``: ask :func:`is_floating` (or test ``FLOAT_KINDS``-style
membership in :data:`HALF` as well), never ``dtype.kind == 'f'`` alone."""
import ml_dtypes as _ml_dtypes
import numpy as np

bfloat16 = np.dtype(_ml_dtypes.bfloat16)
float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int8 = np.dtype("int8")
uint8 = np.dtype("uint8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")

#: the 2-byte float dtypes (numpy's float16 and ml_dtypes' bfloat16)
HALF = (float16, bfloat16)

_ALIASES = {"float": float32, "double": float64, "half": float16, "int": int64, "long": int64, "bool": bool_,
            "bfloat16": bfloat16, "bf16": bfloat16, "fp16": float16}
_default_float = [float32]


def convert_dtype(dtype):
    """Any spelling of a dtype (string, numpy dtype or type) as a numpy dtype; None stays None."""
    if dtype is None:
        return None
    if isinstance(dtype, np.dtype):
        return dtype
    if isinstance(dtype, str):
        name = dtype.rsplit(".", 1)[-1]  # accepts 'paddle.float32' / 'ddg.float32'
        if name in _ALIASES:
            return _ALIASES[name]
        try:
            d = np.dtype(name)
        except TypeError:
            raise TypeError(f"ddg: unknown dtype {dtype!r}") from None
        return _checked(d, dtype)
    if dtype is float:
        return _default_float[0]
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"ddg: unknown dtype {dtype!r}") from None
    return _checked(d, dtype)


def _checked(d, spelling):
    """Void-kind dtypes other than bfloat16 (structured, raw bytes, ml_dtypes' float8...)
    are no tensor dtypes of ddg."""
    if d.kind == "V" and d != bfloat16:
        raise TypeError(f"ddg: unsupported dtype {spelling!r} ({d})")
    return d


def set_default_dtype(d):
    d = convert_dtype(d)
    if not is_real_floating(d):
        raise TypeError(f"ddg.set_default_dtype: default dtype must be a float dtype, got {d}")
    _default_float[0] = d


def get_default_dtype():
    return str(_default_float[0])


def default_float():
    return _default_float[0]


def is_floating(dtype):
    """Float or complex, bfloat16 included."""
    return dtype.kind in "fcV" or dtype == bfloat16


def is_real_floating(dtype):
    """A real float dtype: float16, bfloat16, float32, float64."""
    return dtype.kind in "fV" or dtype == bfloat16


def is_half(dtype):
    return dtype == float16 or dtype == bfloat16


def compute_dtype(dtype):
    """The dtype to accumulate ``dtype`` values in: float32 for the 2-byte floats (sums,
    means, norms, matrix products), ``dtype`` itself otherwise."""
    return float32 if dtype == float16 or dtype == bfloat16 else dtype


def upcast(a):
    """Array ``a`` in float32 when it holds 2-byte floats (for ops that must accumulate in
    float32: sums, softmax, norms; and for matrix products on numpy, which has no
    float16/bfloat16 BLAS), else ``a`` itself. ``Function`` casts the result back."""
    d = a.dtype
    return a.astype(float32) if d.itemsize == 2 and (d == float16 or d == bfloat16) else a


def finfo(dtype):
    """``numpy.finfo`` that knows bfloat16 (numpy's refuses it)."""
    dtype = convert_dtype(dtype)
    return _ml_dtypes.finfo(dtype) if dtype == bfloat16 else np.finfo(dtype)
