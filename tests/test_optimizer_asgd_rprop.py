"""optimizer.ASGD and optimizer.Rprop: the parameters Paddle 3.3.1 gives step by step,
resuming from a saved optimizer state, and their argument checks."""
import numpy as np
import pytest

import ddg


# Paddle 3.3.1's parameters after each of 6 steps on 0.5 * |w - t_k|^2 (tools: the same loop under paddle)
_W0 = np.array([1.0, -2.0, 0.5, 3.0])
_TARGETS = [np.array([0.3, 0.1, -0.2, 0.4]) * (k + 1) * (-1) ** k for k in range(6)]
_PADDLE_STEPS = {
    "asgd": ({"learning_rate": 0.1, "batch_num": 3}, [
        [0.93, -1.79, 0.43, 2.74], [0.8185, -1.6055, 0.3935, 2.433],
        [0.7468833333, -1.4189833333, 0.33605, 2.1872333333], [0.6337038889, -1.2685005556, 0.3173983333, 1.9018922222],
        [0.6004009815, -1.1120677593, 0.2558333889, 1.7378213704],
        [0.4843680414, -1.0020827043, 0.2588573315, 1.4769231395]]),
    "asgd_decay": ({"learning_rate": 0.1, "batch_num": 2, "weight_decay": 0.1}, [
        [0.92, -1.77, 0.425, 2.71], [0.7994, -1.56765, 0.384125, 2.37595],
        [0.719833, -1.37907925, 0.329623125, 2.11622275], [0.621275185, -1.2220091413, 0.3003669781, 1.8491532487],
        [0.5625142348, -1.0739492797, 0.2557175225, 1.6510575688],
        [0.4824058167, -0.9526715666, 0.2351328749, 1.4385459739]]),
    "rprop": ({"learning_rate": 0.1}, [
        [0.9, -1.9, 0.4, 2.9], [0.78, -1.78, 0.4, 2.78], [0.78, -1.636, 0.3, 2.636], [0.72, -1.4632, 0.3, 2.4632],
        [0.72, -1.25584, 0.25, 2.25584], [0.69, -1.007008, 0.25, 2.007008]]),
}


def _steps(make, n, w=None, opt_state=None):
    w = ddg.create_parameter([4], "float64", default_initializer=ddg.nn.initializer.Assign(_W0 if w is None else w))
    opt = make([w])
    if opt_state is not None:
        opt.set_state_dict(opt_state)
    out = []
    for t in _TARGETS[len(_TARGETS) - n:] if opt_state is not None else _TARGETS[:n]:
        (((w - ddg.to_tensor(t)) ** 2).sum() * 0.5).backward()
        opt.step()
        opt.clear_grad()
        out.append(w.numpy().copy())
    return np.array(out), opt, w


@pytest.mark.parametrize("case", sorted(_PADDLE_STEPS))
def test_asgd_rprop_match_paddle_and_resume(case, tmp_path):
    kwargs, want = _PADDLE_STEPS[case]
    cls = ddg.optimizer.Rprop if case == "rprop" else ddg.optimizer.ASGD

    def make(ps):
        return cls(parameters=ps, **kwargs)

    got, _, _ = _steps(make, 6)
    np.testing.assert_allclose(got, np.array(want), rtol=1e-9, atol=1e-9)
    # 3 steps, state saved and loaded into a fresh optimizer, 3 more: the same as 6 at once
    first, opt, w = _steps(make, 3)
    ddg.save(opt.state_dict(), str(tmp_path / "o.pdopt"))
    rest, _, _ = _steps(make, 3, w=w.numpy(), opt_state=ddg.load(str(tmp_path / "o.pdopt")))
    np.testing.assert_allclose(np.concatenate([first, rest]), got, rtol=1e-12)


def test_asgd_rprop_argument_errors():
    w = [ddg.create_parameter([2], "float32")]
    with pytest.raises(ValueError, match="batch_num"):
        ddg.optimizer.ASGD(0.1, batch_num=0, parameters=w)
    with pytest.raises(ValueError, match="learning_rate_range"):
        ddg.optimizer.Rprop(100.0, parameters=w)
    with pytest.raises(ValueError, match="etas"):
        ddg.optimizer.Rprop(0.1, etas=(1.2, 0.5), parameters=w)
