"""The wider Paddle tensor API (the composites of ddg/autograd/composite/, their in-place
forms, ops/special.py): one row each, forward against numpy (float32), backward
against float64 central differences, and the same results on every backend (simcupy
included). Values Paddle's own semantics decide (ties, defaults) were checked against
Paddle 3.3.1 and are asserted below the table."""
import numpy as np
import pytest

import ddg
from ddg.autograd import gradcheck

import scipy.special as special


def _np_cross(a, b):
    return np.cross(a, b, axis=0)


def _np_diag_embed(a):
    out = np.zeros(a.shape[:-1] + (a.shape[-1] + 1, a.shape[-1] + 1))
    for i in range(a.shape[-1]):
        out[..., i, i + 1] = a[..., i]
    return out


def _np_diagonal_scatter(a, b):
    o = a.copy()
    o[np.arange(3), np.arange(3) + 1] = b
    return o


def _np_index_add(a, v):
    o = a.copy()
    np.add.at(o, (slice(None), [0, 2, 0]), v)
    return o


def _np_index_put(a, v):
    o = a.copy()
    o[[0, 2], [1, 3]] = v
    return o


def _np_index_put_acc(a, v):
    o = a.copy()
    np.add.at(o, ([0, 2, 0], [1, 3, 1]), v)
    return o


def _np_cummax(a):
    return np.maximum.accumulate(a, axis=1)


def _np_logcumsumexp(a):
    return np.log(np.cumsum(np.exp(a), axis=1))


def _np_cov(a):
    return np.cov(a)


def _np_unfold(a):
    return np.stack([a[:, i:i + 3] for i in (0, 2, 4)], 1)


def _np_renorm(a):
    n = np.sqrt((a ** 2).sum(1, keepdims=True))
    return a * np.where(n > 2.0, 2.0 / (n + 1e-7), 1.0)


def _np_kth(a):
    return np.sort(a, axis=1)[:, 1]


# name, ddg function, numpy reference, input shapes, domain ("any", "pos", "unit": 0.05..0.95)
ROWS = [
    ("addmm", lambda i, x, y: ddg.addmm(i, x, y, beta=0.5, alpha=2.0), lambda i, x, y: 0.5 * i + 2 * x @ y,
     [(3, 4), (3, 2), (2, 4)], "any"),
    ("mv", ddg.mv, lambda x, v: x @ v, [(3, 4), (4,)], "any"),
    ("inner", ddg.inner, np.inner, [(2, 3, 4), (5, 4)], "any"),
    ("tensordot", lambda x, y: ddg.tensordot(x, y, [[0, 2], [1, 0]]),
     lambda x, y: np.tensordot(x, y, [[0, 2], [1, 0]]), [(2, 3, 4), (4, 2, 5)], "any"),
    ("tensordot_int", lambda x, y: ddg.tensordot(x, y, 1), lambda x, y: np.tensordot(x, y, 1),
     [(2, 3), (3, 4)], "any"),
    ("cross", ddg.cross, _np_cross, [(3, 4), (3, 4)], "any"),
    ("dist_p3", lambda x, y: ddg.dist(x, y, 3), lambda x, y: (np.abs(x - y) ** 3).sum() ** (1 / 3),
     [(3, 4), (4,)], "any"),
    ("dist_inf", lambda x, y: ddg.dist(x, y, float("inf")), lambda x, y: np.abs(x - y).max(), [(3, 4), (3, 4)], "any"),
    ("cdist", ddg.cdist, lambda x, y: np.sqrt(((x[:, None] - y[None]) ** 2).sum(-1)), [(3, 4), (5, 4)], "any"),
    ("cdist_p1", lambda x, y: ddg.cdist(x, y, 1.0), lambda x, y: np.abs(x[:, None] - y[None]).sum(-1),
     [(3, 4), (2, 4)], "any"),
    ("deg2rad", ddg.deg2rad, np.deg2rad, [(3, 4)], "any"),
    ("rad2deg", ddg.rad2deg, np.rad2deg, [(3, 4)], "any"),
    ("frac", ddg.frac, lambda a: a - np.trunc(a), [(3, 4)], "any"),
    ("hypot", ddg.hypot, np.hypot, [(3, 4), (4,)], "any"),
    ("lerp", ddg.lerp, lambda x, y, w: x + w * (y - x), [(3, 4), (3, 4), (4,)], "any"),
    ("logaddexp", ddg.logaddexp, np.logaddexp, [(3, 4), (3, 1)], "any"),
    ("logit", ddg.logit, special.logit, [(3, 4)], "unit"),
    ("logit_eps", lambda a: ddg.logit(a, 0.2), lambda a: special.logit(np.clip(a, 0.2, 0.8)), [(3, 4)], "unit"),
    ("stanh", ddg.stanh, lambda a: 1.7159 * np.tanh(0.67 * a), [(3, 4)], "any"),
    ("heaviside", lambda x, y: ddg.heaviside(x * (x.abs() > 0.5).astype(x.dtype), y),
     lambda x, y: np.heaviside(x * (np.abs(x) > 0.5), y), [(3, 4), (3, 4)], "any"),
    ("fmax", ddg.fmax, np.fmax, [(3, 4), (4,)], "any"),
    ("fmin", ddg.fmin, np.fmin, [(3, 4), (4,)], "any"),
    ("ldexp", lambda x: ddg.ldexp(x, ddg.to_tensor([1, -2, 3, 0])), lambda x: np.ldexp(x, [1, -2, 3, 0]),
     [(3, 4)], "any"),
    ("frexp_mantissa", lambda x: ddg.frexp(x)[0], lambda x: np.frexp(x)[0], [(3, 4)], "any"),
    ("diff", lambda a: ddg.diff(a, n=2, axis=0), lambda a: np.diff(a, 2, 0), [(5, 3)], "any"),
    ("diff_prepend", lambda a, p: ddg.diff(a, prepend=p), lambda a, p: np.diff(a, prepend=p), [(3, 4), (3, 2)],
     "any"),
    ("trapezoid", lambda y: ddg.trapezoid(y, dx=0.5), lambda y: np.trapezoid(y, dx=0.5, axis=-1)
     if hasattr(np, "trapezoid") else np.trapz(y, dx=0.5), [(3, 4)], "any"),
    ("trapezoid_x", lambda y, x: ddg.trapezoid(y, x, axis=0),
     lambda y, x: (0.5 * (y[1:] + y[:-1]) * np.diff(x)[:, None]).sum(0), [(4, 3), (4,)], "any"),
    ("cumulative_trapezoid", ddg.cumulative_trapezoid, lambda y: np.cumsum(0.5 * (y[:, 1:] + y[:, :-1]), 1),
     [(3, 4)], "any"),
    ("logcumsumexp", lambda a: ddg.logcumsumexp(a, axis=1), _np_logcumsumexp, [(3, 4)], "any"),
    ("cummax", lambda a: ddg.cummax(a, axis=1)[0], _np_cummax, [(3, 5)], "any"),
    ("cummin", lambda a: ddg.cummin(a, 0)[0], lambda a: np.minimum.accumulate(a, 0), [(4, 3)], "any"),
    ("nansum", lambda a: ddg.nansum(a, axis=1), lambda a: np.nansum(a, 1), [(3, 4)], "any"),
    ("nanmean", lambda a: ddg.nanmean(a, axis=0), lambda a: np.nanmean(a, 0), [(3, 4)], "any"),
    ("kthvalue", lambda a: ddg.kthvalue(a, 2, axis=1)[0], _np_kth, [(3, 5)], "any"),
    ("median_even", lambda a: ddg.median(a, axis=1), lambda a: np.median(a, 1), [(3, 4)], "any"),
    ("median_all", ddg.median, np.median, [(3, 5)], "any"),
    ("quantile", lambda a: ddg.quantile(a, [0.1, 0.75], axis=1, keepdim=True),
     lambda a: np.quantile(a, [0.1, 0.75], axis=1, keepdims=True), [(3, 5)], "any"),
    ("nanquantile", lambda a: ddg.nanquantile(a, 0.3, axis=0), lambda a: np.nanquantile(a, 0.3, axis=0),
     [(4, 3)], "any"),
    ("nanmedian", lambda a: ddg.nanmedian(a, axis=1), lambda a: np.nanmedian(a, 1), [(3, 4)], "any"),
    ("unflatten", lambda a: ddg.unflatten(a, 1, [2, 3]) * 2, lambda a: a.reshape(3, 2, 3) * 2, [(3, 6)], "any"),
    ("rot90", lambda a: ddg.rot90(a, 1, [1, 2]), lambda a: np.rot90(a, 1, (1, 2)), [(2, 3, 4)], "any"),
    ("rot90_k3", lambda a: ddg.rot90(a, -1), lambda a: np.rot90(a, -1), [(3, 4)], "any"),
    ("rot90_k2", lambda a: ddg.rot90(a, 2), lambda a: np.rot90(a, 2), [(3, 4)], "any"),
    ("crop", lambda a: ddg.crop(a, [2, -1], [1, 1]), lambda a: a[1:3, 1:], [(4, 5)], "any"),
    ("strided_slice", lambda a: ddg.strided_slice(a, [0, 1], [0, 4], [4, 0], [2, -2]), lambda a: a[0:4:2, 4:0:-2],
     [(4, 5)], "any"),
    ("unfold", lambda a: ddg.unfold(a, 1, 3, 2), _np_unfold, [(2, 7)], "any"),
    ("as_strided", lambda a: ddg.as_strided(a, [3, 2], [1, 4], 1),
     lambda a: np.lib.stride_tricks.as_strided(a.reshape(-1)[1:], (3, 2), (a.itemsize, 4 * a.itemsize)),
     [(3, 4)], "any"),
    ("diagflat", lambda a: ddg.diagflat(a, 1), lambda a: np.diagflat(a, 1), [(2, 2)], "any"),
    ("diag_embed", lambda a: ddg.diag_embed(a, 1), _np_diag_embed, [(2, 3)], "any"),
    ("diagonal_scatter", lambda a, b: ddg.diagonal_scatter(a, b, 1), _np_diagonal_scatter, [(3, 5), (3,)], "any"),
    ("select_scatter", lambda a, v: ddg.select_scatter(a, v, 1, 2),
     lambda a, v: np.concatenate([a[:, :2], v[:, None], a[:, 3:]], 1), [(3, 4), (3,)], "any"),
    ("index_fill", lambda a: ddg.index_fill(a, ddg.to_tensor([0, 2]), 1, -1.0),
     lambda a: np.where(np.isin(np.arange(4), [0, 2])[None], -1.0, a), [(3, 4)], "any"),
    ("index_add", lambda a, v: ddg.index_add(a, ddg.to_tensor([0, 2, 0]), 1, v), _np_index_add, [(3, 4), (3, 3)],
     "any"),
    ("index_put", lambda a, v: ddg.index_put(a, (ddg.to_tensor([0, 2]), ddg.to_tensor([1, 3])), v), _np_index_put,
     [(3, 4), (2,)], "any"),
    ("index_put_acc", lambda a, v: ddg.index_put(a, (ddg.to_tensor([0, 2, 0]), ddg.to_tensor([1, 3, 1])), v, True),
     _np_index_put_acc, [(3, 4), (3,)], "any"),
    ("index_sample", lambda a: ddg.index_sample(a, ddg.to_tensor([[0, 3], [2, 2], [1, 0]])),
     lambda a: np.take_along_axis(a, np.array([[0, 3], [2, 2], [1, 0]]), 1), [(3, 4)], "any"),
    ("take", lambda a: ddg.take(a, ddg.to_tensor([[0, -1], [5, 13]]), mode="wrap"),
     lambda a: np.take(a, [[0, -1], [5, 13]], mode="wrap"), [(3, 4)], "any"),
    ("multiplex", lambda a, b: ddg.multiplex([a, b], ddg.to_tensor([[1], [0], [1]])),
     lambda a, b: np.stack([b[0], a[1], b[2]]), [(3, 4), (3, 4)], "any"),
    ("combinations", lambda a: ddg.combinations(a, 2), lambda a: np.array([[a[i], a[j]] for i in range(4)
                                                                           for j in range(i + 1, 4)]), [(4,)], "any"),
    ("vander", lambda a: ddg.vander(a, 4), lambda a: np.vander(a, 4), [(3,)], "any"),
    ("renorm", lambda a: ddg.renorm(a, 2, 0, 2.0), _np_renorm, [(3, 4)], "any"),
    ("scatter_nd", lambda u: ddg.scatter_nd(ddg.to_tensor([[1], [0], [1]]), u, [3, 4]),
     lambda u: np.stack([u[1], u[0] + u[2], np.zeros(4)]), [(3, 4)], "any"),
    ("cov", ddg.Tensor.cov, _np_cov, [(3, 5)], "any"),
    ("cov_weights", lambda a: a.cov(fweights=ddg.to_tensor([1, 2, 1, 3, 1]), aweights=ddg.to_tensor(
        [0.5, 1.0, 2.0, 1.0, 0.3], dtype=a.dtype)),
     lambda a: np.cov(a, fweights=[1, 2, 1, 3, 1], aweights=[0.5, 1.0, 2.0, 1.0, 0.3]), [(3, 5)], "any"),
    ("corrcoef", lambda a: a.corrcoef(), np.corrcoef, [(3, 5)], "any"),
    # ops/special.py (primitives)
    ("lgamma", ddg.lgamma, special.gammaln, [(3, 4)], "pos"),
    ("digamma", ddg.digamma, special.digamma, [(3, 4)], "pos"),
    ("polygamma", lambda a: ddg.polygamma(a, 2), lambda a: special.polygamma(2, a), [(3, 4)], "pos"),
    ("multigammaln", lambda a: ddg.multigammaln(a + 2, 3), lambda a: special.multigammaln(a + 2, 3)
     if a.ndim == 0 else np.vectorize(lambda v: special.multigammaln(v, 3))(a + 2).astype(a.dtype), [(3, 4)], "pos"),
    ("erfinv", ddg.erfinv, special.erfinv, [(3, 4)], "unit"),
    ("i0", ddg.i0, special.i0, [(3, 4)], "any"),
    ("i0e", ddg.i0e, special.i0e, [(3, 4)], "any"),
    ("i1", ddg.i1, special.i1, [(3, 4)], "any"),
    ("i1e", ddg.i1e, special.i1e, [(3, 4)], "any"),
    ("atan2", ddg.atan2, np.arctan2, [(3, 4), (4,)], "any"),
    # ddg.linalg additions (primitives in ops/linalg.py)
    ("cholesky", lambda a: ddg.linalg.cholesky(_spd(a)), lambda a: np.linalg.cholesky(_np_spd(a)), [(2, 3, 3)], "any"),
    ("cholesky_upper", lambda a: _spd(a).cholesky(upper=True),
     lambda a: np.swapaxes(np.linalg.cholesky(_np_spd(a)), -1, -2), [(3, 3)], "any"),
    ("eigvalsh", lambda a: ddg.linalg.eigvalsh(a + a.T), lambda a: np.linalg.eigvalsh(a + a.T), [(4, 4)], "any"),
    ("cholesky_solve", lambda b, a: ddg.linalg.cholesky_solve(b, ddg.linalg.cholesky(_spd(a))),
     lambda b, a: np.linalg.solve(_np_spd(a), b), [(3, 2), (3, 3)], "any"),
]


def _spd(a):
    return ddg.matmul(a, a, transpose_y=True) + 3.0 * ddg.eye(a.shape[-1], dtype=a.dtype).to(a.place)


def _np_spd(a):
    return a @ np.swapaxes(a, -1, -2) + 3.0 * np.eye(a.shape[-1], dtype=a.dtype)


def _data(shape, domain, rng):
    if domain == "pos":
        return rng.uniform(0.5, 2.0, shape)
    if domain == "unit":
        return rng.uniform(0.05, 0.95, shape)
    return rng.standard_normal(shape)


@pytest.mark.parametrize("name,fn,ref,shapes,domain", ROWS, ids=[r[0] for r in ROWS])
def test_forward_matches_numpy(name, fn, ref, shapes, domain, rng):
    arrays = [_data(s, domain, rng).astype(np.float32) for s in shapes]
    out = fn(*[ddg.to_tensor(a) for a in arrays])
    want = ref(*arrays)
    assert out.shape == list(np.shape(want)), name
    np.testing.assert_allclose(out.numpy(), want, rtol=2e-5, atol=2e-5)
    assert out.dtype == np.float32, f"{name} changed float32 to {out.dtype}"


@pytest.mark.parametrize("name,fn,ref,shapes,domain", ROWS, ids=[r[0] for r in ROWS])
def test_backward_matches_central_differences(name, fn, ref, shapes, domain, rng):
    inputs = [ddg.to_tensor(_data(s, domain, rng), stop_gradient=False) for s in shapes]
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("name,fn,ref,shapes,domain", ROWS, ids=[r[0] for r in ROWS])
def test_same_results_on_every_backend(name, fn, ref, shapes, domain, place, rng):
    arrays = [_data(s, domain, rng) for s in shapes]
    cpu = [ddg.to_tensor(a, stop_gradient=False) for a in arrays]
    dev = [ddg.to_tensor(a, place=place, stop_gradient=False) for a in arrays]
    if place != "cpu":  # index tensors the rows build are host tensors: run the row on the device
        ddg.set_device(place)
    try:
        out_cpu = fn(*cpu) if place == "cpu" else None
        out_dev = fn(*dev)
    finally:
        ddg.set_device("cpu")
    if out_cpu is None:
        out_cpu = fn(*cpu)
    assert out_dev.place == ddg.tensor.place.parse_place(place)
    np.testing.assert_allclose(out_dev.numpy(), out_cpu.numpy(), rtol=1e-10, atol=1e-12)
    v = np.random.default_rng(1).standard_normal(out_cpu.shape)
    out_cpu.backward(ddg.to_tensor(v))
    out_dev.backward(ddg.to_tensor(v, place=place))
    for c, d in zip(cpu, dev):
        if c.grad is None:  # an input the result does not depend on differentiably
            assert d.grad is None
            continue
        assert d.grad.place == d.place
        np.testing.assert_allclose(d.grad.numpy(), c.grad.numpy(), rtol=1e-9, atol=1e-12)


# -- values Paddle 3.3.1 printed (ties, indices, integer helpers) ---------------------------
def test_cummax_cummin_indices_take_the_latest_tie():
    v, i = ddg.cummax(ddg.to_tensor([1., 3., 3., 2., 3., 5., 5.]))
    assert v.tolist() == [1, 3, 3, 3, 3, 5, 5] and i.tolist() == [0, 1, 2, 2, 4, 5, 6]
    v, i = ddg.cummin(ddg.to_tensor([3., 1., 1., 2., 1.]))
    assert v.tolist() == [3, 1, 1, 1, 1] and i.tolist() == [0, 1, 2, 2, 4] and i.dtype == np.int64


def test_mode_takes_the_smallest_value_and_its_last_index():
    v, i = ddg.mode(ddg.to_tensor([[2., 1., 1., 2., 3.], [4., 4., 1., 1., 0.]]))
    assert v.tolist() == [1, 1] and i.tolist() == [2, 3]


def test_median_and_kthvalue():
    x = ddg.to_tensor([[2., 1., 1., 2., 3., 7.], [4., 4., 1., 1., 0., 9.]])
    np.testing.assert_allclose(ddg.median(x, axis=1).numpy(), [2.0, 2.5])
    v, i = ddg.median(x, axis=1, mode="min")
    assert v.tolist() == [2.0, 1.0] and i.tolist() == [0, 3]
    v, i = ddg.kthvalue(ddg.to_tensor([5., 1., 4.]), 2)
    assert v.item() == 4.0 and i.item() == 2


def test_search_and_histogram():
    s = ddg.to_tensor([1, 3, 5, 7, 9])
    assert ddg.searchsorted(s, ddg.to_tensor([3, 6, 9])).tolist() == [1, 3, 4]
    assert ddg.searchsorted(s, ddg.to_tensor([3, 6, 9]), right=True).tolist() == [2, 3, 5]
    assert ddg.searchsorted(s, ddg.to_tensor([3]), out_int32=True).dtype == np.int32
    rows = ddg.to_tensor([[1, 3, 5], [2, 4, 6]])
    assert ddg.searchsorted(rows, ddg.to_tensor([[4], [4]])).tolist() == [[2], [1]]
    assert ddg.bucketize(ddg.to_tensor([[2, 8]]), s).tolist() == [[1, 4]]
    h = ddg.histogram(ddg.to_tensor([1., 2., 1.]), bins=4)
    assert h.tolist() == [2, 0, 0, 1] and h.dtype == np.int64
    assert ddg.histogram(ddg.to_tensor([0.5, 2.5, 9.0]), bins=3, min=0, max=3).tolist() == [1, 0, 1]


def test_unique_consecutive():
    out, inv, cnt = ddg.unique_consecutive(ddg.to_tensor([1, 1, 2, 2, 3, 1, 1, 2]), True, True)
    assert out.tolist() == [1, 2, 3, 1, 2] and inv.tolist() == [0, 0, 1, 1, 2, 3, 3, 4]
    assert cnt.tolist() == [2, 2, 1, 2, 1]
    x = ddg.to_tensor([[2, 1, 3], [2, 1, 3], [3, 0, 1]])
    assert ddg.unique_consecutive(x, axis=0).tolist() == [[2, 1, 3], [3, 0, 1]]


def test_integer_helpers():
    assert ddg.gcd(ddg.to_tensor([12, 20]), ddg.to_tensor([8, 15])).tolist() == [4, 5]
    assert ddg.lcm(ddg.to_tensor([4, 6]), ddg.to_tensor([6, 4])).tolist() == [12, 12]
    with pytest.raises(TypeError, match="gcd"):
        ddg.gcd(ddg.to_tensor([1.0]), ddg.to_tensor([2.0]))
    lab = ddg.to_tensor([[16], [1], [7], [19]])
    assert ddg.shard_index(lab, 20, 2, 0).tolist() == [[-1], [1], [7], [-1]]
    assert ddg.shard_index(lab, 20, 2, 1).tolist() == [[6], [-1], [-1], [9]]
    assert ddg.tril_indices(3, 3, 0).tolist() == [[0, 1, 1, 2, 2, 2], [0, 0, 1, 0, 1, 2]]
    assert ddg.triu_indices(2, 3, 1).tolist() == [[0, 0, 1], [1, 2, 2]]
    np.testing.assert_allclose(ddg.logspace(0, 2, 3).numpy(), [1, 10, 100])
    assert ddg.logspace(0, 2, 3, base=2.0, dtype="float64").dtype == np.float64
    f, i = ddg.finfo(ddg.float32), ddg.iinfo("int32")
    assert f.eps == np.finfo(np.float32).eps and f.bits == 32 and f.dtype == "float32"
    assert (i.min, i.max, i.bits) == (-2 ** 31, 2 ** 31 - 1, 32)
    assert ddg.nextafter(ddg.to_tensor([1.0]), ddg.to_tensor([2.0])).item() == np.nextafter(np.float32(1), np.float32(2))
    m, e = ddg.frexp(ddg.to_tensor([8.0, -3.0]))
    assert m.tolist() == [0.5, -0.75] and e.tolist() == [4.0, 2.0]


def test_predicates_shapes_and_views():
    x = ddg.ones([2, 3])
    assert ddg.is_tensor(x) and not ddg.is_tensor(np.ones(2))
    assert ddg.is_floating_point(x) and not ddg.is_integer(x) and not ddg.is_complex(x)
    assert ddg.is_integer(ddg.to_tensor([1])) and ddg.is_empty(ddg.zeros([0, 2])).item()
    assert ddg.rank(x).item() == 2 and ddg.tolist(x) == [[1.0] * 3] * 2
    assert ddg.broadcast_shape([2, 1, 3], [4, 1]) == [2, 4, 3]
    with pytest.raises(ValueError, match="broadcast_shape"):
        ddg.broadcast_shape([2], [3])
    a, b = ddg.atleast_2d(ddg.to_tensor(1.0), ddg.to_tensor([1.0, 2.0]))
    assert a.shape == [1, 1] and b.shape == [1, 2]
    assert ddg.atleast_3d(ddg.to_tensor([[1.0, 2.0]])).shape == [1, 2, 1]
    assert ddg.atleast_1d(ddg.to_tensor(3.0)).shape == [1]
    assert ddg.view(x, "int32").dtype == np.int32 and ddg.view(x, [3, 2]).shape == [3, 2]
    assert [t.shape for t in ddg.vsplit(ddg.ones([4, 2]), 2)] == [[2, 2], [2, 2]]
    assert ddg.reverse(ddg.to_tensor([1, 2, 3]), 0).tolist() == [3, 2, 1]
    assert ddg.increment(ddg.to_tensor([1.0])).tolist() == [2.0]
    assert x.ndimension() == 2 and x.is_same_shape(ddg.zeros([2, 3])) and x.is_contiguous()


def test_random_helpers_shapes_and_ranges():
    ddg.seed(3)
    p = ddg.poisson(ddg.full([1000], 4.0))
    assert p.dtype == np.float32 and abs(p.numpy().mean() - 4.0) < 0.3
    assert ddg.standard_normal([3, 2]).shape == [3, 2]
    r = ddg.randint_like(ddg.zeros([50], dtype="float64"), 2, 5)
    assert r.dtype == np.float64 and set(r.numpy().tolist()) <= {2.0, 3.0, 4.0}
    t = ddg.zeros([2000])
    assert abs(t.normal_(1.0, 2.0).numpy().std() - 2.0) < 0.15
    assert abs(t.exponential_(2.0).numpy().mean() - 0.5) < 0.05
    assert t.geometric_(0.5).numpy().min() >= 1


def test_in_place_variants_update_the_tensor():
    x = ddg.to_tensor([-1.0, 4.0])
    y = x
    assert ddg.abs_(x) is x and y.tolist() == [1.0, 4.0]
    x.log2_()
    assert x.tolist() == [0.0, 2.0]
    x.multiply_(ddg.to_tensor([3.0, 3.0]))
    assert x.tolist() == [0.0, 6.0]
    x.where_(x > 1, ddg.to_tensor([9.0, 9.0]))
    assert x.tolist() == [9.0, 6.0]
    m = ddg.zeros([3, 3])
    m.fill_diagonal_(2.0, offset=1)
    assert m.numpy().tolist() == [[0, 2, 0], [0, 0, 2], [0, 0, 0]]
    c = ddg.to_tensor([1, 2])
    c.equal_(ddg.to_tensor([1, 3]))
    assert c.tolist() == [True, False]
    leaf = ddg.to_tensor([1.0], stop_gradient=False)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.sin_()
    # on an intermediate the op is recorded, and the gradient flows through it
    leaf = ddg.to_tensor([0.5, 2.0], stop_gradient=False)
    h = leaf * 1.0
    h.square_()
    h.sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), [1.0, 4.0])


def test_errors_name_the_op_and_shapes():
    with pytest.raises(ValueError, match=r"ddg.cross.*\[2, 4\]"):
        ddg.cross(ddg.ones([2, 4]), ddg.ones([2, 4]))
    with pytest.raises(ValueError, match=r"ddg.mv.*\[3\]"):
        ddg.mv(ddg.ones([3]), ddg.ones([3]))
    with pytest.raises(ValueError, match=r"ddg.quantile"):
        ddg.quantile(ddg.ones([3]), 1.5)
    with pytest.raises(IndexError, match=r"ddg.take"):
        ddg.take(ddg.ones([2, 2]), ddg.to_tensor([4]))
    with pytest.raises(ValueError, match=r"ddg.tensordot.*\[2, 3\]"):
        ddg.tensordot(ddg.ones([2, 3]), ddg.ones([2, 3]), 1)


def test_special_functions_cast_integers_as_paddle():
    # Paddle 3.3.1: atan2 of int64 tensors is float64, lgamma of an int64 tensor float32
    assert ddg.atan2(ddg.to_tensor([1]), ddg.to_tensor([1])).dtype == np.float64
    assert ddg.lgamma(ddg.to_tensor([1, 3])).dtype == np.float32
    np.testing.assert_allclose(ddg.lgamma(ddg.to_tensor([1, 3])).numpy(), [0.0, np.log(2.0)], atol=1e-7)


def test_fill_diagonal_wraps_as_paddle():
    # Paddle 3.3.1's results: with wrap the diagonal starts again m + 1 rows down
    x = ddg.zeros([7, 3])
    x.fill_diagonal_(1.0, offset=1, wrap=True)
    assert x.numpy().astype(int).tolist() == [[0, 1, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0], [0, 1, 0], [0, 0, 1],
                                              [0, 0, 0]]
    x = ddg.zeros([4, 4])
    x.fill_diagonal_(1.0, offset=-1)
    assert x.numpy().astype(int).tolist() == [[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
    x = ddg.zeros([3, 3, 3])
    x.fill_diagonal_(2.0)
    assert x.numpy().sum() == 6.0 and x.numpy()[1, 1, 1] == 2.0
