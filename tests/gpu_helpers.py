"""Helpers shared by the GPU test modules (test_gpu.py, test_mpi_gpu.py)."""
import traceback


class D2HCounter:
    """Counts cupy's device-to-host paths while active: ``cupy.asnumpy``, ndarray
    ``get``/``item``/``tolist``/``__array__``/``__float__``/``__int__``/``__bool__``/
    ``__index__``/``__complex__``, and MemoryPointer ``copy_to_host``/``copy_to_host_async``.
    Attributes of classes compiled as extension types cannot be replaced; those are
    reported in ``unpatched`` (cupy >= 13 defines ``cupy.ndarray`` as a Python subclass
    of the compiled base, which can be patched)."""

    NDARRAY = ("get", "item", "tolist", "tobytes", "__array__", "__float__", "__int__", "__bool__", "__index__",
               "__complex__")

    def __init__(self, cp):
        self.cp = cp
        self.calls = []
        self.active = False
        self._depth = 0
        self.unpatched = []
        self._undo = []

    def _wrap(self, owner, name):
        orig = getattr(owner, name, None)
        if orig is None:
            return
        counter = self

        def spy(*args, **kwargs):
            if counter.active and counter._depth == 0:   # asnumpy calls get: one copy, counted once
                counter.calls.append((f"{getattr(owner, '__name__', owner)}.{name}",
                                      "".join(traceback.format_stack(limit=8)[:-1])))
            counter._depth += 1
            try:
                return orig(*args, **kwargs)
            finally:
                counter._depth -= 1
        own = name in getattr(owner, "__dict__", {})   # defined on owner itself, not inherited
        try:
            setattr(owner, name, spy)
        except (TypeError, AttributeError):
            self.unpatched.append(f"{getattr(owner, '__name__', owner)}.{name}")
            return
        self._undo.append((owner, name, orig, own))

    def install(self):
        cp = self.cp
        for name in self.NDARRAY:
            self._wrap(cp.ndarray, name)
        self._wrap(cp, "asnumpy")
        self._wrap(cp.cuda.memory.MemoryPointer, "copy_to_host")
        self._wrap(cp.cuda.memory.MemoryPointer, "copy_to_host_async")
        return self

    def uninstall(self):
        for owner, name, orig, own in reversed(self._undo):
            try:
                if own:
                    setattr(owner, name, orig)
                else:
                    delattr(owner, name)      # uncovers the inherited attribute again
            except (TypeError, AttributeError):
                pass
        self._undo.clear()

    def __enter__(self):
        self.active = True
        return self

    def __exit__(self, *exc):
        self.active = False

    def report(self, limit=5):
        return "\n\n".join(f"{name} from\n{stack}" for name, stack in self.calls[:limit])


def cupti_device_to_host_copies(fn):
    """Run ``fn()`` under torch.profiler's CUDA activity tracing (CUPTI sees every copy of
    the process, cupy's included) and return the names of its device-to-host copies, or
    None where that cannot be done (no torch with CUDA). The way to check the no-copy
    guarantee on a cupy whose ndarray methods cannot be patched."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if "dtoh" in e.name.lower().replace(" ", "")]
