"""Conv1D, Conv2D, Conv1DTranspose, Conv2DTranspose (Paddle signatures and defaults).

Weights: ``[out, in/groups, *kernel]`` for convolutions, ``[in, out/groups, *kernel]``
for transposed ones. Default weight initializer of convolutions: Paddle's
``Normal(0, sqrt(2 / (in_channels * prod(kernel_size))))`` -- note that Paddle uses
the full ``in_channels`` there, not ``in_channels / groups``; we follow Paddle.
Transposed convolutions use the generic default (Xavier uniform). Biases start at 0.
"""
import math

from .. import functional as F
from ..initializer import Normal
from ..functional.conv import _ntuple, _pads
from .layers import Layer

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Layer):
    _nd = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, dilation=1,
                 groups=1, padding_mode="zeros", weight_attr=None, bias_attr=None, data_format="NCHW"):
        super().__init__()
        name = type(self).__name__
        nd = self._nd
        if in_channels <= 0 or out_channels <= 0:
            raise ValueError(f"ddg.nn.{name}: channels must be positive, got in={in_channels}, out={out_channels}")
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"ddg.nn.{name}: groups={groups} must divide in_channels={in_channels} and "
                             f"out_channels={out_channels}")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"ddg.nn.{name}: padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}")
        if padding_mode != "zeros" and self._transposed:
            raise ValueError(f"ddg.nn.{name}: only padding_mode='zeros' is supported for transposed convolutions")
        self._in_channels, self._out_channels = in_channels, out_channels
        self._kernel_size = list(_ntuple(kernel_size, nd, "kernel_size", name))
        # Paddle's attribute names and forms: stride and dilation as lists, padding as given,
        # the normalised padding in _updated_padding (2-D and 3-D), which forward reads
        self._stride = list(_ntuple(stride, nd, "stride", name))
        self._dilation = list(_ntuple(dilation, nd, "dilation", name))
        self._padding, self.output_padding = padding, output_padding
        self._groups, self._padding_mode, self._data_format = groups, padding_mode, data_format
        self._param_attr, self._bias_attr = weight_attr, bias_attr
        self._channel_dim = nd + 1 if data_format[-1] == "C" else 1
        channel_last = data_format[-1] == "C"
        if isinstance(padding, str):
            if padding.upper() not in ("SAME", "VALID"):
                raise ValueError(f"ddg.nn.{name}: padding must be 'same', 'valid', an int or a list, got {padding!r}")
            algorithm, updated = padding.upper(), [0] * nd
        else:
            pads = _pads(padding, nd, channel_last, name)
            symmetric = all(pads[2 * i] == pads[2 * i + 1] for i in range(nd))
            algorithm, updated = "EXPLICIT", list(pads[::2]) if symmetric else list(pads)
        if padding_mode != "zeros":
            if isinstance(padding, str):
                raise ValueError(f"ddg.nn.{name}: padding_mode={padding_mode!r} needs numeric padding")
            # F.pad lists the LAST spatial dim first
            self._reversed_padding_repeated_twice = [p for i in reversed(range(nd)) for p in pads[2 * i:2 * i + 2]]
            updated = [0] * nd
        if nd > 1:
            self._updated_padding, self._padding_algorithm = updated, algorithm
        if self._transposed:
            shape = [in_channels, out_channels // groups] + self._kernel_size
            init = None
        else:
            shape = [out_channels, in_channels // groups] + self._kernel_size
            init = Normal(0.0, math.sqrt(2.0 / (in_channels * math.prod(self._kernel_size))))
        self.weight = self.create_parameter(shape, attr=weight_attr, default_initializer=init)
        self.bias = self.create_parameter([out_channels], attr=bias_attr, is_bias=True)

    def _pre_pad(self, x):
        """The input padded by padding_mode, and the padding the convolution then takes."""
        if self._padding_mode != "zeros":
            return F.pad(x, self._reversed_padding_repeated_twice, mode=self._padding_mode,
                         data_format=self._data_format), 0
        if self._nd == 1:
            return x, self._padding
        if self._padding_algorithm != "EXPLICIT":
            return x, self._padding_algorithm
        return x, self._updated_padding

    def extra_repr(self):
        s = (f"{self._in_channels}, {self._out_channels}, kernel_size={self._kernel_size}, stride={self._stride}, "
             f"padding={self._padding}")
        if any(d != 1 for d in self._dilation):
            s += f", dilation={self._dilation}"
        if self._groups != 1:
            s += f", groups={self._groups}"
        if self._padding_mode != "zeros":
            s += f", padding_mode={self._padding_mode!r}"
        if self._data_format not in ("NCHW", "NCL"):
            s += f", data_format={self._data_format!r}"
        return s


class Conv2D(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 padding_mode="zeros", weight_attr=None, bias_attr=None, data_format="NCHW"):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, 0, dilation, groups, padding_mode,
                         weight_attr, bias_attr, data_format)

    def forward(self, x):
        x, padding = self._pre_pad(x)
        return F.conv2d(x, self.weight, self.bias, self._stride, padding, self._dilation, self._groups,
                        self._data_format)


class Conv1D(_ConvNd):
    _nd = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 padding_mode="zeros", weight_attr=None, bias_attr=None, data_format="NCL"):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, 0, dilation, groups, padding_mode,
                         weight_attr, bias_attr, data_format)

    def forward(self, x):
        x, padding = self._pre_pad(x)
        return F.conv1d(x, self.weight, self.bias, self._stride, padding, self._dilation, self._groups,
                        self._data_format)


class Conv2DTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, dilation=1,
                 groups=1, weight_attr=None, bias_attr=None, data_format="NCHW"):  # Paddle: dilation, then groups
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation, groups,
                         "zeros", weight_attr, bias_attr, data_format)

    def forward(self, x, output_size=None):
        return F.conv2d_transpose(x, self.weight, self.bias, self._stride, self._padding,
                                  0 if output_size is not None else self.output_padding, dilation=self._dilation,
                                  groups=self._groups, output_size=output_size, data_format=self._data_format)


class Conv1DTranspose(_ConvNd):
    _nd = 1
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 dilation=1, weight_attr=None, bias_attr=None, data_format="NCL"):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation, groups,
                         "zeros", weight_attr, bias_attr, data_format)

    def forward(self, x, output_size=None):
        return F.conv1d_transpose(x, self.weight, self.bias, self._stride, self._padding,
                                  0 if output_size is not None else self.output_padding, self._groups,
                                  self._dilation, output_size, self._data_format)


class Conv3D(_ConvNd):
    _nd = 3

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 padding_mode="zeros", weight_attr=None, bias_attr=None, data_format="NCDHW"):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, 0, dilation, groups, padding_mode,
                         weight_attr, bias_attr, data_format)

    def forward(self, x):
        x, padding = self._pre_pad(x)
        return F.conv3d(x, self.weight, self.bias, self._stride, padding, self._dilation, self._groups,
                        self._data_format)


class Conv3DTranspose(_ConvNd):
    _nd = 3
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, dilation=1,
                 groups=1, weight_attr=None, bias_attr=None, data_format="NCDHW"):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation, groups,
                         "zeros", weight_attr, bias_attr, data_format)

    def forward(self, x, output_size=None):
        return F.conv3d_transpose(x, self.weight, self.bias, self._stride, self._padding,
                                  0 if output_size is not None else self.output_padding, self._groups,
                                  self._dilation, output_size, self._data_format)
