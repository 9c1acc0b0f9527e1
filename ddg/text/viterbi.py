"""``viterbi_decode`` and ``ViterbiDecoder``: the highest-scoring tag sequence of a linear-chain
CRF, as Paddle's ``paddle.text`` computes it (no gradient).

``potentials[b, t, j]`` scores tag ``j`` at step ``t``, ``transition_params[i, j]`` the move
from tag ``i`` to tag ``j``. With ``include_bos_eos_tag`` the last tag is the start tag and
the second to last the stop tag: a path also scores ``transition_params[-1, first]`` and
``transition_params[-2, last]``. Paths are ``[batch, max(lengths)]`` int64, 0 past each
sequence's length.
"""
import numpy as np

from ..nn.layer.layers import Layer
from ..tensor import backend
from ..tensor.tensor import Tensor


def _array(t, what, kinds):
    if not isinstance(t, Tensor):
        raise TypeError(f"ddg.text.viterbi_decode: {what} must be a Tensor, got {type(t).__name__}")
    if t._data.dtype.kind not in kinds:
        raise TypeError(f"ddg.text.viterbi_decode: {what} has dtype {t.dtype}, expected "
                        + ("float32 or float64" if kinds == "f" else "int64"))
    return t._data


def viterbi_decode(potentials, transition_params, lengths, include_bos_eos_tag=True, name=None):
    """Returns ``(scores, paths)``: each sequence's best score (potentials' dtype) and its tags."""
    pot = _array(potentials, "potentials", "f")
    tr = _array(transition_params, "transition_params", "f")
    lens = _array(lengths, "lengths", "iu")
    xp = backend.get_array_module(pot)
    if pot.ndim != 3:
        raise ValueError(f"ddg.text.viterbi_decode: potentials must be [batch_size, sequence_length, num_tags], "
                         f"got shape {list(pot.shape)}")
    b, t_max, n = pot.shape
    if tuple(tr.shape) != (n, n):
        raise ValueError(f"ddg.text.viterbi_decode: transition_params must be [{n}, {n}] for {n} tags, got shape "
                         f"{list(tr.shape)}")
    if tuple(lens.shape) != (b,):
        raise ValueError(f"ddg.text.viterbi_decode: lengths must be [{b}], got shape {list(lens.shape)}")
    if include_bos_eos_tag and n < 2:
        raise ValueError("ddg.text.viterbi_decode: include_bos_eos_tag needs at least 2 tags (start and stop)")
    lens_h = backend.to_host(lens).astype(np.int64)
    if b and (lens_h.min() < 0 or lens_h.max() > t_max):
        raise ValueError(f"ddg.text.viterbi_decode: lengths must be in [0, {t_max}], got {lens_h.tolist()}")
    steps = int(lens_h.max()) if b else 0
    lens_d = xp.asarray(lens_h)
    tr = tr.astype(pot.dtype, copy=False)
    alpha = pot[:, 0, :].copy() if steps else xp.zeros((b, n), pot.dtype)
    if include_bos_eos_tag:
        alpha = alpha + tr[-1][None, :]
    back = []
    ident = xp.broadcast_to(xp.arange(n), (b, n))
    for t in range(1, steps):
        cand = alpha[:, :, None] + tr[None, :, :]          # [b, from, to]
        best = cand.argmax(axis=1)
        new = xp.take_along_axis(cand, best[:, None, :], axis=1)[:, 0, :] + pot[:, t, :]
        live = (t < lens_d)[:, None]
        alpha = xp.where(live, new, alpha)
        back.append(xp.where(live, best, ident))
    if include_bos_eos_tag:
        alpha = alpha + tr[-2][None, :]
    last = alpha.argmax(axis=1)
    scores = xp.take_along_axis(alpha, last[:, None], axis=1)[:, 0]
    path = xp.zeros((b, steps), dtype=np.int64)
    if steps:
        tag = last
        for t in range(steps - 1, 0, -1):
            path[:, t] = tag
            tag = xp.take_along_axis(back[t - 1], tag[:, None], axis=1)[:, 0]
        path[:, 0] = tag
        # a sequence of length L ends at L-1: its tags were carried unchanged past it
        path = xp.where(xp.arange(steps)[None, :] < lens_d[:, None], path, 0)
    if b:
        scores = xp.where(lens_d > 0, scores, xp.zeros_like(scores))
    return Tensor._wrap(scores.astype(pot.dtype, copy=False)), Tensor._wrap(path.astype(np.int64))


class ViterbiDecoder(Layer):
    """``ViterbiDecoder(transitions, include_bos_eos_tag=True)``; call it on
    ``(potentials, lengths)`` to get ``(scores, paths)``."""

    def __init__(self, transitions, include_bos_eos_tag=True, name=None):
        super().__init__()
        if not isinstance(transitions, Tensor):
            raise TypeError(f"ddg.text.ViterbiDecoder: transitions must be a Tensor, got {type(transitions).__name__}")
        self.transitions = transitions
        self.include_bos_eos_tag = include_bos_eos_tag

    def forward(self, potentials, lengths):
        return viterbi_decode(potentials, self.transitions, lengths, self.include_bos_eos_tag)
