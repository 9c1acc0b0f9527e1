"""``Model.fit`` for tests/test_elastic.py: the network, data and optimizer of
elastic_train.py through the high-level API, with no elastic code of its own (under
``ddgrun --max_restarts`` fit commits and resumes by itself). ``KILL_AT``/``KILL_RANK``
as in elastic_train.py, counted in global steps; rank 0 writes the parameters to ``$OUT``."""
import os
import signal

import numpy as np

import ddg
from ddg.callbacks import Callback

from elastic_train import Points


class KillAt(Callback):
    def __init__(self):
        super().__init__()
        attempt = int(os.environ.get("DDG_RESTART_COUNT", "0"))
        kills = [int(s) for s in os.environ.get("KILL_AT", "").split(",") if s]
        self.kill_at = kills[attempt] if attempt < len(kills) else None
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, step, logs=None):
        if (self.epoch * self.params["steps"] + step == self.kill_at
                and ddg.distributed.get_rank() == int(os.environ.get("KILL_RANK", "0"))):
            os.kill(os.getpid(), signal.SIGKILL)


def main():
    ddg.seed(11)
    ddg.distributed.init_parallel_env()
    net = ddg.nn.Sequential(ddg.nn.Linear(6, 16), ddg.nn.ReLU(), ddg.nn.Dropout(0.3), ddg.nn.Linear(16, 3))
    model = ddg.Model(net)
    sched = ddg.optimizer.lr.StepDecay(learning_rate=0.05, step_size=4, gamma=0.7)
    model.prepare(ddg.optimizer.Adam(learning_rate=sched, parameters=model.parameters()),
                  ddg.nn.CrossEntropyLoss())
    model.fit(Points(), batch_size=4, epochs=3, verbose=0, shuffle=True,
              num_workers=int(os.environ.get("WORKERS", "0")), callbacks=[KillAt()])
    if ddg.distributed.get_rank() == 0:
        np.savez(os.environ["OUT"], step=-1, restored=False, **{k: v.numpy() for k, v in net.state_dict().items()})


if __name__ == "__main__":
    main()
