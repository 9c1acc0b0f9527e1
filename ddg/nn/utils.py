"""``ddg.nn.utils`` (Paddle's ``paddle.nn.utils``): gradient-norm clipping and flattening
parameters into one vector and back."""
from ..autograd.grad_mode import no_grad
from ..autograd.ops import movement as M
from ..tensor.tensor import Tensor
from .clip import clip_grad_norm_  # noqa: F401

__all__ = ["clip_grad_norm_", "parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters, name=None):
    """All ``parameters`` flattened and concatenated into one 1-D tensor (differentiable)."""
    parameters = list(parameters)
    if not parameters:
        raise ValueError("ddg.nn.utils.parameters_to_vector: needs at least one parameter")
    return M.concat([M.reshape(p, [-1]) for p in parameters])


def vector_to_parameters(vec, parameters, name=None):
    """Copy consecutive slices of the 1-D ``vec`` into ``parameters`` (in place, no gradient)."""
    if not isinstance(vec, Tensor) or vec.ndim != 1:
        raise ValueError(f"ddg.nn.utils.vector_to_parameters: vec must be a 1-D Tensor, got "
                         f"{getattr(vec, 'shape', type(vec).__name__)}")
    parameters = list(parameters)
    total = sum(p.size for p in parameters)
    if total != vec.shape[0]:
        raise ValueError(f"ddg.nn.utils.vector_to_parameters: vec has {vec.shape[0]} elements, the parameters "
                         f"{total}")
    start = 0
    with no_grad():
        for p in parameters:
            n = p.size
            p.set_value(M.reshape(vec[start:start + n], p.shape))
            start += n
