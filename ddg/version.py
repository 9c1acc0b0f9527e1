"""``ddg.version``: Paddle's ``paddle.version`` module for ddg: the version strings, and
what this build was compiled with (ddg compiles nothing: CUDA comes from cupy at run time)."""
import sys

# the package's own __version__ (ddg/__init__.py has run before any ddg.x is imported;
# read from sys.modules so that this module does not import the package back)
full_version = sys.modules[__name__.rpartition(".")[0]].__version__

major, minor, patch = (full_version.split(".") + ["0", "0"])[:3]
rc = "0"
istaged = is_tagged = True
commit = "unknown"
with_mkl = "OFF"
cuda_version = cudnn_version = nccl_version = "False"
xpu_version = "False"


def show():
    """Print the version, as Paddle's ``paddle.version.show()`` does."""
    print(f"full_version: {full_version}\nmajor: {major}\nminor: {minor}\npatch: {patch}\nrc: {rc}\n"
          f"cuda: {cuda()}\ncudnn: {cudnn()}\nnccl: {nccl()}")


def _cupy_cuda():
    from .tensor import backend
    if not backend.cupy_available():
        return None
    import cupy
    v = cupy.cuda.runtime.runtimeGetVersion()
    return f"{v // 1000}.{(v % 1000) // 10}"


def cuda():
    """The CUDA runtime version cupy uses (``'False'`` without a usable GPU), as a string."""
    return _cupy_cuda() or "False"


def cudnn():
    """ddg does not use cuDNN: ``'False'``."""
    return "False"


def nccl():
    """The NCCL version cupy provides (``'0'`` without one), as Paddle reports it."""
    from .parallel.comm import nccl_available
    if not nccl_available():
        return "0"
    from cupy.cuda import nccl as _nccl
    return str(_nccl.get_version())


def xpu():
    return "False"


def mkl():
    return with_mkl
