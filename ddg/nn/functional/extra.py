"""More of ``paddle.nn.functional`` (added for API coverage, see tools/api_coverage.py):
shuffles, unpooling and fold, distance and margin losses, random activations, in-place
activations. All composites of the primitives, except ``ctc_loss`` (ops/ctc.py)."""
import numbers

import numpy as np

from ...autograd.axes import normalize_axis as _ax
from ...autograd.ops import elementwise as E
from ...autograd.ops import linalg as L
from ...autograd.ops import logic as G
from ...autograd.ops import movement as M
from ...autograd.ops import reduce as R
from ...autograd.tensor_methods import inplace_function, inplace_method
from ...tensor import backend
from ...tensor.tensor import Tensor
from .activation import elu, hardtanh, leaky_relu, log_softmax, softmax, thresholded_relu
from .conv import _ntuple, _pads, conv2d_transpose
from .loss import _pairwise_distance, _reduce

__all__ = ["pairwise_distance", "pixel_unshuffle", "channel_shuffle", "maxout", "alpha_dropout", "rrelu",
           "local_response_norm", "gaussian_nll_loss", "poisson_nll_loss", "multi_margin_loss",
           "triplet_margin_with_distance_loss", "dice_loss", "npair_loss", "gumbel_softmax", "bilinear", "fold",
           "max_unpool1d", "max_unpool2d", "max_unpool3d", "temporal_shift", "gather_tree", "ctc_loss",
           "margin_cross_entropy", "class_center_sample", "elu_", "relu_", "tanh_", "softmax_", "leaky_relu_",
           "hardtanh_", "thresholded_relu_"]


def _xp(x):
    return backend.get_array_module(x._data)


def _const(a, like, dtype=None):
    return Tensor._wrap(_xp(like).asarray(a, dtype=dtype))


# -- distances, shuffles, maxout -----------------------------------------------------------------
def pairwise_distance(x, y, p=2.0, epsilon=1e-6, keepdim=False, name=None):
    """The p-norm of ``x - y + epsilon`` over the last axis."""
    if x.shape[-1:] != y.shape[-1:] and y.ndim and x.ndim:
        raise ValueError(f"ddg.nn.functional.pairwise_distance: last dimensions differ: {x.shape} and {y.shape}")
    d = _pairwise_distance(x, y, float(p), epsilon) if p != 0 else \
        R.sum(E.cast(G.not_equal(E.add(E.subtract(x, y), epsilon), 0), x.dtype), axis=-1)
    return M.unsqueeze(d, -1) if keepdim else d


def pixel_unshuffle(x, downscale_factor, data_format="NCHW", name=None):
    """``[N, C, H*r, W*r]`` -> ``[N, C*r*r, H, W]``: the inverse of pixel_shuffle."""
    r = int(downscale_factor)
    if x.ndim != 4 or data_format not in ("NCHW", "NHWC") or r <= 0:
        raise ValueError(f"ddg.nn.functional.pixel_unshuffle: needs a 4-D input, data_format NCHW or NHWC and a "
                         f"positive factor, got shape {x.shape}, {data_format!r}, {downscale_factor}")
    if data_format == "NHWC":
        x = M.transpose(x, [0, 3, 1, 2])
    n, c, h, w = x.shape
    if h % r or w % r:
        raise ValueError(f"ddg.nn.functional.pixel_unshuffle: height {h} and width {w} must be divisible by {r}")
    y = M.reshape(x, [n, c, h // r, r, w // r, r])
    y = M.reshape(M.transpose(y, [0, 1, 3, 5, 2, 4]), [n, c * r * r, h // r, w // r])
    return M.transpose(y, [0, 2, 3, 1]) if data_format == "NHWC" else y


def channel_shuffle(x, groups, data_format="NCHW", name=None):
    if x.ndim != 4 or data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"ddg.nn.functional.channel_shuffle: needs a 4-D input and data_format NCHW or NHWC, "
                         f"got shape {x.shape} and {data_format!r}")
    ca = 1 if data_format == "NCHW" else 3
    c = x.shape[ca]
    if groups <= 0 or c % groups:
        raise ValueError(f"ddg.nn.functional.channel_shuffle: groups={groups} must divide the {c} channels")
    shape = list(x.shape)
    split = shape[:ca] + [groups, c // groups] + shape[ca + 1:]
    perm = list(range(len(split)))
    perm[ca], perm[ca + 1] = perm[ca + 1], perm[ca]
    return M.reshape(M.transpose(M.reshape(x, split), perm), shape)


def maxout(x, groups, axis=1, name=None):
    """The maximum over each run of ``groups`` consecutive channels along ``axis``."""
    axis = _ax(axis, x.ndim, "maxout")
    c = x.shape[axis]
    if groups <= 0 or c % groups:
        raise ValueError(f"ddg.nn.functional.maxout: groups={groups} must divide the {c} channels of shape {x.shape}")
    y = M.reshape(x, x.shape[:axis] + [c // groups, groups] + x.shape[axis + 1:])
    return R.max(y, axis=axis + 1)


# -- random activations and dropout --------------------------------------------------------------
def alpha_dropout(x, p=0.5, training=True, name=None):
    """Dropout that keeps SELU's zero mean and unit variance: dropped units take SELU's
    negative saturation value, then an affine map restores the moments."""
    if not isinstance(p, numbers.Number) or not 0 <= p <= 1:
        raise ValueError(f"ddg.nn.functional.alpha_dropout: p must be in [0, 1], got {p!r}")
    if not training or p == 0:
        return x
    alpha_p = -1.7580993408473766   # -scale * alpha of SELU
    a = (1.0 / np.sqrt((alpha_p ** 2 * p + 1) * (1 - p)))
    b = -a * alpha_p * p
    keep = backend.rng(_xp(x)).uniform(0, 1, x._data.shape) >= p
    keep_t = _const(keep.astype(x._data.dtype), x)
    y = E.add(E.multiply(x, keep_t), E.multiply(E.subtract(1.0, keep_t), alpha_p))
    return E.add(E.multiply(y, a), b)


def rrelu(x, lower=1.0 / 8.0, upper=1.0 / 3.0, training=True, name=None):
    """Leaky ReLU with a negative slope drawn uniformly from [lower, upper] per element in
    training, and ``(lower + upper) / 2`` otherwise."""
    if not 0 <= lower <= upper <= 1:
        raise ValueError(f"ddg.nn.functional.rrelu: need 0 <= lower <= upper <= 1, got {lower}, {upper}")
    if training:
        slope = _const(backend.rng(_xp(x)).uniform(lower, upper, x._data.shape).astype(x._data.dtype), x)
    else:
        slope = (lower + upper) / 2.0
    return E.where(G.greater_equal(x, 0), x, E.multiply(x, slope))


def gumbel_softmax(x, temperature=1.0, hard=False, axis=-1, name=None):
    """Softmax of ``(x + Gumbel noise) / temperature``; ``hard`` gives one-hot samples whose
    gradient is the soft one's (straight-through)."""
    xp = _xp(x)
    u = xp.clip(backend.rng(xp).uniform(0, 1, x._data.shape), 1e-20, 1.0)
    g = Tensor._wrap((-xp.log(-xp.log(u) + 1e-20)).astype(x._data.dtype))
    y = softmax(E.divide(E.add(x, g), temperature), axis=axis)
    if not hard:
        return y
    xp = _xp(x)
    idx = xp.argmax(y._data, axis=axis)
    onehot = xp.zeros_like(y._data)
    xp.put_along_axis(onehot, xp.expand_dims(idx, axis), 1, axis=axis)
    return E.add(E.subtract(_const(onehot, x), Tensor._wrap(y._data)), y)


def local_response_norm(x, size, alpha=1e-4, beta=0.75, k=1.0, data_format="NCHW", name=None):
    """``x / (k + alpha / size * sum of x^2 over size neighbouring channels) ** beta``."""
    if x.ndim < 3:
        raise ValueError(f"ddg.nn.functional.local_response_norm: needs at least 3 dimensions, got {x.shape}")
    channel_last = data_format[-1] == "C"
    ca = x.ndim - 1 if channel_last else 1
    sq = M.moveaxis(E.square(x), ca, -1)
    c = sq.shape[-1]
    pad_before, pad_after = size // 2, (size - 1) // 2
    # window sums as a matrix product with a band matrix (channels are few)
    band = np.zeros((c, c))
    for j in range(c):
        band[max(0, j - pad_before):min(c, j + pad_after + 1), j] = 1.0
    s = L.matmul(sq, _const(band, x, x._data.dtype))
    div = E.pow(E.add(E.multiply(s, alpha / size), k), beta)
    return E.divide(x, M.moveaxis(div, -1, ca))


# -- losses -------------------------------------------------------------------------------------------
def gaussian_nll_loss(input, label, variance, full=False, epsilon=1e-6, reduction="mean", name=None):  # noqa: A002
    """``0.5 * (log(max(var, eps)) + (input - label)^2 / max(var, eps))`` (+ ``0.5 log(2 pi)`` if full)."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"ddg.nn.functional.gaussian_nll_loss: reduction must be 'mean', 'sum' or 'none', "
                         f"got {reduction!r}")
    if variance.ndim == input.ndim - 1:
        variance = M.unsqueeze(variance, -1)
    var = E.clip(variance, min=epsilon)
    loss = E.multiply(E.add(E.log(var), E.divide(E.square(E.subtract(input, label)), var)), 0.5)
    if full:
        loss = E.add(loss, 0.5 * np.log(2 * np.pi))
    return _reduce(loss, reduction, "gaussian_nll_loss")


def poisson_nll_loss(input, label, log_input=True, full=False, epsilon=1e-8, reduction="mean", name=None):  # noqa: A002
    """Negative log-likelihood of ``label`` under Poisson(rate): ``exp(input) - label * input``
    with ``log_input``, else ``input - label * log(input + epsilon)``; ``full`` adds Stirling's
    term for labels above 1."""
    if log_input:
        loss = E.subtract(E.exp(input), E.multiply(label, input))
    else:
        loss = E.subtract(input, E.multiply(label, E.log(E.add(input, epsilon))))
    if full:
        lab = Tensor._wrap(label._data)
        safe = E.where(G.greater_than(lab, 1), lab, _const(2.0, lab, lab._data.dtype))
        stirling = E.add(E.subtract(E.multiply(safe, E.log(safe)), safe), E.multiply(E.log(E.multiply(safe, 2 * np.pi)), 0.5))
        loss = E.add(loss, E.where(G.greater_than(lab, 1), stirling, _const(0.0, lab, lab._data.dtype)))
    return _reduce(loss, reduction, "poisson_nll_loss")


def multi_margin_loss(input, label, p=1, margin=1.0, weight=None, reduction="mean", name=None):  # noqa: A002
    """``sum_{i != y} max(0, margin - x[y] + x[i]) ** p / C`` per sample (times ``weight[y]``)."""
    if p not in (1, 2):
        raise ValueError(f"ddg.nn.functional.multi_margin_loss: p must be 1 or 2, got {p}")
    if input.ndim != 2 or label.ndim != 1 or label.shape[0] != input.shape[0]:
        raise ValueError(f"ddg.nn.functional.multi_margin_loss: needs input [N, C] and label [N], got {input.shape} "
                         f"and {label.shape}")
    n, c = input.shape
    lab = M.unsqueeze(E.cast(label, "int64"), 1)
    xy = M.take_along_axis(input, lab, 1)
    m = E.relu(E.add(E.subtract(input, xy), margin))
    if p == 2:
        m = E.square(m)
    if weight is not None:
        m = E.multiply(m, M.unsqueeze(M.gather(weight, M.squeeze(lab, 1)), 1))
    not_y = _const((np.arange(c)[None, :] != backend.to_host(lab._data)).astype(input._data.dtype), input)
    loss = E.divide(R.sum(E.multiply(m, not_y), axis=1), float(c))
    return _reduce(loss, reduction, "multi_margin_loss")


def triplet_margin_with_distance_loss(input, positive, negative, distance_function=None, margin=1.0,  # noqa: A002
                                      swap=False, reduction="mean", name=None):
    dist = distance_function or pairwise_distance
    d_pos = dist(input, positive)
    d_neg = dist(input, negative)
    if swap:
        d_neg = E.minimum(d_neg, dist(positive, negative))
    return _reduce(E.relu(E.add(E.subtract(d_pos, d_neg), margin)), reduction, "triplet_margin_with_distance_loss")


def dice_loss(input, label, epsilon=1e-5, name=None):  # noqa: A002
    """``1 - 2 |X ∩ Y| / (|X| + |Y|)`` per sample, averaged; ``input`` holds class
    probabilities on its last axis, ``label`` the class ids (last axis of size 1)."""
    if label.shape[-1] != 1 or input.ndim != label.ndim:
        raise ValueError(f"ddg.nn.functional.dice_loss: label must be input's shape with a last axis of 1, got "
                         f"{input.shape} and {label.shape}")
    c = input.shape[-1]
    onehot = E.cast(G.equal(E.cast(label, "int64"), _const(np.arange(c), label, "int64")), input.dtype)
    axes = list(range(1, input.ndim))
    inter = R.sum(E.multiply(input, onehot), axis=axes)
    union = E.add(R.sum(input, axis=axes), R.sum(onehot, axis=axes))
    return R.mean(E.subtract(1.0, E.divide(E.multiply(inter, 2.0), E.add(union, epsilon))))


def npair_loss(anchor, positive, labels, l2_reg=0.002):
    """N-pair loss: softmax cross entropy of anchor-positive similarities against the
    label-equality targets, plus ``l2_reg`` times the embeddings' mean squared norm."""
    lab = M.reshape(E.cast(labels, "float32"), [-1, 1])
    same = E.cast(G.equal(lab, M.transpose(lab, [1, 0])), anchor.dtype)
    target = E.divide(same, R.sum(same, axis=1, keepdim=True))
    l2 = E.multiply(E.add(R.mean(R.sum(E.square(anchor), axis=1)), R.mean(R.sum(E.square(positive), axis=1))),
                    0.25 * l2_reg)
    sim = L.matmul(anchor, positive, transpose_y=True)
    ce = R.mean(R.sum(E.multiply(E.neg(target), log_softmax(sim, axis=1)), axis=1))
    return E.add(l2, ce)


def margin_cross_entropy(logits, label, margin1=1.0, margin2=0.5, margin3=0.0, scale=64.0, group=None,
                         return_softmax=False, reduction="mean"):
    """ArcFace-style loss on cosine ``logits``: the target class's logit becomes
    ``cos(margin1 * acos(x) + margin2) - margin3``, all are multiplied by ``scale``, then
    softmax cross entropy (one process: the class dimension is not split over ranks)."""
    if group not in (None, False):
        raise NotImplementedError("ddg.nn.functional.margin_cross_entropy: model-parallel groups are not supported")
    n, c = logits.shape
    lab = E.cast(M.reshape(label, [-1]), "int64")
    onehot = _const((np.arange(c)[None, :] == backend.to_host(lab._data)[:, None]).astype(logits._data.dtype), logits)
    cosv = E.clip(logits, -1.0, 1.0)
    theta = E.acos(E.clip(cosv, -1.0 + 1e-7, 1.0 - 1e-7))
    target = E.subtract(E.cos(E.add(E.multiply(theta, margin1), margin2)), margin3)
    z = E.multiply(E.add(E.multiply(cosv, E.subtract(1.0, onehot)), E.multiply(target, onehot)), scale)
    logp = log_softmax(z, axis=1)
    loss = M.unsqueeze(E.neg(R.sum(E.multiply(logp, onehot), axis=1)), 1)
    if reduction == "mean":
        loss = R.mean(loss)
    elif reduction == "sum":
        loss = R.sum(loss)
    elif reduction not in (None, "none"):
        raise ValueError(f"ddg.nn.functional.margin_cross_entropy: bad reduction {reduction!r}")
    return (loss, E.exp(logp)) if return_softmax else loss


def class_center_sample(label, num_classes, num_samples, group=None):
    """The positive classes of ``label`` plus random negative ones, ``num_samples`` in all
    (sorted), and ``label`` remapped to positions among them (one process)."""
    if group not in (None, False):
        raise NotImplementedError("ddg.nn.functional.class_center_sample: model-parallel groups are not supported")
    lab = backend.to_host(label._data).astype(np.int64)
    pos = np.unique(lab)
    if num_samples < len(pos):
        centers = pos
    else:
        rest = np.setdiff1d(np.arange(num_classes), pos)
        draw = backend.rng(np).permutation(len(rest))[:num_samples - len(pos)]
        centers = np.sort(np.concatenate([pos, rest[draw]]))
    remap = np.searchsorted(centers, lab)
    return _const(remap.astype(lab.dtype), label), _const(centers, label)


# -- bilinear, fold, unpool, temporal shift ------------------------------------------------------------
def bilinear(x1, x2, weight, bias=None, name=None):
    """``out[n, o] = x1[n] @ weight[o] @ x2[n] + bias[o]`` with weight ``[out, in1, in2]``."""
    if weight.ndim != 3 or x1.shape[-1] != weight.shape[1] or x2.shape[-1] != weight.shape[2]:
        raise ValueError(f"ddg.nn.functional.bilinear: x1 {x1.shape}, x2 {x2.shape} and weight {weight.shape} "
                         f"do not fit ([N, in1], [N, in2], [out, in1, in2])")
    o, i1, i2 = weight.shape
    t = L.matmul(x1, M.reshape(M.transpose(weight, [1, 0, 2]), [i1, o * i2]))   # N, o*in2
    out = R.sum(E.multiply(M.reshape(t, [-1, o, i2]), M.unsqueeze(x2, 1)), axis=-1)
    if bias is not None:
        out = E.add(out, M.reshape(bias, [1, -1]))
    return out


def fold(x, output_sizes, kernel_sizes, strides=1, paddings=0, dilations=1, name=None):
    """Sum sliding blocks ``[N, C*kh*kw, L]`` back into ``[N, C, H, W]`` (the adjoint of
    ``unfold``): a transposed convolution whose weight picks one kernel tap per channel."""
    op = "fold"
    if x.ndim != 3:
        raise ValueError(f"ddg.nn.functional.fold: x must be [N, C*kh*kw, L], got shape {x.shape}")
    k = _ntuple(kernel_sizes, 2, "kernel_sizes", op)
    s = _ntuple(strides, 2, "strides", op)
    d = _ntuple(dilations, 2, "dilations", op)
    out = [int(v) for v in ((output_sizes,) * 2 if isinstance(output_sizes, int) else output_sizes)]
    p = _pads(paddings, 2, False, op) if not (isinstance(paddings, (list, tuple)) and len(paddings) == 4) else \
        (paddings[0], paddings[2], paddings[1], paddings[3])
    kk = k[0] * k[1]
    n, ck, length = x.shape
    if ck % kk:
        raise ValueError(f"ddg.nn.functional.fold: {ck} channels are not a multiple of the kernel's {kk} taps")
    c = ck // kk
    blocks = [(out[i] + p[2 * i] + p[2 * i + 1] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    if blocks[0] * blocks[1] != length:
        raise ValueError(f"ddg.nn.functional.fold: L = {length} blocks, but output {out}, kernel {list(k)}, stride "
                         f"{list(s)}, padding {list(p)} and dilation {list(d)} give {blocks[0]} x {blocks[1]}")
    w = np.zeros((ck, 1) + k)
    for ch in range(ck):
        w[ch, 0].flat[ch % kk] = 1.0
    y = M.reshape(x, [n, ck] + blocks)
    return conv2d_transpose(y, _const(w, x, x._data.dtype), None, s, p, 0, d, c, output_size=out)


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
    n, c = x.shape[:2]
    total = int(np.prod(out))
    flat_idx = M.reshape(E.cast(indices, "int64"), [n, c, -1])
    if flat_idx._data.size and (int(flat_idx._data.max()) >= total or int(flat_idx._data.min()) < 0):
        raise ValueError(f"ddg.nn.functional.{op}: indices out of range for an output of size {out}")
    base = Tensor._wrap(_xp(x).zeros((n, c, total), dtype=x._data.dtype))
    y = M.put_along_axis(base, flat_idx, M.reshape(x, [n, c, -1]), 2)
    return M.reshape(y, [n, c] + out)


def max_unpool1d(x, indices, kernel_size, stride=None, padding=0, data_format="NCL", output_size=None, name=None):
    return _max_unpool(x, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


def max_unpool2d(x, indices, kernel_size, stride=None, padding=0, data_format="NCHW", output_size=None, name=None):
    return _max_unpool(x, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


def max_unpool3d(x, indices, kernel_size, stride=None, padding=0, data_format="NCDHW", output_size=None, name=None):
    return _max_unpool(x, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")


def temporal_shift(x, seg_num, shift_ratio=0.25, name=None, data_format="NCHW"):
    """Shift a fraction of the channels one segment back and forward in time (TSM): ``x`` is
    ``[N*T, C, H, W]`` with ``T = seg_num``."""
    if x.ndim != 4 or data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"ddg.nn.functional.temporal_shift: needs a 4-D NCHW/NHWC input, got shape {x.shape}")
    if data_format == "NHWC":
        x = M.transpose(x, [0, 3, 1, 2])
    nt, c, h, w = x.shape
    if nt % seg_num:
        raise ValueError(f"ddg.nn.functional.temporal_shift: batch {nt} is not a multiple of seg_num={seg_num}")
    t = seg_num
    y = M.reshape(x, [nt // t, t, c, h, w])
    c1 = int(c * shift_ratio)
    c2 = int(c * 2 * shift_ratio)
    zero = Tensor._wrap(_xp(x).zeros((nt // t, 1, 1, h, w), dtype=x._data.dtype))

    def z(ch):
        return M.broadcast_to(zero, [nt // t, 1, ch, h, w])
    prev = M.concat([z(c1), y[:, :-1, :c1]], 1)                # channel block 1 takes the previous frame
    nxt = M.concat([y[:, 1:, c1:c2], z(c2 - c1)], 1)           # block 2 the next frame
    out = M.reshape(M.concat([prev, nxt, y[:, :, c2:]], 2), [nt, c, h, w])
    return M.transpose(out, [0, 2, 3, 1]) if data_format == "NHWC" else out


def gather_tree(ids, parents):
    """Full beam-search sequences from per-step ``ids`` and ``parents`` ``[T, N, beam]``,
    back-tracking from the last step."""
    if ids.ndim != 3 or ids.shape != parents.shape:
        raise ValueError(f"ddg.nn.functional.gather_tree: ids and parents must be [T, N, beam] of one shape, got "
                         f"{ids.shape} and {parents.shape}")
    a, par = backend.to_host(ids._data), backend.to_host(parents._data)
    t, n, b = a.shape
    out = np.empty_like(a)
    beam = np.tile(np.arange(b), (n, 1))
    rows = np.arange(n)[:, None]
    for step in range(t - 1, -1, -1):
        out[step] = a[step][rows, beam]
        beam = par[step][rows, beam]
    return _const(out, ids)


# -- CTC -----------------------------------------------------------------------------------------------
def ctc_loss(log_probs, labels, input_lengths, label_lengths, blank=0, reduction="mean", norm_by_times=False,
             zero_infinity=False):
    """Connectionist temporal classification loss of ``log_probs`` ``[T, N, C]`` against padded
    ``labels`` ``[N, S]``. As in Paddle, the scores are normalised over the classes first (so
    raw scores and log-softmax outputs give the same loss). ``mean`` divides each sample's loss
    by its label length, then averages."""
    from ...autograd.ops.ctc import CTCLoss
    if log_probs.ndim != 3 or labels.ndim != 2 or labels.shape[0] != log_probs.shape[1]:
        raise ValueError(f"ddg.nn.functional.ctc_loss: needs log_probs [T, N, C] and labels [N, S], got "
                         f"{log_probs.shape} and {labels.shape}")
    il = backend.to_host(input_lengths._data).astype(np.int64).reshape(-1)
    ll = backend.to_host(label_lengths._data).astype(np.int64).reshape(-1)
    lab = backend.to_host(labels._data).astype(np.int64)
    # Paddle (warp-ctc) normalises the scores itself: log_softmax is idempotent on log-probabilities,
    # and on raw scores it gives the loss and the gradient Paddle gives
    loss = CTCLoss(lab, il, ll, int(blank), bool(zero_infinity))(log_softmax(log_probs, axis=-1))
    if norm_by_times:
        loss = E.divide(loss, _const(il.astype(log_probs._data.dtype), loss))
    if reduction == "mean":
        return R.mean(E.divide(loss, _const(np.maximum(ll, 1).astype(log_probs._data.dtype), loss)))
    if reduction == "sum":
        return R.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"ddg.nn.functional.ctc_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


# -- in-place activations ------------------------------------------------------------------------------
def _inplace(name, fn):
    """``F.<name>_(x, ...)``: ``fn`` written into ``x`` (the Tensor API's in-place rule)."""
    return inplace_function(name, fn, inplace_method(name, fn))


elu_ = _inplace("elu", elu)
relu_ = _inplace("relu", E.relu)
tanh_ = _inplace("tanh", E.tanh)
softmax_ = _inplace("softmax", softmax)
leaky_relu_ = _inplace("leaky_relu", leaky_relu)
hardtanh_ = _inplace("hardtanh", hardtanh)
thresholded_relu_ = _inplace("thresholded_relu", thresholded_relu)
