"""ddg.fft against numpy's FFTs (values and dtypes; hfft*/ihfft* against their definitions,
which Paddle 3.3.1 matches), and gradients against float64 central differences, for
every transform, norm, cropping/padding and real/complex input; real/imag/conj."""
import numpy as np
import pytest

import ddg
import ddg.fft as F

# numpy 2 warns when s is given without axes (the references below); on these 2-D inputs
# with len(s) == 2 the old and the announced meanings agree
pytestmark = pytest.mark.filterwarnings("ignore:`axes` should not be `None`:DeprecationWarning")

DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _np_hfftn(a, s=None, axes=None, norm="backward"):
    return np.fft.irfftn(np.conj(a), s=s, axes=axes, norm=DUAL[norm])


def _np_ihfftn(a, s=None, axes=None, norm="backward"):
    return np.conj(np.fft.rfftn(a, s=s, axes=axes, norm=DUAL[norm]))


# name: (ddg function, numpy reference, takes complex input, size argument: "n" or "s")
CASES = {
    "fft": (F.fft, np.fft.fft, True, "n"), "ifft": (F.ifft, np.fft.ifft, True, "n"),
    "rfft": (F.rfft, np.fft.rfft, False, "n"), "irfft": (F.irfft, np.fft.irfft, True, "n"),
    "hfft": (F.hfft, np.fft.hfft, True, "n"), "ihfft": (F.ihfft, np.fft.ihfft, False, "n"),
    "fft2": (F.fft2, np.fft.fft2, True, "s"), "ifft2": (F.ifft2, np.fft.ifft2, True, "s"),
    "rfft2": (F.rfft2, np.fft.rfft2, False, "s"), "irfft2": (F.irfft2, np.fft.irfft2, True, "s"),
    "hfft2": (F.hfft2, lambda a, s=None, norm="backward": _np_hfftn(a, s, (-2, -1), norm), True, "s"),
    "ihfft2": (F.ihfft2, lambda a, s=None, norm="backward": _np_ihfftn(a, s, (-2, -1), norm), False, "s"),
    "fftn": (F.fftn, np.fft.fftn, True, "s"), "ifftn": (F.ifftn, np.fft.ifftn, True, "s"),
    "rfftn": (F.rfftn, np.fft.rfftn, False, "s"), "irfftn": (F.irfftn, np.fft.irfftn, True, "s"),
    "hfftn": (F.hfftn, _np_hfftn, True, "s"), "ihfftn": (F.ihfftn, _np_ihfftn, False, "s"),
}
SIZES = {"n": [None, 3, 7], "s": [None, [2, 3], [4, 7]]}


def _loss_weights(y, rng):
    w = rng.standard_normal(y.shape)
    if np.iscomplexobj(y):
        w = w + 1j * rng.standard_normal(y.shape)
    return w


def _loss(y, w):
    """A real loss of ``y``: sum(Re(w) Re(y) + Im(w) Im(y))."""
    return float(np.sum(w.real * y.real) + (np.sum(w.imag * y.imag) if np.iscomplexobj(y) else 0.0))


def _numeric_grad(f, x, w, eps=1e-6):
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        for unit in ((1.0, 1j) if np.iscomplexobj(x) else (1.0,)):
            xp, xm = x.copy(), x.copy()
            xp[idx] += eps * unit
            xm[idx] -= eps * unit
            d = (_loss(f(xp), w) - _loss(f(xm), w)) / (2 * eps)
            g[idx] += d * unit
    return g


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients(name, norm, rng):
    fn, ref, complex_in, arg = CASES[name]
    shape = (3, 4)
    for size in SIZES[arg]:
        for cplx in ((True, False) if complex_in else (False,)):
            x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if cplx else 0)
            kw = {"norm": norm} if size is None else {arg: size, "norm": norm}
            want = ref(x, **kw)
            xt = ddg.to_tensor(x)
            xt.stop_gradient = False
            y = fn(xt, **kw)
            assert y.dtype == want.dtype, (name, size, cplx)
            np.testing.assert_allclose(y.numpy(), want, rtol=1e-10, atol=1e-10)
            w = _loss_weights(want, rng)
            yw = (y * ddg.to_tensor(w)).real() if np.iscomplexobj(want) else y * ddg.to_tensor(w)
            yw.sum().backward()
            num = _numeric_grad(lambda a: ref(a, **kw), x, w)
            assert xt.grad.dtype == xt.dtype
            np.testing.assert_allclose(xt.grad.numpy(), num, rtol=1e-5, atol=1e-6, err_msg=f"{name} {size} {cplx}")


def test_single_precision_integer_and_axes():
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    y = F.fft(ddg.to_tensor(x), axis=1)
    assert y.dtype == ddg.complex64 if hasattr(ddg, "complex64") else y.dtype == np.complex64
    np.testing.assert_allclose(y.numpy(), np.fft.fft(x, axis=1), rtol=1e-4, atol=1e-4)
    assert F.irfft(F.rfft(ddg.to_tensor(x))).dtype == np.float32
    yi = F.fft(ddg.arange(4))  # integers are transformed as the default float dtype
    assert yi.dtype == np.complex64
    np.testing.assert_allclose(yi.numpy(), np.fft.fft(np.arange(4)), atol=1e-5)
    np.testing.assert_allclose(F.fftn(ddg.to_tensor(x), s=[5], axes=[0]).numpy(),
                               np.fft.fftn(x, s=[5], axes=[0]), rtol=1e-4, atol=1e-4)


def test_errors_name_the_argument():
    x = ddg.ones([4])
    with pytest.raises(ValueError, match="Unexpected norm: bad"):
        F.fft(x, norm="bad")
    with pytest.raises(ValueError, match=r"Invalid FFT argument n\(0\)"):
        F.fft(x, n=0)
    with pytest.raises(ValueError, match="rank of the input"):
        F.fft2(x)
    with pytest.raises(TypeError, match="must be real"):
        F.rfft(ddg.to_tensor(np.ones(4, dtype=np.complex128)))
    with pytest.raises(ValueError, match="same length"):
        F.fftn(ddg.ones([2, 2]), s=[2], axes=[0, 1])


def test_frequencies_and_shifts(rng):
    np.testing.assert_allclose(F.fftfreq(5, 0.5).numpy(), np.fft.fftfreq(5, 0.5), rtol=1e-6)
    np.testing.assert_allclose(F.rfftfreq(6, dtype="float64").numpy(), np.fft.rfftfreq(6))
    assert F.fftfreq(4).dtype == ddg.float32
    for shape, axes in [((5,), None), ((2, 3), None), ((4, 5), [1]), ((3, 4, 5), (0, 2))]:
        a = rng.standard_normal(shape)
        np.testing.assert_array_equal(F.fftshift(ddg.to_tensor(a), axes).numpy(), np.fft.fftshift(a, axes))
        np.testing.assert_array_equal(F.ifftshift(ddg.to_tensor(a), axes).numpy(), np.fft.ifftshift(a, axes))
    x = ddg.to_tensor(rng.standard_normal((3, 4)))
    x.stop_gradient = False
    (F.fftshift(x) * ddg.arange(12).reshape([3, 4]).astype("float64")).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.fft.ifftshift(np.arange(12.0).reshape(3, 4)))


def test_real_imag_conj(rng):
    z = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    zt = ddg.to_tensor(z)
    zt.stop_gradient = False
    w1, w2 = rng.standard_normal(4), rng.standard_normal(4)
    (ddg.real(zt) * ddg.to_tensor(w1) + zt.imag() * ddg.to_tensor(w2)).sum().backward()
    np.testing.assert_allclose(zt.grad.numpy(), w1 + 1j * w2)
    np.testing.assert_array_equal(ddg.conj(zt).numpy(), np.conj(z))
    zt.clear_grad()
    (ddg.conj(zt).imag() * ddg.to_tensor(w2)).sum().backward()
    np.testing.assert_allclose(zt.grad.numpy(), -1j * w2)
    r = ddg.to_tensor([1.0, 2.0])
    assert ddg.imag(r).numpy().tolist() == [0.0, 0.0] and ddg.conj(r).numpy().tolist() == [1.0, 2.0]
