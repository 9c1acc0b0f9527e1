"""The layer classes (one family per module); ``Layer`` is importable from here, as
``paddle.nn.layer.Layer`` is."""
from .layers import Layer  # noqa: F401
