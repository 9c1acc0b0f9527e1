"""``Imdb``: the Large Movie Review Dataset (``aclImdb_v1.tar.gz``): each review lower-cased,
stripped of ASCII punctuation and split on white space into word ids; the dictionary
holds the words seen more than ``cutoff`` times in the train and test reviews, most
frequent first (ties by the word), then ``<unk>``. Labels: 0 positive, 1 negative (Paddle's)."""
import collections
import re
import string

import numpy as np

from ...io.dataset import Dataset
from ...vision.datasets._common import check_mode, locate
from ._tar import open_tar, word

URL = "https://dataset.bj.bcebos.com/imdb%2FaclImdb_v1.tar.gz"
MD5 = "7c2ac02c03563afcf9b574c7e56c153a"
_PUNCT = string.punctuation.encode("latin-1")
WHO = "ddg.text.datasets.Imdb"


class Imdb(Dataset):
    """``Imdb(data_file=None, mode='train', cutoff=150, download=True)``: items are
    ``(word ids, [label])`` int64 arrays; ``word_idx`` maps words to ids."""

    def __init__(self, data_file=None, mode="train", cutoff=150, download=True):
        self.mode = check_mode(mode, ("train", "test"), WHO)
        self.data_file = locate(data_file, URL, MD5, "imdb", download, WHO)
        self.word_idx = self._build_word_dict(cutoff)
        unk = self.word_idx["<unk>"]
        self.docs, self.labels = [], []
        for label, kind in ((0, "pos"), (1, "neg")):
            for doc in self._tokenize(re.compile(rf"aclImdb/{self.mode}/{kind}/.*\.txt$")):
                self.docs.append([self.word_idx.get(w, unk) for w in doc])
                self.labels.append(label)

    def _tokenize(self, pattern):
        docs = []
        with open_tar(self.data_file, WHO) as tf:
            for m in tf:
                if m.isfile() and pattern.match(m.name):
                    text = tf.extractfile(m).read().rstrip(b"\n\r").translate(None, _PUNCT).lower()
                    docs.append([word(w) for w in text.split()])
        return docs

    def _build_word_dict(self, cutoff):
        freq = collections.Counter()
        for doc in self._tokenize(re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$")):
            freq.update(doc)
        kept = sorted(((w, c) for w, c in freq.items() if c > cutoff), key=lambda x: (-x[1], x[0].encode(
            "utf-8", "surrogateescape")))
        word_idx = {w: i for i, (w, _) in enumerate(kept)}
        word_idx["<unk>"] = len(kept)
        return word_idx

    def __getitem__(self, idx):
        return np.array(self.docs[idx], dtype=np.int64), np.array([self.labels[idx]], dtype=np.int64)

    def __len__(self):
        return len(self.docs)
