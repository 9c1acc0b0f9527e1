"""``Conll05st``: the public (test.wsj) part of the CoNLL-2005 semantic role labelling data
(``conll05st-tests.tar.gz``) with Paddle's word, verb and label dictionaries and its
embedding file. Each item is one predicate of one sentence: word ids, the ids of the
words two before to two after the predicate (each repeated over the sentence; ``bos``
and ``eos`` past the ends), the predicate id, the 0/1 mark of that five-word window and
the BIO label ids. Labels are numbered ``B-x``, ``I-x`` per tag in the order the tags
first appear in the label file, then ``O`` (Paddle numbers the tags in the iteration
order of a Python set, which changes from run to run)."""
import gzip
import io

import numpy as np

from ...io.dataset import Dataset
from ...vision.datasets._common import locate
from ._tar import open_tar

DATA_URL = "http://paddlemodels.bj.bcebos.com/conll05st/conll05st-tests.tar.gz"
DATA_MD5 = "387719152ae52d60422c016e92a742fc"
WORDDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FwordDict.txt"
WORDDICT_MD5 = "ea7fb7d4c75cc6254716f0177a506baa"
VERBDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FverbDict.txt"
VERBDICT_MD5 = "0d2977293bbb6cbefab5b0f97db1e77c"
TRGDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FtargetDict.txt"
TRGDICT_MD5 = "d8c7f03ceb5fc2e5a0fa7503a4353751"
EMB_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2Femb"
EMB_MD5 = "bf436eb0faa1f6f9103017f8be57cdb7"
UNK_IDX = 0
WHO = "ddg.text.datasets.Conll05st"
_WORDS = "conll05st-release/test.wsj/words/test.wsj.words.gz"
_PROPS = "conll05st-release/test.wsj/props/test.wsj.props.gz"


def _bio(column):
    """One predicate's bracketed argument column as BIO labels."""
    out, tag, inside = [], "O", False
    for lab in column:
        if lab == "*":
            out.append("I-" + tag if inside else "O")
        elif lab == "*)":
            out.append("I-" + tag)
            inside = False
        elif "(" in lab:
            tag = lab[1:lab.find("*")]
            out.append("B-" + tag)
            inside = ")" not in lab
        else:
            raise ValueError(f"{WHO}: unexpected label {lab!r} in the props file")
    return out


class Conll05st(Dataset):
    def __init__(self, data_file=None, word_dict_file=None, verb_dict_file=None, target_dict_file=None,
                 emb_file=None, download=True):
        self.data_file = locate(data_file, DATA_URL, DATA_MD5, "conll05st", download, WHO)
        self.word_dict_file = locate(word_dict_file, WORDDICT_URL, WORDDICT_MD5, "conll05st", download, WHO,
                                     "word_dict_file")
        self.verb_dict_file = locate(verb_dict_file, VERBDICT_URL, VERBDICT_MD5, "conll05st", download, WHO,
                                     "verb_dict_file")
        self.target_dict_file = locate(target_dict_file, TRGDICT_URL, TRGDICT_MD5, "conll05st", download, WHO,
                                       "target_dict_file")
        self.emb_file = locate(emb_file, EMB_URL, EMB_MD5, "conll05st", download, WHO, "emb_file")
        self.word_dict = self._load_dict(self.word_dict_file)
        self.predicate_dict = self._load_dict(self.verb_dict_file)
        self.label_dict = self._load_label_dict(self.target_dict_file)
        self._load_anno()

    @staticmethod
    def _load_dict(path):
        with open(path, encoding="utf-8") as f:
            return {line.strip(): i for i, line in enumerate(f)}

    @staticmethod
    def _load_label_dict(path):
        tags = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line[:2] in ("B-", "I-") and line[2:] not in tags:
                    tags.append(line[2:])
        d = {}
        for tag in tags:
            d["B-" + tag] = len(d)
            d["I-" + tag] = len(d)
        d["O"] = len(d)
        return d

    def _member(self, tf, name):
        try:
            f = tf.extractfile(name)
        except KeyError:
            f = None
        if f is None:
            raise ValueError(f"{WHO}: the archive has no member {name!r}")
        with gzip.GzipFile(fileobj=io.BytesIO(f.read())) as g:
            return [line.decode("utf-8").strip() for line in g]

    def _load_anno(self):
        with open_tar(self.data_file, WHO) as tf:
            words, props = self._member(tf, _WORDS), self._member(tf, _PROPS)
        self.sentences, self.predicates, self.labels = [], [], []
        sentence, rows = [], []
        for w, p in zip(words, props):
            cols = p.split()
            if cols:
                sentence.append(w)
                rows.append(cols)
                continue
            if rows:
                columns = [[r[i] for r in rows] for i in range(len(rows[0]))]
                verbs = [x for x in columns[0] if x != "-"]
                if len(verbs) != len(columns) - 1:
                    raise ValueError(f"{WHO}: a sentence of the props file names {len(verbs)} predicates but has "
                                     f"{len(columns) - 1} argument columns ({' '.join(sentence)[:60]!r})")
                for i, col in enumerate(columns[1:]):
                    self.sentences.append(sentence)
                    self.predicates.append(verbs[i])
                    self.labels.append(_bio(col))
            sentence, rows = [], []

    def __getitem__(self, idx):
        sentence, predicate, labels = self.sentences[idx], self.predicates[idx], self.labels[idx]
        n = len(sentence)
        v = labels.index("B-V")
        mark = [0] * n
        ctx = {}
        for off in (-2, -1, 0, 1, 2):
            j = v + off
            if 0 <= j < n:
                mark[j] = 1
                ctx[off] = sentence[j]
            else:
                ctx[off] = "bos" if off < 0 else "eos"
        ids = [self.word_dict.get(w, UNK_IDX) for w in sentence]
        rep = [[self.word_dict.get(ctx[off], UNK_IDX)] * n for off in (-2, -1, 0, 1, 2)]
        pred = [self.predicate_dict.get(predicate)] * n
        lab = [self.label_dict.get(x) for x in labels]
        return tuple(np.array(a) for a in [ids] + rep + [pred, mark, lab])

    def __len__(self):
        return len(self.sentences)

    def get_dict(self):
        """The word, verb and label dictionaries."""
        return self.word_dict, self.predicate_dict, self.label_dict

    def get_embedding(self):
        """The path of the embedding file."""
        return self.emb_file
