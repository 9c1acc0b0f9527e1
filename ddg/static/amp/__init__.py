"""``ddg.static.amp``: the names of Paddle's static-graph mixed precision that dygraph code
touches. In dygraph, Paddle's ``fp16_guard``/``bf16_guard`` only open a name scope: a model
whose ``forward`` uses one computes exactly as without it, and so it does here.
``AutoMixedPrecisionLists`` (alias ``CustomOpLists``) and ``bf16.AutoMixedPrecisionListsBF16``
hold Paddle 3.3.1's static op lists (op type names) with the custom lists applied, and
``decorate`` wraps an optimizer as Paddle's ``OptimizerWithMixedPrecision`` does, keeping
the loss-scaling settings; in dygraph without ``ddg.amp.auto_cast`` its updates are those
of the optimizer it wraps (scaling a float32 loss and unscaling its gradients is exact
only up to rounding, so the wrapper does neither).

The lists have no ``unsupported_list`` of ops without a float16 kernel (Paddle's depends
on the device's kernels): it is empty.
"""
import contextlib

from ..program import name_scope
from . import bf16  # noqa: F401
from .decorator import OptimizerWithMixedPrecision, decorate
from .fp16_lists import AutoMixedPrecisionLists, CustomOpLists

__all__ = ["AutoMixedPrecisionLists", "CustomOpLists", "fp16_guard", "decorate", "bf16",
           "OptimizerWithMixedPrecision"]


@contextlib.contextmanager
def fp16_guard():
    """Marks the ops built inside for float16 in a static program (``use_fp16_guard``); in
    dygraph a name scope that changes nothing, as in Paddle."""
    with name_scope(prefix="__use_fp16__"):
        yield
