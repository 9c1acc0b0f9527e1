"""The image backend switch of ``paddle.vision``: which kind of image the datasets
give without a transform ('pil': PIL images, 'cv2': numpy HWC arrays)."""
_image_backend = "pil"

__all__ = ["set_image_backend", "get_image_backend", "image_load"]


def set_image_backend(backend):
    """Set the default backend: 'pil', 'cv2' or 'tensor' (as Paddle accepts)."""
    global _image_backend
    if backend not in ("pil", "cv2", "tensor"):
        raise ValueError("set_image_backend: expected one of ['pil', 'cv2', 'tensor'], got {!r}".format(backend))
    _image_backend = backend


def get_image_backend():
    """The default image backend ('pil' unless set)."""
    return _image_backend


def image_load(path, backend=None):
    """Open an image file: a PIL image with 'pil'. Paddle's 'cv2' reads it with OpenCV
    (BGR channel order, OpenCV's decoders), which ddg does not depend on: it raises."""
    if backend is None:
        backend = _image_backend
    if backend not in ("pil", "cv2", "tensor"):
        raise ValueError("image_load: expected one of ['pil', 'cv2', 'tensor'], got {!r}".format(backend))
    if backend == "pil":
        from PIL import Image
        return Image.open(path)
    raise NotImplementedError("image_load: backend {!r} reads images with OpenCV (Paddle's cv2.imread), which ddg "
                              "does not use; use backend='pil' (np.asarray(img)[..., ::-1] gives BGR)".format(backend))
