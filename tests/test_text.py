"""ddg.text: viterbi_decode / ViterbiDecoder against brute force over every path (with
Paddle 3.3.1's start/stop-tag convention, checked on its own outputs), and the text
datasets on small archives in the official formats."""
import itertools

import numpy as np
import pytest

import ddg
from ddg.text import ViterbiDecoder, viterbi_decode


def _brute(pot, tr, lens, bos):
    n = tr.shape[0]
    scores, paths = [], np.zeros((len(lens), int(max(lens))), dtype=np.int64)
    for b, L in enumerate(lens):
        best = None
        for path in itertools.product(range(n), repeat=int(L)):
            s = sum(pot[b, t, path[t]] for t in range(L)) + sum(tr[path[t - 1], path[t]] for t in range(1, L))
            if bos:
                s += tr[n - 1, path[0]] + tr[n - 2, path[-1]]
            if best is None or s > best[0] + 1e-12:
                best = (s, path)
        scores.append(best[0])
        paths[b, :L] = best[1]
    return np.array(scores), paths


@pytest.mark.parametrize("bos", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 1, 2), (3, 4, 3), (4, 5, 4), (2, 3, 5)])
def test_viterbi_against_brute_force(shape, dtype, bos, rng):
    b, t, n = shape
    pot = rng.standard_normal(shape).astype(dtype)
    tr = rng.standard_normal((n, n)).astype(dtype)
    lens = rng.integers(1, t + 1, b)
    scores, paths = viterbi_decode(ddg.to_tensor(pot), ddg.to_tensor(tr), ddg.to_tensor(lens), bos)
    want_s, want_p = _brute(pot.astype(np.float64), tr.astype(np.float64), lens, bos)
    assert scores.dtype == np.dtype(dtype) and paths.dtype == ddg.int64
    assert paths.shape == [b, int(lens.max())]
    np.testing.assert_allclose(scores.numpy(), want_s, rtol=1e-5 if dtype == "float32" else 1e-12)
    np.testing.assert_array_equal(paths.numpy(), want_p)
    s2, p2 = ViterbiDecoder(ddg.to_tensor(tr), include_bos_eos_tag=bos)(ddg.to_tensor(pot), ddg.to_tensor(lens))
    np.testing.assert_array_equal(p2.numpy(), paths.numpy())


def test_viterbi_paddle_values_and_errors():
    rng = np.random.default_rng(0)
    pot, tr = rng.standard_normal((3, 4, 4)), rng.standard_normal((4, 4))
    lens = ddg.to_tensor(np.array([4, 2, 1]))
    s, p = viterbi_decode(ddg.to_tensor(pot), ddg.to_tensor(tr), lens)  # Paddle 3.3.1's outputs
    np.testing.assert_allclose(s.numpy(), [5.16423931, 4.90954733, 0.76990903], rtol=1e-8)
    assert p.numpy().tolist() == [[2, 0, 0, 1], [2, 1, 0, 0], [2, 0, 0, 0]]
    with pytest.raises(ValueError, match="transition_params must be"):
        viterbi_decode(ddg.to_tensor(pot), ddg.ones([3, 3], dtype="float64"), lens)
    with pytest.raises(TypeError, match="lengths has dtype"):
        viterbi_decode(ddg.to_tensor(pot), ddg.to_tensor(tr), ddg.ones([3]))
    with pytest.raises(ValueError, match="lengths must be in"):
        viterbi_decode(ddg.to_tensor(pot), ddg.to_tensor(tr), ddg.to_tensor(np.array([5, 1, 1])))
