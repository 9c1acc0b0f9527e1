"""DistributedBatchSampler: batches of this rank's shard of a dataset (``paddle.io``'s
name; also importable as ``ddg.io.DistributedBatchSampler``).

It lives in the parallel layer because, unless ``num_replicas`` and ``rank`` are given,
it asks the parallel environment for them. It seeds its own generator with the epoch
number, so every rank draws the same order without talking to the others.
"""
import math
import numbers

import numpy as np

from ..io.dataset import IterableDataset
from ..io.sampler import BatchSampler, _check_batch_args
from . import env

__all__ = ["DistributedBatchSampler"]


def _default_world():
    """(world size, rank) of this job from the parallel environment: (1, 0) when no MPI
    launcher started this process. A process that WAS launched as one of several MPI
    ranks but cannot reach MPI gets the environment's error, so that it never goes on
    believing it is alone and trains on every rank's data."""
    try:
        return int(env.get_world_size()), int(env.get_rank())
    except ImportError as exc:
        raise ImportError(f"ddg.io.DistributedBatchSampler: cannot tell this process's rank ({exc}); "
                          f"fix the MPI installation, or pass num_replicas= and rank= explicitly") from exc


class DistributedBatchSampler(BatchSampler):
    """Batches of this rank's shard of ``dataset``, for data-parallel training, dealt as
    Paddle deals them.

    The index list ``0..len(dataset)-1`` is padded by wrapping around to a multiple of
    ``num_replicas``, then (when ``shuffle``) shuffled by ``np.random.RandomState(epoch)``,
    identically on every rank. The ranks then take turns at whole batches: rank r gets
    ``indices[r*B : (r+1)*B]``, then ``indices[(n+r)*B : (n+r+1)*B]``... (B the batch
    size, n the number of ranks); the last, incomplete round is split into n equal
    contiguous pieces. So the shards are disjoint up to the padding, cover the dataset,
    hold the same number of samples and batches, and match Paddle's sample for sample.
    Call ``set_epoch(epoch)`` before each epoch for a new order; if it is never called,
    the epoch advances by one each time a shuffled iteration starts.
    """

    def __init__(self, dataset, batch_size, num_replicas=None, rank=None, shuffle=False,
                 drop_last=False):
        if isinstance(dataset, IterableDataset):
            raise TypeError("DistributedBatchSampler: an IterableDataset has no indices to shard")
        _check_batch_args(batch_size, drop_last)
        if not isinstance(shuffle, bool):
            raise TypeError("DistributedBatchSampler: shuffle must be a bool, got {!r}".format(shuffle))
        if num_replicas is None or rank is None:
            world, me = _default_world()
            num_replicas = world if num_replicas is None else num_replicas
            rank = me if rank is None else rank
        if not isinstance(num_replicas, numbers.Integral) or num_replicas <= 0:
            raise ValueError("DistributedBatchSampler: num_replicas must be a positive int, got {!r}"
                             .format(num_replicas))
        if not isinstance(rank, numbers.Integral) or not 0 <= rank < num_replicas:
            raise ValueError("DistributedBatchSampler: rank must be in [0, {}), got {!r}"
                             .format(num_replicas, rank))
        self.dataset = self.data_source = dataset
        self.sampler = None
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.nranks = self.num_replicas = int(num_replicas)
        self.local_rank = self.rank = int(rank)
        self.epoch = 0
        n = len(dataset)
        self.num_samples = int(math.ceil(n / self.nranks))
        self.total_size = self.num_samples * self.nranks

    def set_epoch(self, epoch):
        """Use ``epoch`` to seed the shuffle of the next iteration (same on every rank)."""
        self.epoch = int(epoch)

    def _padded(self, epoch):
        """The epoch's list of ``total_size`` indices before it is dealt: the dataset's
        indices wrapped around to pad it, shuffled when ``shuffle``."""
        n = len(self.dataset)
        indices = np.arange(n, dtype=np.int64)
        if self.total_size > n and n > 0:
            indices = np.resize(indices, self.total_size)  # pads by repeating from the start
        if self.shuffle:
            np.random.RandomState(epoch).shuffle(indices)  # Paddle's generator and order
        return indices

    def is_padding(self, epoch):
        """A bool per position of the epoch's padded list: True where the sample is one
        of the repeats added to even out the shards."""
        slots = np.arange(self.total_size, dtype=np.int64)
        if self.shuffle:
            np.random.RandomState(epoch).shuffle(slots)  # the same permutation as ``_padded``
        return slots >= len(self.dataset)

    def positions(self, rank=None):
        """Where each sample dealt to ``rank`` (this rank by default) sits in the epoch's
        padded list, in the order the rank gets them: ranks take turns at whole batches,
        the last incomplete round is split into equal contiguous pieces."""
        r = self.rank if rank is None else int(rank)
        b, w = self.batch_size, self.nranks
        if w == 1:
            return np.arange(self.total_size, dtype=np.int64)
        tail = self.total_size % (b * w)  # the last round, smaller than one batch per rank
        mine = [np.arange(start, start + b) for start in range(r * b, self.total_size - tail, b * w)]
        piece = tail // w
        base = self.total_size - tail
        mine.append(np.arange(base + r * piece, base + (r + 1) * piece))
        return np.concatenate(mine).astype(np.int64)

    def _indices(self):
        self.dealt_epoch = self.epoch
        return self._padded(self.epoch)[self.positions()].tolist()

    def __iter__(self):
        mine = self._indices()
        if self.shuffle:
            self.epoch += 1  # as in Paddle: a fresh order next time unless set_epoch says otherwise
        for start in range(0, len(mine), self.batch_size):
            batch = mine[start:start + self.batch_size]
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def __len__(self):
        if self.drop_last:
            return self.num_samples // self.batch_size
        return (self.num_samples + self.batch_size - 1) // self.batch_size
