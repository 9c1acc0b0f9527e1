"""CIFAR-10 and CIFAR-100 from the official "python version" archives
(``cifar-10-python.tar.gz``, ``cifar-100-python.tar.gz``).

Each archive holds pickled batches (Python 2 pickles: a dict with ``b'data'``, a uint8
array of N x 3072 pixels, 32x32 planes of red, green, blue, and ``b'labels'`` or, in
CIFAR-100, ``b'fine_labels'``). They are read with ddg's restricted unpickler, which
builds only dicts, lists, bytes, numbers and numpy arrays of plain dtypes and refuses
every other global, so a hostile archive cannot run code.
"""
import tarfile

import numpy as np

from ...io.dataset import Dataset
from ._common import check_backend, check_mode, load_plain_pickle, locate

__all__ = ["Cifar10", "Cifar100"]

URL_PREFIX = "https://dataset.bj.bcebos.com/cifar/"
CIFAR10_URL = URL_PREFIX + "cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR100_URL = URL_PREFIX + "cifar-100-python.tar.gz"
CIFAR100_MD5 = "eb9058c3a382ffc7106e4002c42a8d85"
# which members of the archive a mode reads: every member whose name contains the flag
MODE_FLAG_MAP = {"train10": "data_batch", "test10": "test_batch", "train100": "train", "test100": "test"}


class Cifar10(Dataset):
    """CIFAR-10: 50,000 training and 10,000 test 32x32 colour images in 10 classes.

    Args:
        data_file: the ``cifar-10-python.tar.gz`` archive; by default the cached one
            (see ``ddg.vision.datasets._common``), downloaded when ``download``.
        mode: ``'train'`` or ``'test'``.
        transform: called on each image (a PIL image with ``backend='pil'``, a uint8
            HWC numpy array with ``'cv2'``).
        download: fetch the archive when ``data_file`` is not given and not cached.
        backend: ``'pil'`` (default, from ``ddg.vision.get_image_backend()``) or
            ``'cv2'`` (numpy; the image comes back as the default float dtype).

    Items are ``(image, label)`` with the label an int64 numpy scalar array.
    """

    NAME = "Cifar10"

    def __init__(self, data_file=None, mode="train", transform=None, download=True, backend=None):
        self.mode = check_mode(mode, ("train", "test"), self.NAME)
        self.backend = check_backend(backend, self.NAME)
        self._init_url_md5_flag()
        self.data_file = locate(data_file, self.data_url, self.data_md5, "cifar", download, self.NAME)
        self.transform = transform
        self._load_data()
        from ...tensor.dtypes import get_default_dtype
        self.dtype = get_default_dtype()

    def _init_url_md5_flag(self):
        self.data_url = CIFAR10_URL
        self.data_md5 = CIFAR10_MD5
        self.flag = MODE_FLAG_MAP[self.mode + "10"]

    def _load_data(self):
        images, labels = [], []
        try:
            tar = tarfile.open(self.data_file, mode="r")
        except (tarfile.TarError, OSError) as e:
            raise ValueError("{}: {!r} is not a readable tar archive ({})".format(self.NAME, self.data_file, e)) \
                from None
        with tar:
            names = sorted(m.name for m in tar if self.flag in m.name and m.isfile())
            if not names:
                raise ValueError("{}: {!r} has no member whose name contains {!r}; expected the official CIFAR "
                                 "python archive".format(self.NAME, self.data_file, self.flag))
            for name in names:
                where = "{} in {}".format(name, self.data_file)
                batch = load_plain_pickle(tar.extractfile(name).read(), where)
                if not isinstance(batch, dict):
                    raise ValueError("{}: {} holds a {}, expected a dict batch".format(
                        self.NAME, where, type(batch).__name__))
                data = batch.get(b"data")
                lab = batch.get(b"labels", batch.get(b"fine_labels"))
                if not isinstance(data, np.ndarray) or lab is None:
                    raise ValueError("{}: {} lacks b'data' or b'labels'/b'fine_labels' (keys: {})".format(
                        self.NAME, where, sorted(batch)))
                data = data.reshape(len(data), -1) if data.ndim != 2 else data
                if data.shape[1] != 3072 or data.dtype != np.uint8 or len(lab) != len(data):
                    raise ValueError("{}: {} holds data of shape {} and dtype {} with {} labels; expected N x 3072 "
                                     "uint8 and N labels".format(self.NAME, where, list(data.shape), data.dtype,
                                                                 len(lab)))
                images.append(data)
                labels.append(np.asarray(lab, dtype=np.int64))
        self.images = np.concatenate(images) if images else np.zeros((0, 3072), np.uint8)
        self.labels = np.concatenate(labels) if labels else np.zeros((0,), np.int64)

    @property
    def data(self):
        """(pixels, label) pairs, as Paddle's ``data`` list holds them."""
        return list(zip(self.images, self.labels.tolist()))

    def __getitem__(self, idx):
        image = self.images[idx].reshape(3, 32, 32).transpose(1, 2, 0)
        label = np.array(self.labels[idx]).astype("int64")
        if self.backend == "pil":
            from PIL import Image
            image = Image.fromarray(np.ascontiguousarray(image))
        if self.transform is not None:
            image = self.transform(image)
        if self.backend == "pil":
            return image, label
        return image.astype(self.dtype), label

    def __len__(self):
        return int(self.images.shape[0])


class Cifar100(Cifar10):
    """CIFAR-100: as ``Cifar10`` with the 100 fine labels (``cifar-100-python.tar.gz``)."""

    NAME = "Cifar100"

    def __init__(self, data_file=None, mode="train", transform=None, download=True, backend=None):
        super().__init__(data_file, mode, transform, download, backend)

    def _init_url_md5_flag(self):
        self.data_url = CIFAR100_URL
        self.data_md5 = CIFAR100_MD5
        self.flag = MODE_FLAG_MAP[self.mode + "100"]
