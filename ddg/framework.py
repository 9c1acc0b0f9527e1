"""``ddg.framework``: Paddle's ``paddle.framework`` names that dygraph code uses (model-zoo
code asks ``hasattr(paddle.framework, ...)`` or imports ``Parameter``, ``ParamAttr``,
``in_dynamic_mode`` from here). ddg is always in dynamic mode: ``in_dynamic_mode()`` is
True, the PIR queries are False, ``enable_static`` refuses with the alternative.

The static-graph internals of the same module (``IrGraph``, ``LayerHelper``,
``OpProtoHolder``, ``core``) are not here: they build and run programs, which ddg does
not have.
"""
import contextlib
import functools

import numpy as np

from .autograd.engine import grad
from .autograd.grad_mode import no_grad
from .flags import get_flags, set_flags
from .io.serialization import load, save
from .nn.param_attr import ParamAttr
from .nn.parameter import Parameter
from .static import program as _program
from .static.program import Block, Program, default_main_program, default_startup_program
from .tensor import dtypes as _dtypes
from .tensor.creation import seed
from .tensor.dtypes import get_default_dtype, set_default_dtype
from .tensor.place import CPUPlace, CUDAPlace, set_device

__all__ = ["Block", "CPUPlace", "CUDAPlace", "ParamAttr", "Parameter", "Program", "convert_np_dtype_to_dtype_",
           "disable_static", "dtype", "dygraph_not_support", "dygraph_only", "enable_static", "get_default_dtype",
           "get_flags", "grad", "in_dynamic_mode", "in_dynamic_or_pir_mode", "in_pir_executor_mode", "in_pir_mode",
           "is_parameter", "is_persistable", "load", "no_grad", "save", "seed", "set_default_dtype", "set_flags",
           "switch_main_program", "switch_startup_program", "use_pir_api", "default_main_program",
           "default_startup_program"]

dtype = np.dtype   # paddle.framework.dtype: the type of a dtype (ddg's dtypes are numpy dtypes)


def in_dynamic_mode():
    return True


def in_dynamic_or_pir_mode():
    return True


def in_pir_mode():
    return False


def in_pir_executor_mode():
    return False


def use_pir_api():
    return False


def disable_static(place=None):
    if place is not None:
        set_device(place)


def enable_static():
    raise RuntimeError("ddg.framework.enable_static: ddg runs eagerly; use ddg.jit.to_static to record and "
                       "replay a function")


def convert_np_dtype_to_dtype_(np_dtype):
    """The framework dtype of a numpy dtype (in ddg, the numpy dtype itself)."""
    return np.dtype(_dtypes.convert_dtype(np_dtype))


def is_parameter(var):
    return isinstance(var, Parameter)


def is_persistable(var):
    return bool(getattr(var, "persistable", False))


def switch_main_program(program):
    """Makes ``program`` the default main program; returns the previous one."""
    if not isinstance(program, Program):
        raise TypeError(f"ddg.framework.switch_main_program: needs a Program, got {type(program).__name__}")
    old, _program._main = _program._main, program
    return old


def switch_startup_program(program):
    if not isinstance(program, Program):
        raise TypeError(f"ddg.framework.switch_startup_program: needs a Program, got {type(program).__name__}")
    old, _program._startup = _program._startup, program
    return old


def dygraph_only(func):
    """Decorator of functions that only run in dynamic mode (always, in ddg)."""
    return func


def dygraph_not_support(func):
    """Decorator of functions that do not run in dynamic mode: calling one raises."""
    @functools.wraps(func)
    def refuse(*args, **kwargs):
        raise RuntimeError(f"ddg.framework: {func.__name__} needs static-graph mode, which ddg does not have")
    return refuse



@contextlib.contextmanager
def _no_check_dy2st_diff():
    """Paddle turns off its checks of dynamic/static behaviour differences inside; ddg has
    no static graph, so there is nothing to check (model-zoo code enters it when
    ``hasattr(paddle.framework, "_no_check_dy2st_diff")``)."""
    yield
