"""Neural-network primitives that are primitives for numerical stability or speed
(each says which). Everything else in ddg.nn.functional is a composite."""
import functools
import math

import numpy as np

from ...tensor import backend, gemm
from ...tensor import softmax_kernels as SK
from ...tensor.dtypes import upcast
from ..engine import IN_GRAD, grad_sink
from ..function import Function, _frozen, same_float_dtype, sum_to
from ..higher import const, linear_backward_graph, live_input, live_output


class Softmax(Function):
    """Primitive for stability: subtracts the row max before exponentiating. Over the last
    axis of a numpy float32/float64 array forward and backward are compiled row loops, over
    another axis of a numpy float32 array compiled loops along the last axis
    (``tensor/softmax_kernels.py``)."""
    save_inputs = False
    save_output = True

    def __init__(self, axis):
        self.axis = axis

    def forward(self, a):   # float16/bfloat16 computed in float32, returned in their dtype
        rows = SK.rows_of(a, self.axis)
        if rows is not None:  # numpy float32/float64 over the last axis: compiled row loops
            self.out = SK.softmax_last(rows, False).reshape(a.shape)
            return self.out
        mid = SK.mid_of(a, self.axis)
        if mid is not None:   # numpy float32 over another axis: compiled loops along the last
            self.out = SK.softmax_mid(mid, False).reshape(a.shape)
            return self.out
        xp = backend.get_array_module(a)
        a = upcast(a)
        e = xp.asarray(a - a.max(axis=self.axis, keepdims=True))  # an array also for 0-d inputs
        xp.exp(e, out=e)
        e /= e.sum(axis=self.axis, keepdims=True)
        self.out = e
        return e

    def backward(self, g):
        y = self.out
        rows = SK.rows_of(y, self.axis)
        if rows is not None:
            return SK.softmax_last_grad(rows, g, False).reshape(y.shape)
        mid = SK.mid_of(y, self.axis)
        if mid is not None:
            return SK.softmax_mid_grad(mid, g, False).reshape(y.shape)
        return y * (g - (g * y).sum(axis=self.axis, keepdims=True))

    def backward_graph(self, g):
        y = live_output(self, self.out)
        return y * (g - (g * y).sum(axis=self.axis, keepdim=True))


def _batch_rows(m, rows, batch):
    """The rows of a mask (broadcast against ``[batch, heads, Lq, Lk]`` weights) for a chunk
    ``rows`` of the batch: sliced where the mask has the batch axis, else the whole mask."""
    return m[rows] if m.ndim == 4 and m.shape[0] == batch else m


_EMPTY1, _EMPTY3, _EMPTY4 = (np.empty((0,) * n, np.float32) for n in (1, 3, 4))
_ZERO_STRIDES = np.zeros(4, np.int64)


def _matmul(xp, a, c, out=None):
    """``xp.matmul(a, c)`` (into ``out`` if given), on numpy by the compiled stacked
    kernel where ``gemm.stack_product`` takes the operands (copied into ``out``)."""
    r = gemm.stack_product(a, c) if xp is np else None
    if r is None:
        return xp.matmul(a, c) if out is None else xp.matmul(a, c, out=out)
    if out is None:
        return r
    out[...] = r
    return out


class Attention(Function):
    """Scaled dot-product attention ``softmax(q k^T * scale [+ mask]) v`` on ``[..., L, d]``
    arrays, one node (a primitive for speed: as a composite it is five nodes, a scaled copy
    of q and a separate softmax pass). Outputs the attended values and the attention
    weights. Backward:

        dv = p^T g,   ds = p * (dp - sum(dp * p)) with dp = g v^T (+ the weights' gradient),
        dq = scale * ds k,   dk = scale * ds^T q,   dmask = ds (summed to the mask's shape)

    With ``heads`` given, q, k and v are ``[batch, L, heads * d]`` (the projections as they
    come out of a Linear) and the values come back as ``[batch, Lq, heads * dv]`` (ready for
    the output projection): the split into ``[batch, heads, L, d]`` and the merge are
    strided views and one copy inside the op instead of a reshape and a transpose node
    per tensor (and their backward copies); on numpy the products write straight into the
    merged arrays' strided views, no copy. The weights are ``[batch, heads, Lq, Lk]``.
    With ``dropout`` the weights are dropped (upscale in train) by the draw ``Dropout`` makes,
    inside the op; the weights returned and multiplied with v are the dropped ones. With
    ``bshd`` the inputs and the values are ``[batch, L, heads, d]`` (``F.scaled_dot_product_attention``'s
    layout), the heads path run on their ``[batch, L, heads * d]`` reshapes.

    ``causal`` says that the mask (still an input, added to the scores as any mask) is
    the causal one and nothing else: -big where key ``j > i + Lk - Lq`` for query ``i``,
    0 elsewhere, with ``Lk >= Lq``. The weights there are then exactly 0, and on numpy
    with heads the products skip them: the queries are cut into row blocks, each
    multiplied with the keys up to its last allowed one (``_causal_blocks``), the
    skipped scores set to 0 before the mask is added. With 4 blocks the four batched
    products (forward q k^T and p v; backward g v^T, ds k, and p^T g, ds^T q per key
    block) do 5/8 of the full work.
    """
    none_grads = True

    def __init__(self, scale, heads=None, dropout=0.0, bshd=False, causal=False):
        if bshd and heads is not None:
            raise ValueError("attention: [batch, L, heads, d] inputs give the number of heads themselves")
        if not 0 <= dropout <= 1:
            raise ValueError(f"attention: dropout must lie in [0, 1], got {dropout!r}")
        self.scale = float(scale)
        self.heads = heads
        self.dropout = float(dropout)
        self.bshd = bshd
        self.causal = bool(causal)

    @staticmethod
    def _causal_blocks(lq, lk):
        """Row blocks ``(i0, i1, kend)`` of a causal attention of ``lq`` queries over ``lk >= lq``
        keys: query ``i`` sees keys ``j <= i + lk - lq``, so rows ``[i0, i1)`` need keys
        ``[0, kend)``, ``kend = i1 + lk - lq``. One block per 32 query rows, 2 to 4 blocks;
        None where fewer than 64 rows (nothing worth skipping)."""
        n = min(4, lq // 32)
        if n < 2:
            return None
        edges = [lq * b // n for b in range(n + 1)]
        return [(edges[b], edges[b + 1], edges[b + 1] + lk - lq) for b in range(n)]

    def _split(self, t, what):
        if t.ndim != 3 or t.shape[-1] % self.heads:
            raise ValueError(f"attention: with {self.heads} heads, {what} must be [batch, L, heads * d], got "
                             f"{list(t.shape)}")
        b, length, e = t.shape
        return t.reshape(b, length, self.heads, e // self.heads).transpose(0, 2, 1, 3)

    @staticmethod
    def _merge(t):
        """``[batch, heads, L, d]`` -> ``[batch, L, heads * d]`` (a copy)."""
        b, h, length, d = t.shape
        return t.transpose(0, 2, 1, 3).reshape(b, length, h * d)

    def forward(self, *args):
        if self.bshd:
            return self._bshd_forward(*args)
        (q, k, v), mask = args[:3], args[3:]
        xp = backend.get_array_module(q)
        if type(q) is np.ndarray:   # numpy has no half-precision BLAS: float32 products
            q, k, v = upcast(q), upcast(k), upcast(v)
            mask = tuple(upcast(m) for m in mask)
        self.fused = None
        if self.heads is not None:
            if q.shape[0] != k.shape[0] or k.shape[:2] != v.shape[:2]:
                raise ValueError(f"attention: q {list(q.shape)}, k {list(k.shape)} and v {list(v.shape)} do not "
                                 f"fit (need q [batch, Lq, E], k [batch, Lk, E], v [batch, Lk, Ev])")
            merged = (q, k, v)
            q, k, v = self._split(q, "q"), self._split(k, "k"), self._split(v, "v")
            if self._fuses(q, k, v, mask):
                return self._fused_forward(*merged, q, k, v, mask)
        if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
            raise ValueError(f"attention: q {list(q.shape)}, k {list(k.shape)} and v {list(v.shape)} do not fit "
                             f"(need q [..., Lq, d], k [..., Lk, d], v [..., Lk, dv])")
        self.blocks = None
        if self.causal and self.heads is not None and xp is np and mask and k.shape[-2] >= q.shape[-2]:
            self.blocks = self._causal_blocks(q.shape[-2], k.shape[-2])
        self.stacked = self.blocks is None and self.heads is not None and self._stacks(q, k)
        if self.stacked:    # the heads copied out of the projections, for the stacked kernel
            q, k, v = np.ascontiguousarray(q), np.ascontiguousarray(k), np.ascontiguousarray(v)
        self.chunk = self._chunk_rows(q, k) if self.blocks is None and self.heads is not None and xp is np else None
        self.mask_shape = mask[0].shape if mask else None
        self.keep = None
        if self.chunk is not None:
            return self._chunked_forward(q, k, v, mask)
        s = self._probs(q, k, mask, xp)
        self.q, self.k, self.v, self.p = q, k, v, s
        if self.dropout:
            self.keep = self._draw_keep(xp, s.shape, s.dtype)
            s = s * self.keep                 # the weights after dropout, which the values use
        self.pd = s
        if self.heads is None:
            return xp.matmul(s, v), s
        if xp is np:    # the product written straight into the merged layout (no copy)
            return self._merged_product(s, v), s
        return self._merge(xp.matmul(s, v)), s

    #: a numpy float32 heads attention runs the fused kernel (``tensor/attention_kernels.py``)
    #: where both lengths are at most FUSED_MAX_L and the heads at most FUSED_MAX_D wide, and
    #: the longer length at least FUSED_MIN_L or the heads at most FUSED_NARROW_D wide; heads
    #: up to FUSED_WIDE_D wide from FUSED_WIDE_MIN_L positions, unless a projection's rows are
    #: a multiple of 4 KB (the 8 rows a tile reads then share one L1 set).
    #: Forward + backward alone, batch 2-16, 1 thread, against the products by numpy: 32
    #: positions x heads of 16-64 0.70-0.93 of the time, 100-128 x 32-64 0.80-0.88, 200 x 64
    #: 0.87, 384-512 x 16-64 0.70-0.99, 10 x 16 0.80-0.84; 64-512 x 128-192 0.82-0.96 (8 heads
    #: of 128: 0.98). Stay with
    #: numpy: heads of 128-256 at 32 positions (0.99-1.08; the heads' k and v transposed,
    #: products of 32 inner values), heads of 32-64 at 10-20 positions (0.94-1.05 and 1.2-1.6:
    #: products of 10-20 inner values, each tile's setup a large share), 8 heads of 128 at 256
    #: positions (1.24: rows of 4 KB), 1024 positions (1.24: a head's weights past L2).
    #: Training steps (transformer, batch 16, against torch): d 64 at S 32 0.745 -> 0.705,
    #: d 256 0.862 -> 0.856, d 64 / 128 at S 200 0.851 / 0.831 -> 0.768 / 0.774; batch 8,
    #: d 256 at S 64 0.875 -> 0.860, d 512 at S 100 0.889 -> 0.864, d 768 at S 64 0.934 -> 0.923
    FUSED_MAX_L, FUSED_MAX_D, FUSED_MIN_L, FUSED_NARROW_D = 512, 64, 24, 16
    FUSED_WIDE_D, FUSED_WIDE_MIN_L = 192, 64
    #: Where the CPU has no AVX-512 (``gemm.ENABLED`` False, ``gemm.fused_takes`` True) the
    #: kernel's tiles run in row groups; there it takes lengths up to FUSED_AVX2_MAX_L only and
    #: no wide heads. Zen 3, forward + backward against numpy's products (interleaved, 1
    #: thread): batch 16, 4 heads, 10-64 positions x heads of 16-64 0.60-0.86 of the time,
    #: 96-128 x 64 0.88-0.99, 200 x 16-32 0.94-0.98; batch 8, 8 heads, 128-256 x 64 0.92-1.0;
    #: batch 4, 100 x 64 1.06-1.11 (the one loss kept); beyond: batch 2, 300 x 16 1.06, 512 x 64
    #: 1.03-1.08, and wide heads ~1.0 in a training step. Transformer steps (batch 16): d 64 at
    #: S 32 0.93, d 128 at S 10 0.96, d 64 / 128 at S 200 0.93-0.99 / 0.97
    FUSED_AVX2_MAX_L = 256

    def _fuses(self, q, k, v, mask):
        """Whether this heads attention (split views ``[batch, heads, L, d]``) runs the fused
        kernel: numpy float32 within the sizes above, and a mask of at most 4 axes whose
        gradient is not wanted."""
        if mask and (mask[0].ndim > 4 or (len(getattr(self, "needs", ())) == 4 and self.needs[3])):
            return False
        if not (type(q) is np.ndarray and q.dtype == k.dtype == v.dtype == np.float32
                and q.shape[-1] == k.shape[-1] and min(q.shape[2], k.shape[2], q.shape[3], v.shape[3]) > 0
                and gemm.fused_takes(q.dtype)):
            return False
        length, width = max(q.shape[2], k.shape[2]), max(q.shape[3], v.shape[3])
        if not gemm.ENABLED:    # the products on numpy's BLAS (no AVX-512): its own range
            return (length <= self.FUSED_AVX2_MAX_L and width <= self.FUSED_MAX_D
                    and (length >= self.FUSED_MIN_L or width <= self.FUSED_NARROW_D))
        wide = (length >= self.FUSED_WIDE_MIN_L and width <= self.FUSED_WIDE_D
                and q.shape[1] * q.shape[3] % 1024 and v.shape[1] * v.shape[3] % 1024)
        return (length <= self.FUSED_MAX_L and (width <= self.FUSED_MAX_D or wide)
                and (length >= self.FUSED_MIN_L or width <= self.FUSED_NARROW_D))

    def _fused_forward(self, qm, km, vm, q, k, v, mask):
        """``forward`` by ``attention_kernels.forward`` on the projections ``[batch, L, E]``
        (copied where strided or read-only: the kernels compile for writeable C-contiguous
        arrays, one signature)."""
        from ...tensor import attention_kernels as AK  # noqa: PLC0415 - imports numba
        qm, km, vm = (np.require(t, requirements=("C", "W")) for t in (qm, km, vm))
        b, h, lq, lk = q.shape[0], self.heads, q.shape[2], k.shape[2]
        p = np.empty((b, h, lq, lk), np.float32)
        if mask:    # the mask's values flat, and its strides broadcast to the weights' shape
            m = np.require(mask[0], np.float32, ("C", "W"))
            try:
                view = np.broadcast_to(m, p.shape)
            except ValueError:
                raise ValueError(f"attention: the mask {list(m.shape)} does not broadcast to the weights "
                                 f"{list(p.shape)}") from None
            flat, strides = m.reshape(-1), np.array(view.strides, np.int64) // 4
        else:
            flat, strides = _EMPTY1, _ZERO_STRIDES
        self.keep = self._draw_keep(np, p.shape, p.dtype) if self.dropout else None
        pd = p if self.keep is None else np.empty_like(p)
        out = np.empty((b, lq, vm.shape[2]), np.float32)
        # a causal mask's zero weights skipped: each query's keys up to its own (Lk - Lq ahead)
        self.causal_off = lk - lq if self.causal and mask and lk >= lq else -1
        AK.forward(qm, km, vm, h, self.scale, flat, strides, self.causal_off,
                   _EMPTY4 if self.keep is None else self.keep, p, pd, out)
        self.fused = (qm, km, vm)
        self.q, self.k, self.v, self.p, self.pd = q, k, v, p, pd
        self.mask_shape = mask[0].shape if mask else None
        self.stacked, self.chunk, self.blocks = False, None, None
        return out, pd

    def _fused_backward(self, g, gp, needs):
        from ...tensor import attention_kernels as AK  # noqa: PLC0415
        qm, km, vm = self.fused
        g = np.ascontiguousarray(g, dtype=np.float32) if g is not None else np.zeros((qm.shape[0], qm.shape[1],
                                                                                       vm.shape[2]), np.float32)
        gp = _EMPTY4 if gp is None else np.ascontiguousarray(gp, dtype=np.float32)
        dq, dk, dv = (np.empty_like(t) if need else _EMPTY3 for t, need in zip((qm, km, vm), needs))
        AK.backward(qm, km, vm, g, gp, self.heads, self.scale, self.causal_off, self.p, self.pd,
                    _EMPTY4 if self.keep is None else self.keep, dq, dk, dv, *needs[:3])
        # a mask never wants its gradient here (``_fuses``)
        return tuple(d if need else None for d, need in zip((dq, dk, dv), needs)) + (None,) * (len(needs) - 3)

    def _probs(self, q, k, mask, xp):
        """The attention weights before dropout: ``softmax(q k^T * scale [+ mask])``."""
        if self.blocks is None:
            s = _matmul(xp, q, xp.swapaxes(k, -1, -2))
        else:   # only the allowed scores; the others 0 (the mask makes them -big)
            s = np.empty(q.shape[:-1] + (k.shape[-2],), np.result_type(q, k))
            for i0, i1, kend in self.blocks:
                np.matmul(q[..., i0:i1, :], np.swapaxes(k[..., :kend, :], -1, -2), out=s[..., i0:i1, :kend])
                s[..., i0:i1, kend:] = 0
        rows = SK.rows_of(s, -1) if self.scale > 0 else None
        if rows is not None:     # numpy float32/float64: the compiled softmax rows
            if mask:
                s *= s.dtype.type(self.scale)
                s += mask[0]
            return SK.softmax_last(rows, False, 1.0 if mask else self.scale).reshape(s.shape)
        s *= s.dtype.type(self.scale)
        if mask:
            s += mask[0]
        s -= s.max(axis=-1, keepdims=True)
        xp.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        return s

    def _draw_keep(self, xp, shape, dtype):
        """Dropout's keep-and-upscale factors for the weights: the draw ``Dropout`` makes
        (same generator, shape and rule)."""
        keep = (_uniform(xp, shape) >= self.dropout).astype(dtype)
        keep *= dtype.type(0.0 if self.dropout == 1 else 1.0 / (1.0 - self.dropout))
        return keep

    #: bytes of attention weights per chunk of the batch (``_chunk_rows``)
    CHUNK_BYTES = 3 << 19

    def _chunk_rows(self, q, k):
        """Batch rows per chunk where a numpy heads attention runs chunk by chunk (each
        chunk's weights, about ``CHUNK_BYTES``, formed, normalized and multiplied with the
        values while they are in cache, and likewise in backward), or None where one chunk
        holds the whole batch. Whole-batch passes over 10 MB of weights and their gradients
        stream them from memory between one product and the next: forward + backward of
        the attention at batch 16, 4 heads, 200 positions, heads of 16 14.3 -> 10.9 ms, of
        32 22.9 -> 18.5; 128 positions 7.6 -> 7.0; batch 8, 8 heads, 256 x 64 52.6 -> 49."""
        per_row = q.shape[1] * q.shape[2] * k.shape[2] * q.dtype.itemsize
        rows = max(1, self.CHUNK_BYTES // max(per_row, 1))
        return rows if rows < q.shape[0] else None

    def _chunked_forward(self, q, k, v, mask):
        """``forward`` of a numpy heads attention chunk by chunk along the batch."""
        batch = q.shape[0]
        p = np.empty(q.shape[:-1] + (k.shape[-2],), np.result_type(q, k))
        if self.dropout:
            self.keep = self._draw_keep(np, p.shape, p.dtype)
        pd = p if self.keep is None else np.empty_like(p)
        merged, view = self._merged_target(batch, q.shape[2], q.shape[1], v.shape[-1], p.dtype)
        for b0 in range(0, batch, self.chunk):
            rows = slice(b0, b0 + self.chunk)
            p[rows] = self._probs(q[rows], k[rows], tuple(_batch_rows(m, rows, batch) for m in mask), np)
            if self.keep is not None:
                np.multiply(p[rows], self.keep[rows], out=pd[rows])
            _matmul(np, pd[rows], v[rows], out=view[rows])
        self.q, self.k, self.v, self.p, self.pd = q, k, v, p, pd
        return merged, pd

    def _bshd_forward(self, q, k, v, *mask):
        """Inputs ``[batch, L, heads, d]`` (the flash-attention layout): the heads path on
        their ``[batch, L, heads * d]`` reshapes (views where the last two axes are
        contiguous), the values back as ``[batch, Lq, heads, dv]``."""
        for t, what in ((q, "q"), (k, "k"), (v, "v")):
            if t.ndim != 4:
                raise ValueError(f"attention: {what} must be [batch, L, heads, d], got {list(t.shape)}")
        if not (q.shape[2] == k.shape[2] == v.shape[2] and q.shape[3] == k.shape[3]):
            raise ValueError(f"attention: q {list(q.shape)}, k {list(k.shape)} and v {list(v.shape)} do not fit "
                             f"(need [batch, L, heads, d] with one number of heads and q, k one d)")
        self.heads = q.shape[2]
        self.in_shapes = (q.shape, k.shape, v.shape)
        self.bshd = False
        try:
            out, w = self.forward(*(t.reshape(t.shape[0], t.shape[1], -1) for t in (q, k, v)), *mask)
        finally:
            self.bshd = True
        return out.reshape(out.shape[0], out.shape[1], self.heads, -1), w

    @staticmethod
    def _stacks(q, k):
        """Whether the products of this attention (numpy float32 heads) go to the compiled
        stacked kernel (``gemm.stack_product``), for which the heads are then copied out of
        the projections once: its rule for the smallest of them, both lengths as rows and
        the head as columns (with heads of 16, 200 positions, the stacked ``q k^T`` ran
        1.55 ms in a training step against numpy's 1.25)."""
        lengths = min(q.shape[-2], k.shape[-2])
        return (type(q) is np.ndarray and k.dtype == q.dtype
                and gemm.stack_takes(q.dtype, lengths, q.shape[-1], min(lengths, q.shape[-1])))

    @staticmethod
    def _merged_target(b, length, h, d, dtype):
        """An empty ``[batch, L, heads * d]`` array and its ``[batch, heads, L, d]`` view."""
        base = np.empty((b, length, h, d), dtype)
        return base.reshape(b, length, h * d), base.transpose(0, 2, 1, 3)

    def _merged_product(self, a, c):
        """``merge(a @ c)`` with numpy's matmul writing into the merged array's view."""
        merged, view = self._merged_target(a.shape[0], a.shape[2], a.shape[1], c.shape[-1], a.dtype)
        if self.blocks is None:
            _matmul(np, a, c, out=view)
        else:   # the weights are 0 past each block's last allowed key
            for i0, i1, kend in self.blocks:
                np.matmul(a[..., i0:i1, :kend], c[..., :kend, :], out=view[..., i0:i1, :])
        return merged

    def backward(self, grads):
        g, gp = grads
        needs = self.needs
        if self.bshd:       # the heads path's gradients, [batch, L, heads * d], reshaped
            got = self._heads_backward(None if g is None else g.reshape(g.shape[0], g.shape[1], -1), gp, needs)
            return tuple(None if d is None else d.reshape(shape)
                         for d, shape in zip(got[:3], self.in_shapes)) + tuple(got[3:])
        return self._heads_backward(g, gp, needs)

    def _heads_backward(self, g, gp, needs):
        if self.heads is None:
            return self._backward(g, gp, needs)
        if self.fused is not None:
            return self._fused_backward(g, gp, needs)
        if g is not None:
            g = self._split(g, "the values' gradient")
            if self.stacked:
                g = np.ascontiguousarray(g)
        if type(self.p) is np.ndarray:
            # numpy's matmul writes the gradients straight into [batch, L, E] arrays
            (b, h, _, _), dt = self.q.shape, self.p.dtype
            targets = [self._merged_target(b, t.shape[2], h, t.shape[3], dt) if need else (None, None)
                       for t, need in zip((self.q, self.k, self.v), needs)]
            views = [view for _, view in targets]
            if self.chunk is not None and g is not None and not (len(needs) == 4 and needs[3]):
                got = self._chunked_backward(g, gp, needs, views)
            else:
                got = self._backward(g, gp, needs, views)
            return tuple(None if d is None else merged for d, (merged, _) in zip(got[:3], targets)) + got[3:]
        got = self._backward(g, gp, needs)
        return tuple(None if d is None else self._merge(d) for d in got[:3]) + got[3:]

    def _chunked_backward(self, g, gp, needs, views):
        """``_backward`` chunk by chunk along the batch (as the forward ran), each chunk's
        weights' and scores' gradients formed and used while they are in cache. Not where
        the mask's gradient is wanted (summed over the batch: the whole-batch pass)."""
        saved = (self.q, self.k, self.v, self.p, self.pd, self.keep)
        for b0 in range(0, g.shape[0], self.chunk):
            rows = slice(b0, b0 + self.chunk)
            self._backward(g[rows], None if gp is None else gp[rows], needs,
                           [None if view is None else view[rows] for view in views],
                           tuple(None if a is None else a[rows] for a in saved))
        return (views[0] if needs[0] else None, views[1] if needs[1] else None,
                views[2] if needs[2] else None) + ((None,) if len(needs) == 4 else ())

    def _backward(self, g, gp, needs, views=(None, None, None), saved=None):
        """The gradients of q, k, v (and the mask); ``views`` (with heads, on numpy): arrays
        of q's, k's and v's shapes for numpy's matmul to write them into; ``saved``: the
        ``(q, k, v, p, pd, keep)`` to use (a chunk of the batch) instead of the op's own."""
        q, k, v, p, pd, keep = saved or (self.q, self.k, self.v, self.p, self.pd, self.keep)
        xp = backend.get_array_module(p)

        blocks = self.blocks

        def product(a, c, view, shape):
            if view is not None:
                return _matmul(xp, a, c, out=view)
            return sum_to(_matmul(xp, a, c), shape)

        def by_rows(a, c, view):
            """``a @ c`` into ``view`` for causal weights-like ``a``: per row block, the
            columns up to its last allowed key."""
            for i0, i1, kend in blocks:
                np.matmul(a[..., i0:i1, :kend], c[..., :kend, :], out=view[..., i0:i1, :])
            return view

        def by_keys(a, c, view):
            """``a^T @ c`` into ``view`` for causal weights-like ``a``: per key block, the rows
            from the first that sees it."""
            start = 0
            for i0, _, kend in blocks:
                np.matmul(np.swapaxes(a[..., i0:, start:kend], -1, -2), c[..., i0:, :], out=view[..., start:kend, :])
                start = kend
            return view
        dv = dq = dk = dm = None
        if g is not None and needs[2]:
            if blocks is None:
                dv = product(xp.swapaxes(pd, -1, -2), g, views[2], v.shape)
            else:
                dv = by_keys(pd, g, views[2])
        if not (needs[0] or needs[1] or (len(needs) == 4 and needs[3])):
            return (dq, dk, dv) + ((dm,) if len(needs) == 4 else ())
        if g is not None:
            if blocks is None:
                dp = _matmul(xp, g, xp.swapaxes(v, -1, -2))
            else:   # past each block's last allowed key the weights are 0, and so is ds there
                dp = np.empty(p.shape, np.result_type(g, v))
                for i0, i1, kend in blocks:
                    np.matmul(g[..., i0:i1, :], np.swapaxes(v[..., :kend, :], -1, -2), out=dp[..., i0:i1, :kend])
                    dp[..., i0:i1, kend:] = 0
            if gp is not None:
                dp += gp
        else:
            dp = xp.array(gp, dtype=p.dtype, copy=True)
        if keep is not None:          # through the dropout: the gradient of the softmax output
            dp *= keep
        want_dm = len(needs) == 4 and needs[3]
        rows = SK.rows_of(p, -1)
        if rows is not None and dp.dtype == p.dtype:
            # ds = p * (dp - sum(dp * p)), the scores' gradient (scaled unless the mask's
            # gradient, which is unscaled, is wanted)
            dp = SK.softmax_last_grad(rows, dp, False, 1.0 if want_dm else self.scale).reshape(p.shape)
            if want_dm:
                dm = sum_to(dp, self.mask_shape)    # may be dp itself
                dp = dp * dp.dtype.type(self.scale)
        else:
            dp -= (dp * p).sum(axis=-1, keepdims=True)
            dp *= p                                   # ds: the scores' gradient
            if want_dm:
                dm = sum_to(dp, self.mask_shape)
                dp = dp * dp.dtype.type(self.scale)
            else:
                dp *= dp.dtype.type(self.scale)
        if needs[0]:
            dq = product(dp, k, views[0], q.shape) if blocks is None else by_rows(dp, k, views[0])
        if needs[1]:
            dk = product(xp.swapaxes(dp, -1, -2), q, views[1], k.shape) if blocks is None else by_keys(dp, q, views[1])
        return (dq, dk, dv) + ((dm,) if len(needs) == 4 else ())

    def backward_graph(self, grads):
        # recomputed with ops (scores, Softmax, product) and differentiated by the engine
        from ..engine import grad as _grad
        from ..grad_mode import enable_grad
        xp = backend.get_array_module(self.p)
        arrays = (self.q, self.k, self.v)
        if self.heads is not None:
            arrays = tuple(self._merge(a) for a in arrays)
        if self.bshd:
            arrays = tuple(a.reshape(shape) for a, shape in zip(arrays, self.in_shapes))
        ins = [live_input(self, i, a) for i, a in enumerate(arrays)]
        if self.mask_shape is not None:
            # the mask's value does not enter any gradient (the scores are linear in it)
            ins.append(live_input(self, len(arrays), xp.zeros(self.mask_shape, self.p.dtype)))
        with enable_grad():
            q, k, v = ins[:3]
            if self.bshd:
                q, k, v = (t.transpose([0, 2, 1, 3]) for t in (q, k, v))
            elif self.heads is not None:
                q, k, v = (t.reshape(list(t.shape[:2]) + [self.heads, t.shape[2] // self.heads]).transpose([0, 2, 1, 3])
                           for t in (q, k, v))
            s = (q * self.scale).matmul(k, transpose_y=True)
            if self.mask_shape is not None:
                s = s + ins[-1]
            p = Softmax(-1)(s)
            if self.keep is not None:
                p = p * const(self.keep)
            out = p.matmul(v)
            if self.heads is not None:
                out = out.transpose([0, 2, 1, 3])
                if not self.bshd:
                    out = out.reshape(list(out.shape[:2]) + [out.shape[2] * out.shape[3]])
        pairs = [(o, g) for o, g in zip((out, p), grads) if g is not None]
        targets = [t for t, need in zip(ins, self.needs) if need]
        got = iter(_grad([o for o, _ in pairs], targets, [g for _, g in pairs], create_graph=True,
                         allow_unused=True))
        return tuple(next(got) if need else None for need in self.needs)


class LogSoftmax(Function):
    """Primitive for stability (log of a sum of exponentials, max subtracted). Over the last
    axis of a numpy float32/float64 array forward and backward are compiled row loops, over
    another axis of a numpy float32 array compiled loops along the last axis
    (``tensor/softmax_kernels.py``); forward keeps the probabilities it computes on the way,
    from which backward needs no ``exp``."""
    save_inputs = False
    save_output = True

    def __init__(self, axis):
        self.axis = axis

    def forward(self, a):
        self.p = None
        rows = SK.rows_of(a, self.axis)
        if rows is not None:  # numpy float32/float64 over the last axis: compiled row loops
            out, p = SK.softmax_last(rows, True)
            self.out, self.p = out.reshape(a.shape), p.reshape(a.shape)
            return self.out
        mid = SK.mid_of(a, self.axis)
        if mid is not None:   # numpy float32 over another axis: compiled loops along the last
            out, p = SK.softmax_mid(mid, True)
            self.out, self.p = out.reshape(a.shape), p.reshape(a.shape)
            return self.out
        xp = backend.get_array_module(a)
        a = upcast(a)
        out = xp.asarray(a - a.max(axis=self.axis, keepdims=True))  # an array also for 0-d inputs
        out -= xp.log(xp.exp(out).sum(axis=self.axis, keepdims=True))
        self.out = out
        return out

    def backward(self, g):
        if self.p is not None:
            rows = SK.rows_of(self.p, self.axis)
            if rows is not None:
                return SK.softmax_last_grad(rows, g, True).reshape(self.out.shape)
            return SK.softmax_mid_grad(SK.mid_of(self.p, self.axis), g, True).reshape(self.out.shape)
        xp = backend.get_array_module(g)
        return g - xp.exp(self.out) * g.sum(axis=self.axis, keepdims=True)

    def backward_graph(self, g):
        return g - live_output(self, self.out).exp() * g.sum(axis=self.axis, keepdim=True)


class SoftmaxCrossEntropy(Function):
    """Per-sample ``-w[y] * log_softmax(x)[y]`` over the last axis, for integer labels; with
    ``mean=True`` (no class weights) their mean over all samples, ignored ones included as
    zeros (Paddle's ``reduction='mean'`` for a negative ``ignore_index``), in the same node.

    Primitive for stability and speed: the gradient ``w[y] * (softmax(x) - onehot(y))``
    is exact and needs no log of a small probability. Samples whose label equals
    ``ignore_index`` get loss 0 and gradient 0."""
    save_inputs = False

    def __init__(self, ignore_index, mean=False):
        self.ignore_index, self.mean = ignore_index, mean

    def forward(self, x, label, *weight):
        xp = backend.get_array_module(x)
        n_cls = x.shape[-1]
        x = upcast(x)
        flat = x.reshape(-1, n_cls)
        lab = label.reshape(-1)
        rows = None     # the row indices, kept for backward where they were made (cupy: one launch)
        if type(flat) is np.ndarray and flat.dtype == np.float32 and flat.size:
            # one compiled pass per row: softmax, loss, the label check (ignored rows: loss 0)
            from ...tensor.loss_kernels import softmax_ce_rows  # noqa: PLC0415 - numba on first use
            flat = np.ascontiguousarray(flat)
            e, loss = np.empty_like(flat), np.empty(flat.shape[0], flat.dtype)
            safe = lab.astype(np.intp, copy=False)
            ignored = softmax_ce_rows(flat, safe, self.ignore_index, e, loss)
            if ignored < 0:
                self._bad_labels(lab, n_cls)
            valid = None if ignored == 0 else lab != self.ignore_index
            if valid is not None:
                safe = np.where(valid, safe, 0)
        else:
            valid = lab != self.ignore_index
            safe = xp.where(valid, lab, 0)
            # Range check on the host only: on a GPU it would cost a synchronizing
            # device-to-host copy per step, so out-of-range labels are not checked there
            # (as in other frameworks; cupy's fancy indexing wraps/clips instead).
            if xp is np and lab.size and (int(safe.min()) < 0 or int(safe.max()) >= n_cls):
                self._bad_labels(lab, n_cls)
            rows = xp.arange(flat.shape[0])
            shifted = flat - flat.max(axis=1, keepdims=True)
            e = xp.exp(shifted)
            s = e.sum(axis=1, keepdims=True)
            loss = xp.log(s[:, 0]) - shifted[rows, safe]
            e /= s
        # per-sample weights: None when every one is 1 (no class weights, nothing ignored)
        w = None if valid is None else valid.astype(x.dtype)
        if weight:
            cw = weight[0][safe].astype(x.dtype)
            w = cw if w is None else w * cw
        if w is not None:
            loss = loss * w
        self.p, self.safe, self.w, self.shape, self.rows = e, safe, w, x.shape, rows
        self.x = x  # for backward_graph, and to recompute p for a second backward
        if self.mean:
            return loss.mean(dtype=loss.dtype)
        return loss.reshape(label.shape)

    def _bad_labels(self, lab, n_cls):
        bad = (lab < 0) | (lab >= n_cls)
        bad &= lab != self.ignore_index
        lo, hi = int(lab[bad].min()), int(lab[bad].max())
        raise ValueError(f"labels must lie in [0, {n_cls}) (or equal ignore_index={self.ignore_index}); "
                         f"got values from {lo} to {hi}")

    def _row_scale(self, g, xp):
        """The gradient's per-row factor: ``w * g`` (g per sample, or the mean's g / N)."""
        gr = g.reshape(-1)
        if self.mean:
            gr = gr * (1.0 / max(1, self.safe.shape[0]))
        return gr if self.w is None else self.w * gr

    def backward(self, g):
        dx = self.p
        xp = backend.get_array_module(g)
        if dx is None:  # an earlier backward (retain_graph=True) consumed it
            flat = self.x.reshape(-1, self.shape[-1])
            dx = xp.exp(flat - flat.max(axis=1, keepdims=True))
            dx /= dx.sum(axis=1, keepdims=True)
        self.p = None  # written in place below
        dx[xp.arange(dx.shape[0]) if self.rows is None else self.rows, self.safe] -= 1
        scale = self._row_scale(g, xp)
        if scale.shape[0] == 1:
            dx *= scale.astype(dx.dtype, copy=False)
        else:
            dx *= scale.astype(dx.dtype, copy=False)[:, None]
        return (dx.reshape(self.shape), None) + ((None,) if len(self.needs) == 3 else ())

    def backward_graph(self, g):
        # w * (softmax(x) - onehot(label)) * g, with softmax recomputed as an op on the graph
        xp = backend.get_array_module(g._data)
        n_cls = self.shape[-1]
        x = live_input(self, 0, self.x).reshape([-1, n_cls])
        rows = x.shape[0]
        onehot = xp.zeros((rows, n_cls), dtype=self.x.dtype)
        onehot[xp.arange(rows), self.safe] = 1
        gr = g.reshape([-1])
        if self.mean:
            gr = gr * (1.0 / max(1, rows))
        if self.w is not None:
            gr = const(self.w) * gr
        dx = (Softmax(1)(x) - const(onehot)) * gr.unsqueeze(1)
        return (dx.reshape(list(self.shape)), None) + ((None,) if len(self.needs) == 3 else ())


def _column_sums(g2):
    """``g2.sum(axis=0)`` of a 2-D gradient. On numpy float32/float64 as the product
    ``ones @ g2`` (a BLAS gemv): 5-8x faster than numpy's row-by-row reduction on
    ``[512, 64-256]`` float32, and no less accurate (both accumulate in the array's dtype;
    measured 3e-7 against 8e-7 relative error in float32)."""
    if type(g2) is np.ndarray and g2.dtype in (np.float32, np.float64):
        return np.ones(g2.shape[0], g2.dtype) @ g2
    return g2.sum(axis=0)


class Linear(Function):
    """``x @ w + b``: one node instead of two (a speed primitive: the per-op cost
    dominates small models)."""

    def forward(self, x, w, *b):
        same_float_dtype("linear", x, w)
        if type(x) is np.ndarray:   # numpy has no half-precision BLAS: float32 products
            x, w, b = upcast(x), upcast(w), tuple(upcast(v) for v in b)
        self.x, self.w = x, w
        if x.ndim >= 2 and w.ndim == 2:
            # one [rows, in] x [in, out] product, not numpy's loop of one product per leading
            # index (1.2-1.7x slower for a transformer's [batch, seq, d] activations); the
            # bias starts the compiled kernel's accumulators where it runs (tensor/gemm.py)
            bias = b[0] if b and b[0].ndim == 1 else None
            out = gemm.product(x.reshape(-1, x.shape[-1]), w, bias).reshape(x.shape[:-1] + (w.shape[-1],))
            if b and bias is None:
                out += b[0]
            return out
        out = x @ w
        if b:
            out += b[0]
        return out

    def backward(self, g):
        x, w = self.x, self.w
        needs = self.needs
        gx = gw = gb = None
        g2 = g.reshape(-1, g.shape[-1]) if g.ndim != 2 else g
        if needs[0]:
            gx = gemm.product(g2, w.T).reshape(g.shape[:-1] + (w.shape[0],)) if w.ndim == 2 else g @ w.T
        with_b = len(needs) == 3 and needs[2]
        if needs[1]:
            x2 = x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x
            # by the compiled kernel: the bias gradient summed as it reads g2, the weight's
            # added straight into its .grad where the engine hands that out
            into = grad_sink(self, 1) if w.ndim == 2 else None
            both = gemm.weight_grads(x2, g2, with_b, into)
            if both is not None:
                gw, gb = both
                if gw is into:
                    gw = IN_GRAD
            else:
                gw = gemm.product(x2.T, g2)
        if with_b and gb is None:
            gb = _column_sums(g2)
        if len(needs) == 3:
            return gx, gw, gb
        return gx, gw

    def backward_graph(self, g):
        x, w = self.x, self.w
        needs = self.needs
        gx = gw = gb = None
        g2 = g.reshape([-1, g.shape[-1]]) if g.ndim != 2 else g
        if needs[0]:
            gx = g.matmul(live_input(self, 1, w), transpose_y=True)
        if needs[1]:
            xt = live_input(self, 0, x)
            gw = (xt.reshape([-1, x.shape[-1]]) if x.ndim != 2 else xt).matmul(g2, transpose_x=True)
        if len(needs) == 3:
            if needs[2]:
                gb = g2.sum(axis=0)
            return gx, gw, gb
        return gx, gw


# -- dropout: a primitive because its random draw must belong to the op -----------------
def _uniform(xp, shape):
    """Uniform [0, 1) float32 draws from ddg's global generator (``ddg.seed`` reproduces them)."""
    return backend.draw_uniform(backend.rng(xp), shape, np.float32)


def _mask_rows(x, mask_shape):
    """``(R, S)`` when a mask of ``mask_shape`` is one factor per row of ``x`` read as ``[R, S]``
    (it matches x's leading axes and is 1 along the rest, as dropout2d/3d's [N, C, 1, 1]) and
    ``x`` is a C-contiguous numpy float32/float64 array: the compiled ``scale_rows`` applies
    it; else None (numpy's broadcast multiply)."""
    if type(x) is not np.ndarray or x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous:
        return None
    k = len(mask_shape)
    while k and mask_shape[k - 1] == 1:
        k -= 1
    if k == len(mask_shape) or tuple(mask_shape[:k]) != tuple(x.shape[:k]):
        return None
    return math.prod(x.shape[:k]), math.prod(x.shape[k:])


def _scale_rows(a, mask, rows):
    out = np.empty_like(a)
    _cpu_kernels().scale_rows(a.reshape(rows), mask.reshape(-1), out.reshape(rows))
    return out


class Dropout(Function):
    """``x * mask`` with a fresh random mask drawn INSIDE forward.

    A primitive so that the draw belongs to the op: ``ddg.jit.to_static`` replays an
    op by calling its ``forward`` again, so every replayed step draws a new mask (a
    mask drawn outside ops would be frozen into the recording). The draw is the one
    eager dropout has always made (float32 uniforms of ``mask_shape`` from ddg's global
    generator, kept where ``>= p``), so results from a given seed do not change.
    ``mask_shape`` has 1s along the dims that share a mask (``axis``); ``scale`` is
    ``1 / (1 - p)`` for upscale_in_train and None for downscale_in_infer."""
    save_inputs = False

    def __init__(self, p, mask_shape, scale):
        self.p, self.mask_shape, self.scale = p, mask_shape, scale

    def forward(self, x):
        xp = backend.get_array_module(x)
        keep = _uniform(xp, self.mask_shape) >= self.p
        mask = keep.astype(x.dtype)
        if self.scale is not None:
            mask *= x.dtype.type(self.scale)   # in place: the astype above is a fresh array
        self.mask = mask
        self.rows = _mask_rows(x, self.mask_shape)
        if self.rows is not None:
            return _scale_rows(x, mask, self.rows)
        return x * mask

    def backward(self, g):
        # the mask broadcasts up to x's shape and the output has x's shape: no sum_to
        if self.rows is not None and type(g) is np.ndarray and g.dtype == self.mask.dtype and g.flags.c_contiguous \
                and g.size == self.rows[0] * self.rows[1]:
            return (_scale_rows(g, self.mask, self.rows),)
        return (g * self.mask,)

    def backward_graph(self, g):
        return (g * const(self.mask),)


class Pad(Function):
    """Padding of every axis at once: ``pairs[ax] = (before, after)`` for each axis, ``mode``
    one of ``constant`` (filled with ``value``), ``reflect`` (mirrored without repeating the
    edge), ``replicate`` (the edge repeated) or ``circular`` (wrapped around).

    A primitive for speed. On numpy float32/float64 the non-constant modes are one compiled
    gather (``cpu_nn_kernels.pad_gather``: each output element read from its source, the
    source index per axis from ``_pad_index``) and backward its adjoint, one scatter-add pass.
    Elsewhere (constant mode, cupy, other dtypes) forward is one allocation, one copy of the
    input into the middle and, per padded axis, a few slice copies that fill the borders from
    the already written part of the output; backward copies the gradient once, adds each
    border back onto the slice it was copied from (axes in reverse order) and returns the
    middle."""
    save_inputs = False

    def __init__(self, pairs, mode, value=0.0):
        self.pairs, self.mode, self.value = tuple(pairs), mode, value

    def _sel(self, shape, k, ax, region):
        """Index selecting ``region`` on axis ``ax``, the full extent of the axes padded before
        it (``k`` = its rank among the padded axes) and the middle of the axes padded after."""
        idx = []
        for d, (b, a) in enumerate(self.pairs):
            if d == ax:
                idx.append(region)
            elif d in self._order[:k] or (b == 0 and a == 0):
                idx.append(slice(None))
            else:
                idx.append(slice(b, b + shape[d]))
        return tuple(idx)

    def _regions(self, ax, n):
        """(border, source) slice pairs along ``ax``: border = source in forward (replicate:
        the source is the one edge element, broadcast)."""
        b, a = self.pairs[ax]
        out = []
        if self.mode == "reflect":
            if b:
                out.append((slice(0, b), slice(2 * b, b, -1)))
            if a:
                stop = b + n - 2 - a
                out.append((slice(b + n, b + n + a), slice(b + n - 2, stop if stop >= 0 else None, -1)))
        elif self.mode == "replicate":
            if b:
                out.append((slice(0, b), slice(b, b + 1)))
            if a:
                out.append((slice(b + n, b + n + a), slice(b + n - 1, b + n)))
        else:  # circular
            if b:
                out.append((slice(0, b), slice(n, n + b)))
            if a:
                out.append((slice(b + n, b + n + a), slice(b, b + a)))
        return out

    def _compiled(self, x):
        """The 5-D view [P, 4 trailing axes] and per-axis source indices of the compiled gather
        (numpy float32/float64, a non-constant mode, the padded axes among the last four from
        the first padded one), or None."""
        if self.mode == "constant" or type(x) is not np.ndarray or x.dtype not in (np.float32, np.float64):
            return None
        first = self._order[0] if self._order else x.ndim
        if x.ndim - first > 4:
            return None
        trail = (1,) * (4 - (x.ndim - first)) + x.shape[first:]
        pairs = ((0, 0),) * (4 - (x.ndim - first)) + self.pairs[first:]
        idx = [_pad_index(n, b, a, self.mode) for n, (b, a) in zip(trail, pairs)]
        return (math.prod(x.shape[:first]),) + trail, idx

    def forward(self, x):
        xp = backend.get_array_module(x)
        self.in_shape = x.shape
        self._order = [d for d, (b, a) in enumerate(self.pairs) if b or a]
        self.plan = self._compiled(x)
        if self.plan is not None:   # one compiled gather
            view, idx = self.plan
            self.plan_dtype = x.dtype
            out = np.empty(tuple(n + b + a for n, (b, a) in zip(x.shape, self.pairs)), x.dtype)
            _cpu_kernels().pad_gather(np.ascontiguousarray(x).reshape(view),
                                      out.reshape((view[0],) + tuple(i.size for i in idx)), *idx, False)
            return out
        shape = tuple(n + b + a for n, (b, a) in zip(x.shape, self.pairs))
        middle = tuple(slice(b, b + n) for n, (b, _) in zip(x.shape, self.pairs))
        if self.mode == "constant":
            out = xp.full(shape, self.value, dtype=x.dtype)
            out[middle] = x
            return out
        out = xp.empty(shape, dtype=x.dtype)
        out[middle] = x
        for k, ax in enumerate(self._order):
            for border, src in self._regions(ax, x.shape[ax]):
                out[self._sel(x.shape, k, ax, border)] = out[self._sel(x.shape, k, ax, src)]
        return out

    def backward(self, g):
        xp = backend.get_array_module(g)
        shape = self.in_shape
        middle = tuple(slice(b, b + n) for n, (b, _) in zip(shape, self.pairs))
        if self.mode == "constant":
            return xp.ascontiguousarray(g[middle])
        if self.plan is not None:   # the gather's adjoint, one compiled pass
            view, idx = self.plan
            gx = np.zeros(shape, self.plan_dtype)
            gg = np.ascontiguousarray(g, dtype=gx.dtype)
            _cpu_kernels().pad_gather(gx.reshape(view), gg.reshape((view[0],) + tuple(i.size for i in idx)), *idx,
                                      True)
            return gx
        g = g.copy()
        for k in reversed(range(len(self._order))):
            ax = self._order[k]
            for border, src in self._regions(ax, shape[ax]):
                part = g[self._sel(shape, k, ax, border)]
                if self.mode == "replicate":
                    part = part.sum(axis=ax, keepdims=True)
                g[self._sel(shape, k, ax, src)] += part
        return xp.ascontiguousarray(g[middle])

    backward_graph = linear_backward_graph

    def apply_linear(self, u):
        # the linear part of the map: a constant border is 0 in a derivative
        op = _frozen(self)
        op.value = 0.0
        return op.forward(u)


@functools.lru_cache(maxsize=256)
def _pad_index(n, before, after, mode):
    """For an axis of length ``n`` padded by (before, after): the source index of every output
    position (int64, read-only)."""
    k = np.arange(-before, n + after, dtype=np.int64)
    if mode == "reflect":
        k = np.abs(k)
        k = np.where(k >= n, 2 * (n - 1) - k, k)
    elif mode == "replicate":
        k = np.clip(k, 0, n - 1)
    else:   # circular
        k = k % n
    k.flags.writeable = False
    return k


def _cpu_kernels():
    from ...tensor import cpu_nn_kernels  # noqa: PLC0415 - imports numba on the first numpy call
    return cpu_nn_kernels


def pad(x, pairs, mode="constant", value=0.0):
    """``x`` padded by ``pairs[ax] = (before, after)`` on every axis (see ``Pad``)."""
    return Pad(pairs, mode, value)(x)


class SmoothL1Loss(Function):
    """Huber loss of ``x - y`` with ``reduction`` (``mean``/``sum``/``none``): per element
    ``m * (d - m / 2) * scale`` with ``d = x - y`` and ``m = clip(d, -delta, delta)``, which is
    ``d^2 / 2`` inside ``(-delta, delta)`` and ``delta * (|d| - delta / 2)`` outside.

    A primitive for speed: forward is five whole-array passes (the reduction a dot product
    of ``m`` with ``d - m / 2``) and keeps ``m``, which is the gradient; backward is one
    scaling per input. As a composite it was nine nodes, each a pass forward and backward.
    ``x`` and ``y`` have one shape and one floating dtype."""
    save_inputs = False

    def __init__(self, delta, scale, reduction):
        self.delta, self.scale, self.reduction = float(delta), float(scale), reduction

    def forward(self, x, y):
        xp = backend.get_array_module(x)
        self.x, self.y, self.dtype = x, y, x.dtype
        d = upcast(x) - upcast(y)
        m = xp.clip(d, -self.delta, self.delta)
        d -= m * 0.5
        self.m, self.n = m, m.size
        if self.reduction == "none":
            d *= m
            if self.scale != 1.0:
                d *= self.scale
            return d.astype(self.dtype, copy=False)
        total = xp.vdot(m.ravel(), d.ravel()) * self.scale
        if self.reduction == "mean":
            total = total / self.n if self.n else xp.nan
        return xp.asarray(total, dtype=self.dtype)

    def _grad_scale(self):
        return self.scale / self.n if self.reduction == "mean" and self.n else self.scale

    def backward(self, g):
        gx = self.m * (g * self._grad_scale())
        return (gx.astype(self.dtype, copy=False) if self.needs[0] else None,
                (-gx).astype(self.dtype, copy=False) if self.needs[1] else None)

    def backward_graph(self, g):
        d = live_input(self, 0, self.x) - live_input(self, 1, self.y)
        gx = d.clip(-self.delta, self.delta) * (g * self._grad_scale())
        return (gx if self.needs[0] else None, -gx if self.needs[1] else None)


def smooth_l1_loss(x, y, delta, scale, reduction):
    """See ``SmoothL1Loss``."""
    return SmoothL1Loss(delta, scale, reduction)(x, y)


class NLLLoss(Function):
    """Negative log-likelihood of ``x`` ``[M, C]`` (log-probabilities) at integer labels
    ``[M]``, with optional class weights (a constant: no gradient), ``ignore_index`` and
    ``reduction``; ``mean`` divides by the total weight of the kept samples (at least 1e-12).

    A primitive for speed: forward is a gather and a sum, backward a scatter into zeros
    (one index per row, so no collisions). As a composite it was about ten nodes, which at
    small sizes cost more than the arithmetic. Linear in ``x``: higher orders replay it."""
    save_inputs = False

    def __init__(self, ignore_index, reduction):
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, x, label, *weight):
        xp = backend.get_array_module(x)
        valid = label != self.ignore_index
        safe = xp.where(valid, label, 0)
        w = valid.astype(x.dtype)
        if weight:
            w *= weight[0][safe].astype(x.dtype)
        self.rows, self.safe, self.w, self.shape = xp.arange(label.shape[0]), safe, w, x.shape
        self.coef = w
        if self.reduction == "mean":  # on the device: no synchronizing copy of the total weight
            self.coef = w / xp.maximum(w.sum(), x.dtype.type(1e-12))
        return self.apply_linear(x)

    def apply_linear(self, u):
        xp = backend.get_array_module(u)
        per = u[self.rows, self.safe] * -self.coef
        return per if self.reduction == "none" else xp.asarray(per.sum(), dtype=u.dtype)

    def backward(self, g):
        xp = backend.get_array_module(g)
        dx = xp.zeros(self.shape, dtype=g.dtype)
        dx[self.rows, self.safe] = self.coef * -g
        return (dx,) + (None,) * (len(self.needs) - 1)

    backward_graph = linear_backward_graph


def nll_loss(x, label, weight, ignore_index, reduction):
    """See ``NLLLoss``."""
    args = (x, label) if weight is None else (x, label, weight.detach())
    return NLLLoss(ignore_index, reduction)(*args)


class MaxUnpool(Function):
    """``x`` ``[N, C, *S]`` written into zeros ``[N, C, *out]`` at the positions ``index``
    (``[N, C, *S]``, any integer dtype, each a flat index into ``out``'s plane) names: the
    inverse of a max pooling that returned its indices. A primitive for speed, one node
    with the reshapes and the index check inside: one flat scatter forward (positions
    offset per ``(n, c)`` plane), one flat gather backward. Linear in ``x``; where two values
    name one position the last written wins and the gradient goes to every one of them.
    ``op`` names the caller in the error for an index outside the plane."""
    save_inputs = False

    def __init__(self, out, op="max_unpool"):
        self.out, self.op = tuple(int(v) for v in out), op

    def forward(self, x, index):
        xp = backend.get_array_module(x)
        n, c = x.shape[:2]
        total = math.prod(self.out)
        idx = index.reshape(n, c, -1)
        if idx.size and (int(idx.max()) >= total or int(idx.min()) < 0):
            raise ValueError(f"ddg.nn.functional.{self.op}: indices out of range for an output of size "
                             f"{list(self.out)}")
        offsets = xp.arange(0, n * c * total, total, dtype=np.int64).reshape(n, c, 1)
        self.flat = xp.add(idx, offsets, dtype=np.int64).ravel()
        self.in_shape = x.shape
        return self.apply_linear(x)

    def apply_linear(self, u):
        xp = backend.get_array_module(u)
        n, c = u.shape[:2]
        out = xp.zeros(n * c * math.prod(self.out), dtype=u.dtype)
        out[self.flat] = u.ravel()
        return out.reshape((n, c) + self.out)

    def backward(self, g):
        return (g.reshape(-1)[self.flat].reshape(self.in_shape),) + (None,) * (len(self.needs) - 1)

    backward_graph = linear_backward_graph


def max_unpool(x, index, out, op="max_unpool"):
    """See ``MaxUnpool``."""
    return MaxUnpool(out, op)(x, index)


class SigmoidCrossEntropy(Function):
    """Elementwise ``softplus(x) - x * y``: the cross-entropy of ``sigmoid(x)`` against a target
    ``y`` (``-y log sigmoid(x) - (1 - y) log sigmoid(-x)``), computed as
    ``max(x, 0) - x y + log1p(exp(-|x|))`` so that no exponent overflows. ``x`` and ``y`` have
    one shape and one floating dtype; both may need a gradient (``sigmoid(x) - y`` and
    ``-x``).

    A primitive for speed: the binary cross-entropy with logits and the multi-label soft
    margin loss are this op and a reduction; as composites they were seven to ten nodes. Forward keeps
    ``exp(-|x|)``, from which backward gets ``sigmoid(x)`` in two passes."""
    save_inputs = False

    def forward(self, x, y):
        xp = backend.get_array_module(x)
        self.x, self.y = x, y
        e = xp.asarray(xp.abs(x))      # an array also for 0-d inputs (written in place below)
        xp.negative(e, out=e)
        xp.exp(e, out=e)
        self.e = e
        per = xp.log1p(e)
        per += xp.maximum(x, 0)
        per -= x * y
        return per

    def backward(self, g):
        xp = backend.get_array_module(g)
        gx = gy = None
        if self.needs[0]:
            # sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) = 1 - 1 / (1 + e) below:
            # 1/2 + copysign(1 / (1 + e) - 1/2, x), with no mask and no branch
            gx = xp.asarray(self.e + 1)
            xp.reciprocal(gx, out=gx)
            gx -= 0.5
            xp.copysign(gx, self.x, out=gx)
            gx += 0.5
            gx -= self.y
            gx *= g
        if self.needs[1]:
            gy = -self.x * g
        return gx, gy

    def backward_graph(self, g):
        x, y = live_input(self, 0, self.x), live_input(self, 1, self.y)
        return ((x.sigmoid() - y) * g if self.needs[0] else None, -x * g if self.needs[1] else None)


def sigmoid_cross_entropy(x, y):
    """See ``SigmoidCrossEntropy``."""
    return SigmoidCrossEntropy()(x, y)


class BinaryCrossEntropy(Function):
    """Elementwise ``-(y log(x) + (1 - y) log(1 - x))`` of probabilities ``x`` against targets
    ``y`` (one shape, one floating dtype), each logarithm's argument clipped below at
    ``eps`` (there the gradient through it is 0, as a clip's is). Both inputs may need a
    gradient: ``(1 - y) / (1 - x) - y / x`` and ``log(1 - x) - log(x)``.

    A primitive for speed: as a composite it was eleven nodes, which cost more than the
    arithmetic at small sizes."""
    save_inputs = False

    def __init__(self, eps):
        self.eps = eps

    def forward(self, x, y):
        xp = backend.get_array_module(x)
        self.x, self.y = x, y
        lx = xp.asarray(xp.maximum(x, self.eps))  # in place below: each fresh temporary costs a pass
        xp.log(lx, out=lx)
        l1x = xp.asarray(1 - x)         # asarray: an array also for 0-d inputs
        xp.maximum(l1x, self.eps, out=l1x)
        xp.log(l1x, out=l1x)
        lx -= l1x
        self.diff = lx                  # log(x) - log(1 - x) = -d/dy
        per = xp.asarray(lx * y)
        per += l1x
        xp.negative(per, out=per)
        return per

    def backward(self, g):
        xp = backend.get_array_module(g)
        x, y, eps = self.x, self.y, self.eps
        gx = gy = None
        if self.needs[0]:
            one = x.dtype.type(1)
            rest = 1 - x
            if xp is np and not ((x < eps).any() or (rest < eps).any()):
                # no clipped element (the usual case): in place, no masks
                gx = xp.asarray(one - y)
                gx /= rest
                rest = y / x
                gx -= rest
            else:
                gx = xp.where(rest >= eps, (one - y) / xp.maximum(rest, eps), 0)
                gx -= xp.where(x >= eps, y / xp.maximum(x, eps), 0)
            gx *= g
            gx = gx.astype(x.dtype, copy=False)
        if self.needs[1]:
            gy = -self.diff * g
        return gx, gy

    def backward_graph(self, g):
        x, y, eps = live_input(self, 0, self.x), live_input(self, 1, self.y), self.eps
        m0 = const((self.x >= eps).astype(self.x.dtype))
        m1 = const((1 - self.x >= eps).astype(self.x.dtype))
        gx = gy = None
        if self.needs[0]:
            gx = ((1 - y) / (1 - x).clip(eps) * m1 - y / x.clip(eps) * m0) * g
        if self.needs[1]:
            gy = ((1 - x).clip(eps).log() - x.clip(eps).log()) * g
        return gx, gy


def binary_cross_entropy(x, y, eps):
    """See ``BinaryCrossEntropy``."""
    return BinaryCrossEntropy(eps)(x, y)


class SoftMarginLoss(Function):
    """Per-element ``log(1 + exp(-y * x))`` (labels ``y`` in {1, -1}, cast to ``x``'s dtype)
    in one pass; the gradient is ``-y * sigmoid(-y * x)`` for ``x`` (``-x * sigmoid(-y * x)``
    for a floating ``y``)."""

    def forward(self, x, y):
        if x.shape != y.shape:
            raise ValueError(f"soft_margin_loss: input {tuple(x.shape)} and label {tuple(y.shape)} differ in shape")
        xp = backend.get_array_module(x)
        self.x, self.y = x, y.astype(x.dtype, copy=False)
        z = -self.y * x
        per = xp.maximum(z, 0) + xp.log1p(xp.exp(-xp.abs(z)))
        self.s = xp.exp(z - per)   # sigmoid(z): the exponent is <= 0, no overflow
        return per

    def backward(self, g):
        gs = self.s * g
        gx = -self.y * gs if self.needs[0] else None
        gy = (-self.x * gs).astype(self.x.dtype, copy=False) if self.needs[1] else None
        return gx, gy

    def backward_graph(self, g):
        x, y = live_input(self, 0, self.x), live_input(self, 1, self.y)
        gs = (-y * x).sigmoid() * g
        return (-y * gs if self.needs[0] else None), (-x * gs if self.needs[1] else None)


class PairwiseDistance(Function):
    """The Euclidean norm of ``x - y + eps`` over the last axis (``x`` and ``y`` of one shape,
    one floating dtype): ``pairwise_distance`` with p = 2, as the triplet losses use it.

    A primitive for speed: forward is the difference (one pass) and its row dot product
    (``einsum``, no temporary); backward scales the kept difference by ``g / dist`` per row
    (one pass) and negates it for ``y``. A composite takes six nodes (subtract, add, abs,
    square, sum, sqrt), each a whole-array pass forward and backward. 2-byte floats compute
    in float32. A zero distance gives a NaN gradient, as the composite's ``sqrt`` did.
    Second order through ``backward_graph``."""
    save_inputs = False

    def __init__(self, eps):
        self.eps = float(eps)

    def forward(self, x, y):
        xp = backend.get_array_module(x)
        self.dtype, self.x, self.y = x.dtype, x, y
        d = upcast(x) - upcast(y)
        d += d.dtype.type(self.eps)
        self.d = d
        self.dist = xp.sqrt(xp.einsum("...i,...i->...", d, d))
        return self.dist.astype(self.dtype, copy=False)

    def backward(self, g):
        gx = self.d * (g / self.dist)[..., None]
        return (gx.astype(self.dtype, copy=False) if self.needs[0] else None,
                (-gx).astype(self.dtype, copy=False) if self.needs[1] else None)

    def backward_graph(self, g):
        x, y = live_input(self, 0, self.x), live_input(self, 1, self.y)
        d = (x.astype(self.d.dtype) - y.astype(self.d.dtype)) + self.eps
        gx = d * (g.astype(self.d.dtype) / (d * d).sum(axis=-1, keepdim=True).sqrt().squeeze(-1)).unsqueeze(-1)
        return ((gx.astype(self.dtype) if self.needs[0] else None),
                ((-gx).astype(self.dtype) if self.needs[1] else None))


class CosineEmbeddingLoss(Function):
    """Paddle's cosine embedding loss of ``x1``, ``x2`` [N, M] (or [M]) with labels [N] (or
    [1]): per sample ``1 - cos`` where the label is 1, ``max(0, cos - margin)`` where it is
    -1, 0 for any other label; ``cos = <x1, x2> / sqrt((|x1|^2 + 1e-11) (|x2|^2 + 1e-11))``
    along the last axis; then ``reduction``.

    A primitive for speed: forward is three row dot products (``einsum``, no temporaries) and
    a few [N]-sized steps; the gradient of ``cos`` is ``x2 / (n1 n2) - cos x1 / n1^2`` (and
    symmetrically), so backward is two whole-array passes per input, each scaled per row by
    the incoming gradient times the label's sign (0 where the hinge is flat). A
    composite takes about fifteen nodes, whose fixed costs dominate at small sizes.
    2-byte floats compute in float32. Second order through ``backward_graph``."""
    save_inputs = False
    EPS = 1e-11

    def __init__(self, margin, reduction):
        self.margin, self.reduction = float(margin), reduction

    def forward(self, x1, x2, label):
        xp = backend.get_array_module(x1)
        self.dtype, self._shape_in = x1.dtype, x1.shape
        a, b = upcast(x1), upcast(x2)
        if a.ndim == 1:
            a, b = a[None], b[None]
        dot = xp.einsum("ij,ij->i", a, b)
        s1 = xp.einsum("ij,ij->i", a, a) + self.EPS
        s2 = xp.einsum("ij,ij->i", b, b) + self.EPS
        inv = 1.0 / xp.sqrt(s1 * s2)
        cos = dot * inv
        pos, neg = label == 1, label == -1
        hinge = cos - self.margin
        per = xp.where(pos, 1.0 - cos, xp.where(neg, xp.maximum(hinge, 0.0), 0.0)).astype(self.dtype, copy=False)
        # d per / d cos: -1 on positive labels, 1 on negative ones past the margin, else 0
        self.sign = xp.where(pos, -1.0, xp.where(neg & (hinge > 0), 1.0, 0.0)).astype(a.dtype, copy=False)
        self.a, self.b, self.inv, self.cos, self.s1, self.s2 = a, b, inv, cos, s1, s2
        self.n = per.size
        if self.reduction == "mean":
            return per.mean() if per.size else xp.asarray(np.nan, self.dtype)
        if self.reduction == "sum":
            return per.sum()
        return per

    def _row_weights(self, g):
        """The incoming gradient times the label's sign, one value per row of ``a``."""
        if self.reduction == "mean":
            g = g / self.n
        w = g * self.sign
        if w.size != self.a.shape[0]:      # [M] inputs under a label of several entries
            w = w.sum().reshape(1)
        return w.reshape(-1).astype(self.a.dtype, copy=False)

    def backward(self, g):
        w = self._row_weights(g)
        k = (w * self.inv)[:, None]
        wc = w * self.cos
        grads = []
        for i, (u, v, s) in enumerate(((self.a, self.b, self.s1), (self.b, self.a, self.s2))):
            if not self.needs[i]:
                grads.append(None)
                continue
            gx = v * k
            gx -= u * (wc / s)[:, None]
            grads.append(gx.reshape(self._shape_in).astype(self.dtype, copy=False))
        return grads[0], grads[1], None

    def backward_graph(self, g):
        a = live_input(self, 0, self.a.reshape(self._shape_in)).astype(self.a.dtype)
        b = live_input(self, 1, self.b.reshape(self._shape_in)).astype(self.a.dtype)
        if len(self._shape_in) == 1:
            a, b = a.reshape([1, -1]), b.reshape([1, -1])
        s1 = (a * a).sum(axis=-1, keepdim=True) + self.EPS
        s2 = (b * b).sum(axis=-1, keepdim=True) + self.EPS
        inv = (s1 * s2).rsqrt()
        cos = (a * b).sum(axis=-1, keepdim=True) * inv
        if self.reduction == "mean":
            g = g / self.n
        w = g * const(self.sign)
        if w.size != self.a.shape[0]:
            w = w.sum()
        w = w.reshape([-1, 1])
        grads = []
        for i, (u, v, s) in enumerate(((a, b, s1), (b, a, s2))):
            grads.append((w * (v * inv - u * (cos / s))).reshape(self._shape_in).astype(self.dtype)
                         if self.needs[i] else None)
        return grads[0], grads[1], None


class MultiMarginLoss(Function):
    """Multi-class margin loss of ``x`` [N, C] with integer labels ``lab`` [N] and optional class
    weights ``w`` [C]: per sample ``w[y] * sum_{j != y} max(0, margin - x[y] + x[j])^p / C``
    (p = 1 or 2), then ``reduction`` (``mean``/``sum``/``none``), in one node.

    On numpy float32/float64 one compiled pass (``cpu_nn_kernels.multi_margin``) gives each
    sample's unweighted loss and the derivative by its row (kept: backward is one product
    with the incoming gradient); elsewhere the same from a few whole-array passes. The
    weights' gradient is each sample's unweighted loss summed per label. Second order through
    ``backward_graph`` (written on the live inputs)."""

    def __init__(self, p, margin, reduction):
        self.p, self.margin, self.reduction = p, float(margin), reduction

    def forward(self, x, lab, *weight):
        if x.ndim != 2 or lab.ndim != 1 or lab.shape[0] != x.shape[0]:
            raise ValueError(f"multi_margin_loss: needs input [N, C] and label [N], got {list(x.shape)} and "
                             f"{list(lab.shape)}")
        if x.dtype.kind not in "fV":
            raise TypeError(f"multi_margin_loss: input must be floating point, got {x.dtype}")
        xp = backend.get_array_module(x)
        n, c = x.shape
        x = upcast(x)
        lab = lab.astype(np.int64, copy=False)
        w = weight[0].astype(x.dtype, copy=False) if weight else None
        if w is not None and w.shape != (c,):
            raise ValueError(f"multi_margin_loss: weight must have shape [{c}], got {list(w.shape)}")
        if type(x) is np.ndarray and x.dtype in (np.float32, np.float64):
            x = np.ascontiguousarray(x)
            wv = np.ascontiguousarray(w) if w is not None else np.ones(c, x.dtype)
            raw, coef = np.empty(n, np.float64), np.empty_like(x)
            bad = _cpu_kernels().multi_margin(x, np.ascontiguousarray(lab), wv, x.dtype.type(self.margin),
                                              self.p == 2, raw, coef)
            if bad >= 0:
                raise IndexError(f"multi_margin_loss: label {int(lab[bad])} of sample {bad} is outside [0, {c})")
            per = (raw * wv[lab]).astype(x.dtype)
        else:
            if n and (int(lab.min()) < 0 or int(lab.max()) >= c):
                raise IndexError(f"multi_margin_loss: labels must lie in [0, {c})")
            rows = xp.arange(n)
            h = self.margin - x[rows, lab][:, None] + x
            xp.maximum(h, 0, out=h)
            h[rows, lab] = 0
            wy = (w[lab] if w is not None else xp.ones(n, x.dtype)) / x.dtype.type(c)
            raw = ((h * h) if self.p == 2 else h).sum(axis=1) / c
            coef = (h * 2 if self.p == 2 else (h > 0).astype(x.dtype)) * wy[:, None]
            coef[rows, lab] = -coef.sum(axis=1)
            per = (raw * wy * c).astype(x.dtype, copy=False)
        self.x, self.lab, self.w, self.raw, self.coef = x, lab, w, raw, coef
        if self.reduction == "mean":
            return per.mean()
        if self.reduction == "sum":
            return per.sum()
        return per

    def _scale(self, g):
        """The incoming gradient as a per-sample column (or a scalar)."""
        if self.reduction == "none":
            return g.reshape(-1, 1)
        return g / self.x.shape[0] if self.reduction == "mean" else g

    def backward(self, g):
        s = self._scale(g)
        gx = (self.coef * s).astype(self.x.dtype, copy=False) if self.needs[0] else None
        if len(self.needs) < 3:
            return gx, None
        gw = None
        if self.needs[2]:
            xp = backend.get_array_module(self.coef)
            per = self.raw * xp.broadcast_to(xp.asarray(s, dtype=np.float64).reshape(-1), self.raw.shape)
            c = self.x.shape[1]
            if xp is np:
                gw = np.bincount(self.lab, weights=per, minlength=c)
            else:   # a product with the labels' one-hot rows
                gw = per @ (self.lab[:, None] == xp.arange(c)).astype(per.dtype)
            gw = gw.astype(self.w.dtype)
        return gx, None, gw

    def backward_graph(self, g):
        xp = backend.get_array_module(self.coef)
        n, c = self.x.shape
        onehot = xp.zeros((n, c), self.x.dtype)
        onehot[xp.arange(n), self.lab] = 1
        x = live_input(self, 0, self.x)
        hot, cold = const(onehot), const(1 - onehot)
        h = (self.margin - (x * hot).sum(axis=1, keepdim=True) + x).relu() * cold
        s = g.reshape([n, 1]) if self.reduction == "none" else (g / n if self.reduction == "mean" else g)
        if self.w is not None:
            w = live_input(self, 2, self.w)
            wy = (hot * w.reshape([1, c])).sum(axis=1, keepdim=True)
        else:
            wy = 1.0
        dh = h * 2 if self.p == 2 else const((h._data > 0).astype(self.x.dtype))
        coef = dh * (wy / c)
        coef = coef - hot * coef.sum(axis=1, keepdim=True)
        gx = coef * s if self.needs[0] else None
        if len(self.needs) < 3:
            return gx, None
        gw = None
        if self.needs[2]:
            raw = ((h * h) if self.p == 2 else h).sum(axis=1, keepdim=True) / c
            gw = (hot * (raw * s)).sum(axis=0)
        return gx, None, gw
