"""``ddg.profiler``: Paddle's ``paddle.profiler`` (``Profiler``, ``RecordEvent``,
``make_scheduler``, ``export_chrome_tracing``, ``load_profiler_result``) over ddg's op
dispatch; see ``profiler.py``."""
from .profiler import (Profiler, ProfilerState, ProfilerTarget, RecordEvent, SortedKeys, SummaryView,  # noqa: F401
                       export_chrome_tracing, load_profiler_result, make_scheduler)

__all__ = ["ProfilerState", "ProfilerTarget", "make_scheduler", "export_chrome_tracing", "Profiler", "RecordEvent",
           "load_profiler_result", "SortedKeys", "SummaryView"]
