"""A few image transforms (``paddle.vision.transforms``): Compose, ToTensor, Normalize,
Transpose. They take numpy arrays (HW or HWC, as OpenCV gives them), PIL images, or
ddg Tensors (CHW)."""
import numbers

import numpy as np

__all__ = ["BaseTransform", "Compose", "ToTensor", "Normalize", "Transpose",
           "RandomHorizontalFlip", "RandomVerticalFlip", "Resize", "resize",
           "CenterCrop", "crop", "center_crop",
           "to_tensor", "normalize", "hflip", "vflip"]


def _is_pil(img):
    try:
        from PIL import Image
    except ImportError:
        return False
    return isinstance(img, Image.Image)


def _tensor_class():
    from ..tensor.tensor import Tensor
    return Tensor


def to_tensor(pic, data_format="CHW"):
    """A float32 ddg Tensor from a PIL image or an HW/HWC numpy array; uint8 values are
    scaled to [0, 1]; ``data_format='CHW'`` moves channels first."""
    from ..tensor.creation import to_tensor as _make
    if data_format not in ("CHW", "HWC"):
        raise ValueError("to_tensor: data_format must be 'CHW' or 'HWC', got {!r}".format(data_format))
    arr = np.asarray(pic)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3:
        raise ValueError("to_tensor: expected an image of 2 or 3 dimensions, got shape {}".format(arr.shape))
    if arr.dtype == np.uint8:
        arr = arr.astype(np.float32) / 255.0
    else:
        arr = arr.astype(np.float32)
    if data_format == "CHW":
        arr = np.ascontiguousarray(arr.transpose(2, 0, 1))
    return _make(arr)


def normalize(img, mean, std, data_format="CHW", to_rgb=False):
    """``(img - mean) / std`` per channel, for numpy arrays or ddg Tensors."""
    Tensor = _tensor_class()
    is_tensor = isinstance(img, Tensor)
    arr = img._data if is_tensor else np.asarray(img, dtype=np.float32)
    if to_rgb and not is_tensor:
        arr = arr[::-1] if data_format == "CHW" else arr[..., ::-1]
    if isinstance(mean, numbers.Number):
        mean = [mean]
    if isinstance(std, numbers.Number):
        std = [std]
    xp = np
    if is_tensor:
        from ..tensor import backend
        xp = backend.get_array_module(arr)
    mean = xp.asarray(mean, dtype=arr.dtype if arr.dtype.kind in "fV" else np.float32)
    std = xp.asarray(std, dtype=mean.dtype)
    shape = (-1, 1, 1) if data_format == "CHW" else (1, 1, -1)
    out = (arr - mean.reshape(shape)) / std.reshape(shape)
    if is_tensor:
        return Tensor._wrap(out, True)
    return out.astype(np.float32, copy=False)


class BaseTransform:
    """A transform: ``__call__(img)`` -> img."""

    def __init__(self, keys=None):
        self.keys = keys

    def _apply_image(self, img):
        raise NotImplementedError

    def __call__(self, img):
        return self._apply_image(img)


class Compose:
    """Applies the transforms in order."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, data):
        for t in self.transforms:
            data = t(data)
        return data

    def __repr__(self):
        return "Compose({})".format(", ".join(repr(t) for t in self.transforms))


class ToTensor(BaseTransform):
    """PIL image or HW(C) numpy array -> float32 Tensor (CHW by default), uint8 scaled to [0, 1]."""

    def __init__(self, data_format="CHW", keys=None):
        super().__init__(keys)
        self.data_format = data_format

    def _apply_image(self, img):
        return to_tensor(img, self.data_format)


class Normalize(BaseTransform):
    """``(img - mean) / std`` per channel; a 2-D (HW) numpy image gains a channel axis
    under ``data_format='CHW'``, as in Paddle."""

    def __init__(self, mean=0.0, std=1.0, data_format="CHW", to_rgb=False, keys=None):
        super().__init__(keys)
        if data_format not in ("CHW", "HWC"):
            raise ValueError("Normalize: data_format must be 'CHW' or 'HWC', got {!r}".format(data_format))
        self.mean = mean
        self.std = std
        self.data_format = data_format
        self.to_rgb = to_rgb

    def _apply_image(self, img):
        if _is_pil(img):
            img = np.asarray(img)
        return normalize(img, self.mean, self.std, self.data_format, self.to_rgb)


class Transpose(BaseTransform):
    """Permute the axes of a numpy image (HWC -> CHW by default); HW gains a channel axis."""

    def __init__(self, order=(2, 0, 1), keys=None):
        super().__init__(keys)
        self.order = order

    def _apply_image(self, img):
        if _is_pil(img):
            img = np.asarray(img)
        if img.ndim == 2:
            img = img[..., None]
        return np.ascontiguousarray(img.transpose(self.order))


def _check_image(img, name):
    if _is_pil(img):
        return
    if not isinstance(img, np.ndarray) or img.ndim not in (2, 3):
        raise TypeError("{}: expected a PIL image or an HW/HWC numpy array, got {}".format(
            name, getattr(img, "shape", type(img).__name__)))


def hflip(img):
    """Mirror an image left-right (PIL image in, PIL image out; numpy in, numpy out)."""
    _check_image(img, "hflip")
    if _is_pil(img):
        from PIL import Image
        return img.transpose(Image.FLIP_LEFT_RIGHT)
    return np.ascontiguousarray(img[:, ::-1])


def vflip(img):
    """Mirror an image top-bottom (PIL image in, PIL image out; numpy in, numpy out)."""
    _check_image(img, "vflip")
    if _is_pil(img):
        from PIL import Image
        return img.transpose(Image.FLIP_TOP_BOTTOM)
    return np.ascontiguousarray(img[::-1])


class RandomHorizontalFlip(BaseTransform):
    """``hflip`` with probability ``prob`` (Paddle's default 0.5)."""

    def __init__(self, prob=0.5, keys=None):
        super().__init__(keys)
        if not 0.0 <= prob <= 1.0:
            raise ValueError("RandomHorizontalFlip: prob must be in [0, 1], got {}".format(prob))
        self.prob = prob

    def _apply_image(self, img):
        return hflip(img) if np.random.random() < self.prob else img


class RandomVerticalFlip(BaseTransform):
    """``vflip`` with probability ``prob`` (Paddle's default 0.5)."""

    def __init__(self, prob=0.5, keys=None):
        super().__init__(keys)
        if not 0.0 <= prob <= 1.0:
            raise ValueError("RandomVerticalFlip: prob must be in [0, 1], got {}".format(prob))
        self.prob = prob

    def _apply_image(self, img):
        return vflip(img) if np.random.random() < self.prob else img


_INTERP = {"nearest": 0, "bilinear": 2, "bicubic": 3, "box": 4, "lanczos": 1, "hamming": 5}


def resize(img, size, interpolation="bilinear"):
    """Resize with Pillow. An int ``size`` sets the shorter side, keeping the aspect ratio
    (the longer side truncated, as Paddle does); ``(h, w)`` sets both. PIL in, PIL out;
    numpy (HW/HWC, any Pillow-supported dtype) in, numpy out."""
    from PIL import Image
    _check_image(img, "resize")
    if interpolation not in _INTERP:
        raise ValueError("resize: interpolation must be one of {}, got {!r}".format(
            sorted(_INTERP), interpolation))
    pil = _is_pil(img)
    if pil:
        w, h = img.size
    else:
        h, w = img.shape[:2]
    if isinstance(size, numbers.Integral):
        if size <= 0:
            raise ValueError("resize: size must be positive, got {}".format(size))
        if w < h:
            ow, oh = size, int(size * h / w)
        else:
            oh, ow = size, int(size * w / h)
    else:
        if len(size) != 2:
            raise ValueError("resize: size must be an int or (h, w), got {!r}".format(size))
        oh, ow = int(size[0]), int(size[1])
    if pil:
        return img.resize((ow, oh), _INTERP[interpolation])
    arr = img
    if arr.ndim == 3 and arr.shape[2] == 1:
        out = np.asarray(Image.fromarray(arr[:, :, 0]).resize((ow, oh), _INTERP[interpolation]))
        return out[:, :, None]
    if arr.ndim == 3 and arr.dtype != np.uint8:
        chans = [np.asarray(Image.fromarray(arr[:, :, c]).resize((ow, oh), _INTERP[interpolation]))
                 for c in range(arr.shape[2])]
        return np.stack(chans, axis=2).astype(arr.dtype, copy=False)
    return np.asarray(Image.fromarray(arr).resize((ow, oh), _INTERP[interpolation]))


class Resize(BaseTransform):
    """``resize(img, size, interpolation)``; Paddle's default interpolation is bilinear."""

    def __init__(self, size, interpolation="bilinear", keys=None):
        super().__init__(keys)
        self.size = size
        self.interpolation = interpolation

    def _apply_image(self, img):
        return resize(img, self.size, self.interpolation)


def crop(img, top, left, height, width):
    """The ``height`` x ``width`` box at (``top``, ``left``); PIL in, PIL out; numpy in, numpy out."""
    _check_image(img, "crop")
    if _is_pil(img):
        return img.crop((left, top, left + width, top + height))
    return img[top:top + height, left:left + width]


def center_crop(img, output_size):
    """The centred ``output_size`` box (an int for a square, or ``(h, w)``)."""
    _check_image(img, "center_crop")
    if isinstance(output_size, numbers.Integral):
        output_size = (int(output_size), int(output_size))
    th, tw = output_size
    if _is_pil(img):
        w, h = img.size
    else:
        h, w = img.shape[:2]
    top = int(round((h - th) / 2.0))
    left = int(round((w - tw) / 2.0))
    return crop(img, top, left, th, tw)


class CenterCrop(BaseTransform):
    """``center_crop(img, size)``."""

    def __init__(self, size, keys=None):
        super().__init__(keys)
        self.size = size

    def _apply_image(self, img):
        return center_crop(img, self.size)
