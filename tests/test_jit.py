"""ddg.jit.to_static (record once per signature, replay), ddg.static.InputSpec,
ddg.jit.save / load."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.jit import program as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fresh_copy(make, layer):
    other = make()
    other.set_state_dict(layer.state_dict())
    return other


def _run(model, x, steps=4):
    """Outputs and parameter gradients of ``steps`` calls (same inputs)."""
    outs, grads = [], []
    for _ in range(steps):
        y = model(x)
        y = y[0] if isinstance(y, (tuple, list)) else y
        (y * y).sum().backward()
        outs.append(y.numpy().copy())
        grads.append([p.grad.numpy().copy() for p in model.parameters() if p.grad is not None])
        model.clear_gradients()
    return outs, grads


def _is_replaying(fn):
    return any(isinstance(v, T.Program) for v in fn._cache.values())


class _Seq(nn.Layer):
    def __init__(self, *layers):
        super().__init__()
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


LAYERS = {
    "linear": (lambda: _Seq(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)), [4, 6], "float32"),
    "conv_pool": (lambda: _Seq(nn.Conv2D(2, 3, 3, padding=1), nn.MaxPool2D(2, 2), nn.Conv2D(3, 2, 3),
                               nn.AvgPool2D(1), nn.Flatten(), nn.Linear(2, 2)), [2, 2, 6, 6], "float32"),
    "batchnorm_eval": (lambda: _Seq(nn.Conv2D(2, 3, 3), nn.BatchNorm2D(3)).eval(), [2, 2, 5, 5], "float32"),
    "layernorm": (lambda: _Seq(nn.Linear(4, 6), nn.LayerNorm(6), nn.GELU()), [3, 4], "float32"),
    "dropout_eval": (lambda: _Seq(nn.Linear(4, 6), nn.Dropout(0.5), nn.Tanh()).eval(), [3, 4], "float32"),
    "activations": (lambda: _Seq(nn.Linear(4, 6), nn.LeakyReLU(), nn.ELU(), nn.Softplus(), nn.Sigmoid()),
                    [3, 4], "float32"),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layers_static_equals_eager(name):
    make, shape, dtype = LAYERS[name]
    ddg.seed(1)
    eager = make()
    static = ddg.jit.to_static(_fresh_copy(make, eager))
    assert list(static.state_dict()) == list(eager.state_dict())
    x = ddg.randn(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e_out, e_grad = _run(eager, x)
        s_out, s_grad = _run(static, x)
    assert _is_replaying(static.forward), name
    for a, b in zip(e_out, s_out):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for ga, gb in zip(e_grad, s_grad):
        assert len(ga) == len(gb)
        for a, b in zip(ga, gb):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_embedding_and_lstm():
    class M(nn.Layer):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.lstm = nn.LSTM(4, 5)

        def forward(self, ids):
            out, _ = self.lstm(self.emb(ids))
            return out

    ddg.seed(2)
    eager = M()
    static = ddg.jit.to_static(_fresh_copy(M, eager))
    ids = ddg.to_tensor(np.array([[1, 2, 3], [4, 5, 9]], dtype=np.int64))
    e_out, e_grad = _run(eager, ids, 3)
    s_out, s_grad = _run(static, ids, 3)
    for a, b in zip(e_out, s_out):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for ga, gb in zip(e_grad, s_grad):
        for a, b in zip(ga, gb):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_replay_is_one_node_and_sees_parameter_updates():
    ddg.seed(3)
    lin = nn.Linear(3, 2)
    f = ddg.jit.to_static(lambda x: F.relu(lin(x)) * 2.0)
    x = ddg.randn([4, 3])
    for _ in range(3):
        y = f(x)
    assert type(y._node).__name__ == "_Replay"
    with ddg.no_grad():
        lin.weight.set_value(lin.weight.numpy() + 1.0)
    want = F.relu(lin(x)) * 2.0
    np.testing.assert_allclose(f(x).numpy(), want.numpy(), rtol=1e-6)
    # gradients reach the live parameters through the single node
    f(x).sum().backward()
    assert lin.weight.grad is not None and lin.bias.grad is not None


def test_grad_ready_hooks_fire_during_replayed_backward():
    ddg.seed(4)
    lin = nn.Linear(3, 2)
    f = ddg.jit.to_static(lambda x: lin(x).sum())
    x = ddg.randn([4, 3])
    f(x), f(x)
    fired = []
    for p in lin.parameters():
        p.register_grad_ready_hook(lambda t: fired.append(t.name))
    f(x).backward()
    assert sorted(fired) == sorted(p.name for p in lin.parameters())


def test_no_grad_replay():
    ddg.seed(5)
    lin = nn.Linear(3, 2)
    f = ddg.jit.to_static(lambda x: lin(x))
    x = ddg.randn([4, 3])
    with ddg.no_grad():
        outs = [f(x) for _ in range(3)]
    assert outs[-1].stop_gradient and outs[-1]._node is None
    np.testing.assert_allclose(outs[-1].numpy(), lin(x).numpy(), rtol=1e-6)


def test_dropout_differs_across_calls_in_training():
    ddg.seed(6)
    layer = ddg.jit.to_static(_Seq(nn.Dropout(0.5)))
    x = ddg.ones([64])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # dropout in training replays: no eager fallback
        masks = [layer(x).numpy() for _ in range(4)]
    assert _is_replaying(layer.forward)
    assert not all((m == masks[0]).all() for m in masks[1:])
    for m in masks:
        assert set(np.unique(m)) <= {0.0, 2.0}


def _dropout_reference(x, p, shape, mode):
    """Eager dropout as it has always been computed: float32 uniforms of the mask shape
    from ddg's generator, kept where >= p (call right after the same seed)."""
    keep = ddg.tensor.backend.rng().random(tuple(shape), dtype=np.float32) >= p
    mask = keep.astype(x.dtype)
    if mode == "upscale_in_train":
        mask = mask * x.dtype.type(1.0 / (1.0 - p))
    return x * mask


@pytest.mark.parametrize("p,axis,mode", [(0.5, None, "upscale_in_train"), (0.3, 1, "upscale_in_train"),
                                         (0.25, [0, 2], "downscale_in_infer")])
def test_dropout_train_replay_fresh_masks_same_as_eager(p, axis, mode):
    make = lambda: _Seq(nn.Linear(6, 6), nn.Dropout(p, axis, mode), nn.Tanh())  # noqa: E731
    ddg.seed(20)
    eager = make()
    static = ddg.jit.to_static(_fresh_copy(make, eager))
    xa = np.random.default_rng(0).standard_normal((4, 16, 6)).astype(np.float32)
    x = ddg.to_tensor(xa)
    ddg.seed(21)
    e_out, e_grad = _run(eager, x, 6)
    ddg.seed(21)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s_out, s_grad = _run(static, x, 6)
    assert _is_replaying(static.forward)
    assert len({o.tobytes() for o in s_out}) == 6  # a fresh mask at every replay
    for a, b in zip(e_out, s_out):
        np.testing.assert_array_equal(a, b)
    for ga, gb in zip(e_grad, s_grad):
        for a, b in zip(ga, gb):
            np.testing.assert_array_equal(a, b)
    # eager numerics are those of the reference draw, and the gradient is the mask
    h = ddg.to_tensor(xa, stop_gradient=False)
    ddg.seed(22)
    y = F.dropout(h, p, axis, True, mode)
    shape = list(xa.shape) if axis is None else [
        n if i in ([axis] if isinstance(axis, int) else axis) else 1 for i, n in enumerate(xa.shape)]
    ddg.seed(22)
    want = _dropout_reference(xa, p, shape, mode)
    np.testing.assert_array_equal(y.numpy(), want)
    y.sum().backward()
    ddg.seed(22)
    mask = _dropout_reference(np.ones_like(xa), p, shape, mode)  # the mask, broadcast to x's shape
    np.testing.assert_array_equal(h.grad.numpy(), mask)


def test_rand_as_data_redraws():
    ddg.seed(7)
    f = ddg.jit.to_static(lambda x: x + ddg.rand(x.shape))
    x = ddg.zeros([5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vals = [f(x).numpy() for _ in range(4)]
    assert _is_replaying(f)
    assert len({v.tobytes() for v in vals}) == 4
    # the same numbers as eager mode from the same seed
    ddg.seed(7)
    g = ddg.jit.to_static(lambda x: x + ddg.rand(x.shape))
    ddg.seed(7)
    eager = [(x + ddg.rand(x.shape)).numpy() for _ in range(4)]
    ddg.seed(7)
    static = [g(x).numpy() for _ in range(4)]
    np.testing.assert_array_equal(np.array(eager), np.array(static))


def test_coin_flip_control_flow_falls_back_with_one_warning():
    class Coin(nn.Layer):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)

        def forward(self, x):
            x = self.a(x)
            if ddg.rand([1]) > 0.5:
                x = self.b(x)
            return x

    ddg.seed(8)
    eager = Coin()
    static = ddg.jit.to_static(_fresh_copy(Coin, eager))
    x = ddg.randn([2, 4])
    ddg.seed(9)
    e = [eager(x).numpy() for _ in range(12)]
    ddg.seed(9)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = [static(x).numpy() for _ in range(12)]
    np.testing.assert_array_equal(np.array(e), np.array(s))
    msgs = [str(m.message) for m in w if "to_static" in str(m.message)]
    assert len(msgs) == 1 and "test_jit.py" in msgs[0], msgs


def test_data_dependent_bool_falls_back():
    calls = []

    def f(x):
        calls.append(1)
        if x.sum() > 0:
            return x * 2.0
        return x * -1.0

    g = ddg.jit.to_static(f)
    pos, neg = ddg.ones([3]), -ddg.ones([3])
    with pytest.warns(UserWarning, match="test_jit.py"):
        g(pos)
    np.testing.assert_allclose(g(neg).numpy(), [1, 1, 1])
    np.testing.assert_allclose(g(pos).numpy(), [2, 2, 2])


def test_item_falls_back():
    g = ddg.jit.to_static(lambda x: x * float(x.max().item()))
    with pytest.warns(UserWarning, match="item"):
        g(ddg.ones([2]))
    np.testing.assert_allclose(g(ddg.full([2], 3.0)).numpy(), [9, 9])


def test_where_mask_is_recomputed():
    g = ddg.jit.to_static(lambda x: ddg.where(x > 0, x, x * 0.1))
    for _ in range(3):
        g(ddg.ones([4]))
    x = ddg.to_tensor([-1.0, 2.0, -3.0, 4.0])
    np.testing.assert_allclose(g(x).numpy(), [-0.1, 2.0, -0.3, 4.0], rtol=1e-6)
    assert _is_replaying(g)


# -- every op is a Function: replays recompute non-differentiable ops on new data ---------------
# Each case runs on x1, x1 (two identical recordings: values frozen as constants would go
# unnoticed), then on x2 and x3 (replays): every call must equal eager.
NOGRAD_CASES = {
    "where_greater_than": lambda x: ddg.where(ddg.greater_than(x, 0 * x), x, 0 * x),
    "where_less_equal": lambda x: ddg.where(ddg.less_equal(x, 0 * x), x, 0 * x),
    "where_greater_equal_scalar": lambda x: ddg.where(ddg.greater_equal(x, 0.0), x, 2 * x),
    "where_less_than_scalar_first": lambda x: ddg.where(ddg.less_than(0.0, x), x, 2 * x),
    "equal": lambda x: ddg.equal(ddg.round(x), ddg.zeros_like(x)),
    "not_equal": lambda x: ddg.not_equal(ddg.round(x), 0.0),
    "logical_and": lambda x: ddg.logical_and(x > 0, x < 1),
    "logical_or": lambda x: ddg.logical_or(ddg.greater_than(x, 1 + 0 * x), ddg.less_than(x, -1 + 0 * x)),
    "logical_xor": lambda x: ddg.logical_xor(x > 0, ddg.greater_than(x, 0.5)),
    "logical_not": lambda x: ddg.logical_not(ddg.greater_than(x, 0 * x)),
    "invert": lambda x: ~(x > 0),
    "isnan": lambda x: ddg.isnan(ddg.log(x)),
    "isinf": lambda x: ddg.isinf(1.0 / ddg.round(x)),
    "isfinite": lambda x: ddg.isfinite(ddg.log(x)),
    "argmax": lambda x: ddg.argmax(x, axis=1),
    "argmin_flat": lambda x: ddg.argmin(x),
    "all": lambda x: ddg.all(x > 0, axis=0),
    "any": lambda x: ddg.any(ddg.greater_than(x, 0 * x)),
    "nonzero": lambda x: ddg.nonzero(x > 0),
    "where_one_arg": lambda x: ddg.where(x > 0)[1],
    "equal_all": lambda x: ddg.equal_all(ddg.round(x), ddg.zeros_like(x)),
    "allclose": lambda x: ddg.allclose(x, ddg.zeros_like(x), atol=1.0),
    "isclose": lambda x: ddg.isclose(x, ddg.zeros_like(x), atol=0.5),
    "bitwise_and": lambda x: ddg.bitwise_and(ddg.cast(x > 0, "int32"), ddg.cast(x > 1, "int32")),
    "count_nonzero": lambda x: ddg.count_nonzero(ddg.round(x), axis=1),
    "masked_select": lambda x: ddg.masked_select(x, x > 0) * 2,
}


@pytest.mark.parametrize("name", list(NOGRAD_CASES))
def test_functional_nograd_ops_replay_on_new_data(name):
    fn = NOGRAD_CASES[name]
    g = ddg.jit.to_static(fn)
    rng = np.random.default_rng(3)
    x1 = rng.standard_normal((3, 4)).astype(np.float32)
    data = [x1, x1, rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to eager: the function must replay
        with np.errstate(all="ignore"):
            for i, a in enumerate(data):
                got, want = g(ddg.to_tensor(a)), fn(ddg.to_tensor(a))
                assert got.shape == want.shape and got.dtype == want.dtype, (name, i)
                np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"{name}, call {i}")
    assert _is_replaying(g), name


def test_where_greater_than_regression_x1_x1_x2():
    """Calls on x1, x1, x2: the mask computed from x2 is used on x2, not x1's replayed."""
    g = ddg.jit.to_static(lambda x: ddg.where(ddg.greater_than(x, 0 * x), x, 0 * x))
    x1 = ddg.to_tensor([1.0, -2.0, 3.0])
    g(x1)
    g(x1)
    x2 = ddg.to_tensor([-1.0, 2.0, -3.0])
    np.testing.assert_array_equal(g(x2).numpy(), [0.0, 2.0, 0.0])
    assert _is_replaying(g)


def _op_table_rows():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        from test_ops_table import ROWS, _data
    finally:
        sys.path.pop(0)
    return ROWS, _data


_ROWS, _ROW_DATA = _op_table_rows()


@pytest.mark.parametrize("row", _ROWS, ids=[r[0] for r in _ROWS])
def test_op_table_under_to_static_equals_eager(row):
    """Every row of the op table, recorded and replayed on changing data (x1, x1, x2, x3):
    outputs and input gradients equal eager's."""
    name, fn, _, shapes, domain = row
    g = ddg.jit.to_static(fn)
    rng = np.random.default_rng(7)
    first = [_ROW_DATA(s, domain, rng).astype(np.float32) for s in shapes]
    calls = [first, first] + [[_ROW_DATA(s, domain, rng).astype(np.float32) for s in shapes] for _ in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i, arrays in enumerate(calls):
            results = []
            for f in (g, fn):
                ins = [ddg.to_tensor(a, stop_gradient=False) for a in arrays]
                out = f(*ins)
                cot = np.random.default_rng(i).standard_normal(out.shape).astype(np.float32)
                (out * ddg.to_tensor(cot)).sum().backward()
                results.append((out.numpy(), [t.grad.numpy() for t in ins]))
            (o_s, g_s), (o_e, g_e) = results
            assert o_s.shape == o_e.shape, (name, i)
            np.testing.assert_allclose(o_s, o_e, rtol=1e-6, atol=1e-7, err_msg=f"{name}, call {i}")
            for a, b in zip(g_s, g_e):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=f"{name} gradient, call {i}")
    assert _is_replaying(g), name


INDEX_CASES = {
    "embedding": lambda ids, emb: F.embedding(ids, emb),
    "embedding_padding_idx": lambda ids, emb: F.embedding(ids, emb, padding_idx=4),
    "one_hot": lambda ids, emb: F.one_hot(ids, 5) @ emb,
    "take_along_axis": lambda ids, emb: ddg.take_along_axis(emb, ddg.reshape(ids, [-1, 1]) % 3, 1),
    "getitem_tensor": lambda ids, emb: emb[ids],
    "cross_entropy_ignore_weight": lambda ids, emb: F.cross_entropy(
        ddg.matmul(emb[ddg.to_tensor([0, 1, 2, 3])], emb, transpose_y=True), ids, ignore_index=4,
        weight=ddg.to_tensor([1.0, 2.0, 3.0, 4.0, 5.0])),
    "nll_loss_ignore": lambda ids, emb: F.nll_loss(
        F.log_softmax(ddg.matmul(emb[ddg.to_tensor([0, 1, 2, 3])], emb, transpose_y=True)), ids, ignore_index=4),
}


@pytest.mark.parametrize("name", list(INDEX_CASES))
def test_integer_index_inputs_replay_on_new_data(name):
    """Ops indexed by an integer input tensor take it as an op input, not a frozen constant."""
    fn = INDEX_CASES[name]
    g = ddg.jit.to_static(fn)
    emb = ddg.to_tensor(np.arange(15, dtype=np.float32).reshape(5, 3), stop_gradient=False)
    for i, ids in enumerate([[0, 1, 2, 3], [0, 1, 2, 3], [4, 4, 0, 1], [2, 3, 3, 0]]):
        outs = []
        for f in (g, fn):
            emb.clear_grad()
            out = f(ddg.to_tensor(ids), emb)
            (out * out).sum().backward()
            outs.append((out.numpy(), emb.grad.numpy()))
        np.testing.assert_array_equal(outs[0][0], outs[1][0], err_msg=f"{name}, call {i}")
        np.testing.assert_array_equal(outs[0][1], outs[1][1], err_msg=f"{name} gradient, call {i}")
    assert _is_replaying(g), name


def test_recording_leaves_tensor_classes_and_generator_alone():
    """Recording neither swaps the class of the tensors it watches nor the global generator."""
    from ddg.tensor import backend
    lin = nn.Linear(3, 2)
    seen = []

    def f(x):
        seen.append((type(x), type(lin.weight), backend._np_rng))
        return lin(x) + ddg.rand([2])
    g = ddg.jit.to_static(f)
    gen = backend._np_rng
    for _ in range(3):
        g(ddg.randn([4, 3]))
    assert seen == [(ddg.Tensor, type(lin.weight), gen)] * 2 and type(lin.weight) is ddg.nn.Parameter
    assert _is_replaying(g)


def test_observe_rng_reports_draws_unchanged():
    from ddg.tensor import backend
    ddg.seed(5)
    plain = backend.rng().normal(0, 1, 3)
    ddg.seed(5)
    log = []
    with backend.observe_rng(lambda *a: log.append(a)):
        seen = backend.rng().normal(0, 1, 3)
        with pytest.raises(RuntimeError):
            backend.observe_rng(print).__enter__()
    np.testing.assert_array_equal(seen, plain)
    assert [(m, a) for m, a, _, _ in log] == [("normal", (0, 1, 3))] and log[0][3] is seen
    assert type(backend.rng()) is np.random.Generator


def test_load_reads_raw_logic_steps_of_older_files(tmp_path):
    """Files written when comparisons were recorded as "raw" numpy steps still load."""
    import json
    from ddg.io import serialization as ser
    net = nn.Linear(3, 3)
    f = ddg.jit.to_static(lambda x: ddg.where(x > 0, net(x), x))
    spec = [ddg.static.InputSpec([2, 3], "float32")]
    ddg.jit.save(net, str(tmp_path / "m"), input_spec=spec)  # writes the params file
    blob = ser.load(str(tmp_path / "m") + ".pdmodel", return_numpy=True)
    graph = json.loads(blob["graph"])
    # a hand-made graph: out = where(x > 0.5, lin(x), x) with the comparison as a raw step
    prog = f.concrete_program(ddg.ones([2, 3]))
    from ddg.jit.serialize import _to_json
    g2, arrays = _to_json([prog], net, (), ())
    steps = []
    for st in g2["steps"]:
        if st["op"].endswith(":Elementwise"):
            steps.append({"raw": "greater", "args": [["s", st["ins"][0]], ["v", {"f": float.hex(0.5)}]],
                          "out": st["outs"][0]})
        else:
            steps.append(st)
    g2["steps"] = steps
    g2.update(inputs=graph["inputs"], dyn=[], params=graph["params"])
    ser.save({"format": blob["format"], "version": blob["version"], "graph": json.dumps(g2), "arrays": arrays},
             str(tmp_path / "m") + ".pdmodel")
    loaded = ddg.jit.load(str(tmp_path / "m"))
    x = ddg.to_tensor(np.array([[0.2, 0.7, -1.0], [1.5, 0.4, 0.6]], np.float32))
    with ddg.no_grad():
        want = ddg.where(x > 0.5, net(x), x)
    np.testing.assert_allclose(loaded(x).numpy(), want.numpy(), rtol=1e-6)
    bad = dict(g2, steps=[dict(steps[0], raw="system")] + steps[1:]) if "raw" in steps[0] else None
    if bad is None:
        bad = dict(g2, steps=[{"raw": "system", "args": [], "out": 0}] + steps)
    ser.save({"format": blob["format"], "version": blob["version"], "graph": json.dumps(bad), "arrays": arrays},
             str(tmp_path / "m") + ".pdmodel")
    with pytest.raises(ValueError, match="not allowed"):
        ddg.jit.load(str(tmp_path / "m"))


def test_signature_change_rerecords():
    lin = nn.Linear(3, 2)
    f = ddg.jit.to_static(lambda x, scale: lin(x) * scale)
    for _ in range(3):
        f(ddg.randn([4, 3]), 2.0)
    y = f(ddg.randn([7, 3]), 2.0)
    assert y.shape == [7, 2]
    x = ddg.randn([4, 3])
    np.testing.assert_allclose(f(x, 3.0).numpy(), (lin(x) * 3.0).numpy(), rtol=1e-6)
    assert len(f._cache) == 3


def test_training_flag_in_signature_and_batchnorm_stats():
    ddg.seed(10)
    make = lambda: _Seq(nn.Linear(3, 4), nn.BatchNorm1D(4))  # noqa: E731
    eager = make()
    static = ddg.jit.to_static(_fresh_copy(make, eager))
    x = ddg.randn([8, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # BatchNorm in training replays: no eager fallback
        for _ in range(4):
            eager(x).sum().backward()
            static(x).sum().backward()
    assert _is_replaying(static.forward)
    for (k, a), (_, b) in zip(eager.state_dict().items(), static.state_dict().items()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    eager.eval()
    static.eval()
    for _ in range(3):
        np.testing.assert_allclose(static(x).numpy(), eager(x).numpy(), rtol=1e-5, atol=1e-6)


def _train_steps(model, x, steps, lr=0.1):
    opt = ddg.optimizer.SGD(learning_rate=lr, parameters=model.parameters())
    losses = []
    for _ in range(steps):
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(loss.numpy().copy())
    return losses


@pytest.mark.parametrize("kind", ["bn1d", "bn2d_dropout"])
def test_batchnorm_train_replay_running_stats_equal_eager(kind):
    if kind == "bn1d":
        make = lambda: _Seq(nn.Linear(3, 5), nn.BatchNorm1D(5, momentum=0.8), nn.ReLU(), nn.Linear(5, 2))  # noqa
        shape = [8, 3]
    else:
        make = lambda: _Seq(nn.Conv2D(2, 3, 3), nn.BatchNorm2D(3), nn.ReLU(), nn.Dropout2D(0.5),  # noqa: E731
                            nn.Flatten(), nn.Linear(27, 2))
        shape = [4, 2, 5, 5]
    ddg.seed(30)
    eager = make()
    static = ddg.jit.to_static(_fresh_copy(make, eager))
    x = ddg.randn(shape)
    ddg.seed(31)
    e_loss = _train_steps(eager, x, 6)
    ddg.seed(31)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s_loss = _train_steps(static, x, 6)
    assert _is_replaying(static.forward)
    # replay runs the very same kernels on the same arrays: bit-identical to eager
    np.testing.assert_array_equal(np.array(e_loss), np.array(s_loss))
    e_state, s_state = eager.state_dict(), static.state_dict()
    assert e_state.keys() == s_state.keys()
    for k in e_state:
        np.testing.assert_array_equal(e_state[k].numpy(), s_state[k].numpy(), err_msg=k)
    bn = [m for m in static.sublayers() if isinstance(m, nn.layer.norm._BatchNormBase)][0]
    assert not np.allclose(bn._mean.numpy(), 0.0)  # the running statistics did move
    # the Paddle momentum convention, computed by hand from one eager step
    ddg.seed(32)
    m = make()
    before_mean, before_var = m.body[1]._mean.numpy().copy(), m.body[1]._variance.numpy().copy()
    h = m.body[0](x).numpy()
    axes = (0,) if h.ndim == 2 else (0, 2, 3)
    m.body[1](ddg.to_tensor(h))
    mom = m.body[1]._momentum
    want_mean = mom * before_mean + (1.0 - mom) * h.mean(axis=axes)
    want_var = mom * before_var + (1.0 - mom) * h.var(axis=axes)
    np.testing.assert_allclose(m.body[1]._mean.numpy(), want_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.body[1]._variance.numpy(), want_var, rtol=1e-5, atol=1e-6)


def test_standardize_statistics_outputs_have_exact_gradients():
    from ddg.autograd.ops.norm import Standardize
    x = ddg.to_tensor(np.random.default_rng(1).standard_normal((4, 3, 2)), stop_gradient=False)
    w = [ddg.to_tensor(np.random.default_rng(k).standard_normal(s)) for k, s in
         ((2, (4, 3, 2)), (3, (1, 3, 1)), (4, (1, 3, 1)))]

    def f(x):
        y, mean, var = Standardize((0, 2), 1e-5, stats=True)(x)
        return (y * w[0]).sum() + (mean * w[1]).sum() + (var * w[2]).sum()
    assert ddg.autograd.gradcheck(f, [x])
    # some of the outputs undifferentiated: their gradients reach backward as None
    for pick in ((0, 1), (0, 2), (1,), (2,), (1, 2)):
        def g(x, pick=pick):
            outs = Standardize((0, 2), 1e-5, stats=True)(x)
            return sum((outs[i] * w[i]).sum() for i in pick)
        assert ddg.autograd.gradcheck(g, [x]), pick


def test_decorator_on_forward_method():
    class M(nn.Layer):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        @ddg.jit.to_static
        def forward(self, x):
            return F.relu(self.lin(x))

    m1, m2 = M(), M()
    x = ddg.randn([2, 3])
    for _ in range(3):
        y1, y2 = m1(x), m2(x)
    np.testing.assert_allclose(y1.numpy(), F.relu(m1.lin(x)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(y2.numpy(), F.relu(m2.lin(x)).numpy(), rtol=1e-6)


def test_input_spec():
    spec = ddg.static.InputSpec([None, 3], "float32", "x")
    assert spec.shape == (None, 3) and spec.dtype == np.float32
    assert ddg.static.InputSpec([-1, 3]).shape == (None, 3)
    lin = nn.Linear(3, 2)
    f = ddg.jit.to_static(lambda x: lin(x), input_spec=[spec])
    f(ddg.randn([5, 3]))
    with pytest.raises(ValueError, match="does not match"):
        f(ddg.randn([5, 4]))


class _Net(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(1, 2, 3)
        self.bn = nn.BatchNorm2D(2)
        self.fc = nn.Linear(2 * 3 * 3, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return F.softmax(self.fc(ddg.flatten(x, 1)))


_LOAD_SCRIPT = r"""
import sys, numpy as np
import ddg
m = ddg.jit.load(sys.argv[1])
assert type(m).__name__ == "TranslatedLayer"
for n in (2, 5):
    x = ddg.to_tensor(np.load(sys.argv[2])[:n])
    with ddg.no_grad():
        np.save(sys.argv[3] + str(n) + ".npy", m(x).numpy())
print("loaded-ok")
"""


def test_save_load_roundtrip_in_subprocess(tmp_path):
    ddg.seed(11)
    net = _Net()
    net.train()
    net(ddg.randn([4, 1, 8, 8]))  # move BN statistics away from their initial values
    net.eval()
    path = str(tmp_path / "net")
    ddg.jit.save(net, path, input_spec=[ddg.static.InputSpec([None, 1, 8, 8], "float32")])
    assert os.path.exists(path + ".pdmodel") and os.path.exists(path + ".pdiparams")
    x = np.random.default_rng(0).standard_normal((5, 1, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = tmp_path / "load.py"
    script.write_text(_LOAD_SCRIPT)
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, str(script), path, str(tmp_path / "x.npy"), str(tmp_path / "y")],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    assert r.returncode == 0 and "loaded-ok" in r.stdout, r.stderr
    with ddg.no_grad():
        for n in (2, 5):
            want = net(ddg.to_tensor(x[:n])).numpy()
            np.testing.assert_allclose(np.load(tmp_path / f"y{n}.npy"), want, rtol=1e-5, atol=1e-6)
    # in this process too, with gradients reaching the loaded parameters
    loaded = ddg.jit.load(path)
    out = loaded(ddg.to_tensor(x[:3]))
    out.sum().backward()
    assert any(p.grad is not None for p in loaded.parameters())


def test_load_refuses_tampered_and_truncated(tmp_path):
    net = nn.Linear(3, 2)
    path = str(tmp_path / "lin")
    ddg.jit.save(net, path, input_spec=[ddg.static.InputSpec([None, 3])])
    ddg.jit.load(path)
    data = open(path + ".pdmodel", "rb").read()
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 0xFF
    open(path + ".pdmodel", "wb").write(bytes(bad))
    with pytest.raises(ValueError, match="lin"):
        ddg.jit.load(path)
    open(path + ".pdmodel", "wb").write(data[:-10])
    with pytest.raises(ValueError, match="truncated"):
        ddg.jit.load(path)
    open(path + ".pdmodel", "wb").write(data)
    params = open(path + ".pdiparams", "rb").read()
    open(path + ".pdiparams", "wb").write(params[: len(params) // 2])
    with pytest.raises(ValueError, match="pdiparams"):
        ddg.jit.load(path)


def test_load_refuses_foreign_op(tmp_path):
    import json
    from ddg.io import serialization as S
    net = nn.Linear(3, 2)
    path = str(tmp_path / "lin")
    ddg.jit.save(net, path, input_spec=[ddg.static.InputSpec([None, 3])])
    blob = S.load(path + ".pdmodel", return_numpy=True)
    graph = json.loads(blob["graph"])
    graph["steps"][0]["op"] = "os:system"
    blob["graph"] = json.dumps(graph)
    S.save(blob, path + ".pdmodel")
    with pytest.raises(ValueError, match="not one of ddg's ops"):
        ddg.jit.load(path)


def test_load_reads_ops_by_the_names_older_files_use(tmp_path):
    """Pooling moved from ops/conv.py to ops/pooling.py and Clone into ops/movement.py:
    files that name them where they lived before still load."""
    import json
    from ddg.io import serialization as S
    import ddg.nn.functional as F

    class Net(nn.Layer):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2D(1, 2, 3, padding=1)

        def forward(self, x):
            return F.avg_pool2d(F.max_pool2d(self.conv(x), 2), 2).clone()

    net = Net()
    net.eval()
    path = str(tmp_path / "net")
    ddg.jit.save(net, path, input_spec=[ddg.static.InputSpec([None, 1, 8, 8], "float32")])
    blob = S.load(path + ".pdmodel", return_numpy=True)
    graph = json.loads(blob["graph"])
    old = {"ddg.autograd.ops.pooling:MaxPool2d": "ddg.autograd.ops.conv:MaxPool2d",
           "ddg.autograd.ops.pooling:AvgPool2d": "ddg.autograd.ops.conv:AvgPool2d",
           "ddg.autograd.ops.movement:Clone": "ddg.autograd.methods:Clone"}
    renamed = 0
    for st in graph["steps"]:
        if st.get("op") in old:
            st["op"] = old[st["op"]]
            renamed += 1
    assert renamed == 3
    blob["graph"] = json.dumps(graph)
    S.save(blob, path + ".pdmodel")
    x = ddg.to_tensor(np.random.default_rng(0).normal(size=(2, 1, 8, 8)).astype(np.float32))
    with ddg.no_grad():
        np.testing.assert_allclose(ddg.jit.load(path)(x).numpy(), net(x).numpy(), rtol=1e-6)


class _TwoInputs(nn.Layer):
    def __init__(self, fixed_batch=None):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.fixed_batch = fixed_batch

    @ddg.jit.to_static()
    def forward(self, x, bias=None, scale=2.0):
        if self.fixed_batch is not None:
            x = x.reshape([self.fixed_batch, 4])  # the graph depends on the batch size
        out = self.fc(x) * scale
        return out if bias is None else out + bias


@pytest.mark.parametrize("case", ["one", "kwargs", "fixed"])
def test_save_without_spec_uses_the_latest_traced_call(case, tmp_path):
    net = _TwoInputs(fixed_batch=3 if case == "fixed" else None)
    net.eval()
    x3, b3 = ddg.randn([3, 4]), ddg.randn([3, 3])
    if case == "kwargs":
        net(ddg.randn([2, 4]))  # an earlier signature: the latest call is the one saved
        call = ((x3,), {"bias": b3, "scale": 0.5})
        with pytest.warns(UserWarning, match="traced with 2 input signatures"):
            net(*call[0], **call[1])
            ddg.jit.save(net, str(tmp_path / "m"))
    else:
        call = ((x3,), {})
        net(x3)
        ddg.jit.save(net, str(tmp_path / "m"))
    loaded = ddg.jit.load(str(tmp_path / "m"))
    ins = list(call[0]) + [v for v in call[1].values() if isinstance(v, ddg.Tensor)]
    with ddg.no_grad():
        np.testing.assert_allclose(loaded(*ins).numpy(), net(*call[0], **call[1]).numpy(), rtol=1e-6)
        if case == "fixed":  # saved with the shapes as called
            with pytest.raises(ValueError, match=r"expects shape \[3, 4\]"):
                loaded(ddg.randn([5, 4]))
        else:  # the batch dimension is free, as in Paddle's saved programs (shared by the inputs)
            x5 = ddg.randn([5, 4])
            more = [ddg.randn([5, 3])] if case == "kwargs" else []
            kw = {"bias": more[0], "scale": 0.5} if more else {}
            np.testing.assert_allclose(loaded(x5, *more).numpy(), net(x5, **kw).numpy(), rtol=1e-6)


def test_save_without_spec_or_call_raises(tmp_path):
    with pytest.raises(ValueError, match="never called"):
        ddg.jit.save(_TwoInputs(), str(tmp_path / "m"))
    with pytest.raises(ValueError, match="input_spec is required"):
        ddg.jit.save(nn.Linear(2, 2), str(tmp_path / "m"))
