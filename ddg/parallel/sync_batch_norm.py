"""``SyncBatchNorm``: batch normalization whose batch statistics span all ranks.

In training, the per-channel mean and variance are those of the *global* batch
(the union of every rank's local batch), so N ranks with B samples each normalize
exactly as one process with N*B samples would. One all-reduce in forward carries
``[sum(x), sum(x*x), count]`` per channel; one all-reduce in backward carries
``[sum(g), sum(g*xhat)]`` per channel, which is what the gradient of a normalization
needs:

    dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      (means over the global batch)

The sums are accumulated in float64, which keeps ``E[x^2] - E[x]^2`` accurate for
float32 activations. Running statistics are updated from the global statistics, so
they stay identical on every rank. In eval mode (or world size 1) no communication
happens. With world size 1 the layer behaves like ``BatchNorm``.
"""
import numpy as np

from ..autograd.function import Function
from ..nn import initializer as init
from ..nn.layer.layers import Layer
from ..nn.param_attr import ParamAttr
from ..nn.parameter import Parameter
from ..tensor import backend
from ..tensor.tensor import Tensor
from .comm import get_world_communicator

__all__ = ["SyncBatchNorm"]

_CHANNEL_LAST = ("NHWC", "NLC", "NDHWC")
_FORMATS = ("NC", "NCL", "NCHW", "NCDHW") + _CHANNEL_LAST


class _SyncStandardize(Function):
    """(x - mean) / sqrt(var + eps) with mean and var over ``axes`` of every rank's x.
    A primitive because both passes call a collective on small per-channel sums."""
    save_inputs = False

    def __init__(self, axes, eps, comm):
        self.axes, self.eps, self.comm = tuple(axes), float(eps), comm

    def forward(self, x):
        if x.dtype.kind not in "fV":
            raise TypeError(f"SyncBatchNorm expects a floating-point input, got {x.dtype}")
        xp = backend.get_array_module(x)
        axes = self.axes
        c = x.size // max(1, int(np.prod([x.shape[a] for a in axes])))
        buf = xp.empty(2 * c + 1, dtype=np.float64)
        buf[:c] = x.sum(axis=axes, dtype=np.float64).ravel()
        buf[c:2 * c] = xp.square(x, dtype=np.float64).sum(axis=axes).ravel()
        buf[-1] = x.size // c
        self.comm.allreduce(buf, "sum")
        n = float(buf[-1])
        if n <= 0:
            raise ValueError("SyncBatchNorm: the global batch is empty")
        mean = buf[:c] / n
        var = xp.maximum(buf[c:2 * c] / n - mean * mean, 0.0)
        keep = [1 if a in axes else x.shape[a] for a in range(x.ndim)]
        self.n, self.mean, self.var = n, mean, var
        rstd = (1.0 / xp.sqrt(var + self.eps)).astype(x.dtype).reshape(keep)
        xhat = (x - mean.astype(x.dtype).reshape(keep)) * rstd
        self.rstd, self.xhat, self.c = rstd, xhat, c
        return xhat

    def backward(self, g):
        xp = backend.get_array_module(g)
        axes, c, y = self.axes, self.c, self.xhat
        buf = xp.empty(2 * c, dtype=np.float64)
        buf[:c] = g.sum(axis=axes, dtype=np.float64).ravel()
        buf[c:] = (g * y).sum(axis=axes, dtype=np.float64).ravel()
        self.comm.allreduce(buf, "sum")
        keep = self.rstd.shape
        mg = (buf[:c] / self.n).astype(g.dtype).reshape(keep)
        mgy = (buf[c:] / self.n).astype(g.dtype).reshape(keep)
        return (self.rstd * (g - mg - y * mgy),)


class SyncBatchNorm(Layer):
    """Paddle's ``paddle.nn.SyncBatchNorm(num_features, momentum=0.9, epsilon=1e-5,
    weight_attr=None, bias_attr=None, data_format='NCHW', name=None)``.

    Parameters ``weight`` (ones) and ``bias`` (zeros); non-trainable parameters ``_mean`` and
    ``_variance`` (as BatchNorm's), updated as ``running = momentum * running + (1 - momentum) * batch``
    with the (biased) variance of the global batch, as Paddle does. Accepts inputs
    of rank 2 to 5; the channel axis is 1 (or the last one for channel-last formats).
    """

    def __init__(self, num_features, momentum=0.9, epsilon=1e-05, weight_attr=None, bias_attr=None,
                 data_format="NCHW", name=None, group=None):
        super().__init__()
        if data_format not in _FORMATS:
            raise ValueError(f"SyncBatchNorm: data_format must be one of {_FORMATS}, got {data_format!r}")
        self._num_features = int(num_features)
        self._momentum = float(momentum)
        self._epsilon = float(epsilon)
        self._data_format = data_format
        self._group = group
        self.weight = self.create_parameter([num_features], attr=weight_attr,
                                            default_initializer=init.Constant(1.0))
        self.bias = self.create_parameter([num_features], attr=bias_attr, is_bias=True)
        dtype = self._dtype
        # running statistics: non-trainable parameters, as BatchNorm's (and Paddle's)
        self._mean = self.create_parameter([num_features], attr=ParamAttr(initializer=init.Constant(0.0),
                                                                          trainable=False), dtype=dtype)
        self._variance = self.create_parameter([num_features], attr=ParamAttr(initializer=init.Constant(1.0),
                                                                              trainable=False), dtype=dtype)

    def _channel_axis(self, ndim):
        return ndim - 1 if self._data_format in _CHANNEL_LAST else 1

    def forward(self, x):
        if x.ndim < 2 or x.ndim > 5:
            raise ValueError(f"SyncBatchNorm: expects an input of rank 2 to 5, got shape {x.shape}")
        ca = self._channel_axis(x.ndim)
        if x.shape[ca] != self._num_features:
            raise ValueError(f"SyncBatchNorm: input has {x.shape[ca]} channels on axis {ca} "
                             f"(shape {x.shape}), expected {self._num_features}")
        shape = [1] * x.ndim
        shape[ca] = self._num_features
        axes = tuple(a for a in range(x.ndim) if a != ca)
        if self.training:
            comm = self._group if self._group is not None else get_world_communicator()
            op = _SyncStandardize(axes, self._epsilon, comm)
            xhat = op(x)
            m = self._momentum
            mean, var = self._mean, self._variance
            mean._data[...] = m * mean._data + (1 - m) * op.mean.astype(mean._data.dtype)
            var._data[...] = m * var._data + (1 - m) * op.var.astype(var._data.dtype)
            mean._bump()
            var._bump()
        else:
            rm = self._mean.reshape(shape)
            rv = self._variance.reshape(shape)
            xhat = (x - rm) / (rv + self._epsilon).sqrt()
        if self.weight is not None:
            xhat = xhat * self.weight.reshape(shape)
        if self.bias is not None:
            xhat = xhat + self.bias.reshape(shape)
        return xhat

    def extra_repr(self):
        return (f"num_features={self._num_features}, momentum={self._momentum}, "
                f"epsilon={self._epsilon}, data_format={self._data_format}")

    @classmethod
    def convert_sync_batchnorm(cls, layer):
        """Replace every BatchNorm / BatchNorm1D / 2D / 3D inside ``layer`` (recursively)
        by a SyncBatchNorm with the same parameters, buffers and settings; returns the
        converted layer (a new object only when ``layer`` itself is a batch norm)."""
        if _is_batch_norm(layer):
            return _convert_one(cls, layer)
        for name, sub in list(layer._sub_layers.items()):
            if sub is None:
                continue
            new = cls.convert_sync_batchnorm(sub)
            if new is not sub:
                layer._sub_layers[name] = new
        return layer


_BN_NAMES = ("BatchNorm", "BatchNorm1D", "BatchNorm2D", "BatchNorm3D")


def _is_batch_norm(layer):
    return type(layer).__name__ in _BN_NAMES and not isinstance(layer, SyncBatchNorm)


def _attr(layer, names, default):
    for n in names:
        v = layer.__dict__.get(n)
        if v is not None:
            return v
    return default


def _convert_one(cls, bn):
    weight = bn._parameters.get("weight")
    bias = bn._parameters.get("bias")
    stats = {**bn._buffers, **{k: v for k, v in bn._parameters.items() if v is not None}}
    mean = stats.get("_mean", stats.get("running_mean"))
    var = stats.get("_variance", stats.get("running_var"))
    ref = weight if weight is not None else mean
    if ref is None:
        raise TypeError(f"convert_sync_batchnorm: cannot read the statistics of {type(bn).__name__}")
    n = int(ref.shape[0])
    fmt = _attr(bn, ("_data_format", "data_format"), "NCHW")
    if fmt not in _FORMATS:
        fmt = "NCHW"
    new = cls(n, momentum=_attr(bn, ("_momentum", "momentum"), 0.9),
              epsilon=_attr(bn, ("_epsilon", "epsilon", "eps"), 1e-5), data_format=fmt)
    # Keep the very same Parameter objects (an optimizer built earlier keeps working).
    new._parameters["weight"] = weight
    new._parameters["bias"] = bias
    for name, t in (("_mean", mean), ("_variance", var)):
        if t is None:
            continue
        new._parameters.pop(name, None)
        new._buffers.pop(name, None)
        (new._parameters if isinstance(t, Parameter) else new._buffers)[name] = t
    new.training = bn.training
    return new
