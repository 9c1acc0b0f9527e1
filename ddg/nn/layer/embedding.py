"""The Embedding layer (Paddle signature)."""
from ...autograd.grad_mode import no_grad
from .. import functional as F
from .layers import Layer


class Embedding(Layer):
    """A lookup table ``weight`` [num_embeddings, embedding_dim] (Xavier-uniform default).
    With ``padding_idx`` that row starts at zero, its output is zero and it gets no
    gradient, as in Paddle."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0, *,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None,
                 weight_attr=None, name=None):
        # Paddle 3's signature: max_norm third (Paddle 2.6 had sparse there), the rest keywords.
        # _weight: the initial table (copied); _freeze: the table is not trained.
        super().__init__()
        if num_embeddings <= 0 or embedding_dim <= 0:
            raise ValueError(f"ddg.nn.Embedding: sizes must be positive, got ({num_embeddings}, {embedding_dim})")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"ddg.nn.Embedding: padding_idx {padding_idx} out of range for "
                                 f"{num_embeddings} embeddings")
        if scale_grad_by_freq:
            raise NotImplementedError("ddg.nn.Embedding: scale_grad_by_freq is not supported")
        self._num_embeddings, self._embedding_dim = num_embeddings, embedding_dim
        self._size = [num_embeddings, embedding_dim]
        self._padding_idx, self._sparse = padding_idx, sparse
        self._max_norm, self._norm_type, self._scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self._is_distributed, self._remote_prefetch = False, False
        self._weight_attr, self._name = weight_attr, name
        self.weight = self.create_parameter([num_embeddings, embedding_dim], attr=weight_attr, dtype=dtype)
        if _weight is not None:
            if list(_weight.shape) != self._size:
                raise ValueError(f"ddg.nn.Embedding: _weight has shape {list(_weight.shape)}, the table is "
                                 f"{self._size}")
            self.weight.set_value(_weight)
        if _freeze:
            self.weight.stop_gradient = True
        if device is not None:
            self.to(device=device)
        if padding_idx is not None:
            with no_grad():
                self.weight._data[padding_idx % num_embeddings] = 0
                self.weight._bump()

    def forward(self, x):
        return F.embedding(x, self.weight, self._padding_idx, self._max_norm, self._norm_type, self._sparse,
                           self._scale_grad_by_freq)

    def extra_repr(self):
        s = f"{self._num_embeddings}, {self._embedding_dim}"
        if self._padding_idx is not None:
            s += f", padding_idx={self._padding_idx}"
        return s
