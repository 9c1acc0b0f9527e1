"""Single Paddle names: masked_scatter, tensor_split, isin, nn.ParameterDict, ddg.version,
jit.enable_to_static / ignore_module, and the result dtypes of integer and bool sums
(values and dtypes as Paddle 3.3.1 gives them; gradients against central differences)."""
import numpy as np
import pytest

import ddg
from ddg import nn


def leaf(a):
    t = ddg.to_tensor(np.asarray(a, dtype=np.float64))
    t.stop_gradient = False
    return t


@pytest.mark.parametrize("mask_shape", [(2, 3), (3,), (2, 1), (1, 1)])
def test_masked_scatter_values_and_gradients(mask_shape, rng):
    xa = rng.standard_normal((2, 3))
    va = rng.standard_normal(8)
    ma = rng.random(mask_shape) > 0.4
    full = np.broadcast_to(ma, (2, 3))
    want = xa.copy()
    want[full] = va[:full.sum()]
    x, v = leaf(xa), leaf(va)
    out = ddg.masked_scatter(x, ddg.to_tensor(ma), v)
    np.testing.assert_array_equal(out.numpy(), want)
    w = rng.standard_normal((2, 3))
    (out * ddg.to_tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(full, 0.0, w))
    gv = np.zeros(8)
    gv[:full.sum()] = w[full]
    np.testing.assert_allclose(v.grad.numpy(), gv)
    np.testing.assert_array_equal(x.masked_scatter(ddg.to_tensor(ma), v).numpy(), want)
    inplace = ddg.to_tensor(xa)
    assert inplace.masked_scatter_(ddg.to_tensor(ma), ddg.to_tensor(va)) is inplace
    np.testing.assert_array_equal(inplace.numpy(), want)


def test_masked_scatter_errors():
    x = ddg.ones([2, 3])
    with pytest.raises(ValueError, match="selects 6 positions but value"):
        ddg.masked_scatter(x, ddg.ones([2, 3], dtype="bool"), ddg.ones([4]))
    with pytest.raises(TypeError, match="mask must be a bool Tensor"):
        ddg.masked_scatter(x, ddg.ones([2, 3]), ddg.ones([6]))
    with pytest.raises(ValueError, match="must broadcast to x's shape"):
        ddg.masked_scatter(x, ddg.ones([4, 2, 3], dtype="bool"), ddg.ones([30]))


@pytest.mark.parametrize("spec", [3, 4, 7, 9, [2, 5], [-2], [0, 0, 6], (1,), [5, 2]])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_tensor_split_is_numpy_array_split(spec, axis, rng):
    xa = rng.standard_normal((7, 7))
    parts = ddg.tensor_split(leaf(xa), spec, axis=axis)
    want = np.array_split(xa, spec, axis=axis)
    assert len(parts) == len(want)
    for p, w in zip(parts, want):
        assert p.shape == list(w.shape)
        np.testing.assert_array_equal(p.numpy(), w)
    x = leaf(xa)
    sum(((p * p).sum() for p in x.tensor_split(spec, axis)), ddg.zeros([], dtype="float64")).backward()
    # decreasing indices give overlapping parts (numpy's rule): each part adds its share
    count = sum(np.isin(np.arange(7), w) for w in np.array_split(np.arange(7), spec))
    shape = [1, 1]
    shape[axis] = 7
    np.testing.assert_allclose(x.grad.numpy(), 2 * xa * count.reshape(shape))
    with pytest.raises(ValueError, match="tensor_split"):
        ddg.tensor_split(x, 0)


@pytest.mark.parametrize("invert", [False, True])
def test_isin(invert, rng):
    a = rng.integers(0, 10, (3, 4))
    b = rng.integers(0, 10, 5)
    out = ddg.isin(ddg.to_tensor(a), ddg.to_tensor(b), invert=invert)
    assert out.dtype == ddg.bool
    np.testing.assert_array_equal(out.numpy(), np.isin(a, b, invert=invert))


@pytest.mark.parametrize("dt, want", [("int32", "int64"), ("bool", "int64"), ("int64", "int64"), ("int8", "int8"),
                                      ("int16", "int16"), ("uint8", "uint8")])
def test_integer_sum_dtypes_follow_paddle(dt, want):
    x = ddg.to_tensor([[1, 0, 1], [1, 1, 0]]).astype(dt)
    for out in (ddg.sum(x), x.sum(axis=0, keepdim=True), ddg.nansum(x) if dt != "bool" else ddg.sum(x)):
        assert out.dtype == np.dtype(want), (dt, out.dtype)
    assert ddg.sum(x).item() == 4
    assert ddg.sum(x, dtype="int32").dtype == ddg.int32
    if dt != "bool":
        assert ddg.cumsum(x).dtype == ddg.int64  # every integer cumsum is int64 in Paddle
        assert ddg.prod(x).dtype == np.dtype(dt)  # prod keeps the integer dtype


def test_parameter_dict():
    a, b = ddg.create_parameter([2], "float32"), ddg.create_parameter([3], "float64")
    pd = nn.ParameterDict({"a": a})
    pd["b"] = b
    pd.update([("c", ddg.create_parameter([1], "float32"))])
    assert len(pd) == 3 and list(pd) == ["a", "b", "c"] and pd["b"] is b and "a" in pd
    assert [n for n, _ in pd.named_parameters()] == ["a", "b", "c"]

    class Holder(nn.Layer):
        def __init__(self):
            super().__init__()
            self.params = nn.ParameterDict({"w": ddg.create_parameter([2, 2], "float32")})

    assert list(Holder().state_dict()) == ["params.w"]
    with pytest.raises(TypeError, match="expected a Parameter"):
        pd["d"] = ddg.ones([2])


def test_version():
    assert ddg.version.full_version == ddg.__version__
    assert ".".join([ddg.version.major, ddg.version.minor, ddg.version.patch]) == ddg.__version__
    assert ddg.version.cudnn() == "False" and isinstance(ddg.version.cuda(), str)


def test_enable_to_static_and_ignore_module():
    import math
    calls = []

    @ddg.jit.to_static
    def f(x):
        calls.append(1)
        return x * 2

    x = ddg.ones([2])
    for _ in range(4):
        f(x)
    assert len(calls) == 2  # recorded twice, then replayed
    ddg.jit.enable_to_static(False)
    try:
        f(x)
        assert len(calls) == 3  # eager
    finally:
        ddg.jit.enable_to_static(True)
    f(x)
    assert len(calls) == 3
    ddg.jit.ignore_module([math])
    with pytest.raises(TypeError, match="ignore_module"):
        ddg.jit.ignore_module([3])
