"""``WMT14``: the English-French subset Paddle ships (``wmt14.tgz``): ``src.dict`` and
``trg.dict`` (one word a line, the first ``dict_size`` lines kept, ids by line), and the
``<mode>/<mode>`` files of tab-separated sentence pairs. Items: source ids of
``<s> words <e>``, target ids of ``<s> words`` and of ``words <e>``; unknown words get
id 2; pairs with more than 80 ids on either side are skipped, as in Paddle."""
import numpy as np

from ...io.dataset import Dataset
from ...vision.datasets._common import check_mode, locate
from ._tar import open_tar

URL_TRAIN = "http://paddlemodels.bj.bcebos.com/wmt/wmt14.tgz"
MD5_TRAIN = "0791583d57d5beb693b9414c5b36798c"
START, END, UNK = "<s>", "<e>", "<unk>"
UNK_IDX = 2
WHO = "ddg.text.datasets.WMT14"


class WMT14(Dataset):
    def __init__(self, data_file=None, mode="train", dict_size=-1, download=True):
        self.mode = check_mode(mode, ("train", "test", "gen"), WHO)
        if isinstance(dict_size, bool) or not isinstance(dict_size, int) or dict_size <= 0:
            raise ValueError(f"{WHO}: dict_size must be a positive int, got {dict_size!r}")
        self.dict_size = dict_size
        self.data_file = locate(data_file, URL_TRAIN, MD5_TRAIN, "wmt14", download, WHO)
        self.src_ids, self.trg_ids, self.trg_ids_next = [], [], []
        with open_tar(self.data_file, WHO) as tf:
            members = [m for m in tf.getmembers() if m.isfile()]
            self.src_dict = self._dict(tf, members, "src.dict")
            self.trg_dict = self._dict(tf, members, "trg.dict")
            for m in (m for m in members if m.name.endswith(f"{self.mode}/{self.mode}")):
                for line in tf.extractfile(m):
                    parts = line.decode("utf-8").strip().split("\t")
                    if len(parts) != 2:
                        continue
                    src = [self.src_dict.get(w, UNK_IDX) for w in [START] + parts[0].split() + [END]]
                    trg = [self.trg_dict.get(w, UNK_IDX) for w in parts[1].split()]
                    if len(src) > 80 or len(trg) > 80:
                        continue
                    self.src_ids.append(src)
                    self.trg_ids.append([self.trg_dict[START]] + trg)
                    self.trg_ids_next.append(trg + [self.trg_dict[END]])

    def _dict(self, tf, members, suffix):
        found = [m for m in members if m.name.endswith(suffix)]
        if len(found) != 1:
            raise ValueError(f"{WHO}: the archive must hold one file ending in {suffix!r}, found {len(found)}")
        out = {}
        for i, line in enumerate(tf.extractfile(found[0])):
            if i >= self.dict_size:
                break
            out[line.strip().decode("utf-8")] = i
        for w in (START, END):
            if w not in out:
                raise ValueError(f"{WHO}: {found[0].name} has no {w!r} among its first {self.dict_size} words")
        return out

    def __getitem__(self, idx):
        return (np.array(self.src_ids[idx], dtype=np.int64), np.array(self.trg_ids[idx], dtype=np.int64),
                np.array(self.trg_ids_next[idx], dtype=np.int64))

    def __len__(self):
        return len(self.src_ids)

    def get_dict(self, reverse=False):
        """The source and target dictionaries (``reverse``: id -> word)."""
        if reverse:
            return ({v: k for k, v in self.src_dict.items()}, {v: k for k, v in self.trg_dict.items()})
        return self.src_dict, self.trg_dict
