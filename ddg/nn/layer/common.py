"""Linear, Bilinear, Identity, Flatten, Unflatten, CosineSimilarity, PairwiseDistance."""
import math

import numpy as np

from ...autograd.composite.shapes import unflatten
from ...autograd.ops import movement as M
from .. import functional as F
from ..initializer import Uniform
from .layers import Layer


class Linear(Layer):
    """``y = x @ weight + bias`` with ``weight`` of shape ``[in_features, out_features]``
    (Paddle's layout); Xavier-uniform weight and zero bias by default."""

    def __init__(self, in_features, out_features, weight_attr=None, bias_attr=None, name=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self._weight_attr, self._bias_attr, self.name = weight_attr, bias_attr, name
        self.weight = self.create_parameter([in_features, out_features], attr=weight_attr)
        self.bias = self.create_parameter([out_features], attr=bias_attr, is_bias=True)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, dtype={self._dtype}"


class Identity(Layer):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Flatten(Layer):
    def __init__(self, start_axis=1, stop_axis=-1):
        super().__init__()
        self.start_axis, self.stop_axis = start_axis, stop_axis

    def forward(self, x):
        return M.flatten(x, self.start_axis, self.stop_axis)

    def extra_repr(self):
        return f"start_axis={self.start_axis}, stop_axis={self.stop_axis}"


class CosineSimilarity(Layer):
    def __init__(self, axis=1, eps=1e-8):
        super().__init__()
        self._axis, self._eps = axis, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self._axis, self._eps)


class PairwiseDistance(Layer):
    def __init__(self, p=2.0, epsilon=1e-6, keepdim=False, name=None):
        super().__init__()
        self.p, self.epsilon, self.keepdim, self.name = p, epsilon, keepdim, name

    def forward(self, x, y):
        return F.pairwise_distance(x, y, self.p, self.epsilon, self.keepdim)

    def extra_repr(self):
        return f"p={self.p}"


class Unflatten(Layer):
    def __init__(self, axis, shape, name=None):
        super().__init__()
        self.axis, self.shape, self.name = axis, shape, name

    def forward(self, x):
        return unflatten(x, self.axis, self.shape)

    def extra_repr(self):
        return f"axis={self.axis}, shape={list(self.shape)}"


class Bilinear(Layer):
    """``out = x1 @ weight[o] @ x2 + bias`` with weight ``[out, in1, in2]`` and bias ``[1, out]``
    (both drawn from U(-1/sqrt(in1), 1/sqrt(in1)) by default)."""

    def __init__(self, in1_features, in2_features, out_features, weight_attr=None, bias_attr=None, name=None):
        super().__init__()
        self._in1_features, self._in2_features, self._out_features = in1_features, in2_features, out_features
        self._weight_attr, self._bias_attr, self._name = weight_attr, bias_attr, name
        if not all(isinstance(n, (int, np.integer)) and n > 0 for n in (in1_features, in2_features, out_features)):
            raise ValueError(f"ddg.nn.Bilinear: in1_features, in2_features and out_features must be positive "
                             f"integers, got {in1_features}, {in2_features}, {out_features}")
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
