"""simcupy: a numpy-backed stand-in for cupy, for machines without an NVIDIA GPU.

Put ``tests/simgpu`` first on ``PYTHONPATH`` and ``import cupy`` finds this module
instead of the real one; ddg's backend then sees one "GPU" and every GPU code path
of ddg (placement, ``xp`` dispatch, the staging communicator, DataParallel on device
buffers, the device-to-host audit) runs on CI. The arithmetic is numpy's, so this
proves plumbing, not CUDA kernels: cuDNN, cuBLAS, NCCL, CUDA-aware MPI, streams
running asynchronously, TF32 and speed are out of its reach.

Where cupy and numpy differ, this module behaves like cupy, and errs on the strict
side, so that code which works here has a fair chance on a real GPU:

* its ``ndarray`` is a separate type holding a private numpy array; converting it to
  numpy implicitly (``np.asarray``, the buffer protocol) raises TypeError, as cupy's
  does; ``.get()``, ``cupy.asnumpy`` and friends are the explicit ways out;
* a numpy array (of any rank) passed where cupy wants a device array raises
  TypeError (cupy refuses host arrays in its ufuncs and routines; indices and
  ``cupy.asarray``/``array`` accept them, as in cupy);
* reductions and scalar indexing give 0-d device arrays, not numpy scalars;
* only names that cupy 14 exports exist here (``cupy_names.json`` lists them, read
  off ``dir()`` of cupy-cuda12x 14.2.0); a name cupy has and this module does not
  simulate raises NotImplementedError, never a silent numpy fallback; cupy's
  routines accept only their own parameters (also listed there: ``cupy.max`` has
  no ``initial=``, for one), even where numpy's take more;
* ``cupy.random.RandomState`` has cupy's method names and signatures (cupy's
  ``standard_normal`` takes ``dtype``; there is no ``random()`` method);
* every device-to-host transfer (``get``, ``asnumpy``, ``item``, ``tolist``,
  ``tobytes``, ``float()``/``int()``/``bool()``, printing) is recorded in
  :data:`transfers`, with the stack that caused it;
* every operation that would launch work on a real GPU is counted in :data:`launches`
  (see :class:`_LaunchLog` for what counts), the figure that kernel-count budgets are
  checked against without a GPU;
* bfloat16 is ml_dtypes' numpy dtype, as in cupy 14 (which has no ``cupy.bfloat16``
  name either: ``cupy_names.json`` lists none); arrays of it compute as numpy with
  ml_dtypes does, so half-precision numerics on a real GPU (cuBLAS, NCCL) are not shown;
* assigning a host array of more than one element into a device array
  (``d[...] = numpy_array``) raises ValueError, as cupy's does.

Set ``SIMCUPY_DEVICES`` (default 1) for more simulated devices; arrays remember the
device that was current when they were made, and mixing devices in one operation
raises ValueError (as cupy does without peer access).
"""
import builtins as _builtins
import json
import os
import sys
import threading
import traceback
import types

import numpy as _np

SIMULATED = True
__version__ = "14.2.0"   # the cupy release whose namespace is mirrored

_HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_HERE, "..", "cupy_names.json")) as _f:
    _NAMES = json.load(_f)

_N_DEVICES = int(os.environ.get("SIMCUPY_DEVICES", "1"))
_state = threading.local()


def _current_device():
    return getattr(_state, "device", 0)


def _set_current_device(i):
    _state.device = i


# ---------------------------------------------------------------------------
# transfer log

class _TransferLog:
    """Device-to-host (``d2h``) and host-to-device (``h2d``) transfers, as
    (what, short stack) pairs, while ``enabled``."""

    def __init__(self):
        self.d2h = []
        self.h2d = []
        self.enabled = True

    def clear(self):
        self.d2h.clear()
        self.h2d.clear()

    def _add(self, kind, what):
        if self.enabled:
            stack = "".join(traceback.format_stack(limit=8)[:-3])
            getattr(self, kind).append((what, stack))


transfers = _TransferLog()


class _LaunchLog:
    """Work a real GPU would be given, counted per operation name while ``enabled``.

    One launch per: ufunc call (also ``reduce``/``accumulate``/``reduceat``/``outer``/
    ``at``), routine or ndarray method whose result is a new array (``zeros`` counts as
    the memset it is; ``empty``/``empty_like`` allocate without a launch), write through
    ``out=`` or into a routine's first argument (``copyto``...), advanced-indexing read, ``__setitem__``, random draw. Views (``reshape``
    of a contiguous array, basic slicing, ``transpose``, ``broadcast_to``...) and
    host-to-device copies (counted in :data:`transfers`) are no launches. cuBLAS, cuDNN
    and cupy's reductions sometimes run more than one kernel where this counts one, so
    the figure is a floor on a real GPU's count, and exact for comparing two versions
    of the same code."""

    def __init__(self):
        self.count = 0
        self.by_name = {}
        self.enabled = True

    def clear(self):
        self.count = 0
        self.by_name = {}

    def add(self, name):
        if self.enabled:
            self.count += 1
            self.by_name[name] = self.by_name.get(name, 0) + 1


launches = _LaunchLog()
_NO_LAUNCH = {"empty", "empty_like", "ndarray"}
_WRITES_FIRST = {"copyto", "put", "place", "putmask", "fill_diagonal"}  # return None, write their first argument


# ---------------------------------------------------------------------------
# the array type

_IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. "
             "Please use `.get()` to construct a NumPy array explicitly.")


def _unsupported(x):
    return TypeError(f"Unsupported type {type(x)}")


def _unwrap(x, dev, strict):
    """The numpy array behind ``x`` (recursing into lists, tuples and dicts).
    ``strict``: host numpy arrays are refused, as cupy's routines refuse them. The device
    arrays met are appended to ``dev`` after its first entry (the device)."""
    t = type(x)
    if t is ndarray:
        dev.append(x._a)
        if dev[0] is None:
            dev[0] = x._dev
        elif x._dev != dev[0]:
            raise ValueError(f"Array device must be same as the current device: "
                             f"array device = {x._dev} while current = {dev[0]}")
        return x._a
    if t is _np.ndarray:
        if strict:
            raise _unsupported(x)
        transfers._add("h2d", f"host array {x.dtype}{list(x.shape)}")
        return x
    if t is list or t is tuple:
        return t(_unwrap(v, dev, strict) for v in x)
    if t is dict:
        return {k: _unwrap(v, dev, strict) for k, v in x.items()}
    return x


def _wrap(r, dev):
    if isinstance(r, _np.ndarray):
        return ndarray._of(r, dev)
    if isinstance(r, _np.generic):
        return ndarray._of(_np.asarray(r), dev)
    if isinstance(r, tuple):
        return tuple(_wrap(v, dev) for v in r)
    if isinstance(r, list):
        return [_wrap(v, dev) for v in r]
    return r


def _call(fn, args, kwargs, strict=True, index_args=()):
    """Run numpy ``fn`` on the unwrapped arguments and wrap the result as device arrays."""
    dev = [None]
    args = list(args)
    for i, a in enumerate(args):
        args[i] = _unwrap(a, dev, strict and i not in index_args)
    out = kwargs.get("out")
    kwargs = _unwrap(kwargs, dev, strict)
    if dev[0] is None:
        dev[0] = _current_device()
    r = fn(*args, **kwargs)
    if out is not None:
        launches.add(fn.__name__)
        return out
    if fn.__name__ in _WRITES_FIRST:  # writes into its first argument: a copy kernel
        launches.add(fn.__name__)
    if _launched(r, dev[1:]) and fn.__name__ not in _NO_LAUNCH:
        launches.add(fn.__name__)
    return _wrap(r, dev[0])


def _launched(r, inputs):
    """Whether computing ``r`` from the device arrays ``inputs`` took GPU work: it holds
    an array that is not a view of one of them (new memory never overlaps live arrays)."""
    if isinstance(r, (tuple, list)):
        return _builtins.any(_launched(v, inputs) for v in r)
    if isinstance(r, _np.generic):
        return True
    if not isinstance(r, _np.ndarray):
        return False
    return not _builtins.any(_np.may_share_memory(r, a) for a in inputs)


def _d2h(self, what):
    transfers._add("d2h", f"ndarray.{what} of {self._a.dtype}{list(self._a.shape)}")


class Flags:
    """cupy's ndarray flags: c_contiguous, f_contiguous, owndata (no ``writeable``)."""
    __slots__ = ("_f",)

    def __init__(self, f):
        self._f = f

    c_contiguous = property(lambda s: s._f.c_contiguous)
    f_contiguous = property(lambda s: s._f.f_contiguous)
    owndata = property(lambda s: s._f.owndata)

    def __getitem__(self, k):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous,
                "OWNDATA": self.owndata}[k]


class ndarray:
    """A device array (simulated): a numpy array that numpy may not touch directly."""
    __slots__ = ("_a", "_dev", "__weakref__")
    __array_priority__ = 100.0

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        if memptr is not None or strides is not None:
            raise NotImplementedError("simulated cupy: ndarray(memptr=, strides=) is not simulated")
        self._a = _np.empty(shape, dtype=dtype, order=order)
        self._dev = _current_device()

    @classmethod
    def _of(cls, a, dev):
        obj = object.__new__(cls)
        obj._a = a
        obj._dev = dev
        return obj

    # -- attributes ----------------------------------------------------------
    shape = property(lambda s: s._a.shape)
    dtype = property(lambda s: s._a.dtype)
    ndim = property(lambda s: s._a.ndim)
    size = property(lambda s: s._a.size)
    itemsize = property(lambda s: s._a.itemsize)
    nbytes = property(lambda s: s._a.nbytes)
    strides = property(lambda s: s._a.strides)
    flags = property(lambda s: Flags(s._a.flags))
    T = property(lambda s: ndarray._of(s._a.T, s._dev))
    mT = property(lambda s: ndarray._of(_np.swapaxes(s._a, -1, -2), s._dev))
    base = property(lambda s: None if s._a.base is None else ndarray._of(s._a.base, s._dev))
    device = property(lambda s: cuda.Device(s._dev))
    data = property(lambda s: cuda.memory.MemoryPointer(s))

    @shape.setter
    def shape(self, v):
        self._a.shape = v

    @property
    def real(self):
        return ndarray._of(self._a.real, self._dev)

    @property
    def imag(self):
        return ndarray._of(self._a.imag, self._dev)

    # -- leaving the device --------------------------------------------------
    def __array__(self, *args, **kwargs):
        raise TypeError(_IMPLICIT)

    def get(self, stream=None, order="C", out=None, blocking=True):
        _d2h(self, "get")
        if out is not None:
            if not isinstance(out, _np.ndarray):
                raise TypeError("Only numpy.ndarray can be obtained from cupy.ndarray")
            if out.shape != self._a.shape or out.dtype != self._a.dtype:
                raise ValueError(f"Shape or dtype mismatch: out {out.dtype}{out.shape} vs "
                                 f"{self._a.dtype}{self._a.shape}")
            out[...] = self._a
            return out
        return _np.array(self._a, order=order)

    def set(self, arr, stream=None):
        if not isinstance(arr, _np.ndarray):
            raise TypeError(f"Only numpy.ndarray can be set to cupy.ndarray, got {type(arr)}")
        if arr.dtype != self._a.dtype:
            raise TypeError(f"{arr.dtype} array cannot be set to {self._a.dtype} array")
        if arr.shape != self._a.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self._a.shape}, new shape: {arr.shape}")
        if not (self._a.flags.c_contiguous or self._a.flags.f_contiguous):
            raise RuntimeError("Cannot set to non-contiguous array")
        transfers._add("h2d", "ndarray.set")
        self._a[...] = arr

    def item(self, *args):
        _d2h(self, "item")
        return self._a.item(*args)

    def tolist(self):
        _d2h(self, "tolist")
        return self._a.tolist()

    def tobytes(self, order="C"):
        _d2h(self, "tobytes")
        return self._a.tobytes(order)

    def __float__(self):
        _d2h(self, "__float__")
        return float(self._a)

    def __int__(self):
        _d2h(self, "__int__")
        return int(self._a)

    def __bool__(self):
        _d2h(self, "__bool__")
        return _builtins.bool(self._a)   # this module's `bool` is cupy.bool

    def __complex__(self):
        _d2h(self, "__complex__")
        return complex(self._a)

    def __repr__(self):
        _d2h(self, "__repr__")
        return repr(self._a)

    def __str__(self):
        _d2h(self, "__str__")
        return str(self._a)

    def __format__(self, spec):
        _d2h(self, "__format__")
        return format(self._a.item() if self._a.ndim == 0 else self._a, spec)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._a)))

    def __copy__(self):
        return ndarray._of(self._a.copy(), self._dev)

    def __deepcopy__(self, memo):
        return ndarray._of(self._a.copy(), self._dev)

    def __reduce__(self):   # pickling brings the data to the host, as cupy's does
        _d2h(self, "__reduce__")
        return (_rebuild, (self._a.copy(), self._dev))

    # -- dlpack (only between simulated arrays) ------------------------------
    def __dlpack_device__(self):
        return (2, self._dev)   # kDLCUDA

    def __dlpack__(self, stream=None, **kwargs):
        return self._a.__dlpack__()

    def toDlpack(self):
        return self._a.__dlpack__()

    # -- indexing ------------------------------------------------------------
    def __getitem__(self, key):
        dev = [self._dev]
        k = _unwrap(key, dev, False)
        r = self._a[k]
        if isinstance(r, _np.generic):   # cupy gives a 0-d view, not a scalar
            r = self._a[(k if isinstance(k, tuple) else (k,)) + (Ellipsis,)]
        if not _np.may_share_memory(r, self._a):
            launches.add("__getitem__")  # advanced indexing: a gather kernel
        return ndarray._of(r, self._dev)

    def __setitem__(self, key, value):
        if type(value) is _np.ndarray and value.size != 1:
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        dev = [self._dev]
        self._a[_unwrap(key, dev, False)] = _unwrap(value, dev, False)
        launches.add("__setitem__")

    # -- numpy protocols: numpy functions on device arrays run "on the device" --
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        sim = _UFUNCS.get(ufunc.__name__)
        if sim is None:
            return NotImplemented
        return getattr(sim, method)(*inputs, **kwargs)

    def __array_function__(self, func, types_, args, kwargs):
        mod = func.__module__ or ""
        space = {"numpy": _this, "numpy.linalg": linalg}.get(mod)
        if space is None and mod.startswith("numpy.lib"):
            space = _this
        f = getattr(space, func.__name__, None) if space is not None else None
        if f is None:
            return NotImplemented
        return f(*args, **kwargs)


def _rebuild(a, dev):
    return ndarray._of(a, dev)


def _method(name, index_args=()):
    def m(self, *args, **kwargs):
        return _call(getattr(_np.ndarray, name), (self,) + args, kwargs, index_args=index_args)
    m.__name__ = name
    return m


_SPECIAL = {"get", "set", "item", "tolist", "tobytes", "device", "data", "flags", "T", "mT", "base",
            "real", "imag", "shape", "dtype", "ndim", "size", "itemsize", "nbytes", "strides",
            "toDlpack"}
_INDEXED = {"take": (1,), "put": (1,), "choose": (1,), "compress": (1,)}
for _name in _NAMES["ndarray"]:
    if _name in _SPECIAL or hasattr(ndarray, _name):
        continue
    if hasattr(_np.ndarray, _name) and callable(getattr(_np.ndarray, _name)):
        setattr(ndarray, _name, _method(_name, _INDEXED.get(_name, ())))


def _binary(ufunc_name, reflected=False, inplace=False):
    def op(self, other):
        f = _UFUNCS[ufunc_name]
        if inplace:
            return f(self, other, out=self)
        return f(other, self) if reflected else f(self, other)
    return op


for _op, _uf in [("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "true_divide"),
                 ("floordiv", "floor_divide"), ("mod", "remainder"), ("pow", "power"),
                 ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor"),
                 ("lshift", "left_shift"), ("rshift", "right_shift"), ("matmul", "matmul")]:
    setattr(ndarray, f"__{_op}__", _binary(_uf))
    setattr(ndarray, f"__r{_op}__", _binary(_uf, reflected=True))
    if _op != "matmul":
        setattr(ndarray, f"__i{_op}__", _binary(_uf, inplace=True))
for _op, _uf in [("eq", "equal"), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"),
                 ("gt", "greater"), ("ge", "greater_equal")]:
    setattr(ndarray, f"__{_op}__", _binary(_uf))
ndarray.__neg__ = lambda s: _UFUNCS["negative"](s)
ndarray.__pos__ = lambda s: _UFUNCS["positive"](s)
ndarray.__abs__ = lambda s: _UFUNCS["absolute"](s)
ndarray.__invert__ = lambda s: _UFUNCS["invert"](s)
ndarray.__divmod__ = lambda s, o: _UFUNCS["divmod"](s, o)
ndarray.__hash__ = None


# ---------------------------------------------------------------------------
# ufuncs and routines

class ufunc:
    """A cupy ufunc (simulated by the numpy ufunc of the same name)."""

    def __init__(self, npf):
        self._f = npf
        self.name = self.__name__ = npf.__name__
        self.nin, self.nout, self.nargs, self.types = npf.nin, npf.nout, npf.nargs, npf.types

    def __call__(self, *args, **kwargs):
        for k in kwargs:
            if k not in ("out", "dtype", "casting"):    # cupy's ufuncs take no where=, order=, subok=
                raise TypeError(f"Wrong arguments {{'{k}': ...}} for cupy ufunc '{self.name}'")
        return _call(self._f, args, kwargs)

    def reduce(self, *args, **kwargs):
        return _call(self._f.reduce, args, kwargs)

    def accumulate(self, *args, **kwargs):
        return _call(self._f.accumulate, args, kwargs)

    def reduceat(self, *args, **kwargs):
        return _call(self._f.reduceat, args, kwargs, index_args=(1,))

    def outer(self, *args, **kwargs):
        return _call(self._f.outer, args, kwargs)

    def at(self, a, indices, b=None):
        _call(self._f.at, (a, indices) if b is None else (a, indices, b), {}, index_args=(1,))

    def __repr__(self):
        return f"<ufunc '{self.name}' (simulated)>"


_UFUNCS = {}
_this = sys.modules[__name__]


def _not_simulated(qualname):
    def f(*args, **kwargs):
        raise NotImplementedError(f"simulated cupy: {qualname} is not simulated (it exists in cupy)")
    f.__name__ = qualname.rsplit(".", 1)[-1]
    return f


def _routine(name, npf, strict=True, index_args=()):
    accepted = _NAMES["keywords"].get(name)

    def f(*args, **kwargs):
        if accepted is not None:   # cupy's own parameter names (numpy's often has more)
            if len(args) > len(accepted):
                raise TypeError(f"cupy.{name}() takes at most {len(accepted)} arguments ({len(args)} given)")
            for k in kwargs:
                if k not in accepted:
                    raise TypeError(f"cupy.{name}() got an unexpected keyword argument '{k}'")
        return _call(npf, args, kwargs, strict=strict, index_args=index_args)
    f.__name__ = name
    f.__qualname__ = name
    return f


for _name in _NAMES["ufuncs"]:
    _npf = getattr(_np, _name, None)
    if isinstance(_npf, _np.ufunc):
        _UFUNCS[_name] = globals()[_name] = ufunc(_npf)
    elif callable(_npf):   # fix, i0, sinc: ufuncs in cupy, functions in numpy
        globals()[_name] = _routine(_name, _npf)
    else:
        globals()[_name] = _not_simulated(f"cupy.{_name}")
# numpy's __array_ufunc__ hands over the ufunc's own __name__ (np.true_divide is 'divide')
for _name, _u in list(_UFUNCS.items()):
    _UFUNCS.setdefault(_u._f.__name__, _u)
_UFUNCS.setdefault("matmul", ufunc(_np.matmul))   # a generalized ufunc in cupy, behind `@`

# routines that accept host data: conversions (host-to-device copies) and index arguments
_CONVERT = {"array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "copy"}
_INDEX_ARGS = {"take": (1,), "take_along_axis": (1,), "put": (1,), "put_along_axis": (1,),
               "choose": (0,), "compress": (0,), "ravel_multi_index": (0,), "unravel_index": (0,),
               # split points are iterated on the host by cupy
               "split": (1,), "array_split": (1,), "hsplit": (1,), "vsplit": (1,), "dsplit": (1,)}
# numpy gives Python scalars here, cupy gives 0-d device arrays
_SCALAR_TO_ARRAY = {"count_nonzero", "allclose", "array_equal", "array_equiv"}
_SPECIAL_FUNCS = {"asnumpy", "get_array_module", "is_available", "from_dlpack", "fromDlpack",
                  "get_default_memory_pool", "get_default_pinned_memory_pool", "fuse", "memoize",
                  "clear_memo"}


def _converter(name, npf):
    def f(a, *args, **kwargs):
        if type(a) is ndarray:
            if name == "asarray" and (kwargs.get("dtype", args[0] if args else None) in (None, a.dtype)):
                return a
            return _call(npf, (a,) + args, kwargs)
        host = a if type(a) is _np.ndarray else _unwrap(a, [None], False)
        if name != "copy":
            transfers._add("h2d", f"cupy.{name}")   # one entry per conversion
        return _wrap(_np.array(npf(host, *args, **kwargs), copy=True), _current_device())
    f.__name__ = name
    return f


def _scalar_routine(name, npf):
    def f(*args, **kwargs):
        r = _call(npf, args, kwargs)
        return ndarray._of(_np.asarray(r), _current_device()) if not isinstance(r, ndarray) else r
    f.__name__ = name
    return f


for _name in _NAMES["functions"]:
    if _name in _SPECIAL_FUNCS:
        continue
    _npf = getattr(_np, _name, None)
    if _npf is None or not callable(_npf):
        globals()[_name] = _not_simulated(f"cupy.{_name}")
    elif _name in _CONVERT:
        globals()[_name] = _converter(_name, _npf)
    elif _name in _SCALAR_TO_ARRAY:
        globals()[_name] = _scalar_routine(_name, _npf)
    else:
        globals()[_name] = _routine(_name, _npf, index_args=_INDEX_ARGS.get(_name, ()))

for _name in _NAMES["other"]:
    if _name in ("ndarray", "ufunc", "cuda", "random", "linalg", "lib", "fft", "testing", "polynomial",
                 "typing", "exceptions", "annotations"):
        continue
    _v = getattr(_np, _name, None)
    if _v is not None:
        globals()[_name] = _v
    elif _name in ("ElementwiseKernel", "RawKernel", "RawModule", "ReductionKernel"):
        globals()[_name] = _not_simulated(f"cupy.{_name}")


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    if type(a) is ndarray:
        return a.get(stream=stream, order=order, out=out)
    r = _np.asarray(a, order=order)
    if out is not None:
        out[...] = r
        return out
    return r


def get_array_module(*args):
    for a in args:
        if type(a) is ndarray:
            return _this
    return _np


def is_available():
    return _N_DEVICES > 0


def from_dlpack(obj, *args, **kwargs):
    if type(obj) is ndarray:
        return ndarray._of(obj._a, obj._dev)   # zero-copy, same device
    raise NotImplementedError("simulated cupy: from_dlpack of a foreign producer is not simulated")


fromDlpack = from_dlpack


def fuse(*args, **kwargs):
    raise NotImplementedError("simulated cupy: cupy.fuse is not simulated")


# ---------------------------------------------------------------------------
# submodules: cuda, random, linalg, lib.stride_tricks

def _module(name, doc):
    m = types.ModuleType(name, doc)
    sys.modules[name] = m
    return m


cuda = _module("cupy.cuda", "simulated cupy.cuda: devices, streams, events, memory pools")
cuda.cudnn_enabled = False   # no cuDNN: ddg falls back to its im2col kernels
cuda.nccl_enabled = False    # no NCCL: ddg's MPI communicators are used
cuda.cub_enabled = False
cuda.thrust_enabled = False


class CUDARuntimeError(RuntimeError):
    pass


class _Runtime:
    CUDARuntimeError = CUDARuntimeError
    is_hip = False

    @staticmethod
    def getDeviceCount():
        return _N_DEVICES

    @staticmethod
    def getDevice():
        return _current_device()

    @staticmethod
    def setDevice(i):
        cuda.Device(i).use()

    @staticmethod
    def getDeviceProperties(i):
        return {"name": b"simulated GPU (numpy)", "totalGlobalMem": 80 << 30, "major": 9, "minor": 0,
                "multiProcessorCount": 1}

    @staticmethod
    def runtimeGetVersion():
        return 12000

    @staticmethod
    def driverGetVersion():
        return 12000

    @staticmethod
    def memGetInfo():
        return (80 << 30, 80 << 30)

    @staticmethod
    def deviceSynchronize():
        pass


cuda.runtime = _Runtime()


class Device:
    def __init__(self, device=None):
        i = _current_device() if device is None else int(device)
        if not 0 <= i < _N_DEVICES:
            raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")
        self.id = i
        self._prev = []

    def use(self):
        _set_current_device(self.id)

    def synchronize(self):
        pass

    @property
    def compute_capability(self):
        return "90"

    def __enter__(self):
        self._prev.append(_current_device())
        _set_current_device(self.id)
        return self

    def __exit__(self, *exc):
        _set_current_device(self._prev.pop())

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("simdev", self.id))

    def __int__(self):
        return self.id

    def __repr__(self):
        return f"<CUDA Device {self.id} (simulated)>"


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.done = True

    def record(self, stream=None):
        self.done = True

    def synchronize(self):
        pass

    def query(self):
        return True


class Stream:
    """Every simulated operation completes at once, so streams only count synchronizations."""
    synchronizations = 0

    def __init__(self, null=False, non_blocking=False, ptr=0, priority=None):
        self.null = null
        self.ptr = ptr
        self._prev = []

    def synchronize(self):
        Stream.synchronizations += 1

    def record(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event):
        pass

    def use(self):
        _state.stream = self
        return self

    def __enter__(self):
        self._prev.append(get_current_stream())
        _state.stream = self
        return self

    def __exit__(self, *exc):
        _state.stream = self._prev.pop()


Stream.null = Stream(null=True)


def get_current_stream(device_id=-1):
    return getattr(_state, "stream", Stream.null)


def get_elapsed_time(start, end):
    return 0.0


class PinnedMemoryPointer(bytearray):
    """Host memory from ``alloc_pinned_memory`` (plain host memory here); supports the
    buffer protocol like cupy's."""

    @property
    def size(self):
        return len(self)


def alloc_pinned_memory(size):
    return PinnedMemoryPointer(int(size))


class _MemoryPointer:
    def __init__(self, arr):
        self._arr = arr
        self.ptr = arr._a.__array_interface__["data"][0]
        self.device_id = arr._dev
        self.device = Device(arr._dev)

    def copy_to_host(self, mem, size):
        transfers._add("d2h", "MemoryPointer.copy_to_host")
        raise NotImplementedError("simulated cupy: raw MemoryPointer copies are not simulated")

    copy_to_host_async = copy_to_host


class MemoryPool:
    """Allocation bookkeeping is not simulated: the figures are 0."""

    def used_bytes(self):
        return 0

    def total_bytes(self):
        return 0

    def free_bytes(self):
        return 0

    def free_all_blocks(self, stream=None):
        pass

    def n_free_blocks(self):
        return 0

    def set_limit(self, size=None, fraction=None):
        pass

    def get_limit(self):
        return 0


class PinnedMemoryPool(MemoryPool):
    pass


_pool, _pinned_pool = MemoryPool(), PinnedMemoryPool()


def get_default_memory_pool():
    return _pool


def get_default_pinned_memory_pool():
    return _pinned_pool


cuda.Device, cuda.Event, cuda.Stream = Device, Event, Stream
cuda.get_current_stream, cuda.get_elapsed_time = get_current_stream, get_elapsed_time
cuda.alloc_pinned_memory, cuda.PinnedMemoryPointer = alloc_pinned_memory, PinnedMemoryPointer
cuda.MemoryPool, cuda.PinnedMemoryPool = MemoryPool, PinnedMemoryPool
cuda.MemoryPointer = _MemoryPointer
cuda.is_available = is_available
cuda.get_device_id = _current_device
cuda.memory = _module("cupy.cuda.memory", "simulated cupy.cuda.memory")
cuda.memory.MemoryPointer, cuda.memory.MemoryPool = _MemoryPointer, MemoryPool
cuda.memory.alloc_pinned_memory = alloc_pinned_memory
cuda.device = _module("cupy.cuda.device", "simulated cupy.cuda.device")
cuda.device.Device, cuda.device.get_device_id = Device, _current_device
cuda.stream = _module("cupy.cuda.stream", "simulated cupy.cuda.stream")
cuda.stream.Stream, cuda.stream.Event = Stream, Event
cuda.stream.get_current_stream = get_current_stream


# -- random ---------------------------------------------------------------------------------
random = _module("cupy.random", "simulated cupy.random (cupy's RandomState API on numpy's PCG64)")


def _float_dtype(dtype, what):
    dt = _np.dtype(dtype)
    if dt not in (_np.float32, _np.float64):
        raise TypeError(f"cupy.random.RandomState.{what}: dtype must be float32 or float64, got {dt}")
    return dt


def _size(size):
    return () if size is None else size


class RandomState:
    """cupy.random.RandomState's methods and signatures (a numpy generator underneath)."""

    def __init__(self, seed=None, method=None):
        self.seed(seed)

    def seed(self, seed=None):
        self._g = _np.random.Generator(_np.random.PCG64(seed))

    def _out(self, a):
        launches.add("random")
        return ndarray._of(_np.ascontiguousarray(a), _current_device())

    def random_sample(self, size=None, dtype=float):
        dt = _float_dtype(dtype, "random_sample")
        return self._out(self._g.random(_size(size), dtype=dt))

    def rand(self, *size, **kwargs):
        return self.random_sample(size or None, kwargs.pop("dtype", float))

    def standard_normal(self, size=None, dtype=float):
        dt = _float_dtype(dtype, "standard_normal")
        return self._out(self._g.standard_normal(_size(size), dtype=dt))

    def randn(self, *size, **kwargs):
        return self.standard_normal(size or None, kwargs.pop("dtype", float))

    def normal(self, loc=0.0, scale=1.0, size=None, dtype=float):
        dt = _float_dtype(dtype, "normal")
        dev = [None]
        loc, scale = _unwrap(loc, dev, True), _unwrap(scale, dev, True)
        return self._out(self._g.normal(loc, scale, size).astype(dt))

    def uniform(self, low=0.0, high=1.0, size=None, dtype=float):
        dt = _float_dtype(dtype, "uniform")
        dev = [None]
        low, high = _unwrap(low, dev, True), _unwrap(high, dev, True)
        return self._out(self._g.uniform(low, high, size).astype(dt))

    def randint(self, low, high=None, size=None, dtype=int):
        if high is None:
            low, high = 0, low
        return self._out(_np.asarray(self._g.integers(low, high, size)).astype(dtype))

    def permutation(self, a):
        if isinstance(a, (int, _np.integer)):
            return self._out(self._g.permutation(int(a)))
        if type(a) is not ndarray:
            raise _unsupported(a)
        return self._out(self._g.permutation(a._a))

    def shuffle(self, a):
        if type(a) is not ndarray:
            raise TypeError("The array must be cupy.ndarray")
        self._g.shuffle(a._a)

    def choice(self, a, size=None, replace=True, p=None):
        dev = [None]
        a, p = _unwrap(a, dev, True), _unwrap(p, dev, True)
        return self._out(_np.asarray(self._g.choice(a, size, replace, p)))

    def binomial(self, n, p, size=None, dtype=int):
        return self._out(_np.asarray(self._g.binomial(n, p, size)).astype(dtype))


for _name in _NAMES["random_state"]:
    if not hasattr(RandomState, _name):
        setattr(RandomState, _name, _not_simulated(f"cupy.random.RandomState.{_name}"))

_random_states = {}


def get_random_state():
    dev = _current_device()
    if dev not in _random_states:
        _random_states[dev] = RandomState()
    return _random_states[dev]


def set_random_state(rs):
    _random_states[_current_device()] = rs


def _seed(seed=None):
    get_random_state().seed(seed)


def reset_states():
    _random_states.clear()


random.RandomState, random.get_random_state, random.set_random_state = RandomState, get_random_state, \
    set_random_state
random.seed, random.reset_states = _seed, reset_states
for _name in _NAMES["random"]:
    if hasattr(random, _name):
        continue
    _rs_name = {"random": "random_sample", "sample": "random_sample", "ranf": "random_sample"}.get(_name, _name)
    if hasattr(RandomState, _rs_name) and _name not in ("RandomState",):
        setattr(random, _name, (lambda n: lambda *a, **k: getattr(get_random_state(), n)(*a, **k))(_rs_name))
    else:
        setattr(random, _name, _not_simulated(f"cupy.random.{_name}"))


# -- linalg, lib.stride_tricks ----------------------------------------------------------------
linalg = _module("cupy.linalg", "simulated cupy.linalg")
for _name in _NAMES["linalg"]:
    _npf = getattr(_np.linalg, _name, None)
    if callable(_npf):
        setattr(linalg, _name, _routine(_name, _npf))
    elif _npf is not None:
        setattr(linalg, _name, _npf)

lib = _module("cupy.lib", "simulated cupy.lib")
lib.stride_tricks = _module("cupy.lib.stride_tricks", "simulated cupy.lib.stride_tricks")
for _name in _NAMES["stride_tricks"]:
    _npf = getattr(_np.lib.stride_tricks, _name, None)
    if callable(_npf):
        setattr(lib.stride_tricks, _name, _routine(_name, _npf))


def __getattr__(name):
    if name in ("fft", "testing", "polynomial", "typing", "exceptions"):
        raise NotImplementedError(f"simulated cupy: cupy.{name} is not simulated")
    raise AttributeError(f"module 'cupy' has no attribute '{name}'")
