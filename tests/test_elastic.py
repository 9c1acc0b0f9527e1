"""Faults that lose nothing: ``ddgrun --max_restarts`` restarts a failed job, which resumes
from ``ddg.distributed.elastic.State``'s last commit and ends with the parameters of an
unfaulted run, bit for bit; SIGTERM commits at the next step and a relaunch finishes the
same; a rank killed while its DataLoader runs worker processes ends the job at once and
leaves no process and no shared-memory file.

The jobs run ``tests/elastic_train.py`` (a DataParallel MLP with dropout, Adam under a
schedule, a shuffled DistributedBatchSampler, float32); the kill steps are drawn at random
(the seed is printed with ``-s``)."""
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import ddg
from ddg.distributed import elastic
from ddg.parallel.comm import launcher_env
from launch import ddgrun, restarts

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(REPO, "tests", "elastic_train.py")
STEPS = {2: 21, 3: 15}             # elastic_train.py's steps at 2 and 3 ranks (3 epochs)


def _env(**extra):
    env = launcher_env.without_launcher(also=("DDG_FORCE_MPI", "DDG_STALL_TIMEOUT", "DDG_RESTART_COUNT",
                                              "DDG_MAX_RESTARTS", "DDG_ELASTIC_DIR"))
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env["DDG_RESTART_PAUSE"] = "0.1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _ddgrun(args, **env):
    return [sys.executable, "-m", "launch.ddgrun"] + list(args)


def _train(n, tmp_path, name, restarts_allowed=0, **env):
    out = tmp_path / f"{name}.npz"
    args = (["--max_restarts", str(restarts_allowed)] if restarts_allowed else []) + ["-n", str(n), TRAIN]
    r = subprocess.run(_ddgrun(args), env=_env(OUT=out, DDG_ELASTIC_DIR=tmp_path / name, **env),
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    return r, out


def _same_parameters(a, b):
    a, b = np.load(a), np.load(b)
    assert int(a["step"]) == int(b["step"])
    names = [k for k in a.files if k not in ("step", "restored")]
    assert names and all(a[k].dtype == np.float32 for k in names)
    for k in names:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    return bool(b["restored"])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The unfaulted run's parameters at each rank count."""
    cache = {}

    def get(n):
        if n not in cache:
            tmp = tmp_path_factory.mktemp(f"ref{n}")
            r, out = _train(n, tmp, "ref")
            assert r.returncode == 0, r.stderr
            assert int(np.load(out)["step"]) == STEPS[n] and not bool(np.load(out)["restored"])
            cache[n] = out
        return cache[n]
    return get


@pytest.mark.parametrize("n,every", [(2, 1), (3, 3)])
def test_killed_rank_restarts_and_ends_bit_identical(n, every, tmp_path, reference):
    """A rank SIGKILLed at a random step, twice (once in each of the first two attempts),
    under --max_restarts 2: the job restarts, resumes from its last commit (every step, or
    every third) and ends exactly where an unfaulted run does."""
    seed = random.randrange(1 << 30)
    g = random.Random(seed)
    first = g.randrange(1, STEPS[n] - 2)
    second = g.randrange(first + 1, STEPS[n])
    kill_rank = g.randrange(n)
    print(f"\nseed {seed}: rank {kill_rank} killed before steps {first} and {second}")
    t0 = time.monotonic()
    r, out = _train(n, tmp_path, "faulted", restarts_allowed=2, KILL_AT=f"{first},{second}",
                    KILL_RANK=kill_rank, COMMIT_EVERY=every)
    print(f"{n} ranks, two faults: {time.monotonic() - t0:.1f} s in all")
    assert r.returncode == 0, (seed, r.stderr[-3000:])
    assert r.stderr.count("[ddgrun] attempt") == 2 and "restart 2 of 2" in r.stderr, r.stderr[-3000:]
    assert "a rank died of SIGKILL" in r.stderr
    # an attempt killed before step s has committed (after step `every`, or at an epoch's
    # end) when s >= every; a restart after a kill before any commit starts from scratch
    assert STEPS[n] // 3 > every
    resumed = sum(1 for s in (first, second) if s >= every)
    assert r.stderr.count("[ddg.elastic] resumed from commit") == resumed, (seed, r.stderr[-3000:])
    assert _same_parameters(reference(n), out), seed


def test_model_fit_restarts_and_ends_bit_identical(tmp_path):
    """The same through ``Model.fit`` with no elastic code in the program (fit commits
    and resumes by itself under --max_restarts), with DataLoader worker processes."""
    fit = os.path.join(REPO, "tests", "elastic_fit.py")
    seed = random.randrange(1 << 30)
    g = random.Random(seed)
    first = g.randrange(1, STEPS[2] - 2)
    second = g.randrange(first + 1, STEPS[2])
    print(f"\nseed {seed}: rank 1 killed before global steps {first} and {second}")
    runs = {}
    for name, extra in (("ref", ["-n", "2", fit]), ("faulted", ["--max_restarts", "2", "-n", "2", fit])):
        env = _env(OUT=tmp_path / f"{name}.npz", WORKERS=2,
                   PYTHONPATH=os.path.join(REPO, "tests") + os.pathsep + REPO)
        if name == "faulted":
            env.update(KILL_AT=f"{first},{second}", KILL_RANK="1", DDG_ELASTIC_DIR=str(tmp_path / "fit"))
        runs[name] = subprocess.run(_ddgrun(extra), env=env, capture_output=True, text=True, timeout=120,
                                    cwd=tmp_path)
        assert runs[name].returncode == 0, (seed, runs[name].stderr[-3000:])
    assert not os.path.exists(tmp_path / "ddg_elastic")       # no restarts asked: fit commits nothing
    err = runs["faulted"].stderr
    assert err.count("[ddg.elastic] resumed from commit") == 2 and "restart 2 of 2" in err, err[-3000:]
    _same_parameters(tmp_path / "ref.npz", tmp_path / "faulted.npz")


def test_failures_past_max_restarts_give_the_last_status(tmp_path):
    r, _ = _train(2, tmp_path, "hopeless", restarts_allowed=1, KILL_AT="2,2", KILL_RANK=1)
    assert r.returncode == 128 + signal.SIGKILL
    assert "no restarts left (--max_restarts 1), giving up" in r.stderr


def test_sigterm_mid_epoch_commits_then_a_relaunch_finishes_bit_identical(tmp_path, reference):
    """SIGTERM to ddgrun (as scancel does) in the middle of an epoch, with DataLoader worker
    processes: every rank commits at the next step and the job exits 75 promptly, without a
    restart; launched again, it resumes mid-epoch and ends as the unfaulted run."""
    mark = tmp_path / "mark"
    args = ["--max_restarts", "2", "-n", "2", TRAIN]
    env = _env(OUT=tmp_path / "p.npz", DDG_ELASTIC_DIR=tmp_path / "p", MARK=mark, MARK_AT=10, SLOW=0.1, WORKERS=2)
    proc = subprocess.Popen(_ddgrun(args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO)
    try:
        end = time.monotonic() + 90
        while not mark.exists() and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        assert mark.exists(), proc.communicate()[1][-3000:]
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"\nSIGTERM to exit {proc.returncode}: {took:.2f} s")
    assert proc.returncode == elastic.PREEMPTED == restarts.PREEMPTED, err[-3000:]
    assert "[ddg.elastic] preempted (SIGTERM): committed" in err and "was preempted" in err
    assert "restart 1 of" not in err
    assert took < 15.0                   # one step (0.1 s) and a commit; slack for a busy machine
    r = subprocess.run(_ddgrun(args), env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "[ddg.elastic] resumed from commit" in r.stderr
    assert _same_parameters(reference(2), tmp_path / "p.npz")


_WORKERS_KILLED = r"""
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
it = iter(DataLoader(Slow(), batch_size=8, num_workers=2, shuffle=True, prefetch_factor=4))
for step, (x, y) in enumerate(it):
    t = ddg.to_tensor(np.ones(3, np.float32))
    ddg.distributed.all_reduce(t)
    if step == 5 and rank == int(sys.argv[1]):
        pids = " ".join(str(p.pid) for p in it._w.procs) if hasattr(it, "_w") else ""
        print(f"KILL {os.getpid()} {pids} {time.time()!r}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
"""


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from /proc (Linux)")
@pytest.mark.parametrize("n,mode", [(2, "process"), (3, "process"), (2, "thread")])
def test_rank_killed_while_its_workers_run_ends_the_job_at_once(n, mode, tmp_path):
    from ddg.io import worker_process
    prog = tmp_path / "prog.py"
    prog.write_text(_WORKERS_KILLED)
    r = subprocess.run(_ddgrun(["-n", str(n), str(prog), str(n - 1)]),
                       env=_env(DDG_STALL_TIMEOUT=60, DDG_DATALOADER_WORKERS=mode),
                       capture_output=True, text=True, timeout=90, cwd=REPO)
    ended = time.time()
    assert r.returncode == 128 + signal.SIGKILL, r.stderr[-3000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("KILL "))
    pids = [int(p) for p in line.split()[1:-1]]
    killed_at = float(line.split()[-1])
    print(f"\n{n} ranks, {mode} workers: SIGKILL to the end of ddgrun: {ended - killed_at:.2f} s")
    assert ended - killed_at < 5.0
    deadline = time.monotonic() + 2.0
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(pids) == (3 if mode == "process" else 1) and not any(_alive(p) for p in pids)   # the rank, its workers
    assert [f for f in os.listdir(worker_process._SHM_DIR) if f.startswith(f"ddg-loader-{pids[0]}-")] == []


# ---------------------------------------------------------------------------
# one process: the State's pieces and ddgrun's restart loop

@pytest.fixture(autouse=True)
def _sigterm_restored():
    """States made in this process take SIGTERM; give it back after each test."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


def _net():
    ddg.seed(3)
    net = ddg.nn.Sequential(ddg.nn.Linear(4, 5), ddg.nn.Dropout(0.5), ddg.nn.Linear(5, 2))
    sched = ddg.optimizer.lr.StepDecay(learning_rate=0.1, step_size=2, gamma=0.5)
    opt = ddg.optimizer.Adam(learning_rate=sched, parameters=net.parameters())
    return net, opt, sched


def _step(net, opt, sched, x):
    net(x).sum().backward()
    opt.step()
    opt.clear_grad()
    sched.step()


def test_state_commit_restore_round_trip(tmp_path):
    x = ddg.to_tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
    net, opt, sched = _net()
    loader = ddg.io.DataLoader(ddg.io.TensorDataset([ddg.arange(10, dtype="float32")]), batch_size=3,
                               shuffle=True)
    state = elastic.State(model=net, optimizer=opt, lr_scheduler=sched, loader=loader,
                          scaler=ddg.amp.GradScaler(init_loss_scaling=1024.0),
                          checkpoint_dir=tmp_path, epoch=2, history=[1.5, 2.5])
    assert state.restore() is False and state.commits == 0
    _step(net, opt, sched, x)
    it = iter(loader)
    seen = [next(it)[0].numpy().tolist()]
    state.commit()
    assert os.listdir(tmp_path) == ["state.ddg"] and state.commits == 1
    # what an unfaulted process does next
    _step(net, opt, sched, x)
    rest = [b[0].numpy().tolist() for b in it]
    want = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    # a fresh process: other initial values, other random state
    ddg.seed(99)
    net2 = ddg.nn.Sequential(ddg.nn.Linear(4, 5), ddg.nn.Dropout(0.5), ddg.nn.Linear(5, 2))
    sched2 = ddg.optimizer.lr.StepDecay(learning_rate=0.1, step_size=2, gamma=0.5)
    opt2 = ddg.optimizer.Adam(learning_rate=sched2, parameters=net2.parameters())
    loader2 = ddg.io.DataLoader(loader.dataset, batch_size=3, shuffle=True)
    scaler2 = ddg.amp.GradScaler(init_loss_scaling=8.0)
    state2 = elastic.State(model=net2, optimizer=opt2, lr_scheduler=sched2, loader=loader2, scaler=scaler2,
                           checkpoint_dir=tmp_path, epoch=0, history=[])
    assert state2.restore() is True and state2.restored and state2.commits == 1
    assert float(np.asarray(scaler2.state_dict()["scale"]).reshape(-1)[0]) == 1024.0
    assert state2.epoch == 2 and state2.history == [1.5, 2.5] and state2.model is net2
    _step(net2, opt2, sched2, x)
    assert [b[0].numpy().tolist() for b in loader2] == rest        # the epoch goes on where it was
    assert len(seen + rest) == 4
    for k, v in net2.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), want[k], err_msg=k)
    state2.epoch = 3
    assert state2.epoch == 3
    with pytest.raises(AttributeError, match="no value or object named 'epochs'"):
        state2.epochs


def test_state_refuses_what_it_cannot_resume(tmp_path):
    class Stream(ddg.io.IterableDataset):
        def __iter__(self):
            return iter(range(3))
    with pytest.raises(ValueError, match="IterableDataset"):
        elastic.State(loader=ddg.io.DataLoader(Stream(), batch_size=2), checkpoint_dir=tmp_path)
    net, _, _ = _net()
    elastic.State(model=net, checkpoint_dir=tmp_path).commit()
    with pytest.raises(ValueError, match="has no 'optimizer'"):
        net2, opt2, _ = _net()
        elastic.State(model=net2, optimizer=opt2, checkpoint_dir=tmp_path).restore()
    (tmp_path / "state.ddg").write_bytes(b"not a checkpoint")
    with pytest.raises(RuntimeError, match="cannot read the commit"):
        elastic.State(model=net, checkpoint_dir=tmp_path).restore()
    for clash in ("commit", "path", "restored", "_x"):
        with pytest.raises(ValueError, match=f"'{clash}' is a name of the State's own"):
            elastic.State(checkpoint_dir=tmp_path, **{clash: 1})
    with pytest.raises(TypeError, match="must be called with an elastic.State"):
        elastic.run(lambda s: None)(3)


def test_commit_of_another_world_size_restores_what_it_can(tmp_path, capsys):
    net, opt, _ = _net()
    state = elastic.State(model=net, optimizer=opt, checkpoint_dir=tmp_path, epoch=4)
    state.commit()
    data = ddg.load(state.path)
    data["world_size"] = 2                           # as if 2 ranks had committed it
    data["ranks"] = data["ranks"] * 2
    ddg.save(data, state.path)
    want = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    ddg.seed(77)
    rng_before = ddg.tensor.backend.get_rng_state()
    net2, opt2, _ = _net()
    ddg.tensor.backend.set_rng_state(rng_before)
    state2 = elastic.State(model=net2, optimizer=opt2, checkpoint_dir=tmp_path, epoch=0)
    assert state2.restore() and state2.epoch == 4
    for k, v in net2.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), want[k])
    assert ddg.tensor.backend.get_rng_state() == rng_before          # not another world's random state
    assert "was made by 2 ranks, this job has 1" in capsys.readouterr().err


def test_run_gives_sigterm_back_when_training_ends(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    net, _, _ = _net()
    state = elastic.State(model=net, checkpoint_dir=tmp_path)
    assert signal.getsignal(signal.SIGTERM) is not before
    assert elastic.run(lambda s, k: k * 2)(state, 4) == 8
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_in_one_process_commits_and_exits_75(tmp_path):
    body = textwrap.dedent(f"""
        import os, signal
        import ddg
        from ddg.distributed import elastic
        net = ddg.nn.Linear(2, 2)
        state = elastic.State(model=net, checkpoint_dir={str(tmp_path)!r}, step=0)
        for step in range(100):
            if step == 4:
                os.kill(os.getpid(), signal.SIGTERM)
            state.step = step
            state.check_preemption()
        """)
    r = subprocess.run([sys.executable, "-c", body], env=_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 75, r.stderr
    assert "preempted (SIGTERM)" in r.stderr
    assert ddg.load(str(tmp_path / "state.ddg"))["shared"]["values"]["step"] == 4


def test_restart_loop_logs_pauses_and_status():
    statuses, logs, sleeps, envs = [137, 1, 0], [], [], []

    def start(env, stopped):
        envs.append((env["DDG_RESTART_COUNT"], env["DDG_MAX_RESTARTS"]))
        return statuses[len(envs) - 1]

    clock = [0.0]

    def fake_sleep(s):
        sleeps.append(s)
        clock[0] += s

    assert restarts.run_with_restarts(start, 3, {}, pause=0.5, log=logs.append, sleep=fake_sleep) == 0
    assert envs == [("0", "3"), ("1", "3"), ("2", "3")]
    assert "attempt 0 failed" in logs[0] and "SIGKILL" in logs[0] and "in 0.5 s (restart 1 of 3)" in logs[0]
    assert "in 1 s (restart 2 of 3)" in logs[1] and len(logs) == 2
    assert abs(sum(sleeps) - 1.5) < 1e-9
    logs.clear()
    assert restarts.run_with_restarts(lambda e, s: 3, 1, {}, pause=0, log=logs.append) == 3
    assert "giving up" in logs[-1] and len(logs) == 2
    logs.clear()
    assert restarts.run_with_restarts(lambda e, s: 75, 5, {}, pause=0, log=logs.append) == 75
    assert "preempted" in logs[0] and len(logs) == 1

    def stopped_start(env, stopped):
        stopped.append(signal.SIGTERM)
        return 143
    logs.clear()
    assert restarts.run_with_restarts(stopped_start, 5, {}, pause=0, log=logs.append) == 143
    assert "stopped by SIGTERM" in logs[0] and len(logs) == 1


def test_restart_options_are_parsed_and_checked(monkeypatch):
    assert ddgrun._parse(["--max_restarts", "3", "-n", "2", TRAIN])[5] == 3
    assert ddgrun._parse(["-n", "2", "--max-restarts=1", TRAIN])[5] == 1
    assert ddgrun._parse(["-n", "2", TRAIN, "--max_restarts", "4"])[5] == 0      # the script's own flag
    for bad in (["--max_restarts", "-1", TRAIN], ["--max_restarts", "two", TRAIN]):
        with pytest.raises(ddgrun.UsageError, match="max_restarts"):
            ddgrun._parse(bad)
    from ddg.distributed import launch as L
    args, _ = L.build(["--max_restart", "3", "--nproc_per_node", "2", "train.py"])
    assert args[:4] == ["--max_restarts", "3", "-n", "2"]
    assert L.build(["--nproc_per_node", "2", "train.py"])[0][:2] == ["-n", "2"]
    monkeypatch.setenv("DDG_RESTART_PAUSE", "soon")
    with pytest.raises(ValueError, match="DDG_RESTART_PAUSE"):
        restarts.restart_pause()


class _Boom(Exception):
    pass


def _fit_program(monkeypatch, fail_at=None):
    """A program with two fits (a fresh process each call); returns its parameters and
    the training batches it ran."""
    from ddg.hapi import callbacks as cb
    monkeypatch.setattr(cb, "_fits", 0)
    seen = []

    class Count(ddg.callbacks.Callback):
        def on_train_batch_begin(self, step, logs=None):
            if fail_at is not None and len(seen) == fail_at:
                raise _Boom(f"a fault before batch {len(seen)}")
            seen.append(step)

    from elastic_train import Points
    ddg.seed(2)
    net = ddg.nn.Sequential(ddg.nn.Linear(6, 8), ddg.nn.Dropout(0.2), ddg.nn.Linear(8, 3))
    model = ddg.Model(net)
    sched = ddg.optimizer.lr.StepDecay(learning_rate=0.05, step_size=5, gamma=0.5)
    model.prepare(ddg.optimizer.Adam(learning_rate=sched, parameters=model.parameters()), ddg.nn.CrossEntropyLoss())
    model.fit(Points(30), batch_size=4, epochs=2, verbose=0, callbacks=[Count()])   # 8 batches an epoch
    model.fit(Points(30), batch_size=4, epochs=1, verbose=0, callbacks=[Count()])
    return {k: v.numpy().copy() for k, v in net.state_dict().items()}, seen


def test_fit_resumes_mid_epoch_and_each_fit_from_its_own_commit(tmp_path, monkeypatch):
    sys.path.insert(0, os.path.join(REPO, "tests"))
    monkeypatch.setenv("DDG_ELASTIC_DIR", str(tmp_path / "straight"))
    want, seen = _fit_program(monkeypatch)
    assert len(seen) == 24 and sorted(os.listdir(tmp_path / "straight")) == ["fit-1", "fit-2"]
    monkeypatch.setenv("DDG_ELASTIC_DIR", str(tmp_path / "faulted"))
    # a fault in the first fit's second epoch (before its batch 3), then, resumed there
    # (5 batches left), one in the second fit (before its batch 4)
    for fail_at in (11, 9):
        with pytest.raises(_Boom):
            _fit_program(monkeypatch, fail_at=fail_at)
    got, seen = _fit_program(monkeypatch)      # resumes at batch 4 of the second fit's only epoch
    assert seen == [4, 5, 6, 7]
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    got, seen = _fit_program(monkeypatch)      # all done: restores, trains nothing
    assert seen == []
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
