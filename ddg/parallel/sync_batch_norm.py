"""``SyncBatchNorm``: batch normalization whose batch statistics span all ranks.

In training, the per-channel mean and variance are those of the *global* batch
(the union of every rank's local batch), so N ranks with B samples each normalize
exactly as one process with N*B samples would. One all-gather in forward carries each
rank's count, mean and sum of squared deviations per channel (combined on every rank in
the same order, without the cancellation of ``E[x^2] - E[x]^2``); one all-reduce in
backward carries ``[sum(g), sum(g*xhat)]`` per channel, which is what the gradient of a
normalization needs:

    dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      (means over the global batch)

Each rank's sums enter weighted by its batch rows ``b_r`` (the input's first axis), and a
rank divides by its own: ``mean(g)`` on rank r is ``sum_q b_q sum(g_q) / (b_r n)``. Each
rank's ``g`` is the gradient of its own mean loss, and DataParallel weighs rank r's
gradients by ``b_r / sum_q b_q``; so the parameters get the gradient of the mean loss over
the global batch, as in one process, even where ranks hold uneven slices. With equal slices
these are the plain sums.

The statistics are accumulated in float64. Running statistics are updated from the global statistics, so
they stay identical on every rank. In eval mode (or world size 1) no communication
happens. With world size 1 (or on running statistics) the layer computes exactly what
``ddg.nn.functional.batch_norm`` does.
"""
import warnings

import numpy as np

from ..autograd.function import Function
from ..autograd.grad_mode import no_grad
from ..nn import functional as F
from ..nn.functional.norm import _update as _update_running, batch_norm_act
from ..nn import initializer as init
from ..nn.layer.layers import Layer
from ..nn.layer.norm import BatchNorm, BatchNorm1D, BatchNorm2D, BatchNorm3D, _BatchNormBase, apply_act
from ..nn.param_attr import ParamAttr
from ..tensor import backend
from .comm import get_world_communicator

__all__ = ["SyncBatchNorm"]

_CHANNEL_LAST = ("NHWC", "NLC", "NDHWC")
_FORMATS = ("NC", "NCL", "NCHW", "NCDHW") + _CHANNEL_LAST


class _SyncStandardize(Function):
    """(x - mean) / sqrt(var + eps) with mean and var over ``axes`` of every rank's x.
    A primitive because both passes call a collective on small per-channel sums. Also
    returns the global batch's mean and (biased) variance per channel, in float64, for
    the running statistics (their gradients are not defined: they are used without)."""
    save_inputs = False
    none_grads = True

    def __init__(self, axes, eps, comm):
        self.axes, self.eps, self.comm = tuple(axes), float(eps), comm

    def forward(self, x):
        if x.dtype.kind not in "fV":
            raise TypeError(f"SyncBatchNorm expects a floating-point input, got {x.dtype}")
        xp = backend.get_array_module(x)
        axes = self.axes
        c = x.size // max(1, int(np.prod([x.shape[a] for a in axes])))
        keep = [1 if a in axes else x.shape[a] for a in range(x.ndim)]
        # this rank's count, mean and sum of squared deviations (two passes, float64)
        local = xp.zeros(2 * c + 1, dtype=np.float64)
        n_local = x.size // c
        local[0] = n_local
        if n_local:
            m = x.mean(axis=axes, dtype=np.float64)
            local[1:c + 1] = m.ravel()
            local[c + 1:] = xp.square(x - m.reshape(keep), dtype=np.float64).sum(axis=axes).ravel()
        every = self.comm.allgather(local)
        counts, means, m2s = every[:, 0], every[:, 1:c + 1], every[:, c + 1:]
        n = float(counts.sum())
        if n <= 0:
            raise ValueError("SyncBatchNorm: the global batch is empty")
        # combined without cancellation: M2 = sum_r M2_r + n_r (mean_r - mean)^2
        mean = (counts[:, None] * means).sum(axis=0) / n
        var = (m2s + counts[:, None] * xp.square(means - mean)).sum(axis=0) / n
        self.n = n
        self.rows = float(x.shape[0])   # this rank's weight (DataParallel's: its batch rows)
        rstd = (1.0 / xp.sqrt(var + self.eps)).astype(x.dtype).reshape(keep)
        xhat = (x - mean.astype(x.dtype).reshape(keep)) * rstd
        self.rstd, self.xhat, self.c = rstd, xhat, c
        return xhat, mean, var

    def backward(self, g):
        g, g_mean, g_var = g
        if g_mean is not None or g_var is not None:
            raise RuntimeError("SyncBatchNorm: the batch statistics it returns for the running ones are not "
                               "differentiable")
        axes, c, y = self.axes, self.c, self.xhat
        xp = backend.get_array_module(y)
        if g is None:
            g = xp.zeros_like(y)
        # weighted by the batch rows (see the module docstring)
        b = self.rows
        buf = xp.empty(2 * c, dtype=np.float64)
        buf[:c] = g.sum(axis=axes, dtype=np.float64).ravel()
        buf[c:] = (g * y).sum(axis=axes, dtype=np.float64).ravel()
        if b != 1.0:
            buf *= b
        self.comm.allreduce(buf, "sum")
        if not y.size:
            return (xp.zeros_like(y),)
        keep = self.rstd.shape
        scale = 1.0 / (b * self.n)
        mg = (buf[:c] * scale).astype(g.dtype).reshape(keep)
        mgy = (buf[c:] * scale).astype(g.dtype).reshape(keep)
        return (self.rstd * (g - mg - y * mgy),)


class SyncBatchNorm(Layer):
    """Paddle's ``paddle.nn.SyncBatchNorm(num_features, momentum=0.9, epsilon=1e-5,
    weight_attr=None, bias_attr=None, data_format='NCHW', name=None)``.

    Parameters ``weight`` (ones) and ``bias`` (zeros); non-trainable parameters ``_mean`` and
    ``_variance`` (as BatchNorm's), updated as ``running = momentum * running + (1 - momentum) * batch``
    with the (biased) variance of the global batch, as Paddle does. Accepts inputs
    of rank 2 to 5; the channel axis is 1 (or the last one for channel-last formats).

    A layer made by :meth:`convert_sync_batchnorm` also keeps the batch norm's
    ``use_global_stats`` (True: always the running statistics; False: always the batch's)
    and the fluid-style ``act``, so that on one rank it computes what the batch norm did.
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
        self._use_global_stats = None   # None: batch statistics in training, running ones in eval
        self._act = None                # a fluid-style activation name (see convert_sync_batchnorm)
        self._ndims = (2, 3, 4, 5)      # the input ranks accepted
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
        if x.ndim not in self._ndims:
            raise ValueError(f"SyncBatchNorm: expects an input of rank {' or '.join(map(str, self._ndims))}, "
                             f"got shape {x.shape}")
        ca = self._channel_axis(x.ndim)
        if x.shape[ca] != self._num_features:
            raise ValueError(f"SyncBatchNorm: input has {x.shape[ca]} channels on axis {ca} "
                             f"(shape {x.shape}), expected {self._num_features}")
        ugs = self._use_global_stats
        batch_stats = self.training if ugs is None else not ugs
        comm = self._communicator() if batch_stats else None
        if comm is None or comm.size == 1:
            # running statistics, or a world of one: exactly what a batch norm computes (a ReLU
            # folded into it as BatchNorm(act='relu') does)
            if self._act in (None, "relu"):
                return batch_norm_act(x, self._mean, self._variance, self.weight, self.bias, batch_stats,
                                      self._momentum, self._epsilon, self._data_format, not batch_stats, self._act)
            y = F.batch_norm(x, self._mean, self._variance, self.weight, self.bias, batch_stats, self._momentum,
                             self._epsilon, self._data_format, not batch_stats)
            return apply_act(y, self._act)
        shape = [1] * x.ndim
        shape[ca] = self._num_features
        axes = tuple(a for a in range(x.ndim) if a != ca)
        xhat, mean, var = _SyncStandardize(axes, self._epsilon, comm)(x)
        with no_grad():   # with ops and set_value, so that ddg.jit.to_static records the update
            _update_running(self._mean, mean, self._momentum)
            _update_running(self._variance, var, self._momentum)
        if self.weight is not None:
            xhat = xhat * self.weight.reshape(shape)
        if self.bias is not None:
            xhat = xhat + self.bias.reshape(shape)
        return apply_act(xhat, self._act)

    def _communicator(self):
        """The world's communicator, or the ``group``'s (a Communicator or a
        ``ddg.distributed`` Group, which must have this rank as a member)."""
        group = self._group
        if group is None:
            return get_world_communicator()
        if hasattr(group, "allgather"):
            return group
        comm = getattr(group, "process_group", None)
        if comm is None:
            raise ValueError(f"SyncBatchNorm: this rank is not a member of its group {group!r}")
        return comm

    def extra_repr(self):
        s = (f"num_features={self._num_features}, momentum={self._momentum}, "
             f"epsilon={self._epsilon}, data_format={self._data_format}")
        if self._use_global_stats is not None:
            s += f", use_global_stats={self._use_global_stats}"
        return s + (f", act={self._act}" if self._act else "")

    @classmethod
    def convert_sync_batchnorm(cls, layer):
        """Replace every batch norm inside ``layer`` (recursively; ``layer`` itself too) by a
        SyncBatchNorm that computes the same function on one rank: ``BatchNorm1D/2D/3D``
        and the fluid-style ``BatchNorm`` (its ``act``, ``data_layout``, ``is_test``,
        ``use_global_stats`` and ``trainable_statistics`` included). The new layer holds the
        very same Parameter objects (``weight``, ``bias``, ``_mean``, ``_variance``), so an
        optimizer built earlier keeps working and state_dict keys are unchanged; the
        training mode and forward hooks carry over, and a layer used at several places
        becomes one SyncBatchNorm used at the same places.

        A subclass of a batch norm that redefines how it computes (``forward`` or its
        input check) or holds more state is left as it is, with a warning naming it.
        Returns the converted layer (a new object only when ``layer`` itself is a batch
        norm); a ``DataParallel`` is converted inside."""
        return _convert(cls, layer, "", {})


def _convert(cls, layer, path, memo):
    if id(layer) in memo:
        return memo[id(layer)]
    if isinstance(layer, _BatchNormBase):
        why = _why_not_convertible(layer)
        if why is None:
            new = memo[id(layer)] = _convert_one(cls, layer)
            return new
        warnings.warn(f"ddg.nn.SyncBatchNorm.convert_sync_batchnorm: left {path or 'the layer'} "
                      f"({type(layer).__name__}) as it is: {why}", stacklevel=3)
        memo[id(layer)] = layer
        return layer
    memo[id(layer)] = layer
    inner = layer.__dict__.get("_layers")
    if isinstance(inner, Layer) and "_layers" not in layer._sub_layers:
        # DataParallel: the wrapped model is not registered as a sublayer
        new = _convert(cls, inner, path, memo)
        if new is not inner:
            object.__setattr__(layer, "_layers", new)
    for name, sub in list(layer._sub_layers.items()):
        if sub is None:
            continue
        new = _convert(cls, sub, f"{path}.{name}" if path else name, memo)
        if new is not sub:
            layer._sub_layers[name] = new
    return layer


_KNOWN = (_BatchNormBase, BatchNorm, BatchNorm1D, BatchNorm2D, BatchNorm3D)
_STATE = ("weight", "bias", "_mean", "_variance")


def _why_not_convertible(bn):
    """None when a SyncBatchNorm can compute what ``bn`` computes, else the reason."""
    cls = type(bn)
    for meth in ("forward", "_check_input", "__call__"):
        owner = next(k for k in cls.__mro__ if meth in k.__dict__)
        if owner not in _KNOWN and owner is not Layer:
            return f"{owner.__name__} redefines {meth}()"
    params = [k for k, v in bn._parameters.items() if v is not None]
    # weight and bias may be absent (weight_attr/bias_attr=False); the statistics may not
    if not set(params) <= set(_STATE) or not set(_STATE[2:]) <= set(params) \
            or any(v is not None for v in bn._buffers.values()) or any(v is not None for v in bn._sub_layers.values()):
        extra = sorted(set(params) - set(_STATE)) + [k for k, v in bn._buffers.items() if v is not None] + \
            [k for k, v in bn._sub_layers.items() if v is not None]
        missing = sorted(set(_STATE[2:]) - set(params))
        return f"it holds state a SyncBatchNorm does not (extra {extra}, missing {missing})"
    return None


# the input ranks each batch norm accepts (the fluid-style one takes any rank a SyncBatchNorm does)
_NDIMS = {BatchNorm1D: (2, 3), BatchNorm2D: (4,), BatchNorm3D: (5,)}


def _convert_one(cls, bn):
    new = cls.__new__(cls)
    Layer.__init__(new, dtype=bn._dtype)
    d = new.__dict__
    d["_num_features"] = int(bn._mean.shape[0])
    d["_momentum"] = float(bn._momentum)
    d["_epsilon"] = float(bn._epsilon)
    d["_data_format"] = bn._data_format
    d["_group"] = None
    d["_use_global_stats"] = bn._statistics_mode()
    d["_act"] = getattr(bn, "_act", None)
    d["_ndims"] = next((v for k, v in _NDIMS.items() if isinstance(bn, k)), (2, 3, 4, 5))
    # the very same Parameter objects, in the same order (optimizers, state_dict keys, reducer order)
    new._parameters.update(bn._parameters)
    for name in ("weight", "bias"):      # weight_attr/bias_attr=False: no parameter at all
        if bn._parameters.get(name) is None:
            new._parameters.pop(name, None)
            d[name] = None
    for key in ("_forward_pre_hooks", "_forward_post_hooks"):
        d[key].update(bn.__dict__[key])
    if "_state_dict_hooks" in bn.__dict__:
        d["_state_dict_hooks"] = bn.__dict__["_state_dict_hooks"]
    d["training"] = bn.training
    return new
