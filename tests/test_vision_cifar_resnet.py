"""Vision end to end: ResNet-18 from ddg.vision.models
trains on a CIFAR-format archive read by ddg.vision.datasets.Cifar10, with RandomCrop
(padding), RandomHorizontalFlip and Normalize run in DataLoader worker processes."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

import cifar_resnet  # noqa: E402


def test_resnet18_trains_on_cifar_archive_with_augmentation_and_workers(tmp_path):
    path = cifar_resnet.synthetic_archive(str(tmp_path / "cifar-10-python.tar.gz"), n_train=48, n_test=8)
    ds = cifar_resnet.paddle.vision.datasets.Cifar10(path, transform=cifar_resnet.train_transform(), backend="cv2")
    x, y = ds[0]
    assert x.shape == (3, 32, 32) and x.dtype == np.float32 and y.dtype == np.int64
    losses, model = cifar_resnet.train(path, epochs=2, batch_size=8, lr=0.005, num_workers=2, max_steps=8,
                                       log=lambda *_: None)
    assert len(losses) == 8 and all(np.isfinite(losses))
    assert np.mean(losses[-3:]) < np.mean(losses[:3]), losses
    assert 0.0 <= cifar_resnet.evaluate(model, path, batch_size=8) <= 1.0
