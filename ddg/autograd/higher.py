"""Higher-order gradients: the pieces an op's ``backward_graph`` is written with.

``Function.backward`` works on raw arrays and is what every ordinary ``backward()`` runs.
Under ``create_graph=True`` the engine calls ``backward_graph(grad)`` instead: the same
gradient written with ddg ops on Tensors, so that it is itself recorded and can be
differentiated again. Inside it an op reaches its saved arrays as graph-connected Tensors
through ``live_input`` / ``live_output`` (a saved input array becomes a Tensor that sends
its gradient along the same edge the op's own input did; a saved output becomes a Tensor
produced by the op itself, so differentiating through it runs the op's backward again).
An op whose gradient is a formula in its saved arrays writes it once for both paths
(``Formula.grad`` in ``ddg/autograd/formula.py``, which uses these pieces on the graph path).

Ops that are linear in their (first) input and whose backward reads only shapes or
indices (pooling, tile, gather, cumsum, unfold...) need no formula: ``linear_backward_graph``
records their backward as one ``_Adjoint`` node, whose own backward is the op's linear map
again (``Function.apply_linear``), so every order of derivative is available.
"""
from ..tensor.tensor import Tensor
from .function import Function, _frozen


def live_input(node, i, arr):
    """Input ``i`` of ``node``, whose saved array is ``arr``, as a Tensor on the graph (a
    constant where the input needed no gradient)."""
    e = node.edges[i]
    if e is None:
        return Tensor._wrap(arr)
    p, idx = e
    if idx is None:  # a leaf: the tensor itself
        return p
    t = Tensor._wrap(arr, False)
    t._node, t._idx = p, idx
    return t


def live_output(node, arr, i=0):
    """Output ``i`` of ``node`` (its saved array ``arr``) as a Tensor on the graph."""
    t = Tensor._wrap(arr, False)
    t._node, t._idx = node, i
    return t


def const(arr):
    """An array that is a constant of the backward formula (a mask, an index)."""
    return Tensor._wrap(arr)


def sum_to_t(g, shape):
    """``sum_to`` for Tensors: ``g`` summed down to ``shape`` with recorded ops."""
    gshape = tuple(g.shape)
    shape = tuple(shape)
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = list(range(lead)) + [i + lead for i, n in enumerate(shape) if n == 1 and gshape[i + lead] != 1]
    if axes:
        g = g.sum(axis=axes, keepdim=True)
    if lead:
        g = g.reshape(list(shape))
    return g


def fit_t(g, shape, dtype):
    """Gradient Tensor ``g`` summed down to ``shape`` (undoing broadcasting) in ``dtype``."""
    g = sum_to_t(g, shape)
    return g if g._data.dtype == dtype else g.astype(dtype)


def _first(r):
    return r[0] if type(r) is tuple else r


class _Adjoint(Function):
    """The backward of a linear op ``L`` as a node: ``g -> L^T g`` (the op's own backward)."""
    save_inputs = False

    def __init__(self, op):
        self.op = op

    @property
    def name(self):
        return f"{self.op.name}_grad"

    def forward(self, g):
        return _first(self.op.backward(g))

    def backward(self, u):
        return self.op.apply_linear(u)

    def backward_graph(self, u):
        return _Apply(self.op)(u)


class _Apply(Function):
    """The linear map ``L`` of an op as a node (the backward of ``_Adjoint``)."""
    save_inputs = False

    def __init__(self, op):
        self.op = op

    @property
    def name(self):
        return f"{self.op.name}_grad_grad"

    def forward(self, u):
        return self.op.apply_linear(u)

    def backward(self, v):
        return _first(self.op.backward(v))

    def backward_graph(self, v):
        return _Adjoint(self.op)(v)


def linear_backward_graph(self, g):
    """``backward_graph`` of an op linear in input 0 (its other inputs are indices and get no
    gradient): its backward recorded as one node."""
    out = _Adjoint(_frozen(self))(g)
    n = len(self.needs)
    return out if n == 1 else (out,) + (None,) * (n - 1)
