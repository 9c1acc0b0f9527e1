"""``local_response_norm``: each value divided by a power of the summed squares of its
neighbours across channels (a composite)."""
from ...autograd.ops import elementwise as E
from ...autograd.ops import norm as N

__all__ = ["local_response_norm"]


def local_response_norm(x, size, alpha=1e-4, beta=0.75, k=1.0, data_format="NCHW", name=None):
    """``x / (k + alpha / size * sum of x^2 over size neighbouring channels) ** beta``."""
    if x.ndim < 3:
        raise ValueError(f"ddg.nn.functional.local_response_norm: needs at least 3 dimensions, got {x.shape}")
    channel_last = data_format[-1] == "C"
    ca = x.ndim - 1 if channel_last else 1
    # the window holds size // 2 channels before each channel and (size - 1) // 2 after it
    s = N.window_sum(E.square(x), ca, size // 2, (size - 1) // 2)
    div = E.pow(E.add(E.multiply(s, alpha / size), k), beta)
    return E.divide(x, div)
