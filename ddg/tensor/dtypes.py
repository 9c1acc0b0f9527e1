"""Data types. A ddg dtype is a numpy dtype object, so ``x.dtype == ddg.float32``,
``x.dtype == 'float32'`` and ``str(x.dtype)`` all behave as a numpy user expects."""
import numpy as np

float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int8 = np.dtype("int8")
uint8 = np.dtype("uint8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")

_ALIASES = {"float": float32, "double": float64, "half": float16, "int": int64, "long": int64, "bool": bool_}
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
            return np.dtype(name)
        except TypeError:
            pass
        raise TypeError(f"ddg: unknown dtype {dtype!r}")
    if dtype is float:
        return _default_float[0]
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"ddg: unknown dtype {dtype!r}") from None


def set_default_dtype(d):
    d = convert_dtype(d)
    if d.kind != "f":
        raise TypeError(f"ddg.set_default_dtype: default dtype must be a float dtype, got {d}")
    _default_float[0] = d


def get_default_dtype():
    return str(_default_float[0])


def default_float():
    return _default_float[0]


def is_floating(dtype):
    return dtype.kind in "fc"
