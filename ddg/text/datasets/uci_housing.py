"""``UCIHousing``: the Boston housing data (``housing.data``: 14 numbers per row), each
feature centred on its mean and divided by its range over the whole file, split 80/20
into train and test, as Paddle does."""
import numpy as np

from ...io.dataset import Dataset
from ...tensor.dtypes import get_default_dtype
from ...vision.datasets._common import check_mode, locate

URL = "http://paddlemodels.bj.bcebos.com/uci_housing/housing.data"
MD5 = "d4accdce7a25600298819f8e28e8d593"
feature_names = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT"]


class UCIHousing(Dataset):
    """``UCIHousing(data_file=None, mode='train', download=True)``: items are
    ``(features[13], price[1])`` in the default float dtype."""

    def __init__(self, data_file=None, mode="train", download=True):
        self.mode = check_mode(mode, ("train", "test"), "ddg.text.datasets.UCIHousing")
        self.data_file = locate(data_file, URL, MD5, "uci_housing", download, "ddg.text.datasets.UCIHousing")
        self.dtype = get_default_dtype()
        data = np.fromfile(self.data_file, sep=" ")
        n = len(feature_names) + 1
        if data.size == 0 or data.size % n:
            raise ValueError(f"ddg.text.datasets.UCIHousing: {self.data_file!r} does not hold rows of {n} numbers "
                             f"({data.size} numbers)")
        data = data.reshape(-1, n)
        span = data.max(axis=0) - data.min(axis=0)
        avg = data.sum(axis=0) / data.shape[0]
        data[:, :-1] = (data[:, :-1] - avg[:-1]) / span[:-1]
        offset = int(data.shape[0] * 0.8)
        self.data = data[:offset] if self.mode == "train" else data[offset:]

    def __getitem__(self, idx):
        row = self.data[idx]
        return np.array(row[:-1]).astype(self.dtype), np.array(row[-1:]).astype(self.dtype)

    def __len__(self):
        return len(self.data)
