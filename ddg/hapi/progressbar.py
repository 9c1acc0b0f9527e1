"""The text progress bar of ``ddg.Model`` (the look of Paddle's ``ProgBarLogger``).

``verbose=1``: one bar redrawn in place::

    step 40/125 [=========>....................] - loss: 0.3120 - acc: 0.8830 - ETA: 3s - 28ms/step

When the stream is not a terminal (a log file, a pipe, a CI job), redrawing would
fill it with carriage returns, so only the bar's last state, when it completes, is
written. ``verbose=2`` (and 3): one plain line per update, terminal or not::

    step 40/125 - loss: 0.3120 - acc: 0.8830 - 28ms/step
"""
import os
import shutil
import sys
import time

import numpy as np

__all__ = ["ProgressBar"]


def _fmt_value(v):
    if isinstance(v, np.ndarray) and v.size == 1 and v.dtype.kind in "fV":
        v = v.item()
    if isinstance(v, (float, np.floating)):
        return f" {v:.4f}" if abs(v) > 1e-3 else f" {v:.4e}"
    return f" {v}"


def _fmt_values(values):
    out = ""
    for k, val in values:
        out += f" - {k}:"
        for v in (val if isinstance(val, (list, tuple)) else [val]):
            out += _fmt_value(v)
    return out


def _is_terminal(stream):
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class ProgressBar:
    """A progress bar over ``num`` steps (``None``: unknown length).

    Args:
        num: the number of steps, or None.
        width: the bar's width in characters (at most 60% of the terminal).
        verbose: 1 for the bar, 2 or 3 for one line per update.
        start: start the clock now.
        file: the stream (``sys.stdout`` at the time of each write by default).
        name: the word before the counter (``step``).
    """

    def __init__(self, num=None, width=30, verbose=1, start=True, file=None, name="step"):
        if num is not None and (not isinstance(num, int) or num <= 0):
            raise TypeError(f"ProgressBar: num must be None or a positive int, got {num!r}")
        self._num = num
        cols = shutil.get_terminal_size().columns
        cols = cols if cols > 0 else 80
        self._width = max(1, min(width, min(int(cols * 0.6), cols - 50)))
        self._verbose = verbose
        self._file = file
        self._total_width = 0
        self._start = time.time() if start else None
        self.name = name

    @property
    def file(self):
        return self._file if self._file is not None else sys.stdout

    def start(self):
        self.file.flush()
        self._start = time.time()

    def _dynamic(self):
        f = self.file
        return _is_terminal(f) or "ipykernel" in sys.modules or "PYCHARM_HOSTED" in os.environ

    def update(self, current_num, values=()):
        """Show step ``current_num`` with ``values``, a list of (name, value) pairs."""
        now = time.time()
        if self._start is None:
            self._start = now
        per_unit = (now - self._start) / current_num if current_num else 0.0
        if per_unit >= 1 or per_unit == 0:
            speed = f" - {per_unit:.0f}s/{self.name}"
        elif per_unit >= 1e-3:
            speed = f" - {per_unit * 1e3:.0f}ms/{self.name}"
        else:
            speed = f" - {per_unit * 1e6:.0f}us/{self.name}"
        values = list(values)
        out = self.file
        if self._verbose == 1:
            done = self._num is None or current_num >= self._num
            dynamic = self._dynamic()
            if not dynamic and not done:
                return  # not a terminal: only the finished bar is written
            if self._num is not None:
                digits = len(str(self._num))
                bar = f"{self.name} {current_num:{digits}d}/{self._num} ["
                filled = int(self._width * float(current_num) / self._num)
                if filled > 0:
                    bar += "=" * (filled - 1) + (">" if current_num < self._num else "=")
                bar += "." * (self._width - filled) + "]"
            else:
                bar = f"{self.name} {current_num:3}"
            info = _fmt_values(values)
            if self._num is not None and current_num < self._num:
                eta = int(per_unit * (self._num - current_num))
                if eta > 3600:
                    info += f" - ETA: {eta // 3600}:{(eta % 3600) // 60:02}:{eta % 60:02}"
                elif eta > 60:
                    info += f" - ETA: {eta // 60}:{eta % 60:02}"
                else:
                    info += f" - ETA: {eta}s"
            info += speed
            line = bar + info
            prev = self._total_width
            self._total_width = len(line)
            if prev > len(line):
                line += " " * (prev - len(line))   # wipe the rest of a longer previous line
            out.write(("\r" if dynamic else "") + line + ("\n" if done else ""))
            out.flush()
        elif self._verbose in (2, 3):
            if self._num:
                digits = len(str(self._num))
                count = f"{self.name} {current_num:{digits}d}/{self._num}"
            else:
                count = f"{self.name} {current_num:3}"
            out.write(count + _fmt_values(values) + speed + "\n")
            out.flush()
