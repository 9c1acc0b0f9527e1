"""ddg.vision: datasets, transforms and models for images (Paddle's ``paddle.vision``).

As in Paddle, the models, the datasets and most transforms are also reachable from
``ddg.vision`` itself (``ddg.vision.resnet18``, ``ddg.vision.Cifar10``,
``ddg.vision.Normalize``)."""
from . import datasets, image, models, transforms
from .datasets import *  # noqa: F401,F403
from .image import get_image_backend, image_load, set_image_backend
from .models import *  # noqa: F401,F403
from .transforms import (BaseTransform, BrightnessTransform, CenterCrop, ColorJitter, Compose,  # noqa: F401
                         ContrastTransform, Grayscale, HueTransform, Normalize, Pad, RandomCrop,
                         RandomHorizontalFlip, RandomResizedCrop, RandomRotation, RandomVerticalFlip, Resize,
                         SaturationTransform, ToTensor, Transpose, adjust_brightness, adjust_contrast, adjust_hue,
                         center_crop, crop, hflip, normalize, pad, resize, rotate, to_grayscale, to_tensor, vflip)

__all__ = ["set_image_backend", "get_image_backend", "image_load"]
