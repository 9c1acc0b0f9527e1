"""ddg.set_flags / ddg.get_flags (Paddle's names and semantics) and FLAGS_check_nan_inf."""
import numpy as np
import pytest

import ddg


@pytest.fixture
def check_nan_inf():
    ddg.set_flags({"FLAGS_check_nan_inf": True})
    yield
    ddg.set_flags({"FLAGS_check_nan_inf": False})


def test_get_and_set_flags_as_paddle_has_them():
    assert ddg.get_flags("FLAGS_check_nan_inf") == {"FLAGS_check_nan_inf": False}
    assert ddg.get_flags(["FLAGS_check_nan_inf"]) == {"FLAGS_check_nan_inf": False}
    ddg.set_flags({"FLAGS_check_nan_inf": True})
    try:
        assert ddg.get_flags(("FLAGS_check_nan_inf",)) == {"FLAGS_check_nan_inf": True}
    finally:
        ddg.set_flags({"FLAGS_check_nan_inf": False})
    assert ddg.get_flags("FLAGS_check_nan_inf") == {"FLAGS_check_nan_inf": False}
    with pytest.raises(ValueError, match="FLAGS_no_such_flag"):
        ddg.get_flags("FLAGS_no_such_flag")
    with pytest.raises(ValueError, match="FLAGS_no_such_flag"):
        ddg.set_flags({"FLAGS_no_such_flag": 1})
    with pytest.raises(TypeError, match="dict"):
        ddg.set_flags("FLAGS_check_nan_inf")
    with pytest.raises(TypeError, match="bool"):
        ddg.set_flags({"FLAGS_check_nan_inf": "yes"})
    assert ddg.get_flags("FLAGS_check_nan_inf") == {"FLAGS_check_nan_inf": False}


def test_off_by_default_nan_passes_silently():
    x = ddg.to_tensor(np.array([0.0, 1.0]), stop_gradient=False)
    with np.errstate(divide="ignore"):
        y = ddg.log(x)
    assert np.isinf(y.numpy()[0])


def test_forward_nan_inf_names_the_op(check_nan_inf):
    x = ddg.to_tensor(np.array([[0.0, 1.0, 2.0]], dtype=np.float32))
    with np.errstate(divide="ignore"), pytest.raises(RuntimeError) as e:
        ddg.log(x)
    msg = str(e.value)
    assert "ddg.Log" in msg and "shape [1, 3]" in msg and "float32" in msg and "1 inf" in msg
    with np.errstate(invalid="ignore"), pytest.raises(RuntimeError, match=r"ddg\.Sqrt.*1 nan"):
        ddg.sqrt(ddg.to_tensor(np.array([-1.0, 4.0])))
    # finite results and integer outputs pass
    np.testing.assert_allclose(ddg.exp(x).numpy(), np.exp(x.numpy()), rtol=1e-6)
    assert ddg.argmax(x).item() == 2


def test_nan_in_a_layer_names_the_op(check_nan_inf):
    lin = ddg.nn.Linear(3, 2)
    x = ddg.to_tensor(np.array([[1.0, np.nan, 0.0]], dtype=np.float32))
    with pytest.raises(RuntimeError, match=r"ddg\.\w+: output \(shape \[1, 2\], dtype float32\) holds 2 nan"):
        lin(x)


def test_backward_gradient_nan_inf_names_the_op(check_nan_inf):
    x = ddg.to_tensor(np.array([0.0, 4.0]), stop_gradient=False)
    y = ddg.sqrt(x)                       # forward is finite: sqrt(0) = 0
    with np.errstate(divide="ignore"), pytest.raises(RuntimeError) as e:
        y.sum().backward()                # d sqrt / dx at 0 is inf
    msg = str(e.value)
    assert "ddg.Sqrt backward" in msg and "gradient of input 0" in msg and "shape [2]" in msg
    assert "float64" in msg and "1 inf" in msg


def test_matmul_and_linear_refuse_mixed_float_dtypes():
    # Paddle raises ValueError for float32 @ float64; ddg too, naming op, dtypes and shapes.
    a = ddg.to_tensor(np.ones((2, 3), dtype=np.float32))
    b = ddg.to_tensor(np.ones((3, 4), dtype=np.float64))
    with pytest.raises(ValueError) as e:
        ddg.matmul(a, b)
    msg = str(e.value)
    assert "MatMul" in msg and "float32" in msg and "float64" in msg and "[2, 3]" in msg and "[3, 4]" in msg
    lin = ddg.nn.Linear(3, 4)                        # float32 weight
    x = ddg.to_tensor(np.ones((2, 3), dtype=np.float64))
    with pytest.raises(ValueError, match=r"Linear.*float64 \[2, 3\].*float32 \[3, 4\]"):
        lin(x)
    assert lin(x.astype("float32")).dtype == np.float32
    ints = ddg.to_tensor(np.ones((3, 4), dtype=np.int64))
    assert ddg.matmul(ddg.to_tensor(np.ones((2, 3), dtype=np.int64)), ints).shape == [2, 4]


def test_to_static_replay_checks_too(check_nan_inf):
    """A to_static function replays its recorded ops without going through Function's
    call; the flag must hold there too, forward and backward."""
    @ddg.jit.to_static
    def f(x):
        return ddg.sqrt(x) * 2.0

    ok = np.array([1.0, 4.0])
    for _ in range(3):  # recorded, then replayed
        x = ddg.to_tensor(ok, stop_gradient=False)
        f(x).sum().backward()
    with np.errstate(invalid="ignore"), pytest.raises(RuntimeError, match=r"ddg\.Sqrt: output .* 1 nan"):
        f(ddg.to_tensor(np.array([-1.0, 4.0])))
    x = ddg.to_tensor(np.array([0.0, 4.0]), stop_gradient=False)
    y = f(x)
    with np.errstate(divide="ignore"), pytest.raises(RuntimeError, match=r"ddg\.Sqrt backward: .*input 0 .*1 inf"):
        y.sum().backward()
