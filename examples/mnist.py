"""Data-parallel MNIST: the LeNet of the MNIST tutorial (acceptance s001_mnist.py) trained with Adam on every rank.

    ddgrun -n 2 python examples/mnist.py              # 2 ranks (python examples/mnist.py: 1)
    ddgrun -n 2 python examples/mnist.py --resume     # continue from runs/mnist/checkpoint.pdckpt
    ddgrun -n 2 python examples/mnist.py --device cpu # stay on the CPU on a GPU machine

Each rank reads its own shard of every epoch (DistributedBatchSampler), DataParallel
averages the gradients, and the test accuracy is summed over the ranks' shards of
the test set. Rank 0 shows a progress bar, logs, writes a checkpoint after every
epoch (atomically) and, at the end, a loss/accuracy plot in ``--out``.

Data: ``--data-dir``, else ``$DDG_DATA_DIR``, else ``../shared/data/mnist-10k``
beside the repository (8,000 training / 2,000 test images), else the official files
are downloaded to the cache.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

import ddg
import ddg.distributed as dist
import ddg.nn.functional as F
from ddg import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A training loss above this has diverged: guessing uniformly over the 10 classes
# scores ln(10) = 2.30, so 100 times that is no training at all.
DIVERGED_LOSS = 100 * np.log(10)


# ---------------------------------------------------------------------- the network
class ConvPool(nn.Layer):
    """Convolution, ReLU, then max pooling: one stage of LeNet."""

    def __init__(self, in_channels, out_channels, kernel, pool, stride):
        super().__init__()
        self._conv2d = nn.Conv2D(in_channels, out_channels, kernel)
        self._pool2d = nn.MaxPool2D(kernel_size=pool, stride=stride)

    def forward(self, x):
        return self._pool2d(F.relu(self._conv2d(x)))


class LeNet(nn.Layer):
    """The tutorial's network: two conv/pool stages (20 and 50 filters of 5x5) and a
    linear classifier on the 50x4x4 features. Sublayer names follow the tutorial, so
    its checkpoints load here and vice versa."""

    def __init__(self):
        super().__init__()
        self._simple_img_conv_pool_1 = ConvPool(1, 20, 5, 2, 2)
        self._simple_img_conv_pool_2 = ConvPool(20, 50, 5, 2, 2)
        self._fc = nn.Linear(50 * 4 * 4, 10)

    def forward(self, x):
        x = self._simple_img_conv_pool_2(self._simple_img_conv_pool_1(x))
        return self._fc(ddg.flatten(x, start_axis=1))


# ---------------------------------------------------------------------- helpers
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=None,
                   help="Adam learning rate (default 0.001 x world size: the linear scaling rule for a "
                        "global batch of world size x batch size)")
    p.add_argument("--seed", type=int, default=90)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default=os.path.join("runs", "mnist"))
    p.add_argument("--resume", action="store_true", help="continue from <out>/checkpoint.pdckpt")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                   help="where each rank trains: its own GPU (the one init_parallel_env bound), the CPU, "
                        "or auto (default: the GPU where cupy sees one)")
    return p.parse_args(argv)


def find_data_dir(arg):
    if arg:
        return arg, False
    if os.environ.get("DDG_DATA_DIR"):
        return os.environ["DDG_DATA_DIR"], False
    shared = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "mnist-10k"))
    if os.path.isdir(shared):
        return shared, False
    return None, True          # the dataset's default cache folder, downloading if needed


def log(rank, *args):
    if rank == 0:
        print(*args, flush=True)


def progress(total, rank, desc):
    """A tqdm bar on rank 0 when its output is a terminal; nothing elsewhere, without tqdm,
    or when the output goes to a file or a pipe (a batch job's log, ddgrun), where the
    bar's carriage-return frames would litter the log: there each epoch prints one line."""
    if rank != 0 or not sys.stdout.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True, mininterval=0.5, file=sys.stdout)


def global_sums(*values):
    """Sum a few numbers over all ranks (one all-reduce)."""
    t = ddg.to_tensor(np.array(values, dtype=np.float64))
    dist.all_reduce(t)
    return t.numpy()


def evaluate(model, loader):
    """Test loss and accuracy over the whole test set (each rank holds a shard)."""
    model.eval()
    correct = total = loss_sum = 0.0
    with ddg.no_grad():
        for img, label in loader:
            logits = model(img)
            label = label.reshape([-1])
            loss_sum += float(F.cross_entropy(logits, label, reduction="sum"))
            correct += float((logits.numpy().argmax(axis=1) == label.numpy()).sum())
            total += label.shape[0]
    model.train()
    loss_sum, correct, total = global_sums(loss_sum, correct, total)
    return loss_sum / total, correct / total


def save_plot(history, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: skipping the plot (pip install ddg[plot])")
        return None
    epochs = [h["epoch"] + 1 for h in history]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    a1.plot(epochs, [h["train_loss"] for h in history], "o-", label="train")
    a1.plot(epochs, [h["test_loss"] for h in history], "s-", label="test")
    a1.set_xlabel("epoch"), a1.set_ylabel("cross-entropy"), a1.legend(), a1.set_title("loss")
    a2.plot(epochs, [100 * h["test_acc"] for h in history], "o-", color="tab:green")
    a2.set_xlabel("epoch"), a2.set_ylabel("%"), a2.set_title("test accuracy")
    fig.tight_layout()
    path = os.path.join(out_dir, "mnist.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------- training
def main(argv=None):
    args = parse_args(argv)
    env = dist.init_parallel_env()
    rank, world = env.rank, env.world_size
    device = args.device
    if device == "auto":
        device = "gpu" if ddg.device.cuda.device_count() > 0 else "cpu"
    ddg.set_device(device)     # parameters and batches are made here from now on
    ddg.seed(args.seed)

    folder, download = find_data_dir(args.data_dir)
    train_set = ddg.vision.datasets.MNIST(mode="train", data_dir=folder, download=download)
    test_set = ddg.vision.datasets.MNIST(mode="test", data_dir=folder, download=download)
    sampler = ddg.io.DistributedBatchSampler(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
    if len(sampler) == 0:
        raise ValueError(f"--batch-size {args.batch_size} is larger than this rank's share of the training data "
                         f"({sampler.num_samples} of {len(train_set)} images over {world} rank(s)), so with "
                         f"drop_last an epoch would have 0 steps; use --batch-size {sampler.num_samples} or less")
    train_loader = ddg.io.DataLoader(train_set, batch_sampler=sampler)
    # The test shards are disjoint and unpadded, so the summed counts are exact.
    test_shard = ddg.io.Subset(test_set, list(range(rank, len(test_set), world)))
    test_loader = ddg.io.DataLoader(test_shard, batch_size=256)

    model = ddg.DataParallel(LeNet())
    lr = args.lr if args.lr is not None else 0.001 * world
    opt = ddg.optimizer.Adam(learning_rate=lr, parameters=model.parameters())

    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "checkpoint.pdckpt")
    start, history = 0, []
    if args.resume:
        if not os.path.exists(ckpt):
            raise FileNotFoundError(f"--resume: no checkpoint at {ckpt}")
        state = ddg.load(ckpt)
        if int(state["world_size"]) != world:
            raise ValueError(f"--resume: the checkpoint was written by {state['world_size']} ranks, "
                             f"this job has {world}; the data order would differ")
        model.set_state_dict(state["model"])
        opt.set_state_dict(state["optimizer"])
        ddg.set_rng_state(state["rng"][rank])
        start = int(state["epoch"]) + 1
        history = json.loads(state["history"])
        log(rank, f"resumed from {ckpt} after epoch {start}")

    log(rank, f"MNIST on {ddg.get_device()}: {len(train_set)} training / {len(test_set)} test images, "
              f"{world} rank(s), "
              f"batch {args.batch_size} per rank, {len(sampler)} steps per epoch, Adam lr {lr:g}")
    t_start = time.time()
    for epoch in range(start, args.epochs):
        sampler.set_epoch(epoch)          # the same shuffled order on every rank
        bar = progress(len(sampler), rank, f"epoch {epoch + 1}/{args.epochs}")
        loss_sum, seen = 0.0, 0
        t0 = time.time()
        for step, (img, label) in enumerate(train_loader):
            loss = F.cross_entropy(model(img), label)
            value = float(loss)
            if not value <= DIVERGED_LOSS:   # nan, inf or exploded: every later step would be garbage
                raise FloatingPointError(f"epoch {epoch + 1} step {step + 1}: the training loss is {value:g} on rank "
                                         f"{rank} (chance level is {np.log(10):.2f}, the limit "
                                         f"{DIVERGED_LOSS:.0f}): training diverged; try a smaller --lr than {lr:g}")
            loss.backward()
            opt.step()
            opt.clear_grad()
            loss_sum += value * img.shape[0]
            seen += img.shape[0]
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{value:.4f}")
        if bar is not None:
            bar.close()
        loss_sum, seen = global_sums(loss_sum, seen)
        test_loss, acc = evaluate(model, test_loader)
        history.append({"epoch": epoch, "train_loss": loss_sum / seen, "test_loss": test_loss, "test_acc": acc,
                        "seconds": time.time() - t0})
        log(rank, f"epoch {epoch + 1}/{args.epochs}: train loss {loss_sum / seen:.4f}, test loss "
                  f"{test_loss:.4f}, test accuracy {acc:.4f} ({time.time() - t0:.1f} s)")
        rng_states = []
        dist.all_gather_object(rng_states, ddg.get_rng_state())
        dist.save_checkpoint({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
                              "world_size": world, "rng": rng_states, "history": json.dumps(history)}, ckpt)

    if rank == 0 and history:
        print(f"final test accuracy {history[-1]['test_acc']:.4f} after {len(history)} epoch(s), "
              f"{time.time() - t_start:.1f} s this run; checkpoint {ckpt}")
        if not args.no_plot:
            path = save_plot(history, args.out)
            if path:
                print(f"plot saved to {path}")
    return history


if __name__ == "__main__":
    main()
