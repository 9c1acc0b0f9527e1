"""ddg: a data-parallel eager deep-learning runtime on numpy/cupy and MPI, with the
PaddlePaddle 2.x dygraph API (``import ddg as paddle``)."""
__version__ = "0.1.0"

import importlib as _importlib

from . import _malloc  # noqa: F401  (allocator tuning at import, see the module)
from .tensor import backend as _backend
from .tensor.tensor import Tensor
from .tensor.dtypes import (float16, bfloat16, float32, float64, int8, uint8, int16, int32, int64,  # noqa: F401
                            bool_ as bool, set_default_dtype, get_default_dtype)
from .tensor.place import (CPUPlace, CUDAPlace, Place, set_device, get_device,  # noqa: F401
                           is_compiled_with_cuda)
from .tensor.creation import (to_tensor, zeros, ones, full, zeros_like, ones_like, full_like,  # noqa: F401
                              empty, empty_like, arange, linspace, eye, rand, randn, randint, randperm,
                              uniform, normal, seed, bernoulli, from_dlpack, multinomial)
from .tensor.printing import set_printoptions  # noqa: F401
from .autograd import methods as _methods
from .autograd.engine import grad  # noqa: F401
from .autograd.grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled  # noqa: F401
from .autograd.ops.elementwise import (add, subtract, multiply, divide, pow, maximum, minimum,  # noqa: F401
                                       floor_divide, remainder, mod, floor_mod, neg, abs, exp, log, log1p,
                                       sqrt, rsqrt, square, sin, cos, tanh, sigmoid, erf, clip, clamp, sign,
                                       floor, ceil, round, cast, where, tan, asin, acos, atan, sinh, cosh,
                                       asinh, acosh, atanh, log2, log10, expm1, reciprocal, trunc)
from .autograd.ops.logic import (equal, not_equal, less_than, less_equal, greater_than,  # noqa: F401
                                 greater_equal, logical_and, logical_or, logical_xor, logical_not,
                                 bitwise_and, bitwise_or, bitwise_xor, bitwise_not, isnan, isinf,
                                 isfinite, equal_all, allclose, isclose, nonzero)
from .autograd.ops.reduce import (sum, mean, max, min, amax, amin, prod, argmax, argmin,  # noqa: F401
                                  logsumexp, all, any, cumsum, cumprod)
from .autograd.ops.linalg import matmul, mm, bmm, inverse, einsum  # noqa: F401
from .autograd.ops.movement import (reshape, transpose, flatten, squeeze, unsqueeze, broadcast_to,  # noqa: F401
                                    expand, expand_as, broadcast_tensors, concat, cat, stack, split, chunk,
                                    unbind, tile, gather, index_select, take_along_axis, flip, roll,
                                    masked_select, moveaxis, numel, shape, clone, scatter, scatter_nd_add,
                                    put_along_axis)
from .autograd.composite import var, std, count_nonzero, dot, outer, t, masked_fill, scale  # noqa: F401
from .autograd.composite import (sort, topk, tril, triu, diagonal, trace, diag, kron, meshgrid,  # noqa: F401
                                 add_n, nan_to_num, unstack, norm, repeat_interleave, slice, gather_nd)
from .autograd.ops.sort import argsort, unique, bincount  # noqa: F401
from .autograd.composite import assign  # noqa: F401
from .autograd.methods import detach  # noqa: F401
from . import device  # noqa: F401  (callable: ddg.device('cpu'))
from .flags import set_flags, get_flags  # noqa: F401
from . import io as _io  # imported eagerly: it is light, and the hook below must sit on it

_methods.install()

from .autograd import methods_api as _methods_api  # noqa: E402
from .autograd.composite_api import (  # noqa: E402,F401
    addmm, mv, inner, tensordot, cross, dist, cdist, deg2rad, rad2deg, frac, hypot, lerp, logaddexp, logit, stanh,
    sgn, heaviside, fmax, fmin, ldexp, frexp, nextafter, gcd, lcm, diff, trapezoid, cumulative_trapezoid,
    logcumsumexp, cummax, cummin, nansum, nanmean, kthvalue, quantile, nanquantile, median, nanmedian, mode,
    atleast_1d, atleast_2d, atleast_3d, broadcast_shape, unflatten, view, view_as, vsplit, reverse, rot90, crop,
    strided_slice, unfold, as_strided, diagflat, diag_embed, diagonal_scatter, select_scatter, index_fill,
    index_add, index_put, index_sample, take, multiplex, combinations, vander, renorm, scatter_nd, searchsorted,
    bucketize, histogram, unique_consecutive, shard_index, tril_indices, triu_indices, logspace, increment,
    is_tensor, is_complex, is_floating_point, is_integer, is_empty, rank, tolist, iinfo, finfo, poisson,
    standard_normal, randint_like, multigammaln, atan2, masked_scatter, tensor_split, isin)
from .autograd.ops.special import lgamma, digamma, polygamma, erfinv, i0, i0e, i1, i1e  # noqa: E402,F401
from .autograd.ops.fft import real, imag, conj  # noqa: E402,F401

_methods_api.install()
from . import linalg as _linalg  # noqa: E402,F401  (attaches matrix_power, multi_dot, solve to Tensor)
globals().update(_methods_api.function_forms())


def _io_getattr(name):
    # Paddle's paddle.io.DistributedBatchSampler. It lives in the parallel layer (it asks
    # for this process's rank), which sits below ddg.io, so ddg.io cannot import it; the
    # top-level package hangs it on ddg.io; ddg.parallel.sampler loads on first use.
    if name == "DistributedBatchSampler":
        from .parallel.sampler import DistributedBatchSampler
        return DistributedBatchSampler
    raise AttributeError(f"module 'ddg.io' has no attribute {name!r}")


def _io_dir():
    return sorted(set(vars(_io)) | {"DistributedBatchSampler"})


_io.__getattr__ = _io_getattr
_io.__dir__ = _io_dir

from . import parallel as _parallel  # noqa: E402,F401  (light; arms the early-failure guard under MPI)


def _job_world_size():
    # for ddg.io's DataLoader (which sits below the parallel layer): the number of ranks,
    # without starting MPI: the world communicator's size once it exists, else the launcher's
    from .parallel.comm import launcher_env, world
    if world._WORLD is not None:
        return world._WORLD.size
    if not launcher_env.launched_under_mpi():
        return 1
    return launcher_env.launcher_world_size() or 1


_io.dataloader.job_world_size[0] = _job_world_size

_LAZY = {
    "autograd": ".autograd", "nn": ".nn", "optimizer": ".optimizer", "vision": ".vision",
    "jit": ".jit", "static": ".static", "distributed": ".distributed", "parallel": ".parallel",
    "utils": ".utils", "regularizer": ".regularizer", "linalg": ".linalg",
    "metric": ".metric", "callbacks": ".callbacks", "hapi": ".hapi", "amp": ".amp",
    "version": ".version", "fft": ".fft", "distribution": ".distribution", "profiler": ".profiler",
    "text": ".text",
    "framework": ".framework", "incubate": ".incubate",
}
_LAZY_ATTRS = {
    "save": (".io.serialization", "save"), "load": (".io.serialization", "load"),
    "DataParallel": (".parallel.data_parallel", "DataParallel"),
    "ParamAttr": (".nn.param_attr", "ParamAttr"),
    "create_parameter": (".nn.layer.layers", "create_parameter_api"),
    "Model": (".hapi.model", "Model"), "summary": (".hapi.model_summary", "summary"),
    "flops": (".hapi.dynamic_flops", "flops"),
    # Paddle's top-level AMP queries
    "autocast": (".amp.auto_cast", "autocast"), "is_autocast_enabled": (".amp.auto_cast", "is_autocast_enabled"),
    "get_autocast_dtype": (".amp.auto_cast", "get_autocast_dtype"),
    "get_autocast_cpu_dtype": (".amp.auto_cast", "get_autocast_cpu_dtype"),
    "get_autocast_gpu_dtype": (".amp.auto_cast", "get_autocast_gpu_dtype"),
}


def __getattr__(name):
    if name in _LAZY:
        return _importlib.import_module(_LAZY[name], __name__)
    if name in _LAZY_ATTRS:
        mod, attr = _LAZY_ATTRS[name]
        return getattr(_importlib.import_module(mod, __name__), attr)
    raise AttributeError(f"module 'ddg' has no attribute {name!r}")


def get_rng_state():
    return _backend.get_rng_state()


def set_rng_state(state):
    _backend.set_rng_state(state)


def disable_signal_handler():
    """Paddle turns off the crash handlers of its C++ core here; ddg installs none, so there is
    nothing to turn off (its MPI fail-fast handling is Python-level and stays on)."""


def in_dynamic_mode():
    return True


def disable_static(place=None):
    if place is not None:
        set_device(place)


def enable_static():
    raise RuntimeError("ddg runs eagerly; use ddg.jit.to_static to record and replay a function")
