"""``ddg.text.datasets``: Paddle's text datasets, reading the official archives (found in
``data_file``, in the cache folder ``$DDG_DATA_DIR/<dataset>`` or ``~/.cache/ddg/<dataset>``
with their MD5 checked, or downloaded with ``download=True``). Words are ``str``
(Paddle's dictionaries hold the archives' bytes); the ids are Paddle's."""
from .conll05 import Conll05st  # noqa: F401
from .imdb import Imdb  # noqa: F401
from .imikolov import Imikolov  # noqa: F401
from .movielens import Movielens  # noqa: F401
from .uci_housing import UCIHousing  # noqa: F401
from .wmt14 import WMT14  # noqa: F401
from .wmt16 import WMT16  # noqa: F401

__all__ = ["Conll05st", "Imdb", "Imikolov", "Movielens", "UCIHousing", "WMT14", "WMT16"]
