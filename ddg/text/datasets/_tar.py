"""Reading the text members of the datasets' tar archives."""
import tarfile


def open_tar(path, who):
    try:
        return tarfile.open(path)
    except (tarfile.TarError, OSError) as exc:
        raise ValueError(f"{who}: {path!r} is not a readable tar archive ({exc})") from None


def member_lines(tf, name, who):
    """The lines of member ``name`` (bytes); a missing member is a ValueError naming it."""
    try:
        f = tf.extractfile(name)
    except KeyError:
        f = None
    if f is None:
        raise ValueError(f"{who}: the archive has no member {name!r}")
    return f.read().splitlines(keepends=True)


def word(b):
    """A token of the archives as text (UTF-8; bytes that are not are kept one-to-one)."""
    return b.decode("utf-8", "surrogateescape")
