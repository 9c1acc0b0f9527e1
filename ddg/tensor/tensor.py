"""The Tensor: an array (numpy or cupy), whether it needs a gradient, and where it
came from in the recorded graph.

Ops, operators and the methods that need them (``backward``, ``astype``, ``to``...)
are attached to this class by ``ddg.autograd.tensor_table.install()``, from the table of
the Tensor API: ddg/tensor sits above ddg/autograd in the package's layering, so this
module imports nothing from there.
"""
import numpy as np

from .. import dispatch
from . import backend
from .dtypes import convert_dtype, default_float
from .place import current_place, move_array, parse_place, place_of
from .printing import tensor_repr

_ARRAY_TYPES = backend.ARRAY_TYPES

#: ddg.jit's watch slot (an interception slot of ddg/dispatch.py). While ``to_static`` records, it holds a callable
#: ``watch(tensor, what, value)`` that the methods below call whenever a tensor's values
#: reach Python (``what`` = "item", "numpy", "bool"...) or are written in place outside
#: an op ("setitem", "add_"..., "set_value" with ``value`` the new value), so that the
#: recording can refuse what it cannot replay. None otherwise: one list read per call.
_watch = dispatch.WATCH


class Tensor:
    """An n-dimensional array that can take part in automatic differentiation.

    ``stop_gradient`` (Paddle) is True for tensors that need no gradient; its
    inverse ``requires_grad`` (PyTorch spelling) is offered too. ``_node`` is the
    Function that produced the tensor (None for leaves) and ``_idx`` which of its
    outputs this is. ``_vc`` is a one-element list, the version counter shared by
    every tensor that views the same memory: in-place writes bump it, and backward
    refuses to use saved arrays whose version changed.
    """

    __slots__ = ("_data", "_node", "_idx", "stop_gradient", "_grad", "_vc", "_hooks",
                 "_ready_hooks", "name", "persistable", "__weakref__")
    __array_priority__ = 1000  # numpy defers binary operators to Tensor

    def __init__(self, data=None, dtype=None, place=None, stop_gradient=True, name=None):
        self._data = _as_array(data if data is not None else [], dtype, place)
        self._node = None
        self._idx = 0
        self.stop_gradient = bool(stop_gradient)
        self._grad = None
        self._vc = [0]
        self._hooks = None
        self._ready_hooks = None
        self.name = name
        self.persistable = False

    # -- construction without checks, for ops ------------------------------------
    @classmethod
    def _wrap(cls, data, stop_gradient=True):
        t = object.__new__(cls)
        t._data = data
        t._node = None
        t._idx = 0
        t.stop_gradient = stop_gradient
        t._grad = None
        t._vc = [0]
        t._hooks = None
        t._ready_hooks = None
        t.name = None
        t.persistable = False
        return t

    # -- basic attributes ---------------------------------------------------------
    @property
    def shape(self):
        return list(self._data.shape)

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    @property
    def size(self):
        return int(self._data.size)

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def place(self):
        return place_of(self._data)

    @property
    def device(self):
        return place_of(self._data)

    @property
    def is_leaf(self):
        return self._node is None

    @property
    def requires_grad(self):
        return not self.stop_gradient

    @requires_grad.setter
    def requires_grad(self, value):
        self._set_stop_gradient(not value)

    def requires_grad_(self, requires_grad=True):
        self._set_stop_gradient(not requires_grad)
        return self

    def _set_stop_gradient(self, sg):
        # Paddle accepts stop_gradient=False on integer tensors too; no gradient flows into
        # them (casts and indexing give integer inputs none), so their .grad stays None
        self.stop_gradient = bool(sg)

    # -- gradients ----------------------------------------------------------------
    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is None or isinstance(value, Tensor):
            self._grad = value
        else:
            self._grad = Tensor._wrap(backend.get_array_module(value).asarray(value))

    def gradient(self):
        """The gradient as a numpy array (Paddle), or None."""
        return None if self._grad is None else backend.to_host(self._grad._data)

    def clear_grad(self, set_to_zero=True):
        """Zero the gradient in place (Paddle's default), or drop it."""
        if self._grad is not None:
            if set_to_zero:
                self._grad._data[...] = 0
            else:
                self._grad = None

    clear_gradient = clear_grad

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; a non-None return
        value replaces the gradient. Returns a handle with ``remove()``."""
        if self.stop_gradient:
            raise RuntimeError("ddg: cannot register a hook on a tensor with stop_gradient=True")
        if self._node is None:
            if self._hooks is None:
                self._hooks = []
            hooks = self._hooks
        else:
            hooks = self._node._out_hook_list(self._idx)
        hooks.append(hook)
        return _HookHandle(hooks, hook)

    def register_grad_ready_hook(self, hook):
        """Public engine contract for leaves: ``hook(tensor)`` runs exactly once per
        backward pass that reaches this leaf, as soon as its gradient is final (after
        it has been accumulated into ``.grad``). DataParallel starts its all-reduces
        from these hooks. Returns a handle with ``remove()``."""
        if self._node is not None:
            raise RuntimeError("ddg: grad-ready hooks are for leaf tensors (parameters)")
        if self._ready_hooks is None:
            self._ready_hooks = []
        self._ready_hooks.append(hook)
        return _HookHandle(self._ready_hooks, hook)

    # -- conversion -----------------------------------------------------------------
    def numpy(self):
        """A numpy copy of the values (Paddle: writing into it never changes the tensor)."""
        if _watch[0] is not None:
            _watch[0](self, "numpy", None)
        a = backend.to_host(self._data)
        return a.copy() if a is self._data else a

    def __array__(self, dtype=None, copy=None):
        if _watch[0] is not None:
            _watch[0](self, "array", None)
        a = backend.to_host(self._data)
        return a if dtype is None else a.astype(dtype, copy=False)

    def __dlpack__(self, **kwargs):
        return self._data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def item(self, *args):
        if _watch[0] is not None:
            _watch[0](self, "item", None)
        if args:
            return backend.to_host(self._data).item(*args)
        if self._data.size != 1:
            raise ValueError(f"ddg: item() needs a tensor with one element, this one has shape {self.shape}")
        return self._data.item()

    def tolist(self):
        if _watch[0] is not None:
            _watch[0](self, "tolist", None)
        return backend.to_host(self._data).tolist()

    def _scalar(self, what):
        if _watch[0] is not None:
            _watch[0](self, what, None)
        if self._data.size != 1:
            raise ValueError(f"ddg: {what}() of a tensor needs exactly one element, got shape {self.shape}; "
                             f"use .all() / .any() or index it")
        return self._data.item()

    def __bool__(self):
        return bool(self._scalar("bool"))

    def __float__(self):
        return float(self._scalar("float"))

    def __int__(self):
        return int(self._scalar("int"))

    def __index__(self):
        if self._data.dtype.kind not in "iub":
            raise TypeError(f"ddg: only integer tensors can be used as an index, got {self.dtype}")
        return int(self._scalar("index"))

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("ddg: len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("ddg: iteration over a 0-d tensor")
        for i in range(self._data.shape[0]):
            yield self[i]

    __hash__ = object.__hash__  # by identity (the table's __eq__ is elementwise)

    def __repr__(self):
        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec):
        if self._data.size == 1 and spec:
            return format(self._data.item(), spec)
        return format(repr(self), spec)

    def __deepcopy__(self, memo):
        t = Tensor._wrap(self._data.copy(), self.stop_gradient)
        t.name = self.name
        t.persistable = self.persistable
        if self._grad is not None:
            t._grad = Tensor._wrap(self._grad._data.copy())
        memo[id(self)] = t
        return t

    def __reduce__(self):
        raise TypeError("ddg: Tensors are not picklable; use ddg.save (a safe format) or .numpy()")

    # -- in-place value updates (no graph) --------------------------------------------
    def _bump(self):
        self._vc[0] += 1

    def set_value(self, value):
        """Overwrite the values in place (shape must match; dtype is converted)."""
        if _watch[0] is not None:
            _watch[0](self, "set_value", value)
        arr = value._data if isinstance(value, Tensor) else value
        xp = backend.get_array_module(self._data)
        arr = xp.asarray(arr) if xp is not np or not backend.is_gpu_array(arr) else backend.to_host(arr)
        if tuple(arr.shape) != tuple(self._data.shape):
            raise ValueError(f"ddg: set_value shape mismatch: tensor has shape {self.shape}, value has shape "
                             f"{list(arr.shape)}")
        self._data[...] = arr.astype(self._data.dtype, copy=False)
        self._bump()
        return self

    def zero_(self):
        if _watch[0] is not None:
            _watch[0](self, "zero_", None)
        self._data[...] = 0
        self._bump()
        return self

    def fill_(self, value):
        if _watch[0] is not None:
            _watch[0](self, "fill_", None)
        self._data[...] = value
        self._bump()
        return self

    # -- device (``to``, ``astype``/``cast`` are attached by ddg.autograd.tensor_table) --------
    def cpu(self):
        return self.to("cpu")

    def cuda(self, device_id=None):
        return self.to("gpu" if device_id is None else f"gpu:{device_id}")

    def pin_memory(self):
        return self


def _infer_dtype(data):
    """Paddle's dtype for Python data: floats -> default float, ints -> int64, bools -> bool."""
    a = np.asarray(data)
    if a.dtype.kind in "fV":
        return default_float()
    if a.dtype.kind in "iu":
        return np.dtype("int64")
    return a.dtype


def _as_array(data, dtype=None, place=None):
    dtype = convert_dtype(dtype)
    if isinstance(data, Tensor):
        arr = data._data
        if dtype is not None and arr.dtype != dtype:
            arr = arr.astype(dtype)
        else:
            arr = arr.copy()
    elif isinstance(data, backend.ARRAY_TYPES):
        arr = data.astype(dtype) if dtype is not None and data.dtype != dtype else data.copy()
    elif hasattr(data, "__dlpack__") and not isinstance(data, (list, tuple)):
        arr = backend.from_dlpack_any(data)
        if dtype is not None:
            arr = arr.astype(dtype)
    else:
        if isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in data):
            data = [d.numpy() if isinstance(d, Tensor) else d for d in data]
        if dtype is None:
            if isinstance(data, np.generic):
                dtype = data.dtype
            else:
                dtype = _infer_dtype(data)
        arr = np.array(data, dtype=dtype)
    if place is not None or backend.is_gpu_array(arr) or current_place().kind != "cpu":
        arr = move_array(arr, parse_place(place))
    return arr


class _HookHandle:
    __slots__ = ("_list", "_hook")

    def __init__(self, lst, hook):
        self._list = lst
        self._hook = hook

    def remove(self):
        try:
            self._list.remove(self._hook)
        except ValueError:
            pass
