"""The models of bench/bench_gpu.py, in ddg and in torch (the same architectures), with
their sizes and data. Also imported by tests/test_kernel_budget.py, which counts the
GPU launches of their training steps on simcupy.

Each ddg model's ``forward(x, y)`` returns the loss, so that ``ddg.jit.to_static``
records the whole forward of a step.
"""
import numpy as np

import ddg
import ddg.nn.functional as F
from ddg import nn

MODELS = ("mlp", "lenet", "transformer", "resnet18", "gpt")


def sizes(kind="full"):
    """``full``: the benchmark's sizes. ``smoke``: tiny and shallow, to check the script
    on a CPU. ``budget``: every layer of the full models (same depth, heads and kernel
    sizes, hence the same launches per step) at small widths, for kernel counting."""
    if kind == "smoke":
        return dict(mlp=dict(batch=8, d_in=32, hidden=64, classes=10),
                    lenet=dict(batch=8),
                    transformer=dict(batch=2, seq=16, d_model=32, heads=4, ff=64, layers=2, vocab=50, classes=10),
                    resnet18=dict(batch=2, width=8, classes=10),
                    gpt=dict(batch=2, seq=16, d_model=32, heads=4, layers=2, vocab=50))
    if kind == "budget":
        return dict(mlp=dict(batch=4, d_in=784, hidden=32, classes=10),
                    lenet=dict(batch=2),
                    transformer=dict(batch=2, seq=8, d_model=32, heads=8, ff=64, layers=4, vocab=50, classes=10),
                    resnet18=dict(batch=2, width=4, classes=10),
                    gpt=dict(batch=2, seq=8, d_model=32, heads=8, layers=6, vocab=50))
    return dict(mlp=dict(batch=256, d_in=784, hidden=1024, classes=10),
                lenet=dict(batch=256),
                transformer=dict(batch=32, seq=128, d_model=256, heads=8, ff=1024, layers=4, vocab=1000,
                                 classes=10),
                resnet18=dict(batch=128, width=64, classes=10),
                gpt=dict(batch=16, seq=256, d_model=512, heads=8, layers=6, vocab=1000))


def make_data(name, cfg):
    rng = np.random.default_rng(0)
    if name == "mlp":
        x = rng.standard_normal((cfg["batch"], cfg["d_in"])).astype(np.float32)
        y = rng.integers(0, cfg["classes"], (cfg["batch"],)).astype(np.int64)
    elif name == "lenet":
        x = rng.standard_normal((cfg["batch"], 1, 28, 28)).astype(np.float32)
        y = rng.integers(0, 10, (cfg["batch"],)).astype(np.int64)
    elif name == "resnet18":
        x = rng.standard_normal((cfg["batch"], 3, 32, 32)).astype(np.float32)
        y = rng.integers(0, cfg["classes"], (cfg["batch"],)).astype(np.int64)
    elif name == "gpt":   # next-token prediction: y is x shifted by one
        tokens = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1)).astype(np.int64)
        x, y = tokens[:, :-1], tokens[:, 1:]
    else:
        x = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"])).astype(np.int64)
        y = rng.integers(0, cfg["classes"], (cfg["batch"],)).astype(np.int64)
    return np.ascontiguousarray(x), np.ascontiguousarray(y)


# -- ddg models ----------------------------------------------------------------------------------
class DdgMLP(nn.Layer):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden"]
        self.net = nn.Sequential(nn.Linear(cfg["d_in"], h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                                 nn.Linear(h, cfg["classes"]))

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


class DdgLeNet(nn.Layer):
    def __init__(self, cfg):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2D(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2D(2, 2),
                                      nn.Conv2D(6, 16, 5), nn.ReLU(), nn.MaxPool2D(2, 2))
        self.fc = nn.Sequential(nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))

    def forward(self, x, y):
        return F.cross_entropy(self.fc(ddg.flatten(self.features(x), 1)), y)


class DdgTransformer(nn.Layer):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.embed = nn.Embedding(cfg["vocab"], d)
        layer = nn.TransformerEncoderLayer(d, cfg["heads"], cfg["ff"], dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, cfg["layers"])
        self.head = nn.Linear(d, cfg["classes"])

    def forward(self, x, y):
        h = self.encoder(self.embed(x))
        return F.cross_entropy(self.head(ddg.mean(h, axis=1)), y)


class _DdgBasicBlock(nn.Layer):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2D(cin, cout, 3, stride=stride, padding=1, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(cout)
        self.conv2 = nn.Conv2D(cout, cout, 3, padding=1, bias_attr=False)
        self.bn2 = nn.BatchNorm2D(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2D(cin, cout, 1, stride=stride, bias_attr=False), nn.BatchNorm2D(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class DdgResNet18(nn.Layer):
    """ResNet-18 for 32x32 images (CIFAR stem: one 3x3 convolution, no max pool)."""

    def __init__(self, cfg):
        super().__init__()
        w = cfg["width"]
        self.stem = nn.Sequential(nn.Conv2D(3, w, 3, padding=1, bias_attr=False), nn.BatchNorm2D(w), nn.ReLU())
        blocks, cin = [], w
        for i, cout in enumerate((w, 2 * w, 4 * w, 8 * w)):
            for j in range(2):
                blocks.append(_DdgBasicBlock(cin, cout, 2 if (i > 0 and j == 0) else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, cfg["classes"])

    def forward(self, x, y):
        h = self.blocks(self.stem(x))
        return F.cross_entropy(self.fc(ddg.mean(h, axis=[2, 3])), y)


class DdgGPT(nn.Layer):
    """A GPT-style decoder: token + learned position embeddings, pre-norm blocks of causal
    self-attention and a 4x GELU feed-forward, final LayerNorm, next-token cross-entropy."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.tok = nn.Embedding(cfg["vocab"], d)
        self.pos = nn.Embedding(cfg["seq"], d)
        layer = nn.TransformerEncoderLayer(d, cfg["heads"], 4 * d, dropout=0.0, activation="gelu",
                                           normalize_before=True)
        self.blocks = nn.TransformerEncoder(layer, cfg["layers"])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, cfg["vocab"], bias_attr=False)
        s = cfg["seq"]
        self.register_buffer("causal", ddg.to_tensor(np.triu(np.full((s, s), -1e9, np.float32), 1)),
                             persistable=False)
        self.register_buffer("positions", ddg.arange(s, dtype="int64"), persistable=False)

    def forward(self, x, y):
        h = self.tok(x) + self.pos(self.positions)
        h = self.norm(self.blocks(h, self.causal))
        logits = self.head(h)
        return F.cross_entropy(logits.reshape([-1, logits.shape[-1]]), y.reshape([-1]))


DDG_MODELS = {"mlp": DdgMLP, "lenet": DdgLeNet, "transformer": DdgTransformer, "resnet18": DdgResNet18,
              "gpt": DdgGPT}


# -- torch models (the same architectures) --------------------------------------------------------
def torch_model(torch, name, cfg):
    tnn = torch.nn
    F_ = tnn.functional
    if name == "mlp":
        h = cfg["hidden"]

        class M(tnn.Module):
            def __init__(self):
                super().__init__()
                self.net = tnn.Sequential(tnn.Linear(cfg["d_in"], h), tnn.ReLU(), tnn.Linear(h, h), tnn.ReLU(),
                                          tnn.Linear(h, cfg["classes"]))

            def forward(self, x, y):
                return F_.cross_entropy(self.net(x), y)
        return M()
    if name == "lenet":
        class L(tnn.Module):
            def __init__(self):
                super().__init__()
                self.features = tnn.Sequential(tnn.Conv2d(1, 6, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2, 2),
                                               tnn.Conv2d(6, 16, 5), tnn.ReLU(), tnn.MaxPool2d(2, 2))
                self.fc = tnn.Sequential(tnn.Linear(400, 120), tnn.ReLU(), tnn.Linear(120, 84), tnn.ReLU(),
                                         tnn.Linear(84, 10))

            def forward(self, x, y):
                return F_.cross_entropy(self.fc(torch.flatten(self.features(x), 1)), y)
        return L()
    if name == "resnet18":
        class Block(tnn.Module):
            def __init__(self, cin, cout, stride):
                super().__init__()
                self.conv1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False)
                self.bn1 = tnn.BatchNorm2d(cout)
                self.conv2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False)
                self.bn2 = tnn.BatchNorm2d(cout)
                self.down = None
                if stride != 1 or cin != cout:
                    self.down = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, bias=False), tnn.BatchNorm2d(cout))

            def forward(self, x):
                out = F_.relu(self.bn1(self.conv1(x)))
                out = self.bn2(self.conv2(out))
                return F_.relu(out + (x if self.down is None else self.down(x)))

        class R(tnn.Module):
            def __init__(self):
                super().__init__()
                w = cfg["width"]
                self.stem = tnn.Sequential(tnn.Conv2d(3, w, 3, 1, 1, bias=False), tnn.BatchNorm2d(w), tnn.ReLU())
                blocks, cin = [], w
                for i, cout in enumerate((w, 2 * w, 4 * w, 8 * w)):
                    for j in range(2):
                        blocks.append(Block(cin, cout, 2 if (i > 0 and j == 0) else 1))
                        cin = cout
                self.blocks = tnn.Sequential(*blocks)
                self.fc = tnn.Linear(cin, cfg["classes"])

            def forward(self, x, y):
                return F_.cross_entropy(self.fc(self.blocks(self.stem(x)).mean(dim=(2, 3))), y)
        return R()
    if name == "gpt":
        class G(tnn.Module):
            def __init__(self):
                super().__init__()
                d, s = cfg["d_model"], cfg["seq"]
                self.tok = tnn.Embedding(cfg["vocab"], d)
                self.pos = tnn.Embedding(s, d)
                layer = tnn.TransformerEncoderLayer(d, cfg["heads"], 4 * d, dropout=0.0, activation="gelu",
                                                    batch_first=True, norm_first=True)
                self.blocks = tnn.TransformerEncoder(layer, cfg["layers"], enable_nested_tensor=False)
                self.norm = tnn.LayerNorm(d)
                self.head = tnn.Linear(d, cfg["vocab"], bias=False)
                self.register_buffer("causal", torch.triu(torch.full((s, s), float("-inf")), 1), persistent=False)
                self.register_buffer("positions", torch.arange(s), persistent=False)

            def forward(self, x, y):
                h = self.tok(x) + self.pos(self.positions)
                h = self.norm(self.blocks(h, mask=self.causal, is_causal=True))
                logits = self.head(h)
                return F_.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        return G()

    class T(tnn.Module):
        def __init__(self):
            super().__init__()
            d = cfg["d_model"]
            self.embed = tnn.Embedding(cfg["vocab"], d)
            layer = tnn.TransformerEncoderLayer(d, cfg["heads"], cfg["ff"], dropout=0.0, batch_first=True)
            # no nested-tensor fast path: it only applies in inference anyway
            self.encoder = tnn.TransformerEncoder(layer, cfg["layers"], enable_nested_tensor=False)
            self.head = tnn.Linear(d, cfg["classes"])

        def forward(self, x, y):
            return F_.cross_entropy(self.head(self.encoder(self.embed(x)).mean(dim=1)), y)
    return T()
