"""The Tensor API table (``ddg/autograd/tensor_table.py``) generates every form it declares
(function, method, in-place method and function, operators, AMP entries), and nothing is
attached to ``Tensor`` outside it."""
import ast
import os
import re

import numpy as np
import pytest

import ddg
from ddg.amp import amp_lists
from ddg.autograd import autocast, tensor_table as T
from ddg.autograd.function import Function
from ddg.tensor import backend
from ddg.tensor.tensor import Tensor

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ddg")


def _class_body_names():
    with open(os.path.join(ROOT, "tensor", "tensor.py"), encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    names = set()
    for s in cls.body:
        if isinstance(s, (ast.FunctionDef, ast.ClassDef)):
            names.add(s.name)
        elif isinstance(s, ast.Assign):
            names.update(t.id for t in s.targets if isinstance(t, ast.Name))
        elif isinstance(s, ast.AnnAssign):
            names.add(s.target.id)
    return names | set(Tensor.__slots__)


def test_every_declared_form_is_generated():
    names = [r.name for r in T.ROWS]
    assert len(names) == len(set(names)), "a name has two rows"
    for row in T.ROWS:
        if row.forms & T.FN:
            assert getattr(ddg, row.name) is row.impl, row.name
        if row.forms & T.METHOD:
            want = row.method if row.method is not None else row.impl
            assert vars(Tensor)[row.name] is want, row.name
        if row.forms & T.INPLACE:
            assert vars(Tensor)[row.name + "_"] is T.INSTALLED[row.name + "_"], row.name
        else:
            assert row.name + "_" not in T.INSTALLED, row.name
        if row.forms & T.INPLACE_FN:
            assert callable(getattr(ddg, row.name + "_")), row.name
        for dunder in row.ops:
            assert vars(Tensor)[dunder] is T.INSTALLED[dunder], dunder
    # and nothing the table does not declare
    declared = {r.name for r in T.ROWS if r.forms & T.METHOD} | {r.name + "_" for r in T.ROWS if r.forms & T.INPLACE}
    declared |= {d for r in T.ROWS for d in r.ops}
    assert set(T.INSTALLED) == declared


def test_nothing_is_attached_to_tensor_outside_the_table():
    for mod in ("nn", "nn.functional", "linalg", "fft", "amp", "jit", "optimizer", "vision", "static",
                "incubate", "distributed", "profiler", "hapi", "text", "metric", "distribution", "utils"):
        __import__("ddg." + mod)
    own = _class_body_names() | {"__module__", "__doc__", "__weakref__", "__dict__", "__qualname__"}
    foreign = sorted(k for k in vars(Tensor) if k not in own and k not in T.INSTALLED)
    assert not foreign, f"attached to Tensor outside the table: {foreign}"
    replaced = sorted(k for k, v in T.INSTALLED.items() if vars(Tensor)[k] is not v)
    assert not replaced, f"table entries replaced after install: {replaced}"
    # and in the sources: no assignment to a Tensor attribute outside tensor_table.py
    pat = re.compile(r"setattr\(\s*_?Tensor\b|^\s*_?(Tensor|T)\.[A-Za-z_]\w*\s*=[^=]", re.M)
    hits = []
    for dirpath, _dirs, files in os.walk(ROOT):
        for f in files:
            path = os.path.join(dirpath, f)
            if f.endswith(".py") and not path.endswith(os.path.join("autograd", "tensor_table.py")):
                with open(path, encoding="utf-8") as fh:
                    hits += [f"{path}: {m.group(0).strip()}" for m in pat.finditer(fh.read())]
    assert not hits, hits


def test_amp_lists_and_op_classes_come_from_the_table():
    entries = T.amp_entries()
    ops = [a.op for a in entries]
    assert len(ops) == len(set(ops)), "a Paddle op name has two AMP entries"
    white16, black16 = amp_lists.white_list()["float16"]["O1"], amp_lists.black_list()["float16"]["O1"]
    white_bf, black_o2 = amp_lists.white_list()["bfloat16"]["O1"], amp_lists.black_list()["float16"]["O2"]
    for a in entries:
        assert (a.op in white16) == (a.list in (T.WHITE, T.WHITE_FP16)), a
        assert (a.op in white_bf) == (a.list == T.WHITE), a
        assert (a.op in black16) == (a.list in (T.BLACK, T.BLACK_ALWAYS)), a
        assert (a.op in black_o2) == (a.list == T.BLACK_ALWAYS), a
        if a.classes:
            assert autocast.OP_CLASSES[a.op] == tuple(a.classes.split()), a
        else:
            assert a.op not in autocast.OP_CLASSES, a
    assert white16 | black16 <= set(ops)
    # every class an entry names exists
    import ddg.nn.functional  # noqa: F401  (loads the nn Functions)
    import ddg.parallel.sync_batch_norm  # noqa: F401
    known = set()
    stack = [Function]
    while stack:
        c = stack.pop()
        known.add(c.__name__)
        stack.extend(c.__subclasses__())
    missing = sorted({c for a in entries for c in a.classes.split()} - known)
    assert not missing, f"AMP entries name classes ddg does not have: {missing}"


def test_generated_forms_behave():
    a = ddg.to_tensor([1.0, 4.0])
    b = ddg.to_tensor([2.0, 2.0])
    np.testing.assert_allclose((3.0 - a).numpy(), [2.0, -1.0])      # reversed operator
    np.testing.assert_allclose((a @ b).numpy(), 10.0)
    c = a.clone()
    view = c.reshape([2])
    c.sqrt_()                                                          # KEEP_DTYPE: written into memory
    np.testing.assert_allclose(view.numpy(), [1.0, 2.0])
    c.add_(b)                                                          # UFUNC
    np.testing.assert_allclose(view.numpy(), [3.0, 4.0])
    assert ddg.expm1_(c) is c                                          # in-place function form (ADOPT)
    np.testing.assert_allclose(view.numpy(), np.expm1([3.0, 4.0]), rtol=1e-6)
    r = ddg.ones([2, 3]).reshape_([3, 2])                              # VIEW
    assert r.shape == [3, 2]
    w = ddg.to_tensor([1.0, 2.0], stop_gradient=False)
    with pytest.raises(RuntimeError, match="leaf"):
        w.exp_()
    with ddg.no_grad():
        before = w
        w -= ddg.to_tensor([1.0, 1.0])                                 # augmented, leaf under no_grad: in place
    assert w is before and not w.stop_gradient
    np.testing.assert_allclose(w.numpy(), [0.0, 1.0])


class _Cube(Function):
    def forward(self, a):
        self.a = a
        return a * a * a

    def backward(self, g):
        return g * 3 * self.a * self.a


def cube(x, name=None):
    return _Cube()(x)


def test_a_new_op_is_its_function_plus_one_row():
    row = T.Row("cube", cube, T.FN | T.METHOD | T.INPLACE | T.INPLACE_FN, amp=(T.Amp("cube", "_Cube", T.BLACK),))
    attrs = T.tensor_attributes([row])
    fns = T.exports([row])
    assert set(attrs) == {"cube", "cube_"} and set(fns) == {"cube", "cube_"}
    x = ddg.to_tensor([1.0, 2.0])
    np.testing.assert_allclose(attrs["cube"](x).numpy(), [1.0, 8.0])
    assert attrs["cube_"](x) is x
    np.testing.assert_allclose(backend.to_host(x._data), [1.0, 8.0])
    y = ddg.to_tensor([2.0], stop_gradient=False)
    fns["cube"](y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [12.0])
