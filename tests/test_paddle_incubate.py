"""``ddg.incubate``, ``ddg.static`` (``amp``, ``Variable``) and ``ddg.framework`` against values
recorded from Paddle 3.3.1 by ``incubate_reference.py`` (see there: the fused layers that
Paddle's CPU build cannot run are checked against Paddle's unfused operators following the
fused operators' documented formulas), and the error a name needing Paddle's own kernels
gives."""
import json

import numpy as np
import pytest

import ddg
from incubate_reference import FUSED, TABLE, autograd_cases, framework_cases, functional_cases, fused_case, \
    optimizer_cases, static_cases

with open(TABLE) as _f:
    REFERENCE = json.load(_f)


def _close(a, b, rtol=1e-9, atol=1e-9):
    return np.allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", sorted(FUSED))
def test_fused_layer_parameters_attributes_and_output(case):
    ours, theirs = fused_case(ddg, case, reference=False), REFERENCE["fused"][case]
    assert ours["state_dict"] == theirs["state_dict"], case
    missing = sorted(set(theirs["attrs"]) - set(ours["attrs"]))
    assert not missing, f"{case}: attributes Paddle sets and ddg lacks: {missing}"
    wrong = {k: (ours["attrs"][k], v) for k, v in theirs["attrs"].items() if ours["attrs"][k] != v}
    assert not wrong, f"{case}: attribute values differ (ddg, paddle): {wrong}"
    assert _close(ours["out"], theirs["out"]), case


def test_fused_layers_load_a_paddle_state_dict_and_differentiate():
    import ddg.incubate.nn as inn
    ddg.set_default_dtype("float64")
    try:
        layer = inn.FusedTransformerEncoderLayer(8, 2, 16, 0.0)
    finally:
        ddg.set_default_dtype("float32")
    rng = np.random.default_rng(0)
    sd = {k: rng.standard_normal(list(v.shape)) for k, v in layer.state_dict().items()}
    missing, unexpected = layer.set_state_dict(sd)
    assert not missing and not unexpected
    x = ddg.to_tensor(rng.standard_normal([2, 3, 8]), stop_gradient=False)
    w = layer.fused_attn.qkv_weight
    assert ddg.autograd.gradcheck(lambda a: layer(a), (x,), atol=1e-6)
    layer(x).sum().backward()
    assert w.grad is not None and float(np.abs(w.grad.numpy()).sum()) > 0


def test_functional_values_match_paddle():
    ours, theirs = functional_cases(ddg), REFERENCE["functional"]
    assert sorted(ours) == sorted(theirs)
    wrong = [k for k in ours if not (np.shape(ours[k]) == np.shape(theirs[k])
                                     and _close(ours[k], theirs[k], 1e-5, 1e-5))]
    assert not wrong, f"differ from Paddle: {wrong}"


def test_lookahead_and_model_average_match_paddle():
    ours, theirs = optimizer_cases(ddg), REFERENCE["optimizer"]
    for k in theirs:
        for a, b in zip(ours[k], theirs[k]):
            assert _close(a, b, 1e-7, 1e-9), k


def test_incubate_autograd_matches_paddle():
    ours, theirs = autograd_cases(ddg), REFERENCE["autograd"]
    for k in theirs:
        assert np.shape(ours[k]) == np.shape(theirs[k]) and _close(ours[k], theirs[k]), k


def test_static_amp_lists_and_variable_match_paddle():
    assert static_cases(ddg) == REFERENCE["static"]


def test_fp16_guard_changes_nothing_in_dygraph():
    class Net(ddg.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = ddg.nn.Linear(3, 2)

        def forward(self, x, guard):
            if guard:
                with ddg.static.amp.fp16_guard():
                    return self.fc(x)
            return self.fc(x)

    net, x = Net(), ddg.randn([4, 3])
    a, b = net(x, True), net(x, False)
    assert a.dtype == b.dtype and np.array_equal(a.numpy(), b.numpy())
    opt = ddg.static.amp.decorate(ddg.optimizer.SGD(0.1, parameters=net.parameters()))
    assert opt.get_loss_scaling() == 2.0 ** 16 and opt.get_lr() == 0.1


def test_framework_and_parameter_block_match_paddle():
    assert framework_cases(ddg) == REFERENCE["framework"]
    p = ddg.nn.Linear(2, 3).weight
    before = p.numpy().copy()
    ddg.nn.initializer.Constant(0.5)(p, p.block)           # model-zoo initialisation code does this
    assert np.all(p.numpy() == 0.5) and not np.all(before == 0.5)
    with pytest.raises(RuntimeError, match="to_static"):
        ddg.framework.enable_static()


@pytest.mark.parametrize("name", ["incubate.graph_khop_sampler", "incubate.inference", "incubate.nn.FusedMultiTransformer",
                                  "incubate.nn.functional.block_multihead_attention",
                                  "incubate.nn.functional.fp8_gemm_blockwise"])
def test_names_needing_paddle_kernels_say_so(name):
    mod, attr = name.rsplit(".", 1)
    import importlib
    with pytest.raises(NotImplementedError, match="use|no equivalent"):
        getattr(importlib.import_module("ddg." + mod), attr)


def test_framework_context_managers_model_zoo_code_enters():
    x = ddg.ones([1, 2, 4, 4])
    with ddg.framework._no_check_dy2st_diff():
        y = ddg.nn.functional.avg_pool2d(x, 3, 1, 1)
    with ddg.static.program_guard(ddg.static.Program()), ddg.static.name_scope("block"):
        z = ddg.nn.functional.avg_pool2d(x, 3, 1, 1)
    assert np.array_equal(y.numpy(), z.numpy())
    prog = ddg.static.Program()
    old = ddg.framework.switch_main_program(prog)
    assert ddg.static.default_main_program() is prog
    ddg.framework.switch_main_program(old)
    with pytest.raises(TypeError, match="Program"):
        with ddg.static.program_guard("main"):
            pass
