"""Compiled optimizer updates on numpy: one pass over a parameter and its state instead of
the two (SGD), four (Momentum) or eleven (Adam) whole-array passes of the in-place numpy rule.

Each kernel performs, element by element, exactly the operations of the numpy rule it
replaces, in the same order and in the array's dtype, and is compiled without fast-math
(no contraction into fused multiply-adds, no reassociation). Its results are therefore
bit-identical to the numpy rule's, so the per-parameter and the fused (flat buffer) paths,
and the numpy path that cupy and small arrays keep, all agree exactly
(``tests/test_optimizer_fused.py``).

Used for numpy float32/float64 arrays of one dtype, contiguous, with scalar hyper-parameters
and at least ``MIN_SIZE`` elements: below that the numpy rule's few short calls cost less
than the kernel's dispatch.
"""
import numpy as np

from .compiled import kernel

MIN_SIZE = 8192


def usable(*arrays, scalars=()):
    """Whether the kernels take these arrays and hyper-parameters (see the module docstring):
    the scalars must be Python floats, which numpy's rule applies in the array's dtype."""
    if not all(type(s) is float for s in scalars):
        return False
    a0 = arrays[0]
    if type(a0) is not np.ndarray or a0.dtype not in (np.float32, np.float64) or a0.size < MIN_SIZE:
        return False
    return all(type(a) is np.ndarray and a.dtype == a0.dtype and a.shape == a0.shape and a.flags.c_contiguous
               for a in arrays)


@kernel(fastmath=False, error_model="numpy")
def _sgd(p, g, lr):
    for i in range(p.size):
        p[i] = p[i] - g[i] * lr


def sgd(p, g, lr):
    """``p -= lr*g`` in place: one pass where numpy's rule makes two (``lr*g`` into scratch,
    then the subtraction)."""
    _sgd(p.reshape(-1), g.reshape(-1), p.dtype.type(lr))


@kernel(fastmath=False, error_model="numpy")
def _momentum(p, g, v, mu, lr):
    for i in range(p.size):
        vi = v[i] * mu
        vi = vi + g[i]
        v[i] = vi
        p[i] = p[i] - vi * lr


@kernel(fastmath=False, error_model="numpy")
def _momentum_nesterov(p, g, v, mu, lr):
    for i in range(p.size):
        gi = g[i]
        vi = v[i] * mu
        vi = vi + gi
        v[i] = vi
        s = vi * mu
        s = s + gi
        p[i] = p[i] - s * lr


def momentum(p, g, v, mu, lr, nesterov):
    """``v = mu*v + g; p -= lr*v`` (Nesterov: ``p -= lr*(g + mu*v)``), in place."""
    t = p.dtype.type
    (_momentum_nesterov if nesterov else _momentum)(p.reshape(-1), g.reshape(-1), v.reshape(-1), t(mu), t(lr))


@kernel(fastmath=False, error_model="numpy")
def _adam(p, g, m, v, b1, c1, b2, c2, lr, eps):
    for i in range(p.size):
        gi = g[i]
        mi = m[i] * b1
        mi = mi + gi * c1
        m[i] = mi
        vi = v[i] * b2
        vi = vi + (gi * gi) * c2
        v[i] = vi
        p[i] = p[i] - (mi / (np.sqrt(vi) + eps)) * lr


@kernel(fastmath=False, error_model="numpy")
def _amsgrad(p, g, m, v, vmax, b1, c1, b2, c2, lr, eps):
    for i in range(p.size):
        gi = g[i]
        mi = m[i] * b1
        mi = mi + gi * c1
        m[i] = mi
        vi = v[i] * b2
        vi = vi + (gi * gi) * c2
        v[i] = vi
        a = vmax[i]
        if a != a or (vi == vi and a > vi):   # numpy's maximum: a NaN on either side wins
            vi = a
        vmax[i] = vi
        p[i] = p[i] - (mi / (np.sqrt(vi) + eps)) * lr


def adam(p, g, m, v, vmax, b1, b2, lr_t, eps_t):
    """Adam's moments and update in place, with the bias corrections folded into ``lr_t`` and
    ``eps_t`` (``ddg.optimizer.Adam._core``); ``vmax`` the AMSGrad maximum, or None."""
    t = p.dtype.type
    args = (t(b1), t(1.0 - b1), t(b2), t(1.0 - b2), t(lr_t), t(eps_t))
    if vmax is None:
        _adam(p.reshape(-1), g.reshape(-1), m.reshape(-1), v.reshape(-1), *args)
    else:
        _amsgrad(p.reshape(-1), g.reshape(-1), m.reshape(-1), v.reshape(-1), vmax.reshape(-1), *args)
