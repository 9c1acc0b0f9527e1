"""Containers: Sequential, LayerList, LayerDict, ParameterList."""
import collections

from ..parameter import Parameter
from .layers import Layer


class Sequential(Layer):
    """Layers called one after another. ``Sequential(l1, l2)`` or
    ``Sequential(('name', l1), ...)`` or ``Sequential(OrderedDict(...))``."""

    def __init__(self, *layers):
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], (dict, collections.OrderedDict)):
            layers = tuple(layers[0].items())
        for i, item in enumerate(layers):
            if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[1], Layer):
                self.add_sublayer(str(item[0]), item[1])
            else:
                self.add_sublayer(str(i), item)

    def forward(self, x):
        for layer in self._sub_layers.values():
            x = layer(x)
        return x

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(*list(self._sub_layers.values())[idx])
        if isinstance(idx, str):
            return self._sub_layers[idx]
        return list(self._sub_layers.values())[idx]

    def __len__(self):
        return len(self._sub_layers)

    def __iter__(self):
        return iter(self._sub_layers.values())

    def append(self, layer):
        self.add_sublayer(str(len(self._sub_layers)), layer)
        return self


class LayerList(Layer):
    def __init__(self, sublayers=None):
        super().__init__()
        for layer in sublayers or []:
            self.append(layer)

    def append(self, layer):
        self.add_sublayer(str(len(self._sub_layers)), layer)
        return self

    def extend(self, layers):
        for layer in layers:
            self.append(layer)
        return self

    def insert(self, index, layer):
        items = list(self._sub_layers.values())
        items.insert(index, layer)
        self._sub_layers.clear()
        for i, item in enumerate(items):
            self._sub_layers[str(i)] = item

    def __getitem__(self, idx):
        items = list(self._sub_layers.values())
        if isinstance(idx, slice):
            return LayerList(items[idx])
        return items[idx]

    def __setitem__(self, idx, layer):
        key = list(self._sub_layers.keys())[idx]
        self._sub_layers[key] = layer

    def __len__(self):
        return len(self._sub_layers)

    def __iter__(self):
        return iter(self._sub_layers.values())


class LayerDict(Layer):
    def __init__(self, sublayers=None):
        super().__init__()
        if sublayers is not None:
            self.update(sublayers)

    def update(self, sublayers):
        items = sublayers.items() if isinstance(sublayers, dict) else sublayers
        for k, v in items:
            self.add_sublayer(k, v)

    def __getitem__(self, key):
        return self._sub_layers[key]

    def __setitem__(self, key, layer):
        self.add_sublayer(key, layer)

    def __delitem__(self, key):
        del self._sub_layers[key]

    def __contains__(self, key):
        return key in self._sub_layers

    def __len__(self):
        return len(self._sub_layers)

    def __iter__(self):
        return iter(self._sub_layers)

    def keys(self):
        return self._sub_layers.keys()

    def values(self):
        return self._sub_layers.values()

    def items(self):
        return self._sub_layers.items()

    def pop(self, key):
        return self._sub_layers.pop(key)

    def clear(self):
        self._sub_layers.clear()


class ParameterList(Layer):
    def __init__(self, parameters=None):
        super().__init__()
        for p in parameters or []:
            self.append(p)

    def append(self, parameter):
        if not isinstance(parameter, Parameter):
            raise TypeError(f"ddg.nn.ParameterList: expected a Parameter, got {type(parameter).__name__}")
        self.add_parameter(str(len(self._parameters)), parameter)
        return self

    def __getitem__(self, idx):
        return list(self._parameters.values())[idx]

    def __setitem__(self, idx, p):
        self._parameters[str(idx)] = p

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())


class ParameterDict(Layer):
    """Parameters held by name, registered as this layer's own (Paddle's
    ``nn.ParameterDict``): ``pd[name]``, ``pd[name] = p``, ``len``, iteration over names,
    ``update`` from a mapping or (name, parameter) pairs."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def _check(self, name, parameter):
        if not isinstance(name, str):
            raise TypeError(f"ddg.nn.ParameterDict: keys must be str, got {type(name).__name__}")
        if not isinstance(parameter, Parameter):
            raise TypeError(f"ddg.nn.ParameterDict: expected a Parameter for {name!r}, got "
                            f"{type(parameter).__name__}")

    def __getitem__(self, name):
        return self._parameters[name]

    def __setitem__(self, name, parameter):
        self._check(name, parameter)
        self.add_parameter(name, parameter)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.keys())

    def __contains__(self, name):
        return name in self._parameters

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def update(self, parameters):
        """Add or replace parameters from a mapping or an iterable of (name, parameter) pairs."""
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for kv in items:
            if not isinstance(kv, (tuple, list)) or len(kv) != 2:
                raise TypeError(f"ddg.nn.ParameterDict.update: expects a mapping or (name, parameter) pairs, got "
                                f"an item {kv!r}")
            self[kv[0]] = kv[1]
