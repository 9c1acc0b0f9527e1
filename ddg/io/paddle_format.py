"""Reading the files ``paddle.save`` writes (``.pdparams``, ``.pdopt``) without running
code from them.

Paddle pickles its state dicts: a dict (or list/tuple) of numpy arrays, numbers and
strings; a tensor nested anywhere else becomes a ``(name, array)`` tuple. An array is
pickled as ``numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b')`` followed
by ``BUILD`` with ``(1, shape, numpy.dtype(code, False, True), fortran, raw bytes)``
(``numpy._core`` under numpy 2). A general unpickler would import and call whatever a
file names, so this one is restricted:

* the only globals it resolves are those few numpy names, each replaced by a checking
  stand-in, the containers ``tuple``, ``list``, ``dict`` and
  ``collections.OrderedDict``, and protocol 2's ``_codecs.encode(text, 'latin1')`` for bytes; any other global is refused with a ValueError naming it;
* ``BUILD`` is accepted only on the arrays and dtypes those stand-ins made, with states
  of exactly the shapes above: raw bytes for the data, a plain bool/int/uint/float/complex
  dtype (no object, structured or sub-array dtypes);
* persistent ids and extension codes are refused by the base class.

So loading a hostile file can fail, but it can never run code.
"""
import collections
import io
import pickle

import numpy as np

from ..tensor.dtypes import bfloat16

_NUMPY_MODULES = ("numpy.core.multiarray", "numpy._core.multiarray")
_KINDS = "biufc"
_NAME_TABLE = "StructuredToParameterName@@"


class _NDArrayType:
    """Stands for ``numpy.ndarray`` in a pickle: only ``_reconstruct`` accepts it."""


def _check_dtype(d, name):
    if not isinstance(d, np.dtype) or d.kind not in _KINDS or d.fields is not None or d.subdtype is not None:
        raise ValueError(f"ddg.load: {name}: refuses arrays of dtype {d!r} (only bool, int, uint, float "
                         f"and complex)")
    return d


def _reconstruct(name):
    def reconstruct(subtype, shape, dtype_code):
        if subtype is not _NDArrayType:
            raise ValueError(f"ddg.load: {name}: numpy _reconstruct of something other than numpy.ndarray")
        return np.empty((0,), dtype=np.uint8)  # BUILD gives it its shape, dtype and bytes
    return reconstruct


def _dtype(name):
    def dtype(spec, align=False, copy=True):
        if isinstance(spec, bytes):  # a Python 2 pickle read with encoding='bytes' (CIFAR's batches)
            spec = spec.decode("ascii")
        if not isinstance(spec, str):
            raise ValueError(f"ddg.load: {name}: numpy dtype from {type(spec).__name__}, expected a type code")
        return _check_dtype(np.dtype(spec), name)
    return dtype


def _scalar(name):
    def scalar(dtype, data=b""):
        _check_dtype(dtype, name)
        if not isinstance(data, bytes) or len(data) != dtype.itemsize:
            raise ValueError(f"ddg.load: {name}: a numpy scalar of {dtype} needs {dtype.itemsize} bytes")
        return np.frombuffer(data, dtype=dtype)[0]
    return scalar


def _frombuffer(name):
    def frombuffer(buf, dtype, shape, order):
        _check_dtype(dtype, name)
        if not isinstance(buf, (bytes, bytearray, pickle.PickleBuffer)) or order not in ("C", "F"):
            raise ValueError(f"ddg.load: {name}: unexpected arguments to numpy's _frombuffer")
        if not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ValueError(f"ddg.load: {name}: bad array shape {shape!r}")
        raw = bytes(buf.raw() if isinstance(buf, pickle.PickleBuffer) else buf)
        if len(raw) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise ValueError(f"ddg.load: {name}: an array of shape {list(shape)} and dtype {dtype} needs "
                             f"{int(np.prod(shape, dtype=np.int64)) * dtype.itemsize} bytes, the file has {len(raw)}")
        return np.frombuffer(raw, dtype=dtype).reshape(shape, order=order).copy(order="K")
    return frombuffer


def _latin1(text, encoding="latin1"):
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise ValueError("ddg.load: _codecs.encode in a pickle is accepted only as protocol 2's bytes spelling")
    return text.encode("latin1")


class _RestrictedUnpickler(pickle._Unpickler):  # the Python implementation: its dispatch can be narrowed
    def __init__(self, file, name, encoding="ASCII"):
        super().__init__(file, encoding=encoding)
        self.name = name
        self.dispatch = dict(self.dispatch)
        self.dispatch[pickle.BUILD[0]] = _RestrictedUnpickler._build

    def find_class(self, module, qualname):
        if module in _NUMPY_MODULES and qualname == "_reconstruct":
            return _reconstruct(self.name)
        if module in _NUMPY_MODULES and qualname == "scalar":
            return _scalar(self.name)
        if module in ("numpy.core.numeric", "numpy._core.numeric") and qualname == "_frombuffer":
            return _frombuffer(self.name)  # pickle protocol 5
        if module == "numpy" and qualname == "ndarray":
            return _NDArrayType
        if module == "numpy" and qualname == "dtype":
            return _dtype(self.name)
        if module == "collections" and qualname == "OrderedDict":
            return collections.OrderedDict
        if module == "_codecs" and qualname == "encode":  # protocol 2 spells bytes as encode(str, 'latin1')
            return _latin1
        if module == "builtins" and qualname in ("tuple", "list", "dict"):  # paddle.save's (name, array) pairs
            return {"tuple": tuple, "list": list, "dict": dict}[qualname]
        raise ValueError(f"ddg.load: {self.name} refers to {module}.{qualname}; a Paddle checkpoint is read with "
                         f"a restricted unpickler that builds only numpy arrays, dicts, lists, tuples, numbers "
                         f"and strings, so it refuses every other global (no code from the file runs)")

    def _build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if isinstance(inst, np.dtype):
            # (version, byte order, subarray, names, fields, elsize, alignment, flags)
            if (not isinstance(state, tuple) or len(state) < 5 or state[2] is not None or state[3] is not None
                    or state[4] is not None):
                raise ValueError(f"ddg.load: {self.name}: refuses a structured or sub-array numpy dtype")
            inst.__setstate__(state)
            _check_dtype(inst, self.name)
            return
        if isinstance(inst, np.ndarray) and inst.size == 0 and inst.dtype == np.uint8 and inst.shape == (0,):
            # (version, shape, dtype, fortran order, raw bytes)
            ok = (isinstance(state, tuple) and len(state) == 5 and isinstance(state[1], tuple)
                  and all(isinstance(s, int) and s >= 0 for s in state[1]) and isinstance(state[4], bytes))
            if not ok:
                raise ValueError(f"ddg.load: {self.name}: unexpected numpy array state in the pickle")
            d = _check_dtype(state[2], self.name)
            n = int(np.prod(state[1], dtype=np.int64)) * d.itemsize
            if len(state[4]) != n:
                raise ValueError(f"ddg.load: {self.name}: an array of shape {list(state[1])} and dtype {d} needs "
                                 f"{n} bytes, the file has {len(state[4])}")
            inst.__setstate__(state)
            return
        raise ValueError(f"ddg.load: {self.name}: refuses to set the state of a {type(inst).__name__} object")


def load_plain_pickle(data, name, encoding="bytes"):
    """The object in a pickle of plain data (dicts, lists, tuples, numbers, strings,
    bytes and numpy arrays of plain dtypes), read with the same restricted unpickler
    (no code from the file runs; any other global is refused). ``encoding='bytes'``
    reads Python 2 pickles, such as CIFAR's batches, as their own code does."""
    try:
        return _RestrictedUnpickler(io.BytesIO(data), name, encoding=encoding).load()
    except ValueError as e:
        if str(e).startswith("ddg.load"):
            raise
        raise ValueError(f"ddg.load: {name}: not a readable pickle ({e})") from None
    except (pickle.UnpicklingError, EOFError, TypeError, AttributeError, IndexError, KeyError) as e:
        raise ValueError(f"ddg.load: {name}: not a readable pickle ({type(e).__name__}: {e})") from None


def is_pickle(data):
    """Whether ``data`` looks like a pickle of protocol 2 or later (what paddle.save writes)."""
    return len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5


def _bf16(a):
    """Paddle pickles bfloat16 tensors as their raw bits in uint16 arrays (its ``numpy()``
    of a bfloat16 tensor is uint16), and ``paddle.load`` turns uint16 arrays back into
    bfloat16 tensors: so does ddg (as tensors; ``return_numpy=True`` keeps the uint16
    arrays, as Paddle does)."""
    return a.view(bfloat16) if a.dtype == np.uint16 else a


def load_paddle(data, name, make_tensor, return_numpy, max_depth):
    """The object pickled in ``data`` with arrays as Tensors (``make_tensor(array, name)``)
    or, with ``return_numpy``, as numpy arrays. Paddle's ``(name, array)`` tuples become
    tensors (or arrays) too, as ``paddle.load`` does."""
    try:
        obj = _RestrictedUnpickler(io.BytesIO(data), name).load()
    except ValueError as e:
        if str(e).startswith("ddg.load"):
            raise
        raise ValueError(f"ddg.load: {name}: not a readable Paddle checkpoint ({e})") from None
    except (pickle.UnpicklingError, EOFError, TypeError, AttributeError, IndexError, KeyError) as e:
        raise ValueError(f"ddg.load: {name}: not a readable Paddle checkpoint ({type(e).__name__}: {e})") from None

    names = {}
    if isinstance(obj, dict) and isinstance(obj.get(_NAME_TABLE), dict):
        # paddle.save's table from structured names ("0.weight") to parameter names
        # ("linear_0.w_0"); paddle.load drops it and names the tensors from it
        obj = type(obj)(obj)
        names = obj.pop(_NAME_TABLE)

    def convert(o, depth):
        if depth > max_depth:
            raise ValueError(f"ddg.load: {name}: containers nested deeper than {max_depth} levels")
        if isinstance(o, np.ndarray):
            _check_dtype(o.dtype, name)
            return o if return_numpy else make_tensor(_bf16(o), None)
        if isinstance(o, tuple) and len(o) == 2 and isinstance(o[0], str) and isinstance(o[1], np.ndarray):
            _check_dtype(o[1].dtype, name)
            return o[1] if return_numpy else make_tensor(_bf16(o[1]), o[0])
        if isinstance(o, dict):
            return type(o)((k, convert(v, depth + 1)) for k, v in o.items())
        if isinstance(o, (list, tuple)):
            return type(o)(convert(v, depth + 1) for v in o)
        if isinstance(o, (str, bytes, int, float, complex, bool, np.generic)) or o is None:
            return o
        raise ValueError(f"ddg.load: {name}: unexpected {type(o).__name__} in a Paddle checkpoint")
    if isinstance(obj, dict) and not return_numpy:
        out = type(obj)()
        for k, v in obj.items():
            if isinstance(v, np.ndarray) and isinstance(k, str):
                _check_dtype(v.dtype, name)
                out[k] = make_tensor(_bf16(v), names.get(k, k))
            else:
                out[k] = convert(v, 1)
        return out
    return convert(obj, 0)
