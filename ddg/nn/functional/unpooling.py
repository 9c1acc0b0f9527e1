"""``max_unpool1d/2d/3d``: the values of a max pooling written back at the positions its
indices name, zeros elsewhere (the inverse of ``max_pool*d(return_mask=True)``)."""
from ...autograd.ops import nn_ops as NN
from .conv import _ntuple, _pads

__all__ = ["max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _max_unpool(x, indices, kernel_size, stride, padding, output_size, nd, op):
    k = _ntuple(kernel_size, nd, "kernel_size", op)
    s = k if stride is None else _ntuple(stride, nd, "stride", op)
    p = _pads(padding, nd, False, op)
    if x.ndim != nd + 2 or list(indices.shape) != list(x.shape):
        raise ValueError(f"ddg.nn.functional.{op}: x and indices must both be {nd + 2}-D of one shape, got "
                         f"{x.shape} and {indices.shape}")
    if output_size is None:
        out = [(x.shape[2 + i] - 1) * s[i] - p[2 * i] - p[2 * i + 1] + k[i] for i in range(nd)]
    else:
        out = [int(v) for v in list(output_size)[-nd:]]
    if indices.dtype.kind not in "iu":
        raise TypeError(f"ddg.nn.functional.{op}: indices must be integers, got {indices.dtype}")
    return NN.max_unpool(x, indices.detach(), out, op)


def max_unpool1d(x, indices, kernel_size, stride=None, padding=0, data_format="NCL", output_size=None, name=None):
    return _max_unpool(x, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


def max_unpool2d(x, indices, kernel_size, stride=None, padding=0, data_format="NCHW", output_size=None, name=None):
    return _max_unpool(x, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


def max_unpool3d(x, indices, kernel_size, stride=None, padding=0, data_format="NCDHW", output_size=None, name=None):
    return _max_unpool(x, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")
