"""``ddg.set_flags`` / ``ddg.get_flags``: Paddle's global switches, by Paddle's names.

    ddg.set_flags({"FLAGS_check_nan_inf": True})   # every op checks its outputs (and,
                                                    # in backward, its gradients)
    ddg.get_flags("FLAGS_check_nan_inf")            # {"FLAGS_check_nan_inf": True}
    ddg.get_flags(["FLAGS_check_nan_inf"])          # the same

As in Paddle, ``get_flags`` takes a name or a list/tuple of names and returns a dict,
and a name ddg does not know raises ValueError.

Supported flags:

``FLAGS_check_nan_inf`` (bool, default False): an op whose forward output or backward
gradient holds a nan or an inf raises RuntimeError naming the op, the tensor's shape
and dtype (eager ops and the ops a ``to_static`` program replays); under DataParallel the gradients after the all-reduce are checked as well
(every rank holds the same values, so every rank raises together, naming the
parameters). Off, it costs one boolean test per op.
"""

import numpy as np

from . import dispatch

__all__ = ["set_flags", "get_flags"]

# The switch ddg.autograd.function reads on every op: an interception slot of
# ddg/dispatch.py (a one-element list: reading it is one index).
check_nan_inf = dispatch.CHECK_NAN_INF

_BOOL_FLAGS = {"FLAGS_check_nan_inf": check_nan_inf}


def _known():
    return ", ".join(sorted(_BOOL_FLAGS))


def set_flags(flags):
    """Set global flags from a dict ``{name: value}`` (Paddle's ``paddle.set_flags``)."""
    if not isinstance(flags, dict):
        raise TypeError(f"ddg.set_flags: flags must be a dict of {{name: value}}, got {type(flags).__name__}")
    for name, value in flags.items():
        if name not in _BOOL_FLAGS:
            raise ValueError(f"ddg.set_flags: unknown flag {name!r}; ddg knows {_known()}")
        if not isinstance(value, (bool, int, np.bool_)):
            raise TypeError(f"ddg.set_flags: {name} takes a bool, got {value!r}")
    for name, value in flags.items():
        dispatch.install(_BOOL_FLAGS[name], bool(value))


def get_flags(flags):
    """The values of the named flags as a dict (Paddle's ``paddle.get_flags``): ``flags``
    is one name or a list/tuple of names."""
    if isinstance(flags, str):
        flags = [flags]
    elif not isinstance(flags, (list, tuple)):
        raise TypeError(f"ddg.get_flags: flags must be a str or a list/tuple of str, got {type(flags).__name__}")
    out = {}
    for name in flags:
        if name not in _BOOL_FLAGS:
            raise ValueError(f"ddg.get_flags: unknown flag {name!r}; ddg knows {_known()}")
        out[name] = _BOOL_FLAGS[name][0]
    return out
