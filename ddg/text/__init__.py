"""``ddg.text``: Paddle's ``paddle.text``: the text datasets (``datasets``) and
``viterbi_decode``/``ViterbiDecoder``."""
from .viterbi import ViterbiDecoder, viterbi_decode  # noqa: F401

__all__ = ["ViterbiDecoder", "viterbi_decode"]
