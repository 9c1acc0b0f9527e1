"""``ddg.flops``: count a network's floating-point operations by running it once (the
counting rules and the printed table of Paddle's ``paddle.flops``).

Every leaf layer (one without sublayers) gets a forward post-hook. Layers of the
types below are counted by their rule, types in ``custom_ops`` by the given function
``fn(layer, inputs, output)`` that adds to ``layer.total_ops``, and any other type
counts zero (a message says so). Rules, per output value: convolution
``in_channels / groups * kernel_size + bias``, linear ``in_features``, average pooling 1,
adaptive average pooling ``kernel + 1``, batch norm (eval) 2 per input value, leaky
ReLU 1 per input value; ReLU, ReLU6 and dropout 0. A layer's parameter count is that of
its parameters (batch norm's running mean and variance included: non-trainable
parameters, as in Paddle), not of its buffers.
"""
import numpy as np

from .. import nn
from ..autograd.grad_mode import no_grad
from ..tensor.creation import randn
from ..tensor.tensor import Tensor

__all__ = ["flops", "Table"]


def _numel(t):
    return int(np.prod(t.shape)) if isinstance(t, Tensor) else 0


def count_convNd(m, x, y):
    x = x[0]
    kernel_ops = int(np.prod(m.weight.shape[2:]))
    bias_ops = 1 if getattr(m, "bias", None) is not None else 0
    total = _numel(y) * (x.shape[1] / m._groups * kernel_ops + bias_ops)
    m.total_ops += abs(int(total))


def count_leaky_relu(m, x, y):
    m.total_ops += _numel(x[0])


def count_bn(m, x, y):
    # fit/eval: flops() runs the network in eval mode, where batch norm is a scale and a shift
    m.total_ops += abs(int(2 * _numel(x[0])))


def count_linear(m, x, y):
    m.total_ops += abs(int(m.weight.shape[0] * _numel(y)))


def count_avgpool(m, x, y):
    m.total_ops += _numel(y)


def count_adap_avgpool(m, x, y):
    kernel = np.array(x[0].shape[2:]) // np.array(y.shape[2:])
    m.total_ops += abs(int((int(np.prod(kernel)) + 1) * _numel(y)))


def count_zero_ops(m, x, y):
    m.total_ops += 0


_RULES = [
    ("Conv1D", count_convNd), ("Conv2D", count_convNd), ("Conv3D", count_convNd),
    ("Conv1DTranspose", count_convNd), ("Conv2DTranspose", count_convNd), ("Conv3DTranspose", count_convNd),
    ("BatchNorm2D", count_bn), ("BatchNorm", count_bn),
    ("ReLU", count_zero_ops), ("ReLU6", count_zero_ops), ("LeakyReLU", count_leaky_relu),
    ("Linear", count_linear), ("Dropout", count_zero_ops),
    ("AvgPool1D", count_avgpool), ("AvgPool2D", count_avgpool), ("AvgPool3D", count_avgpool),
    ("AdaptiveAvgPool1D", count_adap_avgpool), ("AdaptiveAvgPool2D", count_adap_avgpool),
    ("AdaptiveAvgPool3D", count_adap_avgpool),
]


def _register_hooks():
    """{layer type: rule} for the ddg.nn layers that exist (keyed by exact type, as Paddle)."""
    return {getattr(nn, name): fn for name, fn in _RULES if hasattr(nn, name)}


class Table:
    """A plain text table with centered cells (the layout of Paddle's flops table)."""

    def __init__(self, table_heads):
        self.table_heads = list(table_heads)
        self.table_len = [len(h) for h in table_heads]
        self.data = []
        self.col_num = len(table_heads)

    def add_row(self, row):
        if len(row) != self.col_num:
            raise ValueError(f"Table.add_row: {len(row)} cells for {self.col_num} columns")
        for i, cell in enumerate(row):
            self.table_len[i] = max(self.table_len[i], len(str(cell)))
        self.data.append(list(row))

    def _row(self, row):
        return "".join("|" + str(row[i]).center(self.table_len[i] + 2) for i in range(self.col_num)) + "|"

    def _shelf(self):
        return "".join("+" + "-" * (n + 2) for n in self.table_len) + "+"

    def table_string(self):
        lines = [self._shelf(), self._row(self.table_heads), self._shelf()]
        lines += [self._row(r) for r in self.data]
        lines.append(self._shelf())
        return "\n".join(lines)

    def print_table(self):
        print(self.table_string())


class _Counter:
    """What flops() hangs on each leaf layer while it runs: total_ops is added to by
    the rules, the rest is filled in after the forward."""
    __slots__ = ("total_ops", "total_params", "input_shape", "output_shape", "seen")

    def __init__(self):
        self.total_ops = 0
        self.total_params = 0
        self.input_shape = None
        self.output_shape = None
        self.seen = False


class _Proxy:
    """The layer as a counting rule sees it: its attributes, plus ``total_ops``."""

    def __init__(self, layer, counter):
        object.__setattr__(self, "_layer", layer)
        object.__setattr__(self, "_counter", counter)

    def __getattr__(self, name):
        if name == "total_ops":
            return self._counter.total_ops
        return getattr(self._layer, name)

    def __setattr__(self, name, value):
        if name == "total_ops":
            self._counter.total_ops = value
        else:
            setattr(self._layer, name, value)


def flops(net, input_size, custom_ops=None, print_detail=False):
    """The number of floating-point operations of one forward of ``net`` on a random
    input of shape ``input_size`` (eval mode, no gradients); prints the totals, and the
    per-layer table with ``print_detail=True``."""
    if not isinstance(net, nn.Layer):
        raise TypeError(f"ddg.flops: net must be a ddg.nn.Layer, got {type(net).__name__} "
                        f"(ddg has no static Program)")
    custom_ops = dict(custom_ops or {})
    rules = _register_hooks()
    counters = {}
    handles = []
    seen_types = set()

    def leaf(m):
        return not any(True for _ in m.children())

    for m in net.sublayers(include_self=True):
        if not leaf(m):
            continue
        m_type = type(m)
        fn = None
        if m_type in custom_ops:
            fn = custom_ops[m_type]
            if m_type not in seen_types:
                print(f"Customize Function has been applied to {m_type}")
        elif m_type in rules:
            fn = rules[m_type]
            if m_type not in seen_types:
                print(f"{m_type}'s flops has been counted")
        elif m_type not in seen_types:
            print(f"Cannot find suitable count function for {m_type}. Treat it as zero FLOPs.")
        seen_types.add(m_type)
        counter = counters[id(m)] = _Counter()

        def post(layer, inputs, output, fn=fn, counter=counter):
            if fn is not None:
                fn(_Proxy(layer, counter), inputs, output)
            counter.total_params = sum(int(np.prod(p.shape)) for p in layer.parameters())
            counter.input_shape = list(inputs[0].shape)
            out = output[0] if isinstance(output, (list, tuple)) else output
            counter.output_shape = list(out.shape)
            counter.seen = True
        handles.append(m.register_forward_post_hook(post))

    training = net.training
    net.eval()
    try:
        with no_grad():
            net(randn(list(input_size)))
    finally:
        if training:
            net.train()
        for h in handles:
            h.remove()

    total_ops = total_params = 0
    table = Table(["Layer Name", "Input Shape", "Output Shape", "Params", "Flops"])
    for _, m in net.named_sublayers(include_self=True):
        c = counters.get(id(m))
        if c is None or not c.seen:
            continue
        total_ops += c.total_ops
        total_params += c.total_params
        table.add_row([m.full_name(), c.input_shape, c.output_shape, int(c.total_params), int(c.total_ops)])
    if print_detail:
        table.print_table()
    print(f"Total Flops: {int(total_ops)}     Total Params: {int(total_params)}")
    return int(total_ops)
