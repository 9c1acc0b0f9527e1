"""Layers over the spatial axes: Pad1D/2D/3D, Upsample (+ UpsamplingNearest2D,
UpsamplingBilinear2D), Unfold, Fold, PixelShuffle, PixelUnshuffle, ChannelShuffle (Paddle
signatures)."""
from .. import functional as F
from .layers import Layer


class _PadNd(Layer):
    _nd = 2
    _default_format = "NCHW"

    def __init__(self, padding, mode="constant", value=0.0, data_format=None, name=None):
        # Paddle's defaults are "NCL", "NCHW", "NCDHW" (the subclasses' signatures say so)
        super().__init__()
        if isinstance(padding, int):
            padding = [padding] * (2 * self._nd)
        padding = list(padding)
        if len(padding) != 2 * self._nd:
            raise ValueError(f"ddg.nn.{type(self).__name__}: padding must be an int or {2 * self._nd} ints, "
                             f"got {padding}")
        self.padding, self._mode, self.value = padding, mode, value
        self._data_format, self._name = data_format or self._default_format, name

    def forward(self, x):
        if x.ndim != self._nd + 2:
            raise ValueError(f"ddg.nn.{type(self).__name__}: expected a {self._nd + 2}-D input, got shape {x.shape}")
        return F.pad(x, self.padding, self._mode, self.value, self._data_format)

    def extra_repr(self):
        return f"padding={self.padding}, mode={self._mode!r}, value={self.value}, data_format={self._data_format}"


class Pad1D(_PadNd):
    _nd = 1
    _default_format = "NCL"

    def __init__(self, padding, mode="constant", value=0.0, data_format="NCL", name=None):
        super().__init__(padding, mode, value, data_format, name)


class Pad2D(_PadNd):
    def __init__(self, padding, mode="constant", value=0.0, data_format="NCHW", name=None):
        super().__init__(padding, mode, value, data_format, name)


class ZeroPad2D(Layer):
    """Zero padding of H and W: ``padding`` is an int or [left, right, top, bottom]."""

    def __init__(self, padding, data_format="NCHW", name=None):
        super().__init__()
        if isinstance(padding, int):
            padding = [padding] * 4
        self.padding, self._data_format, self._name = list(padding), data_format, name
        self._mode, self.value = "constant", 0.0

    def forward(self, x):
        return F.pad(x, self.padding, self._mode, self.value, self._data_format)


class PixelShuffle(Layer):
    def __init__(self, upscale_factor, data_format="NCHW", name=None):
        super().__init__()
        self._upscale_factor, self._data_format, self._name = upscale_factor, data_format, name

    def forward(self, x):
        return F.pixel_shuffle(x, self._upscale_factor, self._data_format)


class Pad3D(_PadNd):
    _nd = 3
    _default_format = "NCDHW"

    def __init__(self, padding, mode="constant", value=0.0, data_format="NCDHW", name=None):
        super().__init__(padding, mode, value, data_format, name)


class Upsample(Layer):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=False, align_mode=0,
                 data_format=None, name=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.align_mode, self.data_format = align_corners, align_mode, data_format
        self.recompute_scale_factor, self.name = None, name

    def forward(self, x):
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners, self.align_mode,
                             self.data_format)

    def extra_repr(self):
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}, align_corners={self.align_corners}"


class UpsamplingNearest2D(Upsample):
    def __init__(self, size=None, scale_factor=None, data_format="NCHW", name=None):
        super().__init__(size, scale_factor, "nearest", False, 0, data_format, name)
        del self.recompute_scale_factor


class UpsamplingBilinear2D(Upsample):
    def __init__(self, size=None, scale_factor=None, data_format="NCHW", name=None):
        super().__init__(size, scale_factor, "bilinear", True, 0, data_format, name)
        del self.recompute_scale_factor


class Unfold(Layer):
    def __init__(self, kernel_sizes, dilations=1, paddings=0, strides=1, name=None):
        super().__init__()
        self.kernel_sizes, self.dilations, self.paddings, self.strides = kernel_sizes, dilations, paddings, strides
        self.name = name

    def forward(self, x):
        return F.unfold(x, self.kernel_sizes, self.strides, self.paddings, self.dilations)

    def extra_repr(self):
        return f"kernel_sizes={self.kernel_sizes}, strides={self.strides}, paddings={self.paddings}"


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


class Fold(Layer):
    def __init__(self, output_sizes, kernel_sizes, dilations=1, paddings=0, strides=1, name=None):
        super().__init__()
        self.output_sizes, self.kernel_sizes = output_sizes, kernel_sizes
        self.dilations, self.paddings, self.strides, self.name = dilations, paddings, strides, name

    def forward(self, x):
        return F.fold(x, self.output_sizes, self.kernel_sizes, self.strides, self.paddings, self.dilations)

    def extra_repr(self):
        return f"output_sizes={self.output_sizes}, kernel_sizes={self.kernel_sizes}"
