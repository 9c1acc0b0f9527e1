"""Losses with ``reduction='mean'|'sum'|'none'``, and ``pairwise_distance``. Composites,
except softmax cross-entropy with integer labels, nll_loss, the smooth L1 loss and the
binary cross-entropies of probabilities and of logits, the soft and the multi-class margin
losses, the cosine embedding loss, the p = 2 pairwise distance (primitives, see nn_ops)
and ``ctc_loss`` (ops/ctc.py)."""
import numpy as np

from ...autograd.axes import normalize_axis as _ax
from ...autograd.ops import elementwise as E
from ...autograd.ops import linalg as _L
from ...autograd.ops import logic as _G
from ...autograd.ops import movement as _M
from ...autograd.ops import nn_ops
from ...autograd.ops import reduce as R
from ...autograd.ops.logic import not_equal as _not_equal
from ...autograd.ops.movement import moveaxis as _moveaxis
from ...autograd.ops.movement import squeeze as _squeeze
from ...autograd.ops.movement import transpose as _transpose
from ...autograd.ops.movement import unsqueeze as _unsqueeze  # private: ddg.nn.functional star-imports this module
from ...tensor import backend
from ...tensor.tensor import Tensor
from .activation import log_softmax, softmax
from .common import _const, one_hot


def _reduce(loss, reduction, op):
    if reduction == "mean":
        return R.mean(loss)
    if reduction == "sum":
        return R.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"ddg.nn.functional.{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _weighted_mean(total, denom):
    """``total / max(denom, 1e-12)`` with ``denom`` a 0-d tensor, in ops: the division stays
    on the device (no synchronizing copy to the host per step) and ddg.jit replays it on new
    labels. When every sample is ignored the numerator is 0, so the result is 0."""
    return total / E.maximum(E.cast(denom, total.dtype), 1e-12)


def _sample_weight(label, weight, ignore_index, dtype):
    """Per-sample weights in ops: 0 where the label is ``ignore_index``, else ``weight[label]``
    (1 without class weights); and the labels with ignored ones replaced by 0."""
    valid = _not_equal(label, ignore_index)
    safe = E.where(valid, label, 0)
    w = E.cast(valid, dtype)
    if weight is not None:
        w = w * E.cast(weight.detach()[safe], dtype)
    return w, safe


def _check_same_shape(a, b, op):
    if a.shape != b.shape:
        raise ValueError(f"ddg.nn.functional.{op}: input shape {a.shape} and label shape {b.shape} differ")


def _value_range(t):
    """(min, max) of a Tensor's values as Python floats (nan when any value is nan)."""
    a = t._data
    xp = backend.get_array_module(a)
    if xp.isnan(a).any() if a.dtype.kind in "fc" else False:
        return float("nan"), float("nan")
    return float(xp.min(a)), float(xp.max(a))


def _check_in_unit_interval(t, what, op):
    if t.size == 0:
        return
    lo, hi = _value_range(t)
    if not (lo >= 0 and hi <= 1):
        raise ValueError(f"ddg.nn.functional.{op}: {what} must lie in [0, 1], got values from {lo:g} to {hi:g} "
                         f"({what} shape {t.shape}, dtype {t.dtype})")


def _check_class_labels(label, n_cls, ignore_index, op):
    """Integer class labels in [0, n_cls) or equal to ignore_index."""
    if label.size == 0:
        return
    a = label._data
    xp = backend.get_array_module(a)
    bad = (a < 0) | (a >= n_cls)
    bad &= a != ignore_index
    if bad.any():
        first = xp.asarray(a[bad]).reshape(-1)[:5].tolist()
        raise ValueError(f"ddg.nn.functional.{op}: label values must lie in [0, {n_cls}) (the number of classes) "
                         f"or equal ignore_index={ignore_index}; got {first} (label shape {label.shape})")


def cross_entropy(input, label, weight=None, ignore_index=-100, reduction="mean", soft_label=False,  # noqa: A002
                  axis=-1, use_softmax=True, label_smoothing=0.0, name=None):
    """Softmax cross-entropy of logits ``input`` against integer labels (the input's shape
    without ``axis``, or with size 1 there; float-typed hard labels are cast, as Paddle
    does), or soft labels of the input's shape with ``soft_label=True``.

    ``reduction='mean'`` follows Paddle 3 exactly: with class ``weight`` the sum is
    divided by the total weight of the kept samples; without, by the number of kept
    samples when ``ignore_index >= 0``, but by the number of all samples when
    ``ignore_index`` is negative (the default -100: ignored samples count as zeros).
    ``reduction='none'`` keeps a size-1 class axis where the label had one."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"ddg.nn.functional.cross_entropy: reduction must be 'mean', 'sum' or 'none', "
                         f"got {reduction!r}")
    if input.ndim == 0:
        raise ValueError("ddg.nn.functional.cross_entropy: input must have at least one dimension")
    axis = _ax(axis, input.ndim, "cross_entropy")
    n_cls = input.shape[axis]
    if label.ndim not in (input.ndim, input.ndim - 1):
        raise ValueError(f"ddg.nn.functional.cross_entropy: label shape {label.shape} does not fit input shape "
                         f"{input.shape} (label needs input.ndim or input.ndim - 1 dimensions)")
    if weight is not None and weight.shape[-1] != n_cls:
        raise ValueError(f"ddg.nn.functional.cross_entropy: weight has {weight.shape[-1]} classes, input has "
                         f"{n_cls} along axis {axis}")
    if label_smoothing and not soft_label:
        lab = label if label.ndim < input.ndim else _squeeze(label, axis)
        soft = one_hot(E.cast(lab, "int64") if lab.dtype.kind not in "iu" else lab, n_cls)
        if axis != input.ndim - 1:
            soft = _moveaxis(soft, -1, axis)
        label, soft_label = E.cast(soft, input.dtype), True
    keep_axis = label.ndim == input.ndim  # Paddle's 'none' result keeps a size-1 class axis then
    if soft_label:
        if label.shape != input.shape:
            raise ValueError(f"ddg.nn.functional.cross_entropy: soft label shape {label.shape} differs from input "
                             f"shape {input.shape}")
        if label_smoothing:
            label = label * (1 - label_smoothing) + label_smoothing / n_cls
        logp = log_softmax(input, axis=axis) if use_softmax else E.log(input)
        per = -R.sum(label * logp, axis=axis, keepdim=True)
        w = None
        if weight is not None:
            w = R.sum(label * weight.reshape([n_cls if i == axis else 1 for i in range(input.ndim)]), axis=axis,
                      keepdim=True)
            per = per * w
        if reduction == "mean" and w is not None:
            return _weighted_mean(R.sum(per), R.sum(w))
        return _reduce(per, reduction, "cross_entropy")
    if label.dtype.kind not in "iu":
        if label.dtype.kind not in "fV":
            raise TypeError(f"ddg.nn.functional.cross_entropy: hard labels must be integers, got {label.dtype}")
        a = label._data.astype(np.float64) if label.dtype.kind == "V" else label._data
        if label.size and not bool((backend.get_array_module(a).floor(a) == a).all()):
            raise ValueError(f"ddg.nn.functional.cross_entropy: label has dtype {label.dtype} with values that are "
                             f"not whole numbers, so they are no class indices; give integer labels, or "
                             f"probabilities with soft_label=True")
        label = E.cast(label, "int64")
    if keep_axis:
        if label.shape[axis] != 1:
            raise ValueError(f"ddg.nn.functional.cross_entropy: label shape {label.shape} does not fit input "
                             f"shape {input.shape} (size 1 expected on axis {axis})")
        label = _squeeze(label, axis)
    expect = input.shape[:axis] + input.shape[axis + 1:]
    if label.shape != expect:
        raise ValueError(f"ddg.nn.functional.cross_entropy: label shape {label.shape} does not fit input shape "
                         f"{input.shape} (expected {expect}, or with a 1 inserted at axis {axis})")
    x = input if axis == input.ndim - 1 else _moveaxis(input, axis, -1)
    if not use_softmax:
        per = nll_loss(E.log(x.reshape([-1, n_cls])), label.reshape([-1]), weight, ignore_index, "none")
        per = per.reshape(label.shape)
    else:
        if reduction == "mean" and weight is None and ignore_index < 0 and label.size:
            # Paddle 3: ignored samples (loss 0) still count in N; the mean in the same node
            return nn_ops.SoftmaxCrossEntropy(ignore_index, mean=True)(x, label)
        args = (x, label) if weight is None else (x, label, weight)
        per = nn_ops.SoftmaxCrossEntropy(ignore_index)(*args)
    if reduction == "mean":
        if weight is None and ignore_index < 0:
            return R.mean(per)  # Paddle 3: ignored samples (loss 0) still count in N
        w, _ = _sample_weight(label, weight, ignore_index, per.dtype)
        return _weighted_mean(R.sum(per), R.sum(w))
    if reduction == "none" and keep_axis:
        per = _unsqueeze(per, axis)
    return _reduce(per, reduction, "cross_entropy")


def softmax_with_cross_entropy(logits, label, soft_label=False, ignore_index=-100, numeric_stable_mode=True,
                               return_softmax=False, axis=-1):
    loss = cross_entropy(logits, label, ignore_index=ignore_index, reduction="none", soft_label=soft_label,
                         axis=axis)
    if loss.ndim < logits.ndim:
        loss = _unsqueeze(loss, axis)
    if return_softmax:
        return loss, softmax(logits, axis)
    return loss


def nll_loss(input, label, weight=None, ignore_index=-100, reduction="mean", name=None):  # noqa: A002
    """Negative log-likelihood of log-probabilities ``input`` ``[N, C, ...]`` at integer labels."""
    if label.dtype.kind not in "iu":
        raise TypeError(f"ddg.nn.functional.nll_loss: label must be an integer Tensor of class indices, "
                        f"got dtype {label.dtype}")
    if input.ndim < 2:
        raise ValueError(f"ddg.nn.functional.nll_loss: input must be [N, C, ...] log-probabilities, "
                         f"got shape {input.shape}")
    expect = [input.shape[0]] + list(input.shape[2:])
    if list(label.shape) != expect:
        raise ValueError(f"ddg.nn.functional.nll_loss: label shape {label.shape} does not fit input shape "
                         f"{input.shape} (expected {expect})")
    _check_class_labels(label, input.shape[1], ignore_index, "nll_loss")
    if input.ndim > 2:  # [N, C, d1...] -> [N*d1..., C]
        perm = [0] + list(range(2, input.ndim)) + [1]
        input = _transpose(input, perm).reshape([-1, input.shape[1]])
        label = label.reshape([-1])
    if reduction not in ("mean", "sum", "none"):
        _reduce(input, reduction, "nll_loss")  # raises
    # the labels are an input of the op, not a saved array, so that ddg.jit replays it on new labels
    out = nn_ops.nll_loss(input, label, weight, ignore_index, reduction)
    return out.reshape(expect) if reduction == "none" and len(expect) > 1 else out  # Paddle: [N, d1...]


def mse_loss(input, label, reduction="mean", name=None):  # noqa: A002
    _check_same_shape(input, label, "mse_loss")
    return _reduce(E.square(input - label), reduction, "mse_loss")


def l1_loss(input, label, reduction="mean", name=None):  # noqa: A002
    _check_same_shape(input, label, "l1_loss")
    return _reduce(E.abs(input - label), reduction, "l1_loss")


def smooth_l1_loss(input, label, reduction="mean", delta=1.0, is_huber=True, name=None):  # noqa: A002
    """Huber loss as Paddle defines it: 0.5 d^2 where |d| < delta, else delta(|d| - 0.5 delta);
    with ``is_huber=False`` the smooth L1 loss, the same divided by ``delta``."""
    _check_same_shape(input, label, "smooth_l1_loss")
    if reduction not in ("mean", "sum", "none"):
        _reduce(input, reduction, "smooth_l1_loss")  # raises
    if input.dtype == label.dtype and input.dtype.kind == "f":
        return nn_ops.smooth_l1_loss(input, label, delta, 1.0 if is_huber else 1.0 / delta, reduction)
    d = input - label
    ad = E.abs(d)
    # 0.5 m^2 + delta (|d| - m) with m = min(|d|, delta): the same two branches, without a
    # where (a slow pass in numpy on an unpredictable mask)
    m = E.minimum(ad, float(delta))
    per = 0.5 * m * m + delta * (ad - m)
    if not is_huber:
        per = per / delta
    return _reduce(per, reduction, "smooth_l1_loss")


def binary_cross_entropy(input, label, weight=None, reduction="mean", name=None):  # noqa: A002
    """Binary cross-entropy of probabilities ``input`` against targets ``label``, both in
    [0, 1] (anything else raises ValueError, as in PyTorch: a label of 2 gives a loss that
    means nothing, and Paddle returns it)."""
    _check_same_shape(input, label, "binary_cross_entropy")
    for t, what in ((input, "input"), (label, "label")):
        if t.dtype.kind not in "fV":
            raise TypeError(f"ddg.nn.functional.binary_cross_entropy: {what} must be a floating-point Tensor, "
                            f"got dtype {t.dtype}")
    _check_in_unit_interval(input, "input", "binary_cross_entropy")
    _check_in_unit_interval(label, "label", "binary_cross_entropy")
    eps = 1e-12
    if input.dtype == label.dtype and input.dtype.kind == "f":
        per = nn_ops.binary_cross_entropy(input, label, eps)
    else:
        per = -(label * E.log(E.clip(input, eps, None)) + (1 - label) * E.log(E.clip(1 - input, eps, None)))
    if weight is not None:
        per = per * weight
    return _reduce(per, reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(logit, label, weight=None, reduction="mean", pos_weight=None, name=None):
    """Stable form: max(x, 0) - x*y + log(1 + exp(-|x|)), with optional pos_weight."""
    _check_same_shape(logit, label, "binary_cross_entropy_with_logits")
    if pos_weight is None and logit.dtype == label.dtype and logit.dtype.kind == "f":
        per = nn_ops.sigmoid_cross_entropy(logit, label)
        if weight is not None:
            per = per * weight
        return _reduce(per, reduction, "binary_cross_entropy_with_logits")
    log1pexp = E.log1p(E.exp(-E.abs(logit)))
    if pos_weight is None:
        per = E.relu(logit) - logit * label + log1pexp
    else:
        lw = 1 + (pos_weight - 1) * label
        per = (1 - label) * logit + lw * (log1pexp + E.relu(-logit))
    if weight is not None:
        per = per * weight
    return _reduce(per, reduction, "binary_cross_entropy_with_logits")


def kl_div(input, label, reduction="mean", log_target=False, name=None):  # noqa: A002
    """KL(label || exp(input)) pointwise: label * (log(label) - input). 'batchmean' divides by N."""
    if log_target:
        per = E.exp(label) * (label - input)
    else:
        safe = E.where(label > 0, label, 1.0)
        per = label * (E.log(safe) - input)
    if reduction == "batchmean":
        return R.sum(per) / input.shape[0]
    return _reduce(per, reduction, "kl_div")


def margin_ranking_loss(input, other, label, margin=0.0, reduction="mean", name=None):  # noqa: A002
    return _reduce(E.relu(-label * (input - other) + margin), reduction, "margin_ranking_loss")


def cosine_similarity(x1, x2, axis=1, eps=1e-8):
    num = R.sum(x1 * x2, axis=axis)
    den = E.sqrt(R.sum(x1 * x1, axis=axis)) * E.sqrt(R.sum(x2 * x2, axis=axis))
    return num / E.maximum(den, Tensor._wrap(np.asarray(eps, dtype=x1.dtype)))


def label_smooth(label, prior_dist=None, epsilon=0.1, name=None):
    """``(1 - epsilon) * label + epsilon * prior`` (the uniform 1/C without ``prior_dist``)."""
    if prior_dist is None:
        return label * (1 - epsilon) + epsilon / label.shape[-1]
    return label * (1 - epsilon) + prior_dist * epsilon


def square_error_cost(input, label):  # noqa: A002
    """The elementwise ``(input - label) ** 2`` (no reduction)."""
    return E.square(input - label)


def log_loss(input, label, epsilon=1e-4, name=None):  # noqa: A002
    """The elementwise ``-label * log(input + eps) - (1 - label) * log(1 - input + eps)``."""
    return -label * E.log(input + epsilon) - (1 - label) * E.log(1 - input + epsilon)


def sigmoid_focal_loss(logit, label, normalizer=None, alpha=0.25, gamma=2.0, reduction="sum", name=None):
    """Focal loss on logits: ``alpha_t * (1 - p_t) ** gamma * BCE(logit, label)``, divided
    by ``normalizer`` when given; Paddle's default reduction is 'sum'."""
    _check_same_shape(logit, label, "sigmoid_focal_loss")
    p = E.sigmoid(logit)
    ce = binary_cross_entropy_with_logits(logit, label, reduction="none")
    p_t = p * label + (1 - p) * (1 - label)
    loss = ce * E.pow(1 - p_t, gamma) if gamma else ce
    if alpha is not None and alpha >= 0:
        loss = (alpha * label + (1 - alpha) * (1 - label)) * loss
    if normalizer is not None:
        loss = loss / normalizer
    return _reduce(loss, reduction, "sigmoid_focal_loss")


def soft_margin_loss(input, label, reduction="mean", name=None):  # noqa: A002
    """``log(1 + exp(-label * input))`` with labels in {1, -1}."""
    _check_same_shape(input, label, "soft_margin_loss")
    return _reduce(nn_ops.SoftMarginLoss()(input, E.cast(label, input.dtype)), reduction, "soft_margin_loss")


def hinge_embedding_loss(input, label, margin=1.0, reduction="mean", name=None):  # noqa: A002
    """``input`` where ``label`` is 1, ``max(0, margin - input)`` where it is -1."""
    lab = E.cast(label, input.dtype)
    per = E.where(lab == 1.0, input, 0.0) + E.where(lab == -1.0, E.relu(margin - input), 0.0)
    return _reduce(per, reduction, "hinge_embedding_loss")


def cosine_embedding_loss(input1, input2, label, margin=0, reduction="mean", name=None):
    """``1 - cos(x1, x2)`` where ``label`` is 1, ``max(0, cos(x1, x2) - margin)`` where -1, 0
    for other labels (cosine along the last axis, each squared norm plus 1e-11, as Paddle);
    one op (``nn_ops.CosineEmbeddingLoss``)."""
    op = "cosine_embedding_loss"
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"ddg.nn.functional.{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if label.ndim != 1:
        raise ValueError(f"ddg.nn.functional.{op}: label must be 1-D, got shape {list(label.shape)}")
    if input1.shape != input2.shape or input1.ndim not in (1, 2):
        raise ValueError(f"ddg.nn.functional.{op}: input1 and input2 must have one 1-D or 2-D shape, got "
                         f"{list(input1.shape)} and {list(input2.shape)}")
    if input1.dtype != input2.dtype or input1.dtype.kind not in "fV":
        raise TypeError(f"ddg.nn.functional.{op}: input1 and input2 must have one floating dtype, got "
                        f"{input1.dtype} and {input2.dtype}")
    rows = input1.shape[0] if input1.ndim == 2 else 1
    if label.shape[0] != rows and 1 not in (rows, label.shape[0]):
        raise ValueError(f"ddg.nn.functional.{op}: label {list(label.shape)} does not match the {rows} rows of "
                         f"input1 {list(input1.shape)}")
    return nn_ops.CosineEmbeddingLoss(margin, reduction)(input1, input2, label)


def _pairwise_distance(x, y, p, epsilon):
    if p == 2 and x.shape == y.shape and x.ndim and x.dtype == y.dtype and x.dtype.kind in "fV":
        return nn_ops.PairwiseDistance(epsilon)(x, y)   # one op (the triplet losses' distance)
    d = E.abs(x - y + epsilon)
    if p == float("inf"):
        return R.max(d, axis=-1)
    if p == 1:
        return R.sum(d, axis=-1)
    if p == 2:
        return E.sqrt(R.sum(E.square(d), axis=-1))
    return E.pow(R.sum(E.pow(d, p), axis=-1), 1.0 / p)


def triplet_margin_loss(input, positive, negative, margin=1.0, p=2, epsilon=1e-6, swap=False,  # noqa: A002
                        reduction="mean", name=None):
    """``max(d(a, pos) - d(a, neg) + margin, 0)`` with ``d`` the p-norm distance of
    ``a - b + epsilon``; ``swap`` uses ``min(d(a, neg), d(pos, neg))``."""
    d_pos = _pairwise_distance(input, positive, p, epsilon)
    d_neg = _pairwise_distance(input, negative, p, epsilon)
    if swap:
        d_neg = E.minimum(d_neg, _pairwise_distance(positive, negative, p, epsilon))
    return _reduce(E.relu(d_pos - d_neg + margin), reduction, "triplet_margin_loss")


def multi_label_soft_margin_loss(input, label, weight=None, reduction="mean", name=None):  # noqa: A002
    """``-mean_c(w_c * (y log sigmoid(x) + (1 - y) log sigmoid(-x)))`` per sample."""
    _check_same_shape(input, label, "multi_label_soft_margin_loss")
    lab = E.cast(label, input.dtype)
    if input.dtype.kind == "f":  # -(y log sigmoid(x) + (1 - y) log sigmoid(-x)) = softplus(x) - x y
        per = nn_ops.sigmoid_cross_entropy(input, lab)
    else:
        per = -(lab * _log_sigmoid(input) + (1 - lab) * _log_sigmoid(-input))
    if weight is not None:
        per = per * weight
    return _reduce(R.mean(per, axis=-1), reduction, "multi_label_soft_margin_loss")


def _log_sigmoid(x):
    return -(E.relu(-x) + E.log1p(E.exp(-E.abs(x))))


def pairwise_distance(x, y, p=2.0, epsilon=1e-6, keepdim=False, name=None):
    """The p-norm of ``x - y + epsilon`` over the last axis."""
    if x.shape[-1:] != y.shape[-1:] and y.ndim and x.ndim:
        raise ValueError(f"ddg.nn.functional.pairwise_distance: last dimensions differ: {x.shape} and {y.shape}")
    d = _pairwise_distance(x, y, float(p), epsilon) if p != 0 else \
        R.sum(E.cast(_G.not_equal(E.add(E.subtract(x, y), epsilon), 0), x.dtype), axis=-1)
    return _M.unsqueeze(d, -1) if keepdim else d


def gaussian_nll_loss(input, label, variance, full=False, epsilon=1e-6, reduction="mean", name=None):  # noqa: A002
    """``0.5 * (log(max(var, eps)) + (input - label)^2 / max(var, eps))`` (+ ``0.5 log(2 pi)`` if full)."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"ddg.nn.functional.gaussian_nll_loss: reduction must be 'mean', 'sum' or 'none', "
                         f"got {reduction!r}")
    if variance.ndim == input.ndim - 1:
        variance = _M.unsqueeze(variance, -1)
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
        safe = E.where(_G.greater_than(lab, 1), lab, _const(2.0, lab, lab._data.dtype))
        stirling = E.add(E.subtract(E.multiply(safe, E.log(safe)), safe), E.multiply(E.log(E.multiply(safe, 2 * np.pi)), 0.5))
        loss = E.add(loss, E.where(_G.greater_than(lab, 1), stirling, _const(0.0, lab, lab._data.dtype)))
    return _reduce(loss, reduction, "poisson_nll_loss")


def multi_margin_loss(input, label, p=1, margin=1.0, weight=None, reduction="mean", name=None):  # noqa: A002
    """``sum_{i != y} max(0, margin - x[y] + x[i]) ** p / C`` per sample (times ``weight[y]``)."""
    if p not in (1, 2):
        raise ValueError(f"ddg.nn.functional.multi_margin_loss: p must be 1 or 2, got {p}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"ddg.nn.functional.multi_margin_loss: reduction must be 'mean', 'sum' or 'none', "
                         f"got {reduction!r}")
    op = nn_ops.MultiMarginLoss(p, margin, reduction)
    return op(input, label) if weight is None else op(input, label, weight)


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
    onehot = E.cast(_G.equal(E.cast(label, "int64"), _const(np.arange(c), label, "int64")), input.dtype)
    axes = list(range(1, input.ndim))
    inter = R.sum(E.multiply(input, onehot), axis=axes)
    union = E.add(R.sum(input, axis=axes), R.sum(onehot, axis=axes))
    return R.mean(E.subtract(1.0, E.divide(E.multiply(inter, 2.0), E.add(union, epsilon))))


def npair_loss(anchor, positive, labels, l2_reg=0.002):
    """N-pair loss: softmax cross entropy of anchor-positive similarities against the
    label-equality targets, plus ``l2_reg`` times the embeddings' mean squared norm."""
    lab = _M.reshape(E.cast(labels, "float32"), [-1, 1])
    same = E.cast(_G.equal(lab, _M.transpose(lab, [1, 0])), anchor.dtype)
    target = E.divide(same, R.sum(same, axis=1, keepdim=True))
    l2 = E.multiply(E.add(R.mean(R.sum(E.square(anchor), axis=1)), R.mean(R.sum(E.square(positive), axis=1))),
                    0.25 * l2_reg)
    sim = _L.matmul(anchor, positive, transpose_y=True)
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
    lab = E.cast(_M.reshape(label, [-1]), "int64")
    onehot = _const((np.arange(c)[None, :] == backend.to_host(lab._data)[:, None]).astype(logits._data.dtype), logits)
    cosv = E.clip(logits, -1.0, 1.0)
    theta = E.acos(E.clip(cosv, -1.0 + 1e-7, 1.0 - 1e-7))
    target = E.subtract(E.cos(E.add(E.multiply(theta, margin1), margin2)), margin3)
    z = E.multiply(E.add(E.multiply(cosv, E.subtract(1.0, onehot)), E.multiply(target, onehot)), scale)
    logp = log_softmax(z, axis=1)
    loss = _M.unsqueeze(E.neg(R.sum(E.multiply(logp, onehot), axis=1)), 1)
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
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"ddg.nn.functional.ctc_loss: reduction must be 'mean', 'sum' or 'none', "
                         f"got {reduction!r}")
    # Paddle (warp-ctc) normalises the scores itself: the op's log-softmax is idempotent on
    # log-probabilities, and on raw scores it gives the loss and the gradient Paddle gives
    return CTCLoss(lab, il, ll, int(blank), bool(zero_infinity), reduction, bool(norm_by_times))(log_probs)
