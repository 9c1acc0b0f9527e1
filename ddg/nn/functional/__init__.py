"""``ddg.nn.functional``: every layer as a function, plus losses and helpers."""
from .activation import *  # noqa: F401,F403
from .activation import relu, sigmoid, tanh, softmax, log_softmax  # noqa: F401
from .common import bilinear, gather_tree, linear, one_hot, sequence_mask  # noqa: F401
from .dropout import alpha_dropout, dropout, dropout2d, dropout3d  # noqa: F401
from .embedding import embedding  # noqa: F401
from .spatial import (affine_grid, grid_sample, interpolate, pad, pixel_shuffle, unfold, upsample,  # noqa: F401
                      zeropad2d)
from .conv import conv1d, conv1d_transpose, conv2d, conv2d_transpose, conv3d, conv3d_transpose  # noqa: F401
from .norm import batch_norm, group_norm, instance_norm, layer_norm, normalize  # noqa: F401
from .pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d,  # noqa: F401
                      adaptive_max_pool2d, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d, max_pool3d,
                      avg_pool3d, adaptive_avg_pool3d, adaptive_max_pool3d)
from .attention import scaled_dot_product_attention  # noqa: F401
from .loss import *  # noqa: F401,F403
from .rearrange import *  # noqa: F401,F403
from .unpooling import *  # noqa: F401,F403
from .response_norm import *  # noqa: F401,F403
from .random_activation import *  # noqa: F401,F403
from .inplace_activation import *  # noqa: F401,F403
from ...autograd.composite.matrices import diag_embed  # noqa: F401  (Paddle has it here too)
