"""``nodes.periodic.PeriodicCalls``: the harness's state topics' schedule outside the
executor (ROS-free)."""

from __future__ import annotations

import threading
import time

import pytest

from captain_harness.nodes.periodic import PeriodicCalls


def test_each_call_runs_at_its_own_period_until_stopped() -> None:
    fast: list[float] = []
    slow: list[float] = []
    calls = PeriodicCalls("test_periodic")
    calls.add(0.01, lambda: fast.append(time.monotonic()))
    calls.add(0.05, lambda: slow.append(time.monotonic()))
    calls.start()
    time.sleep(0.5)
    calls.stop()
    assert not calls.running
    n_fast, n_slow = len(fast), len(slow)
    # 50 and 10 due in 0.5 s; a loaded machine may run late, never early or twice to catch up
    assert 20 <= n_fast <= 51, n_fast
    assert 4 <= n_slow <= 11, n_slow
    time.sleep(0.05)
    assert (len(fast), len(slow)) == (n_fast, n_slow)  # nothing runs after stop


def test_a_failing_call_is_reported_and_the_others_go_on() -> None:
    errors: list[Exception] = []
    ok = threading.Event()
    count = [0]

    def good() -> None:
        count[0] += 1
        if count[0] >= 3:
            ok.set()

    def bad() -> None:
        raise RuntimeError("driver swapped")

    calls = PeriodicCalls("test_periodic_errors", on_error=errors.append)
    calls.add(0.01, bad)
    calls.add(0.01, good)
    calls.start()
    try:
        assert ok.wait(2.0)
    finally:
        calls.stop()
    assert errors and all(isinstance(e, RuntimeError) for e in errors)


def test_an_overrun_restarts_the_schedule_instead_of_bursting() -> None:
    stamps: list[float] = []

    def slow_once() -> None:
        stamps.append(time.monotonic())
        if len(stamps) == 1:
            time.sleep(0.1)  # ten periods late

    calls = PeriodicCalls("test_periodic_overrun")
    calls.add(0.01, slow_once)
    calls.start()
    time.sleep(0.2)
    calls.stop()
    assert stamps[1] - stamps[0] >= 0.1
    # no burst of the ten missed calls once the slow one returned
    assert sum(1 for t in stamps[1:] if t - stamps[1] < 0.005) == 1, stamps


def test_period_must_be_positive() -> None:
    with pytest.raises(ValueError):
        PeriodicCalls().add(0.0, lambda: None)
