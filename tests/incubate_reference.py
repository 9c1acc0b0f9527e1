"""Paddle 3.3.1's results for ``test_paddle_incubate.py``: ``paddle.incubate`` (fused layers'
parameters and attributes, the values of the fused functions, segment ops, LookAhead,
ModelAverage, ``incubate.autograd``), ``paddle.static.amp`` and ``paddle.framework``,
recorded into ``paddle_incubate.json``. Regenerate (CI has no Paddle) with
``PYTHONPATH=. <python with paddle> tests/incubate_reference.py``.

Paddle's CPU build has no kernels for most fused layers (``fused_attention``,
``fused_feedforward``, ``fused_gemm_epilogue``...). Their reference values are computed by
Paddle from its unfused operators, following the formula each fused operator documents
(``REFERENCES`` below, written with Paddle's API); what does run on Paddle's CPU is
recorded from the fused operator itself.
"""
import json
import os

import numpy as np

from layer_reference import encode

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "paddle_incubate.json")

# fused layer cases: name -> (constructor over incubate.nn, input shape)
FUSED = {
    "FusedLinear": (lambda inn: inn.FusedLinear(6, 4), [2, 3, 6]),
    "FusedLinear/transposed": (lambda inn: inn.FusedLinear(6, 4, transpose_weight=True), [5, 6]),
    "FusedMultiHeadAttention": (lambda inn: inn.FusedMultiHeadAttention(8, 2, 0.0, 0.0), [2, 5, 8]),
    "FusedMultiHeadAttention/pre": (lambda inn: inn.FusedMultiHeadAttention(8, 4, 0.0, 0.0, normalize_before=True),
                                    [2, 3, 8]),
    "FusedMultiHeadAttention/transposed": (lambda inn: inn.FusedMultiHeadAttention(8, 2, 0.0, 0.0,
                                                                                   transpose_qkv_wb=True), [1, 4, 8]),
    "FusedFeedForward": (lambda inn: inn.FusedFeedForward(8, 16, 0.0), [2, 3, 8]),
    "FusedFeedForward/pre_gelu": (lambda inn: inn.FusedFeedForward(8, 12, 0.0, activation="gelu",
                                                                   normalize_before=True), [2, 3, 8]),
    "FusedTransformerEncoderLayer": (lambda inn: inn.FusedTransformerEncoderLayer(8, 2, 16, 0.0), [2, 4, 8]),
    "FusedTransformerEncoderLayer/pre": (lambda inn: inn.FusedTransformerEncoderLayer(8, 2, 16, 0.0,
                                                                                      normalize_before=True),
                                         [2, 4, 8]),
    "FusedBiasDropoutResidualLayerNorm": (lambda inn: inn.FusedBiasDropoutResidualLayerNorm(8, 0.0), [2, 3, 8]),
    "FusedDropoutAdd": (lambda inn: inn.FusedDropoutAdd(0.0), [2, 3, 8]),
}


def _rng(seed):
    return np.random.default_rng(seed)


def set_weights(layer, seed=1):
    """Deterministic float64 values for every parameter, in state_dict order."""
    rng = _rng(seed)
    for k, p in layer.state_dict().items():
        p.set_value(rng.standard_normal(list(p.shape)).astype(p.numpy().dtype) * 0.5)


def _ln(paddle, x, w, b, eps=1e-5):
    return paddle.nn.functional.layer_norm(x, [x.shape[-1]], w, b, eps)


def _mha(paddle, x, sd, prefix, nh, pre, transposed, mask=None):
    F = paddle.nn.functional
    b, s, e = x.shape
    hd = e // nh
    h = _ln(paddle, x, sd[prefix + "pre_ln_scale"], sd[prefix + "pre_ln_bias"]) if pre else x
    if transposed:
        qkv = paddle.matmul(h, sd[prefix + "qkv_weight"]) + sd[prefix + "qkv_bias"]
    else:
        w = sd[prefix + "qkv_weight"].reshape([3 * nh * hd, e])
        qkv = paddle.matmul(h, w, transpose_y=True) + sd[prefix + "qkv_bias"].reshape([3 * nh * hd])
    qkv = qkv.reshape([b, s, 3, nh, hd]).transpose([2, 0, 3, 1, 4])
    q, k, v = qkv[0] * hd ** -0.5, qkv[1], qkv[2]
    sc = paddle.matmul(q, k, transpose_y=True)
    if mask is not None:
        sc = sc + mask
    ctx = paddle.matmul(F.softmax(sc, -1), v).transpose([0, 2, 1, 3]).reshape([b, s, e])
    out = x + F.linear(ctx, sd[prefix + "linear_weight"], sd[prefix + "linear_bias"])
    return out if pre else _ln(paddle, out, sd[prefix + "ln_scale"], sd[prefix + "ln_bias"])


def _ffn(paddle, x, sd, prefix, act, pre):
    F = paddle.nn.functional
    h = _ln(paddle, x, sd[prefix + "_ln1_scale"], sd[prefix + "_ln1_bias"]) if pre else x
    h = getattr(F, act)(F.linear(h, sd[prefix + "_linear1_weight"], sd[prefix + "_linear1_bias"]))
    out = x + F.linear(h, sd[prefix + "_linear2_weight"], sd[prefix + "_linear2_bias"])
    return out if pre else _ln(paddle, out, sd[prefix + "_ln2_scale"], sd[prefix + "_ln2_bias"])


# Paddle's documented formulas, in Paddle's unfused operators (see the module docstring)
REFERENCES = {
    "FusedLinear": lambda paddle, x, sd: paddle.matmul(x, sd["weight"]) + sd["bias"],
    "FusedLinear/transposed": lambda paddle, x, sd: paddle.matmul(x, sd["weight"], transpose_y=True) + sd["bias"],
    "FusedMultiHeadAttention": lambda paddle, x, sd: _mha(paddle, x, sd, "", 2, False, False),
    "FusedMultiHeadAttention/pre": lambda paddle, x, sd: _mha(paddle, x, sd, "", 4, True, False),
    "FusedMultiHeadAttention/transposed": lambda paddle, x, sd: _mha(paddle, x, sd, "", 2, False, True),
    "FusedFeedForward": lambda paddle, x, sd: _ffn(paddle, x, sd, "", "relu", False),
    "FusedFeedForward/pre_gelu": lambda paddle, x, sd: _ffn(paddle, x, sd, "", "gelu", True),
    "FusedTransformerEncoderLayer": lambda paddle, x, sd: _ffn(
        paddle, _mha(paddle, x, sd, "fused_attn.", 2, False, False), sd, "ffn.", "relu", False),
    "FusedTransformerEncoderLayer/pre": lambda paddle, x, sd: _ffn(
        paddle, _mha(paddle, x, sd, "fused_attn.", 2, True, False), sd, "ffn.", "relu", True),
    "FusedBiasDropoutResidualLayerNorm": lambda paddle, x, sd: _ln(paddle, x + (x + sd["linear_bias"]),
                                                                   sd["ln_scale"], sd["ln_bias"]),
}


def fused_case(root, key, reference):
    """(record of the layer, its output on a fixed input): with ``reference`` the output is
    computed by ``REFERENCES`` from the layer's parameters instead of by the layer."""
    import importlib
    inn = importlib.import_module(root.__name__ + ".incubate.nn")
    make, shape = FUSED[key]
    root.set_default_dtype("float64")
    try:
        layer = make(inn)
        set_weights(layer)
        layer.eval()
        x = root.to_tensor(_rng(2).standard_normal(shape))
        if key == "FusedDropoutAdd":
            out = layer(x, x * 2)
        elif key == "FusedBiasDropoutResidualLayerNorm":
            out = REFERENCES[key](root, x, layer.state_dict()) if reference else layer(x, x)
        else:
            out = REFERENCES[key](root, x, layer.state_dict()) if reference else layer(x)
    finally:
        root.set_default_dtype("float32")
    base = set(vars(root.nn.Layer()))
    attrs = {k: encode(v) for k, v in vars(layer).items() if k not in base and not k.startswith("_forward")
             and k not in ("_helper", "_built", "_op_recorder", "_loaddict_holder", "_customized_attrs",
                           "_original_funcs", "_state_dict_hooks", "_non_persistable_buffer_names_set",
                           "_init_in_dynamic_mode", "_cast_to_low_precision")}
    return {"state_dict": [[k, list(t.shape)] for k, t in layer.state_dict().items()], "attrs": attrs,
            "out": out.numpy().tolist()}


def functional_cases(root):
    """Values of the incubate functions that run on Paddle's CPU, on fixed float64 inputs."""
    import importlib
    inc = importlib.import_module(root.__name__ + ".incubate")
    IF = importlib.import_module(root.__name__ + ".incubate.nn.functional")
    t = root.to_tensor
    rng = _rng(3)
    data = t(rng.standard_normal([6, 3]))
    ids = t(np.array([0, 0, 1, 3, 3, 3]))
    x = t(rng.standard_normal([2, 3, 4, 4]))
    mask = t(rng.standard_normal([2, 1, 4, 4]))
    h = t(rng.standard_normal([2, 3, 8]))
    w8, b8 = t(rng.standard_normal([8])), t(rng.standard_normal([8]))
    res = t(rng.standard_normal([2, 3, 8]))
    src, dst = t(np.array([0, 1, 2, 5, 5])), t(np.array([1, 2, 1, 0, 4]))
    out = {}
    for pool in ("sum", "mean", "max", "min"):
        out[f"segment_{pool}"] = getattr(inc, f"segment_{pool}")(data, ids)
        out[f"graph_send_recv/{pool}"] = inc.graph_send_recv(data, src, dst, pool)
    out["graph_send_recv/out_size"] = inc.graph_send_recv(data, src, dst, "sum", out_size=5)
    out["softmax_mask_fuse"] = inc.softmax_mask_fuse(x, mask)
    for red in ("sum", "mean", "none", 0, 1):
        out[f"identity_loss/{red}"] = inc.identity_loss(h, red)
    # (Paddle's CPU kernels of the fused norms are float32 only)
    h32, w32, b32, r32 = (a.astype("float32") for a in (h, w8, b8, res))
    out["fused_rms_norm"] = IF.fused_rms_norm(h32, w32, b32, 1e-6, begin_norm_axis=2)[0]
    out["fused_rms_norm/residual"] = IF.fused_rms_norm(h32, w32, None, 1e-6, begin_norm_axis=2, bias=b32,
                                                       residual=r32)[0]
    ln = IF.fused_layer_norm(h32, w32, b32, 1e-6, begin_norm_axis=2)
    out["fused_layer_norm"], out["fused_layer_norm/mean"], out["fused_layer_norm/invstd"] = ln[0], ln[2], ln[3]
    out["fused_layer_norm/residual"] = IF.fused_layer_norm(h32, w32, b32, 1e-6, residual_alpha=0.5,
                                                           begin_norm_axis=2, bias=b32, residual=r32)[0]
    out["swiglu"] = IF.swiglu(h)
    out["swiglu/two"] = IF.swiglu(h, res)
    out["fused_dropout_add/eval"] = IF.fused_dropout_add(h, res, p=0.3, training=False)
    out["fused_dropout_add/downscale"] = IF.fused_dropout_add(h, res, p=0.3, training=False,
                                                              mode="downscale_in_infer")
    return {k: v.numpy().tolist() for k, v in out.items()}


def optimizer_cases(root):
    """LookAhead around SGD and ModelAverage over 7 steps of a small linear least squares."""
    import importlib
    inc = importlib.import_module(root.__name__ + ".incubate")
    out = {}
    for kind in ("lookahead", "model_average"):
        root.set_default_dtype("float64")
        try:
            lin = root.nn.Linear(3, 2)
        finally:
            root.set_default_dtype("float32")
        set_weights(lin, 4)
        sgd = root.optimizer.SGD(learning_rate=0.1, parameters=lin.parameters())
        opt = inc.LookAhead(sgd, alpha=0.3, k=3) if kind == "lookahead" else None
        avg = inc.ModelAverage(0.5, parameters=lin.parameters(), min_average_window=2, max_average_window=4) \
            if kind == "model_average" else None
        rng = _rng(5)
        for _ in range(7):
            x = root.to_tensor(rng.standard_normal([4, 3]))
            loss = (lin(x) ** 2).mean()
            loss.backward()
            if opt is not None:
                opt.step()
                opt.clear_grad()
            else:
                sgd.step()
                avg.step()
                sgd.clear_grad()
        out[kind] = [p.numpy().tolist() for p in lin.parameters()]
        if avg is not None:
            with avg.apply():
                out["model_average/applied"] = [p.numpy().tolist() for p in lin.parameters()]
            out["model_average/restored"] = [p.numpy().tolist() for p in lin.parameters()]
    return out


def autograd_cases(root):
    import importlib
    A = importlib.import_module(root.__name__ + ".incubate.autograd")
    x = root.to_tensor(_rng(6).standard_normal([2, 3]))
    y = root.to_tensor(_rng(7).standard_normal([2, 3]))

    def f(a, b):
        return (a * b).sin() + a * a

    def scalar(a):
        return (a ** 3).sum()

    out = {}
    ys, vj = A.vjp(f, [x, y])
    out["vjp"] = [vj[0].numpy().tolist(), vj[1].numpy().tolist()]
    _, jv = A.jvp(f, [x, y], [y, x])
    out["jvp"] = jv.numpy().tolist()
    out["Jacobian"] = A.Jacobian(f, [x, y])[:].numpy().tolist()
    out["Jacobian/batched"] = A.Jacobian(lambda a: a.exp() * a, x, is_batched=True)[:].numpy().tolist()
    out["Hessian"] = A.Hessian(scalar, x)[:].numpy().tolist()
    return out


def static_cases(root):
    import importlib
    amp = importlib.import_module(root.__name__ + ".static.amp")
    out = {}
    for key, kw in (("fp16", {}), ("bf16", {"dtype": "bfloat16"}),
                    ("custom", {"custom_white_list": ["softmax", "tanh"], "custom_black_list": ["conv2d"],
                                "custom_black_varnames": ["x"]})):
        lists = amp.AutoMixedPrecisionLists(**kw)
        out[key] = {a: sorted(getattr(lists, a) or ()) for a in ("white_list", "black_list", "gray_list",
                                                              "black_varnames")}
        out[key]["amp_dtype"] = lists.amp_dtype
    for key, kw in (("bf16_lists", {}), ("bf16_lists/custom", {"custom_bf16_list": ["tanh", "exp"],
                                                               "custom_fp32_list": ["matmul"]})):
        lists = amp.bf16.AutoMixedPrecisionListsBF16(**kw)
        out[key] = {a: sorted(getattr(lists, a)) for a in ("bf16_list", "fp32_list", "gray_list",
                                                            "bf16_initializer_list")}
    try:
        amp.AutoMixedPrecisionLists(custom_white_list=["exp"], custom_black_list=["exp"])
        out["overlap"] = "accepted"
    except ValueError:
        out["overlap"] = "ValueError"
    out["CustomOpLists is AutoMixedPrecisionLists"] = amp.CustomOpLists is amp.AutoMixedPrecisionLists
    out["Variable"] = isinstance(root.ones([2]), root.static.Variable)
    out["Variable/parameter"] = isinstance(root.nn.Linear(2, 2).weight, root.static.Variable)
    out["Variable/ndarray"] = isinstance(np.ones(2), root.static.Variable)
    return out


FRAMEWORK_NAMES = ["Block", "CPUPlace", "CUDAPlace", "ParamAttr", "Parameter", "Program", "convert_np_dtype_to_dtype_",
                   "disable_static", "dtype", "dygraph_not_support", "dygraph_only", "enable_static",
                   "get_default_dtype", "get_flags", "grad", "in_dynamic_mode", "in_dynamic_or_pir_mode",
                   "in_pir_executor_mode", "in_pir_mode", "is_parameter", "is_persistable", "load", "no_grad", "save",
                   "seed", "set_default_dtype", "set_flags", "switch_main_program", "switch_startup_program",
                   "use_pir_api"]


def framework_cases(root):
    fw = root.framework
    p = root.nn.Linear(2, 2).weight
    return {"names": [n for n in FRAMEWORK_NAMES if hasattr(fw, n)],
            "in_dynamic_mode": fw.in_dynamic_mode(), "in_pir_mode": fw.in_pir_mode(),
            "Parameter is nn Parameter": isinstance(p, fw.Parameter),
            "block": [type(p.block).__name__, p.block.idx, p.block.parent_idx, type(p.block.program).__name__,
                      p.block.program.num_blocks]}


def record(root):
    fused = {k: fused_case(root, k, reference=k in REFERENCES) for k in FUSED}
    return {"fused": fused, "functional": functional_cases(root), "optimizer": optimizer_cases(root),
            "autograd": autograd_cases(root), "static": static_cases(root), "framework": framework_cases(root)}


if __name__ == "__main__":
    import paddle
    table = record(paddle)
    table["generated_from"] = f"paddlepaddle {paddle.__version__}"
    with open(TABLE, "w") as f:
        json.dump(table, f, indent=0, sort_keys=True)
    print(f"written: {sorted(table)}")
