"""BatchNorm's running statistics are non-trainable parameters (as Paddle's), not
buffers: the places that handle a model's state treat them so. Counting (summary,
flops), the optimizer's checkpoint, to_static, AMP O2, DataParallel's options. The
multi-rank side (the state broadcast, SyncBatchNorm under to_static) is in
test_mpi_model_families.py."""
import warnings

import numpy as np
import pytest

import ddg
from ddg import nn


class StatsAsBuffer(nn.Layer):
    """A leaf layer with one parameter and buffers named like batch norm statistics."""

    def __init__(self):
        super().__init__()
        self.weight = self.create_parameter([3, 3])
        self.register_buffer("_mean", ddg.zeros([3]))
        self.register_buffer("_variance", ddg.ones([3]))

    def forward(self, x):
        return ddg.matmul(x, self.weight)


def test_summary_and_flops_count_parameters_not_buffers(capsys):
    # Paddle counts a layer's parameters (batch norm's statistics among them), never its buffers
    net = nn.Sequential(nn.Conv2D(2, 4, 1), nn.BatchNorm2D(4), nn.Flatten(), nn.Linear(4 * 9, 3), StatsAsBuffer())
    info = ddg.summary(net, (1, 2, 3, 3))
    conv, bn, fc, own = 2 * 4 + 4, 4 * 4, 4 * 9 * 3 + 3, 9
    assert info == {"total_params": conv + bn + fc + own, "trainable_params": conv + 2 * 4 + fc + own}
    capsys.readouterr()
    ddg.flops(net, [1, 2, 3, 3])
    assert f"Total Params: {conv + bn + fc + own}" in capsys.readouterr().out


def test_optimizer_state_loads_by_position_into_a_rebuilt_batch_norm_model():
    # a model rebuilt in the same process gets new parameter names: the saved state is
    # matched by position among the parameters that train (not the statistics)
    def make():
        ddg.seed(0)
        m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1D(4), nn.Linear(4, 2), nn.BatchNorm1D(2))
        return m, ddg.optimizer.Adam(0.1, parameters=m.parameters(), weight_decay=0.5)
    m, opt = make()
    m(ddg.randn([5, 3])).sum().backward()
    stats = {k: v.numpy().copy() for k, v in m.state_dict().items() if k.endswith(("_mean", "_variance"))}
    opt.step()
    # the (fused) step leaves the statistics alone and keeps no state for them
    for k, v in stats.items():
        np.testing.assert_array_equal(m.state_dict()[k].numpy(), v)
    stat_names = {p.name for p in m.parameters() if p.stop_gradient}
    assert len(stat_names) == 4 and not any(k.startswith(tuple(stat_names)) for k in opt.state_dict())
    saved = {k: v.numpy().copy() for k, v in opt.state_dict().items() if hasattr(v, "numpy")}
    _, opt2 = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt2.set_state_dict(opt.state_dict())
    got = [v.numpy() for v in opt2.state_dict().values() if hasattr(v, "numpy")]
    assert len(got) == len(saved) > 0
    for a, b in zip(got, saved.values()):
        np.testing.assert_array_equal(a, b)


class RawStatistic(nn.Layer):
    """Updates a non-trainable parameter outside ops (which to_static cannot record)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.count = self.create_parameter([1], default_initializer=nn.initializer.Constant(0.0))
        self.count.stop_gradient = True

    def forward(self, x):
        self.count._data += 1
        return self.fc(x)


def test_to_static_never_drops_a_write_to_a_non_trainable_parameter():
    layer = RawStatistic()
    static = ddg.jit.to_static(layer)
    with pytest.warns(UserWarning, match="running eagerly"):
        for _ in range(4):
            static(ddg.ones([2, 3]))
    assert float(layer.count.numpy()[0]) == 4.0


@pytest.mark.parametrize("kind", ["BatchNorm2D", "SyncBatchNorm"])
def test_to_static_updates_batch_norm_statistics_as_eager(kind):
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((4, 3, 2, 2)).astype(np.float32) for _ in range(4)]
    out = []
    for static in (False, True):
        ddg.seed(1)
        model = nn.Sequential(nn.Conv2D(3, 3, 1), nn.BatchNorm(3, act="relu"))
        if kind == "SyncBatchNorm":
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        run = ddg.jit.to_static(model) if static else model
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # recorded, not run eagerly
            for x in xs:
                run(ddg.to_tensor(x)).mean().backward()
        out.append({k: v.numpy().copy() for k, v in model.state_dict().items()})
    for k in out[0]:
        np.testing.assert_array_equal(out[1][k], out[0][k], err_msg=k)


def test_amp_o2_keeps_converted_batch_norms_in_float32():
    model = nn.SyncBatchNorm.convert_sync_batchnorm(
        nn.Sequential(nn.Conv2D(3, 4, 1), nn.BatchNorm(4, act="relu"), nn.Conv2D(4, 2, 1), nn.BatchNorm2D(2)))
    model = ddg.amp.decorate(model, level="O2", dtype="float16")
    dtypes = {k: v.dtype for k, v in model.state_dict().items()}
    assert all(dtypes[k] == ddg.float32 for k in dtypes if k.startswith(("1.", "3."))), dtypes
    assert dtypes["0.weight"] == ddg.float16 and dtypes["2.weight"] == ddg.float16
    with ddg.amp.auto_cast(level="O2", dtype="float16"):
        y = model(ddg.randn([2, 3, 2, 2]))
    assert y.dtype in (ddg.float16, ddg.float32)


def test_data_parallel_broadcast_buffers_option():
    dp = ddg.DataParallel(nn.BatchNorm1D(2), broadcast_buffers=False)
    assert dp.broadcast_buffers is False
    assert ddg.DataParallel(nn.BatchNorm1D(2)).broadcast_buffers is True
