"""The communicator interface, the one :class:`Request` state machine, and the argument
checks every implementation shares.

Array collectives reduce *in place* (``allreduce``, ``broadcast``, ``reduce``) or return a
new array (``allgather``, ``reduce_scatter``, ``scatter``). ``iallreduce``, ``ireduce``,
``ibroadcast`` and ``iallgather`` start the same collectives without blocking and return
a :class:`Request`; every rank must start collectives in the same order. Reduction ops are the strings
``'sum'``, ``'avg'``, ``'max'``, ``'min'``, ``'prod'``. ``allreduce``/``iallreduce`` take an
optional gradient ``compression`` (see :mod:`.compression`), which the communicator
applies around the reduction.

Every blocking call, and every request's ``wait()``, records what it is doing and since
when; :meth:`Communicator.activity` reports it, and the stall watchdog of
:mod:`ddg.parallel.env` reads it from a daemon thread.
"""
import time

from .compression import get_compression
from .util import REDUCE_OPS, normalize_op  # noqa: F401  (REDUCE_OPS is re-exported)

__all__ = ["REDUCE_OPS", "Communicator", "Request"]

_now = time.monotonic

# ---------------------------------------------------------------------------
# Requests

class Request:
    """A collective in flight: ``wait()`` finishes it and returns its result; ``test()``
    finishes it if it has completed and never blocks.

    Every implementation uses this one state machine and supplies three callables:
    ``poll()`` (has the low-level operation completed?), ``block()`` (wait until it has)
    and ``finish()`` (what is left once it has: average, cast or copy back, release
    staging buffers). ``finish`` runs exactly once, from whichever of ``test``/``wait``
    first sees the operation complete. A request made with no ``poll`` is complete at
    creation (world size 1, empty arrays). ``comm`` is the communicator whose stall
    bookkeeping records the wait (None where an inner request records it).
    """
    __slots__ = ("_comm", "_result", "_poll", "_block", "_finish", "_what", "_done")

    def __init__(self, comm, result, poll=None, block=None, finish=None, what=None):
        self._comm, self._result = comm, result
        self._poll, self._block, self._finish, self._what = poll, block, finish, what
        self._done = False
        if poll is None:
            self._complete()

    @classmethod
    def completed(cls, result):
        """A request that completed when it was created."""
        return cls(None, result)

    def test(self):
        """True when the operation has completed (finishing it if so); never blocks."""
        if self._done:
            return True
        if self._poll():
            self._complete()
            return True
        return False

    def wait(self):
        """Block until the operation has completed, finish it, return its result."""
        if not self._done:
            comm = self._comm
            if comm is None:            # an inner request records the wait itself
                self._block()
            else:
                with comm._busy(self._what):
                    self._block()
            self._complete()
        return self._result

    def then(self, fn):
        """Run ``fn()`` once the operation completes, after the steps already attached;
        returns this request."""
        if self._done:
            fn()
            return self
        prev = self._finish
        if prev is None:
            self._finish = fn
        else:
            def both():
                prev()
                fn()
            self._finish = both
        return self

    def _complete(self):
        self._done = True
        finish, self._finish = self._finish, None
        if finish is not None:
            finish()


# ---------------------------------------------------------------------------
# The interface

class Communicator:
    """The collective interface. Subclasses implement every method that raises
    NotImplementedError here.

    ``rank``/``size`` describe the process group. Array arguments are numpy or cupy
    arrays; all ranks must pass arrays of the same shape and dtype (only the root's array
    matters for ``broadcast``).
    """
    rank = 0
    size = 1
    # What the blocking call in progress is and when it began (see activity()).
    _busy_what = None
    _busy_since = 0.0

    # -- reductions ---------------------------------------------------------------
    def allreduce(self, array, op="sum", compression=None):
        """Reduce ``array`` over all ranks, in place; returns ``array``. ``compression``
        ('none', 'fp16' or a :class:`~.compression.Compression`) sends it in fewer bytes."""
        c = get_compression(compression)
        if c.applies_to(array):
            return self.iallreduce(array, op, c).wait()
        return self._allreduce(array, op)

    def iallreduce(self, array, op="sum", compression=None):
        """Start an in-place all-reduce; returns a :class:`Request`."""
        c = get_compression(compression)
        if not c.applies_to(array):
            return self._iallreduce(array, op)
        op = normalize_op(op, "iallreduce")
        size = self.size
        wire = c.compress(array, size, op)
        return self._iallreduce_wire(wire).then(lambda: c.decompress(wire, array, size, op))

    def _allreduce(self, array, op):
        raise NotImplementedError

    def _iallreduce(self, array, op):
        raise NotImplementedError

    def _iallreduce_wire(self, wire):
        """Start a sum of a compressed buffer over ranks, in its own (low) precision, so
        that only its bytes travel. By default the ordinary reduction."""
        return self._iallreduce(wire, "sum")

    def reduce(self, array, root=0, op="sum"):
        """Reduce onto ``root``, in place there; other ranks' arrays are left unchanged."""
        raise NotImplementedError

    def ireduce(self, array, root=0, op="sum"):
        """Start a reduction onto ``root`` (in place there; other ranks' arrays are left
        unchanged); returns a :class:`Request` whose result is ``array``. By default the
        blocking :meth:`reduce`, complete when it returns."""
        return Request.completed(self.reduce(array, root, op))

    def reduce_scatter(self, array, op="sum"):
        """Reduce ``array`` (first axis divisible by size) over ranks; return this rank's
        block of ``array.shape[0] // size`` rows."""
        raise NotImplementedError

    # -- data movement ------------------------------------------------------------
    def broadcast(self, array, root=0):
        """Overwrite ``array`` on every rank with root's, in place; returns ``array``."""
        raise NotImplementedError

    def allgather(self, array):
        """A new array of shape ``(size,) + array.shape``: row ``r`` is rank r's array."""
        raise NotImplementedError

    def ibroadcast(self, array, root=0):
        """Start overwriting ``array`` with root's on every rank; a :class:`Request` whose
        result is ``array`` (root must not write it, nor the others read it, before it
        completes). By default the blocking :meth:`broadcast`."""
        return Request.completed(self.broadcast(array, root))

    def iallgather(self, array):
        """Start an :meth:`allgather`; a :class:`Request` whose result is the new
        ``(size,) + array.shape`` array. By default the blocking one."""
        return Request.completed(self.allgather(array))

    def scatter(self, arrays, root=0, out=None):
        """Root passes ``size`` equally-shaped arrays (others pass None); every rank gets
        its own as a new array, or written into ``out`` when given."""
        raise NotImplementedError

    def gather(self, array, root=0):
        """On root, a new array of shape ``(size,) + array.shape`` (row r: rank r's array);
        None on the other ranks."""
        raise NotImplementedError

    def alltoall(self, array):
        """``array`` has shape ``(size, ...)``: row j goes to rank j. Returns a new array of
        the same shape whose row i came from rank i."""
        raise NotImplementedError

    def barrier(self):
        raise NotImplementedError

    # -- point to point (``tag`` tells messages between the same pair apart) ----------
    def send(self, array, dest, tag=0):
        """Send ``array`` to rank ``dest``; returns when the buffer may be reused."""
        return self.isend(array, dest, tag).wait()

    def recv(self, array, source=None, tag=0):
        """Receive into ``array`` (in place) from rank ``source`` (None: any rank); returns
        ``array``. Shape and dtype must match the sender's."""
        return self.irecv(array, source, tag).wait()

    def isend(self, array, dest, tag=0):
        """Start sending ``array`` to ``dest``; a :class:`Request` (do not write ``array``
        before it completes)."""
        raise NotImplementedError

    def irecv(self, array, source=None, tag=0):
        """Start receiving into ``array``; a :class:`Request` whose result is ``array``."""
        raise NotImplementedError

    # -- subgroups --------------------------------------------------------------------
    def split(self, ranks):
        """A communicator over ``ranks`` (ranks of this one; their order gives the new
        ranks), or None on a rank that is not among them. Collective: every rank of this
        communicator calls it with the same list."""
        raise NotImplementedError

    def free(self):
        """Release what the communicator holds (a subgroup's MPI communicator)."""

    # -- picklable objects (small metadata, never tensors' data) ----------------------
    def allgather_object(self, obj):
        """A list with every rank's (picklable) object, in rank order."""
        raise NotImplementedError

    def bcast_object(self, obj, root=0):
        """Root's object on every rank."""
        raise NotImplementedError

    def gather_object(self, obj, root=0):
        """The list of every rank's object on root; None elsewhere."""
        raise NotImplementedError

    # -- the group ------------------------------------------------------------------
    def local_rank(self):
        """This process's rank among the ranks on its node (may be a collective call)."""
        return 0

    # -- stall bookkeeping ------------------------------------------------------------
    def activity(self):
        """``(what, since)`` of the blocking call in progress, or None when idle. ``what``
        is a tuple ``(collective name, array or None, detail)``; ``since`` is a
        ``time.monotonic()`` value."""
        since = self._busy_since
        if not since:
            return None
        return (self._label or self._busy_what, since)

    #: what the stall watchdog names instead of the call in progress (set around a
    #: collective made on behalf of another, e.g. ddg.distributed's agreement check)
    _label = None

    # Two attribute writes, cheap enough for every call.
    def _begin(self, what):
        self._busy_what = what
        self._busy_since = _now()

    def _end(self):
        self._busy_since = 0.0

    def _busy(self, what):
        """``with comm._busy(what):`` around a blocking call: :meth:`activity` reports it
        (and the stall watchdog can name it) until the block exits, however it exits."""
        return _Busy(self, what)

    def __repr__(self):
        return f"<{type(self).__name__} rank={self.rank} size={self.size}>"


class _Busy:
    """The context manager :meth:`Communicator._busy` returns (a class rather than a
    generator: it runs around every blocking call)."""
    __slots__ = ("comm", "what")

    def __init__(self, comm, what):
        self.comm, self.what = comm, what

    def __enter__(self):
        self.comm._begin(self.what)

    def __exit__(self, *exc):
        self.comm._end()
        return False
