"""The ops the distributions are written with, from the modules that define them (the
distributions sit above ``ddg.autograd`` and ``ddg.tensor``, and never import ``ddg``)."""
from .. import linalg  # noqa: F401
from ..autograd.composite.matrices import diagonal  # noqa: F401
from ..autograd.ops.elementwise import (abs, atan, atanh, cast, clip, erf, exp, expm1, log, log1p,  # noqa: F401,A004
                                        sigmoid, sign, sqrt, tan, tanh, where)
from ..autograd.ops.movement import broadcast_to, concat, stack, take_along_axis, unbind  # noqa: F401
from ..autograd.ops.reduce import cumprod, cumsum  # noqa: F401
from ..autograd.ops.special import digamma, lgamma  # noqa: F401
from ..tensor.creation import full_like, ones_like, to_tensor, zeros, zeros_like  # noqa: F401
