"""Training that survives failures and preemption: a :class:`State` committed at step
boundaries, restored by a restarted job on its own (Horovod elastic's ``State``,
``commit``/``restore``/``sync`` and ``run``, over ddgrun's ``--max_restarts``).

    state = elastic.State(model=model, optimizer=opt, lr_scheduler=sched, loader=loader, epoch=0)

    @elastic.run
    def train(state):
        for epoch in range(state.epoch, epochs):
            for x, y in loader:              # a resumed epoch skips what it had seen
                ...
                state.commit()               # every step, or every k steps
            state.epoch = epoch + 1
            state.commit()

    train(state)

``ddgrun --max_restarts 3 -n 4 python train.py``: a rank that fails ends the job (ddg's
fail-fast), ddgrun starts it again, and ``run`` restores the last commit; the result is
the one an unfaulted run gets, bit for bit (the steps since the last commit are done
again, from the same state, with the same random numbers).

What a commit holds, written by rank 0 alone into one file (``<dir>/state.ddg``,
atomically: a crash while writing leaves the previous commit), where ``dir`` is
``checkpoint_dir``, else ``$DDG_ELASTIC_DIR``, else ``./ddg_elastic``:

* every object given with a ``state_dict`` and a ``set_state_dict`` or
  ``load_state_dict`` (layers, optimizers, LR schedulers, ``GradScaler``...): rank 0's (data parallel keeps them equal on every rank);
* every ``DataLoader`` given: where its iteration is (each rank's own), so that a resumed
  epoch goes on in the same order and skips the batches already seen; a
  ``DistributedBatchSampler`` given alone: its epoch;
* every other value (numbers, strings, arrays, Tensors, lists and dicts of those): rank
  0's, read and written as attributes (``state.epoch``);
* each rank's random-number state: ddg's generator (dropout, initializers, shuffles),
  numpy's and Python's global ones.

Only rank 0 reads the file (``restore``) and sends it to the others, so the folder need
not be shared between machines, but it must survive the job: a relaunch (after a
preemption, or by hand) resumes from it too. Remove the folder to start afresh.

**Preemption**: while a ``State`` exists, SIGTERM (Slurm's and PBS's preemption,
``scancel``; ddgrun passes it on to every rank) makes the next ``commit()`` or
:meth:`State.check_preemption` (a step boundary), on every rank at the same step,
commit and end the process with :data:`PREEMPTED` (75, sysexits' ``EX_TEMPFAIL``);
ddgrun does not restart such a job, the scheduler's relaunch resumes it. If no step
boundary comes within ``$DDG_PREEMPT_GRACE`` seconds (default 20), the rank ends as
SIGTERM would have ended it.

The state of cupy's GPU generator is not part of a commit.
"""
import functools
import os
import random
import signal
import sys
import threading

import numpy as np

from ..tensor import backend

__all__ = ["State", "run", "PREEMPTED", "default_dir"]

PREEMPTED = 75
_FILE = "state.ddg"
_FORMAT = 1


def default_dir(environ=None):
    env = os.environ if environ is None else environ
    return env.get("DDG_ELASTIC_DIR") or os.path.join(os.getcwd(), "ddg_elastic")


def _grace(environ=None):
    env = os.environ if environ is None else environ
    raw = env.get("DDG_PREEMPT_GRACE", "").strip()
    if not raw:
        return 20.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"DDG_PREEMPT_GRACE must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise ValueError(f"DDG_PREEMPT_GRACE must be > 0 seconds, got {raw!r}")
    return value


def _world():
    from . import get_rank, get_world_size
    return get_rank(), get_world_size()


# ---------------------------------------------------------------------------
# Tensors travel between ranks as arrays (Tensors are not picklable)

class _Arr:
    __slots__ = ("a", "stop_gradient")

    def __init__(self, a, stop_gradient):
        self.a, self.stop_gradient = a, stop_gradient


def _to_wire(obj):
    from ..tensor.tensor import Tensor
    if isinstance(obj, Tensor):
        return _Arr(obj.numpy(), obj.stop_gradient)
    if isinstance(obj, dict):
        return {k: _to_wire(v) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_to_wire(v) for v in obj)
    return obj


def _from_wire(obj):
    if isinstance(obj, _Arr):
        from ..tensor.creation import to_tensor
        return to_tensor(obj.a, stop_gradient=obj.stop_gradient)
    if isinstance(obj, dict):
        return {k: _from_wire(v) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_from_wire(v) for v in obj)
    return obj


def _rng_state():
    return {"ddg": backend.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def _set_rng_state(s):
    backend.set_rng_state(s["ddg"])
    np.random.set_state(tuple(s["numpy"]))
    version, internal, gauss = s["python"]
    random.setstate((version, tuple(internal), gauss))


def _kind(obj):
    from ..io.dataloader import DataLoader
    if isinstance(obj, DataLoader):
        return "loader"
    if hasattr(obj, "state_dict") and (hasattr(obj, "set_state_dict") or hasattr(obj, "load_state_dict")):
        return "stateful"
    if hasattr(obj, "set_epoch") and hasattr(obj, "epoch"):
        return "sampler"
    return "value"


class State:
    """What a training job needs to resume: the objects and values given as keywords
    (see the module docstring for what is kept of each kind), with :meth:`commit`,
    :meth:`restore`, :meth:`sync` and, with :func:`run`, restarts that resume on their
    own. Values are attributes: ``state.epoch += 1``."""

    def __init__(self, model=None, optimizer=None, lr_scheduler=None, checkpoint_dir=None, **values):
        given = dict(values)
        for name, obj in (("model", model), ("optimizer", optimizer), ("lr_scheduler", lr_scheduler)):
            if obj is not None:
                given[name] = obj
        objects, plain = {}, {}
        for name, obj in given.items():
            if hasattr(type(self), name) or name.startswith("_") or name in ("commits", "restored"):
                raise ValueError(f"elastic.State: {name!r} is a name of the State's own; give that value "
                                 f"another name")
            kind = _kind(obj)
            if kind == "value":
                plain[name] = obj
            else:
                if kind == "loader" and obj._iterable:
                    raise ValueError(f"elastic.State: {name}= is a DataLoader over an IterableDataset, "
                                     "whose stream has no positions to resume from; give its values instead")
                objects[name] = (kind, obj)
        object.__setattr__(self, "_objects", objects)
        object.__setattr__(self, "_values", plain)
        object.__setattr__(self, "checkpoint_dir", os.path.abspath(checkpoint_dir or default_dir()))
        object.__setattr__(self, "commits", 0)          # commits made (restored ones included)
        object.__setattr__(self, "restored", False)     # whether restore() found a commit
        object.__setattr__(self, "_preempt", threading.Event())
        object.__setattr__(self, "_grace", _grace())
        object.__setattr__(self, "_timer", None)
        self._install_sigterm()

    # -- attribute access to the values ------------------------------------------
    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._values:
            return self._values[name]
        if name in self._objects:
            return self._objects[name][1]
        raise AttributeError(f"elastic.State has no value or object named {name!r} "
                             f"(it has {sorted(list(self._values) + list(self._objects))})")

    def __setattr__(self, name, value):
        if name.startswith("_") or name in ("checkpoint_dir", "commits", "restored"):
            object.__setattr__(self, name, value)
        elif name in self._objects:
            kind = _kind(value)
            if kind == "value":
                raise TypeError(f"elastic.State: {name} holds a {type(self._objects[name][1]).__name__}; "
                                f"cannot replace it by a {type(value).__name__}")
            self._objects[name] = (kind, value)
        else:
            self._values[name] = value

    @property
    def path(self):
        """The commit file."""
        return os.path.join(self.checkpoint_dir, _FILE)

    # -- what is committed -----------------------------------------------------------
    def _shared(self):
        """What rank 0 writes for every rank: objects' state and the values."""
        out = {}
        for name, (kind, obj) in self._objects.items():
            if kind == "stateful":
                out[name] = obj.state_dict()
            elif kind == "sampler":
                out[name] = {"epoch": int(obj.epoch)}
        return {"objects": out, "values": dict(self._values)}

    def _mine(self):
        """What each rank keeps of its own: random-number state, loader positions."""
        loaders = {name: obj.position_state() for name, (kind, obj) in self._objects.items() if kind == "loader"}
        return {"rng": _rng_state(), "loaders": loaders}

    def _apply_shared(self, shared):
        for name, (kind, obj) in self._objects.items():
            if kind == "loader":
                continue
            if name not in shared["objects"]:
                raise ValueError(f"elastic.State.restore: the commit in {self.path} has no {name!r} "
                                 f"(it has {sorted(shared['objects'])}); was it made by another program?")
            if kind == "stateful":
                load = getattr(obj, "set_state_dict", None) or obj.load_state_dict
                load(shared["objects"][name])
            elif kind == "sampler":
                obj.set_epoch(shared["objects"][name]["epoch"])
        self._values.update(shared["values"])

    def _apply_mine(self, mine):
        _set_rng_state(mine["rng"])
        for name, (kind, obj) in self._objects.items():
            if kind == "loader":
                if name not in mine["loaders"]:
                    raise ValueError(f"elastic.State.restore: the commit in {self.path} has no loader "
                                     f"{name!r} (it has {sorted(mine['loaders'])})")
                obj.set_position_state(mine["loaders"][name])

    # -- commit, restore, sync ----------------------------------------------------
    def commit(self):
        """Save the state (collective: every rank calls it at the same step). Rank 0
        writes one file for the job, atomically, with each rank's own part gathered
        to it. Then, if any rank got SIGTERM, every rank ends with :data:`PREEMPTED`."""
        from . import all_gather_object, broadcast_object_list
        from ..io.serialization import save
        rank, world = _world()
        mine = self._mine()
        flag = self._preempt.is_set()
        if world > 1:
            gathered = []
            all_gather_object(gathered, _to_wire({"mine": mine, "preempt": flag}))
            ranks = [g["mine"] for g in gathered]
            flag = any(g["preempt"] for g in gathered)
        else:
            ranks = [mine]
        error = None
        if rank == 0:
            try:
                os.makedirs(self.checkpoint_dir, exist_ok=True)
                save({"format": _FORMAT, "commits": self.commits + 1, "world_size": world,
                      "shared": self._shared(), "ranks": ranks}, self.path)
            except Exception as e:               # every rank raises it, not only rank 0
                error = f"{type(e).__name__}: {e}"
        if world > 1:
            box = [error]
            broadcast_object_list(box, src=0)
            error = box[0]
        if error is not None:
            raise RuntimeError(f"elastic.State.commit: rank 0 could not write {self.path}: {error}")
        self.commits += 1
        if flag:
            self._leave_preempted()

    def check_preemption(self):
        """A step boundary without a commit: if any rank got SIGTERM, every rank commits
        and ends with :data:`PREEMPTED`. Collective (one small all-gather) on several ranks."""
        from . import all_gather_object
        _, world = _world()
        flag = self._preempt.is_set()
        if world > 1:
            flags = []
            all_gather_object(flags, flag)
            flag = any(flags)
        if flag:
            self.commit()
            self._leave_preempted()       # commit() left already; a world of one gets here

    def _leave_preempted(self):
        rank, _ = _world()
        if rank == 0:
            print(f"[ddg.elastic] preempted (SIGTERM): committed ({self.commits} commits) to {self.path}; "
                  f"exiting with status {PREEMPTED}; relaunch to resume", file=sys.stderr, flush=True)
        self._release()
        raise SystemExit(PREEMPTED)

    def restore(self):
        """Load the last commit, if there is one (rank 0 reads it and sends it to the
        others); returns whether there was. Collective."""
        from . import broadcast_object_list
        from ..io.serialization import load
        rank, world = _world()
        box = [None]
        if rank == 0 and os.path.exists(self.path):
            try:
                data = load(self.path)
                box = [_to_wire(data)]
            except Exception as e:
                box = [f"{type(e).__name__}: {e}"]
        if world > 1:
            broadcast_object_list(box, src=0)
        data = box[0]
        if isinstance(data, str):
            raise RuntimeError(f"elastic.State.restore: cannot read the commit {self.path}: {data}")
        if data is None:
            return False
        data = _from_wire(data)
        self._apply_shared(data["shared"])
        if int(data["world_size"]) == world:
            self._apply_mine(data["ranks"][rank])
        elif rank == 0:
            print(f"[ddg.elastic] the commit in {self.path} was made by {data['world_size']} ranks, this job "
                  f"has {world}: restored the model, optimizer and values, not the random-number states "
                  f"or the loaders' positions (the epoch in progress starts over)", file=sys.stderr, flush=True)
        self.commits = int(data["commits"])
        self.restored = True
        if rank == 0:
            print(f"[ddg.elastic] resumed from commit {self.commits} in {self.path} "
                  f"(restart {os.environ.get('DDG_RESTART_COUNT', '0')})", file=sys.stderr, flush=True)
        return True

    def sync(self):
        """Make every rank's objects and values rank 0's (as after a restore).
        Collective; nothing to do on one rank."""
        from . import broadcast_object_list
        rank, world = _world()
        if world == 1:
            return
        box = [_to_wire(self._shared()) if rank == 0 else None]
        broadcast_object_list(box, src=0)
        if rank != 0:
            self._apply_shared(_from_wire(box[0]))

    # -- SIGTERM -------------------------------------------------------------------
    def close(self):
        """Give SIGTERM back to the handler that had it before this State (``run`` and
        ``Model.fit`` call this when training ends). A SIGTERM that came after the last
        step boundary is passed on to it now."""
        prev = self._release()
        if prev is not None and self._preempt.is_set():
            if callable(prev[0]):
                prev[0](signal.SIGTERM, None)
            elif prev[0] in (signal.SIG_DFL, None):
                os.kill(os.getpid(), signal.SIGTERM)

    def _release(self):
        """Uninstall this State's SIGTERM handler; returns (the previous handler,) or None."""
        if self._timer is not None:
            self._timer.cancel()
        prev = self.__dict__.get("_previous_handler")
        object.__setattr__(self, "_previous_handler", None)
        if prev is None or threading.current_thread() is not threading.main_thread():
            return None
        if signal.getsignal(signal.SIGTERM) is self.__dict__.get("_handler"):
            signal.signal(signal.SIGTERM, prev[0] if prev[0] is not None else signal.SIG_DFL)
            return prev
        return None

    def _install_sigterm(self):
        if threading.current_thread() is not threading.main_thread():
            return
        event, grace = self._preempt, self._grace

        def on_sigterm(signum, frame):
            if event.is_set():
                return
            event.set()

            def too_late():
                print(f"[ddg.elastic] no step boundary within {grace:g} s of SIGTERM "
                      f"(DDG_PREEMPT_GRACE): ending without a commit", file=sys.stderr, flush=True)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)

            timer = threading.Timer(grace, too_late)
            timer.daemon = True
            timer.start()
            object.__setattr__(self, "_timer", timer)

        object.__setattr__(self, "_previous_handler", (signal.getsignal(signal.SIGTERM),))
        object.__setattr__(self, "_handler", on_sigterm)
        signal.signal(signal.SIGTERM, on_sigterm)

    @property
    def preempted(self):
        """Whether this rank got SIGTERM (the next step boundary will end the job)."""
        return self._preempt.is_set()


def run(fn):
    """Decorator (Horovod's ``hvd.elastic.run``): ``fn(state, ...)`` starts from the last
    commit when there is one (a restarted or relaunched job), else from rank 0's state
    on every rank."""
    @functools.wraps(fn)
    def wrapper(state, *args, **kwargs):
        if not isinstance(state, State):
            raise TypeError(f"elastic.run: {getattr(fn, '__name__', fn)} must be called with an "
                            f"elastic.State first, got {type(state).__name__}")
        if not state.restore():
            state.sync()
        try:
            return fn(state, *args, **kwargs)
        finally:
            state.close()
    return wrapper
