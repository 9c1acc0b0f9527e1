"""The Embedding layer (Paddle signature)."""
from ...autograd.grad_mode import no_grad
from .. import functional as F
from .layers import Layer


class Embedding(Layer):
    """A lookup table ``weight`` [num_embeddings, embedding_dim] (Xavier-uniform default).
    With ``padding_idx`` that row starts at zero, its output is zero and it gets no
    gradient, as in Paddle."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, sparse=False, weight_attr=None, name=None):
        super().__init__()
        if num_embeddings <= 0 or embedding_dim <= 0:
            raise ValueError(f"ddg.nn.Embedding: sizes must be positive, got ({num_embeddings}, {embedding_dim})")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"ddg.nn.Embedding: padding_idx {padding_idx} out of range for "
                                 f"{num_embeddings} embeddings")
            padding_idx %= num_embeddings
        self._num_embeddings, self._embedding_dim = num_embeddings, embedding_dim
        self._padding_idx, self._sparse = padding_idx, sparse
        self.weight = self.create_parameter([num_embeddings, embedding_dim], attr=weight_attr)
        if padding_idx is not None:
            with no_grad():
                self.weight._data[padding_idx] = 0
                self.weight._bump()

    def forward(self, x):
        return F.embedding(x, self.weight, self._padding_idx, sparse=self._sparse)

    def extra_repr(self):
        s = f"{self._num_embeddings}, {self._embedding_dim}"
        if self._padding_idx is not None:
            s += f", padding_idx={self._padding_idx}"
        return s
