"""Cross-checks against PyTorch, recorded once so that the suite needs no torch.

``python tests/torch_reference.py`` under a Python with torch (2.13 here) builds every
case's inputs, runs them through torch and writes inputs and results to
``tests/torch_reference.npz``; ``tests/test_torch_reference.py`` runs the same inputs
through ddg and compares. Inputs are stored rather than regenerated, so the comparison
does not depend on a random stream staying the same across numpy versions.

A case is ``name -> function(torch, inputs) -> {result name: array}``; ``INPUTS[name]``
gives its inputs, float64 unless the case says otherwise.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "torch_reference.npz")


def _inputs():
    rng = np.random.default_rng(0)
    n = rng.standard_normal
    f32 = np.float32
    return {
        "conv": {"x": n((2, 4, 9, 8)), "w": n((6, 2, 3, 3)), "b": n(6), "wt": n((4, 3, 3, 3))},
        "norm": {"x": n((2, 3, 5, 6))},
        "lstm": {"x": n((2, 4, 3)).astype(f32), "h0": n((4, 2, 5)).astype(f32), "c0": n((4, 2, 5)).astype(f32)},
        "gru": {"x": n((2, 4, 3)).astype(f32), "h0": n((4, 2, 5)).astype(f32)},
        "lstm_proj": {"x": n((2, 4, 3)).astype(f32)},
    }


INPUTS = _inputs()


def _conv(torch, x, w, b, wt):
    tf = torch.nn.functional
    t = torch.tensor
    out = {
        "conv2d": tf.conv2d(t(x), t(w), t(b), stride=2, padding=1, dilation=(1, 2), groups=2),
        "conv_transpose2d": tf.conv_transpose2d(t(x), t(wt), stride=2, padding=1, output_padding=1, groups=2),
        "max_pool2d": tf.max_pool2d(t(x), 3, 2, 1, ceil_mode=True),
        "avg_pool2d_exclusive": tf.avg_pool2d(t(x), 3, 2, 1, count_include_pad=False),
        "adaptive_avg_pool2d": tf.adaptive_avg_pool2d(t(x), (4, 3)),
    }
    # gradients of a small conv net: conv (groups), relu, max pool
    xt, wg = t(x, requires_grad=True), t(w, requires_grad=True)
    tf.max_pool2d(torch.relu(tf.conv2d(xt, wg, padding=1, groups=2)), 2).sum().backward()
    out.update(net_grad_x=xt.grad, net_grad_w=wg.grad)
    return out


def _norm(torch, x):
    tf = torch.nn.functional
    tx = torch.tensor(x)
    return {
        "bilinear": tf.interpolate(tx, size=(8, 4), mode="bilinear", align_corners=False),
        "bilinear_align_corners": tf.interpolate(tx, size=(8, 4), mode="bilinear", align_corners=True),
        "nearest": tf.interpolate(tx, size=(9, 13), mode="nearest"),
        "layer_norm": tf.layer_norm(tx, (5, 6)),
        "group_norm": tf.group_norm(tx, 3),
        "pad_reflect": tf.pad(tx, (1, 2, 2, 1), mode="reflect"),
        "normalize": tf.normalize(tx, dim=1),
    }


def _rnn(kind):
    def run(torch, x, h0, c0=None):
        torch.manual_seed(0)
        m = getattr(torch.nn, kind)(3, 5, num_layers=2, bidirectional=True, batch_first=True)
        if kind == "LSTM":
            out, (h, c) = m(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
            res = {"out": out, "h": h, "c": c}
        else:
            out, h = m(torch.tensor(x), torch.tensor(h0))
            res = {"out": out, "h": h}
        res.update({"param:" + k: v for k, v in m.named_parameters()})
        return res
    return run


def _lstm_proj(torch, x):
    torch.manual_seed(0)
    m = torch.nn.LSTM(3, 5, proj_size=2, batch_first=True)
    out, (h, c) = m(torch.tensor(x))
    res = {"out": out, "h": h, "c": c}
    res.update({"param:" + k: v for k, v in m.named_parameters()})
    return res


CASES = {"conv": _conv, "norm": _norm, "lstm": _rnn("LSTM"), "gru": _rnn("GRU"), "lstm_proj": _lstm_proj}


def load():
    """{case: {name: array}} with the inputs and torch's results."""
    out = {}
    with np.load(REF) as z:
        for key in z.files:
            case, name = key.split(".", 1)
            out.setdefault(case, {})[name] = z[key]
    return out


if __name__ == "__main__":  # regenerate (needs torch)
    import torch
    arrays = {}
    for case, fn in CASES.items():
        for name, a in INPUTS[case].items():
            arrays[f"{case}.input:{name}"] = a
        for name, v in fn(torch, **INPUTS[case]).items():
            arrays[f"{case}.{name}"] = v.detach().numpy()
    np.savez_compressed(REF, **arrays)
    print(f"{len(arrays)} arrays of torch {torch.__version__} written to {REF}")
