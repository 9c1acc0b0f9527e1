"""Optimizer-state sharding (ZeRO stage 1) over a data-parallel group.

Each trainable parameter gets one owner rank (:func:`assign_owners`: whole parameters,
greedily balanced by size, as Paddle's sharding optimizer does). After the gradients
have been averaged over ranks (DataParallel's all-reduce), every rank runs the wrapped
optimizer on the parameters it owns only, so its accumulators (Adam's moments, master
weights, Lamb's...) exist on that rank alone: per-rank optimizer state falls as 1/N.
Then each owner broadcasts its updated parameters (non-blocking, packed in chunks), so
all replicas hold the same values again: at once, or, with ``overlap_gather`` (set by
the sharded model), as each layer's forward first needs them.

Because whole parameters are sharded, every update rule works unchanged, Lamb's
per-parameter trust ratio included. The one thing that needs all gradients,
``ClipGradByGlobalNorm``, is done here: each rank sums the squares of its own
parameters' gradients, one all-reduce adds the shards' sums, and the factor is applied
to the owned gradients before the update (the wrapped optimizer's clip is off for it).
"""
import weakref

import numpy as np

from ...nn.clip import ClipGradByGlobalNorm
from ...tensor import backend
from ...tensor.tensor import Tensor

__all__ = ["ShardingOptimizer", "assign_owners"]

_LOW = ("float16", "bfloat16")
_MASTER = "_fp32_master_0"


def assign_owners(sizes, nranks):
    """The owner rank of each of ``sizes`` (element counts, in parameter order): each in
    turn goes to the rank with the fewest elements so far (the lowest such rank)."""
    load = [0] * nranks
    owners = []
    for n in sizes:
        r = min(range(nranks), key=lambda k: (load[k], k))
        owners.append(r)
        load[r] += int(n)
    return owners


class ShardingOptimizer:
    """Wrap ``optimizer`` so that each rank of ``comm`` keeps and updates the state of its
    own shard of the parameters (see the module docstring); ``owners`` (``{id(param):
    rank}``) overrides :func:`assign_owners`.

    Everything not listed here (``get_lr``, ``set_lr``, ``clear_grad``, ``_learning_rate``,
    parameter groups...) is the wrapped optimizer's. ``state_dict()`` gathers the shards
    into one ordinary, full state dict (the same on every rank) that an unsharded
    optimizer, or a sharded one at another world size, loads; ``set_state_dict`` takes
    such a full dict (or a shard) and keeps the entries of this rank's parameters.
    ``sharded_state_dict()`` is this rank's part alone, for models too big to gather.
    """

    def __init__(self, optimizer, comm, owners=None):
        from ...optimizer.optimizer import Optimizer
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"ddg.distributed.sharding: optimizer must be a ddg.optimizer.Optimizer, "
                            f"got {type(optimizer).__name__}")
        if not optimizer._param_groups:
            raise ValueError("ddg.distributed.sharding: the optimizer was built without parameters; pass "
                             "parameters=model.parameters()")
        self._optim = optimizer
        self._comm = comm
        self.rank, self.nranks = comm.rank, comm.size
        params = [p for g in optimizer._param_groups for p in g["params"]]
        self._params = params
        if owners is None:
            owners = dict(zip(map(id, params), assign_owners([p._data.size for p in params], comm.size)))
        missing = [p.name for p in params if id(p) not in owners]
        if missing:
            raise ValueError(f"ddg.distributed.sharding: no owner rank given for parameter(s) {missing[:5]}")
        self._owner = {id(p): int(owners[id(p)]) for p in params}
        self._owned = [p for p in params if self._owner[id(p)] == self.rank]
        # False at ZeRO stage 3: parameters stay on their owners after the update
        self.gather_after_step = True
        # True: step() returns with the gather in flight (see _gather_params)
        self.overlap_gather = False
        self.gather_chunk_bytes = 4 * 1024 * 1024
        self.gathers_started = 0
        self._chunks = None
        self._pending = []           # _Chunk broadcasts in flight, in start order
        self._pending_of = {}        # id(param) -> its _Chunk in flight (parameters of other owners)
        weakref.finalize(self, _drain, self._pending)

    # ------------------------------------------------------------------ delegation
    def __getattr__(self, name):
        d = self.__dict__
        if "_optim" in d:
            return getattr(d["_optim"], name)
        raise AttributeError(name)

    def owner_of(self, param):
        """The rank that keeps ``param``'s optimizer state and updates it."""
        return self._owner[id(param)]

    @property
    def owners(self):
        """``{id(param): owner rank}``."""
        return dict(self._owner)

    @property
    def owned_parameters(self):
        return list(self._owned)

    # ------------------------------------------------------------------ the step
    def step(self):
        self.wait_gather()
        opt = self._optim
        owned = {id(p) for p in self._owned}
        hidden, clips, replaced = [], [], []
        try:
            # 1. global-norm clipping over every rank's shard
            factors = self._global_norm_factors()
            for gi, group in enumerate(opt._param_groups):
                f = factors.get(gi)
                if f is None:
                    continue
                clips.append((group, group["grad_clip"]))
                group["grad_clip"] = None
                for p in group["params"]:
                    if id(p) in owned and p._grad is not None and getattr(p, "need_clip", True):
                        g = p._grad._data
                        if opt._multi_precision and g.dtype.name in _LOW:
                            g = g.astype(np.float32)
                        replaced.append((p, p._grad))
                        p._grad = Tensor._wrap(g * f.astype(g.dtype))
            # 2. the wrapped optimizer sees only this rank's gradients
            for p in self._params:
                if id(p) not in owned and p._grad is not None:
                    hidden.append((p, p._grad))
                    p._grad = None
            if self._owned:
                opt.step()
        finally:
            for p, g in hidden:
                p._grad = g
            for p, g in replaced:
                p._grad = g
            for group, clip in clips:
                group["grad_clip"] = clip
        # 3. every owner sends what it updated to all (stages 1 and 2)
        if self.gather_after_step:
            self._gather_params()

    def _global_norm_factors(self):
        """``{group index: clip factor}`` for the groups clipped by global norm; the
        squares of every group are summed over ranks in one all-reduce."""
        opt = self._optim
        groups = [(gi, g) for gi, g in enumerate(opt._param_groups)
                  if isinstance(g.get("grad_clip"), ClipGradByGlobalNorm)]
        if not groups:
            return {}
        sums = np.zeros(2 * len(groups), dtype=np.float64)   # per group: sum of squares, has a gradient
        dev = None
        for k, (gi, group) in enumerate(groups):
            clip = group["grad_clip"]
            for p in group["params"]:
                g = p._grad
                if g is None or p.stop_gradient or self._owner[id(p)] != self.rank or not getattr(p, "need_clip", True):
                    continue
                a = g._data
                if opt._multi_precision and a.dtype.name in _LOW:
                    a = a.astype(np.float32)
                sums[2 * k] += float(backend.to_host(clip.squares(a)))
                sums[2 * k + 1] = 1
                dev = a
        sums = self._comm.allreduce(sums, "sum")
        out = {}
        xp = np if dev is None else backend.get_array_module(dev)
        for k, (gi, group) in enumerate(groups):
            if sums[2 * k + 1] == 0:
                continue
            clip = group["grad_clip"]
            # as ClipGradByGlobalNorm.squares: float64 for float64 gradients (the same on every rank)
            dtype = "float64" if any(p._data.dtype == np.float64 for p in group["params"]) else "float32"
            norm = xp.sqrt(xp.asarray(sums[2 * k], dtype=dtype))
            out[gi] = clip.scale(norm)
        return out

    def _gather_chunks(self):
        """The broadcasts of the gather, built once: per dtype (and device) and owner, runs
        of the owner's parameters in parameter order, of at most ``gather_chunk_bytes``
        (a single larger parameter travels alone); ordered by their first parameter, so
        that what the forward needs first is sent first. The same on every rank."""
        if self._chunks is None:
            cap = self.gather_chunk_bytes
            order = {id(p): i for i, p in enumerate(self._params)}
            chunks, open_ = [], {}
            for p in self._params:
                key = (p._data.dtype.str, backend.is_gpu_array(p._data), self._owner[id(p)])
                cur = open_.get(key)
                nbytes = p._data.nbytes
                if cur is None or (cur[1] and cur[1] + nbytes > cap):
                    cur = open_[key] = [[], 0, key[2]]
                    chunks.append(cur)
                cur[0].append(p)
                cur[1] += nbytes
            chunks.sort(key=lambda c: order[id(c[0][0])])
            self._chunks = [(ps, owner) for ps, _, owner in chunks]
        return self._chunks

    def _gather_params(self):
        """Every rank gets the parameters their owners updated: each owner broadcasts its
        parameters, packed flat in chunks (:meth:`_gather_chunks`), with the
        communicator's non-blocking broadcast. With ``overlap_gather`` the step returns
        with the broadcasts in flight: a parameter's new value is written in when
        :meth:`wait_gather` asks for it (the sharded model's forward pre-hooks ask for
        each layer's parameters before the layer runs); otherwise the step waits for all."""
        if self.nranks == 1:
            return
        self.wait_gather()
        comm, rank = self._comm, self.rank
        pending, pending_of = self._pending, self._pending_of
        for ps, owner in self._gather_chunks():
            xp = backend.get_array_module(ps[0]._data)
            buf = xp.empty(sum(p._data.size for p in ps), dtype=ps[0]._data.dtype)
            if owner == rank:
                off = 0
                for p in ps:
                    n = p._data.size
                    buf[off:off + n] = p._data.reshape(-1)
                    off += n
            chunk = _Chunk(ps, owner == rank, buf, comm.ibroadcast(buf, owner))
            pending.append(chunk)
            if not chunk.mine:
                for p in ps:
                    pending_of[id(p)] = chunk
        self.gathers_started += 1
        if not self.overlap_gather:
            self.wait_gather()

    def wait_gather(self, params=None):
        """Finish the parameter gather in flight for ``params`` (all of it when None):
        their data then holds the values their owners computed at the last step. The
        other broadcasts in flight are polled (so that they progress)."""
        pending = self._pending
        if not pending:
            return
        if params is None:
            for chunk in pending:
                chunk.finish(self._pending_of)
            pending.clear()
            return
        of = self._pending_of
        for p in params:
            chunk = of.get(id(p))
            if chunk is not None:
                chunk.finish(of)
        for chunk in pending:
            chunk.req.test()
        while pending and pending[0].done:
            pending.pop(0)

    @property
    def gather_in_flight(self):
        """Whether broadcasts of updated parameters are still pending on this rank."""
        return any(not c.done for c in self._pending)

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        self.step()
        return [], [(p, p._grad) for p in self._params if p._grad is not None]

    def clear_grad(self, set_to_zero=True):
        self._optim.clear_grad(set_to_zero)

    clear_gradients = clear_grad

    # ------------------------------------------------------------------ checkpoints
    def sharded_state_dict(self):
        """This rank's part of the optimizer state (its parameters' entries, and the
        learning-rate schedule)."""
        self.wait_gather()
        return self._optim.state_dict()

    def state_dict(self):
        """The full state dict, gathered from every rank's shard (on every rank)."""
        self.wait_gather()
        mine = self._optim.state_dict()
        if self.nranks == 1:
            return mine
        # entries travel keyed by parameter position (ranks may have named their
        # parameters differently), and come back in parameter order under this rank's names
        entries, masters = [], {}
        for part, part_masters, _ in self._comm.allgather_object(self._positional_shard()):
            for i, suffix, v in part:
                entries.append((i, len(entries), self._params[i].name + suffix, v))
            for i, t in part_masters:
                masters[i] = t
        entries.sort(key=lambda e: e[:2])
        full = {k: v for _, _, k, v in entries}
        if masters:
            full["master_weights"] = {self._params[i].name: masters[i] for i in sorted(masters)}
        if "LR_Scheduler" in mine:
            full["LR_Scheduler"] = mine["LR_Scheduler"]
        xp = np if not self._params else backend.get_array_module(self._params[0]._data)
        conv = _from_host if xp is np else (lambda v: _device_dict({"v": v}, xp)["v"])
        return {k: (v if k == "LR_Scheduler" else conv(v)) for k, v in full.items()}

    def _positional_shard(self):
        """This rank's entries keyed by parameter position: ``(entries, masters, lr)``."""
        mine = self._optim.state_dict()
        index = {p.name: i for i, p in enumerate(self._params)}
        host = _to_host(mine)
        entries, masters = [], []
        for k, v in host.items():
            if k == "master_weights":
                masters = [(index[n], t) for n, t in v.items()]
            elif k != "LR_Scheduler":
                base = max((n for n in index if k.startswith(n + "_")), key=len)
                entries.append((index[base], k[len(base):], v))
        return entries, masters, mine.get("LR_Scheduler")

    def _load_positional(self, parts):
        """Load ``(entries, masters, lr)`` parts (from any world size): this rank keeps
        the entries of its parameters."""
        n = len(self._params)
        mine = {i for i, p in enumerate(self._params) if self._owner[id(p)] == self.rank}
        state, masters, lr = {}, {}, None
        for entries, part_masters, part_lr in parts:
            for i, suffix, v in entries:
                if not 0 <= i < n:
                    raise ValueError(f"ddg.distributed.sharding: the sharded checkpoint holds state for parameter "
                                     f"#{i}; this optimizer has {n} parameters")
                if i in mine:
                    state[self._params[i].name + suffix] = _from_host(v)
            for i, t in part_masters:
                if i in mine:
                    masters[self._params[i].name] = _from_host(t)
            lr = part_lr if part_lr is not None else lr
        if masters:
            state["master_weights"] = masters
        if lr is not None:
            state["LR_Scheduler"] = lr
        self._optim.set_state_dict(state)

    def set_state_dict(self, state_dict):
        """Load a full state dict (or this rank's shard): each rank keeps its parameters'
        entries."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"ddg.distributed.sharding: set_state_dict needs a dict, got {type(state_dict).__name__}")
        self.wait_gather()
        opt = self._optim
        names = {p.name for p in self._params}
        mine = {p.name for p in self._owned}
        # each entry's parameter: the key's prefix before ``_<accumulator>_0`` (and the
        # master-weight infix); by position unless every name is one of this optimizer's
        # (a model rebuilt in another process gets other automatic names, some of which
        # may be the names of other parameters here)
        prefixes, of = [], {}
        for k in state_dict:
            if k in ("master_weights", "LR_Scheduler") or not isinstance(k, str):
                continue
            base = next((k[:-len(f"_{n}_0")] for n in opt._acc_names + opt._scalar_accs
                         if k.endswith(f"_{n}_0")), None)
            if base is None:
                raise KeyError(f"ddg.distributed.sharding: state dict entry {k!r} is no accumulator of "
                               f"{type(opt).__name__}")
            base = base[:-len(_MASTER)] if base.endswith(_MASTER) else base
            if base not in of:
                of[base] = base
                prefixes.append(base)
        if prefixes and not names.issuperset(prefixes):
            if len(prefixes) != len(self._params):
                raise ValueError(f"ddg.distributed.sharding: the state dict holds the state of {len(prefixes)} "
                                 f"parameters whose names are not this model's, and the optimizer has "
                                 f"{len(self._params)}; cannot match them by position")
            of = {x: p.name for x, p in zip(prefixes, self._params)}
        part = {}
        for k, v in state_dict.items():
            if k == "LR_Scheduler":
                part[k] = v
                continue
            if k == "master_weights":
                part[k] = {of.get(n, n): t for n, t in v.items() if of.get(n, n) in mine}
                continue
            base = next(x for x in of if k.startswith(x + "_"))
            if of[base] in mine:
                part[of[base] + k[len(base):]] = v
        self._optim.set_state_dict(part)


class _Chunk:
    """One owner's broadcast of a run of its parameters, in flight."""
    __slots__ = ("params", "mine", "buf", "req", "done")

    def __init__(self, params, mine, buf, req):
        self.params, self.mine, self.buf, self.req = params, mine, buf, req
        self.done = False

    def finish(self, pending_of):
        """Wait for the broadcast; on a receiving rank, write the values into the
        parameters."""
        if self.done:
            return
        self.req.wait()
        self.done = True
        if not self.mine:
            off, buf = 0, self.buf
            for p in self.params:
                n = p._data.size
                p._data[...] = buf[off:off + n].reshape(p._data.shape)
                p._bump()
                pending_of.pop(id(p), None)
                off += n
        self.buf = None


def _drain(pending):
    """Complete the broadcasts still in flight (at exit: before MPI finalizes)."""
    for chunk in pending:
        if not chunk.done:
            chunk.req.wait()
            chunk.done = True
    pending.clear()


def _to_host(d):
    out = {}
    for k, v in d.items():
        if isinstance(v, Tensor):
            out[k] = backend.to_host(v._data).copy()
        elif isinstance(v, dict) and k == "master_weights":
            out[k] = _to_host(v)
        else:
            out[k] = v
    return out


def _from_host(v):
    if isinstance(v, np.ndarray):
        return Tensor._wrap(v)
    if isinstance(v, dict):
        return {k: _from_host(x) for k, x in v.items()}
    return v


def _device_dict(d, xp):  # pragma: no cover - needs a GPU
    def conv(v):
        if isinstance(v, np.ndarray):
            return Tensor._wrap(xp.asarray(v))
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v
    return {k: (v if k == "LR_Scheduler" else conv(v)) for k, v in d.items()}
