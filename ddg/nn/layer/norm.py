"""BatchNorm (BatchNorm1D/2D/3D and the fluid-style BatchNorm), LayerNorm, GroupNorm,
InstanceNorm1D/2D/3D, LocalResponseNorm, SpectralNorm (Paddle signatures).

Batch norm keeps its running statistics in ``_mean`` (zeros) and ``_variance`` (ones),
Paddle's names, non-trainable parameters as in Paddle (stop_gradient=True: listed by
``parameters()``, never given a gradient, skipped by optimizers), and updates them in training mode as
``running = momentum * running + (1 - momentum) * batch_stat`` with the biased batch
variance (see ddg.nn.functional.norm). Eval mode normalizes with them.
"""
import numpy as np

from ...autograd import grad_mode
from ...autograd.ops import elementwise as E
from ...autograd.ops import linalg as L
from ...autograd.ops import movement as M
from ...autograd.ops import reduce as R
from ...tensor import backend
from ...tensor.place import current_place, move_array
from ...tensor.tensor import Tensor
from .. import functional as F
from ..functional.norm import batch_norm_act
from ..initializer import Constant, Normal
from ..param_attr import ParamAttr
from .layers import Layer, _unique_name


class _BatchNormBase(Layer):
    _formats = ("NCHW", "NHWC")

    def __init__(self, num_features, momentum=0.9, epsilon=1e-05, weight_attr=None, bias_attr=None,
                 data_format="NCHW", use_global_stats=None, name=None, dtype="float32"):
        super().__init__(dtype=dtype)
        if data_format not in self._formats:
            raise ValueError(f"ddg.nn.{type(self).__name__}: data_format must be one of {self._formats}, "
                             f"got {data_format!r}")
        self._num_features = num_features
        self._momentum, self._epsilon = momentum, epsilon
        self._data_format, self._use_global_stats = data_format, use_global_stats
        self._weight_attr, self._bias_attr, self._name = weight_attr, bias_attr, name
        self._fuse_with_relu, self._in_place = False, False
        # weight_attr/bias_attr False: no scale / no shift, and no such parameter (Paddle 3)
        self.weight = self.create_parameter([num_features], attr=weight_attr, default_initializer=Constant(1.0))
        self.bias = self.create_parameter([num_features], attr=bias_attr, is_bias=True)
        # The running statistics are parameters that need no gradient (trainable=False), as in
        # Paddle: listed by parameters() (optimizers skip them: they never get a gradient) and
        # named as the next weights, batch_norm2d_0.w_1 and .w_2
        self._mean = self.create_parameter([num_features], attr=ParamAttr(initializer=Constant(0.0),
                                                                          trainable=False))
        self._variance = self.create_parameter([num_features], attr=ParamAttr(initializer=Constant(1.0),
                                                                              trainable=False))

    def _check_input(self, x):
        pass

    def _statistics_mode(self):
        """F.batch_norm's ``use_global_stats`` (True, False, or None: by training mode)."""
        return self._use_global_stats

    def forward(self, x):
        self._check_input(x)
        return F.batch_norm(x, self._mean, self._variance, self.weight, self.bias, self.training, self._momentum,
                            self._epsilon, self._data_format, self._use_global_stats)

    def extra_repr(self):
        return f"num_features={self._num_features}, momentum={self._momentum}, epsilon={self._epsilon}"


class BatchNorm1D(_BatchNormBase):
    _formats = ("NC", "NCL", "NLC")

    def __init__(self, num_features, momentum=0.9, epsilon=1e-05, weight_attr=None, bias_attr=None,
                 data_format="NCL", use_global_stats=None, name=None):
        super().__init__(num_features, momentum, epsilon, weight_attr, bias_attr, data_format, use_global_stats, name)

    def _check_input(self, x):
        if x.ndim not in (2, 3):
            raise ValueError(f"ddg.nn.BatchNorm1D: expected a 2-D or 3-D input, got shape {x.shape}")


class BatchNorm2D(_BatchNormBase):
    def _check_input(self, x):
        if x.ndim != 4:
            raise ValueError(f"ddg.nn.BatchNorm2D: expected a 4-D input, got shape {x.shape}")


class BatchNorm3D(_BatchNormBase):
    _formats = ("NCDHW", "NDHWC")

    def __init__(self, num_features, momentum=0.9, epsilon=1e-05, weight_attr=None, bias_attr=None,
                 data_format="NCDHW", use_global_stats=None, name=None):
        super().__init__(num_features, momentum, epsilon, weight_attr, bias_attr, data_format, use_global_stats, name)

    def _check_input(self, x):
        if x.ndim != 5:
            raise ValueError(f"ddg.nn.BatchNorm3D: expected a 5-D input, got shape {x.shape}")


class BatchNorm(_BatchNormBase):
    """The fluid-era ``paddle.nn.BatchNorm(num_channels, act=None, is_test=False, momentum=0.9,
    epsilon=1e-05, param_attr=None, bias_attr=None, dtype='float32', data_layout='NCHW', ...)``:
    any input rank, channels on axis 1 (or last with data_layout='NHWC').

    As Paddle's in dygraph: ``is_test=True`` only starts the layer in eval mode (``train()``
    turns batch statistics back on); ``use_global_stats=True`` always normalizes with the
    running statistics; ``trainable_statistics=True`` normalizes with (and updates from) the
    batch statistics in eval mode too; ``act`` names the activation applied to the
    output (a function of ``ddg.nn.functional``, or one of Paddle's activation op names
    such as ``hard_swish``, ``hard_sigmoid`` (slope 0.2), ``brelu``, ``stanh``). ``in_place``, ``moving_mean_name``, ``moving_variance_name`` and
    ``do_model_average_for_mean_and_var`` change nothing computed."""
    _formats = ("NCHW", "NHWC")

    def __init__(self, num_channels, act=None, is_test=False, momentum=0.9, epsilon=1e-05, param_attr=None,
                 bias_attr=None, dtype="float32", data_layout="NCHW", in_place=False, moving_mean_name=None,
                 moving_variance_name=None, do_model_average_for_mean_and_var=True, use_global_stats=False,
                 trainable_statistics=False):
        if act is not None and (not isinstance(act, str) or _act_function(act) is None):
            raise ValueError(f"ddg.nn.BatchNorm: act must name an activation (a function of ddg.nn.functional "
                             f"or a Paddle activation op such as 'hard_swish'), got {act!r}")
        super().__init__(num_channels, momentum, epsilon, param_attr, bias_attr, data_layout, None, dtype=dtype)
        self._use_global_stats = use_global_stats
        self._act, self._is_test = act, is_test
        self._param_attr, self._data_layout, self._in_place = param_attr, data_layout, in_place
        self._trainable_statistics = bool(trainable_statistics)
        self.training = not is_test

    def forward(self, x):
        fmt = self._data_format        # fluid BatchNorm takes 2-D to 5-D inputs, channels at 1 (NCHW) or last
        if x.ndim != 4:
            fmt = "NC" if x.ndim == 2 else ("NCL" if fmt == "NCHW" else "NLC") if x.ndim == 3 else \
                ("NCDHW" if fmt == "NCHW" else "NDHWC")
        if self._act in ("relu", None):   # batch norm and ReLU as one op in training (numpy and cupy)
            return batch_norm_act(x, self._mean, self._variance, self.weight, self.bias, self.training,
                                  self._momentum, self._epsilon, fmt, self._statistics_mode(), self._act)
        y = F.batch_norm(x, self._mean, self._variance, self.weight, self.bias, self.training, self._momentum,
                         self._epsilon, fmt, self._statistics_mode())
        return apply_act(y, self._act)

    def _statistics_mode(self):
        """F.batch_norm's ``use_global_stats``: True, the running statistics always;
        False, the batch's always (``trainable_statistics``); None, by training mode."""
        return True if self._use_global_stats else (False if self._trainable_statistics else None)

    def extra_repr(self):
        return super().extra_repr() + (f", act={self._act}" if self._act else "")


#: Paddle's legacy activation op names (what a fluid-style ``act`` calls) whose
#: ddg.nn.functional name or defaults differ
_LEGACY_ACTS = {
    "hard_swish": F.hardswish,
    "hard_sigmoid": lambda y: F.hardsigmoid(y, slope=0.2, offset=0.5),
    "logsigmoid": F.log_sigmoid,
    "tanh_shrink": F.tanhshrink,
    "brelu": lambda y: y.clip(0.0, 24.0),
    "stanh": lambda y: (y * 0.67).tanh() * 1.7159,
}


def _act_function(act):
    fn = _LEGACY_ACTS.get(act) or getattr(F, act, None)
    return fn if callable(fn) else None


def apply_act(y, act):
    """The fluid-style ``act`` of a layer (a Paddle activation op name), or y if None."""
    return _act_function(act)(y) if act else y


class LayerNorm(Layer):
    """Normalize over the trailing ``normalized_shape`` dims; weight (ones) and bias (zeros)
    are flat vectors of ``prod(normalized_shape)`` entries, as in Paddle."""

    def __init__(self, normalized_shape, epsilon=1e-05, weight_attr=None, bias_attr=None, name=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = [normalized_shape]
        self._normalized_shape = [int(s) for s in normalized_shape]
        self._epsilon, self._weight_attr, self._bias_attr = epsilon, weight_attr, bias_attr
        size = int(np.prod(self._normalized_shape))
        self.weight = self.create_parameter([size], attr=weight_attr, default_initializer=Constant(1.0))
        self.bias = self.create_parameter([size], attr=bias_attr, is_bias=True)

    def forward(self, x):
        return F.layer_norm(x, self._normalized_shape, self.weight, self.bias, self._epsilon)

    def extra_repr(self):
        return f"normalized_shape={self._normalized_shape}, epsilon={self._epsilon}"


class GroupNorm(Layer):
    def __init__(self, num_groups, num_channels, epsilon=1e-05, weight_attr=None, bias_attr=None,
                 data_format="NCHW", name=None):
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise ValueError(f"ddg.nn.GroupNorm: num_groups={num_groups} must divide num_channels={num_channels}")
        self._num_groups, self._num_channels = num_groups, num_channels
        self._epsilon, self._data_format = epsilon, data_format
        self._weight_attr, self._bias_attr = weight_attr, bias_attr
        self.weight = self.create_parameter([num_channels], attr=weight_attr, default_initializer=Constant(1.0))
        self.bias = self.create_parameter([num_channels], attr=bias_attr, is_bias=True)

    def forward(self, x):
        return F.group_norm(x, self._num_groups, self._epsilon, self.weight, self.bias, self._data_format)

    def extra_repr(self):
        return f"num_groups={self._num_groups}, num_channels={self._num_channels}, epsilon={self._epsilon}"


class _InstanceNormBase(Layer):
    def __init__(self, num_features, epsilon=1e-05, momentum=0.9, weight_attr=None, bias_attr=None,
                 data_format="NCHW", name=None):
        super().__init__()
        self._epsilon, self._data_format, self._num_features = epsilon, data_format, num_features
        self._momentum, self._weight_attr, self._bias_attr = momentum, weight_attr, bias_attr
        # Paddle names the affine parameters ``scale`` and ``bias``; False disables them
        self.scale = self.create_parameter([num_features], attr=weight_attr, default_initializer=Constant(1.0))
        self.bias = self.create_parameter([num_features], attr=bias_attr, is_bias=True)

    def forward(self, x):
        return F.instance_norm(x, weight=self.scale, bias=self.bias, eps=self._epsilon, data_format=self._data_format)

    def extra_repr(self):
        return f"num_features={self._num_features}, epsilon={self._epsilon}"


class InstanceNorm1D(_InstanceNormBase):
    def __init__(self, num_features, epsilon=1e-05, momentum=0.9, weight_attr=None, bias_attr=None,
                 data_format="NCL", name=None):
        super().__init__(num_features, epsilon, momentum, weight_attr, bias_attr, data_format)


class InstanceNorm2D(_InstanceNormBase):
    pass


class LocalResponseNorm(Layer):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0, data_format="NCHW", name=None):
        super().__init__()
        self.size, self.alpha, self.beta, self.k, self.data_format = size, alpha, beta, k, data_format
        self.name = name

    def forward(self, x):
        return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k, self.data_format)

    def extra_repr(self):
        return f"size={self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class InstanceNorm3D(_InstanceNormBase):
    def __init__(self, num_features, epsilon=1e-05, momentum=0.9, weight_attr=None, bias_attr=None,
                 data_format="NCDHW", name=None):
        super().__init__(num_features, epsilon, momentum, weight_attr, bias_attr, data_format)


class SpectralNorm(Layer):
    """Divides a weight by its largest singular value, estimated by ``power_iters`` steps of
    power iteration whose vectors ``weight_u`` [h] and ``weight_v`` [w] persist (parameters
    with stop_gradient=True, as in Paddle) between calls."""

    def __init__(self, weight_shape, dim=0, power_iters=1, eps=1e-12, dtype="float32"):
        super().__init__()
        shape = list(weight_shape)
        if not 0 <= dim < len(shape):
            raise ValueError(f"ddg.nn.SpectralNorm: dim {dim} out of range for weight shape {shape}")
        self._weight_shape, self._dim, self._power_iters, self._eps = shape, dim, power_iters, eps
        h = shape[dim]
        w = int(np.prod(shape)) // h
        self.weight_u = self.create_parameter([h], dtype=dtype, default_initializer=Normal(0.0, 1.0))
        self.weight_v = self.create_parameter([w], dtype=dtype, default_initializer=Normal(0.0, 1.0))
        self.weight_u.stop_gradient = True
        self.weight_v.stop_gradient = True

    def forward(self, x):
        perm = [self._dim] + [i for i in range(x.ndim) if i != self._dim]
        mat = M.reshape(M.transpose(x, perm), [x.shape[self._dim], -1])
        xp = backend.get_array_module(mat._data)
        wm = mat._data
        u, v = self.weight_u._data, self.weight_v._data
        for _ in range(self._power_iters):
            v = wm.T @ u
            v = v / (xp.sqrt((v * v).sum()) + self._eps)
            u = wm @ v
            u = u / (xp.sqrt((u * u).sum()) + self._eps)
        with grad_mode.no_grad():
            self.weight_u.set_value(u)
            self.weight_v.set_value(v)
        ut, vt = Tensor._wrap(u), Tensor._wrap(v)
        sigma = R.sum(E.multiply(L.matmul(mat, vt), ut))
        return E.divide(x, sigma)
