"""Shape and indexing primitives: reshape, transpose, expand, concat/stack/split,
tile, gather/index_select, flip, device transfer, and ``x[...]`` read and write."""
import numpy as np

from ...tensor import backend
from ...tensor.place import move_array, place_of
from ...tensor.tensor import Tensor, _watch
from ..axes import normalize_axis as _ax
from .. import function as _function
from ..function import Function, sum_to
from ..higher import const, linear_backward_graph, sum_to_t
from ..grad_mode import _enabled


class Reshape(Function):
    save_inputs = False
    view = True

    def __init__(self, shape):
        self.shape = shape

    def forward(self, a):
        self.in_shape = a.shape
        return a.reshape(self.shape)

    def backward(self, g):
        return g.reshape(self.in_shape)

    def backward_graph(self, g):
        return Reshape(self.in_shape)(g)


class Transpose(Function):
    save_inputs = False
    view = True

    def __init__(self, perm):
        self.perm = perm

    def forward(self, a):
        return a.transpose(self.perm)

    def backward(self, g):
        # a tuple of Python ints: cupy's transpose wants axes, not a host array
        return g.transpose(tuple(np.argsort(self.perm).tolist()))

    def backward_graph(self, g):
        return Transpose(tuple(np.argsort(self.perm).tolist()))(g)


class BroadcastTo(Function):
    save_inputs = False
    view = True

    def __init__(self, shape):
        self.shape = shape

    def forward(self, a):
        self.in_shape = a.shape
        return backend.get_array_module(a).broadcast_to(a, self.shape)

    def backward(self, g):
        return sum_to(g, self.in_shape)

    def backward_graph(self, g):
        return sum_to_t(g, self.in_shape)


class Concat(Function):
    save_inputs = False

    def __init__(self, axis):
        self.axis = axis

    def forward(self, *arrays):
        self.sizes = [a.shape[self.axis] for a in arrays]
        return backend.get_array_module(*arrays).concatenate(arrays, axis=self.axis)

    def backward(self, g):
        xp = backend.get_array_module(g)
        cuts = np.cumsum(self.sizes)[:-1]
        return tuple(p if need else None for p, need in zip(xp.split(g, cuts, axis=self.axis), self.needs))

    def backward_graph(self, g):
        out, start = [], 0
        for n, need in zip(self.sizes, self.needs):
            out.append(getitem(g, (slice(None),) * self.axis + (slice(start, start + n),)) if need else None)
            start += n
        return tuple(out)


class Stack(Function):
    save_inputs = False

    def __init__(self, axis):
        self.axis = axis

    def forward(self, *arrays):
        return backend.get_array_module(*arrays).stack(arrays, axis=self.axis)

    def backward(self, g):
        xp = backend.get_array_module(g)
        n = g.shape[self.axis]
        return tuple(xp.take(g, i, axis=self.axis) if need else None for i, need in zip(range(n), self.needs))

    def backward_graph(self, g):
        return tuple(getitem(g, (slice(None),) * self.axis + (i,)) if need else None
                     for i, need in enumerate(self.needs))


class Split(Function):
    save_inputs = False
    view = True

    def __init__(self, sections, axis):
        self.sections, self.axis = sections, axis

    def forward(self, a):
        cuts = np.cumsum(self.sections)[:-1]
        return tuple(backend.get_array_module(a).split(a, cuts, axis=self.axis))

    def backward(self, grads):
        return backend.get_array_module(grads[0]).concatenate(grads, axis=self.axis)

    def backward_graph(self, grads):
        return Concat(self.axis)(*grads)


class Tile(Function):
    save_inputs = False

    def __init__(self, reps):
        self.reps = reps

    def forward(self, a):
        self.in_shape = a.shape
        return backend.get_array_module(a).tile(a, self.reps)

    def backward(self, g):
        shape = (1,) * (g.ndim - len(self.in_shape)) + tuple(self.in_shape)
        reps = (1,) * (g.ndim - len(self.reps)) + tuple(self.reps)
        split = []
        for r, s in zip(reps, shape):
            split += [r, s]
        g = g.reshape(split).sum(axis=tuple(range(0, 2 * g.ndim, 2)))
        return g.reshape(self.in_shape)

    backward_graph = linear_backward_graph


class RepeatEach(Function):
    """Each element repeated ``rep`` times along ``axis`` (nearest-neighbour upsampling by an
    integer factor): forward one copy of a broadcast view; backward the ``rep`` strided slices
    added (numpy's sum over a short middle axis is several times slower)."""
    save_inputs = False

    def __init__(self, axis, rep):
        self.axis, self.rep = axis, rep

    def forward(self, a):
        xp = backend.get_array_module(a)
        ax = self.axis
        wide = xp.broadcast_to(xp.expand_dims(a, ax + 1), a.shape[:ax + 1] + (self.rep,) + a.shape[ax + 1:])
        return wide.reshape(a.shape[:ax] + (a.shape[ax] * self.rep,) + a.shape[ax + 1:])

    def backward(self, g):
        ax = self.axis
        split = g.reshape(g.shape[:ax] + (g.shape[ax] // self.rep, self.rep) + g.shape[ax + 1:])
        pick = (slice(None),) * (ax + 1)
        out = split[pick + (0,)].copy()
        for i in range(1, self.rep):
            out += split[pick + (i,)]
        return out

    backward_graph = linear_backward_graph


class IndexSelect(Function):
    save_inputs = False

    def __init__(self, axis):
        self.axis = axis

    def forward(self, a, index):
        self.meta = (a.shape, a.dtype)
        self.index = index
        return backend.get_array_module(a).take(a, index, axis=self.axis)

    def backward(self, g):
        shape, dtype = self.meta
        xp = backend.get_array_module(g)
        moved = xp.moveaxis(g, self.axis, 0) if self.axis else g
        out = xp.zeros((shape[self.axis],) + tuple(s for i, s in enumerate(shape) if i != self.axis), dtype)
        scatter_add(xp, out, self.index.reshape(-1), moved.reshape((-1,) + out.shape[1:]))
        return (xp.moveaxis(out, 0, self.axis) if self.axis else out), None

    backward_graph = linear_backward_graph

    def apply_linear(self, u):
        return backend.get_array_module(u).take(u, self.index, axis=self.axis)


class Flip(Function):
    save_inputs = False
    view = True

    def __init__(self, axes):
        self.axes = axes

    def forward(self, a):
        return backend.get_array_module(a).flip(a, self.axes)

    def backward(self, g):
        return backend.get_array_module(g).flip(g, self.axes)

    def backward_graph(self, g):
        return Flip(self.axes)(g)


class Clone(Function):
    """A copy of the data that stays in the graph (the gradient passes through)."""
    save_inputs = False

    def forward(self, a):
        return a.copy()

    def backward(self, g):
        return g

    def backward_graph(self, g):
        return g


class ToPlace(Function):
    save_inputs = False

    def __init__(self, place):
        self.place = place

    def forward(self, a):
        self.src = place_of(a)
        return move_array(a, self.place)

    def backward(self, g):
        return move_array(g, self.src)

    def backward_graph(self, g):
        return ToPlace(self.src)(g)


def scatter_add(xp, out, index, values):
    """``out[index] += values`` with repeated indices accumulating."""
    if xp is np:
        np.add.at(out, index, values)
    else:  # pragma: no cover - GPU
        backend.cupyx_module().scatter_add(out, index, values)


# -- indexing ---------------------------------------------------------------------------
def _index_on(i, xp):
    """Index array ``i`` on the device of ``xp``."""
    if xp is not np and not backend.is_gpu_array(i):
        return xp.asarray(i)
    if xp is np and backend.is_gpu_array(i):
        return backend.to_host(i)
    return i


def _norm_index(index, xp):
    """The index with tensors/lists turned into arrays on the right device; whether it is
    basic (ints, slices, None, Ellipsis only: the result is a view)."""
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    basic = True
    for i in index:
        if isinstance(i, Tensor):
            i = _index_on(i._data, xp)
            basic = False
        elif isinstance(i, (list, np.ndarray)) or backend.is_gpu_array(i):
            i = xp.asarray(i)
            basic = False
        elif isinstance(i, (bool, np.bool_)):
            basic = False
        elif not (i is None or i is Ellipsis or isinstance(i, (int, np.integer, slice))):
            raise TypeError(f"ddg: cannot index a tensor with {type(i).__name__}")
        out.append(i)
    return tuple(out), basic


class GetItem(Function):
    """``a[index]``. Tensors in the index are inputs of the op (after ``a``), not attributes:
    ``tensor_pos`` says where they go in ``index`` (which holds 0 there), so that a replay
    by ddg.jit indexes with the new values of index tensors computed from the data."""
    save_inputs = False
    tensor_pos = ()

    def __init__(self, index, basic, tensor_pos=()):
        self.index, self.basic, self.tensor_pos = index, basic, tensor_pos
        self.view = basic

    def forward(self, a, *index_arrays):
        self.meta = (a.shape, a.dtype)
        index = self.index
        if index_arrays:
            index = list(index)
            xp = backend.get_array_module(a)
            for p, i in zip(self.tensor_pos, index_arrays):
                index[p] = _index_on(i, xp)
            index = tuple(index)
        self.full_index = index
        return a[index]

    def backward(self, g):
        shape, dtype = self.meta
        index = self.full_index
        xp = backend.get_array_module(g)
        out = xp.zeros(shape, dtype)
        only_masks = all(not hasattr(i, "dtype") or i.dtype == bool for i in index)
        if self.basic or only_masks:
            out[index] = g
        else:
            scatter_add(xp, out, index, g)
        if self.tensor_pos:
            return (out,) + (None,) * len(self.tensor_pos)
        return out

    backward_graph = linear_backward_graph

    def apply_linear(self, u):
        return u[self.full_index]


class SetItem(Function):
    """The write ``x[index] = value`` as a graph node: the old ``x`` gets the gradient
    outside the written region, ``value`` the (summed) gradient inside it."""
    save_inputs = False

    def __init__(self, index, v_meta):
        self.index, self.v_meta = index, v_meta

    def backward(self, g):
        nx, nv = self.needs
        gx = gv = None
        if nx:
            gx = g.copy()
            gx[self.index] = 0
        if nv:
            shape, dtype = self.v_meta
            gv = sum_to(g[self.index], shape).astype(dtype, copy=False)
        return gx, gv

    def backward_graph(self, g):
        nx, nv = self.needs
        gx = gv = None
        if nx:  # g with the written region zeroed: a constant mask
            mask = backend.get_array_module(g._data).ones(g._data.shape, dtype=g._data.dtype)
            mask[self.index] = 0
            gx = g * const(mask)
        if nv:
            shape, dtype = self.v_meta
            gv = sum_to_t(getitem(g, self.index), shape)
            gv = gv if gv._data.dtype == dtype else gv.astype(dtype)
        return gx, gv


def getitem(x, index):
    xp = backend.get_array_module(x._data)
    parts = index if isinstance(index, tuple) else (index,)
    pos = tuple(k for k, i in enumerate(parts) if isinstance(i, Tensor))
    if not pos:
        idx, basic = _norm_index(index, xp)
        return GetItem(idx, basic)(x)
    # tensors in the index become inputs of the op (0 stands in for them in the attribute)
    idx, basic = _norm_index(tuple(0 if k in pos else i for k, i in enumerate(parts)), xp)
    return GetItem(idx, False, pos)(x, *[parts[k] for k in pos])


def setitem(x, index, value):
    if _watch[0] is not None:
        _watch[0](x, "setitem", None)
    xp = backend.get_array_module(x._data)
    idx, _ = _norm_index(index, xp)
    grad_on = _enabled[0]
    if grad_on and x._node is None and not x.stop_gradient:
        raise RuntimeError(f"ddg: in-place write into a leaf tensor that requires grad (shape {x.shape}); "
                           f"do it inside ddg.no_grad(), or write into a copy")
    v_tensor = isinstance(value, Tensor)
    varr = value._data if v_tensor else value
    try:
        if v_tensor and backend.is_gpu_array(varr) != backend.is_gpu_array(x._data):
            raise ValueError(f"value is on {value.place} but the tensor is on {x.place}")
        x._data[idx] = varr
    except (ValueError, IndexError, TypeError) as exc:
        vshape = value.shape if v_tensor else list(np.shape(value))
        raise ValueError(f"ddg.setitem: cannot assign a value of shape {vshape} into a tensor of shape "
                         f"{x.shape} at {index!r}: {exc}") from None
    x._bump()
    needs_v = v_tensor and not value.stop_gradient
    if grad_on and x._data.dtype.kind in "fcV" and (not x.stop_gradient or needs_v):
        node = SetItem(idx, (tuple(value._data.shape), value._data.dtype) if v_tensor else None)
        node.needs = (not x.stop_gradient, needs_v)
        node.edges = (
            None if x.stop_gradient else ((x, None) if x._node is None else (x._node, x._idx)),
            ((value, None) if value._node is None else (value._node, value._idx)) if needs_v else None)
        x._node = node
        x._idx = 0
        x.stop_gradient = False


# -- public functions ------------------------------------------------------------------
def reshape(x, shape, name=None):
    if isinstance(shape, Tensor):
        shape = shape.tolist()
    shape = [int(s.item()) if isinstance(s, Tensor) else int(s) for s in shape]
    # Paddle: 0 copies the input's size at that position
    shape = [x._data.shape[i] if s == 0 and i < x._data.ndim else s for i, s in enumerate(shape)]
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if shape.count(-1) > 1 or (shape.count(-1) == 0 and known != x._data.size) or \
            (shape.count(-1) == 1 and (known == 0 or x._data.size % known)):
        raise ValueError(f"ddg.reshape: cannot reshape a tensor of shape {x.shape} ({x.size} elements) "
                         f"into {shape}")
    if tuple(shape) == x._data.shape:
        return x if x.stop_gradient else Reshape(tuple(shape))(x)
    return Reshape(tuple(shape))(x)


def transpose(x, perm, name=None):
    perm = [int(p) % max(x._data.ndim, 1) for p in perm]
    if sorted(perm) != list(range(x._data.ndim)):
        raise ValueError(f"ddg.transpose: perm {perm} is not a permutation of the {x.ndim} axes of shape {x.shape}")
    return Transpose(tuple(perm))(x)


def moveaxis(x, source, destination, name=None):
    nd = x._data.ndim
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError(f"ddg.moveaxis: source {source} and destination {destination} differ in length")
    src = [_ax(a, nd, "moveaxis") for a in src]
    dst = [_ax(a, nd, "moveaxis") for a in dst]
    rest = [a for a in range(nd) if a not in src]
    perm = [None] * nd
    for s_, d_ in zip(src, dst):
        perm[d_] = s_
    it = iter(rest)
    perm = [next(it) if p is None else p for p in perm]
    return transpose(x, perm)


def flatten(x, start_axis=0, stop_axis=-1, name=None):
    nd = x._data.ndim
    for what, a in (("start_axis", start_axis), ("stop_axis", stop_axis)):
        if not -max(nd, 1) <= a < max(nd, 1):
            raise ValueError(f"ddg.flatten: {what}={a} is out of range for shape {x.shape}")
    if nd == 0:
        return reshape(x, [1])
    s, e = start_axis % nd, stop_axis % nd
    if s > e:
        raise ValueError(f"ddg.flatten: start_axis {start_axis} is after stop_axis {stop_axis} for shape {x.shape}")
    shape = list(x._data.shape)
    n = 1
    for d in shape[s:e + 1]:
        n *= d
    return reshape(x, shape[:s] + [n] + shape[e + 1:])


def squeeze(x, axis=None, name=None):
    shape = list(x._data.shape)
    if axis is None:
        axes = [i for i, n in enumerate(shape) if n == 1]
    else:
        axes = [axis] if isinstance(axis, int) else list(axis)
        axes = [_ax(a, max(len(shape), 1), "squeeze") for a in axes]   # a 0-D tensor takes axis 0/-1
        axes = [a for a in axes if a < len(shape) and shape[a] == 1]  # Paddle ignores axes whose size is not 1
    return reshape(x, [n for i, n in enumerate(shape) if i not in axes])


def unsqueeze(x, axis, name=None):
    axes = [axis] if isinstance(axis, int) else list(axis)
    shape = list(x._data.shape)
    for a in axes:
        a = int(a)
        if not -(len(shape) + 1) <= a <= len(shape):
            raise ValueError(f"ddg.unsqueeze: axis {a} is out of range for a result of rank {len(shape) + 1} "
                             f"(input shape {x.shape}, axes {axis})")
        a = a + len(shape) + 1 if a < 0 else a
        shape.insert(a, 1)
    return reshape(x, shape)


def broadcast_to(x, shape, name=None):
    shape = tuple(int(s) for s in shape)
    try:
        np.broadcast_shapes(x._data.shape, shape)
    except ValueError:
        raise ValueError(f"ddg.broadcast_to: cannot broadcast shape {x.shape} to {list(shape)}") from None
    if shape == x._data.shape:
        return x
    return BroadcastTo(shape)(x)


def expand(x, shape, name=None):
    lead = len(shape) - x._data.ndim
    if lead < 0:
        raise ValueError(f"ddg.expand: target shape {list(shape)} has fewer dimensions than {x.shape}")
    shape = [x._data.shape[i - lead] if int(s) == -1 else int(s) for i, s in enumerate(shape)]
    return broadcast_to(x, shape)


def expand_as(x, y, name=None):
    return broadcast_to(x, y.shape)


def broadcast_tensors(input, name=None):  # noqa: A002
    shape = np.broadcast_shapes(*[t._data.shape for t in input])
    return [broadcast_to(t, shape) for t in input]


_AMP_FLOATS = {"float16", "bfloat16", "float32"}


def _same_dtype(x, op):
    """Paddle's concat and stack take one dtype only (even float32 with float64 is refused)."""
    d = x[0]._data.dtype
    for i, t in enumerate(x):
        if t._data.dtype != d:
            if _function._autocast[0] is not None and {d.name, t._data.dtype.name} <= _AMP_FLOATS:
                continue   # under ddg.amp.auto_cast the op promotes float16/bfloat16 with float32
            raise TypeError(f"ddg.{op}: tensor 0 is {d} but tensor {i} is {t._data.dtype} (shapes {x[0].shape} "
                            f"and {t.shape}); cast them to one dtype first")


def concat(x, axis=0, name=None):
    x = list(x)
    if not x:
        raise ValueError("ddg.concat: needs at least one tensor")
    axis = _ax(axis.item() if isinstance(axis, Tensor) else axis, x[0].ndim, "concat")
    _same_dtype(x, "concat")
    return Concat(axis)(*x)


cat = concat


def stack(x, axis=0, name=None):
    x = list(x)
    if not x:
        raise ValueError("ddg.stack: needs at least one tensor")
    shapes = {tuple(t._data.shape) for t in x}
    if len(shapes) > 1:
        raise ValueError(f"ddg.stack: all tensors need the same shape, got {[t.shape for t in x]}")
    _same_dtype(x, "stack")
    axis = int(axis)
    if axis < 0:
        axis += x[0].ndim + 1
    return Stack(axis)(*x)


def split(x, num_or_sections, axis=0, name=None):
    axis = _ax(axis.item() if isinstance(axis, Tensor) else axis, x._data.ndim, "split")
    n = x._data.shape[axis]
    if isinstance(num_or_sections, int):
        if n % num_or_sections:
            raise ValueError(f"ddg.split: axis {axis} of size {n} (shape {x.shape}) does not divide into "
                             f"{num_or_sections} equal parts")
        sections = [n // num_or_sections] * num_or_sections
    else:
        sections = [int(s) for s in num_or_sections]
        if sections.count(-1) == 1:
            sections[sections.index(-1)] = n - (sum(sections) + 1)
        if sum(sections) != n or any(s < 0 for s in sections):
            raise ValueError(f"ddg.split: sections {list(num_or_sections)} do not add up to the size {n} of "
                             f"axis {axis} (shape {x.shape})")
    return list(Split(sections, axis)(x))


def chunk(x, chunks, axis=0, name=None):
    return split(x, chunks, axis)


def unbind(input, axis=0):  # noqa: A002
    axis = _ax(axis, input.ndim, "unbind")
    return [squeeze(p, axis) for p in split(input, input.shape[axis], axis)]


def tile(x, repeat_times, name=None):
    reps = tuple(int(r) for r in (repeat_times.tolist() if isinstance(repeat_times, Tensor) else repeat_times))
    return Tile(reps)(x)


def index_select(x, index, axis=0, name=None):
    idx = index if isinstance(index, Tensor) else Tensor._wrap(np.asarray(index, dtype=np.int64))
    if idx._data.dtype.kind not in "iu":
        raise TypeError(f"ddg.index_select: index must be an integer tensor, got {idx.dtype}")
    axis = _ax(axis, x._data.ndim, "index_select")
    # checked on the host only (on a GPU it would be a synchronizing device-to-host copy)
    if not backend.is_gpu_array(idx._data) and idx._data.size and (int(idx._data.max()) >= x._data.shape[axis] or int(idx._data.min()) < -x._data.shape[axis]):
        raise IndexError(f"ddg.index_select: index out of range for axis {axis} of size {x._data.shape[axis]}")
    return IndexSelect(axis)(x, idx)


def gather(x, index, axis=None, name=None):
    """Paddle's gather: pick entries of ``x`` along ``axis`` (default 0) by a 1-D index."""
    axis = 0 if axis is None else (axis.item() if isinstance(axis, Tensor) else axis)
    idx = index if isinstance(index, Tensor) else Tensor._wrap(np.asarray(index, dtype=np.int64))
    if idx._data.ndim > 1:
        idx = reshape(idx, [-1])
    return index_select(x, idx, axis)


def take_along_axis(arr, indices, axis):
    xp = backend.get_array_module(arr._data)
    full = tuple(xp.arange(n).reshape([-1 if i == j else 1 for j in range(arr.ndim)])
                 for i, n in enumerate(indices._data.shape))
    idx = list(full)
    idx[axis % arr.ndim] = indices  # a tensor: an input of the op, so ddg.jit replays it
    return getitem(arr, tuple(idx))


def flip(x, axis, name=None):
    axes = [axis] if isinstance(axis, int) else list(axis)
    return Flip(tuple(_ax(a, x._data.ndim, "flip") for a in axes))(x)


def roll(x, shifts, axis=None, name=None):
    xp = backend.get_array_module(x._data)
    n = x._data.size
    idx = xp.roll(xp.arange(n).reshape(x._data.shape), shifts, axis)
    return reshape(gather(reshape(x, [-1]), Tensor._wrap(idx.reshape(-1))), x.shape)


def clone(x, name=None):
    return Clone()(x)


def to_place(x, place):
    if place_of(x._data) == place:
        return x
    return ToPlace(place)(x)


def masked_select(x, mask, name=None):
    return getitem(x, mask)


def numel(x, name=None):
    return Tensor._wrap(np.asarray(x.size, dtype=np.int64))


def shape(input):  # noqa: A002 - Paddle's name
    return Tensor._wrap(np.asarray(input.shape, dtype=np.int64))


class Scatter(Function):
    """Rows ``index`` of ``x`` replaced by ``updates`` (the last of repeated indices wins),
    or, with ``overwrite=False``, zeroed and then summed with every update for them. As in
    Paddle, the gradient of ``updates`` is the output gradient at its row, even for a
    row that a later repeated index overwrote."""

    def __init__(self, overwrite):
        self.overwrite = overwrite

    def forward(self, x, index, updates):
        xp = backend.get_array_module(x)
        idx = _index_on(index, xp).reshape(-1)
        self.idx = idx
        out = x.copy()
        if self.overwrite:
            out[idx] = updates
        else:
            out[idx] = 0
            scatter_add(xp, out, idx, updates.astype(x.dtype, copy=False))
        return out

    def backward(self, g):
        nx, _, nu = self.needs
        gx = None
        if nx:
            gx = g.copy()
            gx[self.idx] = 0
        return gx, None, (g[self.idx] if nu else None)


def scatter(x, index, updates, overwrite=True, name=None):
    if index._data.dtype.kind not in "iu" or index._data.ndim > 1:
        raise TypeError(f"ddg.scatter: index must be a 1-D integer tensor, got shape {index.shape} and dtype "
                        f"{index.dtype}")
    if updates._data.shape[1:] != x._data.shape[1:] or updates._data.shape[0] != index._data.size:
        raise ValueError(f"ddg.scatter: updates shape {updates.shape} does not fit x shape {x.shape} and "
                         f"{index._data.size} indices")
    return Scatter(bool(overwrite))(x, index, updates)


class ScatterNdAdd(Function):
    """``x`` plus ``updates`` added at the positions ``index[..., :k]`` of its first k axes
    (repeated positions accumulate)."""

    def forward(self, x, index, updates):
        xp = backend.get_array_module(x)
        idx = _index_on(index, xp)
        self.pos = tuple(idx[..., i].reshape(-1) for i in range(idx.shape[-1]))
        self.ushape = updates.shape
        out = x.copy()
        k = idx.shape[-1]
        scatter_add(xp, out, self.pos, updates.reshape((-1,) + x.shape[k:]).astype(x.dtype, copy=False))
        return out

    def backward(self, g):
        nx, _, nu = self.needs
        return (g if nx else None), None, (g[self.pos].reshape(self.ushape) if nu else None)


def scatter_nd_add(x, index, updates, name=None):
    k = index._data.shape[-1]
    if k > x._data.ndim or list(updates._data.shape) != list(index._data.shape[:-1]) + list(x._data.shape[k:]):
        raise ValueError(f"ddg.scatter_nd_add: updates shape {updates.shape} must be index.shape[:-1] + "
                         f"x.shape[{k}:] = {list(index._data.shape[:-1]) + list(x._data.shape[k:])}")
    return ScatterNdAdd()(x, index, updates)


class PutAlongAxis(Function):
    """``x`` with ``values`` written (``reduce='assign'``) or added (``'add'``) at
    ``indices`` along ``axis`` (numpy's put_along_axis; values broadcast to the indices)."""

    def __init__(self, axis, reduce):
        self.axis, self.reduce = axis, reduce

    def forward(self, x, indices, values):
        xp = backend.get_array_module(x)
        idx = _index_on(indices, xp)
        vals = xp.broadcast_to(values.astype(x.dtype, copy=False), idx.shape)
        self.idx, self.vshape = idx, values.shape
        out = x.copy()
        if self.reduce == "assign":
            xp.put_along_axis(out, idx, vals, self.axis)
        else:
            # accumulate repeated positions: a full index tuple for scatter_add
            nd = idx.ndim
            grids = [xp.arange(n).reshape([n if d == i else 1 for d in range(nd)]) for i, n in enumerate(idx.shape)]
            grids[self.axis] = idx
            scatter_add(xp, out, tuple(xp.broadcast_to(gr, idx.shape) for gr in grids), vals)
        return out

    def backward(self, g):
        xp = backend.get_array_module(g)
        nx, _, nv = self.needs
        gx = gv = None
        if nx:
            gx = g.copy()
            if self.reduce == "assign":
                xp.put_along_axis(gx, self.idx, 0, self.axis)
        if nv:
            gv = sum_to(xp.take_along_axis(g, self.idx, self.axis), self.vshape)
        return gx, None, gv


def put_along_axis(arr, indices, values, axis, reduce="assign", include_self=True, broadcast=True):
    """Paddle's put_along_axis for ``reduce`` 'assign' and 'add' (with ``include_self``);
    the other reductions are refused by name."""
    if reduce not in ("assign", "add"):
        raise ValueError(f"ddg.put_along_axis: reduce={reduce!r} is not supported (only 'assign' and 'add')")
    if not include_self:
        raise ValueError("ddg.put_along_axis: include_self=False is not supported")
    ax = _ax(axis, arr._data.ndim, "put_along_axis")
    if not isinstance(values, Tensor):
        values = Tensor._wrap(backend.get_array_module(arr._data).asarray(values, dtype=arr._data.dtype))
    if broadcast and indices._data.ndim == arr._data.ndim:
        shape = [indices._data.shape[i] if i == ax else arr._data.shape[i] for i in range(arr._data.ndim)]
        if list(indices._data.shape) != shape:
            indices = broadcast_to(indices, shape)
    return PutAlongAxis(ax, reduce)(arr, indices, values)
