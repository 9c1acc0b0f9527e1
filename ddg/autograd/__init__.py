"""Automatic differentiation: Function, the engine, grad modes, PyLayer, gradcheck."""
from .engine import (backward, grad, queue_callback, register_backward_begin_callback,  # noqa: F401
                     register_backward_complete_callback)
from .function import Function, sum_to  # noqa: F401
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401
from .gradcheck import gradcheck, gradgradcheck  # noqa: F401
from .pylayer import PyLayer, PyLayerContext  # noqa: F401
from .saved_tensors_hooks import saved_tensors_hooks  # noqa: F401
from .derivatives import Hessian, Jacobian, hessian, jacobian  # noqa: F401
