"""The model classes of bench/bench_nets.py that exercise layers no other bench names
(DCGAN, MobileNet-style, MobileNetV2-style, GPT-style): their ddg steps run at the --quick sizes and train
(every trainable parameter moves, the losses stay finite), so that a broken case cannot
hide behind a missing torch."""
import os
import sys

import numpy as np
import pytest

import ddg

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import bench_nets as B  # noqa: E402


@pytest.mark.parametrize("kind", ["dcgan", "mobilenet", "mobilenetv2", "gpt"])
def test_quick_case_runs(kind):
    ddg.seed(0)
    got = list(B.cases({kind}, quick=True))
    assert len(got) == 1
    name, make_ddg, _ = got[0]
    assert name.startswith(kind)
    step = make_ddg()
    step()
    step()


def test_case_factories_keep_their_own_sizes():
    # the factories are called after the generator is exhausted: each still builds its size
    got = list(B.cases({"gpt"}, quick=False))
    assert len(got) == len(B.GPT_SIZES) > 1
    steps = [make() for _, make, _ in got]
    vocabs = [c.cell_contents for s in steps for c in s.__closure__ if isinstance(c.cell_contents, int)]
    assert vocabs == [v for _, _, v, _ in B.GPT_SIZES]


def _snapshot(layers):
    return [p.numpy().copy() for m in layers for p in m.parameters() if not p.stop_gradient]


def test_gan_step_moves_both_nets():
    ddg.seed(0)
    rng = np.random.default_rng(0)
    real = rng.uniform(-1, 1, (B.BATCH, 3, 32, 32)).astype(np.float32)
    z = rng.standard_normal((B.BATCH, B.GAN_LATENT, 1, 1)).astype(np.float32)
    gen, dis = B.ddg_dcgan(8, 32)
    out = dis(gen(ddg.to_tensor(z)))
    assert out.shape == [B.BATCH, 1] and float(out.min()) > 0 and float(out.max()) < 1
    step = B.ddg_gan_step(8, 32, real, z)
    step()   # builds its own nets: check through the closure's optimizers' parameters
    opts = [c.cell_contents for c in step.__closure__ if isinstance(c.cell_contents, ddg.optimizer.Adam)]
    assert len(opts) == 2
    before = [[p.numpy().copy() for p in o._parameter_list] for o in opts]
    step()
    for o, b in zip(opts, before):
        assert all(not np.array_equal(p.numpy(), q) for p, q in zip(o._parameter_list, b))


@pytest.mark.parametrize("tied", [True, False])
def test_gpt_is_causal_and_trains(tied):
    ddg.seed(0)
    model = B._DdgGpt(32, 16, 50, tied)
    model.eval()   # no dropout: outputs comparable
    ids = np.random.default_rng(1).integers(0, 50, (2, 16))
    a = model(ddg.to_tensor(ids)).numpy()
    ids2 = ids.copy()
    ids2[:, 10:] = (ids2[:, 10:] + 1) % 50   # change the future tokens only
    b = model(ddg.to_tensor(ids2)).numpy()
    np.testing.assert_allclose(a[:, :10], b[:, :10], rtol=1e-5, atol=1e-6)
    assert not np.allclose(a[:, 10:], b[:, 10:])
    assert (model.head is None) == tied
    before = _snapshot([model])
    step = B.ddg_gpt_step(model, np.random.default_rng(2).integers(0, 50, (B.GPT_BATCH, 17)), 50)
    step()
    after = _snapshot([model])
    assert all(not np.array_equal(x, y) for x, y in zip(before, after))


def test_rnn_batch_grid_prints_every_cell(monkeypatch, capsys):
    """bench_rnn_batches.py's grid (batches off the multiples of 16) runs and prints one
    row per hidden size with a cell per batch (ddg's times where torch is absent)."""
    import bench_rnn_batches as R
    monkeypatch.setattr(R, "try_torch", lambda: None)
    monkeypatch.setattr(sys, "argv", ["bench_rnn_batches.py", "--hidden", "8,16", "--batches", "17,3",
                                      "--steps-t", "3", "--rounds", "1", "--round-time", "0.001"])
    R.main()
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ")]
    assert rows[0] == "| H \\ batch | 17 | 3 |"
    assert [r.split(" | ")[0] for r in rows[1:]] == ["| 8", "| 16"]
    assert all(len(r.strip("| ").split(" | ")) == 3 and float(r.strip("| ").split(" | ")[1]) > 0 for r in rows[1:])


@pytest.mark.parametrize("kind,count", [("rnn", 2), ("rnnstack", 1), ("cells", 1)])
def test_quick_rnn_cases_run(kind, count):
    """The SimpleRNN class (``rnn``, beside ``lstm`` and ``gru``), the 2-layer stacks and the
    cell loops: their steps build, run and move every weight."""
    ddg.seed(0)
    got = list(B.cases({kind}, quick=True))
    assert len(got) == count
    for _, make_ddg, _ in got:
        step = make_ddg()
        step()
        model = next(c.cell_contents for c in step.__closure__ if isinstance(c.cell_contents, ddg.optimizer.Momentum))
        before = [p.numpy().copy() for p in model._parameter_list]
        step()
        assert all(not np.array_equal(p.numpy(), q) for p, q in zip(model._parameter_list, before))


def test_step_parts_records_every_linear_product():
    # bench_step_parts.py: one step's products as gemm.product sees them, replayable alone
    import bench_step_parts as P  # noqa: PLC0415
    seen = P.recorded_products(16, 8, 2)
    with_bias = sum(count for (_, _, _, _, bias), (count, *_rest) in seen.items() if bias)
    assert with_bias == 2 * 6 + 1       # q, k, v, out, two feed-forward per layer; the head
    total = sum(count for count, *_rest in seen.values())
    # backward: every weight's gradient, and every input's but the first layer's q, k, v
    # projections' (the data wants none)
    assert total == with_bias + 13 + (13 - 3)
    for (sa, sb, ca, cb, _), (count, A, Bm, bias) in seen.items():
        assert A.shape == sa and Bm.shape == sb and A.flags.c_contiguous == ca and Bm.flags.c_contiguous == cb
        want = A.astype(np.float64) @ Bm.astype(np.float64) + (0 if bias is None else bias)
        np.testing.assert_allclose(P.gemm.product(A, Bm, bias), want, rtol=1e-4, atol=1e-4)
    rows = P.race_products(seen, None, 1)
    assert len(rows) == len(seen) and all(n > 0 and t is None for _, _, n, t in rows)
    dp, tp = P.step_parts(16, 8, 2, None, 1)
    assert tp is None and dp.shape == (3,) and np.all(dp > 0)


import bench_sweep as SW  # noqa: E402


@pytest.mark.parametrize("spec", ["transformer:16:2:32:6:2", "transformer:16:4:24:5:3:1:10", "lstm:3:8:4:2",
                                  "gru:5:6:3:3", "rnn:3:8:4:2", "resnet:4:8:2", "vgg:4:8:2", "vgg:4:12:2:5"])
def test_sweep_size_trains(spec):
    """bench_sweep.py's classes at tiny sizes: the ddg step builds the size asked for and,
    but for GRU and SimpleRNN (the same code as the LSTM's, their kernels compiled by other
    tests), its parameters move."""
    ddg.seed(0)
    make_ddg, make_torch = SW.case(spec)
    step = make_ddg()
    model = next(c.cell_contents for c in step.__closure__ if isinstance(c.cell_contents, ddg.nn.Layer))
    kind, nums = SW.parse(spec)
    if kind not in ("gru", "rnn"):
        before = _snapshot([model])
        step()
        step()
        after = _snapshot([model])
        assert all(np.isfinite(a).all() for a in after)
        assert all(not np.array_equal(a, b) for a, b in zip(before, after))
    if kind == "transformer":
        layer = model.enc.layers[0]
        assert (layer.self_attn.num_heads, layer.linear1.weight.shape) == (nums[1], [nums[0], nums[2]])
        assert layer.normalize_before == (len(nums) > 5 and bool(nums[5]))
    elif kind == "vgg":
        convs = [m for m in model.sublayers() if isinstance(m, ddg.nn.Conv2D)]
        k = nums[3] if len(nums) > 3 else 3
        assert [c.weight.shape for c in convs] == [[nums[0], 3, k, k], [nums[0], nums[0], k, k],
                                                  [2 * nums[0], nums[0], k, k], [2 * nums[0], 2 * nums[0], k, k]]
    elif kind != "resnet":
        assert (model.rnn.input_size, model.rnn.hidden_size) == (nums[0], nums[1])
        assert type(model.rnn).__name__ == {"lstm": "LSTM", "gru": "GRU", "rnn": "SimpleRNN"}[kind]


@pytest.mark.parametrize("bad", ["mlp:3", "lstm:3:8:4", "transformer:16:2:32:6", "resnet:4:x:2",
                                 "lstm:3:8:4:2:1", "resnet:-1:8:2", "transformer:16:2:32:6:2:0:10:1",
                                 "vgg:4:8", "vgg:4:8:2:3:1"])
def test_sweep_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="bench_sweep"):
        SW.parse(bad)
