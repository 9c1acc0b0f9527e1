"""A training job for tests/test_elastic.py: DataParallel MLP with dropout, Adam under a
StepDecay schedule, a shuffled DistributedBatchSampler, float32, committing through
``ddg.distributed.elastic``. Rank 0 writes the final parameters to ``$OUT`` (npz).

Faults, from the environment: ``KILL_AT="s0,s1,..."``: in attempt k
(``DDG_RESTART_COUNT``) rank ``KILL_RANK`` SIGKILLs itself just before global step s_k;
``MARK``: a file touched once step ``MARK_AT`` is done (then each step sleeps ``SLOW``
seconds) so that a test can SIGTERM the job mid-epoch; ``COMMIT_EVERY`` steps between
commits (default 1); ``WORKERS``: DataLoader worker processes."""
import os
import signal
import time

import numpy as np

import ddg
import ddg.nn.functional as F
from ddg.distributed import elastic
from ddg.io import DataLoader, Dataset, DistributedBatchSampler


class Points(Dataset):
    def __init__(self, n=52):
        g = np.random.default_rng(7)
        self.x = g.standard_normal((n, 6)).astype(np.float32)
        self.y = g.integers(0, 3, n).astype(np.int64)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def main():
    ddg.seed(11)
    ddg.distributed.init_parallel_env()
    rank = ddg.distributed.get_rank()
    net = ddg.nn.Sequential(ddg.nn.Linear(6, 16), ddg.nn.ReLU(), ddg.nn.Dropout(0.3), ddg.nn.Linear(16, 3))
    model = ddg.DataParallel(net)
    sched = ddg.optimizer.lr.StepDecay(learning_rate=0.05, step_size=3, gamma=0.7)
    opt = ddg.optimizer.Adam(learning_rate=sched, parameters=model.parameters())
    data = Points()
    sampler = DistributedBatchSampler(data, batch_size=4, shuffle=True)
    loader = DataLoader(data, batch_sampler=sampler, num_workers=int(os.environ.get("WORKERS", "0")))
    state = elastic.State(model=model, optimizer=opt, lr_scheduler=sched, loader=loader, epoch=0, step=0)
    attempt = int(os.environ.get("DDG_RESTART_COUNT", "0"))
    kills = [int(s) for s in os.environ.get("KILL_AT", "").split(",") if s]
    kill_rank = int(os.environ.get("KILL_RANK", "0"))
    every = int(os.environ.get("COMMIT_EVERY", "1"))
    mark, mark_at = os.environ.get("MARK"), int(os.environ.get("MARK_AT", "-1"))
    slow = float(os.environ.get("SLOW", "0"))

    @elastic.run
    def train(state):
        for epoch in range(state.epoch, 3):
            sampler.set_epoch(epoch)
            for x, y in loader:
                if attempt < len(kills) and state.step == kills[attempt] and rank == kill_rank:
                    os.kill(os.getpid(), signal.SIGKILL)
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                opt.clear_grad()
                state.step += 1
                if state.step % 5 == 0:
                    sched.step()
                if mark and state.step == mark_at and rank == 0:
                    open(mark, "w").close()
                if mark and state.step >= mark_at:
                    time.sleep(slow)
                if state.step % every == 0:
                    state.commit()
            state.epoch = epoch + 1
            state.commit()

    train(state)
    if rank == 0:
        np.savez(os.environ["OUT"], step=state.step, restored=state.restored,
                 **{k: v.numpy() for k, v in net.state_dict().items()})


if __name__ == "__main__":
    main()
