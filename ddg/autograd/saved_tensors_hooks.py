"""``saved_tensors_hooks(pack_hook, unpack_hook)``: Paddle's context manager that lets a
program transform what backward keeps (offload it, compress it, log it).

Inside the context, every array an op's forward keeps for its backward is handed to
``pack_hook`` as a Tensor right after the op ran, and only what ``pack_hook`` returns is
kept; when backward needs it, ``unpack_hook(packed)`` must give the Tensor back (same
shape and dtype). ``PyLayer``'s ``ctx.save_for_backward`` goes through the same hooks.
The innermost context applies. While no context is active nothing is patched; ops
recorded inside one unpack at backward even after it closed.
"""
from .. import dispatch
from ..tensor import backend
from ..tensor.tensor import Tensor

_STACK = []            # (pack_hook, unpack_hook), innermost last
_WRAPPER = [None]      # the dispatch.wrap handle of Function.__call__ while one is active
_SKIP = frozenset(["edges", "_vin", "_vout", "_out_shapes", "needs", "_hooks", "n_out"])


def current_hooks():
    return _STACK[-1] if _STACK else None


def _unpacked(unpack, packed, shape, dtype, where):
    t = unpack(packed)
    if not isinstance(t, Tensor):
        raise TypeError(f"ddg.autograd.saved_tensors_hooks: unpack_hook must return a Tensor, got "
                        f"{type(t).__name__} ({where})")
    if tuple(t._data.shape) != tuple(shape) or t._data.dtype != dtype:
        raise ValueError(f"ddg.autograd.saved_tensors_hooks: unpack_hook returned shape {list(t._data.shape)} and "
                         f"dtype {t._data.dtype} for a tensor saved with shape {list(shape)} and dtype {dtype} "
                         f"({where})")
    return t


def _pack_node(node, pack, unpack):
    packed = {}
    for name, value in list(node.__dict__.items()):
        if name in _SKIP or type(value) not in backend.ARRAY_TYPES:
            continue
        packed[name] = (pack(Tensor._wrap(value)), value.shape, value.dtype)
        del node.__dict__[name]
    if not packed:
        return

    def restore():
        for name, (p, shape, dtype) in packed.items():
            node.__dict__[name] = _unpacked(unpack, p, shape, dtype, f"op {node.name}")._data
        packed.clear()
        node.__dict__.pop("backward", None)
        node.__dict__.pop("backward_graph", None)

    cls = type(node)

    def backward(grads):
        restore()
        return cls.backward(node, grads)

    def backward_graph(grads):
        restore()
        return cls.backward_graph(node, grads)

    node.backward = backward
    node.backward_graph = backward_graph


def _packing(orig):
    def call(fn, *tensors):
        out = orig(fn, *tensors)
        hooks = current_hooks()
        if hooks is not None:
            outs = out if type(out) is tuple else (out,)
            if any(isinstance(o, Tensor) and o._node is fn for o in outs):
                _pack_node(fn, *hooks)
        return out
    return call


def _install():
    from .function import Function
    _WRAPPER[0] = dispatch.wrap(Function, "__call__", _packing)


def _uninstall():
    _WRAPPER[0].remove()
    _WRAPPER[0] = None


class saved_tensors_hooks:
    """``with saved_tensors_hooks(pack_hook, unpack_hook): ...`` (see the module docstring)."""

    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("ddg.autograd.saved_tensors_hooks: pack_hook and unpack_hook must be callable")
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        if not _STACK:
            _install()
        _STACK.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        _STACK.pop()
        if not _STACK:
            _uninstall()
        return False
