"""ddg.vision's public names and signatures against Paddle 3.3.1's.

``paddle_vision_signatures.json`` holds, for ``paddle.vision``,
``paddle.vision.transforms``, ``paddle.vision.transforms.functional`` and
``paddle.vision.datasets``, every public name (``__all__``, or for the functional
module every public function) and its parameters; regenerate it with
``PYTHONPATH=. /tmp/pd/bin/python tests/test_vision_signatures.py`` (needs Paddle). The
checks are those of ``test_paddle_signatures.py``, and here every name of Paddle's must
exist in ddg too.
"""
import importlib
import inspect
import json
import os

from test_paddle_signatures import _entry, _params, _problems

MODULES = [".vision", ".vision.transforms", ".vision.transforms.functional", ".vision.datasets"]
TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "paddle_vision_signatures.json")

# deliberate differences, each with its reason
KNOWN = {
    # ddg's MNIST (older than this table) downloads only when asked: without the files it
    # says where to put them; FashionMNIST is its subclass
    ".vision.datasets:MNIST": {"default download"},
    ".vision.datasets:FashionMNIST": {"default download"},
}


def table(root):
    out = {}
    for m in MODULES:
        mod = importlib.import_module(root.__name__ + m)
        names = getattr(mod, "__all__", None) or [n for n in dir(mod) if inspect.isfunction(getattr(mod, n))
                                                   and getattr(mod, n).__module__ == mod.__name__]
        if m == ".vision.transforms.functional" and root.__name__ == "paddle":
            names = [n for n in dir(mod) if not n.startswith("_") and inspect.isfunction(getattr(mod, n))
                     and getattr(mod, n).__module__ == mod.__name__]
        for n in names:
            o = getattr(mod, n)
            if n.startswith("_") or not callable(o) or inspect.ismodule(o):
                continue
            ps = _params(o)
            out[m + ":" + n] = None if ps is None else [_entry(p) for p in ps]
    return out


def test_every_paddle_vision_name_exists_with_its_signature():
    import ddg
    with open(TABLE) as f:
        paddle = json.load(f)["signatures"]
    ours = table(ddg)
    missing = sorted(k for k in paddle if k not in ours)
    assert not missing, "names of Paddle's vision API that ddg lacks: {}".format(missing)
    wrong = {k: (_problems(ours[k], paddle[k]), ours[k], paddle[k]) for k in paddle
             if _problems(ours[k], paddle[k]) != KNOWN.get(k, set())}
    assert not wrong, "signatures that differ from Paddle's:\n" + "\n".join(
        "{}: {}\n  ddg:    {}\n  paddle: {}".format(k, sorted(p), s, t) for k, (p, s, t) in wrong.items())
    assert len(paddle) >= 38 + 8 + 3


def test_paddle_vision_reexports():
    """``paddle.vision`` re-exports the models, datasets and most transforms."""
    import ddg
    with open(TABLE) as f:
        names = json.load(f)["vision_names"]
    missing = sorted(n for n in names if not hasattr(ddg.vision, n) and n not in VISION_LEFT_OUT)
    assert not missing, "ddg.vision lacks {}".format(missing)


# paddle.vision names ddg leaves out, each with its reason
VISION_LEFT_OUT = {
    "ops": "detection operators (nms, roi_align, deform_conv2d, yolo_box...): not implemented",
    "nn": "Paddle's own import of paddle.nn inside paddle.vision, not an API",
    "paddle": "Paddle's own import, not an API",
}


if __name__ == "__main__":  # regenerate (needs Paddle)
    import paddle
    t = table(paddle)
    with open(TABLE, "w") as f:
        json.dump({"generated_from": "paddlepaddle {}".format(paddle.__version__), "signatures": t,
                   "vision_names": sorted(n for n in dir(paddle.vision) if not n.startswith("_"))}, f, indent=0,
                  sort_keys=True)
    print("{} signatures written".format(len(t)))
