"""embedding: rows of a weight matrix picked by integer ids (one op,
``ops.embedding.Embedding``, whose backward scatter-adds into the picked rows)."""
from ...autograd import function as _function
from ...autograd.ops.embedding import Embedding
from ...tensor import backend


# -- embedding ---------------------------------------------------------------------------------------
def embedding(x, weight, padding_idx=None, max_norm=None, norm_type=2.0, sparse=False, scale_grad_by_freq=False,
              name=None):
    """Rows of ``weight`` ([num_embeddings, dim]) picked by the integer ids ``x``. Where
    ``x == padding_idx`` the output is zero and that row receives no gradient (Paddle).
    With ``sparse`` (Paddle's ``sparse=True``, whose weight gradient is a SelectedRows of one
    row per lookup) the gradient is still dense, and the looked-up rows are recorded on the
    weight, so that optimizers in ``lazy_mode`` update only them (``ops.embedding``'s
    docstring and ``ddg/optimizer/adam.py`` say what matches Paddle). With ``max_norm`` the rows
    looked up whose ``norm_type``-norm exceeds it are first scaled down to it, in place in
    ``weight`` (Paddle's and PyTorch's rule, ``max_norm / (norm + 1e-7)``)."""
    if scale_grad_by_freq:
        raise NotImplementedError("ddg.nn.functional.embedding: scale_grad_by_freq is not supported")
    if x.dtype.kind not in "iu":
        raise TypeError(f"ddg.nn.functional.embedding: ids must be an integer tensor, got {x.dtype}")
    if weight.ndim != 2:
        raise ValueError(f"ddg.nn.functional.embedding: weight must be 2-D [num_embeddings, dim], got {weight.shape}")
    n = weight.shape[0]
    ids = x._data
    # Range check on the host only: on a GPU it would cost a synchronizing device-to-host
    # copy per step, so out-of-range ids are not checked there (as in other frameworks).
    if not backend.is_gpu_array(ids) and ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
        raise ValueError(f"ddg.nn.functional.embedding: ids must lie in [0, {n}), got values from {int(ids.min())} "
                         f"to {int(ids.max())}")
    if max_norm is not None:
        _renorm_rows(weight, ids, float(max_norm), float(norm_type))
    amp = _function._autocast[0]
    if amp is not None:  # ddg.amp: Paddle black-lists its embedding op (lookup_table_v2) at O1 and O2
        weight = amp.composite("lookup_table_v2", weight)
    pidx = -1
    if padding_idx is not None:
        pidx = int(padding_idx)
        if not -n <= pidx < n:
            raise ValueError(f"ddg.nn.functional.embedding: padding_idx {padding_idx} out of range [-{n}, {n})")
        pidx %= n
    # the padding rows are zeroed inside the op, on the ids it is given (ddg.jit replays it on new ids)
    return Embedding(pidx, bool(sparse))(weight, x)


def _renorm_rows(weight, ids, max_norm, norm_type):
    xp = backend.get_array_module(weight._data)
    rows = xp.unique(ids.reshape(-1))
    w = weight._data
    norms = (xp.abs(w[rows]) ** norm_type).sum(axis=1) ** (1.0 / norm_type)
    big = norms > max_norm
    if bool(big.any()):
        w[rows[big]] *= (max_norm / (norms[big] + 1e-7)).astype(w.dtype)[:, None]
        weight._bump()
