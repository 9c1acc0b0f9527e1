"""Optimizer step cost: ddg's in-place Adam/Momentum/SGD step against a naive numpy
Adam written with temporaries (the ratio is what matters; absolute times are noise).

    PYTHONPATH=. python bench/bench_optimizer.py [--gpu]
"""
import sys
import time

import numpy as np

import ddg
from ddg import nn

LENET = [(6, 1, 5, 5), (6,), (16, 6, 5, 5), (16,), (400, 120), (120,), (120, 84), (84,), (84, 10), (10,)]
BIG = [(1024, 1024)] * 8 + [(1024,)] * 8


def params_for(shapes, gpu):
    rng = np.random.default_rng(0)
    ps = []
    for s in shapes:
        p = nn.Parameter(rng.standard_normal(s).astype(np.float32))
        p.grad = rng.standard_normal(s).astype(np.float32)
        if gpu:
            p._data = ddg.to_tensor(p._data, place="gpu")._data
            p.grad = ddg.to_tensor(p.grad._data, place="gpu")._data
        ps.append(p)
    return ps


def timeit(fn, n, sync):
    fn()
    sync()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t) / n


def naive_adam(ps, state, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    state["t"] = t = state.get("t", 0) + 1
    for p in ps:
        g = p.grad._data
        m, v = state.setdefault(id(p), [0 * g, 0 * g])
        m[...] = b1 * m + (1 - b1) * g
        v[...] = b2 * v + (1 - b2) * g * g
        p._data -= lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) if not gpu else \
            lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)) ** 0.5 + eps)


gpu = "--gpu" in sys.argv
sync = ddg.tensor.backend.synchronize if gpu else (lambda: None)
for label, shapes, n in (("lenet", LENET, 2000), ("8x1Mi", BIG, 50)):
    ps = params_for(shapes, gpu)
    st = {}
    t_naive = timeit(lambda: naive_adam(ps, st), n, sync)
    row = [f"{label:6s} naive-adam {t_naive * 1e6:9.1f} us"]
    for name, opt in (("Adam", ddg.optimizer.Adam(1e-3, parameters=ps)),
                      ("AdamW", ddg.optimizer.AdamW(1e-3, parameters=ps)),
                      ("Momentum", ddg.optimizer.Momentum(1e-3, parameters=ps)),
                      ("SGD", ddg.optimizer.SGD(1e-3, parameters=ps))):
        t = timeit(opt.step, n, sync)
        row.append(f"{name} {t * 1e6:9.1f} us ({t / t_naive:.2f}x naive)")
    print(" | ".join(row))

# Fused step (one group updated with whole-buffer calls, ddg/optimizer/fused.py) against the
# per-parameter path (opt._use_fused = False), both timed in this run.
print()
for label, shapes, n in (("400x[512]", [(512,)] * 400, 200), ("100x[64,64]", [(64, 64)] * 100, 100),
                         ("4x[1024,1024]", [(1024, 1024)] * 4, 20)):
    ps = params_for(shapes, gpu)
    row = [f"{label:14s}"]
    for name, make in (("Adam", lambda: ddg.optimizer.Adam(1e-3, parameters=ps)),
                       ("AdamW", lambda: ddg.optimizer.AdamW(1e-3, parameters=ps)),
                       ("Momentum", lambda: ddg.optimizer.Momentum(1e-3, parameters=ps)),
                       ("Lamb", lambda: ddg.optimizer.Lamb(1e-3, parameters=ps))):
        per, fus = make(), make()
        per._use_fused = False
        t_per = timeit(per.step, n, sync)
        t_fus = timeit(fus.step, n, sync)
        row.append(f"{name} per-param {t_per * 1e6:8.0f} us fused {t_fus * 1e6:8.0f} us ({t_per / t_fus:.2f}x)")
    print(" | ".join(row))
