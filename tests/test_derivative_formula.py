"""Each elementwise op's derivative is written once (``ddg/autograd/formula.py``): one
``grad(self, xp, g)`` that runs on arrays for ``backward`` and on Tensors for
``backward_graph``. Checked here: no op in ``ops/elementwise.py`` writes ``backward`` or
``backward_graph`` itself, and the two paths give the same gradients, dtypes included,
for every op of the module."""
import inspect

import numpy as np
import pytest

import ddg
from ddg.autograd import formula
from ddg.autograd.function import Function
from ddg.autograd.ops import elementwise as E
from ddg.tensor.dtypes import bfloat16


def _op_classes():
    return [c for c in vars(E).values()
            if inspect.isclass(c) and c.__module__ == E.__name__ and issubclass(c, Function)]


def _writes_its_own_backward(cls):
    return "backward" in vars(cls) or "backward_graph" in vars(cls)


def test_no_elementwise_op_writes_a_backward_beside_its_formula():
    class Twice(formula.Formula):  # the check flags a class that writes both forms
        def backward(self, g):
            return g

        def backward_graph(self, g):
            return g
    assert _writes_its_own_backward(Twice)
    classes = _op_classes()
    assert len(classes) > 40
    own = [c.__name__ for c in classes if _writes_its_own_backward(c)]
    assert not own, f"ops writing backward/backward_graph instead of one grad formula: {own}"
    no_formula = [c.__name__ for c in classes if c.differentiable and not issubclass(c, formula.Formula)]
    assert not no_formula, f"differentiable ops without a grad formula: {no_formula}"


_rng = np.random.default_rng(7)


def _f(*shape, lo=-1.0, hi=1.0):
    return (_rng.random(shape) * (hi - lo) + lo).astype(np.float32)


_COND = np.array([True, False, True])
# (op function, inputs): every differentiable op of the module, with broadcasting, ties,
# kinks, 0-d inputs and scalar operands
CASES = [
    (ddg.add, [_f(2, 3), _f(3)]), (ddg.subtract, [_f(2, 3), _f(2, 1)]),
    (ddg.multiply, [_f(2, 3), _f(3)]), (ddg.divide, [_f(2, 3), _f(1, 3, lo=0.5, hi=2)]),
    (ddg.pow, [np.array([[-1, 0, 0.5], [2, 1, 3]], np.float32), _f(3, lo=0.5, hi=2)]),
    (ddg.maximum, [np.array([1, 2, 3], np.float32), np.array([[1, 3, 2], [0, 2, 4]], np.float32)]),
    (ddg.minimum, [np.array([1, 2, 3], np.float32), np.array([[1, 3, 2], [0, 2, 4]], np.float32)]),
    (ddg.remainder, [_f(2, 3, lo=-3, hi=3), _f(3, lo=0.5, hi=2)]),
    (lambda x: x + 2.5, [_f(3)]), (lambda x: x * 2.5, [_f()]), (lambda x: 2.5 - x, [_f(3)]),
    (lambda x: x / 3.0, [_f(3)]), (lambda x: 3.0 / x, [_f(3, lo=0.5, hi=2)]),
    (lambda x: x ** 2, [_f(3)]), (lambda x: x ** 3.5, [_f(3, lo=0.5, hi=2)]),
    (lambda x: 2.0 ** x, [_f(3)]), (ddg.neg, [_f(3)]),
    (ddg.abs, [np.array([-1, 0, 2], np.float32)]),
    (lambda x: ddg.clip(x, -0.5, 0.5), [np.array([-1, -0.5, 0, 0.5, 1], np.float32)]),
    (lambda x: ddg.nn.functional.relu(x).mean(), [np.array([[-1, 0, 2], [3, -4, 5]], np.float32)]),
    (ddg.sign, [_f(3)]), (ddg.floor, [_f(3)]),
    (lambda x: x.astype("float64") * 2, [_f(3)]),
    (lambda x: x.astype("float32") * 2, [_f(3).astype(bfloat16)]),
    (lambda a, b: ddg.where(ddg.to_tensor(_COND, place=a.place), a, b), [_f(2, 3), _f(3)]),
    (ddg.square, [_f(3)]), (ddg.erf, [_f(3)]), (ddg.nn.functional.sigmoid, [_f(3)]),
    (ddg.rsqrt, [_f(3, lo=0.5, hi=2)]), (ddg.reciprocal, [_f(3, lo=0.5, hi=2)]),
    (ddg.acosh, [_f(3, lo=1.5, hi=3)]),
] + [(getattr(ddg, n), [_f(3, lo=0.5, hi=2) if n.startswith("log") or n == "sqrt" else _f(3, lo=-0.8, hi=0.8)])
     for n in "exp expm1 log log1p log2 log10 sqrt sin cos tan tanh asin acos atan sinh cosh asinh atanh".split()]


def _grads(fn, arrays, dtype, create_graph, place):
    ts = [ddg.to_tensor(a if a.dtype != np.float32 else a.astype(dtype), place=place, stop_gradient=False)
          for a in arrays]
    out = fn(*ts)
    g_out = ddg.to_tensor(np.linspace(-1.5, 2, int(np.prod(out.shape))).reshape(out.shape).astype(out._data.dtype),
                          place=place)
    nodes, todo = set(), [out._node]
    while todo:  # the op classes this case ran
        n = todo.pop()
        if n is not None and type(n) not in nodes:
            nodes.add(type(n))
            todo.extend(e[0] for e in n.edges if e is not None and e[1] is not None)
    grads = ddg.grad([out], ts, [g_out], create_graph=create_graph)
    return [(g.numpy(), g._data.dtype) for g in grads], nodes


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # (-1) ** 0.7
def test_array_and_graph_paths_of_every_formula_agree(place):
    seen = set()
    for fn, arrays in CASES:
        # halves: the graph path sums broadcast gradients with ddg's reductions, which
        # accumulate in float32, the array path with numpy's, in the half dtype
        for dtype, rtol in ((np.float32, 1e-6), (np.float16, 2e-3), (bfloat16, 1e-2)):
            plain, nodes = _grads(fn, arrays, dtype, False, place)
            graph, _ = _grads(fn, arrays, dtype, True, place)
            seen |= nodes
            for (a, da), (b, db) in zip(plain, graph):
                assert da == db, (fn, dtype, da, db)
                np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=0,
                                           err_msg=f"{fn} {np.dtype(dtype).name}")
    wanted = {c for c in _op_classes() if issubclass(c, formula.Formula) and c.__name__[0] != "_"}
    missing = sorted(c.__name__ for c in wanted - seen)
    assert not missing, f"ops without a case here: {missing}"


@pytest.mark.parametrize("src", [np.float16, bfloat16])
def test_cast_from_half_gives_its_gradient_under_create_graph(src):
    x = ddg.to_tensor(np.array([1.0, -2.0, 3.0], src), stop_gradient=False)
    (g,) = ddg.grad([(x.astype("float32") ** 2).sum()], [x], create_graph=True)
    assert g._data.dtype == src
    np.testing.assert_array_equal(g.numpy().astype(np.float64), [2.0, -4.0, 6.0])


# ops whose array backward runs a compiled kernel of their formula (``Formula.fast``)
_FAST_CASES = {
    "Sigmoid": lambda: E.Sigmoid(),
    "Relu": lambda: E.Relu(),
    "Clip": lambda: E.Clip(-0.5, 0.5),
    "Clip/strict": lambda: E.Clip(0.0, 0.5, strict=True),
    "Clip/lo": lambda: E.Clip(-0.25, None),
}


def test_every_fast_path_is_named_here():
    fast = {c.__name__ for c in _op_classes() if vars(c).get("fast") is not None}
    assert fast == {name.split("/")[0] for name in _FAST_CASES}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(_FAST_CASES))
def test_fast_path_equals_the_formula(case, dtype):
    n = E.COMPILED_MIN_SIZE   # the kernels take arrays from this size on
    x = np.concatenate([_f(n).astype(dtype), np.array([0.0, 0.5, -0.5, -0.25], dtype)])
    g = _f(x.size).astype(dtype)
    op = _FAST_CASES[case]()
    op.forward(x)
    got = op.fast(g)
    assert got is not None, "the compiled path declined a float array"
    want = op.grad(formula._NUMPY, g)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-14, atol=0)

    half = _FAST_CASES[case]()
    half.forward(x.astype(np.float16))
    assert half.fast(g.astype(np.float16)) is None   # half precision takes the formula
    small = _FAST_CASES[case]()
    small.forward(x[:64])
    assert small.fast(g[:64]) is None                # and so do small arrays
