"""Tensor, dtypes, places, creation and printing."""
from .tensor import Tensor  # noqa: F401
