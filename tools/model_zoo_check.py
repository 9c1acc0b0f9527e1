"""Build real model-zoo networks in Paddle and in ddg with the same weights and compare them.

    python tools/model_zoo_check.py --paddle-python /path/to/python-with-paddle \\
        --paddleclas /path/to/PaddleClas[.git] --paddleseg /path/to/PaddleSeg[.git]

Each model file is taken as published (read with ``git show HEAD:<path>`` from a clone or
bare mirror), with only its imports changed: ``paddle`` becomes ``ddg`` for the ddg copy,
and the repository's own helpers that a backbone does not need to compute (pretrained
weight loading, loggers) become inert stubs; the helper modules a backbone subclasses
(PaddleClas's ``theseus_layer``, PaddleSeg's ``layers``, ``backbones``, ``param_init``,
``manager``) are kept. Paddle builds each model, gets random weights (running variances
positive), runs forward in eval mode on a fixed input and backward of a fixed random
contraction of the output; ddg builds the same model, loads Paddle's state_dict (every key
must match), and its output and every gradient are compared.

A gradient is compared relative to the largest gradient of the model: attention layers
have parameters whose true gradient is zero (a bias added to every key before a softmax),
where both frameworks give rounding noise of about 1e-10.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

CLAS = [("ppcls/arch/backbone/model_zoo/" + f, fn, size) for f, fn, size in [
    ("convnext.py", "ConvNeXt_tiny", 64), ("cspnet.py", "CSPDarkNet53", 64), ("densenet.py", "DenseNet121", 64),
    ("dla.py", "DLA34", 64), ("efficientnet.py", "EfficientNetB0", 64), ("ghostnet.py", "GhostNet_x0_5", 64),
    ("hardnet.py", "HarDNet39_ds", 64), ("regnet.py", "RegNetX_200MF", 64), ("repvgg.py", "RepVGG_A0", 64),
    ("res2net.py", "Res2Net50_26w_4s", 64), ("rexnet.py", "ReXNet_1_0", 64),
    ("shufflenet_v2.py", "ShuffleNetV2_x0_25", 64), ("vision_transformer.py", "ViT_small_patch16_224", 224),
    ("mixnet.py", "MixNet_S", 224)]] + [("ppcls/arch/backbone/legendary_models/" + f, fn, size) for f, fn, size in [
        ("hrnet.py", "HRNet_W18_C", 64), ("swin_transformer.py", "SwinTransformer_tiny_patch4_window7_224", 224),
        ("mobilenet_v3.py", "MobileNetV3_small_x0_35", 64), ("esnet.py", "ESNet_x0_25", 64),
        ("pp_lcnet.py", "PPLCNet_x0_25", 64)]]
CLAS_HELPERS = ["ppcls/arch/backbone/base/theseus_layer.py",
                "ppcls/arch/backbone/legendary_models/custom_devices_layers.py",
                "ppcls/arch/backbone/model_zoo/vision_transformer.py"]
SEG = [("unet", "m.UNet(num_classes=3)", None), ("bisenet", "m.BiSeNetV2(num_classes=3)", None),
       ("fast_scnn", "m.FastSCNN(num_classes=3)", None), ("enet", "m.ENet(num_classes=3)", None),
       ("espnet", "m.ESPNetV2(num_classes=3)", None),
       ("deeplab", "m.DeepLabV3P(num_classes=3, backbone=bb.ResNet18_vd(output_stride=8))", "resnet_vd"),
       ("danet", "m.DANet(num_classes=3, backbone=bb.ResNet18_vd(output_stride=8), backbone_indices=(2, 3))",
        "resnet_vd"),
       ("ocrnet", "m.OCRNet(num_classes=3, backbone=bb.HRNet_W18(), backbone_indices=(0,))", "hrnet"),
       ("segformer", "m.SegFormer(num_classes=3, backbone=bb.MixVisionTransformer_B0(), embedding_dim=64)",
        "mix_transformer"),
       ("pp_liteseg", "m.PPLiteSeg(num_classes=3, backbone=bb.STDC1())", "stdcnet")]

STUB = ("class _Stub:\n    def __call__(self, *a, **k):\n        return None\n\n"
        "    def __getattr__(self, n):\n        return self\n\n\n_stub = _Stub()\n")
SEG_UTILS = ("class _U:\n    def __getattr__(self, n):\n        return lambda *a, **k: None\n\n\n"
             "utils = _U()\nlogger = _U()\nload_entire_model = load_pretrained_model = lambda *a, **k: None\n")


def git_show(repo, path):
    gd = repo if os.path.isfile(os.path.join(repo, "HEAD")) else os.path.join(repo, ".git")
    return subprocess.run(["git", "--git-dir", gd, "show", "HEAD:" + path], capture_output=True, text=True,
                          check=True).stdout


def to_ddg(s):
    s = re.sub(r"^(\s*)import paddle\.(\S+) as (\w+)", r"\1import ddg.\2 as \3", s, flags=re.M)
    s = re.sub(r"^(\s*)import paddle\s*$", r"\1import ddg as paddle", s, flags=re.M)
    return re.sub(r"^(\s*)from paddle(\.[\w.]+)? import", lambda m: f"{m.group(1)}from ddg{m.group(2) or ''} import",
                  s, flags=re.M)


def clas_local_imports(s):
    """PaddleClas's relative imports: the kept helper modules by name, the rest stubs."""
    def rep(m):
        for mod in ("theseus_layer", "custom_devices_layers", "vision_transformer"):
            if mod in m.group(1):
                return f"from {mod} import {m.group(2)}"
        names = [n for n in re.sub(r"[()\s,]+", " ", m.group(2)).split() if n != "as"]
        return "\n".join(f"{n} = _stub" for n in names)
    s = re.sub(r"^from\s+(\.+[\w.]*|ppcls[\w.]*)\s+import\s+(\([^)]*\)|[^\n]+)", rep, s, flags=re.M)
    lines = s.split("\n")
    last = max([i for i, line in enumerate(lines) if line.startswith("from __future__")], default=-1)
    lines.insert(last + 1, STUB)
    return "\n".join(lines)


RUNNER = r'''
import sys, importlib, numpy as np
root, which, kind, mod, expr, size, bb, out = sys.argv[1:9]
sys.path.insert(0, root)
if which == "ddg":
    sys.path.insert(0, sys.argv[9])
    import ddg as paddle
else:
    import paddle
if kind == "seg":
    m = importlib.import_module("paddleseg.models." + mod)
    ns = {"m": m}
    if bb != "-":
        ns["bb"] = importlib.import_module("paddleseg.models.backbones." + bb)
    model = eval(expr, ns)
else:
    model = getattr(importlib.import_module(mod), expr)(class_num=10)
model.eval()
if which == "paddle":
    rng = np.random.default_rng(0)
    for k, v in model.state_dict().items():
        a = v.numpy()
        if a.dtype.kind == "f":
            a = (rng.random(a.shape) + 0.5) if "variance" in k else rng.standard_normal(a.shape) * 0.1
            v.set_value(a.astype(v.numpy().dtype))
    x = rng.standard_normal([2 if kind == "clas" else 1, 3, int(size), int(size)]).astype("float32")
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
else:
    z = np.load(out)
    sd = {k[3:]: z[k] for k in z.files if k.startswith("sd/")}
    missing, unexpected = model.set_state_dict(sd)
    assert not missing and not unexpected, (missing, unexpected)
    x = z["__x"]
xt = paddle.to_tensor(x)
xt.stop_gradient = False
y = model(xt)
y = y[0] if isinstance(y, (list, tuple)) else y
r = np.random.default_rng(1).standard_normal(y.shape).astype("float32")
(y * paddle.to_tensor(r)).sum().backward()
grads = {"g/" + n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}
grads["g/__input"] = xt.grad.numpy()
if which == "paddle":
    np.savez(out, __x=x, __y=y.numpy(), **{"sd/" + k: v for k, v in sd.items()}, **grads)
else:
    ref = z["__y"]
    err = float(np.abs(y.numpy() - ref).max() / np.abs(ref).max())
    scale = max(float(np.abs(z[k]).max()) for k in z.files if k.startswith("g/"))
    keys = [k for k in z.files if k.startswith("g/")]
    assert sorted(keys) == sorted(grads), "different parameters got gradients"
    gerr = max(float(np.abs(grads[k] - z[k]).max()) for k in keys) / scale
    print(f"forward {err:.1e}  gradients {gerr:.1e}")
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paddle-python", required=True)
    ap.add_argument("--paddleclas")
    ap.add_argument("--paddleseg")
    args = ap.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work = tempfile.mkdtemp(prefix="model_zoo_check_")
    runner = os.path.join(work, "runner.py")
    with open(runner, "w") as f:
        f.write(RUNNER)
    jobs = []
    for fw, conv in (("pd", lambda s: s), ("dg", to_ddg)):
        os.makedirs(os.path.join(work, fw), exist_ok=True)
        if args.paddleclas:
            for path in [c[0] for c in CLAS] + CLAS_HELPERS:
                with open(os.path.join(work, fw, os.path.basename(path)), "w") as f:
                    f.write(conv(clas_local_imports(git_show(args.paddleclas, path))))
        if args.paddleseg:
            gd = args.paddleseg if os.path.isfile(os.path.join(args.paddleseg, "HEAD")) else \
                os.path.join(args.paddleseg, ".git")
            files = subprocess.run(["git", "--git-dir", gd, "ls-tree", "-r", "HEAD", "--name-only"],
                                   capture_output=True, text=True, check=True).stdout.split()
            for path in files:
                if path.endswith(".py") and (path.startswith("paddleseg/models/") and "/losses/" not in path
                                             or path in ("paddleseg/cvlibs/manager.py",
                                                         "paddleseg/cvlibs/param_init.py")):
                    src = "" if path == "paddleseg/models/__init__.py" else git_show(args.paddleseg, path)
                    dst = os.path.join(work, fw, path)
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    with open(dst, "w") as f:
                        f.write(conv(src))
            for pkg, text in (("paddleseg/__init__.py", ""), ("paddleseg/cvlibs/__init__.py",
                                                               "from . import manager, param_init\n"),
                              ("paddleseg/utils/__init__.py", SEG_UTILS), ("paddleseg/utils/utils.py", SEG_UTILS)):
                dst = os.path.join(work, fw, pkg)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                with open(dst, "w") as f:
                    f.write(text)
    if args.paddleclas:
        jobs += [("clas", os.path.basename(p)[:-3], fn, str(size), "-") for p, fn, size in CLAS]
    if args.paddleseg:
        jobs += [("seg", mod, expr, "64", bb or "-") for mod, expr, bb in SEG]
    ok = 0
    for kind, mod, expr, size, bb in jobs:
        out = os.path.join(work, f"{mod}.npz")
        name = f"{mod}.{expr}" if kind == "clas" else mod
        p = subprocess.run([args.paddle_python, runner, os.path.join(work, "pd"), "paddle", kind, mod, expr, size, bb,
                            out], capture_output=True, text=True)
        if p.returncode:
            print(f"{name}: Paddle failed: {p.stderr.strip().splitlines()[-1]}")
            continue
        d = subprocess.run([sys.executable, runner, os.path.join(work, "dg"), "ddg", kind, mod, expr, size, bb, out,
                            here], capture_output=True, text=True)
        if d.returncode:
            print(f"{name}: ddg FAILED: {d.stderr.strip().splitlines()[-1]}")
            continue
        line = d.stdout.strip()
        good = all(float(v) < 1e-3 for v in re.findall(r"(\d\.\de[-+]\d+)", line))
        ok += good
        print(f"{name}: {line}  {'OK' if good else 'DIFF'}")
    print(f"{ok} of {len(jobs)} equal to Paddle (forward and every gradient within 1e-3)")


if __name__ == "__main__":
    main()
