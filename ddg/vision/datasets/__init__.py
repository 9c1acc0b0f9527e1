"""Image datasets (``paddle.vision.datasets``): MNIST and FashionMNIST (IDX files),
Cifar10 and Cifar100 (the python-pickle archives, read with a restricted unpickler),
Flowers (102flowers.tgz and its .mat files, read without scipy), VOC2012 (the
segmentation tar), DatasetFolder and ImageFolder (image files in folders)."""
from .cifar import Cifar10, Cifar100
from .flowers import Flowers
from .folder import DatasetFolder, ImageFolder
from .mnist import MNIST, FashionMNIST
from .voc2012 import VOC2012

__all__ = ["DatasetFolder", "ImageFolder", "MNIST", "FashionMNIST", "Flowers", "Cifar10", "Cifar100", "VOC2012"]
