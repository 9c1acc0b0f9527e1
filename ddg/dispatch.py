"""The interception slots, in one place, and the one way to install an interceptor.

Every op call goes through ``Function.__call__``, the hot path of every step. Features
that must see every op (mixed precision, tracing, nan checks) hook in through
one-element lists that the hot path reads once each; ``None``/``False`` means the
feature is off, so an idle feature costs one list read. The modules that read a slot
bind the list itself under their own name (``function._recorder`` is ``RECORDER``), so
the read stays one global lookup and one subscript.

In the order an op call meets them:

==================  ==============================  ==========================================
slot                installed by                    what the holder does
==================  ==============================  ==========================================
``AUTOCAST``        ``ddg.amp.auto_cast``           ``hook(fn, tensors)``: casts the inputs to
                                                    the dtype the op runs in, then calls the
                                                    op again with the slot cleared (the casts
                                                    are ordinary ops, so tracing records them)
``RECORDER``        ``ddg.jit`` while tracing       ``hook(fn, tensors)``: records the call,
                                                    then runs it with the slot cleared
``GRAD_ENABLED``    ``no_grad``, ``enable_grad``,   whether the call records a graph node
                    ``set_grad_enabled``
``CHECK_NAN_INF``   ``ddg.set_flags``               outputs (and, in the engine, gradients)
                                                    are checked for nan/inf
``WATCH``           ``ddg.jit`` while tracing       ``watch(tensor, what, value)``: told when a
                                                    tensor's data reaches Python or is written
                                                    in place outside an op
``RNG_OBSERVER``    ``backend.observe_rng``         told of every draw from ddg's generator,
                    (``ddg.jit`` while tracing)     so that a replay reproduces it
==================  ==============================  ==========================================

``install(slot, value)`` puts a holder in a slot and returns what was there;
``restore(slot, previous)`` puts it back; ``intercept(slot, value)`` does both as a
context manager. ``exclusive=True`` refuses to replace another holder (tracing does not
nest). Two writes stay direct because they sit on the op path: a holder that runs the
op itself (``AUTOCAST``, ``RECORDER``) clears its own slot around that call, and the
grad-mode contexts (entered around every optimizer update) flip ``GRAD_ENABLED``.

Features that wrap a call rather than replace it (the profiler times
``Function.__call__``, the engine's ``call_backward`` and ``Optimizer.step``;
``saved_tensors_hooks`` packs what an op saved) install a wrapper with
``wrap(owner, name, make)``: ``make(inner)`` returns the wrapped callable, and the
handle's ``remove()`` takes it out again in any order (the remaining wrappers are
rebuilt over the original), so nothing is patched while no such feature is active.
"""

AUTOCAST = [None]
RECORDER = [None]
GRAD_ENABLED = [True]
CHECK_NAN_INF = [False]
WATCH = [None]
RNG_OBSERVER = [None]

#: every slot by name, in the order an op call meets them
SLOTS = {"autocast": AUTOCAST, "recorder": RECORDER, "grad_enabled": GRAD_ENABLED,
         "check_nan_inf": CHECK_NAN_INF, "watch": WATCH, "rng_observer": RNG_OBSERVER}


def _slot_name(slot):
    for name, s in SLOTS.items():
        if s is slot:
            return name
    raise ValueError("ddg.dispatch: not an interception slot")


def install(slot, value, exclusive=False):
    """Put ``value`` in ``slot``; returns the previous holder, for ``restore``. With
    ``exclusive``, a slot that already holds something is an error."""
    prev = slot[0]
    if exclusive and prev is not None:
        raise RuntimeError(f"ddg: the {_slot_name(slot)} slot is already taken (nested use)")
    slot[0] = value
    return prev


def restore(slot, previous):
    """Put back what ``install`` returned."""
    slot[0] = previous


class intercept:
    """``with intercept(slot, value):``: ``value`` holds ``slot`` inside, the previous
    holder comes back on exit (re-entrant: each entry remembers its own)."""

    def __init__(self, slot, value, exclusive=False):
        _slot_name(slot)
        self.slot, self.value, self.exclusive = slot, value, exclusive
        self._prev = []

    def __enter__(self):
        self._prev.append(install(self.slot, self.value, self.exclusive))
        return self

    def __exit__(self, *exc):
        restore(self.slot, self._prev.pop())
        return False


# -- wrappers of a callable attribute ------------------------------------------------------------------
_WRAPPED = {}   # (id(owner), name) -> [owner, original, [handles in install order]]


class _Wrapper:
    __slots__ = ("key", "make")

    def __init__(self, key, make):
        self.key, self.make = key, make

    def remove(self):
        entry = _WRAPPED.get(self.key)
        if entry is None or self not in entry[2]:
            return
        entry[2].remove(self)
        _rebuild(self.key)


def _rebuild(key):
    owner, original, handles = _WRAPPED[key]
    fn = original
    for h in handles:
        fn = h.make(fn)
    setattr(owner, key[1], fn)
    if not handles:
        del _WRAPPED[key]


def wrap(owner, name, make):
    """Replace ``owner.name`` by ``make(inner)``, where ``inner`` is the attribute as the
    wrappers installed before left it; returns a handle whose ``remove()`` undoes this
    one wrapper (the others stay, in their order)."""
    key = (id(owner), name)
    entry = _WRAPPED.get(key)
    if entry is None:
        entry = _WRAPPED[key] = [owner, owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name),
                                 []]
    h = _Wrapper(key, make)
    entry[2].append(h)
    _rebuild(key)
    return h
