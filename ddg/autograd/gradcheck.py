"""Check analytic gradients against float64 central differences."""
import numpy as np

from ..tensor.tensor import Tensor
from . import engine, grad_mode


def numeric_grad(fn, inputs, v, eps=1e-6):
    """d/d(inputs) of sum(fn(*inputs) * v) by central differences (inputs modified and restored)."""
    grads = []
    for x in inputs:
        if x.stop_gradient:
            grads.append(None)
            continue
        a = x._data
        g = np.zeros(a.shape, dtype=np.float64)
        for i in np.ndindex(*a.shape):  # index in place: works for non-contiguous views too
            old = a[i]
            with grad_mode.no_grad():
                a[i] = old + eps
                hi = float((np.asarray(_out(fn, inputs)) * v).sum())
                a[i] = old - eps
                lo = float((np.asarray(_out(fn, inputs)) * v).sum())
            a[i] = old
            g[i] = (hi - lo) / (2 * eps)
        grads.append(g)
    return grads


def _out(fn, inputs):
    out = fn(*inputs)
    return out._data if isinstance(out, Tensor) else out


def gradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, seed=0):
    """True when backward matches central differences of ``func`` at ``inputs``.

    ``inputs`` are float64 Tensors (those with stop_gradient=False are checked). The
    output is contracted with a fixed random tensor ``v``, so one backward checks
    every input element against its own finite difference.
    """
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    for x in inputs:
        if not x.stop_gradient and x.dtype != np.float64:
            raise TypeError(f"ddg.gradcheck: inputs must be float64 for finite differences, got {x.dtype}")
    out = func(*inputs)
    v = np.random.default_rng(seed).standard_normal(out._data.shape)
    targets = [x for x in inputs if not x.stop_gradient]
    analytic = engine.grad([out], targets, [Tensor._wrap(v.astype(out._data.dtype))], allow_unused=True)
    numeric = [g for g in numeric_grad(func, inputs, v, eps) if g is not None]
    for i, (a, n) in enumerate(zip(analytic, numeric)):
        a = np.zeros_like(n) if a is None else a.numpy()
        if not np.allclose(a, n, atol=atol, rtol=rtol):
            if raise_exception:
                err = np.abs(a - n).max()
                raise AssertionError(f"ddg.gradcheck: gradient of input {i} differs from central differences "
                                     f"(max abs error {err:.3g})\nanalytic:\n{a}\nnumeric:\n{n}")
            return False
    return True
