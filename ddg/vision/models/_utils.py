"""Helpers shared by the model constructors."""
from ... import nn

__all__ = ["no_pretrained", "ConvNormActivation", "make_divisible", "Hardsigmoid"]


def no_pretrained(arch, pretrained):
    """Raise when ``pretrained`` asks for weights: ddg downloads no model weights."""
    if pretrained:
        raise ValueError(
            f"ddg.vision.models.{arch}: pretrained=True cannot be honoured: ddg does not download "
            f"pretrained weights. Build the model with pretrained=False and load the weights from a "
            f".pdparams file in ddg's format: model.set_state_dict(ddg.load('{arch}.pdparams')) (a pickled "
            f"Paddle .pdparams file must first be converted where Paddle is installed: "
            f"ddg.save({{k: v.numpy() for k, v in paddle.load(path).items()}}, '{arch}.pdparams'))")


class ConvNormActivation(nn.Sequential):
    """Convolution, then normalization, then activation, as one Sequential (Paddle's
    ``paddle.vision.ops.ConvNormActivation``): padding defaults to
    ``(kernel_size - 1) // 2 * dilation``, and the convolution has a bias only when
    there is no normalization layer (unless ``bias`` says otherwise)."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=None, groups=1,
                 norm_layer=nn.BatchNorm2D, activation_layer=nn.ReLU, dilation=1, bias=None):
        if padding is None:
            padding = (kernel_size - 1) // 2 * dilation
        if bias is None:
            bias = norm_layer is None
        layers = [nn.Conv2D(in_channels, out_channels, kernel_size, stride, padding, dilation=dilation,
                            groups=groups, bias_attr=None if bias else False)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            layers.append(activation_layer())
        super().__init__(*layers)


def make_divisible(v, divisor=8, min_value=None):
    """``v`` rounded to a multiple of ``divisor``, not below ``min_value`` (``divisor``)
    and not more than 10% below ``v`` (the MobileNet channel rule)."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class Hardsigmoid(nn.Layer):
    """``clip(x * slope + offset, 0, 1)`` with Paddle's defaults (slope 0.1666667,
    offset 0.5), for MobileNetV3 (ddg.nn has no Hardsigmoid layer yet)."""

    def __init__(self, slope=0.1666667, offset=0.5, name=None):
        super().__init__()
        self.slope = slope
        self.offset = offset

    def forward(self, x):
        from ...autograd.ops.elementwise import clip
        return clip(x * self.slope + self.offset, 0.0, 1.0)
