"""Paddle's results for the argument sweeps of ``test_paddle_op_sweeps.py``, recorded from the
real Paddle 3.3.1 (CPU) into ``paddle_op_sweeps.json``; regenerate (CI has no Paddle) with
``PYTHONPATH=. <python with paddle> tests/op_reference.py``.

Each case draws its float64 inputs from ``numpy.random.default_rng(seed)`` and is recorded
as the output's shape and dtype and three fingerprints ``sum(y * r_i)`` with ``r_i`` drawn
the same way (so the table stays small and still tells any wrong element), or as the error
Paddle raises (its type name).
"""
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "paddle_op_sweeps.json")


def conv_cases():
    """(key, kwargs): every padding mode, stride 1-3, dilation 1-3, 1-D/2-D/3-D, plain and
    transposed, odd and even kernels, input sizes not a multiple of the stride."""
    out = []
    sizes = {1: [9], 2: [7, 8], 3: [5, 6, 5]}
    kernels = {1: [3, 4], 2: [[3, 3], [2, 3]], 3: [[3, 3, 3], [2, 3, 2]]}
    for nd in (1, 2, 3):
        for transposed in (False, True):
            for padding in ("same", "valid", "SAME"):
                for stride in (1, 2, 3):
                    for dilation in (1, 2, 3):
                        for k in kernels[nd]:
                            if nd == 3 and (stride, dilation) not in ((1, 1), (2, 2), (1, 3), (3, 1)):
                                continue
                            if padding == "SAME" and (nd != 2 or transposed):
                                continue
                            kk = [k] * nd if isinstance(k, int) else k
                            if padding == "valid" and not transposed and \
                                    any(dilation * (a - 1) + 1 > n for a, n in zip(kk, sizes[nd])):
                                continue   # Paddle returns an empty or out-of-bounds result there
                            key = f"conv{nd}d{'_transpose' if transposed else ''}/{padding}/s{stride}/d{dilation}/k{k}"
                            out.append((key, dict(nd=nd, transposed=transposed, padding=padding, stride=stride,
                                                  dilation=dilation, kernel=k, size=sizes[nd])))
    return out


def pool_cases():
    out = []
    sizes = {1: [9], 2: [7, 8], 3: [5, 6, 5]}
    for nd in (1, 2, 3):
        for kind in ("max", "avg"):
            for padding in ("same", "valid"):
                for stride in (1, 2, 3):
                    for k in (2, 3):
                        out.append((f"{kind}_pool{nd}d/{padding}/s{stride}/k{k}",
                                    dict(nd=nd, kind=kind, padding=padding, stride=stride, kernel=k,
                                         size=sizes[nd])))
    return out


# shapes for the matrix-product family, ranks 0 to 4 with broadcasting
MATMUL_SHAPES = [
    ([], []), ([3], [3]), ([3], [4]), ([3], [3, 4]), ([2, 3], [3]), ([2, 3], [3, 4]), ([2, 3], [4, 3]),
    ([5, 2, 3], [3, 4]), ([2, 3], [5, 3, 4]), ([5, 2, 3], [5, 3, 4]), ([5, 2, 3], [1, 3, 4]),
    ([2, 5, 2, 3], [5, 3, 4]), ([2, 1, 2, 3], [1, 4, 3, 2]), ([2, 3, 4, 5], [2, 3, 5, 6]),
    ([4], [2, 4, 3]), ([2, 3, 4], [4]), ([5, 2, 3], [4, 3, 4]), ([2, 3, 4, 5], [5]), ([3], []),
    ([2, 3], [2, 3]), ([4, 2, 3], [4, 2, 3]),
]
PRODUCTS = ["matmul", "matmul_tx", "matmul_ty", "mm", "bmm", "dot", "inner", "outer"]


RANK_SHAPES = [[], [3], [2, 3], [2, 3, 4], [2, 1, 3, 2]]
REDUCTIONS = ["sum", "mean", "max", "min", "prod", "amax", "amin", "argmax", "argmin", "all", "any", "logsumexp",
              "std", "var", "cumsum", "count_nonzero", "nansum"]
SHAPE_OPS = {
    "reshape_flat": lambda p, x: p.reshape(x, [-1]),
    "reshape_back": lambda p, x: p.reshape(x, list(reversed(x.shape))),
    "transpose_rev": lambda p, x: p.transpose(x, list(reversed(range(x.ndim)))),
    "squeeze": lambda p, x: p.squeeze(x),
    "squeeze_neg": lambda p, x: p.squeeze(x, axis=-1),
    "unsqueeze_0": lambda p, x: p.unsqueeze(x, 0),
    "unsqueeze_last": lambda p, x: p.unsqueeze(x, -1),
    "unsqueeze_list": lambda p, x: p.unsqueeze(x, [0, 2]),
    "flatten": lambda p, x: p.flatten(x),
    "flatten_1": lambda p, x: p.flatten(x, 1),
    "broadcast_to": lambda p, x: p.broadcast_to(x, [2] + list(x.shape)),
    "expand": lambda p, x: p.expand(x, [3] + list(x.shape)),
    "tile": lambda p, x: p.tile(x, [2]),
    "flip": lambda p, x: p.flip(x, -1),
    "roll": lambda p, x: p.roll(x, 1),
    "roll_axis": lambda p, x: p.roll(x, 1, axis=-1),
    "concat": lambda p, x: p.concat([x, x], axis=-1),
    "stack_0": lambda p, x: p.stack([x, x], axis=0),
    "stack_last": lambda p, x: p.stack([x, x], axis=-1),
    "split_first": lambda p, x: p.concat(p.split(x, [1, x.shape[0] - 1], axis=0), axis=0),
    "chunk_last": lambda p, x: p.chunk(x, 1, axis=-1)[0],
    "t": lambda p, x: p.t(x),
    "moveaxis": lambda p, x: p.moveaxis(x, 0, -1),
    "diff": lambda p, x: p.diff(x),
    "sort": lambda p, x: p.sort(x),
    "argsort": lambda p, x: p.argsort(x),
    "topk": lambda p, x: p.topk(x, 1)[0],
    "tril": lambda p, x: p.tril(x),
    "clone_T": lambda p, x: x.T,
    "mT": lambda p, x: x.mT,
}
EINSUMS = [("i,i->", [[4], [4]]), ("ij,jk->ik", [[2, 3], [3, 4]]), ("bij,bjk->bik", [[2, 2, 3], [2, 3, 4]]),
           ("ii->i", [[3, 3]]), ("ij->ji", [[2, 3]]), ("...ij,...jk->...ik", [[2, 2, 3], [3, 4]]),
           ("i,j->ij", [[2], [3]]), ("bhqd,bhkd->bhqk", [[1, 2, 3, 4], [1, 2, 5, 4]]), ("ij->", [[2, 3]]),
           ("ijk->kji", [[2, 3, 4]]), (",i->i", [[], [3]]), ("ii", [[3, 3]]), ("ij,ij->ij", [[2, 3], [2, 3]])]


def run_reduction(paddle, op, shape, axis, keepdim):
    (x,) = _inputs(len(shape) + 40, shape)
    t = paddle.to_tensor(x)
    if op in ("all", "any"):
        t = t > 0
    if op == "count_nonzero":
        t = paddle.to_tensor(np.where(x > 0, x, 0))
    fn = getattr(paddle, op)
    if op == "cumsum":
        return fn(t, axis=axis)
    if op in ("argmax", "argmin"):
        return fn(t, axis=axis, keepdim=keepdim)
    return fn(t, axis=axis, keepdim=keepdim)


def reduction_cases():
    out = []
    for op in REDUCTIONS:
        for shape in RANK_SHAPES:
            nd = len(shape)
            axes = [None] + ([0, -1] if nd else [0, -1]) + ([[0, -1]] if nd >= 2 else [])
            for axis in axes:
                for keepdim in ((False,) if op == "cumsum" else (False, True)):
                    if op == "cumsum" and isinstance(axis, list):
                        continue
                    out.append((f"{op}/{shape}/axis={axis}/keepdim={keepdim}", (op, shape, axis, keepdim)))
    return out


def run_shape_op(paddle, name, shape):
    (x,) = _inputs(len(shape) + 60, shape)
    return SHAPE_OPS[name](paddle, paddle.to_tensor(x))


def run_einsum(paddle, eq, shapes):
    arrays = _inputs(len(shapes) + 80, *shapes)
    return paddle.einsum(eq, *[paddle.to_tensor(a) for a in arrays])


def _inputs(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def fingerprint(y):
    y = np.asarray(y)
    rng = np.random.default_rng(12345)
    rs = [rng.standard_normal(y.shape) for _ in range(3)]
    return {"shape": list(y.shape), "dtype": str(y.dtype),
            "fp": [float(np.sum(y.astype(np.float64) * r)) for r in rs]}


def run_conv(paddle, c):
    F = paddle.nn.functional
    nd, k = c["nd"], c["kernel"]
    k = [k] if isinstance(k, int) else k
    cin, cout = 2, 3
    wshape = [cin, cout] + k if c["transposed"] else [cout, cin] + k
    x, w, b = _inputs(len(k) * 100 + c["stride"] * 10 + c["dilation"], [2, cin] + c["size"], wshape, [cout])
    name = f"conv{nd}d" + ("_transpose" if c["transposed"] else "")
    t = paddle.to_tensor
    return getattr(F, name)(t(x), t(w), t(b), stride=c["stride"], padding=c["padding"], dilation=c["dilation"])


def run_pool(paddle, c):
    F = paddle.nn.functional
    (x,) = _inputs(c["stride"] * 10 + c["kernel"], [2, 3] + c["size"])
    fn = getattr(F, f"{c['kind']}_pool{c['nd']}d")
    return fn(paddle.to_tensor(x), c["kernel"], stride=c["stride"], padding=c["padding"])


def run_product(paddle, op, sa, sb):
    a, b = _inputs(len(sa) * 10 + len(sb), sa, sb)
    a, b = paddle.to_tensor(a), paddle.to_tensor(b)
    if op == "matmul_tx":
        return paddle.matmul(a, b, transpose_x=True)
    if op == "matmul_ty":
        return paddle.matmul(a, b, transpose_y=True)
    return getattr(paddle, op)(a, b)


def all_cases():
    cases = {}
    for key, c in conv_cases():
        cases[key] = (run_conv, (c,))
    for key, c in pool_cases():
        cases[key] = (run_pool, (c,))
    for op in PRODUCTS:
        for sa, sb in MATMUL_SHAPES:
            cases[f"{op}/{sa}x{sb}"] = (run_product, (op, sa, sb))
    for key, args in reduction_cases():
        cases["reduce:" + key] = (run_reduction, args)
    for name in SHAPE_OPS:
        for shape in RANK_SHAPES:
            cases[f"shape:{name}/{shape}"] = (run_shape_op, (name, shape))
    for eq, shapes in EINSUMS:
        cases[f"einsum:{eq}/{shapes}"] = (run_einsum, (eq, shapes))
    return cases


def record(paddle):
    out = {}
    for key, (fn, args) in all_cases().items():
        try:
            y = fn(paddle, *args)
            out[key] = fingerprint(y.numpy())
        except Exception as e:  # noqa: BLE001 - Paddle's refusal is the reference
            out[key] = {"error": type(e).__name__}
    return out


if __name__ == "__main__":
    import paddle
    table = record(paddle)
    with open(TABLE, "w") as f:
        json.dump({"generated_from": f"paddlepaddle {paddle.__version__}", "cases": table}, f, indent=0,
                  sort_keys=True)
    print(f"{len(table)} cases written, {sum('error' in v for v in table.values())} of them errors")
