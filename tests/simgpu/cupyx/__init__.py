"""simcupy's cupyx: the few cupyx routines ddg uses (``scatter_add``/``max``/``min``,
pinned host arrays, ``scipy.special.erf``), simulated with numpy. See ``cupy``'s
docstring in this folder for what the simulation proves and what it cannot."""
import sys
import types

import numpy as _np

import cupy as _cp


def _scatter(npufunc):
    def f(a, slices, value):
        if type(a) is not _cp.ndarray:
            raise TypeError(f"Unsupported type {type(a)}")
        _cp.ufunc(npufunc).at(a, slices, value)
    return f


scatter_add = _scatter(_np.add)
scatter_max = _scatter(_np.maximum)
scatter_min = _scatter(_np.minimum)


def empty_pinned(shape, dtype=float, order="C"):
    return _np.empty(shape, dtype, order)


def zeros_pinned(shape, dtype=float, order="C"):
    return _np.zeros(shape, dtype, order)


def empty_like_pinned(a, dtype=None, order="K", subok=None, shape=None):
    return _np.empty(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def zeros_like_pinned(a, dtype=None, order="K", subok=None, shape=None):
    return _np.zeros(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def _erf(x):
    if type(x) is not _cp.ndarray:
        raise TypeError(f"Unsupported type {type(x)}")
    try:
        from scipy.special import erf
    except ImportError:  # pragma: no cover
        import math
        erf = _np.vectorize(math.erf, otypes=[x.dtype])
    return _cp.ndarray._of(_np.asarray(erf(x._a), dtype=x.dtype), x._dev)


def _special(name):
    def f(*args):
        from scipy import special
        arrays = [a for a in args if type(a) is _cp.ndarray]
        if not arrays:
            raise TypeError(f"Unsupported type {type(args[-1])}")
        host = [a._a if type(a) is _cp.ndarray else a for a in args]
        out = getattr(special, name)(*host)
        return _cp.ndarray._of(_np.asarray(out, dtype=arrays[0].dtype), arrays[0]._dev)
    f.__name__ = name
    return f


scipy = types.ModuleType("cupyx.scipy", "simulated cupyx.scipy")
scipy.special = types.ModuleType("cupyx.scipy.special", "simulated cupyx.scipy.special")
scipy.special.erf = _erf
# the special functions ddg/autograd/ops/special.py calls (all in cupyx.scipy.special)
for _n in ("gammaln", "digamma", "polygamma", "erfinv", "i0", "i0e", "i1", "i1e"):
    setattr(scipy.special, _n, _special(_n))
sys.modules["cupyx.scipy"] = scipy
sys.modules["cupyx.scipy.special"] = scipy.special
