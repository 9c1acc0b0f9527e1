"""``ddg.optimizer``: SGD, Momentum, Adam, AdamW, Adamax, Adadelta, RAdam, NAdam, RMSProp, Adagrad, Lamb, LBFGS,
ASGD, Rprop and the learning-rate schedules in ``ddg.optimizer.lr`` (Paddle 2.x API)."""
from .. import regularizer  # noqa: F401  (makes ddg.regularizer reachable as an attribute)
from . import lr  # noqa: F401
from .adagrad import Adagrad  # noqa: F401
from .asgd import ASGD  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .adamax import Adadelta, Adamax  # noqa: F401
from .radam import NAdam, RAdam  # noqa: F401
from .lamb import Lamb  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from .momentum import Momentum  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .rmsprop import RMSProp  # noqa: F401
from .rprop import Rprop  # noqa: F401
from .sgd import SGD  # noqa: F401

__all__ = ["Optimizer", "SGD", "Momentum", "Adam", "AdamW", "Adamax", "Adadelta", "RAdam", "NAdam", "RMSProp",
           "Adagrad", "Lamb", "LBFGS", "ASGD", "Rprop", "lr"]
