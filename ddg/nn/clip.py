"""Gradient clipping (Paddle's ``ClipGradBy*``), given to an optimizer as ``grad_clip``.

Each is called with a list of ``(param, grad)`` pairs and returns a new list with the
clipped gradients as new Tensors (``param.grad`` itself is not modified). Parameters
with ``need_clip=False`` pass through untouched and do not count in the global norm.
The math runs on raw arrays (no graph), and stays on the device: no host sync on GPUs.
"""
import numbers

from .. import regularizer  # noqa: F401  (ddg.regularizer reachable once ddg.nn is imported)
from ..tensor import backend
from ..tensor.tensor import Tensor

__all__ = ["ClipGradByGlobalNorm", "ClipGradByNorm", "ClipGradByValue", "clip_grad_norm_"]


def _positive(value, what, owner):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"ddg.nn.{owner}: {what} must be a float, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"ddg.nn.{owner}: {what} must be > 0, got {value}")
    return float(value)


def _sum_sq(xp, g):
    """sum(g^2) as a 0-d array, accumulated in at least float32."""
    flat = g.ravel()
    if flat.dtype.itemsize < 4:
        flat = flat.astype("float32")
    return xp.vdot(flat, flat).real if flat.dtype.kind == "c" else xp.vdot(flat, flat)


def _needs_clip(p):
    return getattr(p, "need_clip", True)


class ClipGradBase:
    def __call__(self, params_grads):
        if not isinstance(params_grads, (list, tuple)):
            params_grads = list(params_grads)
        return self._clip(params_grads)

    def _clip(self, params_grads):
        """Clip each gradient on its own with ``_clip_one(array)``, skipping missing
        gradients and parameters with ``need_clip=False``. ClipGradByGlobalNorm, which
        needs all gradients at once, overrides this."""
        out = []
        for p, g in params_grads:
            if g is None or not _needs_clip(p):
                out.append((p, g))
            else:
                out.append((p, Tensor._wrap(self._clip_one(g._data))))
        return out

    def _clip_one(self, a):  # pragma: no cover - abstract
        raise NotImplementedError


class ClipGradByValue(ClipGradBase):
    """Clip every gradient element into ``[min, max]`` (``min`` defaults to ``-max``)."""

    def __init__(self, max, min=None):
        if isinstance(max, bool) or not isinstance(max, numbers.Real):
            raise TypeError(f"ddg.nn.ClipGradByValue: max must be a float, got {type(max).__name__}")
        if min is None:
            if max <= 0:
                raise ValueError(f"ddg.nn.ClipGradByValue: max must be > 0 when min is not given, got {max}")
            min = -max
        if max < min:
            raise ValueError(f"ddg.nn.ClipGradByValue: max ({max}) must be >= min ({min})")
        self.max, self.min = float(max), float(min)

    def _clip_one(self, a):
        return backend.get_array_module(a).clip(a, self.min, self.max)

    def __repr__(self):
        return f"ClipGradByValue(min={self.min}, max={self.max})"


class ClipGradByNorm(ClipGradBase):
    """Per gradient: ``g * clip_norm / ||g||`` where ``||g|| > clip_norm``, else ``g``."""

    def __init__(self, clip_norm):
        self.clip_norm = _positive(clip_norm, "clip_norm", "ClipGradByNorm")

    def _clip_one(self, a):
        xp = backend.get_array_module(a)
        norm = xp.sqrt(_sum_sq(xp, a))
        return a * (self.clip_norm / xp.maximum(norm, self.clip_norm)).astype(a.dtype)

    def __repr__(self):
        return f"ClipGradByNorm(clip_norm={self.clip_norm})"


class ClipGradByGlobalNorm(ClipGradBase):
    """All gradients (of parameters with ``need_clip``) scaled by
    ``clip_norm / max(global_norm, clip_norm)``, with
    ``global_norm = sqrt(sum_i ||g_i||^2)``."""

    def __init__(self, clip_norm, group_name="default_group", auto_skip_clip=False):
        self.clip_norm = _positive(clip_norm, "clip_norm", "ClipGradByGlobalNorm")
        self.group_name = group_name
        self.auto_skip_clip = auto_skip_clip

    def global_norm(self, params_grads):
        """The global norm (a 0-d array on the gradients' device), or None when no
        gradient takes part."""
        total = None
        for p, g in params_grads:
            if g is None or not _needs_clip(p):
                continue
            sq = self.squares(g._data)
            total = sq if total is None else total + sq
        return None if total is None else backend.get_array_module(total).sqrt(total)

    @staticmethod
    def squares(a):
        """``sum(a^2)`` as a 0-d array, in float64 for float64 gradients, else float32."""
        xp = backend.get_array_module(a)
        return _sum_sq(xp, a).astype("float64" if a.dtype == "float64" else "float32")

    def scale(self, norm):
        """The factor every clipped gradient is multiplied by (a 0-d device array)."""
        return self.clip_norm / backend.get_array_module(norm).maximum(norm, self.clip_norm)

    def fuses(self):
        """Whether an optimizer's fused step may apply this clip itself, from one sum of
        squares over its flat gradient buffer (see ddg/optimizer/fused.py): yes, unless a
        subclass changed what clipping does."""
        return type(self)._clip is ClipGradByGlobalNorm._clip and \
            type(self).global_norm is ClipGradByGlobalNorm.global_norm

    def _clip(self, params_grads):
        norm = self.global_norm(params_grads)
        if norm is None:
            return list(params_grads)
        scale = self.scale(norm)
        out = []
        for p, g in params_grads:
            if g is None or not _needs_clip(p):
                out.append((p, g))
                continue
            a = g._data
            out.append((p, Tensor._wrap(a * scale.astype(a.dtype))))
        return out

    def __repr__(self):
        return f"ClipGradByGlobalNorm(clip_norm={self.clip_norm})"


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale the gradients of ``parameters`` in place so that their global
    ``norm_type``-norm is at most ``max_norm``; returns the norm before clipping
    (a 0-d Tensor)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p._grad._data for p in parameters if p._grad is not None]
    max_norm = _positive(max_norm, "max_norm", "clip_grad_norm_")
    norm_type = float(norm_type)
    if not grads:
        return Tensor._wrap(backend.get_array_module().zeros([], dtype="float32"))
    xp = backend.get_array_module(grads[0])
    if norm_type == float("inf"):
        norms = [xp.abs(g).max().astype("float32") for g in grads]
        total = norms[0]
        for n in norms[1:]:
            total = xp.maximum(total, n)
    elif norm_type == 2.0:
        total = xp.sqrt(sum(_sum_sq(xp, g).astype("float32") for g in grads))
    else:
        total = sum((xp.abs(g.astype("float32")) ** norm_type).sum() for g in grads) ** (1.0 / norm_type)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(f"ddg.nn.utils.clip_grad_norm_: the total norm of order {norm_type} is non-finite")
    coef = xp.minimum(max_norm / (total + 1e-6), 1.0)
    for p in parameters:
        if p._grad is not None:
            p._grad._data *= coef.astype(p._grad._data.dtype)
            p._grad._bump()
    return Tensor._wrap(total)
