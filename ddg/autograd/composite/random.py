"""Random draws shaped like a tensor: ``poisson``, ``standard_normal``, ``randint_like``."""
from ...tensor import backend
from ..ops import elementwise as E
from ._common import _nograd, _xp


def poisson(x, name=None):
    """Samples of Poisson distributions with rates ``x``, in ``x``'s dtype."""
    xp = _xp(x)
    return _nograd(backend.rng(xp).poisson(x._data).astype(x._data.dtype))


def standard_normal(shape, dtype=None, name=None):
    from ...tensor.creation import randn
    return randn(shape, dtype=dtype)


def randint_like(x, low=0, high=None, dtype=None, name=None):
    from ...tensor.creation import randint
    if high is None:
        low, high = 0, low
    out = randint(low, high, shape=x.shape, dtype="int64")
    out = E.cast(out, dtype if dtype is not None else x.dtype)
    return out.to(x.place) if out.place != x.place else out
