"""A minimal reader of MATLAB v5 ``.mat`` files (the format of the Flowers labels),
so that ddg needs no scipy: numeric matrices only (double, single, integer classes,
compressed or not); anything else (cells, structs, strings, sparse, complex) raises.

The format: a 128-byte header (text, subsystem offset, version 0x0100, endian mark
``IM``/``MI``), then data elements, each a tag (type, byte count; "small" elements pack
both into 4 bytes and their data into the next 4) and its data padded to 8 bytes. A
``miCOMPRESSED`` element is a zlib stream holding one element; a ``miMATRIX`` holds the
array flags (class in the low byte), the dimensions, the name and the real part, whose
stored type may be narrower than the class. Values are in column-major order.
"""
import struct
import zlib

import numpy as np

__all__ = ["loadmat"]

_MI = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 9: "f8", 12: "i8", 13: "u8"}
_MI_MATRIX, _MI_COMPRESSED = 14, 15
_MX = {6: "f8", 7: "f4", 8: "i1", 9: "u1", 10: "i2", 11: "u2", 12: "i4", 13: "u4", 14: "i8", 15: "u8"}
_MX_NAMES = {1: "cell", 2: "struct", 3: "object", 4: "char", 5: "sparse"}


class _Reader:
    def __init__(self, buf, order, where):
        self.buf, self.order, self.where, self.pos = buf, order, where, 0

    def fail(self, msg):
        raise ValueError("loadmat: {}: {}".format(self.where, msg))

    def element(self):
        """(type, bytes) of the next element, moving past its padding."""
        if self.pos + 8 > len(self.buf):
            self.fail("truncated element tag at byte {}".format(self.pos))
        first, second = struct.unpack_from(self.order + "II", self.buf, self.pos)
        if first >> 16:  # small element: 2-byte count and type, up to 4 bytes of data
            typ, n = first & 0xFFFF, first >> 16
            if n > 4:
                self.fail("small element of {} bytes".format(n))
            data = self.buf[self.pos + 4:self.pos + 4 + n]
            self.pos += 8
            return typ, data
        typ, n = first, second
        start = self.pos + 8
        if start + n > len(self.buf):
            self.fail("element of {} bytes runs past the end ({} left)".format(n, len(self.buf) - start))
        data = self.buf[start:start + n]
        self.pos = start + n + (-n % 8 if typ != _MI_COMPRESSED else 0)
        return typ, data

    def numbers(self, typ, data):
        if typ not in _MI:
            self.fail("unsupported numeric element type {}".format(typ))
        dt = np.dtype(_MI[typ]).newbyteorder(self.order)
        if len(data) % dt.itemsize:
            self.fail("{} bytes do not fit elements of type {}".format(len(data), dt))
        return np.frombuffer(data, dtype=dt)


def _matrix(data, order, where):
    r = _Reader(data, order, where)
    t, flags = r.element()
    t2, dims = r.element()
    t3, name = r.element()
    if t != 6 or t2 != 5 or t3 not in (1, 2):
        r.fail("malformed matrix header (element types {}, {}, {})".format(t, t2, t3))
    flags = r.numbers(t, flags)
    cls = int(flags[0]) & 0xFF
    complex_ = bool(int(flags[0]) & 0x800)
    name = bytes(name).decode("ascii", "replace")
    if cls not in _MX or complex_:
        r.fail("variable {!r} is a {} array; only real numeric matrices are read".format(
            name, "complex" if complex_ else _MX_NAMES.get(cls, "class-{}".format(cls))))
    shape = tuple(int(d) for d in r.numbers(t2, dims))
    typ, raw = r.element()
    values = r.numbers(typ, raw)
    if values.size != int(np.prod(shape)):
        r.fail("variable {!r}: {} values for shape {}".format(name, values.size, list(shape)))
    return name, values.astype(np.dtype(_MX[cls]).newbyteorder("="), copy=True).reshape(shape, order="F")


def loadmat(path):
    """``{name: numpy array}`` of the numeric matrices in a MATLAB v5 file (2-D or
    more, as MATLAB stores them; the same arrays ``scipy.io.loadmat`` gives)."""
    with open(path, "rb") as f:
        buf = f.read()
    where = repr(str(path))
    if len(buf) < 128:
        raise ValueError("loadmat: {}: too short for a MATLAB v5 header ({} bytes)".format(where, len(buf)))
    if buf[:8] == b"\x89HDF\r\n\x1a\n" or buf[512:520] == b"\x89HDF\r\n\x1a\n":
        raise ValueError("loadmat: {}: a MATLAB v7.3 (HDF5) file; only v5 files are read".format(where))
    mark = buf[126:128]
    if mark not in (b"IM", b"MI"):
        raise ValueError("loadmat: {}: not a MATLAB v5 file (endian mark {!r})".format(where, mark))
    order = "<" if mark == b"IM" else ">"
    out = {}
    r = _Reader(buf, order, where)
    r.pos = 128
    while r.pos < len(buf):
        typ, data = r.element()
        if typ == _MI_COMPRESSED:
            try:
                inner = zlib.decompress(bytes(data))
            except zlib.error as e:
                r.fail("bad compressed element ({})".format(e))
            ir = _Reader(inner, order, where)
            typ, data = ir.element()
        if typ != _MI_MATRIX:
            r.fail("top-level element of type {}, expected a matrix".format(typ))
        name, arr = _matrix(data, order, where)
        out[name] = arr
    return out
