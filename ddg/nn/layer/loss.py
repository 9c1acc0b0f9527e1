"""Loss layers: thin wrappers over ddg.nn.functional."""
from .. import functional as F
from .layers import Layer


class CrossEntropyLoss(Layer):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", soft_label=False, axis=-1,
                 use_softmax=True, label_smoothing=0.0, name=None):
        super().__init__()
        self.weight, self.ignore_index, self.reduction = weight, ignore_index, reduction
        self.soft_label, self.axis, self.use_softmax = soft_label, axis, use_softmax
        self.label_smoothing, self.name = label_smoothing, name

    def forward(self, input, label):  # noqa: A002
        return F.cross_entropy(input, label, self.weight, self.ignore_index, self.reduction, self.soft_label,
                               self.axis, self.use_softmax, self.label_smoothing)


class NLLLoss(Layer):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", name=None):
        super().__init__()
        self._weight, self._ignore_index, self._reduction, self._name = weight, ignore_index, reduction, name

    def forward(self, input, label):  # noqa: A002
        return F.nll_loss(input, label, self._weight, self._ignore_index, self._reduction)


class _Reduced(Layer):
    """A loss with a ``reduction``; it keeps ``name`` as an attribute where Paddle's does."""
    _keeps_name = True

    def __init__(self, reduction="mean", name=None):
        super().__init__()
        if reduction not in ("mean", "sum", "none", "batchmean"):
            raise ValueError(f"ddg.nn.{type(self).__name__}: reduction must be 'mean', 'sum' or 'none', "
                             f"got {reduction!r}")
        self.reduction = reduction
        if self._keeps_name:
            self.name = name


class MSELoss(_Reduced):
    _keeps_name = False

    def forward(self, input, label):  # noqa: A002
        return F.mse_loss(input, label, self.reduction)


class L1Loss(_Reduced):
    def forward(self, input, label):  # noqa: A002
        return F.l1_loss(input, label, self.reduction)


class SmoothL1Loss(_Reduced):
    def __init__(self, reduction="mean", delta=1.0, name=None):
        super().__init__(reduction, name)
        self.delta, self.is_huber = delta, True

    def forward(self, input, label):  # noqa: A002
        return F.smooth_l1_loss(input, label, self.reduction, self.delta, self.is_huber)


class BCELoss(_Reduced):
    def __init__(self, weight=None, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.weight = weight

    def forward(self, input, label):  # noqa: A002
        return F.binary_cross_entropy(input, label, self.weight, self.reduction)


class BCEWithLogitsLoss(_Reduced):
    def __init__(self, weight=None, reduction="mean", pos_weight=None, name=None):
        super().__init__(reduction, name)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, logit, label):
        return F.binary_cross_entropy_with_logits(logit, label, self.weight, self.reduction, self.pos_weight)


class KLDivLoss(_Reduced):
    _keeps_name = False

    def __init__(self, reduction="mean", log_target=False, name=None):
        super().__init__(reduction, name)
        self.log_target = log_target

    def forward(self, input, label):  # noqa: A002
        return F.kl_div(input, label, self.reduction, self.log_target)


class MarginRankingLoss(Layer):
    def __init__(self, margin=0.0, reduction="mean", name=None):
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"ddg.nn.MarginRankingLoss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.margin, self.reduction, self.name = margin, reduction, name

    def forward(self, input, other, label):  # noqa: A002
        return F.margin_ranking_loss(input, other, label, self.margin, self.reduction)


class SoftMarginLoss(_Reduced):
    def forward(self, input, label):  # noqa: A002
        return F.soft_margin_loss(input, label, self.reduction)


class HingeEmbeddingLoss(_Reduced):
    def __init__(self, margin=1.0, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.margin = margin

    def forward(self, input, label):  # noqa: A002
        return F.hinge_embedding_loss(input, label, self.margin, self.reduction)


class CosineEmbeddingLoss(_Reduced):
    def __init__(self, margin=0, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.margin = margin

    def forward(self, input1, input2, label):
        return F.cosine_embedding_loss(input1, input2, label, self.margin, self.reduction)


class TripletMarginLoss(_Reduced):
    def __init__(self, margin=1.0, p=2.0, epsilon=1e-6, swap=False, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.margin, self.p, self.epsilon, self.swap = margin, p, epsilon, swap

    def forward(self, input, positive, negative):  # noqa: A002
        return F.triplet_margin_loss(input, positive, negative, self.margin, self.p, self.epsilon, self.swap,
                                     self.reduction)


class MultiLabelSoftMarginLoss(_Reduced):
    def __init__(self, weight=None, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.weight = weight

    def forward(self, input, label):  # noqa: A002
        return F.multi_label_soft_margin_loss(input, label, self.weight, self.reduction)


class CTCLoss(Layer):
    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__()
        self.blank, self.reduction, self.zero_infinity = blank, reduction, zero_infinity

    def forward(self, log_probs, labels, input_lengths, label_lengths, norm_by_times=False):
        return F.ctc_loss(log_probs, labels, input_lengths, label_lengths, self.blank, self.reduction, norm_by_times,
                          self.zero_infinity)


class GaussianNLLLoss(_Reduced):
    def __init__(self, full=False, epsilon=1e-6, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.full, self.epsilon = full, epsilon

    def forward(self, input, label, variance):  # noqa: A002
        return F.gaussian_nll_loss(input, label, variance, self.full, self.epsilon, self.reduction)


class PoissonNLLLoss(_Reduced):
    def __init__(self, log_input=True, full=False, epsilon=1e-8, reduction="mean", name=None):
        super().__init__(reduction, name)
        self._log_input, self._full, self._epsilon, self._reduction, self._name = \
            log_input, full, epsilon, reduction, name
        del self.reduction, self.name   # Paddle keeps them as _reduction, _name here

    def forward(self, input, label):  # noqa: A002
        return F.poisson_nll_loss(input, label, self._log_input, self._full, self._epsilon, self._reduction)


class MultiMarginLoss(_Reduced):
    def __init__(self, p=1, margin=1.0, weight=None, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.p, self.margin, self.weight = p, margin, weight

    def forward(self, input, label):  # noqa: A002
        return F.multi_margin_loss(input, label, self.p, self.margin, self.weight, self.reduction)


class TripletMarginWithDistanceLoss(_Reduced):
    def __init__(self, distance_function=None, margin=1.0, swap=False, reduction="mean", name=None):
        super().__init__(reduction, name)
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, input, positive, negative):  # noqa: A002
        return F.triplet_margin_with_distance_loss(input, positive, negative, self.distance_function, self.margin,
                                                   self.swap, self.reduction)
