"""Mixed precision with Paddle 2.x's ``paddle.amp`` API: ``auto_cast`` (ops cast at
dispatch: white list in float16/bfloat16, black list in float32, the rest promoted),
``decorate`` (O2: low-precision parameters with float32 master weights in the
optimizer), ``GradScaler`` (dynamic loss scaling; skips steps whose gradients overflow,
in agreement over all ranks). It works on the CPU (numpy) as well as on GPUs."""
from . import amp_lists  # noqa: F401
from .amp_lists import black_list, white_list  # noqa: F401
from .auto_cast import (amp_decorate, amp_guard, auto_cast, autocast, decorate, get_autocast_cpu_dtype,
                        get_autocast_dtype, get_autocast_gpu_dtype, is_autocast_enabled, is_bfloat16_supported,
                        is_float16_supported)  # noqa: F401
from .grad_scaler import AmpScaler, GradScaler, OptimizerState  # noqa: F401

__all__ = ["auto_cast", "GradScaler", "decorate", "is_float16_supported", "is_bfloat16_supported",
           "is_autocast_enabled", "get_autocast_dtype", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype"]
