"""Activation layers: thin wrappers over ddg.nn.functional."""
from .. import functional as F
from ..initializer import Constant as _Constant  # private: ddg.nn star-imports this module
from .layers import Layer


def _simple(name, fn, doc):
    def forward(self, x):
        return fn(x)
    cls = type(name, (Layer,), {"forward": forward, "__doc__": doc,
                                "__init__": lambda self, name=None: Layer.__init__(self)})
    return cls


ReLU = _simple("ReLU", F.relu, "max(x, 0)")
ReLU6 = _simple("ReLU6", F.relu6, "min(max(x, 0), 6)")
Sigmoid = _simple("Sigmoid", F.sigmoid, "1 / (1 + exp(-x))")
Tanh = _simple("Tanh", F.tanh, "tanh(x)")
SiLU = _simple("SiLU", F.silu, "x * sigmoid(x)")
Swish = SiLU
Mish = _simple("Mish", F.mish, "x * tanh(softplus(x))")
Hardswish = _simple("Hardswish", F.hardswish, "x * relu6(x + 3) / 6")
Tanhshrink = _simple("Tanhshrink", F.tanhshrink, "x - tanh(x)")
Softsign = _simple("Softsign", F.softsign, "x / (1 + |x|)")
LogSigmoid = _simple("LogSigmoid", F.log_sigmoid, "log(sigmoid(x))")
Silu = _simple("Silu", F.silu, "x * sigmoid(x) (Paddle's other spelling of SiLU)")
Hardsigmoid = _simple("Hardsigmoid", F.hardsigmoid, "clip(x / 6 + 1 / 2, 0, 1)")


class GLU(Layer):
    def __init__(self, axis=-1, name=None):
        super().__init__()
        self._axis = axis

    def forward(self, x):
        return F.glu(x, self._axis)


class LeakyReLU(Layer):
    def __init__(self, negative_slope=0.01, name=None):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)


class ELU(Layer):
    def __init__(self, alpha=1.0, name=None):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, self.alpha)


class SELU(Layer):
    def __init__(self, scale=1.0507009873554805, alpha=1.6732632423543772, name=None):
        super().__init__()
        self._scale, self._alpha = scale, alpha

    def forward(self, x):
        return F.selu(x, self._scale, self._alpha)


class CELU(Layer):
    def __init__(self, alpha=1.0, name=None):
        super().__init__()
        self._alpha = alpha

    def forward(self, x):
        return F.celu(x, self._alpha)


class Softshrink(Layer):
    def __init__(self, threshold=0.5, name=None):
        super().__init__()
        self._threshold = threshold

    def forward(self, x):
        return F.softshrink(x, self._threshold)


class Hardshrink(Layer):
    def __init__(self, threshold=0.5, name=None):
        super().__init__()
        self._threshold = threshold

    def forward(self, x):
        return F.hardshrink(x, self._threshold)


class ThresholdedReLU(Layer):
    def __init__(self, threshold=1.0, value=0.0, name=None):
        super().__init__()
        self._threshold, self._value = threshold, value

    def forward(self, x):
        return F.thresholded_relu(x, self._threshold, self._value)


class GELU(Layer):
    def __init__(self, approximate=False, name=None):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)


class Hardtanh(Layer):
    def __init__(self, min=-1.0, max=1.0, name=None):  # noqa: A002
        super().__init__()
        self.min, self.max = min, max

    def forward(self, x):
        return F.hardtanh(x, self.min, self.max)


class Softplus(Layer):
    def __init__(self, beta=1, threshold=20, name=None):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)


class Softmax(Layer):
    def __init__(self, axis=-1, name=None):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        return F.softmax(x, self.axis)


class LogSoftmax(Layer):
    def __init__(self, axis=-1, name=None):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        return F.log_softmax(x, self.axis)


class PReLU(Layer):
    def __init__(self, num_parameters=1, init=0.25, weight_attr=None, data_format="NCHW", name=None):
        super().__init__()
        self.data_format = data_format
        self.weight = self.create_parameter([num_parameters], attr=weight_attr,
                                            default_initializer=_Constant(init))

    def forward(self, x):
        return F.prelu(x, self.weight, self.data_format)
