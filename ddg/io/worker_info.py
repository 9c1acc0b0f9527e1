"""What a DataLoader worker (process or thread) knows of itself."""
import threading

__all__ = ["WorkerInfo", "get_worker_info"]

_worker_local = threading.local()


class WorkerInfo:
    """What a DataLoader worker knows of itself: ``id``, ``num_workers``, ``dataset``
    (its own copy in a worker process) and ``seed`` (that worker's seed; None in
    threads)."""

    def __init__(self, id, num_workers, dataset, seed=None):
        self.id = id
        self.num_workers = num_workers
        self.dataset = dataset
        self.seed = seed

    def __repr__(self):
        return "WorkerInfo(id={}, num_workers={})".format(self.id, self.num_workers)


def get_worker_info():
    """In a DataLoader worker (process or thread): its ``WorkerInfo``; else None. An
    IterableDataset uses it to give each worker its own share of the stream."""
    return getattr(_worker_local, "info", None)
