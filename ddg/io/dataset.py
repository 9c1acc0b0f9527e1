"""Datasets: the map-style ``Dataset`` (``__getitem__`` + ``__len__``), the stream-style
``IterableDataset`` (``__iter__``) and a few ways of combining them, as in ``paddle.io``."""
import bisect
import math
import numbers

import numpy as np

from ..tensor import backend

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "random_split",
           "ComposeDataset", "ChainDataset", "ConcatDataset"]


class Dataset:
    """A map-style dataset: subclasses implement ``__getitem__(idx)`` and ``__len__()``."""

    def __getitem__(self, idx):
        raise NotImplementedError("'{}' must implement __getitem__".format(type(self).__name__))

    def __len__(self):
        raise NotImplementedError("'{}' must implement __len__".format(type(self).__name__))


class IterableDataset(Dataset):
    """A stream-style dataset: subclasses implement ``__iter__()``, yielding samples."""

    def __iter__(self):
        raise NotImplementedError("'{}' must implement __iter__".format(type(self).__name__))

    def __getitem__(self, idx):
        raise RuntimeError("'{}' is an IterableDataset and cannot be indexed".format(type(self).__name__))

    def __len__(self):
        raise TypeError("'{}' is an IterableDataset and has no len()".format(type(self).__name__))


def _first_dim(t):
    shape = getattr(t, "shape", None)
    if shape is None or len(shape) == 0:
        raise ValueError("TensorDataset: every tensor needs at least one dimension, got shape {}"
                         .format(shape))
    return int(shape[0])


class TensorDataset(Dataset):
    """Items are tuples ``(t[i] for t in tensors)``, indexing every tensor along axis 0.

    ``tensors`` is a list of ddg Tensors (or numpy arrays) with the same first dimension.
    """

    def __init__(self, tensors):
        tensors = list(tensors)
        if not tensors:
            raise ValueError("TensorDataset: needs at least one tensor")
        n = _first_dim(tensors[0])
        for i, t in enumerate(tensors):
            if _first_dim(t) != n:
                raise ValueError("TensorDataset: tensors must have the same size in dim 0; tensor 0 has {} "
                                 "but tensor {} has {}".format(n, i, _first_dim(t)))
        self.tensors = tensors
        self._n = n

    def __getitem__(self, index):
        out = []
        for t in self.tensors:
            data = getattr(t, "_data", None)
            if data is not None:  # a ddg Tensor: slice its array, no autograd bookkeeping
                from ..tensor.tensor import Tensor
                item = Tensor._wrap(data[index], True) if hasattr(Tensor, "_wrap") else t[index]
            else:
                item = t[index]
            out.append(item)
        return tuple(out)

    def __len__(self):
        return self._n


class Subset(Dataset):
    """The items of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]

    def __getitem__(self, idx):
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


def _permutation(n, generator):
    """A permutation of range(n) drawn from ``generator``: None (ddg's global generator,
    reseeded by ddg.seed), an int seed, or a numpy Generator / RandomState."""
    if generator is None:
        gen = backend.rng()
    elif isinstance(generator, numbers.Integral):
        gen = np.random.default_rng(int(generator))
    else:
        gen = generator
    if not hasattr(gen, "permutation"):
        raise TypeError("generator must be None, an int seed or a numpy Generator, got {}"
                        .format(type(generator).__name__))
    return np.asarray(gen.permutation(n)).tolist()


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping random ``Subset``s of the given lengths.

    ``lengths`` are ints summing to ``len(dataset)``, or fractions summing to 1 (the
    remainder of flooring is handed out one item at a time, round robin).
    """
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(isinstance(x, float) for x in lengths) and math.isclose(sum(lengths), 1.0) \
            and sum(lengths) <= 1.0 + 1e-9:
        if any(x < 0 for x in lengths):
            raise ValueError("random_split: fractions must be non-negative, got {}".format(lengths))
        counts = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if any(int(x) != x or x < 0 for x in lengths):
        raise ValueError("random_split: lengths must be non-negative ints or fractions summing to 1, "
                         "got {}".format(lengths))
    lengths = [int(x) for x in lengths]
    if sum(lengths) != n:
        raise ValueError("random_split: sum of lengths {} != dataset length {}".format(sum(lengths), n))
    perm = _permutation(n, generator)
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[start:start + length]))
        start += length
    return out


class ComposeDataset(Dataset):
    """Zips map-style datasets of equal length: item i is the fields of every dataset's
    item i, concatenated into one tuple."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ComposeDataset: needs at least one dataset")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ComposeDataset: does not take IterableDataset")
            if len(d) != len(self.datasets[0]):
                raise ValueError("ComposeDataset: datasets must have the same length, got {}"
                                 .format([len(x) for x in self.datasets]))

    def __len__(self):
        return len(self.datasets[0])

    def __getitem__(self, idx):
        out = []
        for d in self.datasets:
            sample = d[idx]
            if isinstance(sample, (list, tuple)):
                out.extend(sample)
            else:
                out.append(sample)
        return tuple(out)


class ChainDataset(IterableDataset):
    """Iterates over several IterableDatasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset: takes IterableDatasets, got {}".format(type(d).__name__))

    def __iter__(self):
        for d in self.datasets:
            yield from d


class ConcatDataset(Dataset):
    """Map-style datasets one after another: indices run through the first, then the next."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: needs at least one dataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset: does not take IterableDataset")
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            idx += len(self)
            if idx < 0:
                raise IndexError("ConcatDataset index out of range")
        if idx >= len(self):
            raise IndexError("ConcatDataset index {} out of range for length {}".format(idx, len(self)))
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[d - 1] if d else 0
        return self.datasets[d][idx - start]
