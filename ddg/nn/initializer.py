"""Parameter initializers (Paddle names). Each is a callable that fills a tensor in place
from the global generator (so ``ddg.seed`` makes initialization reproducible)."""
import math

import numpy as np

from ..tensor import backend
from ..tensor.tensor import Tensor


def _fans(shape):
    """Paddle's convention: [in, out] for 2-D weights; [out, in, *kernel] for convolutions."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    rf = int(np.prod(shape[2:]))
    return shape[1] * rf, shape[0] * rf


class Initializer:
    def __call__(self, param, block=None):
        arr = self._sample(tuple(param._data.shape))
        with_no_grad_set(param, arr)
        return param

    def _sample(self, shape):  # pragma: no cover - abstract
        raise NotImplementedError


def with_no_grad_set(param, arr):
    xp = backend.get_array_module(param._data)
    param._data[...] = xp.asarray(arr, dtype=param._data.dtype)
    param._bump()


class Constant(Initializer):
    def __init__(self, value=0.0):
        self.value = value

    def _sample(self, shape):
        return np.full(shape, self.value)


class Normal(Initializer):
    def __init__(self, mean=0.0, std=1.0, name=None):
        self.mean, self.std = mean, std

    def _sample(self, shape):
        return backend.rng().normal(self.mean, self.std, shape)


class TruncatedNormal(Initializer):
    """Normal(mean, std) redrawn outside [mean + a*std, mean + b*std] (a=-2, b=2 by default)."""

    def __init__(self, mean=0.0, std=1.0, a=-2.0, b=2.0, name=None):
        self.mean, self.std, self.a, self.b = mean, std, a, b

    def _sample(self, shape):
        g = backend.rng()
        out = g.standard_normal(shape)
        bad = (out < self.a) | (out > self.b)
        while bad.any():
            out[bad] = g.standard_normal(int(bad.sum()))
            bad = (out < self.a) | (out > self.b)
        return self.mean + self.std * out


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix times ``gain``: the parameter viewed as
    ``[shape[0], prod(shape[1:])]`` has orthonormal rows or columns (whichever are fewer)."""

    def __init__(self, gain=1.0, name=None):
        self.gain = gain

    def _sample(self, shape):
        if len(shape) < 2:
            raise ValueError(f"ddg.nn.initializer.Orthogonal: needs a parameter with at least 2 dimensions, "
                             f"got shape {list(shape)}")
        rows = shape[0]
        cols = int(np.prod(shape[1:]))
        a = backend.rng().standard_normal((max(rows, cols), min(rows, cols)))
        q, r = np.linalg.qr(a)
        q = q * np.sign(np.diag(r))  # a unique, uniformly distributed Q
        if rows < cols:
            q = q.T
        return (self.gain * q).reshape(shape)


class Dirac(Initializer):
    """The identity for convolutions: weight ``[out, in, k...]`` is 0 except 1 at the
    kernel's centre for output channel ``g * out/groups + i`` and input channel ``i``,
    ``i < min(out/groups, in)``, in each of the ``groups`` groups."""

    def __init__(self, groups=1, name=None):
        self.groups = int(groups)

    def _sample(self, shape):
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"ddg.nn.initializer.Dirac: needs a 3-D, 4-D or 5-D conv weight, got shape {list(shape)}")
        if shape[0] % self.groups:
            raise ValueError(f"ddg.nn.initializer.Dirac: {shape[0]} output channels do not split into "
                             f"{self.groups} groups")
        out = np.zeros(shape)
        per = shape[0] // self.groups
        centre = tuple(k // 2 for k in shape[2:])
        for g in range(self.groups):
            for i in range(min(per, shape[1])):
                out[(g * per + i, i) + centre] = 1.0
        return out


class Uniform(Initializer):
    def __init__(self, low=-1.0, high=1.0, name=None):
        self.low, self.high = low, high

    def _sample(self, shape):
        return backend.rng().uniform(self.low, self.high, shape)


class XavierUniform(Initializer):
    def __init__(self, fan_in=None, fan_out=None, gain=1.0, name=None):
        self.fan_in, self.fan_out, self.gain = fan_in, fan_out, gain

    def _sample(self, shape):
        fi, fo = _fans(shape)
        fi, fo = self.fan_in or fi, self.fan_out or fo
        limit = self.gain * math.sqrt(6.0 / (fi + fo))
        return backend.rng().uniform(-limit, limit, shape)


class XavierNormal(XavierUniform):
    def _sample(self, shape):
        fi, fo = _fans(shape)
        fi, fo = self.fan_in or fi, self.fan_out or fo
        return backend.rng().normal(0.0, self.gain * math.sqrt(2.0 / (fi + fo)), shape)


def calculate_gain(nonlinearity, param=None):
    table = {"sigmoid": 1.0, "linear": 1.0, "conv1d": 1.0, "conv2d": 1.0, "conv3d": 1.0, "tanh": 5.0 / 3,
             "relu": math.sqrt(2.0), "selu": 3.0 / 4}
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity not in table:
        raise ValueError(f"ddg.nn.initializer.calculate_gain: unknown nonlinearity {nonlinearity!r}")
    return table[nonlinearity]


class KaimingUniform(Initializer):
    """He initialisation; ``mode='fan_out'`` scales by the fan-out instead of the fan-in."""

    def __init__(self, fan_in=None, negative_slope=0.0, nonlinearity="relu", mode="fan_in", name=None):
        if mode not in ("fan_in", "fan_out"):
            raise ValueError(f"ddg.nn.initializer.{type(self).__name__}: mode must be 'fan_in' or 'fan_out', "
                             f"got {mode!r}")
        self.fan_in, self.slope, self.nonlinearity, self.mode = fan_in, negative_slope, nonlinearity, mode

    def _fan(self, shape):
        return self.fan_in or _fans(shape)[0 if self.mode == "fan_in" else 1]

    def _gain(self):
        return calculate_gain(self.nonlinearity, self.slope) if self.nonlinearity in ("relu", "leaky_relu") \
            else calculate_gain(self.nonlinearity)

    def _sample(self, shape):
        fi = self._fan(shape)
        limit = self._gain() * math.sqrt(3.0 / fi)
        return backend.rng().uniform(-limit, limit, shape)


class KaimingNormal(KaimingUniform):
    def _sample(self, shape):
        fi = self._fan(shape)
        return backend.rng().normal(0.0, self._gain() / math.sqrt(fi), shape)


class Assign(Initializer):
    def __init__(self, value, name=None):
        self.value = value._data if isinstance(value, Tensor) else np.asarray(value)

    def _sample(self, shape):
        v = backend.to_host(self.value)
        if tuple(v.shape) != tuple(shape):
            raise ValueError(f"ddg.nn.initializer.Assign: value has shape {list(v.shape)}, parameter has "
                             f"{list(shape)}")
        return v


# Paddle 1.x / fluid-era aliases
ConstantInitializer = Constant
NormalInitializer = Normal
UniformInitializer = Uniform
XavierInitializer = XavierUniform
MSRAInitializer = KaimingNormal


class Bilinear(Initializer):
    """Kernels for a transposed convolution that upsamples bilinearly: element ``i`` of the
    flattened 4-D weight gets ``(1 - |x / f - c|) * (1 - |y / f - c|)`` with ``x = i % k``,
    ``f = ceil(k / 2)``, ``c = (2f - 1 - f % 2) / (2f)``. Paddle (2.6 and 3.3) computes the row
    as ``y = (i / k) % k`` with true division, so its kernels are not the symmetric tent; ddg
    gives Paddle's values, so that a program initializes the same weights."""

    def __init__(self):
        pass

    def _sample(self, shape):
        if len(shape) != 4:
            raise ValueError(f"ddg.nn.initializer.Bilinear: needs a 4-D weight, got shape {list(shape)}")
        if shape[2] != shape[3]:
            raise ValueError(f"ddg.nn.initializer.Bilinear: needs a square kernel, got shape {list(shape)}")
        size = shape[3]
        f = math.ceil(size / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        idx = np.arange(int(np.prod(shape)))
        x = idx % size
        y = (idx / size) % size     # true division, as Paddle computes it
        return ((1 - np.abs(x / f - c)) * (1 - np.abs(y / f - c))).reshape(shape)


_global_init = {"weight": None, "bias": None}


def set_global_initializer(weight_init, bias_init=None):
    """Initializers every new parameter uses instead of its layer's default (an initializer
    given through a ParamAttr still wins); ``None, None`` restores the defaults."""
    for what, v in (("weight_init", weight_init), ("bias_init", bias_init)):
        if v is not None and not isinstance(v, Initializer):
            raise TypeError(f"ddg.nn.initializer.set_global_initializer: {what} must be an Initializer or None, "
                            f"got {type(v).__name__}")
    _global_init["weight"], _global_init["bias"] = weight_init, bias_init


def _global_initializer(is_bias):
    """The initializer set by ``set_global_initializer`` for weights or biases, or None."""
    return _global_init["bias" if is_bias else "weight"]
