"""ddg.vision: datasets and transforms for images (Paddle's ``paddle.vision``)."""
from . import datasets, models, transforms
from .datasets import MNIST

__all__ = ["datasets", "models", "transforms", "MNIST"]
