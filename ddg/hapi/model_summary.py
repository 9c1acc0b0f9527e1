"""``ddg.summary``: a table of a network's layers, their input and output shapes and
parameter counts, in the layout of Paddle's ``paddle.summary``.

The network runs once (no gradients, in eval mode) on random inputs of the given
sizes, with a forward post-hook on every layer but containers (Sequential,
LayerList) and the network itself (unless it has no sublayers). A layer is named
``<Class>-<n>`` with n one more than the counter in its ``full_name()``; the memory
estimates count 4 bytes per value, whatever the dtype, as Paddle's do. A layer's
parameters are counted (batch norm's running mean and variance are non-trainable
parameters, as in Paddle); buffers are not.
"""
import collections
import numbers

import numpy as np

from ..autograd.grad_mode import no_grad
from ..nn.layer.container import LayerList, Sequential
from ..static import InputSpec
from ..tensor.creation import rand
from ..tensor.tensor import Tensor

__all__ = ["summary", "summary_string"]

def _is_shape(shape):
    return not any(isinstance(item, (list, tuple)) for item in shape)


def _check_shape(shape):
    unknown = 0
    out = []
    for item in shape:
        if item is None or item == -1:
            unknown += 1
            if unknown > 1:
                raise ValueError("ddg.summary: only the batch dimension of input_size can be None or -1")
            item = 1
        elif isinstance(item, numbers.Number):
            if item <= 0:
                raise ValueError(f"ddg.summary: input sizes must be positive, got {item} in {tuple(shape)}")
        else:
            raise TypeError(f"ddg.summary: input_size entries must be ints, got {item!r}")
        out.append(int(item))
    return tuple(out)


def _check_input(input_size):
    if isinstance(input_size, (list, tuple)) and _is_shape(input_size):
        return _check_shape(input_size)
    return [_check_input(i) for i in input_size]


def summary(net, input_size=None, dtypes=None, input=None):
    """Print ``net``'s summary table and return ``{'total_params': n,
    'trainable_params': m}``.

    Args:
        net: a ``ddg.nn.Layer``.
        input_size: the input's shape as a tuple (``(1, 1, 28, 28)``), an
            ``InputSpec``, or a list of them for several inputs; a ``None`` or -1
            batch dimension counts as 1.
        dtypes: the inputs' dtype(s) (``'float32'`` by default).
        input: real input Tensor(s) to use instead of random ones.
    """
    if input_size is None and input is None:
        raise ValueError("ddg.summary: input_size and input cannot both be None")
    if input_size is None:
        if isinstance(input, Tensor):
            input_size = tuple(input.shape)
        elif isinstance(input, (list, tuple)):
            input_size = [tuple(x.shape) for x in input]
        elif isinstance(input, dict):
            input_size = [tuple(v.shape) for v in input.values()]
        else:
            raise ValueError("ddg.summary: input must be a Tensor, a list/tuple or a dict of Tensors, "
                             f"got {type(input).__name__}; or give input_size")
    if isinstance(input_size, InputSpec):
        size = tuple(input_size.shape)
    elif isinstance(input_size, list):
        size = []
        for item in input_size:
            if isinstance(item, numbers.Integral):
                item = (item,)
            if isinstance(item, InputSpec):
                size.append(tuple(item.shape))
            elif isinstance(item, (tuple, list)):
                size.append(tuple(item))
            else:
                raise TypeError(f"ddg.summary: items of a list input_size must be tuples or InputSpecs, "
                                f"got {type(item).__name__}")
    elif isinstance(input_size, numbers.Integral):
        size = (input_size,)
    else:
        size = input_size
    size = _check_input(size)
    was_training = net.training
    if was_training:
        net.eval()
    try:
        text, info = summary_string(net, size, dtypes, input)
    finally:
        if was_training:
            net.train()
    print(text)
    return info


def _shape_of(x):
    if isinstance(x, Tensor):
        return list(x.shape)
    if isinstance(x, (list, tuple)):
        return [_shape_of(v) for v in x]
    return None


def _output_shape(out):
    if isinstance(out, (list, tuple)):
        return [_output_shape(o) for o in out]
    if hasattr(out, "shape"):
        return list(out.shape)
    return []


def _all_numbers(items):
    return all(isinstance(i, numbers.Number) for i in items)


def _build_dtypes(input_size, dtype):
    if dtype is None:
        dtype = "float32"
    if isinstance(input_size, (list, tuple)) and _all_numbers(input_size):
        return [dtype]
    return [_build_dtypes(i, dtype) for i in input_size]


def _build_input(input_size, dtypes):
    if isinstance(input_size, (list, tuple)) and _all_numbers(input_size):
        dtype = dtypes[0] if isinstance(dtypes, (list, tuple)) else dtypes
        return rand(list(input_size)).astype(dtype)
    return [_build_input(i, d) for i, d in zip(input_size, dtypes)]


def _input_megabytes(input_size):
    if isinstance(input_size, (list, tuple)) and _all_numbers(input_size):
        return abs(float(np.prod(input_size)) * 4.0 / (1024 ** 2.0))
    return sum(_input_megabytes(i) for i in input_size)


def _count_outputs(shape):
    """Values in an output shape, or in each of a list of output shapes."""
    if _all_numbers(shape):          # [] (a 0-d output) counts as one value, as in Paddle
        return int(np.prod(shape))
    return sum(_count_outputs(s) for s in shape)


@no_grad()
def summary_string(model, input_size=None, dtypes=None, input=None):
    """The summary table as a string, and the parameter counts."""
    if not isinstance(dtypes, (list, tuple)):
        dtypes = _build_dtypes(input_size, dtypes)
    depth = len(list(model.sublayers()))
    table = collections.OrderedDict()
    hooks = []

    def hook(layer, inputs, output):
        cls = type(layer).__name__
        try:
            idx = int(layer.full_name().split("_")[-1])
        except ValueError:
            idx = len(table)
        key = f"{cls}-{idx + 1}"
        row = table[key] = collections.OrderedDict()
        row["input_shape"] = _shape_of(inputs) or []
        row["output_shape"] = _output_shape(output)
        params = trainable = 0
        row["trainable"] = True if not layer._parameters else False
        for p in layer._parameters.values():
            if p is None:
                continue
            n = int(np.prod(p.shape))
            params += n
            if getattr(p, "trainable", True) and not p.stop_gradient:
                trainable += n
                row["trainable"] = True
        row["trainable_params"] = trainable
        row["nb_params"] = params

    for layer in model.sublayers(include_self=True):
        if isinstance(layer, (Sequential, LayerList)):
            continue
        if layer is model and depth >= 1:
            continue
        hooks.append(layer.register_forward_post_hook(hook))
    try:
        if isinstance(input_size, tuple):
            input_size = [input_size]
        if input is not None:
            model(input)
        else:
            model(*_build_input(input_size, dtypes))
    finally:
        for h in hooks:
            h.remove()

    widths = {"layer": 15, "input": 20, "output": 20, "params": 15, "table": 75}
    for name, row in table.items():
        widths["output"] = max(widths["output"], len(str(row["output_shape"])))
        widths["input"] = max(widths["input"], len(str(row["input_shape"])))
        widths["layer"] = max(widths["layer"], len(name))
        widths["params"] = max(widths["params"], len(str(row["nb_params"])))
    widths["table"] = max(widths["table"], widths["layer"] + widths["input"] + widths["output"]
                          + widths["params"] + 5)

    def line(a, b, c, d):
        return "{:^{}} {:^{}} {:^{}} {:^{}}".format(a, widths["layer"], b, widths["input"], c, widths["output"],
                                                    d, widths["params"])

    out = ["-" * widths["table"], line("Layer (type)", "Input Shape", "Output Shape", "Param #"),
           "=" * widths["table"]]
    total_params = total_output = trainable_params = 0
    for name, row in table.items():
        out.append(line(name, str(row["input_shape"]), str(row["output_shape"]), f"{row['nb_params']:,}"))
        total_params += row["nb_params"]
        total_output += _count_outputs(row["output_shape"])
        if row["trainable"]:
            trainable_params += row["trainable_params"]
    input_mb = _input_megabytes(input_size)
    output_mb = abs(2.0 * total_output * 4.0 / (1024 ** 2.0))   # x2: the gradients
    params_mb = abs(total_params * 4.0 / (1024 ** 2.0))
    out += ["=" * widths["table"],
            f"Total params: {total_params:,}",
            f"Trainable params: {trainable_params:,}",
            f"Non-trainable params: {total_params - trainable_params:,}",
            "-" * widths["table"],
            f"Input size (MB): {input_mb:0.2f}",
            f"Forward/backward pass size (MB): {output_mb:0.2f}",
            f"Params size (MB): {params_mb:0.2f}",
            f"Estimated Total Size (MB): {params_mb + output_mb + input_mb:0.2f}",
            "-" * widths["table"]]
    return "\n".join(out) + "\n", {"total_params": total_params, "trainable_params": trainable_params}
