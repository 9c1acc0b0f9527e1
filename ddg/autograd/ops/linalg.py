"""Matrix products: matmul (vectors, matrices, broadcast batches), mm, bmm, einsum;
the matrix inverse. Their composites (dot, outer, t) are in ``ddg.autograd.composite``."""
from ...tensor import backend
from ..function import Function, same_float_dtype, sum_to


def _swap(a):
    return a.swapaxes(-1, -2) if a.ndim >= 2 else a


class MatMul(Function):
    def __init__(self, tx=False, ty=False):
        self.tx, self.ty = tx, ty

    def forward(self, a, b):
        same_float_dtype("matmul", a, b)
        self.a, self.b = a, b
        A = _swap(a) if self.tx else a
        B = _swap(b) if self.ty else b
        if A.shape[-1] != B.shape[-2 if B.ndim > 1 else 0]:
            raise ValueError(f"matmul inner dimensions differ: x{' (transposed)' if self.tx else ''} is "
                             f"{list(a.shape)}, y{' (transposed)' if self.ty else ''} is {list(b.shape)}")
        return A @ B

    def backward(self, g):
        a, b = self.a, self.b
        na, nb = self.needs
        if a.ndim == 2 and b.ndim == 2:  # the common case, no reshaping
            tx, ty = self.tx, self.ty
            ga = gb = None
            if na:
                if tx:
                    ga = (b.T @ g.T) if ty else (b @ g.T)
                else:
                    ga = (g @ b) if ty else (g @ b.T)
            if nb:
                if ty:
                    gb = (g.T @ a.T) if tx else (g.T @ a)
                else:
                    gb = (a @ g) if tx else (a.T @ g)
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


def matmul(x, y, transpose_x=False, transpose_y=False, name=None):
    return MatMul(bool(transpose_x), bool(transpose_y))(x, y)


def mm(input, mat2, name=None):  # noqa: A002
    if input.ndim != 2 or mat2.ndim != 2:
        raise ValueError(f"ddg.mm: needs two matrices, got shapes {input.shape} and {mat2.shape}")
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
        self.out = backend.get_array_module(a).linalg.inv(a)
        return self.out

    def backward(self, g):
        t = _swap(self.out)
        return -(t @ g @ t)


def inverse(x, name=None):
    if x._data.dtype.kind not in "fc":
        raise TypeError(f"ddg.inverse: needs a float tensor, got {x._data.dtype}")
    return Inverse()(x)


class Einsum(Function):
    """``xp.einsum(equation, *operands)`` with an explicit ``->`` output. The gradient of
    operand k is an einsum of the output gradient with the other operands, then
    broadcast over the letters only operand k has (they were summed out)."""

    def __init__(self, ins, out):
        self.ins, self.out = ins, out

    def forward(self, *arrays):
        xp = backend.get_array_module(*arrays)
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


def einsum(equation, *operands):
    """Einstein summation, e.g. ``einsum('bij,bjk->bik', a, b)``. Without ``->`` the
    output holds the letters used once, in alphabetical order (numpy's rule). Not
    supported: ``...`` and a letter repeated within one operand (diagonals)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    if "..." in eq:
        raise ValueError(f"ddg.einsum: '...' is not supported (equation {equation!r})")
    lhs, _, out = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(operands):
        raise ValueError(f"ddg.einsum: {equation!r} names {len(ins)} operands, got {len(operands)}")
    if "->" not in eq:
        letters = "".join(ins)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    for s, t in zip(ins, operands):
        if len(set(s)) != len(s):
            raise ValueError(f"ddg.einsum: operand subscripts {s!r} repeat a letter (diagonals are not supported)")
        if len(s) != t.ndim:
            raise ValueError(f"ddg.einsum: subscripts {s!r} do not fit an operand of shape {t.shape}")
    same = {t._data.dtype for t in operands}
    if len(same) > 1:
        raise TypeError(f"ddg.einsum: operands of different dtypes {sorted(map(str, same))}")
    return Einsum(ins, out)(*operands)


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
        self.a = a
        self.out = backend.get_array_module(a).linalg.det(a).astype(a.dtype, copy=False)
        return self.out

    def backward(self, g):
        return (g * self.out)[..., None, None] * _inv_t(self.a)


class Slogdet(Function):
    """``[sign, log|det A|]`` stacked along a new first axis (Paddle's layout); only the
    log gets a gradient, ``inv(A)^T``."""

    def forward(self, a):
        if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
            raise ValueError(f"slogdet needs square matrices in the last two axes, got shape {list(a.shape)}")
        xp = backend.get_array_module(a)
        self.a = a
        sign, logabs = xp.linalg.slogdet(a)
        return xp.stack([sign, logabs]).astype(a.dtype, copy=False)

    def backward(self, g):
        return g[1][..., None, None] * _inv_t(self.a)


class Solve(Function):
    """``X`` with ``A @ X = B`` (B a matrix ``[..., n, k]`` or a vector ``[n]``); the
    gradients are ``gB = solve(A^T, g)`` and ``gA = -gB @ X^T``."""

    def forward(self, a, b):
        xp = backend.get_array_module(a, b)
        self.vec = b.ndim == 1
        self.a = a
        self.x = xp.linalg.solve(a, b[:, None] if self.vec else b)
        return self.x[:, 0] if self.vec else self.x

    def backward(self, g):
        xp = backend.get_array_module(g)
        na, nb = self.needs
        gm = g[:, None] if self.vec else g
        gb = xp.linalg.solve(_swap(self.a), gm)
        ga = sum_to(-(gb @ _swap(self.x)), self.a.shape) if na else None
        if nb:
            gb = gb[:, 0] if self.vec else gb
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
