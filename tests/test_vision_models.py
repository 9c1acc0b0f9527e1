"""ddg.vision.models against numbers read from PaddlePaddle 3.3.1 (CPU).

For each constructor call: the output shape on a small input (eval mode), the number
of state-dict entries, the total number of values in them (Paddle's parameter count,
batch-norm statistics included), and the first 16 hex digits of the SHA-256 of
``repr([(name, shape), ...])`` over the state dict in order, i.e. every name, shape
and their order are Paddle's. The big models (over ~30M values) are built only with
``DDG_TEST_BIG_MODELS=1`` (they take seconds and hundreds of MB each); the table was
checked in full against ddg when written.
"""
import hashlib
import os

import numpy as np
import pytest

import ddg
from ddg import nn

M = ddg.vision.models

# (constructor, input shape, output shape, entries, values, digest)
PADDLE = [
    ("resnet18()", [1, 3, 32, 32], [1, 1000], 102, 11699112, "facd3ec960062891"),
    ("resnet34()", [1, 3, 32, 32], [1, 1000], 182, 21814696, "0779e68ca837c0a1"),
    ("resnet50()", [1, 3, 32, 32], [1, 1000], 267, 25610152, "10092fd9f5d39cce"),
    ("resnet101()", [1, 3, 32, 32], [1, 1000], 522, 44654504, "9fa75b3e9548b0c3"),
    ("resnet152()", [1, 3, 32, 32], [1, 1000], 777, 60344232, "9be0c7665e48f004"),
    ("resnet18(num_classes=10, with_pool=False)", None, None, 102, 11191242, "f5221b477df456d4"),
    ("resnet18(num_classes=0)", [1, 3, 32, 32], [1, 512, 1, 1], 100, 11186112, "a13ed738e9d2ccdd"),
    ("resnet50(num_classes=0, with_pool=False)", [1, 3, 32, 32], [1, 2048, 1, 1], 265, 23561152, "2ccbb08e6adffff6"),
    ("resnext50_32x4d()", [1, 3, 32, 32], [1, 1000], 267, 25097128, "92aa1d136617ba23"),
    ("resnext50_64x4d(num_classes=0)", None, None, 265, 43241920, "b450f8bef4e61050"),
    ("resnext101_32x4d(num_classes=0)", None, None, 520, 42266560, "a92e6dd542deb72c"),
    ("resnext101_64x4d(num_classes=0)", None, None, 520, 81609152, "a415aca9e4b51ca1"),
    ("resnext152_32x4d(num_classes=0)", None, None, 775, 58101696, "8484c4063a50b018"),
    ("resnext152_64x4d(num_classes=0)", None, None, 775, 113217984, "ac69c10088f92eb4"),
    ("wide_resnet50_2()", [1, 3, 32, 32], [1, 1000], 267, 68951464, "a7da092fc6d6666e"),
    ("wide_resnet101_2(num_classes=0)", None, None, 520, 124975552, "47f622cca45e32d3"),
    ("vgg11()", None, None, 22, 132863336, "44b562616f7217ed"),
    ("vgg11(batch_norm=True)", None, None, 54, 132874344, "4b8a46a420c9c2b0"),
    ("vgg13(batch_norm=True, num_classes=0)", [1, 3, 32, 32], [1, 512, 7, 7], 60, 9416768, "b8c64579fc137d6c"),
    ("vgg16(num_classes=0)", [1, 3, 32, 32], [1, 512, 7, 7], 26, 14714688, "63631a6de59c683d"),
    ("vgg19(batch_norm=True, num_classes=0, with_pool=False)", [1, 3, 32, 32], [1, 512, 1, 1], 96, 20046400,
     "73365105deae325a"),
    ("vgg16()", None, None, 32, 138357544, "a8aa3e81e45089bb"),
    ("vgg19()", None, None, 38, 143667240, "b8ec47d4241a1a63"),
    ("alexnet()", [1, 3, 224, 224], [1, 1000], 16, 61100840, "7a099ad33ff89cd1"),
    ("alexnet(num_classes=0)", [1, 3, 64, 64], [1, 256, 1, 1], 10, 2469696, "c555fc484657294f"),
    ("mobilenet_v1()", [1, 3, 32, 32], [1, 1000], 137, 4253864, "ba0aadadf38a6310"),
    ("mobilenet_v1(scale=0.5, num_classes=10)", [2, 3, 32, 32], [2, 10], 137, 834666, "6b9fa3e14bcda175"),
    ("mobilenet_v1(num_classes=0, with_pool=False)", [1, 3, 32, 32], [1, 1024, 1, 1], 135, 3228864,
     "690e7c29d0cecdf0"),
    ("mobilenet_v2()", [1, 3, 32, 32], [1, 1000], 262, 3538984, "48b5afe8a1adc92a"),
    ("mobilenet_v2(scale=0.5, num_classes=10)", [2, 3, 32, 32], [2, 10], 262, 719034, "45fed299f760fea4"),
    ("mobilenet_v2(scale=1.4, num_classes=0)", [1, 3, 32, 32], [1, 1792, 1, 1], 260, 4363712, "ff671d76574702a9"),
    ("LeNet()", [1, 1, 28, 28], [1, 10], 10, 61610, "b90b979b8bb2fa7f"),
    ("LeNet(num_classes=0)", [1, 1, 28, 28], [1, 16, 5, 5], 4, 2476, "7bebd0313ffad0be"),
]

BIG = 30_000_000
RUN_BIG = os.environ.get("DDG_TEST_BIG_MODELS") == "1"


def _params(case):
    marks = []
    if case[4] > BIG and not RUN_BIG:
        marks.append(pytest.mark.skip(reason="big model: set DDG_TEST_BIG_MODELS=1"))
    return pytest.param(*case, id=case[0], marks=marks)


@pytest.mark.parametrize("expr,in_shape,out_shape,entries,values,digest", [_params(c) for c in PADDLE])
def test_architecture_matches_paddle(expr, in_shape, out_shape, entries, values, digest):
    model = eval("M." + expr)
    items = [(k, list(v.shape)) for k, v in model.state_dict().items()]
    assert len(items) == entries
    assert sum(int(np.prod(s)) for _, s in items) == values
    assert hashlib.sha256(repr(items).encode()).hexdigest()[:16] == digest
    if in_shape is not None:
        model.eval()
        with ddg.no_grad():
            out = model(ddg.rand(in_shape))
        assert out.shape == out_shape
        assert np.isfinite(out.numpy()).all()


def test_resnet_trains_one_step():
    ddg.seed(0)
    model = ddg.Model(M.resnet18(num_classes=4))
    model.prepare(ddg.optimizer.SGD(learning_rate=0.01, parameters=model.parameters()), nn.CrossEntropyLoss())
    x = np.random.default_rng(0).standard_normal((4, 3, 32, 32)).astype(np.float32)
    y = np.array([[0], [1], [2], [3]], dtype=np.int64)
    before = model.network.conv1.weight.numpy().copy()
    mean_before = model.network.bn1._mean.numpy().copy()
    loss = model.train_batch([x], [y])
    assert np.isfinite(loss[0]) and not np.array_equal(before, model.network.conv1.weight.numpy())
    assert not np.array_equal(mean_before, model.network.bn1._mean.numpy())   # running statistics moved


@pytest.mark.parametrize("fn", [M.resnet18, M.resnext50_32x4d, M.wide_resnet50_2, M.vgg16, M.alexnet,
                                M.mobilenet_v1, M.mobilenet_v2])
def test_pretrained_is_a_clear_error(fn):
    with pytest.raises(ValueError, match=r"pretrained weights.*\.pdparams"):
        fn(pretrained=True)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="depth"):
        M.ResNet(M.resnet.BasicBlock, depth=20)
    with pytest.raises(NotImplementedError, match="dilation"):
        M.resnet.BasicBlock(4, 4, dilation=2)
