"""A host-side wall-clock limit on one robot call.

``call_deadline(limit_s)`` raises ``CallDeadlineExceeded`` inside the code it guards once
``limit_s`` seconds have passed. On the main thread it uses ``SIGALRM`` (which also cuts
a blocking system call short); on any other thread the exception is set asynchronously
on that thread, which takes effect as soon as the thread runs Python code again.
``CallDeadlineExceeded`` derives from ``BaseException`` so that the generic ``except
Exception`` of a primitive cannot swallow it; the guard swallows it itself and reports
``fired``.

What no in-process limit can cut: a call stuck inside native code that never returns to
the interpreter. The episode then outlives its limit; ``captain rollout`` runs each
episode in a worker process that the operator can end.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass


class CallDeadlineExceeded(BaseException):
    """Raised inside a robot call that ran past its wall-clock limit."""


@dataclass
class Deadline:
    """What happened under ``call_deadline``: ``fired`` when the limit was reached."""

    limit_s: float
    fired: bool = False


@contextlib.contextmanager
def call_deadline(limit_s: float | None) -> Iterator[Deadline]:
    """Guard a block with a wall-clock limit of ``limit_s`` seconds (None: no limit)."""
    state = Deadline(float(limit_s) if limit_s is not None else float("inf"))
    if limit_s is None:
        yield state
        return
    limit_s = max(0.01, float(limit_s))
    on_main = threading.current_thread() is threading.main_thread()
    use_alarm = on_main and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)
    timer: threading.Timer | None = None
    previous = None
    if use_alarm:
        def on_alarm(signum: int, frame: object) -> None:
            if not state.fired:
                state.fired = True
                raise CallDeadlineExceeded(f"the call ran past {limit_s:g} s")

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, limit_s)
    else:
        ident = threading.get_ident()
        done = threading.Event()

        def inject() -> None:
            if not done.is_set():
                state.fired = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident),
                                                           ctypes.py_object(CallDeadlineExceeded))

        timer = threading.Timer(limit_s, inject)
        timer.daemon = True
        timer.start()
    try:
        yield state
    except CallDeadlineExceeded:
        state.fired = True
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
        elif timer is not None:
            done.set()
            timer.cancel()
            if state.fired:  # an exception set but not yet raised must not escape later
                with contextlib.suppress(CallDeadlineExceeded):
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(threading.get_ident()), None)
