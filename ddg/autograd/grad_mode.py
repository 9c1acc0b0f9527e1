"""Grad modes: whether ops record graph nodes. One process-wide switch (ops read it on
every call, so it is an interception slot of ddg/dispatch.py, a one-element list,
rather than a thread-local)."""
import functools

from .. import dispatch

_enabled = dispatch.GRAD_ENABLED


def is_grad_enabled():
    return _enabled[0]


class _GradMode:
    """Context manager and decorator that sets grad mode to ``_target`` and restores it."""
    _target = True

    def __init__(self):
        self._prev = []

    # grad mode flips on the op path (every no_grad block, the engine), so it writes its
    # slot directly instead of through dispatch.install: the same effect, one call less
    def __enter__(self):
        self._prev.append(_enabled[0])
        _enabled[0] = self._target
        return self

    def __exit__(self, *exc):
        _enabled[0] = self._prev.pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """No graph is recorded inside; in-place updates of parameters are allowed.
    Use as ``with ddg.no_grad():``, ``@ddg.no_grad()`` or ``@ddg.no_grad``."""
    _target = False

    def __new__(cls, fn=None):
        self = super().__new__(cls)
        if callable(fn):
            self.__init__()
            return _GradMode.__call__(self, fn)
        return self

    def __init__(self, fn=None):
        super().__init__()


class enable_grad(_GradMode):
    _target = True


class set_grad_enabled(_GradMode):
    """``with set_grad_enabled(False):`` or, as in PyTorch, a plain call that switches now."""

    def __init__(self, mode=True):
        super().__init__()
        self._target = bool(mode)
        self._prev.append(_enabled[0])
        _enabled[0] = self._target

    def __enter__(self):
        return self
