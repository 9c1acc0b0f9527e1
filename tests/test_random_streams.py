"""Random streams per process: unseeded, every rank and every run draws its own numbers
(as Paddle and PyTorch do); ``ddg.seed(n)`` makes a run repeat, the same on every rank;
DataParallel still starts every rank from rank 0's parameters. Two 2-rank jobs through
ddgrun, compared with each other."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ddg
from ddg.parallel.comm import launcher_env
from ddg.tensor import backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DDGRUN = os.path.join(ROOT, "launch", "ddgrun.py")

PROGRAM = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import ddg, ddg.distributed as dist
    from ddg import nn

    def draws():
        x = ddg.rand([6]).numpy().tolist()
        drop = nn.Dropout(0.5)
        drop.train()
        mask = (drop(ddg.ones([32])).numpy() > 0).astype(int).tolist()
        ds = ddg.io.TensorDataset([ddg.arange(12)])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            order = [int(v) for (b,) in ddg.io.DataLoader(ds, batch_size=4, shuffle=True) for v in b.numpy()]
            ddg.io.DataLoader(ds, batch_size=3, shuffle=True)
        warned = sum("every rank iterates over the whole dataset" in str(w.message) for w in caught)
        return {"rand": x, "mask": mask, "order": order, "warned": warned}

    dist.init_parallel_env()
    rank = dist.get_rank()
    out = {"rank": rank, "unseeded": draws()}
    model = ddg.DataParallel(nn.Linear(5, 4))
    flat = np.concatenate([p.numpy().ravel() for p in model.parameters()])
    everyone = []
    dist.all_gather_object(everyone, flat.tolist())
    out["dp_params_equal"] = all(e == everyone[0] for e in everyone)
    ddg.seed(2024)
    out["seeded"] = draws()
    out["initial_seed"] = ddg.tensor.backend.initial_seed()
    with open(sys.argv[1] + f".rank{rank}.json", "w") as f:  # one file per rank: their stdout interleaves
        json.dump(out, f)
""")


def _run_two_ranks(script, out):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    for k in launcher_env.LAUNCHER_VARS + ("DDG_FORCE_MPI", "DDG_SEED"):
        env.pop(k, None)
    res = subprocess.run([sys.executable, DDGRUN, "-n", "2", sys.executable, str(script), str(out)],
                         capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    ranks = {}
    for rank in (0, 1):
        with open(f"{out}.rank{rank}.json") as f:
            ranks[rank] = json.load(f)
    assert [ranks[r]["rank"] for r in (0, 1)] == [0, 1]
    return ranks


def test_two_ranks_unseeded_differ_seeded_repeat(tmp_path):
    script = tmp_path / "streams.py"
    script.write_text(PROGRAM)
    run1, run2 = _run_two_ranks(script, tmp_path / "run1"), _run_two_ranks(script, tmp_path / "run2")
    for run in (run1, run2):
        a, b = run[0], run[1]
        # unseeded: each rank its own numbers, dropout masks and shuffle order
        for key in ("rand", "mask", "order"):
            assert a["unseeded"][key] != b["unseeded"][key], key
            # seeded alike: the same on every rank
            assert a["seeded"][key] == b["seeded"][key], key
        assert a["initial_seed"] == b["initial_seed"] == 2024
        # DataParallel broadcasts rank 0's initial parameters although the ranks drew different ones
        assert a["dp_params_equal"] and b["dp_params_equal"]
        # a shuffling DataLoader without a distributed sampler warns once per process
        assert a["unseeded"]["warned"] == b["unseeded"]["warned"] == 1
        assert a["seeded"]["warned"] == b["seeded"]["warned"] == 0
        assert sorted(a["unseeded"]["order"]) == list(range(12))
    for rank in (0, 1):
        for key in ("rand", "mask", "order"):
            # run to run: unseeded differs, seeded repeats
            assert run1[rank]["unseeded"][key] != run2[rank]["unseeded"][key], key
            assert run1[rank]["seeded"][key] == run2[rank]["seeded"][key], key


def _start(seed):
    env = {k: v for k, v in os.environ.items() if k != "DDG_SEED"}
    if seed is not None:
        env["DDG_SEED"] = seed
    code = "import ddg; from ddg.tensor import backend; print(backend.initial_seed(), ddg.rand([4]).numpy().tolist())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)


def test_start_seed_from_environment():
    # DDG_SEED fixes the start seed of a program that never calls ddg.seed; unset, runs differ
    a, b, c, d = _start("77"), _start(" 77 "), _start(None), _start(None)
    assert a.returncode == b.returncode == c.returncode == d.returncode == 0, a.stderr + c.stderr
    assert a.stdout == b.stdout and a.stdout.split()[0] == "77"
    ddg.seed(77)
    assert a.stdout.split(" ", 1)[1].strip() == str(ddg.rand([4]).numpy().tolist())
    assert c.stdout != d.stdout
    for bad in ("-3", "seven"):
        res = _start(bad)
        assert res.returncode != 0 and "DDG_SEED must be an integer >= 0" in res.stderr, res.stderr[-500:]


def test_seed_in_process():
    ddg.seed(5)
    a = ddg.randn([3, 4]).numpy()
    assert backend.initial_seed() == 5
    state = ddg.get_rng_state()
    b = ddg.randn([3, 4]).numpy()
    ddg.seed(5)
    np.testing.assert_array_equal(ddg.randn([3, 4]).numpy(), a)
    ddg.set_rng_state(state)
    np.testing.assert_array_equal(ddg.randn([3, 4]).numpy(), b)
    with pytest.raises(ValueError, match="ddg.seed"):
        ddg.seed(-1)
    with pytest.raises(TypeError, match="ddg.seed"):
        ddg.seed("3")

