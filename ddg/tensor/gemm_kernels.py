"""Compiled float32 matrix products for the Linear layer and 2-D matmuls (numpy arrays).

``gemm`` forms ``out = A @ B (+ bias)`` with A read in place or transposed in place and B
read in place or copied to 16-column panels (also straight from its transpose), from the
8-row x 16-column register tile below; ``ddg.tensor.gemm`` decides when it runs instead
of numpy's BLAS (one BLAS thread, shapes) and calls it. The tile is shared with the
recurrent kernels of ``rnn_kernels``; ``transpose`` is the blocked transposed copy they
use. Every array argument is C-contiguous float32, so ``gemm`` compiles once (one
signature). This module imports numba; ``gemm.py`` imports it with the first product
that takes the kernel.
"""
import numba
import numpy as np
from llvmlite import ir
from llvmlite.binding import llvm_version_info
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .compiled import FASTMATH, I0, NO, YES, kernel

_OPTS = {"fastmath": set(FASTMATH), "cache": True, "error_model": "numpy"}
_ZERO = np.float32(0.0)

# -- the register tile -----------------------------------------------------------------------
# An 8-row x 16-column output tile kept in eight 16-lane vector registers: per k, one vector
# load of the right-hand side's row, eight broadcast left-hand values and eight fused
# multiply-adds, no horizontal sums. numba has no vector type, so the tile is LLVM IR
# written here with llvmlite (``numba.extending.intrinsic``) and inlined into the calling
# kernel; the recurrent products of ``rnn_kernels`` use it too.
_V_F32, _V_I64, _V_I32 = ir.FloatType(), ir.IntType(64), ir.IntType(32)
# the masked load/store intrinsics are named after their pointer type: opaque ("p0") from
# LLVM 15 on, the pointee spelled out before
def _ptr(lanes):
    return "p0" if llvm_version_info[0] >= 15 else f"p0v{lanes}f32"


def _vector_ops(mod, lanes):
    """``(vt, fma, mload, mstore)``: the LLVM type of ``lanes`` float32 and its fused
    multiply-add and masked load/store intrinsics, declared in module ``mod``."""
    vt = ir.VectorType(_V_F32, lanes)
    mt = ir.VectorType(ir.IntType(1), lanes)
    vn = f"v{lanes}f32"
    fma = cgutils.get_or_insert_function(mod, ir.FunctionType(vt, [vt] * 3), f"llvm.fma.{vn}")
    mload = cgutils.get_or_insert_function(mod, ir.FunctionType(vt, [vt.as_pointer(), _V_I32, mt, vt]),
                                           f"llvm.masked.load.{vn}.{_ptr(lanes)}")
    mstore = cgutils.get_or_insert_function(mod, ir.FunctionType(ir.VoidType(), [vt, vt.as_pointer(), _V_I32, mt]),
                                            f"llvm.masked.store.{vn}.{_ptr(lanes)}")
    return vt, fma, mload, mstore


def _prefetch(builder, ptr):
    """A read prefetch of the line at ``ptr`` (a float pointer) into all cache levels."""
    i8p = ir.IntType(8).as_pointer()
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, _V_I32, _V_I32, _V_I32]),
                                        "llvm.prefetch" + (".p0" if llvm_version_info[0] >= 15 else ".p0i8"))
    builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(_V_I32, 0), ir.Constant(_V_I32, 3),
                      ir.Constant(_V_I32, 1)])


@intrinsic
def prefetch(typingctx, arr, idx):
    """``prefetch(arr, i)``: a read prefetch of the line that holds element ``i`` of ``arr``'s
    data (counted flat from its first element) into all cache levels."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        _prefetch(builder, builder.gep(data, [args[1]]))
        return context.get_dummy_value()
    return types.void(arr, types.int64), codegen


@intrinsic
def as_float32(typingctx, bits):
    """``as_float32(b)``: the float32 whose bit pattern is the low 32 bits of the integer
    ``b`` (a reinterpretation, no conversion), which loops vectorize; numpy's ``view``
    takes arrays only."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        if v.type.width != 32:
            v = builder.trunc(v, _V_I32)
        return builder.bitcast(v, _V_F32)
    return types.float32(bits), codegen


@intrinsic
def row_max8(typingctx, row):
    """``row_max8(row)``: the largest value of a C-contiguous 1-D float32 ``row`` (length >= 1)
    in 8-lane vectors, each lane kept by ``v if v > m else m`` from ``row[0]`` on, then the
    lanes and the last ``n % 8`` values by the same rule: NaN never wins a comparison (a
    row whose first value is NaN gives NaN), as ``softmax_kernels.row_max`` rules, whose
    scalar compares numba leaves unvectorized (0.32 ns a value at 200 columns)."""
    if not (isinstance(row, types.Array) and row.ndim == 1 and row.dtype == types.float32 and row.layout == "C"):
        return None

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        data, n = arr.data, builder.extract_value(arr.shape, 0)
        vt = ir.VectorType(_V_F32, 8)

        def keep(v, m):     # v if v > m else m
            return builder.select(builder.fcmp_ordered(">", v, m), v, m)
        first = builder.load(data, align=4)
        blocks = builder.sdiv(n, ir.Constant(_V_I64, 8))
        best = builder.alloca(_V_F32)
        builder.store(first, best)
        with builder.if_then(builder.icmp_signed(">", blocks, ir.Constant(_V_I64, 0))):
            def step(c, accs):
                p = builder.bitcast(builder.gep(data, [builder.mul(c, ir.Constant(_V_I64, 8))]), vt.as_pointer())
                return [keep(builder.load(p, align=4), accs[0])]
            m = _k_loop(builder, "rowmax", ir.Constant(_V_I64, 0), blocks, [_splat(builder, first, 8)], step)[0]
            r = builder.extract_element(m, ir.Constant(_V_I32, 0))
            for lane in range(1, 8):
                r = keep(builder.extract_element(m, ir.Constant(_V_I32, lane)), r)
            builder.store(r, best)
        tail0 = builder.mul(blocks, ir.Constant(_V_I64, 8))
        with builder.if_then(builder.icmp_signed("<", tail0, n)):
            def tail(j, accs):
                return [keep(builder.load(builder.gep(data, [j]), align=4), accs[0])]
            builder.store(_k_loop(builder, "rowmaxtail", tail0, n, [builder.load(best)], tail)[0], best)
        return builder.load(best)
    return types.float32(row), codegen


def _splat(builder, w, lanes):
    """A vector of ``lanes`` copies of the float value ``w``."""
    vt = ir.VectorType(_V_F32, lanes)
    undef = ir.Constant(vt, ir.Undefined)
    return builder.shuffle_vector(builder.insert_element(undef, w, ir.Constant(_V_I32, 0)), undef,
                                  ir.Constant(ir.VectorType(_V_I32, lanes), [0] * lanes))


def _repeat_last(builder, first, n, count):
    """``count`` column indices ``first + min(j, n - 1)`` (int64 values): the columns of a tile
    with a fixed count of them, those past ``n`` repeating the last (same values stored twice)."""
    last = builder.sub(n, ir.Constant(_V_I64, 1))
    return [builder.add(first, builder.select(builder.icmp_signed("<", ir.Constant(_V_I64, j), n),
                                              ir.Constant(_V_I64, j), last)) for j in range(count)]


def _k_loop(builder, name, k0, k1, inits, body):
    """Emit ``for k in range(k0, k1)`` (k1 > k0: the body runs at least once) carrying the
    values ``inits`` (vectors, the accumulators): ``body(k, accs)`` emits one iteration
    (straight-line, or with loops of its own: a nested ``_k_loop``) and returns the new
    values. Leaves the builder after the loop and returns the values the last iteration
    made."""
    entry = builder.block
    loop = builder.function.append_basic_block(name + "_loop")
    done = builder.function.append_basic_block(name + "_done")
    builder.branch(loop)
    builder.position_at_end(loop)
    k = builder.phi(_V_I64)
    accs = [builder.phi(v.type) for v in inits]
    new = body(k, accs)
    latch = builder.block      # the body's last block (``loop`` itself unless it has loops)
    kn = builder.add(k, ir.Constant(_V_I64, 1))
    k.add_incoming(k0, entry)
    k.add_incoming(kn, latch)
    for acc, v0, v1 in zip(accs, inits, new):
        acc.add_incoming(v0, entry)
        acc.add_incoming(v1, latch)
    builder.cbranch(builder.icmp_signed("<", kn, k1), loop, done)
    builder.position_at_end(done)
    return new


def _lanes_below(builder, n, lanes, first=0):
    """A mask of ``lanes`` lanes, lane j set where ``first + j < n`` (``n`` an int64 value)."""
    lane = ir.Constant(ir.VectorType(_V_I64, lanes), list(range(first, first + lanes)))
    nv = builder.insert_element(ir.Constant(ir.VectorType(_V_I64, lanes), ir.Undefined), n, ir.Constant(_V_I32, 0))
    return builder.icmp_signed("<", lane, builder.shuffle_vector(nv, nv, ir.Constant(ir.VectorType(_V_I32, lanes),
                                                                                      [0] * lanes)))


def _host_vector_bits():
    """The widest vector registers numba's code may use: ``DDG_VECTOR_BITS`` (256 or 512) where
    set; else 512 where the target has AVX-512F (``NUMBA_CPU_FEATURES`` where set, the host's
    where neither it nor ``NUMBA_CPU_NAME`` is), else 256 (the row groups are right on any
    CPU, only slower than one group where AVX-512 is there)."""
    import os  # noqa: PLC0415
    from llvmlite import binding  # noqa: PLC0415
    forced = os.environ.get("DDG_VECTOR_BITS", "").strip()
    if forced in ("256", "512"):
        return int(forced)
    feats = os.environ.get("NUMBA_CPU_FEATURES")
    if feats is None:
        if os.environ.get("NUMBA_CPU_NAME"):
            return 256
        try:
            feats = binding.get_host_cpu_features().flatten()
        except RuntimeError:      # no host features known: assume the narrower registers
            return 256
    return 512 if "+avx512f" in feats.split(",") else 256


# With AVX-512 there are 32 vector registers of 16 float32; without it (AVX2) 16 of 8. A tile's
# accumulators must stay in registers with the right-hand side's vectors and a broadcast beside
# them: on AVX2 an 8 x 16 tile (16 accumulators) spilled to the stack and ran at a third of
# OpenBLAS's speed ([3200 x 1024] @ [1024 x 1024], Zen 3: 38 against 80 GFLOP/s). There the
# tile's rows run in groups, one k loop each (each value still summed over k in order: the
# same results)
VECTOR_BITS = _host_vector_bits()
_VREGS = 32 if VECTOR_BITS == 512 else 16


def _row_groups(rows, widths):
    """The tile's rows ``0..rows-1`` split into as few groups of about equal size as keep
    each group's accumulators, one row's right-hand vectors and a broadcast within the
    vector registers (one group where they fit)."""
    per_row = sum(-(-w * 32 // VECTOR_BITS) for w in widths)     # registers per row of the tile
    fit = max(1, (_VREGS - per_row - 2) // per_row)
    n = -(-rows // fit)
    return [range(rows * g // n, rows * (g + 1) // n) for g in range(n)]


def _masked_or_whole(builder, whole, emit):
    """Emit a tile's loops by ``emit(masked)``: with masks, once, where AVX-512 has them at no
    cost; on AVX2 (whose masked loads and stores rebuild their mask in the loop and load
    slower) twice, behind a branch on ``whole`` (an i1 value: the tile's vectors all whole),
    the whole copy without masks."""
    if VECTOR_BITS >= 512:
        emit(True)
        return
    with builder.if_else(whole) as (full, part):
        with full:
            emit(False)
        with part:
            emit(True)


def _tile(rows, a_t, with_bias=False, lanes=16, masked=True, table=False, prefetch=0, a_table=False):
    """An intrinsic ``tile(a, x, out, i, ai, b0, nb, k0, k1, c0, acc)`` on C-contiguous
    float32 matrices: ``out[i:i+rows, b0:b0+nb] (+)= A[ai:ai+rows, k0:k1] @
    x[k0:k1, c0+b0:c0+b0+nb]`` with ``A = a`` (``a_t`` False) or ``a.T`` (``a_t``:
    broadcasts from a row of ``a``), the accumulators in registers, starting from ``out``
    where ``acc`` is nonzero, else from zero (k1 > k0). ``lanes``: the vector width, 16 or
    8, or a tuple of widths side by side (``(8, 8, 8)``: 24 columns, three 8-lane vectors
    per row); the columns past nb masked in the last vector's loads and stores, the vectors
    before it whole (nb > the sum of their widths, nb <= the sum of all); ``masked`` False:
    no masks (nb is the sum of all).
    ``with_bias``: ``tile(a, x, out, bias, i, ...)`` with a 2-D ``bias`` whose first row
    ``bias[0, b0:b0+nb]`` starts every row of the tile where ``acc`` is 2 (``bias`` must
    have at least ``b0 + nb`` columns whatever ``acc`` is: pass ``out`` when there is none).
    ``table`` (with ``with_bias``): ``tile(a, x, out, bias, tab, i, ...)``, row k of the
    right-hand side at element ``tab[k]`` of ``x`` (int64 offsets) instead of ``k * ldx``: the
    shifted windows of a convolution's taps, one after another along k; ``a_table`` (with
    ``table``) instead: row ``ai + r`` of A at element ``tab[ai + r]`` of ``a`` (read flat, any
    rank), B's rows ``k * ldx`` as without a table (a convolution's weight gradient, the taps'
    windows as A's rows). ``prefetch`` (with
    ``a_t``): a software prefetch of a's row ``k + prefetch`` at every k (for a panel read
    as one stream, ``_PANEL_AHEAD``)."""
    widths = tuple(lanes) if isinstance(lanes, tuple) else (lanes,)
    offs = [sum(widths[:s]) for s in range(len(widths))]

    def typer(arrays):
        i64 = types.int64
        return types.void(*arrays, i64, i64, i64, i64, i64, i64, i64, i64)

    def codegen(context, builder, signature, args):
        narr = (4 if with_bias else 3) + (1 if table else 0)
        i, ai, b0, nb, k0, k1, c0, accf = args[narr:]
        arrs = [context.make_array(t)(context, builder, v) for t, v in zip(signature.args[:3], args[:3])]
        ad, xd, od = (r.data for r in arrs)
        # a table's B (A with ``a_table``) is read flat, any rank
        lda = None if a_table else builder.extract_value(arrs[0].shape, 1)
        ldo = builder.extract_value(arrs[2].shape, 1)
        b_table = table and not a_table
        ldx = None if b_table else builder.extract_value(arrs[1].shape, 1)
        mod = builder.module
        align = ir.Constant(_V_I32, 4)
        segs = []        # per vector of a row: type, fma, masked load/store, lanes, zero, mask, column offset
        for w, off in zip(widths, offs):
            vt, fma, mload, mstore = _vector_ops(mod, w)
            segs.append((vt, fma, mload, mstore, w, ir.Constant(vt, [0.0] * w), _lanes_below(builder, nb, w, off),
                         off))
        def load(sg, p, masked=masked):     # the last vector of a row masked, the ones before it whole
            return builder.call(sg[2], [p, align, sg[6], sg[5]]) if masked and sg is segs[-1] else \
                builder.load(p, align=4)

        from_out = builder.icmp_signed("!=", accf, ir.Constant(_V_I64, 0))
        if with_bias:
            bd = context.make_array(signature.args[3])(context, builder, args[3]).data
            from_bias = builder.icmp_signed("==", accf, ir.Constant(_V_I64, 2))
            bvec = [load(sg, builder.bitcast(builder.gep(bd, [builder.add(b0, ir.Constant(_V_I64, sg[7]))]),
                                             sg[0].as_pointer())) for sg in segs]
        xcol = builder.gep(xd, [builder.add(c0, b0)])
        if a_t:       # A[ai + r, k] = a[k, ai + r]: per k, `rows` neighbours in a row of a
            abase = builder.gep(ad, [ai])
        ns = len(segs)

        def group(rs, masked):     # rows rs of the tile (offsets from i), their accumulators over all k
            rows_i = [builder.add(i, ir.Constant(_V_I64, r)) for r in rs]
            if a_table:    # A[ai + r, k] = a[tab[ai + r] + k]
                td = context.make_array(signature.args[4])(context, builder, args[4]).data
                arow = [builder.gep(ad, [builder.load(builder.gep(td, [builder.add(ai, ir.Constant(_V_I64, r))]),
                                                      align=8)]) for r in rs]
            elif not a_t:    # A[ai + r, k] = a[ai + r, k]: one pointer per row, stepping by 1
                arow = [builder.gep(ad, [builder.mul(builder.add(ai, ir.Constant(_V_I64, r)), lda)]) for r in rs]
            optr = [[builder.bitcast(builder.gep(od, [builder.add(builder.mul(ri, ldo), builder.add(b0, ir.Constant(
                _V_I64, sg[7])))]), sg[0].as_pointer()) for sg in segs] for ri in rows_i]
            init = [[builder.select(from_out, load(sg, p, masked), sg[5]) for sg, p in zip(segs, ps)] for ps in optr]
            if with_bias:
                init = [[builder.select(from_bias, bv, v) for bv, v in zip(bvec, row)] for row in init]

            def step(k, flat):
                acc = [flat[n * ns:(n + 1) * ns] for n in range(len(rs))]
                if b_table:
                    td = context.make_array(signature.args[4])(context, builder, args[4]).data
                    xrow = builder.gep(xcol, [builder.load(builder.gep(td, [k]), align=8)])
                else:
                    xrow = builder.gep(xcol, [builder.mul(k, ldx)])
                xk = [load(sg, builder.bitcast(builder.gep(xrow, [ir.Constant(_V_I64, sg[7])]), sg[0].as_pointer()),
                           masked) for sg in segs]
                if a_t:
                    ak = builder.gep(abase, [builder.mul(k, lda)])
                    if prefetch:
                        _prefetch(builder, builder.gep(ak, [builder.mul(ir.Constant(_V_I64, prefetch), lda)]))
                new = []
                for n, r in enumerate(rs):
                    w = builder.load(builder.gep(ak, [ir.Constant(_V_I64, r)]) if a_t else builder.gep(arow[n], [k]),
                                     align=4)
                    new += [builder.call(sg[1], [_splat(builder, w, sg[4]), xk[q], acc[n][q]])
                            for q, sg in enumerate(segs)]
                return new
            flat = _k_loop(builder, "tile", k0, k1, [v for row in init for v in row], step)
            for n in range(len(rs)):
                for s, sg in enumerate(segs):
                    v = flat[n * ns + s]
                    if masked and sg is segs[-1]:
                        builder.call(sg[3], [v, optr[n][s], align, sg[6]])
                    else:
                        builder.store(v, optr[n][s], align=4)

        def emit(m):
            for rs in _row_groups(rows, widths):
                group(rs, m)
        if masked:     # whole vectors: nb their width (B's packed panels, most tiles)
            _masked_or_whole(builder, builder.icmp_signed("==", nb, ir.Constant(_V_I64, sum(widths))), emit)
        else:
            emit(False)
        return context.get_dummy_value()

    if table:
        @intrinsic
        def tile_tab(typingctx, a, x, out, bias, tab, i, ai, b0, nb, k0, k1, c0, acc):
            return typer((a, x, out, bias, tab)), codegen
        return tile_tab

    if with_bias:
        @intrinsic
        def tile_b(typingctx, a, x, out, bias, i, ai, b0, nb, k0, k1, c0, acc):
            return typer((a, x, out, bias)), codegen
        return tile_b

    @intrinsic
    def tile(typingctx, a, x, out, i, ai, b0, nb, k0, k1, c0, acc):
        return typer((a, x, out)), codegen
    return tile


def _ctile(vecs, cols):
    """An intrinsic ``ctile(at, x, tmp, i, b0, nb, k1)`` on C-contiguous float32 matrices,
    vectors along the output's rows: ``tmp[j, :16*vecs] = A[i:i+16*vecs, :k1] @ x[:k1, c]``
    with ``A = at.T`` (``at`` ``[K, M]``, read 16 rows of A at a time) and ``c = b0 +
    min(j, nb - 1)`` for each of ``cols`` columns (those past nb repeat the last column: the
    caller keeps ``j < nb``); rows of A past M are masked (zero). Per k: ``vecs`` vector
    loads, ``cols`` broadcasts, ``vecs * cols`` fused multiply-adds, so a few columns take
    as many multiply-adds as they need, not a whole vector's."""
    def codegen(context, builder, signature, args):
        i, b0, nb, k1 = args[3:]
        arrs = [context.make_array(t)(context, builder, v) for t, v in zip(signature.args[:3], args[:3])]
        ad, xd, td = (r.data for r in arrs)
        lda, ldx, ldt = (builder.extract_value(r.shape, 1) for r in arrs)
        vt, fma, mload, _ = _vector_ops(builder.module, 16)
        align = ir.Constant(_V_I32, 4)
        zero = ir.Constant(vt, [0.0] * 16)
        # rows of A left from each vector's first row
        masks = [_lanes_below(builder, builder.sub(lda, builder.add(i, ir.Constant(_V_I64, 16 * r))), 16)
                 for r in range(vecs)]
        col = _repeat_last(builder, b0, nb, cols)

        def group(vs, js, masked=True):    # the accumulators of vectors vs and columns js, over every k
            def step(k, flat):
                arow = builder.gep(ad, [builder.add(builder.mul(k, lda), i)])
                ptrs = [builder.bitcast(builder.gep(arow, [ir.Constant(_V_I64, 16 * r)]), vt.as_pointer()) for r in vs]
                av = [builder.call(mload, [p, align, masks[r], zero]) if masked else builder.load(p, align=4)
                      for p, r in zip(ptrs, vs)]
                xrow = builder.gep(xd, [builder.mul(k, ldx)])
                new = [None] * (len(vs) * len(js))
                for n, j in enumerate(js):
                    wv = _splat(builder, builder.load(builder.gep(xrow, [col[j]]), align=4), 16)
                    for m in range(len(vs)):
                        new[m * len(js) + n] = builder.call(fma, [av[m], wv, flat[m * len(js) + n]])
                return new
            flat = _k_loop(builder, "ctile", ir.Constant(_V_I64, 0), k1, [zero] * (len(vs) * len(js)), step)
            for m, r in enumerate(vs):
                for n, j in enumerate(js):
                    p = builder.gep(td, [builder.add(builder.mul(ir.Constant(_V_I64, j), ldt),
                                                     ir.Constant(_V_I64, 16 * r))])
                    builder.store(flat[m * len(js) + n], builder.bitcast(p, vt.as_pointer()), align=4)
        if VECTOR_BITS >= 512:
            group(range(vecs), range(cols))
        else:     # AVX2: one 16-lane vector (two registers) of A at a time, columns in groups,
            # a vector whose rows all lie within A without a mask
            for r in range(vecs):
                def emit(m, r=r):
                    for js in _row_groups(cols, (16,)):
                        group([r], js, m)
                inside = builder.icmp_signed("<=", builder.add(i, ir.Constant(_V_I64, 16 * r + 16)), lda)
                _masked_or_whole(builder, inside, emit)
        return context.get_dummy_value()

    @intrinsic
    def ctile(typingctx, at, x, tmp, i, b0, nb, k1):
        i64 = types.int64
        return types.void(at, x, tmp, i64, i64, i64, i64), codegen
    return ctile


# lines of an 8-row panel (32 bytes each) read ahead by a software prefetch in the tiles that
# read one: a panel is one sequential stream, which the hardware prefetchers follow too slowly
# from L3 (8 rows read in place are 8 streams): [4096, 1024] @ [1024, 16] 73 -> 111 GFLOP/s
# (8 rows in place 99), [1024, 4096] @ [4096, 32] 82 -> 106; no change when W fits in L2
_PANEL_AHEAD = 64


def _ptile(ne):
    """An intrinsic ``ptile(p, x, out, i, b0, e0, nl, k1)``: A's rows ``i..i+8`` read from
    their panel ``p`` (``[>= k1, 8]``, ``p[k, r] = A[i + r, k]``, C-contiguous float32), and
    ``out[i:i+8, b0:b0+16] = A[i:i+8, :k1] @ x[:k1, b0:b0+16]`` (a whole 16-column block, in
    eight 16-lane registers, the A values broadcast from the panel's line k) together with
    ``ne`` more columns, ``out[i:i+8, e0 + j] = A[i:i+8, :k1] @ x[:k1, e0 + min(j, nl - 1)]``
    (those past ``nl`` repeat the last: the same values stored twice), each an 8-lane
    register along the rows, the panel's line k as one vector times a broadcast of x. The
    columns left past a batch's last multiple of 16 then cost a multiply-add per column
    and k, in the same pass over A as the block before them (a pass of their own streams A
    from L3 again). Each product sums k in order from zero with fused multiply-adds, as
    ``_tile`` does: the same values."""
    def codegen(context, builder, sig, args):
        i, b0, e0, nl, k1 = args[3:]
        arrs = [context.make_array(t)(context, builder, v) for t, v in zip(sig.args[:3], args[:3])]
        pd, xd, od = (r.data for r in arrs)
        ldx, ldo = (builder.extract_value(r.shape, 1) for r in arrs[1:])
        v16, fma16, _, _ = _vector_ops(builder.module, 16)
        v8, fma8, _, _ = _vector_ops(builder.module, 8)
        z16, z8 = ir.Constant(v16, [0.0] * 16), ir.Constant(v8, [0.0] * 8)

        def c(v):
            return ir.Constant(_V_I64, v)
        cols = _repeat_last(builder, e0, nl, ne)

        orow = [builder.gep(od, [builder.mul(builder.add(i, c(r)), ldo)]) for r in range(8)]

        def group(rs, ne):    # rows rs of the 16-column block and the ne columns, over every k
            def step(k, acc):
                prow = builder.gep(pd, [builder.mul(k, c(8))])
                _prefetch(builder, builder.gep(prow, [c(8 * _PANEL_AHEAD)]))
                xrow = builder.gep(xd, [builder.mul(k, ldx)])
                nm = []
                if rs:
                    xv = builder.load(builder.bitcast(builder.gep(xrow, [b0]), v16.as_pointer()), align=4)
                    nm = [builder.call(fma16, [_splat(builder, builder.load(builder.gep(prow, [c(r)]), align=4), 16),
                                               xv, acc[n]]) for n, r in enumerate(rs)]
                if ne:
                    pv = builder.load(builder.bitcast(prow, v8.as_pointer()), align=4)
                    xb = [_splat(builder, builder.load(builder.gep(xrow, [cols[j]]), align=4), 8) for j in range(ne)]
                    nm += [builder.call(fma8, [pv, xb[j], acc[len(rs) + j]]) for j in range(ne)]
                return nm
            new = _k_loop(builder, "ptile", c(0), k1, [z16] * len(rs) + [z8] * ne, step)
            for n, r in enumerate(rs):
                builder.store(new[n], builder.bitcast(builder.gep(orow[r], [b0]), v16.as_pointer()), align=4)
            for j in range(ne):
                for r in range(8):
                    builder.store(builder.extract_element(new[len(rs) + j], ir.Constant(_V_I32, r)),
                                  builder.gep(orow[r], [cols[j]]), align=4)
        if VECTOR_BITS >= 512:
            group(range(8), ne)
        else:    # AVX2: the block's rows in two groups of 8 accumulators, the columns on their own
            for rs in _row_groups(8, (16,)):
                group(rs, 0)
            if ne:
                group((), ne)
        return context.get_dummy_value()

    @intrinsic
    def ptile(typingctx, p, x, out, i, b0, e0, nl, k1):
        i64 = types.int64
        return types.void(p, x, out, i64, i64, i64, i64, i64), codegen
    return ptile


@intrinsic
def _t8x8(typingctx, a, ai, aj, out, oi, oj):
    """``out[oi:oi+8, oj:oj+8] = a[ai:ai+8, aj:aj+8].T`` on float32 matrices whose rows are
    contiguous (any distance apart): eight 8-lane row loads, the transpose by three rounds
    of shuffles (pairs of rows interleaved, pairs of pairs, then the 128-bit halves), eight
    row stores. A scalar transpose moves one element per load and store: [32 x 192] took
    2.0 us that way, 0.9 with this (numba's call included)."""
    vt = ir.VectorType(_V_F32, 8)
    lo, hi = [0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]

    def codegen(context, builder, sig, args):
        aa = context.make_array(sig.args[0])(context, builder, args[0])
        oo = context.make_array(sig.args[3])(context, builder, args[3])
        ai, aj, oi, oj = args[1], args[2], args[4], args[5]
        four = ir.Constant(_V_I64, 4)     # row strides in elements (a's rows may lie apart)
        lda, ldo = (builder.sdiv(builder.extract_value(arr.strides, 0), four) for arr in (aa, oo))

        def row(arr, ld, i, j, r):
            off = builder.add(builder.mul(builder.add(i, ir.Constant(_V_I64, r)), ld), j)
            return builder.bitcast(builder.gep(arr.data, [off]), vt.as_pointer())

        def shuffle(x, y, idx):
            return builder.shuffle_vector(x, y, ir.Constant(ir.VectorType(_V_I32, 8), idx))
        rows = [builder.load(row(aa, lda, ai, aj, r), align=4) for r in range(8)]
        t = []      # rows 2p and 2p+1 interleaved: columns {0, 1, 4, 5}, then {2, 3, 6, 7}
        for r in range(0, 8, 2):
            t.append(shuffle(rows[r], rows[r + 1], [0, 8, 1, 9, 4, 12, 5, 13]))
            t.append(shuffle(rows[r], rows[r + 1], [2, 10, 3, 11, 6, 14, 7, 15]))
        # four rows per vector: u[c] and u[c + 4] hold columns c and c + 4 of rows 0-3 and 4-7
        u = [shuffle(t[0], t[2], lo), shuffle(t[0], t[2], hi), shuffle(t[1], t[3], lo), shuffle(t[1], t[3], hi),
             shuffle(t[4], t[6], lo), shuffle(t[4], t[6], hi), shuffle(t[5], t[7], lo), shuffle(t[5], t[7], hi)]
        cols = [shuffle(u[c], u[c + 4], [0, 1, 2, 3, 8, 9, 10, 11]) for c in range(4)] + \
               [shuffle(u[c], u[c + 4], [4, 5, 6, 7, 12, 13, 14, 15]) for c in range(4)]
        for c in range(8):
            builder.store(cols[c], row(oo, ldo, oi, oj, c), align=4)
        return context.get_dummy_value()
    i64 = types.int64
    return types.void(a, i64, i64, out, i64, i64), codegen


# the recurrent products' tiles (rnn_kernels): 8 rows and 1 row, A = a or a.T
_T8, _T1 = _tile(8, False), _tile(1, False)
# a last block of at most 8 columns (a batch of 17-24, 33-40, ...) in 8-lane vectors, 16 rows
# at a time: its multiply-adds in proportion to its columns instead of a 16-lane tile's with
# half its lanes masked (H=384: batch 24 343 -> 278 us, batch 8 75 -> 44 us per product)
_H16, _H8, _H1 = _tile(16, False, lanes=8), _tile(8, False, lanes=8), _tile(1, False, lanes=8)
_TT8, _TT1 = _tile(8, True), _tile(1, True)
_TT8P = _tile(8, True, prefetch=_PANEL_AHEAD)     # from an 8-row panel (rnn_kernels.matmul_fm_p)
# from a 6-row panel on AVX2 (rnn_kernels.matmul_p6): 6 rows x 16 columns, 12 accumulators
# beside the right-hand side's two vectors and a broadcast in AVX2's 16 registers, one pass
# (an 8-row tile there runs as two 4-row passes over the same right-hand stripe); masked,
# the last 9-15 columns; 8 lanes, the last 1-8
_Q6 = _tile(6, True, lanes=(8, 8), masked=False, prefetch=_PANEL_AHEAD)
_Q6M = _tile(6, True, lanes=(8, 8), prefetch=_PANEL_AHEAD)
_Q6H = _tile(6, True, lanes=8, prefetch=_PANEL_AHEAD)
# a last block of 24 columns (batch 24, 40, ...) in three 8-lane vectors per row, unmasked: the
# weights stream through once for its 24 columns instead of twice. Three 8-lane vectors ran at
# 111-113 GFLOP/s, a 16-lane and an 8-lane one at 103 (the 16-lane loads straddle cache lines
# in 96-byte rows), the 16- then 8-column passes at 107, a mask on the last vector at 105-108
_W8 = _tile(8, False, lanes=(8, 8, 8), masked=False)
# at most 4 columns left past the 16-column tiles (batch 17-20, 33-36, ...): 64 rows of the
# output x 4 columns, vectors along the rows (from A's transpose)
_C4 = _ctile(4, 4)
_C3 = _ctile(4, 3)    # at most 3 (batch 3, 17-19, ...): a multiply-add per column, none repeated
# 9-12 columns left (batch 12, 28, ...): 32 rows x 12 columns
_C12 = _ctile(2, 12)
# 5-6 and 9-10 columns (batch 5-6 and 9-10 of a recurrent layer, or left past 16): 64 rows x
# 5 or 6 columns, 32 rows x 10; in [512, 128] @ [128, B] 7.9 / 9.5 / 15.5 us at B = 5 / 6 / 9
# where the 8- and 16-lane tiles took 11.9 / 12.2 / 18.6 and matmul_wr 13.3 / 13.5 / 20.1
_C5, _C6, _C10 = _ctile(4, 5), _ctile(4, 6), _ctile(2, 10)
# 7-8 columns (batch 7-8) from K = 192 on (rnn_kernels.matmul_fm_t): 48 rows x 8 columns;
# [256, 1024] @ [1024, 8] 42.7 us where the 8-lane tiles took 52.4 (at K = 1024 they run 8
# rows at a time), [512, 2048] 160 against 198
_C8 = _ctile(3, 8)
# The same column counts one 16-lane vector along the rows, for matmul_fm_p's 16-row panels on
# AVX2 (rnn_kernels._STRIP): there a tile of 2-4 vectors takes a pass of its own per vector
# (the registers hold one vector's accumulators), and each pass read one line of every panel
# row, 48-64 rows wide: strided, from memory at H = 1024. A 16-row panel is one contiguous
# stream per pass: [4096, 1024] @ [1024, 8] 5.9 -> 3.1 ms, batch 4 5.6 -> 2.2 ms.
_S3, _S4, _S5, _S6, _S8, _S10, _S12 = (_ctile(1, n) for n in (3, 4, 5, 6, 8, 10, 12))
# 1-12 columns past a multiple of 16 (batch 17-28, 33-44, ...) in the pass of the block before
# them, from A's 8-row panels (rnn_kernels.matmul_fm_p): ne = 1, 2, 3, 4, 6, 8, 10, 12 (5, 7,
# 9, 11 repeat a column)
_P1, _P2, _P3, _P4, _P6, _P8, _P10, _P12 = (_ptile(n) for n in (1, 2, 3, 4, 6, 8, 10, 12))
# gemm's: the same, able to start from a bias row
_G8, _G1 = _tile(8, False, True), _tile(1, False, True)
_GT8, _GT1 = _tile(8, True, True), _tile(1, True, True)


@kernel(error_model="numpy")
def transpose(a, out):
    """``out [N, M] = a [M, N].T``, eight rows of ``a`` at a time: each row is read
    sequentially and each row of ``out`` gets 32 contiguous bytes per visit. numpy's
    strided copy of a power-of-two matrix conflicts in the caches: at [2048, 512] this
    takes 1.0 ms where numpy takes 3.7, at [4096, 1024] 4.4 ms against 29."""
    M, N = a.shape
    M8 = M - M % 8
    for i in range(0, M8, 8):
        r0, r1, r2, r3, r4, r5, r6, r7 = a[i], a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5], a[i + 6], a[i + 7]
        for j in range(N):
            o = out[j]
            o[i], o[i + 1], o[i + 2], o[i + 3] = r0[j], r1[j], r2[j], r3[j]
            o[i + 4], o[i + 5], o[i + 6], o[i + 7] = r4[j], r5[j], r6[j], r7[j]
    for i in range(M8, M):
        r = a[i]
        for j in range(N):
            out[j, i] = r[j]


@numba.njit(**_OPTS)
def transpose32(a, out):
    """``transpose`` of a float32 ``a`` whose rows are contiguous (any distance apart) into
    a C-contiguous ``out``, by 8x8 shuffle blocks (the edges element by element): [768,
    768] from L3 0.23 -> 0.18 ms, in L2 0.17 -> 0.06."""
    M, N = a.shape
    M8, N8 = M - M % 8, N - N % 8
    for i in range(0, M8, 8):
        for j in range(0, N8, 8):
            _t8x8(a, i, j, out, j, i)
        for j in range(N8, N):
            for r in range(8):
                out[j, i + r] = a[i + r, j]
    for i in range(M8, M):
        for j in range(N):
            out[j, i] = a[i, j]


@numba.njit(**_OPTS)
def _pack_bt(b, bp, q0, q1, k0, k1):
    """``bp[q - q0, k, c] = b[16q + c, k]`` (zero past b's N rows) for the panels ``q0 <= q <
    q1`` and rows ``k0 <= k < k1`` of ``B = b.T`` (``b`` ``[N, K]``): 16
    rows of b at a time, as two 8-row halves of 8x8 shuffle transposes (``_t8x8``), 8 rows
    read in step: rows of a multiple of 4 KB fall into one set of the 8-way L1 cache, where
    16 rows read in step evict each other. Element by element, one line of the panel per
    k, the transposed packs took [768, 768] from L3 0.23 ms, in L2 0.17; by blocks 0.18 /
    0.06, [1024, 1024] 0.43 / 0.30 -> 0.33 / 0.24). ``gemm`` packs one column block at a
    time, just before its tiles read it: the block's panels are then still in L2 (a whole
    transposed pack made first left them in L3: [512 x 1024] @ [1024 x 1024]^T 106 -> 110
    GFLOP/s, [512 x 2048] @ [1024 x 2048]^T 107 -> 111)."""
    N = b.shape[0]
    k8 = k0 + (k1 - k0) // 8 * 8
    for q in range(q0, q1):
        n = min(16, N - 16 * q)
        d = bp[q - q0]
        if n < 16:
            d[k0:k1] = _ZERO
        k_rest = k0
        if n == 16:     # 8x8 shuffle blocks, 8 rows of b read in step (rows of 4 KB too)
            for k in range(k0, k8, 8):
                _t8x8(b, 16 * q, k, d, k, 0)
                _t8x8(b, 16 * q + 8, k, d, k, 8)
            k_rest = k8
        for k in range(k_rest, k1):      # a whole line of the panel per k, the rows read in step
            dk = d[k]
            for c in range(n):
                dk[c] = b[16 * q + c, k]


@numba.njit(**_OPTS)
def _pack_b(b, bp, colsum):
    """``bp [ceil(N / 16), K, 16]``: ``bp[q, k, c] = b[k, 16q + c]`` (zero past N) from ``b``
    ``[K, N]``. Where ``colsum`` is not empty, it gets the column sums of b,
    ``b.sum(axis=0)`` (each column summed in k order), as the copy reads them.

    ``b`` is read one whole row at a time (every panel's line k from it): a B that is not
    in the caches streams in at the prefetchers' speed. Read panel by panel, each 64-byte
    read lands on another row, another page, where no prefetcher follows: [1024, 1024]
    from L3 took 1.07 ms that way, 0.35 ms row by row ([512, 512] 0.25 -> 0.09). For the
    same reason it is made whole before the product (packed block by block, as ``_pack_bt``
    is, [512 x 1024] @ [1024 x 1024] ran 103 -> 97-103 GFLOP/s)."""
    K, N = b.shape
    NF = N // 16                # whole panels; a last one of N % 16 columns padded with zeros
    sums = colsum.shape[0] > 0
    if sums:
        for j in range(N):
            colsum[j] = _ZERO
    for k in range(K):
        br = b[k]
        for q in range(NF):
            dk = bp[q, k]
            for c in range(16):
                dk[c] = br[16 * q + c]
        if NF < bp.shape[0]:
            dk = bp[NF, k]
            for c in range(N - 16 * NF):
                dk[c] = br[16 * NF + c]
            for c in range(N - 16 * NF, 16):
                dk[c] = _ZERO
        if sums:
            for j in range(N):
                colsum[j] += br[j]


@numba.njit(**_OPTS)
def aligned_empty(n):
    """An uninitialized float32 array of ``n`` elements whose data starts on a 64-byte line
    (numba's own arrays start on 32-byte boundaries: a packed panel's 64-byte rows then
    straddle two lines, 1-10 % slower products)."""
    raw = np.empty(n + 16, np.float32)
    o = (64 - raw.ctypes.data % 64) % 64 // 4
    return raw[o:o + n]


@numba.njit(**_OPTS)
def _pack_a(a, ap):
    """``ap [M // 8, K, 8]``: ``ap[p, k, r] = a[k, 8p + r]`` from ``a`` ``[K, M]`` (A read
    transposed), ``a`` read one whole row at a time: each 8-row tile's slice of A then lies
    in 32-byte lines one after another instead of one 32-byte piece per row of ``a``."""
    for k in range(a.shape[0]):
        ar = a[k]
        for p in range(ap.shape[0]):
            d = ap[p, k]
            for r in range(8):
                d[r] = ar[8 * p + r]


@numba.njit(**_OPTS)
def gemm(a, a_t, b, b_t, out, bias, init, pack_a, pack_b, kc, mc, qb, colsum):
    """``out [M, N] = A @ B``, ``init`` 0, or ``out += A @ B``, ``init`` 1 (a gradient added
    into ``.grad``), or ``out = bias + A @ B``, ``init`` 2, with ``A = a`` ``[M, K]`` or, where
    ``a_t``, ``a.T`` (``a`` ``[K, M]``), ``B = b`` ``[K, N]`` or, where ``b_t``, ``b.T``
    (``b`` ``[N, K]``); ``bias`` ``[1, N]`` where ``init`` is 2 (else any array with N
    columns, ``out`` itself); all C-contiguous float32. Each tile of ``out`` starts its
    accumulators from the bias row or from ``out`` itself, so adding costs no pass of its
    own. A is read in place (``a_t``: eight neighbours in a row of ``a`` per k, or, where
    ``pack_a`` and ``a_t``, from a copy of its rows in 8-column panels, ``[K, 8]``);
    ``pack_b`` (implied by ``b_t``) copies B to panels of 16 columns (``[K, 16]``); ``kc``
    rows of B per pass, ``qb`` panels of B per column block (the block stays in L2 while
    every row of A passes over it), ``mc`` rows of A per sweep over the block's panels.
    ``colsum`` ``[N]`` (or empty): B's column sums, formed while B is packed (``pack_b``,
    not ``b_t``): a Linear layer's bias gradient beside its weight gradient."""
    if a_t:
        K, M = a.shape
    else:
        M, K = a.shape
    N = b.shape[0] if b_t else b.shape[1]
    pack_b = pack_b or b_t
    if colsum.shape[0] > 0 and (K == 0 or not pack_b or b_t):
        for j in range(N):
            colsum[j] = _ZERO
        for k in range(K):
            for j in range(N):
                colsum[j] += b[j, k] if b_t else b[k, j]
    if K == 0:
        for i in range(M):
            o = out[i]
            for j in range(N):
                if init != 1:
                    o[j] = bias[0, j] if init == 2 else _ZERO
        return
    NQ = (N + 15) // 16
    nbp = (min(qb, NQ) if b_t else NQ) if pack_b else 0     # b_t: one column block's panels at a time
    bp = aligned_empty(nbp * K * 16).reshape((nbp, K, 16))
    if pack_b and not b_t:
        _pack_b(b, bp, colsum)
    pack_a = pack_a and a_t
    M8 = M - M % 8
    ap = aligned_empty(M8 // 8 * K * 8 if pack_a else 0).reshape((M8 // 8 if pack_a else 0, K, 8))
    if pack_a:
        _pack_a(a, ap)
    for k0 in range(0, K, kc):
        k1 = min(k0 + kc, K)
        acc = 1 if k0 > 0 else init
        for q0 in range(0, NQ, qb):
            if b_t:
                _pack_bt(b, bp, q0, min(q0 + qb, NQ), k0, k1)
            for i0 in range(0, M, mc):
                i1 = min(i0 + mc, M)
                for q in range(q0, min(q0 + qb, NQ)):
                    b0 = 16 * q
                    nb = min(16, N - b0)
                    x = (bp[q - q0] if b_t else bp[q]) if pack_b else b
                    c0 = -b0 if pack_b else 0
                    for i in range(i0, min(i1, M8), 8):
                        if pack_a:
                            _GT8(ap[i // 8], x, out, bias, i, 0, b0, nb, k0, k1, c0, acc)
                        elif a_t:
                            _GT8(a, x, out, bias, i, i, b0, nb, k0, k1, c0, acc)
                        else:
                            _G8(a, x, out, bias, i, i, b0, nb, k0, k1, c0, acc)
                    for i in range(max(i0, M8), i1):
                        if a_t:
                            _GT1(a, x, out, bias, i, i, b0, nb, k0, k1, c0, acc)
                        else:
                            _G1(a, x, out, bias, i, i, b0, nb, k0, k1, c0, acc)


_gemm = gemm     # gemm_stack's own reference (tests wrap the module's ``gemm`` to count calls)


@numba.njit(**_OPTS)
def gemm_stack(a, a_t, b, b_t, out, kc, mc, qb, colsum):
    """``out[z] = A_z @ B_z`` for every z of C-contiguous float32 stacks ``[Z, ., .]``, each
    product by ``gemm`` (A_z = ``a[z]`` or, where ``a_t``, its transpose; likewise B_z; B
    always packed): the attention products of every batch and head in one call."""
    for z in range(out.shape[0]):
        o = out[z]
        _gemm(a[z], a_t, b[z], b_t, o, o, I0, NO, YES, kc, mc, qb, colsum)


# gemm_rows' tile: B's rows through an offset table
_R8 = _tile(8, False, True, table=True)


@numba.njit(**_OPTS)
def gemm_rows(a, b, tab, out, col0, N, bias, init, k_first, kc, qb):
    """``out[:, col0:col0+N] = A @ B`` (``init`` 0), ``out +=`` it (1) or ``bias +`` it (2,
    ``bias`` ``[1, col0 + N]``) over ``k_first <= k < K = len(tab)``: ``A[i, k] = a[i, k]``
    (``a`` ``[M, >= K]``) and row k of B the N elements of ``b`` (any C-contiguous float32
    array, read flat) from offset ``tab[k]`` (int64): the taps of a convolution as shifted
    windows of one input, summed in the register tile without a copy of any window
    (``k_first`` > 0: a window of a's columns). ``out`` is ``[M, >= col0 + N]``, its other
    columns untouched. Rows past the last 8 run in one more 8-row tile, on a copy of them
    padded with zero rows into a scratch output (a one-row tile reloads B for every row: a
    product with 6 or 12 rows ran at a third of the speed)."""
    M = a.shape[0]
    K = tab.shape[0]
    M8 = M - M % 8
    NQ = (N + 15) // 16
    ra = M - M8
    kw = K - k_first if ra else 0
    ap = np.zeros((8 if ra else 0, kw), np.float32)      # the last rows' columns k_first.., padded to 8 rows
    tmp = np.empty((8 if ra else 0, N), np.float32)      # their output, columns from col0
    bt = np.empty((1, N if ra and init == 2 else 0), np.float32)
    tab_t = tab[k_first:]                                # the tail's k counts from k_first
    if ra:
        for r in range(ra):
            ar, pr = a[M8 + r], ap[r]
            for k in range(kw):
                pr[k] = ar[k_first + k]
            if init == 1:
                orow, trow = out[M8 + r], tmp[r]
                for c in range(N):
                    trow[c] = orow[col0 + c]
        if init == 2:
            for c in range(N):
                bt[0, c] = bias[0, col0 + c]
    for k0 in range(k_first, K, kc):
        k1 = min(k0 + kc, K)
        acc = 1 if k0 > k_first else init
        for q0 in range(0, NQ, qb):
            for i in range(0, M8, 8):
                for q in range(q0, min(q0 + qb, NQ)):
                    _R8(a, b, out, bias, tab, i, i, col0 + 16 * q, min(16, N - 16 * q), k0, k1, -col0, acc)
            if ra:
                for q in range(q0, min(q0 + qb, NQ)):
                    _R8(ap, b, tmp, bt if init == 2 else tmp, tab_t, 0, 0, 16 * q, min(16, N - 16 * q), k0 - k_first,
                        k1 - k_first, 0, acc)
    for r in range(ra):
        orow, trow = out[M8 + r], tmp[r]
        for c in range(N):
            orow[col0 + c] = trow[c]


# conv_rows' and conv_wgrad_rows' tiles: 4 rows of A by two 8-lane vectors (eight accumulators,
# one group on AVX2), and by one vector for a last block of at most 8 columns (the two-vector
# tile loads its first vector whole)
_CR16 = _tile(4, False, True, lanes=(8, 8), table=True)
_CR8 = _tile(4, False, True, lanes=8, table=True)
_WR16 = _tile(4, False, True, lanes=(8, 8), table=True, a_table=True)
_WR8 = _tile(4, False, True, lanes=8, table=True, a_table=True)
# ... and for 17-24 columns 3 rows by three vectors (nine accumulators: per value of the sum
# three loads and three broadcasts for nine multiply-adds): 24 output channels' weight
# gradient 58-60 -> 75-80 GFLOP/s against 16 + 8 columns in the tiles above (the 3 rows
# suit any K = 9C). In the forward product it gained nothing (43-69 against 45-52)
_WR24 = _tile(3, False, True, lanes=(8, 8, 8), table=True, a_table=True)


@numba.njit(**_OPTS)
def conv_rows(a, b, tab, out, oh, ow, n, rowb, base):
    """A stride-1 convolution as products of shifted windows, the output rows one at a time:
    ``out[m, (y*ow + x)*n + v] = sum_k a[m, k] * b[base + tab[k] + y*rowb + x*n + v]`` for
    ``y < oh``, ``x < ow``, ``v < n`` (``b`` a padded batch-innermost image read flat, ``tab``
    the taps' offsets in it, ``rowb`` its row length; ``out`` ``[M, oh*ow*n]``, M a multiple of
    4, C-contiguous float32). Each 16 columns of an output row stay in registers for 4 rows
    of A over every k: no column copy of the image, no junk columns. The 4 rows of A pass
    over the whole output row before the next 4 start: with every row tile per 16 columns
    instead, each block's taps and the output rows of all M channels were live at once (16
    channels' taps on 64x64 images: 48 rows of 4.2 KB, one page each, and 16 output pages,
    past the first-level TLB's 64 entries), and the product ran at 39-48 GFLOP/s against
    64-69 this way (16 -> 16 channels on 32x32 to 64x64, batch 16, Zen 3)."""
    M, K = a.shape
    row = ow * n
    for y in range(oh):
        c0 = base + y * (rowb - row)
        for i in range(0, M, 4):
            for j0 in range(0, row, 16):
                b0 = y * row + j0
                nb = min(16, row - j0)
                if nb > 8:
                    _CR16(a, b, out, out, tab, i, i, b0, nb, 0, K, c0, 0)
                else:
                    _CR8(a, b, out, out, tab, i, i, b0, nb, 0, K, c0, 0)


@numba.njit(**_OPTS)
def conv_wgrad_rows(x, tab, gt, out, oh, ow, n, rowb):
    """The weight gradient of ``conv_rows`` (base 0) transposed: ``out[k, o] = sum_{y, x, v}
    x[tab[k] + y*rowb + x*n + v] * gt[(y*ow + x)*n + v, o]`` (``gt`` the output gradient
    ``[oh*ow*n, O]``, ``out`` ``[K, O]``, K a multiple of 4, the 3-row tiles only where it is one
    of 3 too: 5x5 and 7x7 taps of 4k channels): per output row, register tiles
    (4 x 16, 4 x 8 or 3 x 24) whose A rows are the taps' windows read in place sum the row's
    ``ow*n`` terms into ``out``, which is then added into a float64 total (one float32 sum
    over every row of a 224x224 image ran 1.2e-5 off float64 relative to the largest value,
    50x the error of the column products; per row 2-3e-7)."""
    K = tab.shape[0]
    O = gt.shape[1]
    row = ow * n
    t = np.empty(K, np.int64)
    total = np.zeros((K, O), np.float64)
    for y in range(oh):
        shift = y * (rowb - row)
        for k in range(K):
            t[k] = tab[k] + shift
        b0 = 0
        while b0 < O:
            rem = O - b0
            if (16 < rem <= 24 or rem >= 48) and K % 3 == 0:     # 24 columns (the last 17-24 masked)
                nb = min(24, rem)
                for i in range(0, K, 3):
                    _WR24(x, gt, out, out, t, i, i, b0, nb, y * row, (y + 1) * row, 0, 0)
            else:
                nb = min(16, rem)
                for i in range(0, K, 4):
                    if nb > 8:
                        _WR16(x, gt, out, out, t, i, i, b0, nb, y * row, (y + 1) * row, 0, 0)
                    else:
                        _WR8(x, gt, out, out, t, i, i, b0, nb, y * row, (y + 1) * row, 0, 0)
            b0 += nb
        for k in range(K):
            for o in range(O):
                total[k, o] += out[k, o]
    for k in range(K):
        for o in range(O):
            out[k, o] = total[k, o]
