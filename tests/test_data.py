"""Datasets, samplers and the DataLoader (ddg.io)."""
import gc
import os
import threading
import time

import numpy as np
import pytest

from ddg.io import (BatchSampler, ChainDataset, ComposeDataset, ConcatDataset, DataLoader, Dataset,
                    DistributedBatchSampler, IterableDataset, RandomSampler, Sampler, SequenceSampler,
                    Subset, SubsetRandomSampler, TensorDataset, WeightedRandomSampler,
                    default_collate_fn, get_worker_info, random_split)
from ddg.tensor import backend
from ddg.tensor.creation import to_tensor
from ddg.tensor.tensor import Tensor


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return np.full((2,), i * i, dtype=np.float32), np.array([i], dtype=np.int64)

    def __len__(self):
        return self.n


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield np.array([i], np.float32), i


# ---------------------------------------------------------------------------
# datasets

def test_dataset_base_raises():
    with pytest.raises(NotImplementedError):
        Dataset()[0]
    with pytest.raises(NotImplementedError):
        len(Dataset())
    with pytest.raises(NotImplementedError):
        iter(IterableDataset())


def test_tensor_dataset():
    x = to_tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    y = to_tensor(np.arange(4, dtype=np.int64))
    ds = TensorDataset([x, y])
    assert len(ds) == 4
    a, b = ds[2]
    assert isinstance(a, Tensor) and a.shape == [3] and b.shape == []
    np.testing.assert_array_equal(a.numpy(), [6, 7, 8])
    assert int(b.numpy()) == 2
    with pytest.raises(ValueError, match="dim 0"):
        TensorDataset([x, to_tensor(np.arange(5))])
    xs, ys = next(iter(DataLoader(ds, batch_size=3)))
    assert xs.shape == [3, 3] and ys.shape == [3] and ys.dtype == np.int64


def test_subset_concat_compose_chain():
    ds = Squares(10)
    sub = Subset(ds, [9, 0, 3])
    assert len(sub) == 3 and sub[0][1][0] == 9 and sub[2][1][0] == 3
    cat = ConcatDataset([Squares(3), Squares(4)])
    assert len(cat) == 7 and cat[3][1][0] == 0 and cat[-1][1][0] == 3
    with pytest.raises(IndexError):
        cat[7]
    comp = ComposeDataset([Squares(5), Squares(5)])
    assert len(comp) == 5 and len(comp[1]) == 4
    with pytest.raises(ValueError):
        ComposeDataset([Squares(5), Squares(6)])
    chain = ChainDataset([Stream(2), Stream(3)])
    assert [s[1] for s in chain] == [0, 1, 0, 1, 2]


@pytest.mark.parametrize("lengths", [[3, 7], [0, 10], [1, 2, 3, 4], [0.5, 0.5], [0.3, 0.3, 0.4], [0.33, 0.67]])
def test_random_split_partitions(lengths):
    ds = Squares(10)
    parts = random_split(ds, lengths, generator=np.random.default_rng(1))
    allidx = sorted(i for p in parts for i in p.indices)
    assert allidx == list(range(10))
    if isinstance(lengths[0], int):
        assert [len(p) for p in parts] == lengths
    assert sum(len(p) for p in parts) == 10


def test_random_split_errors_and_seed():
    with pytest.raises(ValueError):
        random_split(Squares(10), [3, 3])
    backend.seed(5)
    a = [p.indices for p in random_split(Squares(10), [5, 5])]
    backend.seed(5)
    b = [p.indices for p in random_split(Squares(10), [5, 5])]
    assert a == b


# ---------------------------------------------------------------------------
# samplers

def test_sequence_and_random_sampler():
    ds = Squares(7)
    assert list(SequenceSampler(ds)) == list(range(7))
    backend.seed(3)
    r1 = list(RandomSampler(ds))
    backend.seed(3)
    r2 = list(RandomSampler(ds))
    assert r1 == r2 and sorted(r1) == list(range(7))
    rep = list(RandomSampler(ds, replacement=True, num_samples=20, generator=0))
    assert len(rep) == 20 and all(0 <= i < 7 for i in rep)
    assert len(RandomSampler(ds, num_samples=3)) == 3
    assert list(RandomSampler(ds, num_samples=3, generator=iter([6, 5, 4, 3]))) == [6, 5, 4]
    w = list(WeightedRandomSampler([0, 0, 1.0], 5))
    assert w == [2] * 5
    assert sorted(SubsetRandomSampler([4, 8, 9])) == [4, 8, 9]


@pytest.mark.parametrize("n,bs,drop", [(10, 3, False), (10, 3, True), (9, 3, True), (1, 4, False), (0, 2, False)])
def test_batch_sampler(n, bs, drop):
    ds = Squares(n)
    bsamp = BatchSampler(dataset=ds, batch_size=bs, drop_last=drop)
    batches = list(bsamp)
    assert len(batches) == len(bsamp)
    flat = [i for b in batches for i in b]
    assert flat == list(range(len(flat)))
    assert all(len(b) == bs for b in batches[:-1])
    if drop:
        assert len(flat) == (n // bs) * bs
    else:
        assert len(flat) == n
    shuffled = BatchSampler(dataset=ds, shuffle=True, batch_size=bs)
    assert sorted(i for b in shuffled for i in b) == list(range(n))
    via = BatchSampler(sampler=SequenceSampler(ds), batch_size=bs, drop_last=drop)
    assert list(via) == batches


def test_batch_sampler_arg_errors():
    with pytest.raises(ValueError):
        BatchSampler()
    with pytest.raises(ValueError):
        BatchSampler(dataset=Squares(3), sampler=SequenceSampler(Squares(3)))
    with pytest.raises(ValueError):
        BatchSampler(dataset=Squares(3), batch_size=0)
    with pytest.raises(ValueError):
        BatchSampler(sampler=SequenceSampler(Squares(3)), shuffle=True)


def _all_ranks(n, bs, world, shuffle=False, drop_last=False, epoch=None):
    out = []
    for r in range(world):
        s = DistributedBatchSampler(Squares(n), bs, num_replicas=world, rank=r, shuffle=shuffle,
                                    drop_last=drop_last)
        if epoch is not None:
            s.set_epoch(epoch)
        out.append((s, list(s)))
    return out


@pytest.mark.parametrize("n", [1, 2, 5, 7, 10, 16, 17, 100, 101])
@pytest.mark.parametrize("bs", [1, 3, 4, 8])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("shuffle", [False, True])
def test_distributed_batch_sampler_shards(n, bs, world, shuffle):
    ranks = _all_ranks(n, bs, world, shuffle=shuffle, epoch=0 if shuffle else None)
    per_rank = [[i for b in batches for i in b] for _, batches in ranks]
    num_samples = -(-n // world)
    # every rank: the same number of samples and batches, as len() says
    for s, batches in ranks:
        assert len(batches) == len(s) == -(-num_samples // bs)
        assert all(len(b) == bs for b in batches[:-1])
    assert all(len(p) == num_samples for p in per_rank)
    # together: every index at least once; the padding is the only duplication
    flat = [i for p in per_rank for i in p]
    assert set(flat) == set(range(n))
    assert len(flat) == num_samples * world
    counts = np.bincount(flat, minlength=n)
    if num_samples * world - n <= n:
        assert counts.max() <= 2 and (counts == 2).sum() == num_samples * world - n
    # without padding the shards are disjoint
    if n % world == 0:
        assert len(set(flat)) == len(flat)


@pytest.mark.parametrize("n,bs,world", [(10, 3, 3), (17, 4, 2), (100, 8, 3), (7, 2, 4)])
def test_distributed_batch_sampler_drop_last(n, bs, world):
    ranks = _all_ranks(n, bs, world, drop_last=True)
    counts = {len(batches) for _, batches in ranks}
    assert len(counts) == 1
    for s, batches in ranks:
        assert len(batches) == len(s)
        assert all(len(b) == bs for b in batches)


def test_distributed_batch_sampler_epochs():
    world, n = 3, 20
    e0 = _all_ranks(n, 4, world, shuffle=True, epoch=0)
    e0b = _all_ranks(n, 4, world, shuffle=True, epoch=0)
    e1 = _all_ranks(n, 4, world, shuffle=True, epoch=1)
    assert [b for _, b in e0] == [b for _, b in e0b]  # same epoch: same order
    assert [b for _, b in e0] != [b for _, b in e1]  # new epoch: new order
    # one padded permutation shared by all ranks: together the shards cover the dataset
    for ranks in (e0, e1):
        shards = [[i for b in batches for i in b] for _, batches in ranks]
        assert sorted(i for sh in shards for i in sh) == sorted(list(range(n)) + [0])  # 21 = 20 + one pad
    # not calling set_epoch still changes the order each epoch, identically on every rank
    samplers = [DistributedBatchSampler(Squares(n), 4, num_replicas=world, rank=r, shuffle=True)
                for r in range(world)]
    first = [list(s) for s in samplers]
    second = [list(s) for s in samplers]
    assert first != second
    assert set(i for r in second for b in r for i in b) == set(range(n))
    # and the order does not depend on ddg's global generator
    backend.seed(1)
    a = list(DistributedBatchSampler(Squares(n), 4, num_replicas=2, rank=0, shuffle=True))
    backend.seed(2)
    b = list(DistributedBatchSampler(Squares(n), 4, num_replicas=2, rank=0, shuffle=True))
    assert a == b


def test_distributed_batch_sampler_deals_as_paddle():
    """Batches printed by Paddle 3.3.1's DistributedBatchSampler (two passes each: the
    epoch advances by itself when shuffling)."""
    expect = {
        (10, 3, 3, True, False): [([[6, 1, 4], [3]], [[2, 3, 4], [9]]), ([[0, 2, 8], [0]], [[0, 1, 6], [8]]),
                                  ([[1, 7, 9], [5]], [[0, 7, 1], [5]])],
        (23, 4, 3, True, True): [([[11, 10, 22, 14], [4, 2, 5, 18]], [[13, 18, 3, 14], [21, 1, 16, 0]]),
                                 ([[20, 1, 13, 0], [9, 7, 19, 3]], [[20, 17, 10, 4], [15, 0, 22, 9]]),
                                 ([[16, 8, 6, 17], [0, 21, 15, 12]], [[2, 19, 6, 7], [8, 12, 11, 5]])],
        (10, 3, 2, False, False): [([[0, 1, 2], [6, 7]],) * 2, ([[3, 4, 5], [8, 9]],) * 2],
    }
    for (n, bs, world, shuffle, drop), per_rank in expect.items():
        for r, passes in enumerate(per_rank):
            s = DistributedBatchSampler(Squares(n), bs, num_replicas=world, rank=r, shuffle=shuffle, drop_last=drop)
            assert [[list(map(int, b)) for b in s] for _ in passes] == [list(p) for p in passes]


def test_distributed_batch_sampler_defaults_and_errors():
    s = DistributedBatchSampler(Squares(5), 2)
    assert s.nranks >= 1 and 0 <= s.local_rank < s.nranks
    with pytest.raises(ValueError):
        DistributedBatchSampler(Squares(5), 2, num_replicas=2, rank=2)
    with pytest.raises(ValueError):
        DistributedBatchSampler(Squares(5), 0, num_replicas=2, rank=0)
    loader = DataLoader(Squares(10), batch_sampler=DistributedBatchSampler(Squares(10), 2, 2, 1))
    assert len(loader) == 3
    assert [int(y.numpy()[0, 0]) for _, y in loader] == [2, 6, 9]  # Paddle's dealing: [2, 3], [6, 7], [9]


def test_distributed_batch_sampler_does_not_hide_a_failed_launch(monkeypatch):
    # a process launched as one of several MPI ranks that cannot reach MPI must fail, not
    # carry on as rank 0 of 1 (it would train on every rank's data)
    from ddg.parallel import env

    def broken():
        raise ImportError("ddg: launched as one of 2 MPI ranks but mpi4py does not import")
    monkeypatch.setattr(env, "get_world_size", broken)
    monkeypatch.setattr(env, "get_rank", broken)
    with pytest.raises(ImportError, match="DistributedBatchSampler.*launched as one of 2 MPI ranks"):
        DistributedBatchSampler(Squares(5), 2)
    s = DistributedBatchSampler(Squares(5), 2, num_replicas=2, rank=1)  # explicit: no environment needed
    assert (s.nranks, s.local_rank) == (2, 1)


def test_distributed_batch_sampler_lives_in_the_parallel_layer():
    import ddg.io
    import ddg.parallel.sampler
    assert ddg.io.DistributedBatchSampler is ddg.parallel.sampler.DistributedBatchSampler
    assert DistributedBatchSampler is ddg.parallel.sampler.DistributedBatchSampler
    assert "DistributedBatchSampler" in ddg.io.__all__


# ---------------------------------------------------------------------------
# DataLoader

def _as_numpy(batches):
    out = []
    for b in batches:
        if isinstance(b, Tensor):
            out.append(b.numpy())
        elif isinstance(b, dict):
            out.append({k: v.numpy() for k, v in b.items()})
        else:
            out.append([x.numpy() if isinstance(x, Tensor) else x for x in b])
    return out


def test_default_collate_rules():
    batch = default_collate_fn([(np.zeros((2, 2), np.float64), 1, 2.5, True, "a", {"k": np.int32(4)}),
                                (np.ones((2, 2), np.float64), 2, 3.5, False, "b", {"k": np.int32(5)})])
    img, ints, floats, bools, strs, d = batch
    assert img.shape == (2, 2, 2) and img.dtype == np.float64
    assert ints.dtype == np.int64 and floats.dtype == np.float64 and bools.dtype == np.bool_  # as Paddle
    assert strs == ["a", "b"]
    assert d["k"].dtype == np.int32 and list(d["k"]) == [4, 5]
    with pytest.raises(ValueError, match="fields"):
        default_collate_fn([(1, 2), (1,)])
    with pytest.raises(TypeError, match="object"):
        default_collate_fn([object()])


def test_loader_yields_lists_of_tensors():
    loader = DataLoader(Squares(10), batch_size=4)
    assert len(loader) == 3
    batches = list(loader)
    assert len(batches) == 3
    x, y = batches[0]
    assert isinstance(batches[0], list)
    assert isinstance(x, Tensor) and x.shape == [4, 2] and x.dtype == np.float32
    assert y.shape == [4, 1] and y.dtype == np.int64
    assert batches[-1][0].shape == [2, 2]
    assert len(DataLoader(Squares(10), batch_size=4, drop_last=True)) == 2
    assert len(list(DataLoader(Squares(10), batch_size=4, drop_last=True))) == 2


def test_loader_dict_samples_and_custom_collate():
    class D(Dataset):
        def __getitem__(self, i):
            return {"x": np.array([i, i], np.float32), "y": i}

        def __len__(self):
            return 5

    b = next(iter(DataLoader(D(), batch_size=5)))
    assert set(b) == {"x", "y"} and b["x"].shape == [5, 2] and b["y"].dtype == np.int64
    got = next(iter(DataLoader(D(), batch_size=2, collate_fn=lambda s: np.array([len(s)]))))
    assert isinstance(got, Tensor) and int(got.numpy()[0]) == 2


def test_loader_batch_size_none():
    loader = DataLoader(Squares(3), batch_size=None)
    items = list(loader)
    assert len(loader) == 3 and len(items) == 3
    assert items[2][0].shape == [2] and float(items[2][0].numpy()[0]) == 4.0


def test_loader_shuffle_reproducible_with_seed():
    backend.seed(7)
    a = _as_numpy(DataLoader(Squares(20), batch_size=3, shuffle=True))
    backend.seed(7)
    b = _as_numpy(DataLoader(Squares(20), batch_size=3, shuffle=True))
    for (x1, y1), (x2, y2) in zip(a, b):
        np.testing.assert_array_equal(y1, y2)
    ys = sorted(int(v) for _, y in a for v in y.reshape(-1))
    assert ys == list(range(20))


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_workers_equal_single_thread(workers, shuffle):
    class Slow(Squares):
        def __getitem__(self, i):
            time.sleep(0.001 * ((i * 7) % 3))  # out-of-order completion
            return super().__getitem__(i)

    backend.seed(11)
    ref = _as_numpy(DataLoader(Slow(37), batch_size=4, shuffle=shuffle))
    backend.seed(11)
    got = _as_numpy(DataLoader(Slow(37), batch_size=4, shuffle=shuffle, num_workers=workers,
                               prefetch_factor=2))
    assert len(ref) == len(got) == 10
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(r[0], g[0])
        np.testing.assert_array_equal(r[1], g[1])


def _worker_threads():
    return [t for t in threading.enumerate() if t.name.startswith("ddg-DataLoader")]


def _wait_no_workers(timeout=5.0):
    end = time.time() + timeout
    while _worker_threads() and time.time() < end:
        gc.collect()
        time.sleep(0.01)
    return _worker_threads()


def test_worker_exception_propagates_with_traceback():
    class Bad(Squares):
        def __getitem__(self, i):
            if i == 13:
                raise KeyError("sample 13 is broken")
            return super().__getitem__(i)

    loader = DataLoader(Bad(40), batch_size=4, num_workers=2)
    seen = 0
    with pytest.raises(KeyError, match="sample 13 is broken") as e:
        for _ in loader:
            seen += 1
    assert seen == 3  # batches before the failing one still arrive, in order
    text = "".join(getattr(e.value, "__notes__", [])) + "".join(
        __import__("traceback").format_exception(e.value))
    assert "__getitem__" in text and "worker" in text
    assert _wait_no_workers() == []


def test_worker_init_fn_and_worker_info(monkeypatch):
    monkeypatch.setenv("DDG_DATALOADER_WORKERS", "thread")   # `seen` is shared memory: threads
    seen = []
    lock = threading.Lock()

    def init(wid):
        with lock:
            seen.append(wid)

    class WhoAmI(Squares):
        def __getitem__(self, i):
            info = get_worker_info()
            assert info is not None and info.num_workers == 3
            return super().__getitem__(i)

    assert get_worker_info() is None
    assert len(list(DataLoader(WhoAmI(12), batch_size=2, num_workers=3, worker_init_fn=init))) == 6
    assert sorted(seen) == [0, 1, 2]


def test_early_break_does_not_hang():
    calls = []

    class Counting(Squares):
        def __getitem__(self, i):
            calls.append(i)
            time.sleep(0.002)
            return super().__getitem__(i)

    loader = DataLoader(Counting(10000), batch_size=8, num_workers=2, prefetch_factor=2)
    t0 = time.time()
    for k, _ in enumerate(loader):
        if k == 2:
            break
    assert _wait_no_workers() == []
    assert time.time() - t0 < 10
    # bounded prefetch: only a few batches beyond the ones consumed were ever fetched
    assert len(calls) <= 8 * (3 + 2 * 2 + 2)
    # explicit iterator dropped mid-epoch, then a fresh epoch works
    it = iter(loader)
    next(it)
    del it
    assert _wait_no_workers() == []
    assert len(list(DataLoader(Squares(20), batch_size=8, num_workers=2))) == 3


def test_iterable_dataset_batching(monkeypatch):
    monkeypatch.setenv("DDG_DATALOADER_WORKERS", "thread")   # one stream, read by one thread
    loader = DataLoader(Stream(10), batch_size=4)
    batches = list(loader)
    assert [b[0].shape[0] for b in batches] == [4, 4, 2]
    assert batches[0][1].dtype == np.int64
    assert [b[0].shape[0] for b in DataLoader(Stream(10), batch_size=4, drop_last=True)] == [4, 4]
    with pytest.raises(TypeError):
        len(loader)
    with pytest.raises(ValueError):
        DataLoader(Stream(3), shuffle=True)
    threaded = list(DataLoader(Stream(10), batch_size=4, num_workers=2))
    for a, b in zip(_as_numpy(batches), _as_numpy(threaded)):
        np.testing.assert_array_equal(a[0], b[0])
    assert len(threaded) == 3


def test_iterable_worker_error_and_early_break():
    class BadStream(IterableDataset):
        def __iter__(self):
            yield 1
            raise RuntimeError("stream broke")

    with pytest.raises(RuntimeError, match="stream broke"):
        list(DataLoader(BadStream(), batch_size=1, num_workers=1))

    class Endless(IterableDataset):
        def __iter__(self):
            i = 0
            while True:
                yield np.float32(i)
                i += 1

    for k, _ in enumerate(DataLoader(Endless(), batch_size=2, num_workers=1)):
        if k == 5:
            break
    assert _wait_no_workers() == []


def test_loader_timeout():
    class Stuck(Squares):
        def __getitem__(self, i):
            time.sleep(1.0)
            return super().__getitem__(i)

    with pytest.raises(RuntimeError, match="timed out"):
        next(iter(DataLoader(Stuck(4), batch_size=1, num_workers=1, timeout=0.3)))
    assert _wait_no_workers() == []


def test_custom_sampler_class():
    class Reverse(Sampler):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n - 1, -1, -1))

        def __len__(self):
            return self.n

    loader = DataLoader(Squares(5), batch_sampler=BatchSampler(sampler=Reverse(5), batch_size=2))
    assert [list(y.numpy().reshape(-1)) for _, y in loader] == [[4, 3], [2, 1], [0]]
    with pytest.raises(ValueError):
        DataLoader(Squares(5), batch_sampler=BatchSampler(sampler=Reverse(5)), shuffle=True)


# ---------------------------------------------------------------------------
# worker processes (the default for num_workers > 0 where fork exists)

def _worker_processes():
    import multiprocessing
    return [p for p in multiprocessing.active_children() if p.name.startswith("ddg-DataLoader-worker")]


def _shm_leftovers(pid=None):
    """Shared-memory files of the loading process ``pid`` (this one by default)."""
    from ddg.io import worker_process as W
    return [n for n in os.listdir(W._SHM_DIR) if n.startswith(f"ddg-loader-{pid or os.getpid()}-")]


class WorkerTagged(Squares):
    """Each sample says which worker process made it, and with which seeds."""

    def __getitem__(self, i):
        info = get_worker_info()
        big = np.full((64, 64), float(i), np.float32)          # large enough for shared memory
        return big, np.array([info.id, os.getpid(), info.num_workers, np.random.randint(1 << 30)], np.int64)


def test_process_workers_match_single_process_and_use_several_processes():
    from ddg.io.worker_process import process_workers_available
    if not process_workers_available():
        pytest.skip("no fork here: workers are threads")
    backend.seed(3)
    got = list(DataLoader(WorkerTagged(40), batch_size=4, shuffle=True, num_workers=3))
    backend.seed(3)
    ref = [b[1].numpy()[:, 0] for b in DataLoader(Squares(40), batch_size=4, shuffle=True)]
    # the same shuffled order as without workers, the data intact through shared memory
    firsts = np.concatenate([b[0].numpy()[:, 0, 0] for b in got])
    np.testing.assert_array_equal(firsts, np.concatenate(ref).astype(np.float32))
    assert all((b[0].numpy() == b[0].numpy()[:, :1, :1]).all() for b in got)
    tags = np.concatenate([b[1].numpy() for b in got])
    assert sorted(set(tags[:, 0].tolist())) == [0, 1, 2] and set(tags[:, 2].tolist()) == {3}
    assert len(set(tags[:, 1].tolist())) == 3 and os.getpid() not in set(tags[:, 1].tolist())
    assert len(set(tags[:, 3].tolist())) > 30        # workers draw different random numbers
    backend.seed(3)
    piped = list(DataLoader(WorkerTagged(40), batch_size=4, shuffle=True, num_workers=2, use_shared_memory=False))
    np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in piped]),
                                  np.concatenate([b[0].numpy() for b in got]))
    assert _wait_no_processes() == [] and _shm_leftovers() == []


def _wait_no_processes(timeout=5.0):
    end = time.time() + timeout
    while _worker_processes() and time.time() < end:
        gc.collect()
        time.sleep(0.02)
    return _worker_processes()


def test_process_worker_errors_deaths_and_early_break():
    from ddg.io.worker_process import process_workers_available
    if not process_workers_available():
        pytest.skip("no fork here: workers are threads")

    class Bad(Squares):
        def __getitem__(self, i):
            if i == 13:
                raise KeyError("sample 13 is broken")
            return super().__getitem__(i)

    with pytest.raises(KeyError, match="sample 13 is broken") as err:
        list(DataLoader(Bad(40), batch_size=4, num_workers=2))
    assert "DataLoader worker process" in "".join(getattr(err.value, "__notes__", []))

    class Dies(Squares):
        def __getitem__(self, i):
            if i == 9:
                os.kill(os.getpid(), 9)
            return super().__getitem__(i)

    with pytest.raises(RuntimeError, match=r"worker \d \(pid \d+\) died \(killed by signal 9 \(SIGKILL\)\)"):
        list(DataLoader(Dies(40), batch_size=4, num_workers=2))

    def init(wid):
        if wid == 1:
            raise ValueError("init of worker 1 failed")
    with pytest.raises(ValueError, match="init of worker 1 failed"):
        list(DataLoader(Squares(8), batch_size=2, num_workers=2, worker_init_fn=init))

    for k, _ in enumerate(DataLoader(WorkerTagged(64), batch_size=4, num_workers=2)):
        if k == 2:
            break
    assert _wait_no_processes() == [] and _shm_leftovers() == []


class SplitStream(IterableDataset):
    """Each worker process reads its own share of the stream (Paddle's recipe)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, self.n, step):
            yield np.full((300,), i, np.float32), i


def test_iterable_dataset_in_worker_processes():
    from ddg.io.worker_process import process_workers_available
    if not process_workers_available():
        pytest.skip("no fork here: workers are threads")
    batches = list(DataLoader(SplitStream(21), batch_size=4, num_workers=3))
    seen = sorted(int(v) for b in batches for v in b[1].numpy())
    assert seen == list(range(21))                   # every sample once, in batches from each worker
    assert all(b[0].shape[1] == 300 for b in batches)
    assert _wait_no_processes() == [] and _shm_leftovers() == []


_KILLED_LOADER = r"""
import os, sys, time
import numpy as np
from ddg.io import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 100000
    def __getitem__(self, i):
        time.sleep(0.002)
        return {"x": np.full((32, 32), i, np.float32), "y": np.int64(i)}

it = iter(DataLoader(Slow(), batch_size=4, num_workers=2, prefetch_factor=4))
batch = next(it)
print(" ".join(str(p.pid) for p in it._w.procs), flush=True)
time.sleep(60)
"""


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from /proc (Linux)")
def test_process_workers_end_with_a_killed_loader_and_leave_no_shared_memory():
    """SIGKILL the loading process (as the out-of-memory killer does) while its workers
    have batches in flight: the workers end at once and no shared-memory file stays."""
    import signal
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_LOADER], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        time.sleep(0.3)                          # the workers fill their prefetch slots
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        end = time.time() + 5.0
        while any(_alive(p) for p in pids) and time.time() < end:
            time.sleep(0.02)
        assert not any(_alive(p) for p in pids)
        assert _shm_leftovers(proc.pid) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_process_workers_without_memfd_use_unlinked_files(monkeypatch):
    """Where there is no memfd (macOS), each block is a file in the shared-memory folder,
    removed as soon as it is made: the batches are the same and no file stays."""
    from ddg.io.worker_process import process_workers_available
    if not process_workers_available():
        pytest.skip("no fork here: workers are threads")
    backend.seed(3)
    want = [b[0].numpy() for b in DataLoader(WorkerTagged(24), batch_size=4, shuffle=True, num_workers=2)]
    monkeypatch.delattr(os, "memfd_create", raising=False)
    backend.seed(3)
    got = [b[0].numpy() for b in DataLoader(WorkerTagged(24), batch_size=4, shuffle=True, num_workers=2)]
    assert len(got) == 6
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)
    assert _wait_no_processes() == [] and _shm_leftovers() == []


@pytest.mark.parametrize("workers", ["none", "process", "thread"])
@pytest.mark.parametrize("kind", ["shuffled", "distributed", "sequential"])
def test_position_state_resumes_an_iteration_in_a_fresh_loader(kind, workers, monkeypatch):
    """A loader stopped after k batches and rebuilt elsewhere (other generator state) goes on
    with the same batches as the uninterrupted one, this epoch and the next."""
    from ddg.io import DistributedBatchSampler
    monkeypatch.setenv("DDG_DATALOADER_WORKERS", "thread" if workers == "thread" else "process")
    n = 0 if workers == "none" else 2

    def make():
        ds = Squares(23)
        if kind == "distributed":
            return DataLoader(ds, batch_sampler=DistributedBatchSampler(ds, 3, num_replicas=2, rank=1, shuffle=True),
                              num_workers=n)
        return DataLoader(ds, batch_size=3, shuffle=kind == "shuffled", num_workers=n)

    def ids(batch):
        return batch[1].numpy().reshape(-1).tolist()

    backend.seed(5)
    loader = make()
    want = [[ids(b) for b in loader] for _ in range(2)]
    for k in (0, 2, len(want[0])):
        backend.seed(5)
        loader = make()
        it = iter(loader)
        seen = [ids(next(it)) for _ in range(k)]
        state, rng = loader.position_state(), backend.get_rng_state()
        del it
        backend.seed(1234)
        again = make()
        again.set_position_state(state)
        backend.set_rng_state(rng)
        rest = [[ids(b) for b in again] for _ in range(2)]
        assert seen + rest[0] == want[0] and rest[1] == want[1], (k, kind, workers)
    assert _wait_no_processes() == []


def test_position_state_of_an_iterable_dataset_mid_iteration_is_refused():
    it = iter(DataLoader(SplitStream(9), batch_size=2))
    next(it)
    with pytest.raises(ValueError, match="IterableDataset cannot resume inside an iteration"):
        it._loader.position_state()
