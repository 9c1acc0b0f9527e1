"""Primitive ops: ``Function`` subclasses (forward and backward side by side on raw
``xp`` arrays) and the thin public functions that check arguments and call them, one
family per module:

=================  ===========================================================
``elementwise``    arithmetic, unary math, ``where``, casts
``logic``          comparisons, logic and bitwise ops, value tests, nonzero
                   (no gradient)
``special``        log-gamma and its derivatives, erfinv, Bessel functions, atan2
``reduce``         sum, mean, max/min, prod, logsumexp, cumsum/cumprod,
                   arg-reductions, all/any
``linalg``         matmul (mm, bmm), einsum, inverse, det/slogdet, solve,
                   cholesky, eigvalsh
``movement``       reshape, transpose, concat/split, indexing, gather/scatter,
                   clone, moves between places
``sort``           argsort, unique, bincount (no gradient)
``fft``            discrete Fourier transforms, real/imag/conj
``activation``     activations as single ops (gelu, silu, softplus...)
``nn_ops``         softmax, log_softmax, linear, dropout, attention, padding,
                   unpooling, the losses that are single ops (cross-entropies,
                   NLL, smooth L1)
``norm``           standardization (the core of batch/layer/group/instance norm);
                   batch norm and layer/group/instance norm with their affine part
``embedding``      embedding lookup (gather of rows, scatter-add backward)
``resample``       interpolate/upsample of 1-D and 2-D inputs (nearest, linear)
``conv``           2-D conv2d, conv2d_transpose, unfold (im2col)
``conv_nd``        convolution and transposed convolution on any number of spatial
                   dimensions (the 1-D and 3-D layers use it)
``pooling``        max and average pooling, 2-D and N-d, adaptive max pooling
``rnn``            a whole sequence through an LSTM/GRU/Elman layer (one direction)
``ctc``            connectionist temporal classification loss
=================  ===========================================================

Functions of Tensors built from several primitives (var, dot, tril, masked_fill...) are
in ``ddg.autograd.composite`` (one file per subject); the layers' functional forms in
``ddg.nn.functional``. This package imports nothing itself: import the family you need.
"""
