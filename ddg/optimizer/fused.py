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
4. each parameter's array is then replaced by its view of the flat parameter buffer
   (``param._data = view``, same values), when nothing else holds the old array: no
   other reference to it and no view of it (Python's reference count says so, a view
   keeps its base alive). From then on the parameter *is* its slice of the flat buffer:
   the next steps neither gather it nor write it back, the update rule writes it in
   place. A parameter whose array is held elsewhere (a view taken of it and kept, an
   array the user holds, a slice of a larger array) is written back into its own array
   each step instead (one copy), so whatever aliases it sees the update.

Anything that replaces a parameter's array later (``set_value``, ``to``, casting,
DataParallel's broadcast, user code) is simply picked up: every step checks by identity
which parameters are still their flat views, gathers the others, and adopts them again.
The optimizer's own state is flat too; it is checked by identity each step (a
``set_state_dict`` or a changed set of parameters with gradients rebuilds the flat
state from the per-parameter arrays).

Elementwise operations are the same, in the same order and dtype, as in the
per-parameter path, so results are bit-identical to it, except where a sum over
parameters is taken at once: ``ClipGradByGlobalNorm``'s global norm (one reduction over
the flat buffer) and Lamb's per-parameter norms (``bincount`` segment sums), which agree
to rounding. What the fused path does not cover falls back to the per-parameter path
(``Optimizer._update``): parameters of several dtypes/devices in one group, parameters
with different regularizers in one group, optimizers with neither a ``_rule`` nor a
``_fused_update`` (Adamax, Adadelta, RAdam, NAdam), and on the CPU the parameters of
``CPU_FUSE_MAX_NUMEL`` elements or more (see there).
With master weights (``multi_precision``) the flat buffers hold the float32 master
copies (``Optimizer._work``), which are then rounded back into each parameter; float16
and bfloat16 parameters without master weights take the per-parameter path (updated in
float32 and rounded back).
"""
import sys

import numpy as np

from ..tensor import backend
from ..tensor.tensor import Tensor


class FlatState:
    """Flat buffers for one ordered list of parameters of a group: the accumulators (each
    parameter's state entries are views of them), and reusable buffers for the gathered
    parameters, gradients and one scratch."""

    def __init__(self, opt, params, states, xp, dtype):
        self.params = list(params)
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
        # the gradients' own storage once adopted (``self.g`` is the update's scratch copy)
        self.gown = buffer()
        self.gviews = views(self.gown)
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

    def gather(self, xp, arrays, src, lst, out, views=None, store=None):
        """``out[:] = concatenate(ravel(a) for a in arrays)`` in one call; the 1-D views
        are cached per array object (only for contiguous arrays, whose ravel is a view).
        When every array already is its view of a flat buffer (``views``): nothing to do
        if that buffer is ``out``, else one copy of it (``store``)."""
        if views is not None and all(a is v for a, v in zip(arrays, views)):
            if store is not None:
                xp.copyto(out, store)
            return True
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

    def adopt_grads(self, xp, params, grads, garrs):
        """Like :meth:`adopt`, for the gradients (just gathered into ``self.g``): each one
        that is its parameter's own ``.grad``, held by nothing else, becomes its view of
        ``self.gown``. The backward then accumulates into the flat storage, and
        ``Optimizer.clear_grad`` zeroes it in one call. (DataParallel's gradients are views
        of its buckets and stay there.)"""
        todo = []
        for i, (p, g) in enumerate(zip(params, grads)):
            if garrs[i] is self.gviews[i] or g is not p._grad:
                continue
            self.gsrc[i] = self.glist[i] = None
            # left: the gradient tensor's slot, ``garrs`` and getrefcount's argument
            if g._data is garrs[i] and garrs[i].base is None and sys.getrefcount(garrs[i]) <= 3:
                todo.append(i)
        if todo:
            xp.copyto(self.gown, self.g)
            for i in todo:
                grads[i]._data = garrs[i] = self.gviews[i]
                self.gsrc[i], self.glist[i] = garrs[i], garrs[i].reshape(-1)

    def segment_ids(self, xp):
        """Each element's parameter index (for per-parameter sums with ``bincount``),
        built once."""
        ids = getattr(self, "_segment_ids", None)
        if ids is None:
            ids = np.repeat(np.arange(len(self.sizes), dtype=np.int64), self.sizes)
            ids = self._segment_ids = ids if xp is np else xp.asarray(ids)
        return ids

    def segment_sums(self, xp, values):
        """Per-parameter sums of the flat ``values`` (float64, one per parameter)."""
        return xp.bincount(self.segment_ids(xp), weights=values, minlength=len(self.sizes))

    def per_parameter(self, xp, values):
        """A per-element buffer from per-parameter ``values`` (a device array)."""
        return values[self.segment_ids(xp)]

    def zero_grads(self):
        """Zero the adopted gradients in one call; returns the parameters it covered
        (those whose ``.grad`` is still its flat view)."""
        views = self.gviews
        covered = [p for i, p in enumerate(self.params) if p._grad is not None and p._grad._data is views[i]]
        if covered:
            self.gown.fill(0)
        return covered

    def adopt(self, params, parrs):
        """Rebind each parameter whose array no one else holds to its view of the flat
        parameter buffer (which holds the same values, just gathered); returns the
        indices of the parameters that keep their own array (written back each step)."""
        keep = []
        for i, p in enumerate(params):
            view = self.pviews[i]
            if parrs[i] is view:
                continue
            # drop this object's own references first: the cached ravel is a view of it
            self.psrc[i] = self.plist[i] = None
            # left: the parameter's slot, ``parrs`` and getrefcount's argument
            if p._data is parrs[i] and parrs[i].base is None and sys.getrefcount(parrs[i]) <= 3:
                p._data = view
                parrs[i] = view
                self.psrc[i], self.plist[i] = view, view.reshape(-1)
            else:
                keep.append(i)
        return keep


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


def fused_apply(opt, pairs, gi, group, group_lr, group_reg, unset, clip=None):
    """Update ``pairs`` of group ``gi`` with whole-buffer calls; returns the pairs left
    for the per-parameter path (all of them when the group cannot be fused).

    ``clip``: a ``ClipGradByGlobalNorm`` to apply here (its ``fuses()`` said yes): the sum
    of squares of the fused gradients is one reduction over the flat buffer, and the
    scaling one multiply; the pairs returned are clipped by the same factor."""
    if clip is not None:
        unfused = lambda: clip(pairs)  # noqa: E731  (what the caller would have done)
    else:
        unfused = lambda: pairs  # noqa: E731
    p0 = opt._work(pairs[0][0])  # the parameter's array, or its float32 master copy
    dtype = p0.dtype
    if dtype.itemsize == 2:   # float16/bfloat16 without master weights: per parameter, in float32
        return unfused()
    atype = type(p0)
    gpu = atype is not np.ndarray
    dev = backend.device_id_of(p0)
    params, parrs, grads, garrs, lrs, rest = [], [], [], [], [], []
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
            return unfused()
        if gpu and (backend.device_id_of(parr) != dev or backend.device_id_of(garr) != dev):
            return unfused()
        reg = group_reg
        if reg is unset:
            reg = getattr(p, "regularizer", None)
            if reg is None:
                reg = opt.regularization
        if reg0 is unset:
            reg0 = reg
        elif reg is not reg0:
            return unfused()
        attr = getattr(p, "optimize_attr", None)
        lrs.append(group_lr * attr.get("learning_rate", 1.0) if attr else group_lr)
        params.append(p)
        parrs.append(parr)
        grads.append(g)
        garrs.append(garr)
    if not params:
        return clip(rest) if clip is not None else rest
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
                        return unfused()
                states.append(st)
            if gpu:
                with xp.cuda.Device(dev):
                    flat = FlatState(opt, params, states, xp, dtype)
            else:
                flat = FlatState(opt, params, states, xp, dtype)
            opt._flat[key] = flat
        if flat.gather(xp, parrs, flat.psrc, flat.plist, flat.p, flat.pviews) and \
                flat.gather(xp, garrs, flat.gsrc, flat.glist, flat.g, flat.gviews, flat.gown):
            break
    else:  # pragma: no cover - a fresh FlatState matches the shapes it was built from
        return unfused()
    del p0, parr, garr  # the loop's references, which ``adopt`` must not count as someone else's
    own = flat.adopt(params, parrs)
    flat.adopt_grads(xp, params, grads, garrs)  # before ``flat.g``, the update's copy, is changed
    pflat, gflat = flat.p, flat.g
    if clip is not None:
        rest = _clip_global_norm(clip, xp, params, gflat, flat, rest)
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
    for i in own:
        xp.copyto(parrs[i], flat.pviews[i])
    for p, parr in zip(params, parrs):
        opt._written(p, parr)  # (rounds a master copy back into its parameter)
    return rest


def _clip_global_norm(clip, xp, params, gflat, flat, rest):
    """``ClipGradByGlobalNorm`` over the fused gradients (the flat copy ``gflat``) and the
    group's others (``rest``): one sum of squares for the flat buffer, one per other
    gradient, one scaling of the flat buffer. Returns ``rest`` clipped."""
    need = [getattr(p, "need_clip", True) for p in params]
    total = None
    if all(need):
        total = clip.squares(gflat)
    elif any(need):
        mask = per_element(xp, [1.0 if n else 0.0 for n in need], flat, gflat)
        xp.multiply(gflat, mask, out=flat.s)
        total = clip.squares(flat.s)
    others = [(p, g) for p, g in rest if g is not None and getattr(p, "need_clip", True)]
    for p, g in others:
        sq = clip.squares(g._data if isinstance(g, Tensor) else g)
        total = sq if total is None else total + sq
    if total is None:
        return rest
    factor = clip.scale(xp.sqrt(total))
    if all(need):
        gflat *= factor.astype(gflat.dtype)
    elif any(need):  # the factor where need_clip, 1 elsewhere
        gflat *= (mask * (factor - 1.0) + 1.0).astype(gflat.dtype)
    out = []
    for p, g in rest:
        if g is None or not getattr(p, "need_clip", True):
            out.append((p, g))
        else:
            a = g._data if isinstance(g, Tensor) else g
            out.append((p, Tensor._wrap(a * factor.astype(a.dtype))))
    return out
