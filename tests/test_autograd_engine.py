"""Engine behaviour: deep graphs, accumulation, graph freeing, hooks, grad modes,
ddg.grad, PyLayer, in-place safety and memory."""
import gc
import tracemalloc

import numpy as np
import pytest

import ddg
from ddg.autograd import engine


def leaf(a):
    return ddg.to_tensor(np.asarray(a, dtype=np.float64), stop_gradient=False)


def test_ten_thousand_op_chain_does_not_hit_recursion_limit():
    x = leaf([1.0])
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 10_000], rtol=1e-9)


def test_a_leaf_used_many_times_sums_in_place_without_touching_shared_arrays():
    """A leaf that gets many gradients (every step of a cell loop uses the weights): from the
    third arrival on they are added into the engine's own sum in place. The same values as
    summing them one by one, and no array another node or the caller holds is written: the
    root gradient, which ``x + x``'s backward hands to both edges, stays as given."""
    rng = np.random.default_rng(0)
    w = leaf(rng.standard_normal((3, 3)))
    xs = [rng.standard_normal((2, 3)) for _ in range(6)]
    gy = rng.standard_normal((2, 3))
    gy_copy = gy.copy()
    y = sum(ddg.matmul(ddg.to_tensor(x), w) for x in xs)
    y.backward(ddg.to_tensor(gy))
    want = np.zeros((3, 3))
    for x in xs:
        want = want + x.T @ gy
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-12, atol=1e-12)
    v = leaf(rng.standard_normal((2, 3)))
    root = rng.standard_normal((2, 3))
    root_copy = root.copy()
    z = v + v + v * 2.0 + v
    z.backward(ddg.to_tensor(root))
    np.testing.assert_array_equal(root, root_copy)
    np.testing.assert_array_equal(gy, gy_copy)
    np.testing.assert_allclose(v.grad.numpy(), 5.0 * root, rtol=1e-12)


def test_shared_tensor_gradients_accumulate():
    w = leaf([[1.0, 2.0], [3.0, 4.0]])
    x = leaf([[0.5, -1.0]])
    h = ddg.matmul(x, w)
    out = ddg.matmul(h, w, transpose_y=True)  # w used twice (weight sharing)
    out.sum().backward()
    # d/dw sum(x w w^T) = x^T (1 w) ... check against central differences
    assert ddg.autograd.gradcheck(lambda x_, w_: ddg.matmul(ddg.matmul(x_, w_), w_, transpose_y=True), [x, w])


def test_second_backward_after_free_raises_clearly():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_retain_graph_allows_second_backward_and_accumulates():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])


def test_non_scalar_root_defaults_to_ones():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.backward(retain_graph=True)  # Paddle: grad_tensor defaults to ones for any shape
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    x.clear_grad()
    y.backward(ddg.to_tensor([1.0, 10.0], dtype="float64"))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 20.0])


def test_backward_of_tensor_without_grad_does_nothing():
    t = ddg.to_tensor([1.0])
    t.sum().backward()  # Paddle: no error, no gradient
    assert t.grad is None
    i = ddg.to_tensor([1, 2], stop_gradient=False)  # Paddle allows it on integer tensors
    assert not i.stop_gradient
    f = ddg.to_tensor([1.0, 2.0], stop_gradient=False)
    (f * i.astype("float32")).sum().backward()
    np.testing.assert_allclose(f.grad.numpy(), [1.0, 2.0])


def test_saved_arrays_released_after_backward():
    x = leaf(np.ones(4))
    y = ddg.exp(x)
    node = y._node
    assert hasattr(node, "out")
    y.sum().backward()
    assert not hasattr(node, "out") or node.__dict__.get("out") is None


def test_register_hook_replaces_gradient_on_leaf_and_intermediate():
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: g * 10)
    h = x * 3
    seen = []
    h.register_hook(lambda g: seen.append(g.numpy().copy()))
    handle = h.register_hook(lambda g: g + 1)
    h.sum().backward()
    np.testing.assert_allclose(seen[0], [1.0, 1.0])
    np.testing.assert_allclose(x.grad.numpy(), [(1 + 1) * 3 * 10] * 2)
    handle.remove()


def test_grad_ready_hook_fires_once_after_final_accumulation_for_shared_weight():
    w = leaf([2.0])
    calls = []
    w.register_grad_ready_hook(lambda t: calls.append(t.grad.numpy().copy()))
    y = w * 3 + w * w + ddg.exp(w)  # three paths into w
    y.sum().backward()
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], [3 + 4 + np.exp(2.0)])


def test_grad_ready_hooks_fire_as_soon_as_final_in_reverse_order():
    """Leaves closer to the loss become final earlier: layer 2's weight before layer 1's."""
    order = []
    w1, w2 = leaf(np.ones((3, 3))), leaf(np.ones((3, 3)))
    w1.register_grad_ready_hook(lambda t: order.append("w1"))
    w2.register_grad_ready_hook(lambda t: order.append("w2"))
    x = ddg.to_tensor(np.ones((2, 3)))
    out = ddg.matmul(ddg.tanh(ddg.matmul(x, w1)), w2)
    out.sum().backward()
    assert order == ["w2", "w1"]


def test_backward_begin_and_complete_callbacks():
    seen = {}
    a, b, unused = leaf([1.0]), leaf([2.0]), leaf([3.0])
    h1 = engine.register_backward_begin_callback(lambda leaves: seen.setdefault("leaves", set(map(id, leaves))))
    h2 = engine.register_backward_complete_callback(lambda: seen.setdefault("done", a.grad is not None))
    try:
        (a * b).sum().backward()
    finally:
        h1.remove()
        h2.remove()
    assert seen["leaves"] == {id(a), id(b)} and id(unused) not in seen["leaves"]
    assert seen["done"] is True


def test_queue_callback_runs_once_at_end():
    ran = []
    x = leaf([1.0])
    x.register_grad_ready_hook(lambda t: engine.queue_callback(lambda: ran.append(1)))
    (x * 2).sum().backward()
    (x * 2).sum().backward()
    assert ran == [1, 1]


def test_pre_backward_runs_just_before_the_node_and_can_restore_saved_arrays():
    """A node's ``_pre_backward`` is called with the node once, before its backward and
    after the backward of the node that consumes it; what it puts back is what the
    backward reads (ZeRO stage 3 swaps saved parameter arrays out and back this way)."""
    w = leaf([[1.0, 2.0], [3.0, 4.0]])
    x = leaf([[0.5, -1.0]])
    h = ddg.nn.functional.linear(x, w)
    out = (h * h).sum()
    lin = h._node
    order = []
    mul = out._node.edges[0][0]            # the product node between the sum and the linear
    mul._pre_backward = lambda node: order.append("mul")
    saved = lin.w
    lin.w = None                           # taken away after forward ...

    def restore(node):
        order.append(("linear", node is lin))
        node.w = saved                     # ... and put back just in time
    lin._pre_backward = restore
    out.backward()
    hv = x.numpy() @ w.numpy()
    assert order == ["mul", ("linear", True)]
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ (2 * hv), rtol=1e-15)
    np.testing.assert_allclose(x.grad.numpy(), (2 * hv) @ w.numpy().T, rtol=1e-15)


def test_no_grad_enable_grad_set_grad_enabled():
    x = leaf([1.0])
    with ddg.no_grad():
        assert (x * 2).stop_gradient
        with ddg.enable_grad():
            assert not (x * 2).stop_gradient
    assert not (x * 2).stop_gradient

    @ddg.no_grad()
    def f(t):
        return t * 2

    @ddg.no_grad
    def g(t):
        return t * 2

    assert f(x).stop_gradient and g(x).stop_gradient
    with ddg.set_grad_enabled(False):
        assert (x * 2).stop_gradient
    assert ddg.is_grad_enabled()


def test_integer_outputs_never_require_grad():
    x = leaf([1.5, 2.5])
    assert ddg.argmax(x).stop_gradient
    assert (x > 1).stop_gradient
    assert ddg.cast(x, "int64").stop_gradient
    assert not ddg.to_tensor([1, 2]).requires_grad_().stop_gradient  # allowed, as in Paddle


def test_ddg_grad_returns_without_accumulating():
    x = leaf([1.0, 2.0])
    h = x * x
    y = (h * 3).sum()
    gx, gh = ddg.grad([y], [x, h], retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), [6.0, 12.0])
    np.testing.assert_allclose(gh.numpy(), [3.0, 3.0])
    assert x.grad is None
    z = leaf([5.0])
    with pytest.raises(RuntimeError, match="not reachable"):
        ddg.grad(y, [z], retain_graph=True)
    assert ddg.grad(y, [z], allow_unused=True) == [None]
    # create_graph=True (higher-order gradients, tests/test_higher_order.py): the result is on a graph
    (gx,) = ddg.grad([(x * x * 3).sum()], [x], create_graph=True)
    assert not gx.stop_gradient
    np.testing.assert_allclose(ddg.grad(gx.sum(), x)[0].numpy(), [6.0, 6.0])


def test_pylayer_custom_forward_backward():
    class CusTanh(ddg.autograd.PyLayer):
        @staticmethod
        def forward(ctx, x, func1, func2=ddg.square):
            ctx.func = func2
            y = func1(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            y, = ctx.saved_tensor()
            return dy * (1 - ctx.func(y))

    x = leaf([0.3, -1.2])
    out = CusTanh.apply(x, ddg.tanh)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh([0.3, -1.2]) ** 2)


def test_inplace_update_of_leaf_requires_no_grad():
    w = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf"):
        w.subtract_(1.0)
    alias = w
    w2 = w
    w2 -= 1.0  # Paddle: a new (non-leaf) tensor, the leaf itself is untouched
    assert w2 is not w and not w2.is_leaf and w.numpy().tolist() == [1.0, 2.0]
    with ddg.no_grad():
        w -= 0.5 * ddg.to_tensor([2.0, 2.0], dtype="float64")
    np.testing.assert_allclose(w.numpy(), [0.0, 1.0])
    assert not w.stop_gradient and w.is_leaf and alias is w  # updated in place (PyTorch-style manual SGD)


def test_inplace_arithmetic_on_intermediate_keeps_gradients_right():
    x = leaf([1.0, 2.0])
    h = x * x
    h *= 3  # recorded out of place; h now carries the product's history
    h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


def test_setitem_gradients():
    x = leaf([1.0, 2.0, 3.0])
    v = leaf([10.0])
    h = x * 2
    h[1:2] = v * v
    h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 0.0, 2.0])
    np.testing.assert_allclose(v.grad.numpy(), [20.0])


def test_setitem_on_tensor_saved_for_backward_raises():
    x = leaf([1.0, 2.0])
    h = ddg.exp(x)  # exp saves its output
    y = h * 1.0
    h[0] = 5.0
    with pytest.raises(RuntimeError, match="modified in place"):
        y.sum().backward()
    a = leaf([1.0, 2.0])
    b = a * 1.0
    c = b * b  # mul saves its inputs
    b[0] = 0.0
    with pytest.raises(RuntimeError, match="modified in place"):
        c.sum().backward()


def test_setitem_through_a_view_is_detected():
    a = leaf(np.ones((2, 3)))
    b = a * 1.0
    c = (b * b).sum()
    view = b[0]
    with ddg.no_grad():
        view[...] = 7.0
    with pytest.raises(RuntimeError, match="modified in place"):
        c.backward()


def test_repeated_index_gradients_accumulate():
    x = leaf([1.0, 2.0, 3.0])
    y = x[ddg.to_tensor([0, 0, 2, 0])]
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 0.0, 1.0])


def test_clear_grad_and_accumulation_across_backwards():
    x = leaf([1.0])
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0])
    x.clear_grad()
    np.testing.assert_allclose(x.grad.numpy(), [0.0])
    x.clear_grad(set_to_zero=False)
    assert x.grad is None


def test_leaf_gradient_not_aliased_between_leaves():
    a, b = leaf([1.0]), leaf([2.0])
    (a + b).sum().backward()
    a.grad._data += 100
    np.testing.assert_allclose(b.grad.numpy(), [1.0])


def test_training_loop_memory_stays_flat():
    rng = np.random.default_rng(0)
    w1 = ddg.to_tensor(rng.standard_normal((64, 32)).astype(np.float32), stop_gradient=False)
    w2 = ddg.to_tensor(rng.standard_normal((32, 4)).astype(np.float32), stop_gradient=False)
    x = ddg.to_tensor(rng.standard_normal((16, 64)).astype(np.float32))

    def step():
        loss = ddg.matmul(ddg.tanh(ddg.matmul(x, w1)), w2).pow(2).mean()
        loss.backward()
        with ddg.no_grad():
            w1.subtract_(1e-3 * w1.grad)
            w2.subtract_(1e-3 * w2.grad)
            w1.grad.zero_()
            w2.grad.zero_()

    for _ in range(50):
        step()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(1000):
        step()
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert grown < 200_000, f"memory grew by {grown} bytes over 1000 steps"


def test_attribute_error_in_forward_blames_the_inputs_only_when_they_lack_the_attribute():
    from ddg.autograd.function import Function

    class ReadsInputAttr(Function):          # the input array lacks what forward reads
        def forward(self, a):
            return a.no_such_attribute

    class ReadsSettingAttr(Function):        # a setting the caller gave lacks it
        def __init__(self, shape):
            self.shape = shape

        def forward(self, a):
            return a.reshape(self.shape.as_tuple())

    class InternalBug(Function):             # ddg's own code asks numpy for a missing name
        def forward(self, a):
            return np.no_such_function(a)

    class InternalArrayBug(Function):        # an array ddg made itself lacks it
        def forward(self, a):
            self.tmp = a * 2
            return self.tmp.no_such_attribute

    x = ddg.to_tensor(np.ones((2, 3), dtype="float32"))
    with pytest.raises(ValueError, match=r"ddg\.ReadsInputAttr: .*no_such_attribute.*inputs: .*\[2, 3\]"):
        ReadsInputAttr()(x)
    with pytest.raises(ValueError, match=r"ddg\.ReadsSettingAttr: .*as_tuple.*inputs:"):
        ReadsSettingAttr([3, 2])(x)
    with pytest.raises(AttributeError, match="no_such_function") as info:
        InternalBug()(x)
    assert type(info.value) is AttributeError and "inputs:" not in str(info.value)
    with pytest.raises(AttributeError, match="no_such_attribute") as info:
        InternalArrayBug()(x)
    assert type(info.value) is AttributeError


def test_errors_raised_in_forward_keep_their_kind_and_name_the_op():
    """An op's forward that fails with a TypeError, IndexError or RuntimeError re-raises one
    of the same class naming the op and its inputs (others become a ValueError); an
    exception class with a constructor of its own (numpy's ufunc casting and no-loop errors,
    subclasses of TypeError) becomes a plain TypeError with the message, where building
    one of its own class had failed with an unrelated TypeError."""
    from ddg.autograd.function import Function

    class Raises(Function):
        def __init__(self, make):
            self.make = make

        def forward(self, a):
            self.make(a)

    def casting(a):           # numpy's _UFuncOutputCastingError
        np.add(a, 1.5, out=np.zeros(a.shape, np.int64))

    def no_loop(a):           # numpy's _UFuncNoLoopError
        np.add(a.astype("U1"), a)

    x = ddg.to_tensor(np.ones((2, 3), dtype="float32"))
    for make, want in ((casting, TypeError), (no_loop, TypeError)):
        with pytest.raises(want, match=r"ddg\.Raises: .*inputs: \[2, 3\]:float32@cpu") as info:
            Raises(make)(x)
        assert type(info.value) is want
    for exc, want in ((IndexError, IndexError), (RuntimeError, RuntimeError), (KeyError, None),
                      (np.exceptions.AxisError, np.exceptions.AxisError)):
        def boom(a, exc=exc):
            raise exc("went wrong")
        if want is None:          # not one the op wraps
            with pytest.raises(KeyError):
                Raises(boom)(x)
            continue
        with pytest.raises(want, match=r"ddg\.Raises: .*went wrong.*inputs:") as info:
            Raises(boom)(x)
        assert type(info.value) is want


# -- a Linear's weight gradient added straight into .grad (engine.grad_sink) ---------------------
@pytest.fixture
def sinks(monkeypatch):
    """The compiled product taken at any size; each ``.grad`` array handed to a Linear's
    weight gradient recorded (None where the engine handed none)."""
    from ddg.autograd.ops import nn_ops
    from ddg.tensor import gemm
    monkeypatch.setattr(gemm, "blas_threads", lambda: 1)
    monkeypatch.setattr(gemm, "MIN_DIM", 1)
    monkeypatch.setattr(gemm, "MIN_MACS", 0)
    handed = []
    real = nn_ops.grad_sink

    def recording(node, i):
        a = real(node, i)
        handed.append(a)
        return a
    monkeypatch.setattr(nn_ops, "grad_sink", recording)
    return handed


def _linear_case(seed=0, bias=True):
    rng = np.random.default_rng(seed)
    lin = ddg.nn.Linear(33, 20, bias_attr=None if bias else False)
    x = rng.standard_normal((3, 13, 33)).astype(np.float32)
    g = rng.standard_normal((3, 13, 20)).astype(np.float32)
    want = x.reshape(-1, 33).astype(np.float64).T @ g.reshape(-1, 20).astype(np.float64)
    return lin, ddg.to_tensor(x), ddg.to_tensor(g), want


@pytest.mark.parametrize("bias", [True, False])
def test_linear_weight_gradient_added_into_grad(sinks, bias):
    """From the second backward on (``.grad`` exists), the weight's gradient is added into
    the same ``.grad`` array in place: zeroed by clear_grad it equals a fresh one bit for
    bit, and without clear_grad it accumulates; the bias gradient as before."""
    lin, x, g, want = _linear_case(bias=bias)
    lin(x).backward(g)
    assert sinks == [None]                          # no .grad yet: handed nothing
    first = lin.weight.grad.numpy().copy()
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-5)
    arr = lin.weight.grad._data
    lin.clear_gradients()
    lin(x).backward(g)
    assert sinks[-1] is arr and lin.weight.grad._data is arr
    np.testing.assert_array_equal(lin.weight.grad.numpy(), first)
    lin(x).backward(g)                              # no clear_grad: added to the first
    np.testing.assert_allclose(lin.weight.grad.numpy(), 2 * want, rtol=1e-5, atol=1e-5)
    if bias:
        np.testing.assert_allclose(lin.bias.grad.numpy(), 2 * g.numpy().reshape(-1, 20).sum(0), rtol=1e-5, atol=1e-5)


def test_grad_sink_declined_where_the_gradient_is_not_final_or_not_plain(sinks):
    """Nothing is handed out for a weight with a tensor hook (it sees the gradient first),
    used twice (tied: summed first), under create_graph or ddg.grad (no accumulation), or
    whose .grad is not C-contiguous; each gradient stays right."""
    lin, x, g, want = _linear_case(1)
    lin(x).backward(g)
    # a tensor hook doubles the gradient
    lin.clear_gradients()
    h = lin.weight.register_hook(lambda t: t * 2)
    sinks.clear()
    lin(x).backward(g)
    assert sinks == [None]
    np.testing.assert_allclose(lin.weight.grad.numpy(), 2 * want, rtol=1e-5, atol=1e-5)
    h.remove()
    # the weight used by two Linear ops
    lin.clear_gradients()
    sinks.clear()
    (lin(x) + lin(x)).backward(g)
    assert sinks == [None, None]
    np.testing.assert_allclose(lin.weight.grad.numpy(), 2 * want, rtol=1e-5, atol=1e-5)
    # ddg.grad: returned, .grad untouched
    lin.clear_gradients()
    sinks.clear()
    gw, = ddg.grad(lin(x), [lin.weight], g)
    assert sinks == [None]
    np.testing.assert_allclose(gw.numpy(), want, rtol=1e-5, atol=1e-5)
    assert not lin.weight.grad.numpy().any()
    # create_graph: the gradient recorded on a graph, added out of place
    sinks.clear()
    ddg.autograd.backward([lin(x)], [g], create_graph=True)
    assert sinks == []
    np.testing.assert_allclose(lin.weight.grad.numpy(), want, rtol=1e-5, atol=1e-5)
    # a Fortran-order .grad: added the usual way
    lin.weight.grad = np.asfortranarray(np.zeros((33, 20), np.float32))
    sinks.clear()
    lin(x).backward(g)
    assert sinks == [None]
    np.testing.assert_allclose(lin.weight.grad.numpy(), want, rtol=1e-5, atol=1e-5)


def test_grad_sink_keeps_ready_hooks_and_inner_nodes_apart(sinks):
    """The grad-ready hook fires once, after the gradient is in .grad; a node's backward
    asking for another node's sink gets nothing."""
    lin, x, g, want = _linear_case(2)
    lin(x).backward(g)
    lin.clear_gradients()
    seen = []
    lin.weight.register_grad_ready_hook(lambda t: seen.append(t.grad.numpy().copy()))
    lin(x).backward(g)
    assert len(seen) == 1 and sinks[-1] is lin.weight.grad._data
    np.testing.assert_allclose(seen[0], want, rtol=1e-5, atol=1e-5)
    y = lin(x)
    assert engine.grad_sink(y._node, 1) is None     # not the node the engine is calling
