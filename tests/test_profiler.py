"""ddg.profiler: the scheduler's states (Paddle's rule), events from the op dispatch,
backward and optimizer, RecordEvent, the Chrome trace written and read back, summary,
step_info, and nothing patched outside a recording."""
import glob
import json

import pytest

import ddg
import ddg.profiler as profiler
from ddg.autograd import engine
from ddg.autograd.function import Function

S = profiler.ProfilerState


def test_make_scheduler_states():
    sch = profiler.make_scheduler(closed=1, ready=1, record=2, repeat=2, skip_first=1)
    got = [sch(i) for i in range(11)]
    assert got == [S.CLOSED, S.CLOSED, S.READY, S.RECORD, S.RECORD_AND_RETURN,
                   S.CLOSED, S.READY, S.RECORD, S.RECORD_AND_RETURN, S.CLOSED, S.CLOSED]
    with pytest.raises(ValueError, match="record"):
        profiler.make_scheduler(closed=0, ready=0, record=0)


def _train(prof, steps, m, opt):
    for _ in range(steps):
        with profiler.RecordEvent("forward"):
            loss = ddg.nn.functional.relu(m(ddg.randn([8, 4]))).sum()
        loss.backward()
        opt.step()
        opt.clear_grad()
        prof.step(num_samples=8)


@pytest.mark.parametrize("scheduler", [(1, 3), None, "fn"])
def test_records_ops_backward_steps_and_writes_a_chrome_trace(scheduler, tmp_path):
    m = ddg.nn.Linear(4, 3)
    opt = ddg.optimizer.SGD(0.1, parameters=m.parameters())
    ready = []
    sched = profiler.make_scheduler(closed=1, ready=0, record=2, repeat=2) if scheduler == "fn" else scheduler
    export = profiler.export_chrome_tracing(str(tmp_path), worker_name="w0")

    def on_ready(p):
        ready.append((p.step_num, [e["name"] for e in p.events()]))
        export(p)

    call, backward, step = Function.__call__, engine.call_backward, ddg.optimizer.SGD.step
    with profiler.Profiler(scheduler=sched, on_trace_ready=on_ready) as prof:
        _train(prof, 5, m, opt)
    assert (Function.__call__, engine.call_backward, ddg.optimizer.SGD.step) == (call, backward, step)
    # (step_num when ready, recorded ProfileSteps, how many of them ran a training step);
    # stop() closes the step in progress too
    spans = {(1, 3): [(3, [1, 2], 2)], None: [(5, [0, 1, 2, 3, 4, 5], 5)],
             "fn": [(3, [1, 2], 2), (5, [4, 5], 1)]}[scheduler]
    assert [s for s, _ in ready] == [s for s, _, _ in spans]
    for (_, names), (_, steps, k) in zip(ready, spans):
        assert sorted(n for n in names if n.startswith("ProfileStep#")) == [f"ProfileStep#{i}" for i in steps]
        for name in ("Linear", "Relu", "Sum", "Linear_grad", "SGD.step", "forward"):
            assert sum(n == name for n in names) == k, (name, names)
    files = sorted(glob.glob(str(tmp_path / "w0_time_*.paddle_trace.json")))
    assert len(files) == len(spans)
    data = profiler.load_profiler_result(files[-1])
    evs = data["traceEvents"]
    assert all(e["ph"] == "X" and e["dur"] >= 0 and "ts" in e and "pid" in e and "tid" in e for e in evs)
    lin = next(e for e in evs if e["name"] == "Linear")
    assert lin["args"]["input_shapes"][0] == [8, 4]
    text = prof.summary(sorted_by=profiler.SortedKeys.CPUTotal, time_unit="us")
    assert "Operator Summary" in text and "Linear_grad" in text
    assert "batch_cost" in prof.step_info() and "ips" in prof.step_info()


def test_record_event_outside_and_nesting_errors(tmp_path):
    with profiler.RecordEvent("nothing"):
        pass  # no profiler: nothing happens
    p1 = profiler.Profiler(on_trace_ready=lambda p: None)
    p1.start()
    try:
        with pytest.raises(RuntimeError, match="already recording"):
            profiler.Profiler(on_trace_ready=lambda p: None).start()
    finally:
        p1.stop()
    timer = profiler.Profiler(timer_only=True)
    timer.start()
    ddg.ones([2]) + 1
    timer.step(num_samples=4)
    timer.stop()
    assert timer.events() == [] and "batch_cost" in timer.step_info()
    with pytest.raises(ValueError, match="scheduler"):
        profiler.Profiler(scheduler=(3, 1))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"x": 1}))
    with pytest.raises(ValueError, match="not a trace"):
        profiler.load_profiler_result(str(bad))
