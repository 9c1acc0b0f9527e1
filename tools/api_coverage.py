"""How much of Paddle 2.6's core public API ddg has.

Two modes:

* ``<python with paddle> tools/api_coverage.py --generate`` writes
  ``tests/paddle_api_names.json``: Paddle's public names per module (a module's
  ``__all__``; for ``paddle.Tensor`` its public attributes). It was generated once from
  PaddlePaddle 2.6.2 (CPU); CI has no Paddle and reads the stored table.
* ``python tools/api_coverage.py [--missing] [--module paddle.nn]`` reports, per module,
  how many of Paddle's names ddg has (``hasattr`` on ddg's module of the same name),
  leaving out the groups in ``EXCLUDED`` below, each with its reason.

``tests/test_api_coverage.py`` fails when a module's coverage drops below ``FLOORS``.
"""
import argparse
import fnmatch
import importlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, os.pardir, "tests", "paddle_api_names.json")

MODULES = ["paddle", "paddle.Tensor", "paddle.nn", "paddle.nn.functional", "paddle.optimizer",
           "paddle.optimizer.lr", "paddle.nn.initializer", "paddle.jit"]
# Namespaces added later, their names taken from the Paddle the table notes under
# "module_sources" (``--generate --module paddle.fft ...`` adds or refreshes them alone)
EXTRA_MODULES = ["paddle.text", "paddle.fft", "paddle.distribution", "paddle.profiler"]
ALL_MODULES = MODULES + EXTRA_MODULES

# Groups of Paddle names that cannot apply to ddg, each with its reason. Patterns are
# fnmatch patterns matched against "module:name".
EXCLUDED = {
    "pinned-host memory places (ddg stages GPU data through its own pinned buffers)": [
        "paddle:CUDAPinnedPlace",
    ],
    "static-graph programs and the dygraph-to-static source translator (ddg is eager; "
    "jit.to_static records a trace instead of translating Python source)": [
        "paddle.jit:TranslatedLayer", "paddle.jit:set_code_level",
        "paddle.jit:set_verbosity", "paddle.jit:not_to_static",
        "paddle.Tensor:block",
    ],
    "auto-parallel (sharded) tensors, SelectedRows and string/vocab tensors of Paddle's C++ core "
    "(ddg tensors are dense arrays; data parallelism is ddg.DataParallel)": [
        "paddle.Tensor:is_dist", "paddle.Tensor:process_mesh", "paddle.Tensor:placements",
        "paddle.Tensor:dist_attr", "paddle.Tensor:value", "paddle.Tensor:get_map_tensor",
        "paddle.Tensor:get_selected_rows", "paddle.Tensor:is_selected_rows", "paddle.Tensor:get_tensor",
        "paddle.Tensor:is_dense", "paddle.Tensor:set_string_list", "paddle.Tensor:set_vocab",
        "paddle.Tensor:rows", "paddle.Tensor:layout",
    ],
    "stride views of Paddle's C++ core (ddg has no strided-view kernels: element strides and "
    "storage offsets do not exist)": [
        "paddle.Tensor:strides", "paddle.Tensor:offset", "paddle.Tensor:get_strides",
    ],
    "sparse tensors (ddg tensors are dense)": [
        "paddle.Tensor:is_sparse*", "paddle.Tensor:to_sparse_*", "paddle.Tensor:to_dense",
        "paddle.Tensor:coalesce", "paddle.Tensor:indices", "paddle.Tensor:values",
        "paddle.Tensor:crows", "paddle.Tensor:cols", "paddle.Tensor:nnz",
    ],
    "the legacy reader API and C++-side helpers Paddle 2.x keeps for static graphs": [
        "paddle:batch", "paddle:check_shape", "paddle:LazyGuard",
    ],
}


def excluded(module, name):
    key = f"{module}:{name}"
    for reason, pats in EXCLUDED.items():
        if any(fnmatch.fnmatchcase(key, p) for p in pats):
            return reason
    return None


def paddle_names(paddle, modules=MODULES):
    out = {}
    for m in modules:
        if m == "paddle.Tensor":
            out[m] = sorted(n for n in dir(paddle.Tensor) if not n.startswith("_"))
            continue
        mod = importlib.import_module(m)
        names = getattr(mod, "__all__", None)
        if names is None:
            names = [n for n in dir(mod) if not n.startswith("_")]
        out[m] = sorted(set(names))
    return out


def load_table(path=TABLE):
    with open(path) as f:
        return json.load(f)


def ddg_module(m):
    import ddg
    if m == "paddle.Tensor":
        return ddg.Tensor
    return importlib.import_module("ddg" + m[len("paddle"):])


def coverage(table=None):
    """{module: (have, wanted, missing, excluded)} from the stored name table."""
    table = table or load_table()
    res = {}
    for m in ALL_MODULES:
        if m not in table["modules"]:
            continue
        try:
            ours = ddg_module(m)
        except ImportError:
            ours = None
        wanted, have, missing, skip = [], [], [], []
        for n in table["modules"][m]:
            if excluded(m, n):
                skip.append(n)
                continue
            wanted.append(n)
            (have if ours is not None and hasattr(ours, n) else missing).append(n)
        res[m] = (have, wanted, missing, skip)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generate", action="store_true", help="write the name table (needs Paddle)")
    ap.add_argument("--missing", action="store_true", help="list the names ddg lacks")
    ap.add_argument("--excluded", action="store_true", help="list the names left out, by reason")
    ap.add_argument("--module", action="append", help="only these modules")
    a = ap.parse_args(argv)
    if a.generate:
        import paddle
        if a.module:  # add or refresh these modules only, noting where their names came from
            table = load_table()
            names = paddle_names(paddle, a.module)
            table["modules"].update(names)
            table.setdefault("module_sources", {}).update({m: f"paddlepaddle {paddle.__version__}" for m in names})
        else:
            names = paddle_names(paddle)
            table = {"generated_from": f"paddlepaddle {paddle.__version__}", "modules": names}
        with open(TABLE, "w") as f:
            json.dump(table, f, indent=0, sort_keys=True)
        print(f"wrote {TABLE}: " + ", ".join(f"{m} {len(v)}" for m, v in names.items()))
        return 0
    sys.path.insert(0, os.path.join(HERE, os.pardir))
    table = load_table()
    res = coverage(table)
    print(f"Paddle names from {table['generated_from']}"
          + "".join(f"; {m} from {v}" for m, v in sorted(table.get("module_sources", {}).items())))
    print(f"{'module':24s} {'ddg has':>8s} {'of':>5s} {'coverage':>9s} {'left out':>9s}")
    for m, (have, wanted, missing, skip) in res.items():
        if a.module and m not in a.module:
            continue
        print(f"{m:24s} {len(have):8d} {len(wanted):5d} {100 * len(have) / max(len(wanted), 1):8.1f}% {len(skip):9d}")
        if a.missing and missing:
            print("   missing: " + " ".join(missing))
    if a.excluded:
        for reason in EXCLUDED:
            got = [f"{m}:{n}" for m in res for n in res[m][3] if excluded(m, n) == reason]
            print(f"\n{reason}:\n   " + " ".join(got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
