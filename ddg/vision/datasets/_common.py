"""Where the dataset archives live, their MD5 sums and their download.

An archive given as ``data_file`` (``label_file``...) is used as it is, as Paddle does.
Without one, the dataset looks for the official file name in its cache folder,
``$DDG_DATA_DIR/<dataset>`` when ``DDG_DATA_DIR`` is set, else
``~/.cache/ddg/<dataset>``; a file found there must have the official MD5 sum (else a
ValueError names the file and the sum expected); a missing one is downloaded there
with ``download=True`` (Paddle's default), its MD5 checked before it is kept.
"""
import os

from ...io.paddle_format import load_plain_pickle  # noqa: F401  (re-exported for the readers)
from .mnist import _download, _md5_of


def cache_dir(module):
    env = os.environ.get("DDG_DATA_DIR")
    if env:
        return os.path.join(env, module)
    return os.path.join(os.path.expanduser("~"), ".cache", "ddg", module)


def check_backend(backend, who):
    """Paddle's image backends: 'pil' (PIL images, the default) or 'cv2' (numpy arrays)."""
    if backend is None:
        from ..image import get_image_backend
        backend = get_image_backend()
    backend = str(backend).lower()
    if backend not in ("pil", "cv2"):
        raise ValueError("{}: backend must be 'pil' or 'cv2', got {!r}".format(who, backend))
    return backend


def check_mode(mode, modes, who):
    m = str(mode).lower()
    if m not in modes:
        raise ValueError("{}: mode must be one of {}, got {!r}".format(who, list(modes), mode))
    return m


def locate(path, url, md5, module, download, who, what="data_file"):
    """The path of an archive: ``path`` if given (it must exist), else the cached
    official file (MD5 checked), else downloaded from ``url`` when ``download``."""
    if path:
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError("{}: {} {!r} not found".format(who, what, path))
        return path
    name = url.rsplit("/", 1)[1]
    dest = os.path.join(cache_dir(module), name)
    if os.path.isfile(dest):
        got = _md5_of(dest)
        if got != md5:
            raise ValueError("{}: {!r} has MD5 {} but the official {} has {}; the file is corrupt or not the "
                             "official one (delete it to download it again)".format(who, dest, got, name, md5))
        return dest
    if not download:
        raise FileNotFoundError("{}: {} is not set and {!r} is not there; pass {}=, put the official {} in {!r} "
                                "(or set DDG_DATA_DIR), or pass download=True".format(
                                    who, what, dest, what, name, cache_dir(module)))
    return _download(name, dest, md5, mirrors=[url[:-len(name)]], label=who)
