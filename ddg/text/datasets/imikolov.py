"""``Imikolov``: the Penn Treebank language-model data of ``simple-examples.tgz``. The
dictionary counts the words of ``ptb.train.txt`` and ``ptb.valid.txt`` (each line also
counts one ``<s>`` and one ``<e>``), keeps those seen more than ``min_word_freq`` times,
most frequent first (ties by the word), then ``<unk>`` for the words left out. As in
Paddle, the corpus's own ``<unk>`` token is a word like the others (its id is
``corpus_unk_id``; ``word_idx['<unk>']`` is the id of words left out). ``NGRAM`` items are the
``window_size``-grams of ``<s> line <e>``; ``SEQ`` items are ``(<s> + line, line + <e>)``
(lines longer than ``window_size`` skipped when it is positive). ``mode='test'`` reads
``ptb.test.txt``."""
import collections

import numpy as np

from ...io.dataset import Dataset
from ...vision.datasets._common import check_mode, locate
from ._tar import member_lines, open_tar, word

URL = "https://dataset.bj.bcebos.com/imikolov%2Fsimple-examples.tgz"
MD5 = "30177ea32e27c525793142b6bf2c8e2d"
WHO = "ddg.text.datasets.Imikolov"


class Imikolov(Dataset):
    def __init__(self, data_file=None, data_type="NGRAM", window_size=-1, mode="train", min_word_freq=50,
                 download=True):
        self.data_type = str(data_type).upper()
        if self.data_type not in ("NGRAM", "SEQ"):
            raise ValueError(f"{WHO}: data_type must be 'NGRAM' or 'SEQ', got {data_type!r}")
        self.mode = check_mode(mode, ("train", "test"), WHO)
        if self.data_type == "NGRAM" and window_size < 1:
            raise ValueError(f"{WHO}: data_type 'NGRAM' needs window_size >= 1, got {window_size}")
        self.window_size, self.min_word_freq = window_size, min_word_freq
        self.data_file = locate(data_file, URL, MD5, "imikolov", download, WHO)
        with open_tar(self.data_file, WHO) as tf:
            lines = {m: member_lines(tf, f"./simple-examples/data/ptb.{m}.txt", WHO) for m in ("train", "valid")}
            if self.mode == "test":
                lines["test"] = member_lines(tf, "./simple-examples/data/ptb.test.txt", WHO)
        self.word_idx = self._build_word_dict(lines["train"] + lines["valid"])
        self.data = self._load(lines[self.mode])

    def _build_word_dict(self, lines):
        freq = collections.Counter()
        for line in lines:
            freq.update(word(w) for w in line.strip().split())
            freq["<s>"] += 1
            freq["<e>"] += 1
        kept = sorted(((w, c) for w, c in freq.items() if c > self.min_word_freq),
                      key=lambda x: (-x[1], x[0].encode("utf-8", "surrogateescape")))
        word_idx = {w: i for i, (w, _) in enumerate(kept)}
        self.corpus_unk_id = word_idx.get("<unk>")
        word_idx["<unk>"] = len(kept)
        return word_idx

    def _id(self, w, unk):
        if w == "<unk>" and self.corpus_unk_id is not None:
            return self.corpus_unk_id
        return self.word_idx.get(w, unk)

    def _load(self, lines):
        unk, data, n = self.word_idx["<unk>"], [], self.window_size
        for line in lines:
            words = [word(w) for w in line.strip().split()]
            if self.data_type == "NGRAM":
                ids = [self.word_idx.get("<s>", unk)] + [self._id(w, unk) for w in words] + \
                    [self.word_idx.get("<e>", unk)]
                data.extend(tuple(ids[i - n:i]) for i in range(n, len(ids) + 1))
            else:
                ids = [self._id(w, unk) for w in words]
                src = [self.word_idx.get("<s>", unk)] + ids
                trg = ids + [self.word_idx.get("<e>", unk)]
                if n > 0 and len(src) > n:
                    continue
                data.append((src, trg))
        return data

    def __getitem__(self, idx):
        return tuple(np.array(d, dtype=np.int64) for d in self.data[idx])

    def __len__(self):
        return len(self.data)
