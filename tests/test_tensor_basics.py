"""Tensor creation, dtypes, places, printing, conversion, interop and error messages."""
import numpy as np
import pytest

import ddg


def test_dtype_rules_follow_paddle():
    assert ddg.to_tensor(1.5).dtype == ddg.float32
    assert ddg.to_tensor([1, 2]).dtype == ddg.int64
    assert ddg.to_tensor([True]).dtype == ddg.bool
    assert ddg.to_tensor(np.zeros(2, np.float64)).dtype == ddg.float64
    assert ddg.to_tensor(np.zeros(2, np.int32)).dtype == "int32"
    assert ddg.to_tensor([1, 2], dtype="float16").dtype == ddg.float16
    assert ddg.arange(1, 3).dtype == ddg.int64 and ddg.arange(1, 3, dtype="float32").dtype == ddg.float32
    assert ddg.zeros([2]).dtype == ddg.float32
    ddg.set_default_dtype("float64")
    try:
        assert ddg.to_tensor(1.5).dtype == ddg.float64 and ddg.randn([2]).dtype == ddg.float64
    finally:
        ddg.set_default_dtype("float32")
    # scalars keep the tensor's dtype; a float scalar promotes integers
    assert (ddg.to_tensor([1, 2]) * 2).dtype == ddg.int64
    assert (ddg.to_tensor([1, 2]) * 0.5).dtype == ddg.float32
    assert (ddg.ones([2]) * 2).dtype == ddg.float32
    assert (ddg.to_tensor([1, 2]) / ddg.to_tensor([2, 2])).dtype == ddg.float32


def test_creation_functions():
    assert ddg.full([2, 3], 7).dtype == ddg.float32 and ddg.full([2], 1.0).dtype == ddg.float32  # Paddle: default float
    np.testing.assert_array_equal(ddg.eye(3).numpy(), np.eye(3))
    np.testing.assert_allclose(ddg.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
    x = ddg.ones([2, 3], dtype="float64")
    assert ddg.zeros_like(x).dtype == ddg.float64 and ddg.full_like(x, 3).numpy().sum() == 18
    assert ddg.randint(0, 5, [100]).numpy().max() < 5
    u = ddg.uniform([1000], min=2, max=3).numpy()
    assert u.min() >= 2 and u.max() < 3
    assert ddg.normal(0.0, 1.0, [3]).shape == [3]
    # PyTorch spellings (the two-layer tutorial)
    w = ddg.randn(4, 5, device=ddg.device("cpu"), requires_grad=True)
    assert w.shape == [4, 5] and w.requires_grad and not w.stop_gradient
    assert ddg.zeros(2, 3).shape == [2, 3]


def test_seed_reproduces_numbers():
    ddg.seed(42)
    a = ddg.randn([5]).numpy()
    b = ddg.rand([3]).numpy()
    ddg.seed(42)
    np.testing.assert_array_equal(ddg.randn([5]).numpy(), a)
    np.testing.assert_array_equal(ddg.rand([3]).numpy(), b)


def test_attributes_and_conversions():
    x = ddg.to_tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.shape == [2, 2] and x.ndim == 2 and x.size == 4 and len(x) == 2
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert [r.tolist() for r in x] == [[1.0, 2.0], [3.0, 4.0]]
    s = x.sum()
    assert s.item() == 10.0 and float(s) == 10.0 and int(s) == 10 and bool(s)
    assert np.asarray(x).dtype == np.float32
    assert x.astype("int32").dtype == ddg.int32 and x.cast("float64").dtype == ddg.float64
    y = x.clone()
    y[0, 0] = 9
    assert x.numpy()[0, 0] == 1
    d = x.detach()
    assert d.stop_gradient
    np.testing.assert_array_equal(x.T.numpy(), x.numpy().T)
    np.testing.assert_array_equal(x.mm(x).numpy(), x.numpy() @ x.numpy())
    np.testing.assert_array_equal(x.clamp(min=2.5).numpy(), np.maximum(x.numpy(), 2.5))
    assert x.place == ddg.CPUPlace() and str(x.place) == "cpu" and ddg.get_device() == "cpu"
    assert x.cpu() is x and x.to("cpu") is x and x.to("float64").dtype == ddg.float64


def test_bool_of_multi_element_tensor_is_a_clear_error():
    with pytest.raises(ValueError, match=r"bool\(\).*shape \[3\]"):
        bool(ddg.to_tensor([1, 2, 3]) > 1)
    with pytest.raises(ValueError, match="item"):
        ddg.ones([2]).item()


def test_printing_like_paddle():
    text = repr(ddg.to_tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert text.startswith("Tensor(shape=[2, 2], dtype=float32, place=Place(cpu), stop_gradient=True,\n       [[1.")
    assert text.endswith("]])")
    p = ddg.nn.Linear(2, 2).weight
    assert repr(p).startswith("Parameter containing:\nTensor(shape=[2, 2], dtype=float32")
    assert "stop_gradient=False" in repr(p)


def test_error_messages_name_the_op_and_shapes():
    a, b = ddg.ones([2, 3]), ddg.ones([4, 5])
    with pytest.raises(ValueError, match=r"ddg\.Add.*\[2, 3\].*\[4, 5\]"):
        a + b
    with pytest.raises(ValueError, match=r"matmul.*inner dimensions.*\[2, 3\].*\[4, 5\]"):
        ddg.matmul(a, b)
    with pytest.raises(ValueError, match="reshape"):
        ddg.reshape(a, [4, 2])
    with pytest.raises(ValueError, match="concat"):
        ddg.concat([a, b], axis=0)
    with pytest.raises(ValueError, match="set_device"):
        if not ddg.is_compiled_with_cuda():
            ddg.set_device("gpu")
        else:
            raise ValueError("set_device (skipped: a GPU is present)")


def test_places_without_cuda():
    assert ddg.CPUPlace() == "cpu"
    assert repr(ddg.CUDAPlace(1)) == "Place(gpu:1)"
    dev = ddg.device("cpu")
    assert dev.type == "cpu"
    assert ddg.device.get_device() == "cpu"
    if not ddg.is_compiled_with_cuda():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            ddg.ones([2]).cuda()


def test_dlpack_shares_memory_with_numpy():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ddg.from_dlpack(a)
    a[0, 0] = 42
    assert t.numpy()[0, 0] == 42
    back = np.from_dlpack(t)
    assert back[0, 0] == 42
    cap = ddg.utils.dlpack.to_dlpack(t)
    t2 = ddg.utils.dlpack.from_dlpack(cap)
    np.testing.assert_array_equal(t2.numpy(), a)


def test_comparisons_and_logic():
    a = ddg.to_tensor([1, 2, 3])
    np.testing.assert_array_equal((a == 2).numpy(), [False, True, False])
    np.testing.assert_array_equal(ddg.logical_and(a > 1, a < 3).numpy(), [False, True, False])
    assert (a >= 1).all().item() and (a > 2).any().item()
    assert {a: 1}[a] == 1  # tensors stay hashable


def test_reduction_edge_cases():
    x = ddg.to_tensor([[1.0, 5.0], [5.0, 2.0]], stop_gradient=False)
    m = ddg.max(x)
    m.backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0.5], [0.5, 0]])  # ties share
    assert ddg.argmax(x, axis=1).tolist() == [1, 0]
    assert ddg.sum(ddg.to_tensor([True, True, False])).item() == 2
    assert ddg.mean(ddg.to_tensor([1, 2])).item() == 1  # Paddle: integer mean, toward zero
    np.testing.assert_allclose(ddg.cumsum(ddg.to_tensor([[1, 2], [3, 4]])).numpy(), [1, 3, 6, 10])
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        ddg.sum(x, axis=2)


def test_split_chunk_shapes():
    x = ddg.arange(12, dtype="float32").reshape([3, 4])
    parts = ddg.split(x, [1, -1], axis=1)
    assert [p.shape for p in parts] == [[3, 1], [3, 3]]
    assert [p.shape for p in ddg.chunk(x, 2, axis=1)] == [[3, 2], [3, 2]]
    with pytest.raises(ValueError, match="does not divide"):
        ddg.split(x, 3, axis=1)


def test_indexing_forms():
    x = ddg.arange(24).reshape([2, 3, 4])
    n = np.arange(24).reshape(2, 3, 4)
    for idx in [(0,), (slice(None), 1), (Ellipsis, 2), (None, 1), (slice(None, None, -1),),
                (np.array([1, 0]),), (n > 10,), (0, [0, 2], slice(1, 3))]:
        np.testing.assert_array_equal(x[idx].numpy(), n[idx])
    np.testing.assert_array_equal(x[ddg.to_tensor([1, 1])].numpy(), n[[1, 1]])
    y = ddg.zeros([3, 3])
    y[1] = 5
    y[:, 0] = ddg.to_tensor([1.0, 2.0, 3.0])
    assert y.numpy()[1].tolist() == [2.0, 5.0, 5.0] and y.numpy()[:, 0].tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="setitem"):
        y[0] = ddg.ones([5])


@pytest.mark.parametrize("call,op", [
    (lambda: ddg.randn([2, -3]), "randn"), (lambda: ddg.zeros([2, 2.5]), "zeros"), (lambda: ddg.ones(2, -1), "ones"),
    (lambda: ddg.full([2, "a"], 1.0), "full"), (lambda: ddg.rand([-1]), "rand"), (lambda: ddg.empty([3, -2]), "empty"),
    (lambda: ddg.randint(0, 5, [-1]), "randint"), (lambda: ddg.uniform([-2]), "uniform"),
    (lambda: ddg.normal(shape=[2, -2]), "normal"), (lambda: ddg.arange(0, 5, 0), "arange")])
def test_creation_rejects_bad_shapes_naming_the_call(call, op):
    """A negative, fractional or non-numeric size, or arange's zero step: a ValueError naming
    the creation call (numpy had said "negative dimensions are not allowed", "invalid literal
    for int()" or "division by zero")."""
    with pytest.raises(ValueError, match=rf"ddg\.{op}: "):
        call()
    assert ddg.zeros([2, 0]).shape == [2, 0] and ddg.ones([2.0, np.int64(3)]).shape == [2, 3]
