"""``WMT16``: the English-German multimodal translation data Paddle ships
(``wmt16.tar.gz``: ``wmt16/train``, ``wmt16/test``, ``wmt16/val``, tab-separated English
and German sentences). Each language's dictionary is built from the training sentences
of that language: ``<s>``, ``<e>``, ``<unk>``, then the most frequent words (ties in
order of first appearance) up to ``dict_size`` entries. Items: source ids of
``<s> words <e>``, target ids of ``<s> words`` and of ``words <e>``.

Paddle builds both dictionaries from the source language's column (so most target words
become ``<unk>``) and caches them in files; ddg builds each from its own language and
keeps them in memory, so target ids differ from Paddle's where Paddle's are ``<unk>``."""
import collections

import numpy as np

from ...io.dataset import Dataset
from ...vision.datasets._common import check_mode, locate
from ._tar import member_lines, open_tar

DATA_URL = "http://paddlemodels.bj.bcebos.com/wmt/wmt16.tar.gz"
DATA_MD5 = "0c38be43600334966403524a40dcd81e"
TOTAL_EN_WORDS = 11250
TOTAL_DE_WORDS = 19220
START_MARK, END_MARK, UNK_MARK = "<s>", "<e>", "<unk>"
WHO = "ddg.text.datasets.WMT16"


class WMT16(Dataset):
    def __init__(self, data_file=None, mode="train", src_dict_size=-1, trg_dict_size=-1, lang="en", download=True):
        self.mode = check_mode(mode, ("train", "test", "val"), WHO)
        if lang not in ("en", "de"):
            raise ValueError(f"{WHO}: lang must be 'en' or 'de', got {lang!r}")
        for name, v in (("src_dict_size", src_dict_size), ("trg_dict_size", trg_dict_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{WHO}: {name} must be a positive int, got {v!r}")
        self.lang = lang
        self.data_file = locate(data_file, DATA_URL, DATA_MD5, "wmt16", download, WHO)
        trg_lang = "de" if lang == "en" else "en"
        self.src_dict_size = min(src_dict_size, TOTAL_EN_WORDS if lang == "en" else TOTAL_DE_WORDS)
        self.trg_dict_size = min(trg_dict_size, TOTAL_DE_WORDS if lang == "en" else TOTAL_EN_WORDS)
        with open_tar(self.data_file, WHO) as tf:
            train = [line.decode("utf-8").strip().split("\t") for line in member_lines(tf, "wmt16/train", WHO)]
            lines = train if self.mode == "train" else \
                [line.decode("utf-8").strip().split("\t") for line in member_lines(tf, f"wmt16/{self.mode}", WHO)]
        train = [p for p in train if len(p) == 2]
        self._dicts = {lang: self._build(train, lang, self.src_dict_size),
                       trg_lang: self._build(train, trg_lang, self.trg_dict_size)}
        self.src_dict, self.trg_dict = self._dicts[lang], self._dicts[trg_lang]
        src_col = 0 if lang == "en" else 1
        start, end, unk = (self.src_dict[m] for m in (START_MARK, END_MARK, UNK_MARK))
        self.src_ids, self.trg_ids, self.trg_ids_next = [], [], []
        for parts in lines:
            if len(parts) != 2:
                continue
            src = [start] + [self.src_dict.get(w, unk) for w in parts[src_col].split()] + [end]
            trg = [self.trg_dict.get(w, unk) for w in parts[1 - src_col].split()]
            self.src_ids.append(src)
            self.trg_ids.append([start] + trg)
            self.trg_ids_next.append(trg + [end])

    @staticmethod
    def _build(pairs, lang, size):
        col = 0 if lang == "en" else 1
        freq = collections.Counter()
        for p in pairs:
            freq.update(p[col].split())
        words = [START_MARK, END_MARK, UNK_MARK]
        for w, _ in sorted(freq.items(), key=lambda x: x[1], reverse=True):  # stable: ties by first appearance
            if len(words) >= size:
                break
            words.append(w)
        return {w: i for i, w in enumerate(words)}

    def __getitem__(self, idx):
        return (np.array(self.src_ids[idx], dtype=np.int64), np.array(self.trg_ids[idx], dtype=np.int64),
                np.array(self.trg_ids_next[idx], dtype=np.int64))

    def __len__(self):
        return len(self.src_ids)

    def get_dict(self, lang, reverse=False):
        """The dictionary of ``lang`` ('en' or 'de'); ``reverse``: id -> word."""
        if lang not in self._dicts:
            raise ValueError(f"{WHO}.get_dict: lang must be 'en' or 'de', got {lang!r}")
        d = self._dicts[lang]
        return {v: k for k, v in d.items()} if reverse else dict(d)
