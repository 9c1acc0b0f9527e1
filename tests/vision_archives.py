"""Tiny archives in the real formats of the vision datasets, for the tests (nothing is
downloaded): CIFAR's tar.gz of Python 2 pickles, Flowers' tgz and MATLAB v5 files,
VOC 2012's tar, IDX files."""
import gzip
import io
import struct
import tarfile
import zlib

import numpy as np
from PIL import Image


# ---------------------------------------------------------------- Python 2 pickles

def py2_pickle(obj):
    """``obj`` (a dict with bytes keys; values bytes, lists of ints/bytes, 2-D uint8
    arrays) pickled as Python 2's cPickle (protocol 2) writes CIFAR's batches: byte
    strings as BINSTRING, arrays through numpy.core.multiarray._reconstruct."""
    out = io.BytesIO()
    w = out.write

    def string(b):
        if len(b) < 256:
            w(b"U" + bytes([len(b)]) + b)
        else:
            w(b"T" + struct.pack("<I", len(b)) + b)

    def integer(i):
        if 0 <= i < 256:
            w(b"K" + bytes([i]))
        else:
            w(b"J" + struct.pack("<i", i))

    def value(v):
        if isinstance(v, bytes):
            string(v)
        elif isinstance(v, int):
            integer(v)
        elif isinstance(v, list):
            w(b"](")
            for x in v:
                value(x)
            w(b"e")
        elif isinstance(v, np.ndarray):
            assert v.dtype == np.uint8
            w(b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n")
            integer(0)
            w(b"\x85")  # TUPLE1: (0,)
            string(b"b")
            w(b"\x87R")  # TUPLE3, REDUCE
            w(b"(")  # state: (1, shape, dtype, fortran, raw)
            integer(1)
            w(b"(")
            for d in v.shape:
                integer(d)
            w(b"t")
            w(b"cnumpy\ndtype\n")
            string(b"u1")
            integer(0)
            integer(1)
            w(b"\x87R(")
            integer(3)
            string(b"|")
            w(b"NNN")
            w(b"J" + struct.pack("<i", -1) + b"J" + struct.pack("<i", -1))
            integer(0)
            w(b"tb")  # TUPLE, BUILD on the dtype
            w(b"\x89")  # NEWFALSE
            string(np.ascontiguousarray(v).tobytes())
            w(b"tb")
        else:
            raise TypeError(type(v))
    w(b"\x80\x02}(")
    for k, v in obj.items():
        string(k)
        value(v)
    w(b"u.")
    return out.getvalue()


def _add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def cifar_archive(path, n_train=(6, 5), n_test=4, classes=10, seed=0, extra=None):
    """A cifar-10/100-python.tar.gz with len(n_train) training batches; returns the
    images (N, 3072) and labels of train and test."""
    rng = np.random.RandomState(seed)
    top = "cifar-10-batches-py" if classes == 10 else "cifar-100-python"
    made = {}
    with tarfile.open(path, "w:gz") as tar:
        if classes == 10:
            names = ["data_batch_{}".format(i + 1) for i in range(len(n_train))] + ["test_batch"]
            sizes = list(n_train) + [n_test]
        else:
            names, sizes = ["train", "test"], [sum(n_train), n_test]
        for name, n in zip(names, sizes):
            data = rng.randint(0, 256, (n, 3072)).astype(np.uint8)
            labels = [int(x) for x in rng.randint(0, classes, n)]
            batch = {b"batch_label": name.encode(), b"data": data,
                     b"filenames": [b"img_%d.png" % i for i in range(n)]}
            if classes == 10:
                batch[b"labels"] = labels
            else:
                batch[b"fine_labels"] = labels
                batch[b"coarse_labels"] = [x // 5 for x in labels]
            _add(tar, "{}/{}".format(top, name), py2_pickle(batch))
            made[name] = (data, labels)
        _add(tar, "{}/batches.meta".format(top) if classes == 10 else "{}/meta".format(top),
             py2_pickle({b"label_names": [b"c%d" % i for i in range(classes)]}))
        for name, data in (extra or {}).items():
            _add(tar, "{}/{}".format(top, name), data)
    if classes == 10:
        train = [made[n] for n in names[:-1]]
        test = made["test_batch"]
    else:
        train, test = [made["train"]], made["test"]
    return ((np.concatenate([t[0] for t in train]), sum((t[1] for t in train), [])), test)


# ---------------------------------------------------------------- MATLAB v5

def mat_v5(variables, compress=False, big_endian=False, stored="f8"):
    """A MATLAB v5 file holding ``variables`` ({name: 2-D array}) as double matrices,
    their values stored as ``stored`` (MATLAB narrows them, e.g. to uint8/uint16)."""
    o = ">" if big_endian else "<"
    mi = {"i1": 1, "u1": 2, "i2": 3, "u2": 4, "i4": 5, "u4": 6, "f4": 7, "f8": 9}

    def elem(typ, data):
        pad = -len(data) % 8
        if 0 < len(data) <= 4 and typ != 14:  # small element
            return struct.pack(o + "I", (len(data) << 16) | typ) + data + b"\0" * (4 - len(data))
        return struct.pack(o + "II", typ, len(data)) + data + b"\0" * pad

    header = b"MATLAB 5.0 MAT-file, written by ddg's tests".ljust(116, b" ") + b"\0" * 8
    header += struct.pack(o + "H", 0x0100) + (b"MI" if big_endian else b"IM")
    body = b""
    for name, arr in variables.items():
        arr = np.atleast_2d(np.asarray(arr, np.float64))
        m = elem(6, struct.pack(o + "II", 6, 0))  # flags: class double
        m += elem(5, struct.pack(o + "%di" % arr.ndim, *arr.shape))
        m += elem(1, name.encode())
        m += elem(mi[stored], arr.ravel(order="F").astype(np.dtype(stored).newbyteorder(o)).tobytes())
        matrix = elem(14, m)
        if compress:
            z = zlib.compress(matrix)
            body += struct.pack(o + "II", 15, len(z)) + z
        else:
            body += matrix
    return header + body


def jpeg_bytes(arr, fmt="JPEG"):
    b = io.BytesIO()
    Image.fromarray(arr).save(b, fmt)
    return b.getvalue()


def flowers_files(folder, n=6, seed=0):
    """102flowers.tgz, imagelabels.mat, setid.mat under ``folder``; returns the labels and splits."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(1, 103, n)
    splits = {"trnid": np.array([1, 3]), "valid": np.array([2]), "tstid": np.array([4, 5, 6])}
    with tarfile.open(str(folder / "102flowers.tgz"), "w:gz") as tar:
        for i in range(1, n + 1):
            _add(tar, "jpg/image_{:05d}.jpg".format(i), jpeg_bytes(np.full((8, 10, 3), 20 * i, np.uint8)))
        _add(tar, "../evil.jpg", b"x")  # never extracted
    (folder / "imagelabels.mat").write_bytes(mat_v5({"labels": labels[None]}, compress=True, stored="u1"))
    (folder / "setid.mat").write_bytes(mat_v5({k: v[None] for k, v in splits.items()}, stored="u2"))
    return labels, splits


def voc_archive(path, ids=("2007_000032", "2007_000039", "2007_000063")):
    rng = np.random.RandomState(1)
    with tarfile.open(path, "w") as tar:
        root = "VOCdevkit/VOC2012/"
        _add(tar, root + "ImageSets/Segmentation/trainval.txt", "\n".join(ids).encode() + b"\n")
        _add(tar, root + "ImageSets/Segmentation/train.txt", ids[0].encode() + b"\n")
        _add(tar, root + "ImageSets/Segmentation/val.txt", "\n".join(ids[1:]).encode() + b"\n")
        masks = {}
        for k, i in enumerate(ids):
            _add(tar, root + "JPEGImages/{}.jpg".format(i), jpeg_bytes(np.full((6, 7, 3), 30 * k, np.uint8)))
            m = rng.randint(0, 21, (6, 7)).astype(np.uint8)
            p = Image.fromarray(m, "P")
            p.putpalette([v for c in range(256) for v in (c, 255 - c, c // 2)])
            b = io.BytesIO()
            p.save(b, "PNG")
            _add(tar, root + "SegmentationClass/{}.png".format(i), b.getvalue())
            masks[i] = m
    return masks


def idx_files(folder, n=5, seed=0, prefix=("train", "t10k")):
    rng = np.random.RandomState(seed)
    out = {}
    for p in prefix:
        imgs = rng.randint(0, 256, (n, 28, 28)).astype(np.uint8)
        labs = rng.randint(0, 10, n).astype(np.uint8)
        (folder / "{}-images-idx3-ubyte.gz".format(p)).write_bytes(
            gzip.compress(struct.pack(">iiii", 2051, n, 28, 28) + imgs.tobytes()))
        (folder / "{}-labels-idx1-ubyte.gz".format(p)).write_bytes(
            gzip.compress(struct.pack(">ii", 2049, n) + labs.tobytes()))
        out[p] = (imgs, labs)
    return out
