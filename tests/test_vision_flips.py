import numpy as np
import pytest
from PIL import Image

import ddg.vision.transforms as T


def test_flips_numpy_and_pil():
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    np.testing.assert_array_equal(T.hflip(img), img[:, ::-1])
    np.testing.assert_array_equal(T.vflip(img), img[::-1])
    pil = Image.fromarray(img)
    out = T.hflip(pil)
    assert isinstance(out, Image.Image)
    np.testing.assert_array_equal(np.asarray(out), img[:, ::-1])
    np.testing.assert_array_equal(np.asarray(T.vflip(pil)), img[::-1])


def test_random_flip_prob():
    img = np.arange(6, dtype=np.uint8).reshape(2, 3)
    np.testing.assert_array_equal(T.RandomHorizontalFlip(1.0)(img), img[:, ::-1])
    np.testing.assert_array_equal(T.RandomVerticalFlip(0.0)(img), img)
    with pytest.raises(ValueError):
        T.RandomHorizontalFlip(1.5)
    with pytest.raises(TypeError):
        T.hflip(np.zeros(3))
