"""One row per primitive: forward against a numpy reference, backward against float64
central differences, on broadcasting shapes, 0-d tensors and non-contiguous inputs."""
import numpy as np
import pytest
from scipy import special

import ddg
from ddg.autograd import gradcheck

def _np_scatter(a, u):
    o = a.copy()
    o[[2, 0]] = u
    return o


def _np_scatter_add(a, u):
    o = a.copy()
    o[1] = u.sum(0)
    return o


def _np_scatter_nd_add(a, u):
    o = a.copy()
    np.add.at(o, ([0, 1, 0], [1, 2, 1]), u)
    return o


def _np_put_along_axis(a, v):
    o = a.copy()
    np.put_along_axis(o, np.array([[1], [2]]), v, 1)
    return o


def _np_put_along_axis_add(a, v):
    o = a.copy()
    np.add.at(o, ([[0, 0], [1, 1]], [[1, 1], [2, 0]]), v)
    return o


# name, ddg function, numpy reference, input shapes, input domain
# domain: "any" (standard normal), "pos" (0.5..2), "away" (|x| in 0.3..2, avoids kinks)
ROWS = [
    ("add", lambda a, b: a + b, np.add, [(3, 4), (4,)], "any"),
    ("add_fn", ddg.add, np.add, [(2, 1, 3), (4, 1)], "any"),
    ("sub", lambda a, b: a - b, np.subtract, [(3, 1), (1, 4)], "any"),
    ("mul", lambda a, b: a * b, np.multiply, [(2, 3, 4), (3, 1)], "any"),
    ("div", lambda a, b: a / b, np.divide, [(3, 4), (4,)], "pos"),
    ("pow", ddg.pow, np.power, [(3, 4), (3, 4)], "pos"),
    ("maximum", ddg.maximum, np.maximum, [(3, 4), (4,)], "any"),
    ("minimum", ddg.minimum, np.minimum, [(3, 4), (3, 1)], "any"),
    ("mod", ddg.remainder, np.mod, [(3, 4), (4,)], "pos"),
    ("add_scalar", lambda a: a + 2.5, lambda a: a + 2.5, [(3, 4)], "any"),
    ("rsub_scalar", lambda a: 2.5 - a, lambda a: 2.5 - a, [(3, 4)], "any"),
    ("mul_scalar", lambda a: a * -1.5, lambda a: a * -1.5, [(3, 4)], "any"),
    ("div_scalar", lambda a: a / 4.0, lambda a: a / 4.0, [(3, 4)], "any"),
    ("rdiv_scalar", lambda a: 3.0 / a, lambda a: 3.0 / a, [(3, 4)], "pos"),
    ("pow_scalar", lambda a: a ** 3, lambda a: a ** 3, [(3, 4)], "any"),
    ("pow_scalar_half", lambda a: a ** 0.5, np.sqrt, [(3, 4)], "pos"),
    ("rpow_scalar", lambda a: 2.0 ** a, lambda a: 2.0 ** a, [(3, 4)], "any"),
    ("neg", lambda a: -a, np.negative, [(3, 4)], "any"),
    ("abs", ddg.abs, np.abs, [(3, 4)], "away"),
    ("exp", ddg.exp, np.exp, [(3, 4)], "any"),
    ("log", ddg.log, np.log, [(3, 4)], "pos"),
    ("log1p", ddg.log1p, np.log1p, [(3, 4)], "pos"),
    ("sqrt", ddg.sqrt, np.sqrt, [(3, 4)], "pos"),
    ("rsqrt", ddg.rsqrt, lambda a: 1 / np.sqrt(a), [(3, 4)], "pos"),
    ("square", ddg.square, np.square, [(3, 4)], "any"),
    ("sin", ddg.sin, np.sin, [(3, 4)], "any"),
    ("cos", ddg.cos, np.cos, [(3, 4)], "any"),
    ("tanh", ddg.tanh, np.tanh, [(3, 4)], "any"),
    ("tan", ddg.tan, np.tan, [(3, 4)], "any"),
    ("asin", lambda a: ddg.asin(a * 0.4), lambda a: np.arcsin(a * 0.4), [(3, 4)], "pos"),
    ("acos", lambda a: ddg.acos(a * -0.4), lambda a: np.arccos(a * -0.4), [(3, 4)], "pos"),
    ("atan", ddg.atan, np.arctan, [(3, 4)], "any"),
    ("sinh", ddg.sinh, np.sinh, [(3, 4)], "any"),
    ("cosh", ddg.cosh, np.cosh, [(3, 4)], "any"),
    ("asinh", ddg.asinh, np.arcsinh, [(3, 4)], "any"),
    ("acosh", lambda a: ddg.acosh(a + 1), lambda a: np.arccosh(a + 1), [(3, 4)], "pos"),
    ("atanh", lambda a: ddg.atanh(a * 0.4), lambda a: np.arctanh(a * 0.4), [(3, 4)], "pos"),
    ("log2", ddg.log2, np.log2, [(3, 4)], "pos"),
    ("log10", ddg.log10, np.log10, [(3, 4)], "pos"),
    ("expm1", ddg.expm1, np.expm1, [(3, 4)], "any"),
    ("reciprocal", ddg.reciprocal, np.reciprocal, [(3, 4)], "pos"),
    ("trunc", lambda a: ddg.trunc(a * 3), lambda a: np.trunc(a * 3), [(3, 4)], "away"),
    ("sigmoid", ddg.sigmoid, lambda a: 1 / (1 + np.exp(-a)), [(3, 4)], "any"),
    ("erf", ddg.erf, special.erf, [(3, 4)], "any"),
    ("relu", ddg.nn.functional.relu, lambda a: np.maximum(a, 0), [(3, 4)], "away"),
    ("clip", lambda a: ddg.clip(a, -0.5, 0.7), lambda a: np.clip(a, -0.5, 0.7), [(3, 4)], "any"),
    ("where", lambda a, b: ddg.where(a > 0, a, b), lambda a, b: np.where(a > 0, a, b), [(3, 4), (4,)], "any"),
    ("sum_all", lambda a: ddg.sum(a), np.sum, [(3, 4)], "any"),
    ("sum_axis", lambda a: ddg.sum(a, axis=1, keepdim=True), lambda a: a.sum(1, keepdims=True), [(3, 4, 2)], "any"),
    ("sum_axes", lambda a: a.sum(axis=[0, 2]), lambda a: a.sum((0, 2)), [(3, 4, 2)], "any"),
    ("mean", lambda a: ddg.mean(a, axis=-1), lambda a: a.mean(-1), [(3, 4)], "any"),
    ("max", lambda a: ddg.max(a, axis=1), lambda a: a.max(1), [(3, 4)], "any"),
    ("min_all", lambda a: ddg.min(a), np.min, [(3, 4)], "any"),
    ("prod", lambda a: ddg.prod(a, axis=0), lambda a: a.prod(0), [(3, 4)], "any"),
    ("var", lambda a: ddg.var(a, axis=1), lambda a: a.var(1, ddof=1), [(3, 4)], "any"),
    ("std", lambda a: ddg.std(a, axis=0, unbiased=False), lambda a: a.std(0), [(3, 4)], "any"),
    ("logsumexp", lambda a: ddg.logsumexp(a, axis=1), lambda a: np.log(np.exp(a).sum(1)), [(3, 4)], "any"),
    ("cumsum", lambda a: ddg.cumsum(a, axis=1), lambda a: np.cumsum(a, 1), [(3, 4)], "any"),
    ("sort", lambda a: ddg.sort(a, axis=1), lambda a: np.sort(a, 1), [(3, 4)], "any"),
    ("sort_desc", lambda a: ddg.sort(a, axis=0, descending=True), lambda a: -np.sort(-a, 0), [(3, 4)], "any"),
    ("topk", lambda a: ddg.topk(a, 2)[0], lambda a: -np.sort(-a, 1)[:, :2], [(3, 4)], "any"),
    ("topk_small_axis0", lambda a: ddg.topk(a, 2, axis=0, largest=False)[0], lambda a: np.sort(a, 0)[:2],
     [(3, 4)], "any"),
    ("tril", lambda a: ddg.tril(a, 1), lambda a: np.tril(a, 1), [(2, 3, 4)], "any"),
    ("triu", lambda a: ddg.triu(a, -1), lambda a: np.triu(a, -1), [(3, 4)], "any"),
    ("diagonal", lambda a: ddg.diagonal(a, 1, 0, 2), lambda a: np.diagonal(a, 1, 0, 2), [(3, 2, 4)], "any"),
    ("trace", lambda a: ddg.trace(a, -1), lambda a: np.trace(a, -1), [(4, 3)], "any"),
    ("diag_vec", lambda a: ddg.diag(a, 1), lambda a: np.diag(a, 1), [(3,)], "any"),
    ("kron", ddg.kron, np.kron, [(2, 3), (3, 2)], "any"),
    ("kron_nd", ddg.kron, np.kron, [(2,), (2, 3)], "any"),
    ("norm_p3", lambda a: ddg.norm(a, p=3, axis=1), lambda a: (np.abs(a) ** 3).sum(1) ** (1 / 3), [(3, 4)], "away"),
    ("norm_fro", lambda a: ddg.norm(a), lambda a: np.sqrt((a * a).sum()), [(3, 4)], "any"),
    ("norm_inf", lambda a: ddg.norm(a, p=float("inf"), axis=0), lambda a: np.abs(a).max(0), [(3, 4)], "away"),
    ("add_n", lambda a, b: ddg.add_n([a, b, a]), lambda a, b: 2 * a + b, [(3, 4), (3, 4)], "any"),
    ("repeat_interleave", lambda a: ddg.repeat_interleave(a, 2, axis=1), lambda a: np.repeat(a, 2, 1), [(2, 3)],
     "any"),
    ("repeat_interleave_counts", lambda a: ddg.repeat_interleave(a, [1, 0, 3], axis=0),
     lambda a: np.repeat(a, [1, 0, 3], 0), [(3, 2)], "any"),
    ("slice", lambda a: ddg.slice(a, [0, 2], [1, -3], [3, 10]), lambda a: a[1:3, :, -3:], [(3, 2, 4)], "any"),
    ("gather_nd", lambda a: ddg.gather_nd(a, ddg.to_tensor([[0, 1], [2, 0], [0, 1]])),
     lambda a: a[[0, 2, 0], [1, 0, 1]], [(3, 2, 4)], "any"),
    ("cumsum_flat", lambda a: ddg.cumsum(a), lambda a: np.cumsum(a), [(3, 4)], "any"),
    ("cumprod", lambda a: ddg.cumprod(a, dim=1), lambda a: np.cumprod(a, 1), [(3, 4)], "any"),
    ("cumprod_flat", lambda a: ddg.cumprod(a), lambda a: np.cumprod(a), [(2, 3)], "any"),
    ("cumprod_zero", lambda a: ddg.cumprod(a * ddg.to_tensor([1.0, 0.0, 1.0, 1.0], dtype=a.dtype).to(a.place), dim=1),
     lambda a: np.cumprod(a * [1.0, 0.0, 1.0, 1.0], 1), [(3, 4)], "any"),
    ("scatter", lambda a, u: ddg.scatter(a, ddg.to_tensor([2, 0]), u), _np_scatter, [(3, 2), (2, 2)], "any"),
    ("scatter_add", lambda a, u: ddg.scatter(a, ddg.to_tensor([1, 1]), u, overwrite=False), _np_scatter_add,
     [(3, 2), (2, 2)], "any"),
    ("scatter_nd_add", lambda a, u: ddg.scatter_nd_add(a, ddg.to_tensor([[0, 1], [1, 2], [0, 1]]), u),
     _np_scatter_nd_add, [(2, 3), (3,)], "any"),
    ("put_along_axis", lambda a, v: ddg.put_along_axis(a, ddg.to_tensor([[1], [2]]), v, 1), _np_put_along_axis,
     [(2, 3), (2, 1)], "any"),
    ("put_along_axis_add", lambda a, v: ddg.put_along_axis(a, ddg.to_tensor([[1, 1], [2, 0]]), v, 1, reduce="add"),
     _np_put_along_axis_add, [(2, 3), (2, 2)], "any"),
    ("matmul", ddg.matmul, np.matmul, [(3, 4), (4, 5)], "any"),
    ("matmul_tx", lambda a, b: ddg.matmul(a, b, transpose_x=True), lambda a, b: a.T @ b, [(4, 3), (4, 5)], "any"),
    ("matmul_ty", lambda a, b: ddg.matmul(a, b, transpose_y=True), lambda a, b: a @ b.T, [(3, 4), (5, 4)], "any"),
    ("matmul_txy", lambda a, b: ddg.matmul(a, b, True, True), lambda a, b: a.T @ b.T, [(4, 3), (5, 4)], "any"),
    ("matmul_vec_mat", ddg.matmul, np.matmul, [(4,), (4, 5)], "any"),
    ("matmul_mat_vec", ddg.matmul, np.matmul, [(3, 4), (4,)], "any"),
    ("matmul_vec_vec", ddg.matmul, np.matmul, [(4,), (4,)], "any"),
    ("matmul_batch_bcast", ddg.matmul, np.matmul, [(2, 3, 4), (4, 5)], "any"),
    ("matmul_batch_bcast2", ddg.matmul, np.matmul, [(2, 1, 3, 4), (3, 4, 2)], "any"),
    ("matmul_batch_ty", lambda a, b: ddg.matmul(a, b, transpose_y=True), lambda a, b: a @ np.swapaxes(b, -1, -2),
     [(2, 3, 4), (2, 5, 4)], "any"),
    ("matmul_batch_mat_ty", lambda a, b: ddg.matmul(a, b, transpose_y=True), lambda a, b: a @ b.T,
     [(2, 3, 4), (5, 4)], "any"),
    ("matmul_batch4_mat", ddg.matmul, np.matmul, [(2, 2, 3, 4), (4, 5)], "any"),
    ("bmm", ddg.bmm, np.matmul, [(2, 3, 4), (2, 4, 5)], "any"),
    ("inverse", lambda a: ddg.inverse(a + ddg.diag(ddg.ones_like(a[0, 0]) * 4)), lambda a: np.linalg.inv(a + np.eye(3) * 4),
     [(2, 3, 3)], "any"),
    ("det", lambda a: ddg.linalg.det(a + ddg.diag(ddg.ones_like(a[0, 0]) * 4)),
     lambda a: np.linalg.det(a + np.eye(3) * 4), [(2, 3, 3)], "any"),
    ("slogdet", lambda a: ddg.linalg.slogdet(a + ddg.diag(ddg.ones_like(a[0]) * 4)),
     lambda a: np.stack(np.linalg.slogdet(a + np.eye(3) * 4)), [(3, 3)], "any"),
    ("solve", lambda a, b: ddg.linalg.solve(a + ddg.diag(ddg.ones_like(a[0]) * 4), b),
     lambda a, b: np.linalg.solve(a + np.eye(3) * 4, b), [(3, 3), (3, 2)], "any"),
    ("solve_vec", lambda a, b: ddg.linalg.solve(a + ddg.diag(ddg.ones_like(a[0]) * 4), b),
     lambda a, b: np.linalg.solve(a + np.eye(3) * 4, b), [(3, 3), (3,)], "any"),
    ("einsum_bmm", lambda a, b: ddg.einsum("bij,bjk->bik", a, b), lambda a, b: a @ b, [(2, 3, 4), (2, 4, 5)], "any"),
    ("einsum_sum_out", lambda a, b: ddg.einsum("ij,jk->i", a, b), lambda a, b: (a @ b).sum(1), [(3, 4), (4, 2)],
     "any"),
    ("einsum_outer_implicit", lambda a, b: ddg.einsum("i,j", a, b), np.outer, [(3,), (4,)], "any"),
    ("einsum_transpose", lambda a: ddg.einsum("ijk->kji", a), lambda a: a.transpose(2, 1, 0), [(2, 3, 4)], "any"),
    ("einsum_three", lambda a, b, c: ddg.einsum("ij,jk,k->i", a, b, c), lambda a, b, c: a @ b @ c,
     [(2, 3), (3, 4), (4,)], "any"),
    ("dot", ddg.dot, np.dot, [(4,), (4,)], "any"),
    ("dot_rows", ddg.dot, lambda a, b: (a * b).sum(-1), [(3, 4), (3, 4)], "any"),
    ("outer", ddg.outer, np.outer, [(3,), (4,)], "any"),
    ("t", lambda a: ddg.t(a), lambda a: a.T, [(3, 4)], "any"),
    ("masked_fill", lambda a: ddg.masked_fill(a, a > 0, 2.0), lambda a: np.where(a > 0, 2.0, a), [(3, 4)], "any"),
    ("scale", lambda a: ddg.scale(a, 3.0, 0.5), lambda a: 3.0 * a + 0.5, [(3, 4)], "any"),
    ("clone", lambda a: ddg.clone(a) * 2, lambda a: a * 2, [(3, 4)], "any"),
    ("reshape", lambda a: ddg.reshape(a, [4, -1]), lambda a: a.reshape(4, -1), [(2, 3, 4)], "any"),
    ("reshape_zero", lambda a: ddg.reshape(a, [0, -1]), lambda a: a.reshape(2, -1), [(2, 3, 4)], "any"),
    ("transpose", lambda a: ddg.transpose(a, [2, 0, 1]), lambda a: a.transpose(2, 0, 1), [(2, 3, 4)], "any"),
    ("T", lambda a: a.T, lambda a: a.T, [(2, 3)], "any"),
    ("flatten", lambda a: ddg.flatten(a, 1, 2), lambda a: a.reshape(2, 12), [(2, 3, 4)], "any"),
    ("squeeze", lambda a: ddg.squeeze(a, 1), lambda a: a.squeeze(1), [(3, 1, 4)], "any"),
    ("unsqueeze", lambda a: ddg.unsqueeze(a, [0, 2]), lambda a: a[None, :, None], [(3, 4)], "any"),
    ("expand", lambda a: ddg.expand(a, [2, 3, 4]), lambda a: np.broadcast_to(a, (2, 3, 4)), [(3, 1)], "any"),
    ("broadcast_to", lambda a: ddg.broadcast_to(a, [3, 4]), lambda a: np.broadcast_to(a, (3, 4)), [(4,)], "any"),
    ("tile", lambda a: ddg.tile(a, [2, 3]), lambda a: np.tile(a, (2, 3)), [(2, 3)], "any"),
    ("concat", lambda a, b: ddg.concat([a, b], axis=1), lambda a, b: np.concatenate([a, b], 1), [(2, 3), (2, 4)], "any"),
    ("stack", lambda a, b: ddg.stack([a, b], axis=1), lambda a, b: np.stack([a, b], 1), [(2, 3), (2, 3)], "any"),
    ("split", lambda a: ddg.split(a, [1, 3], axis=1)[1], lambda a: a[:, 1:], [(2, 4)], "any"),
    ("split_neg", lambda a: ddg.split(a, [2, -1], axis=0)[1] * 2, lambda a: a[2:] * 2, [(5, 2)], "any"),
    ("chunk", lambda a: ddg.chunk(a, 2, axis=1)[0], lambda a: a[:, :2], [(3, 4)], "any"),
    ("gather", lambda a: ddg.gather(a, ddg.to_tensor([2, 0, 2])), lambda a: a[[2, 0, 2]], [(3, 4)], "any"),
    ("index_select", lambda a: ddg.index_select(a, ddg.to_tensor([1, 1, 3]), axis=1), lambda a: a[:, [1, 1, 3]],
     [(3, 4)], "any"),
    ("flip", lambda a: ddg.flip(a, [0, 1]), lambda a: a[::-1, ::-1], [(3, 4)], "any"),
    ("getitem_basic", lambda a: a[1:, ::2, None, ...], lambda a: a[1:, ::2, None, ...], [(3, 4, 2)], "any"),
    ("getitem_int", lambda a: a[-1, 2], lambda a: a[-1, 2], [(3, 4)], "any"),
    ("getitem_adv_repeat", lambda a: a[ddg.to_tensor([0, 2, 0, 0])], lambda a: a[[0, 2, 0, 0]], [(3, 4)], "any"),
    ("getitem_mask", lambda a: a[a > 0], lambda a: a[a > 0], [(3, 4)], "any"),
    ("getitem_mixed", lambda a: a[[0, 1], 1:], lambda a: a[[0, 1], 1:], [(3, 4)], "any"),
    ("softmax", lambda a: ddg.nn.functional.softmax(a, axis=1), lambda a: np.exp(a) / np.exp(a).sum(1, keepdims=True),
     [(3, 4)], "any"),
    ("log_softmax", lambda a: ddg.nn.functional.log_softmax(a),
     lambda a: a - np.log(np.exp(a).sum(-1, keepdims=True)), [(3, 4)], "any"),
    ("linear", lambda x, w, b: ddg.nn.functional.linear(x, w, b), lambda x, w, b: x @ w + b, [(3, 4), (4, 5), (5,)],
     "any"),
    ("linear_3d", lambda x, w, b: ddg.nn.functional.linear(x, w, b), lambda x, w, b: x @ w + b,
     [(2, 3, 4), (4, 5), (5,)], "any"),
    ("conv2d", lambda x, w, b: ddg.nn.functional.conv2d(x, w, b, padding=1),
     lambda x, w, b: _conv2d_ref(x, w, b, 1), [(2, 3, 5, 4), (4, 3, 3, 3), (4,)], "any"),
]


def _conv2d_ref(x, w, b, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))  # N C OH OW kh kw
    return np.einsum("nchwij,ocij->nohw", win, w) + b[None, :, None, None]


def _data(shape, domain, rng):
    if domain == "pos":
        return rng.uniform(0.5, 2.0, shape)
    if domain == "away":
        return rng.uniform(0.3, 2.0, shape) * rng.choice([-1, 1], shape)
    return rng.standard_normal(shape)


@pytest.mark.parametrize("name,fn,ref,shapes,domain", ROWS, ids=[r[0] for r in ROWS])
def test_forward_matches_numpy(name, fn, ref, shapes, domain, rng):
    arrays = [_data(s, domain, rng).astype(np.float32) for s in shapes]
    out = fn(*[ddg.to_tensor(a) for a in arrays])
    want = ref(*arrays)
    assert out.shape == list(np.shape(want)), name
    np.testing.assert_allclose(out.numpy(), want, rtol=2e-5, atol=2e-6)
    assert out.dtype == np.float32, f"{name} changed float32 to {out.dtype}"


@pytest.mark.parametrize("name,fn,ref,shapes,domain", ROWS, ids=[r[0] for r in ROWS])
def test_backward_matches_central_differences(name, fn, ref, shapes, domain, rng):
    inputs = [ddg.to_tensor(_data(s, domain, rng), stop_gradient=False) for s in shapes]
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("name,fn,ref,shapes,domain", [r for r in ROWS if len(r[3][0]) >= 2],
                         ids=[r[0] for r in ROWS if len(r[3][0]) >= 2])
def test_backward_on_non_contiguous_inputs(name, fn, ref, shapes, domain, rng):
    """Inputs that are transposed views (not C-contiguous) give the same gradients."""
    def make(s):
        s = tuple(s)
        # every other element of an array twice as large in each dimension: strided, not contiguous
        base = _data(tuple(2 * n for n in s), domain, rng)
        return base[tuple(slice(None, None, 2) for _ in s)]
    arrays = [make(s) for s in shapes]
    inputs = [ddg.to_tensor(a, stop_gradient=False) for a in arrays]
    inputs[0]._data = arrays[0]  # keep the view itself, not a contiguous copy
    assert not inputs[0]._data.flags.c_contiguous
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


ZERO_D = [
    ("add", lambda a, b: a + b), ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b),
    ("pow", lambda a, b: a ** b), ("max", lambda a, b: ddg.maximum(a, b)),
]


@pytest.mark.parametrize("name,fn", ZERO_D, ids=[z[0] for z in ZERO_D])
def test_zero_d_tensors(name, fn):
    a = ddg.to_tensor(np.float64(1.3), stop_gradient=False)
    b = ddg.to_tensor(np.float64(0.7), stop_gradient=False)
    out = fn(a, b)
    assert out.shape == []
    assert gradcheck(fn, [a, b])
    # 0-d with a matrix: broadcasting both ways
    m = ddg.to_tensor(np.random.default_rng(1).uniform(0.5, 2, (2, 3)), stop_gradient=False)
    assert gradcheck(fn, [a, m])
    assert gradcheck(fn, [m, b])


def test_unary_on_zero_d():
    for f in (ddg.exp, ddg.tanh, ddg.sigmoid, lambda t: t.sum(), lambda t: t.mean(), lambda t: t.reshape([1])):
        x = ddg.to_tensor(np.float64(0.4), stop_gradient=False)
        assert gradcheck(f, [x])


def test_cast_gradient_comes_back_in_input_dtype():
    x = ddg.to_tensor(np.array([1.5, -2.0]), stop_gradient=False)  # float64
    y = ddg.cast(x, "float32")
    assert y.dtype == np.float32 and not y.stop_gradient
    (y * 3).sum().backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    # integer casts cut the graph: integers never require grad
    assert ddg.cast(x, "int64").stop_gradient


@pytest.mark.parametrize("name,fn,ref,shapes,domain", ROWS, ids=[r[0] for r in ROWS])
def test_same_results_on_every_backend(name, fn, ref, shapes, domain, place, rng):
    """Forward and backward on each backend equal the CPU results (which the tests above
    check against numpy and central differences). On a GPU place the arrays are cupy
    arrays and the op must not fall back to the host."""
    arrays = [_data(s, domain, rng) for s in shapes]
    cpu = [ddg.to_tensor(a, stop_gradient=False) for a in arrays]
    dev = [ddg.to_tensor(a, place=place, stop_gradient=False) for a in arrays]
    out_cpu, out_dev = fn(*cpu), fn(*dev)
    assert out_dev.place == ddg.tensor.place.parse_place(place)
    np.testing.assert_allclose(out_dev.numpy(), out_cpu.numpy(), rtol=1e-10, atol=1e-12)
    v = np.random.default_rng(1).standard_normal(out_cpu.shape)
    out_cpu.backward(ddg.to_tensor(v))
    out_dev.backward(ddg.to_tensor(v, place=place))
    for c, d in zip(cpu, dev):
        assert d.grad.place == d.place
        np.testing.assert_allclose(d.grad.numpy(), c.grad.numpy(), rtol=1e-9, atol=1e-12)


def _graph_nodes(out):
    nodes, stack = {}, [out._node]
    while stack:
        node = stack.pop()
        if node is None or id(node) in nodes:
            continue
        nodes[id(node)] = node
        stack.extend(e[0] for e in node.edges if e is not None and e[1] is not None)
    return list(nodes.values())


def _guarded_inputs(inputs, out):
    """Indices of the row's inputs whose version some op of the graph recorded, from the
    ops' declarations (``save_inputs`` / ``save_output``)."""
    counters = set()
    for node in _graph_nodes(out):
        counters.update(id(vc) for vc, _ in (node._vin or ()))
        if node._vout is not None:
            counters.add(id(node._vout[0]))
    return [j for j, t in enumerate(inputs) if id(t._vc) in counters]


@pytest.mark.parametrize("name,fn,ref,shapes,domain", ROWS, ids=[r[0] for r in ROWS])
def test_in_place_write_to_a_saved_input_raises(name, fn, ref, shapes, domain, rng):
    """Every input an op's backward reads is declared, and writing it in place between
    forward and backward raises instead of returning a wrong gradient."""
    arrays = [_data(s, domain, rng) for s in shapes]
    other = [_data(s, domain, rng) for s in shapes]

    def run(write=None, bump=False):
        inputs = [ddg.to_tensor(a, stop_gradient=False) for a in arrays]
        out = fn(*inputs)
        v = np.random.default_rng(7).standard_normal(out.shape)
        guarded = _guarded_inputs(inputs, out)
        if write is not None:
            if bump:
                inputs[write].set_value(other[write])      # the public in-place write
            else:
                inputs[write]._data[...] = other[write]    # behind the version counter
        with np.errstate(invalid="ignore", divide="ignore"):  # a probe may leave max's mask empty
            out.backward(ddg.to_tensor(v))
        return guarded, [None if t.grad is None else t.grad.numpy() for t in inputs]

    guarded, want = run()
    # probe: an input whose values backward reads changes the gradients when it changes
    for j in range(len(arrays)):
        _, got = run(write=j)
        reads = any(not np.allclose(g, w, rtol=1e-12, atol=1e-12) for g, w in zip(got, want) if w is not None)
        assert not reads or j in guarded, f"{name}: backward reads input {j} but no op declares it saved"
    # (a family none of whose ops saves an input has now been checked by the probe alone)
    for j in guarded:
        with pytest.raises(RuntimeError, match="modified in place"):
            run(write=j, bump=True)


@pytest.mark.parametrize("sa, sb", [((2, 3, 0), (0, 5)), ((2, 3, 4), (4, 0)), ((0, 3, 4), (4, 5))])
def test_matmul_batch_by_matrix_with_empty_axes(sa, sb):
    # a batch of matrices times one matrix folds the batch into rows; empty axes fold too
    rng = np.random.default_rng(0)
    a, b, g = rng.standard_normal(sa), rng.standard_normal(sb), rng.standard_normal(sa[:-1] + sb[-1:])
    ta, tb = ddg.to_tensor(a, stop_gradient=False), ddg.to_tensor(b, stop_gradient=False)
    out = ddg.matmul(ta, tb)
    out.backward(ddg.to_tensor(g))
    np.testing.assert_allclose(out.numpy(), a @ b)
    np.testing.assert_allclose(ta.grad.numpy(), g @ b.T)
    np.testing.assert_allclose(tb.grad.numpy(), np.tensordot(a, g, axes=(list(range(a.ndim - 1)),) * 2))


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_add_of_batch_innermost_and_c_ordered_images_is_batch_innermost(order):
    """A residual add of a batch-innermost [N, C, H, W] array (ddg's convolution output
    layout) and a C-ordered one gives a batch-innermost sum (numpy would give C order and
    every later convolution would transpose it): same values, gradient to both inputs;
    two C-ordered operands, a single image or other shapes keep numpy's layout."""
    from ddg.autograd.ops.conv import _is_chwn
    rng = np.random.default_rng(3)
    base = ddg.to_tensor(rng.standard_normal((4, 6, 3, 5)), stop_gradient=False)   # [C, H, W, N]
    chwn = base.transpose([3, 0, 1, 2])             # [N, C, H, W] stored CHWN (a view)
    assert _is_chwn(chwn._data)
    nchw = ddg.to_tensor(rng.standard_normal((5, 4, 6, 3)), stop_gradient=False)
    a, b = (chwn, nchw) if order == "ab" else (nchw, chwn)
    y = a + b
    assert _is_chwn(y._data) and not y._data.flags.c_contiguous
    np.testing.assert_array_equal(y.numpy(), a.numpy() + b.numpy())
    g = rng.standard_normal(y.shape)
    (y * ddg.to_tensor(g)).sum().backward()
    np.testing.assert_array_equal(base.grad.numpy(), g.transpose(1, 2, 3, 0))
    np.testing.assert_array_equal(nchw.grad.numpy(), g)
    assert (nchw + nchw)._data.flags.c_contiguous
    one = chwn[:1]
    assert (one + ddg.to_tensor(one.numpy()))._data.flags.c_contiguous


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("order", ["ab", "ba"])
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
def test_mixed_image_layouts_at_sizes_the_blocked_transpose_takes(op, order, dt):
    """Past ``gemm.RELAYOUT_MIN`` the C-ordered operand goes into the batch-innermost
    result by the blocked transpose and the op runs in place: numpy's values bit for bit,
    either operand first, both float dtypes; gradients as for same-layout operands."""
    from ddg.autograd.ops.conv import _is_chwn
    from ddg.tensor import gemm
    rng = np.random.default_rng(len(op) + len(order))
    shape = (16, 8, 12, 12)                                # N, C, H, W
    assert np.prod(shape) >= gemm.RELAYOUT_MIN
    base = (rng.standard_normal(shape[1:] + shape[:1]) + 3.0).astype(dt)    # [C, H, W, N]
    other = (rng.standard_normal(shape) + 3.0).astype(dt)
    tb, to = ddg.to_tensor(base, stop_gradient=False), ddg.to_tensor(other, stop_gradient=False)
    chwn = tb.transpose([3, 0, 1, 2])
    a, b = (chwn, to) if order == "ab" else (to, chwn)
    y = getattr(ddg, op)(a, b)
    assert _is_chwn(y._data) and not y._data.flags.c_contiguous and y.dtype == a.dtype
    np.testing.assert_array_equal(y.numpy(), getattr(np, op)(a.numpy(), b.numpy()))
    g = rng.standard_normal(shape).astype(dt)
    (y * ddg.to_tensor(g)).sum().backward()
    rb = ddg.to_tensor(np.ascontiguousarray(base.transpose(3, 0, 1, 2)), stop_gradient=False)
    ro = ddg.to_tensor(other, stop_gradient=False)
    ra, rbb = (rb, ro) if order == "ab" else (ro, rb)
    (getattr(ddg, op)(ra, rbb) * ddg.to_tensor(g)).sum().backward()
    np.testing.assert_allclose(tb.grad.numpy(), rb.grad.numpy().transpose(1, 2, 3, 0), rtol=1e-6)
    np.testing.assert_allclose(to.grad.numpy(), ro.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("op", ["subtract", "multiply", "divide"])
def test_other_arithmetic_of_mixed_image_layouts_is_batch_innermost(op):
    """Subtract, multiply and divide follow the add's layout rule for a batch-innermost and
    a C-ordered float image: the result batch-innermost, numpy's values, gradients as for
    same-layout operands; integer images keep numpy's result (a true division of ints is
    float)."""
    from ddg.autograd.ops.conv import _is_chwn
    rng = np.random.default_rng(4)
    base = rng.standard_normal((4, 6, 3, 5)) + 3.0
    other = rng.standard_normal((5, 4, 6, 3)) + 3.0
    fn = getattr(ddg, op)
    tb, to = ddg.to_tensor(base, stop_gradient=False), ddg.to_tensor(other, stop_gradient=False)
    y = fn(tb.transpose([3, 0, 1, 2]), to)
    assert _is_chwn(y._data) and not y._data.flags.c_contiguous
    np.testing.assert_array_equal(y.numpy(), getattr(np, op)(base.transpose(3, 0, 1, 2), other))
    y.sum().backward()
    rb, ro = ddg.to_tensor(np.ascontiguousarray(base.transpose(3, 0, 1, 2)), stop_gradient=False), \
        ddg.to_tensor(other, stop_gradient=False)
    fn(rb, ro).sum().backward()
    np.testing.assert_allclose(tb.grad.numpy(), rb.grad.numpy().transpose(1, 2, 3, 0), rtol=1e-12)
    np.testing.assert_allclose(to.grad.numpy(), ro.grad.numpy(), rtol=1e-12)
    ints = ddg.to_tensor(np.arange(5 * 4 * 6 * 3).reshape(4, 6, 3, 5) + 1).transpose([3, 0, 1, 2])
    r = fn(ints, ddg.to_tensor(np.ones((5, 4, 6, 3), np.int64)))
    np.testing.assert_array_equal(r.numpy(), getattr(np, op)(ints.numpy(), np.ones((5, 4, 6, 3), np.int64)))
