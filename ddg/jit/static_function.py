"""``to_static``: a function (or a Layer's forward) recorded once per input signature
and replayed afterwards.

The signature of a call is the structure of its arguments, each input tensor's shape,
dtype, device and ``stop_gradient``, whether grad mode is on, and (for a Layer) the
``training`` flags of its sublayers. The first two calls of a signature run eagerly
while being recorded (``recorder.record``); the two programs must agree, constants
included, before the third call replays (``program.replay``): this catches values
computed from data outside ops that would otherwise be frozen as constants. Anything
the recorder refuses, or two recordings that differ, makes the function run eagerly
from then on, with one warning naming the file and line responsible.
"""
import functools
import warnings

from ..autograd import grad_mode
from ..tensor import backend
from ..tensor.tensor import Tensor
from .program import flatten, replay, same_program, unflatten
from .recorder import DataDependent, record

# -- to_static ------------------------------------------------------------------------------------------------
_EAGER = "eager"
_TO_STATIC = [True]  # jit.enable_to_static(False) makes every to_static function run eagerly
_IGNORED_MODULES = []


def enable_to_static(enable_to_static_bool):
    """Turn ``to_static`` on or off for the whole process: off, every to_static function
    runs its Python code eagerly (nothing recorded or replayed)."""
    if not isinstance(enable_to_static_bool, (bool, int)):
        raise TypeError(f"ddg.jit.enable_to_static: expects a bool, got {type(enable_to_static_bool).__name__}")
    _TO_STATIC[0] = bool(enable_to_static_bool)


def ignore_module(modules):
    """Paddle's list of modules whose functions its source translator leaves alone. ddg
    records what ops run instead of translating source, so calls into any module are
    already run as they are; the modules are kept (``ignored_modules()``) and checked."""
    import types
    mods = modules if isinstance(modules, (list, tuple)) else [modules]
    for m in mods:
        if not isinstance(m, types.ModuleType):
            raise TypeError(f"ddg.jit.ignore_module: expects modules, got {type(m).__name__}")
    _IGNORED_MODULES.extend(m for m in mods if m not in _IGNORED_MODULES)


def ignored_modules():
    return list(_IGNORED_MODULES)


def _tensor_key(t):
    a = t._data
    return (a.shape, a.dtype.str, backend.device_id_of(a), t.stop_gradient)


class StaticFunction:
    """``fn`` recorded once per input signature and replayed afterwards.

    ``layer`` (optional) is the Layer whose ``training`` flags and buffers belong to the
    signature and the recording."""

    def __init__(self, fn, layer=None, input_spec=None):
        self._fn = fn
        self._layer = layer
        self._input_spec = input_spec
        self._cache = {}
        self._eager = False
        self._warned = False
        self._sublayers = None
        self._n_direct = 0
        self._last_key = None  # the signature of the latest call (jit.save without input_spec saves it)
        functools.update_wrapper(self, fn, updated=())

    # decorator on a method: bind per instance
    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        key = "_ddg_static_" + getattr(self._fn, "__name__", "fn")
        bound = instance.__dict__.get(key)
        if bound is None:
            from ..nn.layer.layers import Layer
            bound = StaticFunction(self._fn.__get__(instance, owner),
                                   instance if isinstance(instance, Layer) else None, self._input_spec)
            object.__setattr__(instance, key, bound)
        return bound

    @property
    def dygraph_function(self):
        return self._fn

    def _training_key(self):
        layer = self._layer
        if layer is None:
            return None
        subs = self._sublayers
        if subs is None or len(layer._sub_layers) != self._n_direct:
            # the layer tree, cached (walking it each call costs ~20 us on a small MLP)
            subs = self._sublayers = layer.sublayers(include_self=True)
            self._n_direct = len(layer._sub_layers)
        return tuple([lay.training for lay in subs])

    def _check_spec(self, tensors):
        spec = self._input_spec
        if not spec:
            return
        from ..static import InputSpec
        for i, (s, t) in enumerate(zip(spec, tensors)):
            if isinstance(s, InputSpec) and not s._matches(t):
                raise ValueError(f"ddg.jit.to_static: input {i} has shape {t.shape} and dtype {t.dtype}, "
                                 f"which does not match {s}")

    def __call__(self, *args, **kwargs):
        if self._eager or not _TO_STATIC[0]:
            return self._fn(*args, **kwargs)
        if not kwargs and all(type(a) is Tensor for a in args):  # fast path: tensors only
            tensors = list(args)
            spec = len(args)
        else:
            tensors = []
            spec = flatten((args, kwargs), tensors)
        self._check_spec(tensors)
        key = (spec, tuple(_tensor_key(t) for t in tensors), grad_mode._enabled[0], self._training_key())
        self._last_key = key
        entry = self._cache.get(key)
        if entry is None or type(entry) is tuple:
            return self._record(key, entry, args, kwargs, tensors)
        if entry is _EAGER:
            return self._fn(*args, **kwargs)
        for _, t, sg in entry.externals:
            if t.stop_gradient != sg:  # a parameter was frozen or unfrozen: record again
                del self._cache[key]
                return self._record(key, None, args, kwargs, tensors)
        outs = replay(entry, tensors)
        return unflatten(entry.out_spec, iter(outs), entry.out_original)

    def _buffers(self):
        """The layer's state no gradient updates: its buffers and its parameters that need
        no gradient (BatchNorm's running statistics). The recorder checks that the function
        changes them only with ops and set_value (which it records)."""
        if self._layer is None:
            return []
        return list(self._layer.buffers()) + [p for p in self._layer.parameters() if p.stop_gradient]

    def _record(self, key, entry, args, kwargs, tensors):
        out, prog = record(self._fn, args, kwargs, tensors, self._buffers())
        if isinstance(prog, DataDependent):
            self._go_eager(key, str(prog))
            return out
        if entry is None:  # first recording: verify against a second one before replaying
            self._cache[key] = (prog,)
        elif same_program(entry[0], prog):
            self._cache[key] = prog
        else:
            self._go_eager(key, "two calls with the same input signature recorded different programs "
                                "(values computed from data outside ddg ops, or random numbers)")
        return out

    def _go_eager(self, key, why):
        self._cache[key] = _EAGER
        self._eager = True  # for safety: once data-dependent, always eager
        if not self._warned:
            self._warned = True
            name = getattr(self._fn, "__qualname__", repr(self._fn))
            warnings.warn(f"ddg.jit.to_static({name}): running eagerly: {why}", stacklevel=4)

    def traced_signature(self):
        """``(structure, [(shape, dtype), ...], n_signatures)`` of the latest call, or None
        before any call: what ``jit.save`` saves when no input spec is given."""
        key = self._last_key
        if key is None:
            return None
        spec, metas = key[0], [(shape, dtype) for shape, dtype, _, _ in key[1]]
        return spec, metas, len(self._cache)

    def concrete_program(self, *args, **kwargs):
        """Record (without caching) and return the Program for these arguments."""
        tensors = []
        flatten((args, kwargs), tensors)
        _, prog = record(self._fn, args, kwargs, tensors, self._buffers())
        if isinstance(prog, DataDependent):
            raise prog
        return prog


def to_static(function=None, input_spec=None, build_strategy=None, backend=None, **kwargs):
    """Record ``function`` (a function, a method, or a Layer) once per input signature and
    replay the recording afterwards. On a Layer, its ``forward`` is replaced in place and
    the same Layer is returned (its parameters, buffers and state_dict are unchanged).
    Usable as ``@to_static`` or ``@to_static(input_spec=[...])``."""
    from ..nn.layer.layers import Layer
    if function is None:
        return lambda f: to_static(f, input_spec=input_spec)
    if isinstance(function, Layer):
        fwd = function.forward
        if isinstance(fwd, StaticFunction):
            return function
        object.__setattr__(function, "forward", StaticFunction(fwd, function, input_spec))
        return function
    if isinstance(function, StaticFunction):
        return function
    layer = getattr(function, "__self__", None)
    if not isinstance(layer, Layer):
        layer = None
    return StaticFunction(function, layer, input_spec)


def not_to_static(fn):
    return fn
