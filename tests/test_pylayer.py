"""PyLayer's contract, as Paddle 3.3.1 has it: which arguments are inputs (positional,
keyword, lists of Tensors), non-Tensor outputs, the errors for bad forwards and
backwards, mark_non_differentiable, set_materialize_grads, saved_tensor. Gradients are
checked against float64 central differences of the forward."""
import numpy as np
import pytest

import ddg
from ddg.autograd import PyLayer


def leaf(a):
    t = ddg.to_tensor(np.asarray(a, dtype=np.float64))
    t.stop_gradient = False
    return t


def central_diff(f, arrays, eps=1e-6):
    """d sum(f(arrays)) / d each array, by float64 central differences."""
    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus = [x.copy() for x in arrays]
            minus = [x.copy() for x in arrays]
            plus[k][idx] += eps
            minus[k][idx] -= eps
            g[idx] = (f(*plus).sum() - f(*minus).sum()) / (2 * eps)
        grads.append(g)
    return grads


class Affine(PyLayer):
    """y = a * x + 3 * b (+ c[0] * c[1]); returns y with non-Tensor companions."""

    @staticmethod
    def forward(ctx, x, scale, b=None, pair=None, tag="t"):
        ctx.scale = scale
        ctx.save_for_backward(x, b, *(pair or []))
        y = x * scale + b * 3
        if pair is not None:
            y = y + pair[0] * pair[1]
        return y, y.shape, tag, 7

    @staticmethod
    def backward(ctx, dy):
        saved = ctx.saved_tensor()
        assert isinstance(saved, tuple)
        x, b = saved[:2]
        grads = [dy * ctx.scale]
        if len(saved) == 4:
            p, q = saved[2:]
            return grads[0], dy * 3, [dy * q, dy * p]
        return grads[0], dy * 3


@pytest.mark.parametrize("with_pair", [False, True])
@pytest.mark.parametrize("b_requires", [True, False])
def test_keyword_and_list_inputs_get_gradients(with_pair, b_requires, rng):
    xa, ba, pa, qa = (rng.standard_normal((2, 3)) for _ in range(4))
    x, b, p, q = leaf(xa), leaf(ba), leaf(pa), leaf(qa)
    b.stop_gradient = not b_requires
    kwargs = {"b": b, "tag": "name"}
    if with_pair:
        kwargs["pair"] = [p, q]
    y, shape, tag, seven = Affine.apply(x, 2.5, **kwargs)
    assert list(shape) == [2, 3] and tag == "name" and seven == 7  # non-Tensors pass through
    assert not y.stop_gradient
    (y * y).sum().backward()
    if with_pair:
        want = central_diff(lambda x, b, p, q: (x * 2.5 + 3 * b + p * q) ** 2, [xa, ba, pa, qa])
        np.testing.assert_allclose(p.grad.numpy(), want[2], rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(q.grad.numpy(), want[3], rtol=1e-6, atol=1e-8)
    else:
        want = central_diff(lambda x, b: (x * 2.5 + 3 * b) ** 2, [xa, ba])
    np.testing.assert_allclose(x.grad.numpy(), want[0], rtol=1e-6, atol=1e-8)
    if b_requires:
        np.testing.assert_allclose(b.grad.numpy(), want[1], rtol=1e-6, atol=1e-8)
    else:
        assert b.grad is None


def test_output_containers_and_no_grad():
    class Two(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return [x * 2]

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = leaf([1.0, 2.0])
    out = Two.apply(x)
    assert isinstance(out, list) and not out[0].stop_gradient
    with ddg.no_grad():
        assert Two.apply(x)[0].stop_gradient
    frozen = ddg.to_tensor([1.0, 2.0])
    assert Two.apply(frozen)[0].stop_gradient


def test_forward_without_tensor_output_raises():
    class NoTensor(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x.shape, 3

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(ValueError, match="At least one output of `PyLayer.forward` is a `Tensor`"):
        NoTensor.apply(leaf([1.0]))


@pytest.mark.parametrize("case", ["too_many", "too_few", "not_tensor", "bad_shape", "bad_list"])
def test_backward_errors(case):
    class Bad(PyLayer):
        @staticmethod
        def forward(ctx, x, y, pair=None):
            return x * y

        @staticmethod
        def backward(ctx, g):
            if case == "too_many":
                return g, g, g
            if case == "too_few":
                return (g,)
            if case == "not_tensor":
                return 3.0, g
            if case == "bad_shape":
                return g, ddg.ones([5], dtype="float64")
            return g, g, [g]

    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    pair = [leaf([1.0, 1.0]), leaf([2.0, 2.0])] if case == "bad_list" else None
    out = Bad.apply(x, y, pair=pair)
    msg = {"too_many": r"The number of outputs of `PyLayer.backward` should be 2, but received 3",
           "too_few": r"Bad's backward function should not return empty at 1 position",
           "not_tensor": r"We can only support Tensor or None for backward output, but got float",
           "bad_shape": r"gradient of shape \[5\] for input 1, whose shape is \[2\]",
           "bad_list": r"must return a list of 2 gradients"}[case]
    with pytest.raises(ValueError, match=msg):
        out.sum().backward()


def test_fewer_gradients_for_inputs_without_grad_and_none():
    class Mul(PyLayer):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(y)
            return x * y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensor()
            return (g * y,)

    x = leaf([1.0, 2.0])
    y = ddg.to_tensor([3.0, 4.0], dtype="float64")  # needs no gradient: may be left out
    Mul.apply(x, y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 4.0])

    class NoneGrad(PyLayer):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g, None

    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    NoneGrad.apply(x, y).sum().backward()
    assert y.grad is None and x.grad.numpy().tolist() == [1.0, 1.0]


@pytest.mark.parametrize("materialize", [True, False])
def test_non_differentiable_outputs_and_materialized_grads(materialize):
    seen = {}

    class Split(PyLayer):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(materialize)
            a, b, idx = x * 2, x * 3, ddg.argmax(x)
            ctx.mark_non_differentiable(b)
            return a, b, idx

        @staticmethod
        def backward(ctx, ga, gb, gi):
            seen["grads"] = (ga, gb, gi)
            return ga * 2 + (0 if gb is None else gb)

    x = leaf([1.0, 5.0, 2.0])
    a, b, idx = Split.apply(x)
    assert not a.stop_gradient and b.stop_gradient and idx.stop_gradient
    a.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])
    ga, gb, gi = seen["grads"]
    np.testing.assert_allclose(ga.numpy(), [1.0, 1.0, 1.0])
    if materialize:
        assert gb.numpy().tolist() == [0.0, 0.0, 0.0] and gb.dtype == ddg.float64
        assert gi.numpy().tolist() == 0 and gi.dtype == ddg.int64
    else:
        assert gb is None and gi is None


def test_gradient_cast_to_input_dtype_and_create_graph():
    class Cube(PyLayer):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensor()
            return (g * 3 * x * x).astype("float32")

    x = leaf([1.0, -2.0])
    Cube.apply(x).sum().backward()
    assert x.grad.dtype == ddg.float64
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])
    x2 = leaf([1.0, -2.0])
    (g,) = ddg.grad(Cube.apply(x2).sum(), [x2], create_graph=True)
    np.testing.assert_allclose(g.numpy(), [3.0, 12.0])


def test_saved_tensors_hooks_on_ops_and_pylayer(rng):
    from ddg.autograd import saved_tensors_hooks
    from ddg.autograd.function import Function
    xa = rng.standard_normal((2, 3))
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return ("offloaded", t.numpy().copy())  # anything may be kept

    def unpack(p):
        unpacked.append(p[1].shape)
        return ddg.to_tensor(p[1])

    plain = Function.__call__
    x = leaf(xa)
    with saved_tensors_hooks(pack, unpack):
        assert Function.__call__ is not plain
        y = (ddg.tanh(x * x) * 3).sum()
        z = Affine.apply(x, 2.0, b=leaf(xa))[0].sum()
    assert Function.__call__ is plain  # nothing patched outside the context
    n_packed = len(packed)
    assert n_packed >= 3 and not unpacked
    (y + z).backward(retain_graph=True)  # after the context closed: still unpacked
    want = 2 * xa * 3 * (1 - np.tanh(xa * xa) ** 2) + 2.0
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)
    assert len(unpacked) == n_packed
    x.clear_grad()
    (y + z).backward()  # a second backward reuses what was unpacked
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)
    assert len(unpacked) == n_packed

    def bad_unpack(p):
        return ddg.ones([5], dtype="float64")

    x2 = leaf(xa)
    with saved_tensors_hooks(pack, bad_unpack):
        y2 = ddg.sin(x2).sum()
    with pytest.raises(ValueError, match="unpack_hook returned shape"):
        y2.backward()
