"""MobileNetV3 small and large (``paddle.vision.models.MobileNetV3Small/Large``), with
Paddle's layer names (``conv``, ``blocks.<i>``, ``lastconv``, ``classifier``)."""
from functools import partial

from ... import nn
from ...autograd.ops.movement import flatten
from ._utils import ConvNormActivation, Hardsigmoid, make_divisible, no_pretrained

__all__ = ["MobileNetV3", "MobileNetV3Small", "MobileNetV3Large", "mobilenet_v3_small", "mobilenet_v3_large"]


def _hardsigmoid():
    cls = getattr(nn, "Hardsigmoid", None) or Hardsigmoid
    return cls()


class SqueezeExcitation(nn.Layer):
    """Channel attention: global average pooling, 1x1 convolution down to
    ``squeeze_channels``, activation, 1x1 convolution back, hard sigmoid, times the input."""

    def __init__(self, input_channels, squeeze_channels, activation=nn.ReLU, scale_activation=_hardsigmoid):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2D(1)
        self.fc1 = nn.Conv2D(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2D(squeeze_channels, input_channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def forward(self, x):
        scale = self.fc2(self.activation(self.fc1(self.avgpool(x))))
        return self.scale_activation(scale) * x


class InvertedResidualConfig:
    """One block's settings, channels scaled and rounded to multiples of 8."""

    def __init__(self, in_channels, kernel, expanded_channels, out_channels, use_se, activation, stride, scale=1.0):
        self.in_channels = make_divisible(in_channels * scale, 8)
        self.kernel = kernel
        self.expanded_channels = make_divisible(expanded_channels * scale, 8)
        self.out_channels = make_divisible(out_channels * scale, 8)
        self.use_se = use_se
        if activation is None:
            self.activation_layer = None
        elif activation == "relu":
            self.activation_layer = nn.ReLU
        elif activation == "hardswish":
            self.activation_layer = nn.Hardswish
        else:
            raise ValueError(f"ddg.vision.models.MobileNetV3: activation must be 'relu', 'hardswish' or None, "
                             f"got {activation!r}")
        self.stride = stride


class InvertedResidual(nn.Layer):
    """Expansion (1x1, when the channels grow), depthwise kxk, squeeze-excitation
    (optional), linear 1x1 projection; a shortcut when the stride is 1 and the channels match."""

    def __init__(self, in_channels, expanded_channels, out_channels, filter_size, stride, use_se, activation_layer,
                 norm_layer):
        super().__init__()
        self.use_res_connect = stride == 1 and in_channels == out_channels
        self.use_se = use_se
        self.expand = in_channels != expanded_channels
        if self.expand:
            self.expand_conv = ConvNormActivation(in_channels, expanded_channels, kernel_size=1, stride=1, padding=0,
                                                  norm_layer=norm_layer, activation_layer=activation_layer)
        self.bottleneck_conv = ConvNormActivation(expanded_channels, expanded_channels, kernel_size=filter_size,
                                                  stride=stride, padding=int((filter_size - 1) // 2),
                                                  groups=expanded_channels, norm_layer=norm_layer,
                                                  activation_layer=activation_layer)
        if self.use_se:
            self.mid_se = SqueezeExcitation(expanded_channels, make_divisible(expanded_channels // 4))
        self.linear_conv = ConvNormActivation(expanded_channels, out_channels, kernel_size=1, stride=1, padding=0,
                                              norm_layer=norm_layer, activation_layer=None)

    def forward(self, x):
        identity = x
        if self.expand:
            x = self.expand_conv(x)
        x = self.bottleneck_conv(x)
        if self.use_se:
            x = self.mid_se(x)
        x = self.linear_conv(x)
        if self.use_res_connect:
            x = identity + x
        return x


class MobileNetV3(nn.Layer):
    """MobileNetV3 from a list of :class:`InvertedResidualConfig` (use
    :class:`MobileNetV3Small` or :class:`MobileNetV3Large`). Batch norms use epsilon
    0.001 and momentum 0.99, as Paddle's."""

    def __init__(self, config, last_channel, scale=1.0, num_classes=1000, with_pool=True):
        super().__init__()
        self.config = config
        self.scale = scale
        self.last_channel = last_channel
        self.num_classes = num_classes
        self.with_pool = with_pool
        self.firstconv_in_channels = config[0].in_channels
        self.lastconv_in_channels = config[-1].in_channels
        self.lastconv_out_channels = self.lastconv_in_channels * 6
        norm_layer = partial(nn.BatchNorm2D, epsilon=0.001, momentum=0.99)
        self.conv = ConvNormActivation(3, self.firstconv_in_channels, kernel_size=3, stride=2, padding=1, groups=1,
                                       activation_layer=nn.Hardswish, norm_layer=norm_layer)
        self.blocks = nn.Sequential(*[
            InvertedResidual(c.in_channels, c.expanded_channels, c.out_channels, c.kernel, c.stride, c.use_se,
                             c.activation_layer, norm_layer) for c in config])
        self.lastconv = ConvNormActivation(self.lastconv_in_channels, self.lastconv_out_channels, kernel_size=1,
                                           stride=1, padding=0, groups=1, norm_layer=norm_layer,
                                           activation_layer=nn.Hardswish)
        if with_pool:
            self.avgpool = nn.AdaptiveAvgPool2D(1)
        if num_classes > 0:
            self.classifier = nn.Sequential(nn.Linear(self.lastconv_out_channels, self.last_channel), nn.Hardswish(),
                                            nn.Dropout(p=0.2), nn.Linear(self.last_channel, num_classes))

    def forward(self, x):
        x = self.lastconv(self.blocks(self.conv(x)))
        if self.with_pool:
            x = self.avgpool(x)
        if self.num_classes > 0:
            x = flatten(x, 1)
            x = self.classifier(x)
        return x


_C = InvertedResidualConfig


class MobileNetV3Small(MobileNetV3):
    """MobileNetV3-Small."""

    def __init__(self, scale=1.0, num_classes=1000, with_pool=True):
        config = [_C(16, 3, 16, 16, True, "relu", 2, scale), _C(16, 3, 72, 24, False, "relu", 2, scale),
                  _C(24, 3, 88, 24, False, "relu", 1, scale), _C(24, 5, 96, 40, True, "hardswish", 2, scale),
                  _C(40, 5, 240, 40, True, "hardswish", 1, scale), _C(40, 5, 240, 40, True, "hardswish", 1, scale),
                  _C(40, 5, 120, 48, True, "hardswish", 1, scale), _C(48, 5, 144, 48, True, "hardswish", 1, scale),
                  _C(48, 5, 288, 96, True, "hardswish", 2, scale), _C(96, 5, 576, 96, True, "hardswish", 1, scale),
                  _C(96, 5, 576, 96, True, "hardswish", 1, scale)]
        super().__init__(config, last_channel=make_divisible(1024 * scale, 8), scale=scale, with_pool=with_pool,
                         num_classes=num_classes)


class MobileNetV3Large(MobileNetV3):
    """MobileNetV3-Large."""

    def __init__(self, scale=1.0, num_classes=1000, with_pool=True):
        config = [_C(16, 3, 16, 16, False, "relu", 1, scale), _C(16, 3, 64, 24, False, "relu", 2, scale),
                  _C(24, 3, 72, 24, False, "relu", 1, scale), _C(24, 5, 72, 40, True, "relu", 2, scale),
                  _C(40, 5, 120, 40, True, "relu", 1, scale), _C(40, 5, 120, 40, True, "relu", 1, scale),
                  _C(40, 3, 240, 80, False, "hardswish", 2, scale), _C(80, 3, 200, 80, False, "hardswish", 1, scale),
                  _C(80, 3, 184, 80, False, "hardswish", 1, scale), _C(80, 3, 184, 80, False, "hardswish", 1, scale),
                  _C(80, 3, 480, 112, True, "hardswish", 1, scale), _C(112, 3, 672, 112, True, "hardswish", 1, scale),
                  _C(112, 5, 672, 160, True, "hardswish", 2, scale), _C(160, 5, 960, 160, True, "hardswish", 1, scale),
                  _C(160, 5, 960, 160, True, "hardswish", 1, scale)]
        super().__init__(config, last_channel=make_divisible(1280 * scale, 8), scale=scale, with_pool=with_pool,
                         num_classes=num_classes)


def mobilenet_v3_small(pretrained=False, scale=1.0, **kwargs):
    """MobileNetV3-Small; kwargs go to :class:`MobileNetV3Small`."""
    no_pretrained("mobilenet_v3_small", pretrained)
    return MobileNetV3Small(scale=scale, **kwargs)


def mobilenet_v3_large(pretrained=False, scale=1.0, **kwargs):
    """MobileNetV3-Large; kwargs go to :class:`MobileNetV3Large`."""
    no_pretrained("mobilenet_v3_large", pretrained)
    return MobileNetV3Large(scale=scale, **kwargs)
