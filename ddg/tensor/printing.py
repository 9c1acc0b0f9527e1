"""Paddle-style printing: a header line, then the values as numpy formats them."""
import numpy as np

from . import backend
from .dtypes import bfloat16

_print_opts = {"precision": 8, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": False}


def set_printoptions(precision=None, threshold=None, edgeitems=None, sci_mode=None, linewidth=None):
    for k, v in dict(precision=precision, threshold=threshold, edgeitems=edgeitems, sci_mode=sci_mode,
                     linewidth=linewidth).items():
        if v is not None:
            _print_opts[k] = v


def tensor_repr(t):
    arr = backend.to_host(t._data)
    head = (f"Tensor(shape={list(arr.shape)}, dtype={arr.dtype}, place={t.place!r}, "
            f"stop_gradient={t.stop_gradient},")
    indent = " " * 7
    if arr.dtype == bfloat16:   # numpy formats ml_dtypes' scalars in its own style: show them as floats
        arr = arr.astype(np.float32)
    body = np.array2string(arr, precision=_print_opts["precision"], threshold=_print_opts["threshold"],
                           edgeitems=_print_opts["edgeitems"], max_line_width=_print_opts["linewidth"],
                           separator=", ", prefix=indent,
                           suppress_small=not _print_opts["sci_mode"])
    return f"{head}\n{indent}{body})"
