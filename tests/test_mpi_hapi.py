"""ddg.Model across real MPI ranks: the same program as in one process trains
data-parallel. Must pass with any world size >= 2:

    mpiexec -n 2 python tests/mpi_pytest.py -q tests/test_mpi_hapi.py
    mpiexec -n 3 python tests/mpi_pytest.py -q tests/test_mpi_hapi.py

Every rank computes the single-process reference locally. Assertions come after the
test's last collective (or results are gathered first), so a failing rank does not
leave the others waiting.
"""
import os
import tempfile

import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.io import Dataset
from ddg.parallel import comm as C

pytestmark = pytest.mark.mpi(min_size=2)


@pytest.fixture(scope="module")
def comm():
    c = C.get_world_communicator()
    assert isinstance(c, C.MPICommunicator), "tests must run under mpiexec with --with-mpi"
    return c


@pytest.fixture
def shared_tmp(comm):
    """One temporary folder that every rank sees (rank 0 makes it)."""
    path = tempfile.mkdtemp(prefix="ddg-hapi-") if comm.rank == 0 else None
    return comm.bcast_object(path, 0)


class Blobs(Dataset):
    def __init__(self, n, seed=0):
        g = np.random.default_rng(seed)
        self.y = g.integers(0, 3, n)
        centers = np.array([[3, 0, 0, 0], [0, 3, 0, 0], [0, 0, 3, 0]], dtype=np.float32)
        self.x = (centers[self.y] + 0.8 * g.standard_normal((n, 4))).astype(np.float32)

    def __getitem__(self, i):
        return self.x[i], np.array([self.y[i]], dtype=np.int64)

    def __len__(self):
        return len(self.y)


class MLP(nn.Layer):
    def __init__(self, seed=0):
        super().__init__()
        ddg.seed(seed)
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def prepared(lr=0.1, opt=ddg.optimizer.SGD):
    model = ddg.Model(MLP())
    model.prepare(opt(learning_rate=lr, parameters=model.parameters()), nn.CrossEntropyLoss(),
                  ddg.metric.Accuracy())
    return model


def test_fit_equals_one_process_with_the_global_batch(comm):
    n, b = comm.size, 8
    data = Blobs(n * b * 4)
    model = prepared()
    assert isinstance(model._ddp, ddg.DataParallel)
    model.fit(data, batch_size=b, epochs=2, shuffle=False, verbose=0)
    # one process, batches of n * b in order: the ranks' shards of a step are exactly these samples
    ref = MLP()
    opt = ddg.optimizer.SGD(learning_rate=0.1, parameters=ref.parameters())
    for _ in range(2):
        for s in range(0, len(data), n * b):
            loss = F.cross_entropy(ref(ddg.to_tensor(data.x[s:s + n * b])),
                                   ddg.to_tensor(data.y[s:s + n * b].reshape(-1, 1)))
            loss.backward()
            opt.step()
            opt.clear_grad()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=2e-5, atol=2e-6)


def test_metrics_and_logs_are_global(comm, capsys):
    train, test = Blobs(60), Blobs(37, 1)            # 37: the sampler repeats samples to even the shards
    model = prepared()
    logs = []

    class Keep(ddg.callbacks.Callback):
        def on_train_batch_end(self, step, l=None):
            logs.append(("train", dict(l)))

        def on_eval_batch_end(self, step, l=None):
            logs.append(("eval", l["batch_size"]))

    model.fit(train, test, batch_size=5, epochs=2, verbose=2, log_freq=1, callbacks=[Keep()])
    result = model.evaluate(test, batch_size=5, verbose=0)
    out = capsys.readouterr().out
    everyone = comm.allgather_object((logs, result))
    # the metric is over exactly the 37 test samples
    logits = model.network(ddg.to_tensor(test.x)).numpy()
    assert result["acc"] == pytest.approx(np.mean(logits.argmax(1) == test.y))
    assert sum(c for kind, c in logs if kind == "eval") == 2 * 37
    # every rank logged the same (reduced) values; only rank 0 printed
    assert all(e == everyone[0] for e in everyone)
    if comm.rank == 0:
        assert "Eval samples: 37" in out and "Epoch 2/2" in out
    else:
        assert out == ""
    assert logs[0][1]["batch_size"] == 5 * comm.size


def test_predict_returns_every_sample_in_order(comm):
    test = Blobs(37, 1)
    model = prepared()
    stacked = model.predict(test, batch_size=4, stack_outputs=True, verbose=0)
    batches = model.predict(test, batch_size=4, verbose=0)
    ref = model.network(ddg.to_tensor(test.x)).numpy()
    assert stacked[0].shape == (37, 3)
    np.testing.assert_allclose(stacked[0], ref, rtol=1e-5, atol=1e-6)
    assert sum(len(a) for a in batches[0]) == 37


def test_save_on_rank_0_then_load_everywhere(comm, shared_tmp):
    model = prepared(opt=ddg.optimizer.Adam)
    model.fit(Blobs(24), batch_size=4, epochs=1, verbose=0, save_dir=os.path.join(shared_tmp, "ck"))
    path = os.path.join(shared_tmp, "m")
    model.save(path)                           # every rank calls it; rank 0 writes; all return after
    files = sorted(os.listdir(shared_tmp))
    other = prepared(opt=ddg.optimizer.Adam)
    for p in other.parameters():
        p.set_value(np.zeros(p.shape, np.float32))
    other.load(path)
    same = all(np.array_equal(p.numpy(), q.numpy()) for p, q in zip(model.parameters(), other.parameters()))
    ck = sorted(os.listdir(os.path.join(shared_tmp, "ck")))
    comm.barrier()
    assert files == ["ck", "m.pdopt", "m.pdparams"] and same
    assert ck == ["0.pdopt", "0.pdparams", "final.pdopt", "final.pdparams"]


def test_accumulate_grad_batches_under_ranks(comm):
    n, b = comm.size, 4
    data = Blobs(n * b * 4)
    model = prepared()
    model.fit(data, batch_size=b, epochs=1, shuffle=False, verbose=0, accumulate_grad_batches=2)
    # reference: gradients of two global batches summed, then one step
    ref = MLP()
    opt = ddg.optimizer.SGD(learning_rate=0.1, parameters=ref.parameters())
    for s in range(0, len(data), n * b):
        loss = F.cross_entropy(ref(ddg.to_tensor(data.x[s:s + n * b])),
                               ddg.to_tensor(data.y[s:s + n * b].reshape(-1, 1)))
        loss.backward()
        if (s // (n * b)) % 2 == 1:
            opt.step()
            opt.clear_grad()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=2e-5, atol=2e-6)


def test_quickstart_lenet_mnist_data_parallel(comm, shared_dir):
    data = os.path.join(shared_dir, "data", "mnist-10k")
    assert os.path.isfile(os.path.join(data, "train-images-idx3-ubyte.gz")), f"mnist-10k not found in {data}"
    from ddg.vision.transforms import Normalize
    transform = Normalize(mean=[127.5], std=[127.5], data_format="CHW")
    train = ddg.vision.datasets.MNIST(mode="train", transform=transform, data_dir=data)
    test = ddg.vision.datasets.MNIST(mode="test", transform=transform, data_dir=data)
    model = ddg.Model(ddg.vision.models.LeNet(num_classes=10))
    model.prepare(ddg.optimizer.Adam(parameters=model.parameters()), nn.CrossEntropyLoss(), ddg.metric.Accuracy())
    # batch_size is per rank (as in Paddle): 64 at 2 ranks, the same global batch of 128 at
    # any other count, so that the epoch has the same ~62 steps to reach the accuracy
    model.fit(train, epochs=1, batch_size=max(1, 128 // comm.size), verbose=0)
    result = model.evaluate(test, batch_size=64, verbose=0)
    flat = np.concatenate([p.numpy().reshape(-1) for p in model.parameters()])
    params = comm.allgather(flat)
    assert all(np.array_equal(params[0], params[r]) for r in range(comm.size))
    assert result["acc"] > 0.85, result


def test_global_metrics_on_each_device(comm, place):
    """The gathers of outputs and labels work on device arrays (each rank's GPU)."""
    from ddg.tensor import backend
    prev = ddg.get_device()
    ddg.set_device(place)
    try:
        ddg.distributed.init_parallel_env()
        model = prepared()
        model.fit(Blobs(30), batch_size=4, epochs=1, verbose=0)
        on_gpu = backend.is_gpu_array(model.parameters()[0]._data)
        result = model.evaluate(Blobs(37, 1), batch_size=5, verbose=0)
        out = model.predict(Blobs(37, 1), batch_size=5, stack_outputs=True, verbose=0)[0]
    finally:
        ddg.set_device(prev)
    assert on_gpu == (place == "gpu")
    assert out.shape == (37, 3)
    assert result["acc"] == pytest.approx(np.mean(out.argmax(1) == Blobs(37, 1).y))
