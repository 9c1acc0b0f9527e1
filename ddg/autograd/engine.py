"""The backward engine: iterative, dependency-counted, hook-aware.

1. Walk the graph from the roots (an explicit stack, so a 10,000-op chain is fine)
   and count, for every node and every leaf, how many consumers will send it a
   gradient.
2. Run nodes whose count reached zero (a LIFO of ready nodes: roughly the reverse of
   the forward order). Each node's output gradients are summed as they arrive; a node
   runs once all have arrived, then its saved arrays are released.
3. A leaf's gradient is final when its count reaches zero: its tensor hooks run, the
   gradient is accumulated into ``.grad``, and its grad-ready hooks fire (exactly once
   per backward). DataParallel starts its all-reduces from those hooks.
   A leaf's gradients from its third arrival on are added in place into the sum the pass
   made of the earlier ones. A node's backward may add a weight's gradient into that
   weight's ``.grad``, or into that sum, itself (the compiled product starting from it:
   no pass of its own) where ``grad_sink`` hands it the array, and then returns
   ``IN_GRAD`` in its place.
4. A node whose ``_pre_backward`` is set (a callable) has it called with the node just
   before its backward runs: ZeRO stage 3 puts back the parameter arrays it took from
   the node after forward (ddg/distributed/sharding/stage3.py).

Observers: ``register_backward_begin_callback(fn)`` calls ``fn(leaves)`` with the
leaves this backward will reach (before any gradient is computed), and
``register_backward_complete_callback(fn)`` calls ``fn()`` when a backward pass has
finished. ``queue_callback(fn)`` runs ``fn`` once, at the end of the current pass.
"""
import numpy as np

from ..tensor import backend
from ..tensor.tensor import Tensor, _HookHandle
from . import grad_mode

_begin_callbacks = []
_complete_callbacks = []
_queued = []
#: what a node's backward returns for a gradient it has added into the leaf's ``.grad``
IN_GRAD = object()
# [(node, leaf_deps, leaf_acc) of the node whose backward the engine is calling, or None]
_sink = [None]


def grad_sink(node, i):
    """An array into which ``node``'s backward, now called by the engine, may add its
    gradient for input ``i`` in place and return ``IN_GRAD`` instead, or None (the gradient
    is returned as usual). The input must be a leaf without tensor hooks, and the array a
    writeable C-contiguous numpy array of the leaf's shape and dtype: the leaf's ``.grad``
    where this is the last gradient the leaf gets in this pass and none came before it;
    or the sum of the gradients that came before, where the pass made that sum itself
    (from the third arrival on: a weight used by every step of a cell loop). Its
    grad-ready hooks still run once it has every gradient."""
    cur = _sink[0]
    if cur is None or cur[0] is not node:
        return None
    e = node.edges[i] if i < len(node.edges) else None
    if e is None or e[1] is not None:
        return None
    leaf = e[0]
    if leaf._hooks:
        return None
    if leaf in cur[3]:
        a = cur[2].get(leaf)
        if a is None:
            return None
    elif cur[1].get(leaf) != 1 or leaf in cur[2] or leaf._grad is None:
        return None
    else:
        a = leaf._grad._data
    if type(a) is not np.ndarray or a.dtype != leaf._data.dtype or a.shape != leaf._data.shape \
            or not a.flags.c_contiguous or not a.flags.writeable:
        return None
    return a


def register_backward_begin_callback(fn):
    _begin_callbacks.append(fn)
    return _HookHandle(_begin_callbacks, fn)


def register_backward_complete_callback(fn):
    _complete_callbacks.append(fn)
    return _HookHandle(_complete_callbacks, fn)


def queue_callback(fn):
    """Run ``fn()`` once when the backward pass now running completes."""
    _queued.append(fn)


def _freed_error(node):
    return RuntimeError(
        f"ddg: trying to backward through the graph a second time (op {node.name}): the arrays saved for "
        f"backward were released after the first backward. Pass retain_graph=True to the first backward "
        f"if you need to backward twice.")


def _root_grad(t, g, create_graph=False):
    if create_graph:  # a Tensor, kept as it is (it may itself be on a graph)
        arr = _root_grad(t, None if g is None else (g._data if isinstance(g, Tensor) else g))
        if not isinstance(g, Tensor):
            return Tensor._wrap(arr)
        return g if g._data.dtype == t._data.dtype else g.astype(t._data.dtype)
    if t.stop_gradient:
        raise RuntimeError(f"ddg: backward() of a tensor that does not require grad (shape {t.shape}, "
                           f"dtype {t.dtype}); did you forget stop_gradient=False?")
    if g is None:  # Paddle: ones of the tensor's shape, for non-scalars too
        xp = backend.get_array_module(t._data)
        return xp.ones(t._data.shape, dtype=t._data.dtype)
    arr = g._data if isinstance(g, Tensor) else g
    xp = backend.get_array_module(t._data)
    arr = xp.asarray(arr, dtype=t._data.dtype)
    if arr.shape != t._data.shape:
        raise ValueError(f"ddg: grad_tensor has shape {list(arr.shape)} but the tensor has shape {t.shape}")
    return arr


def _apply_hooks(hooks, g):
    if isinstance(g, Tensor):  # create_graph: gradients are Tensors
        for h in list(hooks):
            r = h(g)
            if r is not None:
                g = r if isinstance(r, Tensor) else Tensor._wrap(r)
        return g
    for h in list(hooks):
        r = h(Tensor._wrap(g))
        if r is not None:
            g = r._data if isinstance(r, Tensor) else r
    return g


def run_backward(roots, root_grads, retain_graph=False, targets=None, create_graph=False):
    """Core loop. Without ``targets`` gradients accumulate into leaves' ``.grad``; with
    ``targets`` (a list of tensors) nothing is accumulated and their gradients are
    returned in a list (None where unreached). With ``create_graph`` the gradients are
    Tensors (``root_grads`` too) computed by the nodes' ``backward_graph`` with grad mode
    on, so the ops of this pass are recorded."""
    if any(r._node is not None and r._node.overflow_checked for r in roots):
        # a loss scaled by an enabled GradScaler: its gradients may overflow float16 on
        # purpose, and the scaler checks them and skips the step; numpy's RuntimeWarnings
        # ("overflow encountered in cast", "invalid value encountered in matmul") would
        # only repeat that, where Paddle and PyTorch say nothing
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return _run_mode(roots, root_grads, retain_graph, targets, create_graph)
    return _run_mode(roots, root_grads, retain_graph, targets, create_graph)


def _run_mode(roots, root_grads, retain_graph, targets, create_graph):
    if create_graph:
        with grad_mode.enable_grad():
            return _run(roots, root_grads, retain_graph, targets, call_backward_graph, _finish_leaf_graph)
    return _run(roots, root_grads, retain_graph, targets, call_backward, None)


def _run(roots, root_grads, retain_graph, targets, call, finish_graph):
    accumulate = targets is None
    sinks = accumulate and finish_graph is None     # grad_sink may hand out .grad arrays
    leaf_targets = {}
    node_targets = {}
    if targets is not None:
        for i, t in enumerate(targets):
            if t._node is None:
                leaf_targets[t] = i
            else:
                node_targets.setdefault((t._node, t._idx), []).append(i)
        captured = [None] * len(targets)

    # -- 1. count dependencies ------------------------------------------------------
    deps = {}
    leaf_deps = {}
    buffers = {}
    leaf_acc = {}
    # leaves whose sum in leaf_acc this pass made (arrays, not graph Tensors): later arrivals
    # are added into it in place (a weight that every step of a cell loop uses gets a
    # gradient per step: one add each, not a new array each)
    own = set()
    raw = finish_graph is None
    start = []
    for t, g in zip(roots, root_grads):
        if t._node is None:
            leaf_deps.setdefault(t, 0)
            prev = leaf_acc.get(t)
            leaf_acc[t] = g if prev is None else prev + g
            continue
        node = t._node
        if node.edges is None:
            raise _freed_error(node)
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node.n_out
            start.append(node)
        add_grad(buf, t._idx, g)
    stack = list(start)
    seen = set(start)
    while stack:
        node = stack.pop()
        for e in node.edges:
            if e is None:
                continue
            p, idx = e
            if idx is None:
                leaf_deps[p] = leaf_deps.get(p, 0) + 1
            else:
                if p.edges is None:
                    raise _freed_error(p)
                deps[p] = deps.get(p, 0) + 1
                if p not in seen:
                    seen.add(p)
                    stack.append(p)

    if accumulate:
        for cb in list(_begin_callbacks):
            cb(leaf_deps.keys())

    def finish_leaf(leaf):
        g = leaf_acc.pop(leaf, None)
        if g is not None and leaf._hooks:
            g = _apply_hooks(leaf._hooks, g)
        if not accumulate:
            i = leaf_targets.get(leaf)
            if i is not None:
                captured[i] = g
            return
        if finish_graph is not None:
            finish_graph(leaf, g)
        elif g is not None:
            if g.dtype != leaf._data.dtype:
                g = g.astype(leaf._data.dtype)
            if leaf._grad is None:
                # copy: the array may be shared with other consumers of the same gradient
                leaf._grad = Tensor._wrap(g.copy() if g.shape == leaf._data.shape else
                                          backend.get_array_module(g).broadcast_to(g, leaf._data.shape).copy())
            else:
                leaf._grad._data += g
        if leaf._ready_hooks:
            for h in list(leaf._ready_hooks):
                h(leaf)

    # leaves that are roots and nothing else
    for leaf in [lf for lf, n in leaf_deps.items() if n == 0]:
        finish_leaf(leaf)

    # -- 2. run ready nodes ------------------------------------------------------------
    ready = [n for n in start if n not in deps]
    while ready:
        node = ready.pop()
        grads = buffers.pop(node)
        if node._hooks:
            for i, hooks in node._hooks.items():
                if grads[i] is not None:
                    grads[i] = _apply_hooks(hooks, grads[i])
        if node_targets:
            for i in range(node.n_out):
                for j in node_targets.get((node, i), ()):
                    captured[j] = grads[i]
        edges = node.edges
        if not any(g is not None for g in grads) if len(grads) > 1 else grads[0] is None:
            results = (None,) * len(edges)
        else:
            if node._vin is not None:
                for vc, v in node._vin:
                    if vc[0] != v:
                        raise RuntimeError(
                            f"ddg: an input of op {node.name} was modified in place (version {vc[0]}, "
                            f"expected {v}) after it was saved for backward; its gradient would be wrong. "
                            f"Clone the tensor before writing to it.")
            if node._vout is not None and node._vout[0][0] != node._vout[1]:
                raise RuntimeError(
                    f"ddg: the output of op {node.name} was modified in place after it was saved for backward; "
                    f"its gradient would be wrong. Clone the tensor before writing to it.")
            if node._pre_backward is not None:
                node._pre_backward(node)
            if sinks:
                outer, _sink[0] = _sink[0], (node, leaf_deps, leaf_acc, own)
                try:
                    results = call(node, grads)
                finally:
                    _sink[0] = outer
            else:
                results = call(node, grads)
        if not retain_graph:
            node._release()
        for e, g in zip(edges, results):
            if e is None:
                continue
            p, idx = e
            if idx is None:
                if g is not None and g is not IN_GRAD:
                    prev = leaf_acc.get(p)
                    if prev is None:
                        leaf_acc[p] = g
                    elif p in own and prev.shape == g.shape and prev.dtype == g.dtype:
                        prev += g            # a sum made below: no other node or tensor holds it
                    else:
                        leaf_acc[p] = prev + g
                        if raw:
                            own.add(p)
                n = leaf_deps[p] - 1
                leaf_deps[p] = n
                if n == 0:
                    finish_leaf(p)
            else:
                if g is not None:
                    buf = buffers.get(p)
                    if buf is None:
                        buf = buffers[p] = [None] * p.n_out
                    add_grad(buf, idx, g)
                else:
                    buffers.setdefault(p, [None] * p.n_out)
                n = deps[p] - 1
                deps[p] = n
                if n == 0:
                    ready.append(p)

    if accumulate:
        for cb in list(_complete_callbacks):
            cb()
        while _queued:
            _queued.pop(0)()
        return None
    return captured


def add_grad(buf, i, g):
    """Add gradient ``g`` into ``buf[i]`` (None there: no gradient yet). The one place where
    gradients arriving at the same output are summed (also used by ddg.jit's replay)."""
    prev = buf[i]
    buf[i] = g if prev is None else prev + g


def call_backward(node, grads):
    """Run ``node.backward`` on its output gradients ``grads`` (a list, one per output, at least
    one not None; a multi-output node gets zeros for the missing ones). Returns a tuple with one
    gradient (or None) per input."""
    if node.n_out == 1:
        results = node.backward(grads[0])
    else:
        results = node.backward(_fill_missing(node, grads))
    return results if type(results) is tuple else (results,)


def _fill_missing(node, grads):
    """Zeros for the outputs of a multi-output node that received no gradient (None left
    as it is for an op that says it takes None)."""
    if node.none_grads:
        return tuple(grads)
    xp = backend.get_array_module(next(g for g in grads if g is not None))
    return tuple(xp.zeros(*node._out_shapes[i]) if g is None else g for i, g in enumerate(grads))


def call_backward_graph(node, grads):
    """``call_backward`` under create_graph: ``node.backward_graph`` on Tensors."""
    if node.n_out == 1:
        results = node.backward_graph(grads[0])
    else:
        first = next(g for g in grads if g is not None)
        xp = backend.get_array_module(first._data)
        results = node.backward_graph(tuple(Tensor._wrap(xp.zeros(*node._out_shapes[i])) if g is None else g
                                            for i, g in enumerate(grads)))
    return results if type(results) is tuple else (results,)


def _finish_leaf_graph(leaf, g):
    """Under create_graph a leaf's ``.grad`` becomes the gradient Tensor itself (on the graph;
    an existing ``.grad`` is added to out of place)."""
    if g is None:
        return
    if g._data.dtype != leaf._data.dtype:
        g = g.astype(leaf._data.dtype)
    if tuple(g.shape) != tuple(leaf._data.shape):
        g = g.expand(list(leaf._data.shape))
    leaf._grad = g if leaf._grad is None else leaf._grad + g


def backward(tensors, grad_tensors=None, retain_graph=False, create_graph=False):
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves they depend on.
    With ``create_graph`` (not in Paddle's ``backward``; PyTorch's) the gradients are
    recorded and ``.grad`` can be differentiated again; the graph is then retained."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors]
    if len(grad_tensors) != len(tensors):
        raise ValueError(f"ddg.backward: {len(tensors)} tensors but {len(grad_tensors)} grad_tensors")
    # Paddle: backward() of a tensor that needs no gradient (stop_gradient=True) does nothing
    pairs = [(t, g) for t, g in zip(tensors, grad_tensors) if not t.stop_gradient]
    if not pairs:
        return
    if create_graph:
        _check_not_recording("backward(create_graph=True)")
    grads = [_root_grad(t, g, create_graph) for t, g in pairs]
    run_backward([t for t, _ in pairs], grads, retain_graph or create_graph, create_graph=create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=False, no_grad_vars=None):
    """Gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated).
    ``retain_graph`` defaults to ``create_graph``. With ``create_graph=True`` the backward
    pass is recorded as ddg ops, so the results can be differentiated again."""
    create_graph = bool(create_graph)
    if create_graph:
        _check_not_recording("grad(create_graph=True)")
    single = isinstance(inputs, Tensor)
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    inputs = [inputs] if single else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    for i, t in enumerate(inputs):
        if t.stop_gradient:
            raise RuntimeError(f"ddg.grad: input {i} (shape {t.shape}) does not require grad")
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"ddg.grad: {len(outputs)} outputs but {len(grad_outputs)} grad_outputs")
    grads = [_root_grad(t, g, create_graph) for t, g in zip(outputs, grad_outputs)]
    retain = create_graph if retain_graph is None else bool(retain_graph)
    # no_grad_vars: no gradient flows through them (a hook zeroes theirs during this pass)
    blocked = [] if no_grad_vars is None else [no_grad_vars] if isinstance(no_grad_vars, Tensor) else \
        list(no_grad_vars)
    handles = [v.register_hook(_zero_grad) for v in blocked if not v.stop_gradient]
    try:
        captured = run_backward(outputs, grads, retain, targets=inputs, create_graph=create_graph)
    finally:
        for h in handles:
            h.remove()
    result = []
    for i, (t, g) in enumerate(zip(inputs, captured)):
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"ddg.grad: input {i} (shape {t.shape}) is not reachable from the outputs; "
                                   f"pass allow_unused=True to get None for it")
            result.append(None)
        elif create_graph:
            if g._data.dtype != t._data.dtype:
                g = g.astype(t._data.dtype)
            if tuple(g.shape) != tuple(t._data.shape):
                g = g.expand(list(t._data.shape))
            result.append(g)
        else:
            if g.shape != t._data.shape:
                g = backend.get_array_module(g).broadcast_to(g, t._data.shape)
            result.append(Tensor._wrap(g.astype(t._data.dtype, copy=True)))
    return result


def _zero_grad(g):
    return Tensor._wrap(backend.get_array_module(g._data).zeros_like(g._data))


def _check_not_recording(what):
    from .function import _recorder
    if _recorder[0] is not None:
        raise NotImplementedError(f"ddg.{what} inside a function being traced by ddg.jit.to_static: a replayed "
                                  f"program has no differentiable backward. Compute higher-order gradients "
                                  f"eagerly (outside to_static)")
