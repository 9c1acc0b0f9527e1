"""Matrix products: matmul (vectors, matrices, broadcast batches), mm, bmm, einsum;
the inverse, determinants (det, slogdet), solve, cholesky and eigvalsh. Composites of
them (dot, outer, kron, norms, matrix_power...) are in ``ddg.autograd.composite.products``."""
import math
import string

import numpy as np

from ...tensor import backend, gemm
from ...tensor.dtypes import upcast
from ...tensor.tensor import Tensor
from ..function import Function, same_float_dtype, sum_to
from ..higher import live_input, live_output, sum_to_t


def _swap(a):
    return a.swapaxes(-1, -2) if a.ndim >= 2 else a


def _rows(a):
    """``a`` as a ``[rows, last]`` matrix (its leading axes folded; empty axes allowed)."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def _swap_t(t):
    """``_swap`` for Tensors (a recorded transpose of the last two axes)."""
    n = t.ndim
    return t.transpose(list(range(n - 2)) + [n - 1, n - 2])


class MatMul(Function):
    def __init__(self, tx=False, ty=False):
        self.tx, self.ty = tx, ty

    def forward(self, a, b):
        same_float_dtype("matmul", a, b)
        if type(a) is np.ndarray:   # numpy has no half-precision BLAS: float32 products
            a, b = upcast(a), upcast(b)
        self.a, self.b = a, b
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError(f"matmul needs tensors of at least 1 dimension, got shapes {list(a.shape)} and "
                             f"{list(b.shape)}")
        A = _swap(a) if self.tx else a
        B = _swap(b) if self.ty else b
        if A.shape[-1] != B.shape[-2 if B.ndim > 1 else 0]:
            raise ValueError(f"matmul inner dimensions differ: x{' (transposed)' if self.tx else ''} is "
                             f"{list(a.shape)}, y{' (transposed)' if self.ty else ''} is {list(b.shape)}")
        if self._folds(a, b):
            # a batch of matrices times one matrix (a tied LM head, a projection): one
            # [rows, K] x [K, N] product instead of one product per leading index
            return gemm.product(_rows(a), B).reshape(a.shape[:-1] + (B.shape[-1],))
        if A.ndim == 2 and B.ndim == 2:
            return gemm.product(A, B)   # the compiled kernel where tensor/gemm.py takes it
        return A @ B

    def _folds(self, a, b):
        """Whether ``a`` (not transposed, 3-D or more, C-contiguous) times the 2-D ``b`` is
        computed with ``a``'s leading axes folded into its rows."""
        return b.ndim == 2 and a.ndim > 2 and not self.tx and a.flags.c_contiguous

    def backward(self, g):
        a, b = self.a, self.b
        na, nb = self.needs
        if a.ndim == 2 and b.ndim == 2:  # the common case, no reshaping
            tx, ty = self.tx, self.ty
            ga = gb = None
            mm = gemm.product
            if na:
                if tx:
                    ga = mm(b.T, g.T) if ty else mm(b, g.T)
                else:
                    ga = mm(g, b) if ty else mm(g, b.T)
            if nb:
                if ty:
                    gb = mm(g.T, a.T) if tx else mm(g.T, a)
                else:
                    gb = mm(a, g) if tx else mm(a.T, g)
            return ga, gb
        if self._folds(a, b):
            # rows folded as in forward: the weight gradient is one product, not a batch of
            # [K, N] products summed over the batch afterwards
            a2, g2 = _rows(a), _rows(g)
            ga = gb = None
            if na:
                ga = gemm.product(g2, b if self.ty else b.T).reshape(a.shape)
            if nb:
                gb = gemm.product(g2.T, a2) if self.ty else gemm.product(a2.T, g2)
            return ga, gb
        # general case: promote vectors to matrices, then undo
        A = a[None, :] if a.ndim == 1 else (_swap(a) if self.tx else a)
        B = b[:, None] if b.ndim == 1 else (_swap(b) if self.ty else b)
        G = g
        if b.ndim == 1:
            G = G[..., None]
        if a.ndim == 1:
            G = G[..., None, :]
        ga = gb = None
        if na:
            gA = G @ _swap(B)
            if a.ndim == 1:
                ga = sum_to(gA, A.shape).reshape(a.shape)
            else:
                gA = sum_to(gA, A.shape)
                ga = _swap(gA) if self.tx else gA
        if nb:
            gB = _swap(A) @ G
            if b.ndim == 1:
                gb = sum_to(gB, B.shape).reshape(b.shape)
            else:
                gB = sum_to(gB, B.shape)
                gb = _swap(gB) if self.ty else gB
        return ga, gb

    def backward_graph(self, g):
        a, b = self.a, self.b
        na, nb = self.needs
        at, bt = live_input(self, 0, a), live_input(self, 1, b)
        tx, ty = self.tx and a.ndim > 1, self.ty and b.ndim > 1
        if b.ndim == 1:  # vectors as matrices: [K] -> [K, 1] (b), [1, K] (a)
            bt, g = bt.reshape([-1, 1]), g.unsqueeze(-1)
        if a.ndim == 1:
            at, g = at.reshape([1, -1]), g.unsqueeze(-2)
        ga = gb = None
        if na:  # d/dA of g . (A @ B) is g @ B^T; transposed back when A is a^T
            ga = MatMul(ty, True)(bt, g) if tx else MatMul(False, not ty)(g, bt)
            ga = sum_to_t(ga, at.shape)
            if a.ndim == 1:
                ga = ga.reshape(list(a.shape))
        if nb:
            gb = MatMul(True, tx)(g, at) if ty else MatMul(not tx, False)(at, g)
            gb = sum_to_t(gb, bt.shape)
            if b.ndim == 1:
                gb = gb.reshape(list(b.shape))
        return ga, gb


def matmul(x, y, transpose_x=False, transpose_y=False, name=None):
    return MatMul(bool(transpose_x), bool(transpose_y))(x, y)


def mm(input, mat2, name=None):  # noqa: A002
    """The matrix product as ``matmul`` computes it (Paddle's ``mm``): vectors, matrices and
    batches of matrices, with the batch dimensions broadcast."""
    return MatMul()(input, mat2)


def bmm(x, y, name=None):
    if x.ndim != 3 or y.ndim != 3 or x.shape[0] != y.shape[0]:
        raise ValueError(f"ddg.bmm: needs two batches of matrices [B, N, K] and [B, K, M], got shapes "
                         f"{x.shape} and {y.shape}")
    return MatMul()(x, y)


__all__ = ["matmul", "mm", "bmm", "MatMul"]


class Inverse(Function):
    """``inv(A)`` over the last two axes; the gradient is ``-inv(A)^T g inv(A)^T``."""
    save_inputs = False
    save_output = True

    def forward(self, a):
        if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
            raise ValueError(f"inverse needs square matrices in the last two axes, got shape {list(a.shape)}")
        a = upcast(a)   # no half-precision LAPACK: float32 (the result comes back in a's dtype)
        self.out = backend.get_array_module(a).linalg.inv(a)
        return self.out

    def backward(self, g):
        t = _swap(self.out)
        return -(t @ g @ t)

    def backward_graph(self, g):
        y = live_output(self, self.out)
        return -MatMul(False, True)(MatMul(True, False)(y, g), y)  # -(Y^T g Y^T), Y = inv(A)


def inverse(x, name=None):
    if x._data.dtype.kind not in "fcV":
        raise TypeError(f"ddg.inverse: needs a float tensor, got {x._data.dtype}")
    return Inverse()(x)


class Einsum(Function):
    """``xp.einsum(equation, *operands)`` with an explicit ``->`` output. The gradient of
    operand k is an einsum of the output gradient with the other operands, then
    broadcast over the letters only operand k has (they were summed out)."""

    def __init__(self, ins, out):
        self.ins, self.out = ins, out

    def forward(self, *arrays):
        # checked here, not in the entry point, so that ddg.amp casts the operands first
        same = {a.dtype for a in arrays}
        if len(same) > 1:
            raise TypeError(f"operands of different dtypes {sorted(map(str, same))}")
        xp = backend.get_array_module(*arrays)
        arrays = tuple(upcast(a) for a in arrays)   # numpy's einsum refuses bfloat16
        self.arrays = arrays
        return xp.einsum(",".join(self.ins) + "->" + self.out, *arrays)

    def backward(self, g):
        xp = backend.get_array_module(g)
        grads = []
        for k, need in enumerate(self.needs):
            if not need:
                grads.append(None)
                continue
            others = [(s, a) for i, (s, a) in enumerate(zip(self.ins, self.arrays)) if i != k]
            have = set(self.out).union(*[set(s) for s, _ in others])
            target = "".join(c for c in self.ins[k] if c in have)
            eq = ",".join([self.out] + [s for s, _ in others]) + "->" + target
            r = xp.einsum(eq, g, *[a for _, a in others])
            shape = self.arrays[k].shape
            view = [shape[i] if c in have else 1 for i, c in enumerate(self.ins[k])]
            grads.append(xp.broadcast_to(r.reshape(view), shape).astype(self.arrays[k].dtype, copy=False))
        return tuple(grads)

    def backward_graph(self, g):
        grads = []
        for k, need in enumerate(self.needs):
            if not need:
                grads.append(None)
                continue
            others = [(s, live_input(self, i, a)) for i, (s, a) in enumerate(zip(self.ins, self.arrays)) if i != k]
            have = set(self.out).union(*[set(s) for s, _ in others])
            target = "".join(c for c in self.ins[k] if c in have)
            r = Einsum([self.out] + [s for s, _ in others], target)(g, *[t for _, t in others])
            shape = self.arrays[k].shape
            r = r.reshape([shape[i] if c in have else 1 for i, c in enumerate(self.ins[k])]).expand(list(shape))
            grads.append(r)
        return tuple(grads)


def einsum(equation, *operands):
    """Einstein summation, e.g. ``einsum('bij,bjk->bik', a, b)``. Without ``->`` the
    output holds the broadcast (``...``) axes, then the letters used once in alphabetical
    order (numpy's rule). ``...`` stands for the leading axes of each operand, broadcast
    against each other; a letter repeated within one operand takes its diagonal (each
    extra occurrence is tied to the first by an identity matrix, so the gradient follows)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(operands):
        raise ValueError(f"ddg.einsum: {equation!r} names {len(ins)} operands, got {len(operands)}")
    free = iter(c for c in string.ascii_letters if c not in eq)
    # '...': the same fresh letters in every operand, right-aligned
    ranks = []
    for s_, t in zip(ins, operands):
        if "..." in s_:
            ranks.append(t.ndim - (len(s_) - 3))
            if ranks[-1] < 0:
                raise ValueError(f"ddg.einsum: subscripts {s_!r} do not fit an operand of shape {t.shape}")
    ell = "".join(next(free) for _ in range(max(ranks, default=0)))
    ins = [s_.replace("...", ell[len(ell) - (t.ndim - (len(s_) - 3)):]) if "..." in s_ else s_
           for s_, t in zip(ins, operands)]
    if not arrow:
        letters = "".join(ins)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    operands = list(operands)
    for k, (s_, t) in enumerate(zip(ins, operands)):
        if len(s_) != t.ndim:
            raise ValueError(f"ddg.einsum: subscripts {s_!r} do not fit an operand of shape {t.shape}")
    # broadcast the '...' axes of size 1
    sizes = {}
    for s_, t in zip(ins, operands):
        for c, n in zip(s_, t.shape):
            if c in ell and n != 1:
                sizes[c] = n
    for k, (s_, t) in enumerate(zip(ins, operands)):
        want = [sizes.get(c, n) if c in ell else n for c, n in zip(s_, t.shape)]
        if want != list(t.shape):
            operands[k] = t.expand(want)
    # diagonals: a repeated letter becomes a fresh one tied to the first by an identity
    extra_subs, extra_ops = [], []
    for k, s_ in enumerate(ins):
        seen, chars = {}, list(s_)
        for i, c in enumerate(chars):
            if c in seen:
                n, m = operands[k].shape[seen[c]], operands[k].shape[i]
                if n != m:
                    raise ValueError(f"ddg.einsum: the diagonal {c!r} of {s_!r} needs equal sizes, got {n} and {m} "
                                     f"(shape {operands[k].shape})")
                fresh = next(free)
                chars[i] = fresh
                extra_subs.append(c + fresh)
                xp = backend.get_array_module(operands[k]._data)
                extra_ops.append(Tensor._wrap(xp.eye(n, dtype=operands[k]._data.dtype)))
            else:
                seen[c] = i
        ins[k] = "".join(chars)
    for c in out:
        if not any(c in s_ for s_ in ins):
            raise ValueError(f"ddg.einsum: output letter {c!r} of {equation!r} is in no operand")
    return Einsum(ins + extra_subs, out)(*operands, *extra_ops)


def _inv_t(a):
    xp = backend.get_array_module(a)
    return _swap(xp.linalg.inv(a))


class Det(Function):
    """``det(A)`` over the last two axes; the gradient is ``g * det(A) * inv(A)^T``
    (so a singular A has none: inv fails, with the op's name in the error)."""
    save_output = True

    def forward(self, a):
        if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
            raise ValueError(f"det needs square matrices in the last two axes, got shape {list(a.shape)}")
        a = upcast(a)
        self.a = a
        self.out = backend.get_array_module(a).linalg.det(a).astype(a.dtype, copy=False)
        return self.out

    def backward(self, g):
        return (g * self.out)[..., None, None] * _inv_t(self.a)

    def backward_graph(self, g):
        inv_t = _swap_t(Inverse()(live_input(self, 0, self.a)))
        return (g * live_output(self, self.out)).unsqueeze([-1, -2]) * inv_t


class Slogdet(Function):
    """``[sign, log|det A|]`` stacked along a new first axis (Paddle's layout); only the
    log gets a gradient, ``inv(A)^T``."""

    def forward(self, a):
        if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
            raise ValueError(f"slogdet needs square matrices in the last two axes, got shape {list(a.shape)}")
        a = upcast(a)
        xp = backend.get_array_module(a)
        self.a = a
        sign, logabs = xp.linalg.slogdet(a)
        return xp.stack([sign, logabs]).astype(a.dtype, copy=False)

    def backward(self, g):
        return g[1][..., None, None] * _inv_t(self.a)

    def backward_graph(self, g):
        return g[1].unsqueeze([-1, -2]) * _swap_t(Inverse()(live_input(self, 0, self.a)))


class Solve(Function):
    """``X`` with ``A @ X = B`` (B a matrix ``[..., n, k]`` or a vector ``[n]``); the
    gradients are ``gB = solve(A^T, g)`` and ``gA = -gB @ X^T``."""

    def forward(self, a, b):
        xp = backend.get_array_module(a, b)
        a, b = upcast(a), upcast(b)
        self.vec = b.ndim == 1
        self.a = a
        self.x = xp.linalg.solve(a, b[:, None] if self.vec else b)
        return self.x[:, 0] if self.vec else self.x

    def backward(self, g):
        xp = backend.get_array_module(g)
        na, nb = self.needs
        gm = upcast(g[:, None] if self.vec else g)
        gb = xp.linalg.solve(_swap(self.a), gm)
        ga = sum_to(-(gb @ _swap(self.x)), self.a.shape) if na else None
        if nb:
            gb = gb[:, 0] if self.vec else gb
        return ga, (gb if nb else None)

    def backward_graph(self, g):
        na, nb = self.needs
        a = live_input(self, 0, self.a)
        x = live_output(self, self.x[:, 0] if self.vec else self.x)
        if self.vec:
            g, x = g.unsqueeze(-1), x.unsqueeze(-1)
        gb = Solve()(_swap_t(a), g)
        ga = sum_to_t(-MatMul(False, True)(gb, x), self.a.shape) if na else None
        if nb and self.vec:
            gb = gb.squeeze(-1)
        return ga, (gb if nb else None)


def det(x, name=None):
    return Det()(x)


def slogdet(x, name=None):
    return Slogdet()(x)


def solve(x, y, left=True, name=None):
    if not left:
        raise ValueError("ddg.linalg.solve: left=False is not supported")
    if x._data.dtype != y._data.dtype:
        raise TypeError(f"ddg.linalg.solve: x is {x._data.dtype}, y is {y._data.dtype}")
    return Solve()(x, y)


class Cholesky(Function):
    """Cholesky factor of a (batch of) symmetric positive-definite matrices: lower ``L`` with
    ``A = L L^T`` (or upper ``U = L^T``). Backward: with ``P = Phi(L^T gL)`` (lower triangle,
    diagonal halved), ``S = L^-T P L^-1``, the gradient is the symmetric ``(S + S^T) / 2``."""
    save_output = True
    save_inputs = False

    def __init__(self, upper):
        self.upper = upper

    def forward(self, a):
        xp = backend.get_array_module(a)
        try:
            low = xp.linalg.cholesky(a)
        except Exception as exc:  # numpy's LinAlgError (cupy returns nan instead)
            raise ValueError(f"ddg.linalg.cholesky: the matrix (shape {list(a.shape)}) is not positive "
                             f"definite: {exc}") from None
        self.low = low
        self.out = _swap(low) if self.upper else low
        return self.out

    def backward(self, g):
        xp = backend.get_array_module(g)
        low = self.low
        gl = _swap(g) if self.upper else g
        p = xp.tril(_swap(low) @ gl)
        n = p.shape[-1]
        idx = xp.arange(n)
        p[..., idx, idx] *= 0.5
        linv = xp.linalg.inv(low)
        s = _swap(linv) @ p @ linv
        return (s + _swap(s)) * 0.5


class Eigvalsh(Function):
    """Eigenvalues (ascending) of (a batch of) symmetric matrices, read from the ``UPLO``
    triangle. Backward: ``V diag(g) V^T`` (symmetric)."""
    save_inputs = False

    def __init__(self, uplo):
        self.uplo = uplo

    def forward(self, a):
        xp = backend.get_array_module(a)
        w, v = xp.linalg.eigh(a, UPLO=self.uplo)
        self.v = v
        return w

    def backward(self, g):
        v = self.v
        return (v * g[..., None, :]) @ _swap(v)


def cholesky(x, upper=False, name=None):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2] or x._data.dtype.kind != "f":
        raise ValueError(f"ddg.linalg.cholesky: needs square float matrices [..., n, n], got shape {x.shape}, "
                         f"dtype {x.dtype}")
    return Cholesky(bool(upper))(x)


def eigvalsh(x, UPLO="L", name=None):  # noqa: N803 - Paddle's name
    if UPLO not in ("L", "U"):
        raise ValueError(f"ddg.linalg.eigvalsh: UPLO must be 'L' or 'U', got {UPLO!r}")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2] or x._data.dtype.kind != "f":
        raise ValueError(f"ddg.linalg.eigvalsh: needs square float matrices [..., n, n], got shape {x.shape}, "
                         f"dtype {x.dtype}")
    return Eigvalsh(UPLO)(x)
