"""``local_response_norm``: each value divided by a power of the summed squares of its
neighbours across channels (a composite)."""
import numpy as np

from ...autograd.ops import elementwise as E
from ...autograd.ops import linalg as L
from ...autograd.ops import movement as M
from .common import _const

__all__ = ["local_response_norm"]


def local_response_norm(x, size, alpha=1e-4, beta=0.75, k=1.0, data_format="NCHW", name=None):
    """``x / (k + alpha / size * sum of x^2 over size neighbouring channels) ** beta``."""
    if x.ndim < 3:
        raise ValueError(f"ddg.nn.functional.local_response_norm: needs at least 3 dimensions, got {x.shape}")
    channel_last = data_format[-1] == "C"
    ca = x.ndim - 1 if channel_last else 1
    sq = M.moveaxis(E.square(x), ca, -1)
    c = sq.shape[-1]
    pad_before, pad_after = size // 2, (size - 1) // 2
    # window sums as a matrix product with a band matrix (channels are few)
    band = np.zeros((c, c))
    for j in range(c):
        band[max(0, j - pad_before):min(c, j + pad_after + 1), j] = 1.0
    s = L.matmul(sq, _const(band, x, x._data.dtype))
    div = E.pow(E.add(E.multiply(s, alpha / size), k), beta)
    return E.divide(x, M.moveaxis(div, -1, ca))
