"""ddg.load reads files written by paddle.save (.pdparams/.pdopt) through a restricted
unpickler. The fixtures are pickled here with numpy in the structure paddle.save uses
(checked with pickletools on files written by the real Paddle 3.3.1): a dict of arrays
plus the "StructuredToParameterName@@" name table; tensors nested elsewhere are
(name, array) tuples. CI has no Paddle, so its forward output is written out."""
import collections
import os
import pickle

import numpy as np
import pytest

import ddg

F32 = np.float32
STATE = {
    "0.weight": np.array([[-0.31460413336753845, -0.9123905301094055, 0.5988562107086182],
                          [-0.031605299562215805, -0.43073713779449463, -0.2567038834095001]], F32),
    "0.bias": np.array([0.0, 3.5527122577150294e-08, 3.5527122577150294e-08], F32),
    "1.weight": np.array([1.0922605991363525, 0.9077394008636475, 1.0922605991363525], F32),
    "1.bias": np.array([-0.1, -0.1, -0.1], F32),
    "1._mean": np.array([-0.03769432380795479, -0.09701237082481384, 0.05494770035147667], F32),
    "1._variance": np.array([0.9223025441169739, 0.958728015422821, 0.9751660227775574], F32),
}
NAMES = {"0.weight": "linear_0.w_0", "0.bias": "linear_0.b_0", "1.weight": "batch_norm1d_0.w_0",
         "1.bias": "batch_norm1d_0.b_0", "1._mean": "batch_norm1d_0.w_1", "1._variance": "batch_norm1d_0.w_2"}
# paddle: m = Sequential(Linear(2, 3), BatchNorm1D(3)); m.set_state_dict(load(...)); m.eval(); m(x)
PADDLE_OUT = [[-0.4868297874927521, -1.654554843902588, -0.0662638321518898],
              [0.2827073931694031, 0.6361232399940491, -0.9651233553886414]]


def _write(tmp_path, obj, name="m.pdparams", protocol=4):
    p = os.path.join(tmp_path, name)
    with open(p, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)
    return p


def test_load_paddle_state_dict_into_layers(tmp_path):
    p = _write(tmp_path, dict(STATE, **{"StructuredToParameterName@@": NAMES}))
    sd = ddg.load(p)
    assert list(sd) == list(STATE)  # the name table is dropped, as paddle.load does
    assert sd["0.weight"].name == "linear_0.w_0" and sd["1._variance"].name == "batch_norm1d_0.w_2"
    assert all(t.stop_gradient for t in sd.values())
    m = ddg.nn.Sequential(ddg.nn.Linear(2, 3), ddg.nn.BatchNorm1D(3))
    m.set_state_dict(sd)
    m.eval()
    out = m(ddg.to_tensor([[1.0, 2.0], [-1.0, 0.5]]))
    np.testing.assert_allclose(out.numpy(), PADDLE_OUT, rtol=1e-6)
    sd["0.weight"].set_value(np.zeros((2, 3), F32))  # writable
    arrays = ddg.load(p, return_numpy=True)
    assert isinstance(arrays["0.bias"], np.ndarray) and arrays["0.bias"].dtype == F32


def test_load_paddle_optimizer_and_nested_tensors(tmp_path):
    opt = collections.OrderedDict(
        [("linear_0.w_0_moment1_0", np.ones((2, 3), F32)), ("linear_0.w_0_beta1_pow_acc_0", np.array([0.9], F32)),
         ("LR_Scheduler", {"last_epoch": 0, "last_lr": 0.1}),
         ("StructuredToParameterName@@", {"0.weight": "linear_0.w_0"})])
    o = ddg.load(_write(tmp_path, opt, "m.pdopt"))
    assert list(o) == ["linear_0.w_0_moment1_0", "linear_0.w_0_beta1_pow_acc_0", "LR_Scheduler"]
    assert o["linear_0.w_0_moment1_0"].name == "linear_0.w_0_moment1_0"  # as paddle.load names them
    assert o["LR_Scheduler"] == {"last_epoch": 0, "last_lr": 0.1}
    misc = {"epoch": 3, "t": ("generated_tensor_0", np.array([1, 2])),
            "lst": [("eager_tmp_0", np.ones(2, F32)), 1.5, "s"], "scalar": np.float32(2.5)}
    for protocol in (2, 3, 4, 5):
        got = ddg.load(_write(tmp_path, misc, protocol=protocol))
        assert got["epoch"] == 3 and got["t"].tolist() == [1, 2] and got["t"].dtype == ddg.int64
        assert got["lst"][0].tolist() == [1.0, 1.0] and got["lst"][1:] == [1.5, "s"]
        assert got["scalar"] == np.float32(2.5)


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


class _Custom:
    pass


@pytest.mark.parametrize("obj,match", [
    ({"w": _Evil()}, "refers to (posix|os).system"),
    ({"w": _Custom()}, "refers to test_paddle_checkpoints._Custom"),
    ({"w": np.array([object(), 1], dtype=object)}, "refuses arrays of dtype|builtins.object"),
    ({"w": np.zeros(2, dtype=[("a", F32), ("b", np.int64)])}, "structured|refuses arrays of dtype"),
    ({"w": collections.Counter("ab")}, "collections.Counter"),
])
def test_hostile_pickles_are_refused(tmp_path, obj, match):
    p = _write(tmp_path, obj)
    with pytest.raises(ValueError, match=match):
        ddg.load(p)


def test_damaged_pickles_raise_valueerror(tmp_path):
    data = pickle.dumps(dict(STATE), protocol=4)
    p = os.path.join(tmp_path, "cut.pdparams")
    with open(p, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(ValueError, match="ddg.load"):
        ddg.load(p)


def test_ddg_save_keeps_its_own_format(tmp_path):
    p = os.path.join(tmp_path, "x.pdparams")
    ddg.save({"w": ddg.ones([2])}, p)
    with open(p, "rb") as f:
        assert f.read(8) == b"DDGCKPT\x00"
    assert ddg.load(p)["w"].tolist() == [1.0, 1.0]
