"""Periodic calls on the steady wall clock from one thread of their own, outside the
node's executor (ROS-free).

The harness publishes ``/tf``, ``/clock``, ``joint_states`` and ``wrench`` at 50 Hz.
As rclpy timers, every tick woke the node's ``MultiThreadedExecutor``: rclpy 9.1.2 wakes
all its threads for each ready callback and they spin until one takes it
(ros2/rclpy#1452), and the harness node's wait set (its actions, services, parameter and
lifecycle services) is rebuilt in Python on every wake-up. That cost more CPU than the
publishing itself and, on a busy machine, slowed the motion running in the same process
to a third of its in-process speed. A plain thread that sleeps until the next due call
and publishes costs only the publishing (rclpy publishers may be used from any thread).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Entry:
    period_s: float
    fn: Callable[[], None]
    due_s: float


class PeriodicCalls:
    """Calls ``fn()`` every ``period_s`` seconds of steady wall clock, for each registered
    ``(period_s, fn)``, from one daemon thread. A call that overruns delays the next ones
    (none is run twice to catch up: after a gap longer than a period the schedule restarts
    from now). An exception of ``fn`` goes to ``on_error`` (the call stays scheduled).

    Args:
        name: the thread's name.
        on_error: called with the exception of a failing call (default: ignored).
    """

    def __init__(self, name: str = "periodic", on_error: Callable[[Exception], None] | None = None) -> None:
        self.name = name
        self.on_error = on_error
        self._entries: list[_Entry] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, period_s: float, fn: Callable[[], None]) -> None:
        """Call ``fn()`` every ``period_s`` (s, > 0) from the thread, the first time one
        period after this."""
        if not period_s > 0:
            raise ValueError(f"period_s must be positive, got {period_s!r}")
        with self._lock:
            self._entries.append(_Entry(float(period_s), fn, time.monotonic() + float(period_s)))

    def start(self) -> None:
        """Start the thread (once; a no-op when nothing is registered)."""
        if self._thread is not None or not self._entries:
            return
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the thread and wait for a call in progress (at most ``timeout_s``)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout_s)

    @property
    def running(self) -> bool:
        """True while the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                entries = list(self._entries)
            next_s = min(e.due_s for e in entries)
            delay = next_s - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            now = time.monotonic()
            for entry in entries:
                if entry.due_s > now:
                    continue
                entry.due_s += entry.period_s
                if entry.due_s <= now:  # overran by a period or more: restart the schedule
                    entry.due_s = now + entry.period_s
                try:
                    entry.fn()
                except Exception as exc:  # a publisher's failure never ends the others
                    if self.on_error is not None:
                        self.on_error(exc)
                if self._stop.is_set():
                    return
