"""Recompute (activation checkpointing): keep a segment's inputs, not its activations.

``recompute(fn, *args)`` runs ``fn`` once to learn which leaves (parameters, inputs) its
outputs depend on, then drops that graph: only the inputs stay alive. The outputs hang
from one node whose backward reruns ``fn`` with gradients on, from the same random state
(dropout draws the same masks) and under the same ``auto_cast`` policy, and
differentiates the rerun with respect to the inputs and those leaves. The gradients it
returns reach the leaves through the ordinary engine, so DataParallel's bucket hooks,
ZeRO's reductions and gradient accumulation see them as if no recompute happened.
"""
import contextlib

from ...autograd import engine, grad_mode
from ...autograd import function as _function
from ...autograd.function import Function
from ...tensor import backend
from ...tensor.tensor import Tensor

__all__ = ["recompute", "recompute_sequential"]


def _rng_snapshot():
    state = {"host": backend.get_rng_state()}
    if backend.cupy_available():
        xp = backend.cupy_module()
        state["device"] = xp.random.get_random_state()
        state["device_copy"] = _copy_cupy_state(xp)
    return state


def _copy_cupy_state(xp):  # pragma: no cover - needs a GPU
    import copy
    return copy.deepcopy(xp.random.get_random_state())


@contextlib.contextmanager
def _rng_restored(snapshot):
    """Run with the random state of ``snapshot``; the state from before comes back after."""
    if snapshot is None:
        yield
        return
    now = backend.get_rng_state()
    backend.set_rng_state(snapshot["host"])
    dev_now = None
    if "device" in snapshot:  # pragma: no cover - needs a GPU
        import copy
        xp = backend.cupy_module()
        dev_now = xp.random.get_random_state()
        xp.random.set_random_state(copy.deepcopy(snapshot["device_copy"]))
    try:
        yield
    finally:
        backend.set_rng_state(now)
        if dev_now is not None:  # pragma: no cover
            backend.cupy_module().random.set_random_state(dev_now)


@contextlib.contextmanager
def _autocast_as(policy):
    slot = _function._autocast
    prev, prev_active = slot[0], None if policy is None else policy.active
    if policy is not None:
        policy.active = True
    slot[0] = policy
    try:
        yield
    finally:
        slot[0] = prev
        if policy is not None:
            policy.active = prev_active


def _flatten(out, what):
    if isinstance(out, Tensor):
        return [out], True
    if isinstance(out, (tuple, list)) and all(isinstance(o, Tensor) or o is None for o in out):
        return list(out), False
    raise TypeError(f"ddg.distributed.fleet.utils.recompute: {what} must return a Tensor or a tuple/list of "
                    f"Tensors, got {type(out).__name__}")


def _leaves(outputs, exclude):
    """The leaves requiring a gradient that ``outputs`` depend on, in discovery order."""
    found, seen_leaf, seen = [], set(), set()
    stack = [o._node for o in outputs if o is not None and o._node is not None]
    for o in outputs:
        if o is not None and o._node is None and not o.stop_gradient and id(o) not in exclude:
            if o not in seen_leaf:
                seen_leaf.add(o)
                found.append(o)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for e in node.edges or ():
            if e is None:
                continue
            p, idx = e
            if idx is None:
                if p not in seen_leaf and id(p) not in exclude:
                    seen_leaf.add(p)
                    found.append(p)
            else:
                stack.append(p)
    return found


class _Recompute(Function):
    """The node the outputs of a recomputed segment hang from. Edges: the segment's
    Tensor inputs that need a gradient, then the leaves found inside it."""
    save_inputs = False
    none_grads = True

    @property
    def name(self):
        return "Recompute"

    def backward(self, grads):
        grads = (grads,) if self.n_out == 1 else tuple(grads)
        args, kwargs, slots = list(self.args), dict(self.kwargs), self.slots
        inputs = []
        for i in slots:
            where = args if isinstance(i, int) else kwargs
            t = where[i]
            d = Tensor._wrap(t._data, t.stop_gradient)
            where[i] = d
            inputs.append(d)
        with _rng_restored(self.rng), _autocast_as(self.policy), grad_mode.enable_grad():
            out, _ = _flatten(self.fn(*args, **kwargs), "the function")
        roots, root_grads = [], []
        for o, g in zip(out, grads):
            if g is None or o is None or o.stop_gradient:
                continue
            if o._data.shape != g.shape:
                raise RuntimeError(f"ddg.distributed.fleet.utils.recompute: the rerun gave an output of shape "
                                   f"{list(o._data.shape)}, the first run {list(g.shape)}; the function must be "
                                   f"deterministic given its inputs and the random state")
            roots.append(o)
            root_grads.append(g)
        targets = [t for t in inputs if not t.stop_gradient] + list(self.leaves)
        if not roots:
            return (None,) * len(self.edges)
        # the leaves' own gradient hooks run once, in the outer backward that receives
        # these gradients; not here as well
        saved = [(p, p._hooks) for p in self.leaves if p._hooks]
        for p, _ in saved:
            p._hooks = None
        try:
            # retain_graph: a Tensor the function reads from a closure brings part of the
            # outer graph into this pass; the outer backward may still need those nodes
            # (the rerun's own graph is dropped on return)
            got = engine.run_backward(roots, root_grads, True, targets=targets)
        finally:
            for p, hooks in saved:
                p._hooks = hooks
        out = []
        for t, g in zip(targets, got):
            if g is not None:
                if g.shape != t._data.shape:
                    g = backend.get_array_module(g).broadcast_to(g, t._data.shape)
            out.append(g)
        return tuple(out)


def recompute(function, *args, **kwargs):
    """Run ``function(*args, **kwargs)`` keeping only its inputs for backward (Paddle's
    ``paddle.distributed.fleet.utils.recompute``).

    ``function`` is a Layer or any callable of Tensors returning a Tensor or a tuple of
    them. Keyword arguments consumed here: ``preserve_rng_state`` (default True: the rerun
    draws the same random numbers, so dropout masks match) and ``use_reentrant``
    (accepted; both of Paddle's modes give the same gradients here). Other keyword
    arguments go to ``function`` (Tensors among them are inputs like the positional ones).
    A Tensor the function reads from a closure is best passed as an argument: its
    gradient is right, but when it has a graph of its own that the outer backward
    reaches first, the rerun raises ddg's "backward through the graph a second time".
    The gradients equal those of ``function(*args)`` run plainly; the memory of the activations inside the segment is freed once the segment
    returns and comes back, one segment at a time, during backward.
    """
    preserve = kwargs.pop("preserve_rng_state", True)
    kwargs.pop("use_reentrant", None)
    if not callable(function):
        raise TypeError(f"ddg.distributed.fleet.utils.recompute: function must be callable (a Layer or a "
                        f"function), got {type(function).__name__}")
    if not grad_mode._enabled[0]:
        return function(*args, **kwargs)
    # the Tensor arguments (positional: their index, keyword: their name)
    slots = [i for i, a in enumerate(args) if isinstance(a, Tensor)] + \
        [k for k, v in kwargs.items() if isinstance(v, Tensor)]

    def tensor(i, a=args, k=kwargs):
        return a[i] if isinstance(i, int) else k[i]
    rng = _rng_snapshot() if preserve else None
    policy = _function._autocast[0]
    # a first run with gradients on finds the leaves inside; its graph is dropped right after
    run_args, run_kwargs = list(args), dict(kwargs)
    wrapped = []
    for i in slots:
        t = tensor(i)
        d = Tensor._wrap(t._data, t.stop_gradient)
        wrapped.append(d)
        if isinstance(i, int):
            run_args[i] = d
        else:
            run_kwargs[i] = d
    out, single = _flatten(function(*run_args, **run_kwargs), "the function")
    leaves = _leaves(out, {id(d) for d in wrapped})
    del wrapped, run_args, run_kwargs
    needs = [tensor(i) for i in slots if not tensor(i).stop_gradient]
    results = [None if o is None else Tensor._wrap(o._data, True) for o in out]
    if needs or leaves:
        node = _Recompute()
        node.fn, node.slots = function, slots
        node.args = tuple(Tensor._wrap(a._data, a.stop_gradient) if isinstance(a, Tensor) else a for a in args)
        node.kwargs = {k: Tensor._wrap(v._data, v.stop_gradient) if isinstance(v, Tensor) else v
                       for k, v in kwargs.items()}
        node.leaves = leaves
        node.rng, node.policy = rng, policy
        node.edges = tuple(((t, None) if t._node is None else (t._node, t._idx)) for t in needs) + \
            tuple((p, None) for p in leaves)
        node.needs = tuple(True for _ in node.edges)
        node.n_out = len(results)
        node._out_shapes = [(o._data.shape, o._data.dtype) for o in out if o is not None]
        for i, (o, r) in enumerate(zip(out, results)):
            if r is not None and not o.stop_gradient and r._data.dtype.kind in "fcV":
                r._node, r._idx, r.stop_gradient = node, i, False
    del out
    return results[0] if single else tuple(results)


def recompute_sequential(ctx, functions, *args, **kwargs):
    """Recompute a Sequential (or list of layers) in ``ctx['segments']`` segments (Paddle's
    ``recompute_sequential``); ``ctx['preserve_rng_state']`` defaults to True."""
    segments = int(ctx.get("segments", 1))
    preserve = ctx.get("preserve_rng_state", True)
    layers = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if segments < 1:
        raise ValueError(f"ddg.distributed.fleet.utils.recompute_sequential: segments must be >= 1, got {segments}")
    size = -(-len(layers) // segments)

    def run(chunk):
        def f(*xs):
            for layer in chunk:
                xs = layer(*xs) if isinstance(xs, tuple) else layer(xs)
            return xs
        return f
    out = args if len(args) != 1 else args[0]
    for s in range(0, len(layers), size):
        chunk = layers[s:s + size]
        xs = out if isinstance(out, tuple) else (out,)
        out = recompute(run(chunk), *xs, preserve_rng_state=preserve, **kwargs)
    return out
