"""More of ``paddle.nn``'s layers (the names tools/api_coverage.py counts): thin
layers over ddg/nn/functional/extra.py and the 3-D variants of existing layers."""
import math

import numpy as np

from ...autograd import grad_mode
from ...autograd.composite.shapes import unflatten
from ...autograd.ops import elementwise as E
from ...autograd.ops import linalg as L
from ...autograd.ops import movement as M
from ...autograd.ops import reduce as R
from ...tensor import backend
from ...tensor.tensor import Tensor
from .. import functional as F
from ..initializer import Normal, Uniform
from .layers import Layer
from .loss import _Reduced
from .norm import _InstanceNormBase


class PairwiseDistance(Layer):
    def __init__(self, p=2.0, epsilon=1e-6, keepdim=False, name=None):
        super().__init__()
        self.p, self.epsilon, self.keepdim, self.name = p, epsilon, keepdim, name

    def forward(self, x, y):
        return F.pairwise_distance(x, y, self.p, self.epsilon, self.keepdim)

    def extra_repr(self):
        return f"p={self.p}"


class PixelUnshuffle(Layer):
    def __init__(self, downscale_factor, data_format="NCHW", name=None):
        super().__init__()
        self._downscale_factor, self._data_format, self._name = downscale_factor, data_format, name

    def forward(self, x):
        return F.pixel_unshuffle(x, self._downscale_factor, self._data_format)

    def extra_repr(self):
        return f"downscale_factor={self._downscale_factor}"


class ChannelShuffle(Layer):
    def __init__(self, groups, data_format="NCHW", name=None):
        super().__init__()
        self._groups, self._data_format, self._name = groups, data_format, name

    def forward(self, x):
        return F.channel_shuffle(x, self._groups, self._data_format)

    def extra_repr(self):
        return f"groups={self._groups}"


class Maxout(Layer):
    def __init__(self, groups, axis=1, name=None):
        super().__init__()
        self._groups, self._axis, self._name = groups, axis, name

    def forward(self, x):
        return F.maxout(x, self._groups, self._axis)

    def extra_repr(self):
        return f"groups={self._groups}, axis={self._axis}"


class Softmax2D(Layer):
    """Softmax over the channels of a [N, C, H, W] (or [C, H, W]) input."""

    def __init__(self, name=None):
        super().__init__()
        self._name = name

    def forward(self, x):
        if x.ndim not in (3, 4):
            raise ValueError(f"ddg.nn.Softmax2D: needs a 3-D or 4-D input, got shape {x.shape}")
        return F.softmax(x, axis=-3)


class Unflatten(Layer):
    def __init__(self, axis, shape, name=None):
        super().__init__()
        self.axis, self.shape, self.name = axis, shape, name

    def forward(self, x):
        return unflatten(x, self.axis, self.shape)

    def extra_repr(self):
        return f"axis={self.axis}, shape={list(self.shape)}"


class AlphaDropout(Layer):
    def __init__(self, p=0.5, name=None):
        super().__init__()
        self.p, self.name = p, name

    def forward(self, x):
        return F.alpha_dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class Dropout3D(Layer):
    def __init__(self, p=0.5, data_format="NCDHW", name=None):
        super().__init__()
        self.p, self.data_format, self.name = p, data_format, name

    def forward(self, x):
        return F.dropout3d(x, self.p, self.training, self.data_format)

    def extra_repr(self):
        return f"p={self.p}, data_format={self.data_format}"


class RReLU(Layer):
    def __init__(self, lower=1.0 / 8.0, upper=1.0 / 3.0, name=None):
        super().__init__()
        self._lower, self._upper, self._name = lower, upper, name

    def forward(self, x):
        return F.rrelu(x, self._lower, self._upper, self.training)

    def extra_repr(self):
        return f"lower={self._lower}, upper={self._upper}"


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


class Fold(Layer):
    def __init__(self, output_sizes, kernel_sizes, dilations=1, paddings=0, strides=1, name=None):
        super().__init__()
        self.output_sizes, self.kernel_sizes = output_sizes, kernel_sizes
        self.dilations, self.paddings, self.strides, self.name = dilations, paddings, strides, name

    def forward(self, x):
        return F.fold(x, self.output_sizes, self.kernel_sizes, self.strides, self.paddings, self.dilations)

    def extra_repr(self):
        return f"output_sizes={self.output_sizes}, kernel_sizes={self.kernel_sizes}"


class _MaxUnPool(Layer):
    _fn = None
    _fmt = None

    def __init__(self, kernel_size, stride=None, padding=0, data_format=None, output_size=None, name=None):
        super().__init__()
        self.ksize, self.stride, self.padding = kernel_size, stride, padding
        self.data_format = data_format or self._fmt
        self.output_size, self.name = output_size, name

    def forward(self, x, indices):
        return getattr(F, self._fn)(x, indices, self.ksize, self.stride, self.padding, self.data_format,
                                    self.output_size)

    def extra_repr(self):
        return f"kernel_size={self.ksize}, stride={self.stride}, padding={self.padding}"


class MaxUnPool1D(_MaxUnPool):
    _fn, _fmt = "max_unpool1d", "NCL"

    def __init__(self, kernel_size, stride=None, padding=0, data_format="NCL", output_size=None, name=None):
        super().__init__(kernel_size, stride, padding, data_format, output_size, name)


class MaxUnPool2D(_MaxUnPool):
    _fn, _fmt = "max_unpool2d", "NCHW"

    def __init__(self, kernel_size, stride=None, padding=0, data_format="NCHW", output_size=None, name=None):
        super().__init__(kernel_size, stride, padding, data_format, output_size, name)


class MaxUnPool3D(_MaxUnPool):
    _fn, _fmt = "max_unpool3d", "NCDHW"

    def __init__(self, kernel_size, stride=None, padding=0, data_format="NCDHW", output_size=None, name=None):
        super().__init__(kernel_size, stride, padding, data_format, output_size, name)


class Bilinear(Layer):
    """``out = x1 @ weight[o] @ x2 + bias`` with weight ``[out, in1, in2]`` and bias ``[1, out]``
    (both drawn from U(-1/sqrt(in1), 1/sqrt(in1)) by default)."""

    def __init__(self, in1_features, in2_features, out_features, weight_attr=None, bias_attr=None, name=None):
        super().__init__()
        self._in1_features, self._in2_features, self._out_features = in1_features, in2_features, out_features
        self._weight_attr, self._bias_attr, self._name = weight_attr, bias_attr, name
        bound = 1.0 / math.sqrt(in1_features)
        self.weight = self.create_parameter([out_features, in1_features, in2_features], attr=weight_attr,
                                            default_initializer=Uniform(-bound, bound))
        self.bias = self.create_parameter([1, out_features], attr=bias_attr, is_bias=True,
                                          default_initializer=Uniform(-bound, bound))

    def forward(self, x1, x2):
        return F.bilinear(x1, x2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self._in1_features}, in2_features={self._in2_features}, "
                f"out_features={self._out_features}")


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


# -- losses -----------------------------------------------------------------------------------------------
class CTCLoss(Layer):
    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__()
        self.blank, self.reduction, self.zero_infinity = blank, reduction, zero_infinity

    def forward(self, log_probs, labels, input_lengths, label_lengths, norm_by_times=False):
        return F.ctc_loss(log_probs, labels, input_lengths, label_lengths, self.blank, self.reduction, norm_by_times,
                          self.zero_infinity)


class GaussianNLLLoss(_Reduced):
    def __init__(self, full=False, epsilon=1e-6, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.full, self.epsilon = full, epsilon

    def forward(self, input, label, variance):  # noqa: A002
        return F.gaussian_nll_loss(input, label, variance, self.full, self.epsilon, self.reduction)


class PoissonNLLLoss(_Reduced):
    def __init__(self, log_input=True, full=False, epsilon=1e-8, reduction="mean", name=None):
        super().__init__(reduction, name)
        self._log_input, self._full, self._epsilon, self._reduction, self._name = \
            log_input, full, epsilon, reduction, name
        del self.reduction, self.name   # Paddle keeps them as _reduction, _name here

    def forward(self, input, label):  # noqa: A002
        return F.poisson_nll_loss(input, label, self._log_input, self._full, self._epsilon, self._reduction)


class MultiMarginLoss(_Reduced):
    def __init__(self, p=1, margin=1.0, weight=None, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.p, self.margin, self.weight = p, margin, weight

    def forward(self, input, label):  # noqa: A002
        return F.multi_margin_loss(input, label, self.p, self.margin, self.weight, self.reduction)


class TripletMarginWithDistanceLoss(_Reduced):
    def __init__(self, distance_function=None, margin=1.0, swap=False, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, input, positive, negative):  # noqa: A002
        return F.triplet_margin_with_distance_loss(input, positive, negative, self.distance_function, self.margin,
                                                   self.swap, self.reduction)
