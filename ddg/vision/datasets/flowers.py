"""Oxford 102 Flowers from its official files: ``102flowers.tgz`` (``jpg/image_NNNNN.jpg``),
``imagelabels.mat`` (``labels``: the class, 1-102, of every image) and ``setid.mat``
(``trnid``, ``valid``, ``tstid``: 1-based image numbers). The ``.mat`` files are read
by ddg's own MATLAB v5 reader (``_matlab.py``; no scipy). As in Paddle, mode
``'train'`` reads ``tstid`` (the large split, 6,149 images) and ``'test'`` reads
``trnid`` (1,020), and the images are extracted once into a folder beside the archive
(``102flowers/`` for ``102flowers.tgz``)."""
import os
import re
import tarfile

import numpy as np

from ...io.dataset import Dataset
from ._common import check_backend, check_mode, locate
from ._matlab import loadmat

__all__ = ["Flowers"]

DATA_URL = "http://paddlemodels.bj.bcebos.com/flowers/102flowers.tgz"
LABEL_URL = "http://paddlemodels.bj.bcebos.com/flowers/imagelabels.mat"
SETID_URL = "http://paddlemodels.bj.bcebos.com/flowers/setid.mat"
DATA_MD5 = "52808999861908f626f3c1f4e79d11fa"
LABEL_MD5 = "e0620be6f572b9609742df49c70aed4d"
SETID_MD5 = "a5357ecc9cb78c4bef273ce3793fc85c"
MODE_FLAG_MAP = {"train": "tstid", "test": "trnid", "valid": "valid"}
_MEMBER = re.compile(r"^(?:\./)?jpg/image_\d{5}\.jpg$")


def _extract_images(archive, folder):
    """Extract the ``jpg/image_NNNNN.jpg`` members (only those: no other path can be
    written) of ``archive`` into ``folder``."""
    try:
        tar = tarfile.open(archive)
    except (tarfile.TarError, OSError) as e:
        raise ValueError("Flowers: {!r} is not a readable tar archive ({})".format(archive, e)) from None
    os.makedirs(os.path.join(folder, "jpg"), exist_ok=True)
    with tar:
        for m in tar:
            if m.isfile() and _MEMBER.match(m.name):
                dest = os.path.join(folder, "jpg", os.path.basename(m.name))
                tmp = dest + ".part"
                with tar.extractfile(m) as src, open(tmp, "wb") as out:
                    out.write(src.read())
                os.replace(tmp, dest)


class Flowers(Dataset):
    """Oxford 102 Flowers (see the module docstring for files and splits).

    Args:
        data_file, label_file, setid_file: the three official files; by default the
            cached ones, downloaded when ``download``.
        mode: ``'train'``, ``'valid'`` or ``'test'``.
        transform: called on each image.
        download: fetch missing files.
        backend: ``'pil'`` (PIL images; default) or ``'cv2'`` (numpy HWC arrays,
            returned as the default float dtype).

    Items are ``(image, label)``, the label an int64 array of shape [1] (1-102).
    """

    def __init__(self, data_file=None, label_file=None, setid_file=None, mode="train", transform=None,
                 download=True, backend=None):
        flag = MODE_FLAG_MAP[check_mode(mode, ("train", "valid", "test"), "Flowers")]
        self.backend = check_backend(backend, "Flowers")
        data_file = locate(data_file, DATA_URL, DATA_MD5, "flowers", download, "Flowers", "data_file")
        label_file = locate(label_file, LABEL_URL, LABEL_MD5, "flowers", download, "Flowers", "label_file")
        setid_file = locate(setid_file, SETID_URL, SETID_MD5, "flowers", download, "Flowers", "setid_file")
        self.data_file, self.label_file, self.setid_file = data_file, label_file, setid_file
        self.transform = transform
        base = data_file[:-4] if data_file.endswith(".tgz") else data_file + ".d"
        self.data_path = base + os.sep
        if not os.path.isdir(os.path.join(self.data_path, "jpg")):
            _extract_images(data_file, self.data_path)
        labels = loadmat(label_file)
        sets = loadmat(setid_file)
        if "labels" not in labels:
            raise ValueError("Flowers: {!r} has no 'labels' matrix (found {})".format(label_file, sorted(labels)))
        if flag not in sets:
            raise ValueError("Flowers: {!r} has no {!r} matrix (found {})".format(setid_file, flag, sorted(sets)))
        self.labels = labels["labels"][0]
        self.indexes = sets[flag][0]
        from ...tensor.dtypes import get_default_dtype
        self.dtype = get_default_dtype()

    def __getitem__(self, idx):
        from PIL import Image
        index = int(self.indexes[idx])
        label = np.array([self.labels[index - 1]])
        path = os.path.join(self.data_path, "jpg", "image_{:05d}.jpg".format(index))
        image = Image.open(path)
        if self.backend == "cv2":
            image = np.array(image)
        if self.transform is not None:
            image = self.transform(image)
        if self.backend == "pil":
            return image, label.astype("int64")
        return image.astype(self.dtype), label.astype("int64")

    def __len__(self):
        return len(self.indexes)
