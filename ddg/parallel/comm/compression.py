"""Gradient compression: how an all-reduce's payload travels (Horovod's ``Compression``).

A compression is a strategy the communicator applies around a sum or mean:
``compress`` turns the array into a *wire* buffer (fewer bytes), the communicator sums
the wire buffers over ranks in their own precision, and ``decompress`` writes the result
back into the array. Callers (DataParallel's reducer, ``ddg.distributed.all_reduce``)
name the strategy and never touch the wire format.

* ``'none'``: the array travels as it is.
* ``'fp16'``: float32/float64 arrays travel as float16 (half or a quarter of the bytes).
  The values are divided by the world size before rounding, so the float16 sum cannot
  overflow where the mean of the values fits; each value is rounded to float16 once
  (relative error about ``2**-11``) and each partial sum again, so the result has a
  relative error of order ``world_size * 2**-11``; magnitudes below ~6e-8 flush to zero.
  Other dtypes travel uncompressed.
* ``'half'`` (what DataParallel uses for float16 and bfloat16 gradients): 2-byte float
  arrays travel as they are, 2 bytes a value, summed in their own precision (each
  combine of two buffers adds in float32 and rounds once: a user-defined MPI op, NCCL's
  own half sums on GPUs). ``'avg'`` divides by the world size first (in float32,
  rounding once), so the float16 sum cannot overflow where the mean fits. Other dtypes
  travel uncompressed. A plain ``all_reduce`` of a half array (no compression) instead
  sums in float32 and rounds once at the end, with 4 bytes a value on the wire.
"""
import numpy as np

from .util import array_module as _array_module

__all__ = ["Compression", "NoCompression", "FP16Compression", "HalfWire", "get_compression"]


class Compression:
    """The strategy interface."""
    name = "?"

    def applies_to(self, array):
        """Whether this strategy changes how ``array`` travels."""
        raise NotImplementedError

    def compress(self, array, world_size, op):
        """A new wire buffer for ``array``, to be summed over ``world_size`` ranks."""
        raise NotImplementedError

    def decompress(self, wire, array, world_size, op):
        """Write the summed ``wire`` back into ``array`` as the result of ``op``."""
        raise NotImplementedError

    def __repr__(self):
        return f"<compression {self.name!r}>"


class NoCompression(Compression):
    name = "none"

    def applies_to(self, array):
        return False


class FP16Compression(Compression):
    name = "fp16"
    _WIRE = np.dtype(np.float16)

    def applies_to(self, array):
        return array.dtype.kind in "fV" and array.dtype.itemsize > 2

    def compress(self, array, world_size, op):
        if op not in ("sum", "avg"):
            raise ValueError(f"ddg.parallel: compression 'fp16' supports op 'sum' and 'avg', got {op!r}")
        xp = _array_module(array)
        wire = xp.empty(array.shape, dtype=self._WIRE)
        # pre-divide, so that the float16 sum stays in range; one pass, rounding once
        xp.multiply(array, array.dtype.type(1.0 / world_size), out=wire, casting="unsafe")
        return wire

    def decompress(self, wire, array, world_size, op):
        xp = _array_module(array)
        if op == "avg":
            array[...] = wire
        else:
            xp.multiply(wire, array.dtype.type(world_size), out=array)


class HalfWire(Compression):
    """float16/bfloat16 arrays summed in place as 2-byte words (see the module notes)."""
    name = "half"

    def applies_to(self, array):
        d = array.dtype
        return d.itemsize == 2 and d.kind in "fV"

    def compress(self, array, world_size, op):
        if op not in ("sum", "avg"):
            raise ValueError(f"ddg.parallel: compression 'half' supports op 'sum' and 'avg', got {op!r}")
        if op == "avg" and world_size > 1:
            array[...] = (array.astype(np.float32) * np.float32(1.0 / world_size)).astype(array.dtype)
        return array   # the wire is the array itself: summed in place

    def decompress(self, wire, array, world_size, op):
        pass


_BY_NAME = {"none": NoCompression(), "fp16": FP16Compression(), "half": HalfWire()}
HALF_WIRE = _BY_NAME["half"]
NONE = _BY_NAME["none"]


def get_compression(spec):
    """A :class:`Compression` from None, a name ('none', 'fp16') or a Compression."""
    if spec is None:
        return NONE
    if isinstance(spec, Compression):
        return spec
    c = _BY_NAME.get(str(spec).lower()) if isinstance(spec, str) else None
    if c is None:
        raise ValueError(f"ddg.parallel: unknown gradient compression {spec!r}; "
                         f"expected one of {', '.join(sorted(_BY_NAME))} or a Compression")
    return c
