"""``ddg.distributed.fleet.utils``: ``recompute`` and ``recompute_sequential``."""
from ..recompute import recompute, recompute_sequential

__all__ = ["recompute", "recompute_sequential"]
