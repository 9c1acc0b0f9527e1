"""Embedding lookup as one op: rows of a weight matrix picked by integer ids, the rows of
``padding_idx`` read as zeros and given no gradient.

Forward is ``take`` along the rows (and zeroing the padding lookups). Backward adds each
lookup's gradient row into its id's row of a zeroed ``[V, D]`` gradient: on numpy one
compiled pass (``cpu_nn_kernels.embedding_backward``; numpy's ``add.at`` runs an
unbuffered loop per element, several times slower), on cupy ``cupyx.scatter_add``.
The op is linear in the weight, so higher orders use its own backward and forward
(``linear_backward_graph``).
"""
import numpy as np

from ...tensor import backend
from ..function import Function
from ..higher import linear_backward_graph


class Embedding(Function):
    """``out[..., :] = w[ids[...], :]``, and 0 where ``ids == pad`` (``pad`` -1: none)."""
    save_inputs = False

    def __init__(self, pad=-1):
        self.pad = int(pad)

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
        gw = xp.zeros(self.wshape, g.dtype)
        if xp is np and g.dtype in (np.float32, np.float64):
            from ...tensor import cpu_nn_kernels  # noqa: PLC0415 - imports numba on the first call
            cpu_nn_kernels.embedding_backward(ids.astype(np.int64, copy=False), np.ascontiguousarray(g2), gw,
                                              self.pad)
        else:
            if self.pad >= 0:
                g2 = g2 * (ids != self.pad)[:, None].astype(g.dtype)
            if xp is np:
                np.add.at(gw, ids, g2)
            else:  # pragma: no cover - GPU (simcupy simulates it)
                backend.cupyx_module().scatter_add(gw, ids, g2)
        return gw.astype(self.wdtype, copy=False), None

    backward_graph = linear_backward_graph
