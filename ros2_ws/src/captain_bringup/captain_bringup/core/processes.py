"""Run a stack's node groups as child processes, as ``ros2 launch`` does. ROS-free.

``Supervisor`` starts one OS process per ``ChildSpec`` (in the given order, all at
once; each child in a process group of its own, so a Ctrl-C in a terminal reaches only
the supervisor, which then stops the children in reverse start order: the clients
first, the harness (it holds the arm and releases the driver) before the robot or its
simulator). Every line a child prints is echoed as ``[<name>] <line>``; a child says it
is up by printing a line starting with ``READY``. Once every child has, the supervisor
prints its own ``READY`` line.

A child that exits while the stack runs is reported (``[captain bringup] <name> (pid N)
exited with code C``) and started again after ``respawn_delay_s`` when its spec says
``respawn`` (``ros2 launch``'s ``respawn=True``); otherwise the rest keeps running and
the supervisor's exit code becomes 1. A child that exits before it was ready, without
respawn, fails the bringup.

SIGINT or SIGTERM to the supervisor: SIGINT to each child in reverse order, waiting up
to ``stop_timeout_s`` for each (then SIGKILL). Exit code 0 after a clean stop.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ChildSpec:
    """One child process.

    Attributes:
        name: how its lines and reports are labelled (the node group's name).
        argv: the command line.
        respawn: start it again when it exits while the stack runs.
        respawn_delay_s: wait before starting it again, s.
    """

    name: str
    argv: tuple[str, ...]
    respawn: bool = False
    respawn_delay_s: float = 2.0


@dataclass
class _Child:
    spec: ChildSpec
    proc: subprocess.Popen | None = None
    ready: bool = False
    starts: int = 0
    restart_at_s: float | None = None
    reader: threading.Thread | None = None
    exits: list[int] = field(default_factory=list)


class Supervisor:
    """Starts, watches and stops the child processes of one bringup (module docstring).

    Args:
        children: the processes, in start order.
        env: their environment (default: this process's).
        echo: where lines go (default ``print`` with flush).
        label: what the READY line names.
        stop_timeout_s: per child, the wait after SIGINT before SIGKILL, s.
    """

    def __init__(self, children: Sequence[ChildSpec], *, env: Mapping[str, str] | None = None,
                 echo: Callable[[str], None] | None = None, label: str = "", stop_timeout_s: float = 15.0) -> None:
        if not children:
            raise ValueError("a bringup needs at least one child process")
        self.children = [_Child(spec) for spec in children]
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        self.echo = echo or (lambda line: print(line, flush=True))
        self.label = label or ", ".join(c.name for c in children)
        self.stop_timeout_s = float(stop_timeout_s)
        self._events: queue.Queue[tuple[str, _Child, str]] = queue.Queue()
        self.crashed: list[str] = []

    # ----------------------------------------------------------------- children
    def _start(self, child: _Child) -> None:
        child.ready = False
        child.restart_at_s = None
        child.starts += 1
        proc = subprocess.Popen(child.spec.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=self.env, process_group=0, bufsize=1)
        child.proc = proc
        again = " again" if child.starts > 1 else ""
        self.echo(f"[captain bringup] started {child.spec.name}{again} (pid {proc.pid})")
        child.reader = threading.Thread(target=self._read, args=(child, proc), name=f"{child.spec.name}_output",
                                        daemon=True)
        child.reader.start()

    def _read(self, child: _Child, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self._events.put(("line", child, line.rstrip("\n")))
        code = proc.wait()
        self._events.put(("exit", child, str(code)))

    def _handle(self, kind: str, child: _Child, text: str) -> str | None:
        """Echo a line / react to an exit; returns a failure message that ends the bringup."""
        if kind == "line":
            self.echo(f"[{child.spec.name}] {text}")
            if text.startswith("READY") and not child.ready:
                child.ready = True
                if child.starts > 1:
                    self.echo(f"[captain bringup] {child.spec.name} ready again")
            return None
        code = int(text)
        child.exits.append(code)
        was_ready = child.ready
        child.ready = False
        child.proc = None
        if child.spec.respawn:
            child.restart_at_s = time.monotonic() + child.spec.respawn_delay_s
            self.echo(f"[captain bringup] {child.spec.name} exited with code {code}; "
                      f"respawning in {child.spec.respawn_delay_s:g} s")
            return None
        self.crashed.append(child.spec.name)
        self.echo(f"[captain bringup] {child.spec.name} exited with code {code} (no respawn)")
        if not was_ready:
            return f"{child.spec.name} exited with code {code} before it was ready"
        return None

    def _stop_all(self) -> None:
        for child in reversed(self.children):
            proc = child.proc
            if proc is None or proc.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.echo(f"[captain bringup] {child.spec.name} did not stop within {self.stop_timeout_s:g} s; "
                          "killing it")
                proc.kill()
                proc.wait()
        for child in self.children:
            if child.reader is not None:
                child.reader.join(timeout=2.0)
        # the last lines the children printed while stopping
        while True:
            try:
                kind, child, text = self._events.get_nowait()
            except queue.Empty:
                break
            if kind == "line":
                self.echo(f"[{child.spec.name}] {text}")

    # ---------------------------------------------------------------------- run
    def run(self, ready_timeout_s: float = 300.0, stop: threading.Event | None = None,
            on_ready: Callable[[], None] | None = None) -> int:
        """Start every child, print READY once all are ready, supervise until SIGINT /
        SIGTERM (or ``stop`` is set); returns the exit code (0 clean, 1 failure or a
        crashed child without respawn)."""
        started = time.monotonic()
        stop = stop or threading.Event()
        in_main = threading.current_thread() is threading.main_thread()
        previous = {}
        if in_main:
            previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
        code = 0
        announced = False
        try:
            for child in self.children:
                self._start(child)
            deadline = started + ready_timeout_s
            while not stop.is_set():
                try:
                    kind, child, text = self._events.get(timeout=0.05)
                except queue.Empty:
                    kind = ""
                if kind:
                    failure = self._handle(kind, child, text)
                    if failure:
                        self.echo(f"FAILED: {failure}")
                        code = 1
                        break
                now = time.monotonic()
                for child in self.children:
                    if child.restart_at_s is not None and now >= child.restart_at_s:
                        self._start(child)
                if not announced:
                    if all(c.ready for c in self.children):
                        announced = True
                        self.echo(f"READY {self.label} ({now - started:.2f} s)")
                        if on_ready is not None:
                            on_ready()
                    elif now > deadline:
                        waiting = [c.spec.name for c in self.children if not c.ready]
                        self.echo(f"FAILED: not ready after {ready_timeout_s:g} s: {', '.join(waiting)}")
                        code = 1
                        break
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if code == 0 and self.crashed:
            code = 1
        return code

    def pids(self) -> dict[str, int | None]:
        """The current pid of each child (None while not running)."""
        return {c.spec.name: (c.proc.pid if c.proc is not None else None) for c in self.children}
