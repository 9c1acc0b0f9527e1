"""``ddg.static``: the Paddle names of static-graph mode that ddg supports.

ddg has no separate static-graph executor: ``ddg.jit.to_static`` records eager code
and replays it. ``InputSpec`` describes an input (shape with ``None``/-1 for any
size, dtype, name) for ``to_static`` and ``ddg.jit.save``. The names dygraph code
touches (``Program``, ``Block``, ``Variable``, ``default_main_program``, ``program_guard``,
``name_scope``, ``amp``) behave as they do in Paddle's dygraph mode (``program.py``,
``amp/``)."""
import numpy as np

from ..tensor.dtypes import convert_dtype
from . import amp  # noqa: F401
from .program import (Block, Program, Variable, default_main_program, default_startup_program, name_scope,
                      program_guard)

__all__ = ["InputSpec", "Block", "Program", "Variable", "default_main_program", "default_startup_program",
           "name_scope", "program_guard", "amp"]


class InputSpec:
    """``InputSpec(shape, dtype='float32', name=None)``: ``None`` or -1 in ``shape``
    means any size (the batch dimension, typically)."""

    def __init__(self, shape, dtype="float32", name=None, stop_gradient=True):
        if isinstance(shape, int):
            shape = [shape]
        try:
            dims = [None if d is None or int(d) == -1 else int(d) for d in shape]
        except (TypeError, ValueError):
            raise TypeError(f"ddg.static.InputSpec: shape must be a list of ints or None, got {shape!r}") from None
        if any(d is not None and d < 0 for d in dims):
            raise ValueError(f"ddg.static.InputSpec: negative size in shape {list(shape)} (use None or -1 for "
                             f"'any size')")
        self.shape = tuple(dims)
        self.dtype = np.dtype(convert_dtype(dtype))
        self.name = name
        self.stop_gradient = stop_gradient

    @classmethod
    def from_tensor(cls, tensor, name=None):
        return cls(tensor.shape, tensor.dtype, name)

    @classmethod
    def from_numpy(cls, ndarray, name=None):
        return cls(ndarray.shape, ndarray.dtype, name)

    def batch(self, batch_size):
        return InputSpec([batch_size] + list(self.shape), self.dtype, self.name)

    def unbatch(self):
        return InputSpec(list(self.shape[1:]), self.dtype, self.name)

    def _matches(self, t):
        shape = t._data.shape
        if len(shape) != len(self.shape) or t._data.dtype != self.dtype:
            return False
        return all(d is None or d == n for d, n in zip(self.shape, shape))

    def __eq__(self, other):
        return isinstance(other, InputSpec) and (self.shape, self.dtype, self.name) == \
            (other.shape, other.dtype, other.name)

    def __hash__(self):
        return hash((self.shape, self.dtype.str, self.name))

    def __repr__(self):
        return f"InputSpec(shape={list(self.shape)}, dtype={self.dtype}, name={self.name})"
