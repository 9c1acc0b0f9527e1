"""``ddg.incubate.nn``: Paddle's fused layers (``FusedLinear``, ``FusedMultiHeadAttention``,
``FusedFeedForward``, ``FusedTransformerEncoderLayer``, ``FusedBiasDropoutResidualLayerNorm``,
``FusedDropoutAdd``) and ``functional``."""
from . import functional  # noqa: F401
from .layer import (FusedBiasDropoutResidualLayerNorm, FusedDropoutAdd, FusedFeedForward, FusedLinear,
                    FusedMultiHeadAttention, FusedTransformerEncoderLayer)

__all__ = ["FusedLinear", "FusedDropoutAdd", "FusedBiasDropoutResidualLayerNorm", "FusedFeedForward",
           "FusedMultiHeadAttention", "FusedTransformerEncoderLayer", "functional"]


def __getattr__(name):
    if name == "FusedMultiTransformer":
        raise NotImplementedError("ddg.incubate.nn.FusedMultiTransformer needs Paddle's GPU inference kernels; use "
                                  "a LayerList of ddg.incubate.nn.FusedTransformerEncoderLayer")
    raise AttributeError(f"module 'ddg.incubate.nn' has no attribute {name!r}")
