"""Every public callable ddg exports in the Paddle-named modules exists in Paddle with a
compatible signature.

``paddle_signatures.json`` was generated once from the real Paddle 3.3.1 (CPU) with
``signature_table(paddle)`` below, by ``PYTHONPATH=. <python with paddle> tests/test_paddle_signatures.py``
(rerun it after exporting a new name; CI has no Paddle): for each public
callable of ``paddle``, ``paddle.nn``, ``paddle.nn.functional``, ``paddle.optimizer``,
``paddle.optimizer.lr``, ``paddle.nn.initializer``, ``paddle.io`` and ``paddle.linalg``, and each
public method of ``paddle.Tensor`` (without its first parameter), that ddg also exports, its parameters as ``[name, default]`` (``"<required>"`` for none,
``repr`` for defaults JSON cannot hold; a class's are those of ``__init__``).

"Compatible" means what a Paddle program relies on:
* the parameters both have come in the same order, with the same defaults;
* a parameter ddg has sits at the same position as in Paddle (so positional calls mean
  the same), except ``name`` (never passed positionally).
ddg may lack trailing parameters and may add its own after Paddle's (``place``,
``device``, the PyTorch spellings of the two-layer tutorial).

``KNOWN`` lists the differences still open (mostly parameters Paddle 3 inserted in the
middle of 2.6 signatures: ``out``, ``inplace``, ``bias``...), each failing check by name;
the test fails when one is fixed, so that the list only shrinks.
"""
import importlib
import inspect
import json
import os

try:
    import pytest
except ImportError:  # regenerating the table under a Python that has Paddle but no pytest
    pytest = None

MODULES = ["", ".nn", ".nn.functional", ".optimizer", ".optimizer.lr", ".nn.initializer", ".io", ".linalg", ".fft",
           ".distribution", ".profiler", ".text", ".text.datasets"]

# ddg-only public names, each with its reason
DDG_ONLY = {
    ".:Place": "ddg's place class (Paddle has CPUPlace/CUDAPlace, which ddg exports too)",
    ".:detach": "PyTorch spelling (the two-layer tutorial)",
    ".io:default_collate_fn": "Paddle keeps it in paddle.io.dataloader.collate",
    ".io:default_convert_fn": "Paddle keeps it in paddle.io.dataloader.collate",
    ".io:load": "ddg.io holds the serialization module (ddg.load is the Paddle name)",
    ".io:save": "ddg.io holds the serialization module (ddg.save is the Paddle name)",
    ".nn.initializer:Tensor": "imported name (TODO: make private)",
    ".nn.initializer:with_no_grad_set": "imported helper (TODO: make private)",
    ".nn:ParamAttr": "Paddle has paddle.ParamAttr; ddg exports it in nn too",
    ".nn.functional:Tensor": "imported name (TODO: make private)",
    ".Tensor:erf_": "Paddle 2.6 has paddle.erf_; Paddle 3.3.1's Tensor has no such method",
    ".Tensor:expm1_": "Paddle 2.6 has paddle.expm1_; Paddle 3.3.1's Tensor has no such method",
    ".Tensor:register_grad_ready_hook": "ddg's engine contract for DataParallel (see README)",
    ".Tensor:relu": "PyTorch spelling (x.relu())",
}

# open differences: name -> the checks that fail (see the module docstring)
KNOWN = {
    ".:arange": {"order", "position"},
    ".:set_grad_enabled": {"default mode"},
    ".nn:Conv1D": {"position"},
    ".nn:Conv2D": {"position"},
    ".nn:Conv3D": {"position"},
    ".nn:Dropout": {"position"},
    ".nn:GroupNorm": {"position"},
    ".nn:LayerNorm": {"position"},
    ".nn.functional:dropout": {"position"},
    ".optimizer:AdamW": {"position"},
    ".optimizer:Optimizer": {"default learning_rate"},
    ".nn.initializer:MSRAInitializer": {"position"},
    ".nn.initializer:XavierInitializer": {"position"},
    ".io:DataLoader": {"position"},
}


def _params(obj):
    try:
        if inspect.isclass(obj):
            return list(inspect.signature(obj.__init__).parameters.values())[1:]
        return list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return None


def _entry(p):
    if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
        return [("*" if p.kind == p.VAR_POSITIONAL else "**") + p.name, None]
    d = p.default
    if d is inspect.Parameter.empty:
        return [p.name, "<required>"]
    try:
        d = json.loads(json.dumps(d))  # tuples become lists, as in the stored table
    except TypeError:
        d = repr(d)
    return [p.name, d]


def signature_table(root):
    """{"module:name": [[param, default], ...] or None} for the public callables of ``root``,
    and ``".Tensor:name"`` for the Tensor's public methods (their first parameter, the tensor
    itself, left out)."""
    out = {}
    for n in dir(root.Tensor):
        o = getattr(root.Tensor, n, None)
        if n.startswith("_") or not callable(o) or inspect.isclass(o):
            continue
        try:
            ps = list(inspect.signature(o).parameters.values())
        except (TypeError, ValueError):
            ps = None
        if ps and ps[0].kind in (ps[0].POSITIONAL_ONLY, ps[0].POSITIONAL_OR_KEYWORD):
            ps = ps[1:]
        out[".Tensor:" + n] = None if ps is None else [_entry(p) for p in ps]
    for m in MODULES:
        try:
            mod = importlib.import_module(root.__name__ + m)
        except ImportError:
            continue
        for n in dir(mod):
            o = getattr(mod, n)
            if n.startswith("_") or not callable(o) or inspect.ismodule(o):
                continue
            ps = _params(o)
            out[(m or ".") + ":" + n] = None if ps is None else [_entry(p) for p in ps]
    return out


def _problems(ours, theirs):
    """The failing checks, as a set of labels."""
    if ours is None or theirs is None:
        return set()
    if any(n.startswith("*") for n, _ in theirs):  # Paddle takes *args/**kwargs: nothing to compare
        return set()
    a = [n for n, _ in ours if not n.startswith("*")]
    b = [n for n, _ in theirs]
    ad, bd = dict(ours), dict(theirs)
    found = set()
    if [n for n in a if n in bd] != [n for n in b if n in ad]:
        found.add("order")
    for n in a:
        if n in bd and ad[n] != bd[n] and not (n == "requires_grad" and ad[n] is None and bd[n] is False):
            found.add(f"default {n}")
    for i, n in enumerate(a):
        if n != "name" and n in bd and i < len(b) and b[i] != n:
            found.add("position")
            break
    return found


def _fixture(fn):
    return pytest.fixture(scope="module")(fn) if pytest else fn


@_fixture
def tables():
    import ddg
    with open(os.path.join(os.path.dirname(__file__), "paddle_signatures.json")) as f:
        paddle = json.load(f)["signatures"]
    return signature_table(ddg), paddle


def test_every_exported_name_exists_in_paddle(tables):
    ours, paddle = tables
    extra = sorted(k for k in ours if k not in paddle and k not in DDG_ONLY)
    assert not extra, f"ddg exports names Paddle 3.3.1 does not have (add them to the table, or DDG_ONLY): {extra}"


def test_signatures_match_paddle(tables):
    ours, paddle = tables
    wrong, fixed = {}, []
    for k, sig in ours.items():
        if k not in paddle:
            continue
        found = _problems(sig, paddle[k])
        if found != KNOWN.get(k, set()):
            if k in KNOWN and not found:
                fixed.append(k)
            else:
                wrong[k] = (sorted(found), sig, paddle[k])
    assert not wrong, "signatures that differ from Paddle's:\n" + "\n".join(
        f"{k}: {p}\n  ddg:    {s}\n  paddle: {t}" for k, (p, s, t) in wrong.items())
    assert not fixed, f"these now match Paddle: remove them from KNOWN: {fixed}"


def test_the_checker_catches_a_swapped_argument():
    theirs = [["x", "<required>"], ["dilation", 1], ["groups", 1], ["name", None]]
    assert _problems([["x", "<required>"], ["groups", 1], ["dilation", 1]], theirs) == {"order", "position"}
    assert _problems([["x", "<required>"], ["dilation", 2]], theirs) == {"default dilation"}
    assert _problems([["x", "<required>"], ["dilation", 1], ["groups", 1], ["place", None]], theirs) == set()


if __name__ == "__main__":  # regenerate the table (needs Paddle; see the module docstring)
    import ddg
    import paddle
    ours, theirs = signature_table(ddg), signature_table(paddle)
    table = {k: theirs[k] for k in sorted(ours) if k in theirs}
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "paddle_signatures.json"), "w") as f:
        json.dump({"generated_from": f"paddlepaddle {paddle.__version__}", "signatures": table,
                   "not_in_paddle": sorted(k for k in ours if k not in theirs)}, f, indent=0, sort_keys=True)
    print(f"{len(table)} signatures written")
