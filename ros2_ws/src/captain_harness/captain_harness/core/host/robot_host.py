"""One driver and one ``RobotAPI``, as the harness node hosts them. ROS-free.

``RobotHost`` builds a registered driver, takes it through its lifecycle and registers
the same primitives the in-process episode backend registers (motion, state and
planning calls from ``MotionPrimitives``; perception and measurement calls when
``captain_perception`` provides them). Every call of the node's action servers and
services goes through this one ``RobotAPI``, so observation handles and detection ids
are shared between them, and a call on a given state returns the same result dict and
receipt as the in-process API would.

Thread safety: the driver is wrapped in ``LockedDriver`` (one re-entrant lock around
every driver access), so sensor publishers may read states and render cameras between
the control periods of a running motion. Episode resets swap the driver and API under
the host's own lock.

Episodes: ``reset_episode`` gives a simulated robot a fresh driver for the requested
task and initial state (built exactly as the in-process backend builds it) and fresh
primitives whose frames go to the episode's workspace; a real robot keeps its driver
and scene and gets fresh primitives.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from captain_backends.core.driver import LifecycleState, RobotDriver, SimulatedDriver, TaskInfo
from captain_backends.core.errors import BackendError
from captain_backends.core.registry import available_drivers, driver_class
from captain_harness.core.api import RobotAPI
from captain_harness.core.budget import Budget, BudgetLimits
from captain_harness.core.errors import HarnessError
from captain_harness.core.host.call_specs import describe_calls
from captain_harness.core.host.locked_driver import DriverThread, LockedDriver
from captain_harness.core.motion_config import MotionConfig
from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt

#: Budget of the harness's own API: the episode budget is kept by whoever runs the
#: episode (the in-process runner, or the remote ``robot`` client); the harness never
#: refuses a call for budget reasons of its own.
UNLIMITED = BudgetLimits(max_requests=2**31 - 1, max_physical_actions=2**31 - 1, max_wall_time_s=1e12)


class HostError(HarnessError):
    """The host cannot build or reset its driver; the message says what to change."""

    def __init__(self, message: str) -> None:
        super().__init__(message, FailureCategory.NOT_AVAILABLE)


@dataclass
class HostSettings:
    """What the host builds.

    Attributes:
        driver: registered driver name (``mock``, ``tabletop``, ``libero``, ``xr1``, ...).
        task: the driver's task (``cube_on_plate``, ``libero_spatial/0``; "" = default).
        init_state: official initial-state index (-1: the driver's default).
        seed: layout seed (-1: the driver's default).
        image_size_px: camera size of simulated drivers that take ``image_size_px``.
        driver_config_path: configuration file of real-robot drivers (xr1).
        sim_speed: simulated drivers advance at most this many times real time (0: unpaced).
        driver_options: further constructor options.
        namespace: ROS namespace handed to drivers that open their own ROS node (xr1).
        workspace_dir: where perception writes frames outside episodes (None: a temp dir).
        motion: motion thresholds, speeds and limits.
    """

    driver: str = "mock"
    task: str = ""
    init_state: int = -1
    seed: int = -1
    image_size_px: int = 512
    driver_config_path: str = ""
    sim_speed: float = 0.0
    driver_options: dict[str, Any] = field(default_factory=dict)
    namespace: str = ""
    workspace_dir: Path | None = None
    motion: MotionConfig = field(default_factory=MotionConfig)


def task_string(driver: str, task: str) -> str:
    """The ``<suite>/<task>`` name of a driver's task, as episodes name it
    (``tabletop`` + ``cube_on_plate`` -> ``tabletop/cube_on_plate``; LIBERO tasks are
    already ``libero_spatial/0``)."""
    if not task:
        return ""
    return task if "/" in task else f"{driver}/{task}"


def _driver_class(name: str) -> type[RobotDriver]:
    """The driver class registered as ``name``.

    Raises:
        HostError: no such driver; the message lists the registered ones.
    """
    try:
        return driver_class(name)
    except BackendError as exc:
        raise HostError(f"{exc}; set the harness parameter 'driver' to one of: {', '.join(available_drivers())}"
                        ) from exc


def _construct(name: str, options: dict[str, Any], extra: dict[str, Any]) -> RobotDriver:
    """Construct a registered driver: the episode's options (task, start state) where its
    typed config declares them, and every option of ``extra`` (the driver refuses an
    unknown one with the list of valid ones)."""
    cls = _driver_class(name)
    accepted = cls.config_keys()
    return cls(**{k: v for k, v in options.items() if k in accepted}, **extra)


@dataclass
class EpisodeStart:
    """What ``reset_episode`` returns: the loaded task and the frames captured at reset
    (workspace-relative file names; empty when the API has an ``observe`` call)."""

    task: TaskInfo
    initial_images: list[str]


class RobotHost:
    """The harness's driver and robot API (see the module docstring)."""

    def __init__(self, settings: HostSettings) -> None:
        self.settings = settings
        self.lock = threading.RLock()
        self.driver_thread = DriverThread()
        self.driver: LockedDriver | None = None
        self.api: RobotAPI | None = None
        self.motion: Any = None
        self.task: TaskInfo | None = None
        self.workspace = Path(settings.workspace_dir) if settings.workspace_dir else None
        self._own_workspace = False
        self.last_error = ""
        self.started_at_s: float | None = None
        #: called with the new driver after every (re)build (e.g. to re-arm publishers)
        self.on_driver_change: Callable[[LockedDriver], None] | None = None

    # ------------------------------------------------------------------ building
    def _driver_options(self, driver: str, task: str, init_state: int, seed: int) -> tuple[dict, dict]:
        s = self.settings
        options: dict[str, Any] = {}
        if task:
            options["task"] = task
        if init_state >= 0:
            options["init_state"] = init_state
        if seed >= 0:
            options["seed"] = seed
        extra = dict(s.driver_options) if driver == s.driver else {}
        accepted = _driver_class(driver).config_keys()
        if "image_size_px" in accepted and "image_size_px" not in extra:
            extra["image_size_px"] = s.image_size_px
        if "config" in accepted and s.driver_config_path and "config" not in extra:
            extra["config"] = s.driver_config_path
        if "namespace" in accepted and s.namespace and "namespace" not in extra:
            extra["namespace"] = s.namespace.strip("/")
        return options, extra

    def _build(self, driver_name: str, task: str, init_state: int, seed: int,
               workspace: Path, activate: bool = True) -> tuple[LockedDriver, RobotAPI, Any, TaskInfo | None]:
        """A configured, reset and active driver with a fresh API: construct, configure,
        reset, build the API (kinematic model, collision model, perception), and only then
        activate, as ros2_control activates hardware after the controllers are loaded; the
        model building holds the interpreter for a second or more, and nothing must be
        streaming (or judged stale) meanwhile."""
        options, extra = self._driver_options(driver_name, task, init_state, seed)
        inner = self.driver_thread.run(_construct, driver_name, options, extra)
        driver = LockedDriver(inner, self.driver_thread, self.settings.sim_speed)
        try:
            driver.configure()
            info = None
            if isinstance(inner, SimulatedDriver):
                info = driver.reset(seed=seed if seed >= 0 else None,
                                    init_state=init_state if init_state >= 0 else None)
            api, motion = self._make_api(driver, workspace, task, init_state, seed)
            if activate:
                driver.activate()
        except BaseException:
            driver.shutdown()
            raise
        return driver, api, motion, info

    def _make_api(self, driver: LockedDriver, workspace: Path, task: str, init_state: int,
                  seed: int) -> tuple[RobotAPI, Any]:
        from captain_harness.core.episode.backend import BackendRequest, register_primitive_providers
        from captain_harness.core.motion import MotionPrimitives

        api = RobotAPI(budget=Budget(UNLIMITED))
        motion = MotionPrimitives(driver, self.settings.motion)
        motion.register(api)
        request = BackendRequest(task=task or "robot/default", init_state=init_state,
                                 seed=seed if seed >= 0 else None, workspace=workspace,
                                 session_workspace=str(workspace), episode_id="harness")
        # everything built before activation, the self-filter's meshes included (see prepare)
        register_primitive_providers(api, driver, request, prepare=True)
        return api, motion

    def _default_workspace(self) -> Path:
        if self.workspace is None:
            self.workspace = Path(tempfile.mkdtemp(prefix="captain_harness_"))
            self._own_workspace = True
        self.workspace.mkdir(parents=True, exist_ok=True)
        return self.workspace

    def start(self) -> None:
        """``configure()`` then ``activate()``.

        Raises:
            HostError / BackendError: the driver cannot be built, reached or activated (the
            message says why); ``start`` may be called again later.
        """
        self.configure()
        self.activate()

    def configure(self) -> None:
        """Build and configure the configured driver and its API (the driver stays
        inactive: states readable, no commands); nothing to do when already built.

        Raises:
            HostError / BackendError: the driver cannot be built or reached (the message
            says why); ``configure`` may be called again later.
        """
        s = self.settings
        with self.lock:
            if self.api is not None:
                return
            try:
                driver, api, motion, info = self._build(s.driver, s.task, s.init_state, s.seed,
                                                        self._default_workspace(), activate=False)
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                raise
            self._swap(driver, api, motion, info)
            self.started_at_s = time.monotonic()
            self.last_error = ""

    def activate(self) -> None:
        """Activate the configured driver (commands accepted); a no-op when active.

        Raises:
            HostError: not configured. BackendError / DriverFault: the driver refuses
            (e.g. the XR1 driver while its readings are stale); it stays inactive.
        """
        with self.lock:
            driver = self.driver
            if driver is None or self.api is None:
                raise HostError("the driver is not configured; configure it first")
            if driver.lifecycle_state is LifecycleState.ACTIVE:
                return
            try:
                driver.activate()
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                raise
            if self.motion is not None:
                self.motion.reset()
            self.last_error = ""

    def deactivate(self) -> None:
        """Stop a running motion, hold, and deactivate the driver (states stay readable);
        a no-op unless active."""
        self.cancel_and_hold()
        with self.lock:
            driver = self.driver
            if driver is not None and driver.lifecycle_state is LifecycleState.ACTIVE:
                driver.deactivate()

    def cleanup(self) -> None:
        """Deactivate and shut the driver down and drop the API (back to unconfigured;
        ``configure`` builds a fresh driver)."""
        self.deactivate()
        with self.lock:
            driver, self.driver, self.api, self.motion, self.task = self.driver, None, None, None, None
            if driver is not None:
                driver.shutdown()

    def current_fault(self) -> str:
        """The driver's latched fault (``RobotState.fault``), ``""`` when none or no driver."""
        driver = self.driver
        if driver is None or driver.lifecycle_state not in (LifecycleState.INACTIVE, LifecycleState.ACTIVE):
            return ""
        try:
            return driver.read_state().fault
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"

    def _swap(self, driver: LockedDriver, api: RobotAPI, motion: Any, info: TaskInfo | None) -> None:
        old = self.driver
        self.driver, self.api, self.motion = driver, api, motion
        self.task = info
        if self.on_driver_change is not None:
            self.on_driver_change(driver)
        if old is not None and old is not driver:
            old.shutdown()

    @property
    def ready(self) -> bool:
        """True once the driver is active and the API built."""
        d = self.driver
        return self.api is not None and d is not None and d.lifecycle_state is LifecycleState.ACTIVE

    @property
    def simulated(self) -> bool:
        """Whether the driver owns a simulator (tasks, success predicate, snapshot)."""
        return self.driver is not None and isinstance(self.driver.inner, SimulatedDriver)

    # ------------------------------------------------------------------ episodes
    def reset_episode(self, task: str = "", init_state: int = -1, seed: int = -1,
                      workspace: str | Path = "") -> EpisodeStart:
        """Start an episode: a fresh driver for ``task`` (simulated robots) or fresh
        primitives (real robots), frames going to ``workspace``.

        Raises:
            HostError: a task for a real robot, or a driver that cannot be built.
        """
        from captain_harness.core.episode.backend import driver_for_task

        ws = Path(workspace) if workspace else self._default_workspace()
        ws.mkdir(parents=True, exist_ok=True)
        with self.lock:
            if self.motion is not None:
                self.motion.request_cancel()
            if self.driver is not None and not self.simulated:
                if task:
                    raise HostError(f"the {self.settings.driver} driver drives a real robot and cannot load task "
                                    f"{task!r}; send an instruction instead of a task")
                self.motion.reset()
                api, motion = self._make_api(self.driver, ws, "", -1, seed)
                self._swap(self.driver, api, motion, None)
                return EpisodeStart(TaskInfo(task_id="", instruction=""), self._frames(ws))
            full = task or task_string(self.settings.driver, self.settings.task) or (
                self.task.task_id if self.task is not None else "")
            if not full:
                raise HostError("no task given and none loaded; send a task such as libero_spatial/0 or "
                                "tabletop/cube_on_plate")
            name, options = driver_for_task(full)
            driver, api, motion, info = self._build(name, options.get("task", ""), init_state, seed, ws)
            self._swap(driver, api, motion, info)
            return EpisodeStart(info or TaskInfo(task_id=full, instruction=""), self._frames(ws))

    def _frames(self, workspace: Path) -> list[str]:
        """The initial head and wrist frames, captured as the in-process runner does
        when the API has no ``observe`` call."""
        if self.api is None or "observe" in self.api.specs:
            return []
        from captain_harness.core.episode.runner import capture_frames

        try:
            return capture_frames(self.driver, workspace)
        except Exception:  # a robot without cameras starts the episode without frames
            return []

    def host_state(self, include_snapshot: bool) -> dict[str, Any]:
        """``available``, ``success`` and (when asked) ``snapshot`` (a plain dict)."""
        with self.lock:
            if not self.simulated:
                return {"available": False, "success": False, "snapshot": None,
                        "message": f"the {self.settings.driver} driver has no success predicate"}
            driver = self.driver
        success = bool(driver.check_success())
        snap = None
        if include_snapshot:
            raw = driver.snapshot()
            snap = raw.to_dict() if hasattr(raw, "to_dict") else raw
        return {"available": True, "success": success, "snapshot": snap, "message": ""}

    # --------------------------------------------------------------------- calls
    def call(self, name: str, args: tuple | list = (), kwargs: dict[str, Any] | None = None) -> CallOutcome:
        """One robot call through the API; never raises."""
        api = self.api
        if api is None:
            why = self.last_error or "the driver is still starting"
            result = fail(FailureCategory.NOT_AVAILABLE, f"{name}: the robot is not ready ({why}); try again")
            return CallOutcome(result, format_receipt(name, result))
        return api.call(name, tuple(args), dict(kwargs or {}))

    def physical(self, name: str) -> bool:
        """Whether ``name`` is a physical call of the API."""
        api = self.api
        spec = api.specs.get(name) if api is not None else None
        return bool(spec and spec.physical)

    @property
    def driver_name(self) -> str:
        """The registered name of the driver in use (an episode may have swapped the
        configured one, e.g. tabletop -> libero)."""
        driver = self.driver
        if driver is None:
            return self.settings.driver
        cls = type(driver.inner)
        # Looked up once per driver class: scanning the installed distributions' entry points
        # takes tens to hundreds of ms, and diagnostics ask for the name every second (a timer
        # callback that slow overruns its period and keeps rclpy's executor busy).
        # Only a match is kept: a lookup that failed (e.g. an entry point still being imported
        # by another thread) is tried again next time.
        cache: dict[type, str] = self.__dict__.setdefault("_driver_names", {})
        if cls not in cache:
            for name in available_drivers():
                with contextlib.suppress(Exception):
                    if driver_class(name) is cls:
                        cache[cls] = name
                        break
        return cache.get(cls, cls.__name__)

    def describe(self) -> dict[str, Any]:
        """``robot``, ``driver``, ``names`` and ``calls`` (see ``call_specs``)."""
        api = self.api
        if api is None:
            return {"robot": "", "driver": self.driver_name, "names": [], "calls": []}
        calls = describe_calls(api)
        return {"robot": self.motion.description.name if self.motion is not None else "",
                "driver": self.driver_name, "names": [c["name"] for c in calls], "calls": calls}

    def cancel_and_hold(self) -> None:
        """Stop a running motion (it holds) and command a hold."""
        motion, driver = self.motion, self.driver
        if motion is not None:
            motion.request_cancel()
        if driver is not None and driver.lifecycle_state is LifecycleState.ACTIVE:
            with contextlib.suppress(BackendError):
                driver.hold()

    def shutdown(self) -> None:
        """Hold the arm and shut the driver down (safe to call more than once)."""
        self.cancel_and_hold()
        with self.lock:
            if self.driver is not None:
                self.driver.shutdown()
        self.driver_thread.close()
        if self._own_workspace and self.workspace is not None:
            shutil.rmtree(self.workspace, ignore_errors=True)
            self._own_workspace = False


def task_json(info: TaskInfo) -> str:
    """A ``TaskInfo`` as JSON."""
    return json.dumps(asdict(info), default=str)


def task_from_json(text: str) -> TaskInfo:
    """Inverse of ``task_json`` (tuples restored)."""
    data = json.loads(text or "{}")
    return TaskInfo(task_id=str(data.get("task_id", "")), instruction=str(data.get("instruction", "")),
                    suite=str(data.get("suite", "")), init_state=int(data.get("init_state", -1)),
                    goals=tuple(data.get("goals", ())), objects=tuple(data.get("objects", ())),
                    extra=dict(data.get("extra") or {}))
