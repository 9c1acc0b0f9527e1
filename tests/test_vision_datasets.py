"""ddg.vision.datasets on tiny archives in the real formats (built in tmp_path; nothing
is downloaded)."""
import hashlib
import io
import os
import pickle
import tarfile

import numpy as np
import pytest
from PIL import Image

import ddg
from ddg.vision import datasets as D
from ddg.vision.datasets import _matlab, cifar as cifar_mod

import vision_archives as A


def test_py2_pickle_writer_is_what_pickle_reads():
    """The test archives' batches are real Python 2 protocol-2 pickles."""
    data = np.arange(12, dtype=np.uint8).reshape(2, 6)
    blob = A.py2_pickle({b"data": data, b"labels": [3, 300], b"name": b"x" * 300})
    back = pickle.loads(blob, encoding="bytes")
    np.testing.assert_array_equal(back[b"data"], data)
    assert back[b"labels"] == [3, 300] and back[b"name"] == b"x" * 300


@pytest.mark.parametrize("backend", ["pil", "cv2"])
def test_cifar10(tmp_path, backend):
    path = tmp_path / "cifar-10-python.tar.gz"
    (train_x, train_y), (test_x, test_y) = A.cifar_archive(str(path))
    ds = D.Cifar10(data_file=str(path), mode="train", backend=backend)
    assert len(ds) == 11 and ds.data_file == str(path)
    img, label = ds[7]
    want = train_x[7].reshape(3, 32, 32).transpose(1, 2, 0)
    if backend == "pil":
        assert isinstance(img, Image.Image) and img.mode == "RGB"
        np.testing.assert_array_equal(np.asarray(img), want)
    else:
        assert img.dtype == np.float32 and img.shape == (32, 32, 3)
        np.testing.assert_array_equal(img, want)
    assert label.dtype == np.int64 and label.shape == () and int(label) == train_y[7]
    test = D.Cifar10(data_file=str(path), mode="TEST", backend=backend,
                     transform=ddg.vision.transforms.ToTensor())
    assert len(test) == 4
    x, y = test[3]
    np.testing.assert_allclose(x.numpy(), test_x[3].reshape(3, 32, 32) / 255.0, rtol=1e-6)
    assert int(y) == test_y[3]


def test_cifar100(tmp_path):
    path = tmp_path / "cifar-100-python.tar.gz"
    (train_x, train_y), (test_x, test_y) = A.cifar_archive(str(path), classes=100)
    ds = D.Cifar100(data_file=str(path), mode="train")
    assert len(ds) == 11
    assert [int(ds[i][1]) for i in range(11)] == train_y  # the fine labels
    np.testing.assert_array_equal(np.asarray(D.Cifar100(data_file=str(path), mode="test")[0][0]),
                                  test_x[0].reshape(3, 32, 32).transpose(1, 2, 0))


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch /tmp/ddg-cifar-pwned",))


def test_cifar_refuses_code_in_pickles(tmp_path):
    evil = pickle.dumps({b"data": np.zeros((1, 3072), np.uint8), b"labels": [_Boom()]}, protocol=2)
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(str(path), "w:gz") as tar:
        info = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
        info.size = len(evil)
        tar.addfile(info, io.BytesIO(evil))
    with pytest.raises(ValueError, match=r"data_batch_1.*(posix|os)\.system.*refuses"):
        D.Cifar10(data_file=str(path))
    assert not os.path.exists("/tmp/ddg-cifar-pwned")


def test_cifar_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        D.Cifar10(data_file="x", mode="valid")
    with pytest.raises(ValueError, match="backend"):
        D.Cifar10(data_file="x", backend="tensor")
    with pytest.raises(FileNotFoundError, match="nothere"):
        D.Cifar10(data_file=str(tmp_path / "nothere.tar.gz"))
    path = tmp_path / "c.tar.gz"
    A.cifar_archive(str(path), extra={"data_batch_9": A.py2_pickle({b"data": np.zeros((2, 5), np.uint8),
                                                                   b"labels": [1, 2]})})
    with pytest.raises(ValueError, match="3072"):
        D.Cifar10(data_file=str(path))


def test_cached_archive_md5_and_download(tmp_path, monkeypatch):
    monkeypatch.setenv("DDG_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(FileNotFoundError, match="download=True"):
        D.Cifar10(download=False)
    cache = tmp_path / "data" / "cifar"
    cache.mkdir(parents=True)
    (cache / "cifar-10-python.tar.gz").write_bytes(b"not the official archive")
    with pytest.raises(ValueError, match="cifar-10-python.tar.gz.*c58f30108f718f92721af3b95e74349a"):
        D.Cifar10(download=False)
    os.unlink(str(cache / "cifar-10-python.tar.gz"))
    # download=True fetches the archive from its URL (here a file:// "mirror") and checks its MD5
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    A.cifar_archive(str(mirror / "cifar-10-python.tar.gz"))
    md5 = hashlib.md5((mirror / "cifar-10-python.tar.gz").read_bytes()).hexdigest()
    monkeypatch.setattr(cifar_mod, "CIFAR10_URL", (mirror / "cifar-10-python.tar.gz").resolve().as_uri())
    with pytest.raises(ValueError, match="checksum mismatch"):
        D.Cifar10(download=True)
    assert not (cache / "cifar-10-python.tar.gz").exists()
    monkeypatch.setattr(cifar_mod, "CIFAR10_MD5", md5)
    assert len(D.Cifar10(download=True)) == 11
    assert (cache / "cifar-10-python.tar.gz").exists()
    assert len(D.Cifar10(download=False, mode="test")) == 4  # now found in the cache, MD5 checked


def test_fashion_mnist(tmp_path, monkeypatch):
    folder = tmp_path / "fashion-mnist"
    folder.mkdir()
    made = A.idx_files(folder)
    monkeypatch.setenv("DDG_DATA_DIR", str(tmp_path))
    ds = D.FashionMNIST(mode="test", backend="pil")
    img, label = ds[2]
    assert isinstance(img, Image.Image) and img.size == (28, 28)
    np.testing.assert_array_equal(np.asarray(img), made["t10k"][0][2])
    assert label.tolist() == [made["t10k"][1][2]]
    with pytest.raises(FileNotFoundError, match="FashionMNIST"):
        D.FashionMNIST(mode="train", data_dir=str(tmp_path / "empty"))
    assert D.FashionMNIST.MD5["train-images-idx3-ubyte.gz"] == "8d4fb7e6c68d591d4c3dfef9ec88bf0d"


def _png(path, value, mode="RGB"):
    path.parent.mkdir(parents=True, exist_ok=True)
    shape = (4, 5, 3) if mode == "RGB" else (4, 5)
    Image.fromarray(np.full(shape, value, np.uint8), mode).save(str(path))


def test_dataset_folder_and_image_folder(tmp_path):
    _png(tmp_path / "cat" / "a.png", 10)
    _png(tmp_path / "cat" / "sub" / "b.PNG", 20, "L")
    _png(tmp_path / "dog" / "c.png", 30)
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    ds = D.DatasetFolder(str(tmp_path))
    assert ds.classes == ["cat", "dog"] and ds.class_to_idx == {"cat": 0, "dog": 1}
    assert ds.targets == [0, 0, 1] and len(ds) == 3
    img, target = ds[1]
    assert isinstance(img, Image.Image) and img.mode == "RGB" and np.asarray(img)[0, 0].tolist() == [20] * 3
    ds = D.DatasetFolder(str(tmp_path), loader=lambda p: np.asarray(Image.open(p)), extensions=(".txt", ".png"),
                         transform=lambda x: x.shape)
    assert [os.path.relpath(p, str(tmp_path)) for p, _ in ds.samples] == [
        os.path.join("cat", "a.png"), os.path.join("cat", "sub", "b.PNG"), os.path.join("dog", "c.png"),
        os.path.join("dog", "notes.txt")]
    assert ds[1] == ((4, 5), 0) and ds[2] == ((4, 5, 3), 1)
    only_a = D.DatasetFolder(str(tmp_path), is_valid_file=lambda p: p.endswith("a.png"))
    assert len(only_a) == 1
    imgs = D.ImageFolder(str(tmp_path))
    assert len(imgs) == 3 and isinstance(imgs[0], list) and len(imgs[0]) == 1
    with pytest.raises(RuntimeError, match="no valid files"):
        D.DatasetFolder(str(tmp_path), extensions=(".jpg",))
    with pytest.raises(ValueError, match="not both"):
        D.ImageFolder(str(tmp_path), extensions=(".png",), is_valid_file=lambda p: True)


def test_matlab_reader(tmp_path):
    a = np.array([[1, 2, 3], [4, 5, 6]], np.float64)
    for kw in [{}, {"compress": True}, {"big_endian": True}, {"stored": "u1"}, {"stored": "u2", "compress": True}]:
        p = tmp_path / "m.mat"
        p.write_bytes(A.mat_v5({"a": a, "b": np.array([[7.5]]) if "stored" not in kw else np.array([[7]])}, **kw))
        got = _matlab.loadmat(str(p))
        np.testing.assert_array_equal(got["a"], a)
        assert got["a"].dtype == np.float64 and got["b"].shape == (1, 1)
    (tmp_path / "bad.mat").write_bytes(b"\0" * 200)
    with pytest.raises(ValueError, match="not a MATLAB v5"):
        _matlab.loadmat(str(tmp_path / "bad.mat"))


def test_matlab_reader_reads_scipy_files(tmp_path):
    import scipy.io as sio
    p = str(tmp_path / "s.mat")
    arrs = {"labels": np.arange(1, 9, dtype=np.float64)[None] * 3, "ids": np.array([[5, 1, 2]], np.uint16),
            "f": np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)}
    for compress in (False, True):
        sio.savemat(p, arrs, do_compression=compress)
        got = _matlab.loadmat(p)
        for k, v in arrs.items():
            np.testing.assert_array_equal(got[k], v)
            assert got[k].dtype == v.dtype
    sio.savemat(p, {"s": "a string"})
    with pytest.raises(ValueError, match="char"):
        _matlab.loadmat(p)


@pytest.mark.parametrize("mode,flag", [("train", "tstid"), ("test", "trnid"), ("valid", "valid")])
def test_flowers(tmp_path, mode, flag):
    labels, splits = A.flowers_files(tmp_path)
    ds = D.Flowers(str(tmp_path / "102flowers.tgz"), str(tmp_path / "imagelabels.mat"),
                   str(tmp_path / "setid.mat"), mode=mode)
    assert len(ds) == len(splits[flag])
    for k, idx in enumerate(splits[flag]):
        img, label = ds[k]
        assert isinstance(img, Image.Image) and img.size == (10, 8)
        assert abs(int(np.asarray(img).mean()) - 20 * idx) <= 2  # JPEG
        assert label.dtype == np.int64 and label.tolist() == [labels[idx - 1]]
    assert (tmp_path / "102flowers" / "jpg" / "image_00001.jpg").exists()
    assert not (tmp_path / "evil.jpg").exists()
    x, _ = D.Flowers(str(tmp_path / "102flowers.tgz"), str(tmp_path / "imagelabels.mat"),
                     str(tmp_path / "setid.mat"), mode=mode, backend="cv2")[0]
    assert x.dtype == np.float32 and x.shape == (8, 10, 3)


@pytest.mark.parametrize("mode,n", [("train", 3), ("test", 1), ("valid", 2)])
def test_voc2012(tmp_path, mode, n):
    path = str(tmp_path / "VOCtrainval_11-May-2012.tar")
    masks = A.voc_archive(path)
    ds = D.VOC2012(data_file=path, mode=mode)
    assert len(ds) == n
    img, mask = ds[n - 1]
    assert isinstance(img, Image.Image) and img.size == (7, 6) and mask.mode == "P"
    ids = list(masks)
    want = {"train": ids, "test": ids[:1], "valid": ids[1:]}[mode][n - 1]
    np.testing.assert_array_equal(np.asarray(mask), masks[want])
    x, m = pickle.loads(pickle.dumps(D.VOC2012(data_file=path, mode=mode, backend="cv2")))[0]
    assert x.dtype == np.float32 and x.shape == (6, 7, 3) and m.shape == (6, 7)


def test_image_backend():
    assert ddg.vision.get_image_backend() == "pil"
    with pytest.raises(ValueError, match="backend"):
        ddg.vision.set_image_backend("opencv")
    ddg.vision.set_image_backend("cv2")
    try:
        with pytest.raises(NotImplementedError, match="OpenCV"):
            ddg.vision.image_load("x.png")
    finally:
        ddg.vision.set_image_backend("pil")
