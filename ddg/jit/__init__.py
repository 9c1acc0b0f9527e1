"""``ddg.jit``: ``to_static`` (record a function once per input signature, replay the
recording afterwards) and ``save`` / ``load`` of recorded inference graphs."""
from .static_function import (StaticFunction, enable_to_static, ignore_module, not_to_static,  # noqa: F401
                              to_static)
from .serialize import TranslatedLayer, load, save  # noqa: F401

__all__ = ["to_static", "not_to_static", "save", "load", "TranslatedLayer", "StaticFunction", "enable_to_static",
           "ignore_module"]
