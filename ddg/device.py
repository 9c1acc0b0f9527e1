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


#: Paddle's ``paddle.device.cuda``: GPU count, synchronization and the memory pool.
cuda = types.SimpleNamespace(
    device_count=cuda_device_count,
    synchronize=synchronize,
    empty_cache=_backend.release_memory_pool,
    memory_allocated=lambda device=None: _backend.memory_pool_bytes()[0],
    memory_reserved=lambda device=None: _backend.memory_pool_bytes()[1],
)

sys.modules[__name__].__class__ = _DeviceModule
