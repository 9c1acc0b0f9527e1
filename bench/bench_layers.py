"""Layer sweep: forward + backward of every public ``ddg.nn`` layer that has a PyTorch
counterpart, at three sizes, ddg vs torch in one interleaved run on one thread.

Each case builds the layer in both frameworks with the same configuration, draws inputs of
one shape (float inputs require grad, as mid-network activations do), and times
``out = layer(*inputs); out.backward(g)`` (a loss: ``out.backward()``). Rounds alternate
between the frameworks so that load on a shared machine hits both alike; the median per
call is reported, with the ratio ddg / torch (lower is better). Without torch the ddg times
are printed alone.

    python bench/bench_layers.py [--only GELU,Conv2D] [--sizes s,m,l | a,b,c | d,e,f] [--rounds 5]
                                 [--min-time 0.02] [--markdown out.md]

``LAYERS`` maps each benched layer name to its case builder; ``NO_COUNTERPART`` lists the
public layers that are not benched, each with the reason. ``tests/test_bench_layers.py``
keeps the two complete.
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ddg  # noqa: E402
from ddg import nn  # noqa: E402

SIZES = ("s", "m", "l")
# shapes per size: images [N, C, H, H], volumes [N, C, D, D, D], sequences [N, L, D], vectors [N, F].
# s, m, l are the sweep's; a, b, c (``--sizes a,b,c``) are a second set with other batch,
# channel and length mixes (c: 8 channels on large planes, batch 32; b: batch 2 sequences);
# d, e, f (``--sizes d,e,f``) a third (d: 512 channels on 7x7 planes, 1-D lengths of 12,
# 32k vocabulary; e: batch 1 volumes and 1024-long sequences; f: batch 1 on 96x96 planes)
IMG = {"s": (8, 16, 16), "m": (4, 64, 32), "l": (2, 128, 56), "a": (16, 32, 28), "b": (8, 256, 14),
       "c": (32, 8, 64), "d": (4, 512, 7), "e": (32, 16, 40), "f": (1, 48, 96)}
IMG_N = {"s": 8, "m": 4, "l": 2, "a": 16, "b": 8, "c": 32, "d": 4, "e": 32, "f": 1}
VOL = {"s": (2, 8, 8), "m": (2, 16, 16), "l": (1, 32, 24), "a": (4, 4, 12), "b": (1, 32, 10), "c": (2, 8, 20),
       "d": (8, 16, 6), "e": (1, 64, 8), "f": (2, 3, 32)}
SEQ = {"s": (4, 16, 64), "m": (4, 128, 128), "l": (2, 512, 256), "a": (8, 64, 96), "b": (2, 256, 512),
       "c": (32, 32, 32), "d": (16, 77, 384), "e": (1, 1024, 64), "f": (64, 20, 48)}
VEC = {"s": (16, 64), "m": (64, 512), "l": (256, 2048), "a": (32, 256), "b": (512, 1024), "c": (8, 4096),
       "d": (1024, 128), "e": (4, 10000), "f": (128, 768)}
VOCAB = {"s": 1000, "m": 30000, "l": 100000, "a": 5000, "b": 50000, "c": 200, "d": 32000, "e": 8000, "f": 500}

#: public ddg.nn layers that are not benched, and why
NO_COUNTERPART = {
    "Layer": "base class, no computation",
    "Module": "alias of Layer",
    "LayerDict": "container", "LayerList": "container", "ParameterDict": "container",
    "ParameterList": "container", "Sequential": "container",
    "RNNCellBase": "abstract base of the RNN cells",
    "RNN": "Paddle's wrapper running any cell over time: torch has no cell-generic loop (the fused "
           "SimpleRNN/LSTM/GRU are benched)",
    "BiRNN": "Paddle's wrapper running two cells both ways: torch has no cell-generic loop "
             "(bidirectional LSTM is benched)",
    "Maxout": "no torch layer",
    "SpectralNorm": "Paddle's layer returns the normalized weight; torch's spectral_norm is a "
                    "parametrization of another layer, not a layer",
    "BatchNorm": "Paddle's fluid-style alias of BatchNorm1D/2D/3D (benched as those)",
    "Silu": "alias of SiLU", "Swish": "Paddle's Swish is SiLU (benched as SiLU)",
}


def _img(size, c=None):
    n, ch, h = IMG[size]
    return (n, c or ch, h, h)


def _act(name, tname=None, **kw):
    def build(size):
        n, c, h, _ = _img(size)
        return {"make": {"ddg": lambda: getattr(nn, name)(**kw),
                         "torch": lambda torch: getattr(torch.nn, tname or name)(**kw)},
                "inputs": [(n, c, h, h)]}
    return build


def _ch(size):
    return IMG[size][1]


def _conv(dim, transposed=False, k=3, stride=1, padding=1, dilation=1, groups=1, cin=None):
    dname = f"Conv{dim}D" + ("Transpose" if transposed else "")
    tname = f"Conv{'Transpose' if transposed else ''}{dim}d"

    def build(size):
        n, c, h = IMG[size] if dim < 3 else VOL[size]
        ci = cin(c) if cin else c
        g = c if groups == "depthwise" else groups
        if dim == 1:
            shape = (n, ci, h * h // 4)
        elif dim == 2:
            shape = (n, ci, h, h)
        else:
            shape = (n, ci, h, h, h)
        args = (ci, c, k)
        kw = dict(stride=stride, padding=padding, dilation=dilation, groups=g)
        return {"make": {"ddg": lambda: getattr(nn, dname)(*args, **kw),
                         "torch": lambda torch: getattr(torch.nn, tname)(*args, **kw)},
                "inputs": [shape]}
    return build


def _norm(dname, tname, dim, ctor=lambda c: (c,), tctor=None):
    def build(size):
        n, c, h = IMG[size] if dim < 3 else VOL[size]
        shape = {1: (n, c, h * h // 4), 2: (n, c, h, h), 3: (n, c, h, h, h)}[dim]
        return {"make": {"ddg": lambda: getattr(nn, dname)(*ctor(c)),
                         "torch": lambda torch: getattr(torch.nn, tname)(*(tctor or ctor)(c))},
                "inputs": [shape]}
    return build


def _pool(dname, tname, dim, *args, **kw):
    def build(size):
        n, c, h = IMG[size] if dim < 3 else VOL[size]
        shape = {1: (n, c, h * h // 4), 2: (n, c, h, h), 3: (n, c, h, h, h)}[dim]
        return {"make": {"ddg": lambda: getattr(nn, dname)(*args, **kw),
                         "torch": lambda torch: getattr(torch.nn, tname)(*args, **kw)},
                "inputs": [shape]}
    return build


def _loss(dname, tname, kind, dkw=None, tkw=None):
    """Losses on [N, F] predictions: kind says what the other inputs are."""
    def build(size):
        n, f = VEC[size]
        inputs = {
            "reg": [(n, f), ("const", (n, f))],
            "prob": [("prob", (n, f)), ("prob", (n, f))],
            "logit": [(n, f), ("prob", (n, f))],
            "cls": [(n, f), ("int", (n,), f)],
            "logp": [("logsoftmax", (n, f)), ("int", (n,), f)],
            "sign": [(n, f), ("sign", (n, f))],
            "pair": [(n, f), (n, f), ("sign", (n,))],
            "rank": [(n,), (n,), ("sign", (n,))],
            "triplet": [(n, f), (n, f), (n, f)],
            "gauss": [(n, f), ("const", (n, f)), ("pos", (n, f))],
            "poisson": [(n, f), ("pos", (n, f))],
            "multilabel": [(n, f), ("binary", (n, f))],
            "kl": [("logsoftmax", (n, f)), ("prob", (n, f))],
        }[kind]
        return {"make": {"ddg": lambda: getattr(nn, dname)(**(dkw or {})),
                         "torch": lambda torch: getattr(torch.nn, tname)(**(tkw or dkw or {}))},
                "inputs": inputs, "loss": True}
    return build


def _seq_layer(dname, tname, dargs, targs, dkw=None, tkw=None, extra=()):
    def build(size):
        n, L, d = SEQ[size]
        return {"make": {"ddg": lambda: getattr(nn, dname)(*dargs(d), **(dkw or {})),
                         "torch": lambda torch: getattr(torch.nn, tname)(*targs(d), **(tkw or {}))},
                "inputs": [(n, L, d)] + [e(n, L, d) for e in extra]}
    return build


def _cell(dname, tname, lstm=False):
    def build(size):
        n, d = VEC[size][0], SEQ[size][2]
        inputs = [(n, d), (n, d)] + ([(n, d)] if lstm else [])
        return {"make": {"ddg": lambda: getattr(nn, dname)(d, d), "torch": lambda torch: getattr(torch.nn, tname)(d, d)},
                "inputs": inputs, "cell": "lstm" if lstm else "rnn"}
    return build


def _embedding(size):
    n, L, d = SEQ[size]
    v = VOCAB[size]
    return {"make": {"ddg": lambda: nn.Embedding(v, d), "torch": lambda torch: torch.nn.Embedding(v, d)},
            "inputs": [("int", (n, L), v)]}


LAYERS = {
    # activations
    "ReLU": _act("ReLU"), "ReLU6": _act("ReLU6"), "Sigmoid": _act("Sigmoid"), "Tanh": _act("Tanh"),
    "GELU": _act("GELU"), "SiLU": _act("SiLU"), "Mish": _act("Mish"), "LeakyReLU": _act("LeakyReLU"),
    "ELU": _act("ELU"), "SELU": _act("SELU"), "CELU": _act("CELU"), "Softplus": _act("Softplus"),
    "Hardswish": _act("Hardswish"), "Hardsigmoid": _act("Hardsigmoid"), "Hardtanh": _act("Hardtanh"),
    "Hardshrink": _act("Hardshrink"), "Softshrink": _act("Softshrink"), "Softsign": _act("Softsign"),
    "Tanhshrink": _act("Tanhshrink"), "LogSigmoid": _act("LogSigmoid"),
    "ThresholdedReLU": lambda size: {**_act("ThresholdedReLU")(size), "make": {
        "ddg": lambda: nn.ThresholdedReLU(1.0), "torch": lambda torch: torch.nn.Threshold(1.0, 0.0)}},
    "RReLU": _act("RReLU"),
    "PReLU": lambda size: {"make": {"ddg": lambda: nn.PReLU(_ch(size)),
                                    "torch": lambda torch: torch.nn.PReLU(_ch(size))},
                           "inputs": [_img(size)]},
    "Softmax": lambda size: {"make": {"ddg": lambda: nn.Softmax(-1), "torch": lambda torch: torch.nn.Softmax(-1)},
                             "inputs": [SEQ[size]]},
    "LogSoftmax": lambda size: {"make": {"ddg": lambda: nn.LogSoftmax(-1),
                                         "torch": lambda torch: torch.nn.LogSoftmax(-1)},
                                "inputs": [SEQ[size]]},
    "Softmax2D": _act("Softmax2D", "Softmax2d"),
    "GLU": lambda size: {"make": {"ddg": lambda: nn.GLU(-1), "torch": lambda torch: torch.nn.GLU(-1)},
                         "inputs": [SEQ[size]]},
    "Identity": _act("Identity"),
    # convolutions
    "Conv1D": _conv(1, k=5, padding=2),
    "Conv2D": _conv(2),
    "Conv3D": _conv(3),
    "Conv1DTranspose": _conv(1, transposed=True, k=4, stride=2, padding=1),
    "Conv2DTranspose": _conv(2, transposed=True, k=4, stride=2, padding=1),
    "Conv3DTranspose": _conv(3, transposed=True, k=4, stride=2, padding=1),
    "Conv2D/depthwise": _conv(2, groups="depthwise"),
    "Conv2D/groups4": _conv(2, groups=4),
    "Conv2D/dilated": _conv(2, dilation=2, padding=2),
    "Conv2D/7x7s2 stem": _conv(2, k=7, stride=2, padding=3, cin=lambda c: 3),
    "Conv2D/1x1": _conv(2, k=1, padding=0),
    "Conv2D/4x4s4 patches": _conv(2, k=4, stride=4, padding=0, cin=lambda c: 3),
    # norms
    "BatchNorm1D": _norm("BatchNorm1D", "BatchNorm1d", 1),
    "BatchNorm2D": _norm("BatchNorm2D", "BatchNorm2d", 2),
    "BatchNorm3D": _norm("BatchNorm3D", "BatchNorm3d", 3),
    "InstanceNorm1D": _norm("InstanceNorm1D", "InstanceNorm1d", 1, tctor=lambda c: (c, 1e-5, 0.1, True)),
    "InstanceNorm2D": _norm("InstanceNorm2D", "InstanceNorm2d", 2, tctor=lambda c: (c, 1e-5, 0.1, True)),
    "InstanceNorm3D": _norm("InstanceNorm3D", "InstanceNorm3d", 3, tctor=lambda c: (c, 1e-5, 0.1, True)),
    "GroupNorm": _norm("GroupNorm", "GroupNorm", 2, ctor=lambda c: (8, c)),
    "LayerNorm": _seq_layer("LayerNorm", "LayerNorm", lambda d: (d,), lambda d: (d,)),
    "LocalResponseNorm": _norm("LocalResponseNorm", "LocalResponseNorm", 2, ctor=lambda c: (5,)),
    # pooling, unpooling, resampling
    "MaxPool1D": _pool("MaxPool1D", "MaxPool1d", 1, 2, 2),
    "MaxPool2D": _pool("MaxPool2D", "MaxPool2d", 2, 2, 2),
    "MaxPool3D": _pool("MaxPool3D", "MaxPool3d", 3, 2, 2),
    "AvgPool1D": _pool("AvgPool1D", "AvgPool1d", 1, 2, 2),
    "AvgPool2D": _pool("AvgPool2D", "AvgPool2d", 2, 2, 2),
    "AvgPool3D": _pool("AvgPool3D", "AvgPool3d", 3, 2, 2),
    "AdaptiveAvgPool1D": _pool("AdaptiveAvgPool1D", "AdaptiveAvgPool1d", 1, 7),
    "AdaptiveAvgPool2D": _pool("AdaptiveAvgPool2D", "AdaptiveAvgPool2d", 2, 7),
    "AdaptiveAvgPool3D": _pool("AdaptiveAvgPool3D", "AdaptiveAvgPool3d", 3, 3),
    "AdaptiveMaxPool1D": _pool("AdaptiveMaxPool1D", "AdaptiveMaxPool1d", 1, 7),
    "AdaptiveMaxPool2D": _pool("AdaptiveMaxPool2D", "AdaptiveMaxPool2d", 2, 7),
    "AdaptiveMaxPool3D": _pool("AdaptiveMaxPool3D", "AdaptiveMaxPool3d", 3, 3),
    "MaxUnPool1D": lambda size: {**_pool("MaxUnPool1D", "MaxUnpool1d", 1, 2, 2)(size), "unpool": 1},
    "MaxUnPool2D": lambda size: {**_pool("MaxUnPool2D", "MaxUnpool2d", 2, 2, 2)(size), "unpool": 2},
    "MaxUnPool3D": lambda size: {**_pool("MaxUnPool3D", "MaxUnpool3d", 3, 2, 2)(size), "unpool": 3},
    "Upsample": _pool("Upsample", "Upsample", 2, scale_factor=2, mode="nearest"),
    "UpsamplingNearest2D": _pool("UpsamplingNearest2D", "UpsamplingNearest2d", 2, scale_factor=2),
    "UpsamplingBilinear2D": _pool("UpsamplingBilinear2D", "UpsamplingBilinear2d", 2, scale_factor=2),
    "PixelShuffle": _pool("PixelShuffle", "PixelShuffle", 2, 2),
    "PixelUnshuffle": lambda size: {**_pool("PixelUnshuffle", "PixelUnshuffle", 2, 2)(size), "even": True},
    "ChannelShuffle": _pool("ChannelShuffle", "ChannelShuffle", 2, 4),
    "Pad1D": lambda size: {"make": {"ddg": lambda: nn.Pad1D(2), "torch": lambda torch: torch.nn.ConstantPad1d(2, 0.0)},
                           "inputs": [(IMG_N[size], _ch(size), IMG[size][2] ** 2 // 4)]},
    "Pad2D": lambda size: {"make": {"ddg": lambda: nn.Pad2D(2, mode="reflect"),
                                    "torch": lambda torch: torch.nn.ReflectionPad2d(2)},
                           "inputs": [_img(size)]},
    "Pad3D": lambda size: {"make": {"ddg": lambda: nn.Pad3D(1, mode="replicate"),
                                    "torch": lambda torch: torch.nn.ReplicationPad3d(1)},
                           "inputs": [(VOL[size][0], VOL[size][1]) + (VOL[size][2],) * 3]},
    "ZeroPad2D": _pool("ZeroPad2D", "ZeroPad2d", 2, 2),
    "Flatten": _pool("Flatten", "Flatten", 2),
    "Unflatten": lambda size: {"make": {"ddg": lambda: nn.Unflatten(1, [4, _ch(size) // 4]),
                                        "torch": lambda torch: torch.nn.Unflatten(1, (4, _ch(size) // 4))},
                               "inputs": [_img(size)]},
    "Unfold": _pool("Unfold", "Unfold", 2, 3),
    "Fold": lambda size: {"make": {"ddg": lambda: nn.Fold(IMG[size][2], 2, strides=2),
                                   "torch": lambda torch: torch.nn.Fold(IMG[size][2], 2, stride=2)},
                          "inputs": [(IMG_N[size], _ch(size) * 4, (IMG[size][2] // 2) ** 2)]},
    # dropout (training mode)
    "Dropout": _act("Dropout"), "Dropout2D": _act("Dropout2D", "Dropout2d"),
    "Dropout3D": lambda size: {**_pool("Dropout3D", "Dropout3d", 3)(size)},
    "AlphaDropout": _act("AlphaDropout"),
    # linear, embedding, distances
    "Linear": lambda size: {"make": {"ddg": lambda: nn.Linear(VEC[size][1], VEC[size][1]),
                                     "torch": lambda torch: torch.nn.Linear(VEC[size][1], VEC[size][1])},
                            "inputs": [VEC[size]]},
    "Bilinear": lambda size: {"make": {"ddg": lambda: nn.Bilinear(SEQ[size][2], SEQ[size][2], 32),
                                       "torch": lambda torch: torch.nn.Bilinear(SEQ[size][2], SEQ[size][2], 32)},
                              "inputs": [(VEC[size][0], SEQ[size][2])] * 2},
    "Embedding": _embedding,
    "CosineSimilarity": lambda size: {"make": {"ddg": lambda: nn.CosineSimilarity(1),
                                               "torch": lambda torch: torch.nn.CosineSimilarity(1)},
                                      "inputs": [VEC[size]] * 2},
    "PairwiseDistance": lambda size: {"make": {"ddg": lambda: nn.PairwiseDistance(),
                                               "torch": lambda torch: torch.nn.PairwiseDistance()},
                                      "inputs": [VEC[size]] * 2},
    # recurrent and attention
    "SimpleRNN": _seq_layer("SimpleRNN", "RNN", lambda d: (d, d), lambda d: (d, d), tkw={"batch_first": True}),
    "LSTM": _seq_layer("LSTM", "LSTM", lambda d: (d, d), lambda d: (d, d), tkw={"batch_first": True}),
    "LSTM/bidirectional": _seq_layer("LSTM", "LSTM", lambda d: (d, d), lambda d: (d, d),
                                     dkw={"direction": "bidirect"},
                                     tkw={"batch_first": True, "bidirectional": True}),
    "GRU": _seq_layer("GRU", "GRU", lambda d: (d, d), lambda d: (d, d), tkw={"batch_first": True}),
    "SimpleRNNCell": _cell("SimpleRNNCell", "RNNCell"),
    "GRUCell": _cell("GRUCell", "GRUCell"),
    "LSTMCell": _cell("LSTMCell", "LSTMCell", lstm=True),
    "MultiHeadAttention": _seq_layer("MultiHeadAttention", "MultiheadAttention", lambda d: (d, 4), lambda d: (d, 4),
                                     tkw={"batch_first": True, "dropout": 0.0},
                                     extra=(lambda n, L, d: (n, L, d), lambda n, L, d: (n, L, d))),
    "TransformerEncoderLayer": _seq_layer("TransformerEncoderLayer", "TransformerEncoderLayer",
                                          lambda d: (d, 4, 4 * d), lambda d: (d, 4, 4 * d),
                                          dkw={"dropout": 0.0}, tkw={"batch_first": True, "dropout": 0.0}),
    "TransformerDecoderLayer": _seq_layer("TransformerDecoderLayer", "TransformerDecoderLayer",
                                          lambda d: (d, 4, 4 * d), lambda d: (d, 4, 4 * d),
                                          dkw={"dropout": 0.0}, tkw={"batch_first": True, "dropout": 0.0},
                                          extra=(lambda n, L, d: (n, L, d),)),
    "TransformerEncoder": lambda size: {"make": {
        "ddg": lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(SEQ[size][2], 4, 4 * SEQ[size][2],
                                                                        dropout=0.0), 2),
        "torch": lambda torch: torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
            SEQ[size][2], 4, 4 * SEQ[size][2], dropout=0.0, batch_first=True), 2, enable_nested_tensor=False)},
        "inputs": [SEQ[size]]},
    "TransformerDecoder": lambda size: {"make": {
        "ddg": lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(SEQ[size][2], 4, 4 * SEQ[size][2],
                                                                        dropout=0.0), 2),
        "torch": lambda torch: torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(
            SEQ[size][2], 4, 4 * SEQ[size][2], dropout=0.0, batch_first=True), 2)},
        "inputs": [SEQ[size]] * 2},
    "Transformer": lambda size: {"make": {
        "ddg": lambda: nn.Transformer(SEQ[size][2], 4, 1, 1, 4 * SEQ[size][2], dropout=0.0),
        "torch": lambda torch: torch.nn.Transformer(SEQ[size][2], 4, 1, 1, 4 * SEQ[size][2], dropout=0.0,
                                                    batch_first=True)},
        "inputs": [SEQ[size]] * 2},
    # losses
    "MSELoss": _loss("MSELoss", "MSELoss", "reg"),
    "L1Loss": _loss("L1Loss", "L1Loss", "reg"),
    "SmoothL1Loss": _loss("SmoothL1Loss", "SmoothL1Loss", "reg"),
    "BCELoss": _loss("BCELoss", "BCELoss", "prob"),
    "BCEWithLogitsLoss": _loss("BCEWithLogitsLoss", "BCEWithLogitsLoss", "logit"),
    "CrossEntropyLoss": _loss("CrossEntropyLoss", "CrossEntropyLoss", "cls"),
    "NLLLoss": _loss("NLLLoss", "NLLLoss", "logp"),
    "MultiMarginLoss": _loss("MultiMarginLoss", "MultiMarginLoss", "cls"),
    "KLDivLoss": _loss("KLDivLoss", "KLDivLoss", "kl", {"reduction": "batchmean"}),
    "SoftMarginLoss": _loss("SoftMarginLoss", "SoftMarginLoss", "sign"),
    "HingeEmbeddingLoss": _loss("HingeEmbeddingLoss", "HingeEmbeddingLoss", "sign"),
    "MultiLabelSoftMarginLoss": _loss("MultiLabelSoftMarginLoss", "MultiLabelSoftMarginLoss", "multilabel"),
    "CosineEmbeddingLoss": _loss("CosineEmbeddingLoss", "CosineEmbeddingLoss", "pair"),
    "MarginRankingLoss": _loss("MarginRankingLoss", "MarginRankingLoss", "rank"),
    "TripletMarginLoss": _loss("TripletMarginLoss", "TripletMarginLoss", "triplet"),
    "TripletMarginWithDistanceLoss": _loss("TripletMarginWithDistanceLoss", "TripletMarginWithDistanceLoss",
                                           "triplet"),
    "GaussianNLLLoss": _loss("GaussianNLLLoss", "GaussianNLLLoss", "gauss"),
    "PoissonNLLLoss": _loss("PoissonNLLLoss", "PoissonNLLLoss", "poisson"),
    "CTCLoss": lambda size: {"make": {"ddg": lambda: nn.CTCLoss(), "torch": lambda torch: torch.nn.CTCLoss()},
                             "inputs": [("logsoftmax", (SEQ[size][1] // 4, SEQ[size][0], 32))], "ctc": True},
}


def layer_name(case):
    """The ``ddg.nn`` class a sweep case benches (``Conv2D/depthwise`` benches ``Conv2D``)."""
    return case.split("/")[0]


def _draw(spec, rng):
    """numpy array and whether it requires grad for an input spec."""
    if isinstance(spec[0], int):
        return rng.standard_normal(spec).astype(np.float32), True
    kind, shape = spec[0], spec[1]
    if kind == "int":
        return rng.integers(0, spec[2], shape).astype(np.int64), False
    if kind == "const":
        return rng.standard_normal(shape).astype(np.float32), False
    if kind == "prob":
        return rng.uniform(0.05, 0.95, shape).astype(np.float32), True
    if kind == "pos":
        return rng.uniform(0.5, 2.0, shape).astype(np.float32), False
    if kind == "sign":
        return np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(np.float32), False
    if kind == "binary":
        return (rng.random(shape) < 0.5).astype(np.float32), False
    if kind == "logsoftmax":
        x = rng.standard_normal(shape).astype(np.float32)
        x -= np.log(np.exp(x).sum(-1, keepdims=True))
        return x, True
    raise ValueError(spec)


def build(case, size, torch=None, seed=0):
    """``{"ddg": step, "torch": step}`` for one case at one size (``torch`` absent without it).
    Each step runs forward and backward once."""
    spec = LAYERS[case](size)
    rng = np.random.default_rng(seed)
    arrays = [_draw(s, rng) for s in spec["inputs"]]
    if spec.get("unpool") or spec.get("even"):
        # unpooling a 2x2 max pool and pixel-unshuffling by 2 need even planes: odd sizes are cut
        a, grad = arrays[0]
        arrays[0] = (np.ascontiguousarray(a[(Ellipsis,) + tuple(slice(0, n - n % 2) for n in a.shape[2:])]), grad)
    # the first float input after a "prob" second input is the target: no grad there
    if spec.get("loss") and len(arrays) > 1 and spec["inputs"][1][0] == "prob":
        arrays[1] = (arrays[1][0], False)
    steps = {"ddg": _ddg_step(spec, arrays, rng)}
    if torch is not None:
        steps["torch"] = _torch_step(spec, arrays, torch)
    return steps


def _first(out):
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


def _ddg_step(spec, arrays, rng):
    layer = spec["make"]["ddg"]()
    layer.train()
    xs = []
    for a, grad in arrays:
        t = ddg.to_tensor(a)
        t.stop_gradient = not grad
        xs.append(t)
    if spec.get("unpool"):
        pool = getattr(ddg.nn.functional, f"max_pool{spec['unpool']}d")
        with ddg.no_grad():
            y, idx = pool(xs[0], 2, 2, return_mask=True)
        y.stop_gradient = False
        xs = [y, idx]
    if spec.get("ctc"):
        T, n, _ = arrays[0][0].shape
        lab = ddg.to_tensor(rng.integers(1, 32, (n, T // 3)).astype(np.int32))
        xs += [lab, ddg.to_tensor(np.full(n, T, np.int64)), ddg.to_tensor(np.full(n, T // 3, np.int64))]
    if spec.get("cell"):
        state = (xs[1], xs[2]) if spec["cell"] == "lstm" else xs[1]
        xs = [xs[0], state]
    out = _first(layer(*xs))
    g = None if spec.get("loss") or spec.get("ctc") else ddg.to_tensor(
        rng.standard_normal(out.shape).astype(np.float32))

    def step():
        o = _first(layer(*xs))
        o.backward(g)
    step.tensors = [t for t in xs if isinstance(t, ddg.Tensor)] + list(layer.parameters())
    return step


def _torch_step(spec, arrays, torch):
    layer = spec["make"]["torch"](torch)
    layer.train()
    xs = [torch.tensor(a, requires_grad=grad) for a, grad in arrays]
    rng = np.random.default_rng(1)
    if spec.get("unpool"):
        pool = getattr(torch.nn.functional, f"max_pool{spec['unpool']}d")
        with torch.no_grad():
            y, idx = pool(xs[0], 2, 2, return_indices=True)
        y.requires_grad_(True)
        xs = [y, idx]
    if spec.get("ctc"):
        T, n, _ = arrays[0][0].shape
        lab = torch.tensor(rng.integers(1, 32, (n, T // 3)).astype(np.int32))
        xs += [lab, torch.full((n,), T, dtype=torch.int64), torch.full((n,), T // 3, dtype=torch.int64)]
    if spec.get("cell"):
        state = (xs[1], xs[2]) if spec["cell"] == "lstm" else xs[1]
        xs = [xs[0], state]
    if isinstance(layer, torch.nn.MultiheadAttention):
        def call():
            return layer(*xs, need_weights=False)
    else:
        def call():
            return layer(*xs)
    out = _first(call())
    g = None if spec.get("loss") or spec.get("ctc") else torch.tensor(
        rng.standard_normal(tuple(out.shape)).astype(np.float32))

    def step():
        o = _first(call())
        o.backward(g)
    return step


def _calls_for(fn, min_time):
    t = time.perf_counter()
    fn()
    dt = max(time.perf_counter() - t, 1e-7)
    return max(1, int(min_time / dt))


def race(steps, rounds, min_time):
    """Median seconds per call of each step, rounds alternating between them. Each step runs
    once before its calls per round are counted: a first call loads (or compiles) lazily
    imported kernels, and counted from it a round would time a single call."""
    for f in steps.values():
        f()
    counts = {k: _calls_for(f, min_time) for k, f in steps.items()}
    times = {k: [] for k in steps}
    for _ in range(rounds):
        for k, f in steps.items():
            t = time.perf_counter()
            for _ in range(counts[k]):
                f()
            times[k].append((time.perf_counter() - t) / counts[k])
    return {k: float(np.median(v)) for k, v in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated case names (or prefixes like Conv2D)")
    ap.add_argument("--sizes", default="s,m,l")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.02, help="seconds per timed round and framework")
    ap.add_argument("--markdown", default="", help="also write the table to this file")
    args = ap.parse_args(argv)
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
        print("torch is not importable: ddg times only")
    only = [s for s in args.only.split(",") if s]
    cases = [c for c in LAYERS if not only or any(c == o or c.startswith(o + "/") for o in only)]
    sizes = [s for s in args.sizes.split(",") if s]
    rows, ratios = [], []
    for case in cases:
        cells = []
        for size in sizes:
            try:
                steps = build(case, size, torch)
                t = race(steps, args.rounds, args.min_time)
            except Exception as exc:  # a broken case is reported, the sweep goes on
                cells.append(f"error: {type(exc).__name__}: {str(exc)[:60]}")
                continue
            if torch is not None:
                r = t["ddg"] / t["torch"]
                ratios.append((r, case, size))
                cells.append(f"{t['ddg'] * 1e3:.3g} / {t['torch'] * 1e3:.3g} = **{r:.2f}**")
            else:
                cells.append(f"{t['ddg'] * 1e3:.3g}")
        rows.append(f"| {case} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    head = ("ms ddg / ms torch = ratio" if torch is not None else "ms ddg")
    table = [f"| layer | " + " | ".join(f"{s} ({head})" for s in sizes) + " |",
             "|---|" + "---|" * len(sizes)] + rows
    if ratios:
        rs = np.array([r for r, _, _ in ratios])
        worst = sorted(ratios, reverse=True)[:10]
        summary = (f"\n{len(rs)} cases: median ratio {np.median(rs):.2f}, "
                   f"{(rs <= 1.5).sum()} <= 1.5x, {(rs <= 1.0).sum()} <= 1.0x; worst: "
                   + ", ".join(f"{c} {s} {r:.1f}" for r, c, s in worst))
    else:
        summary = ""
    text = "\n".join(table) + "\n" + summary + "\n"
    print("\n" + text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
