"""Initializers and parameter creation as Paddle 3.3.1 has them: initializer.Bilinear's
values, set_global_initializer ranking below a ParamAttr's initializer, and BatchNorm's
statistics as non-trainable parameters that optimizers skip."""
import numpy as np
import pytest

import ddg
import ddg.nn as nn
from ddg.nn import initializer as I


def test_bilinear_initializer_gives_paddles_values():
    w = ddg.create_parameter([1, 1, 3, 3], "float32", default_initializer=I.Bilinear())
    np.testing.assert_allclose(w.numpy()[0, 0], [[0.0625, 0.3125, 0.4375], [0.1875, 0.6875, 0.6875],
                                                 [0.1875, 0.4375, 0.3125]])
    with pytest.raises(ValueError, match="Bilinear.*4-D"):
        ddg.create_parameter([3, 3], "float32", default_initializer=I.Bilinear())


def test_global_initializer_ranks_below_param_attr():
    try:
        I.set_global_initializer(I.Constant(2.0), I.Constant(3.0))
        lin = nn.Linear(2, 3)
        assert (lin.weight.numpy() == 2).all() and (lin.bias.numpy() == 3).all()
        conv = nn.Conv2D(1, 1, 2)        # the layer's own default initializer loses too
        assert (conv.weight.numpy() == 2).all()
        lin = nn.Linear(2, 3, weight_attr=ddg.ParamAttr(initializer=I.Constant(5.0)))
        assert (lin.weight.numpy() == 5).all()
        with pytest.raises(TypeError, match="set_global_initializer"):
            I.set_global_initializer("normal")
    finally:
        I.set_global_initializer(None, None)
    assert not (nn.Linear(2, 3).weight.numpy() == 2).all()


def test_batch_norm_statistics_are_parameters_optimizers_skip():
    # Paddle 3.3.1: BatchNorm2D(3).named_parameters() gives weight, bias (trainable) and _mean,
    # _variance (stop_gradient=True), named batch_norm2d_N.w_0, .b_0, .w_1, .w_2; no buffers
    bn = nn.BatchNorm2D(3)
    named = list(bn.named_parameters())
    assert [n for n, _ in named] == ["weight", "bias", "_mean", "_variance"]
    assert [p.stop_gradient for _, p in named] == [False, False, True, True]
    assert [p.name.split(".")[1] for _, p in named] == ["w_0", "b_0", "w_1", "w_2"]
    assert list(bn.named_buffers()) == [] and list(bn.state_dict()) == ["weight", "bias", "_mean", "_variance"]
    model = nn.Sequential(nn.Conv2D(1, 3, 3), bn)
    opt = ddg.optimizer.Adam(learning_rate=0.1, parameters=model.parameters())
    model(ddg.randn([4, 1, 5, 5])).sum().backward()
    mean = bn._mean.numpy().copy()
    assert bn._mean.grad is None and not np.allclose(mean, 0)      # the forward pass updated it
    opt.step()
    np.testing.assert_array_equal(bn._mean.numpy(), mean)          # the optimizer did not
    assert not any(k.startswith(bn._mean.name) for k in opt.state_dict())
    model.eval()
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    other = nn.Sequential(nn.Conv2D(1, 3, 3), nn.BatchNorm2D(3))
    other.set_state_dict(model.state_dict())
    other.eval()
    np.testing.assert_array_equal(other[1]._variance.numpy(), state["1._variance"])
    x = ddg.randn([2, 1, 5, 5])
    np.testing.assert_allclose(other(x).numpy(), model(x).numpy(), rtol=1e-6)
