"""ddg.vision.models against numbers read from PaddlePaddle 3.3.1 (CPU); every name of
Paddle's ``paddle.vision.models`` is here.

For each constructor call: the output shape on a small input (eval mode), the number
of state-dict entries, the total number of values in them (Paddle's parameter count,
batch-norm statistics included), and the first 16 hex digits of the SHA-256 of
``repr([(name, shape), ...])`` over the state dict in order, i.e. every name, shape
and their order are Paddle's. The big models (over ~30M values) are built
without drawing their initial values, which would cost seconds each and is not what
these cases check. ``NUMERIC`` holds forward values of Paddle's
models with deterministic weights: the same computation, not only the same shapes.
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
    # the rest of the zoo
    ("mobilenet_v3_small()", [1, 3, 32, 32], [1, 1000], 210, 2554968, "3ceac3d5153eef11"),
    ("mobilenet_v3_large()", [1, 3, 32, 32], [1, 1000], 266, 5507432, "1791101f54eeea74"),
    ("mobilenet_v3_small(scale=0.5, num_classes=10)", [2, 3, 32, 32], [2, 10], 210, 415538, "e7f83fb5199cf56d"),
    ("mobilenet_v3_large(scale=0.75, num_classes=0, with_pool=False)", [1, 3, 32, 32], [1, 720, 1, 1], 262, 1742832,
     "6d1f88733421b163"),
    ("squeezenet1_0()", [1, 3, 64, 64], [1, 1000], 52, 1248424, "1238fe9635923a1c"),
    ("squeezenet1_1()", [1, 3, 64, 64], [1, 1000], 52, 1235496, "76fd78a644f0f2f0"),
    ("squeezenet1_1(num_classes=10, with_pool=False)", [1, 3, 64, 64], [1, 10, 3, 3], 52, 727626, "200d4c6f2ea93c61"),
    ("shufflenet_v2_x0_25()", [1, 3, 32, 32], [1, 1000], 282, 607712, "bd597defc189da7c"),
    ("shufflenet_v2_x0_33()", [1, 3, 32, 32], [1, 1000], 282, 652264, "781f900af6a21df2"),
    ("shufflenet_v2_x0_5()", [1, 3, 32, 32], [1, 1000], 282, 1374744, "c4e2b2275a865785"),
    ("shufflenet_v2_x1_0()", [1, 3, 32, 32], [1, 1000], 282, 2294784, "c2c1cbd7ea3d6005"),
    ("shufflenet_v2_x1_5()", [1, 3, 32, 32], [1, 1000], 282, 3527064, "a999327aa43ab6f7"),
    ("shufflenet_v2_x2_0()", [1, 3, 32, 32], [1, 1000], 282, 7399952, "480c07c0ae4ea7f9"),
    ("shufflenet_v2_swish(num_classes=10)", [2, 3, 32, 32], [2, 10], 282, 1280034, "449ea4c4578ed74f"),
    ("shufflenet_v2_x1_0(num_classes=0, with_pool=False)", [1, 3, 32, 32], [1, 1024, 1, 1], 280, 1269784,
     "fca1c40782f07d7b"),
    ("densenet121()", [1, 3, 32, 32], [1, 1000], 606, 8062504, "80fc1224d4426dfd"),
    ("densenet121(bn_size=2, dropout=0.1, num_classes=10)", [2, 3, 32, 32], [2, 10], 606, 3946570, "863be4d759083820"),
    ("densenet161(num_classes=0)", None, None, 804, 26691936, "645081f2f16e9ee3"),
    ("densenet169()", None, None, 846, 14307880, "e2aba8ad88b3e626"),
    ("densenet201()", None, None, 1006, 20242984, "70494ddfbb581757"),
    ("densenet264()", None, None, 1326, 33736232, "79052f21e38f3208"),
    ("googlenet()", [1, 3, 224, 224], [[1, 1000], [1, 1000], [1, 1000]], 69, 11535736, "1f62410ba3378797"),
    ("googlenet(num_classes=0)", [1, 3, 224, 224], [[1, 1024, 1, 1], [1, 512, 3, 3], [1, 528, 3, 3]], 57, 5966272,
     "bef56719bb48261b"),
    ("inception_v3()", [1, 3, 75, 75], [1, 1000], 472, 23869000, "155ed3cd7c1c08b2"),
    ("inception_v3(num_classes=0, with_pool=False)", [1, 3, 75, 75], [1, 2048, 1, 1], 470, 21820000, "9dee390318282a80"),
]

# Forward values with every state-dict entry set to sin(0.37 i + k) / sqrt(fan-in) (k: the
# entry's position; variances |.| + 0.5) on the input sin(0.37 i + 0.5), eval mode:
# (constructor, input shape, per output: (sum, sum of |values|, first four values)).
NUMERIC = [
    ("LeNet()", [2, 1, 28, 28], [(-11.43457, 17.01334, [-0.5730091, -0.9458119, -1.190603, -1.274252])]),
    ("resnet18(num_classes=10)", [2, 3, 32, 32], [(17.64942, 19.99529, [-0.5863889, 0.04648572, 0.6730697, 1.208557])]),
    ("vgg11(batch_norm=True, num_classes=0)", [1, 3, 32, 32],
     [(19382.11, 19382.11, [0.8226656, 0.8226656, 0.8226656, 0.8226656])]),
    ("alexnet(num_classes=0)", [1, 3, 64, 64], [(82.81434, 82.81434, [0.4256003, 0.05589351, 0.0, 0.0])]),
    ("mobilenet_v1(scale=0.25, num_classes=10)", [2, 3, 32, 32],
     [(-6.943288, 24.81205, [-1.620376, -1.807383, -1.749769, -1.455332])]),
    ("mobilenet_v2(scale=0.5, num_classes=10)", [2, 3, 32, 32],
     [(-40.37917, 51.46417, [2.122835, 0.6484153, -0.9137653, -2.352273])]),
    ("mobilenet_v3_small(num_classes=10)", [2, 3, 32, 32],
     [(-2.204408, 13.49918, [0.9802749, 0.87082, 0.6435039, 0.3290924])]),
    ("mobilenet_v3_large(scale=0.5, num_classes=10)", [1, 3, 32, 32],
     [(1.975709, 6.568856, [0.8476539, 0.9565758, 0.9360291, 0.7887957])]),
    ("squeezenet1_0(num_classes=10)", [1, 3, 64, 64], [(6.6134, 6.6134, [0.0, 0.0, 0.0, 1.691052])]),
    ("squeezenet1_1(num_classes=10)", [1, 3, 64, 64], [(6.614544, 6.614544, [0.0, 0.0, 0.0, 1.698025])]),
    ("shufflenet_v2_x0_25(num_classes=10)", [2, 3, 32, 32],
     [(55.2423, 61.34328, [-1.525246, 0.4456824, 2.356294, 3.947989])]),
    ("shufflenet_v2_swish(num_classes=10)", [1, 3, 32, 32],
     [(-0.6105536, 4.373365, [-0.6168741, -0.6386443, -0.5739723, -0.4316232])]),
    ("densenet121(num_classes=10)", [1, 3, 32, 32],
     [(7.834324, 19.63641, [-2.671259, -2.037223, -1.127461, -0.06510223])]),
    ("googlenet(num_classes=10)", [1, 3, 224, 224],
     [(0.131993, 6.932358, [0.9928727, 0.9687797, 0.813567, 0.5482417]),
      (4.550179, 6.423659, [0.4733713, 0.7737741, 0.96945, 1.033916]),
      (2.550431, 6.861922, [-0.9407772, -0.731986, -0.4241238, -0.05885848])]),
    ("inception_v3(num_classes=10)", [1, 3, 75, 75],
     [(3.794849, 9.052353, [-1.222372, -0.9176509, -0.4887289, 0.006335914])]),
]

BIG = 30_000_000   # parameters: above this, drawing the initial values costs more than the check


def _params(case):
    return pytest.param(*case, id=case[0])


@pytest.mark.parametrize("expr,in_shape,out_shape,entries,values,digest", [_params(c) for c in PADDLE])
def test_architecture_matches_paddle(expr, in_shape, out_shape, entries, values, digest, monkeypatch):
    if values > BIG:    # the parameters' values are not checked here: leave them as allocated, undrawn
        monkeypatch.setattr(nn.initializer.Initializer, "__call__", lambda self, param, block=None: param)
    model = eval("M." + expr)
    items = [(k, list(v.shape)) for k, v in model.state_dict().items()]
    assert len(items) == entries
    assert sum(int(np.prod(s)) for _, s in items) == values
    assert hashlib.sha256(repr(items).encode()).hexdigest()[:16] == digest
    if in_shape is not None:
        model.eval()
        with ddg.no_grad():
            out = model(ddg.rand(in_shape))
        outs = list(out) if isinstance(out, tuple) else [out]
        assert [o.shape for o in outs] == (out_shape if isinstance(out_shape[0], list) else [out_shape])
        assert all(np.isfinite(o.numpy()).all() for o in outs)


def _det(shape, k):
    return np.sin(np.arange(int(np.prod(shape)), dtype=np.float64) * 0.37 + k).reshape(shape)


@pytest.mark.parametrize("expr,in_shape,expected", NUMERIC, ids=[c[0] for c in NUMERIC])
def test_forward_values_match_paddle(expr, in_shape, expected):
    model = eval("M." + expr)
    state = {}
    for k, (name, v) in enumerate(model.state_dict().items()):
        shape = list(v.shape)
        a = _det(shape, k) / np.sqrt(max(int(np.prod(shape[1:])) if len(shape) > 1 else 1, 1))
        state[name] = (np.abs(a) + 0.5 if name.endswith("_variance") else a).astype(np.float32)
    model.set_state_dict(state)
    model.eval()
    with ddg.no_grad():
        out = model(ddg.to_tensor(_det(in_shape, 0.5).astype(np.float32)))
    outs = list(out) if isinstance(out, tuple) else [out]
    assert len(outs) == len(expected)
    for o, (total, total_abs, first) in zip(outs, expected):
        v = o.numpy().astype(np.float64)
        np.testing.assert_allclose(v.reshape(-1)[:4], first, rtol=1e-4, atol=1e-5)
        assert v.sum() == pytest.approx(total, rel=1e-4, abs=1e-4)
        assert np.abs(v).sum() == pytest.approx(total_abs, rel=1e-4)


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
                                M.mobilenet_v1, M.mobilenet_v2, M.mobilenet_v3_small, M.squeezenet1_1,
                                M.shufflenet_v2_x1_0, M.shufflenet_v2_swish, M.densenet121, M.googlenet,
                                M.inception_v3])
def test_pretrained_is_a_clear_error(fn):
    with pytest.raises(ValueError, match=r"pretrained weights.*\.pdparams"):
        fn(pretrained=True)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="versions"):
        M.SqueezeNet("2.0")
    with pytest.raises(NotImplementedError, match="scale"):
        M.ShuffleNetV2(scale=0.75)
    with pytest.raises(ValueError, match="layers"):
        M.DenseNet(layers=100)
    with pytest.raises(ValueError, match="depth"):
        M.ResNet(M.resnet.BasicBlock, depth=20)
    with pytest.raises(NotImplementedError, match="dilation"):
        M.resnet.BasicBlock(4, 4, dilation=2)


def test_every_paddle_name_is_here():
    paddle_names = [
        "ResNet", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext50_64x4d",
        "resnext101_32x4d", "resnext101_64x4d", "resnext152_32x4d", "resnext152_64x4d", "wide_resnet50_2",
        "wide_resnet101_2", "VGG", "vgg11", "vgg13", "vgg16", "vgg19", "MobileNetV1", "mobilenet_v1", "MobileNetV2",
        "mobilenet_v2", "MobileNetV3Small", "MobileNetV3Large", "mobilenet_v3_small", "mobilenet_v3_large", "LeNet",
        "DenseNet", "densenet121", "densenet161", "densenet169", "densenet201", "densenet264", "AlexNet", "alexnet",
        "InceptionV3", "inception_v3", "SqueezeNet", "squeezenet1_0", "squeezenet1_1", "GoogLeNet", "googlenet",
        "ShuffleNetV2", "shufflenet_v2_x0_25", "shufflenet_v2_x0_33", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
        "shufflenet_v2_x1_5", "shufflenet_v2_x2_0", "shufflenet_v2_swish"]   # Paddle 3.3.1's __all__
    assert sorted(M.__all__) == sorted(paddle_names)
    assert all(callable(getattr(M, n)) for n in paddle_names)


def test_layer_named_drop_is_not_shadowed():
    # Paddle's models call their Dropout sublayer self._drop; no Layer method may shadow it
    class Net(nn.Layer):
        def __init__(self):
            super().__init__()
            self._drop = nn.Dropout(0.5)

        def forward(self, x):
            return self._drop(x)

    net = Net()
    net.eval()
    x = ddg.ones([2, 3])
    np.testing.assert_array_equal(net(x).numpy(), x.numpy())
