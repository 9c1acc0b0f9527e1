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
                              uniform, normal, seed, bernoulli, from_dlpack)
from .tensor.printing import set_printoptions  # noqa: F401
from .autograd.engine import grad  # noqa: F401
from .autograd.grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled  # noqa: F401
from . import device  # noqa: F401  (callable: ddg.device('cpu'))
from .flags import set_flags, get_flags  # noqa: F401
from . import io as _io  # imported eagerly: it is light, and the hook below must sit on it

from .autograd import tensor_table as _tensor_table  # noqa: E402

_tensor_table.install()  # Tensor's methods, in-place forms and operators
globals().update(_tensor_table.exports())  # ddg.exp, ddg.exp_... (the table's function forms)


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
