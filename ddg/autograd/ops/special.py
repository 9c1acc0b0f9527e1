"""Special functions (log-gamma and its derivatives, the inverse error function, modified
Bessel functions of order 0 and 1) and ``atan2``. The values come from ``scipy.special`` on
the CPU (ddg's only use of scipy: these ops raise a clear error without it) and
``cupyx.scipy.special`` on the GPU."""
import numpy as np

from ...tensor import backend
from ..function import Function, sum_to
from .elementwise import _int_to_float, _pair


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
    return Lgamma()(_int_to_float(x))


def digamma(x, name=None):
    return Digamma()(_int_to_float(x))


def polygamma(x, n, name=None):
    if int(n) != n or n < 0:
        raise ValueError(f"ddg.polygamma: n must be a non-negative integer, got {n}")
    return Polygamma(int(n))(_int_to_float(x))


def erfinv(x, name=None):
    return Erfinv()(_int_to_float(x))


def i0(x, name=None):
    return I0()(_int_to_float(x))


def i0e(x, name=None):
    return I0e()(_int_to_float(x))


def i1(x, name=None):
    return I1()(_int_to_float(x))


def i1e(x, name=None):
    return I1e()(_int_to_float(x))


def atan2(x, y, name=None):
    x, y = _pair(x, y, "atan2")
    return Atan2()(_int_to_float(x), _int_to_float(y))
