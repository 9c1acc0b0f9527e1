"""Convolutions: conv1d, conv2d, conv1d_transpose, conv2d_transpose (Paddle signatures).

The 2-D primitives live in ``ddg.autograd.ops.conv``; 1-D convolutions are 2-D ones
over a height-1 image, and channel-last layouts are transposed to NCHW and back.
"""
from ...autograd.ops import conv as C
from ...autograd.ops import movement as M
from ...tensor.tensor import Tensor
from .common import require_float


def _ntuple(v, n, what, op):
    """``v`` (an int or a sequence of n ints) as a tuple of n positive ints."""
    if isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            v = list(v) * n
        if len(v) != n:
            raise ValueError(f"ddg.nn.functional.{op}: {what} must be an int or {n} ints, got {v!r}")
        out = tuple(int(a) for a in v)
    else:
        out = (int(v),) * n
    if any(a <= 0 for a in out):
        raise ValueError(f"ddg.nn.functional.{op}: {what} must be positive, got {v!r}")
    return out


def _pads(padding, nd, channel_last, op):
    """Explicit padding in Paddle's accepted forms -> per-side pads, 2*nd ints
    ``(before_0, after_0, before_1, after_1, ...)`` over the spatial dims."""
    if isinstance(padding, Tensor):
        padding = padding.tolist()
    if isinstance(padding, (int,)) or hasattr(padding, "__index__"):
        p = int(padding)
        out = (p,) * (2 * nd)
    else:
        pad = list(padding)
        if pad and isinstance(pad[0], (list, tuple)):
            # one [before, after] pair per dimension, batch and channel included (must be 0)
            if len(pad) != nd + 2:
                raise ValueError(f"ddg.nn.functional.{op}: padding given as pairs needs {nd + 2} pairs, got {pad!r}")
            spatial = pad[1:-1] if channel_last else pad[2:]
            other = [pad[0], pad[-1]] if channel_last else pad[:2]
            if any(int(a) or int(b) for a, b in other):
                raise ValueError(f"ddg.nn.functional.{op}: padding of the batch and channel dims must be 0, "
                                 f"got {pad!r}")
            out = tuple(int(a) for pair in spatial for a in pair)
        elif len(pad) == nd:
            out = tuple(int(a) for a in pad for _ in range(2))
        elif len(pad) == 2 * nd:
            out = tuple(int(a) for a in pad)
        elif len(pad) == 1:
            out = (int(pad[0]),) * (2 * nd)
        else:
            raise ValueError(f"ddg.nn.functional.{op}: padding must be an int, {nd} ints, {2 * nd} ints or "
                             f"{nd + 2} pairs, got {padding!r}")
    if any(p < 0 for p in out):
        raise ValueError(f"ddg.nn.functional.{op}: padding must be non-negative, got {padding!r}")
    return out


def _conv_pads(padding, in_sizes, kernel, stride, dilation, channel_last, op):
    """Per-side pads and the dilation to convolve with. As in Paddle, ``'same'`` pads for
    the undilated kernel and convolves with dilation 1 (whatever ``dilation`` says)."""
    nd = len(in_sizes)
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return (0,) * (2 * nd), dilation
        if mode != "SAME":
            raise ValueError(f"ddg.nn.functional.{op}: padding must be 'same', 'valid', an int or a list, "
                             f"got {padding!r}")
        return same_pads(in_sizes, kernel, stride), (1,) * nd
    return _pads(padding, nd, channel_last, op), dilation


def same_pads(in_sizes, kernel, stride):
    """'SAME' padding of a convolution or pooling window: ceil(n / stride) outputs per axis,
    the padding split as evenly as possible (the extra row/column at the end). Paddle
    computes it for the undilated kernel, and convolves with dilation 1."""
    out = []
    for n, k, s in zip(in_sizes, kernel, stride):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        out += [total // 2, total - total // 2]
    return tuple(out)


def _check_format(data_format, allowed, op):
    if data_format not in allowed:
        raise ValueError(f"ddg.nn.functional.{op}: data_format must be one of {allowed}, got {data_format!r}")
    return data_format[-1] == "C"


def _to_nchw(x, channel_last):
    return M.transpose(x, [0, x.ndim - 1] + list(range(1, x.ndim - 1))) if channel_last else x


def _from_nchw(y, channel_last):
    return M.transpose(y, [0] + list(range(2, y.ndim)) + [1]) if channel_last else y


def _check_x(x, ndim, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"ddg.nn.functional.{op}: x must be a Tensor, got {type(x).__name__}")
    if x.ndim != ndim:
        raise ValueError(f"ddg.nn.functional.{op}: expected a {ndim}-D input, got shape {x.shape}")


def _conv(x, weight, bias, stride, padding, dilation, groups, data_format, op, formats, fn_cls, kernel_dims):
    """The N-d convolution shared by conv2d and conv3d: checks, layout, padding, the op."""
    nd = len(formats[0]) - 2
    channel_last = _check_format(data_format, formats, op)
    _check_x(x, nd + 2, op)
    require_float(f"nn.functional.{op}", x=x, weight=weight)
    if weight.ndim != nd + 2:
        raise ValueError(f"ddg.nn.functional.{op}: weight must be {nd + 2}-D [O, C/groups, {kernel_dims}], "
                         f"got {weight.shape}")
    x = _to_nchw(x, channel_last)
    stride = _ntuple(stride, nd, "stride", op)
    dilation = _ntuple(dilation, nd, "dilation", op)
    groups = int(groups)
    if groups <= 0 or x.shape[1] % groups or weight.shape[0] % groups:
        raise ValueError(f"ddg.nn.functional.{op}: groups={groups} must divide the input channels "
                         f"({x.shape[1]}) and the output channels ({weight.shape[0]})")
    if weight.shape[1] * groups != x.shape[1]:
        raise ValueError(f"ddg.nn.functional.{op}: input has {x.shape[1]} channels (shape {x.shape}) but the weight "
                         f"{weight.shape} with groups={groups} expects {weight.shape[1] * groups}")
    pads, dilation = _conv_pads(padding, x.shape[2:], weight.shape[2:], stride, dilation, channel_last, op)
    fn = fn_cls(stride, pads, dilation, groups)
    y = fn(x, weight) if bias is None else fn(x, weight, bias)
    return _from_nchw(y, channel_last)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, data_format="NCHW", name=None):
    """2-D convolution (cross-correlation) of NCHW (or NHWC) ``x`` with weight
    ``[out_channels, in_channels/groups, kh, kw]``."""
    return _conv(x, weight, bias, stride, padding, dilation, groups, data_format, "conv2d", ("NCHW", "NHWC"),
                 C.Conv2d, "kh, kw")


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, data_format="NCL", name=None):
    """1-D convolution of NCL (or NLC) ``x`` with weight ``[out_channels, in_channels/groups, k]``:
    a 2-D convolution over a height-1 image."""
    op = "conv1d"
    channel_last = _check_format(data_format, ("NCL", "NLC"), op)
    _check_x(x, 3, op)
    require_float(f"nn.functional.{op}", x=x, weight=weight)
    if weight.ndim != 3:
        raise ValueError(f"ddg.nn.functional.{op}: weight must be 3-D [O, C/groups, k], got {weight.shape}")
    x = _to_nchw(x, channel_last)
    stride = _ntuple(stride, 1, "stride", op)
    dilation = _ntuple(dilation, 1, "dilation", op)
    pads, dilation = _conv_pads(padding, x.shape[2:], weight.shape[2:], stride, dilation, False, op)
    y = conv2d(M.unsqueeze(x, 2), M.unsqueeze(weight, 2), bias, (1,) + stride, (0, 0) + pads, (1,) + dilation,
               groups)
    return _from_nchw(M.squeeze(y, 2), channel_last)


def _transpose_geometry(in_sizes, kernel, stride, dilation, padding, output_padding, output_size, channel_last, op):
    """Pads, output sizes and the dilation of a transposed convolution. ``'same'`` pads as
    the forward convolution of the input would (Paddle's rule), with dilation 1."""
    nd = len(in_sizes)
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            pads = (0,) * (2 * nd)
        elif mode == "SAME":
            pads = same_pads(in_sizes, kernel, stride)
            dilation = (1,) * nd
        else:
            raise ValueError(f"ddg.nn.functional.{op}: padding must be 'same', 'valid', an int or a list, "
                             f"got {padding!r}")
    else:
        pads = _pads(padding, nd, channel_last, op)
    base = [(n - 1) * s - pads[2 * i] - pads[2 * i + 1] + d * (k - 1) + 1
            for i, (n, k, s, d) in enumerate(zip(in_sizes, kernel, stride, dilation))]
    if output_size is not None:
        if isinstance(output_size, Tensor):
            output_size = output_size.tolist()
        sizes = [int(output_size)] * nd if isinstance(output_size, int) else [int(v) for v in output_size]
        if len(sizes) != nd:
            raise ValueError(f"ddg.nn.functional.{op}: output_size must have {nd} entries, got {output_size!r}")
        for b, o, s, d in zip(base, sizes, stride, dilation):
            if not b <= o < b + max(s, d):
                raise ValueError(f"ddg.nn.functional.{op}: output_size {sizes} is not reachable; with this input "
                                 f"each size must lie in [{b}, {b} + stride)")
        return pads, tuple(sizes), dilation
    if isinstance(output_padding, (list, tuple)):
        op_pad = [int(v) for v in output_padding] if len(output_padding) == nd else [int(output_padding[0])] * nd
    else:
        op_pad = [int(output_padding)] * nd
    for p, s, d in zip(op_pad, stride, dilation):
        if p < 0 or p >= max(s, d):
            raise ValueError(f"ddg.nn.functional.{op}: output_padding {op_pad} must be smaller than the stride "
                             f"or the dilation {list(stride)}")
    return pads, tuple(b + p for b, p in zip(base, op_pad)), dilation


def _conv_transpose(x, weight, bias, stride, padding, output_padding, dilation, groups, output_size,
                    data_format, op, formats, fn_cls, kernel_dims):
    """The N-d transposed convolution shared by conv2d_transpose and conv3d_transpose."""
    nd = len(formats[0]) - 2
    channel_last = _check_format(data_format, formats, op)
    _check_x(x, nd + 2, op)
    require_float(f"nn.functional.{op}", x=x, weight=weight)
    if weight.ndim != nd + 2:
        raise ValueError(f"ddg.nn.functional.{op}: weight must be {nd + 2}-D [C_in, C_out/groups, {kernel_dims}], "
                         f"got {weight.shape}")
    x = _to_nchw(x, channel_last)
    stride = _ntuple(stride, nd, "stride", op)
    dilation = _ntuple(dilation, nd, "dilation", op)
    groups = int(groups)
    if groups <= 0 or x.shape[1] % groups:
        raise ValueError(f"ddg.nn.functional.{op}: groups={groups} must divide the input channels ({x.shape[1]})")
    if weight.shape[0] != x.shape[1]:
        raise ValueError(f"ddg.nn.functional.{op}: input has {x.shape[1]} channels (shape {x.shape}) but the weight "
                         f"has shape {weight.shape}")
    pads, out_sizes, dilation = _transpose_geometry(x.shape[2:], weight.shape[2:], stride, dilation, padding,
                                                    output_padding, output_size, channel_last, op)
    if min(out_sizes) <= 0:
        raise ValueError(f"ddg.nn.functional.{op}: the output would be empty ({list(out_sizes)}); padding too large")
    fn = fn_cls(stride, pads, dilation, groups, out_sizes)
    y = fn(x, weight) if bias is None else fn(x, weight, bias)
    return _from_nchw(y, channel_last)


def conv2d_transpose(x, weight, bias=None, stride=1, padding=0, output_padding=0, dilation=1, groups=1,
                     output_size=None, data_format="NCHW", name=None):  # Paddle: dilation before groups here
    """Transposed 2-D convolution (the gradient of conv2d with respect to its input) with
    weight ``[in_channels, out_channels/groups, kh, kw]``."""
    return _conv_transpose(x, weight, bias, stride, padding, output_padding, dilation, groups, output_size,
                           data_format, "conv2d_transpose", ("NCHW", "NHWC"), C.Conv2dTranspose, "kh, kw")


def conv1d_transpose(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                     output_size=None, data_format="NCL", name=None):
    """Transposed 1-D convolution, weight ``[in_channels, out_channels/groups, k]``."""
    op = "conv1d_transpose"
    channel_last = _check_format(data_format, ("NCL", "NLC"), op)
    _check_x(x, 3, op)
    require_float(f"nn.functional.{op}", x=x, weight=weight)
    if weight.ndim != 3:
        raise ValueError(f"ddg.nn.functional.{op}: weight must be 3-D [C_in, C_out/groups, k], got {weight.shape}")
    x = _to_nchw(x, channel_last)
    stride = _ntuple(stride, 1, "stride", op)
    dilation = _ntuple(dilation, 1, "dilation", op)
    if isinstance(padding, str):
        pad2 = padding
    else:
        pad2 = (0, 0) + _pads(padding, 1, False, op)
    if output_size is not None:
        output_size = [1, output_size if isinstance(output_size, int) else list(output_size)[0]]
    op_pad = output_padding if isinstance(output_padding, int) else list(output_padding)[0]
    y = conv2d_transpose(M.unsqueeze(x, 2), M.unsqueeze(weight, 2), bias, (1,) + stride, pad2, (0, op_pad),
                         dilation=(1,) + dilation, groups=groups, output_size=output_size)
    return _from_nchw(M.squeeze(y, 2), channel_last)


def conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, data_format="NCDHW", name=None):
    """3-D convolution of NCDHW (or NDHWC) ``x`` with weight ``[O, C/groups, kd, kh, kw]``."""
    from ...autograd.ops import conv_nd as C3
    return _conv(x, weight, bias, stride, padding, dilation, groups, data_format, "conv3d", ("NCDHW", "NDHWC"),
                 C3.ConvNd, "kd, kh, kw")


def conv3d_transpose(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                     output_size=None, data_format="NCDHW", name=None):
    """Transposed 3-D convolution with weight ``[C_in, C_out/groups, kd, kh, kw]``."""
    from ...autograd.ops import conv_nd as C3
    return _conv_transpose(x, weight, bias, stride, padding, output_padding, dilation, groups, output_size,
                           data_format, "conv3d_transpose", ("NCDHW", "NDHWC"), C3.ConvTransposeNd, "kd, kh, kw")

