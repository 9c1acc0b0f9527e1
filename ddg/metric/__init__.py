"""``ddg.metric``: Paddle's ``paddle.metric`` (Metric, Accuracy, Precision, Recall, Auc,
and the functional ``accuracy``)."""
from .metrics import Metric, Accuracy, Precision, Recall, Auc, accuracy

__all__ = ["Metric", "Accuracy", "Precision", "Recall", "Auc", "accuracy"]
