"""dropout, dropout2d, dropout3d: ``x`` times a random keep-mask, through the primitive
``ops.nn_ops.Dropout``, which draws the mask inside the op so that ``to_static`` replays
draw fresh masks; alpha_dropout (for SELU networks), a composite."""
import numbers

import numpy as np

from ...autograd.ops import elementwise as E
from ...autograd.ops import nn_ops
from ...tensor import backend
from ...tensor.tensor import Tensor
from .common import _const, _xp


# -- dropout -------------------------------------------------------------------------------------
def dropout(x, p=0.5, axis=None, training=True, mode="upscale_in_train", name=None):
    """Zero each element (or each slice along ``axis``) with probability ``p``.

    ``upscale_in_train``: training output ``x * mask / (1 - p)``, inference output ``x``.
    ``downscale_in_infer``: training output ``x * mask``, inference output ``x * (1 - p)``."""
    if isinstance(p, Tensor):
        p = float(p)
    if not isinstance(p, numbers.Number) or not 0 <= p <= 1:
        raise ValueError(f"ddg.nn.functional.dropout: p must be a number in [0, 1], got {p!r}")
    if mode not in ("upscale_in_train", "downscale_in_infer"):
        raise ValueError(f"ddg.nn.functional.dropout: mode must be 'upscale_in_train' or 'downscale_in_infer', "
                         f"got {mode!r}")
    if not training:
        return x if mode == "upscale_in_train" or p == 0 else x * (1.0 - p)
    if p == 0:
        return x
    if axis is None:
        shape = x.shape
    else:
        axes = [axis] if isinstance(axis, int) else list(axis)
        axes = [a % x.ndim for a in axes]
        if any(a >= x.ndim for a in axes) or len(set(axes)) != len(axes):
            raise ValueError(f"ddg.nn.functional.dropout: bad axis {axis!r} for an input of shape {x.shape}")
        shape = [s if i in axes else 1 for i, s in enumerate(x.shape)]
    scale = (0.0 if p == 1 else 1.0 / (1.0 - p)) if mode == "upscale_in_train" else None
    return nn_ops.Dropout(p, tuple(shape), scale)(x)


def dropout2d(x, p=0.5, training=True, data_format="NCHW", name=None):
    """Drop whole channels of an NCHW/NHWC input."""
    if x.ndim != 4:
        raise ValueError(f"ddg.nn.functional.dropout2d: expected a 4-D input, got shape {x.shape}")
    return dropout(x, p, [0, 1] if data_format == "NCHW" else [0, 3], training)


def dropout3d(x, p=0.5, training=True, data_format="NCDHW", name=None):
    if x.ndim != 5:
        raise ValueError(f"ddg.nn.functional.dropout3d: expected a 5-D input, got shape {x.shape}")
    return dropout(x, p, [0, 1] if data_format == "NCDHW" else [0, 4], training)


def alpha_dropout(x, p=0.5, training=True, name=None):
    """Dropout that keeps SELU's zero mean and unit variance: dropped units take SELU's
    negative saturation value, then an affine map restores the moments."""
    if not isinstance(p, numbers.Number) or not 0 <= p <= 1:
        raise ValueError(f"ddg.nn.functional.alpha_dropout: p must be in [0, 1], got {p!r}")
    if not training or p == 0:
        return x
    alpha_p = -1.7580993408473766   # -scale * alpha of SELU
    a = (1.0 / np.sqrt((alpha_p ** 2 * p + 1) * (1 - p)))
    b = -a * alpha_p * p
    keep = backend.rng(_xp(x)).uniform(0, 1, x._data.shape) >= p
    keep_t = _const(keep.astype(x._data.dtype), x)
    y = E.add(E.multiply(x, keep_t), E.multiply(E.subtract(1.0, keep_t), alpha_p))
    return E.add(E.multiply(y, a), b)
