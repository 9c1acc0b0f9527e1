"""Special functions (log-gamma and its derivatives, the inverse error function, modified
Bessel functions of order 0 and 1) and ``atan2``. The values come from ``scipy.special`` on
the CPU (ddg's only use of scipy: these ops raise a clear error without it) and
``cupyx.scipy.special`` on the GPU."""
import numpy as np

from ...tensor import backend
from ...tensor.dtypes import default_float
from ...tensor.tensor import Tensor
from ..function import Function, sum_to


def _float(x, op):
    """Float tensors as they are; integer and bool ones (which need no gradient) in the default
    float dtype, as Paddle casts them."""
    k = x._data.dtype.kind
    if k == "f":
        return x
    if k in "iub":
        return Tensor._wrap(x._data.astype(default_float()))
    raise TypeError(f"ddg.{op}: needs a real tensor, got {x.dtype} (shape {x.shape})")


def _sp(xp, op):
    if xp is np:
        try:
            import scipy.special as sp
        except ImportError:  # pragma: no cover - scipy is a test dependency
            raise ImportError(f"ddg.{op} needs scipy on the CPU (pip install scipy)") from None
        return sp
    import cupyx.scipy.special as sp  # pragma: no cover - GPU only (simcupy simulates it)
    return sp


class _Special(Function):
    """``out = f(x)``, ``grad = g * d(x, out)``."""
    op = fn = None

    def forward(self, a):
        self.a = a
        sp = _sp(backend.get_array_module(a), self.op)
        return getattr(sp, self.fn)(a).astype(a.dtype, copy=False)

    def backward(self, g):
        xp = backend.get_array_module(g)
        return (g * self.d(_sp(xp, self.op), xp, self.a)).astype(g.dtype, copy=False)


class Lgamma(_Special):
    op, fn = "lgamma", "gammaln"

    def d(self, sp, xp, a):
        return sp.digamma(a)


class Digamma(_Special):
    op, fn = "digamma", "digamma"

    def d(self, sp, xp, a):
        return sp.polygamma(1, a)


class Polygamma(Function):
    def __init__(self, n):
        self.n = n

    def forward(self, a):
        self.a = a
        return _sp(backend.get_array_module(a), "polygamma").polygamma(self.n, a).astype(a.dtype, copy=False)

    def backward(self, g):
        sp = _sp(backend.get_array_module(g), "polygamma")
        return (g * sp.polygamma(self.n + 1, self.a)).astype(g.dtype, copy=False)


class Erfinv(_Special):
    op, fn = "erfinv", "erfinv"
    save_output = True

    def forward(self, a):
        self.out = super().forward(a)
        return self.out

    def d(self, sp, xp, a):
        return (np.sqrt(np.pi) / 2) * xp.exp(self.out * self.out)


class I0(_Special):
    op, fn = "i0", "i0"

    def d(self, sp, xp, a):
        return sp.i1(a)


class I0e(_Special):
    op, fn = "i0e", "i0e"

    def d(self, sp, xp, a):
        return sp.i1e(a) - xp.sign(a) * sp.i0e(a)


class I1(_Special):
    op, fn = "i1", "i1"

    def d(self, sp, xp, a):
        safe = xp.where(a == 0, 1, a)
        return xp.where(a == 0, 0.5, sp.i0(a) - sp.i1(a) / safe)


class I1e(_Special):
    op, fn = "i1e", "i1e"

    def d(self, sp, xp, a):
        safe = xp.where(a == 0, 1, a)
        return xp.where(a == 0, 0.5, sp.i0e(a) - sp.i1e(a) * (xp.sign(a) + 1 / safe))


class Atan2(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return backend.get_array_module(a, b).arctan2(a, b)

    def backward(self, g):
        na, nb = self.needs
        a, b = self.a, self.b
        r = a * a + b * b
        ga = sum_to(g * b / r, a.shape).astype(a.dtype, copy=False) if na else None
        gb = sum_to(-g * a / r, b.shape).astype(b.dtype, copy=False) if nb else None
        return ga, gb


def lgamma(x, name=None):
    return Lgamma()(_float(x, "lgamma"))


def digamma(x, name=None):
    return Digamma()(_float(x, "digamma"))


def polygamma(x, n, name=None):
    if int(n) != n or n < 0:
        raise ValueError(f"ddg.polygamma: n must be a non-negative integer, got {n}")
    return Polygamma(int(n))(_float(x, "polygamma"))


def erfinv(x, name=None):
    return Erfinv()(_float(x, "erfinv"))


def i0(x, name=None):
    return I0()(_float(x, "i0"))


def i0e(x, name=None):
    return I0e()(_float(x, "i0e"))


def i1(x, name=None):
    return I1()(_float(x, "i1"))


def i1e(x, name=None):
    return I1e()(_float(x, "i1e"))


def atan2(x, y, name=None):
    """``atan2`` of two float tensors of one dtype (``ddg.atan2`` promotes first)."""
    if x._data.dtype != y._data.dtype or x._data.dtype.kind != "f":
        raise TypeError(f"ddg.atan2: needs two float tensors of one dtype, got {x.dtype} and {y.dtype}")
    return Atan2()(x, y)
