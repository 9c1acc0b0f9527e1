"""``ddg.nn``: layers, parameters, initializers, losses, gradient clipping."""
from . import functional, init, initializer  # noqa: F401
from .clip import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue  # noqa: F401
from .layer.activation import *  # noqa: F401,F403
from .layer.common import CosineSimilarity, Flatten, Identity, Linear  # noqa: F401
from .layer.dropout import Dropout, Dropout2D  # noqa: F401
from .layer.embedding import Embedding  # noqa: F401
from .layer.spatial import (Pad1D, Pad2D, Pad3D, PixelShuffle, Unfold, Upsample,  # noqa: F401
                            UpsamplingBilinear2D, UpsamplingNearest2D, ZeroPad2D)
from .layer.conv import Conv1D, Conv1DTranspose, Conv2D, Conv2DTranspose, Conv3D, Conv3DTranspose  # noqa: F401
from .layer.norm import (BatchNorm, BatchNorm1D, BatchNorm2D, BatchNorm3D, GroupNorm,  # noqa: F401
                         InstanceNorm1D, InstanceNorm2D, LayerNorm)
from .layer.pooling import (AdaptiveAvgPool1D, AdaptiveAvgPool2D, AdaptiveMaxPool1D,  # noqa: F401
                            AdaptiveMaxPool2D, AvgPool1D, AvgPool2D, MaxPool1D, MaxPool2D, MaxPool3D, AvgPool3D,
                            AdaptiveAvgPool3D, AdaptiveMaxPool3D)
from .layer.container import LayerDict, LayerList, ParameterDict, ParameterList, Sequential  # noqa: F401
from .layer.layers import Layer  # noqa: F401

Module = Layer   # Paddle 3's PyTorch spelling of Layer
from .layer.loss import *  # noqa: F401,F403
from .layer.rnn import (RNN, GRU, LSTM, BiRNN, GRUCell, LSTMCell, RNNCellBase,  # noqa: F401
                        SimpleRNN, SimpleRNNCell)
from .layer.transformer import (MultiHeadAttention, Transformer, TransformerDecoder,  # noqa: F401
                                TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
from .layer.extra import (AlphaDropout, Bilinear, ChannelShuffle, CTCLoss, Dropout3D, Fold,  # noqa: F401
                          GaussianNLLLoss, InstanceNorm3D, LocalResponseNorm, Maxout, MaxUnPool1D, MaxUnPool2D,
                          MaxUnPool3D, MultiMarginLoss, PairwiseDistance, PixelUnshuffle, PoissonNLLLoss, RReLU,
                          Softmax2D, SpectralNorm, TripletMarginWithDistanceLoss, Unflatten)
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
