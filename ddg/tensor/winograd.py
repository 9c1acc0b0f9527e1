"""Winograd's matrices for 3x3 convolutions and the weight transform ``U = G w G^T``, shared
by the 2-D convolution (``ddg.autograd.ops.conv``) and the 3-D and transposed ones built on
the same transforms (``ddg.tensor.conv_phase``). What the two variants cost and where they
run is described in ``conv.py``'s module docstring and docs/cpu_kernels.md.

F(2x2, 3x3): ``G`` is 4x3 (entries 1 and +-1/2); F(4x4, 3x3): interpolation points 0, +-1,
+-2 and infinity, ``B^T`` 6x6 and ``A^T`` 4x6 with small integer entries, ``G`` 6x3 with
1/4, 1/6, 1/12, 1/24.
"""
import numpy as np

from . import backend

WINO_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])

WINO4_BT = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                     [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], dtype=float)
WINO4_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                    [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])
WINO4_AT = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
                    dtype=float)

_KRON = {}


def _kron(gm):
    """``G (x) G`` for one of the two (constant) G matrices, computed once."""
    k = _KRON.get(gm.shape[0])
    if k is None:
        k = _KRON[gm.shape[0]] = np.kron(gm, gm)
    return k


def wino_weight(w, gm=WINO_G):
    """``U = G w G^T`` per (o, c): [O, C, 3, 3] -> [t*t, O, C] for the t x 3 matrix ``gm``
    (``WINO_G``, t = 4, or ``WINO4_G``, t = 6), as one product of the Kronecker matrix
    ``G (x) G`` [t*t, 9] with the weight seen as [O*C, 9] (no transposed copies)."""
    xp = backend.get_array_module(w)
    kr = xp.asarray(_kron(gm), dtype=w.dtype)
    o, c = w.shape[:2]
    return (kr @ w.reshape(o * c, 9).T).reshape(-1, o, c)


def wino_weight_adjoint(gu, o, c, gm=WINO_G):
    """The adjoint of ``wino_weight``: [t*t, O, C] -> [O, C, 3, 3]."""
    xp = backend.get_array_module(gu)
    kr = xp.asarray(_kron(gm), dtype=gu.dtype)
    return (gu.reshape(-1, o * c).T @ kr).reshape(o, c, 3, 3)
