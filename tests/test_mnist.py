"""ddg.vision.datasets.MNIST on the shared data (never copied into the repository):
../shared/data relative to the repository root, or $DDG_DATA_DIR."""
import gzip
import os
import pathlib
import shutil
import struct

import numpy as np
import pytest

from ddg.io import DataLoader
from ddg.tensor.tensor import Tensor
from ddg.vision import transforms
from ddg.vision.datasets import MNIST
from ddg.vision.datasets import mnist as mnist_mod

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(REPO, "..", "shared", "data")


def _find(folder_name, probe="t10k-images-idx3-ubyte.gz"):
    candidates = []
    env = os.environ.get("DDG_DATA_DIR")
    if env:
        # $DDG_DATA_DIR names the training data folder (mnist-10k); the official files
        # are only ever looked for in a folder of their own name beside or inside it
        if folder_name == "mnist-10k":
            candidates.append(env)
        candidates += [os.path.join(env, folder_name), os.path.join(env, "..", folder_name)]
    candidates.append(os.path.join(SHARED, folder_name))
    for c in candidates:
        if os.path.isfile(os.path.join(c, probe)) and (folder_name != "mnist-10k" or
                                                       os.path.isfile(os.path.join(c, "train-images-idx3-ubyte.gz"))):
            return c
    return None


MNIST10K = _find("mnist-10k")
OFFICIAL = _find("mnist-official-t10k")


@pytest.fixture
def _data_folders():
    """The suite reads MNIST from the shared folder: a missing one is a broken setup."""
    assert MNIST10K is not None, "mnist-10k data not found in ../shared/data or $DDG_DATA_DIR"
    assert OFFICIAL is not None, "official t10k files not found in ../shared/data or $DDG_DATA_DIR"


need10k = need_official = pytest.mark.usefixtures("_data_folders")


@need10k
def test_mnist_10k_items():
    train = MNIST(mode="train", data_dir=MNIST10K)
    test = MNIST(mode="test", data_dir=MNIST10K)
    assert len(train) == 8000 and len(test) == 2000
    img, label = train[0]
    assert isinstance(img, np.ndarray) and img.shape == (1, 28, 28) and img.dtype == np.float32
    assert img.min() >= -1.0 and img.max() <= 1.0 and img.min() == -1.0
    assert isinstance(label, np.ndarray) and label.shape == (1,) and label.dtype == np.int64
    assert train.labels.min() == 0 and train.labels.max() == 9
    assert set(np.unique(test.labels)) == set(range(10))
    # the raw pixels map linearly onto [-1, 1]
    np.testing.assert_allclose(img[0], train.images[0] / 127.5 - 1.0, atol=1e-6)


@need10k
def test_mnist_env_var_and_transforms(monkeypatch):
    monkeypatch.setenv("DDG_DATA_DIR", MNIST10K)
    ds = MNIST(mode="test", transform=transforms.Normalize(mean=[127.5], std=[127.5], data_format="CHW"))
    img, _ = ds[3]
    assert img.shape == (1, 28, 28) and img.dtype == np.float32
    np.testing.assert_allclose(img, MNIST(mode="test")[3][0], atol=1e-6)
    tt = MNIST(mode="test", transform=transforms.Compose([transforms.ToTensor()]))[0][0]
    assert isinstance(tt, Tensor) and tt.shape == [1, 28, 28] and float(tt.numpy().max()) <= 1.0
    pil = MNIST(mode="test", backend="pil")[0][0]
    assert pil.size == (28, 28)


@need10k
def test_mnist_through_dataloader():
    ds = MNIST(mode="test", data_dir=MNIST10K)
    img, label = next(iter(DataLoader(ds, batch_size=64, shuffle=True)))
    assert img.shape == [64, 1, 28, 28] and img.dtype == np.float32
    assert label.shape == [64, 1] and label.dtype == np.int64


@need10k
def test_explicit_paths():
    ds = MNIST(image_path=os.path.join(MNIST10K, "t10k-images-idx3-ubyte.gz"),
               label_path=os.path.join(MNIST10K, "t10k-labels-idx1-ubyte.gz"), mode="test")
    assert len(ds) == 2000


def test_missing_dir_message(tmp_path):
    missing = tmp_path / "no-such-folder"
    with pytest.raises(FileNotFoundError) as e:
        MNIST(mode="train", data_dir=str(missing))
    msg = str(e.value)
    assert str(missing) in msg and "train-images-idx3-ubyte.gz" in msg
    assert "download=True" in msg and "DDG_DATA_DIR" in msg


def test_bad_mode():
    with pytest.raises(ValueError, match="mode"):
        MNIST(mode="valid", data_dir="/nonexistent")


def _write_idx(path, magic, dims, payload, compress=True):
    data = struct.pack(">i" + "i" * len(dims), magic, *dims) + payload
    if compress:
        data = gzip.compress(data)
    pathlib.Path(path).write_bytes(data)


def _fake_set(folder, n_img=5, n_lab=5, compress=True):
    os.makedirs(folder, exist_ok=True)
    _write_idx(os.path.join(folder, "t10k-images-idx3-ubyte.gz"), 2051, (n_img, 28, 28),
               bytes(range(256)) * (n_img * 784 // 256) + bytes(n_img * 784 % 256), compress)
    _write_idx(os.path.join(folder, "t10k-labels-idx1-ubyte.gz"), 2049, (n_lab,), bytes(i % 10 for i in range(n_lab)),
               compress)


def test_idx_parsing_and_validation(tmp_path):
    ok = tmp_path / "ok"
    _fake_set(ok)
    ds = MNIST(mode="test", data_dir=str(ok))
    assert len(ds) == 5 and ds[4][1][0] == 4
    plain = tmp_path / "plain"  # uncompressed files under the standard names are read too
    _fake_set(plain, compress=False)
    assert len(MNIST(mode="test", data_dir=str(plain))) == 5

    mismatch = tmp_path / "mismatch"
    _fake_set(mismatch, n_img=5, n_lab=4)
    with pytest.raises(ValueError, match="5 images.*4 labels"):
        MNIST(mode="test", data_dir=str(mismatch))

    swapped = tmp_path / "swapped"
    _fake_set(swapped)
    img = swapped / "t10k-images-idx3-ubyte.gz"
    lab = swapped / "t10k-labels-idx1-ubyte.gz"
    tmp = swapped / "tmp"
    img.rename(tmp)
    lab.rename(img)
    tmp.rename(lab)
    with pytest.raises(ValueError, match="magic number 2049, expected 2051") as e:
        MNIST(mode="test", data_dir=str(swapped))
    assert "t10k-images-idx3-ubyte.gz" in str(e.value)

    short = tmp_path / "short"
    _fake_set(short)
    _write_idx(short / "t10k-images-idx3-ubyte.gz", 2051, (5, 28, 28), bytes(100))
    with pytest.raises(ValueError, match="5x28x28 .3920 bytes"):
        MNIST(mode="test", data_dir=str(short))

    badgz = tmp_path / "badgz"
    _fake_set(badgz)
    p = badgz / "t10k-labels-idx1-ubyte.gz"
    p.write_bytes(p.read_bytes()[:15])
    with pytest.raises(ValueError, match="gzip") as e:
        MNIST(mode="test", data_dir=str(badgz))
    assert str(p) in str(e.value)


@need_official
def test_md5_official_files_pass_and_corrupt_copy_fails(tmp_path):
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        mnist_mod.check_md5(os.path.join(OFFICIAL, name), mnist_mod.MD5[name])
    bad = tmp_path / "t10k-labels-idx1-ubyte.gz"
    data = bytearray(pathlib.Path(OFFICIAL, "t10k-labels-idx1-ubyte.gz").read_bytes())
    data[len(data) // 2] ^= 1
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum mismatch") as e:
        mnist_mod.check_md5(str(bad), mnist_mod.MD5["t10k-labels-idx1-ubyte.gz"])
    assert str(bad) in str(e.value)


@need_official
def test_download_checks_md5(tmp_path, monkeypatch):
    """download=True through a file:// mirror: the official files pass and land in the cache
    folder; a mirror serving a corrupted copy fails naming the file and leaves nothing."""
    good_mirror = pathlib.Path(OFFICIAL).resolve().as_uri() + "/"
    cache = tmp_path / "cache"
    monkeypatch.setattr(mnist_mod, "MIRRORS", ["file:///nonexistent-mirror/", good_mirror])
    ds = MNIST(mode="test", download=True, data_dir=str(cache))
    assert len(ds) == 10000
    assert sorted(os.listdir(cache)) == ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]

    bad_dir = tmp_path / "badmirror"
    shutil.copytree(OFFICIAL, bad_dir)
    lab = bad_dir / "t10k-labels-idx1-ubyte.gz"
    os.chmod(lab, 0o644)
    data = bytearray(lab.read_bytes())
    data[100] ^= 0xFF
    lab.write_bytes(bytes(data))
    cache2 = tmp_path / "cache2"
    monkeypatch.setattr(mnist_mod, "MIRRORS", [bad_dir.resolve().as_uri() + "/"])
    with pytest.raises(ValueError, match="checksum mismatch") as e:
        MNIST(mode="test", download=True, data_dir=str(cache2))
    assert "t10k-labels-idx1-ubyte.gz" in str(e.value)
    assert sorted(os.listdir(cache2)) == ["t10k-images-idx3-ubyte.gz"]  # only the good file


def test_default_data_dir(monkeypatch):
    monkeypatch.setenv("DDG_DATA_DIR", "/some/where")
    assert mnist_mod.default_data_dir() == "/some/where"
    monkeypatch.delenv("DDG_DATA_DIR")
    assert mnist_mod.default_data_dir().endswith(os.path.join(".cache", "ddg", "mnist"))


def _run_example(tmp_path, *args):
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, os.path.join(REPO, "examples", "mnist.py"), "--data-dir", MNIST10K,
                           "--out", str(tmp_path), "--no-plot", "--epochs", "1"] + list(args),
                          capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))


@need10k
def test_example_refuses_an_epoch_of_zero_steps(tmp_path):
    # 8,000 training images on one rank: a batch of 9,000 with drop_last gives no step at all
    r = _run_example(tmp_path, "--batch-size", "9000")
    assert r.returncode != 0, r.stdout[-2000:]
    assert "--batch-size 9000 is larger than this rank's share" in r.stderr
    assert "8000 of 8000 images over 1 rank(s)" in r.stderr and "0 steps" in r.stderr
    assert "train loss" not in r.stdout


@need10k
def test_example_stops_when_training_diverges(tmp_path):
    r = _run_example(tmp_path, "--lr", "1e6")
    assert r.returncode != 0, r.stdout[-2000:]
    assert "FloatingPointError" in r.stderr and "training diverged" in r.stderr and "1e+06" in r.stderr
    assert "final test accuracy" not in r.stdout
