"""``ddg.save`` / ``ddg.load``: a safe, self-describing checkpoint format.

Nothing here unpickles: loading a checkpoint can never run code. A file is

    offset 0   magic            8 bytes   b"DDGCKPT\\0"
           8   version          uint32 LE
          12   header length    uint64 LE (H)
          20   payload length   uint64 LE (P)
          28   header           H bytes of UTF-8 JSON: the object's structure
      28 + H   padding          zero bytes up to a multiple of 64
               payload          P bytes: the raw little-endian array bytes, each
                                array starting at a 64-byte aligned offset
         end   checksum         32 bytes: SHA-256 of every byte before it

The header is a tree of nodes, one per Python object:

    {"t": "dict", "items": [[key, node], ...]}      key: {"s": str} or {"i": int}
    {"t": "list" | "tuple", "items": [node, ...]}
    {"t": "tensor", "dtype", "shape", "offset", "nbytes", "stop_gradient"}
    {"t": "ndarray", "dtype", "shape", "offset", "nbytes"}
    {"t": "npscalar", "dtype", "offset", "nbytes"}  (numpy scalars such as np.float32(1))
    {"t": "bytes", "offset", "nbytes"}
    {"t": "int", "v": int}  {"t": "float", "v": float.hex()}  {"t": "bool", "v": b}
    {"t": "str", "v": s}    {"t": "none"}

Because the file's total length is known from the fixed 28-byte prefix, a truncated
file is told apart from a corrupted one (checksum mismatch) and from a foreign one
(wrong magic). Writes are atomic: the bytes go to a temporary file in the target's
directory, which is flushed, fsync'ed and then renamed over the target with
``os.replace``; if anything fails the temporary file is removed and an existing
file at the target path is left as it was.

The temporary is named ``.<target name>.<pid>@<host>.<random>.tmp``. A SIGTERM that
arrives while a save writes (a pre-empted job) removes it before the process ends as
it would have; a temporary left by a writer that died without cleaning up (SIGKILL,
power loss) is removed, with a warning, by the next save of the same path, once its
writer is known dead (same host, no such pid) or it has not changed for an hour.

Loading checks the header's shape before walking it: nesting deeper than
``MAX_DEPTH`` levels and array dtypes other than bool/int/uint/float/complex are
refused with a ValueError naming the problem.
"""
import hashlib
import json
import os
import re
import signal
import socket
import struct
import tempfile
import threading
import time
import warnings

import numpy as np

from ..tensor import backend
from ..tensor.dtypes import bfloat16
from . import paddle_format

__all__ = ["save", "load"]

MAGIC = b"DDGCKPT\x00"
VERSION = 1
_PREFIX = struct.Struct("<8sIQQ")  # magic, version, header length, payload length
_ALIGN = 64
_DIGEST = 32  # sha256
_CHUNK = 16 << 20  # bytes per write() call

# Array dtypes that round-trip exactly through raw bytes (no objects, no structs).
_DTYPE_KINDS = "biufc"

# Deepest nesting of containers (dicts, lists, tuples) a checkpoint may hold.
MAX_DEPTH = 100
_STALE_AGE = 3600.0  # seconds without a change after which any temporary counts as stale

# Permissions for new files: what open() would give, not mkstemp's 0600.
_UMASK = os.umask(0)
os.umask(_UMASK)


def _tensor_class():
    from ..tensor.tensor import Tensor
    return Tensor


def _key_path(path):
    return "obj" + "".join("[{!r}]".format(k) for k in path)


class _Encoder:
    """Walks the object once, building the JSON tree and the list of byte blobs."""

    def __init__(self):
        self.blobs = []  # (offset, array-or-bytes)
        self.size = 0
        self.Tensor = _tensor_class()

    def _add(self, buf, nbytes):
        offset = self.size
        self.blobs.append((offset, buf))
        self.size = offset + nbytes
        self.size += (-self.size) % _ALIGN
        return offset

    def _array(self, arr, path):
        arr = backend.to_host(arr)
        if arr.dtype == bfloat16:   # ml_dtypes: native byte order only; stored as its little-endian bits
            bits = arr.astype(arr.dtype, order="C", copy=False).view(np.uint16).astype("<u2", copy=False)
            offset = self._add(bits, bits.nbytes)
            return {"dtype": "bfloat16", "shape": list(arr.shape), "offset": offset, "nbytes": int(bits.nbytes)}
        if arr.dtype.kind not in _DTYPE_KINDS or arr.dtype.fields is not None:
            raise TypeError("ddg.save: {}: cannot save an array of dtype {} (only bool, int, uint, float "
                            "and complex arrays can be saved)".format(_key_path(path), arr.dtype))
        le = arr.dtype.newbyteorder("<")
        arr = arr.astype(le, order="C", copy=False)  # (ascontiguousarray would make 0-d arrays 1-d)
        offset = self._add(arr, arr.nbytes)
        return {"dtype": np.dtype(arr.dtype).name, "shape": list(arr.shape),
                "offset": offset, "nbytes": int(arr.nbytes)}

    def encode(self, obj, path=()):
        if obj is None:
            return {"t": "none"}
        if isinstance(obj, bool):
            return {"t": "bool", "v": obj}
        if isinstance(obj, int):
            return {"t": "int", "v": int(obj)}
        if isinstance(obj, float):
            return {"t": "float", "v": float(obj).hex()}
        if isinstance(obj, str):
            return {"t": "str", "v": obj}
        if isinstance(obj, (bytes, bytearray)):
            return {"t": "bytes", "offset": self._add(bytes(obj), len(obj)), "nbytes": len(obj)}
        if isinstance(obj, self.Tensor):
            node = {"t": "tensor"}
            node.update(self._array(obj._data, path))
            node["stop_gradient"] = bool(obj.stop_gradient)
            return node
        if isinstance(obj, backend.ARRAY_TYPES):  # numpy (and cupy, saved via the host)
            node = {"t": "ndarray"}
            node.update(self._array(obj, path))
            return node
        if isinstance(obj, np.generic):
            node = {"t": "npscalar"}
            info = self._array(np.asarray(obj), path)
            del info["shape"]
            node.update(info)
            return node
        if len(path) >= MAX_DEPTH and isinstance(obj, (dict, list, tuple)):
            raise ValueError("ddg.save: {}...: containers nested deeper than {} levels cannot be saved"
                             .format(_key_path(path[:3]), MAX_DEPTH))
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if isinstance(k, str):
                    key = {"s": k}
                elif isinstance(k, int) and not isinstance(k, bool):
                    key = {"i": int(k)}
                else:
                    raise TypeError("{}: cannot save a dict key of type {} ({!r}); keys must be str or int"
                                    .format(_key_path(path), type(k).__name__, k))
                items.append([key, self.encode(v, path + (k,))])
            return {"t": "dict", "items": items}
        if isinstance(obj, (list, tuple)):
            return {"t": "tuple" if isinstance(obj, tuple) else "list",
                    "items": [self.encode(v, path + (i,)) for i, v in enumerate(obj)]}
        raise TypeError("{}: cannot save object of type {}".format(_key_path(path), type(obj).__name__))


def _write_chunk(f, data):
    """One write; a separate function so tests can simulate a crash mid-write."""
    f.write(data)


def _encode(obj):
    enc = _Encoder()
    return enc, enc.encode(obj)


def _serialize_to(f, encoded):
    """Write an encoded object to the binary file ``f``; returns the bytes written."""
    enc, tree = encoded
    header = json.dumps({"format": "ddg-checkpoint", "root": tree},
                        ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    digest = hashlib.sha256()
    written = 0

    def put(data):
        nonlocal written
        mv = memoryview(data).cast("B")
        for start in range(0, len(mv), _CHUNK):
            piece = mv[start:start + _CHUNK]
            digest.update(piece)
            _write_chunk(f, piece)
        written += len(mv)

    put(_PREFIX.pack(MAGIC, VERSION, len(header), enc.size))
    put(header)
    put(b"\x00" * ((-written) % _ALIGN))
    base = written
    for offset, buf in enc.blobs:
        gap = base + offset - written
        if gap:
            put(b"\x00" * gap)
        if isinstance(buf, np.ndarray):
            if buf.nbytes:
                put(buf.reshape(-1).view(np.uint8))
        elif buf:
            put(buf)
    gap = base + enc.size - written
    if gap:
        put(b"\x00" * gap)
    _write_chunk(f, digest.digest())
    return written + _DIGEST


def _fsync_dir(dirname):
    try:
        fd = os.open(dirname, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save(obj, path, protocol=None, **configs):
    """Save ``obj`` (nested dicts/lists/tuples of Tensors, numpy arrays, numbers,
    bools, strings, None) to ``path`` atomically.

    ``path`` may also be a writable binary file object (then the write is not atomic).
    ``protocol`` is accepted for Paddle compatibility and ignored (no pickle is used).
    """
    if protocol is not None and (not isinstance(protocol, int) or isinstance(protocol, bool)):
        raise ValueError("ddg.save: protocol must be an int, got {!r}".format(protocol))
    # Encode first so that unsupported objects fail before anything touches the disk.
    encoded = _encode(obj)
    if hasattr(path, "write"):
        _serialize_to(path, encoded)
        return
    path = os.fspath(path)
    if path == "" or path.endswith(os.sep):
        raise ValueError("ddg.save: {!r} is not a file path".format(path))
    dirname = os.path.dirname(os.path.abspath(path))
    os.makedirs(dirname, exist_ok=True)
    base = os.path.basename(path)
    _remove_stale_temporaries(dirname, base)
    tmp = [None]
    restore = _remove_on_sigterm(tmp)
    try:
        fd, tmp[0] = tempfile.mkstemp(prefix=".{}.{}.".format(base, _writer_id()), suffix=".tmp", dir=dirname)
        _live.add(tmp[0])
        try:
            with os.fdopen(fd, "wb") as f:
                _serialize_to(f, encoded)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp[0], 0o666 & ~_UMASK)
            os.replace(tmp[0], path)
        except BaseException:
            try:
                os.unlink(tmp[0])
            except OSError:
                pass
            raise
        finally:
            _live.discard(tmp[0])
    finally:
        restore()
    _fsync_dir(dirname)


# Temporaries that a save in this process is writing now (other threads' included).
_live = set()


def _writer_id():
    """``<pid>@<host>``: who writes a temporary, so that a later save can tell whether
    its writer still lives."""
    host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:64]
    return "{}@{}".format(os.getpid(), host)


def _remove_on_sigterm(tmp):
    """While a save writes in the main thread, a SIGTERM whose action is the default
    (end the process) first removes the temporary ``tmp[0]``, then ends the process by
    the same signal, so its exit status is SIGTERM's. A Python handler already in place
    is left alone: whatever it raises unwinds through save, which removes the temporary,
    and if it returns, the save goes on. Returns the function that restores the
    previous handler."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except (ValueError, AttributeError):
        return lambda: None
    if previous is not signal.SIG_DFL:
        return lambda: None

    def on_sigterm(signum, frame):
        if tmp[0] is not None:
            try:
                os.unlink(tmp[0])
            except OSError:
                pass
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)

    def restore():
        if signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, previous)

    return restore


def _stale_reason(full, pid, host, now):
    """Why the temporary ``full`` (written by ``pid``@``host``) belongs to no live
    writer, or None while its writer may still be writing it."""
    try:
        age = now - os.stat(full).st_mtime
    except OSError:
        return None
    if age > _STALE_AGE:
        return "unchanged for {:.0f} s".format(age)
    if pid is None or host != _writer_id().split("@", 1)[1]:
        return None
    if pid == os.getpid():
        return None if full in _live else "left by this process"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "its writer (pid {}) is gone".format(pid)
    except OSError:
        pass
    return None


def _remove_stale_temporaries(dirname, base):
    """Remove the temporaries of earlier saves of ``dirname/base`` whose writers died
    before they could (SIGKILL, a crash), with a warning naming them."""
    pattern = re.compile(r"\.{}\.(?:(\d+)@([A-Za-z0-9-]*)\.)?[a-z0-9_]{{8}}\.tmp\Z".format(re.escape(base)))
    try:
        names = os.listdir(dirname)
    except OSError:
        return
    now = time.time()
    removed = []
    for name in names:
        m = pattern.match(name)
        if m is None:
            continue
        full = os.path.join(dirname, name)
        pid = int(m.group(1)) if m.group(1) else None
        reason = _stale_reason(full, pid, m.group(2), now)
        if reason is None:
            continue
        try:
            size = os.path.getsize(full)
            os.unlink(full)
        except OSError:
            continue
        removed.append("{} ({} bytes, {})".format(name, size, reason))
    if removed:
        warnings.warn("ddg.save: removed stale temporary file(s) of an interrupted save of {!r} in {}: {}"
                      .format(base, dirname, "; ".join(removed)), RuntimeWarning, stacklevel=3)


class _Decoder:
    def __init__(self, payload, name, return_numpy):
        self.payload = payload
        self.name = name
        self.return_numpy = return_numpy
        self.Tensor = None if return_numpy else _tensor_class()

    def bad(self, what):
        return ValueError("ddg.load: {}: corrupt checkpoint header ({})".format(self.name, what))

    def _array(self, node, shape):
        if node.get("dtype") == "bfloat16" if isinstance(node, dict) else False:
            bits = self._array(dict(node, dtype="<u2"), shape)
            return bits.view(bfloat16)
        try:
            dtype = np.dtype(node["dtype"]).newbyteorder("<")
            offset, nbytes = int(node["offset"]), int(node["nbytes"])
        except (KeyError, TypeError) as e:
            raise self.bad("bad array entry: {}".format(e)) from None
        if dtype.kind not in _DTYPE_KINDS or dtype.fields is not None:
            raise self.bad("array dtype {!r} is not allowed (only bool, int, uint, float and complex)"
                           .format(str(node["dtype"])))
        count = 1
        for s in shape:
            count *= int(s)
        if count * dtype.itemsize != nbytes or offset < 0 or offset + nbytes > len(self.payload):
            raise self.bad("array entry out of range")
        arr = np.frombuffer(self.payload, dtype=dtype, count=count, offset=offset).reshape(shape)
        return arr.astype(dtype.newbyteorder("="), copy=True)

    def decode(self, node):
        try:
            t = node["t"]
        except (KeyError, TypeError):
            raise self.bad("node without a type") from None
        if t == "none":
            return None
        if t in ("bool", "int", "str"):
            return node["v"]
        if t == "float":
            return float.fromhex(node["v"])
        if t == "dict":
            out = {}
            for key, v in node["items"]:
                k = key["s"] if "s" in key else int(key["i"])
                out[k] = self.decode(v)
            return out
        if t == "list":
            return [self.decode(v) for v in node["items"]]
        if t == "tuple":
            return tuple(self.decode(v) for v in node["items"])
        if t == "bytes":
            off, n = int(node["offset"]), int(node["nbytes"])
            if off < 0 or off + n > len(self.payload):
                raise self.bad("bytes entry out of range")
            return bytes(self.payload[off:off + n])
        if t == "ndarray":
            return self._array(node, node["shape"])
        if t == "npscalar":
            return self._array(node, ())[()]
        if t == "tensor":
            arr = self._array(node, node["shape"])
            if self.return_numpy:
                return arr
            return _make_tensor(self.Tensor, arr, bool(node.get("stop_gradient", True)))
        raise self.bad("unknown node type {!r}".format(t))


def _make_tensor(Tensor, arr, stop_gradient):
    """A CPU Tensor holding ``arr`` (no extra copy where the core allows it)."""
    wrap = getattr(Tensor, "_wrap", None)
    if wrap is not None:
        t = wrap(arr, True)
        if not stop_gradient:
            t.stop_gradient = False
        return t
    from ..tensor.creation import to_tensor
    return to_tensor(arr, place="cpu", stop_gradient=stop_gradient)


def _read_all(f, name):
    data = f.read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("ddg.load: {} is not a binary file".format(name))
    return data


def load(path, return_numpy=False, **configs):
    """Load an object saved with :func:`save`.

    Tensors come back as CPU Tensors (``stop_gradient`` as saved), or as numpy arrays
    when ``return_numpy=True``; numpy arrays as numpy arrays; dicts keep their key order.
    ``path`` may also be a readable binary file object.

    Files written by ``paddle.save`` (``.pdparams``, ``.pdopt``: pickles) are read too,
    through a restricted unpickler that builds only arrays, dicts, lists, tuples, numbers
    and strings and refuses any other global (see ``ddg.io.paddle_format``); their arrays
    come back as Tensors (or numpy arrays with ``return_numpy=True``).
    """
    if hasattr(path, "read"):
        name = repr(getattr(path, "name", "<file object>"))
        data = _read_all(path, name)
    else:
        path = os.fspath(path)
        name = repr(path)
        if not os.path.exists(path):
            raise FileNotFoundError("ddg.load: no such file: {}".format(name))
        if os.path.isdir(path):
            raise IsADirectoryError("ddg.load: {} is a directory, not a ddg checkpoint".format(name))
        with open(path, "rb") as f:
            data = _read_all(f, name)
    return _deserialize(data, name, return_numpy)


def _json_depth(raw):
    """The deepest bracket nesting of the JSON text ``raw`` (strings skipped), found
    without recursion so that a hostile header cannot exhaust the stack."""
    stripped = re.sub(rb'"(?:[^"\\]|\\.)*"', b"", raw)
    codes = np.frombuffer(stripped, dtype=np.uint8)
    step = (np.isin(codes, (ord("["), ord("{"))).astype(np.int64)
            - np.isin(codes, (ord("]"), ord("}"))).astype(np.int64))
    return int(np.cumsum(step).max()) if step.size else 0


def _deserialize(data, name, return_numpy):
    n = len(data)
    if paddle_format.is_pickle(data):  # written by paddle.save: a restricted unpickler, no code runs
        Tensor = None if return_numpy else _tensor_class()

        def make(arr, tname):
            t = _make_tensor(Tensor, arr if arr.flags.writeable else arr.copy(), True)
            if tname is not None:
                t.name = tname
            return t
        return paddle_format.load_paddle(data, name, make, return_numpy, MAX_DEPTH)
    if data[:len(MAGIC)] != MAGIC[:min(n, len(MAGIC))] or n == 0:
        raise ValueError("ddg.load: {} is not a ddg checkpoint (bad magic bytes; was it written by "
                         "ddg.save?)".format(name))
    if n < _PREFIX.size:
        raise ValueError("ddg.load: {}: truncated: expected at least {} bytes, found {}"
                         .format(name, _PREFIX.size + _DIGEST, n))
    _, version, hlen, plen = _PREFIX.unpack_from(data, 0)
    if version > VERSION:
        raise ValueError("ddg.load: {} has checkpoint format version {}, this ddg reads up to {}; "
                         "upgrade ddg".format(name, version, VERSION))
    hend = _PREFIX.size + hlen
    pstart = hend + (-hend) % _ALIGN
    expected = pstart + plen + _DIGEST
    if n < expected:
        raise ValueError("ddg.load: {}: truncated: expected {} bytes, found {}".format(name, expected, n))
    if n > expected:
        raise ValueError("ddg.load: {}: corrupt: expected {} bytes, found {} (trailing data)"
                         .format(name, expected, n))
    mv = memoryview(data)
    if hashlib.sha256(mv[:n - _DIGEST]).digest() != bytes(mv[n - _DIGEST:]):
        raise ValueError("ddg.load: {}: checksum mismatch (the file is corrupted)".format(name))
    raw = bytes(mv[_PREFIX.size:hend])
    depth = _json_depth(raw)
    if depth > 3 * MAX_DEPTH + 4:  # three JSON levels per container (node, items, pair)
        raise ValueError("ddg.load: {}: corrupt checkpoint header (nested {} levels deep; a checkpoint "
                         "holds containers nested at most {} deep)".format(name, depth, MAX_DEPTH))
    try:
        header = json.loads(raw.decode("utf-8"))
        root = header["root"]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError("ddg.load: {}: corrupt checkpoint header ({})".format(name, e)) from None
    dec = _Decoder(mv[pstart:pstart + plen], name, return_numpy)
    try:
        return dec.decode(root)
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, ValueError) and str(e).startswith("ddg.load"):
            raise
        raise dec.bad("{}: {}".format(type(e).__name__, e)) from None
