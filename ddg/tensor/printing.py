"""Paddle-style printing: a header line, then the values laid out as Paddle lays them out.

Paddle's rules (checked against Paddle 3.3.1): floats print with ``precision`` decimals
(8 by default), whole-valued floats as ``3.``, scientific notation only under
``sci_mode``; every element is padded (left-aligned) to the widest one, and when some
element is negative the non-negative ones narrower than that width get a leading space;
tensors with more than ``threshold`` elements show ``edgeitems`` at each end of every
axis around ``...``; a row wraps at ``linewidth`` characters."""
import numpy as np

from . import backend

_print_opts = {"precision": 8, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": False}


def set_printoptions(precision=None, threshold=None, edgeitems=None, sci_mode=None, linewidth=None):
    for k, v in dict(precision=precision, threshold=threshold, edgeitems=edgeitems, sci_mode=sci_mode,
                     linewidth=linewidth).items():
        if v is not None:
            _print_opts[k] = v


def _item(v):
    """One element as text, before padding."""
    if isinstance(v, (np.floating, float)):
        if _print_opts["sci_mode"]:
            return f"{v:.{_print_opts['precision']}e}"
        if np.isfinite(v) and np.ceil(v) == v:
            return f"{v:.0f}."
        if not np.isfinite(v):
            return f"{v}" + ("." if np.isinf(v) else "")
        return f"{v:.{_print_opts['precision']}f}"
    if isinstance(v, (np.complexfloating, complex)):
        p = _print_opts["precision"]
        f = "e" if _print_opts["sci_mode"] else "f"
        sign = "+" if v.imag >= 0 else ""
        return f"({v.real:.{p}{f}}{sign}{v.imag:.{p}{f}}j)"
    return f"{v}"


def _pad(v, width, signed):
    s = _item(v)
    if width <= len(s):
        return s
    if signed and not v < 0:
        return " " + s.ljust(width - 1)
    return s.ljust(width)


def _edges(a, summary):
    """The elements that will be shown (edge items of each axis when summarizing)."""
    e = _print_opts["edgeitems"]
    if a.ndim == 0 or not summary:
        return a
    if a.shape[0] > 2 * e:
        a = np.concatenate([a[:e], a[-e:]])
    return np.stack([_edges(r, summary) for r in a]) if a.ndim > 1 else a


def _layout(a, summary, indent, width, signed):
    e, lw = _print_opts["edgeitems"], _print_opts["linewidth"]
    if a.ndim == 0:
        return _pad(a[()], width, signed)
    n = a.shape[0]
    rows = list(range(n))
    cut = summary and n > 2 * e
    if cut:
        rows = list(range(e)) + [None] + list(range(n - e, n))
    if a.ndim == 1:
        items = ["..." if i is None else _pad(a[i], width, signed) for i in rows]
        per_line = max(1, (lw - indent) // (width + 2))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    parts = ["..." if i is None else _layout(a[i], summary, indent + 1, width, signed) for i in rows]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def format_values(arr, indent):
    """The values of host array ``arr`` as Paddle prints them, continuation lines indented."""
    if arr.dtype.kind in "fV" and arr.dtype.itemsize < 4:
        arr = arr.astype(np.float32)      # float16/bfloat16 print through float32, as in Paddle
    summary = arr.size > _print_opts["threshold"]
    shown = _edges(arr, summary) if arr.size else np.array([])
    width, signed = 0, False
    for v in shown.reshape(-1):
        signed = signed or bool(v < 0)
        width = max(width, len(_item(v)))
    return _layout(arr, summary, indent, width, signed)


def tensor_repr(t):
    arr = backend.to_host(t._data)
    head = (f"Tensor(shape={list(arr.shape)}, dtype={arr.dtype}, place={t.place!r}, "
            f"stop_gradient={t.stop_gradient},")
    indent = 7
    return f"{head}\n{' ' * indent}{format_values(arr, indent)})"
