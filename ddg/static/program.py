"""The static-graph objects that dygraph code touches: ``Program``, ``Block``, ``Variable``.

ddg runs eagerly and has no program to build or execute (``ddg.jit.to_static`` records
eager code instead). What model-zoo code reads in dygraph still exists, as in Paddle's
dygraph mode: a ``Parameter`` has a ``block`` (the global block of the default program),
which initializers accept and ignore; ``isinstance(t, static.Variable)`` is True for a
Tensor; ``program_guard`` and ``name_scope`` are context managers that change nothing.
"""
import contextlib

from ..tensor.tensor import Tensor

__all__ = ["Program", "Block", "Variable", "default_main_program", "default_startup_program", "program_guard",
           "name_scope"]


class Block:
    """A block of a ``Program``: ``idx``, ``parent_idx``, ``program``. In dygraph it holds no
    variables or ops."""

    def __init__(self, program, idx, parent_idx=-1):
        self.program, self.idx, self.parent_idx = program, idx, parent_idx
        self.forward_block_idx = -1
        self.vars = {}
        self.ops = []

    def var(self, name):
        if name not in self.vars:
            raise ValueError(f"ddg.static.Block.var: no variable {name!r} in block {self.idx} (in dygraph mode "
                             f"blocks hold no variables)")
        return self.vars[name]

    def has_var(self, name):
        return name in self.vars

    def all_parameters(self):
        return []

    def __repr__(self):
        return f"{{ // block_idx:{self.idx}  parent_idx:{self.parent_idx}  forward_idx:-1  backward_idx:-1\n\n}}"


class Program:
    """An empty program with one (global) block; ``random_seed`` is kept as set."""

    def __init__(self):
        self.blocks = [Block(self, 0)]
        self.current_block_idx = 0
        self.random_seed = 0

    @property
    def num_blocks(self):
        return len(self.blocks)

    def global_block(self):
        return self.blocks[0]

    def block(self, index):
        return self.blocks[index]

    def current_block(self):
        return self.blocks[self.current_block_idx]

    def list_vars(self):
        return iter(())

    def all_parameters(self):
        return []

    def clone(self, for_test=False):
        p = Program()
        p.random_seed = self.random_seed
        return p

    def __repr__(self):
        return "\n".join(repr(b) for b in self.blocks)


_main, _startup = Program(), Program()


def default_main_program():
    return _main


def default_startup_program():
    return _startup


@contextlib.contextmanager
def program_guard(main_program, startup_program=None):
    """Makes ``main_program`` (and ``startup_program``) the defaults inside the block."""
    global _main, _startup
    if not isinstance(main_program, Program) or not (startup_program is None
                                                      or isinstance(startup_program, Program)):
        raise TypeError(f"ddg.static.program_guard: needs Program objects, got {type(main_program).__name__} and "
                        f"{type(startup_program).__name__}")
    saved = _main, _startup
    _main = main_program
    _startup = startup_program or _startup
    try:
        yield
    finally:
        _main, _startup = saved


@contextlib.contextmanager
def name_scope(prefix=None):
    """A name scope for the operators of a static program; in dygraph it changes nothing."""
    yield


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)

    def __subclasscheck__(cls, sub):
        return isinstance(sub, type) and issubclass(sub, Tensor)


class Variable(metaclass=_VariableMeta):
    """The static-graph variable type. In dygraph a ``Tensor`` is one (Paddle 3:
    ``isinstance(x, paddle.static.Variable)`` is True for a dygraph Tensor)."""

    def __new__(cls, *args, **kwargs):
        raise TypeError("ddg.static.Variable: ddg has no static graph; create a Tensor (ddg.to_tensor) instead")
