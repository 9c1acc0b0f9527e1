"""How long each fault takes to end or recover a job (ddgrun, 2 ranks by default).

    python bench/bench_faults.py [--ranks N] [--repeats K]

* a rank SIGKILLed while its DataLoader runs worker processes: from the kill to the
  end of ddgrun;
* a rank SIGKILLed under ``--max_restarts 1`` (default pause, ``DDG_RESTART_PAUSE``
  unset: 1 s): from the kill to ddgrun's failure report, and to the restarted job's
  "resumed from commit" line;
* SIGTERM to ddgrun mid-epoch (ranks commit at the next step and exit 75): from the
  signal to the end of ddgrun;
* the cost of one ``State.commit()`` of tests/elastic_train.py's job (measured by the
  job itself with COMMIT_EVERY=1 against a run that commits once per epoch).

Medians over the repeats; the jobs are tests/elastic_train.py and a small DataLoader
program, so the figures are the launcher's and ddg's own, not a model's.
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(REPO, "tests", "elastic_train.py")

_WORKERS = r"""
import os, signal, sys, time
import numpy as np
import ddg
from ddg.io import DataLoader, Dataset
class Slow(Dataset):
    def __len__(self):
        return 100000
    def __getitem__(self, i):
        time.sleep(0.001)
        return np.full((64, 64), i, np.float32), np.int64(i % 10)
ddg.distributed.init_parallel_env()
rank = ddg.distributed.get_rank()
for step, (x, y) in enumerate(DataLoader(Slow(), batch_size=8, num_workers=2, shuffle=True)):
    t = ddg.to_tensor(np.ones(3, np.float32))
    ddg.distributed.all_reduce(t)
    if step == 5 and rank == 1:
        print(f"KILL {time.time()!r}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
"""


def _env(**extra):
    env = dict(os.environ)
    for k in ("DDG_RESTART_PAUSE", "DDG_ELASTIC_DIR", "DDG_RESTART_COUNT", "DDG_MAX_RESTARTS"):
        env.pop(k, None)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _ddgrun(args):
    return [sys.executable, "-m", "launch.ddgrun"] + args


def workers_killed(n, tmp):
    prog = os.path.join(tmp, "workers.py")
    with open(prog, "w") as f:
        f.write(_WORKERS)
    r = subprocess.run(_ddgrun(["-n", str(n), prog]), env=_env(), capture_output=True, text=True, timeout=120)
    ended = time.time()
    line = next(x for x in r.stdout.splitlines() if x.startswith("KILL "))
    return ended - float(line.split()[1])


def killed_and_resumed(n, tmp, k):
    """(kill -> failure reported, kill -> resumed) in seconds."""
    mark = os.path.join(tmp, f"mark{k}")
    env = _env(OUT=os.path.join(tmp, f"r{k}.npz"), DDG_ELASTIC_DIR=os.path.join(tmp, f"e{k}"), KILL_AT="9",
               KILL_RANK="1", MARK=mark, MARK_AT="8")
    proc = subprocess.Popen(_ddgrun(["--max_restarts", "1", "-n", str(n), TRAIN]), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    failed = resumed = None
    t_mark = None
    for line in proc.stderr:
        now = time.time()
        if t_mark is None and os.path.exists(mark):
            t_mark = os.path.getmtime(mark)
        if "[ddgrun] attempt 0 failed" in line:
            failed = now
        if "[ddg.elastic] resumed" in line:
            resumed = now
    proc.wait()
    t_mark = os.path.getmtime(mark)
    return failed - t_mark, resumed - t_mark


def sigterm(n, tmp, k):
    mark = os.path.join(tmp, f"term{k}")
    env = _env(OUT=os.path.join(tmp, f"t{k}.npz"), DDG_ELASTIC_DIR=os.path.join(tmp, f"t{k}"), MARK=mark,
               MARK_AT="8", SLOW="0.05")
    proc = subprocess.Popen(_ddgrun(["-n", str(n), TRAIN]), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    while not os.path.exists(mark):
        time.sleep(0.005)
    t0 = time.time()
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait()
    assert rc == 75, rc
    return time.time() - t0


def commit_cost(n, tmp, k):
    """Seconds per commit: (job time committing every step - committing per epoch) / steps."""
    times = {}
    for every in ("1", "1000"):
        env = _env(OUT=os.path.join(tmp, f"c{k}{every}.npz"), DDG_ELASTIC_DIR=os.path.join(tmp, f"c{k}{every}"),
                   COMMIT_EVERY=every)
        t0 = time.time()
        subprocess.run(_ddgrun(["-n", str(n), TRAIN]), env=env, check=True, capture_output=True)
        times[every] = time.time() - t0
    steps = {2: 21, 3: 15}.get(n, 21)
    return (times["1"] - times["1000"]) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    n = a.ranks
    with tempfile.TemporaryDirectory() as tmp:
        w = [workers_killed(n, tmp) for _ in range(a.repeats)]
        kr = [killed_and_resumed(n, tmp, k) for k in range(a.repeats)]
        t = [sigterm(n, tmp, k) for k in range(a.repeats)]
        c = [commit_cost(n, tmp, k) for k in range(a.repeats)]
    med = statistics.median
    print(f"{n} ranks, median of {a.repeats}:")
    print(f"  rank SIGKILLed with DataLoader worker processes -> job ended:    {med(w):.2f} s")
    print(f"  rank SIGKILLed, --max_restarts 1 -> failure reported:            {med(x[0] for x in kr):.2f} s")
    print(f"  rank SIGKILLed, --max_restarts 1 -> restarted job resumed:       {med(x[1] for x in kr):.2f} s "
          f"(1 s of it the restart pause)")
    print(f"  SIGTERM to ddgrun mid-epoch -> every rank committed, exit 75:    {med(t):.2f} s")
    print(f"  one State.commit() of the test job (MLP, Adam):                  {med(c) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
