"""The driver as the host shares it between threads. ROS-free.

``DriverThread`` runs the thread-bound driver calls (building, lifecycle, resets, camera
renders) on one long-lived thread; ``LockedDriver`` puts one re-entrant lock around every
driver access and paces a simulated driver to ``sim_speed`` times real time.

Readers that only publish (``/joint_states``, ``/tf``) use ``LockedDriver.latest_state``,
which never waits for the lock: while a motion holds it, they get the reading the motion
loop itself took last, as ros2_control's joint_state_broadcaster publishes the state
interfaces that the controller manager's ``read()`` filled instead of reading the
hardware itself. A publisher that waited for the lock instead was woken at every release
of it by the motion loop (three per control cycle) and lost it again each time, and the
motion waited for it in turn: on the 2-core reference machine the publishing thread used
1.4 s of CPU in 10 s of motion (0.6 s without waiting) and a move of a 30-move sequence
over ROS took 327 ms (301 ms without waiting; 195 ms in process).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from captain_backends.core.driver import (
    AdvanceReport,
    CameraFrame,
    ForceGuard,
    JointCommand,
    LifecycleState,
    RobotDescription,
    RobotDriver,
    RobotState,
    TaskInfo,
)


class DriverThread:
    """One long-lived thread for the driver calls that are bound to the thread that made
    them: building, configuring, resetting and shutting a driver down, and rendering its
    cameras. An offscreen GL (EGL) context stays current in the thread that created it,
    so a renderer built in one thread cannot render from another; doing all of these on
    this thread keeps every driver's renderer usable whatever thread asks for a frame."""

    def __init__(self, name: str = "captain_driver") -> None:
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=self._mark)

    def _mark(self) -> None:
        self._thread = threading.current_thread()

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on the driver thread; its result or exception."""
        if threading.current_thread() is self._thread or self._closed:
            return fn(*args, **kwargs)
        return self._pool.submit(fn, *args, **kwargs).result()

    def close(self) -> None:
        """Let the thread end once its queued calls are done (later calls run inline)."""
        self._closed = True
        self._pool.shutdown(wait=False)


class LockedDriver(RobotDriver):
    """A driver behind one re-entrant lock: every method of the wrapped driver runs
    under it, so threads (a motion, sensor publishers, services) interleave between
    driver calls, never inside one. Lifecycle transitions, resets and camera captures
    also run on the host's ``DriverThread`` (renderers are bound to a thread). Other
    attributes are forwarded."""

    def __init__(self, inner: RobotDriver, thread: DriverThread, sim_speed: float = 0.0) -> None:
        super().__init__()
        self.inner = inner
        self.thread = thread
        self.lock = threading.RLock()
        self.simulated = inner.simulated
        self.control_period_s = inner.control_period_s
        #: a simulated driver advances at most this many times real time (0: unpaced)
        self.sim_speed = float(sim_speed) if inner.simulated else 0.0
        self._pace_origin: tuple[float, float] | None = None  # (wall s, driver s) of the pacing reference
        self._driver_s = 0.0
        self._latest: RobotState | None = None  # the last reading of anyone, None after a reset
        self._latest_wall_s = 0.0  # when it was taken (time.monotonic)
        self._description: RobotDescription | None = None  # kept until the next lifecycle change or reset

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def _on_thread(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        def locked() -> Any:
            with self.lock:
                return fn(*args, **kwargs)

        return self.thread.run(locked)

    @property
    def lifecycle_state(self) -> LifecycleState:
        """The wrapped driver's lifecycle state."""
        return self.inner.lifecycle_state

    def _changing(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A lifecycle transition or reset on the driver thread: the kept reading and
        description are dropped before it starts and after it ends."""
        def forgetting() -> Any:
            self._latest, self._description = None, None
            try:
                return fn(*args, **kwargs)
            finally:
                self._latest, self._description = None, None

        return self._on_thread(forgetting)

    def configure(self) -> None:
        self._changing(self.inner.configure)
        self.control_period_s = self.inner.control_period_s

    def activate(self) -> None:
        self._changing(self.inner.activate)

    def deactivate(self) -> None:
        self._changing(self.inner.deactivate)

    def shutdown(self) -> None:
        self._changing(self.inner.shutdown)

    def description(self) -> RobotDescription:
        """The wrapped driver's description (kept from the first call after a lifecycle
        transition or reset, so publishers need not wait for the lock)."""
        description = self._description
        if description is None:
            with self.lock:
                description = self._description = self.inner.description()
        return description

    def camera_names(self) -> tuple[str, ...]:
        with self.lock:
            return self.inner.camera_names()

    def read_state(self) -> RobotState:
        with self.lock:
            state = self.inner.read_state()
            self._latest, self._latest_wall_s = state, time.monotonic()
            return state

    def latest_state(self, max_age_s: float = 0.0) -> RobotState | None:
        """A reading without waiting for the lock: a fresh one when no other thread holds
        the driver, otherwise the last one any caller took (a motion loop reads every
        control cycle; ``time_s`` says when it was taken). None while another thread holds
        the driver and no reading was taken since the last lifecycle transition or reset.

        ``max_age_s`` (s of wall time, simulated drivers only): a reading taken at most
        this long ago is returned as it is, without reading the driver again (publishers
        of one tick share one reading; during a motion they take the motion loop's).
        Stamps come from the reading's own simulated time, so they stay true."""
        latest = self._latest
        if (max_age_s > 0.0 and self.simulated and latest is not None
                and time.monotonic() - self._latest_wall_s <= max_age_s):
            return latest
        if not self.lock.acquire(blocking=False):
            return self._latest
        try:
            return self.read_state()
        finally:
            self.lock.release()

    def capture(self, names: tuple[str, ...] | None = None) -> dict[str, CameraFrame]:
        return self._on_thread(self.inner.capture, names)

    def send_command(self, command: JointCommand) -> JointCommand:
        with self.lock:
            return self.inner.send_command(command)

    def advance(self, guard: ForceGuard | None = None) -> AdvanceReport:
        with self.lock:
            report = self.inner.advance(guard)
        if self.sim_speed > 0.0:
            self._pace(float(report.duration_s))
        return report

    def _pace(self, duration_s: float) -> None:
        """Sleep (outside the lock) so driver time runs at most ``sim_speed`` times the wall
        clock; after a pause longer than 0.5 s the reference restarts instead of bursting."""
        now = time.monotonic()
        self._driver_s += duration_s
        if self._pace_origin is None:
            self._pace_origin = (now, self._driver_s - duration_s)
        wall0, driver0 = self._pace_origin
        due = wall0 + (self._driver_s - driver0) / self.sim_speed
        if now - due > 0.5:
            self._pace_origin = (now, self._driver_s)
        elif due > now:
            time.sleep(due - now)

    def hold(self) -> JointCommand:
        with self.lock:
            return self.inner.hold()

    # simulated drivers only
    def reset(self, seed: int | None = None, init_state: int | None = None) -> TaskInfo:
        return self._changing(self.inner.reset, seed=seed, init_state=init_state)

    def task_info(self) -> TaskInfo:
        with self.lock:
            return self.inner.task_info()

    def check_success(self) -> bool:
        with self.lock:
            return bool(self.inner.check_success())

    def snapshot(self) -> Any:
        with self.lock:
            return self.inner.snapshot()
