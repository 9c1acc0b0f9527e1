"""``ddg.nn.init``: the in-place initialisers Paddle 3 spells as PyTorch does
(``xavier_uniform_(tensor)``, ``kaiming_normal_(tensor, a, mode, nonlinearity)``...), over
the classes of ``ddg.nn.initializer``. Each fills ``tensor`` in place and returns it."""
import numpy as np

from .initializer import (Constant, Dirac, KaimingNormal, KaimingUniform, Normal, Orthogonal, TruncatedNormal,
                          Uniform, XavierNormal, XavierUniform, calculate_gain, with_no_grad_set)

__all__ = ["calculate_gain", "constant_", "dirac_", "eye_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_",
           "orthogonal_", "trunc_normal_", "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_", "Constant",
           "Dirac", "KaimingNormal", "KaimingUniform", "Normal", "Orthogonal", "TruncatedNormal", "Uniform",
           "XavierNormal", "XavierUniform"]


def constant_(tensor, val):
    return Constant(val)(tensor)


def ones_(tensor):
    return Constant(1.0)(tensor)


def zeros_(tensor):
    return Constant(0.0)(tensor)


def normal_(tensor, mean=0.0, std=1.0):
    return Normal(mean, std)(tensor)


def uniform_(tensor, a=0.0, b=1.0):
    return Uniform(a, b)(tensor)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    return TruncatedNormal(mean=mean, std=std, a=a, b=b)(tensor)


def xavier_uniform_(tensor, gain=1.0, fan_in=None, fan_out=None):
    return XavierUniform(fan_in=fan_in, fan_out=fan_out, gain=gain)(tensor)


def xavier_normal_(tensor, gain=1.0, fan_in=None, fan_out=None):
    return XavierNormal(fan_in=fan_in, fan_out=fan_out, gain=gain)(tensor)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    return KaimingUniform(negative_slope=a, nonlinearity=nonlinearity, mode=mode)(tensor)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    return KaimingNormal(negative_slope=a, nonlinearity=nonlinearity, mode=mode)(tensor)


def orthogonal_(tensor, gain=1):
    return Orthogonal(gain=gain)(tensor)


def dirac_(tensor, groups=1):
    return Dirac(groups)(tensor)


def eye_(tensor):
    """The identity matrix (ones on the diagonal of a 2-D tensor, rectangular too)."""
    if tensor.ndim != 2:
        raise ValueError(f"ddg.nn.init.eye_: needs a 2-D tensor, got shape {tensor.shape}")
    with_no_grad_set(tensor, np.eye(*tensor.shape))
    return tensor
