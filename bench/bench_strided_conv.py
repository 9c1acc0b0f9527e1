"""Per-layer race of the strided convolutions of the DCGAN and MobileNet-style benches,
forward + backward (input and weight gradients), ddg vs torch, 1 thread, interleaved rounds;
and of transposed, dilated and grouped convolutions at sizes of their own.

    python bench/bench_strided_conv.py [--rounds 5] [--only conv,convt,dw,convt2,dil,grp] [--ab] [--cpu-time]

``dw``: depthwise 3x3 and 5x5, stride 1 and 2, 16-256 channels on 8-64 px, batch 8-32;
``convt2``: transposed convolutions (4x4 stride 2 padding 1, 3x3 stride 2 padding 1 with
output_padding 1, 2x2 stride 2, 1-D and 3-D) at batch 1-16; ``dil``: 3x3 dilated by 2 and 3 ("same"
padding); ``grp``: 3x3 with 2, 4 and 8 groups.

``--ab`` adds a third contender: ddg with the polyphase paths of ``ddg.tensor.conv_strided``
switched off (the im2col / direct-loop paths they replace), raced in the same rounds.
``--cpu-time``: each contender's fastest round by the thread's CPU time (``time.thread_time``)
instead of the median wall time, for a machine shared with other jobs (time spent
descheduled is not counted; cache and core sharing still are).
"""
import argparse
import time

import _common  # noqa: F401
from _common import race, try_torch

import numpy as np

import ddg
from ddg import nn
from ddg.tensor import conv_strided

B = 16   # batch of the conv and convt cases
CONV = [(3, 16, 64), (16, 32, 32), (32, 64, 16), (64, 128, 8), (3, 32, 32), (32, 64, 16)]   # 4x4 s2 p1
CONVT = [(128, 64, 4), (64, 32, 8), (32, 16, 16), (16, 3, 32)]                              # 4x4 s2 p1
# depthwise (channels, image, kernel, stride, batch), padding k // 2: the MobileNet-style sizes,
# then stride 1 and 5x5 kernels (MobileNetV3 / EfficientNet) at 16-256 channels on 8-64 px
DW = [(32, 64, 3, 2, 16), (64, 32, 3, 2, 16), (16, 32, 3, 2, 16), (128, 16, 3, 2, 16),
      (256, 16, 3, 2, 8), (96, 32, 3, 2, 32), (144, 16, 3, 2, 16), (256, 8, 3, 1, 16), (128, 16, 3, 1, 16),
      (64, 8, 3, 1, 32), (192, 8, 3, 1, 16), (32, 64, 3, 1, 8), (32, 32, 5, 2, 16), (64, 16, 5, 1, 16),
      (128, 8, 5, 1, 16), (240, 16, 5, 2, 8), (16, 64, 5, 1, 8),
      # many channels on tiny planes (held-out sizes): 8x8 inputs at stride 1 and 2
      (128, 8, 3, 1, 16), (160, 8, 3, 1, 16), (128, 8, 3, 2, 16), (192, 8, 3, 2, 16), (256, 8, 3, 2, 16)]
# (dims, batch, in, out, size, kernel, stride, padding, output_padding)
CONVT2 = [(2, 16, 32, 16, 16, 4, 2, 1, 0), (2, 16, 64, 32, 16, 4, 2, 1, 0), (2, 8, 128, 64, 16, 4, 2, 1, 0),
          (2, 4, 64, 64, 32, 4, 2, 1, 0), (2, 2, 128, 128, 56, 4, 2, 1, 0), (2, 16, 256, 128, 8, 4, 2, 1, 0),
          (2, 16, 64, 32, 8, 3, 2, 1, 1), (2, 4, 128, 64, 16, 3, 2, 1, 1), (2, 8, 16, 16, 32, 3, 2, 1, 1),
          (1, 8, 64, 32, 256, 4, 2, 1, 0), (3, 2, 16, 16, 16, 4, 2, 1, 0), (3, 2, 32, 16, 8, 4, 2, 1, 0),
          (2, 4, 64, 64, 32, 3, 2, 1, 1), (2, 16, 8, 8, 32, 3, 2, 1, 1), (2, 16, 32, 32, 16, 2, 2, 0, 0),
          (2, 8, 128, 64, 16, 2, 2, 0, 0), (3, 1, 32, 32, 10, 4, 2, 1, 0)]
# (batch, channels, size, dilation), 3x3, padding = dilation
DIL = [(8, 16, 16, 2), (16, 16, 16, 2), (4, 64, 16, 2), (2, 16, 32, 2), (4, 128, 16, 2), (8, 32, 32, 3),
       (4, 64, 32, 3)]
# (batch, channels, size, groups), 3x3 padding 1
GRP = [(4, 64, 32, 4), (2, 128, 56, 4), (16, 64, 16, 4), (8, 128, 32, 2), (4, 256, 16, 8), (8, 16, 16, 2)]


def cpu_race(fns, steps, rounds, warmup=3):
    """Like ``_common.race`` (alternating rounds), but each contender's fastest round by
    the thread's CPU time."""
    for f in fns.values():
        for _ in range(warmup):
            f()
    best = {k: float("inf") for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.thread_time()
            for _ in range(steps):
                f()
            best[k] = min(best[k], (time.thread_time() - t) / steps)
    return {k: (v,) for k, v in best.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="conv,convt,dw,convt2,dil,grp")
    ap.add_argument("--round-time", type=float, default=0.15)
    ap.add_argument("--ab", action="store_true", help="also race ddg without the polyphase paths")
    ap.add_argument("--cpu-time", "--cpu", dest="cpu_time", action="store_true",
                    help="fastest round by thread CPU time")
    a = ap.parse_args()
    torch = try_torch()
    only = a.only.split(",")
    cases = []
    if "conv" in only:
        cases += [("conv4x4s2 %d->%d @%d" % c, c, "conv") for c in CONV]
    if "convt" in only:
        cases += [("convT4x4s2 %d->%d @%d" % c, c, "convt") for c in CONVT]
    if "dw" in only:
        cases += [("dw%dx%ds%d %d @%d b%d" % (c[2], c[2], c[3], c[0], c[1], c[4]), c, "dw") for c in DW]
    if "convt2" in only:
        cases += [("convT%dd k%d s%d op%d b%d %d->%d @%d" % (c[0], c[5], c[6], c[8], c[1], c[2], c[3], c[4]), c,
                   "convt2") for c in CONVT2]
    if "dil" in only:
        cases += [("dil%d b%d %d @%d" % (c[3], c[0], c[1], c[2]), c, "dil") for c in DIL]
    if "grp" in only:
        cases += [("groups%d b%d %d @%d" % (c[3], c[0], c[1], c[2]), c, "grp") for c in GRP]
    for name, c, kind in cases:
        rng = np.random.default_rng(0)
        batch = B
        if kind == "convt2":
            dims, batch, ci, co, hw, k, st, pd, op = c
            dl = getattr(nn, f"Conv{dims}DTranspose")(ci, co, k, st, pd, output_padding=op)
            tl = getattr(torch.nn, f"ConvTranspose{dims}d")(ci, co, k, st, pd, output_padding=op) if torch else None
            spatial = (hw,) * dims
        elif kind in ("dil", "grp"):
            batch, ci, hw, v = c
            dl = nn.Conv2D(ci, ci, 3, 1, v if kind == "dil" else 1, dilation=v if kind == "dil" else 1,
                           groups=v if kind == "grp" else 1)
            tl = torch.nn.Conv2d(ci, ci, 3, 1, v if kind == "dil" else 1, dilation=v if kind == "dil" else 1,
                                 groups=v if kind == "grp" else 1) if torch else None
            spatial = (hw, hw)
        elif kind == "dw":
            ci, hw, k, s, batch = c
            co = ci
            dl = nn.Conv2D(ci, ci, k, s, k // 2, groups=ci)
            tl = torch.nn.Conv2d(ci, ci, k, s, k // 2, groups=ci) if torch else None
        elif kind == "conv":
            ci, co, hw = c
            dl = nn.Conv2D(ci, co, 4, 2, 1)
            tl = torch.nn.Conv2d(ci, co, 4, 2, 1) if torch else None
        else:
            ci, co, hw = c
            dl = nn.Conv2DTranspose(ci, co, 4, 2, 1)
            tl = torch.nn.ConvTranspose2d(ci, co, 4, 2, 1) if torch else None
        if kind not in ("convt2", "dil", "grp"):
            spatial = (hw, hw)
        xn = rng.standard_normal((batch, ci) + spatial).astype(np.float32)
        xd = ddg.to_tensor(xn, stop_gradient=False)
        yshape = dl(xd).shape
        gn = rng.standard_normal(yshape).astype(np.float32)
        gd = ddg.to_tensor(gn)

        def fd():
            y = dl(xd)
            y.backward(gd)
            xd.clear_gradient()
        fns = {"ddg": fd}
        if a.ab:
            use, dense = conv_strided.usable, conv_strided.dense_usable

            def fd_old():
                conv_strided.usable = conv_strided.dense_usable = lambda *args: False
                try:
                    fd()
                finally:
                    conv_strided.usable, conv_strided.dense_usable = use, dense
            fns["ddg_old"] = fd_old
        if torch:
            xt = torch.tensor(xn, requires_grad=True)
            gt = torch.tensor(gn)

            def ft():
                y = tl(xt)
                y.backward(gt)
                xt.grad = None
            fns["torch"] = ft
        t = time.perf_counter()
        fd()
        steps = max(1, int(a.round_time / max(time.perf_counter() - t, 1e-5)))
        r = cpu_race(fns, steps, a.rounds) if a.cpu_time else race(fns, steps, a.rounds)
        line = f"{name:28s} ddg {r['ddg'][0] * 1e3:7.3f} ms"
        if torch:
            line += f"  torch {r['torch'][0] * 1e3:7.3f} ms  ratio {r['ddg'][0] / r['torch'][0]:.2f}"
            if a.ab:
                line += f"  without polyphase {r['ddg_old'][0] * 1e3:7.3f} ms  ratio {r['ddg_old'][0] / r['torch'][0]:.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
