"""Primitive ops: ``Function`` subclasses (forward and backward side by side on raw
``xp`` arrays) and the thin public functions that check arguments and call them, one
family per module:

=================  ===========================================================
``elementwise``    arithmetic, unary math, where, comparisons and logic
``reduce``         sum, mean, max/min, prod, logsumexp, cumsum, arg-reductions
``linalg``         matmul (mm, bmm)
``movement``       reshape, transpose, concat/split, indexing, gather, clone,
                   moves between places
``nn_ops``         softmax, log_softmax, softmax-cross-entropy, linear, dropout
``norm``           standardization (the core of batch/layer/group/instance norm);
                   batch norm and layer/group/instance norm with their affine part
``activation``     the activations as single ops
``embedding``      embedding lookup (gather of rows, scatter-add backward)
``conv``           conv2d, conv2d_transpose, unfold (im2col)
``pooling``        max and average pooling
``rnn``            a whole sequence through an LSTM/GRU/Elman layer (one direction)
=================  ===========================================================

Functions built from several primitives (var, std, dot, outer, masked_fill...) are in
``ddg.autograd.composite``; the layers' functional forms in ``ddg.nn.functional``.
This package imports nothing itself: import the family you need.
"""
