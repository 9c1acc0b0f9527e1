"""Does data parallelism give what one process gives, on real backbones?

    ddgrun -n 2 python tools/dp_equivalence.py [--models resnet18 densenet121 ...]
        [--dtype float64] [--steps 3] [--batch 12] [--size 32]

For every model of ``ddg.vision.models`` named, N ranks train ``--steps`` Momentum steps
on their shards of a fixed global batch, and rank 0 trains one process on the whole
batch; printed per model and variant:

* ``sync``: the net with ``SyncBatchNorm.convert_sync_batchnorm`` (or a net without batch
  norm) against the unconverted net on the whole batch;
* ``plain``: the net with its batch norms as they are, against one process that runs each
  shard from the same statistics, averages the gradients and keeps shard 0's statistics
  (what DataParallel promises for plain batch norm);

the difference relative to the whole state_dict's norm ("overall"), and the largest
difference relative to each state entry's scale (at least 1e-3, "worst entry"); the same for the reference against itself with the samples of each
shard in another order (the model's own reordering noise, the floor of what data
parallelism can reach); and whether every rank's state_dict is bit-identical. Dropout
layers get p=0 (the ranks draw other masks than one process).
"""
import argparse
import time

import numpy as np

import ddg
import ddg.nn.functional as F
from ddg import nn
from ddg.parallel import comm as C


def build(name, classes, sync):
    ddg.seed(7)
    model = getattr(ddg.vision.models, name)(num_classes=classes)
    for m in model.sublayers():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return nn.SyncBatchNorm.convert_sync_batchnorm(model) if sync else model


def has_batch_norm(model):
    return any(isinstance(m, (nn.BatchNorm, nn.BatchNorm1D, nn.BatchNorm2D, nn.BatchNorm3D))
               for m in model.sublayers())


def state(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def overall(got, ref):
    """|got - ref| / |ref| over the whole state_dict as one vector (2-norms)."""
    d = sum(float(np.square(got[k].astype(np.float64) - ref[k]).sum()) for k in ref)
    return (d / sum(float(np.square(ref[k]).sum()) for k in ref)) ** 0.5


def worst(got, ref):
    return max(float(np.abs(got[k].astype(np.float64) - ref[k]).max() / max(np.abs(ref[k]).max(), 1e-3))
               for k in ref)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["resnet18", "mobilenet_v2", "shufflenet_v2_x0_25",
                                                    "densenet121", "squeezenet1_1", "mobilenet_v3_small"])
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--classes", type=int, default=5)
    args = ap.parse_args()
    ddg.distributed.init_parallel_env()
    comm = C.get_world_communicator()
    ddg.set_default_dtype(args.dtype)
    rng = np.random.default_rng(11)
    xs = rng.standard_normal((args.steps, args.batch, 3, args.size, args.size)).astype(args.dtype)
    ys = rng.integers(0, args.classes, size=(args.steps, args.batch))

    def shard(r):
        return slice(r * args.batch // comm.size, (r + 1) * args.batch // comm.size)

    def loss_of(model, x, y):
        return F.cross_entropy(model(ddg.to_tensor(x)), ddg.to_tensor(y))

    def opt_for(model):
        return ddg.optimizer.Momentum(learning_rate=0.05, momentum=0.9, parameters=model.parameters())

    def reference(name, per_shard, xs, ys):
        model = build(name, args.classes, False)
        opt = opt_for(model)
        stats = [p for p in model.parameters() if p.stop_gradient]
        for s in range(args.steps):
            if not per_shard:
                loss_of(model, xs[s], ys[s]).backward()
            else:
                start = [p.numpy().copy() for p in stats]
                kept = None
                for r in range(comm.size):
                    for p, v in zip(stats, start):
                        p.set_value(v)
                    sl = shard(r)
                    (loss_of(model, xs[s, sl], ys[s, sl]) * ((sl.stop - sl.start) / args.batch)).backward()
                    if r == 0:
                        kept = [p.numpy().copy() for p in stats]
                for p, v in zip(stats, kept):
                    p.set_value(v)
            opt.step()
            opt.clear_grad()
        return state(model)

    order = np.concatenate([np.arange(shard(r).start, shard(r).stop)[::-1] for r in range(comm.size)])
    if comm.rank == 0:
        print(f"{comm.size} ranks, {args.dtype}, {args.steps} Momentum steps, global batch {args.batch}, "
              f"{args.size}x{args.size}")
    for name in args.models:
        bn = has_batch_norm(build(name, args.classes, False))
        for variant in (["sync", "plain"] if bn else ["sync"]):
            t = time.perf_counter()
            dp = ddg.DataParallel(build(name, args.classes, variant == "sync"))
            opt = opt_for(dp)
            for s in range(args.steps):
                loss_of(dp, xs[s, shard(comm.rank)], ys[s, shard(comm.rank)]).backward()
                opt.step()
                opt.clear_grad()
            got = state(dp)
            blob = b"".join(k.encode() + v.tobytes() for k, v in got.items())
            identical = all(b == blob for b in comm.allgather_object(blob))
            if comm.rank == 0:
                ref = reference(name, variant == "plain", xs, ys)
                again = reference(name, variant == "plain", xs[:, order], ys[:, order])
                label = variant if bn else "no batch norm"
                print(f"{name:20s} {label:13s} overall {overall(got, ref):.1e} (noise {overall(again, ref):.1e})  "
                      f"worst entry {worst(got, ref):.1e} (noise {worst(again, ref):.1e})  identical on every "
                      f"rank: {identical}  ({time.perf_counter() - t:.0f} s)", flush=True)
            comm.barrier()


if __name__ == "__main__":
    main()
