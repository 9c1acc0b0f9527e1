"""Tensor-level composites: functions built from the primitives of several op families
(``ddg.autograd.ops.*``), so that no primitive file has to import another. Their
gradients come from the primitives they call; none of them is a ``Function``. Helpers
that return integers or indices (``searchsorted``, ``tril_indices``, ``gcd``...) compute
on the raw arrays and return tensors that need no gradient.

One file per subject:

* ``arithmetic.py``: elementwise composites (``scale``, ``add_n``, ``hypot``, ``lerp``,
  ``logit``, ``gcd``...);
* ``statistics.py``: variance, nan-aware and order statistics, covariance, histograms,
  differences, integrals and cumulative extremes;
* ``products.py``: dot/outer/Kronecker and matrix products, distances, norms, and the
  matrix functions of ``ddg.linalg``;
* ``matrices.py``: triangles and diagonals (``tril``, ``diag_embed``, ``trace``...);
* ``shapes.py``: reshapes, views, splits, flips, rotations, ``unfold``;
* ``indexing.py``: masked fills and scatters, slices, gathers and the ``index_*`` family;
* ``sorting.py``: sorting, searching and set membership;
* ``creation.py``: ``meshgrid``, ``assign``, ``combinations``, ``logspace``;
* ``random.py``: random draws shaped like a tensor;
* ``queries.py``: questions about a tensor or a dtype (``is_complex``, ``finfo``...);
* ``recurrent.py``: recurrent layers written with ordinary ops (``rnn_sequence``).

This package exports all of them, so ``ddg.autograd.composite.var`` keeps working.
"""
from .arithmetic import (  # noqa: F401
    scale, add_n, nan_to_num, deg2rad, rad2deg, frac, hypot, lerp, logaddexp, logit, stanh, sgn, heaviside,
    fmax, fmin, ldexp, frexp, nextafter, atan2, multigammaln, increment, gcd, lcm)
from .statistics import (  # noqa: F401
    var, std, count_nonzero, diff, trapezoid, cumulative_trapezoid, logcumsumexp, cummax, cummin, nansum,
    nanmean, kthvalue, quantile, nanquantile, median, nanmedian, mode, histogram, cov, corrcoef)
from .products import (  # noqa: F401
    dot, outer, kron, norm, addmm, mv, inner, tensordot, cross, dist, cdist, renorm, vector_norm,
    matrix_power, multi_dot, cholesky_solve)
from .matrices import (  # noqa: F401
    tril, triu, diagonal, trace, diag, diagflat, diag_embed, diagonal_scatter, vander, tril_indices,
    triu_indices)
from .shapes import (  # noqa: F401
    t, unstack, repeat_interleave, atleast_1d, atleast_2d, atleast_3d, broadcast_shape, unflatten, view,
    view_as, vsplit, reverse, rot90, crop, unfold, as_strided, tensor_split)
from .indexing import (  # noqa: F401
    masked_fill, slice, gather_nd, strided_slice, select_scatter, index_fill, index_add, index_put,
    index_sample, take, multiplex, scatter_nd, shard_index, masked_scatter)
from .sorting import (  # noqa: F401
    sort, topk, searchsorted, bucketize, unique_consecutive, isin)
from .creation import (  # noqa: F401
    meshgrid, assign, combinations, logspace)
from .random import (  # noqa: F401
    poisson, standard_normal, randint_like)
from .queries import (  # noqa: F401
    is_tensor, is_complex, is_floating_point, is_integer, is_empty, rank, tolist, iinfo, finfo)
from .recurrent import (  # noqa: F401
    rnn_sequence)
