"""The bringup's process supervisor (core/processes.py) with real child processes: one
READY once every child is ready, a crash reported and respawned, a child without respawn
that dies before it is ready fails the bringup, and a stop reaches every child in reverse
start order."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from captain_bringup.core.processes import ChildSpec, Supervisor

# A child that prints READY, then waits; SIGINT makes it print "stopped <name>" and exit 0.
CHILD = """
import signal, sys, time
name = sys.argv[1]
def stop(*_):
    print("stopped", name, flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
time.sleep(float(sys.argv[2]))
print("READY", name, flush=True)
while True:
    time.sleep(0.05)
"""


def _child(name: str, delay_s: float = 0.0, **kwargs) -> ChildSpec:
    return ChildSpec(name, (sys.executable, "-c", CHILD, name, str(delay_s)), **kwargs)


class _Run:
    """A supervisor running in a thread, its echoed lines collected."""

    def __init__(self, children: list[ChildSpec], ready_timeout_s: float = 30.0) -> None:
        self.lines: list[str] = []
        self.stop = threading.Event()
        self.supervisor = Supervisor(children, echo=self.lines.append, label="test", stop_timeout_s=5.0)
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, args=(ready_timeout_s,), daemon=True)
        self.thread.start()

    def _run(self, ready_timeout_s: float) -> None:
        self.code = self.supervisor.run(ready_timeout_s=ready_timeout_s, stop=self.stop)

    def wait_for(self, predicate, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(predicate(line) for line in list(self.lines)):
            assert time.monotonic() < deadline, "\n".join(self.lines)
            time.sleep(0.02)

    def finish(self) -> int:
        self.stop.set()
        self.thread.join(timeout=30.0)
        assert not self.thread.is_alive()
        return self.code


def test_ready_once_all_children_are_and_stop_in_reverse_order() -> None:
    run = _Run([_child("robot"), _child("harness", 0.3), _child("client")])
    run.wait_for(lambda line: line.startswith("READY test"))
    ready_at = next(i for i, line in enumerate(run.lines) if line.startswith("READY test"))
    assert {"[robot] READY robot", "[harness] READY harness", "[client] READY client"} <= set(run.lines[:ready_at])
    pids = run.supervisor.pids()
    assert len(set(pids.values())) == 3 and os.getpid() not in pids.values()
    assert run.finish() == 0
    stopped = [line for line in run.lines if " stopped " in line]
    assert stopped == ["[client] stopped client", "[harness] stopped harness", "[robot] stopped robot"]


def test_a_crashed_child_is_reported_and_respawned() -> None:
    run = _Run([_child("robot"), _child("client", respawn=True, respawn_delay_s=0.2)])
    run.wait_for(lambda line: line.startswith("READY test"))
    first = run.supervisor.pids()["client"]
    os.kill(first, signal.SIGKILL)
    run.wait_for(lambda line: line == "[captain bringup] client ready again")
    assert f"[captain bringup] client exited with code {-signal.SIGKILL}; respawning in 0.2 s" in run.lines
    assert run.supervisor.pids()["client"] not in (None, first)
    assert run.finish() == 0


def test_a_crash_without_respawn_is_reported_and_fails_the_exit_code() -> None:
    run = _Run([_child("robot"), _child("client")])
    run.wait_for(lambda line: line.startswith("READY test"))
    os.kill(run.supervisor.pids()["robot"], signal.SIGKILL)
    run.wait_for(lambda line: "robot exited with code" in line)
    time.sleep(0.3)
    assert run.supervisor.pids()["robot"] is None  # not restarted
    assert run.finish() == 1
    assert "[client] stopped client" in run.lines


def test_a_child_dying_before_ready_fails_the_bringup() -> None:
    bad = ChildSpec("broken", (sys.executable, "-c", "import sys; print('no config'); sys.exit(3)"))
    run = _Run([_child("robot", 0.5), bad])
    run.thread.join(timeout=30.0)
    assert run.code == 1
    assert "[broken] no config" in run.lines
    assert "FAILED: broken exited with code 3 before it was ready" in run.lines
    robot_pid = int(run.lines[0].split("pid ")[1].rstrip(")"))
    with pytest.raises(ProcessLookupError):  # the other child was stopped and reaped
        os.kill(robot_pid, 0)


def test_not_ready_in_time_names_the_waiting_children() -> None:
    run = _Run([_child("robot"), _child("slow", 30.0)], ready_timeout_s=1.5)
    run.thread.join(timeout=30.0)
    assert run.code == 1
    assert "FAILED: not ready after 1.5 s: slow" in run.lines


def test_no_children_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Supervisor([])
