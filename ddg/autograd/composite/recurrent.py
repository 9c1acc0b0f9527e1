"""Recurrent layers written with ordinary ops (``rnn_sequence``): what the fused
sequence op of ``ops/rnn.py`` differentiates for higher-order gradients, and the
reference for its kernels."""
from ...tensor import backend
from ...tensor.tensor import Tensor
from ..ops import elementwise as E
from ..ops import linalg as L
from ..ops import movement as M


def rnn_sequence(op, x, *rest):
    """What ``ops.rnn.RNNSequence`` ``op`` computes, written with ordinary ops (one graph node
    per operation): what its ``backward_graph`` differentiates, and a reference for its
    fused kernels."""
    lstm = op.mode == "LSTM"
    n_state = 2 if lstm else 1
    states, (w_ih, w_hh, b_ih, b_hh) = list(rest[:n_state]), rest[n_state:n_state + 4]
    w_ho = rest[n_state + 4] if getattr(op, "proj", False) else None   # LSTM projection [H, P]
    xt = M.transpose(x, [1, 0, 2]) if op.batch_major else x
    T, B = xt.shape[0], xt.shape[1]
    H = w_hh.shape[1]
    xg = L.matmul(xt, w_ih, transpose_y=True) + (b_ih if op.mode == "GRU" else b_ih + b_hh)
    keep = op._masks(backend.get_array_module(x._data), T, B, x._data.dtype)
    ys = [None] * T
    h = states[0]
    c = states[1] if lstm else None
    for t in (range(T - 1, -1, -1) if op.reverse else range(T)):
        hh = L.matmul(h, w_hh, transpose_y=True)
        if op.mode == "LSTM":
            i, f, g, o = M.split(xg[t] + hh, 4, axis=-1)
            cn = E.sigmoid(f) * c + E.sigmoid(i) * E.tanh(g)
            hn = E.sigmoid(o) * E.tanh(cn)
            if w_ho is not None:
                hn = L.matmul(hn, w_ho)
        elif op.mode == "GRU":
            hh = hh + b_hh
            x_rz, x_c = M.split(xg[t], [2 * H, H], axis=-1)
            h_rz, h_c = M.split(hh, [2 * H, H], axis=-1)
            r, z = M.split(E.sigmoid(x_rz + h_rz), 2, axis=-1)
            cand = E.tanh(x_c + r * h_c)
            hn = (h - cand) * z + cand
        else:
            pre = xg[t] + hh
            hn = E.relu(pre) if op.mode == "RNN_RELU" else E.tanh(pre)
        m = keep[t]
        if m is None:
            ys[t] = hn
        else:
            mt, nm = Tensor._wrap(m), Tensor._wrap(1 - m)
            ys[t] = hn * mt
            hn = hn * mt + h * nm
            if lstm:
                cn = cn * mt + c * nm
        h = hn
        if lstm:
            c = cn
    y = M.stack(ys, axis=0)
    if op.batch_major:
        y = M.transpose(y, [1, 0, 2])
    return (y, h, c) if lstm else (y, h)
