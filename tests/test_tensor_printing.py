"""Tensor printing follows Paddle's layout; the expected strings are what Paddle 3.3.1 printed
for the same tensors (see ddg/tensor/printing.py for the rules)."""
import numpy as np
import pytest

import ddg


CASES = [
    ('ddg.to_tensor([1.5, 2.25, -3.0])',
     'Tensor(shape=[3], dtype=float32, place=Place(cpu), stop_gradient=True,\n       [1.50000000, 2.25000000, -3.       ])'),
    ('ddg.to_tensor([True, False])',
     'Tensor(shape=[2], dtype=bool, place=Place(cpu), stop_gradient=True,\n       [True , False])'),
    ('ddg.to_tensor(3.0)',
     'Tensor(shape=[], dtype=float32, place=Place(cpu), stop_gradient=True,\n       3.)'),
    ("ddg.to_tensor(np.arange(2000, dtype='float32').reshape(40, 50))",
     'Tensor(shape=[40, 50], dtype=float32, place=Place(cpu), stop_gradient=True,\n       [[0.   , 1.   , 2.   , ..., 47.  , 48.  , 49.  ],\n        [50.  , 51.  , 52.  , ..., 97.  , 98.  , 99.  ],\n        [100. , 101. , 102. , ..., 147. , 148. , 149. ],\n        ...,\n        [1850., 1851., 1852., ..., 1897., 1898., 1899.],\n        [1900., 1901., 1902., ..., 1947., 1948., 1949.],\n        [1950., 1951., 1952., ..., 1997., 1998., 1999.]])'),
    ('ddg.to_tensor([1e10, 1.0])',
     'Tensor(shape=[2], dtype=float32, place=Place(cpu), stop_gradient=True,\n       [10000000000., 1.          ])'),
    ('ddg.to_tensor(np.zeros((2, 0)))',
     'Tensor(shape=[2, 0], dtype=float64, place=Place(cpu), stop_gradient=True,\n       [[],\n        []])'),
    ('ddg.to_tensor([np.nan, np.inf, 1.0])',
     'Tensor(shape=[3], dtype=float32, place=Place(cpu), stop_gradient=True,\n       [nan , inf., 1.  ])'),
    ('ddg.to_tensor(np.arange(-5, 30))',
     'Tensor(shape=[35], dtype=int64, place=Place(cpu), stop_gradient=True,\n       [-5, -4, -3, -2, -1,  0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12,\n        13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])'),
]


@pytest.mark.parametrize("expr,want", CASES, ids=[c[0] for c in CASES])
def test_repr_matches_paddle(expr, want):
    assert repr(eval(expr)) == want


def test_printoptions_sci_mode_summary_and_wrapping():
    try:
        ddg.set_printoptions(precision=3, sci_mode=True)
        assert repr(ddg.to_tensor([1.5, -2e-5, 300.0])).endswith("[ 1.500e+00, -2.000e-05,  3.000e+02])")
        ddg.set_printoptions(precision=2, sci_mode=False, threshold=10, edgeitems=2, linewidth=30)
        text = repr(ddg.to_tensor(np.arange(30.0) + 0.5))
        assert text.endswith("[0.50 , 1.50 , ...,\n        28.50, 29.50])")
        text = repr(ddg.to_tensor(np.arange(8.0) + 0.25))
        assert text.endswith("[0.25, 1.25, 2.25,\n        3.25, 4.25, 5.25,\n        6.25, 7.25])")
    finally:
        ddg.set_printoptions(precision=8, threshold=1000, edgeitems=3, linewidth=80, sci_mode=False)
