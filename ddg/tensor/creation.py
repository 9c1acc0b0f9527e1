"""Creating tensors: from data, filled, ranges and random numbers.

Python floats become the default float dtype (float32) and Python ints int64, as in
Paddle; numpy arrays keep their dtype. Random numbers come from one global generator
per backend, reseeded by ``ddg.seed``. The PyTorch spellings of the two-layer tutorial
(shape as varargs, ``device=``, ``requires_grad=``) are accepted too.
"""
import numpy as np

from . import backend
from .dtypes import convert_dtype, default_float
from .place import move_array, parse_place
from .tensor import Tensor, _as_array  # noqa: F401  (_as_array: ddg.jit.serialize imports it from here)


def _place_arg(place, device):
    return parse_place(device if place is None else place)


def _make(arr, place=None, device=None, stop_gradient=True, requires_grad=None):
    pl = _place_arg(place, device)
    arr = move_array(arr, pl)
    t = Tensor._wrap(arr, True)
    sg = stop_gradient if requires_grad is None else not requires_grad
    if not sg:
        t._set_stop_gradient(False)
    return t


def to_tensor(data, dtype=None, place=None, stop_gradient=True):
    """A new Tensor holding a copy of ``data`` (list, number, numpy/cupy array, Tensor,
    or any DLPack producer)."""
    t = Tensor._wrap(_as_array(data, dtype, place), True)
    if not stop_gradient:
        t._set_stop_gradient(False)
    return t


def from_dlpack(obj):
    """A Tensor sharing memory with a DLPack producer or capsule (numpy, cupy, torch...)."""
    from ..utils.dlpack import from_dlpack as _f
    return _f(obj)


def _shape(shape, more=(), op="creation"):
    """A creation call's shape as a tuple of ints; a ValueError naming ``op`` for anything but
    non-negative integers (numpy's own messages named neither the call nor the shape)."""
    if more:  # torch style: zeros(2, 3)
        shape = (shape,) + tuple(more)
    if isinstance(shape, Tensor):
        shape = shape.tolist()
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(s.item() if isinstance(s, Tensor) else s for s in shape)
        out = tuple(int(s) for s in dims)
    except (TypeError, ValueError):
        raise ValueError(f"ddg.{op}: shape must be a list of integers, got {shape!r}") from None
    if any(o < 0 or o != d for o, d in zip(out, dims)):
        raise ValueError(f"ddg.{op}: shape must be non-negative integers, got {list(dims)}")
    return out


def _shape_dtype(shape, more, dtype, op):
    """The shape and dtype of a creation call: Paddle's ``zeros([2, 3], 'int64')`` passes
    the dtype (and the name) positionally after a list shape; PyTorch's ``zeros(2, 3)``
    passes the sizes as varargs after an int."""
    if more and not isinstance(shape, (int, np.integer)):
        if len(more) > 2:
            raise TypeError(f"ddg.{op}: takes (shape, dtype=None, name=None), got {1 + len(more)} positional "
                            f"arguments")
        if dtype is not None:
            raise TypeError(f"ddg.{op}: dtype given twice ({more[0]!r} and {dtype!r})")
        return _shape(shape, op=op), more[0]
    return _shape(shape, more, op), dtype


def _float_dtype(dtype):
    d = convert_dtype(dtype)
    return default_float() if d is None else d


def _xp_for(place, device):
    pl = _place_arg(place, device)
    return (backend.cupy_module() if pl.kind == "gpu" else np), pl


def _filled(shape, value, dtype, place, device, stop_gradient, requires_grad):
    xp, pl = _xp_for(place, device)
    if pl.kind == "gpu":
        with xp.cuda.Device(pl.index):
            arr = xp.full(shape, value, dtype=dtype)
    else:
        arr = np.full(shape, value, dtype=dtype)
    return _make(arr, pl, None, stop_gradient, requires_grad)


def zeros(shape, *more, dtype=None, name=None, place=None, device=None, requires_grad=None, stop_gradient=True):
    shape, dtype = _shape_dtype(shape, more, dtype, "zeros")
    return _filled(shape, 0, _float_dtype(dtype), place, device, stop_gradient, requires_grad)


def ones(shape, *more, dtype=None, name=None, place=None, device=None, requires_grad=None, stop_gradient=True):
    shape, dtype = _shape_dtype(shape, more, dtype, "ones")
    return _filled(shape, 1, _float_dtype(dtype), place, device, stop_gradient, requires_grad)


def full(shape, fill_value, dtype=None, name=None, place=None, device=None, requires_grad=None,
         stop_gradient=True):
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if dtype is None:  # Paddle: bools stay bool, every other number takes the default float dtype
        dtype = np.dtype("bool") if isinstance(fill_value, (bool, np.bool_)) else default_float()
    return _filled(_shape(shape, op="full"), fill_value, convert_dtype(dtype), place, device, stop_gradient,
                   requires_grad)


def _like(x, value, dtype):
    d = x.dtype if dtype is None else convert_dtype(dtype)
    xp = backend.get_array_module(x._data)
    return Tensor._wrap(xp.full(x._data.shape, value, dtype=d))


def zeros_like(x, dtype=None, name=None):
    return _like(x, 0, dtype)


def ones_like(x, dtype=None, name=None):
    return _like(x, 1, dtype)


def full_like(x, fill_value, dtype=None, name=None):
    return _like(x, fill_value, dtype)


def empty(shape, *more, dtype=None, name=None):
    shape, dtype = _shape_dtype(shape, more, dtype, "empty")
    return zeros(shape, dtype=dtype)


def empty_like(x, dtype=None, name=None):
    return _like(x, 0, dtype)


def arange(start=0, end=None, step=1, dtype=None, name=None, place=None, device=None):
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if vals[2] == 0:
        raise ValueError(f"ddg.arange: step must not be 0 (start={vals[0]}, end={vals[1]})")
    if dtype is None:
        dtype = "int64" if all(isinstance(v, (int, np.integer)) for v in vals) else default_float()
    return _make(np.arange(*vals, dtype=convert_dtype(dtype)), place, device)


def linspace(start, stop, num, dtype=None, name=None, place=None, device=None):
    return _make(np.linspace(start, stop, int(num), dtype=_float_dtype(dtype)), place, device)


def eye(num_rows, num_columns=None, dtype=None, name=None, place=None, device=None):
    return _make(np.eye(num_rows, num_columns, dtype=_float_dtype(dtype)), place, device)


# -- random -------------------------------------------------------------------------
def seed(seed):
    """Seed the global generators: the same seed gives the same numbers."""
    backend.seed(seed)
    return seed


def _random(shape, dtype, place, device, stop_gradient, requires_grad, draw):
    xp, pl = _xp_for(place, device)
    dtype = _float_dtype(dtype)
    if pl.kind == "gpu":
        with xp.cuda.Device(pl.index):
            arr = draw(backend.rng(xp), shape).astype(dtype, copy=False)
    else:
        arr = draw(backend.rng(np), shape).astype(dtype, copy=False)
    return _make(arr, pl, None, stop_gradient, requires_grad)


def rand(shape, *more, dtype=None, name=None, place=None, device=None, requires_grad=None, stop_gradient=True):
    """Uniform numbers in [0, 1)."""
    shape, dtype = _shape_dtype(shape, more, dtype, "rand")
    return _random(shape, dtype, place, device, stop_gradient, requires_grad,
                   backend.draw_uniform)


def randn(shape, *more, dtype=None, name=None, place=None, device=None, requires_grad=None, stop_gradient=True):
    """Standard normal numbers."""
    shape, dtype = _shape_dtype(shape, more, dtype, "randn")
    return _random(shape, dtype, place, device, stop_gradient, requires_grad,
                   lambda g, s: g.standard_normal(s))


def uniform(shape, dtype=None, min=0.0, max=1.0, seed=0, name=None, place=None, device=None):
    """Uniform numbers in [min, max). Paddle 3 changed the default ``min`` from -1 to 0;
    ddg follows 3.x."""
    return _random(_shape(shape, op="uniform"), dtype, place, device, True, None,
                   lambda g, s: g.uniform(min, max, s))


def normal(mean=0.0, std=1.0, shape=None, name=None, place=None, device=None):
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        m = mean.numpy() if isinstance(mean, Tensor) else mean
        s = std.numpy() if isinstance(std, Tensor) else std
        shape = np.broadcast(np.asarray(m), np.asarray(s)).shape
        return _random(shape, None, place, device, True, None, lambda g, sh: g.normal(m, s, sh))
    return _random(_shape([1] if shape is None else shape, op="normal"), None, place, device, True, None,
                   lambda g, sh: g.normal(mean, std, sh))


def randint(low=0, high=None, shape=(1,), dtype=None, name=None, place=None, device=None):
    if high is None:
        low, high = 0, low
    xp, pl = _xp_for(place, device)
    arr = backend.rng(np).integers(low, high, size=_shape(shape, op="randint")).astype(convert_dtype(dtype) or np.int64)
    return _make(arr, pl)


def randperm(n, dtype="int64", name=None):
    return _make(backend.rng(np).permutation(int(n)).astype(convert_dtype(dtype)))


def bernoulli(x, name=None):
    xp = backend.get_array_module(x._data)
    return Tensor._wrap((backend.draw_uniform(backend.rng(xp), x._data.shape) < x._data).astype(x.dtype))


def multinomial(x, num_samples=1, replacement=False, name=None):
    """``num_samples`` category indices (int64) per row of the probabilities (or weights)
    ``x``; without ``replacement`` each row's draws are distinct."""
    if x.ndim not in (1, 2):
        raise ValueError(f"ddg.multinomial: x must be 1-D or 2-D, got shape {x.shape}")
    p = backend.to_host(x._data).astype(np.float64)
    rows = p.reshape(1, -1) if p.ndim == 1 else p
    if (rows < 0).any() or not np.isfinite(rows).all():
        raise ValueError("ddg.multinomial: probabilities must be finite and non-negative")
    n = int(num_samples)
    gen = backend.rng(np)
    out = []
    for r in rows:
        total = r.sum()
        if total <= 0:
            raise ValueError("ddg.multinomial: a row of probabilities sums to 0")
        if not replacement and n > int((r > 0).sum()):
            raise ValueError(f"ddg.multinomial: {n} samples without replacement from {int((r > 0).sum())} "
                             f"categories of nonzero probability")
        out.append(gen.choice(len(r), size=n, replace=bool(replacement), p=r / total))
    res = np.asarray(out, dtype=np.int64)
    return _make(res[0] if x.ndim == 1 else res, place=x.place)
