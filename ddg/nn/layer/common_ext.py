"""Dropout, Dropout2D, Embedding, Pad1D/2D/3D, Upsample (+ UpsamplingNearest2D,
UpsamplingBilinear2D), Unfold (Paddle signatures)."""
from ...autograd.grad_mode import no_grad
from .. import functional as F
from .layers import Layer


class Dropout(Layer):
    def __init__(self, p=0.5, axis=None, mode="upscale_in_train", name=None):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"ddg.nn.Dropout: p must be in [0, 1], got {p}")
        self.p, self.axis, self.mode = p, axis, mode

    def forward(self, x):
        return F.dropout(x, self.p, self.axis, self.training, self.mode)

    def extra_repr(self):
        return f"p={self.p}, axis={self.axis}, mode={self.mode}"


class Dropout2D(Layer):
    def __init__(self, p=0.5, data_format="NCHW", name=None):
        super().__init__()
        self.p, self.data_format = p, data_format

    def forward(self, x):
        return F.dropout2d(x, self.p, self.training, self.data_format)

    def extra_repr(self):
        return f"p={self.p}, data_format={self.data_format}"


class Embedding(Layer):
    """A lookup table ``weight`` [num_embeddings, embedding_dim] (Xavier-uniform default).
    With ``padding_idx`` that row starts at zero, its output is zero and it gets no
    gradient, as in Paddle."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, sparse=False, weight_attr=None, name=None):
        super().__init__()
        if num_embeddings <= 0 or embedding_dim <= 0:
            raise ValueError(f"ddg.nn.Embedding: sizes must be positive, got ({num_embeddings}, {embedding_dim})")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"ddg.nn.Embedding: padding_idx {padding_idx} out of range for "
                                 f"{num_embeddings} embeddings")
            padding_idx %= num_embeddings
        self._num_embeddings, self._embedding_dim = num_embeddings, embedding_dim
        self._padding_idx, self._sparse = padding_idx, sparse
        self.weight = self.create_parameter([num_embeddings, embedding_dim], attr=weight_attr)
        if padding_idx is not None:
            with no_grad():
                self.weight._data[padding_idx] = 0
                self.weight._vc[0] += 1

    def forward(self, x):
        return F.embedding(x, self.weight, self._padding_idx, self._sparse)

    def extra_repr(self):
        s = f"{self._num_embeddings}, {self._embedding_dim}"
        if self._padding_idx is not None:
            s += f", padding_idx={self._padding_idx}"
        return s


class _PadNd(Layer):
    _nd = 2
    _default_format = "NCHW"

    def __init__(self, padding, mode="constant", value=0.0, data_format=None, name=None):
        super().__init__()
        if isinstance(padding, int):
            padding = [padding] * (2 * self._nd)
        padding = list(padding)
        if len(padding) != 2 * self._nd:
            raise ValueError(f"ddg.nn.{type(self).__name__}: padding must be an int or {2 * self._nd} ints, "
                             f"got {padding}")
        self._pad, self._mode, self._value = padding, mode, value
        self._data_format = data_format or self._default_format

    def forward(self, x):
        if x.ndim != self._nd + 2:
            raise ValueError(f"ddg.nn.{type(self).__name__}: expected a {self._nd + 2}-D input, got shape {x.shape}")
        return F.pad(x, self._pad, self._mode, self._value, self._data_format)

    def extra_repr(self):
        return f"padding={self._pad}, mode={self._mode!r}, value={self._value}, data_format={self._data_format}"


class Pad1D(_PadNd):
    _nd = 1
    _default_format = "NCL"


class Pad2D(_PadNd):
    pass


class Pad3D(_PadNd):
    _nd = 3
    _default_format = "NCDHW"


class Upsample(Layer):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=False, align_mode=0,
                 data_format="NCHW", name=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.align_mode, self.data_format = align_corners, align_mode, data_format

    def forward(self, x):
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners, self.align_mode,
                             self.data_format)

    def extra_repr(self):
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}, align_corners={self.align_corners}"


class UpsamplingNearest2D(Upsample):
    def __init__(self, size=None, scale_factor=None, data_format="NCHW", name=None):
        super().__init__(size, scale_factor, "nearest", False, 0, data_format)


class UpsamplingBilinear2D(Upsample):
    def __init__(self, size=None, scale_factor=None, data_format="NCHW", name=None):
        super().__init__(size, scale_factor, "bilinear", True, 0, data_format)


class Unfold(Layer):
    def __init__(self, kernel_sizes, dilations=1, paddings=0, strides=1, name=None):
        super().__init__()
        self.kernel_sizes, self.dilations, self.paddings, self.strides = kernel_sizes, dilations, paddings, strides

    def forward(self, x):
        return F.unfold(x, self.kernel_sizes, self.strides, self.paddings, self.dilations)

    def extra_repr(self):
        return f"kernel_sizes={self.kernel_sizes}, strides={self.strides}, paddings={self.paddings}"
