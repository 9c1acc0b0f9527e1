"""What Paddle's layer constructors keep, recorded from the real Paddle 3.3.1 (CPU) into
``paddle_layers.json`` beside this file, for ``test_paddle_layers.py``.

Regenerate (CI has no Paddle) with ``PYTHONPATH=. <python with paddle> tests/layer_reference.py``.

For every case in ``CASES`` (each public layer class of ``paddle.nn`` that ddg exports, built
with its required arguments and with a few variants of the others) the table holds:

* ``attrs``: the instance attributes the constructor sets beyond those of a bare ``Layer``
  (the framework's own bookkeeping), each encoded by ``encode``: plain values as they are,
  tuples as ``{"tuple": [...]}`` (so that a list and a tuple differ, as they do for code
  that appends to one), ``ParamAttr`` as its fields, tensors as their shape, layers as
  their class name, dtypes as their name, anything else as its type's name;
* ``state_dict``: the keys of ``state_dict()`` in order, each with its shape;
* ``params``: each parameter's learning rate, ``trainable``, ``need_clip``, ``stop_gradient``.

It also records the attributes of a dygraph ``Parameter`` (``PARAMETER_ATTRS``).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "paddle_layers.json")

# attributes that are Paddle's framework bookkeeping rather than what a constructor keeps
BOOKKEEPING = {"_helper", "_built", "_op_recorder", "_loaddict_holder", "_customized_attrs",
               "_forward_pre_hooks_with_kwargs_flag", "_forward_post_hooks_with_kwargs_flag",
               "_forward_post_hooks_always_called", "_cast_to_low_precision", "_original_funcs",
               "_init_in_dynamic_mode", "_non_persistable_buffer_names_set", "_state_dict_hooks",
               "_use_cudnn", "_op_type", "_device"}

PARAMETER_ATTRS = ["name", "persistable", "trainable", "stop_gradient", "optimize_attr", "regularizer",
                   "need_clip", "do_model_average", "is_distributed", "is_leaf"]


def _attr(nn, name, lr, trainable=True):
    return nn.ParamAttr(name=name, learning_rate=lr, trainable=trainable) if hasattr(nn, "ParamAttr") else \
        __import__(nn.__name__.split(".")[0]).ParamAttr(name=name, learning_rate=lr, trainable=trainable)


def _cell(nn):
    return nn.SimpleRNNCell(3, 4)


# name -> constructor of nn (the module: paddle.nn or ddg.nn); several per class
CASES = {
    "AdaptiveAvgPool1D": lambda nn: nn.AdaptiveAvgPool1D(3),
    "AdaptiveAvgPool2D": lambda nn: nn.AdaptiveAvgPool2D(1),
    "AdaptiveAvgPool2D/list": lambda nn: nn.AdaptiveAvgPool2D([2, 3], data_format="NHWC"),
    "AdaptiveAvgPool3D": lambda nn: nn.AdaptiveAvgPool3D((1, 2, 2)),
    "AdaptiveMaxPool1D": lambda nn: nn.AdaptiveMaxPool1D(3, return_mask=True),
    "AdaptiveMaxPool2D": lambda nn: nn.AdaptiveMaxPool2D(2),
    "AdaptiveMaxPool3D": lambda nn: nn.AdaptiveMaxPool3D(2),
    "AlphaDropout": lambda nn: nn.AlphaDropout(0.2),
    "AvgPool1D": lambda nn: nn.AvgPool1D(3, 2, 1),
    "AvgPool2D": lambda nn: nn.AvgPool2D(3, 2, 1, ceil_mode=True, exclusive=False, divisor_override=2),
    "AvgPool2D/list": lambda nn: nn.AvgPool2D([3, 2], padding="same", data_format="NHWC"),
    "AvgPool3D": lambda nn: nn.AvgPool3D(2),
    "BCELoss": lambda nn: nn.BCELoss(),
    "BCEWithLogitsLoss": lambda nn: nn.BCEWithLogitsLoss(reduction="sum"),
    "BatchNorm": lambda nn: nn.BatchNorm(4),
    "BatchNorm1D": lambda nn: nn.BatchNorm1D(4),
    "BatchNorm2D": lambda nn: nn.BatchNorm2D(4, momentum=0.8, epsilon=1e-3),
    "BatchNorm2D/noaffine": lambda nn: nn.BatchNorm2D(4, weight_attr=False, bias_attr=False, data_format="NHWC"),
    "BatchNorm3D": lambda nn: nn.BatchNorm3D(4),
    "BiRNN": lambda nn: nn.BiRNN(_cell(nn), _cell(nn)),
    "Bilinear": lambda nn: nn.Bilinear(3, 4, 5),
    "CELU": lambda nn: nn.CELU(0.5),
    "CTCLoss": lambda nn: nn.CTCLoss(),
    "ChannelShuffle": lambda nn: nn.ChannelShuffle(2),
    "Conv1D": lambda nn: nn.Conv1D(2, 4, 3),
    "Conv1D/same": lambda nn: nn.Conv1D(2, 4, 3, stride=2, padding="same", dilation=2, bias_attr=False,
                                        data_format="NLC"),
    "Conv1DTranspose": lambda nn: nn.Conv1DTranspose(2, 4, 3, stride=2, output_padding=1),
    "Conv2D": lambda nn: nn.Conv2D(2, 4, 3),
    "Conv2D/args": lambda nn: nn.Conv2D(2, 4, (3, 1), stride=[2, 1], padding=1, dilation=2, groups=2,
                                        padding_mode="reflect"),
    "Conv2D/same": lambda nn: nn.Conv2D(2, 4, 3, padding="SAME", data_format="NHWC"),
    "Conv2DTranspose": lambda nn: nn.Conv2DTranspose(2, 4, 3, stride=2, padding=1, output_padding=1),
    "Conv3D": lambda nn: nn.Conv3D(2, 4, 3, padding="valid"),
    "Conv3DTranspose": lambda nn: nn.Conv3DTranspose(2, 4, 2),
    "CosineEmbeddingLoss": lambda nn: nn.CosineEmbeddingLoss(margin=0.5),
    "CosineSimilarity": lambda nn: nn.CosineSimilarity(axis=0),
    "CrossEntropyLoss": lambda nn: nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1),
    "Dropout": lambda nn: nn.Dropout(0.3),
    "Dropout2D": lambda nn: nn.Dropout2D(0.3),
    "Dropout3D": lambda nn: nn.Dropout3D(0.3),
    "ELU": lambda nn: nn.ELU(0.5),
    "Embedding": lambda nn: nn.Embedding(10, 4),
    "Embedding/args": lambda nn: nn.Embedding(10, 4, padding_idx=-1, sparse=True, max_norm=1.0),
    "Flatten": lambda nn: nn.Flatten(),
    "Fold": lambda nn: nn.Fold([4, 4], 2),
    "GELU": lambda nn: nn.GELU(approximate=True),
    "GLU": lambda nn: nn.GLU(),
    "GRU": lambda nn: nn.GRU(3, 4, num_layers=2),
    "GRUCell": lambda nn: nn.GRUCell(3, 4),
    "GaussianNLLLoss": lambda nn: nn.GaussianNLLLoss(),
    "GroupNorm": lambda nn: nn.GroupNorm(2, 4),
    "Hardshrink": lambda nn: nn.Hardshrink(),
    "Hardsigmoid": lambda nn: nn.Hardsigmoid(),
    "Hardswish": lambda nn: nn.Hardswish(),
    "Hardtanh": lambda nn: nn.Hardtanh(),
    "HingeEmbeddingLoss": lambda nn: nn.HingeEmbeddingLoss(),
    "Identity": lambda nn: nn.Identity(),
    "InstanceNorm1D": lambda nn: nn.InstanceNorm1D(4),
    "InstanceNorm2D": lambda nn: nn.InstanceNorm2D(4, momentum=0.8),
    "InstanceNorm3D": lambda nn: nn.InstanceNorm3D(4),
    "KLDivLoss": lambda nn: nn.KLDivLoss(),
    "L1Loss": lambda nn: nn.L1Loss(),
    "LSTM": lambda nn: nn.LSTM(3, 4, direction="bidirect"),
    "LSTMCell": lambda nn: nn.LSTMCell(3, 4),
    "LayerDict": lambda nn: nn.LayerDict({"a": nn.ReLU()}),
    "LayerList": lambda nn: nn.LayerList([nn.ReLU(), nn.Linear(2, 2)]),
    "LayerNorm": lambda nn: nn.LayerNorm(4),
    "LayerNorm/list": lambda nn: nn.LayerNorm([3, 4], bias_attr=False),
    "LeakyReLU": lambda nn: nn.LeakyReLU(0.1),
    "Linear": lambda nn: nn.Linear(3, 4),
    "Linear/nobias": lambda nn: nn.Linear(3, 4, bias_attr=False),
    "Linear/attrs": lambda nn: nn.Linear(3, 4, weight_attr=_attr(nn, "fc_w", 0.1),
                                         bias_attr=_attr(nn, None, 2.0, trainable=False)),
    "Conv2D/attrs": lambda nn: nn.Conv2D(2, 4, 3, weight_attr=_attr(nn, "cw", 0.5), bias_attr=False),
    "BatchNorm2D/attrs": lambda nn: nn.BatchNorm2D(4, weight_attr=_attr(nn, None, 0.3), bias_attr=_attr(nn, None, 1.0)),
    "Embedding/attrs": lambda nn: nn.Embedding(10, 4, weight_attr=_attr(nn, "emb", 1.0)),
    "LayerNorm/attrs": lambda nn: nn.LayerNorm(4, weight_attr=_attr(nn, None, 0.5), bias_attr=False),
    "PReLU/attrs": lambda nn: nn.PReLU(2, weight_attr=_attr(nn, None, 0.5)),
    "LocalResponseNorm": lambda nn: nn.LocalResponseNorm(3),
    "LogSigmoid": lambda nn: nn.LogSigmoid(),
    "LogSoftmax": lambda nn: nn.LogSoftmax(1),
    "MSELoss": lambda nn: nn.MSELoss(),
    "MarginRankingLoss": lambda nn: nn.MarginRankingLoss(),
    "MaxPool1D": lambda nn: nn.MaxPool1D(3),
    "MaxPool2D": lambda nn: nn.MaxPool2D(3, 2, 1),
    "MaxPool2D/args": lambda nn: nn.MaxPool2D([3, 3], return_mask=True, ceil_mode=True),
    "MaxPool3D": lambda nn: nn.MaxPool3D(2),
    "MaxUnPool1D": lambda nn: nn.MaxUnPool1D(2),
    "MaxUnPool2D": lambda nn: nn.MaxUnPool2D(2),
    "MaxUnPool3D": lambda nn: nn.MaxUnPool3D(2),
    "Maxout": lambda nn: nn.Maxout(2),
    "Mish": lambda nn: nn.Mish(),
    "MultiHeadAttention": lambda nn: nn.MultiHeadAttention(8, 2),
    "MultiHeadAttention/kv": lambda nn: nn.MultiHeadAttention(8, 2, kdim=4, vdim=6, need_weights=True),
    "MultiLabelSoftMarginLoss": lambda nn: nn.MultiLabelSoftMarginLoss(),
    "MultiMarginLoss": lambda nn: nn.MultiMarginLoss(),
    "NLLLoss": lambda nn: nn.NLLLoss(),
    "PReLU": lambda nn: nn.PReLU(),
    "PReLU/channels": lambda nn: nn.PReLU(4, 0.1, data_format="NHWC"),
    "Pad1D": lambda nn: nn.Pad1D(1),
    "Pad2D": lambda nn: nn.Pad2D([1, 0, 2, 1], mode="reflect"),
    "Pad3D": lambda nn: nn.Pad3D(1, value=2.0),
    "PairwiseDistance": lambda nn: nn.PairwiseDistance(),
    "ParameterList": lambda nn: nn.ParameterList(),
    "ParameterDict": lambda nn: nn.ParameterDict(),
    "PixelShuffle": lambda nn: nn.PixelShuffle(2),
    "PixelUnshuffle": lambda nn: nn.PixelUnshuffle(2),
    "PoissonNLLLoss": lambda nn: nn.PoissonNLLLoss(),
    "RNN": lambda nn: nn.RNN(_cell(nn)),
    "RReLU": lambda nn: nn.RReLU(),
    "ReLU": lambda nn: nn.ReLU(),
    "ReLU6": lambda nn: nn.ReLU6(),
    "SELU": lambda nn: nn.SELU(),
    "Sequential": lambda nn: nn.Sequential(nn.Linear(2, 3), nn.ReLU()),
    "SiLU": lambda nn: nn.SiLU(),
    "Sigmoid": lambda nn: nn.Sigmoid(),
    "Silu": lambda nn: nn.Silu(),
    "SimpleRNN": lambda nn: nn.SimpleRNN(3, 4, activation="relu"),
    "SimpleRNNCell": lambda nn: nn.SimpleRNNCell(3, 4),
    "SmoothL1Loss": lambda nn: nn.SmoothL1Loss(),
    "SoftMarginLoss": lambda nn: nn.SoftMarginLoss(),
    "Softmax": lambda nn: nn.Softmax(),
    "Softmax2D": lambda nn: nn.Softmax2D(),
    "Softplus": lambda nn: nn.Softplus(2, 10),
    "Softshrink": lambda nn: nn.Softshrink(),
    "Softsign": lambda nn: nn.Softsign(),
    "SpectralNorm": lambda nn: nn.SpectralNorm([3, 4]),
    "Swish": lambda nn: nn.Swish(),
    "Tanh": lambda nn: nn.Tanh(),
    "Tanhshrink": lambda nn: nn.Tanhshrink(),
    "ThresholdedReLU": lambda nn: nn.ThresholdedReLU(),
    "Transformer": lambda nn: nn.Transformer(8, 2, 1, 1, 16),
    "TransformerDecoder": lambda nn: nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16), 2),
    "TransformerDecoderLayer": lambda nn: nn.TransformerDecoderLayer(8, 2, 16),
    "TransformerEncoder": lambda nn: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2,
                                                           norm=nn.LayerNorm(8)),
    "TransformerEncoderLayer": lambda nn: nn.TransformerEncoderLayer(8, 2, 16, normalize_before=True),
    "TripletMarginLoss": lambda nn: nn.TripletMarginLoss(),
    "TripletMarginWithDistanceLoss": lambda nn: nn.TripletMarginWithDistanceLoss(),
    "Unflatten": lambda nn: nn.Unflatten(1, [2, 3]),
    "Unfold": lambda nn: nn.Unfold(2),
    "Upsample": lambda nn: nn.Upsample(scale_factor=2, mode="bilinear"),
    "UpsamplingBilinear2D": lambda nn: nn.UpsamplingBilinear2D(scale_factor=2),
    "UpsamplingNearest2D": lambda nn: nn.UpsamplingNearest2D(size=[4, 4]),
    "ZeroPad2D": lambda nn: nn.ZeroPad2D(1),
}

# vision.models whose state_dict keys are recorded (small ones; the key sets of the big
# ones follow from the same layers)
MODELS = {
    "resnet18": lambda vm: vm.resnet18(),
    "mobilenet_v2": lambda vm: vm.mobilenet_v2(scale=0.5),
    "mobilenet_v3_small": lambda vm: vm.mobilenet_v3_small(scale=0.5),
    "shufflenet_v2_x0_25": lambda vm: vm.shufflenet_v2_x0_25(),
    "squeezenet1_1": lambda vm: vm.squeezenet1_1(),
    "LeNet": lambda vm: vm.LeNet(),
}


# attributes that model-zoo subclasses change after construction: (case, attribute, new value,
# input shape); the output after the change is recorded (its shape and a fingerprint)
MUTATIONS = [
    ("AdaptiveAvgPool2D", "_output_size", [2, 3], [1, 2, 5, 7]),
    ("AdaptiveMaxPool2D", "_output_size", 3, [1, 2, 6, 6]),
    ("AvgPool2D", "ksize", 2, [1, 2, 6, 6]),
    ("MaxPool2D", "stride", 1, [1, 2, 6, 6]),
    ("MaxPool1D", "kernel_size", 2, [1, 2, 7]),
    ("LeakyReLU", "_negative_slope", 0.5, [2, 5]),
    ("GELU", "_approximate", False, [2, 5]),
    ("Softmax", "_axis", 0, [3, 4]),
    ("Hardtanh", "_max", 0.5, [2, 5]),
    ("ELU", "_alpha", 2.0, [2, 5]),
    ("Softplus", "_beta", 3, [2, 5]),
    ("PReLU/channels", "_data_format", "NCHW", [1, 4, 3, 3]),
    ("Pad2D", "padding", [2, 2, 0, 1], [1, 2, 4, 4]),
    ("Pad3D", "value", 5.0, [1, 1, 2, 2, 2]),
    ("ZeroPad2D", "padding", [0, 1, 2, 0], [1, 2, 3, 3]),
    ("Conv2D", "_updated_padding", [1, 1], [1, 2, 5, 5]),
    ("Conv2D", "_stride", [2, 2], [1, 2, 5, 5]),
    ("Conv1D", "_padding", 2, [1, 2, 6]),
    ("Conv2DTranspose", "output_padding", 0, [1, 2, 3, 3]),
    ("Dropout", "p", 0.0, [2, 5]),
    ("Upsample", "scale_factor", 3, [1, 1, 2, 2]),
    ("SmoothL1Loss", "is_huber", False, None),
]


def mutation_record(root, case, attr, value, shape):
    """Output of the layer of ``case`` after ``setattr(layer, attr, value)``, fingerprinted
    as in op_reference (float64 inputs and parameters)."""
    import numpy as np
    from op_reference import fingerprint
    root.set_default_dtype("float64")
    try:
        layer = CASES[case](root.nn)
    finally:
        root.set_default_dtype("float32")
    rng = np.random.default_rng(11)
    for p in layer.parameters():
        p.set_value(rng.standard_normal(list(p.shape)))
    setattr(layer, attr, value)
    if shape is None:   # a loss: input and label
        a, b = (root.to_tensor(rng.standard_normal([6]) * 3) for _ in range(2))
        return fingerprint(layer(a, b).numpy())
    return fingerprint(layer(root.to_tensor(rng.standard_normal(shape))).numpy())


def encode(v, _depth=0):
    """A JSON value that stands for the attribute value ``v`` (see the module docstring)."""
    import numpy as np
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if _depth > 3:
        return {"type": type(v).__name__}
    if isinstance(v, list):
        return [encode(a, _depth + 1) for a in v]
    if isinstance(v, tuple):
        return {"tuple": [encode(a, _depth + 1) for a in v]}
    if isinstance(v, dict) and type(v) is dict:
        return {"dict": {str(k): encode(a, _depth + 1) for k, a in v.items()}}
    name = type(v).__name__
    if name == "ParamAttr":
        return {"ParamAttr": {"name": v.name, "learning_rate": v.learning_rate, "trainable": v.trainable,
                              "need_clip": v.need_clip}}
    if hasattr(v, "shape") and hasattr(v, "stop_gradient"):
        return {"Tensor": list(v.shape)}
    if hasattr(v, "_sub_layers") and hasattr(v, "forward"):
        return {"Layer": name}
    if name in ("dtype", "DataType", "VarType") or "dtype" in name.lower():
        s = str(v)
        return {"dtype": s.split(".")[-1]}
    return {"type": name}


def layer_record(layer, base_attrs):
    attrs = {k: encode(v) for k, v in vars(layer).items() if k not in base_attrs and k not in BOOKKEEPING}
    sd = [[k, list(t.shape)] for k, t in layer.state_dict().items()]
    params = {k: [p.optimize_attr["learning_rate"], p.trainable, p.need_clip, p.stop_gradient]
              for k, p in layer.named_parameters()}
    return {"class": type(layer).__name__, "attrs": attrs, "state_dict": sd, "params": params}


def record(root):
    """The table for the framework ``root`` (paddle or ddg)."""
    import importlib
    nn = root.nn
    vm = importlib.import_module(root.__name__ + ".vision.models")
    base = set(vars(nn.Layer()))
    layers = {}
    for key, make in CASES.items():
        try:
            layers[key] = layer_record(make(nn), base)
        except Exception as e:  # noqa: BLE001 - recorded as what happened
            layers[key] = {"error": f"{type(e).__name__}: {e}"}
    models = {}
    for key, make in MODELS.items():
        m = make(vm)
        models[key] = [[k, list(t.shape)] for k, t in m.state_dict().items()]
    p = nn.Linear(3, 4).weight
    param = {a: encode(getattr(p, a, "<missing>")) for a in PARAMETER_ATTRS if a != "name"}
    mutations = {f"{c}.{a}": mutation_record(root, c, a, v, s) for c, a, v, s in MUTATIONS}
    return {"layers": layers, "models": models, "parameter": param, "mutations": mutations}


if __name__ == "__main__":
    import paddle
    table = record(paddle)
    table["generated_from"] = f"paddlepaddle {paddle.__version__}"
    with open(TABLE, "w") as f:
        json.dump(table, f, indent=0, sort_keys=True)
    bad = {k: v["error"] for k, v in table["layers"].items() if "error" in v}
    print(f"{len(table['layers'])} layer cases, {len(table['models'])} models written; errors: {bad}")
