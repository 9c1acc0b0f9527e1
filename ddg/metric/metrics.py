"""Metrics for ``ddg.Model`` and for hand-written loops (Paddle's ``paddle.metric``).

A metric has four steps, as in Paddle:

* ``compute(*outputs_and_labels)`` runs on the batch where it lives (numpy or cupy,
  without leaving the device) and returns what ``update`` needs, as Tensors;
* ``update(*arrays)`` folds one batch (numpy arrays: ``ddg.Model`` moves the results of
  ``compute`` to the host) into the running state and returns the batch's value;
* ``accumulate()`` gives the value over every batch since the last ``reset()``;
* ``name()`` names what ``accumulate`` returns (a list of names for several values).

``accuracy`` is the functional form for one batch.
"""
import abc
import numbers

import numpy as np

from ..tensor import backend
from ..tensor.tensor import Tensor

__all__ = ["Metric", "Accuracy", "Precision", "Recall", "Auc", "accuracy"]


def _host(x, what, owner):
    """A numpy array from a Tensor or numpy value; anything else is an error naming it."""
    if isinstance(x, Tensor):
        return backend.to_host(x._data)
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x)
    raise ValueError(f"{owner}: '{what}' must be a numpy ndarray or a ddg Tensor, got {type(x).__name__}")


def _array(x):
    """The xp array behind a Tensor, numpy array or nested list."""
    if isinstance(x, Tensor):
        return x._data
    if isinstance(x, backend.ARRAY_TYPES):
        return x
    return np.asarray(x)


class Metric(metaclass=abc.ABCMeta):
    """Base class of metrics: subclasses define ``reset``, ``update``, ``accumulate`` and
    ``name``, and may override ``compute`` (the identity by default)."""

    def __init__(self):
        pass

    @abc.abstractmethod
    def reset(self):
        """Forget every batch seen so far."""
        raise NotImplementedError(f"{type(self).__name__}.reset is not implemented")

    @abc.abstractmethod
    def update(self, *args):
        """Fold one batch into the state; return the batch's value."""
        raise NotImplementedError(f"{type(self).__name__}.update is not implemented")

    @abc.abstractmethod
    def accumulate(self):
        """The metric over every batch since the last reset."""
        raise NotImplementedError(f"{type(self).__name__}.accumulate is not implemented")

    @abc.abstractmethod
    def name(self):
        """The metric's name (a list of names where accumulate returns several values)."""
        raise NotImplementedError(f"{type(self).__name__}.name is not implemented")

    def compute(self, *args):
        """Per-batch work on the device before ``update``; the identity by default."""
        return args


class Accuracy(Metric):
    """Top-k classification accuracy.

    Args:
        topk: the k values to report (``(1,)`` by default; ``(1, 5)`` reports top-1
            and top-5).
        name: the name prefix (``'acc'``); with a k above 1 the names are
            ``acc_top1``, ``acc_top5``...

    ``compute(pred, label)`` takes scores of shape ``[..., C]`` and labels of shape
    ``[...]`` or ``[..., 1]`` (class indices) or ``[..., C]`` (one-hot or soft labels,
    whose argmax is the class), and returns a float32 ``[..., max(topk)]`` Tensor whose
    column j is 1 where the label is the (j+1)-th highest score.
    """

    def __init__(self, topk=(1,), name=None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if isinstance(topk, numbers.Integral):
            topk = (topk,)
        topk = tuple(topk)
        if not topk or any(not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 1 for k in topk):
            raise ValueError(f"ddg.metric.Accuracy: topk must be positive ints, got {topk!r}")
        self.topk = topk
        self.maxk = max(topk)
        base = name or "acc"
        self._name = [f"{base}_top{k}" for k in topk] if self.maxk != 1 else [base]
        self.reset()

    def compute(self, pred, label, *args):
        p = _array(pred)
        lab = _array(label)
        xp = backend.get_array_module(p)
        if p.ndim < 1 or p.shape[-1] < self.maxk:
            raise ValueError(f"ddg.metric.Accuracy: pred of shape {list(p.shape)} has fewer than "
                             f"max(topk) = {self.maxk} classes in its last axis")
        if lab.ndim == 1 or (lab.ndim == 2 and lab.shape[-1] == 1):
            lab = lab.reshape(-1, 1)
        elif lab.shape[-1] != 1:
            lab = lab.argmax(axis=-1)[..., None]
        lab = xp.asarray(lab)
        # highest scores first; a stable sort on the negated scores keeps ties in index order
        order = xp.argsort(-p, axis=-1, kind="stable") if xp is np else xp.argsort(-p, axis=-1)
        top = order[..., :self.maxk]
        if top.shape[:-1] != lab.shape[:-1]:
            raise ValueError(f"ddg.metric.Accuracy: pred of shape {list(p.shape)} and label of shape "
                             f"{list(_array(label).shape)} hold different numbers of samples")
        correct = (top == lab.astype(top.dtype)).astype(np.float32)
        return Tensor._wrap(correct)

    def update(self, correct, *args):
        correct = _host(correct, "correct", "ddg.metric.Accuracy.update")
        num_samples = int(np.prod(correct.shape[:-1]))
        accs = []
        for i, k in enumerate(self.topk):
            num_corrects = float(correct[..., :k].sum())
            accs.append(num_corrects / num_samples if num_samples else 0.0)
            self.total[i] += num_corrects
            self.count[i] += num_samples
        return accs[0] if len(self.topk) == 1 else accs

    def reset(self):
        self.total = [0.0] * len(self.topk)
        self.count = [0] * len(self.topk)

    def accumulate(self):
        res = [float(t) / c if c > 0 else 0.0 for t, c in zip(self.total, self.count)]
        return res[0] if len(self.topk) == 1 else res

    def name(self):
        return self._name


def _binary_inputs(preds, labels, owner):
    preds = _host(preds, "preds", owner)
    labels = _host(labels, "labels", owner)
    preds = preds.reshape(preds.shape[0], -1) if preds.ndim > 1 else preds.reshape(-1, 1)
    labels = labels.reshape(labels.shape[0], -1) if labels.ndim > 1 else labels.reshape(-1, 1)
    if preds.shape[1] != 1 or labels.shape[1] != 1:
        raise ValueError(f"{owner}: expects one probability and one 0/1 label per sample (shapes [N] or "
                         f"[N, 1]), got preds {list(preds.shape)} and labels {list(labels.shape)}")
    if preds.shape[0] < labels.shape[0]:
        raise ValueError(f"{owner}: {labels.shape[0]} labels but only {preds.shape[0]} predictions")
    n = labels.shape[0]
    return preds[:n, 0], labels[:, 0]


class Precision(Metric):
    """Binary precision, TP / (TP + FP): ``update(preds, labels)`` with ``preds`` the
    probabilities of the positive class (rounded at 0.5: 0.5 counts as positive) and
    ``labels`` 0 or 1, each of shape ``[N]`` or ``[N, 1]``."""

    def __init__(self, name="precision", *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tp = 0
        self.fp = 0
        self._name = name

    def update(self, preds, labels):
        p, y = _binary_inputs(preds, labels, "ddg.metric.Precision.update")
        positive = np.floor(p + 0.5).astype(np.int32) == 1
        hit = y == 1
        self.tp += int(np.sum(positive & hit))
        self.fp += int(np.sum(positive & ~hit))

    def reset(self):
        self.tp = 0
        self.fp = 0

    def accumulate(self):
        ap = self.tp + self.fp
        return float(self.tp) / ap if ap != 0 else 0.0

    def name(self):
        return self._name


class Recall(Metric):
    """Binary recall, TP / (TP + FN): ``update(preds, labels)`` as for
    :class:`Precision`, except that predictions are rounded half to even (0.5 counts
    as negative), as in Paddle."""

    def __init__(self, name="recall", *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tp = 0
        self.fn = 0
        self._name = name

    def update(self, preds, labels):
        p, y = _binary_inputs(preds, labels, "ddg.metric.Recall.update")
        positive_label = y == 1
        predicted = np.rint(p).astype(np.int32) == 1
        self.tp += int(np.sum(positive_label & predicted))
        self.fn += int(np.sum(positive_label & ~predicted))

    def accumulate(self):
        total = self.tp + self.fn
        return float(self.tp) / total if total != 0 else 0.0

    def reset(self):
        self.tp = 0
        self.fn = 0

    def name(self):
        return self._name


class Auc(Metric):
    """Area under the ROC curve, from histograms of the positive-class probability in
    ``num_thresholds + 1`` buckets.

    ``update(preds, labels)``: ``preds`` of shape ``[N, 2]`` (column 1 is the positive
    class's probability, in [0, 1]), ``labels`` of shape ``[N]`` or ``[N, 1]`` (nonzero
    means positive). ``curve`` is kept for Paddle's signature; like Paddle's, this class
    computes the ROC area whatever it says (``'PR'`` gives the ROC area too).
    """

    def __init__(self, curve="ROC", num_thresholds=4095, name="auc", *args, **kwargs):
        super().__init__(*args, **kwargs)
        if curve not in ("ROC", "PR"):
            raise ValueError(f"ddg.metric.Auc: curve must be 'ROC' or 'PR', got {curve!r}")
        if not isinstance(num_thresholds, numbers.Integral) or num_thresholds < 1:
            raise ValueError(f"ddg.metric.Auc: num_thresholds must be a positive int, got {num_thresholds!r}")
        self._curve = curve
        self._num_thresholds = int(num_thresholds)
        self._name = name
        self.reset()

    def update(self, preds, labels):
        owner = "ddg.metric.Auc.update"
        labels = _host(labels, "labels", owner).reshape(-1)
        preds = _host(preds, "preds", owner)
        if preds.ndim != 2 or preds.shape[1] < 2:
            raise ValueError(f"{owner}: preds must have shape [N, 2] (column 1: the positive class's "
                             f"probability), got {list(preds.shape)}")
        if preds.shape[0] < labels.shape[0]:
            raise ValueError(f"{owner}: {labels.shape[0]} labels but only {preds.shape[0]} predictions")
        value = preds[:labels.shape[0], 1].astype(np.float64)
        if value.size and (value.min() < 0 or value.max() > 1 or np.isnan(value).any()):
            raise ValueError(f"{owner}: the positive-class probabilities must lie in [0, 1], got values in "
                             f"[{value.min()}, {value.max()}]")
        bins = (value * self._num_thresholds).astype(np.int64)
        pos = labels.astype(bool)
        n = self._num_thresholds + 1
        self._stat_pos += np.bincount(bins[pos], minlength=n)[:n]
        self._stat_neg += np.bincount(bins[~pos], minlength=n)[:n]

    @staticmethod
    def trapezoid_area(x1, x2, y1, y2):
        return abs(x1 - x2) * (y1 + y2) / 2.0

    def accumulate(self):
        # walk the thresholds from high to low, adding trapezoids under (FP, TP)
        pos = self._stat_pos[::-1].cumsum()
        neg = self._stat_neg[::-1].cumsum()
        tot_pos, tot_neg = float(pos[-1]), float(neg[-1])
        if tot_pos <= 0.0 or tot_neg <= 0.0:
            return 0.0
        pos_prev = np.concatenate([[0.0], pos[:-1]])
        neg_prev = np.concatenate([[0.0], neg[:-1]])
        auc = float(np.sum(np.abs(neg - neg_prev) * (pos + pos_prev) / 2.0))
        return auc / tot_pos / tot_neg

    def reset(self):
        self._stat_pos = np.zeros(self._num_thresholds + 1)
        self._stat_neg = np.zeros(self._num_thresholds + 1)

    def name(self):
        return self._name


def accuracy(input, label, k=1, correct=None, total=None, name=None):
    """Top-k accuracy of one batch as a float32 0-d Tensor.

    ``input``: scores ``[N, C]``; ``label``: class indices ``[N, 1]`` (Paddle requires the
    trailing 1). ``correct`` and ``total``, if given, are int32 Tensors overwritten in
    place with the number of hits and of samples."""
    scores = _array(input)
    lab = _array(label)
    if scores.ndim != 2:
        raise ValueError(f"ddg.metric.accuracy: input must have shape [N, C], got {list(scores.shape)}")
    if lab.ndim != 2 or lab.shape[1] != 1:
        raise ValueError(f"ddg.metric.accuracy: label must have shape [N, 1], got {list(lab.shape)}")
    if lab.shape[0] != scores.shape[0]:
        raise ValueError(f"ddg.metric.accuracy: input holds {scores.shape[0]} samples but label holds "
                         f"{lab.shape[0]}")
    if not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"ddg.metric.accuracy: k must be a positive int, got {k!r}")
    xp = backend.get_array_module(scores)
    kk = min(int(k), scores.shape[1])
    top = (xp.argsort(-scores, axis=1, kind="stable") if xp is np else xp.argsort(-scores, axis=1))[:, :kk]
    hits = int((top == xp.asarray(lab).astype(top.dtype)).any(axis=1).sum())
    n = int(scores.shape[0])
    for t, v in ((correct, hits), (total, n)):
        if t is not None:
            if not isinstance(t, Tensor):
                raise TypeError(f"ddg.metric.accuracy: correct and total must be ddg Tensors, got {type(t).__name__}")
            t._data = xp.asarray(np.array(v, dtype=np.int32))
            t._bump()
    return Tensor._wrap(xp.asarray(np.float32(hits / n if n else 0.0)))
