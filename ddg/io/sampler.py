"""Samplers: iterables of dataset indices (``Sampler``) and of index batches
(``BatchSampler``), as in ``paddle.io``.

Random orders come from ddg's global generator (``ddg.seed`` makes them reproducible)
unless a generator is passed. ``DistributedBatchSampler``, the batch sampler that shards
a dataset over the ranks of a data-parallel job, lives in ``ddg.parallel.sampler`` (it
asks the parallel environment for this process's rank); ``ddg.io.DistributedBatchSampler``
names it too, wired by the top-level package so that ``ddg.io`` never imports
``ddg.parallel``.
"""
import numbers

import numpy as np

from ..tensor import backend
from .dataset import IterableDataset

__all__ = ["Sampler", "SequenceSampler", "RandomSampler", "WeightedRandomSampler",
           "SubsetRandomSampler", "BatchSampler"]


class Sampler:
    """Base class: ``__iter__`` yields dataset indices; ``__len__`` says how many."""

    def __init__(self, data_source=None):
        self.data_source = data_source

    def __iter__(self):
        raise NotImplementedError("'{}' must implement __iter__".format(type(self).__name__))

    def __len__(self):
        raise NotImplementedError("'{}' must implement __len__".format(type(self).__name__))


class SequenceSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        super().__init__(data_source)

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _numpy_generator(generator):
    """None -> ddg's global generator; int -> a fresh seeded one; else as given."""
    if generator is None:
        return backend.rng()
    if isinstance(generator, numbers.Integral):
        return np.random.default_rng(int(generator))
    return generator


class RandomSampler(Sampler):
    """A random order of the indices of ``data_source``.

    Without replacement: a permutation (its first ``num_samples`` indices when that is
    given). With replacement: ``num_samples`` (default ``len(data_source)``) uniform draws.
    ``generator`` may be a numpy Generator/RandomState, an int seed, or (as in Paddle) an
    iterable that yields the indices itself.
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        super().__init__(data_source)
        if not isinstance(replacement, bool):
            raise TypeError("RandomSampler: replacement must be a bool, got {!r}".format(replacement))
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None:
            if not isinstance(num_samples, numbers.Integral) or num_samples <= 0:
                raise ValueError("RandomSampler: num_samples must be a positive int, got {!r}"
                                 .format(num_samples))
            if not replacement and num_samples > len(data_source):
                raise ValueError("RandomSampler: num_samples={} exceeds the dataset size {} without "
                                 "replacement".format(num_samples, len(data_source)))

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else int(self._num_samples)

    def __iter__(self):
        n = len(self.data_source)
        gen = self.generator
        if gen is not None and not isinstance(gen, numbers.Integral) and not hasattr(gen, "permutation"):
            it = iter(gen)  # Paddle style: the generator yields the indices
            for _ in range(self.num_samples):
                yield int(next(it))
            return
        gen = _numpy_generator(gen)
        if self.replacement:
            idx = gen.integers(0, n, size=self.num_samples) if hasattr(gen, "integers") \
                else gen.randint(0, n, size=self.num_samples)
        else:
            idx = gen.permutation(n)[:self.num_samples]
        yield from np.asarray(idx).tolist()

    def __len__(self):
        return self.num_samples


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights, num_samples, replacement=True):
        w = np.asarray(weights.numpy() if hasattr(weights, "numpy") else weights, dtype=np.float64)
        if w.ndim != 1 or w.size == 0 or (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be a non-empty 1-D list of "
                             "non-negative finite numbers with a positive sum")
        if not isinstance(num_samples, numbers.Integral) or num_samples <= 0:
            raise ValueError("WeightedRandomSampler: num_samples must be a positive int")
        if not replacement and num_samples > int((w > 0).sum()):
            raise ValueError("WeightedRandomSampler: num_samples exceeds the number of non-zero "
                             "weights without replacement")
        super().__init__(None)
        self.weights = w
        self.num_samples = int(num_samples)
        self.replacement = replacement

    def __iter__(self):
        p = self.weights / self.weights.sum()
        idx = backend.rng().choice(len(p), size=self.num_samples, replace=self.replacement, p=p)
        yield from np.asarray(idx).tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices):
        super().__init__(None)
        self.indices = [int(i) for i in indices]

    def __iter__(self):
        perm = backend.rng().permutation(len(self.indices))
        for i in perm.tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


def _check_batch_args(batch_size, drop_last):
    if not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool) or batch_size <= 0:
        raise ValueError("batch_size must be a positive int, got {!r}".format(batch_size))
    if not isinstance(drop_last, bool):
        raise TypeError("drop_last must be a bool, got {!r}".format(drop_last))


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` (or of a Sequence/RandomSampler over ``dataset``,
    by ``shuffle``) into lists of ``batch_size``; the last short batch is kept unless
    ``drop_last``. Give exactly one of ``dataset`` and ``sampler``."""

    def __init__(self, dataset=None, sampler=None, shuffle=False, batch_size=1, drop_last=False):
        if (dataset is None) == (sampler is None):
            raise ValueError("BatchSampler: give exactly one of dataset and sampler")
        if sampler is not None:
            if shuffle:
                raise ValueError("BatchSampler: shuffle must be False when a sampler is given "
                                 "(the sampler decides the order)")
        else:
            if isinstance(dataset, IterableDataset):
                raise TypeError("BatchSampler: an IterableDataset has no indices to sample")
            if not isinstance(shuffle, bool):
                raise TypeError("BatchSampler: shuffle must be a bool, got {!r}".format(shuffle))
            sampler = RandomSampler(dataset) if shuffle else SequenceSampler(dataset)
        _check_batch_args(batch_size, drop_last)
        super().__init__(dataset)
        self.sampler = sampler
        self.shuffle = shuffle
        self.batch_size = int(batch_size)
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
