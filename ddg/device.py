"""``ddg.device``: Paddle's device module, and callable like ``torch.device``."""
import sys
import types

from .tensor.place import (CPUPlace, CUDAPlace, Place, _DeviceModule, get_device,  # noqa: F401
                           is_compiled_with_cuda, set_device)
from .tensor import backend as _backend


def cuda_device_count():
    return _backend.cuda_device_count()


def synchronize(device=None):
    _backend.synchronize()


def get_all_custom_device_type():
    """Paddle's plug-in device types (NPU, MLU...): ddg has none."""
    return []


def is_compiled_with_custom_device(device_type):
    return False


def get_device_capability(device=None):
    """``(major, minor)`` compute capability of a GPU (the current one by default)."""
    if not _backend.cupy_available():
        raise ValueError("ddg.device.cuda.get_device_capability: no GPU is available (cupy sees none)")
    index = device if isinstance(device, int) else getattr(device, "index", None) or 0
    cc = _backend._cupy.cuda.Device(index).compute_capability
    return int(cc[:-1]), int(cc[-1])


#: Paddle's ``paddle.device.cuda``: GPU count, synchronization and the memory pool.
cuda = types.SimpleNamespace(
    device_count=cuda_device_count,
    synchronize=synchronize,
    get_device_capability=get_device_capability,
    empty_cache=_backend.release_memory_pool,
    memory_allocated=lambda device=None: _backend.memory_pool_bytes()[0],
    memory_reserved=lambda device=None: _backend.memory_pool_bytes()[1],
)

sys.modules[__name__].__class__ = _DeviceModule
