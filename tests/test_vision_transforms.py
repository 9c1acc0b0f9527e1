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


def test_resize_matches_paddle_pil():
    # expected shapes and sums from Paddle 3.3.1's F.resize on the same PIL image
    rng = np.random.RandomState(0)
    img = rng.randint(0, 256, (5, 7, 3)).astype(np.uint8)
    pil = Image.fromarray(img)
    for size, shape, total in [(3, (3, 4, 3), 4432), ((4, 6), (4, 6, 3), 8897),
                               (9, (9, 12, 3), 40164)]:
        out = T.Resize(size)(pil)
        assert isinstance(out, Image.Image)
        o = np.asarray(out)
        assert o.shape == shape and int(o.astype(int).sum()) == total
        n = T.resize(img, size)
        assert isinstance(n, np.ndarray) and n.shape == shape and n.dtype == np.uint8
    o = np.asarray(T.resize(pil, 3, "nearest"))
    assert o.shape == (3, 4, 3) and int(o.astype(int).sum()) == 4522
    with pytest.raises(ValueError):
        T.resize(img, 3, "cubic")


def test_crops_match_paddle():
    # expected values from Paddle 3.3.1 on the same PIL image
    img = np.arange(5 * 7, dtype=np.uint8).reshape(5, 7)
    for x in (img, Image.fromarray(img)):
        assert np.asarray(T.CenterCrop(2)(x)).tolist() == [[16, 17], [23, 24]]
        assert np.asarray(T.center_crop(x, (3, 4))).tolist() == [
            [9, 10, 11, 12], [16, 17, 18, 19], [23, 24, 25, 26]]
        assert np.asarray(T.crop(x, 1, 2, 2, 3)).tolist() == [[9, 10, 11], [16, 17, 18]]
        assert isinstance(T.crop(x, 0, 0, 1, 1), type(x))
