"""``ddg.linalg`` (Paddle's ``paddle.linalg``): norms, inverse, determinants, solving,
matrix powers and chained products."""
from .autograd.composite.products import cholesky_solve, matrix_power, multi_dot, norm, vector_norm  # noqa: F401
from .autograd.ops.linalg import cholesky, det, eigvalsh, inverse as inv, matmul, slogdet, solve  # noqa: F401

__all__ = ["norm", "vector_norm", "inv", "det", "slogdet", "solve", "matrix_power", "multi_dot", "matmul"]
