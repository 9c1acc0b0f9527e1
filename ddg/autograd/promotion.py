"""Paddle 3's type promotion between two tensors, in one place (a helper of the op
files, like ``axes``; it imports no op).

Paddle 3 promotes only among floating-point dtypes (float32 with float64 gives float64);
any other pair of different dtypes (int64 with float32, int32 with int64, bool with
int64) is a TypeError. A 0-d tensor acts like a Python scalar: beside a tensor with
dimensions it takes that tensor's dtype, except that a 0-d float beside an integer
tensor gives the 0-d tensor's float dtype; two 0-d tensors promote as numpy does,
except that a float with an integer keeps the float's dtype.
Python scalars never raise: an int keeps the tensor's dtype, a float makes an integer
tensor the default float dtype (handled by each op). Paddle 2.6 cast the right operand
to the left one's dtype instead; ddg follows 3.x.

bfloat16 (ml_dtypes, whose numpy kind is 'V') is a float here. Paddle 3 promotes
float16 with bfloat16 to float32 (neither holds the other's values); numpy has no
common type for the pair, so ``_promote_floats`` says so itself.
"""
import numpy as np

from ..tensor.dtypes import float32, is_floating as _is_float, is_half


def _promote_floats(da, db):
    if is_half(da) and is_half(db):   # float16 with bfloat16 (equal dtypes returned earlier)
        return float32
    return np.promote_types(da, db)


def result_dtype(da, nda, db, ndb, op, scalar_tensors=True):
    """The dtype that ``op`` computes in for operands of dtypes ``da``/``db`` with
    ``nda``/``ndb`` dimensions; TypeError where Paddle 3 refuses the pair."""
    if da == db:
        return da
    fa, fb = _is_float(da), _is_float(db)
    za, zb = nda == 0, ndb == 0
    if scalar_tensors and za and zb:
        if fa != fb:  # a 0-d float with a 0-d integer: the float's dtype
            return da if fa else db
        return _promote_floats(da, db) if fa else np.promote_types(da, db)
    if fa and fb:
        if scalar_tensors and za != zb:
            return db if za else da
        return _promote_floats(da, db)
    if scalar_tensors and za != zb:
        z, t = (da, db) if za else (db, da)
        return z if _is_float(z) and not _is_float(t) else t
    raise TypeError(f"ddg.{op}: operands of different dtypes {da} and {db} (Paddle 3 promotes only between "
                    f"floating-point dtypes); cast one of them with .astype()")
