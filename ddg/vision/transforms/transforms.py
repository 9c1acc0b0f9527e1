"""The transform classes of ``paddle.vision.transforms``.

Random transforms draw from Python's ``random`` and ``numpy.random`` exactly where
Paddle's do, so seeding both (``random.seed``, ``np.random.seed``; a DataLoader worker
seeds both from its own seed) reproduces Paddle's choices.

``keys`` (Paddle's mechanism): a transform called on a tuple applies
``_apply_<key>`` to the i-th element for the i-th key (``'image'``, ``'coords'``,
``'boxes'``, ``'mask'``, or any key a subclass defines); elements beyond the keys pass
through. ``_get_params(inputs)`` runs first, once per call, and its result is
``self.params``, so one random draw can serve an image and its mask alike.
"""
import math
import numbers
import random
import traceback
from collections.abc import Iterable, Sequence

import numpy as np

from . import functional as F

__all__ = ["BaseTransform", "Compose", "Resize", "RandomResizedCrop", "CenterCrop", "RandomHorizontalFlip",
           "RandomVerticalFlip", "Transpose", "Normalize", "BrightnessTransform", "SaturationTransform",
           "ContrastTransform", "HueTransform", "ColorJitter", "RandomCrop", "Pad", "RandomAffine",
           "RandomRotation", "RandomPerspective", "Grayscale", "ToTensor", "RandomErasing"]


def _check_input(value, name, center=1, bound=(0, float("inf")), clip_first_on_zero=True):
    """A jitter amount as a [lo, hi] range of factors (None when it is the identity)."""
    if isinstance(value, numbers.Number):
        if value < 0:
            raise ValueError("{}: a single number must be non-negative, got {}".format(name, value))
        value = [center - value, center + value]
        if clip_first_on_zero:
            value[0] = max(value[0], 0)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        if not bound[0] <= value[0] <= value[1] <= bound[1]:
            raise ValueError("{}: the range {} must lie within {}".format(name, list(value), list(bound)))
        value = list(value)
    else:
        raise TypeError("{}: expected a number or a (min, max) pair, got {!r}".format(name, value))
    if value[0] == value[1] == center:
        return None
    return value


class Compose:
    """Applies ``transforms`` in order; a failing one is reported with its name."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, data):
        for f in self.transforms:
            try:
                data = f(data)
            except Exception as e:
                print("fail to perform transform [{}] with error: {} and stack:\n{}".format(
                    f, e, traceback.format_exc()))
                raise
        return data

    def __repr__(self):
        return "{}({}\n)".format(type(self).__name__, "".join("\n    {}".format(t) for t in self.transforms))


class BaseTransform:
    """Base of the transforms: ``keys`` names what each element of a tuple input is
    (default ``('image',)``); see the module docstring."""

    def __init__(self, keys=None):
        if keys is None:
            keys = ("image",)
        elif not isinstance(keys, Sequence) or isinstance(keys, str):
            raise ValueError("{}: keys should be a sequence of names, got keys={!r}".format(type(self).__name__, keys))
        for k in keys:
            if self._get_apply(k) is None:
                raise NotImplementedError("{}: {!r} is an unsupported data structure (no _apply_{})".format(
                    type(self).__name__, k, k))
        self.keys = keys
        self.params = None

    def _get_params(self, inputs):
        pass

    def __call__(self, inputs):
        if not isinstance(inputs, tuple):
            inputs = (inputs,)
        self.params = self._get_params(inputs)
        outputs = []
        for i in range(min(len(inputs), len(self.keys))):
            fn = self._get_apply(self.keys[i])
            outputs.append(inputs[i] if fn is None else fn(inputs[i]))
        outputs.extend(inputs[len(self.keys):])
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _get_apply(self, key):
        return getattr(self, "_apply_{}".format(key), None)

    def _apply_image(self, image):
        raise NotImplementedError("{} does not transform image (define _apply_image)".format(type(self).__name__))

    def _apply_boxes(self, boxes):
        raise NotImplementedError("{} does not transform boxes (define _apply_boxes)".format(type(self).__name__))

    def _apply_mask(self, mask):
        raise NotImplementedError("{} does not transform mask (define _apply_mask)".format(type(self).__name__))

    def _apply_coords(self, coords):
        raise NotImplementedError("{} does not transform coords (define _apply_coords)".format(type(self).__name__))

    def __repr__(self):
        return type(self).__name__ + "()"


class ToTensor(BaseTransform):
    """``to_tensor``: PIL/numpy HW(C) -> Tensor CHW (8-bit values scaled to [0, 1])."""

    def __init__(self, data_format="CHW", keys=None):
        super().__init__(keys)
        self.data_format = data_format

    def _apply_image(self, img):
        return F.to_tensor(img, self.data_format)


class Resize(BaseTransform):
    """``resize(img, size, interpolation)``."""

    def __init__(self, size, interpolation="bilinear", keys=None):
        super().__init__(keys)
        if not (isinstance(size, int) or (isinstance(size, Iterable) and len(size) == 2)):
            raise TypeError("Resize: size must be an int or a (h, w) pair, got {!r}".format(size))
        self.size = size
        self.interpolation = interpolation

    def _apply_image(self, img):
        return F.resize(img, self.size, self.interpolation)


class RandomResizedCrop(BaseTransform):
    """Crop a random box (area a ``scale`` fraction of the image's, aspect ratio from
    ``ratio``, log-uniformly), resized to ``size``; after 10 failed draws, the central
    box with the aspect ratio clamped to ``ratio``."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4, 4.0 / 3), interpolation="bilinear", keys=None):
        super().__init__(keys)
        self.size = (size, size) if isinstance(size, int) else size
        if scale[0] > scale[1]:
            raise ValueError("RandomResizedCrop: scale should be (min, max), got {!r}".format(scale))
        if ratio[0] > ratio[1]:
            raise ValueError("RandomResizedCrop: ratio should be (min, max), got {!r}".format(ratio))
        self.scale = scale
        self.ratio = ratio
        self.interpolation = interpolation

    def _dynamic_get_param(self, image, attempts=10):
        width, height = F._image_size(image)
        area = height * width
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(attempts):
            target = np.random.uniform(*self.scale) * area
            aspect = math.exp(np.random.uniform(*log_ratio))
            w = int(round(math.sqrt(target * aspect)))
            h = int(round(math.sqrt(target / aspect)))
            if 0 < w <= width and 0 < h <= height:
                return random.randint(0, height - h), random.randint(0, width - w), h, w
        in_ratio = float(width) / float(height)
        if in_ratio < min(self.ratio):
            w, h = width, int(round(width / min(self.ratio)))
        elif in_ratio > max(self.ratio):
            w, h = int(round(height * max(self.ratio))), height
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def _apply_image(self, img):
        i, j, h, w = self._dynamic_get_param(img)
        return F.resize(F.crop(img, i, j, h, w), self.size, self.interpolation)


class CenterCrop(BaseTransform):
    """``center_crop(img, size)``."""

    def __init__(self, size, keys=None):
        super().__init__(keys)
        self.size = (int(size), int(size)) if isinstance(size, numbers.Number) else size

    def _apply_image(self, img):
        return F.center_crop(img, self.size)


class RandomHorizontalFlip(BaseTransform):
    """``hflip`` with probability ``prob``."""

    def __init__(self, prob=0.5, keys=None):
        super().__init__(keys)
        if not 0 <= prob <= 1:
            raise ValueError("RandomHorizontalFlip: prob must be in [0, 1], got {}".format(prob))
        self.prob = prob

    def _apply_image(self, img):
        return F.hflip(img) if random.random() < self.prob else img


class RandomVerticalFlip(BaseTransform):
    """``vflip`` with probability ``prob``."""

    def __init__(self, prob=0.5, keys=None):
        super().__init__(keys)
        if not 0 <= prob <= 1:
            raise ValueError("RandomVerticalFlip: prob must be in [0, 1], got {}".format(prob))
        self.prob = prob

    def _apply_image(self, img):
        return F.vflip(img) if random.random() < self.prob else img


class Normalize(BaseTransform):
    """``normalize(img, mean, std, data_format, to_rgb)``; a single number is used for
    three channels."""

    def __init__(self, mean=0.0, std=1.0, data_format="CHW", to_rgb=False, keys=None):
        super().__init__(keys)
        if data_format not in ("CHW", "HWC"):
            raise ValueError("Normalize: data_format must be 'CHW' or 'HWC', got {!r}".format(data_format))
        if isinstance(mean, numbers.Number):
            mean = [mean, mean, mean]
        if isinstance(std, numbers.Number):
            std = [std, std, std]
        self.mean = mean
        self.std = std
        self.data_format = data_format
        self.to_rgb = to_rgb

    def _apply_image(self, img):
        return F.normalize(img, self.mean, self.std, self.data_format, self.to_rgb)


class Transpose(BaseTransform):
    """Permute a numpy image's axes (HWC -> CHW by default; HW gains a channel axis)."""

    def __init__(self, order=(2, 0, 1), keys=None):
        super().__init__(keys)
        self.order = order

    def _apply_image(self, img):
        if F._is_tensor_image(img):
            return img.transpose(list(self.order))
        if F._is_pil_image(img):
            img = np.asarray(img)
        if img.ndim == 2:
            img = img[..., np.newaxis]
        return img.transpose(self.order)


class BrightnessTransform(BaseTransform):
    """``adjust_brightness`` by a factor drawn uniformly from [max(0, 1 - value), 1 + value]."""

    def __init__(self, value, keys=None):
        super().__init__(keys)
        self.value = _check_input(value, "brightness")

    def _apply_image(self, img):
        if self.value is None:
            return img
        return F.adjust_brightness(img, random.uniform(self.value[0], self.value[1]))


class ContrastTransform(BaseTransform):
    """``adjust_contrast`` by a factor drawn uniformly from [max(0, 1 - value), 1 + value]."""

    def __init__(self, value, keys=None):
        super().__init__(keys)
        if isinstance(value, numbers.Number) and value < 0:
            raise ValueError("ContrastTransform: value must be non-negative, got {}".format(value))
        self.value = _check_input(value, "contrast")

    def _apply_image(self, img):
        if self.value is None:
            return img
        return F.adjust_contrast(img, random.uniform(self.value[0], self.value[1]))


class SaturationTransform(BaseTransform):
    """``adjust_saturation`` by a factor drawn uniformly from [max(0, 1 - value), 1 + value]."""

    def __init__(self, value, keys=None):
        super().__init__(keys)
        self.value = _check_input(value, "saturation")

    def _apply_image(self, img):
        if self.value is None:
            return img
        return F.adjust_saturation(img, random.uniform(self.value[0], self.value[1]))


class HueTransform(BaseTransform):
    """``adjust_hue`` by a factor drawn uniformly from [-value, value] (value <= 0.5)."""

    def __init__(self, value, keys=None):
        super().__init__(keys)
        self.value = _check_input(value, "hue", center=0, bound=(-0.5, 0.5), clip_first_on_zero=False)

    def _apply_image(self, img):
        if self.value is None:
            return img
        return F.adjust_hue(img, random.uniform(self.value[0], self.value[1]))


class ColorJitter(BaseTransform):
    """Brightness, contrast, saturation and hue jitter, in a random order per call."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0, keys=None):
        super().__init__(keys)
        self.brightness = brightness
        self.contrast = contrast
        self.saturation = saturation
        self.hue = hue

    def _get_param(self, brightness, contrast, saturation, hue):
        ts = []
        if brightness is not None:
            ts.append(BrightnessTransform(brightness, self.keys))
        if contrast is not None:
            ts.append(ContrastTransform(contrast, self.keys))
        if saturation is not None:
            ts.append(SaturationTransform(saturation, self.keys))
        if hue is not None:
            ts.append(HueTransform(hue, self.keys))
        random.shuffle(ts)
        return Compose(ts)

    def _apply_image(self, img):
        return self._get_param(self.brightness, self.contrast, self.saturation, self.hue)(img)


class RandomCrop(BaseTransform):
    """A random ``size`` box, after optional ``padding`` (see ``pad``);
    ``pad_if_needed`` pads an image smaller than ``size`` first."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant", keys=None):
        super().__init__(keys)
        self.size = (int(size), int(size)) if isinstance(size, numbers.Number) else size
        self.padding = padding
        self.pad_if_needed = pad_if_needed
        self.fill = fill
        self.padding_mode = padding_mode

    def _get_param(self, img, output_size):
        w, h = F._image_size(img)
        th, tw = output_size
        if w == tw and h == th:
            return 0, 0, h, w
        if h < th or w < tw:
            raise ValueError("RandomCrop: the image ({}x{}, h x w) is smaller than the crop {}x{}; "
                             "pass padding= or pad_if_needed=True".format(h, w, th, tw))
        return random.randint(0, h - th), random.randint(0, w - tw), th, tw

    def _apply_image(self, img):
        if self.padding is not None:
            img = F.pad(img, self.padding, self.fill, self.padding_mode)
        w, h = F._image_size(img)
        if self.pad_if_needed and w < self.size[1]:
            img = F.pad(img, (self.size[1] - w, 0), self.fill, self.padding_mode)
        if self.pad_if_needed and h < self.size[0]:
            img = F.pad(img, (0, self.size[0] - h), self.fill, self.padding_mode)
        i, j, h, w = self._get_param(img, self.size)
        return F.crop(img, i, j, h, w)


class Pad(BaseTransform):
    """``pad(img, padding, fill, padding_mode)``."""

    def __init__(self, padding, fill=0, padding_mode="constant", keys=None):
        if not isinstance(padding, (numbers.Number, list, tuple)):
            raise TypeError("Pad: padding must be a number or a sequence, got {!r}".format(padding))
        if not isinstance(fill, (numbers.Number, str, list, tuple)):
            raise TypeError("Pad: fill must be a number, a string or a sequence, got {!r}".format(fill))
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError("Pad: padding_mode must be constant, edge, reflect or symmetric, got {!r}".format(
                padding_mode))
        if isinstance(padding, list):
            padding = tuple(padding)
        if isinstance(fill, list):
            fill = tuple(fill)
        if isinstance(padding, Sequence) and len(padding) not in (2, 4):
            raise ValueError("Pad: padding must be an int or a 2 or 4 element tuple, got {} elements".format(
                len(padding)))
        super().__init__(keys)
        self.padding = padding
        self.fill = fill
        self.padding_mode = padding_mode

    def _apply_image(self, img):
        return F.pad(img, self.padding, self.fill, self.padding_mode)


def _check_sequence_input(x, name, req_sizes):
    msg = " or ".join(str(s) for s in req_sizes)
    if not isinstance(x, Sequence):
        raise TypeError("{} should be a sequence of length {}, got {!r}".format(name, msg, x))
    if len(x) not in req_sizes:
        raise ValueError("{} should be a sequence of length {}, got {!r}".format(name, msg, x))


def _setup_angle(x, name, req_sizes=(2,)):
    if isinstance(x, numbers.Number):
        if x < 0:
            raise ValueError("If {} is a single number, it must be positive, got {}".format(name, x))
        x = [-x, x]
    else:
        _check_sequence_input(x, name, req_sizes)
    return [float(d) for d in x]


class RandomAffine(BaseTransform):
    """``affine`` with a random angle from ``degrees``, translation up to
    ``translate`` (fractions of width, height), scale from ``scale`` and shear from
    ``shear`` (x range, or x and y ranges)."""

    def __init__(self, degrees, translate=None, scale=None, shear=None, interpolation="nearest", fill=0,
                 center=None, keys=None):
        self.degrees = _setup_angle(degrees, name="degrees", req_sizes=(2,))
        super().__init__(keys)
        if interpolation not in ("nearest", "bilinear", "bicubic"):
            raise ValueError("RandomAffine: interpolation must be nearest, bilinear or bicubic, got {!r}".format(
                interpolation))
        self.interpolation = interpolation
        if translate is not None:
            _check_sequence_input(translate, "translate", req_sizes=(2,))
            for t in translate:
                if not 0.0 <= t <= 1.0:
                    raise ValueError("RandomAffine: translate values must be in [0, 1], got {!r}".format(translate))
        self.translate = translate
        if scale is not None:
            _check_sequence_input(scale, "scale", req_sizes=(2,))
            for s in scale:
                if s <= 0:
                    raise ValueError("RandomAffine: scale values must be positive, got {!r}".format(scale))
        self.scale = scale
        self.shear = None if shear is None else _setup_angle(shear, name="shear", req_sizes=(2, 4))
        if fill is None:
            fill = 0
        elif not isinstance(fill, (Sequence, numbers.Number)):
            raise TypeError("RandomAffine: fill must be a number or a sequence, got {!r}".format(fill))
        self.fill = fill
        if center is not None:
            _check_sequence_input(center, "center", req_sizes=(2,))
        self.center = center

    def _get_param(self, img_size, degrees, translate=None, scale_ranges=None, shears=None):
        angle = random.uniform(degrees[0], degrees[1])
        if translate is not None:
            max_dx = float(translate[0] * img_size[0])
            max_dy = float(translate[1] * img_size[1])
            translations = (int(random.uniform(-max_dx, max_dx)), int(random.uniform(-max_dy, max_dy)))
        else:
            translations = (0, 0)
        scale = random.uniform(scale_ranges[0], scale_ranges[1]) if scale_ranges is not None else 1.0
        shear_x = shear_y = 0.0
        if shears is not None:
            shear_x = random.uniform(shears[0], shears[1])
            if len(shears) == 4:
                shear_y = random.uniform(shears[2], shears[3])
        return angle, translations, scale, (shear_x, shear_y)

    def _apply_image(self, img):
        w, h = F._image_size(img)
        angle, translations, scale, shear = self._get_param([w, h], self.degrees, self.translate, self.scale,
                                                            self.shear)
        return F.affine(img, angle, list(translations), scale, list(shear), interpolation=self.interpolation,
                        fill=self.fill, center=self.center)


class RandomRotation(BaseTransform):
    """``rotate`` by an angle drawn uniformly from ``degrees`` (a number d: [-d, d])."""

    def __init__(self, degrees, interpolation="nearest", expand=False, center=None, fill=0, keys=None):
        if isinstance(degrees, numbers.Number):
            if degrees < 0:
                raise ValueError("RandomRotation: a single number of degrees must be positive, got {}".format(
                    degrees))
            self.degrees = (-degrees, degrees)
        else:
            if len(degrees) != 2:
                raise ValueError("RandomRotation: degrees must be a number or a (min, max) pair, got {!r}".format(
                    degrees))
            self.degrees = degrees
        super().__init__(keys)
        self.interpolation = interpolation
        self.expand = expand
        self.center = center
        self.fill = fill

    def _get_param(self, degrees):
        return random.uniform(degrees[0], degrees[1])

    def _apply_image(self, img):
        return F.rotate(img, self._get_param(self.degrees), self.interpolation, self.expand, self.center, self.fill)


class RandomPerspective(BaseTransform):
    """With probability ``prob``, ``perspective`` moving each corner inwards by up to
    ``distortion_scale`` of half the width/height."""

    def __init__(self, prob=0.5, distortion_scale=0.5, interpolation="nearest", fill=0, keys=None):
        super().__init__(keys)
        if not 0 <= prob <= 1:
            raise ValueError("RandomPerspective: prob must be in [0, 1], got {}".format(prob))
        if not 0 <= distortion_scale <= 1:
            raise ValueError("RandomPerspective: distortion_scale must be in [0, 1], got {}".format(distortion_scale))
        if interpolation not in ("nearest", "bilinear", "bicubic"):
            raise ValueError("RandomPerspective: interpolation must be nearest, bilinear or bicubic, got {!r}"
                             .format(interpolation))
        if not isinstance(fill, (numbers.Number, str, list, tuple)):
            raise TypeError("RandomPerspective: fill must be a number or a sequence, got {!r}".format(fill))
        self.prob = prob
        self.distortion_scale = distortion_scale
        self.interpolation = interpolation
        self.fill = fill

    def get_params(self, width, height, distortion_scale):
        """(start points, end points): the corners and where they move to."""
        dx = int(distortion_scale * (width // 2))
        dy = int(distortion_scale * (height // 2))

        def near(lo, hi):
            return int(random.uniform(lo, hi))
        topleft = [near(0, dx + 1), near(0, dy + 1)]
        topright = [near(width - dx - 1, width), near(0, dy + 1)]
        botright = [near(width - dx - 1, width), near(height - dy - 1, height)]
        botleft = [near(0, dx + 1), near(height - dy - 1, height)]
        start = [[0, 0], [width - 1, 0], [width - 1, height - 1], [0, height - 1]]
        return start, [topleft, topright, botright, botleft]

    def _apply_image(self, img):
        width, height = F._image_size(img)
        if random.random() < self.prob:
            start, end = self.get_params(width, height, self.distortion_scale)
            return F.perspective(img, start, end, self.interpolation, self.fill)
        return img


class Grayscale(BaseTransform):
    """``to_grayscale(img, num_output_channels)``."""

    def __init__(self, num_output_channels=1, keys=None):
        super().__init__(keys)
        self.num_output_channels = num_output_channels

    def _apply_image(self, img):
        return F.to_grayscale(img, self.num_output_channels)


class RandomErasing(BaseTransform):
    """With probability ``prob``, ``erase`` a random box (area a ``scale`` fraction,
    aspect ratio log-uniform in ``ratio``) with ``value`` (a number, one per channel,
    or ``'random'``: normal noise)."""

    def __init__(self, prob=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False, keys=None):
        super().__init__(keys)
        if not isinstance(scale, (tuple, list)) or not (0 <= scale[0] <= scale[1] <= 1):
            raise ValueError("RandomErasing: scale should be (min, max) within [0, 1], got {!r}".format(scale))
        if not isinstance(ratio, (tuple, list)) or not (0 <= ratio[0] <= ratio[1]):
            raise ValueError("RandomErasing: ratio should be (min, max), got {!r}".format(ratio))
        if not 0 <= prob <= 1:
            raise ValueError("RandomErasing: prob must be in [0, 1], got {}".format(prob))
        if not isinstance(value, (numbers.Number, str, tuple, list)):
            raise TypeError("RandomErasing: value should be a number, a sequence or 'random', got {!r}".format(value))
        if isinstance(value, str) and value != "random":
            raise ValueError("RandomErasing: a string value must be 'random', got {!r}".format(value))
        self.prob = prob
        self.scale = scale
        self.ratio = ratio
        self.value = value
        self.inplace = inplace

    def _dynamic_get_param(self, img, scale, ratio, value):
        tensor = F._is_tensor_image(img)
        if F._is_pil_image(img):
            shape = np.asarray(img).shape
            h, w, c = (shape[0], shape[1], 1) if len(shape) == 2 else shape[-3:]
        elif tensor:
            c, h, w = img.shape[-3:]
        else:
            h, w, c = (img.shape[0], img.shape[1], 1) if img.ndim == 2 else img.shape[-3:]
        area = h * w
        log_ratio = np.log(ratio)
        for _ in range(10):
            erase_area = np.random.uniform(*scale) * area
            aspect = np.exp(np.random.uniform(*log_ratio))
            eh = int(round(np.sqrt(erase_area * aspect)))
            ew = int(round(np.sqrt(erase_area / aspect)))
            if eh >= h or ew >= w:
                continue
            if tensor:
                dt = np.dtype(img.dtype)
                v = (np.random.normal(size=[c, eh, ew]).astype(dt) if value is None
                     else np.asarray(value, dtype=dt)[:, None, None])
            elif value is None:
                v = np.random.normal(size=[eh, ew, c]) * 255
            else:
                v = np.array(value)[None, None, :]
            top = np.random.randint(0, h - eh + 1)
            left = np.random.randint(0, w - ew + 1)
            return top, left, eh, ew, v
        return 0, 0, h, w, img

    def _apply_image(self, img):
        if random.random() < self.prob:
            if isinstance(self.value, numbers.Number):
                value = [self.value]
            elif isinstance(self.value, str):
                value = None
            else:
                value = self.value
            if value is not None and len(value) not in (1, 3):
                raise ValueError("RandomErasing: value should be a single number or one per channel (3), got {!r}"
                                 .format(self.value))
            top, left, eh, ew, v = self._dynamic_get_param(img, self.scale, self.ratio, value)
            if v is img:  # no box fitted in 10 draws: Paddle erases with the image itself (a no-op)
                return img
            return F.erase(img, top, left, eh, ew, v, self.inplace)
        return img
