"""``ddg.text``: Paddle's ``paddle.text``: the text datasets (``datasets``) and
``viterbi_decode``/``ViterbiDecoder``."""
from . import datasets  # noqa: F401
from .datasets import WMT14, WMT16, Conll05st, Imdb, Imikolov, Movielens, UCIHousing  # noqa: F401
from .viterbi import ViterbiDecoder, viterbi_decode  # noqa: F401

__all__ = ["Conll05st", "Imdb", "Imikolov", "Movielens", "UCIHousing", "WMT14", "WMT16", "ViterbiDecoder",
           "viterbi_decode"]
