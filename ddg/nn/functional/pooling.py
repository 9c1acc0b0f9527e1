"""Pooling: max/avg pooling (1-D, 2-D) on the primitives of ``ddg.autograd.ops.pooling``,
adaptive average pooling as one op (a small averaging matrix per spatial axis, one matrix
product each), adaptive max pooling as one op on numpy float32/float64 (elsewhere
max_pool2d/3d or per-bin maxes).
"""
import numpy as np

from ...autograd.ops import movement as M
from ...autograd.ops import pooling as P
from ...autograd.ops import reduce as R
from ...tensor.tensor import Tensor
from .conv import _check_format, _check_x, _from_nchw, _ntuple, _pads, _to_nchw, same_pads


def _pool_args(x, kernel_size, stride, padding, ceil_mode, nd, channel_last, op):
    kernel = _ntuple(kernel_size, nd, "kernel_size", op)
    stride = kernel if stride is None else _ntuple(stride, nd, "stride", op)
    in_sizes = x.shape[-nd:] if not channel_last else x.shape[1:1 + nd]
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            pads = (0,) * (2 * nd)
            if ceil_mode:
                raise ValueError(f"ddg.nn.functional.{op}: padding='VALID' cannot be used with ceil_mode=True")
        elif mode == "SAME":
            pads = same_pads(in_sizes, kernel, stride)
        else:
            raise ValueError(f"ddg.nn.functional.{op}: padding must be 'same', 'valid', an int or a list, "
                             f"got {padding!r}")
    else:
        pads = _pads(padding, nd, channel_last, op)
    return kernel, stride, pads


def max_pool2d(x, kernel_size, stride=None, padding=0, return_mask=False, ceil_mode=False, data_format="NCHW",
               name=None):
    op = "max_pool2d"
    channel_last = _check_format(data_format, ("NCHW", "NHWC"), op)
    _check_x(x, 4, op)
    kernel, stride, pads = _pool_args(x, kernel_size, stride, padding, ceil_mode, 2, channel_last, op)
    x = _to_nchw(x, channel_last)
    fn = P.MaxPool2d(kernel, stride, pads, bool(ceil_mode))
    y = _from_nchw(fn(x), channel_last)
    if return_mask:
        mask = Tensor._wrap(fn.mask())
        return y, _from_nchw(mask, channel_last)
    return y


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True, divisor_override=None,
               data_format="NCHW", name=None):
    op = "avg_pool2d"
    channel_last = _check_format(data_format, ("NCHW", "NHWC"), op)
    _check_x(x, 4, op)
    kernel, stride, pads = _pool_args(x, kernel_size, stride, padding, ceil_mode, 2, channel_last, op)
    x = _to_nchw(x, channel_last)
    y = P.AvgPool2d(kernel, stride, pads, bool(ceil_mode), bool(exclusive), divisor_override)(x)
    return _from_nchw(y, channel_last)


def _as_2d_args(kernel_size, stride, padding, op):
    """1-D pooling arguments lifted to a height-1 2-D pool."""
    k = (1,) + _ntuple(kernel_size, 1, "kernel_size", op)
    s = None if stride is None else (1,) + _ntuple(stride, 1, "stride", op)
    if s is None:
        s = k
    if isinstance(padding, str):
        return k, s, padding
    return k, s, (0, 0) + _pads(padding, 1, False, op)


def max_pool1d(x, kernel_size, stride=None, padding=0, return_mask=False, ceil_mode=False, name=None):
    op = "max_pool1d"
    _check_x(x, 3, op)
    k, s, p = _as_2d_args(kernel_size, stride, padding, op)
    out = max_pool2d(M.unsqueeze(x, 2), k, s, p, return_mask, ceil_mode)
    if return_mask:
        return M.squeeze(out[0], 2), M.squeeze(out[1], 2)
    return M.squeeze(out, 2)


def avg_pool1d(x, kernel_size, stride=None, padding=0, exclusive=True, ceil_mode=False, name=None):
    op = "avg_pool1d"
    _check_x(x, 3, op)
    k, s, p = _as_2d_args(kernel_size, stride, padding, op)
    return M.squeeze(avg_pool2d(M.unsqueeze(x, 2), k, s, p, ceil_mode, exclusive), 2)


# -- adaptive pooling ----------------------------------------------------------------------------
def _compiled(x):
    """Whether adaptive max pooling of ``x`` runs as the compiled one-pass op (numpy
    float32/float64). Adaptive means stay products with small averaging matrices (measured
    faster than the compiled pass, whose backward scatters into overlapping bins)."""
    return P.K.usable(x._data)


def _bins(n_in, n_out):
    """Paddle's adaptive bins: output i pools [floor(i*n/o), ceil((i+1)*n/o))."""
    starts = [(i * n_in) // n_out for i in range(n_out)]
    ends = [-(-((i + 1) * n_in) // n_out) for i in range(n_out)]
    return starts, ends


def _adaptive_sizes(output_size, in_sizes, op):
    nd = len(in_sizes)
    if isinstance(output_size, Tensor):
        output_size = output_size.tolist()
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != nd:
            raise ValueError(f"ddg.nn.functional.{op}: output_size must have {nd} entries, got {output_size!r}")
        sizes = [n if o is None else int(o) for o, n in zip(output_size, in_sizes)]
    else:
        sizes = [int(output_size)] * nd
    if any(s <= 0 for s in sizes):
        raise ValueError(f"ddg.nn.functional.{op}: output_size must be positive, got {output_size!r}")
    return sizes


def adaptive_avg_pool2d(x, output_size, data_format="NCHW", name=None):
    op = "adaptive_avg_pool2d"
    channel_last = _check_format(data_format, ("NCHW", "NHWC"), op)
    _check_x(x, 4, op)
    x = _to_nchw(x, channel_last)
    h, w = x.shape[2:]
    oh, ow = _adaptive_sizes(output_size, (h, w), op)
    if oh == 1 and ow == 1:
        y = R.mean(x, axis=[2, 3], keepdim=True)
    elif h % oh == 0 and w % ow == 0 and type(x._data) is not np.ndarray:
        # on cupy a pool (cuDNN); on numpy the two products below measured 7x faster than
        # the pool's kh*kw strided passes (56x56 -> 7x7)
        y = avg_pool2d(x, (h // oh, w // ow), (h // oh, w // ow))
    else:
        y = P.AdaptiveAvgPool((oh, ow))(x)
    return _from_nchw(y, channel_last)


def adaptive_avg_pool1d(x, output_size, name=None):
    _check_x(x, 3, "adaptive_avg_pool1d")
    o = _adaptive_sizes(output_size, x.shape[2:], "adaptive_avg_pool1d")[0]
    return P.AdaptiveAvgPool((o,))(x)


def adaptive_max_pool2d(x, output_size, return_mask=False, name=None):
    """Adaptive max pooling. On numpy float32/float64 one op (``P.AdaptiveMaxPool``); elsewhere
    (cupy, half dtypes) max_pool2d when the sizes divide evenly, else one max per output bin
    (a loop over the output grid, which adaptive pooling keeps small)."""
    op = "adaptive_max_pool2d"
    _check_x(x, 4, op)
    h, w = x.shape[2:]
    oh, ow = _adaptive_sizes(output_size, (h, w), op)
    if _compiled(x):
        fn = P.AdaptiveMaxPool((oh, ow))
        y = fn(x)
        return (y, Tensor._wrap(fn.mask())) if return_mask else y
    if h % oh == 0 and w % ow == 0:
        return max_pool2d(x, (h // oh, w // ow), (h // oh, w // ow), return_mask=return_mask)
    if return_mask:
        raise NotImplementedError("ddg.nn.functional.adaptive_max_pool2d: return_mask=True needs output sizes "
                                  "that divide the input sizes")
    (hs, he), (ws, we) = _bins(h, oh), _bins(w, ow)
    rows = []
    for i in range(oh):
        band = x[:, :, hs[i]:he[i], :]
        cols = [R.max(band[:, :, :, ws[j]:we[j]], axis=[2, 3]) for j in range(ow)]
        rows.append(M.stack(cols, axis=-1))
    return M.stack(rows, axis=-2)


def adaptive_max_pool1d(x, output_size, return_mask=False, name=None):
    _check_x(x, 3, "adaptive_max_pool1d")
    o = _adaptive_sizes(output_size, x.shape[2:], "adaptive_max_pool1d")[0]
    if _compiled(x):
        fn = P.AdaptiveMaxPool((o,))
        y = fn(x)
        return (y, Tensor._wrap(fn.mask())) if return_mask else y
    out = adaptive_max_pool2d(M.unsqueeze(x, 2), (1, o), return_mask)
    if return_mask:
        return M.squeeze(out[0], 2), M.squeeze(out[1], 2)
    return M.squeeze(out, 2)


# -- 3-D pooling ----------------------------------------------------------------------------------
def max_pool3d(x, kernel_size, stride=None, padding=0, return_mask=False, ceil_mode=False, data_format="NCDHW",
               name=None):
    op = "max_pool3d"
    channel_last = _check_format(data_format, ("NCDHW", "NDHWC"), op)
    _check_x(x, 5, op)
    kernel, stride, pads = _pool_args(x, kernel_size, stride, padding, ceil_mode, 3, channel_last, op)
    x = _to_nchw(x, channel_last)
    fn = P.MaxPoolNd(kernel, stride, pads, bool(ceil_mode))
    y = _from_nchw(fn(x), channel_last)
    if return_mask:
        return y, _from_nchw(Tensor._wrap(fn.mask()), channel_last)
    return y


def avg_pool3d(x, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True, divisor_override=None,
               data_format="NCDHW", name=None):
    op = "avg_pool3d"
    channel_last = _check_format(data_format, ("NCDHW", "NDHWC"), op)
    _check_x(x, 5, op)
    kernel, stride, pads = _pool_args(x, kernel_size, stride, padding, ceil_mode, 3, channel_last, op)
    x = _to_nchw(x, channel_last)
    y = P.AvgPoolNd(kernel, stride, pads, bool(ceil_mode), bool(exclusive), divisor_override)(x)
    return _from_nchw(y, channel_last)


def adaptive_avg_pool3d(x, output_size, data_format="NCDHW", name=None):
    """Adaptive average pooling: one small averaging matrix per spatial axis, one op."""
    op = "adaptive_avg_pool3d"
    channel_last = _check_format(data_format, ("NCDHW", "NDHWC"), op)
    _check_x(x, 5, op)
    x = _to_nchw(x, channel_last)
    sizes = _adaptive_sizes(output_size, x.shape[2:], op)
    return _from_nchw(P.AdaptiveAvgPool(sizes)(x), channel_last)


def adaptive_max_pool3d(x, output_size, return_mask=False, name=None):
    """Adaptive max pooling: one compiled pass on numpy float32/float64; elsewhere max_pool3d
    when the sizes divide evenly, else one max per bin."""
    op = "adaptive_max_pool3d"
    _check_x(x, 5, op)
    d, h, w = x.shape[2:]
    od, oh, ow = _adaptive_sizes(output_size, (d, h, w), op)
    if _compiled(x):
        fn = P.AdaptiveMaxPool((od, oh, ow))
        y = fn(x)
        return (y, Tensor._wrap(fn.mask())) if return_mask else y
    if d % od == 0 and h % oh == 0 and w % ow == 0:
        k = (d // od, h // oh, w // ow)
        return max_pool3d(x, k, k, return_mask=return_mask)
    if return_mask:
        raise NotImplementedError("ddg.nn.functional.adaptive_max_pool3d: return_mask=True needs output sizes "
                                  "that divide the input sizes")
    (ds, de), (hs, he), (ws, we) = _bins(d, od), _bins(h, oh), _bins(w, ow)
    planes = []
    for a in range(od):
        rows = []
        for i in range(oh):
            cols = [R.max(x[:, :, ds[a]:de[a], hs[i]:he[i], ws[j]:we[j]], axis=[2, 3, 4]) for j in range(ow)]
            rows.append(M.stack(cols, axis=-1))
        planes.append(M.stack(rows, axis=-2))
    return M.stack(planes, axis=-3)
