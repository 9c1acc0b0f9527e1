"""The interception slots live in ddg/dispatch.py (the modules that read them bind the
same lists), installing a holder restores the previous one, and call wrappers (the
profiler, saved-tensor hooks) come off in any order."""
import numpy as np
import pytest

import ddg
from ddg import dispatch, flags, profiler
from ddg.autograd import engine, function, grad_mode
from ddg.autograd.function import Function
from ddg.autograd.saved_tensors_hooks import saved_tensors_hooks
from ddg.optimizer.optimizer import Optimizer
from ddg.tensor import backend, tensor


def test_slots_are_the_lists_the_hot_path_reads_in_their_order():
    assert list(dispatch.SLOTS) == ["autocast", "recorder", "grad_enabled", "check_nan_inf", "watch",
                                    "rng_observer"]
    assert function._autocast is dispatch.AUTOCAST and function._recorder is dispatch.RECORDER
    assert grad_mode._enabled is dispatch.GRAD_ENABLED and flags.check_nan_inf is dispatch.CHECK_NAN_INF
    assert tensor._watch is dispatch.WATCH and backend._rng_observer is dispatch.RNG_OBSERVER
    # the features that set them go through dispatch: the slot holds their value inside
    with ddg.no_grad():
        assert dispatch.GRAD_ENABLED[0] is False
    with ddg.amp.auto_cast():
        assert dispatch.AUTOCAST[0] is not None
    assert dispatch.AUTOCAST[0] is None and dispatch.GRAD_ENABLED[0] is True
    ddg.set_flags({"FLAGS_check_nan_inf": True})
    try:
        assert dispatch.CHECK_NAN_INF[0] is True
    finally:
        ddg.set_flags({"FLAGS_check_nan_inf": False})


def test_intercept_restores_and_exclusive_refuses_nesting():
    seen = []
    with dispatch.intercept(dispatch.WATCH, lambda t, what, value: seen.append(what)):
        ddg.ones([2]).numpy()
        inner = dispatch.intercept(dispatch.WATCH, None)
        with inner:
            ddg.ones([2]).numpy()
            with inner:  # re-entrant: each entry keeps its own previous holder
                pass
            assert dispatch.WATCH[0] is None
        assert dispatch.WATCH[0] is not None
    assert dispatch.WATCH[0] is None and seen == ["numpy"]
    with pytest.raises(ZeroDivisionError):
        with dispatch.intercept(dispatch.RECORDER, object(), exclusive=True):
            with pytest.raises(RuntimeError, match="recorder slot is already taken"):
                dispatch.install(dispatch.RECORDER, object(), exclusive=True)
            1 / 0
    assert dispatch.RECORDER[0] is None
    with pytest.raises(ValueError, match="not an interception slot"):
        dispatch.intercept([None], 1)


def test_call_wrappers_come_off_in_any_order():
    plain = (Function.__dict__["__call__"], engine.call_backward, Optimizer.__dict__["step"])
    packed = []
    prof = profiler.Profiler(on_trace_ready=lambda p: None)
    prof.start()
    hooks = saved_tensors_hooks(lambda t: packed.append(1) or t, lambda p: p)
    hooks.__enter__()
    x = ddg.to_tensor(np.arange(3.0), stop_gradient=False)
    (ddg.tanh(x) * 2).sum().backward()
    prof.stop()  # the profiler leaves first: the saved-tensor hooks stay
    assert packed and any(e["name"] == "Tanh" for e in prof.events())
    n = len(packed)
    ddg.exp(x).sum()
    assert len(packed) > n
    hooks.__exit__(None, None, None)
    assert (Function.__dict__["__call__"], engine.call_backward, Optimizer.__dict__["step"]) == plain
