"""``ddg.nn``: layers, parameters, initializers, losses, gradient clipping."""
from . import functional, init, initializer  # noqa: F401
from .clip import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue  # noqa: F401
from .layer.activation import *  # noqa: F401,F403
from .layer.common import Bilinear, CosineSimilarity, Flatten, Identity, Linear, PairwiseDistance, Unflatten  # noqa: F401,E501
from .layer.dropout import AlphaDropout, Dropout, Dropout2D, Dropout3D  # noqa: F401
from .layer.embedding import Embedding  # noqa: F401
from .layer.spatial import (ChannelShuffle, Fold, Pad1D, Pad2D, Pad3D, PixelShuffle, PixelUnshuffle,  # noqa: F401
                            Unfold, Upsample, UpsamplingBilinear2D, UpsamplingNearest2D, ZeroPad2D)
from .layer.conv import Conv1D, Conv1DTranspose, Conv2D, Conv2DTranspose, Conv3D, Conv3DTranspose  # noqa: F401
from .layer.norm import (BatchNorm, BatchNorm1D, BatchNorm2D, BatchNorm3D, GroupNorm,  # noqa: F401
                         InstanceNorm1D, InstanceNorm2D, InstanceNorm3D, LayerNorm, LocalResponseNorm,
                         SpectralNorm)
from .layer.pooling import (AdaptiveAvgPool1D, AdaptiveAvgPool2D, AdaptiveMaxPool1D,  # noqa: F401
                            AdaptiveMaxPool2D, AvgPool1D, AvgPool2D, MaxPool1D, MaxPool2D, MaxPool3D, AvgPool3D,
                            AdaptiveAvgPool3D, AdaptiveMaxPool3D, MaxUnPool1D, MaxUnPool2D, MaxUnPool3D)
from .layer.container import LayerDict, LayerList, ParameterDict, ParameterList, Sequential  # noqa: F401
from .layer.layers import Layer  # noqa: F401

Module = Layer   # Paddle 3's PyTorch spelling of Layer
from .layer.loss import *  # noqa: F401,F403
from .layer.rnn import (RNN, GRU, LSTM, BiRNN, GRUCell, LSTMCell, RNNCellBase,  # noqa: F401
                        SimpleRNN, SimpleRNNCell)
from .layer.transformer import (MultiHeadAttention, Transformer, TransformerDecoder,  # noqa: F401
                                TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
from .param_attr import ParamAttr  # noqa: F401
from . import utils  # noqa: F401
from .parameter import Parameter  # noqa: F401


def __getattr__(name):
    # SyncBatchNorm talks to the communicator, so it lives in ddg.parallel; it is
    # imported on first use so that importing ddg.nn never imports ddg.parallel.
    if name == "SyncBatchNorm":
        from ..parallel.sync_batch_norm import SyncBatchNorm
        return SyncBatchNorm
    raise AttributeError(f"module 'ddg.nn' has no attribute {name!r}")
