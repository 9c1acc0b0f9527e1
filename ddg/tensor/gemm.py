"""Which 2-D float32 products run the compiled kernel (``gemm_kernels.gemm``) instead of
numpy's BLAS, and the call itself. Imports neither numba nor the kernels until a product
takes them.

The kernel is one thread. It replaces a BLAS call only where the BLAS runs one thread too
(``blas_threads() == 1``): a multi-threaded BLAS is left alone, whatever the shape. The
count is asked of the BLAS library numpy loaded, on every product (a ctypes call, <1 us),
so ``threadpoolctl`` limits set at run time count: OpenBLAS (numpy's wheels,
``scipy_openblas``) through ``openblas_get_num_threads``, MKL through
``MKL_Get_Max_Threads``. Where no such library is found (another BLAS, another OS), the
count is 1 only if ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` or ``OMP_NUM_THREADS``
is ``1`` or the process may run on one CPU; otherwise numpy's BLAS runs.

Shapes: ``M``, ``K``, ``N`` of at least ``MIN_DIM`` and ``M*K*N`` of at least
``MIN_MACS`` (below that numpy's call costs less than the kernel's dispatch), ``N`` at most
``MAX_N``, and at most ``MAX_T`` rows and columns where A is read transposed (a weight
gradient with a vocabulary-sized side: OpenBLAS blocks it better) unless both are at
least ``T_WIDE_MIN`` and neither past ``T_WIDE_MAX``, and not few rows times
a large B (see ``FEW_M``). Each operand must be C-contiguous or the
transpose of a C-contiguous array (the kernel reads it transposed in place, or packs it)
and writeable; anything else (a strided view that would need a copy) stays on numpy.
"""
import ctypes
import os

import numpy as np


def _host_avx512():
    """Whether this CPU has AVX-512F, as numpy's own dispatch saw it (no numba import)."""
    for mod in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):
        try:
            return bool(__import__(mod, fromlist=["__cpu_features__"]).__cpu_features__.get("AVX512F"))
        except (ImportError, AttributeError):
            continue
    return False


# The kernel's register tile wants AVX-512's 32 vector registers. On AVX2 alone (16 of 8
# lanes) it runs in row groups (``gemm_kernels._row_groups``) at 52-64 GFLOP/s where OpenBLAS's
# own AVX2 kernel runs 68-80 (Zen 3, 1 thread: [3200 x 1024] @ [1024 x 1024] 52 / 68, [2048 x
# 768] @ [768 x 3072] 57 / 74; transformer steps d 128-1024 1.09-1.25x torch with the kernel,
# 0.83-0.96x without), so there numpy's BLAS takes every product: the kernel is on by
# default only where the CPU has AVX-512F; ``DDG_CPU_GEMM=1`` or ``0`` sets it either way.
# The test suite switches it on to check it on any CPU, benchmarks off to compare with numpy
ENABLED = {"0": False, "1": True}.get(os.environ.get("DDG_CPU_GEMM", "").strip(), _host_avx512())
# The ops that run the register tiles inside one fused kernel (the attention's, where each
# head's products and softmax stay in L1/L2 instead of one BLAS call per head) may use them
# on AVX2 too, in the ranges each op measured there; only ``DDG_CPU_GEMM=0`` turns them off
FUSED = os.environ.get("DDG_CPU_GEMM", "").strip() != "0"
MIN_DIM = 16
MIN_MACS = 1 << 19
MAX_N = 8192    # columns of the output
# products below MIN_MACS go straight to numpy's ``@`` (``product``) where B is C-contiguous,
# or A has at most SMALL_T_ROWS rows, or B at most SMALL_T_COLS columns; a small product with a
# transposed B past both still takes ``few_rows_product``'s transposed form
SMALL_T_ROWS, SMALL_T_COLS = 8, 64
MAX_T = 2048    # rows and columns of the output when A is read transposed (x^T of a weight gradient)
# ... or up to T_WIDE_MAX where both are at least T_WIDE_MIN: with x^T copied to panels
# (PACK_AT_MIN) the kernel ran [3072 x 1024] at 90-97 GFLOP/s against OpenBLAS's 56-94
# (K = 32-512 rows of x; equal at 512), [768 x 3072] (a 4x feed-forward's first weight)
# 90-107 against 55-98; [8192 x 512] 49-85 against 68-97 and [256 x 5000] 84-96 against
# 81-100 stay with OpenBLAS
T_WIDE_MIN, T_WIDE_MAX = 768, 4096
# B is copied to panels of 16 columns (one sequential pass that also brings it into cache;
# the panels are then read sequentially by every row tile) from PACK_B_MIN_M rows of the
# output on, or from PACK_B_WIDE_M where B's rows are PACK_B_WIDE_N long (4 KB: read in
# place they share L1 sets); with fewer rows the copy costs more than it saves and B is
# read in place. A transposed B (``W^T`` of an input gradient) is always packed.
PACK_B_MIN_M, PACK_B_WIDE_M, PACK_B_WIDE_N = 256, 32, 1024
# Fewer than FEW_M rows of A (not transposed) times a B of more than BIG_B elements are
# left to numpy: B (a weight, cold in a training step) is read from memory once either
# way, and the packing then outweighs the product. Cold [K, N] weights, 1 thread, kernel /
# OpenBLAS GFLOP/s at 16-64 rows: [1024, 2048] 36-69 / 42-75, [784, 1024] 42-65 / 49-81;
# equal at 128; MLP steps at batch 32-100 with 1024-2048 wide layers 2-11% faster
FEW_M, BIG_B = 128, 1 << 18
# ``A @ B`` with B the transpose of a C-contiguous matrix (a Linear layer's input gradient
# ``g @ W^T``) is formed as ``(B^T @ A^T)^T`` where B has at least TRANS_OUT_RATIO times as many
# elements as A and the output together (few rows of A: small batches, short sequences): W
# is then read in place, row by row, and the kernel copies A (warm, just computed) to panels
# instead of W (cold) and transposes the small output; where A and the output are the larger,
# copying W costs less. Cold W, 1 thread, GFLOP/s W^T panels -> W in place: [160 x 768] @
# [768, 768]^T 88.6 -> 93.9, [160 x 768] @ [1536 x 768]^T 91.7 -> 100.5, [64 x 1024] @
# [1024 x 1024]^T 66.5 -> 95.5 (numpy's 63.1), [128 x 256] @ [1024 x 256]^T 84.1 -> 91.3;
# [200 x 512] @ [512 x 512]^T (ratio 1.3) 92.9 -> 85.9 stays with the W^T panels
TRANS_OUT_RATIO = 1.5
# A read transposed (``x^T`` of a weight gradient) is copied to 8-column panels from
# PACK_AT_MIN rows and columns of the output on: its rows (the tile reads 8 neighbours of
# one per k) are then consecutive 32-byte lines instead of one per row of x, rows of x that
# at 1024 columns (4 KB) share a cache set (tile alone on packed B, K=512: [1024 x 1024]
# 99 -> 107 GFLOP/s, [2048 x 1024] 93 -> 103, [1024 x 2048] 91 -> 110, [768 x 768] 100 ->
# 103; [512 x 512] 107 -> 103 and a narrow output (N=384) 102 -> 97, where the copy, made
# once, is reused over fewer column blocks)
PACK_AT_MIN = 768
# ... and from PACK_AT_4K_N columns where x's rows are a multiple of 4 KB (M % 1024 == 0: the
# 8 rows a tile reads share one L1 set): cold operands, K = 512, GFLOP/s in place -> packed
# [1024 x 512] 95.0 -> 100.7, [2048 x 512] 95.9 -> 101.0, [1024 x 384] 92.3 -> 95.2,
# [1024 x 512] at K = 160 88.8 -> 96.5; [1024 x 256] 99.4 -> 88.2 and rows of 2-3 KB
# ([512 x 512] 103.8 -> 96.4, [768 x 512] 102.8 -> 97.4) stay in place
PACK_AT_4K_N = 384
_KC, _MC = 1024, 8    # rows of B per pass; rows of A per sweep over B's panels
# panels per column block: _BBLOCK bytes of them per _QROWS rows of B (so 128 KB up to 512 rows,
# 256 KB at 1024), kept in L2 while every row of A passes over them. One pass over 1024 rows
# instead of two over 512 (the output read and written once, A's rows streamed once), cold
# operands, GFLOP/s: [3200 x 1024] @ [1024 x 1024] 105 -> 108, with W^T 105 -> 110, [3200 x 2048]
# @ [2048 x 1024] 96-102 -> 103-108, [2048 x 768] @ [768 x 3072] 104 -> 108, [800 x 1024] @
# [1024 x 4096] 104 -> 106; 512 rows or fewer unchanged
_BBLOCK, _QROWS = 1 << 17, 512

_query = []   # [function or None], found on the first product
_NONE = np.empty(0, np.float32)   # no column sums wanted


def _blas_function(names):
    """The first of ``names`` exported by a BLAS library this process has loaded (numpy's own
    first), as a ctypes function without its types set; None where none is found."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.lower() or "mkl" in line.lower()}
    except OSError:
        return None
    for path in sorted(paths, key=lambda p: ("numpy" not in p, p)):   # numpy's own BLAS first
        if ".so" not in path:
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in names:
            fn = getattr(lib, name, None)
            if fn is not None:
                return fn
    return None


def _find_query():
    fn = _blas_function(("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                         "openblas_get_num_threads64_", "openblas_get_num_threads", "MKL_Get_Max_Threads"))
    if fn is not None:
        fn.restype, fn.argtypes = ctypes.c_int, []
    return fn


def set_blas_threads(n):
    """Set the number of threads numpy's BLAS (OpenBLAS or MKL) runs; returns whether a BLAS
    that takes the setting was found. The test suite pins 1 (``tests/conftest.py``), the
    setting several products and fused ops choose their kernels by (``takes``)."""
    fn = _blas_function(("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                         "openblas_set_num_threads64_", "openblas_set_num_threads", "MKL_Set_Num_Threads"))
    if fn is None:
        return False
    fn.restype, fn.argtypes = None, [ctypes.c_int]
    fn(int(n))
    return True


def _env_threads():
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(var, "").strip() == "1":
            return 1
    try:
        if len(os.sched_getaffinity(0)) == 1:
            return 1
    except (AttributeError, OSError):
        pass
    return None


def blas_threads():
    """The number of threads numpy's BLAS runs, or None where it cannot be told."""
    if not _query:
        _query.append(_find_query())
    fn = _query[0]
    return int(fn()) if fn is not None else _env_threads()


def _operand(m):
    """``(array, transposed)`` for the kernel: ``m`` itself if C-contiguous, its transpose
    (flagged) if that is; None otherwise."""
    if m.flags.c_contiguous:
        return m, False
    if m.T.flags.c_contiguous:
        return m.T, True
    return None


def product(A, B, bias=None):
    """``A @ B`` (``+ bias``, a ``[N]`` vector) for 2-D numpy arrays, by the compiled kernel
    where the rules above take it, else by numpy (other arrays, cupy's: their own ``@``).
    Returns a new array."""
    if type(A) is np.ndarray and type(B) is np.ndarray and A.ndim == 2 and B.ndim == 2 and A.shape[1] > 1 \
            and A.shape[0] * A.shape[1] * B.shape[1] < MIN_MACS \
            and (B.flags.c_contiguous or A.shape[0] <= SMALL_T_ROWS or B.shape[1] <= SMALL_T_COLS):
        # small: numpy's own call, without the kernel's and few_rows_product's checks (~2 us a
        # product, a third of a one-step cell's [16 x 32] @ [32 x 64]^T); 1 thread, us,
        # numpy / few_rows_product's transposed form / before: [16 x 32] @ [64 x 32]^T 2.2 /
        # 2.9 / 4.6, [4 x 256] @ [256 x 256]^T 6.1 / 6.7 / 8.5. With a transposed B, more rows
        # and more columns OpenBLAS is slow and the transposed form the faster ([16 x 128] @
        # [128 x 128]^T 14.1 / 9.4)
        out = A @ B
        if bias is not None:
            out += bias
        return out
    out = _kernel_product(A, B, bias)
    if out is not None:
        return out
    out = few_rows_product(A, B)
    if out is None:
        if bias is not None:
            out = bias_product(A, B, bias)
            if out is not None:
                return out
        out = A @ B
    if bias is not None:
        out += bias
    return out


def bias_product(A, B, bias):
    """``A @ B + bias`` (``bias`` a ``[N]`` vector of A's dtype) by numpy's BLAS with the bias
    as the product's starting values (``blas_add_product``, ``beta = 1``), or None where that
    does not take the operands. numpy's ``@`` zeroes its output, sums into it, and the bias
    then took a third pass (the output read and written again); here the bias is written
    where the zeros were. 1 thread, Zen 3, 8 rotating inputs, 15 interleaved rounds, median
    ms, ``@`` then ``+=`` -> this: [3200 x 256] @ [256 x 1024] 29.2 -> 27.6, [1024 x 256] @
    [256 x 1024] 8.85 -> 8.56, [1280 x 64] @ [64 x 256] 0.86 -> 0.82; narrow outputs
    ([3200 x 1024] @ [1024 x 256], [1024 x 256] @ [256 x 256]) within 1 %. Where the inner
    index fits one of OpenBLAS's blocks the values are numpy's bit for bit (``acc + b``
    rounded once either way); past it the bias joins the first block's partial sum."""
    # the operands' own checks (dtypes, layouts, shapes) are ``_blas_add``'s
    if type(bias) is not np.ndarray or type(A) is not np.ndarray or type(B) is not np.ndarray \
            or bias.ndim != 1 or bias.dtype not in (np.float32, np.float64) or A.ndim != 2 or B.ndim != 2 \
            or bias.shape[0] != B.shape[1]:
        return None
    M, N = A.shape[0], B.shape[1]
    if M * N < ADD_MIN_OUT or min(M, N) < ADD_MIN_SIDE or _gemm64(bias.dtype.type) is None:
        return None
    out = np.empty((M, N), bias.dtype)
    out[...] = bias
    return out if _blas_add(A, B, out) else None


#: below this many rows of ``A``, ``A @ B`` with B a transposed C-contiguous matrix (a Linear
#: layer's input gradient ``g @ w.T``) is formed as ``(B.T @ A.T).T``
FEW_ROWS = 64
#: ... from this many elements of B on: below, the route's transposed product and copy cost
#: more than OpenBLAS's own (1 thread, A rows x inner x B columns: 16x32x128 5.4 us by numpy
#: against 11.8, 16x128x128 16.7 against 20.9, 16x64x64 4.2 against 6.5; from 65k to 150k
#: elements either way by 5-25 %: 16x256x512 85 against 99, 8x256x512 65 against 49); from
#: 2^18 on the route pays (16x512x512 202 -> 192, 8x1024x1024 662 -> 516)
FEW_ROWS_MIN_B = 1 << 18


def few_rows_product(A, B):
    """``A @ B`` for numpy float arrays where numpy's own product is slow, else None:
    one inner index (a rank-1 outer product, a one-row weight gradient ``x.T @ g``) as a
    broadcast multiply (the same values; numpy's product ran 4x its time at 1500x1500), and
    fewer than ``FEW_ROWS`` rows of A times a transposed C-contiguous B of at least
    ``FEW_ROWS_MIN_B`` elements as ``(B.T @ A.T).T``, copied to C order: OpenBLAS's product
    with few rows and a transposed operand ran 1.2-2.8x this time (1 thread; 1500x1500 weight at 2-32 rows 1.3-1.8 ms ->
    0.5-1.7 ms, 64 rows 3.8 -> 3.2 ms; equal at 128)."""
    if type(A) is not np.ndarray or type(B) is not np.ndarray or A.ndim != 2 or B.ndim != 2 \
            or A.dtype.kind != "f" or B.dtype.kind != "f" or A.shape[1] != B.shape[0]:
        return None
    if A.shape[1] == 1:
        return np.multiply(A, B, dtype=np.result_type(A, B))
    if A.shape[0] < FEW_ROWS and B.size >= FEW_ROWS_MIN_B and not B.flags.c_contiguous and B.T.flags.c_contiguous:
        return np.ascontiguousarray((B.T @ A.T).T)
    return None


#: stacked products (``stack_product``) take the kernel from STACK_MIN_M rows and STACK_MIN_N
#: columns of each product's output. Measured on a MultiHeadAttention forward + backward
#: (batch 16, 4 heads, 1 thread) against numpy's batched matmul: 180-256 positions with
#: heads of 16-64 5-11% faster (200 positions, d=128: 37.6 -> 34.3 ms), 128-160 equal, 64-100
#: 4-6% slower. Since the attention runs chunk by chunk along the batch (its operands in
#: cache, numpy's products faster too), a training step at 200 positions is equal either
#: way and at 256 positions (d=128, batch 16) 6% faster (133.8 -> 126.3 ms)
STACK_MIN_M, STACK_MIN_N = 176, 32


def takes(dtype):
    """Whether arrays of ``dtype`` may take the compiled products at all: float32, the
    kernels enabled, numpy's BLAS on one thread (the shape rules are each caller's)."""
    return ENABLED and dtype == np.float32 and blas_threads() == 1


def fused_takes(dtype):
    """Whether a fused op's kernel (built on the register tiles) may run for ``dtype``:
    float32, ``FUSED``, numpy's BLAS on one thread. Where ``ENABLED`` is False (AVX2 by
    default) the op keeps to its own narrower range."""
    return FUSED and dtype == np.float32 and blas_threads() == 1


def blocking(k):
    """``(kc, qb)`` for a compiled product with ``k`` inner values: rows of B per pass, and
    16-column panels of B per column block (``_BBLOCK`` bytes per ``_QROWS`` rows of B, kept
    in L2 while every row of A passes over it)."""
    return _KC, max(1, _BBLOCK // (64 * min(_QROWS, k)))


def transposed(a, out=None):
    """``a.T`` of a 2-D numpy array (any strides, float32 or float64) into ``out`` (C-contiguous,
    ``a``'s dtype; a new array where None) by the blocked compiled transpose
    (``gemm_kernels.transpose``; float32 with contiguous rows by 8x8 shuffle blocks,
    ``transpose32``): numpy's strided copy of a convolution's output gradient ``[64, 18496]``
    ran 3.2 ms, 6x its time."""
    from . import gemm_kernels  # noqa: PLC0415
    if out is None:
        out = np.empty(a.shape[::-1], a.dtype)
    if a.dtype == np.float32 and a.strides[1] == 4 and a.strides[0] % 4 == 0:
        gemm_kernels.transpose32(a, out)
    else:
        gemm_kernels.transpose(a, out)
    return out


#: below this many elements ``relayout_into`` leaves the copy to numpy (its strided copy of a
#: [8 x 12288] float32 transpose 0.10 ms, the kernel's 0.02 with its call)
RELAYOUT_MIN = 1 << 14


def relayout_into(dst, src):
    """Copy ``src`` into ``dst`` (numpy float32/float64 arrays of one shape and dtype, at
    least ``RELAYOUT_MIN`` elements) where one is C-contiguous and the other stores the
    same array with axis 0 innermost (the batch-innermost ``[C, H, W, N]`` storage of the
    convolutions' im2col and Winograd paths): a 2-D transpose of ``[N, rest]``, by the
    blocked ``transposed``. Returns whether it copied; False leaves ``dst`` untouched (the
    caller's own copy then runs). numpy's strided copy between the two layouts of a
    ``[64, 16, 64, 64]`` float32 array took 22-26 ms, the blocked transpose 7, a plain copy
    2.7."""
    if type(dst) is not np.ndarray or type(src) is not np.ndarray or dst.shape != src.shape \
            or dst.dtype != src.dtype or dst.dtype not in (np.float32, np.float64) or src.ndim < 2 \
            or src.size < RELAYOUT_MIN or src.shape[0] < 2:
        return False
    n = src.shape[0]
    rest = src.size // n
    last = tuple(range(1, src.ndim)) + (0,)
    if src.flags.c_contiguous and dst.transpose(last).flags.c_contiguous:
        transposed(src.reshape(n, rest), dst.transpose(last).reshape(rest, n))
    elif dst.flags.c_contiguous and src.transpose(last).flags.c_contiguous:
        transposed(src.transpose(last).reshape(rest, n), dst.reshape(n, rest))
    else:
        return False
    return True


def copy_into(dst, src):
    """``dst[...] = src`` (numpy or cupy arrays), by the blocked transpose where
    ``relayout_into`` takes the two layouts."""
    if not relayout_into(dst, src):
        dst[...] = src


def c_contiguous(a):
    """``np.ascontiguousarray(a)`` for a numpy array, from the batch-innermost layout by the
    blocked transpose (``copy_into``)."""
    if a.flags.c_contiguous:
        return a
    out = np.empty(a.shape, a.dtype)
    copy_into(out, a)
    return out


def stack_takes(dtype, m, n, k):
    """Whether ``stack_product`` runs the kernel for stacked products ``[m, k] @ [k, n]`` of
    this dtype (the operands' layouts aside)."""
    return (m >= STACK_MIN_M and n >= max(STACK_MIN_N, MIN_DIM) and MIN_DIM <= k and n <= MAX_N
            and takes(dtype))


def stack_product(a, b):
    """``a @ b`` for 3-D or 4-D float32 numpy stacks of matrices (the batches and heads of an
    attention), every product by the compiled kernel in one call, where each operand is
    C-contiguous or the last-two-axes transpose of a C-contiguous stack and each product
    has at least ``STACK_MIN_M`` rows, ``STACK_MIN_N`` columns and ``MIN_DIM`` inner
    values; else None (numpy's matmul is the caller's). A new C-contiguous array."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != b.dtype or a.ndim != b.ndim \
            or a.ndim not in (3, 4) or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        return None
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if not stack_takes(a.dtype, M, N, K):
        return None
    ops = []
    for m in (a, b):
        mt = np.swapaxes(m, -1, -2)
        if m.flags.c_contiguous and m.flags.writeable:
            ops.append((m.reshape(-1, *m.shape[-2:]), False))
        elif mt.flags.c_contiguous and mt.flags.writeable:
            ops.append((mt.reshape(-1, *mt.shape[-2:]), True))
        else:
            return None
    from . import gemm_kernels  # noqa: PLC0415
    out = np.empty(a.shape[:-2] + (M, N), np.float32)
    (a3, a_t), (b3, b_t) = ops
    kc, qb = blocking(K)
    gemm_kernels.gemm_stack(a3, a_t, b3, b_t, out.reshape(-1, M, N), kc, _MC, qb, _NONE)
    return out


def weight_grads(x2, g2, sums=True, into=None):
    """A Linear layer's weight gradient ``x2.T @ g2`` and, where ``sums``, its bias gradient
    ``g2.sum(axis=0)`` (else None): ``(gw, gb)`` by the compiled kernel (the column sums
    formed while it copies ``g2`` to panels) where the rules above take ``x2.T @ g2``, else
    ``None``. With ``into`` (a C-contiguous float32 ``[in, out]`` array: the weight's
    ``.grad``) the product is added into it and ``gw`` is ``into`` itself; where the kernel
    does not take it, numpy's BLAS adds it (``blas_add_product``) and ``gb`` is None (the
    caller sums the columns)."""
    gb = np.empty(g2.shape[1], np.float32) if sums else None
    gw = _kernel_product(x2.T, g2, None, gb, into)
    if gw is None and into is not None and blas_add_product(x2.T, g2, into):
        return into, None
    return None if gw is None else (gw, gb)


# ``C += A @ B`` by numpy's own BLAS with ``beta = 1`` (``blas_add_product``): the weight
# gradient of a Linear (or a recurrent layer) added into the weight's ``.grad`` by the product
# itself. numpy's ``@`` only writes a new array (or overwrites ``out``, beta = 0), so adding
# it took a second pass over the gradient: the product's output written, then read again with
# the old ``.grad`` and written back. A transformer step at 10-32 positions reads and writes
# more weight gradient than activations. Called through ctypes (~2 us), only with the 64-bit
# integer interface (``scipy_cblas_sgemm64_``, numpy's own OpenBLAS wheels), so the argument
# types are known; checked against numpy's product once before its first use. Elsewhere (MKL,
# another BLAS) ``blas_add_product`` declines and the caller adds the usual way.
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# Below ADD_MIN_OUT output elements, or with a side under ADD_MIN_SIDE, it declines: there the
# call's ~8 us (ctypes, the checks) outweighs the pass it saves (hot operands, 1 thread, Zen 3:
# [64 x 512] @ [512 x 64] 1.14x numpy's product and add, [128 x 64] @ [64 x 256] 1.06x,
# [256 x 64] @ [64 x 256] 0.98x, [512 x 64] @ [64 x 512] 0.90x, [1024 x 64] @ [64 x 1024]
# 0.84x), and OpenBLAS's gemm on one column ran 6x numpy's gemv
ADD_MIN_OUT, ADD_MIN_SIDE = 1 << 16, 16
_add_gemm = {}   # dtype -> ctypes function, or None where none is found or the check failed


def _gemm64(dtype):
    """numpy's BLAS ``cblas_?gemm`` (64-bit integers) for float32 / float64, typed, or None."""
    fn = _add_gemm.get(dtype, False)
    if fn is not False:
        return fn
    c = "s" if dtype == np.float32 else "d"
    fn = _blas_function((f"scipy_cblas_{c}gemm64_", f"cblas_{c}gemm64_"))
    if fn is not None:
        i64, scalar, ptr = ctypes.c_int64, ctypes.c_float if c == "s" else ctypes.c_double, ctypes.c_void_p
        fn.restype = None
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i64, i64, i64, scalar, ptr, i64, ptr, i64,
                       scalar, ptr, i64]
        _add_gemm[dtype] = fn                 # the check's own product calls it
        if not _gemm_check(dtype):
            fn = None
    _add_gemm[dtype] = fn
    return fn


def _gemm_check(dtype):
    """Whether ``blas_add_product`` agrees with numpy's product on small operands, plain and
    transposed (a library whose integers or enums are not what ``_gemm64`` assumed fails)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((7, 5)).astype(dtype)
    b = rng.standard_normal((9, 7)).astype(dtype)
    c = rng.standard_normal((5, 9)).astype(dtype)
    want = c + a.T @ b.T
    try:
        ok = _blas_add(a.T, b.T, c)
    except Exception:   # noqa: BLE001 - a library that cannot be called is one not used
        return False
    return ok and bool(np.allclose(c, want, rtol=1e-4, atol=1e-4))


def _blas_operand(m):
    """``(transpose flag, leading dimension)`` of a 2-D array for a row-major BLAS call: rows
    of unit-stride elements (C-contiguous, or columns sliced out of a wider matrix), or the
    transpose of such; None otherwise (another layout needs a copy first)."""
    r, c = m.shape
    s0, s1 = m.strides
    size = m.itemsize
    if s1 == size and s0 % size == 0 and s0 // size >= max(c, 1):
        return _NO_TRANS, s0 // size
    if s0 == size and s1 % size == 0 and s1 // size >= max(r, 1):
        return _TRANS, s1 // size
    return None


def blas_add_product(A, B, C):
    """``C += A @ B`` in place by numpy's BLAS (``beta = 1``) for numpy float32/float64 arrays
    of one dtype, C C-contiguous, writeable and sharing no memory with A or B, each of A and
    B rows or columns of unit stride, C at least ``ADD_MIN_OUT`` elements and
    ``ADD_MIN_SIDE`` on each side; returns whether it did (False: C untouched, the caller
    adds the product itself). Where C starts at zero the result is bit for bit numpy's
    ``A @ B``; otherwise the product's partial sums are added to C one block of the inner
    index at a time (OpenBLAS's blocking) instead of summed first: float rounding apart, the
    same sum."""
    if type(C) is not np.ndarray or C.ndim != 2 or C.size < ADD_MIN_OUT or min(C.shape) < ADD_MIN_SIDE:
        return False
    return _blas_add(A, B, C)


def _blas_add(A, B, C):
    """``blas_add_product`` at any size."""
    if type(A) is not np.ndarray or type(B) is not np.ndarray or type(C) is not np.ndarray:
        return False
    dt = C.dtype
    if dt not in (np.float32, np.float64) or A.dtype != dt or B.dtype != dt or A.ndim != 2 or B.ndim != 2 \
            or C.ndim != 2:
        return False
    (M, K), N = A.shape, B.shape[1]
    if B.shape[0] != K or C.shape != (M, N) or not (M and N and K):
        return False
    if not C.flags.c_contiguous or not C.flags.writeable or np.may_share_memory(C, A) or np.may_share_memory(C, B):
        return False
    a, b = _blas_operand(A), _blas_operand(B)
    if a is None or b is None:
        return False
    fn = _gemm64(dt.type)
    if fn is None:
        return False
    fn(_ROW_MAJOR, a[0], b[0], M, N, K, 1.0, A.ctypes.data, a[1], B.ctypes.data, b[1], 1.0, C.ctypes.data, N)
    return True


def _kernel_product(A, B, bias, colsum=None, into=None):
    if not ENABLED or type(A) is not np.ndarray or type(B) is not np.ndarray:
        return None
    f32 = np.float32
    if A.dtype != f32 or B.dtype != f32 or A.ndim != 2 or B.ndim != 2:
        return None
    if bias is not None and (type(bias) is not np.ndarray or bias.dtype != f32 or bias.shape != (B.shape[1],)):
        return None
    (M, K), N = A.shape, B.shape[1]
    if min(M, K, N) < MIN_DIM or M * K * N < MIN_MACS or N > MAX_N or B.shape[0] != K:
        return None
    if not A.flags.c_contiguous and max(M, N) > MAX_T and not (min(M, N) >= T_WIDE_MIN and max(M, N) <= T_WIDE_MAX):
        return None
    if not (A.flags.writeable and B.flags.writeable):   # read-only arrays: another kernel signature
        return None
    a, b = _operand(A), _operand(B)
    if a is None or b is None or blas_threads() != 1:
        return None
    if b[1] and not a[1] and bias is None and colsum is None and into is None \
            and K * N >= TRANS_OUT_RATIO * M * (K + N):
        return _transposed_product(a[0], b[0])
    if not a[1] and M < FEW_M and K * N > BIG_B:
        return None
    pack_b = b[1] or M >= PACK_B_MIN_M or (M >= PACK_B_WIDE_M and N >= PACK_B_WIDE_N)
    if into is not None and (type(into) is not np.ndarray or into.dtype != f32 or into.shape != (M, N)
                             or not into.flags.c_contiguous or not into.flags.writeable
                             or np.may_share_memory(into, A) or np.may_share_memory(into, B)):
        into = None
    from . import gemm_kernels  # noqa: PLC0415 - numba is imported with the first product
    out = np.empty((M, N), f32) if into is None else into
    if bias is not None:
        bias2 = np.ascontiguousarray(bias.reshape(1, N))
    else:
        bias2 = out
    pack_a = a[1] and ((M >= PACK_AT_MIN and N >= PACK_AT_MIN) or (M % 1024 == 0 and N >= PACK_AT_4K_N))
    init = 2 if bias is not None else (0 if into is None else 1)
    kc, qb = blocking(K)
    gemm_kernels.gemm(a[0], a[1], b[0], b[1], out, bias2, init, pack_a, pack_b, kc, _MC, qb,
                      _NONE if colsum is None else colsum)
    return out


def _transposed_product(a, bt):
    """``a @ bt.T`` (``a`` ``[M, K]``, ``bt`` ``[N, K]``, both C-contiguous float32) as
    ``(bt @ a.T).T``: ``bt`` read in place as the kernel's left operand, ``a`` copied to
    panels as its transposed right operand, the ``[N, M]`` result transposed into a new
    C-contiguous ``[M, N]`` array."""
    from . import gemm_kernels  # noqa: PLC0415
    (M, K), N = a.shape, bt.shape[0]
    out_t = np.empty((N, M), np.float32)
    kc, qb = blocking(K)
    gemm_kernels.gemm(bt, False, a, True, out_t, out_t, 0, False, True, kc, _MC, qb, _NONE)
    return transposed(out_t)
