"""ResNet-18 on CIFAR-10 with the usual augmentation, through ddg.vision.

    python examples/cifar_resnet.py --data-file cifar-10-python.tar.gz --epochs 1
    python examples/cifar_resnet.py --download              # fetch the official archive (170 MB)
    python examples/cifar_resnet.py --synthetic 256          # a made-up archive of 256 images (no download)
    ddgrun -n 2 python examples/cifar_resnet.py --synthetic 256   # data-parallel

``ddg.vision.datasets.Cifar10`` reads the official python archive (its pickled batches
through a restricted unpickler); the training transforms are ``RandomCrop(32,
padding=4)``, ``RandomHorizontalFlip()``, ``Transpose()`` and ``Normalize`` with CIFAR's
channel means and deviations, run by a DataLoader with worker processes. Written with
``import ddg as paddle`` so it reads as the Paddle program it is.
"""
import argparse
import io
import os
import struct
import sys
import tarfile
import time

import numpy as np

import ddg as paddle
import ddg.nn.functional as F
from ddg.vision import transforms as T

MEAN = [125.31, 122.95, 113.87]
STD = [62.99, 62.09, 66.70]


def train_transform():
    return T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.Transpose(),
                      T.Normalize(mean=MEAN, std=STD, data_format="CHW")])


def test_transform():
    return T.Compose([T.Transpose(), T.Normalize(mean=MEAN, std=STD, data_format="CHW")])


def _py2_string(b):
    return (b"U" + bytes([len(b)]) + b) if len(b) < 256 else (b"T" + struct.pack("<I", len(b)) + b)


def _batch_pickle(data, labels):
    """One CIFAR batch as the official archive pickles it (Python 2, protocol 2)."""
    out = [b"\x80\x02}(", _py2_string(b"data"),
           b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85", _py2_string(b"b"), b"\x87R(K\x01(",
           b"".join(b"J" + struct.pack("<i", d) for d in data.shape), b"tcnumpy\ndtype\n", _py2_string(b"u1"),
           b"K\x00K\x01\x87R(K\x03", _py2_string(b"|"), b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89",
           _py2_string(data.tobytes()), b"tb", _py2_string(b"labels"), b"](",
           b"".join(b"K" + bytes([int(v)]) for v in labels), b"eu."]
    return b"".join(out)


def synthetic_archive(path, n_train, n_test=64, seed=0):
    """A cifar-10-python.tar.gz of random-ish images whose class shows in their colour
    (so a network can learn it), in the official format."""
    rng = np.random.RandomState(seed)
    tmp = "{}.{}.part".format(path, os.getpid())  # ranks may write it at once: each its own, then a rename
    with tarfile.open(tmp, "w:gz") as tar:
        for name, n in (("data_batch_1", n_train), ("test_batch", n_test)):
            labels = rng.randint(0, 10, n)
            base = np.stack([(labels * 25) % 256, (labels * 70) % 256, (255 - labels * 25) % 256], 1)
            img = base[:, :, None, None] + rng.randint(-40, 40, (n, 3, 32, 32))
            data = np.clip(img, 0, 255).astype(np.uint8).reshape(n, 3072)
            blob = _batch_pickle(data, labels)
            info = tarfile.TarInfo("cifar-10-batches-py/" + name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    os.replace(tmp, path)
    return path


def train(data_file, epochs=1, batch_size=64, lr=0.05, num_workers=2, max_steps=None, download=False,
          log=print, seed=0, optimizer="momentum"):
    """Train ResNet-18; returns the list of training losses (one per step)."""
    paddle.seed(seed)
    np.random.seed(seed)
    paddle.distributed.init_parallel_env()
    world = paddle.distributed.get_world_size()
    train_set = paddle.vision.datasets.Cifar10(data_file, mode="train", transform=train_transform(),
                                               download=download, backend="cv2")
    sampler = paddle.io.DistributedBatchSampler(train_set, batch_size=batch_size, shuffle=True, drop_last=True)
    loader = paddle.io.DataLoader(train_set, batch_sampler=sampler, num_workers=num_workers)
    model = paddle.vision.models.resnet18(num_classes=10)
    if world > 1:
        model = paddle.DataParallel(model)
    if optimizer == "adam":
        opt = paddle.optimizer.Adam(learning_rate=lr, parameters=model.parameters())
    else:
        opt = paddle.optimizer.Momentum(learning_rate=lr, momentum=0.9, parameters=model.parameters(),
                                        weight_decay=5e-4)
    losses = []
    step = 0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        model.train()
        t0, in_epoch = time.time(), 0
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.clear_grad()
            losses.append(float(loss))
            step += 1
            in_epoch += 1
            if step % 10 == 0 or step == 1:
                log("epoch {} step {} loss {:.4f} ({:.2f} s/step)".format(epoch, step, losses[-1],
                                                                         (time.time() - t0) / in_epoch))
            if max_steps is not None and step >= max_steps:
                return losses, model
    return losses, model


def evaluate(model, data_file, batch_size=128):
    test_set = paddle.vision.datasets.Cifar10(data_file, mode="test", transform=test_transform(), download=False,
                                              backend="cv2")
    loader = paddle.io.DataLoader(test_set, batch_size=batch_size)
    model.eval()
    right = total = 0
    with paddle.no_grad():
        for x, y in loader:
            pred = model(x).numpy().argmax(1)
            right += int((pred == y.numpy().reshape(-1)).sum())
            total += len(pred)
    return right / max(1, total)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-file", help="cifar-10-python.tar.gz (default: the cache, see --download)")
    p.add_argument("--download", action="store_true", help="download the official archive if it is not cached")
    p.add_argument("--synthetic", type=int, metavar="N", help="train on a made-up archive of N images")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--num-workers", type=int, default=2)
    p.add_argument("--max-steps", type=int)
    a = p.parse_args(argv)
    paddle.distributed.init_parallel_env()
    log = print if paddle.distributed.get_rank() == 0 else (lambda *_: None)
    data_file = a.data_file
    if a.synthetic:
        os.makedirs("runs", exist_ok=True)
        data_file = synthetic_archive(data_file or os.path.join("runs", "cifar-synthetic.tar.gz"), a.synthetic)
    losses, model = train(data_file, a.epochs, a.batch_size, a.lr, a.num_workers, a.max_steps, a.download, log)
    log("first loss {:.4f}, last loss {:.4f}".format(losses[0], losses[-1]))
    if data_file is None:
        from ddg.vision.datasets._common import cache_dir
        data_file = os.path.join(cache_dir("cifar"), "cifar-10-python.tar.gz")
    log("test accuracy {:.4f}".format(evaluate(model, data_file)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
