"""``auto_cast`` (mixed precision per op) and ``decorate`` (O2: low-precision parameters).

Unlike Paddle's, ddg's AMP really runs on the CPU too (numpy has float16; bfloat16 comes
with ml_dtypes once ``ddg.bfloat16`` exists): Paddle's CPU build warns and runs
everything in float32. The casting itself happens at op dispatch, see
``ddg/autograd/autocast.py``.
"""
import contextlib

from .. import dispatch
from ..autograd import function as _function
from ..autograd.autocast import AutoCast
from ..nn.layer.layers import Layer
from ..optimizer.optimizer import Optimizer
from ..tensor import dtypes as _dtypes
from ..tensor.tensor import Tensor
from .amp_lists import _lists

__all__ = ["auto_cast", "amp_guard", "autocast", "decorate", "amp_decorate", "is_float16_supported",
           "is_bfloat16_supported", "is_autocast_enabled", "get_autocast_dtype", "get_autocast_cpu_dtype",
           "get_autocast_gpu_dtype"]

_LEVELS = ("O0", "OD", "O1", "O2")


class _GlobalState:
    """What the last ``auto_cast`` asked for (Paddle keeps the same: the GradScaler reads
    ``amp_dtype`` to turn itself off for bfloat16)."""
    amp_dtype = "float32"


def _dtype_name(dtype, who):
    if isinstance(dtype, str):
        name = dtype.rsplit(".", 1)[-1].lower()
    else:
        try:
            name = _dtypes.convert_dtype(dtype).name
        except TypeError:
            name = str(dtype)
    if name not in ("float16", "bfloat16"):
        raise ValueError(f"ddg.amp.{who}: dtype must be 'float16' or 'bfloat16', got {dtype!r}")
    return name


def _low_dtype(name, who):
    """The numpy dtype of ``name`` through ddg's own dtype conversion."""
    try:
        return _dtypes.convert_dtype(name)
    except TypeError:
        raise TypeError(f"ddg.amp.{who}: dtype {name!r} is not available in this ddg build "
                        f"(ddg.{name} does not exist); use dtype='float16'") from None


class _AutoCastContext(contextlib.ContextDecorator):
    """The context manager (and decorator) ``auto_cast`` returns."""

    def __init__(self, enable, custom_white_list, custom_black_list, level, dtype, use_promote, who):
        if not isinstance(level, str) or level.upper() not in _LEVELS:
            raise ValueError(f"ddg.amp.{who}: level must be one of {', '.join(_LEVELS)}, got {level!r}")
        level = level.upper()
        for lst, what in ((custom_white_list, "custom_white_list"), (custom_black_list, "custom_black_list")):
            if lst is not None and (isinstance(lst, (str, bytes)) or not hasattr(lst, "__iter__")):
                raise TypeError(f"ddg.amp.{who}: {what} must be a set, list or tuple of op names, got {lst!r}")
        if enable:
            name = _dtype_name(dtype, who)
        else:
            name = dtype.lower() if isinstance(dtype, str) else "float16"
        self.enable = bool(enable) and level != "O0"
        self.level, self.dtype, self.use_promote = level, name, bool(use_promote)
        self.custom = (set(custom_white_list or ()), set(custom_black_list or ()))
        self.white, self.black = _lists(level, name if name in ("float16", "bfloat16") else "float16",
                                        *self.custom)
        self.low = _low_dtype(name, who) if self.enable else None
        self._saved = []

    def __enter__(self):
        _GlobalState.amp_dtype = self.dtype
        policy = None
        if self.enable:
            policy = AutoCast(self.low, self.level, self.white, self.black, self.use_promote, *self.custom)
        self._saved.append(dispatch.install(_function._autocast, policy))
        return self

    def __exit__(self, *exc):
        policy = _function._autocast[0]
        if policy is not None:
            policy.active = False
        dispatch.restore(_function._autocast, self._saved.pop())
        return False


def auto_cast(enable=True, custom_white_list=None, custom_black_list=None, level="O1", dtype="float16",
              use_promote=True):
    """A context (also usable as a decorator) in which ops run in mixed precision.

    ``level='O1'``: white-listed ops (matmul, linear, conv2d, einsum) run in ``dtype``,
    black-listed ones (softmax, losses, exp/log/pow, reductions, norms) in float32, and
    the others in the widest float dtype of their inputs. ``'O2'``: the same with the
    short O2 black list, for models whose parameters ``decorate`` made low-precision
    (with ``use_promote=False`` every op not black-listed runs in ``dtype``). ``'OD'``:
    only the white list in ``dtype``, everything else in float32. ``'O0'`` or
    ``enable=False``: no casting (also inside an enclosing ``auto_cast``). Custom lists
    take Paddle's op names (``'matmul_v2'``, ``'reduce_mean'``...), ddg's op class names
    (``'MatMul'``) or the classes."""
    return _AutoCastContext(enable, custom_white_list, custom_black_list, level, dtype, use_promote, "auto_cast")


def amp_guard(enable=True, custom_white_list=None, custom_black_list=None, level="O1", dtype="float16",
              use_promote=True):
    """Paddle's older name of :func:`auto_cast`."""
    return _AutoCastContext(enable, custom_white_list, custom_black_list, level, dtype, use_promote, "amp_guard")


def autocast(device_type=None, dtype="float16", enabled=True, cache_enabled=True):
    """PyTorch-style spelling: ``auto_cast(enable=enabled, dtype=dtype)`` (``device_type``
    and ``cache_enabled`` are accepted and ignored, as in Paddle)."""
    return _AutoCastContext(enabled, None, None, "O1", dtype, True, "autocast")


def is_autocast_enabled(device_type=None):
    """Whether ops are being cast now (inside an enabled ``auto_cast``)."""
    return _function._autocast[0] is not None


def get_autocast_dtype(device_type=None):
    """The low-precision dtype of the active ``auto_cast`` ('float16' when none is active)."""
    policy = _function._autocast[0]
    return "float16" if policy is None else policy.low.name


get_autocast_cpu_dtype = get_autocast_dtype
get_autocast_gpu_dtype = get_autocast_dtype


def is_float16_supported(device=None):
    """True: ddg computes in float16 on the CPU (numpy) and on GPUs (cupy)."""
    return True


def is_bfloat16_supported(device=None):
    """True once ddg has the bfloat16 dtype (ml_dtypes)."""
    try:
        _dtypes.convert_dtype("bfloat16")
    except TypeError:
        return False
    return True


# -- decorate ------------------------------------------------------------------------------
def _keep_fp32(layer, dtype):
    """Layers whose parameters stay float32 at O2 (as Paddle keeps them): excluded layers,
    batch norms, and for float16 also layer and instance norms."""
    from ..nn.layer import norm
    if not getattr(layer, "_cast_to_low_precision", True):
        return True
    bn = tuple(getattr(norm, n) for n in ("BatchNorm", "BatchNorm1D", "BatchNorm2D", "BatchNorm3D", "_BatchNormBase")
               if hasattr(norm, n))
    try:
        from ..parallel.sync_batch_norm import SyncBatchNorm
        bn = bn + (SyncBatchNorm,)
    except ImportError:  # pragma: no cover - the parallel layer is always there
        pass
    if isinstance(layer, bn):
        return True
    ln = tuple(getattr(norm, n) for n in ("LayerNorm", "InstanceNorm1D", "InstanceNorm2D", "InstanceNorm3D",
                                          "_InstanceNormBase") if hasattr(norm, n))
    return dtype == "float16" and isinstance(layer, ln)


def _mark_excluded(models, excluded_layers):
    if excluded_layers is None:
        return
    items = excluded_layers if isinstance(excluded_layers, (list, tuple)) else [excluded_layers]
    types = []
    for item in items:
        if isinstance(item, Layer):
            for sub in item.sublayers(include_self=True):
                sub.__dict__["_cast_to_low_precision"] = False
        elif isinstance(item, type) and issubclass(item, Layer):
            types.append(item)
        else:
            raise TypeError("ddg.amp.decorate: excluded_layers must be a Layer instance or type, or a list of them; "
                            f"got {item!r}")
    if types:
        for model in models:
            for sub in model.sublayers(include_self=True):
                if isinstance(sub, tuple(types)):
                    sub.__dict__["_cast_to_low_precision"] = False


def _cast_layer(layer, low):
    """Cast this layer's own floating parameters and buffers (not its sublayers') in place;
    the Parameter objects stay the same, so optimizers built earlier keep working."""
    for t in list(layer._parameters.values()) + list(layer._buffers.values()):
        if t is None:
            continue
        arr = t._data
        if arr.dtype.kind != "f" and arr.dtype.name != "bfloat16" or arr.dtype == low:
            continue
        t._data = arr.astype(low)
        t._vc = [0]
        if t._grad is not None:
            t._grad = Tensor._wrap(t._grad._data.astype(low))
    layer.__dict__["_dtype"] = low


class _SaveDtypeHook:
    """A state_dict hook casting floating values to ``save_dtype`` (the parameters keep theirs)."""

    def __init__(self, save_dtype):
        self.dtype = _dtypes.convert_dtype(save_dtype)

    def __call__(self, state_dict):
        from ..autograd.ops.elementwise import cast
        for key, value in list(state_dict.items()):
            if isinstance(value, Tensor) and (value._data.dtype.kind == "f" or value._data.dtype.name == "bfloat16"):
                out = cast(value, self.dtype)
                if out is value:
                    continue
                out = out.detach() if hasattr(out, "detach") else out
                if getattr(value, "name", None) is not None:
                    try:
                        out.name = value.name
                    except AttributeError:
                        pass
                state_dict[key] = out


def decorate(models, optimizers=None, level="O1", dtype="float16", master_weight=None, save_dtype=None,
             master_grad=False, excluded_layers=None):
    """Prepare models (and optimizers) for mixed precision. ``level='O1'`` changes nothing.
    ``level='O2'`` casts every parameter and floating buffer to ``dtype``, except those of
    batch norms (and, for float16, layer and instance norms) and of ``excluded_layers``,
    and turns on master weights in the optimizers (``master_weight=False`` leaves them
    off): each keeps a float32 copy of every low-precision parameter and float32 moments,
    updates the copy from float32 gradients, and rounds it back into the parameter.
    ``save_dtype`` casts the values ``state_dict()`` returns (the parameters keep their
    dtype). ``master_grad=True`` is accepted: with master weights the gradients are
    already used in float32 (clipping, decay and the update). Returns what it was given:
    a model or a list, with an optimizer or a list."""
    if level not in ("O1", "O2"):
        raise ValueError(f"ddg.amp.decorate: level must be 'O1' or 'O2' (O1: mixed precision, the models are "
                         f"left as they are; O2: low-precision parameters), got {level!r}")
    name = _dtype_name(dtype, "decorate")
    if save_dtype is not None:
        sname = save_dtype if isinstance(save_dtype, str) else _dtypes.convert_dtype(save_dtype).name
        if sname not in ("float16", "bfloat16", "float32", "float64"):
            raise ValueError(f"ddg.amp.decorate: save_dtype must be float16, bfloat16, float32 or float64, "
                             f"got {save_dtype!r}")
    if level == "O1":
        return models if optimizers is None else (models, optimizers)
    low = _low_dtype(name, "decorate")

    from ..parallel.data_parallel import DataParallel
    single_model = isinstance(models, Layer)
    model_list = [models] if single_model else models
    if not isinstance(model_list, list) or not all(isinstance(m, Layer) for m in model_list):
        raise TypeError(f"ddg.amp.decorate: models must be a Layer or a list of Layers, got {type(models).__name__}")
    for m in model_list:
        if isinstance(m, DataParallel):
            raise RuntimeError("ddg.amp.decorate: decorate the model first, then wrap it in ddg.DataParallel "
                               "(the parameters DataParallel checks and broadcasts must already be low-precision)")
    _mark_excluded(model_list, excluded_layers)
    for m in model_list:
        for layer in m.sublayers(include_self=True):
            if not _keep_fp32(layer, name):
                _cast_layer(layer, low)

    single_opt = isinstance(optimizers, Optimizer)
    opt_list = [] if optimizers is None else ([optimizers] if single_opt else optimizers)
    if optimizers is not None and (not isinstance(opt_list, list) or
                                   not all(isinstance(o, Optimizer) for o in opt_list)):
        raise TypeError(f"ddg.amp.decorate: optimizers must be an Optimizer or a list of them, "
                        f"got {type(optimizers).__name__}")
    for opt in opt_list:
        opt._multi_precision = master_weight is not False
        opt._max_numel = {}  # scratch sizes by dtype change with the parameters' dtypes

    if save_dtype is not None:
        for m in model_list:
            for layer in m.sublayers(include_self=True):
                layer.register_state_dict_hook(_SaveDtypeHook(save_dtype))

    out_models = models
    if optimizers is None:
        return out_models
    return out_models, optimizers


amp_decorate = decorate
