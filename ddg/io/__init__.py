"""ddg.io: datasets, samplers, the DataLoader, and save/load (Paddle's ``paddle.io``).

``DistributedBatchSampler`` is defined in ``ddg.parallel.sampler`` (the parallel layer,
below this one) and made available here as ``ddg.io.DistributedBatchSampler`` by the
top-level package ``ddg``, so that this package imports nothing from ``ddg.parallel``."""
from .dataset import (Dataset, IterableDataset, TensorDataset, Subset, random_split,
                      ComposeDataset, ChainDataset, ConcatDataset)
from .sampler import (Sampler, SequenceSampler, RandomSampler, WeightedRandomSampler,
                      SubsetRandomSampler, BatchSampler)
from .dataloader import DataLoader, default_collate_fn, default_convert_fn, get_worker_info
from .serialization import save, load

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "random_split",
           "ComposeDataset", "ChainDataset", "ConcatDataset",
           "Sampler", "SequenceSampler", "RandomSampler", "WeightedRandomSampler",
           "SubsetRandomSampler", "BatchSampler", "DistributedBatchSampler",
           "DataLoader", "default_collate_fn", "default_convert_fn", "get_worker_info",
           "save", "load"]
