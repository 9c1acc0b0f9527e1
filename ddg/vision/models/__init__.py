"""``ddg.vision.models``: Paddle's model zoo architectures (``paddle.vision.models``),
with Paddle's layer names, so that state dicts carry over. No pretrained weights:
``pretrained=True`` raises, saying how to load a ``.pdparams`` file instead."""
from .lenet import LeNet

__all__ = ["LeNet"]
