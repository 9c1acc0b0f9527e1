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


def _first_grads(func, inputs, targets, v, create_graph):
    out = func(*inputs)
    return engine.grad([out], targets, [Tensor._wrap(v.astype(out._data.dtype))], create_graph=create_graph,
                       allow_unused=True)


def gradgradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, seed=0):
    """True when second derivatives (``create_graph=True``) match central differences.

    The first derivatives of ``sum(func(*inputs) * v)`` are taken with ``create_graph=True``
    (and must equal the ordinary backward's), contracted with fixed random ``w``, and
    differentiated again; the result is compared with central differences of the same
    contraction computed by the ordinary (raw-array) backward."""
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    targets = [x for x in inputs if not x.stop_gradient]
    for x in targets:
        if x.dtype != np.float64:
            raise TypeError(f"ddg.gradgradcheck: inputs must be float64 for finite differences, got {x.dtype}")
    rng = np.random.default_rng(seed)
    out = func(*inputs)
    v = rng.standard_normal(out._data.shape)
    ws = [rng.standard_normal(x._data.shape) for x in targets]

    def contract(gs):
        total = None
        for g, w in zip(gs, ws):
            if g is None:
                continue
            term = (g * Tensor._wrap(w)).sum()
            total = term if total is None else total + term
        return total

    first = _first_grads(func, inputs, targets, v, True)
    plain = _first_grads(func, inputs, targets, v, False)
    problems = []
    for i, (a, b) in enumerate(zip(first, plain)):
        if (a is None) != (b is None) or (a is not None and
                                          not np.allclose(a.numpy(), b.numpy(), atol=atol, rtol=rtol)):
            problems.append(f"first derivative of input {i} differs between create_graph=True and the ordinary "
                            f"backward")
    s = contract(first)
    analytic = [None] * len(targets)
    if s is not None and not s.stop_gradient:
        analytic = engine.grad([s], targets, allow_unused=True)
    for i, x in enumerate(targets):
        a = x._data
        num = np.zeros(a.shape, dtype=np.float64)
        for idx in np.ndindex(*a.shape):
            old = a[idx]
            a[idx] = old + eps
            hi = contract(_first_grads(func, inputs, targets, v, False))
            a[idx] = old - eps
            lo = contract(_first_grads(func, inputs, targets, v, False))
            a[idx] = old
            hi = 0.0 if hi is None else float(hi.numpy())
            lo = 0.0 if lo is None else float(lo.numpy())
            num[idx] = (hi - lo) / (2 * eps)
        an = np.zeros_like(num) if analytic[i] is None else analytic[i].numpy()
        if not np.allclose(an, num, atol=atol, rtol=rtol):
            problems.append(f"second derivative of input {i} differs from central differences (max abs error "
                            f"{np.abs(an - num).max():.3g})\nanalytic:\n{an}\nnumeric:\n{num}")
    if problems:
        if raise_exception:
            raise AssertionError("ddg.gradgradcheck: " + "\n".join(problems))
        return False
    return True
