"""DLPack exchange: numpy, cupy and torch tensors share memory with ddg Tensors."""
import ctypes

from ..tensor import backend
from ..tensor.dtypes import bfloat16
from ..tensor.tensor import Tensor


def to_dlpack(x):
    """A DLPack capsule for ``x``'s memory."""
    if x._data.dtype == bfloat16 and not backend.is_gpu_array(x._data):
        raise TypeError(f"ddg.utils.dlpack.to_dlpack: numpy cannot export bfloat16 through DLPack (tensor of shape "
                        f"{list(x._data.shape)}); cast it (x.astype('float32')) or share its bits "
                        f"(x.numpy().view('uint16'))")
    return x._data.__dlpack__()


class _Capsule:
    """Wrap a raw capsule so numpy/cupy ``from_dlpack`` (which want a producer) accept it."""

    def __init__(self, capsule):
        self.capsule = capsule
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype = ctypes.c_void_p
        get.argtypes = [ctypes.py_object, ctypes.c_char_p]
        ptr = get(capsule, b"dltensor")
        # DLTensor starts with: void* data; int32 device_type; int32 device_id
        self.device = (ctypes.c_int32.from_address(ptr + 8).value, ctypes.c_int32.from_address(ptr + 12).value)

    def __dlpack__(self, stream=None, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def from_dlpack(obj):
    """A Tensor sharing memory with ``obj``: a DLPack producer (numpy, cupy, torch...) or capsule."""
    if type(obj).__name__ == "PyCapsule":
        obj = _Capsule(obj)
    return Tensor._wrap(backend.from_dlpack_any(obj))
