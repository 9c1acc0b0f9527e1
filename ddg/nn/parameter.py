"""Parameters: leaf tensors that a Layer owns and an optimizer updates."""
import itertools

import numpy as np

from ..tensor.creation import _shape
from ..tensor.dtypes import convert_dtype, default_float
from ..tensor.place import current_place, move_array
from ..static.program import default_main_program
from ..tensor.tensor import Tensor
from . import initializer as init
from .param_attr import ParamAttr

_counter = itertools.count()


class Parameter(Tensor):
    """A trainable tensor (``stop_gradient=False`` unless ``trainable=False``)."""

    def __init__(self, data, trainable=True, name=None, attr=None):
        arr = data._data if isinstance(data, Tensor) else data
        Tensor.__init__(self, arr, stop_gradient=True)
        self._data = arr
        self.name = name or f"param_{next(_counter)}"
        self.persistable = True
        self.optimize_attr = {"learning_rate": 1.0 if attr is None else attr.learning_rate}
        self.regularizer = None if attr is None else attr.regularizer
        self.need_clip = True if attr is None else attr.need_clip
        self.do_model_average = True if attr is None else attr.do_model_average
        self.is_distributed = False
        self.trainable = trainable

    @property
    def block(self):
        """The global block of the default program (Paddle's dygraph parameters have one;
        initializers accept it as their second argument and ignore it)."""
        return default_main_program().global_block()

    @property
    def trainable(self):
        return not self.stop_gradient

    @trainable.setter
    def trainable(self, value):
        self._set_stop_gradient(not value)

    def clear_grad(self, set_to_zero=True):
        """Zero the gradient in place (or drop it), and forget the rows that sparse embedding
        lookups recorded for lazy optimizer updates."""
        self.__dict__.pop("_sparse_rows", None)
        Tensor.clear_grad(self, set_to_zero)

    clear_gradient = clear_grad

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        p = Parameter(self._data.copy(), trainable=self.trainable, name=self.name)
        p.optimize_attr = dict(self.optimize_attr)
        p.regularizer, p.need_clip = self.regularizer, self.need_clip
        p.do_model_average, p.is_distributed = self.do_model_average, self.is_distributed
        memo[id(self)] = p
        return p


def create_parameter(shape, dtype=None, attr=None, is_bias=False, default_initializer=None, name=None,
                     op="create_parameter"):
    """A new Parameter of ``shape``, initialized by ``attr.initializer``, else
    ``default_initializer``, else Paddle's defaults (Xavier uniform; zeros for biases). A
    negative or fractional size is a ValueError naming ``op`` (a layer passes its own name)."""
    attr = ParamAttr._to_attr(attr)
    if attr is False:
        return None
    dtype = convert_dtype(dtype) or default_float()
    shape = list(_shape(shape, op=op))
    p = Parameter(move_array(np.zeros(shape, dtype=dtype), current_place()), trainable=attr.trainable,
                  name=attr.name or name, attr=attr)
    initializer = attr.initializer or init._global_initializer(is_bias) or default_initializer or (
        init.Constant(0.0) if is_bias else init.XavierUniform())
    initializer(p)
    return p

