"""Embedding lookup as one op: rows of a weight matrix picked by integer ids, the rows of
``padding_idx`` read as zeros and given no gradient.

Forward is ``take`` along the rows (and zeroing the padding lookups). Backward adds each
lookup's gradient row into its id's row of a zeroed ``[V, D]`` gradient: on numpy one
compiled pass (``cpu_nn_kernels.embedding_backward``, float16/bfloat16 summed in float32;
numpy's ``add.at`` runs an unbuffered loop per element, several times slower), on cupy
``cupyx.scatter_add``.
The op is linear in the weight, so higher orders use its own backward and forward
(``linear_backward_graph``).

``sparse=True`` (Paddle's ``Embedding(sparse=True)``): the gradient stays a dense ``[V, D]``
array (ddg has no SelectedRows type; every row not looked up is zero), and the backward also
records the looked-up rows on the weight when it is a parameter (a leaf with attributes),
merged over the backward passes until its gradient is cleared: ``sparse_rows(weight)``. An
optimizer with ``lazy_mode`` (Adam, AdamW) then updates only those rows, as Paddle's lazy
mode does with sparse gradients; the others update every row, which for them gives Paddle's
sparse result (see ``ddg/optimizer/adam.py``). Under ``DataParallel`` the reducer replaces each
rank's record by the union over ranks after the all-reduce, as Paddle gathers sparse
gradients' rows, so every rank updates the same rows.
"""
import weakref

import numpy as np

from ...tensor import backend
from ...tensor.dtypes import upcast
from ..function import Function
from ..higher import linear_backward_graph


class Embedding(Function):
    """``out[..., :] = w[ids[...], :]``, and 0 where ``ids == pad`` (``pad`` -1: none)."""
    save_inputs = False

    def __init__(self, pad=-1, sparse=False):
        self.pad, self.sparse = int(pad), bool(sparse)

    def forward(self, w, ids):
        self.ids, self.wshape, self.wdtype = ids, w.shape, w.dtype
        return self.apply_linear(w)

    def apply_linear(self, u):
        xp = backend.get_array_module(u)
        ids = self.ids
        out = xp.take(u, ids.reshape(-1), axis=0)
        if self.pad >= 0:
            out[ids.reshape(-1) == self.pad] = 0
        return out.reshape(tuple(ids.shape) + (u.shape[1],))

    def backward(self, g):
        xp = backend.get_array_module(g)
        ids = self.ids.reshape(-1)
        d = self.wshape[1]
        g2 = g.reshape(-1, d)
        if xp is np and g.dtype.kind in "fV":   # 2-byte floats summed in float32
            from ...tensor import cpu_nn_kernels  # noqa: PLC0415 - imports numba on the first call
            g2 = upcast(g2)
            gw = np.zeros(self.wshape, g2.dtype)
            cpu_nn_kernels.embedding_backward(ids.astype(np.int64, copy=False), np.ascontiguousarray(g2), gw,
                                              self.pad)
        else:
            gw = xp.zeros(self.wshape, g.dtype)
            if self.pad >= 0:
                g2 = g2 * (ids != self.pad)[:, None].astype(g.dtype)
            if xp is np:
                np.add.at(gw, ids, g2)
            else:  # pragma: no cover - GPU (simcupy simulates it)
                backend.cupyx_module().scatter_add(gw, ids, g2)
        if self.sparse:
            _note_rows(self.edges[0], ids, self.pad)
        return gw.astype(self.wdtype, copy=False), None

    backward_graph = linear_backward_graph


def _note_rows(edge, ids, pad):
    """Adds the looked-up rows (sorted, unique, not ``pad``) to the weight's record when the
    weight is a leaf that takes attributes (a Parameter)."""
    if edge is None or edge[1] is not None:
        return
    d = getattr(edge[0], "__dict__", None)
    if d is None:
        return
    xp = backend.get_array_module(ids)
    rows = ids.astype(np.int64, copy=False)
    if pad >= 0:
        rows = rows[rows != pad]
    old = d.get("_sparse_rows")
    d["_sparse_rows"] = xp.unique(rows if old is None else xp.concatenate([old, rows]))
    _MARKED[id(edge[0])] = edge[0]   # lasting mark: the data-parallel reducer unites the records


#: the parameters sparse lookups have recorded rows on (by id; a Tensor's ``==`` is
#: elementwise, so not a set of Tensors). Empty in a job without sparse embeddings, which
#: lets the per-step hooks below return at once.
_MARKED = weakref.WeakValueDictionary()


def unite_sparse_rows(params, comm):
    """Replaces the row record of every parameter of ``params`` that sparse lookups have
    marked by the union of all ranks' records (one ``allgather_object`` when any is marked).
    Every rank must call it with the same parameters at the same point: the mark is set by
    the same backward on every rank (a rank without lookups this step contributes none)."""
    if not _MARKED:
        return
    marked = [p for p in params if id(p) in _MARKED]
    if not marked:
        return
    mine = [None if sparse_rows(p) is None else backend.to_host(sparse_rows(p)) for p in marked]
    gathered = comm.allgather_object(mine)
    for i, p in enumerate(marked):
        parts = [r[i] for r in gathered if r[i] is not None]
        if parts:
            xp = backend.get_array_module(p._data)
            p.__dict__["_sparse_rows"] = xp.asarray(np.unique(np.concatenate(parts)))


def sparse_rows(param):
    """The rows of ``param`` that sparse embedding lookups gave a gradient since its gradient
    was last cleared (sorted int64 array), or None."""
    d = getattr(param, "__dict__", None)
    return None if d is None else d.get("_sparse_rows")


def forget_sparse_rows(params):
    """Drops the row records of ``params`` (an optimizer's ``clear_grad``); nothing to do, and
    no loop over the parameters, in a job without sparse lookups."""
    if not _MARKED:
        return
    for p in params:
        if id(p) in _MARKED:
            p.__dict__.pop("_sparse_rows", None)
