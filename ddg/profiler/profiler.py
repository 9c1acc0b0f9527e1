"""``ddg.profiler``: Paddle's ``paddle.profiler`` over ddg's op dispatch.

While a ``Profiler`` records, every op call (``Function.__call__``: forward, with its
shapes), every node run by backward (``engine.call_backward``), every optimizer
``step``, every ``RecordEvent`` and every profiler step is timed on the host clock
(``time.perf_counter_ns``; GPU work is asynchronous, so GPU ops show their launch time
unless ``DDG_PROFILER_SYNC=1`` synchronizes the device after each). Outside a recording
nothing is patched and nothing is paid. The events go to a Chrome trace
(``export_chrome_tracing``; open it at chrome://tracing or ui.perfetto.dev) and to
``summary()`` tables.

Not recorded: the ops of a ``to_static`` replay (wrap the call in a ``RecordEvent``),
the ``step`` of an optimizer that overrides it (LBFGS), data loading inside worker
processes, and device kernels as such.
"""
import enum
import json
import os
import socket
import threading
import time
from collections import defaultdict

from .. import dispatch

__all__ = ["ProfilerState", "ProfilerTarget", "make_scheduler", "export_chrome_tracing", "Profiler", "RecordEvent",
           "load_profiler_result", "SortedKeys", "SummaryView"]


class ProfilerState(enum.Enum):
    CLOSED = 0
    READY = 1
    RECORD = 2
    RECORD_AND_RETURN = 3


class ProfilerTarget(enum.Enum):
    CPU = 0
    GPU = 1
    XPU = 2
    CUSTOM_DEVICE = 3


class SortedKeys(enum.Enum):
    CPUTotal = 0
    CPUAvg = 1
    CPUMax = 2
    CPUMin = 3
    GPUTotal = 4
    GPUAvg = 5
    GPUMax = 6
    GPUMin = 7


class TracerEventType(enum.Enum):
    """The kinds of events (a trace event's ``cat`` is its name)."""
    Operator = 0
    Dataloader = 1
    ProfileStep = 2
    CudaRuntime = 3
    Kernel = 4
    Memcpy = 5
    Memset = 6
    UserDefined = 7
    OperatorInner = 8
    Forward = 9
    Backward = 10
    Optimization = 11
    Communication = 12
    PythonOp = 13
    PythonUserDefined = 14
    DygraphKernelLaunch = 15
    StaticKernelLaunch = 16


class SummaryView(enum.Enum):
    DeviceView = 0
    OverView = 1
    ModelView = 2
    DistributedView = 3
    KernelView = 4
    OperatorView = 5
    MemoryView = 6
    MemoryManipulationView = 7
    UDFView = 8


def make_scheduler(*, closed, ready, record, repeat=0, skip_first=0):
    """The state of each step: ``skip_first`` steps CLOSED, then cycles of ``closed``
    CLOSED, ``ready`` READY and ``record`` recording steps (the last RECORD_AND_RETURN),
    ``repeat`` times (0: forever)."""
    for name, v in (("closed", closed), ("ready", ready), ("record", record), ("repeat", repeat),
                    ("skip_first", skip_first)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"ddg.profiler.make_scheduler: {name} must be a non-negative int, got {v!r}")
    if record < 1:
        raise ValueError("ddg.profiler.make_scheduler: record must be >= 1")
    period = closed + ready + record

    def scheduler(step):
        if step < skip_first:
            return ProfilerState.CLOSED
        step -= skip_first
        if repeat > 0 and step // period >= repeat:
            return ProfilerState.CLOSED
        m = step % period
        if m < closed:
            return ProfilerState.CLOSED
        if m < closed + ready:
            return ProfilerState.READY
        return ProfilerState.RECORD_AND_RETURN if m == period - 1 else ProfilerState.RECORD
    return scheduler


def _default_worker_name():
    name = f"host_{socket.gethostname()}_pid_{os.getpid()}"
    from ..parallel.comm.launcher_env import launcher_rank
    rank = launcher_rank()
    return name if rank is None else f"{name}_rank_{rank}"


def export_chrome_tracing(dir_name, worker_name=None):
    """An ``on_trace_ready`` callback writing each recorded span to
    ``dir_name/<worker_name>_time_<timestamp>.paddle_trace.json`` (Chrome trace format)."""
    def handle(prof):
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or _default_worker_name()
        stamp = time.strftime("%Y_%m_%d_%H_%M_%S") + f".{int(time.time() * 1e6) % 1000000:06d}"
        path = os.path.join(dir_name, f"{name}_time_{stamp}.paddle_trace.json")
        prof.export(path, format="json")
    return handle


def load_profiler_result(filename):
    """The trace written by ``export``/``export_chrome_tracing``, as a dict (``traceEvents``...)."""
    with open(filename) as f:
        data = json.load(f)
    if not isinstance(data, dict) or "traceEvents" not in data:
        raise ValueError(f"ddg.profiler.load_profiler_result: {filename} is not a trace written by ddg.profiler")
    return data


# -- recording ------------------------------------------------------------------------------------------------
class _Recorder:
    """The events of the active profiler, and the patches that produce them."""

    def __init__(self, sync):
        self.events = []
        self.lock = threading.Lock()
        self.sync = sync
        self._saved = None

    def add(self, name, cat, t0, t1, args=None):
        ev = {"name": name, "cat": cat, "ph": "X", "ts": t0 / 1000.0, "dur": (t1 - t0) / 1000.0,
              "pid": os.getpid(), "tid": threading.get_ident()}
        if args:
            ev["args"] = args
        with self.lock:
            self.events.append(ev)

    def install(self):
        from ..autograd import engine
        from ..autograd.function import Function
        from ..optimizer.optimizer import Optimizer
        from ..tensor import backend
        rec = self
        clock = time.perf_counter_ns
        sync = backend.synchronize if self.sync and hasattr(backend, "synchronize") else None

        def timed_call(orig_call):
            def call(fn, *tensors):
                t0 = clock()
                out = orig_call(fn, *tensors)
                if sync is not None:
                    sync()
                rec.add(fn.name, "Operator", t0, clock(),
                        {"input_shapes": [list(getattr(t, "shape", ())) for t in tensors]})
                return out
            return call

        def timed_backward(orig_backward):
            def call_backward(node, grads):
                t0 = clock()
                out = orig_backward(node, grads)
                if sync is not None:
                    sync()
                rec.add(f"{node.name}_grad", "Backward", t0, clock())
                return out
            return call_backward

        def timed_step(orig_step):
            def step(opt, *a, **k):
                t0 = clock()
                out = orig_step(opt, *a, **k)
                rec.add(f"{type(opt).__name__}.step", "Optimization", t0, clock())
                return out
            return step

        self._saved = (dispatch.wrap(Function, "__call__", timed_call),
                       dispatch.wrap(engine, "call_backward", timed_backward),
                       dispatch.wrap(Optimizer, "step", timed_step))

    def uninstall(self):
        if self._saved is None:
            return
        for handle in self._saved:
            handle.remove()
        self._saved = None


_ACTIVE = [None]  # the recorder of the profiler that records now


class RecordEvent:
    """A named span in the trace: ``with RecordEvent("name"): ...`` or ``begin()``/``end()``.
    Outside a recording it costs two attribute reads."""

    def __init__(self, name, event_type=TracerEventType.PythonUserDefined):
        self.name = name
        self.event_type = event_type
        self._t0 = None

    def begin(self):
        self._t0 = time.perf_counter_ns() if _ACTIVE[0] is not None else None

    def end(self):
        rec = _ACTIVE[0]
        if self._t0 is not None and rec is not None:
            cat = self.event_type.name if isinstance(self.event_type, TracerEventType) else "PythonUserDefined"
            rec.add(self.name, cat, self._t0, time.perf_counter_ns())
        self._t0 = None

    def __enter__(self):
        self.begin()
        return self

    def __exit__(self, *exc):
        self.end()
        return False


class Profiler:
    """Paddle's ``Profiler(targets, scheduler, on_trace_ready, record_shapes, profile_memory,
    timer_only, emit_nvtx, custom_device_types, with_flops)``. ``scheduler`` is None
    (record from ``start`` to ``stop``), a ``(start, end)`` pair of step numbers (record
    steps ``start`` to ``end - 1``) or a function of the step number returning a
    ``ProfilerState``. ``on_trace_ready(prof)`` runs at the end of each recorded span
    (default: ``export_chrome_tracing('./profiler_log/')``). ``timer_only=True`` records
    no events, only the step times for ``step_info``."""

    def __init__(self, *, targets=None, scheduler=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, timer_only=False, emit_nvtx=False, custom_device_types=[],  # noqa: B006
                 with_flops=False):
        if scheduler is None:
            self._scheduler = lambda step: ProfilerState.RECORD
        elif isinstance(scheduler, (tuple, list)):
            if len(scheduler) != 2 or not all(isinstance(v, int) for v in scheduler) or \
                    not 0 <= scheduler[0] < scheduler[1]:
                raise ValueError(f"ddg.profiler.Profiler: scheduler must be a (start, end) pair of step numbers with "
                                 f"0 <= start < end, got {scheduler!r}")
            a, b = scheduler
            self._scheduler = make_scheduler(closed=max(a - 1, 0), ready=1 if a > 0 else 0, record=b - a,
                                             repeat=1)
        elif callable(scheduler):
            self._scheduler = scheduler
        else:
            raise TypeError(f"ddg.profiler.Profiler: scheduler must be None, a (start, end) pair or a function, "
                            f"got {type(scheduler).__name__}")
        self.targets = list(targets) if targets is not None else [ProfilerTarget.CPU]
        self.on_trace_ready = on_trace_ready if on_trace_ready is not None else \
            export_chrome_tracing("./profiler_log/")
        self.timer_only = bool(timer_only)
        self.record_shapes = record_shapes
        self.step_num = 0
        self.current_state = ProfilerState.CLOSED
        self._rec = None
        self._events = []            # of the latest finished span
        self._step_t0 = None
        self._step_times = []
        self._samples = []
        self._step_event_t0 = None

    # -- state machine --------------------------------------------------------------------------------
    def _begin_record(self):
        if self.timer_only or self._rec is not None:
            return
        if _ACTIVE[0] is not None:
            raise RuntimeError("ddg.profiler: another Profiler is already recording")
        self._rec = _Recorder(os.environ.get("DDG_PROFILER_SYNC", "0") == "1")
        self._rec.install()
        _ACTIVE[0] = self._rec
        self._step_event_t0 = time.perf_counter_ns()

    def _end_record(self, ready=True):
        rec = self._rec
        if rec is None:
            return
        self._close_step_event()
        rec.uninstall()
        _ACTIVE[0] = None
        self._rec = None
        self._events = rec.events
        if ready and self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _close_step_event(self):
        """The span of the current step, if it is being recorded."""
        if self._rec is not None and self._step_event_t0 is not None:
            self._rec.add(f"ProfileStep#{self.step_num}", "ProfileStep", self._step_event_t0, time.perf_counter_ns())
        self._step_event_t0 = None

    def _enter_state(self, state):
        prev, self.current_state = self.current_state, state
        recording = (ProfilerState.RECORD, ProfilerState.RECORD_AND_RETURN)
        if prev == ProfilerState.RECORD_AND_RETURN:
            self._end_record()
        elif prev in recording and state not in recording:
            self._end_record()
        if state in recording:
            self._begin_record()

    def start(self):
        """Begin: the state of step 0 (and the step timer)."""
        self._step_t0 = time.perf_counter()
        self._enter_state(self._scheduler(self.step_num))

    def step(self, num_samples=None):
        """Mark the end of a training step: its time (and ``num_samples`` for the
        throughput) is kept, and the scheduler's state for the next step is entered."""
        now = time.perf_counter()
        if self._step_t0 is not None:
            self._step_times.append(now - self._step_t0)
            self._samples.append(num_samples)
        self._step_t0 = now
        self._close_step_event()
        self.step_num += 1
        self._enter_state(self._scheduler(self.step_num))
        if self._rec is not None:
            self._step_event_t0 = time.perf_counter_ns()

    def stop(self):
        """End: a span still recording is closed and handed to ``on_trace_ready``."""
        if self._rec is not None:
            self._end_record()
        self.current_state = ProfilerState.CLOSED

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- results --------------------------------------------------------------------------------------
    def step_info(self, unit=None):
        """The average step time (and throughput when ``step`` got ``num_samples``) of the
        steps so far, as Paddle's text."""
        if not self._step_times:
            return "no step finished yet"
        avg = sum(self._step_times) / len(self._step_times)
        text = f"batch_cost: {avg:.5f} s"
        counted = [(t, n) for t, n in zip(self._step_times, self._samples) if n is not None]
        if counted:
            ips = sum(n for _, n in counted) / sum(t for t, _ in counted)
            text += f" ips: {ips:.3f} {unit or 'samples'}/s"
        return text

    def export(self, path="", format="json"):
        """Write the latest recorded span to ``path`` as a Chrome trace."""
        if format != "json":
            raise ValueError(f"ddg.profiler.Profiler.export: only format='json' (a Chrome trace) is supported, "
                             f"got {format!r}")
        data = {"displayTimeUnit": "ms", "schemaVersion": 1, "traceEvents": list(self._events),
                "otherData": {"producer": "ddg.profiler", "worker": _default_worker_name()}}
        with open(path, "w") as f:
            json.dump(data, f)

    def events(self):
        """The latest recorded span's events (Chrome trace dicts, times in microseconds)."""
        return list(self._events)

    def summary(self, sorted_by=SortedKeys.CPUTotal, op_detail=True, thread_sep=False, time_unit="ms", views=None):
        """Print (and return) a table per event category: calls, total, average, max, min
        and share of the category's time, sorted by ``sorted_by``."""
        scale = {"s": 1e-6, "ms": 1e-3, "us": 1.0, "ns": 1e3}
        if time_unit not in scale:
            raise ValueError(f"ddg.profiler.Profiler.summary: time_unit must be one of {list(scale)}, got "
                             f"{time_unit!r}")
        k = scale[time_unit]
        groups = defaultdict(lambda: defaultdict(list))
        for ev in self._events:
            groups[ev["cat"]][ev["name"]].append(ev["dur"])
        key = {SortedKeys.CPUTotal: lambda d: -sum(d), SortedKeys.CPUAvg: lambda d: -sum(d) / len(d),
               SortedKeys.CPUMax: lambda d: -max(d), SortedKeys.CPUMin: lambda d: min(d)}.get(
                   sorted_by, lambda d: -sum(d))
        lines = []
        cats = ["ProfileStep", "Operator", "Backward", "Optimization"]
        cats += sorted(c for c in groups if c not in cats)
        for cat in cats:
            rows = groups.get(cat)
            if not rows:
                continue
            total = sum(sum(d) for d in rows.values()) or 1.0
            lines.append(f"{'-' * 30} {cat} Summary {'-' * 30}")
            lines.append(f"{'Name':40s} {'Calls':>7s} {'Total(' + time_unit + ')':>14s} {'Avg':>12s} "
                         f"{'Max':>12s} {'Min':>12s} {'Ratio(%)':>9s}")
            for name, d in sorted(rows.items(), key=lambda kv: key(kv[1])):
                lines.append(f"{name[:40]:40s} {len(d):7d} {sum(d) * k:14.4f} {sum(d) / len(d) * k:12.4f} "
                             f"{max(d) * k:12.4f} {min(d) * k:12.4f} {100 * sum(d) / total:9.2f}")
        text = "\n".join(lines) if lines else "ddg.profiler: no events recorded"
        print(text)
        return text
