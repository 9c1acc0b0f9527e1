"""The Optimizer base class (Paddle 2.x dygraph semantics).

One ``step()``:

1. takes the (parameter, gradient) pairs of every parameter group, skipping
   parameters that are frozen (``stop_gradient``) or have no gradient;
2. clips them with the group's ``grad_clip`` (Paddle clips per group);
3. adds the coupled weight decay to the gradient: the group's explicit
   ``weight_decay``, else the parameter's own ``regularizer`` (ParamAttr), else the
   optimizer's ``weight_decay`` (a float means ``L2Decay``);
4. runs the subclass's update rule on the raw arrays, in place, with
   ``lr = base lr (float or scheduler) * group['learning_rate'] *
   param.optimize_attr['learning_rate']``, and bumps the parameter's version counter.

No Tensor and no graph node is created per step: updates work on ``p._data`` with
``xp`` (numpy or cupy) and reusable scratch buffers (one flat buffer per slot, dtype
and device, sized for the largest parameter). The optimizer owns its state, a dict
per parameter (keyed by ``id(param)``) of arrays on the parameter's device and of
Python floats (beta powers). ``state_dict()`` names the entries as Paddle does:
``{param.name}_{accumulator}_0`` (e.g. ``linear_0.w_0_moment1_0``), plus
``LR_Scheduler`` when the learning rate is a scheduler.

Master weights (``multi_precision=True``, which ``ddg.amp.decorate(level='O2')`` turns on
for every optimizer): a float16/bfloat16 parameter is updated through a float32 copy
(``_work``), with float32 gradients (cast before clipping, so a global norm cannot
overflow in half precision), float32 accumulators, and the result rounded back into the
parameter's own array. ``state_dict`` names such accumulators as Paddle does,
``{param.name}_fp32_master_0_{accumulator}_0``, and adds ``master_weights`` (a dict of the
float32 copies by parameter name). The copy follows the parameter: if anything other than
the optimizer changes the parameter (``set_value``, a load), the copy is taken afresh.
"""
import numbers
import warnings

import numpy as np

from ..autograd.ops.embedding import forget_sparse_rows
from ..regularizer import WeightDecayRegularizer, _to_regularizer
from ..tensor import backend
from ..tensor.tensor import Tensor
from ..tensor.dtypes import compute_dtype
from .fused import fused_apply, per_element
from .lr import LRScheduler

__all__ = ["Optimizer"]


def _scalar(value, what, owner):
    """A Python float from a number or a one-element Tensor/array."""
    if isinstance(value, Tensor):
        value = backend.to_host(value._data)
    if isinstance(value, (np.ndarray, np.generic)):
        if value.size != 1:
            raise ValueError(f"ddg.optimizer.{owner}: {what} must be a single number, got shape {list(value.shape)}")
        return float(value.reshape(-1)[0])
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"ddg.optimizer.{owner}: {what} must be a float, got {type(value).__name__}")
    return float(value)


def _learning_rate(value, what, owner):
    """A learning rate: a finite float >= 0 (a negative one climbs the loss)."""
    lr = _scalar(value, what, owner)
    if not (lr >= 0 and np.isfinite(lr)):
        raise ValueError(f"ddg.optimizer.{owner}: {what} must be a finite number >= 0, got {lr!r}")
    return lr


class Optimizer:
    """Base class of the optimizers.

    Subclasses set ``_acc_names`` (per-parameter arrays shaped like the parameter),
    ``_scalar_accs`` (per-parameter floats), fill ``self._default_dict`` with their
    hyper-parameters (a parameter group may override each of them) before calling
    ``Optimizer.__init__``, and implement ``_update``.
    """

    _acc_names = ()
    _scalar_accs = ()
    _decoupled_weight_decay = False  # AdamW: group 'weight_decay' is its decoupled coefficient
    _rescale_grad = 1.0              # Momentum's rescale_grad

    def __init__(self, learning_rate=0.001, parameters=None, weight_decay=None, grad_clip=None, name=None):
        owner = type(self).__name__
        if isinstance(learning_rate, LRScheduler):
            self._learning_rate = learning_rate
        else:
            self._learning_rate = _learning_rate(learning_rate, "learning_rate", owner)
        if grad_clip is not None and not callable(grad_clip):
            raise TypeError(f"ddg.optimizer.{owner}: grad_clip must be a ddg.nn.ClipGradBy* object (callable on "
                            f"(param, grad) pairs), got {type(grad_clip).__name__}")
        if isinstance(weight_decay, numbers.Real) and not isinstance(weight_decay, bool) and \
                not (weight_decay >= 0 and np.isfinite(weight_decay)):
            raise ValueError(f"ddg.optimizer.{owner}: weight_decay must be a finite number >= 0, "
                             f"got {weight_decay!r}")
        self._name = name
        self._grad_clip = grad_clip
        self._weight_decay = weight_decay
        self.regularization = None if self._decoupled_weight_decay else _to_regularizer(
            weight_decay, f"ddg.optimizer.{owner}")
        defaults = getattr(self, "_default_dict", {})
        defaults.setdefault("weight_decay", weight_decay)
        defaults.setdefault("grad_clip", grad_clip)
        self._default_dict = defaults
        self._state = {}
        self._bufs = {}
        self._flat = {}         # fused step: flat accumulator buffers per (group, dtype, device)
        self._multi_precision = False  # master weights for float16/bfloat16 parameters (see the docstring)
        self._masters = {}      # id(param) -> [float32 copy, the param array it follows, its version]
        self._use_fused = True  # False: the per-parameter path (the reference the fused one is tested against)
        self._max_numel = {}
        self._param_groups = []
        self._explicit_keys = []
        self._parameter_list = None
        if parameters is not None:
            if isinstance(parameters, Tensor):
                raise TypeError(f"ddg.optimizer.{owner}: parameters must be a list of Parameters (or of dicts), "
                                f"got a single Tensor; wrap it in a list")
            if isinstance(parameters, (set, frozenset)):
                raise TypeError(f"ddg.optimizer.{owner}: parameters must be an ordered list, not a set")
            parameters = list(parameters)
            if parameters and isinstance(parameters[0], dict):
                for group in parameters:
                    self._add_param_group(group)
            else:
                self._add_param_group({"params": parameters}, explicit=False)
            self._parameter_list = [p for g in self._param_groups for p in g["params"]]
            if not self._parameter_list:
                raise ValueError(f"ddg.optimizer.{owner}: parameters is empty (got {parameters!r}); an optimizer "
                                 f"over no parameters would never change anything (pass model.parameters())")

    # -- parameter groups -----------------------------------------------------------------
    def _add_param_group(self, group, explicit=True):
        owner = type(self).__name__
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError(f"ddg.optimizer.{owner}: a parameter group must be a dict with a 'params' list, "
                            f"got {type(group).__name__}")
        group = dict(group)
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"ddg.optimizer.{owner}: parameters must be Parameters/Tensors, "
                                f"got {type(p).__name__}")
            if p._data.dtype.kind not in "fcV":
                raise TypeError(f"ddg.optimizer.{owner}: cannot optimize parameter {getattr(p, 'name', None)!r} "
                                f"of dtype {p._data.dtype}")
        seen = {id(p) for g in self._param_groups for p in g["params"]}
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids) or seen.intersection(ids):
            raise ValueError(f"ddg.optimizer.{owner}: some parameters appear more than once "
                             f"(within or across parameter groups)")
        group["params"] = params
        self._explicit_keys.append(set(group) if explicit else set())
        for key, value in self._default_dict.items():
            group.setdefault(key, value)
        for key in self._default_dict:  # numbers (or one-element Tensors) -> floats, once
            if key not in ("weight_decay", "grad_clip") and isinstance(group[key], Tensor):
                group[key] = _scalar(group[key], key, owner)
        if "learning_rate" in group:
            group["learning_rate"] = _learning_rate(group["learning_rate"], "group learning_rate", owner)
        self._param_groups.append(group)
        if self._parameter_list is not None:
            self._parameter_list.extend(params)

    # -- learning rate --------------------------------------------------------------------
    def get_lr(self):
        """The current base learning rate (a float)."""
        lr = self._learning_rate
        return float(lr()) if isinstance(lr, LRScheduler) else lr

    def set_lr(self, value):
        """Set a float learning rate; not allowed while a scheduler drives it."""
        if isinstance(self._learning_rate, LRScheduler):
            raise RuntimeError(f"ddg.optimizer.{type(self).__name__}.set_lr: the learning rate is driven by "
                               f"{type(self._learning_rate).__name__}; call its step() instead, or "
                               f"set_lr_scheduler() to replace it")
        self._learning_rate = _learning_rate(value, "set_lr value", type(self).__name__)

    def set_lr_scheduler(self, scheduler):
        if not isinstance(scheduler, LRScheduler):
            raise TypeError(f"ddg.optimizer.{type(self).__name__}.set_lr_scheduler: needs an LRScheduler, "
                            f"got {type(scheduler).__name__}")
        self._learning_rate = scheduler

    @property
    def learning_rate(self):
        return self._learning_rate

    # -- the update -----------------------------------------------------------------------
    def _params_grads(self, params):
        return [(p, p._grad) for p in params if not p.stop_gradient and p._grad is not None]

    def _work(self, p):
        """The array the update rule changes for parameter ``p``: its own array, or (master
        weights on, ``p`` float16/bfloat16) its float32 master copy."""
        arr = p._data
        if not self._multi_precision or arr.dtype.name not in _LOW:
            return arr
        m = self._masters.get(id(p))
        if m is None or m[1] is not arr or m[2] != p._vc[0]:
            m = self._masters[id(p)] = [arr.astype(np.float32), arr, p._vc[0]]
        return m[0]

    def _written(self, p, work):
        """After an update of ``work`` (``_work(p)``): round a master copy back into the
        parameter, and bump the parameter's version."""
        if work is not p._data:
            p._data[...] = work
            p._bump()
            self._masters[id(p)][2] = p._vc[0]
        else:
            p._bump()

    def _master_pairs(self, pairs):
        """Master weights: float32 gradients for the float16/bfloat16 parameters."""
        out = []
        for p, g in pairs:
            if g is not None and p._data.dtype.name in _LOW:
                garr = g._data if isinstance(g, Tensor) else g
                g = Tensor._wrap(garr.astype(np.float32))
            out.append((p, g))
        return out

    def step(self):
        """Update every parameter that has a gradient, from its current gradient."""
        if not self._param_groups:
            raise ValueError(f"ddg.optimizer.{type(self).__name__}: built without parameters; pass "
                             f"parameters=model.parameters()")
        lr = self.get_lr()
        for gi, group in enumerate(self._param_groups):
            pairs = self._params_grads(group["params"])
            if pairs:
                self._apply_group(pairs, gi, lr)

    def _apply_group(self, pairs, gi, lr):
        group = self._param_groups[gi]
        fused = self._use_fused and self._fusable()
        if self._multi_precision:
            pairs = self._master_pairs(pairs)
        clip = group.get("grad_clip")
        if clip is not None and not (fused and getattr(clip, "fuses", None) and clip.fuses()):
            pairs = clip(pairs)
            clip = None  # done; else the fused step clips (one reduction over its flat buffer)
        explicit = self._explicit_keys[gi]
        group_reg = _UNSET
        if "weight_decay" in explicit and not self._decoupled_weight_decay:
            group_reg = _to_regularizer(group["weight_decay"], f"ddg.optimizer.{type(self).__name__}")
        group_lr = lr * group.get("learning_rate", 1.0)
        if fused:
            pairs = fused_apply(self, pairs, gi, group, group_lr, group_reg, _UNSET, clip)
        for p, g in pairs:
            if g is None:
                continue
            parr = self._work(p)
            garr = g._data if isinstance(g, Tensor) else g
            if garr.shape != parr.shape:
                raise ValueError(f"ddg.optimizer.{type(self).__name__}: gradient of parameter "
                                 f"{getattr(p, 'name', None)!r} has shape {list(garr.shape)}, the parameter "
                                 f"{list(parr.shape)}")
            half = parr.dtype.itemsize == 2 and parr.dtype.kind in "fV"
            if half:
                # float16/bfloat16 parameters are updated in float32 (their optimizer state is
                # float32: Adam's epsilon 1e-8 and squared gradients underflow float16) and
                # rounded back once; with master weights (multi_precision, ddg.amp.decorate)
                # ``_work`` gave the float32 master copy instead, and this does not apply
                parr = parr.astype(np.float32)
                garr = garr.astype(np.float32)
            elif garr.dtype != parr.dtype:
                garr = garr.astype(parr.dtype)
            reg = group_reg
            if reg is _UNSET:
                reg = getattr(p, "regularizer", None)
                if reg is None:
                    reg = self.regularization
            garr = self._prepare_grad(parr, garr, reg)
            attr = getattr(p, "optimize_attr", None)
            plr = group_lr * attr.get("learning_rate", 1.0) if attr else group_lr
            state = self._state.get(id(p))
            if state is None:
                state = self._state[id(p)] = self._init_state(p, group)
            self._update(p, parr, garr, plr, state, group)
            if half:
                p._data[...] = parr
                p._bump()
            else:
                self._written(p, parr)

    def _prepare_grad(self, p, g, reg):
        """The gradient the update rule sees: ``rescale * g + decay(p)``, in a scratch
        buffer (``p.grad`` is never modified)."""
        scale = self._rescale_grad
        if reg is None and scale == 1.0:
            return g
        xp = backend.get_array_module(p)
        out = self._scratch(p, "grad")
        if scale != 1.0:
            xp.multiply(g, scale, out=out)
        else:
            xp.copyto(out, g)
        if reg is not None:
            if not isinstance(reg, WeightDecayRegularizer):
                reg = _to_regularizer(reg, f"ddg.optimizer.{type(self).__name__}")
            if reg is not None and reg.coeff:
                reg._add_to(xp, p, out, self._scratch(p, "reg"))
        return out

    def _scratch(self, p, slot):
        """A reusable scratch array shaped like parameter array ``p`` (contents undefined)."""
        xp = backend.get_array_module(p)
        key = (slot, p.dtype.str, backend.device_id_of(p))
        buf = self._bufs.get(key)
        if buf is None or buf.size < p.size:
            need = max(p.size, self._largest(key[1:]))
            if backend.is_gpu_array(p):
                with xp.cuda.Device(key[2]):
                    buf = xp.empty(need, dtype=p.dtype)
            else:
                buf = xp.empty(need, dtype=p.dtype)
            self._bufs[key] = buf
        return buf[:p.size].reshape(p.shape)

    def _largest(self, key):
        if key not in self._max_numel:
            sizes = [q._data.size for q in (self._parameter_list or ())
                     if q._data.dtype.str == key[0] and backend.device_id_of(q._data) == key[1]]
            self._max_numel[key] = max(sizes, default=0)
        return self._max_numel[key]

    def _zeros_like(self, p, fill=0.0):
        """State for parameter array ``p``: float32 for float16/bfloat16 parameters."""
        xp = backend.get_array_module(p)
        dtype = compute_dtype(p.dtype)
        if backend.is_gpu_array(p):
            with xp.cuda.Device(p.device.id):
                return xp.full(p.shape, fill, dtype=dtype)
        return xp.full(p.shape, fill, dtype=dtype)

    def _init_state(self, param, group):
        """Fresh state for a parameter: zero arrays for ``_acc_names`` and the scalars."""
        work = self._work(param)
        state = {name: self._zeros_like(work) for name in self._acc_names}
        state.update(self._init_scalars(group))
        return state

    def _init_scalars(self, group):
        return {}

    # The update rule, written once for both paths, in place and without temporaries:
    # ``_rule(xp, p, g, acc, s, lr, group)`` with ``p``/``g`` the parameter and gradient
    # arrays (one parameter's, or a group's flat buffers), ``acc`` the accumulator arrays
    # by name (the parameter's state dict, or the group's flat buffers), ``s`` a scratch
    # array shaped like ``p``, and ``lr`` a float or a per-element array (the fused path's
    # per-parameter rates). An optimizer whose rule has per-parameter scalar state (Adam's
    # beta powers) overrides ``_update``/``_fused_update`` instead; one with neither
    # (Lamb's per-tensor trust ratio) is updated parameter by parameter only.
    _rule = None

    def _update(self, param, p, g, lr, state, group):
        self._rule(backend.get_array_module(p), p, g, state, self._scratch(p, 0), lr, group)

    def _fused_update(self, params, p, g, lrs, states, flat, group, xp):
        """One group's update over its flat buffers (see fused.py): ``g`` may be modified,
        ``states`` are the per-parameter state dicts (their arrays views of ``flat.flat``)."""
        self._rule(xp, p, g, flat.flat, flat.s, per_element(xp, lrs, flat, p), group)

    @classmethod
    def _fusable(cls):
        """Whether the fused path applies: the rule is a ``_rule``, or the class that
        defines ``_update`` defines ``_fused_update`` too (so a subclass that overrides
        only ``_update`` never runs its parent's fused update)."""
        owner = next(k for k in cls.__mro__ if "_update" in vars(k))
        if owner is Optimizer:
            return cls._rule is not None
        return "_fused_update" in vars(owner)

    # -- Paddle API around step -------------------------------------------------------------
    def clear_grad(self, set_to_zero=True):
        """Zero every parameter's gradient in place (or drop it with set_to_zero=False)."""
        params = self._parameter_list or ()
        forget_sparse_rows(params)   # the rows sparse embedding lookups recorded (Adam's lazy_mode)
        if set_to_zero and self._flat:
            # gradients the fused step adopted into flat storage: one fill per buffer
            done = set()
            for flat in self._flat.values():
                done.update(id(p) for p in flat.zero_grads())
            params = [p for p in params if id(p) not in done]
        for p in params:
            p.clear_grad(set_to_zero)

    clear_gradients = clear_grad

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        """Dygraph ``minimize``: update from the gradients already computed by
        ``loss.backward()`` (it does not run backward). Returns ``([], params_grads)``."""
        if parameters is None:
            self.step()
            params = self._parameter_list or []
            return [], self._params_grads(params)
        params = [p for p in parameters if not isinstance(p, str)]
        if no_grad_set:
            skip = {id(x) for x in no_grad_set if isinstance(x, Tensor)}
            names = {x for x in no_grad_set if isinstance(x, str)}
            params = [p for p in params if id(p) not in skip and getattr(p, "name", None) not in names]
        pairs = self._params_grads(params)
        owned = {id(p): gi for gi, g in enumerate(self._param_groups) for p in g["params"]}
        if not owned:  # built without parameters: adopt these as one group
            self._add_param_group({"params": params}, explicit=False)
            self._parameter_list = list(params)
            owned = {id(p): 0 for p in params}
        lr = self.get_lr()
        by_group = {}
        for pair in pairs:
            if id(pair[0]) not in owned:
                raise ValueError(f"ddg.optimizer.{type(self).__name__}.minimize: parameter "
                                 f"{getattr(pair[0], 'name', None)!r} is not managed by this optimizer")
            by_group.setdefault(owned[id(pair[0])], []).append(pair)
        for gi, group_pairs in by_group.items():
            self._apply_group(group_pairs, gi, lr)
        return [], pairs

    # -- state ------------------------------------------------------------------------------
    def _state_keys(self, prefix):
        return [f"{prefix}_{n}_0" for n in self._acc_names], [f"{prefix}_{n}_0" for n in self._scalar_accs]

    def state_dict(self):
        """The optimizer's state: accumulators by Paddle's names (Tensors sharing the
        optimizer's arrays; scalars as shape-[1] float64 Tensors) and ``LR_Scheduler``."""
        out = {}
        masters = {}
        for p in self._parameter_list or ():
            state = self._state.get(id(p))
            if state is None:
                continue
            prefix = p.name
            m = self._masters.get(id(p))
            if m is not None and p._data.dtype.name in _LOW:
                prefix += _MASTER
                masters[p.name] = Tensor._wrap(m[0])
            arrays, scalars = self._state_keys(prefix)
            for key, name in zip(arrays, self._acc_names):
                out[key] = Tensor._wrap(state[name])
            for key, name in zip(scalars, self._scalar_accs):
                out[key] = Tensor._wrap(np.array([state[name]], dtype=np.float64))
        if masters:
            out["master_weights"] = masters
        if isinstance(self._learning_rate, LRScheduler):
            out["LR_Scheduler"] = self._learning_rate.state_dict()
        return out

    def set_state_dict(self, state_dict):
        """Restore a ``state_dict()``: values are copied into fresh state on each
        parameter's device. Entries are matched by parameter name; when none of the
        names match (a model rebuilt in the same process gets new names) they are
        matched by position, which needs the same trainable parameters in the same order."""
        owner = type(self).__name__
        if not isinstance(state_dict, dict):
            raise TypeError(f"ddg.optimizer.{owner}.set_state_dict: needs a dict, got {type(state_dict).__name__}")
        if "LR_Scheduler" in state_dict and isinstance(self._learning_rate, LRScheduler):
            self._learning_rate.set_state_dict(state_dict["LR_Scheduler"])
        names = self._acc_names + self._scalar_accs
        prefixes = {}
        for key in state_dict:
            if not isinstance(key, str):
                continue
            for n in names:
                suffix = f"_{n}_0"
                if key.endswith(suffix):
                    prefixes.setdefault(key[:-len(suffix)], None)
                    break
        prefixes = list(prefixes)
        params = list(self._parameter_list or ())
        by_name = {p.name: p for p in params}

        def pname(prefix):  # the parameter name in a key prefix (master-weight keys have a suffix)
            return prefix[:-len(_MASTER)] if prefix.endswith(_MASTER) else prefix

        matched = [(by_name[pname(x)], x) for x in prefixes if pname(x) in by_name]
        if len(matched) < len(prefixes):
            used = {x for _, x in matched}
            left_p = [p for p in params if p.name not in {pname(x) for x in used}]
            left_x = [x for x in prefixes if x not in used]
            # by position: among the parameters that train (those with state: not BatchNorm's
            # running statistics, which are parameters too), else among all of them
            trained = [p for p in left_p if not p.stop_gradient]
            by_pos = trained if len(trained) == len(left_x) else left_p
            if not matched and len(left_x) == len(by_pos):
                matched = list(zip(by_pos, left_x))
            else:
                warnings.warn(f"ddg.optimizer.{owner}.set_state_dict: no parameter for the saved state of "
                              f"{left_x[:5]}{'...' if len(left_x) > 5 else ''}; that state is ignored")
        group_of = {id(p): g for g in self._param_groups for p in g["params"]}
        saved_masters = state_dict.get("master_weights") or {}
        by_prefix = {x: p for p, x in matched}
        for key, value in saved_masters.items():
            p = by_name.get(key)
            if p is None:
                p = by_prefix.get(key + _MASTER)
            if p is None:
                continue
            value = value._data if isinstance(value, Tensor) else value
            xp = backend.get_array_module(p._data)
            value = (backend.to_host(value) if xp is np else xp.asarray(value)).astype(np.float32)
            if tuple(value.shape) != tuple(p._data.shape):
                raise ValueError(f"ddg.optimizer.{owner}.set_state_dict: master weight {key} has shape "
                                 f"{list(value.shape)}, parameter {p.name!r} has shape {list(p._data.shape)}")
            self._masters[id(p)] = [value, p._data, p._vc[0]]
        for p, prefix in matched:
            state = self._init_state(p, group_of[id(p)])
            arrays, scalars = self._state_keys(prefix)
            xp = backend.get_array_module(p._data)
            for key, name in zip(arrays, self._acc_names):
                if key not in state_dict:  # e.g. an accumulator this variant adds (amsgrad): keep it fresh
                    continue
                value = state_dict[key]
                value = value._data if isinstance(value, Tensor) else value
                value = backend.to_host(value) if xp is np else xp.asarray(value)
                if tuple(value.shape) != tuple(state[name].shape):
                    raise ValueError(f"ddg.optimizer.{owner}.set_state_dict: {key} has shape {list(value.shape)}, "
                                     f"parameter {p.name!r} has shape {list(p._data.shape)}")
                state[name][...] = value
            for key, name in zip(scalars, self._scalar_accs):
                if key in state_dict:
                    state[name] = _scalar(state_dict[key], key, owner)
            self._state[id(p)] = state

    set_dict = set_state_dict

    def __repr__(self):
        n = len(self._parameter_list or ())
        return f"{type(self).__name__}(learning_rate={self._learning_rate!r}, parameters={n})"


class _Unset:
    def __repr__(self):
        return "<unset>"


_UNSET = _Unset()
_LOW = ("float16", "bfloat16")
_MASTER = "_fp32_master_0"
