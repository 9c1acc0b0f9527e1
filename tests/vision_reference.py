"""Cases for ddg.vision.transforms checked against Paddle's outputs.

``python tests/vision_reference.py`` under a Python with PaddlePaddle (3.3.1 here:
``/tmp/pd/bin/python``) runs every case with ``paddle.vision.transforms`` and writes
the results to ``tests/vision_reference.npz``; ``tests/test_vision_transforms.py``
runs the same cases with ddg (CI has no Paddle) and compares. A case is a function of
``(T, F, make_tensor)``: the transforms module, its functional module and a
CHW-array -> Tensor constructor, so that the same code drives both libraries.
"""
import os
import random

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "vision_reference.npz")


def images():
    rng = np.random.RandomState(7)
    rgb = rng.randint(0, 256, (9, 11, 3)).astype(np.uint8)
    gray = rng.randint(0, 256, (9, 11)).astype(np.uint8)
    return rgb, gray


KIND = {"input": "pil"}
COEFFS = "coeffs__"  # key prefix: the perspective coefficients Paddle used for a case  # the test sets "numpy" to run the same cases on numpy images


def _rgb():
    return images()[0] if KIND["input"] == "numpy" else Image.fromarray(images()[0], "RGB")


def _gray():
    return images()[1] if KIND["input"] == "numpy" else Image.fromarray(images()[1], "L")


START = [[0, 0], [10, 0], [10, 8], [0, 8]]
END = [[1, 2], [9, 0], [10, 7], [2, 8]]

# name -> (function of (T, F, make_tensor), how exact: 0 = equal, else max abs difference)
CASES = {
    "resize_short": (lambda T, F, mk: F.resize(_rgb(), 5), 0),
    "resize_hw_bicubic": (lambda T, F, mk: F.resize(_rgb(), (4, 6), "bicubic"), 0),
    "resize_up_nearest": (lambda T, F, mk: F.resize(_rgb(), 13, "nearest"), 0),
    "resize_gray_lanczos": (lambda T, F, mk: F.resize(_gray(), (7, 5), "lanczos"), 0),
    "resize_same": (lambda T, F, mk: F.resize(_rgb(), 9), 0),
    "pad_int": (lambda T, F, mk: F.pad(_rgb(), 2), 0),
    "pad_fill": (lambda T, F, mk: F.pad(_rgb(), (1, 2), fill=(10, 20, 30)), 0),
    "pad_reflect": (lambda T, F, mk: F.pad(_rgb(), (1, 2, 3, 4), padding_mode="reflect"), 0),
    "pad_edge": (lambda T, F, mk: F.pad(_rgb(), [2, 1], padding_mode="edge"), 0),
    "pad_symmetric_gray": (lambda T, F, mk: F.pad(_gray(), (3, 0, 1, 2), padding_mode="symmetric"), 0),
    "pad_gray_fill": (lambda T, F, mk: F.pad(_gray(), 1, fill=7), 0),
    "affine": (lambda T, F, mk: F.affine(_rgb(), 30, [1, 2], 0.9, [10, 5]), 0),
    "affine_bilinear": (lambda T, F, mk: F.affine(_rgb(), -15, (0, 0), 1.2, 7, "bilinear", fill=0), 0),
    "affine_center": (lambda T, F, mk: F.affine(_rgb(), 45, [2, -1], 1.0, [0, 0], center=[3, 4]), 0),
    "affine_gray": (lambda T, F, mk: F.affine(_gray(), 12, [0, 1], 1.1, [-5, 3], "bicubic", fill=(0,)), 0),
    "rotate": (lambda T, F, mk: F.rotate(_rgb(), 30), 0),
    "rotate_expand": (lambda T, F, mk: F.rotate(_rgb(), 45, "bilinear", expand=True), 0),
    "rotate_center_fill": (lambda T, F, mk: F.rotate(_rgb(), 20, center=(2, 3), fill=50), 0),
    "rotate_gray": (lambda T, F, mk: F.rotate(_gray(), -10, fill=(3,)), 0),
    "perspective": (lambda T, F, mk: F.perspective(_rgb(), START, END), 0),
    "perspective_bilinear": (lambda T, F, mk: F.perspective(_rgb(), START, END, "bilinear"), 0),
    "gray1": (lambda T, F, mk: F.to_grayscale(_rgb()), 0),
    "gray3": (lambda T, F, mk: F.to_grayscale(_rgb(), 3), 0),
    "crop": (lambda T, F, mk: F.crop(_rgb(), 1, 2, 4, 5), 0),
    "center_crop": (lambda T, F, mk: F.center_crop(_rgb(), (4, 6)), 0),
    "brightness": (lambda T, F, mk: F.adjust_brightness(_rgb(), 1.5), 0),
    "contrast": (lambda T, F, mk: F.adjust_contrast(_rgb(), 0.6), 0),
    "saturation": (lambda T, F, mk: F.adjust_saturation(_rgb(), 1.7), 0),
    "hue": (lambda T, F, mk: F.adjust_hue(_rgb(), 0.2), 0),
    "hue_neg": (lambda T, F, mk: F.adjust_hue(_rgb(), -0.4), 0),
    "hue_gray": (lambda T, F, mk: F.adjust_hue(_gray(), 0.3), 0),
    "hflip": (lambda T, F, mk: F.hflip(_rgb()), 0),
    "vflip": (lambda T, F, mk: F.vflip(_rgb()), 0),
    "erase_pil": (lambda T, F, mk: F.erase(_rgb(), 1, 2, 3, 4, np.array([[[10, 20, 30]]])), 0),
    "erase_numpy": (lambda T, F, mk: F.erase(images()[0], 2, 1, 4, 3, np.array([[[1, 2, 3]]])), 0),
    "erase_tensor": (lambda T, F, mk: F.erase(mk(images()[0].transpose(2, 0, 1) / 255.0), 2, 1, 4, 3,
                                              mk(np.array([[[0.5]], [[0.25]], [[1.0]]]))), 1e-7),
    "to_tensor": (lambda T, F, mk: F.to_tensor(_rgb()), 1e-7),
    "to_tensor_hwc_gray": (lambda T, F, mk: F.to_tensor(_gray(), "HWC"), 1e-7),
    "to_tensor_numpy": (lambda T, F, mk: F.to_tensor(images()[0]), 1e-7),
    "to_tensor_float64": (lambda T, F, mk: F.to_tensor(images()[0].astype(np.float64)), 0),
    "normalize_hwc": (lambda T, F, mk: F.normalize(_rgb(), [100, 110, 120], [50, 60, 70], "HWC"), 1e-5),
    "normalize_chw": (lambda T, F, mk: F.normalize(images()[0].transpose(2, 0, 1).astype(np.float32),
                                                   [0.5, 1, 2], [3, 4, 5]), 1e-5),
    "normalize_tensor": (lambda T, F, mk: F.normalize(mk(images()[0].transpose(2, 0, 1) / 255.0),
                                                      [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]), 1e-6),
    "Normalize_scalar_gray": (lambda T, F, mk: T.Normalize(127.5, 127.5)(images()[1].astype(np.float32)), 1e-6),
    "gray_tensor": (lambda T, F, mk: F.to_grayscale(mk(images()[0].transpose(2, 0, 1) / 255.0), 3), 1e-6),
    "Transpose": (lambda T, F, mk: T.Transpose()(_gray()), 0),
    "Pad": (lambda T, F, mk: T.Pad([1, 2, 3, 4], fill=9)(_rgb()), 0),
    "CenterCrop": (lambda T, F, mk: T.CenterCrop(5)(_gray()), 0),
    "Grayscale": (lambda T, F, mk: T.Grayscale(3)(_rgb()), 0),
}


def _seeded(transform, img, n=6):
    random.seed(3)
    np.random.seed(3)
    outs = [as_numpy(transform(img)) for _ in range(n)]  # each output's shape, then its values
    return np.concatenate([np.concatenate([np.asarray(o.shape, np.float64), o.ravel()]) for o in outs])


# Random transforms with Python's and numpy's generators seeded as Paddle's are
SEEDED = {
    "s_resized_crop": lambda T: _seeded(T.RandomResizedCrop(6), _rgb()),
    "s_resized_crop_ratio": lambda T: _seeded(T.RandomResizedCrop((5, 4), scale=(0.9, 1.0), ratio=(3.0, 4.0)),
                                              _rgb()),
    "s_hflip": lambda T: _seeded(T.RandomHorizontalFlip(), _rgb()),
    "s_vflip": lambda T: _seeded(T.RandomVerticalFlip(0.3), _rgb()),
    "s_crop_pad": lambda T: _seeded(T.RandomCrop(7, padding=2), _rgb()),
    "s_crop_pad_if_needed": lambda T: _seeded(T.RandomCrop((12, 13), pad_if_needed=True, fill=4), _rgb()),
    "s_jitter": lambda T: _seeded(T.ColorJitter(0.4, 0.4, 0.4, 0.1), _rgb()),
    "s_brightness": lambda T: _seeded(T.BrightnessTransform(0.5), _rgb()),
    "s_contrast": lambda T: _seeded(T.ContrastTransform(0.6), _rgb()),
    "s_saturation": lambda T: _seeded(T.SaturationTransform(0.8), _rgb()),
    "s_hue": lambda T: _seeded(T.HueTransform(0.3), _rgb()),
    "s_rotation": lambda T: _seeded(T.RandomRotation(20), _rgb()),
    "s_rotation_expand": lambda T: _seeded(T.RandomRotation((10, 80), "bilinear", expand=True, fill=(0,)), _gray()),
    "s_affine": lambda T: _seeded(T.RandomAffine(10, (0.2, 0.1), (0.9, 1.1), 5), _rgb()),
    "s_affine_shear4": lambda T: _seeded(T.RandomAffine(0, shear=(-5, 5, -10, 10)), _rgb()),
    "s_perspective": lambda T: _seeded(T.RandomPerspective(0.7), _rgb()),
    "s_erasing_numpy": lambda T: _seeded(T.RandomErasing(0.8, value=(3, 4, 5)), images()[0]),
    "s_erasing_random": lambda T: _seeded(T.RandomErasing(1.0, value="random"), images()[0].astype(np.float64)),
    "s_erasing_pil": lambda T: _seeded(T.RandomErasing(1.0, scale=(0.1, 0.3), value=7), _rgb()),
    "s_compose": lambda T: _seeded(T.Compose([T.RandomResizedCrop(7), T.RandomHorizontalFlip(),
                                              T.ColorJitter(0.2, 0.2, 0.2, 0.05), T.RandomRotation(15)]), _rgb()),
}


def as_numpy(x):
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        return np.asarray(x.numpy())
    return np.asarray(x)


if __name__ == "__main__":  # regenerate (needs Paddle)
    import paddle
    import paddle.vision.transforms as T
    import paddle.vision.transforms.functional as F

    import paddle.vision.transforms.functional_pil as F_pil

    def mk(a):
        return paddle.to_tensor(np.asarray(a, np.float32))
    # Record the coefficients Paddle computes for each perspective warp: their last bits
    # come from the LAPACK build that solved for them (see test_perspective_*).
    seen, pil_perspective = [], F_pil.perspective

    def recording_perspective(img, coeffs, *args, **kwargs):
        seen.append(np.asarray(coeffs, np.float64))
        return pil_perspective(img, coeffs, *args, **kwargs)
    F_pil.perspective = recording_perspective
    out = {}
    for name, (fn, _) in CASES.items():
        del seen[:]
        out[name] = as_numpy(fn(T, F, mk))
        if seen:
            out[COEFFS + name] = np.stack(seen)
    for name, fn in SEEDED.items():
        del seen[:]
        out[name] = fn(T)
        if seen:
            out[COEFFS + name] = np.stack(seen)
    np.savez_compressed(REF, **out)
    print("{} results of paddle {} written to {}".format(len(out), paddle.__version__, REF))
