"""``ddg.device``: Paddle's device module, and callable like ``torch.device``."""
import sys

from .tensor.place import (CPUPlace, CUDAPlace, Place, _DeviceModule, get_device,  # noqa: F401
                           is_compiled_with_cuda, set_device)
from .tensor import backend as _backend


def cuda_device_count():
    return _backend.cuda_device_count()


def synchronize(device=None):
    _backend.synchronize()


sys.modules[__name__].__class__ = _DeviceModule
