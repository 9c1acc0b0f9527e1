"""Loss scaling: ``GradScaler`` (and Paddle's older ``AmpScaler``, which differs only in
its defaults).

The loss is multiplied by the scale before backward, so that small float16 gradients do
not flush to zero; before the optimizer steps, the gradients are multiplied by
``1 / scale`` and checked for inf/nan. A step whose gradients are not all finite is
skipped (the parameters and the optimizer's state stay as they were) and, with dynamic
scaling, every ``decr_every_n_nan_or_inf`` such steps the scale is multiplied by
``decr_ratio``; every ``incr_every_n_steps`` consecutive finite steps it is multiplied by
``incr_ratio``.

The finite check costs one reduction per gradient array (a sum in float32, which any
inf or nan makes non-finite), their stack, and ONE host synchronization per step, not
one per parameter. Gradients that fill one flat buffer (the fused optimizer step keeps
them so after its first step) count as one array: a multiply and a sum for all of them. Under several MPI
ranks (the world communicator exists and has more than one rank) the flag is all-reduced
(one 4-byte MAX), so every rank skips the same steps even when only one rank's
gradients overflowed (under DataParallel the summed gradients carry an inf to every
rank anyway; the flag also covers parameters outside DataParallel). Every rank must
therefore call ``step``/``minimize`` together, as DataParallel training does anyway.
"""
import warnings
from collections import defaultdict
from enum import Enum

import numpy as np

from ..tensor import backend
from ..tensor.tensor import Tensor
from .auto_cast import _GlobalState

__all__ = ["AmpScaler", "GradScaler", "OptimizerState"]


class OptimizerState(Enum):
    INIT = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state():
    return {"state": OptimizerState.INIT}


def _grads_of(optimizer):
    """The gradient Tensors of the optimizer's parameters (those that have one)."""
    groups = getattr(optimizer, "_param_groups", None)
    if groups:
        params = [p for g in groups for p in g["params"]]
    else:
        params = list(getattr(optimizer, "_parameter_list", None) or ())
    return [p._grad for p in params if p._grad is not None]


def _flat_groups(grads):
    """The gradient arrays, with those that together make up one whole flat buffer (the
    fused optimizer step's gradient storage, see ddg/optimizer/fused.py) replaced by
    that buffer: one array to scale and sum instead of one per parameter."""
    by_base, alone = {}, []
    for g in grads:
        arr = g._data
        base = arr.base
        if base is not None and base.ndim == 1 and base.flags.c_contiguous and arr.dtype == base.dtype:
            by_base.setdefault(id(base), (base, []))[1].append(arr)
        else:
            alone.append(arr)
    out = list(alone)
    for base, arrs in by_base.values():
        if sum(a.size for a in arrs) == base.size and len({id(a) for a in arrs}) == len(arrs):
            out.append(base)  # every element of the buffer is one of these gradients
        else:
            out.extend(arrs)
    return out


def _unscale_and_check(grads, inv_scale):
    """Multiply every gradient by ``inv_scale`` in place; True when any holds inf or nan.
    One reduction per gradient array (a float32 sum: an inf or nan anywhere makes it
    non-finite), where the gradients that fill a flat buffer count as one array; one per
    device for their stack; one host sync per device."""
    sums = {}
    for arr in _flat_groups(grads):
        xp = backend.get_array_module(arr)
        low = arr.dtype.itemsize < 4
        if inv_scale != 1.0:
            # a float32 scalar: the product is rounded once into a half-precision gradient
            xp.multiply(arr, np.float32(inv_scale), out=arr, casting="unsafe")
        s = arr.sum(dtype=np.float32) if low else arr.sum()
        sums.setdefault((type(arr), backend.device_id_of(arr)), []).append(s)
    found = False
    for parts in sums.values():
        xp = backend.get_array_module(parts[0])
        total = xp.stack(parts).sum()
        if not bool(backend.to_host(xp.isfinite(total))):
            found = True
    return found


def _agree(found):
    """Every rank's flag OR-ed: a 4-byte MAX all-reduce when the job has several ranks."""
    from ..parallel.comm import world
    comm = world._WORLD
    if comm is None or comm.size <= 1:
        return found
    flag = np.array([1.0 if found else 0.0], dtype=np.float32)
    comm.allreduce(flag, op="max")
    return bool(flag[0] > 0)


class AmpScaler:
    """Paddle's older loss scaler (init_loss_scaling 2**15, incr_every_n_steps 1000); see
    :class:`GradScaler`."""

    def __init__(self, enable=True, init_loss_scaling=2.0 ** 15, incr_ratio=2.0, decr_ratio=0.5,
                 incr_every_n_steps=1000, decr_every_n_nan_or_inf=1, use_dynamic_loss_scaling=True):
        owner = type(self).__name__
        self._enable = bool(enable)
        self._use_dynamic_loss_scaling = False
        self._init_loss_scaling = 1.0
        self._scale = 1.0
        if self._enable:
            if not incr_ratio > 1.0:
                raise ValueError(f"ddg.amp.{owner}: incr_ratio must be > 1.0, got {incr_ratio}")
            if not decr_ratio < 1.0:
                raise ValueError(f"ddg.amp.{owner}: decr_ratio must be < 1.0, got {decr_ratio}")
            self._init_loss_scaling = init_loss_scaling
            self._scale = float(np.float32(init_loss_scaling))
            self._incr_ratio = incr_ratio
            self._decr_ratio = decr_ratio
            self._incr_every_n_steps = incr_every_n_steps
            self._decr_every_n_nan_or_inf = decr_every_n_nan_or_inf
            self._incr_count = 0
            self._decr_count = 0
            self._use_dynamic_loss_scaling = bool(use_dynamic_loss_scaling)
        self._found_inf = False
        self._cache_found_inf = None
        self._optimizer_states = defaultdict(_fresh_state)

    # -- scaling ----------------------------------------------------------------------------
    def scale(self, var):
        """``var * scale`` (in float32 at least, so a float16 loss cannot overflow here);
        ``var`` itself when the scaler is disabled. As in Paddle, dynamic scaling turns
        itself off (with a warning) when the last ``auto_cast`` asked for a dtype other
        than float16: bfloat16 has float32's range and needs no scaling."""
        if not isinstance(var, Tensor):
            raise TypeError(f"ddg.amp.{type(self).__name__}.scale: needs a Tensor, got {type(var).__name__}")
        if self._enable and _GlobalState.amp_dtype != "float16" and self._use_dynamic_loss_scaling:
            self._enable = False
            self._use_dynamic_loss_scaling = False
            self._init_loss_scaling = 1.0
            warnings.warn(f"ddg.amp.{type(self).__name__}: dynamic loss scaling is not used with "
                          f"{_GlobalState.amp_dtype} (the last auto_cast's dtype); the scaler "
                          f"is disabled")
        if not self._enable:
            return var
        if var._data.dtype.itemsize < 4 and var._data.dtype.kind in "fV":
            var = var.astype("float32")
        out = var * self._scale
        if out._node is not None:    # this scaler checks the gradients: backward need not warn
            out._node.overflow_checked = True
        return out

    def _unscale(self, optimizer):
        if not self._enable:
            return
        state = self._optimizer_states[id(optimizer)]
        if state["state"] is OptimizerState.UNSCALED:
            raise RuntimeError("ddg.amp: unscale_() has already been called on this optimizer since the last "
                               "update()")
        if state["state"] is OptimizerState.STEPPED:
            raise RuntimeError("ddg.amp: unscale_() is being called after step()")
        found = _unscale_and_check(_grads_of(optimizer), 1.0 / self._scale)
        self._found_inf = _agree(found)
        state["state"] = OptimizerState.UNSCALED

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale now (e.g. before clipping them by
        hand); ``step`` then does not divide them again."""
        return self._unscale(optimizer)

    def minimize(self, optimizer, *args, **kwargs):
        """``optimizer.minimize(*args, **kwargs)`` on unscaled gradients, skipped when they
        hold inf/nan; then the scale is updated. Returns what ``minimize`` returns
        (``(None, None)`` for a skipped step)."""
        if not self._enable:
            return optimizer.minimize(*args, **kwargs)
        state = self._optimizer_states[id(optimizer)]
        if state["state"] is OptimizerState.INIT:
            self._unscale(optimizer)
        result = (None, None)
        if self._found_inf:
            self._cache_found_inf = True
        else:
            result = optimizer.minimize(*args, **kwargs)
            self._cache_found_inf = False
        if self._use_dynamic_loss_scaling:
            self._update()
        self._optimizer_states = defaultdict(_fresh_state)
        return result

    def _update(self):
        if not self._enable:
            return
        if self._cache_found_inf:
            self._incr_count = 0
            self._decr_count += 1
            if self._decr_count == self._decr_every_n_nan_or_inf:
                new = float(np.float32(self._scale * self._decr_ratio))
                print(f"ddg.amp: inf or nan in the gradients, step skipped; loss scaling {self._scale} -> {new}")
                self._scale = new
                self._decr_count = 0
        else:
            self._decr_count = 0
            self._incr_count += 1
            if self._incr_count == self._incr_every_n_steps:
                self._scale = float(np.float32(self._scale * self._incr_ratio))
                self._incr_count = 0

    # -- accessors -------------------------------------------------------------------------
    def is_enable(self):
        return self._enable

    def is_use_dynamic_loss_scaling(self):
        return self._use_dynamic_loss_scaling

    def get_init_loss_scaling(self):
        return self._init_loss_scaling

    def set_init_loss_scaling(self, new_init_loss_scaling):
        """Set the initial scale, and the current scale to it."""
        self._init_loss_scaling = new_init_loss_scaling
        self._scale = float(np.float32(new_init_loss_scaling))

    def get_incr_ratio(self):
        return self._incr_ratio

    def set_incr_ratio(self, new_incr_ratio):
        if not new_incr_ratio > 1.0:
            raise ValueError(f"ddg.amp: incr_ratio must be > 1.0, got {new_incr_ratio}")
        self._incr_ratio = new_incr_ratio

    def get_decr_ratio(self):
        return self._decr_ratio

    def set_decr_ratio(self, new_decr_ratio):
        if not new_decr_ratio < 1.0:
            raise ValueError(f"ddg.amp: decr_ratio must be < 1.0, got {new_decr_ratio}")
        self._decr_ratio = new_decr_ratio

    def get_incr_every_n_steps(self):
        return self._incr_every_n_steps

    def set_incr_every_n_steps(self, new_incr_every_n_steps):
        self._incr_every_n_steps = new_incr_every_n_steps

    def get_decr_every_n_nan_or_inf(self):
        return self._decr_every_n_nan_or_inf

    def set_decr_every_n_nan_or_inf(self, new_decr_every_n_nan_or_inf):
        self._decr_every_n_nan_or_inf = new_decr_every_n_nan_or_inf

    # -- state -------------------------------------------------------------------------------
    def state_dict(self):
        """Paddle's keys: ``scale`` (a float32 array of shape [1]), ``incr_ratio``,
        ``decr_ratio``, ``incr_every_n_steps``, ``decr_every_n_nan_or_inf``, ``incr_count``,
        ``decr_count``, ``use_dynamic_loss_scaling``; ``{}`` when disabled."""
        if not self._enable:
            return {}
        return {"scale": np.array([self._scale], dtype=np.float32), "incr_ratio": self._incr_ratio,
                "decr_ratio": self._decr_ratio, "incr_every_n_steps": self._incr_every_n_steps,
                "decr_every_n_nan_or_inf": self._decr_every_n_nan_or_inf, "incr_count": self._incr_count,
                "decr_count": self._decr_count, "use_dynamic_loss_scaling": self._use_dynamic_loss_scaling}

    def load_state_dict(self, state_dict):
        if not self._enable:
            return
        if len(state_dict) == 0:
            raise RuntimeError("ddg.amp: the scaler state dict is empty (was it saved from a disabled scaler?)")
        scale = state_dict["scale"]
        scale = backend.to_host(scale._data) if isinstance(scale, Tensor) else np.asarray(scale)
        self._init_loss_scaling = float(scale.reshape(-1)[0])
        self._scale = float(np.float32(self._init_loss_scaling))

        def plain(v):  # values that went through ddg.save come back as 0-d arrays/Tensors
            if isinstance(v, Tensor):
                v = backend.to_host(v._data)
            return v.item() if isinstance(v, (np.ndarray, np.generic)) else v

        self._incr_ratio = plain(state_dict["incr_ratio"])
        self._decr_ratio = plain(state_dict["decr_ratio"])
        self._incr_every_n_steps = plain(state_dict["incr_every_n_steps"])
        self._decr_every_n_nan_or_inf = plain(state_dict["decr_every_n_nan_or_inf"])
        self._incr_count = plain(state_dict["incr_count"])
        self._decr_count = plain(state_dict["decr_count"])
        self._use_dynamic_loss_scaling = bool(plain(state_dict["use_dynamic_loss_scaling"]))


class GradScaler(AmpScaler):
    """Loss scaling for mixed-precision training (see the module docstring). Typical use::

        scaler = ddg.amp.GradScaler(init_loss_scaling=1024)
        with ddg.amp.auto_cast():
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)      # or scaler.minimize(opt, scaled_loss)
        scaler.update()
        opt.clear_grad()
    """

    def __init__(self, enable=True, init_loss_scaling=2.0 ** 16, incr_ratio=2.0, decr_ratio=0.5,
                 incr_every_n_steps=2000, decr_every_n_nan_or_inf=1, use_dynamic_loss_scaling=True):
        super().__init__(enable, init_loss_scaling, incr_ratio, decr_ratio, incr_every_n_steps,
                         decr_every_n_nan_or_inf, use_dynamic_loss_scaling)

    def step(self, optimizer):
        """``optimizer.step()`` on unscaled gradients, or nothing when they hold inf/nan
        (call ``update()`` after it)."""
        if not self._enable:
            return optimizer.step()
        state = self._optimizer_states[id(optimizer)]
        if state["state"] is OptimizerState.STEPPED:
            raise RuntimeError("ddg.amp: step() has already been called since the last update()")
        if state["state"] is OptimizerState.INIT:
            self._unscale(optimizer)
        if self._found_inf:
            self._cache_found_inf = True
        else:
            optimizer.step()
            self._cache_found_inf = False
        state["state"] = OptimizerState.STEPPED
        if not self._use_dynamic_loss_scaling:
            self._optimizer_states = defaultdict(_fresh_state)

    def update(self):
        """Update the scale from the last step (dynamic scaling only)."""
        if not self._enable:
            return
        if self._use_dynamic_loss_scaling:
            self._update()
            self._optimizer_states = defaultdict(_fresh_state)
