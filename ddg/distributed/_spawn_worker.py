"""One rank of :func:`ddg.distributed.spawn`: load the job, call ``func(*args)``.

Usage (spawn writes it): ``python -m ddg.distributed._spawn_worker WORKDIR``.
"""
import json
import os
import pickle
import runpy
import sys
import types


def main(workdir):
    with open(os.path.join(workdir, "job.json")) as f:
        job = json.load(f)
    for p in reversed(job["sys_path"]):
        if p not in sys.path:
            sys.path.insert(0, p)
    if job["main_file"]:
        # the parent's main script, imported without running its __main__ block; pickle
        # looks functions of "__main__" up there
        module = types.ModuleType("__mp_main__")
        module.__dict__.update(runpy.run_path(job["main_file"], run_name="__mp_main__"))
        sys.modules["__mp_main__"] = sys.modules["__main__"] = module
    with open(os.path.join(workdir, "job.pkl"), "rb") as f:
        func, args = pickle.load(f)   # written by this job's parent process
    func(*args)


if __name__ == "__main__":
    main(sys.argv[1])
