"""ddg.hapi: Paddle's high-level API -- ``Model``, callbacks, ``summary`` and ``flops``.

It sits above ddg.io and ddg.parallel (a Model trains data-parallel by itself when
launched on several ranks) and is reached as ``ddg.Model``, ``ddg.callbacks``,
``ddg.summary`` and ``ddg.flops``."""
from . import callbacks
from .dynamic_flops import flops
from .model import Model
from .model_summary import summary

__all__ = ["Model", "callbacks", "summary", "flops"]
