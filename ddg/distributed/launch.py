"""``python -m ddg.distributed.launch``: Paddle's launcher flags, over ddgrun.

    python -m ddg.distributed.launch --nproc_per_node 2 train.py --lr 0.1
    python -m ddg.distributed.launch --gpus 0,1 train.py
    python -m ddg.distributed.launch --ips 10.0.0.1,10.0.0.2 --nproc_per_node 4 train.py
    python -m ddg.distributed.launch --log_dir logs --nproc_per_node 2 train.py
    python -m ddg.distributed.launch --max_restart 3 --nproc_per_node 2 train.py

``--nproc_per_node`` ranks on each machine of ``--ips`` (default: this one), ``--gpus``
the devices they may use (CUDA_VISIBLE_DEVICES; also the default ``--nproc_per_node``),
``--log_dir`` a folder for each rank's output (``workerlog.<rank>``, stdout and stderr;
the launcher says where they are and shows the end of a failed rank's log). Several
machines take MPICH's mpiexec options (``-hosts``, ``-ppn``); with another MPI, use
ddgrun with its own options. ``--max_restart N`` restarts the job after a failure, up to
N times (ddgrun's ``--max_restarts``; default 0: Paddle's default of 3 applies only with
its ``--elastic_level``, which ddg does not have). The job's exit status is ddgrun's.
"""
import argparse
import glob
import os
import sys

try:
    from ddg_launch import ddgrun       # installed: the launch/ folder is the package ddg_launch
except ImportError:                     # a source checkout on sys.path, not installed
    from launch import ddgrun


def _parser():
    ap = argparse.ArgumentParser(prog="python -m ddg.distributed.launch",
                                 description="Start a ddg training script on several ranks (Paddle's flags).")
    ap.add_argument("--nproc_per_node", "--nproc-per-node", type=int, default=None,
                    help="ranks per machine (default: the number of --gpus, else 1)")
    ap.add_argument("--ips", default="127.0.0.1", help="comma-separated machines (default: this one)")
    ap.add_argument("--gpus", "--devices", dest="gpus", default=None, help="GPUs the ranks may use, e.g. 0,1")
    ap.add_argument("--log_dir", "--log-dir", dest="log_dir", default=None,
                    help="write each rank's output to LOG_DIR/workerlog.<rank>")
    ap.add_argument("--nnodes", type=int, default=None, help="machines (checked against --ips)")
    ap.add_argument("--max_restart", "--max-restart", dest="max_restart", type=int, default=0,
                    help="restart the whole job after a failure, up to this many times (default 0)")
    ap.add_argument("training_script", help="the script (or -m module is not supported here: use ddgrun)")
    ap.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return ap


def build(argv):
    """(ddgrun argument list, environment additions) for Paddle-style ``argv``."""
    args = _parser().parse_args(argv)
    ips = [h.strip() for h in args.ips.split(",") if h.strip()]
    if args.nnodes is not None and args.nnodes != len(ips):
        raise SystemExit(f"ddg.distributed.launch: --nnodes {args.nnodes} but --ips lists {len(ips)} machine(s)")
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()] if args.gpus else []
    per_node = args.nproc_per_node or (len(gpus) if gpus else 1)
    if per_node < 1:
        raise SystemExit(f"ddg.distributed.launch: --nproc_per_node must be >= 1, got {per_node}")
    env = {}
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    if args.log_dir:
        env["DDG_LOG_DIR"] = os.path.abspath(args.log_dir)
    if args.max_restart < 0:
        raise SystemExit(f"ddg.distributed.launch: --max_restart must be >= 0, got {args.max_restart}")
    out = ["--max_restarts", str(args.max_restart)] if args.max_restart else []
    out += ["-n", str(per_node * len(ips))]
    if len(ips) > 1 or ips[0] not in ("127.0.0.1", "localhost"):
        out += ["-hosts", ",".join(ips), "-ppn", str(per_node)]
    return out + [sys.executable, args.training_script] + list(args.training_script_args), env


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ddgrun_args, env = build(argv)
    os.environ.update(env)
    rc = ddgrun.main(ddgrun_args)
    log_dir = env.get("DDG_LOG_DIR")
    if log_dir:
        print(f"ddg.distributed.launch: each rank's output is in {log_dir}/workerlog.<rank>", file=sys.stderr)
        if rc != 0:
            for path in sorted(glob.glob(os.path.join(log_dir, "workerlog.*"))):
                with open(path, errors="replace") as f:
                    tail = f.read()[-3000:]
                if "Traceback" in tail or "Error" in tail:
                    print(f"---- end of {path} ----\n{tail}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
