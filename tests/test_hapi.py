"""ddg.Model, ddg.callbacks, ddg.metric, ddg.summary and ddg.flops in one process.

Expected numbers and tables were read from PaddlePaddle 3.3.1 (CPU) running the same
inputs; Paddle is not needed here."""
import io
import os
import re
import sys
import warnings

import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.hapi.progressbar import ProgressBar
from ddg.io import Dataset, DataLoader

# ---------------------------------------------------------------------- metrics
SCORES = np.array([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2], [0.2, 0.2, 0.6], [0.3, 0.4, 0.3]], dtype=np.float32)
LABELS = np.array([[1], [1], [2], [0]], dtype=np.int64)


def test_accuracy_topk_as_paddle():
    m = ddg.metric.Accuracy(topk=(1, 2))
    assert m.name() == ["acc_top1", "acc_top2"]
    correct = m.compute(ddg.to_tensor(SCORES), ddg.to_tensor(LABELS))
    np.testing.assert_array_equal(correct.numpy(), [[1, 0], [0, 1], [1, 0], [0, 1]])
    assert m.update(correct) == [0.5, 1.0]
    assert m.accumulate() == [0.5, 1.0]
    m.update(m.compute(ddg.to_tensor(SCORES[:2]), ddg.to_tensor(LABELS[:2])))
    assert m.accumulate() == pytest.approx([3 / 6, 6 / 6])
    m.reset()
    assert m.accumulate() == [0.0, 0.0]
    one = ddg.metric.Accuracy()
    assert one.name() == ["acc"]
    # flat labels and one-hot labels give the same result
    assert one.update(one.compute(ddg.to_tensor(SCORES), ddg.to_tensor(LABELS.reshape(-1)))) == 0.5
    onehot = np.eye(3, dtype=np.float32)[LABELS.reshape(-1)]
    assert one.update(one.compute(ddg.to_tensor(SCORES), ddg.to_tensor(onehot))) == 0.5
    assert one.accumulate() == 0.5
    with pytest.raises(ValueError, match="topk"):
        ddg.metric.Accuracy(topk=(0,))
    with pytest.raises(ValueError, match="fewer than"):
        ddg.metric.Accuracy(topk=(5,)).compute(ddg.to_tensor(SCORES), ddg.to_tensor(LABELS))


def test_functional_accuracy():
    acc = ddg.metric.accuracy(ddg.to_tensor(SCORES), ddg.to_tensor(LABELS))
    assert acc.shape == [] and acc.dtype == ddg.float32 and float(acc) == 0.5
    correct = ddg.zeros([1], dtype="int32")
    total = ddg.zeros([1], dtype="int32")
    acc = ddg.metric.accuracy(ddg.to_tensor(SCORES), ddg.to_tensor(LABELS), k=2, correct=correct, total=total)
    assert float(acc) == 1.0 and int(correct) == 4 and int(total) == 4
    with pytest.raises(ValueError, match=r"\[N, 1\]"):
        ddg.metric.accuracy(ddg.to_tensor(SCORES), ddg.to_tensor(LABELS.reshape(-1)))


def test_precision_recall_auc_as_paddle():
    preds = np.array([0.1, 0.6, 0.7, 0.2, 0.5])
    labels = np.array([0, 1, 0, 1, 1])
    p = ddg.metric.Precision()
    p.update(preds, labels)
    assert p.accumulate() == pytest.approx(2 / 3) and p.name() == "precision"
    r = ddg.metric.Recall()
    r.update(preds, labels)           # 0.5 rounds to 0 here (half to even), to 1 in Precision
    assert r.accumulate() == pytest.approx(1 / 3) and r.name() == "recall"
    p2 = ddg.metric.Precision()
    p2.update(ddg.to_tensor(preds.reshape(-1, 1)), ddg.to_tensor(labels.reshape(-1, 1)))
    assert p2.accumulate() == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="preds"):
        p.update([0.1], labels)
    np.random.seed(0)
    pr = np.random.rand(20, 2).astype("float32")
    lb = np.random.randint(0, 2, (20, 1))
    auc = ddg.metric.Auc()
    auc.update(pr, lb)
    assert auc.accumulate() == pytest.approx(0.3541666666666667) and auc.name() == "auc"
    auc.reset()
    assert auc.accumulate() == 0.0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        auc.update(pr * 2, lb)


def test_metric_base_is_abstract():
    with pytest.raises(TypeError):
        ddg.metric.Metric()

    class Count(ddg.metric.Metric):
        def reset(self):
            self.n = 0

        def update(self, x):
            self.n += len(x)

        def accumulate(self):
            return self.n

        def name(self):
            return "count"

    c = Count()
    c.reset()
    assert c.compute(1, 2) == (1, 2)
    c.update(np.zeros(3))
    assert c.accumulate() == 3


# ---------------------------------------------------------------------- progress bar
class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


def test_progress_bar_lines():
    out = _Stream(False)
    bar = ProgressBar(num=5, verbose=2, file=out)
    bar.update(2, [("loss", [np.float32(4.77224)]), ("acc", 0.078125)])
    bar.update(5, [("loss", [0.0001])])
    lines = out.getvalue().splitlines()
    assert re.fullmatch(r"step 2/5 - loss: 4\.7722 - acc: 0\.0781 - \d+(us|ms|s)/step", lines[0]), lines[0]
    assert re.fullmatch(r"step 5/5 - loss: 1\.0000e-04 - \d+(us|ms|s)/step", lines[1]), lines[1]


def test_progress_bar_is_quiet_when_not_a_terminal():
    out = _Stream(False)
    bar = ProgressBar(num=5, verbose=1, file=out)
    for i in range(1, 5):
        bar.update(i, [("loss", 1.0)])
    assert out.getvalue() == ""               # no carriage-return redraws in a log file
    bar.update(5, [("loss", 1.0)])
    assert re.fullmatch(r"step 5/5 \[=+\] - loss: 1\.0000 - \d+(us|ms|s)/step\n", out.getvalue())
    tty = _Stream(True)
    bar = ProgressBar(num=5, verbose=1, file=tty)
    bar.update(2, [("loss", 1.0)])
    text = tty.getvalue()
    assert text.startswith("\rstep 2/5 [") and " - ETA: " in text and not text.endswith("\n")
    assert text[len("\rstep 2/5 ["):].startswith("=" * 11 + ">" + "." * 18 + "]")
    bar.update(5)
    assert tty.getvalue().endswith("\n")


# ---------------------------------------------------------------------- summary / flops
LENET_SUMMARY = """\
---------------------------------------------------------------------------
 Layer (type)       Input Shape          Output Shape         Param #    
===========================================================================
   Conv2D-1       [[1, 1, 28, 28]]      [1, 6, 28, 28]          60       
    ReLU-1        [[1, 6, 28, 28]]      [1, 6, 28, 28]           0       
  MaxPool2D-1     [[1, 6, 28, 28]]      [1, 6, 14, 14]           0       
   Conv2D-2       [[1, 6, 14, 14]]     [1, 16, 10, 10]         2,416     
    ReLU-2       [[1, 16, 10, 10]]     [1, 16, 10, 10]           0       
  MaxPool2D-2    [[1, 16, 10, 10]]      [1, 16, 5, 5]            0       
   Linear-1          [[1, 400]]            [1, 120]           48,120     
   Linear-2          [[1, 120]]            [1, 84]            10,164     
   Linear-3          [[1, 84]]             [1, 10]              850      
===========================================================================
Total params: 61,610
Trainable params: 61,610
Non-trainable params: 0
---------------------------------------------------------------------------
Input size (MB): 0.00
Forward/backward pass size (MB): 0.11
Params size (MB): 0.24
Estimated Total Size (MB): 0.35
---------------------------------------------------------------------------
"""

LENET_FLOPS = """\
+--------------+-----------------+-----------------+--------+--------+
|  Layer Name  |   Input Shape   |   Output Shape  | Params | Flops  |
+--------------+-----------------+-----------------+--------+--------+
|   conv2d_0   |  [1, 1, 28, 28] |  [1, 6, 28, 28] |   60   | 47040  |
|   re_lu_0    |  [1, 6, 28, 28] |  [1, 6, 28, 28] |   0    |   0    |
| max_pool2d_0 |  [1, 6, 28, 28] |  [1, 6, 14, 14] |   0    |   0    |
|   conv2d_1   |  [1, 6, 14, 14] | [1, 16, 10, 10] |  2416  | 241600 |
|   re_lu_1    | [1, 16, 10, 10] | [1, 16, 10, 10] |   0    |   0    |
| max_pool2d_1 | [1, 16, 10, 10] |  [1, 16, 5, 5]  |   0    |   0    |
|   linear_0   |     [1, 400]    |     [1, 120]    | 48120  | 48000  |
|   linear_1   |     [1, 120]    |     [1, 84]     | 10164  | 10080  |
|   linear_2   |     [1, 84]     |     [1, 10]     |  850   |  840   |
+--------------+-----------------+-----------------+--------+--------+
Total Flops: 347560     Total Params: 61610
"""


def _fresh_names(monkeypatch):
    # a fresh process's layer counters, so names read conv2d_0 and Conv2D-1 as in Paddle's output
    import collections
    import itertools
    from ddg.nn.layer import layers
    monkeypatch.setattr(layers, "_name_counts", collections.defaultdict(itertools.count))


def test_summary_table_as_paddle(capsys, monkeypatch):
    _fresh_names(monkeypatch)
    net = ddg.vision.models.LeNet()
    info = ddg.summary(net, (1, 1, 28, 28))
    assert capsys.readouterr().out == LENET_SUMMARY + "\n"
    assert info == {"total_params": 61610, "trainable_params": 61610}
    assert net.training                                    # put back in training mode
    # an InputSpec with a free batch dimension gives the same table
    ddg.summary(net, ddg.static.InputSpec([None, 1, 28, 28], "float32", "x"))
    out = capsys.readouterr().out
    assert "Total params: 61,610" in out and "[[1, 1, 28, 28]]" in out
    with pytest.raises(ValueError, match="batch dimension"):
        ddg.summary(net, (None, None, 28, 28))
    with pytest.raises(ValueError, match="cannot both be None"):
        ddg.summary(net)


def test_summary_two_inputs_and_batch_norm(capsys):
    class Two(nn.Layer):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 4)
            self.b = nn.Linear(5, 4)
            self.bn = nn.BatchNorm1D(4)

        def forward(self, x, y):
            return self.bn(self.a(x)), self.b(y)

    info = ddg.summary(Two(), [(2, 3), (2, 5)])
    out = capsys.readouterr().out
    # Paddle's numbers: batch norm's running statistics count as non-trainable parameters
    assert info == {"total_params": 56, "trainable_params": 48}
    assert "Non-trainable params: 8" in out and "[[2, 3]]" in out and "[[2, 5]]" in out


def test_flops_table_as_paddle(capsys, monkeypatch):
    _fresh_names(monkeypatch)
    net = ddg.vision.models.LeNet()
    assert ddg.flops(net, [1, 1, 28, 28], print_detail=True) == 347560
    out = capsys.readouterr().out
    assert out.endswith(LENET_FLOPS), out
    assert "MaxPool2D'>. Treat it as zero FLOPs." in out
    assert ddg.flops(net, [2, 1, 28, 28]) == 695120        # Paddle's number for a batch of 2
    capsys.readouterr()

    def count_pool(m, x, y):
        m.total_ops += 7
    assert ddg.flops(net, [1, 1, 28, 28], custom_ops={nn.MaxPool2D: count_pool}) == 347560 + 14
    assert "Customize Function has been applied" in capsys.readouterr().out


# ---------------------------------------------------------------------- the Model
class Blobs(Dataset):
    """Three well separated Gaussian blobs in 4-D: (x float32 [4], label int64 [1])."""

    def __init__(self, n, seed=0):
        g = np.random.default_rng(seed)
        self.y = g.integers(0, 3, n)
        centers = np.array([[3, 0, 0, 0], [0, 3, 0, 0], [0, 0, 3, 0]], dtype=np.float32)
        self.x = (centers[self.y] + 0.5 * g.standard_normal((n, 4))).astype(np.float32)

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


def prepared(net=None, lr=0.05, metrics=True, opt="adam"):
    net = net or MLP()
    model = ddg.Model(net)
    if opt == "adam":
        optim = ddg.optimizer.Adam(learning_rate=lr, parameters=model.parameters())
    else:
        optim = ddg.optimizer.SGD(learning_rate=lr, parameters=model.parameters())
    model.prepare(optim, nn.CrossEntropyLoss(), ddg.metric.Accuracy(topk=(1, 2)) if metrics else None)
    return model


def test_fit_evaluate_predict(capsys):
    train, test = Blobs(240, 0), Blobs(50, 1)
    model = prepared()
    model.fit(train, test, batch_size=32, epochs=3, verbose=2, log_freq=4)
    out = capsys.readouterr().out
    assert out.startswith("The loss value printed in the log is the current step")
    assert "Epoch 1/3" in out and "Epoch 3/3" in out and "Eval begin..." in out and "Eval samples: 50" in out
    assert re.search(r"step 4/8 - loss: \d\.\d{4} - acc_top1: \d\.\d{4} - acc_top2: \d\.\d{4} - \d+(us|ms|s)/step",
                     out), out
    result = model.evaluate(test, batch_size=16, verbose=0)
    assert capsys.readouterr().out == ""
    assert set(result) == {"loss", "acc_top1", "acc_top2"}
    assert isinstance(result["loss"], list) and len(result["loss"]) == 1
    # the metric is the accuracy over all 50 samples
    logits = model.network(ddg.to_tensor(test.x)).numpy()
    assert result["acc_top1"] == pytest.approx(np.mean(logits.argmax(1) == test.y))
    assert result["acc_top1"] > 0.9
    outs = model.predict(test, batch_size=16, verbose=0)
    assert len(outs) == 1 and len(outs[0]) == 4 and outs[0][0].shape == (16, 3) and outs[0][3].shape == (2, 3)
    stacked = model.predict(test, batch_size=16, stack_outputs=True, verbose=0)
    assert len(stacked) == 1 and stacked[0].shape == (50, 3)
    np.testing.assert_allclose(stacked[0], logits, rtol=1e-5, atol=1e-6)


def test_fit_with_loaders_batch_size_pair_and_num_iters():
    train, test = Blobs(64, 0), Blobs(20, 1)
    model = prepared()
    seen = []

    class Steps(ddg.callbacks.Callback):
        def on_train_batch_end(self, step, logs=None):
            seen.append(("train", step, logs["batch_size"]))

        def on_eval_batch_end(self, step, logs=None):
            seen.append(("eval", step, logs["batch_size"]))

    model.fit(DataLoader(train, batch_size=16), DataLoader(test, batch_size=8), epochs=1, verbose=0,
              callbacks=Steps())
    assert [s for s in seen if s[0] == "train"] == [("train", i, 16) for i in range(4)]
    assert [s[2] for s in seen if s[0] == "eval"] == [8, 8, 4]
    seen.clear()
    model.fit(train, test, batch_size=[32, 10], epochs=5, verbose=0, callbacks=[Steps()], num_iters=3)
    assert [s[1] for s in seen if s[0] == "train"] == [0, 1, 0]         # 3 steps, then stop
    assert [s[2] for s in seen if s[0] == "eval"] == [10, 10] * 2        # after each of the 2 epochs


def test_batch_methods_and_their_returns():
    data = Blobs(8)
    x, y = data.x, data.y.reshape(-1, 1)
    model = prepared()
    losses, metrics = model.train_batch([x], [y])
    assert isinstance(losses, list) and losses[0].shape == () and losses[0].dtype == np.float32
    assert len(metrics) == 1 and len(metrics[0]) == 2          # top-1 and top-2 of the batch
    losses, metrics = model.eval_batch([x], [y])
    assert losses[0].shape == ()
    out = model.predict_batch(x)
    assert isinstance(out, list) and out[0].shape == (8, 3) and isinstance(out[0], np.ndarray)
    # without metrics: the losses alone; without a loss: the metrics alone
    plain = prepared(metrics=False)
    assert len(plain.train_batch(x, y)) == 1
    only = ddg.Model(MLP())
    only.prepare(metrics=ddg.metric.Accuracy())
    assert only.eval_batch(x, y) == [pytest.approx(np.mean(only.predict_batch(x)[0].argmax(1) == data.y))]
    with pytest.raises(RuntimeError, match="prepare"):
        only.train_batch(x, y)


def test_accumulate_grad_batches_sums_gradients():
    data = Blobs(8)
    x, y = data.x, data.y.reshape(-1, 1)
    model = prepared(lr=0.1, metrics=False, opt="sgd")
    model.train_batch([x[:4]], [y[:4]], update=False)
    model.train_batch([x[4:]], [y[4:]], update=True)
    ref = MLP()
    loss = F.cross_entropy(ref(ddg.to_tensor(x[:4])), ddg.to_tensor(y[:4])) + \
        F.cross_entropy(ref(ddg.to_tensor(x[4:])), ddg.to_tensor(y[4:]))
    loss.backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy() - 0.1 * q.grad.numpy(), rtol=1e-5, atol=1e-6)
        assert p.grad is None or not np.any(p.grad.numpy())       # cleared after the update
    # in fit: an update every 2 steps and at the epoch's last step
    steps = []
    model = prepared(lr=0.1, metrics=False, opt="sgd")
    orig = model.train_batch
    model.train_batch = lambda i, l, update=True: (steps.append(update), orig(i, l, update))[1]
    model.fit(Blobs(40), batch_size=8, epochs=1, verbose=0, shuffle=False, accumulate_grad_batches=2)
    assert steps == [False, True, False, True, True]


def test_save_load_round_trip(tmp_path):
    train = Blobs(64)
    model = prepared()
    model.fit(train, batch_size=16, epochs=1, verbose=0)
    path = str(tmp_path / "ck" / "m")
    model.save(path)
    assert sorted(os.listdir(tmp_path / "ck")) == ["m.pdopt", "m.pdparams"]
    other = prepared(MLP(seed=5))
    other.load(path)
    for p, q in zip(model.parameters(), other.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    # the optimizer continues identically
    x, y = train.x[:16], train.y[:16].reshape(-1, 1)
    model.train_batch(x, y)
    other.train_batch(x, y)
    for p, q in zip(model.parameters(), other.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, atol=1e-7)
    other.load(path + ".pdparams", reset_optimizer=True)           # a suffix is accepted
    with pytest.raises(FileNotFoundError, match="nothere.pdparams"):
        other.load(str(tmp_path / "nothere"))
    # a mismatched network: an error naming the key, or a warning with skip_mismatch
    ddg.save({"fc1.weight": np.zeros((4, 16), np.float32)}, str(tmp_path / "part.pdparams"))
    with pytest.raises(ValueError, match="fc1.bias is not found"):
        other.load(str(tmp_path / "part"))
    before = other.parameters()[1].numpy().copy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other.load(str(tmp_path / "part"), skip_mismatch=True)
    skipped = sorted(str(w.message).split(".")[0] for w in caught)
    assert skipped == ["Skip loading for fc1", "Skip loading for fc2", "Skip loading for fc2"]
    assert "fc1.bias is not found" in str(caught[0].message)
    assert not other.parameters()[0].numpy().any()
    np.testing.assert_array_equal(other.parameters()[1].numpy(), before)


def test_save_for_inference(tmp_path):
    spec = ddg.static.InputSpec([None, 4], "float32", "x")
    model = ddg.Model(MLP(), inputs=[spec])
    model.prepare()
    model.save(str(tmp_path / "inf"), training=False)
    loaded = ddg.jit.load(str(tmp_path / "inf"))
    x = Blobs(5).x
    np.testing.assert_allclose(loaded(ddg.to_tensor(x)).numpy(), model.predict_batch(x)[0], rtol=1e-5)
    bare = ddg.Model(MLP())
    with pytest.raises(RuntimeError, match="input shapes"):
        bare.save(str(tmp_path / "bare"), training=False)
    bare.predict_batch(x[:2])                  # shapes inferred from a batch, batch size left free
    with pytest.warns(UserWarning, match="inputs"):
        bare.save(str(tmp_path / "bare"), training=False)
    np.testing.assert_allclose(ddg.jit.load(str(tmp_path / "bare"))(ddg.to_tensor(x)).numpy(),
                               bare.predict_batch(x)[0], rtol=1e-5)


def test_model_summary_and_parameters(capsys):
    model = ddg.Model(MLP(), inputs=ddg.static.InputSpec([None, 4], "float32", "x"))
    info = model.summary()
    assert info == {"total_params": 4 * 16 + 16 + 16 * 3 + 3, "trainable_params": 4 * 16 + 16 + 16 * 3 + 3}
    assert "Linear-" in capsys.readouterr().out
    assert len(model.parameters()) == 4
    with pytest.raises(ValueError, match="input_size"):
        ddg.Model(MLP()).summary()


def test_prepare_and_fit_reject_bad_arguments():
    model = ddg.Model(MLP())
    with pytest.raises(TypeError, match="Metric"):
        model.prepare(metrics=[object()])
    with pytest.raises(TypeError, match="loss"):
        model.prepare(loss=3)
    with pytest.raises(ValueError, match="amp level"):      # amp_configs itself: tests/test_amp.py
        model.prepare(amp_configs="O3")
    with pytest.raises(ValueError, match="not accepted"):
        model.prepare(amp_configs={"level": "O1", "loss_scale": 2})
    with pytest.raises(TypeError, match="Layer"):
        ddg.Model(lambda x: x)
    model = prepared()
    with pytest.raises(ValueError, match="train_data"):
        model.fit()
    with pytest.raises(ValueError, match="batch_size"):
        model.fit(Blobs(8), batch_size=[1, 2, 3])
    with pytest.raises(ValueError, match="epochs"):
        model.fit(Blobs(8), epochs=0)
    with pytest.raises(TypeError, match="Callback"):
        model.fit(Blobs(8), callbacks=[object()], verbose=0)


# ---------------------------------------------------------------------- callbacks
def test_callback_order_and_checkpoints(tmp_path, capsys):
    calls = []

    class Record(ddg.callbacks.Callback):
        def __getattribute__(self, name):
            if name.startswith("on_"):
                calls.append(name)
            return object.__getattribute__(self, name)

    model = prepared()
    model.fit(Blobs(32), Blobs(8, 1), batch_size=16, epochs=2, verbose=0, save_dir=str(tmp_path), save_freq=2,
              callbacks=[Record()])
    assert calls[:4] == ["on_train_begin", "on_epoch_begin", "on_train_batch_begin", "on_train_batch_end"]
    assert calls.count("on_epoch_end") == 2 and calls.count("on_eval_end") == 2 and calls[-1] == "on_train_end"
    assert sorted(os.listdir(tmp_path)) == ["0.pdopt", "0.pdparams", "final.pdopt", "final.pdparams"]
    assert "save checkpoint at " + str(tmp_path / "final") in capsys.readouterr().out


def test_early_stopping():
    model = prepared()
    # nothing beats the baseline: stop after `patience` evaluations without improvement (Paddle's count)
    stop = ddg.callbacks.EarlyStopping(monitor="acc_top1", mode="max", patience=2, baseline=1.5, verbose=0)
    epochs = []

    class Epochs(ddg.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            epochs.append(epoch)

    model.fit(Blobs(32), Blobs(8, 1), batch_size=16, epochs=10, verbose=0, callbacks=[stop, Epochs()])
    assert epochs == [0, 1] and model.stop_training
    # a later fit starts again
    epochs.clear()
    model.fit(Blobs(32), Blobs(8, 1), batch_size=16, epochs=2, verbose=0, callbacks=[Epochs()])
    assert epochs == [0, 1]
    auto = ddg.callbacks.EarlyStopping(monitor="acc")
    assert auto.monitor_op is np.greater
    assert ddg.callbacks.EarlyStopping(monitor="loss").monitor_op is np.less


def test_early_stopping_saves_best(tmp_path):
    model = prepared()
    stop = ddg.callbacks.EarlyStopping(monitor="loss", patience=3, verbose=0)
    model.fit(Blobs(32), Blobs(8, 1), batch_size=16, epochs=2, verbose=0, callbacks=[stop], save_dir=str(tmp_path))
    assert os.path.exists(tmp_path / "best_model.pdparams")


def test_lr_scheduler_callback_steps():
    sched = ddg.optimizer.lr.StepDecay(learning_rate=0.1, step_size=2, gamma=0.5)
    model = ddg.Model(MLP())
    model.prepare(ddg.optimizer.SGD(learning_rate=sched, parameters=model.parameters()), nn.CrossEntropyLoss())
    model.fit(Blobs(32), batch_size=8, epochs=1, verbose=0)            # 4 steps: stepped 4 times
    assert sched.last_epoch == 4 and model._optimizer.get_lr() == pytest.approx(0.025)
    sched2 = ddg.optimizer.lr.StepDecay(learning_rate=0.1, step_size=2, gamma=0.5)
    model.prepare(ddg.optimizer.SGD(learning_rate=sched2, parameters=model.parameters()), nn.CrossEntropyLoss())
    model.fit(Blobs(32), batch_size=8, epochs=3, verbose=0,
              callbacks=[ddg.callbacks.LRScheduler(by_step=False, by_epoch=True)])
    assert sched2.last_epoch == 3
    with pytest.raises(ValueError, match="exclusive"):
        ddg.callbacks.LRScheduler(by_step=True, by_epoch=True)


def test_reduce_lr_on_plateau(capsys):
    model = prepared(lr=0.01)
    # min_delta so large that nothing counts as an improvement after the first evaluation
    cb = ddg.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=2, min_delta=100.0, verbose=1)
    model.fit(Blobs(16), Blobs(8, 1), batch_size=16, epochs=5, verbose=0, callbacks=[cb])
    # evaluations 2 and 3 do not improve: reduced once (0.005), then 4 and 5: again (0.0025)
    assert model._optimizer.get_lr() == pytest.approx(0.0025)
    assert "ReduceLROnPlateau reducing learning rate to 0.005" in capsys.readouterr().out
    with pytest.raises(ValueError, match="factor"):
        ddg.callbacks.ReduceLROnPlateau(factor=1.0)


def test_visualdl_writes_scalars(monkeypatch, tmp_path):
    written = []

    class LogWriter:
        def __init__(self, logdir):
            written.append(("open", logdir))

        def add_scalar(self, tag, step, value):
            written.append((tag, step, value))

        def close(self):
            written.append(("close",))

    fake = type(sys)("visualdl")
    fake.LogWriter = LogWriter
    monkeypatch.setitem(sys.modules, "visualdl", fake)
    model = prepared()
    model.fit(Blobs(32), Blobs(8, 1), batch_size=16, epochs=1, verbose=0,
              callbacks=[ddg.callbacks.VisualDL(str(tmp_path))])
    tags = [w[0] for w in written]
    assert tags[0] == "open" and tags[-1] == "close"
    assert tags.count("train/loss") == 2 and tags.count("eval/acc_top1") == 1
    monkeypatch.setitem(sys.modules, "visualdl", None)
    with pytest.raises(ImportError, match="pip install visualdl"):
        prepared().fit(Blobs(16), batch_size=16, verbose=0, callbacks=[ddg.callbacks.VisualDL(str(tmp_path))])


# ---------------------------------------------------------------------- the quick start, fast
def test_quickstart_lenet_mnist(shared_dir, tmp_path, capsys):
    """Paddle's quick start on one epoch of the MNIST subset (the full program is
    examples/quickstart_hapi.py): LeNet, Adam, Accuracy, fit/evaluate/save/load."""
    data = os.path.join(shared_dir, "data", "mnist-10k")
    assert os.path.isfile(os.path.join(data, "train-images-idx3-ubyte.gz")), f"mnist-10k not found in {data}"
    from ddg.vision.transforms import Normalize
    transform = Normalize(mean=[127.5], std=[127.5], data_format="CHW")
    train = ddg.vision.datasets.MNIST(mode="train", transform=transform, data_dir=data)
    test = ddg.vision.datasets.MNIST(mode="test", transform=transform, data_dir=data)
    ddg.seed(1)
    model = ddg.Model(ddg.vision.models.LeNet(num_classes=10))
    model.prepare(ddg.optimizer.Adam(parameters=model.parameters()), nn.CrossEntropyLoss(), ddg.metric.Accuracy())
    model.fit(train, epochs=1, batch_size=64, verbose=1)
    result = model.evaluate(test, batch_size=64, verbose=1)
    out = capsys.readouterr().out
    assert "step 125/125 [" in out and "Eval samples: 2000" in out
    assert result["acc"] > 0.9, result          # Paddle's quick start: 0.9565 after 5 epochs
    model.save(str(tmp_path / "mnist"))
    fresh = ddg.Model(ddg.vision.models.LeNet())
    fresh.prepare(ddg.optimizer.Adam(parameters=fresh.parameters()), nn.CrossEntropyLoss(), ddg.metric.Accuracy())
    fresh.load(str(tmp_path / "mnist"))
    img, label = test[0]
    out = fresh.predict_batch(np.expand_dims(img.astype("float32"), axis=0))[0]
    np.testing.assert_allclose(out, model.predict_batch(img[None])[0], rtol=1e-6)
    assert fresh.evaluate(test, batch_size=500, verbose=0)["acc"] == result["acc"]


def test_model_on_each_device(place, tmp_path):
    """fit/evaluate/predict/save/load with the network on the GPU where there is one
    (metrics on the device's arrays, results as numpy)."""
    from ddg.tensor import backend
    prev = ddg.get_device()
    ddg.set_device(place)
    try:
        model = prepared()
        model.fit(Blobs(64), Blobs(20, 1), batch_size=16, epochs=3, verbose=0)
        assert backend.is_gpu_array(model.parameters()[0]._data) == (place == "gpu")
        result = model.evaluate(Blobs(20, 1), batch_size=8, verbose=0)
        out = model.predict(Blobs(20, 1), batch_size=8, stack_outputs=True, verbose=0)[0]
        model.save(str(tmp_path / "m"))
        other = prepared(MLP(seed=3))
        other.load(str(tmp_path / "m"))
        again = other.predict(Blobs(20, 1), batch_size=8, stack_outputs=True, verbose=0)[0]
    finally:
        ddg.set_device(prev)
    assert isinstance(out, np.ndarray) and out.shape == (20, 3)
    assert result["acc_top1"] == pytest.approx(np.mean(out.argmax(1) == Blobs(20, 1).y))
    np.testing.assert_allclose(again, out, rtol=1e-5, atol=1e-6)


def test_flops_of_zoo_models_as_paddle(capsys):
    # Paddle's totals; parameters include batch norm's running statistics, as Paddle's
    assert ddg.flops(ddg.vision.models.mobilenet_v2(scale=0.5), [1, 3, 32, 32]) == 3387296
    assert "Total Flops: 3387296     Total Params: 1987224" in capsys.readouterr().out
    assert ddg.flops(ddg.vision.models.squeezenet1_1(), [1, 3, 64, 64]) == 21889144
    assert "Total Params: 1235496" in capsys.readouterr().out


@pytest.mark.parametrize("n, bs, w, shuffle", [(37, 4, 2, False), (37, 4, 3, True), (10, 3, 4, True), (64, 8, 2, True)])
def test_shard_order_puts_gathered_rows_back_in_the_samplers_order(n, bs, w, shuffle):
    """What Model._gather does with each step's rows, rank after rank: keep every dataset
    sample exactly once, in the order of the epoch's (shuffled) list."""
    from ddg.hapi.model import _Shard
    from ddg.io import DistributedBatchSampler
    data = list(range(n))
    samplers = [DistributedBatchSampler(data, bs, num_replicas=w, rank=r, shuffle=shuffle) for r in range(w)]
    for s in samplers:
        s.set_epoch(5)
    batches = [list(s) for s in samplers]
    seen = []
    shard = _Shard(samplers[0])
    for step in range(len(batches[0])):
        rows = np.concatenate([batches[r][step] for r in range(w)])
        shard.at(step)
        seen.extend(rows[shard.order(len(batches[0][step]))].tolist())
    assert sorted(seen) == data
    expected = [i for i in samplers[0]._padded(5)[~samplers[0].is_padding(5)]]
    assert seen == expected
