"""``ddg.jit.save`` / ``ddg.jit.load``: a recorded inference graph on disk.

``save(layer, path, input_spec)`` writes two files in ddg's safe checkpoint format
(``ddg.io.serialization``: JSON header + raw arrays + SHA-256; nothing is unpickled):

* ``path + '.pdmodel'``: ``{"format", "version", "graph": <JSON text>, "arrays": [...]}``;
  the graph lists the ops by name (``module:Class``) with their constructor attributes
  (tagged JSON) and their wiring over numbered slots;
* ``path + '.pdiparams'``: the layer's parameters and buffers by state_dict name.

Without an input spec (given here or to ``to_static``), the signature of the latest call
of the layer's ``to_static`` forward is saved, its first dimension free (see ``save``).

Dimensions given as ``None`` in the input spec are recorded twice with different
sizes; an attribute that differs between the two recordings must be a multiple of
one dynamic dimension (reshape/flatten targets: ``[batch, 800]``) and is stored as
``{"sym": [dim, k]}``, resolved from the actual input shapes at each call.

``load(path)`` returns a ``TranslatedLayer`` that replays the graph with the same
machinery as ``to_static``, without the Python class of the model. Only Function
subclasses defined in ddg's own op modules (``ddg.autograd.ops.*``,
``ddg.nn.functional.*``, and the older names of ``_MOVED_OPS``) can be named by a file; anything
else, and any inconsistent or truncated file, is refused with a ValueError naming the
path.
"""
import importlib
import json
import re
import warnings

import numpy as np

from ..autograd import grad_mode
from ..autograd.function import Function
from ..autograd.ops import logic as _logic
from ..io import serialization as _ser
from ..nn.layer.layers import Layer
from ..nn.parameter import Parameter
from ..tensor.dtypes import bfloat16 as _BF16
from ..tensor.dtypes import convert_dtype
from ..tensor import backend
from ..tensor.tensor import Tensor
from .program import DRAW_METHODS, DrawStep, OpStep, Program, WriteStep, replay, same_value
from .recorder import DataDependent
from .static_function import StaticFunction

FORMAT = "ddg.jit.program"
VERSION = 1
_ARRAY_TYPES = backend.ARRAY_TYPES
_DYN_SIZES = ((2, 3), (5, 7), (11, 13), (17, 19))  # dummy sizes of None dims in the two recordings
_OP_MODULE = re.compile(r"^ddg\.(autograd\.ops\.[a-z_0-9]+|nn\.functional\.[a-z_0-9]+)$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
# ops that moved since files were first written: a file names the class where it lived then
_MOVED_OPS = {
    "ddg.autograd.ops.conv:MaxPool2d": "ddg.autograd.ops.pooling:MaxPool2d",
    "ddg.autograd.ops.conv:AvgPool2d": "ddg.autograd.ops.pooling:AvgPool2d",
    "ddg.autograd.methods:Clone": "ddg.autograd.ops.movement:Clone",
    "ddg.nn.functional.common_ext:_Dropout": "ddg.autograd.ops.nn_ops:Dropout",
}


class _Bad(Exception):
    pass


# -- attributes as tagged JSON --------------------------------------------------------------------
class _Enc:
    def __init__(self, arrays):
        self.arrays = arrays

    def __call__(self, v, where):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, float):
            return {"f": float.hex(v)}
        if isinstance(v, _Sym):
            return {"sym": [v.dim, v.k]}
        if isinstance(v, (np.bool_, np.integer, np.floating, _BF16.type)):
            return {"np": _dstr(v.dtype), "v": v.item() if v.dtype.kind not in "fV" else float.hex(float(v))}
        if isinstance(v, np.dtype):
            return {"dtype": _dstr(v)}
        if isinstance(v, tuple):
            return {"tuple": [self(x, where) for x in v]}
        if isinstance(v, list):
            return {"list": [self(x, where) for x in v]}
        if isinstance(v, dict) and all(isinstance(k, str) for k in v):
            return {"dict": [[k, self(x, where)] for k, x in v.items()]}
        if isinstance(v, slice):
            return {"slice": [self(v.start, where), self(v.stop, where), self(v.step, where)]}
        if v is Ellipsis:
            return {"ellipsis": True}
        if isinstance(v, _ARRAY_TYPES):
            self.arrays.append(np.asarray(v) if isinstance(v, np.ndarray) else v.get())
            return {"array": len(self.arrays) - 1}
        raise ValueError(f"ddg.jit.save: {where}: cannot store a value of type {type(v).__name__}")


def _dstr(d):
    """A dtype as text that ``np.dtype`` reads back: bfloat16's ``str`` is ``'<V2'`` (raw
    bytes), so it goes by name."""
    return "bfloat16" if d == _BF16 else d.str


def _dec(v, arrays, dyn):
    if v is None or isinstance(v, (bool, str, int)):
        return v
    if isinstance(v, dict) and len(v) in (1, 2):
        if "f" in v:
            return float.fromhex(v["f"])
        if "sym" in v:
            d, k = v["sym"]
            return int(k) * int(dyn[int(d)])
        if "np" in v:
            dt = convert_dtype(v["np"])
            if dt.kind not in "biufV":
                raise _Bad(f"bad scalar dtype {dt}")
            return dt.type(float.fromhex(v["v"]) if dt.kind in "fV" else v["v"])
        if "dtype" in v:
            dt = convert_dtype(v["dtype"])
            if dt.kind not in "biufcV":
                raise _Bad(f"bad dtype {dt}")
            return dt
        if "tuple" in v:
            return tuple(_dec(x, arrays, dyn) for x in v["tuple"])
        if "list" in v:
            return [_dec(x, arrays, dyn) for x in v["list"]]
        if "dict" in v:
            return {str(k): _dec(x, arrays, dyn) for k, x in v["dict"]}
        if "slice" in v:
            return slice(*[_dec(x, arrays, dyn) for x in v["slice"]])
        if "ellipsis" in v:
            return Ellipsis
        if "array" in v:
            return arrays[int(v["array"])]
    raise _Bad(f"unknown attribute encoding {str(v)[:80]}")


class _Sym:
    def __init__(self, dim, k):
        self.dim, self.k = dim, k


def _merge(a, b, dyn1, dyn2, where):
    """One attribute from the two recordings: equal values, or a multiple of a dynamic dim."""
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
        if a == b:
            return a
        for d, (s1, s2) in enumerate(zip(dyn1, dyn2)):
            if a % s1 == 0 and b % s2 == 0 and a // s1 == b // s2:
                return _Sym(d, a // s1)
        raise ValueError(f"ddg.jit.save: {where}: the value {a} depends on a None dimension of the input spec "
                         f"in a way ddg cannot store; give that dimension a fixed size")
    if isinstance(a, (tuple, list)) and type(a) is type(b) and len(a) == len(b):
        return type(a)(_merge(x, y, dyn1, dyn2, where) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return {k: _merge(a[k], b[k], dyn1, dyn2, where) for k in a}
    if same_value(a, b):
        return a
    raise ValueError(f"ddg.jit.save: {where}: the recording depends on the size of a None dimension of the input "
                     f"spec in a way ddg cannot store; give that dimension a fixed size")


# -- save -------------------------------------------------------------------------------------------
def _dummy(spec, dyn_sizes, group_of):
    from ..tensor.creation import _as_array
    shape = [dyn_sizes[group_of[(spec._i, j)]] if d is None else d for j, d in enumerate(spec.shape)]
    if spec.dtype.kind in "fV":
        arr = np.random.default_rng(0).standard_normal(shape).astype(spec.dtype)
    else:
        arr = np.zeros(shape, spec.dtype)
    return Tensor._wrap(_as_array(arr))


def _rebuild(spec, it):
    """The arguments of a traced call (``flatten``'s description) with the Tensors of ``it``."""
    if isinstance(spec, int):  # the fast path's description: that many positional Tensors
        return [next(it) for _ in range(spec)]
    kind = spec[0]
    if kind == "T":
        return next(it)
    if kind in ("list", "tuple"):
        items = [_rebuild(s, it) for s in spec[1]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: _rebuild(s, it) for k, s in spec[1]}
    if kind == "v":
        return spec[2]
    raise ValueError("ddg.jit.save: the traced call had an argument that is neither a Tensor nor a hashable "
                     "value; give input_spec")


def _traced_specs(static_fn):
    """Input specs and call structure from the latest call of ``static_fn``: every dimension
    as called, except the first, which is left free (and the same for every input), as
    Paddle's saved programs accept other batch sizes."""
    from ..static import InputSpec
    traced = static_fn.traced_signature() if static_fn is not None else None
    if traced is None:
        raise ValueError("ddg.jit.save: no input_spec, and the layer's to_static forward was never called: give "
                         "input_spec (a list of ddg.static.InputSpec), in to_static or in jit.save, or call the "
                         "layer once before saving")
    structure, metas, n = traced
    if n > 1:
        warnings.warn(f"ddg.jit.save: no input_spec; the to_static function was traced with {n} input signatures, "
                      f"the latest one called is saved", stacklevel=3)
    specs = [InputSpec([None] + list(shape[1:]) if len(shape) else [], dtype) for shape, dtype in metas]
    fixed = [InputSpec(list(shape), dtype) for shape, dtype in metas]
    return specs, fixed, structure


class _Dynamic(ValueError):
    """The recording depends on a free dimension in a way a file cannot store."""


def save(layer, path, input_spec=None, **configs):
    """Record ``layer`` (a Layer, or a to_static function of one) in inference mode on
    inputs described by ``input_spec`` and write ``path.pdmodel`` and ``path.pdiparams``.

    Without ``input_spec`` (here or in ``to_static``), the signature of the latest call of
    the layer's to_static forward is saved, as Paddle does: its shapes with the first
    dimension free, shared by all inputs, or, where the model's graph depends on that
    dimension, its shapes as called."""
    from ..static import InputSpec
    fn = layer
    static_fn = None
    if isinstance(layer, StaticFunction):
        owner = layer._layer
        fn = layer._fn
        static_fn = layer
        if input_spec is None:
            input_spec = layer._input_spec
    elif isinstance(layer, Layer):
        owner = layer
        fwd = layer.forward
        fn = fwd._fn if isinstance(fwd, StaticFunction) else fwd
        if isinstance(fwd, StaticFunction):
            static_fn = fwd
            if input_spec is None:
                input_spec = fwd._input_spec
    else:
        raise TypeError(f"ddg.jit.save: needs a Layer or a to_static function, got {type(layer).__name__}")
    if owner is None:
        raise TypeError("ddg.jit.save: the function is not a method of a Layer (nothing holds its parameters)")
    if input_spec:
        specs = []
        for i, s in enumerate(input_spec):
            if isinstance(s, Tensor):
                s = InputSpec(s.shape, s.dtype)
            if not isinstance(s, InputSpec):
                raise TypeError(f"ddg.jit.save: input_spec[{i}] must be an InputSpec or a Tensor, got "
                                f"{type(s).__name__}")
            specs.append(InputSpec(s.shape, s.dtype, s.name))
        graph, arrays = _record_graph(fn, owner, specs, None, tie_first=False)
    else:
        if static_fn is None:
            raise ValueError("ddg.jit.save: input_spec is required (a list of ddg.static.InputSpec) for a layer "
                             "whose forward is not decorated with to_static")
        specs, fixed, structure = _traced_specs(static_fn)
        try:
            graph, arrays = _record_graph(fn, owner, specs, structure, tie_first=True)
        except Exception as free_exc:  # the graph depends on the batch size: save the shapes as called
            try:
                graph, arrays = _record_graph(fn, owner, fixed, structure, tie_first=False)
            except Exception:
                raise free_exc from None
            specs = fixed
    graph["params"] = [n for n, _ in owner.named_parameters()]
    params = {}
    for name, t in owner.state_dict().items():
        params[name] = t.numpy()
    _ser.save({"format": FORMAT, "version": VERSION, "graph": json.dumps(graph), "arrays": arrays},
              path + ".pdmodel")
    _ser.save(params, path + ".pdiparams")


def _record_graph(fn, owner, specs, structure, tie_first):
    """Record ``fn`` on dummy inputs of ``specs`` (twice, with different sizes, when a
    dimension is free) and return the graph's JSON and its arrays. ``structure``: how
    the inputs are passed (from a traced call), or None for positional Tensors.
    ``tie_first``: every free first dimension is one and the same size."""
    for i, s in enumerate(specs):
        s._i = i
    dyn_dims = [(i, j) for i, s in enumerate(specs) for j, d in enumerate(s.shape) if d is None]
    group_of, reps = {}, []
    for i, j in dyn_dims:
        if tie_first and j == 0 and reps and reps[0][1] == 0:
            group_of[(i, j)] = 0
            continue
        group_of[(i, j)] = len(reps)
        reps.append((i, j))
    if len(reps) > len(_DYN_SIZES):
        raise ValueError(f"ddg.jit.save: at most {len(_DYN_SIZES)} None dimensions are supported")
    sizes1 = [_DYN_SIZES[k][0] for k in range(len(reps))]
    sizes2 = [_DYN_SIZES[k][1] for k in range(len(reps))]
    progs = []
    for sizes in (sizes1, sizes2) if reps else (sizes1,):
        ins = [_dummy(s, sizes, group_of) for s in specs]
        if structure is None:
            args, kwargs = ins, {}
        elif isinstance(structure, int):
            args, kwargs = _rebuild(structure, iter(ins)), {}
        else:
            args, kwargs = _rebuild(structure, iter(ins))
        sf = StaticFunction(fn, owner)
        with grad_mode.no_grad():
            try:
                progs.append(sf.concrete_program(*args, **kwargs))
            except DataDependent as exc:
                raise ValueError(f"ddg.jit.save: the model cannot be saved as a graph: {exc}") from None
    graph, arrays = _to_json(progs, owner, sizes1, sizes2 if reps else sizes1)
    graph["inputs"] = [{"shape": list(s.shape), "dtype": _dstr(s.dtype), "name": s.name} for s in specs]
    graph["dyn"] = [list(d) for d in reps]
    return graph, arrays


def _to_json(progs, owner, dyn1, dyn2):
    p1, p2 = progs[0], progs[-1]
    if not (len(p1.steps) == len(p2.steps) and p1.nslots == p2.nslots and p1.out_slots == p2.out_slots
            and len(p1.consts) == len(p2.consts) and len(p1.externals) == len(p2.externals)):
        raise ValueError("ddg.jit.save: the recorded graph changes with the size of a None dimension of the input "
                         "spec; give that dimension a fixed size")
    names = {id(t): n for n, t in owner.state_dict().items()}
    arrays = []
    enc = _Enc(arrays)
    ext = []
    consts = []
    for (s, t, _), (_, t2, _) in zip(p1.externals, p2.externals):
        if id(t) in names and t is t2:
            ext.append([s, names[id(t)]])
        else:  # a tensor from outside the layer: frozen as a constant
            consts.append([s, enc(t.numpy(), "a captured tensor")])
    for (s, a), (_, b) in zip(p1.consts, p2.consts):
        if a.shape == b.shape:
            if not same_value(a, b):
                raise ValueError("ddg.jit.save: a constant differs between two recordings (random numbers or data "
                                 "outside ddg ops)")
            consts.append([s, enc(a, "a constant")])
        else:
            flat = np.asarray(a).reshape(-1)
            if flat.size and (flat == flat[0]).all() and (np.asarray(b) == flat[0]).all():
                shape = _merge(tuple(a.shape), tuple(b.shape), dyn1, dyn2, "a constant's shape")
                consts.append([s, {"fill": enc(flat[0], "fill"), "shape": enc(shape, "shape"),
                                   "dtype": _dstr(a.dtype)}])
            else:
                raise ValueError("ddg.jit.save: a constant's shape depends on a None dimension of the input spec; "
                                 "give that dimension a fixed size")
    steps = []
    for k, (a, b) in enumerate(zip(p1.steps, p2.steps)):
        if type(a) is not type(b):
            raise ValueError("ddg.jit.save: the recorded graph changes with the size of a None dimension")
        if type(a) is OpStep:
            cls = a.cls
            if cls is not b.cls or a.ins != b.ins or a.outs != b.outs:
                raise ValueError("ddg.jit.save: the recorded graph changes with the size of a None dimension")
            where = f"op {k} ({cls.__name__})"
            attrs = _merge(a.attrs, b.attrs, dyn1, dyn2, where)
            steps.append({"op": f"{cls.__module__}:{cls.__qualname__}", "attrs": enc(attrs, where),
                          "ins": list(a.ins), "outs": list(a.outs), "multi": a.multi})
        elif type(a) is DrawStep:
            steps.append({"draw": a.method, "args": enc(_merge(a.args, b.args, dyn1, dyn2, "random draw"), "draw"),
                          "kwargs": enc(dict(a.kwargs), "draw"), "dtype": _dstr(a.dtype), "out": a.out})
        else:
            if id(a.tensor) not in names:
                raise ValueError("ddg.jit.save: the model writes into a tensor that is not one of its buffers")
            steps.append({"write": names[id(a.tensor)], "slot": a.slot})
    graph = {"nslots": p1.nslots, "input_slots": p1.input_slots, "externals": ext, "consts": consts,
             "steps": steps, "outputs": p1.out_slots, "out_spec": _spec_json(p1.out_spec)}
    return graph, arrays


def _spec_json(spec):
    kind = spec[0]
    if kind == "T":
        return "T"
    if kind in ("list", "tuple"):
        return {kind: [_spec_json(s) for s in spec[1]]}
    if kind == "dict" and all(isinstance(k, str) for k, _ in spec[1]):
        return {"dict": [[k, _spec_json(s)] for k, s in spec[1]]}
    if kind == "v" and (spec[2] is None or isinstance(spec[2], (bool, int, float, str))):
        return {"v": spec[2]}
    raise ValueError("ddg.jit.save: the model returns something other than tensors, lists, tuples and dicts")


def _spec_build(j, it):
    if j == "T":
        return next(it)
    if "list" in j:
        return [_spec_build(s, it) for s in j["list"]]
    if "tuple" in j:
        return tuple(_spec_build(s, it) for s in j["tuple"])
    if "dict" in j:
        return {k: _spec_build(s, it) for k, s in j["dict"]}
    return j["v"]


# -- load -------------------------------------------------------------------------------------------
_RAW_LOGIC = frozenset(["greater", "less", "greater_equal", "less_equal", "equal", "not_equal",
                        "logical_and", "logical_or", "logical_xor", "logical_not"])


def _raw_step(st, prog, arrays, dyn):
    """A comparison or logic step of a file from an older ddg ({"raw": numpy name, "args":
    [["s", slot] | ["v", value]], "out": slot}), as the equivalent op step."""
    name = st["raw"]
    if name not in _RAW_LOGIC:
        raise _Bad(f"raw op {name!r} is not allowed")
    slots, scalar, first = [], None, False
    for i, (k, v) in enumerate(st["args"]):
        if k == "s":
            slots.append(int(v))
        else:
            scalar, first = _dec(v, arrays, dyn), i == 0
    if not 1 <= len(slots) <= 2 or (scalar is not None and len(slots) != 1):
        raise _Bad(f"raw op {name!r} has bad arguments")
    return OpStep(_logic.Elementwise, {"fn": name, "scalar": scalar, "scalar_first": first}, tuple(slots),
                  (int(st["out"]),), False, (False,) * len(slots), False)


def _op_class(name):
    """The Function class a file names, if it is one of ddg's own ops; else _Bad."""
    if not isinstance(name, str) or name.count(":") != 1:
        raise _Bad(f"bad op name {str(name)[:80]!r}")
    name = _MOVED_OPS.get(name, name)
    mod, cls = name.split(":")
    if not _OP_MODULE.match(mod) or not _NAME.match(cls):
        raise _Bad(f"op {name!r} is not one of ddg's ops")
    try:
        module = importlib.import_module(mod)
    except ImportError:
        raise _Bad(f"op module {mod!r} does not exist in this ddg") from None
    c = module.__dict__.get(cls)
    if not (isinstance(c, type) and issubclass(c, Function) and c is not Function and c.__module__ == mod):
        raise _Bad(f"op {name!r} is not a ddg Function class")
    return c


class TranslatedLayer(Layer):
    """A graph loaded by ``ddg.jit.load``: call it like the original layer."""

    def __init__(self, graph, arrays, params, path):
        super().__init__()
        self._graph, self._arrays, self._path = graph, arrays, path
        self._named = {}
        for name, arr in params.items():
            key = name.replace(".", "__")
            if arr.dtype.kind in "fV" and name in graph["_param_names"]:
                t = Parameter(arr)
                self.add_parameter(key, t)
            else:
                t = Tensor._wrap(arr)
                self.register_buffer(key, t)
            self._named[name] = t
        self._programs = {}
        self._specs = graph["inputs"]
        self.eval()

    def _program(self, dyn):
        prog = self._programs.get(dyn)
        if prog is not None:
            return prog
        g, arrays = self._graph, self._arrays
        try:
            prog = Program()
            prog.nslots = int(g["nslots"])
            prog.input_slots = [int(s) for s in g["input_slots"]]
            prog.requires = [False] * prog.nslots
            for s, name in g["externals"]:
                t = self._named[name]
                prog.externals.append((int(s), t, t.stop_gradient))
                prog.requires[int(s)] = not t.stop_gradient
            for s, c in g["consts"]:
                if isinstance(c, dict) and "fill" in c:
                    shape = tuple(_dec(c["shape"], arrays, dyn))
                    prog.consts.append((int(s), np.full(shape, _dec(c["fill"], arrays, dyn), np.dtype(c["dtype"]))))
                else:
                    prog.consts.append((int(s), _dec(c, arrays, dyn)))
            for st in g["steps"]:
                if "op" in st:
                    cls = _op_class(st["op"])
                    attrs = _dec(st["attrs"], arrays, dyn)
                    if not isinstance(attrs, dict):
                        raise _Bad("op attributes are not a dict")
                    ins = tuple(int(i) for i in st["ins"])
                    outs = tuple(int(i) for i in st["outs"])
                    needs = tuple(prog.requires[i] for i in ins)
                    grad = any(needs) and cls.differentiable
                    for o in outs:
                        prog.requires[o] = grad
                    prog.steps.append(OpStep(cls, attrs, ins, outs, bool(st["multi"]), needs, grad))
                elif "raw" in st:  # files written before comparisons and logic became Functions
                    prog.steps.append(_raw_step(st, prog, arrays, dyn))
                elif "draw" in st:
                    if st["draw"] not in DRAW_METHODS:
                        raise _Bad(f"random draw {st['draw']!r} is not allowed")
                    prog.steps.append(DrawStep(st["draw"], tuple(_dec(st["args"], arrays, dyn)),
                                               _dec(st["kwargs"], arrays, dyn), np.dtype(st["dtype"]),
                                               int(st["out"])))
                elif "write" in st:
                    prog.steps.append(WriteStep(self._named[st["write"]], int(st["slot"])))
                else:
                    raise _Bad("unknown step")
            prog.out_slots = [int(s) for s in g["outputs"]]
            if any(not 0 <= s < prog.nslots for s in prog.slots_used()):
                raise _Bad("slot index out of range")
        except _Bad as exc:
            raise ValueError(f"ddg.jit.load: {self._path}.pdmodel: {exc}") from None
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"ddg.jit.load: {self._path}.pdmodel: malformed graph ({type(exc).__name__}: "
                             f"{exc})") from None
        prog.finalize()
        self._programs[dyn] = prog
        return prog

    def forward(self, *inputs):
        specs = self._specs
        if len(inputs) != len(specs):
            raise ValueError(f"ddg.jit.load: the model takes {len(specs)} inputs, got {len(inputs)}")
        tensors = []
        for i, (x, s) in enumerate(zip(inputs, specs)):
            if not isinstance(x, Tensor):
                from ..tensor.creation import to_tensor
                x = to_tensor(x)
            shape = x.shape
            want = s["shape"]
            if len(shape) != len(want) or any(w is not None and w != n for w, n in zip(want, shape)) \
                    or x.dtype != np.dtype(s["dtype"]):
                raise ValueError(f"ddg.jit.load: input {i} has shape {shape} and dtype {x.dtype}; the model expects "
                                 f"shape {want} and dtype {np.dtype(s['dtype'])}")
            tensors.append(x)
        dyn = tuple(tensors[i].shape[j] for i, j in self._graph["dyn"])
        prog = self._program(dyn)
        outs = replay(prog, tensors)
        return _spec_build(self._graph["out_spec"], iter(outs))


def load(path, **configs):
    """Load a graph written by ``ddg.jit.save``; returns a callable ``TranslatedLayer``."""
    try:
        blob = _ser.load(path + ".pdmodel", return_numpy=True)
        params = _ser.load(path + ".pdiparams", return_numpy=True)
    except ValueError as exc:
        raise ValueError(f"ddg.jit.load: {path}: {exc}") from None
    try:
        if not isinstance(blob, dict) or blob.get("format") != FORMAT:
            raise _Bad("not a ddg.jit model file")
        if blob.get("version") != VERSION:
            raise _Bad(f"model format version {blob.get('version')!r}, this ddg reads {VERSION}")
        graph = json.loads(blob["graph"])
        arrays = list(blob["arrays"])
        if not isinstance(graph, dict) or not isinstance(params, dict):
            raise _Bad("malformed graph")
        names = set(n for _, n in graph["externals"])
        missing = names - set(params)
        if missing:
            raise _Bad(f"parameters missing from {path}.pdiparams: {sorted(missing)}")
        graph["_param_names"] = set(graph["params"])
    except _Bad as exc:
        raise ValueError(f"ddg.jit.load: {path}.pdmodel: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"ddg.jit.load: {path}.pdmodel: malformed file ({type(exc).__name__}: {exc})") from None
    layer = TranslatedLayer(graph, arrays, params, path)
    # decode once now so that a bad file fails at load, not at the first call
    if not graph["dyn"]:
        layer._program(())
    else:
        layer._program(tuple(1 for _ in graph["dyn"]))
        layer._programs.clear()
    return layer
