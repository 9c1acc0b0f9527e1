"""In-place activations (``F.relu_(x)``...): the activation written into ``x``, by the
Tensor API's one in-place rule (``ddg.autograd.tensor_methods.inplace_method``)."""
from ...autograd.ops import elementwise as E
from ...autograd.tensor_methods import inplace_function, inplace_method
from .activation import elu, hardtanh, leaky_relu, softmax, thresholded_relu

__all__ = ["elu_", "relu_", "tanh_", "softmax_", "leaky_relu_", "hardtanh_", "thresholded_relu_"]


def _inplace(name, fn):
    """``F.<name>_(x, ...)``: ``fn`` written into ``x`` (the Tensor API's in-place rule)."""
    return inplace_function(name, fn, inplace_method(name, fn))


elu_ = _inplace("elu", elu)


relu_ = _inplace("relu", E.relu)


tanh_ = _inplace("tanh", E.tanh)


softmax_ = _inplace("softmax", softmax)


leaky_relu_ = _inplace("leaky_relu", leaky_relu)


hardtanh_ = _inplace("hardtanh", hardtanh)


thresholded_relu_ = _inplace("thresholded_relu", thresholded_relu)
