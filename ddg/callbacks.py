"""``ddg.callbacks``: the callbacks of ``ddg.Model`` (Paddle's ``paddle.callbacks``);
defined in :mod:`ddg.hapi.callbacks`."""
from .hapi.callbacks import (Callback, ProgBarLogger, ModelCheckpoint, VisualDL, LRScheduler,  # noqa: F401
                             EarlyStopping, ReduceLROnPlateau, WandbCallback, ElasticCheckpoint)

__all__ = ["Callback", "ProgBarLogger", "ModelCheckpoint", "VisualDL", "LRScheduler", "EarlyStopping",
           "ReduceLROnPlateau", "WandbCallback", "ElasticCheckpoint"]
