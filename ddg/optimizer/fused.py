"""The fused optimizer step: one group's parameters updated with whole-buffer array calls.

Per step and parameter group (all parameters of one dtype and device), instead of ~10
array calls per parameter:

1. the parameters are gathered into one flat buffer and the gradients into another
   (one ``concatenate`` each);
2. the accumulators (moments, velocity, ...) already live in flat buffers owned by the
   optimizer; each parameter's state entry is a view of them, so ``state_dict`` keeps
   Paddle's per-parameter names and shapes;
3. the update rule runs once over the flat buffers; per-parameter scalars (the learning
   rate with ``optimize_attr``/``lr_ratio``, AdamW's decay factor, Adam's bias
   corrections) become per-element coefficient buffers (one ``repeat``) when they differ
   between parameters, plain scalars when they do not;
4. the flat parameter buffer is written back into each ``param._data`` in place.

Parameters are never rebound to views of the flat buffer: every step reads the current
``param._data``, so anything that replaces it (``set_value``, ``to``, casting,
DataParallel's broadcast, user code) is simply picked up. Only the optimizer's own state
is flat; it is checked by identity each step (a ``set_state_dict`` or a changed set of
parameters with gradients rebuilds the flat state from the per-parameter arrays).

Elementwise operations are the same, in the same order and dtype, as in the
per-parameter path, so results are bit-identical to it. What the fused path does not
cover falls back to the per-parameter path (``Optimizer._update``): parameters of
several dtypes/devices in one group, parameters with different regularizers in one
group, optimizers without a ``_fused_update`` (Lamb: its trust ratio is per tensor),
and on the CPU the parameters of ``CPU_FUSE_MAX_NUMEL`` elements or more (see there).
With master weights (``multi_precision``) the flat buffers hold the float32 master
copies (``Optimizer._work``), which are then rounded back into each parameter.
"""
import numpy as np

from ..tensor import backend
from ..tensor.tensor import Tensor


class FlatState:
    """Flat buffers for one ordered list of parameters of a group: the accumulators (each
    parameter's state entries are views of them), and reusable buffers for the gathered
    parameters, gradients and one scratch."""

    def __init__(self, opt, params, states, xp, dtype):
        self.ids = tuple(id(p) for p in params)
        self.shapes = [p._data.shape for p in params]
        self.sizes = [p._data.size for p in params]
        self.total = sum(self.sizes)
        offs = [0]
        for n in self.sizes:
            offs.append(offs[-1] + n)
        self.offsets = offs
        self.states = list(states)

        def buffer():
            return xp.empty(self.total, dtype=dtype)

        def views(buf):
            return [buf[offs[i]:offs[i + 1]].reshape(shape) for i, shape in enumerate(self.shapes)]

        self.flat = {}
        self.views = {}
        for name in opt._acc_names:
            buf = buffer()
            vs = views(buf)
            for v, st in zip(vs, states):
                v[...] = st[name]
                st[name] = v
            self.flat[name] = buf
            self.views[name] = vs
        self.p, self.g, self.s = buffer(), buffer(), buffer()
        self.pviews = views(self.p)
        # the arrays last gathered, and their 1-D views (reused while the array is the same object)
        n = len(params)
        self.psrc, self.plist = [None] * n, [None] * n
        self.gsrc, self.glist = [None] * n, [None] * n

    def valid(self, opt, params):
        if len(params) != len(self.ids):
            return False
        state = opt._state
        for i, p in enumerate(params):
            if id(p) != self.ids[i]:
                return False
            st = state.get(id(p))
            if st is not self.states[i]:
                return False
            for name, views in self.views.items():
                if st.get(name) is not views[i]:
                    return False
        return True

    def gather(self, xp, arrays, src, lst, out):
        """``out[:] = concatenate(ravel(a) for a in arrays)`` in one call; the 1-D views
        are cached per array object (only for contiguous arrays, whose ravel is a view)."""
        shapes = self.shapes
        for i, a in enumerate(arrays):
            if src[i] is not a:
                if a.shape != shapes[i]:
                    return False
                r = a.reshape(-1)
                src[i] = a if a.flags.c_contiguous else None
                lst[i] = r
        xp.concatenate(lst, out=out)
        return True


def per_element(xp, values, flat, like):
    """A scalar when every parameter's value is the same, else a per-element buffer of
    ``like``'s dtype (each parameter's value repeated over its elements)."""
    first = values[0]
    if all(v == first for v in values):
        return first
    arr = np.repeat(np.asarray(values, dtype=like.dtype), flat.sizes)
    return arr if xp is np else xp.asarray(arr)


# On the CPU, parameters at least this large are updated one by one: their update is
# already made of few, long calls, and gathering them into a flat buffer adds copies
# (and a buffer beyond the caches) that cost more than the calls saved. Adam over 100
# parameters of n elements, per-parameter / fused: n=1024 3.4x, 4096 1.9x, 8192 0.88x,
# 16384 0.63x (and 4 x [1024, 1024] 0.5x). On the GPU every parameter is fused.
CPU_FUSE_MAX_NUMEL = 1 << 12


def fused_apply(opt, pairs, gi, group, group_lr, group_reg, unset):
    """Update ``pairs`` of group ``gi`` with whole-buffer calls; returns the pairs left
    for the per-parameter path (all of them when the group cannot be fused)."""
    p0 = opt._work(pairs[0][0])  # the parameter's array, or its float32 master copy
    dtype = p0.dtype
    atype = type(p0)
    gpu = atype is not np.ndarray
    dev = backend.device_id_of(p0)
    params, parrs, garrs, lrs, rest = [], [], [], [], []
    reg0 = unset
    for p, g in pairs:
        if g is None:
            continue
        parr = opt._work(p)
        if not gpu and parr.size >= CPU_FUSE_MAX_NUMEL:
            rest.append((p, g))
            continue
        garr = g._data if isinstance(g, Tensor) else g
        if type(parr) is not atype or type(garr) is not atype or parr.dtype != dtype or garr.dtype != dtype \
                or garr.shape != parr.shape:
            return pairs
        if gpu and (backend.device_id_of(parr) != dev or backend.device_id_of(garr) != dev):
            return pairs
        reg = group_reg
        if reg is unset:
            reg = getattr(p, "regularizer", None)
            if reg is None:
                reg = opt.regularization
        if reg0 is unset:
            reg0 = reg
        elif reg is not reg0:
            return pairs
        attr = getattr(p, "optimize_attr", None)
        lrs.append(group_lr * attr.get("learning_rate", 1.0) if attr else group_lr)
        params.append(p)
        parrs.append(parr)
        garrs.append(garr)
    if not params:
        return rest
    xp = backend.get_array_module(p0)
    reg = reg0

    # state: per-parameter dicts whose arrays are views of flat buffers
    key = (gi, dtype.str, dev)
    flat = opt._flat.get(key)
    for attempt in (0, 1):
        if attempt or flat is None or not flat.valid(opt, params):
            states = []
            for p in params:
                st = opt._state.get(id(p))
                if st is None:
                    st = opt._state[id(p)] = opt._init_state(p, group)
                for name in opt._acc_names:  # state kept from before a cast/move: per-parameter path
                    a = st.get(name)
                    if a is None or type(a) is not atype or a.dtype != dtype or a.shape != p._data.shape \
                            or backend.device_id_of(a) != dev:
                        opt._flat.pop(key, None)
                        return pairs
                states.append(st)
            if gpu:
                with xp.cuda.Device(dev):
                    flat = FlatState(opt, params, states, xp, dtype)
            else:
                flat = FlatState(opt, params, states, xp, dtype)
            opt._flat[key] = flat
        if flat.gather(xp, parrs, flat.psrc, flat.plist, flat.p) and \
                flat.gather(xp, garrs, flat.gsrc, flat.glist, flat.g):
            break
    else:  # pragma: no cover - a fresh FlatState matches the shapes it was built from
        return pairs
    pflat, gflat = flat.p, flat.g
    scale = opt._rescale_grad
    if scale != 1.0:
        gflat *= scale
    if reg is not None:
        from ..regularizer import WeightDecayRegularizer, _to_regularizer
        if not isinstance(reg, WeightDecayRegularizer):
            reg = _to_regularizer(reg, f"ddg.optimizer.{type(opt).__name__}")
        if reg is not None and reg.coeff:
            reg._add_to(xp, pflat, gflat, flat.s)
    opt._fused_update(params, pflat, gflat, lrs, flat.states, flat, group, xp)
    for parr, view, p in zip(parrs, flat.pviews, params):
        xp.copyto(parr, view)
        opt._written(p, parr)
    return rest
