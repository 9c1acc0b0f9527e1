"""The numba CPU kernels of ddg/tensor/cpu_nn_kernels.py: the float32 polynomials' error
bounds (exp, log1p, tanh, the normal CDF of exact GELU) against float64 libm, measured
through the activation kernels that use them, and IEEE specials."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

K = pytest.importorskip("ddg.tensor.cpu_nn_kernels")

_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])


def _grid():
    x = np.concatenate([np.linspace(-30, 30, 120001), np.geomspace(1e-30, 1, 301), -np.geomspace(1e-30, 1, 301)])
    return x.astype(np.float32)


def _fwd(kind, x, *p):
    out = np.empty_like(x)
    K.act_forward(getattr(K, kind), x, out, *(x.dtype.type(v) for v in (p + (0.0, 0.0, 0.0))[:3]))
    return out


def _bwd(kind, x, *p):
    out = np.empty_like(x)
    K.act_backward(getattr(K, kind), x, np.ones_like(x), out, *(x.dtype.type(v) for v in (p + (0.0, 0.0, 0.0))[:3]))
    return out


def test_float32_exp_relative_error():
    """exp through ELU (alpha 1, scale 1): exp(x) = elu'(x) for x < 0, relative error < 3e-7
    down to -86.6 (0 below)."""
    x = -np.geomspace(1e-6, 86.6, 20001).astype(np.float32)
    got = _bwd("ELU", x, 1.0, 1.0, 1.0).astype(np.float64)
    ref = np.exp(x.astype(np.float64))
    assert (np.abs(got - ref) / ref).max() < 3e-7
    assert _bwd("ELU", np.array([-86.7, -1e30], np.float32), 1.0, 1.0, 1.0).tolist() == [0.0, 0.0]


def test_float32_log1p_and_softplus_absolute_error():
    """softplus(x) = max(x, 0) + log1p(exp(-|x|)): absolute error < 1.6e-7, or relative error
    < 2.5e-7 (the float32 rounding of the result) against float64."""
    x = _grid()
    got = _fwd("SOFTPLUS", x, 1.0, 20.0, 1.0).astype(np.float64)
    x64 = x.astype(np.float64)
    ref = np.where(x64 > 20, x64, np.maximum(x64, 0) + np.log1p(np.exp(-np.abs(x64))))
    err = np.abs(got - ref)
    assert (err <= np.maximum(1.6e-7, 2.5e-7 * np.abs(ref))).all()


def test_float32_tanh_absolute_error():
    """tanh through Tanhshrink: tanh(x) = x - tanhshrink(x), absolute error < 2.5e-7."""
    x = _grid()
    x = x[np.abs(x) < 10]
    got = _fwd("TANHSHRINK", x).astype(np.float64)
    ref = x.astype(np.float64) - np.tanh(x.astype(np.float64))
    assert np.abs(got - ref).max() < 2.5e-7 * 10   # the subtraction from x rounds to x's ulp
    t = _bwd("TANHSHRINK", x).astype(np.float64)    # tanh(x)^2
    assert np.abs(np.sqrt(t) - np.abs(np.tanh(x.astype(np.float64)))).max() < 2.5e-7


def test_float32_normal_cdf_of_exact_gelu():
    """Phi = gelu(x) / x: absolute error < 3e-7 against float64 erfc; GELU's derivative
    Phi(x) + x phi(x) within 5e-7 (relative to max(1, |x|))."""
    x = _grid()
    x = x[(np.abs(x) > 1e-3) & (np.abs(x) < 12)]
    x64 = x.astype(np.float64)
    phi = 0.5 * _erfc64(-x64 / math.sqrt(2))
    got = _fwd("GELU", x).astype(np.float64) / x64
    assert np.abs(got - phi).max() < 3e-7
    d = phi + x64 * np.exp(-0.5 * x64 * x64) / math.sqrt(2 * math.pi)
    assert (np.abs(_bwd("GELU", x).astype(np.float64) - d) / np.maximum(1, np.abs(x64))).max() < 5e-7


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_specials_propagate(dtype):
    x = np.array([np.nan, np.inf, -np.inf, 0.0], dtype)
    for kind in ("GELU", "GELU_TANH", "SILU", "MISH", "ELU", "SOFTPLUS", "LOGSIGMOID", "TANHSHRINK", "SOFTSIGN",
                 "LEAKY", "HARDSWISH", "HARDSIGMOID", "SOFTSHRINK", "HARDSHRINK", "THRESHOLDED"):
        y = _fwd(kind, x, 1.0, 1.0, 1.0)
        assert np.isnan(y[0]), kind
        assert y[3] == 0 or kind in ("SOFTPLUS", "LOGSIGMOID", "HARDSIGMOID", "THRESHOLDED"), kind
    assert _fwd("GELU", x)[1] == np.inf and _fwd("SILU", x)[1] == np.inf and _fwd("ELU", x, 1, 1, 1)[1] == np.inf
    assert _fwd("SOFTPLUS", x, 1.0, 20.0, 1.0)[1] == np.inf and _fwd("SOFTPLUS", x, 1.0, 20.0, 1.0)[2] == 0
    assert _fwd("ELU", x, 1.0, 1.0, 1.0)[2] == -1


def test_each_activation_compiles_alone(tmp_path):
    """A ReLU's gradient compiles the ReLU kernel and not the others' loops (one kernel per
    activation and direction: a branch on the activation inside one kernel compiled GELU's
    erfc, Mish's softplus and every other loop for it, ~2.5 s of CPU per direction and
    dtype). A fresh process with an empty cache, every compile recorded."""
    body = (
        "import numpy as np\n"
        "from numba.core import event\n"
        "names = []\n"
        "class L(event.Listener):\n"
        "    def on_start(self, ev): names.append(ev.data['dispatcher'].py_func.__qualname__)\n"
        "    def on_end(self, ev): pass\n"
        "event.register('numba:compile', L())\n"
        "from ddg.tensor import cpu_nn_kernels as K\n"
        "x = np.linspace(-1, 1, 7).astype(np.float32); g = np.ones_like(x); out = np.empty_like(x)\n"
        "z = np.float32(0)\n"
        "K.act_backward(K.RELU, x, g, out, z, z, z)\n"
        "assert out.tolist() == [0, 0, 0, 0, 1, 1, 1], out\n"
        "K.act_forward(K.GELU, x, out, z, z, z)\n"
        "print(' '.join(names))\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", body], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    names = r.stdout.split()
    kernels = [n for n in names if n.startswith(("_fwd_", "_bwd_"))]
    assert kernels == ["_bwd_relu", "_fwd_gelu"], names
