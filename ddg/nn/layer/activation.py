"""Activation layers: thin wrappers over ddg.nn.functional. Each keeps its arguments under
the attribute names Paddle's constructor uses (``_name``, ``_negative_slope``, ``_axis``...),
and ``forward`` reads them there."""
from .. import functional as F
from ..initializer import Constant as _Constant  # private: ddg.nn star-imports this module
from .layers import Layer


def _simple(name, fn, doc, name_attr="_name", **fixed):
    """A layer without arguments but ``name``, kept as ``name_attr`` (Paddle's spelling for
    that class), with the constant attributes ``fixed`` Paddle also sets."""
    def __init__(self, name=None):
        Layer.__init__(self)
        setattr(self, name_attr, name)
        for k, v in fixed.items():
            setattr(self, k, v)

    def forward(self, x):
        return fn(x)
    return type(name, (Layer,), {"forward": forward, "__doc__": doc, "__init__": __init__})


ReLU = _simple("ReLU", F.relu, "max(x, 0)")
ReLU6 = _simple("ReLU6", F.relu6, "min(max(x, 0), 6)")
Sigmoid = _simple("Sigmoid", F.sigmoid, "1 / (1 + exp(-x))", "name")
Tanh = _simple("Tanh", F.tanh, "tanh(x)")
SiLU = _simple("SiLU", F.silu, "x * sigmoid(x)", _inplace=False)
Swish = _simple("Swish", F.silu, "x * sigmoid(x)")
Mish = _simple("Mish", F.mish, "x * tanh(softplus(x))")
Hardswish = _simple("Hardswish", F.hardswish, "x * relu6(x + 3) / 6")
Tanhshrink = _simple("Tanhshrink", F.tanhshrink, "x - tanh(x)")
Softsign = _simple("Softsign", F.softsign, "x / (1 + |x|)")
LogSigmoid = _simple("LogSigmoid", F.log_sigmoid, "log(sigmoid(x))")
Silu = _simple("Silu", F.silu, "x * sigmoid(x) (Paddle's other spelling of SiLU)", _inplace=False)
Hardsigmoid = _simple("Hardsigmoid", F.hardsigmoid, "clip(x / 6 + 1 / 2, 0, 1)", "name")


class GLU(Layer):
    def __init__(self, axis=-1, name=None):
        super().__init__()
        self._axis, self._name = axis, name

    def forward(self, x):
        return F.glu(x, self._axis)


class LeakyReLU(Layer):
    def __init__(self, negative_slope=0.01, name=None):
        super().__init__()
        self._negative_slope, self._name = negative_slope, name

    def forward(self, x):
        return F.leaky_relu(x, self._negative_slope)


class ELU(Layer):
    def __init__(self, alpha=1.0, name=None):
        super().__init__()
        self._alpha, self._name = alpha, name

    def forward(self, x):
        return F.elu(x, self._alpha)


class SELU(Layer):
    def __init__(self, scale=1.0507009873554805, alpha=1.6732632423543772, name=None):
        super().__init__()
        self._scale, self._alpha, self._name = scale, alpha, name

    def forward(self, x):
        return F.selu(x, self._scale, self._alpha)


class CELU(Layer):
    def __init__(self, alpha=1.0, name=None):
        super().__init__()
        self._alpha, self._name = alpha, name

    def forward(self, x):
        return F.celu(x, self._alpha)


class Softshrink(Layer):
    def __init__(self, threshold=0.5, name=None):
        super().__init__()
        self._threshold, self._name = threshold, name

    def forward(self, x):
        return F.softshrink(x, self._threshold)


class Hardshrink(Layer):
    def __init__(self, threshold=0.5, name=None):
        super().__init__()
        self._threshold, self._name = threshold, name

    def forward(self, x):
        return F.hardshrink(x, self._threshold)


class ThresholdedReLU(Layer):
    def __init__(self, threshold=1.0, value=0.0, name=None):
        super().__init__()
        self._threshold, self._value, self._name = threshold, value, name

    def forward(self, x):
        return F.thresholded_relu(x, self._threshold, self._value)


class GELU(Layer):
    def __init__(self, approximate=False, name=None):
        super().__init__()
        self._approximate, self._name = approximate, name

    def forward(self, x):
        return F.gelu(x, self._approximate)


class Hardtanh(Layer):
    def __init__(self, min=-1.0, max=1.0, name=None):  # noqa: A002
        super().__init__()
        self._min, self._max, self._name = min, max, name

    def forward(self, x):
        return F.hardtanh(x, self._min, self._max)


class Softplus(Layer):
    def __init__(self, beta=1, threshold=20, name=None):
        super().__init__()
        self._beta, self._threshold, self._name = beta, threshold, name

    def forward(self, x):
        return F.softplus(x, self._beta, self._threshold)


class Softmax(Layer):
    def __init__(self, axis=-1, name=None):
        super().__init__()
        self._axis, self._name = axis, name

    def forward(self, x):
        return F.softmax(x, self._axis)


class LogSoftmax(Layer):
    def __init__(self, axis=-1, name=None):
        super().__init__()
        self._axis, self._name = axis, name

    def forward(self, x):
        return F.log_softmax(x, self._axis)


class PReLU(Layer):
    def __init__(self, num_parameters=1, init=0.25, weight_attr=None, data_format="NCHW", name=None):
        super().__init__()
        self._num_parameters, self._init, self._weight_attr = num_parameters, init, weight_attr
        self._data_format, self._name = data_format, name
        # Paddle's name for the parameter: its state_dict key is "_weight"
        self._weight = self.create_parameter([num_parameters], attr=weight_attr,
                                             default_initializer=_Constant(init))

    def forward(self, x):
        return F.prelu(x, self._weight, self._data_format)


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


class RReLU(Layer):
    def __init__(self, lower=1.0 / 8.0, upper=1.0 / 3.0, name=None):
        super().__init__()
        self._lower, self._upper, self._name = lower, upper, name

    def forward(self, x):
        return F.rrelu(x, self._lower, self._upper, self.training)

    def extra_repr(self):
        return f"lower={self._lower}, upper={self._upper}"
