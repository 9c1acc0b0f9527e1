"""``ddg.incubate``: Paddle's incubating APIs that run on one device (``paddle.incubate``):
``nn`` (fused layers and ``functional``), ``optimizer`` (``LookAhead``, ``ModelAverage``,
``LBFGS``), ``autograd`` (functional differentiation), segment reductions,
``graph_send_recv``, the fused masked softmaxes, ``identity_loss``. They are composed of
ddg's ops (so they differentiate and run on every device ddg runs on).

Names that need Paddle's own servers or kernels (the graph samplers of a distributed
graph engine, ``inference``, ``cc``) raise an error naming the alternative.
"""
from . import autograd, nn, optimizer  # noqa: F401
from .optimizer import LookAhead, ModelAverage
from .tensor import (graph_send_recv, identity_loss, segment_max, segment_mean, segment_min, segment_sum,
                     softmax_mask_fuse, softmax_mask_fuse_upper_triangle)

__all__ = ["LookAhead", "ModelAverage", "softmax_mask_fuse_upper_triangle", "softmax_mask_fuse", "graph_send_recv",
           "segment_sum", "segment_mean", "segment_max", "segment_min", "identity_loss", "nn", "optimizer",
           "autograd"]

_NEEDS_PADDLE = {
    "graph_khop_sampler": "sample neighbours in Python over an adjacency list (ddg has no graph engine)",
    "graph_sample_neighbors": "sample neighbours in Python over an adjacency list (ddg has no graph engine)",
    "graph_reindex": "numpy.unique(..., return_inverse=True) on the node ids",
    "inference": "ddg.jit.save / ddg.jit.load for deployment",
    "cc": "ddg.distributed for communication",
    "distributed": "ddg.distributed (data parallel) and ddg.DataParallel",
    "xpu": "ddg's CPU or GPU device (ddg.set_device)",
    "asp": "dense training (ddg has no 2:4 sparsity kernels)",
    "multiprocessing": "ddg.distributed.spawn",
}


def __getattr__(name):
    if name in _NEEDS_PADDLE:
        raise NotImplementedError(f"ddg.incubate.{name} needs Paddle's own runtime or hardware; use "
                                  f"{_NEEDS_PADDLE[name]}")
    raise AttributeError(f"module 'ddg.incubate' has no attribute {name!r}")
