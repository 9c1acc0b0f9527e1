"""Activations: single ops (``autograd/ops/activation.py``, the softmax family in ``nn_ops.py``)
except the composites at the end (glu; prelu on cupy and in half precision)."""

import numpy as np

from ...autograd.axes import normalize_axis as _ax
from ...autograd.ops import activation as A
from ...autograd.ops import elementwise as E
from ...autograd.ops import nn_ops
from ...autograd.ops.elementwise import relu, sigmoid, tanh  # noqa: F401
from ...tensor.dtypes import default_float as _default_float
from ...tensor.tensor import Tensor as _Tensor


def _float(x, op):
    """Float tensors as they are; integer and bool ones in the default float dtype."""
    k = x._data.dtype.kind
    if k in "fV":
        return x
    if k in "iub":
        return _Tensor._wrap(x._data.astype(_default_float()))
    raise TypeError(f"ddg.nn.functional.{op}: needs a real tensor, got {x.dtype} (shape {x.shape})")


def relu6(x, name=None):
    return E.Clip(0.0, 6.0, strict=True)(x)  # gradient 0 at both kinks, as Paddle


def leaky_relu(x, negative_slope=0.01, name=None):
    return A.LeakyRelu(negative_slope)(_float(x, "leaky_relu"))  # gradient 1 at 0, as Paddle


def elu(x, alpha=1.0, name=None):
    return A.Elu(alpha)(_float(x, "elu"))  # gradient alpha at 0 (the left branch's slope), as Paddle


def selu(x, scale=1.0507009873554805, alpha=1.6732632423543772, name=None):
    return A.Elu(alpha, scale)(_float(x, "selu"))  # gradient scale * alpha at 0, as Paddle


def celu(x, alpha=1.0, name=None):
    if alpha == 0:
        raise ZeroDivisionError("ddg.nn.functional.celu: alpha must not be 0")
    return A.Elu(alpha, 1.0, alpha)(_float(x, "celu"))


def softshrink(x, threshold=0.5, name=None):
    """``x - t`` above ``t``, ``x + t`` below ``-t``, 0 between (gradient 0 at ``±t``, as Paddle)."""
    if threshold < 0:
        raise ValueError(f"ddg.nn.functional.softshrink: threshold must be >= 0, got {threshold}")
    return A.Softshrink(threshold)(_float(x, "softshrink"))


def hardshrink(x, threshold=0.5, name=None):
    """``x`` where ``|x| >= threshold`` (Paddle keeps the bounds), else 0."""
    return A.Hardshrink(threshold)(_float(x, "hardshrink"))


def thresholded_relu(x, threshold=1.0, value=0.0, name=None):
    """``x`` where ``x > threshold``, else ``value``."""
    return A.ThresholdedRelu(threshold, value)(_float(x, "thresholded_relu"))


def gelu(x, approximate=False, name=None):
    return A.Gelu(approximate)(_float(x, "gelu"))


def silu(x, name=None):
    return A.Silu()(_float(x, "silu"))


swish = silu


def hardtanh(x, min=-1.0, max=1.0, name=None):  # noqa: A002
    return E.Clip(min, max, strict=True)(x)  # gradient 0 at both kinks, as Paddle


def hardsigmoid(x, slope=0.1666667, offset=0.5, name=None):
    return A.Hardsigmoid(slope, offset)(_float(x, "hardsigmoid"))  # gradient 0 at the kinks, as Paddle


def hardswish(x, name=None):
    return A.Hardswish()(_float(x, "hardswish"))  # gradient 0 at -3, 1 at 3, as Paddle


def softplus(x, beta=1, threshold=20, name=None):
    return A.Softplus(beta, threshold)(_float(x, "softplus"))


def mish(x, name=None):
    return A.Mish()(_float(x, "mish"))


def log_sigmoid(x, name=None):
    return A.LogSigmoid()(_float(x, "log_sigmoid"))


def softsign(x, name=None):
    return A.Softsign()(_float(x, "softsign"))


def tanhshrink(x, name=None):
    return A.Tanhshrink()(_float(x, "tanhshrink"))


def prelu(x, weight, data_format="NCHW", name=None):
    dt = x._data.dtype
    if (type(x._data) is np.ndarray and dt in (np.float32, np.float64) and weight._data.dtype == dt
            and weight.ndim == 1 and (weight.size == 1 or x.ndim > 1)):
        axis = None if weight.size == 1 else (1 if data_format.startswith("NC") else x.ndim - 1)
        return A.PRelu(axis)(x, weight)          # one compiled pass each way
    w = weight
    if x.ndim > 1 and weight.size > 1:
        shape = [1] * x.ndim
        shape[1 if data_format.startswith("NC") else -1] = weight.size
        w = weight.reshape(shape)
    # max(x, 0) + w min(x, 0): gradient w at 0 (the strict clip gives 0 there), as Paddle; two
    # clips instead of a where, which is a slow numpy pass on an unpredictable mask
    return E.Clip(0.0, None, strict=True)(x) + E.Clip(None, 0.0)(x) * w


def softmax(x, axis=-1, dtype=None, name=None):
    if dtype is not None:
        x = x.astype(dtype)
    elif x.dtype.kind not in "fcV":
        x = x.astype("float32")
    return nn_ops.Softmax(_ax(axis, x.ndim, "softmax"))(x)


def log_softmax(x, axis=-1, dtype=None, name=None):
    if dtype is not None:
        x = x.astype(dtype)
    elif x.dtype.kind not in "fcV":
        x = x.astype("float32")
    return nn_ops.LogSoftmax(_ax(axis, x.ndim, "log_softmax"))(x)


def glu(x, axis=-1, name=None):
    """Gated linear unit: the first half of ``x`` along ``axis`` times the sigmoid of the second."""
    ax = _ax(axis, x.ndim, "glu")
    if x.shape[ax] % 2:
        raise ValueError(f"ddg.nn.functional.glu: axis {axis} of shape {x.shape} must have an even size")
    return A.Glu(ax)(x)
