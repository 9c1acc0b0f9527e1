"""The array backends: numpy on the CPU, cupy on NVIDIA GPUs.

This is the only module in ddg that imports cupy. Everything else asks it for the
array module of an array (``get_array_module``) and writes one code path against
``xp``. cupy is optional: without it (or without a GPU) every function here still
works and reports that CUDA is unavailable.
"""
import os

import numpy as np

from .. import dispatch

try:  # pragma: no cover - exercised only where cupy is installed
    import cupy as _cupy
    try:
        _cuda_devices = _cupy.cuda.runtime.getDeviceCount()
    except Exception:  # cupy installed but no driver/GPU
        _cuda_devices = 0
except Exception:  # ImportError, or a broken CUDA install
    _cupy = None
    _cuda_devices = 0

#: The array classes a Tensor may hold.
if _cupy is not None:
    ARRAY_TYPES = (np.ndarray, _cupy.ndarray)
else:
    ARRAY_TYPES = (np.ndarray,)


def cupy_available():
    """True when cupy imports and sees at least one GPU."""
    return _cupy is not None and _cuda_devices > 0


def cuda_device_count():
    return _cuda_devices


def cupy_module():
    """The cupy module; a clear error when it cannot be used."""
    if not cupy_available():
        raise RuntimeError("ddg: CUDA is not available here (cupy is not installed or sees no GPU); "
                           "install ddg[gpu] on a machine with an NVIDIA GPU, or use the CPU place")
    return _cupy


def get_array_module(*arrays):
    """numpy or cupy, whichever owns the first cupy array among ``arrays``."""
    if _cupy is not None:
        for a in arrays:
            if isinstance(a, _cupy.ndarray):
                return _cupy
    return np


def broadcast_view(a, shape):
    """A read-only view of ``a`` broadcast to ``shape`` (numpy's ``broadcast_to`` goes
    through a Python-level iterator; building the strided view directly is ~5x faster,
    which matters in backward functions that run every step)."""
    if type(a) is not np.ndarray:
        return get_array_module(a).broadcast_to(a, shape)
    shape = tuple(shape)
    lead = len(shape) - a.ndim
    if lead < 0 or not a.flags.c_contiguous:
        return np.broadcast_to(a, shape)
    strides = [0] * lead
    for n_in, n_out, st in zip(a.shape, shape[lead:], a.strides):
        if n_in == n_out:
            strides.append(st)
        elif n_in == 1:
            strides.append(0)
        else:
            raise ValueError(f"cannot broadcast shape {list(a.shape)} to {list(shape)}")
    v = np.ndarray(shape, a.dtype, buffer=a, strides=strides)
    v.flags.writeable = False
    return v


def is_gpu_array(a):
    return _cupy is not None and isinstance(a, _cupy.ndarray)


def device_id_of(a):
    """-1 for host arrays, the CUDA device ordinal for cupy arrays."""
    if _cupy is not None and isinstance(a, _cupy.ndarray):
        return a.device.id
    return -1


def to_host(a):
    """A numpy array with the values of ``a`` (a device-to-host copy for cupy arrays)."""
    if _cupy is not None and isinstance(a, _cupy.ndarray):
        return _cupy.asnumpy(a)
    return np.asarray(a)


def to_device(a, device_id):
    """``a`` as a cupy array on GPU ``device_id`` (a copy unless it is already there)."""
    cp = cupy_module()
    with cp.cuda.Device(device_id):
        return cp.asarray(a)


def synchronize(device_id=None):
    """Wait for the GPU's current stream; no-op on the CPU."""
    if cupy_available():
        if device_id is None:
            _cupy.cuda.get_current_stream().synchronize()
        else:
            with _cupy.cuda.Device(device_id):
                _cupy.cuda.get_current_stream().synchronize()


def memory_pool_bytes():
    """(bytes in use, bytes held) by cupy's default memory pool; (0, 0) without cupy."""
    if not cupy_available():
        return 0, 0
    pool = _cupy.get_default_memory_pool()
    return int(pool.used_bytes()), int(pool.total_bytes())


def release_memory_pool():
    """Return the cached, unused blocks of cupy's memory pools to the driver."""
    if cupy_available():
        _cupy.get_default_memory_pool().free_all_blocks()
        _cupy.get_default_pinned_memory_pool().free_all_blocks()


def from_dlpack_any(obj):
    """Import a DLPack producer (an object with ``__dlpack__``) onto its own device."""
    dev_type = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else 1
    if dev_type in (2, 3, 13):  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
        return cupy_module().from_dlpack(obj)
    if type(obj) is np.ndarray:
        # the array itself (the same memory, as DLPack would give): numpy 1.x marks what it
        # imports through DLPack read-only, and a read-only array cannot be exported again
        return obj
    # (numpy 1.x imports other producers' buffers read-only: writing to such a tensor in
    # place, or exporting it again, raises rather than silently copying)
    return np.from_dlpack(obj)


def cupyx_module():
    """The ``cupyx`` module (``cupyx.scatter_add`` etc.); a clear error without cupy."""
    cupy_module()
    import cupyx  # pragma: no cover - GPU only
    return cupyx


_cudnn_cache = []


def cudnn_module():
    """cupy's cuDNN wrappers (a namespace with ``cupy.cudnn``'s ``convolution_forward``,
    ``convolution_backward_data/filter``, ``pooling_forward/backward``, plus ``module``
    = ``cupy.cudnn`` and ``lib`` = the constants module) or None when they
    cannot be used: no GPU, a cupy built without cuDNN or without the cuDNN library
    (``cupy.cuda.cudnn_enabled`` is False, or importing ``cupy.cudnn`` fails: CuPy 14
    removed it, so only CuPy <= 13 with the cuDNN library gets here), or the
    environment variable ``DDG_CUDNN=0``. Callers fall back to the im2col kernels.
    The result is computed once and cached."""
    if not _cudnn_cache:
        _cudnn_cache.append(_load_cudnn())
    return _cudnn_cache[0]


def _load_cudnn():
    import os
    if not cupy_available() or os.environ.get("DDG_CUDNN", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    try:  # pragma: no cover - GPU only
        if not getattr(_cupy.cuda, "cudnn_enabled", True):
            return None
        import cupy.cudnn as mod
        try:  # where the cuDNN constants live: cupy >= 9, then older releases
            from cupy_backends.cuda.libs import cudnn as lib
        except ImportError:
            from cupy.cuda import cudnn as lib
        import types
        names = ("convolution_forward", "convolution_backward_data", "convolution_backward_filter",
                 "pooling_forward", "pooling_backward")
        if not all(hasattr(mod, n) for n in names):
            return None
        ns = types.SimpleNamespace(**{n: getattr(mod, n) for n in names})
        ns.module, ns.lib = mod, lib
        return ns
    except Exception:  # ImportError, or the cuDNN shared library is missing / unloadable
        return None


def nccl_module():
    """``cupy.cuda.nccl`` (NCCL through cupy), or None without a GPU or a cupy built
    without NCCL (``cupy.cuda.nccl_enabled`` False / the import fails)."""
    if not cupy_available():
        return None
    try:  # pragma: no cover - GPU only
        if not getattr(_cupy.cuda, "nccl_enabled", True):
            return None
        from cupy.cuda import nccl
        return nccl if hasattr(nccl, "NcclCommunicator") else None
    except Exception:
        return None


def erf(xp, a):
    """The error function on either backend (scipy where available, else a vectorized
    approximation: ``ddg.tensor.kernels.erf``)."""
    from .kernels import erf as _erf
    return _erf(xp, a)


# ---------------------------------------------------------------------------
# Random numbers: one global generator per backend. Until ``ddg.seed`` is called, each
# process starts from a fresh seed drawn from the operating system (as Paddle, PyTorch and
# numpy do), so ranks and runs differ; ``ddg.seed(n)`` makes them repeat. The environment
# variable ``DDG_SEED`` (an integer >= 0) replaces the drawn start seed, so an unchanged
# program that never calls ``ddg.seed`` can be rerun with the same numbers.
def _os_seed():
    """A fresh 63-bit seed from the operating system's entropy."""
    return int.from_bytes(os.urandom(8), "little") >> 1


def _start_seed():
    """``DDG_SEED`` when set, else a seed from the operating system."""
    text = os.environ.get("DDG_SEED", "").strip()
    if not text:
        return _os_seed()
    try:
        return _check_seed(int(text))
    except ValueError:
        raise ValueError(f"DDG_SEED must be an integer >= 0, got {text!r}") from None


def _check_seed(n):
    if not isinstance(n, (int, float, np.integer, np.floating)):
        raise TypeError(f"ddg.seed: the seed must be an int, got {type(n).__name__} {n!r}")
    n = int(n)
    if n < 0:
        raise ValueError(f"ddg.seed: the seed must be >= 0, got {n}")
    return n


_seed_value = [_start_seed()]
_np_rng = np.random.default_rng(_seed_value[0])


def seed(n):
    """Reseed every generator of this process with ``n`` (numpy, and cupy where present)."""
    global _np_rng
    n = _check_seed(n)
    _seed_value[0] = n
    _np_rng = np.random.default_rng(n)
    if cupy_available():
        _cupy.random.seed(n)


def initial_seed():
    """The seed of the latest ``ddg.seed``; before any, the seed this process drew from the
    operating system at start-up."""
    return _seed_value[0]


def seed_host(n):
    """Reseed the numpy generator only (a DataLoader worker process must not touch the GPU)."""
    global _np_rng
    _seed_value[0] = int(n)
    _np_rng = np.random.default_rng(int(n))


_rng_observer = dispatch.RNG_OBSERVER  # an interception slot (ddg/dispatch.py)


def rng(xp=np):
    """The global generator for ``xp``: numpy.random.Generator or cupy's RandomState.
    Inside :func:`observe_rng` the numpy generator comes wrapped, reporting each draw."""
    if xp is np:
        obs = _rng_observer[0]
        return _np_rng if obs is None else _ObservedGenerator(_np_rng, obs)
    return xp.random.get_random_state()  # pragma: no cover


class _ObservedGenerator:
    """The numpy generator, with every method call reported to an observer after it ran."""
    __slots__ = ("_gen", "_observer")

    def __init__(self, gen, observer):
        self._gen, self._observer = gen, observer

    def __getattr__(self, name):
        attr = getattr(self._gen, name)
        if not callable(attr):
            return attr
        observer = self._observer

        def draw(*args, **kwargs):
            out = attr(*args, **kwargs)
            observer(name, args, kwargs, out)
            return out
        return draw


class observe_rng:
    """Context manager: while active, every call made on the numpy generator handed out by
    :func:`rng` (``rng().normal(...)``, ``rng().permutation(...)``...) is reported as
    ``observer(method_name, args, kwargs, result)`` right after it ran. The numbers drawn
    are exactly those drawn without an observer. ``ddg.jit.to_static`` records random
    draws this way. Observers do not nest: entering a second one raises RuntimeError."""

    def __init__(self, observer):
        self.observer = observer

    def __enter__(self):
        if _rng_observer[0] is not None:
            raise RuntimeError("ddg: a random-number observer is already active")
        self._prev = dispatch.install(_rng_observer, self.observer)
        return self

    def __exit__(self, *exc):
        dispatch.restore(_rng_observer, self._prev)
        return False


def draw_uniform(g, shape, dtype=np.float64):
    """Uniform [0, 1) numbers from generator ``g`` (from :func:`rng`): numpy's Generator
    calls this ``random`` (and so does ddg.jit's recording proxy for it), cupy's
    RandomState ``random_sample``."""
    draw = g.random if hasattr(g, "random") else g.random_sample
    return draw(shape, dtype=dtype)


def get_rng_state():
    return {"numpy": _np_rng.bit_generator.state, "seed": _seed_value[0]}


def set_rng_state(state):
    _np_rng.bit_generator.state = state["numpy"]
    _seed_value[0] = state.get("seed", 0)
