"""Restarting a failed ddgrun job (``ddgrun --max_restarts N``), as torchrun's
``--max-restarts``: when the job ends with a non-zero status, the whole job starts again,
up to N times, after a pause that doubles each time (``DDG_RESTART_PAUSE`` seconds
the first time, default 1, at most 60). Each failure and restart is logged on stderr.
The ranks of attempt k (0 for the first) see ``DDG_RESTART_COUNT=k`` and
``DDG_MAX_RESTARTS=N`` (torchrun's ``TORCHELASTIC_RESTART_COUNT`` and
``TORCHELASTIC_MAX_RESTARTS``); ``ddg.distributed.elastic.State`` resumes from its last
commit when it finds one. The job's exit status is the last attempt's.

No restart follows a job that was stopped from outside (ddgrun got SIGTERM or SIGINT,
which it passes on to the ranks) or one that exited with :data:`PREEMPTED` (its ranks
committed and left because the scheduler is taking the machine back): the scheduler, not
ddgrun, relaunches those.
"""
import os
import signal
import sys
import time

__all__ = ["PREEMPTED", "RESTART_PAUSE_MAX", "restart_pause", "run_with_restarts", "describe_status"]

# sysexits.h EX_TEMPFAIL ("temporary failure, try again later"): the status of a job
# whose ranks committed and left on SIGTERM (ddg.distributed.elastic uses the same value).
PREEMPTED = 75
RESTART_PAUSE_MAX = 60.0


def restart_pause(environ=None):
    """The first pause between attempts, in seconds, from ``DDG_RESTART_PAUSE`` (default 1)."""
    env = os.environ if environ is None else environ
    raw = env.get("DDG_RESTART_PAUSE", "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"DDG_RESTART_PAUSE must be a number of seconds, got {raw!r}") from None
    if not value >= 0:
        raise ValueError(f"DDG_RESTART_PAUSE must be >= 0 seconds, got {raw!r}")
    return value


def describe_status(status):
    if status == PREEMPTED:
        return f"exit status {status} (preempted: the ranks committed and left)"
    if status > 128:
        try:
            return f"exit status {status} (a rank died of {signal.Signals(status - 128).name})"
        except ValueError:
            pass
    return f"exit status {status}"


def run_with_restarts(start, max_restarts, env, pause=1.0, log=None, sleep=time.sleep):
    """Run ``start(env, stopped)`` (one attempt of the job; returns its exit status, and
    appends to the list ``stopped`` the signals ddgrun received meanwhile) until it
    succeeds, is stopped, is preempted, or has failed ``max_restarts + 1`` times."""
    if log is None:
        def log(msg):
            print(msg, file=sys.stderr, flush=True)
    attempt = 0
    while True:
        env = dict(env, DDG_RESTART_COUNT=str(attempt), DDG_MAX_RESTARTS=str(max_restarts))
        stopped = []
        began = time.monotonic()
        status = start(env, stopped)
        if status == 0 or max_restarts == 0:
            return status
        took = time.monotonic() - began
        if status == PREEMPTED:
            log(f"[ddgrun] attempt {attempt} was preempted after {took:.1f} s; not restarting "
                f"(relaunch the job to resume from its last commit)")
            return status
        if stopped:
            log(f"[ddgrun] attempt {attempt} stopped by {signal.Signals(stopped[0]).name} "
                f"({describe_status(status)}); not restarting")
            return status
        if attempt >= max_restarts:
            log(f"[ddgrun] attempt {attempt} failed after {took:.1f} s ({describe_status(status)}); "
                f"no restarts left (--max_restarts {max_restarts}), giving up")
            return status
        wait = min(pause * 2 ** attempt, RESTART_PAUSE_MAX)
        log(f"[ddgrun] attempt {attempt} failed after {took:.1f} s ({describe_status(status)}); "
            f"restarting the job in {wait:g} s (restart {attempt + 1} of {max_restarts})")
        if _interruptible_sleep(wait, sleep):
            log("[ddgrun] stopped while waiting to restart; not restarting")
            return status
        attempt += 1


def _interruptible_sleep(seconds, sleep):
    """Sleep, returning True if SIGTERM or SIGINT arrived meanwhile."""
    got = []

    def note(signum, frame):
        got.append(signum)

    try:
        old = {s: signal.signal(s, note) for s in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:             # not the main thread: signals stay as they are
        old = {}
    try:
        left = seconds
        while not got and left > 0:
            step = min(left, 0.1)
            sleep(step)
            left -= step
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return bool(got)
