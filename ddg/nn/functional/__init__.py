"""``ddg.nn.functional``: every layer as a function, plus losses and helpers."""
from .activation import *  # noqa: F401,F403
from .activation import relu, sigmoid, tanh, softmax, log_softmax  # noqa: F401
from .common import linear, one_hot  # noqa: F401
from .loss import *  # noqa: F401,F403
