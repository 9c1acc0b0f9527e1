"""``ddg.nn.Layer``: the base class of every model and layer.

Assigning a Parameter, a Layer or a registered buffer to an attribute registers it,
in insertion order. That order is the order of ``parameters()``, and so the order in
which DataParallel packs gradients: it is deterministic and the same on every rank.
"""
import collections
import itertools
import re
import warnings

import numpy as np

from ...tensor import backend
from ...tensor.dtypes import convert_dtype, default_float
from ...tensor.place import move_array, parse_place
from ...tensor.tensor import Tensor
from ..param_attr import ParamAttr
from ..parameter import Parameter, create_parameter

_name_counts = collections.defaultdict(itertools.count)


def _unique_name(prefix):
    return f"{prefix}_{next(_name_counts[prefix])}"


_WORD = re.compile(r"(.)([A-Z][a-z]+)")
_LOWER_UPPER = re.compile(r"([a-z])([A-Z])")


def _camel_to_snake(name):
    """Paddle's name scope of a layer class: an underscore before each capitalised word
    and between a lower-case and an upper-case letter, so ``Conv2D`` -> ``conv2d``,
    ``BatchNorm2D`` -> ``batch_norm2d``, ``Conv2DTranspose`` -> ``conv2d_transpose``."""
    return _LOWER_UPPER.sub(r"\1_\2", _WORD.sub(r"\1_\2", name)).lower()


def create_parameter_api(shape, dtype, name=None, attr=None, is_bias=False, default_initializer=None):
    """``paddle.create_parameter``: a Parameter outside any layer, named
    ``create_parameter_N.w_0`` (``.b_0`` for biases) unless ``name`` or ``attr`` names it."""
    if name is None and not getattr(ParamAttr._to_attr(attr), "name", None):
        name = _unique_name(f"{_unique_name('create_parameter')}.{'b' if is_bias else 'w'}")
    return create_parameter(shape, dtype, attr, is_bias, default_initializer, name=name)


class _Handle:
    _ids = itertools.count()

    def __init__(self, hooks):
        self._hooks = hooks
        self._id = next(self._ids)

    def remove(self):
        self._hooks.pop(self._id, None)


class Layer:
    """Base class of layers. Subclasses build sublayers and parameters in ``__init__``
    and compute in ``forward``."""

    def __init__(self, name_scope=None, dtype="float32"):
        d = self.__dict__
        d["_parameters"] = collections.OrderedDict()
        d["_sub_layers"] = collections.OrderedDict()
        d["_buffers"] = collections.OrderedDict()
        d["_non_persistable_buffer_names"] = set()
        d["_forward_pre_hooks"] = collections.OrderedDict()
        d["_forward_post_hooks"] = collections.OrderedDict()
        d["training"] = True
        # Paddle: parameters take the default dtype at construction (set_default_dtype), so
        # the signature's "float32" means "the default"; another dtype is kept as given
        d["_dtype"] = default_float() if dtype is None or dtype == "float32" else convert_dtype(dtype)
        d["_full_name"] = _unique_name(name_scope or _camel_to_snake(type(self).__name__))

    # -- registration through attributes -------------------------------------------------
    def _check_init(self):
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"ddg: {type(self).__name__}.__init__ must call super().__init__() before "
                               f"assigning parameters or sublayers")

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(value, Parameter):
            self._check_init()
            self._forget_member(name)
            d["_parameters"][name] = value
        elif isinstance(value, Layer):
            self._check_init()
            self._forget_member(name)
            d["_sub_layers"][name] = value
        elif "_buffers" in d and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"ddg: buffer {name!r} must be a Tensor or None, got {type(value).__name__}")
            d["_buffers"][name] = value
        elif "_parameters" in d and name in d["_parameters"]:
            if value is not None:
                raise TypeError(f"ddg: attribute {name!r} is a parameter; assign a Parameter or None")
            d["_parameters"][name] = None
        else:
            if "_sub_layers" in d and name in d["_sub_layers"]:
                del d["_sub_layers"][name]
            object.__setattr__(self, name, value)

    def _forget_member(self, name):
        # (not "_drop": Paddle models name their Dropout sublayer self._drop, and a method
        # of that name would shadow it)
        d = self.__dict__
        d.pop(name, None)
        for key in ("_parameters", "_sub_layers", "_buffers"):
            d[key].pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_sub_layers", "_buffers"):
            table = d.get(key)
            if table is not None and name in table:
                return table[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_sub_layers", "_buffers"):
            if name in d.get(key, ()):
                del d[key][name]
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._sub_layers) | set(self._buffers))

    # -- calling ---------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *inputs, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            r = hook(self, inputs)
            if r is not None:
                inputs = r if isinstance(r, tuple) else (r,)
        out = self.forward(*inputs, **kwargs)
        for hook in list(self._forward_post_hooks.values()):
            r = hook(self, inputs, out)
            if r is not None:
                out = r
        return out

    def register_forward_pre_hook(self, hook):
        h = _Handle(self._forward_pre_hooks)
        self._forward_pre_hooks[h._id] = hook
        return h

    def register_forward_post_hook(self, hook):
        h = _Handle(self._forward_post_hooks)
        self._forward_post_hooks[h._id] = hook
        return h

    def register_state_dict_hook(self, hook):
        """``hook(state_dict)`` runs at the end of this layer's ``state_dict()`` (with
        ``use_hook=True``); it may change the dict in place or return a new one
        (``ddg.amp.decorate(save_dtype=...)`` casts the saved values this way)."""
        hooks = self.__dict__.setdefault("_state_dict_hooks", collections.OrderedDict())
        h = _Handle(hooks)
        hooks[h._id] = hook
        return h

    # -- building ----------------------------------------------------------------------------
    def full_name(self):
        return self._full_name

    def create_parameter(self, shape, attr=None, dtype=None, is_bias=False, default_initializer=None):
        # Paddle counts weights and biases apart: linear_0.w_0, linear_0.b_0
        name = _unique_name(f"{self._full_name}.{'b' if is_bias else 'w'}")
        return create_parameter(shape, dtype or self._dtype, attr, is_bias, default_initializer, name=name,
                                op=f"nn.{type(self).__name__}")    # a bad size names the layer

    def create_tensor(self, name=None, persistable=None, dtype=None):
        return Tensor(np.zeros([0], dtype=convert_dtype(dtype) or self._dtype))

    def add_parameter(self, name, parameter):
        if parameter is not None and not isinstance(parameter, Parameter):
            raise TypeError(f"ddg: add_parameter({name!r}) needs a Parameter, got {type(parameter).__name__}")
        if "." in name:
            raise KeyError(f"ddg: parameter name {name!r} cannot contain '.'")
        self._check_init()
        self._forget_member(name)
        self._parameters[name] = parameter
        return parameter

    def add_sublayer(self, name, sublayer):
        if not isinstance(sublayer, Layer) and sublayer is not None:
            raise TypeError(f"ddg: add_sublayer({name!r}) needs a Layer, got {type(sublayer).__name__}")
        self._check_init()
        self._forget_member(name)
        self._sub_layers[str(name)] = sublayer
        return sublayer

    def register_buffer(self, name, tensor, persistable=True):
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"ddg: register_buffer({name!r}) needs a Tensor or None, got {type(tensor).__name__}")
        self._check_init()
        self._forget_member(name)
        self._buffers[name] = tensor
        if persistable:
            self._non_persistable_buffer_names.discard(name)
        else:
            self._non_persistable_buffer_names.add(name)
        if tensor is not None:
            tensor.persistable = persistable

    # -- traversal -------------------------------------------------------------------------------
    def named_sublayers(self, prefix="", include_self=False, layers_set=None):
        if layers_set is None:
            layers_set = set()
        if include_self and id(self) not in layers_set:
            layers_set.add(id(self))
            yield prefix, self
        for name, layer in self._sub_layers.items():
            if layer is None or id(layer) in layers_set:
                continue
            p = f"{prefix}.{name}" if prefix else name
            layers_set.add(id(layer))
            yield p, layer
            yield from layer.named_sublayers(p, False, layers_set)

    def sublayers(self, include_self=False):
        return [layer for _, layer in self.named_sublayers(include_self=include_self)]

    def named_children(self):
        seen = set()
        for name, layer in self._sub_layers.items():
            if layer is not None and id(layer) not in seen:
                seen.add(id(layer))
                yield name, layer

    def children(self):
        return [layer for _, layer in self.named_children()]

    def named_parameters(self, prefix="", include_sublayers=True):
        seen = set()
        layers = self.named_sublayers(prefix, include_self=True) if include_sublayers else [(prefix, self)]
        for lp, layer in layers:
            for name, p in layer._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{lp}.{name}" if lp else name), p

    def parameters(self, include_sublayers=True):
        return [p for _, p in self.named_parameters(include_sublayers=include_sublayers)]

    def named_buffers(self, prefix="", include_sublayers=True):
        seen = set()
        layers = self.named_sublayers(prefix, include_self=True) if include_sublayers else [(prefix, self)]
        for lp, layer in layers:
            for name, b in layer._buffers.items():
                if b is None or id(b) in seen:
                    continue
                seen.add(id(b))
                yield (f"{lp}.{name}" if lp else name), b

    def buffers(self, include_sublayers=True):
        return [b for _, b in self.named_buffers(include_sublayers=include_sublayers)]

    # -- modes --------------------------------------------------------------------------------------
    def train(self):
        for layer in self.sublayers(include_self=True):
            layer.__dict__["training"] = True
        return self

    def eval(self):
        for layer in self.sublayers(include_self=True):
            layer.__dict__["training"] = False
        return self

    def apply(self, fn):
        for layer in self.children():
            layer.apply(fn)
        fn(self)
        return self

    def clear_gradients(self, set_to_zero=True):
        for p in self.parameters():
            p.clear_grad(set_to_zero)

    clear_grad = clear_gradients

    def to(self, device=None, dtype=None, blocking=None):
        """Move parameters and buffers to ``device`` and/or cast floating ones to ``dtype``, in place
        (the Parameter objects stay the same, so optimizers built earlier keep working)."""
        place = parse_place(device) if device is not None else None
        dt = convert_dtype(dtype)
        for t in list(self.parameters()) + list(self.buffers()):
            arr = t._data
            if place is not None:
                arr = move_array(arr, place)
            if dt is not None and arr.dtype.kind in "fV":
                arr = arr.astype(dt)
            if arr is not t._data:
                t._data = arr
                t._vc = [0]
                if t._grad is not None:
                    g = t._grad._data
                    if place is not None:
                        g = move_array(g, place)
                    t._grad = Tensor._wrap(g.astype(arr.dtype, copy=False))
        if dt is not None:
            for layer in self.sublayers(include_self=True):
                layer.__dict__["_dtype"] = dt
        return self

    def float(self):
        return self.to(dtype="float32")

    def double(self):
        return self.to(dtype="float64")

    def half(self):
        return self.to(dtype="float16")

    def float16(self, excluded_layers=None):
        return self._cast_floats("float16", excluded_layers)

    def bfloat16(self, excluded_layers=None):
        return self._cast_floats("bfloat16", excluded_layers)

    def _cast_floats(self, dtype, excluded_layers):
        """Cast the float parameters and buffers to ``dtype``, except those of the layers in
        ``excluded_layers`` (a Layer or a list of them) and their sublayers."""
        if excluded_layers is None:
            return self.to(dtype=dtype)
        if isinstance(excluded_layers, Layer):
            excluded_layers = [excluded_layers]
        skip = {id(sub) for lay in excluded_layers for sub in lay.sublayers(include_self=True)}
        for layer in self.sublayers(include_self=True):
            if id(layer) not in skip:
                for t in list(layer._parameters.values()) + list(layer._buffers.values()):
                    if t is not None and t._data.dtype.kind in "fV":
                        t._data = t._data.astype(convert_dtype(dtype))
                        t._vc = [0]
                        if t._grad is not None:
                            t._grad = Tensor._wrap(t._grad._data.astype(t._data.dtype))
                layer.__dict__["_dtype"] = convert_dtype(dtype)
        return self

    def astype(self, dtype):
        return self.to(dtype=dtype)

    # -- state ----------------------------------------------------------------------------------------
    def state_dict(self, destination=None, include_sublayers=True, structured_name_prefix="", use_hook=True):
        """Parameters and persistable buffers by dotted name, in registration order. As in
        Paddle, a parameter or sublayer held under two names is listed under both."""
        out = collections.OrderedDict() if destination is None else destination
        root = next(self.named_sublayers(include_self=True))[1]   # the wrapped layer, for DataParallel

        def collect(layer, prefix, path):
            for name, p in layer._parameters.items():
                if p is not None:
                    out[structured_name_prefix + prefix + name] = p
            for name, b in layer._buffers.items():
                if b is not None and name not in layer._non_persistable_buffer_names:
                    out[structured_name_prefix + prefix + name] = b
            if include_sublayers:
                for name, sub in layer._sub_layers.items():
                    if sub is not None and id(sub) not in path:   # (a layer inside itself: once)
                        collect(sub, f"{prefix}{name}.", path | {id(sub)})

        collect(root, "", {id(root)})
        if use_hook:
            # the hooks of the layer asked (of the wrapped layer, for DataParallel)
            top = [layer for lp, layer in self.named_sublayers(include_self=True) if not lp][:1] or [self]
            for hook in list(top[0].__dict__.get("_state_dict_hooks", {}).values()):
                result = hook(out)
                if result is not None:
                    out = result
        return out

    def set_state_dict(self, state_dict, use_structured_name=True):
        """Copy values from ``state_dict`` into this layer's parameters and buffers.

        A value whose shape differs raises ValueError naming the key and both shapes
        (before anything is copied). Missing and unexpected keys are reported in a
        warning by name, and returned as ``(missing_keys, unexpected_keys)``."""
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        bad = []
        for k, t in own.items():
            if k in state_dict:
                v = state_dict[k]
                shape = list(v.shape) if hasattr(v, "shape") else list(np.shape(v))
                if shape != t.shape:
                    bad.append(f"{k}: checkpoint has shape {shape}, layer has {t.shape}")
        if bad:
            raise ValueError("ddg: set_state_dict shape mismatch:\n  " + "\n  ".join(bad))
        for k, t in own.items():
            if k in state_dict:
                v = state_dict[k]
                arr = v._data if isinstance(v, Tensor) else np.asarray(v)
                xp = backend.get_array_module(t._data)
                if xp is np:
                    arr = backend.to_host(arr)
                t._data[...] = xp.asarray(arr).astype(t._data.dtype, copy=False)
                t._bump()
        if missing or unexpected:
            parts = []
            if missing:
                parts.append(f"missing keys (left unchanged): {missing}")
            if unexpected:
                parts.append(f"unexpected keys (ignored): {unexpected}")
            warnings.warn("ddg: set_state_dict: " + "; ".join(parts), stacklevel=2)
        return missing, unexpected

    set_dict = set_state_dict
    load_dict = set_state_dict

    # -- printing ---------------------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = []
        for name, layer in self._sub_layers.items():
            sub = repr(layer).split("\n")
            lines.append(f"({name}): " + "\n  ".join(sub))
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


class LayerWrapper(Layer):
    """A Layer that stands in for the layer it wraps (``self._layers``): sublayers,
    parameters and state_dict keys are the wrapped layer's own (no ``_layers.`` prefix),
    ``train()``/``eval()`` reach it, and unknown attributes are read from it.
    ``DataParallel`` and fleet's auto-cast forward are such wrappers."""

    def __init__(self, layer):
        super().__init__()
        # Not registered as a sublayer: state_dict keys stay those of the wrapped layer.
        object.__setattr__(self, "_layers", layer)
        self.training = layer.training

    def named_sublayers(self, prefix="", include_self=False, layers_set=None):
        return self._layers.named_sublayers(prefix, include_self, layers_set)

    def named_children(self):
        yield "_layers", self._layers

    def train(self):
        self.training = True
        self._layers.train()
        return self

    def eval(self):
        self.training = False
        self._layers.eval()
        return self

    def __getattr__(self, name):
        d = self.__dict__
        if "_layers" in d:
            return getattr(d["_layers"], name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
