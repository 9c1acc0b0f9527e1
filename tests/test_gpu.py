"""GPU (cupy) tests: every layer, loss and optimizer gives the CPU's results on the GPU,
a training step makes no hidden device-to-host copies, tensors move between places
with gradients flowing, and GPU tensors save/load.

The whole module is skipped where cupy is missing or sees no GPU. (The op table runs
on the GPU through the ``place`` fixture of conftest.py, in test_ops_table.py.)

Tolerances: cuBLAS/cuDNN sum in other orders than numpy/OpenBLAS, and cuDNN may use
TF32 Tensor Cores for float32 convolutions on Ampere and newer GPUs (about 10 mantissa
bits per product), so convolution layers are compared with looser tolerances.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import ddg
from ddg.tensor import backend

pytestmark = pytest.mark.skipif(not backend.cupy_available(),
                                reason="GPU tests need cupy and an NVIDIA GPU (cupy is not installed or sees no GPU)")

if backend.cupy_available():  # pragma: no cover - GPU only
    cp = backend.cupy_module()
else:
    cp = None

import ddg.nn as nn  # noqa: E402
import ddg.nn.functional as F  # noqa: E402
from gpu_helpers import D2HCounter, cupti_device_to_host_copies  # noqa: E402

TIGHT = dict(rtol=1e-4, atol=1e-5)
LOOSE = dict(rtol=5e-3, atol=5e-3)     # convolutions (cuDNN, possibly TF32)


def _host(t):
    return None if t is None else (t.numpy() if hasattr(t, "numpy") else backend.to_host(t))


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def _twins(make):
    """The same layer on the CPU and on the GPU, the GPU one loaded from the CPU one's state_dict."""
    ddg.seed(0)
    cpu = make()
    gpu = make()
    gpu.set_state_dict(cpu.state_dict())
    gpu.to("gpu")
    for p in gpu.parameters():
        assert backend.is_gpu_array(p._data), p.name
    return cpu, gpu


def _fwd_bwd(layer, x, wout, place, int_input=False):
    """Forward ``x`` (a numpy array) on ``place``, backward ``sum(out * wout)``;
    returns (output, input gradient or None, {param name: grad})."""
    xt = ddg.to_tensor(x, place=place, stop_gradient=int_input)
    out = _first(layer(xt))
    w = ddg.to_tensor(wout, place=place)
    (out * w).sum().backward()
    grads = {n: _host(p.grad) for n, p in layer.named_parameters() if not p.stop_gradient}
    return _host(out), (None if int_input else _host(xt.grad)), grads


LAYERS = [
    ("linear", lambda: nn.Linear(8, 5), (4, 8), TIGHT),
    ("conv", lambda: nn.Conv2D(3, 4, 3, padding=1), (2, 3, 8, 8), LOOSE),
    ("conv_stride2", lambda: nn.Conv2D(3, 4, 3, stride=2, padding=1), (2, 3, 9, 9), LOOSE),
    ("conv_groups", lambda: nn.Conv2D(4, 6, 3, groups=2), (2, 4, 7, 7), LOOSE),
    ("conv_dilation", lambda: nn.Conv2D(3, 4, 3, dilation=2, padding=2), (2, 3, 8, 8), LOOSE),
    ("conv_nobias", lambda: nn.Conv2D(3, 4, 1, bias_attr=False), (2, 3, 5, 5), LOOSE),
    ("conv_transpose", lambda: nn.Conv2DTranspose(4, 3, 3, stride=2, padding=1, output_padding=1),
     (2, 4, 5, 5), LOOSE),
    ("conv1d", lambda: nn.Conv1D(3, 4, 3, padding=1), (2, 3, 10), LOOSE),
    ("maxpool", lambda: nn.MaxPool2D(2, 2), (2, 3, 8, 8), TIGHT),
    ("maxpool_pad", lambda: nn.MaxPool2D(3, 2, padding=1), (2, 3, 9, 9), TIGHT),
    ("maxpool_ceil", lambda: nn.MaxPool2D(3, 2, ceil_mode=True), (2, 3, 8, 8), TIGHT),
    ("avgpool", lambda: nn.AvgPool2D(2, 2), (2, 3, 8, 8), TIGHT),
    ("avgpool_pad_inclusive", lambda: nn.AvgPool2D(3, 2, padding=1, exclusive=False), (2, 3, 9, 9), TIGHT),
    ("avgpool_pad_exclusive", lambda: nn.AvgPool2D(3, 2, padding=1), (2, 3, 9, 9), TIGHT),
    ("adaptive_avgpool", lambda: nn.AdaptiveAvgPool2D(3), (2, 3, 8, 8), TIGHT),
    ("batchnorm2d", lambda: nn.BatchNorm2D(3), (4, 3, 5, 5), TIGHT),
    ("batchnorm1d", lambda: nn.BatchNorm1D(6), (8, 6), TIGHT),
    ("layernorm", lambda: nn.LayerNorm(8), (4, 3, 8), TIGHT),
    ("groupnorm", lambda: nn.GroupNorm(2, 4), (2, 4, 3, 3), TIGHT),
    ("lstm", lambda: nn.LSTM(8, 6), (3, 5, 8), TIGHT),
    ("gru", lambda: nn.GRU(8, 6, direction="bidirect"), (3, 5, 8), TIGHT),
    ("simple_rnn", lambda: nn.SimpleRNN(8, 6, num_layers=2), (3, 5, 8), TIGHT),
    ("mha", lambda: nn.MultiHeadAttention(16, 4), (2, 5, 16), TIGHT),
    ("transformer_encoder_layer", lambda: nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0), (2, 5, 16), TIGHT),
    ("prelu", lambda: nn.PReLU(3), (2, 3, 4, 4), TIGHT),
    ("conv1d_transpose", lambda: nn.Conv1DTranspose(4, 3, 3, stride=2), (2, 4, 6), LOOSE),
    ("maxpool1d", lambda: nn.MaxPool1D(2, 2), (2, 3, 8), TIGHT),
    ("avgpool1d", lambda: nn.AvgPool1D(3, 2, padding=1), (2, 3, 9), TIGHT),
    ("adaptive_avgpool1d", lambda: nn.AdaptiveAvgPool1D(3), (2, 3, 8), TIGHT),
    ("adaptive_maxpool1d", lambda: nn.AdaptiveMaxPool1D(3), (2, 3, 8), TIGHT),
    ("adaptive_maxpool2d", lambda: nn.AdaptiveMaxPool2D(3), (2, 3, 8, 8), TIGHT),
    ("batchnorm3d", lambda: nn.BatchNorm3D(2), (2, 2, 3, 3, 3), TIGHT),
    ("instancenorm1d", lambda: nn.InstanceNorm1D(3), (2, 3, 6), TIGHT),
    ("instancenorm2d", lambda: nn.InstanceNorm2D(3), (2, 3, 4, 4), TIGHT),
    ("pad1d_replicate", lambda: nn.Pad1D(2, mode="replicate"), (2, 3, 5), TIGHT),
    ("pad2d_reflect", lambda: nn.Pad2D(1, mode="reflect"), (2, 3, 4, 4), TIGHT),
    ("pad3d_constant", lambda: nn.Pad3D(1, value=0.5), (1, 2, 3, 3, 3), TIGHT),
    ("pad3d_circular", lambda: nn.Pad3D([1, 2, 0, 1, 2, 0], mode="circular"), (1, 2, 3, 3, 3), TIGHT),
    ("unfold", lambda: nn.Unfold(2), (2, 3, 4, 4), TIGHT),
    ("fold_strided_padded", lambda: nn.Fold([5, 4], [3, 2], strides=[2, 1], paddings=1, dilations=[1, 2]), (2, 18, 12),
     TIGHT),
    ("upsample_nearest", lambda: nn.Upsample(scale_factor=2, mode="nearest"), (2, 3, 4, 4), TIGHT),
    ("upsample_bilinear", lambda: nn.UpsamplingBilinear2D(scale_factor=2), (2, 3, 4, 4), TIGHT),
    ("flatten", lambda: nn.Flatten(), (2, 3, 4), TIGHT),
    ("lstm_cell", lambda: nn.LSTMCell(8, 6), (3, 8), TIGHT),
    ("birnn", lambda: nn.BiRNN(nn.LSTMCell(8, 6), nn.GRUCell(8, 6)), (3, 5, 8), TIGHT),
    ("transformer_decoder_layer", lambda: _SelfAttending(nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0)),
     (2, 5, 16), TIGHT),
    ("transformer", lambda: _SelfAttending(nn.Transformer(16, 4, 1, 1, 32, dropout=0.0)), (2, 5, 16), TIGHT),
] + [(f"act_{name}", make, (3, 7), TIGHT) for name, make in [
    ("relu6", nn.ReLU6), ("elu", nn.ELU), ("gelu", nn.GELU), ("gelu_tanh", lambda: nn.GELU(approximate=True)),
    ("hardswish", nn.Hardswish), ("hardtanh", nn.Hardtanh), ("leaky_relu", nn.LeakyReLU),
    ("log_sigmoid", nn.LogSigmoid), ("log_softmax", nn.LogSoftmax), ("mish", nn.Mish), ("silu", nn.SiLU),
    ("sigmoid", nn.Sigmoid), ("softmax", nn.Softmax), ("softplus", nn.Softplus), ("softsign", nn.Softsign),
    ("swish", nn.Swish), ("tanh", nn.Tanh), ("tanhshrink", nn.Tanhshrink)]]


class _SelfAttending(nn.Layer):
    """Feeds one input as both arguments of a two-input layer (decoder target and memory)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x, x)


@pytest.mark.parametrize("name,make,shape,tol", LAYERS, ids=[row[0] for row in LAYERS])
def test_layer_on_gpu_equals_cpu(name, make, shape, tol):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    out_shape = _first(make()(ddg.to_tensor(x))).shape     # a throwaway instance, for the shape
    wout = rng.standard_normal(out_shape).astype(np.float32)
    cpu, gpu = _twins(make)
    out_c, gx_c, g_c = _fwd_bwd(cpu, x, wout, "cpu")
    out_g, gx_g, g_g = _fwd_bwd(gpu, x, wout, "gpu")
    np.testing.assert_allclose(out_g, out_c, err_msg=f"{name}: forward", **tol)
    np.testing.assert_allclose(gx_g, gx_c, err_msg=f"{name}: input gradient", **tol)
    assert g_g.keys() == g_c.keys()
    for k in g_c:
        np.testing.assert_allclose(g_g[k], g_c[k], err_msg=f"{name}: gradient of {k}", **tol)
    # running statistics (BatchNorm) follow too
    def stats(layer):  # buffers, and parameters that need no gradient (BatchNorm's _mean, _variance)
        return [(k, t) for k, t in layer.named_parameters() if t.stop_gradient] + list(layer.named_buffers())
    for (k, b_c), (_, b_g) in zip(stats(cpu), stats(gpu)):
        assert backend.is_gpu_array(b_g._data), k
        np.testing.assert_allclose(_host(b_g), _host(b_c), err_msg=f"{name}: buffer {k}", **TIGHT)


def test_dropout_eval_and_train_on_gpu():
    x = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    d = nn.Dropout(0.5)
    d.eval()
    y = d(ddg.to_tensor(x, place="gpu"))
    assert backend.is_gpu_array(y._data)
    np.testing.assert_array_equal(y.numpy(), x)
    d.train()
    xt = ddg.to_tensor(x, place="gpu", stop_gradient=False)
    y = d(xt)
    y.sum().backward()
    kept = y.numpy() != 0
    assert 0.3 < kept.mean() < 0.7
    np.testing.assert_allclose(y.numpy()[kept], 2 * x[kept], rtol=1e-6)
    np.testing.assert_allclose(xt.grad.numpy(), 2.0 * kept, rtol=1e-6)


@pytest.mark.parametrize("name,make", [
    ("rand", lambda: ddg.rand([400, 50], place="gpu")),
    ("randn", lambda: ddg.randn([400, 50], place="gpu")),
    ("uniform", lambda: ddg.uniform([400, 50], min=-2.0, max=2.0, place="gpu")),
    ("normal", lambda: ddg.normal(1.0, 2.0, [400, 50], place="gpu")),
    ("bernoulli", lambda: ddg.bernoulli(ddg.full([400, 50], 0.25, place="gpu"))),
    ("uniform_", lambda: ddg.zeros([400, 50], place="gpu").uniform_(-1.0, 1.0)),
])
def test_random_numbers_are_drawn_on_the_gpu(name, make):
    """Drawn on the device from ddg's generator: seeded runs repeat, statistics are right."""
    ddg.seed(7)
    a = make()
    ddg.seed(7)
    b = make()
    assert backend.is_gpu_array(a._data), f"{name}: not on the GPU"
    assert a.dtype == ddg.float32
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    v = a.numpy()
    mean, std = {"rand": (0.5, 12 ** -0.5), "randn": (0.0, 1.0), "uniform": (0.0, 4 * 12 ** -0.5),
                 "normal": (1.0, 2.0), "bernoulli": (0.25, 0.75 ** 0.5 * 0.5),
                 "uniform_": (0.0, 2 * 12 ** -0.5)}[name]
    assert abs(v.mean() - mean) < 5 * std / v.size ** 0.5, (name, v.mean())
    assert abs(v.std() - std) < 0.05 * std, (name, v.std())


def test_layers_built_under_set_device_gpu_live_on_the_gpu():
    prev = ddg.get_device()
    ddg.set_device("gpu")
    try:
        layers = [nn.Linear(3, 4), nn.Conv2D(1, 2, 3), nn.Embedding(5, 3), nn.BatchNorm2D(2), nn.LSTM(3, 4)]
        made = [ddg.to_tensor([1.0, 2.0]), ddg.arange(5), ddg.eye(3), ddg.zeros([2])]
    finally:
        ddg.set_device(prev)
    for layer in layers:
        for name, t in list(layer.named_parameters()) + list(layer.named_buffers()):
            assert backend.is_gpu_array(t._data), f"{type(layer).__name__}.{name} is on {t.place}"
    for t in made:
        assert backend.is_gpu_array(t._data), t.place


def test_device_to_host_counter_sees_reads():
    """The counter behind the zero-copy test below does count the usual ways out."""
    x = ddg.to_tensor(np.arange(6, dtype=np.float32), place="gpu")
    counter = D2HCounter(cp).install()
    try:
        with counter:
            x.numpy()
            float(x.sum())
            x.sum().item()
            bool((x > 2).any())
    finally:
        counter.uninstall()
    if counter.unpatched:
        pytest.skip(f"this cupy's ndarray cannot be instrumented ({counter.unpatched})")
    assert len(counter.calls) >= 4, counter.report()


def test_embedding_on_gpu_equals_cpu():
    ids = np.random.default_rng(0).integers(0, 10, (4, 7)).astype(np.int64)
    wout = np.random.default_rng(1).standard_normal((4, 7, 6)).astype(np.float32)
    cpu, gpu = _twins(lambda: nn.Embedding(10, 6, padding_idx=0))
    out_c, _, g_c = _fwd_bwd(cpu, ids, wout, "cpu", int_input=True)
    out_g, _, g_g = _fwd_bwd(gpu, ids, wout, "gpu", int_input=True)
    np.testing.assert_allclose(out_g, out_c, **TIGHT)
    for k in g_c:
        np.testing.assert_allclose(g_g[k], g_c[k], **TIGHT)


@pytest.mark.parametrize("loss", ["cross_entropy", "cross_entropy_weighted", "cross_entropy_ignore",
                                  "cross_entropy_soft", "nll", "mse", "l1", "smooth_l1", "bce_logits", "bce",
                                  "kl_div", "margin_ranking"])
def test_losses_on_gpu_equal_cpu(loss):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((6, 5)).astype(np.float32)
    labels = rng.integers(0, 5, (6,)).astype(np.int64)
    labels[2] = -100
    target = rng.standard_normal((6, 5)).astype(np.float32)
    cw = rng.uniform(0.5, 2.0, (5,)).astype(np.float32)

    def run(place):
        x = ddg.to_tensor(logits, place=place, stop_gradient=False)
        lab = ddg.to_tensor(labels if loss.endswith("ignore") else np.abs(labels) % 5, place=place)
        tgt = ddg.to_tensor(target, place=place)
        if loss.startswith("cross_entropy"):
            w = ddg.to_tensor(cw, place=place) if loss.endswith("weighted") else None
            out = F.cross_entropy(x, lab, weight=w)
        elif loss == "nll":
            out = F.nll_loss(F.log_softmax(x, -1), lab)
        elif loss == "mse":
            out = F.mse_loss(x, tgt)
        elif loss == "l1":
            out = F.l1_loss(x, tgt)
        elif loss == "smooth_l1":
            out = F.smooth_l1_loss(x, tgt)
        elif loss == "cross_entropy_soft":
            out = F.cross_entropy(x, F.softmax(tgt, -1), soft_label=True)
        elif loss == "bce":
            out = F.binary_cross_entropy(F.sigmoid(x), (tgt > 0).astype("float32"))
        elif loss == "kl_div":
            out = F.kl_div(F.log_softmax(x, -1), F.softmax(tgt, -1), reduction="batchmean")
        elif loss == "margin_ranking":
            out = F.margin_ranking_loss(x, tgt, ddg.sign(tgt), margin=0.1)
        else:
            out = F.binary_cross_entropy_with_logits(x, (tgt > 0).astype("float32"))
        out.backward()
        assert backend.is_gpu_array(out._data) == (place == "gpu"), "output on the wrong device"
        return out.numpy(), x.grad.numpy()

    (lc, gc), (lg, gg) = run("cpu"), run("gpu")
    np.testing.assert_allclose(lg, lc, **TIGHT)
    np.testing.assert_allclose(gg, gc, **TIGHT)


OPTIMIZERS = [
    ("sgd", lambda ps: ddg.optimizer.SGD(0.1, parameters=ps)),
    ("sgd_wd", lambda ps: ddg.optimizer.SGD(0.1, parameters=ps, weight_decay=0.01)),
    ("momentum", lambda ps: ddg.optimizer.Momentum(0.1, momentum=0.9, parameters=ps)),
    ("nesterov", lambda ps: ddg.optimizer.Momentum(0.1, momentum=0.9, parameters=ps, use_nesterov=True)),
    ("adam", lambda ps: ddg.optimizer.Adam(0.01, parameters=ps)),
    ("adam_amsgrad", lambda ps: ddg.optimizer.Adam(0.01, parameters=ps, amsgrad=True)),
    ("adamw", lambda ps: ddg.optimizer.AdamW(0.01, parameters=ps, weight_decay=0.1)),
    ("rmsprop", lambda ps: ddg.optimizer.RMSProp(0.01, parameters=ps, centered=True, momentum=0.5)),
    ("adagrad", lambda ps: ddg.optimizer.Adagrad(0.1, parameters=ps)),
    ("lamb", lambda ps: ddg.optimizer.Lamb(0.01, parameters=ps)),
    ("adam_clip", lambda ps: ddg.optimizer.Adam(0.01, parameters=ps, grad_clip=nn.ClipGradByGlobalNorm(0.1))),
]


@pytest.mark.parametrize("name,make", OPTIMIZERS, ids=[o[0] for o in OPTIMIZERS])
def test_optimizer_step_on_gpu_equals_cpu(name, make):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(3)]
    results = {}
    for place in ("cpu", "gpu"):
        ddg.seed(0)
        model = nn.Linear(6, 3)
        if place == "gpu":
            model.to("gpu")
        opt = make(model.parameters())
        for x in xs:
            loss = (model(ddg.to_tensor(x, place=place)) ** 2).mean()
            loss.backward()
            opt.step()
            opt.clear_grad()
        for p in model.parameters():
            assert backend.is_gpu_array(p._data) == (place == "gpu"), "parameter on the wrong device"
        results[place] = [p.numpy() for p in model.parameters()]
        # optimizer state, in state_dict order (keys carry per-instance parameter names)
        results[place + "_state"] = [(k, _host(v._data if hasattr(v, "_data") else v))
                                     for k, v in opt.state_dict().items()
                                     if hasattr(v, "shape") or hasattr(v, "_data")]
    for a, b in zip(results["gpu"], results["cpu"]):
        np.testing.assert_allclose(a, b, **TIGHT)
    assert len(results["gpu_state"]) == len(results["cpu_state"])
    for (k, v), (_, w) in zip(results["cpu_state"], results["gpu_state"]):
        np.testing.assert_allclose(w, v, err_msg=k, **TIGHT)


# -- no hidden device-to-host copies -----------------------------------------------------------
class LeNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2D(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2D(2, 2),
            nn.Conv2D(6, 16, 5), nn.ReLU(), nn.MaxPool2D(2, 2))
        self.fc = nn.Sequential(nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))

    def forward(self, x):
        return self.fc(ddg.flatten(self.features(x), 1))


@pytest.mark.parametrize("opt_name,static", [("adam", False), ("momentum", False), ("adam", True)],
                         ids=["adam", "momentum_clip", "adam_static"])
def test_lenet_step_makes_no_device_to_host_copies(opt_name, static):
    ddg.seed(0)
    model = LeNet()
    model.to("gpu")
    if static:
        model = ddg.jit.to_static(model)     # replayed forward, one fused backward node
    if opt_name == "adam":
        opt = ddg.optimizer.Adam(1e-3, parameters=model.parameters())
    else:
        opt = ddg.optimizer.Momentum(0.01, momentum=0.9, parameters=model.parameters(),
                                     grad_clip=nn.ClipGradByGlobalNorm(1.0))
    rng = np.random.default_rng(0)
    x = ddg.to_tensor(rng.standard_normal((16, 1, 28, 28)).astype(np.float32), place="gpu")
    y = ddg.to_tensor(rng.integers(0, 10, (16,)).astype(np.int64), place="gpu")

    def step():
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    for _ in range(2):  # warm-up: cuDNN handles, kernel compilation, optimizer state
        step()
    counter = D2HCounter(cp).install()
    try:
        if any(n.startswith("ndarray.") and n.split(".")[1] in ("get", "__float__", "__bool__")
               for n in counter.unpatched):
            counter.uninstall()
            # a compiled ndarray: ask CUPTI (through torch.profiler) for the copies instead
            copies = cupti_device_to_host_copies(step)
            if copies is None:
                pytest.skip(f"this cupy's ndarray cannot be instrumented ({counter.unpatched}) and "
                            f"torch with CUDA is not here to count copies through CUPTI")
            assert not copies, f"{len(copies)} device-to-host copies in one training step: {copies[:5]}"
            return
        counter.active = True
        loss = step()
        counter.active = False
    finally:
        counter.uninstall()
    where = "\n\n".join(f"{name} from\n{stack}" for name, stack in counter.calls[:5])
    assert not counter.calls, f"{len(counter.calls)} device-to-host copies in one training step:\n{where}"
    assert np.isfinite(loss.item())   # asked for by the user: allowed (and outside the count)


# -- moving tensors between places --------------------------------------------------------------
def test_cuda_cpu_to_round_trips_with_gradients():
    a = ddg.to_tensor(np.arange(6, dtype=np.float32).reshape(2, 3), stop_gradient=False)
    g = a.cuda()
    assert backend.is_gpu_array(g._data) and not g.stop_gradient
    h = (g * g).cpu()
    assert not backend.is_gpu_array(h._data)
    k = h.to("gpu:0").to("cpu", "float64")
    assert k.dtype == np.float64
    k.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * a.numpy())
    assert not backend.is_gpu_array(a.grad._data)
    # and from the GPU side: a GPU leaf gets a GPU gradient through a CPU detour
    b = ddg.to_tensor(np.ones((3,), np.float32), place="gpu", stop_gradient=False)
    (b.cpu() * 3).sum().backward()
    assert backend.is_gpu_array(b.grad._data)
    np.testing.assert_allclose(b.grad.numpy(), 3 * np.ones(3))
    assert str(b.place).lower().startswith(("gpu", "cuda", "place(gpu"))


def test_save_load_gpu_tensors(tmp_path):
    ddg.seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1D(3))
    model.to("gpu")
    path = os.path.join(str(tmp_path), "m.pdparams")
    ddg.save(model.state_dict(), path)
    state = ddg.load(path)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(_host(state[k]._data if hasattr(state[k], "_data") else state[k]), v.numpy())
    other = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1D(3))
    other.to("gpu")
    other.set_state_dict(state)
    for (k, p), (_, q) in zip(model.state_dict().items(), other.state_dict().items()):
        assert backend.is_gpu_array(q._data), k
        np.testing.assert_array_equal(q.numpy(), p.numpy())
    # optimizer state with GPU moments round-trips too
    opt = ddg.optimizer.Adam(0.01, parameters=model.parameters())
    model(ddg.to_tensor(np.ones((2, 4), np.float32), place="gpu")).sum().backward()
    opt.step()
    ddg.save(opt.state_dict(), path + ".opt")
    opt2 = ddg.optimizer.Adam(0.01, parameters=model.parameters())
    opt2.set_state_dict(ddg.load(path + ".opt"))


def test_static_graph_on_gpu_matches_eager():
    ddg.seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    model.to("gpu")
    x = ddg.to_tensor(np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32), place="gpu")
    eager = model(x).numpy()
    static = ddg.jit.to_static(model)
    out = static(x)
    assert backend.is_gpu_array(out._data)
    np.testing.assert_allclose(out.numpy(), eager, **TIGHT)


def test_cudnn_and_fallback_agree():  # pragma: no cover - GPU only
    """The cuDNN path and the im2col path (DDG_CUDNN=0 disables cuDNN) give the same conv."""
    from ddg.autograd.ops import conv as C
    if backend.cudnn_module() is None:
        pytest.skip("cuDNN is not usable through this cupy")
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.standard_normal((2, 3, 9, 9)).astype(np.float32))
    w = cp.asarray(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    gy = cp.asarray(rng.standard_normal((2, 4, 5, 5)).astype(np.float32))
    outs = []
    for use in (True, False):
        saved = list(backend._cudnn_cache)
        if not use:
            backend._cudnn_cache[:] = [None]
        try:
            op = C.Conv2d((2, 2), (1, 1, 1, 1), (1, 1), 1)
            op.needs = (True, True)
            y = op.forward(x, w)
            gx, gw = op.backward(gy)
            assert (op.cudnn is not None) == use
        finally:
            backend._cudnn_cache[:] = saved
        outs.append([backend.to_host(a) for a in (y, gx, gw)])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, **LOOSE)


def test_gpu_benchmark_script_runs(tmp_path):
    """bench/bench_gpu.py in its smoke mode: the script works on this device (its numbers
    mean something only on a real GPU, at full size)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / "report.md"
    r = subprocess.run([sys.executable, os.path.join("bench", "bench_gpu.py"), "--smoke", "--out", str(out)],
                       cwd=repo, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    report = out.read_text()
    for model in ("mlp", "lenet", "transformer"):
        assert f"| {model} |" in report, report

