"""MNIST from the standard IDX files (``paddle.vision.datasets.MNIST``).

Where the files come from, first match wins: ``image_path``/``label_path``; the folder
``data_dir``; the folder in ``$DDG_DATA_DIR``; ``~/.cache/ddg/mnist``. The folder holds
``train-images-idx3-ubyte.gz``, ``train-labels-idx1-ubyte.gz``,
``t10k-images-idx3-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz`` (gzip'ed or not).
``download=True`` fetches missing files over HTTPS into that folder and checks their
MD5 sums against the official ones.

Items are ``(image, label)``. Without a ``transform`` the image is a float32 numpy
array of shape ``[1, 28, 28]`` with pixel values scaled to ``[-1, 1]``
(``pixel / 127.5 - 1``), the normalization of Paddle's original MNIST reader and the
layout that the LeNet of the MNIST tutorial consumes directly. With a ``transform``
the raw image (a uint8 ``[28, 28]`` numpy array, or a PIL image with ``backend='pil'``)
goes through it, e.g. ``Normalize(mean=[127.5], std=[127.5], data_format='CHW')`` gives
the same values as the default. The label is an int64 array of shape ``[1]``.
"""
import gzip
import hashlib
import os
import shutil
import struct
import tempfile
import urllib.request
import zlib

import numpy as np

from ...io.dataset import Dataset

__all__ = ["MNIST", "FashionMNIST", "check_md5", "read_idx", "default_data_dir"]

#: Where download=True looks, in order; each is joined with the file name.
MIRRORS = [
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "https://dataset.bj.bcebos.com/mnist/",
]

#: The official files and their MD5 sums.
FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}

_IDX_IMAGES = 2051  # 0x00000803: unsigned bytes, 3 dimensions
_IDX_LABELS = 2049  # 0x00000801: unsigned bytes, 1 dimension


def default_data_dir():
    """``$DDG_DATA_DIR`` if set, else ``~/.cache/ddg/mnist``."""
    env = os.environ.get("DDG_DATA_DIR")
    if env:
        return env
    return os.path.join(os.path.expanduser("~"), ".cache", "ddg", "mnist")


def _md5_of(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_md5(path, md5):
    """Raise ValueError naming ``path`` unless its MD5 sum is ``md5``."""
    got = _md5_of(path)
    if got != md5.lower():
        raise ValueError("MNIST: checksum mismatch for {!r}: MD5 {} but the official file has {}; "
                         "the file is corrupt or not the official one (delete it and download again)"
                         .format(path, got, md5))


def _download(name, dest, md5, mirrors=None, label="MNIST"):
    """Fetch ``name`` from the first mirror that has it into ``dest`` atomically,
    checking ``md5``; on failure nothing is left at ``dest``. ``label`` starts the
    error messages (the dataset's name)."""
    mirrors = MIRRORS if mirrors is None else mirrors
    folder = os.path.dirname(os.path.abspath(dest))
    os.makedirs(folder, exist_ok=True)
    errors = []
    for base in mirrors:
        url = base + name
        fd, tmp = tempfile.mkstemp(prefix="." + name + ".", suffix=".part", dir=folder)
        try:
            with os.fdopen(fd, "wb") as out:
                with urllib.request.urlopen(url, timeout=60) as resp:
                    shutil.copyfileobj(resp, out, 1 << 20)
                out.flush()
                os.fsync(out.fileno())
            got = _md5_of(tmp)
            if got != md5:
                errors.append("{}: checksum mismatch (MD5 {}, expected {})".format(url, got, md5))
                continue
            os.replace(tmp, dest)
            return dest
        except OSError as e:  # URLError, HTTPError and timeouts are OSErrors
            errors.append("{}: {}".format(url, e))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    if any("checksum mismatch" in e for e in errors):
        raise ValueError("{}: checksum mismatch downloading {!r}:\n  {}".format(label, name, "\n  ".join(errors)))
    raise OSError("{}: could not download {!r} to {!r}:\n  {}".format(label, name, dest, "\n  ".join(errors)))


def _read_bytes(path):
    """The file's bytes, un-gzipped when it is gzip'ed."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError("MNIST: {!r} is not a readable gzip file ({}); expected a gzip'ed IDX file"
                             .format(path, e)) from None
    return raw


def read_idx(path, magic):
    """A uint8 numpy array from an IDX file, checking its magic number and size."""
    data = _read_bytes(path)
    ndim = {_IDX_IMAGES: 3, _IDX_LABELS: 1}[magic]
    head = 4 + 4 * ndim
    found = struct.unpack(">i", data[:4])[0] if len(data) >= 4 else None
    if found != magic:
        raise ValueError("MNIST: {!r} has IDX magic number {}, expected {} ({} file)"
                         .format(path, found, magic, "an image" if magic == _IDX_IMAGES else "a label"))
    if len(data) < head:
        raise ValueError("MNIST: {!r} is too short for an IDX header ({} bytes, expected at least {})"
                         .format(path, len(data), head))
    dims = struct.unpack(">" + "i" * ndim, data[4:head])
    count = 1
    for d in dims:
        count *= d
    if len(data) - head != count:
        raise ValueError("MNIST: {!r}: the IDX header gives dimensions {} ({} bytes of data), but the "
                         "file holds {}".format(path, "x".join(map(str, dims)), count, len(data) - head))
    return np.frombuffer(data, dtype=np.uint8, offset=head).reshape(dims)


class MNIST(Dataset):
    """The MNIST handwritten digits (see the module docstring for files and values).

    Args:
        image_path, label_path: the IDX files; by default the mode's standard files in
            the data folder.
        mode: ``'train'`` (60,000 official images) or ``'test'`` (10,000).
        transform: called on each raw image.
        download: fetch missing files (official MD5 sums are checked).
        backend: ``'cv2'`` (numpy images, the default) or ``'pil'``.
        data_dir: the folder of the four files (ddg extension).
    """

    NAME = "mnist"
    LABEL = "MNIST"
    MD5 = MD5
    MIRRORS = None  # the module's MIRRORS

    def _data_dir(self):
        return default_data_dir()

    def __init__(self, image_path=None, label_path=None, mode="train", transform=None, download=False,
                 backend=None, data_dir=None):
        mode = str(mode).lower()
        if mode not in FILES:
            raise ValueError("{}: mode must be 'train' or 'test', got {!r}".format(self.LABEL, mode))
        backend = "cv2" if backend is None else str(backend).lower()
        if backend not in ("cv2", "pil"):
            raise ValueError("{}: backend must be 'cv2' or 'pil', got {!r}".format(self.LABEL, backend))
        self.mode = mode
        self.transform = transform
        self.backend = backend
        self.dtype = "float32"
        folder = data_dir if data_dir is not None else self._data_dir()
        names = FILES[mode]
        self.image_path = self._locate(image_path, folder, names[0], download)
        self.label_path = self._locate(label_path, folder, names[1], download)
        images = read_idx(self.image_path, _IDX_IMAGES)
        labels = read_idx(self.label_path, _IDX_LABELS)
        if images.shape[0] != labels.shape[0]:
            raise ValueError("{}: {!r} holds {} images but {!r} holds {} labels"
                             .format(self.LABEL, self.image_path, images.shape[0], self.label_path, labels.shape[0]))
        if labels.size and labels.max() > 9:
            raise ValueError("{}: {!r} holds label {}, expected classes 0-9"
                             .format(self.LABEL, self.label_path, int(labels.max())))
        self.images = images  # uint8 [N, rows, cols]
        self.labels = labels.astype(np.int64).reshape(-1, 1)  # int64 [N, 1]

    def _locate(self, path, folder, name, download):
        if path is None:
            path = os.path.join(folder, name)
        path = os.fspath(path)
        if os.path.isfile(path):
            return path
        if download:
            return _download(name, path, self.MD5[name], mirrors=self.MIRRORS, label=self.LABEL)
        raise FileNotFoundError(
            "{0}: {1!r} not found. Put the {0} IDX files ({2}) in that folder, point DDG_DATA_DIR or "
            "data_dir= at the folder that has them, or pass download=True to fetch them"
            .format(self.LABEL, path, name))

    def __getitem__(self, idx):
        image = self.images[idx]
        label = self.labels[idx]
        if self.backend == "pil":
            from PIL import Image
            image = Image.fromarray(image, mode="L")
        if self.transform is not None:
            image = self.transform(image)
            if isinstance(image, np.ndarray):
                image = image.astype(self.dtype, copy=False)
            return image, label.copy()
        if self.backend == "pil":
            return image, label.copy()
        out = image.astype(np.float32)[None]
        out *= 1.0 / 127.5
        out -= 1.0
        return out, label.copy()

    def __len__(self):
        return int(self.images.shape[0])


class FashionMNIST(MNIST):
    """Fashion-MNIST (Zalando's 28x28 clothing images, 10 classes), in MNIST's IDX
    format and file names: as ``MNIST`` (same arguments and items), with its own
    files and MD5 sums. Its folder is ``data_dir``, else ``$DDG_DATA_DIR/fashion-mnist``,
    else ``~/.cache/ddg/fashion-mnist`` (never MNIST's, whose file names are the same)."""

    NAME = "fashion-mnist"
    LABEL = "FashionMNIST"
    MD5 = {
        "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
        "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
        "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
        "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
    }
    MIRRORS = ["https://dataset.bj.bcebos.com/fashion_mnist/"]

    def _data_dir(self):
        env = os.environ.get("DDG_DATA_DIR")
        if env:
            return os.path.join(env, "fashion-mnist")
        return os.path.join(os.path.expanduser("~"), ".cache", "ddg", "fashion-mnist")
