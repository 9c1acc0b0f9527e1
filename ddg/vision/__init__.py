"""ddg.vision: datasets, transforms and models for images (Paddle's ``paddle.vision``)."""
from . import datasets, models, transforms
from .datasets import MNIST
from .image import get_image_backend, image_load, set_image_backend

__all__ = ["datasets", "models", "transforms", "MNIST", "set_image_backend", "get_image_backend", "image_load"]
