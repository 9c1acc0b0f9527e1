"""Matrix products: matmul (vectors, matrices, broadcast batches), mm, bmm. Their
composites (dot, outer, t) are in ``ddg.autograd.composite``."""
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
