"""Pascal VOC 2012 semantic segmentation from the official
``VOCtrainval_11-May-2012.tar``: images ``JPEGImages/<id>.jpg``, class masks
``SegmentationClass/<id>.png``, splits ``ImageSets/Segmentation/<split>.txt``. As in
Paddle, mode ``'train'`` reads the ``trainval`` list, ``'test'`` the ``train`` list and
``'valid'`` the ``val`` list. The members are read from the (uncompressed) tar in
place; each process opens the archive itself, so DataLoader workers do not share a
file position."""
import io
import os
import tarfile

import numpy as np

from ...io.dataset import Dataset
from ._common import check_backend, check_mode, locate

__all__ = ["VOC2012"]

VOC_URL = "https://dataset.bj.bcebos.com/voc/VOCtrainval_11-May-2012.tar"
VOC_MD5 = "6cd6e144f989b92b3379bac3b3de84fd"
SET_FILE = "VOCdevkit/VOC2012/ImageSets/Segmentation/{}.txt"
DATA_FILE = "VOCdevkit/VOC2012/JPEGImages/{}.jpg"
LABEL_FILE = "VOCdevkit/VOC2012/SegmentationClass/{}.png"
MODE_FLAG_MAP = {"train": "trainval", "test": "train", "valid": "val"}


class VOC2012(Dataset):
    """Pascal VOC 2012 segmentation (see the module docstring).

    Args:
        data_file: the official tar; by default the cached one, downloaded when ``download``.
        mode: ``'train'``, ``'valid'`` or ``'test'``.
        transform: called on each image (not on the mask).
        download: fetch the archive when missing.
        backend: ``'pil'`` (PIL image and palette mask; default) or ``'cv2'`` (numpy
            arrays, both as the default float dtype).

    Items are ``(image, mask)``.
    """

    def __init__(self, data_file=None, mode="train", transform=None, download=True, backend=None):
        self.flag = MODE_FLAG_MAP[check_mode(mode, ("train", "valid", "test"), "VOC2012")]
        self.backend = check_backend(backend, "VOC2012")
        self.data_file = locate(data_file, VOC_URL, VOC_MD5, "voc2012", download, "VOC2012")
        self.transform = transform
        self._tar, self._pid = None, None
        self._load_anno()
        from ...tensor.dtypes import get_default_dtype
        self.dtype = get_default_dtype()

    def _archive(self):
        if self._tar is None or self._pid != os.getpid():
            try:
                self._tar = tarfile.open(self.data_file)
            except (tarfile.TarError, OSError) as e:
                raise ValueError("VOC2012: {!r} is not a readable tar archive ({})".format(self.data_file, e)) \
                    from None
            self._pid = os.getpid()
        return self._tar

    def _load_anno(self):
        tar = self._archive()
        self.name2mem = {m.name: m for m in tar.getmembers()}
        set_file = SET_FILE.format(self.flag)
        if set_file not in self.name2mem:
            raise ValueError("VOC2012: {!r} has no {} (is it the VOC 2012 trainval tar?)".format(
                self.data_file, set_file))
        self.data, self.labels = [], []
        for line in tar.extractfile(self.name2mem[set_file]):
            name = line.strip().decode("utf-8")
            if not name:
                continue
            self.data.append(DATA_FILE.format(name))
            self.labels.append(LABEL_FILE.format(name))
        for f in self.data + self.labels:
            if f not in self.name2mem:
                raise ValueError("VOC2012: {!r} lists {!r}, which the archive lacks".format(set_file, f))

    def _read(self, name):
        return self._archive().extractfile(self.name2mem[name]).read()

    def __getitem__(self, idx):
        from PIL import Image
        data = Image.open(io.BytesIO(self._read(self.data[idx])))
        label = Image.open(io.BytesIO(self._read(self.labels[idx])))
        if self.backend == "cv2":
            data = np.array(data)
            label = np.array(label)
        if self.transform is not None:
            data = self.transform(data)
        if self.backend == "cv2":
            return data.astype(self.dtype), label.astype(self.dtype)
        return data, label

    def __len__(self):
        return len(self.data)

    def __getstate__(self):  # an open archive does not travel to other processes
        state = dict(self.__dict__)
        state["_tar"], state["_pid"] = None, None
        return state

    def __del__(self):
        tar = getattr(self, "_tar", None)
        if tar is not None and self._pid == os.getpid():
            tar.close()
