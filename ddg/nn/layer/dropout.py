"""Dropout, Dropout2D, Dropout3D and AlphaDropout layers (Paddle signatures)."""
from .. import functional as F
from .layers import Layer


class Dropout(Layer):
    def __init__(self, p=0.5, axis=None, mode="upscale_in_train", name=None):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"ddg.nn.Dropout: p must be in [0, 1], got {p}")
        self.p, self.axis, self.mode, self.name, self.inplace = p, axis, mode, name, False

    def forward(self, x):
        return F.dropout(x, self.p, self.axis, self.training, self.mode)

    def extra_repr(self):
        return f"p={self.p}, axis={self.axis}, mode={self.mode}"


class Dropout2D(Layer):
    def __init__(self, p=0.5, data_format="NCHW", name=None):
        super().__init__()
        self.p, self.data_format, self.name = p, data_format, name

    def forward(self, x):
        return F.dropout2d(x, self.p, self.training, self.data_format)

    def extra_repr(self):
        return f"p={self.p}, data_format={self.data_format}"


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
