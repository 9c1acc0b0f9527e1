"""ddg.save / ddg.load: bit-exact round trips, atomic writes, and clear errors for
truncated, corrupted and foreign files."""
import ast
import inspect
import io as _io
import json
import os
import pickle
import re
import struct

import numpy as np
import pytest

from ddg.io import serialization
from ddg.io.serialization import load, save
from ddg.tensor.creation import to_tensor
from ddg.tensor.tensor import Tensor

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def _sample(dtype, shape, seed=0):
    return np.asarray(_draw(dtype, shape, seed))


def _draw(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    a = np.asarray(rng.standard_normal(shape) * 1e3).astype(dt)
    flat = a.reshape(-1)
    if flat.size >= 4:  # special values must survive bit for bit
        flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return a


def _bits_equal(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 4), (2, 0, 3), (2, 3, 4, 5)])
def test_roundtrip_tensor_and_ndarray_bit_exact(tmp_path, dtype, shape):
    arr = _sample(dtype, shape)
    t = to_tensor(arr)
    path = tmp_path / "x.pdparams"
    save({"t": t, "a": arr}, str(path))
    out = load(str(path))
    assert isinstance(out["t"], Tensor)
    assert isinstance(out["a"], np.ndarray) and not isinstance(out["a"], Tensor)
    _bits_equal(out["t"].numpy(), arr)
    _bits_equal(out["a"], arr)
    assert out["t"].dtype == arr.dtype
    assert list(out["t"].shape) == list(shape)
    out_np = load(str(path), return_numpy=True)
    assert type(out_np["t"]) is np.ndarray
    _bits_equal(out_np["t"], arr)


def test_stop_gradient_preserved_and_cpu(tmp_path):
    a = to_tensor(np.ones((2, 2), np.float32), stop_gradient=False)
    b = to_tensor(np.ones((2,), np.float32))
    save([a, b], tmp_path / "sg")
    la, lb = load(tmp_path / "sg")
    assert la.stop_gradient is False and lb.stop_gradient is True
    assert "cpu" in str(la.place).lower()


def test_nested_structures_and_scalars(tmp_path):
    obj = {
        "model": {"fc.weight": to_tensor(np.arange(6, dtype=np.float32).reshape(2, 3)),
                  "fc.bias": to_tensor(np.zeros(3, np.float32))},
        "opt": {"LR_Scheduler": {"last_epoch": 3, "last_lr": 0.1},
                "step": 17, "betas": (0.9, 0.999), "state": {0: {"m": np.ones(2)}, 1: {}}},
        "misc": [None, True, False, "héllo ✓", 2 ** 70, -0.0, float("inf"), float("nan"), 1e-310,
                 [], (), {}, b"\x00\xffbytes", np.float32(1.5), np.int64(-3), np.bool_(True)],
    }
    save(obj, tmp_path / "s.pdopt")
    out = load(tmp_path / "s.pdopt")
    assert list(out) == ["model", "opt", "misc"]
    assert list(out["model"]) == ["fc.weight", "fc.bias"]
    np.testing.assert_array_equal(out["model"]["fc.weight"].numpy(), np.arange(6).reshape(2, 3))
    assert out["opt"]["LR_Scheduler"] == {"last_epoch": 3, "last_lr": 0.1}
    assert out["opt"]["betas"] == (0.9, 0.999) and isinstance(out["opt"]["betas"], tuple)
    assert set(out["opt"]["state"]) == {0, 1}  # int keys stay ints
    np.testing.assert_array_equal(out["opt"]["state"][0]["m"], np.ones(2))
    misc = out["misc"]
    assert misc[:5] == [None, True, False, "héllo ✓", 2 ** 70]
    assert isinstance(misc[1], bool)
    assert str(misc[5]) == "-0.0" and misc[6] == float("inf") and misc[7] != misc[7]
    assert misc[8] == 1e-310
    assert misc[9] == [] and misc[10] == () and misc[11] == {}
    assert misc[12] == b"\x00\xffbytes"
    assert type(misc[13]) is np.float32 and misc[13] == 1.5
    assert type(misc[14]) is np.int64 and misc[14] == -3
    assert type(misc[15]) is np.bool_ and misc[15]


def test_non_contiguous_and_big_endian_arrays(tmp_path):
    a = np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2]
    b = np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    c = np.arange(5, dtype=">f4")
    save([a, b, c], tmp_path / "v")
    la, lb, lc = load(tmp_path / "v")
    np.testing.assert_array_equal(la, a)
    np.testing.assert_array_equal(lb, b)
    np.testing.assert_array_equal(lc, c)
    assert lc.dtype == np.float32


def test_file_objects(tmp_path):
    buf = _io.BytesIO()
    save({"w": np.arange(3)}, buf)
    buf.seek(0)
    np.testing.assert_array_equal(load(buf)["w"], np.arange(3))


def test_creates_parent_dirs_and_overwrites(tmp_path):
    path = tmp_path / "a" / "b" / "c.pdparams"
    save({"x": 1}, str(path))
    save({"x": 2}, str(path))
    assert load(str(path)) == {"x": 2}
    assert sorted(os.listdir(path.parent)) == ["c.pdparams"]


class Foo:
    pass


def test_unsupported_type_names_key_path(tmp_path):
    path = tmp_path / "bad"
    with pytest.raises(TypeError, match=r"\['layer'\]\['w'\].*Foo"):
        save({"layer": {"w": Foo()}}, str(path))
    with pytest.raises(TypeError, match=r"\['a'\]\[1\].*set"):
        save({"a": [1, {2}]}, str(path))
    with pytest.raises(TypeError, match="key"):
        save({(1, 2): 3}, str(path))
    with pytest.raises(TypeError, match="dtype"):
        save({"o": np.array([object()])}, str(path))
    assert not path.exists() and os.listdir(tmp_path) == []


def test_crash_mid_write_keeps_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pdparams"
    save({"w": np.arange(10.0)}, str(path))
    before = path.read_bytes()
    calls = []

    def exploding_write(f, data):
        calls.append(len(data))
        if len(calls) == 3:
            raise OSError("simulated disk failure")
        f.write(data)

    monkeypatch.setattr(serialization, "_write_chunk", exploding_write)
    with pytest.raises(OSError, match="simulated"):
        save({"w": np.arange(1000.0), "v": np.ones(100)}, str(path))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pdparams"]
    np.testing.assert_array_equal(load(str(path))["w"], np.arange(10.0))


def test_crash_in_fsync_and_interrupt(tmp_path, monkeypatch):
    path = tmp_path / "ckpt"
    save([1], str(path))

    def bad_fsync(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(serialization.os, "fsync", bad_fsync)
    with pytest.raises(KeyboardInterrupt):
        save([2], str(path))
    monkeypatch.undo()
    assert load(str(path)) == [1]
    assert os.listdir(tmp_path) == ["ckpt"]


def test_crash_without_existing_file_leaves_nothing(tmp_path, monkeypatch):
    def boom(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(serialization.os, "replace", boom)
    with pytest.raises(OSError):
        save({"x": np.ones(3)}, str(tmp_path / "new"))
    assert os.listdir(tmp_path) == []


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "model.pdparams"
    save({"w": to_tensor(np.random.default_rng(0).standard_normal((50, 40)).astype(np.float32)),
          "b": np.arange(7)}, str(path))
    return path


@pytest.mark.parametrize("keep", [0, 5, 27, 100, -33, -1])
def test_truncated_file(saved, keep):
    data = saved.read_bytes()
    saved.write_bytes(data[:keep] if keep >= 0 else data[:len(data) + keep])
    with pytest.raises(ValueError) as e:
        load(str(saved))
    msg = str(e.value)
    assert str(saved) in msg
    if keep == 0:
        assert "not a ddg checkpoint" in msg
    else:
        assert "truncated" in msg
    if keep >= 28 or keep < 0:
        assert "expected {} bytes".format(len(data)) in msg


@pytest.mark.parametrize("where", [3, 15, 40, 300, 5000, -5])
def test_flipped_byte(saved, where):
    data = bytearray(saved.read_bytes())
    data[where] ^= 0x40
    saved.write_bytes(bytes(data))
    with pytest.raises(ValueError) as e:
        load(str(saved))
    assert str(saved) in str(e.value)
    assert any(s in str(e.value) for s in ("checksum mismatch", "not a ddg checkpoint", "truncated",
                                           "corrupt", "version"))
    if where >= 28:
        assert "checksum mismatch" in str(e.value)


def test_trailing_garbage(saved):
    with open(saved, "ab") as f:
        f.write(b"extra")
    with pytest.raises(ValueError, match="corrupt"):
        load(str(saved))


def test_foreign_files(tmp_path):
    p1 = tmp_path / "model.pkl"
    p1.write_bytes(pickle.dumps({"w": np.ones(3)}))
    p2 = tmp_path / "notes.txt"
    p2.write_text("hello, this is not a checkpoint\n")
    p3 = tmp_path / "empty"
    p3.write_bytes(b"")
    p4 = tmp_path / "model.npz"
    np.savez(p4, w=np.ones(3))
    for p in (p2, p3, p4):
        with pytest.raises(ValueError) as e:
            load(str(p))
        assert "not a ddg checkpoint" in str(e.value) and str(p) in str(e.value)
    # a pickle of arrays is what paddle.save writes: read by the restricted unpickler
    assert load(str(p1), return_numpy=True)["w"].tolist() == [1.0, 1.0, 1.0]
    p1.write_bytes(pickle.dumps({"w": np.ones(3), "f": print}))
    with pytest.raises(ValueError, match="builtins.print"):
        load(str(p1))


def test_newer_version_rejected(saved):
    data = bytearray(saved.read_bytes())
    struct.pack_into("<I", data, 8, 99)
    saved.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="version 99"):
        load(str(saved))


def test_missing_file_and_directory(tmp_path):
    missing = tmp_path / "nope.pdparams"
    with pytest.raises(FileNotFoundError, match="nope.pdparams"):
        load(str(missing))
    with pytest.raises(IsADirectoryError):
        load(str(tmp_path))


def test_header_is_plain_json(saved):
    data = saved.read_bytes()
    assert data[:8] == b"DDGCKPT\x00"
    _, _, hlen, _ = struct.unpack_from("<8sIQQ", data, 0)
    header = json.loads(data[28:28 + hlen].decode("utf-8"))
    assert header["format"] == "ddg-checkpoint"


def test_no_pickle_used():
    src = inspect.getsource(serialization)
    tree = ast.parse(src)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve"}
    assert "allow_pickle" not in src and "np.load(" not in src


def test_parameters_load_as_plain_tensors(tmp_path):
    from ddg.nn import Parameter
    p = Parameter(np.ones((2, 2), np.float32))
    save({"p": p}, tmp_path / "p")
    out = load(tmp_path / "p")
    assert type(out["p"]) is Tensor
    np.testing.assert_array_equal(out["p"].numpy(), np.ones((2, 2), np.float32))


# --- interrupted saves: SIGTERM cleans up, SIGKILL's leftovers go at the next save ---

_SLOW_SAVER = r"""
import os, sys, time
import numpy as np
from ddg.io import serialization
path, marker = sys.argv[1], sys.argv[2]
calls = []
def slow_write(f, data):
    calls.append(1)
    f.write(data)
    if len(calls) == 2:          # the temporary exists and holds bytes: say so, then stall
        f.flush()
        open(marker, "w").close()
        time.sleep(60)
serialization._write_chunk = slow_write
serialization.save({"w": np.arange(1000.0)}, path)
print("save finished", flush=True)
"""


def _kill_mid_save(tmp_path, sig):
    import signal
    import subprocess
    import sys
    import time
    path = tmp_path / "ckpt.pdparams"
    save({"w": np.arange(10.0)}, str(path))
    before = path.read_bytes()
    marker = tmp_path / "writing"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_SAVER, str(path), str(marker)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the save never started writing"
        time.sleep(0.02)
    temps = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert len(temps) == 1 and str(proc.pid) in temps[0], temps
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -sig, (proc.returncode, err)
    assert b"save finished" not in out
    assert path.read_bytes() == before
    return path


def test_sigterm_mid_save_removes_the_temporary(tmp_path):
    import signal
    path = _kill_mid_save(tmp_path, signal.SIGTERM)
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pdparams", "writing"]
    np.testing.assert_array_equal(load(str(path))["w"], np.arange(10.0))


def test_sigkill_leftover_is_removed_by_the_next_save(tmp_path):
    import signal
    path = _kill_mid_save(tmp_path, signal.SIGKILL)
    (stale,) = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert stale.startswith(".ckpt.pdparams.")
    other = tmp_path / "other"
    save([1], str(other))                              # another target's save leaves it alone
    assert stale in os.listdir(tmp_path)
    with pytest.warns(RuntimeWarning, match=r"stale temporary.*" + re.escape(stale)):
        save({"w": np.arange(3.0)}, str(path))
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pdparams", "other", "writing"]
    np.testing.assert_array_equal(load(str(path))["w"], np.arange(3.0))


def test_live_writer_temporary_is_kept(tmp_path):
    # A temporary whose writer (this very test process, in another save) is alive stays.
    path = tmp_path / "ckpt"
    name = ".ckpt.{}.abcdefgh.tmp".format(serialization._writer_id())
    (tmp_path / name).write_bytes(b"partial")
    serialization._live.add(str(tmp_path / name))
    try:
        save([1], str(path))
    finally:
        serialization._live.discard(str(tmp_path / name))
    assert name in os.listdir(tmp_path)


def test_sigterm_handler_restored_and_chained(tmp_path):
    import signal
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    try:
        save([1], str(tmp_path / "a"))
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        os.kill(os.getpid(), signal.SIGTERM)       # the user's own handler still runs
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)
    save([1], str(tmp_path / "b"))
    assert signal.getsignal(signal.SIGTERM) is previous


# --- hostile or damaged headers fail with the loader's own error ---

def _write_with_header(path, header_obj=None, raw_header=None, payload=b""):
    import hashlib
    header = raw_header if raw_header is not None else json.dumps(header_obj).encode()
    data = serialization._PREFIX.pack(serialization.MAGIC, serialization.VERSION, len(header), len(payload))
    data += header
    data += b"\x00" * ((-len(data)) % 64) + payload
    path.write_bytes(data + hashlib.sha256(data).digest())


def test_deeply_nested_header_is_a_clear_error(tmp_path):
    path = tmp_path / "deep"
    depth = 100000
    raw = b'{"format":"ddg-checkpoint","root":' + b'{"t":"list","items":[' * depth + b']}' * depth + b'}'
    _write_with_header(path, raw_header=raw)
    with pytest.raises(ValueError, match=r"nested \d+ levels deep.*at most {}".format(serialization.MAX_DEPTH)):
        load(str(path))
    ok = []
    for _ in range(serialization.MAX_DEPTH - 2):   # with the dict: MAX_DEPTH containers
        ok = [ok]
    save({"t": to_tensor(np.ones(2)), "deep": ok}, str(path))      # the deepest allowed round-trips
    assert load(str(path))["deep"] == ok
    with pytest.raises(ValueError, match="nested deeper than {}".format(serialization.MAX_DEPTH)):
        save({"t": 1, "deep": [ok]}, str(path))


def test_object_dtype_is_named_on_load_and_save(tmp_path):
    path = tmp_path / "obj"
    node = {"t": "ndarray", "dtype": "object", "shape": [1], "offset": 0, "nbytes": 8}
    _write_with_header(path, {"format": "ddg-checkpoint", "root": {"t": "dict", "items": [[{"s": "o"}, node]]}},
                       payload=b"\x00" * 8)
    with pytest.raises(ValueError, match="dtype 'object' is not allowed") as e:
        load(str(path))
    assert str(path) in str(e.value) and "out of range" not in str(e.value)
    with pytest.raises(TypeError, match=r"obj\['layer'\]\['o'\]: cannot save an array of dtype object"):
        save({"layer": {"o": np.array([object()])}}, str(tmp_path / "x"))
