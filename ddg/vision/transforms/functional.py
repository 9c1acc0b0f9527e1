"""The functional image transforms (``paddle.vision.transforms.functional``).

Each takes a PIL image, a numpy image (HW or HWC, as OpenCV and ``np.asarray(pil)``
give them) or, where noted, a ddg Tensor (CHW), and returns the same kind of thing.

Resampling, rotation, affine and perspective warps and the colour enhancers are
Pillow's. Paddle sends numpy images to OpenCV; ddg does not depend on OpenCV, so a
numpy image goes through Pillow too and gives Paddle's PIL results (which differ from
Paddle's cv2 ones only in interpolation rounding, and in ``adjust_contrast``, whose
cv2 version pivots on a fixed 74 instead of the image's mean grey). A float numpy
image is warped channel by channel in Pillow's 32-bit float mode; colour operations
need 8-bit values and clip a float image to [0, 255] first, returning its dtype.
"""
import math
import numbers

import numpy as np

__all__ = ["to_tensor", "hflip", "vflip", "resize", "pad", "affine", "rotate", "perspective",
           "to_grayscale", "crop", "center_crop", "adjust_brightness", "adjust_contrast",
           "adjust_saturation", "adjust_hue", "normalize", "erase"]

_PIL_INTERP = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4, "hamming": 5}
_PAD_MODES = ("constant", "edge", "reflect", "symmetric")


# ---------------------------------------------------------------- kinds of image

def _is_pil_image(img):
    try:
        from PIL import Image
    except ImportError:
        return False
    return isinstance(img, Image.Image)


def _is_tensor_image(img):
    from ...tensor.tensor import Tensor
    return isinstance(img, Tensor)


def _is_numpy_image(img):
    return isinstance(img, np.ndarray) and img.ndim in (2, 3)


def _check_image(img, op, tensor=True):
    if _is_pil_image(img) or _is_numpy_image(img) or (tensor and _is_tensor_image(img)):
        if _is_tensor_image(img) and img.ndim not in (3, 4):
            raise ValueError("{}: a Tensor image must be CHW (or NCHW), got shape {}".format(op, img.shape))
        return
    what = "shape {}".format(list(img.shape)) if hasattr(img, "shape") else type(img).__name__
    raise TypeError("{}: img should be a PIL image, an HW/HWC numpy array{}; got {}".format(
        op, " or a CHW Tensor" if tensor else "", what))


def _image_size(img):
    """(width, height), as Paddle's transforms measure it."""
    if _is_pil_image(img):
        return img.size
    if _is_tensor_image(img):
        return img.shape[-1], img.shape[-2]
    return img.shape[1], img.shape[0]


def _interp(interpolation, op, allowed=None):
    allowed = allowed or _PIL_INTERP
    if interpolation not in allowed:
        raise ValueError("{}: interpolation must be one of {}, got {!r}".format(op, sorted(allowed), interpolation))
    return _PIL_INTERP[interpolation]


def _tensor_to_hwc(img):
    """host numpy HWC (or NHWC) array of a CHW (NCHW) Tensor"""
    a = img.numpy()
    return np.moveaxis(a, -3, -1)


def _hwc_to_tensor(arr, like):
    from ...tensor.creation import to_tensor as _make
    return _make(np.ascontiguousarray(np.moveaxis(arr, -1, -3)), place=like.place)


def _fill_for(mode_bands, fill):
    """Pillow's fill colour for an image of ``mode_bands`` bands from Paddle's fill."""
    if isinstance(fill, numbers.Number):
        return fill if mode_bands == 1 else tuple([fill] * mode_bands)
    fill = tuple(fill)
    if mode_bands == 1:
        return fill[0]
    if len(fill) == 1:
        return tuple(fill * mode_bands)
    return fill


def _through_pil(img, op, fn, color=False):
    """Apply ``fn(pil_image, channel_index) -> pil_image`` to a numpy image (or a CHW
    Tensor, through host memory) and return the same kind of thing. 8-bit images with 1,
    3 or 4 channels go through as one image; others channel by channel in mode 'F'
    (``color=True``: as 8-bit, clipped, since colour enhancers need 8-bit images)."""
    from PIL import Image
    if _is_tensor_image(img):
        arr = _tensor_to_hwc(img)
        if arr.ndim != 3:
            raise ValueError("{}: expected a CHW Tensor, got shape {}".format(op, img.shape))
        return _hwc_to_tensor(_through_pil(arr, op, fn, color).astype(arr.dtype, copy=False), img)
    arr = img
    squeeze = arr.ndim == 2
    if squeeze:
        arr = arr[:, :, None]
    dtype = arr.dtype
    if color and dtype != np.uint8:
        arr = np.clip(arr, 0, 255).astype(np.uint8)
    c = arr.shape[2]
    if arr.dtype == np.uint8 and c in (1, 3, 4):
        pil = Image.fromarray(arr[:, :, 0] if c == 1 else arr, {1: "L", 3: "RGB", 4: "RGBA"}[c])
        out = np.asarray(fn(pil, None))
        if out.ndim == 2:
            out = out[:, :, None]
    elif color:
        if c != 3:
            raise ValueError("{}: expected an image of 1, 3 or 4 channels, got shape {}".format(op, img.shape))
        out = np.asarray(fn(Image.fromarray(arr, "RGB"), None))
    else:
        planes = [np.asarray(fn(Image.fromarray(np.ascontiguousarray(arr[:, :, k], dtype=np.float32), "F"), k))
                  for k in range(c)]
        out = np.stack(planes, axis=2)
    if squeeze and out.shape[2] == 1:
        out = out[:, :, 0]
    return out.astype(dtype, copy=False) if out.dtype != dtype else np.array(out)


# ---------------------------------------------------------------- conversion

def to_tensor(pic, data_format="CHW"):
    """A ddg Tensor from a PIL image or an HW/HWC numpy array: 8-bit values become
    float32 in [0, 1], other dtypes keep their values and dtype (mode '1' counts 0/255,
    'I' and 'I;16' give int32, 'F' float32); ``data_format='CHW'`` puts channels first.
    A Tensor (CHW) is returned as it is, or moved to HWC."""
    from ...tensor.creation import to_tensor as _make
    _check_image(pic, "to_tensor")
    if data_format not in ("CHW", "HWC"):
        raise ValueError("to_tensor: data_format must be 'CHW' or 'HWC', got {!r}".format(data_format))
    if _is_tensor_image(pic):
        return pic if data_format == "CHW" else pic.transpose((1, 2, 0))
    if _is_pil_image(pic):
        mode = pic.mode
        if mode in ("I", "I;16"):
            arr = np.asarray(pic, np.int32)
        elif mode == "F":
            arr = np.asarray(pic, np.float32)
        elif mode == "1":
            arr = np.asarray(pic, np.uint8) * np.uint8(255)
        else:
            arr = np.asarray(pic)
        bands = 3 if mode == "YCbCr" else 1 if mode == "I;16" else len(pic.getbands())
        arr = arr.reshape(pic.size[1], pic.size[0], bands)
    else:
        arr = pic if pic.ndim == 3 else pic[:, :, None]
    if arr.dtype == np.uint8:
        arr = arr.astype(np.float32) / np.float32(255.0)
    if data_format == "CHW":
        arr = arr.transpose(2, 0, 1)
    return _make(np.ascontiguousarray(arr))


# ---------------------------------------------------------------- geometry

def hflip(img):
    """Mirror left-right."""
    _check_image(img, "hflip")
    if _is_pil_image(img):
        from PIL import Image
        return img.transpose(Image.FLIP_LEFT_RIGHT)
    if _is_tensor_image(img):
        return img.flip([-1])
    return np.ascontiguousarray(img[:, ::-1])


def vflip(img):
    """Mirror top-bottom."""
    _check_image(img, "vflip")
    if _is_pil_image(img):
        from PIL import Image
        return img.transpose(Image.FLIP_TOP_BOTTOM)
    if _is_tensor_image(img):
        return img.flip([-2])
    return np.ascontiguousarray(img[::-1])


def crop(img, top, left, height, width):
    """The ``height`` x ``width`` box whose top-left corner is (``top``, ``left``)."""
    _check_image(img, "crop")
    if _is_pil_image(img):
        return img.crop((left, top, left + width, top + height))
    if _is_tensor_image(img):
        return img[..., top:top + height, left:left + width]
    return img[top:top + height, left:left + width]


def center_crop(img, output_size):
    """The centred box of ``output_size`` (an int for a square, or ``(h, w)``)."""
    _check_image(img, "center_crop")
    if isinstance(output_size, numbers.Number):
        output_size = (int(output_size), int(output_size))
    th, tw = output_size
    w, h = _image_size(img)
    return crop(img, int(round((h - th) / 2.0)), int(round((w - tw) / 2.0)), th, tw)


def _out_size(size, w, h, op):
    if isinstance(size, numbers.Integral):
        if size <= 0:
            raise ValueError("{}: size must be positive, got {}".format(op, size))
        if (w <= h and w == size) or (h <= w and h == size):
            return None
        if w < h:
            return int(size), int(size * h / w)
        return int(size * w / h), int(size)
    try:
        if len(size) != 2:
            raise TypeError
    except TypeError:
        raise TypeError("{}: size must be an int or a (h, w) pair, got {!r}".format(op, size)) from None
    return int(size[1]), int(size[0])


def resize(img, size, interpolation="bilinear"):
    """Resize with Pillow. An int ``size`` is the new shorter side (the longer one
    scaled and truncated; an image whose shorter side already has it comes back as it
    is); ``(h, w)`` sets both. ``interpolation``: nearest, bilinear, bicubic, box,
    lanczos or hamming."""
    _check_image(img, "resize")
    resample = _interp(interpolation, "resize")
    w, h = _image_size(img)
    wh = _out_size(size, w, h, "resize")
    if wh is None:
        return img
    if _is_pil_image(img):
        return img.resize(wh, resample)
    return _through_pil(img, "resize", lambda p, k: p.resize(wh, resample))


def _pad_amounts(padding, op):
    if isinstance(padding, list):
        padding = tuple(padding)
    if isinstance(padding, numbers.Integral):
        return (int(padding),) * 4
    if isinstance(padding, tuple) and len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    if isinstance(padding, tuple) and len(padding) == 4:
        return tuple(padding)
    raise ValueError("{}: padding must be an int or a sequence of 2 or 4 ints, got {!r}".format(op, padding))


def pad(img, padding, fill=0, padding_mode="constant"):
    """Pad the borders: ``padding`` is one int (all sides), ``(left/right, top/bottom)``
    or ``(left, top, right, bottom)``; ``padding_mode`` is constant (with ``fill``: one
    value per channel, or a number, which as in Paddle fills only the first channel of a
    multi-channel image), edge, reflect (mirror without the edge pixel) or
    symmetric (with it)."""
    _check_image(img, "pad")
    if not isinstance(fill, (numbers.Number, str, list, tuple)):
        raise TypeError("pad: fill must be a number, a string or a sequence, got {}".format(type(fill).__name__))
    if padding_mode not in _PAD_MODES:
        raise ValueError("pad: padding_mode must be one of {}, got {!r}".format(_PAD_MODES, padding_mode))
    left, top, right, bottom = _pad_amounts(padding, "pad")
    if _is_pil_image(img):
        from PIL import Image, ImageOps
        if padding_mode == "constant":
            out = ImageOps.expand(img, border=(left, top, right, bottom), fill=fill)
            if img.mode == "P":
                out.putpalette(img.getpalette())
            return out
        out = Image.fromarray(pad(np.asarray(img), (left, top, right, bottom), fill, padding_mode), img.mode)
        if img.mode == "P":
            out.putpalette(img.getpalette())
        return out
    if _is_tensor_image(img):
        from ...tensor.creation import to_tensor as _make
        arr = _tensor_to_hwc(img)
        return _hwc_to_tensor(pad(arr, (left, top, right, bottom), fill, padding_mode), img) if arr.ndim == 3 \
            else _make(pad(arr[0], (left, top, right, bottom), fill, padding_mode)[None], place=img.place)
    widths = [(top, bottom), (left, right)] + [(0, 0)] * (img.ndim - 2)
    if padding_mode != "constant":
        return np.pad(img, widths, padding_mode)
    out = np.empty((img.shape[0] + top + bottom, img.shape[1] + left + right) + img.shape[2:], img.dtype)
    if img.ndim == 3 and img.shape[2] > 1:
        # a number fills the first channel only (zeros elsewhere), as Paddle's PIL and cv2
        # paths both do; a sequence gives one value per channel
        values = [fill] if isinstance(fill, numbers.Number) else list(fill)
        if len(values) > img.shape[2]:
            raise ValueError("pad: fill has {} values for an image of {} channels".format(len(values), img.shape[2]))
        fill = np.zeros(img.shape[2], img.dtype)
        fill[:len(values)] = values
    elif not isinstance(fill, numbers.Number):
        fill = np.asarray(fill).ravel()[0]
    out[...] = fill
    out[top:top + img.shape[0], left:left + img.shape[1]] = img
    return out


def _affine_inverse(center, angle, translate, scale, shear):
    """The 6 coefficients Pillow's AFFINE transform wants: output pixel -> input pixel,
    for the forward map x -> C + T + scale * R(angle) Shear(shear) (x - C), angles in
    degrees (clockwise rotation on screen as Paddle draws it)."""
    rot = math.radians(angle)
    sx, sy = math.radians(shear[0]), math.radians(shear[1])
    # R(rot - sy) after a y-shear by sy and an x-shear by sx, undoing the extra rotation
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    # [[a, b], [c, d]] has determinant 1, so its inverse is its adjugate
    inv = [d / scale, -b / scale, -c / scale, a / scale]
    cx, cy = center
    tx, ty = translate
    ox, oy = -cx - tx, -cy - ty
    return [inv[0], inv[1], inv[0] * ox + inv[1] * oy + cx,
            inv[2], inv[3], inv[2] * ox + inv[3] * oy + cy]


def affine(img, angle, translate, scale, shear, interpolation="nearest", fill=0, center=None):
    """Rotate by ``angle`` degrees, translate by ``translate`` (dx, dy) pixels, scale
    and shear (``shear`` in degrees: one number for x, or (x, y)), about ``center``
    (default the image centre), keeping the image size; ``fill`` the uncovered area."""
    _check_image(img, "affine")
    if not isinstance(angle, numbers.Real):
        raise TypeError("affine: angle must be a number, got {}".format(type(angle).__name__))
    if not isinstance(translate, (list, tuple)) or len(translate) != 2:
        raise ValueError("affine: translate must be a sequence of 2 numbers, got {!r}".format(translate))
    if scale <= 0:
        raise ValueError("affine: scale must be positive, got {}".format(scale))
    if isinstance(shear, numbers.Number):
        shear = [shear, 0.0]
    elif isinstance(shear, (list, tuple)):
        shear = list(shear) * 2 if len(shear) == 1 else list(shear)
    else:
        raise TypeError("affine: shear must be a number or a sequence, got {}".format(type(shear).__name__))
    if len(shear) != 2:
        raise ValueError("affine: shear must hold 1 or 2 values, got {!r}".format(shear))
    if center is not None and not isinstance(center, (list, tuple)):
        raise TypeError("affine: center must be a sequence, got {}".format(type(center).__name__))
    resample = _interp(interpolation, "affine", ("nearest", "bilinear", "bicubic"))
    w, h = _image_size(img)
    if center is None:
        center = [w * 0.5, h * 0.5]
    matrix = _affine_inverse(center, float(angle), [float(t) for t in translate], scale, shear)
    from PIL import Image

    def warp(p, k):
        f = _fill_for(len(p.getbands()), fill if k is None or isinstance(fill, numbers.Number) else fill[k])
        return p.transform(p.size, Image.AFFINE, matrix, resample, fillcolor=f)
    return warp(img, None) if _is_pil_image(img) else _through_pil(img, "affine", warp)


def rotate(img, angle, interpolation="nearest", expand=False, center=None, fill=0):
    """Rotate by ``angle`` degrees counter-clockwise about ``center`` (default the
    centre); ``expand=True`` grows the output to hold the whole rotated image."""
    _check_image(img, "rotate")
    resample = _interp(interpolation, "rotate", ("nearest", "bilinear", "bicubic"))
    if center is not None:
        center = tuple(center)

    def turn(p, k):
        f = _fill_for(len(p.getbands()), fill if k is None or isinstance(fill, numbers.Number) else fill[k])
        return p.rotate(angle, resample, expand, center, fillcolor=f)
    return turn(img, None) if _is_pil_image(img) else _through_pil(img, "rotate", turn)


def _perspective_coeffs(startpoints, endpoints):
    """The 8 coefficients mapping each output point (an end point) to its input point
    (start point): x = (a u + b v + c) / (g u + h v + 1), y = (d u + e v + f) / (...)."""
    rows, rhs = [], []
    for (u, v), (x, y) in zip(endpoints, startpoints):
        rows.append([u, v, 1, 0, 0, 0, -x * u, -x * v])
        rows.append([0, 0, 0, u, v, 1, -y * u, -y * v])
        rhs += [x, y]
    return list(np.linalg.lstsq(np.asarray(rows, float), np.asarray(rhs, float), rcond=None)[0])


def perspective(img, startpoints, endpoints, interpolation="nearest", fill=0):
    """Warp so that the four ``startpoints`` (corners, ``[x, y]``) land on ``endpoints``."""
    _check_image(img, "perspective")
    if len(startpoints) != 4 or len(endpoints) != 4:
        raise ValueError("perspective: startpoints and endpoints must hold 4 points each, got {} and {}".format(
            len(startpoints), len(endpoints)))
    resample = _interp(interpolation, "perspective", ("nearest", "bilinear", "bicubic"))
    coeffs = _perspective_coeffs(startpoints, endpoints)
    from PIL import Image

    def warp(p, k):
        f = _fill_for(len(p.getbands()), fill if k is None or isinstance(fill, numbers.Number) else fill[k])
        return p.transform(p.size, Image.PERSPECTIVE, coeffs, resample, fillcolor=f)
    return warp(img, None) if _is_pil_image(img) else _through_pil(img, "perspective", warp)


# ---------------------------------------------------------------- colour

def to_grayscale(img, num_output_channels=1):
    """Luma (ITU-R 601-2: Pillow's 'L' conversion for images, Paddle's weights
    0.2989/0.587/0.114 for Tensors), with 1 or 3 channels. A numpy HWC image gives HW1
    (or HW3); a Tensor CHW gives 1HW (3HW)."""
    _check_image(img, "to_grayscale")
    if num_output_channels not in (1, 3):
        raise ValueError("to_grayscale: num_output_channels must be 1 or 3, got {}".format(num_output_channels))
    from PIL import Image
    if _is_pil_image(img):
        g = img.convert("L")
        return g if num_output_channels == 1 else Image.merge("RGB", (g, g, g))
    if _is_tensor_image(img):
        from ...tensor.creation import to_tensor as _make
        a = img.numpy().astype(np.float64)
        if a.shape[-3] != 3:
            raise ValueError("to_grayscale: expected 3 channels, got shape {}".format(img.shape))
        # Paddle's weights for Tensors (Pillow's 'L' uses 0.299, 0.587, 0.114)
        g = 0.2989 * a[..., 0:1, :, :] + 0.587 * a[..., 1:2, :, :] + 0.114 * a[..., 2:3, :, :]
        g = np.repeat(g, num_output_channels, axis=-3).astype(img.numpy().dtype)
        return _make(g, place=img.place)
    if img.ndim == 2 or img.shape[2] == 1:
        g = img if img.ndim == 2 else img[:, :, 0]
    else:
        if img.shape[2] != 3:
            raise ValueError("to_grayscale: expected an HW, HW1 or HW3 image, got shape {}".format(img.shape))
        g = np.asarray(Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB").convert("L")).astype(img.dtype)
    if img.ndim == 2 and num_output_channels == 1:
        return np.array(g)
    return np.repeat(g[:, :, None], num_output_channels, axis=2)


def _enhance(img, op, enhancer, factor):
    if factor < 0:
        raise ValueError("{}: the factor must be non-negative, got {}".format(op, factor))

    def apply(p, k):
        return enhancer(p).enhance(factor)
    _check_image(img, op)
    if _is_pil_image(img):
        return apply(img, None)
    return _through_pil(img, op, apply, color=True)


def adjust_brightness(img, brightness_factor):
    """Scale brightness: 0 gives black, 1 the original, 2 twice as bright."""
    from PIL import ImageEnhance
    return _enhance(img, "adjust_brightness", ImageEnhance.Brightness, brightness_factor)


def adjust_contrast(img, contrast_factor):
    """Blend with the image's mean grey: 0 gives a uniform grey, 1 the original."""
    from PIL import ImageEnhance
    return _enhance(img, "adjust_contrast", ImageEnhance.Contrast, contrast_factor)


def adjust_saturation(img, saturation_factor):
    """Blend with the greyscale image: 0 gives grey, 1 the original, 2 twice as saturated."""
    from PIL import ImageEnhance
    return _enhance(img, "adjust_saturation", ImageEnhance.Color, saturation_factor)


def adjust_hue(img, hue_factor):
    """Shift the hue by ``hue_factor`` of a full turn (in [-0.5, 0.5]) in HSV space;
    greyscale images come back unchanged."""
    _check_image(img, "adjust_hue")
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError("adjust_hue: hue_factor must be in [-0.5, 0.5], got {}".format(hue_factor))
    from PIL import Image
    shift = int(hue_factor * 255)

    def apply(p, k):
        if p.mode in ("L", "1", "I", "F"):
            return p
        hh, ss, vv = p.convert("HSV").split()
        hue = ((np.asarray(hh, np.int16) + shift) % 256).astype(np.uint8)
        return Image.merge("HSV", (Image.fromarray(hue, "L"), ss, vv)).convert(p.mode)
    if _is_pil_image(img):
        return apply(img, None)
    return _through_pil(img, "adjust_hue", apply, color=True)


# ---------------------------------------------------------------- values

def normalize(img, mean, std, data_format="CHW", to_rgb=False):
    """``(img - mean) / std`` per channel (channels first or last by ``data_format``).
    PIL and numpy images give float32 numpy arrays (``to_rgb`` first reverses the
    channel order, BGR -> RGB); a ddg Tensor gives a Tensor (differentiable)."""
    if data_format not in ("CHW", "HWC"):
        raise ValueError("normalize: data_format must be 'CHW' or 'HWC', got {!r}".format(data_format))
    shape = (-1, 1, 1) if data_format == "CHW" else (1, 1, -1)
    if isinstance(mean, numbers.Number):
        mean = [mean]
    if isinstance(std, numbers.Number):
        std = [std]
    if _is_tensor_image(img):
        from ...tensor.creation import to_tensor as _make
        dt = img.dtype if np.dtype(img.dtype).kind in "fV" else np.float32
        m = _make(np.asarray(mean, dtype=dt).reshape(shape), place=img.place)
        s = _make(np.asarray(std, dtype=dt).reshape(shape), place=img.place)
        return (img - m) / s
    if _is_pil_image(img):
        img = np.asarray(img).astype(np.float32)
    if not isinstance(img, np.ndarray):
        raise TypeError("normalize: img should be a PIL image, a numpy array or a Tensor, got {}".format(
            type(img).__name__))
    if to_rgb:
        img = img[::-1] if data_format == "CHW" else img[..., ::-1]
    m = np.asarray(mean, np.float32).reshape(shape)
    s = np.asarray(std, np.float32).reshape(shape)
    try:
        out = (img - m) / s
    except ValueError:
        raise ValueError("normalize: {} means and {} stds do not fit an image of shape {} ({})".format(
            m.size, s.size, list(img.shape), data_format)) from None
    return out.astype(np.float32, copy=False)


def erase(img, i, j, h, w, v, inplace=False):
    """Set the ``h`` x ``w`` box at (``i``, ``j``) to ``v`` (a number, one value per
    channel, or an array of the box's shape: HWC for images, CHW for Tensors)."""
    if _is_tensor_image(img):
        from ...tensor.backend import get_array_module
        from ...tensor.tensor import Tensor
        if img.ndim < 3:
            raise ValueError("erase: a Tensor image must be CHW, got shape {}".format(img.shape))
        data = img._data
        xp = get_array_module(data)
        val = v._data if isinstance(v, Tensor) else xp.asarray(v, dtype=data.dtype)
        if not inplace:
            data = data.copy()
        data[..., i:i + h, j:j + w] = val
        return img if inplace else Tensor._wrap(data, True)
    _check_image(img, "erase")
    if _is_pil_image(img):
        from PIL import Image
        arr = np.array(img)
        val = np.asarray(v)
        if arr.ndim == 2 and val.ndim == 3:  # a one-band image takes HW1 values
            val = val[..., 0]
        arr[i:i + h, j:j + w] = val
        return Image.fromarray(arr, img.mode)
    if not inplace:
        img = img.copy()
    img[i:i + h, j:j + w, ...] = v
    return img
