"""The package's import graph has no cycle.

Walks every module of ``ddg/`` with ``ast`` and collects the modules it imports from
inside ``ddg``, at module level AND inside functions and methods (a lazy import that
closes a circle is still a circle: it hides a layering error rather than fixing it).
Then it looks for strongly connected components of more than one module, and for
modules importing themselves, and fails listing each cycle.

An edge goes to the module an import statement names: ``from .ops import linalg``
goes to ``ddg.autograd.ops.linalg`` when that is a module, and ``from .env import
get_rank`` goes to ``ddg.parallel.env``; ``importlib.import_module`` counts too (the
top-level package's lazy attributes). The implicit import of parent packages
(``ddg/__init__.py`` runs before any ``ddg.x``) is not an edge, or everything would
sit in one circle with the top-level package.

``python tests/test_layering.py`` prints every cycle.
"""
import ast
import functools
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ddg")

_RELATIVE = re.compile(r"^\.+[A-Za-z_][A-Za-z_0-9]*(\.[A-Za-z_][A-Za-z_0-9]*)*$")  # ".nn", "..io.x"


def _module_name(path):
    rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _modules():
    mods = {}
    for dirpath, _dirs, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                mods[_module_name(path)] = path
    return mods


def _absolute(target, current, is_pkg):
    """A module name written in module ``current`` (``".x"``, ``"..x.y"``, ``"ddg.x"``)
    made absolute."""
    if not target.startswith("."):
        return target
    level = len(target) - len(target.lstrip("."))
    base = current.split(".")
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[:-(level - 1)]
    rest = target[level:]
    return ".".join(base + ([rest] if rest else []))


def _resolve(mods, current, is_pkg, node):
    """Modules inside ddg that one import statement refers to."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name == "ddg" or a.name.startswith("ddg.")]
    base = _absolute("." * node.level + (node.module or ""), current, is_pkg)
    if base != "ddg" and not base.startswith("ddg."):
        return []
    out = []
    for alias in node.names:  # "from pkg import sub" names the submodule when there is one
        sub = base + "." + alias.name
        is_module = sub in mods or any(m.startswith(sub + ".") for m in mods)
        out.append(sub if is_module else base)
    return out


def import_graph():
    """``{module: set of ddg modules it imports}``, a fresh copy of the one parse of ddg/
    (about 2 s) that every test here reads."""
    return {m: set(ts) for m, ts in _parsed_graph().items()}


@functools.lru_cache(maxsize=1)
def _parsed_graph():
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        is_pkg = path.endswith("__init__.py")
        edges = set()
        dynamic = False  # import_module(<not a literal>): then every ".x" literal may name a module
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(t for t in _resolve(mods, name, is_pkg, node) if t in mods)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "import_module" and node.args
                  and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                # importlib.import_module(".x", __name__) or ("ddg.x"): the lazy attributes of
                # ddg/__init__.py
                target = _absolute(node.args[0].value, name, is_pkg)
                if target in mods:
                    edges.add(target)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "import_module"):
                dynamic = True
        if dynamic:  # e.g. ddg/__init__.py: {"nn": ".nn", ...} looked up in __getattr__
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and _RELATIVE.match(node.value):
                    target = _absolute(node.value, name, is_pkg)
                    if target in mods:
                        edges.add(target)
        graph[name] = edges
    return graph


def _cycles(graph):
    """Strongly connected components with a cycle (Tarjan, iterative)."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1 or v in graph[v]:
                        comps.append(sorted(comp))
    return comps


def _one_cycle(graph, comp):
    """A concrete circle through the component, for the failure message."""
    members = set(comp)
    start = comp[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in graph[path[-1]] if w in members)
        back = [w for w in nxt if w in seen]
        fresh = [w for w in nxt if w not in seen]
        if start in nxt or (back and not fresh):
            end = start if start in nxt else back[0]
            return path[path.index(end):] + [end]
        path.append(fresh[0])
        seen.add(fresh[0])


def test_graph_sees_lazy_imports():
    # the walker must find imports inside functions, or the test below proves nothing
    graph = import_graph()
    assert "ddg.tensor.backend" in graph["ddg.tensor.tensor"]
    assert "ddg.tensor.creation" in graph["ddg"]
    # a function-level import: ddg.tensor.creation.from_dlpack imports ddg.utils.dlpack
    assert "ddg.utils.dlpack" in graph["ddg.tensor.creation"]
    # the top-level package's lazy attributes (importlib.import_module on a table of names)
    assert "ddg.nn" in graph["ddg"] and "ddg.parallel.data_parallel" in graph["ddg"]


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["e"]]
    assert _one_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_import_cycles_in_ddg():
    graph = import_graph()
    bad = _cycles(graph)
    msg = "\n".join(" -> ".join(_one_cycle(graph, comp)) + "   (component: " + ", ".join(comp) + ")"
                    for comp in bad)
    assert not bad, "import cycles inside ddg/:\n" + msg


# The only imports between primitive files: pooling and N-d convolution share conv's
# array helpers (padding, layout, grouped products), and where(cond) with one argument is
# nonzero, a logic op.
OPS_EDGES = {("ddg.autograd.ops.pooling", "ddg.autograd.ops.conv"),
             ("ddg.autograd.ops.conv_nd", "ddg.autograd.ops.conv"),
             ("ddg.autograd.ops.elementwise", "ddg.autograd.ops.logic")}


def test_primitive_files_do_not_import_each_other():
    # composites of several op families live in ddg.autograd.composite, not in ops/
    graph = import_graph()
    ops = "ddg.autograd.ops."
    edges = {(m, t) for m, ts in graph.items() if m.startswith(ops) for t in ts if t.startswith(ops)}
    assert edges <= OPS_EDGES, f"imports between primitive files: {sorted(edges - OPS_EDGES)}"


def _reachable(graph, start):
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        for t in graph[m]:
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def test_io_sits_below_parallel():
    # ddg.io (datasets, samplers, the DataLoader) must work without the parallel layer;
    # DistributedBatchSampler lives in ddg.parallel.sampler
    graph = import_graph()
    for mod in graph:
        if mod == "ddg.io" or mod.startswith("ddg.io."):
            up = {m for m in _reachable(graph, mod) if m == "ddg" or m.startswith(("ddg.parallel", "ddg.distributed"))}
            assert not up, f"{mod} imports {sorted(up)}"


if __name__ == "__main__":  # python tests/test_layering.py: print every cycle
    g = import_graph()
    for c in _cycles(g):
        print("CYCLE  " + " -> ".join(_one_cycle(g, c)))
        print("       component:", ", ".join(c))
    sys.exit(1 if _cycles(g) else 0)


def test_ops_files_define_only_functions_and_their_entry_points():
    # ddg/autograd/ops/ holds primitives: every class defined there is a Function
    import importlib
    import inspect
    import pkgutil

    import ddg.autograd.ops as ops
    from ddg.autograd.function import Function
    for info in pkgutil.iter_modules(ops.__path__):
        mod = importlib.import_module(f"ddg.autograd.ops.{info.name}")
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and obj.__module__ == mod.__name__:
                assert issubclass(obj, Function), f"{mod.__name__}.{name} is not a Function"
