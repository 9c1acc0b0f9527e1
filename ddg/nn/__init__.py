"""``ddg.nn``: layers, parameters, initializers, losses, gradient clipping."""
from . import functional, initializer  # noqa: F401
from .layer.activation import *  # noqa: F401,F403
from .layer.common import Flatten, Identity, Linear  # noqa: F401
from .layer.container import LayerDict, LayerList, ParameterList, Sequential  # noqa: F401
from .layer.layers import Layer  # noqa: F401
from .layer.loss import *  # noqa: F401,F403
from .param_attr import ParamAttr  # noqa: F401
from .parameter import Parameter  # noqa: F401
