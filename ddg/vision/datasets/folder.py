"""Datasets of image files in folders (``DatasetFolder``: one sub-folder per class;
``ImageFolder``: every image under a folder, unlabelled)."""
import os

from ...io.dataset import Dataset

__all__ = ["DatasetFolder", "ImageFolder", "IMG_EXTENSIONS", "has_valid_extension", "make_dataset",
           "default_loader", "pil_loader"]

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def has_valid_extension(filename, extensions):
    """Whether ``filename`` ends with one of ``extensions`` (case-insensitive)."""
    if not isinstance(extensions, (list, tuple)):
        raise TypeError("extensions must be a list or tuple, got {}".format(type(extensions).__name__))
    return filename.lower().endswith(tuple(x.lower() for x in extensions))


def _validity(extensions, is_valid_file, who):
    if extensions is not None and is_valid_file is not None:
        raise ValueError("{}: pass extensions or is_valid_file, not both".format(who))
    if is_valid_file is not None:
        return is_valid_file, None
    extensions = IMG_EXTENSIONS if extensions is None else extensions
    return (lambda p: has_valid_extension(p, extensions)), extensions


def make_dataset(dir, class_to_idx, extensions=None, is_valid_file=None):
    """``(path, class index)`` for every valid file under each class folder, in sorted order."""
    valid, _ = _validity(extensions, is_valid_file, "make_dataset")
    images = []
    dir = os.path.expanduser(dir)
    for target in sorted(class_to_idx):
        d = os.path.join(dir, target)
        if not os.path.isdir(d):
            continue
        for root, _, fnames in sorted(os.walk(d, followlinks=True)):
            for fname in sorted(fnames):
                path = os.path.join(root, fname)
                if valid(path):
                    images.append((path, class_to_idx[target]))
    return images


def pil_loader(path):
    """The image at ``path`` as an RGB PIL image."""
    from PIL import Image
    with open(path, "rb") as f:
        return Image.open(f).convert("RGB")


def default_loader(path):
    """``pil_loader``. (Paddle's 'cv2' image backend decodes with OpenCV instead, which
    ddg does not use: under that backend this raises; pass ``loader=`` to choose.)"""
    from ..image import get_image_backend
    if get_image_backend() == "cv2":
        raise NotImplementedError("default_loader: the 'cv2' image backend reads files with OpenCV, which ddg does "
                                  "not use; set_image_backend('pil'), or pass loader=lambda p: "
                                  "np.asarray(pil_loader(p)) for numpy images")
    return pil_loader(path)


class DatasetFolder(Dataset):
    """Images in class folders: ``root/<class>/.../<file>``; classes are the
    sub-folders of ``root`` in sorted order, labelled 0, 1, ...

    Args:
        root: the folder.
        loader: path -> sample (default: an RGB PIL image).
        extensions: the file endings to take (default ``IMG_EXTENSIONS``).
        transform: called on each sample.
        is_valid_file: path -> bool, instead of ``extensions``.

    Items are ``(sample, class index)``; ``classes``, ``class_to_idx``, ``samples``
    and ``targets`` as in Paddle.
    """

    def __init__(self, root, loader=None, extensions=None, transform=None, is_valid_file=None):
        self.root = root
        self.transform = transform
        valid, extensions = _validity(extensions, is_valid_file, "DatasetFolder")
        classes, class_to_idx = self._find_classes(self.root)
        samples = make_dataset(self.root, class_to_idx, is_valid_file=valid)
        if not samples:
            raise RuntimeError("DatasetFolder: found no valid files in the class folders of {!r}{}".format(
                self.root, "" if extensions is None else "; supported extensions are: " + ",".join(extensions)))
        self.loader = default_loader if loader is None else loader
        self.extensions = extensions
        self.classes = classes
        self.class_to_idx = class_to_idx
        self.samples = samples
        self.targets = [s[1] for s in samples]
        from ...tensor.dtypes import get_default_dtype
        self.dtype = get_default_dtype()

    def _find_classes(self, dir):
        if not os.path.isdir(dir):
            raise FileNotFoundError("DatasetFolder: {!r} is not a folder".format(dir))
        classes = sorted(d.name for d in os.scandir(dir) if d.is_dir())
        return classes, {c: i for i, c in enumerate(classes)}

    def __getitem__(self, index):
        path, target = self.samples[index]
        sample = self.loader(path)
        if self.transform is not None:
            sample = self.transform(sample)
        return sample, target

    def __len__(self):
        return len(self.samples)


class ImageFolder(Dataset):
    """Every valid image file under ``root`` (sorted, recursively), unlabelled: items
    are ``[sample]``. Arguments as ``DatasetFolder``'s."""

    def __init__(self, root, loader=None, extensions=None, transform=None, is_valid_file=None):
        self.root = root
        valid, extensions = _validity(extensions, is_valid_file, "ImageFolder")
        path = os.path.expanduser(root)
        if not os.path.isdir(path):
            raise FileNotFoundError("ImageFolder: {!r} is not a folder".format(root))
        samples = []
        for r, _, fnames in sorted(os.walk(path, followlinks=True)):
            for fname in sorted(fnames):
                f = os.path.join(r, fname)
                if valid(f):
                    samples.append(f)
        if not samples:
            raise RuntimeError("ImageFolder: found no valid files under {!r}{}".format(
                root, "" if extensions is None else "; supported extensions are: " + ",".join(extensions)))
        self.loader = default_loader if loader is None else loader
        self.extensions = extensions
        self.samples = samples
        self.transform = transform

    def __getitem__(self, index):
        sample = self.loader(self.samples[index])
        if self.transform is not None:
            sample = self.transform(sample)
        return [sample]

    def __len__(self):
        return len(self.samples)
