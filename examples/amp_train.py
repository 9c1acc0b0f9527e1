"""Mixed-precision training as Paddle documents it, unchanged but for the import line:

    python examples/amp_train.py                 # ddg (float16 on the CPU, really)
    /path/to/paddle/python examples/amp_train.py --paddle

1. O1: ``auto_cast`` around the forward, a ``GradScaler`` scaling the loss, ``minimize``;
2. O2: ``decorate`` (float16 parameters, float32 master weights, float32 checkpoints
   through ``save_dtype``), ``auto_cast(level='O2')``, ``scaler.step`` + ``update``;
3. a step whose gradients overflow is skipped and lowers the loss scaling;
4. the scaler's state goes through a checkpoint and comes back.

With ``--paddle`` the same program runs on PaddlePaddle; its CPU build warns that AMP has
no effect there and trains in float32 (its GradScaler is then disabled), so the checks
that need a working AMP run only where the scaler is enabled.
"""
import os
import sys
import tempfile

import numpy as np

if "--paddle" in sys.argv:
    import paddle
else:
    import ddg as paddle

F = paddle.nn.functional


class SmallNet(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = paddle.nn.Conv2D(1, 8, 3, padding=1)
        self.bn = paddle.nn.BatchNorm2D(8)
        self.fc1 = paddle.nn.Linear(8 * 8 * 8, 64)
        self.norm = paddle.nn.LayerNorm(64)
        self.fc2 = paddle.nn.Linear(64, 4)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = F.max_pool2d(x, 2)
        x = paddle.flatten(x, 1)
        return self.fc2(F.relu(self.norm(self.fc1(x))))


def batches(n_steps, seed=0):
    """Images whose class is the quadrant holding a bright blob."""
    rng = np.random.default_rng(seed)
    for _ in range(n_steps):
        y = rng.integers(0, 4, 32)
        x = rng.standard_normal((32, 1, 16, 16)).astype("float32") * 0.3
        for i, c in enumerate(y):
            r, col = divmod(int(c), 2)
            x[i, 0, r * 8 + 2:r * 8 + 6, col * 8 + 2:col * 8 + 6] += 2.0
        yield paddle.to_tensor(x), paddle.to_tensor(y.astype("int64"))


def train_o1(steps=60):
    paddle.seed(0)
    model = SmallNet()
    optimizer = paddle.optimizer.Adam(learning_rate=0.003, parameters=model.parameters())
    scaler = paddle.amp.GradScaler(init_loss_scaling=1024)
    losses = []
    for data, label in batches(steps):
        with paddle.amp.auto_cast(level='O1'):
            out = model(data)
            loss = F.cross_entropy(out, label)
        scaled = scaler.scale(loss)
        scaled.backward()
        scaler.minimize(optimizer, scaled)
        optimizer.clear_grad()
        losses.append(float(loss))
    print(f"O1: out dtype {out.dtype}, loss dtype {loss.dtype}, loss {losses[0]:.3f} -> {np.mean(losses[-10:]):.3f}")
    return losses


def train_o2(steps=60):
    paddle.seed(0)
    model = SmallNet()
    optimizer = paddle.optimizer.AdamW(learning_rate=0.003, parameters=model.parameters())
    model, optimizer = paddle.amp.decorate(models=model, optimizers=optimizer, level='O2', master_weight=True,
                                           save_dtype='float32')
    scaler = paddle.amp.GradScaler(init_loss_scaling=1024)
    losses = []
    for data, label in batches(steps):
        with paddle.amp.auto_cast(level='O2'):
            out = model(data)
            loss = F.cross_entropy(out, label)
        scaled = scaler.scale(loss)
        scaled.backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.clear_grad()
        losses.append(float(loss))
    print(f"O2: fc1 weight {model.fc1.weight.dtype}, bn weight {model.bn.weight.dtype}, "
          f"loss {losses[0]:.3f} -> {np.mean(losses[-10:]):.3f}")
    state = model.state_dict()
    print(f"O2: state_dict fc1.weight saved as {state['fc1.weight'].dtype}")
    return losses


def overflow_and_checkpoint():
    paddle.seed(0)
    model = SmallNet()
    optimizer = paddle.optimizer.SGD(learning_rate=0.01, parameters=model.parameters())
    scaler = paddle.amp.GradScaler(init_loss_scaling=2.0 ** 12, incr_every_n_steps=1000)
    data, label = next(batches(1, seed=1))
    with paddle.amp.auto_cast():
        loss = F.cross_entropy(model(data), label)
    before = model.fc2.weight.numpy().copy()
    with np.errstate(all="ignore"):
        scaled = scaler.scale(loss * float("inf"))   # an overflowing step
        scaled.backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.clear_grad()
    if scaler.is_enable():
        assert np.array_equal(model.fc2.weight.numpy(), before), "the overflowing step was not skipped"
        assert float(scaler.state_dict()["scale"][0]) == 2.0 ** 11, scaler.state_dict()["scale"]
        print("overflow: step skipped, loss scaling 4096 -> 2048")

    path = os.path.join(tempfile.mkdtemp(), "scaler.pdparams")
    paddle.save(scaler.state_dict(), path)
    restored = paddle.amp.GradScaler()
    restored.load_state_dict(paddle.load(path))
    if scaler.is_enable():
        assert restored.state_dict().keys() == scaler.state_dict().keys()
        assert float(restored.state_dict()["scale"][0]) == 2.0 ** 11
        assert restored.state_dict()["decr_count"] == scaler.state_dict()["decr_count"]
        print(f"checkpoint: scaler state {sorted(restored.state_dict())} restored")


if __name__ == "__main__":
    l1 = train_o1()
    l2 = train_o2()
    overflow_and_checkpoint()
    assert np.mean(l1[-10:]) < 0.5 * l1[0] and np.mean(l2[-10:]) < 0.5 * l2[0], "did not train"
    print("ok")
