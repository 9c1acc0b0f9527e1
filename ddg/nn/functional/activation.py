"""Activations (composites, except the stable softmax family)."""
import math

from ...autograd.axes import normalize_axis as _ax
from ...autograd.ops import elementwise as E
from ...autograd.ops import movement as _M
from ...autograd.ops import nn_ops
from ...autograd.ops.elementwise import relu, sigmoid, tanh  # noqa: F401


def relu6(x, name=None):
    return E.Clip(0.0, 6.0, strict=True)(x)  # gradient 0 at both kinks, as Paddle


def leaky_relu(x, negative_slope=0.01, name=None):
    return E.where(x >= 0, x, x * negative_slope)  # gradient 1 at 0, as Paddle


def elu(x, alpha=1.0, name=None):
    # gradient alpha at 0 (the left branch's slope), as Paddle; the inner where keeps exp finite
    return E.where(x > 0, x, (E.exp(E.where(x <= 0, x, 0.0)) - 1) * alpha)


def selu(x, scale=1.0507009873554805, alpha=1.6732632423543772, name=None):
    # gradient scale * alpha at 0 (the left branch's slope), as Paddle
    return scale * E.where(x > 0, x, (E.exp(E.where(x <= 0, x, 0.0)) - 1) * alpha)


def celu(x, alpha=1.0, name=None):
    if alpha == 0:
        raise ZeroDivisionError("ddg.nn.functional.celu: alpha must not be 0")
    return E.where(x > 0, x, (E.exp(E.where(x <= 0, x, 0.0) / alpha) - 1) * alpha)


def softshrink(x, threshold=0.5, name=None):
    """``x - t`` above ``t``, ``x + t`` below ``-t``, 0 between (gradient 0 at ``±t``, as Paddle)."""
    if threshold < 0:
        raise ValueError(f"ddg.nn.functional.softshrink: threshold must be >= 0, got {threshold}")
    return E.where(x > threshold, x - threshold, E.where(x < -threshold, x + threshold, 0.0))


def hardshrink(x, threshold=0.5, name=None):
    """``x`` where ``|x| >= threshold`` (Paddle keeps the bounds), else 0."""
    return E.where(E.abs(x) >= threshold, x, 0.0)


def thresholded_relu(x, threshold=1.0, value=0.0, name=None):
    """``x`` where ``x > threshold``, else ``value``."""
    return E.where(x > threshold, x, float(value))


def gelu(x, approximate=False, name=None):
    if approximate:
        return 0.5 * x * (1 + E.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + E.erf(x * (1 / math.sqrt(2))))


def silu(x, name=None):
    return x * E.sigmoid(x)


swish = silu


def hardtanh(x, min=-1.0, max=1.0, name=None):  # noqa: A002
    return E.Clip(min, max, strict=True)(x)  # gradient 0 at both kinks, as Paddle


def hardsigmoid(x, slope=0.1666667, offset=0.5, name=None):
    return E.Clip(0.0, 1.0, strict=True)(x * slope + offset)


def hardswish(x, name=None):
    # Paddle's gradient at the kinks: 0 at -3, 1 at 3 (the strict clip gives exactly that)
    return x * E.Clip(0.0, 6.0, strict=True)(x + 3) / 6


def softplus(x, beta=1, threshold=20, name=None):
    bx = x * beta
    return E.where(bx > threshold, x, E.log1p(E.exp(E.minimum(bx, float(threshold)))) / beta)


def mish(x, name=None):
    return x * E.tanh(softplus(x))


def log_sigmoid(x, name=None):
    return -softplus(-x)


def softsign(x, name=None):
    return x / (1 + E.abs(x))


def tanhshrink(x, name=None):
    return x - E.tanh(x)


def prelu(x, weight, data_format="NCHW", name=None):
    w = weight
    if x.ndim > 1 and weight.size > 1:
        shape = [1] * x.ndim
        shape[1 if data_format.startswith("NC") else -1] = weight.size
        w = weight.reshape(shape)
    return E.where(x > 0, x, x * w)


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
    a, b = _M.split(x, 2, ax)
    return a * E.sigmoid(b)
