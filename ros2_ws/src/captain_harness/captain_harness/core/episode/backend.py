"""What an episode runs against: a ``Backend`` (the robot API with its primitives, the
task, the host success predicate) built per episode by a factory.

The runner calls ``factory(BackendRequest)`` in the process that runs the episode, so a
factory must be importable by reference (``"package.module:function"``) to be used by
parallel rollouts. ``default_backend`` builds a registered driver (``mock``,
``tabletop``, ``libero``) with the motion primitives, and the perception primitives
when their package provides them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from captain_harness.core.api import RobotAPI
from captain_harness.core.episode.errors import EpisodeError

#: Suites whose tasks run on the LIBERO driver, and how many tasks each has.
LIBERO_SUITE_SIZES = {"libero_spatial": 10, "libero_object": 10, "libero_goal": 10, "libero_10": 10,
                      "libero_90": 90}


@dataclass
class BackendRequest:
    """What the runner asks a backend factory for.

    Attributes:
        task: ``"<suite>/<task>"``, e.g. ``"libero_spatial/0"`` or ``"tabletop/cube_on_plate"``.
        init_state: official initial-state index (-1: the backend's default).
        seed: random seed of the layout (None: the backend's default).
        workspace: where the backend saves frames on the host: the episode's host-only
            published folder, which the session reads and copies into its own workspace
            (never the session-writable workspace itself).
        session_workspace: the session's workspace as the session sees it (for paths in
            results; file names the backend returns are names in that workspace).
        episode_id: the episode's id.
        driver_options: options of the driver's typed config given for the batch
            (``--driver-option``, a layout's flags), laid over the task's and the
            factory's; the driver refuses an unknown one with the list of valid ones.
    """

    task: str
    init_state: int
    seed: int | None
    workspace: Path
    session_workspace: str
    episode_id: str
    driver_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Backend:
    """One episode's robot side.

    Attributes:
        api: the robot API with the primitives registered (the runner adds ``finish``).
        task: the task description (``TaskInfo``: ``instruction``, ``goals``, ``suite``,
            ``task_id``, ``init_state``, ``extra``).
        check_success: the host success predicate on the current state (None if the
            backend has none, e.g. a real robot).
        host_context: host-only context for privileged policies (e.g. the simulator
            snapshot); never reaches the session.
        initial_images: returns workspace-relative file names of the initial head and wrist
            frames (None: the runner calls ``observe`` or captures them itself).
        driver: the driver, when there is one (used to capture the initial frames).
        close: releases the backend.
    """

    api: RobotAPI
    task: Any
    check_success: Callable[[], bool] | None = None
    host_context: Callable[[], Any] | None = None
    initial_images: Callable[[], list[str]] | None = None
    driver: Any = None
    close: Callable[[], None] | None = None


BackendFactory = Callable[[BackendRequest], Backend]


def resolve_factory(factory: BackendFactory | str | None) -> BackendFactory:
    """A factory given as a callable or ``"module:function"`` (None: ``default_backend``)."""
    if factory is None:
        return default_backend
    if callable(factory):
        return factory
    module, _, attr = str(factory).partition(":")
    if not attr:
        raise EpisodeError(f"backend factory {factory!r} must look like package.module:function")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise EpisodeError(f"cannot load backend factory {factory!r}: {exc}") from exc


def factory_reference(factory: BackendFactory | str | None) -> str:
    """The ``"module:function"`` reference of a factory (for worker processes)."""
    if factory is None:
        return f"{__name__}:default_backend"
    if isinstance(factory, str):
        return factory
    module, name = getattr(factory, "__module__", None), getattr(factory, "__qualname__", "")
    if not module or "." in name or "<" in name:
        raise EpisodeError("parallel rollouts need a backend factory importable as module:function, "
                           f"not {factory!r}")
    return f"{module}:{name}"


def split_task(task: str) -> tuple[str, str]:
    """``"libero_spatial/0"`` -> ``("libero_spatial", "0")``."""
    suite, sep, name = task.partition("/")
    if not sep or not suite or not name:
        raise EpisodeError(f"task {task!r} must look like <suite>/<task>, e.g. libero_spatial/0 or "
                           "tabletop/cube_on_plate or mock/empty")
    return suite, name


def driver_for_task(task: str) -> tuple[str, dict[str, Any]]:
    """The registered driver name and the constructor options that load a task (the
    entry-point registry decides: the driver named like the suite, or the one whose
    ``task_suites`` match it)."""
    from captain_backends.core.registry import driver_for_task as registered_driver_for_task

    split_task(task)
    return registered_driver_for_task(task)


def default_backend(request: BackendRequest, driver_options: Mapping[str, Any] | None = None) -> Backend:
    """A registered driver with the motion primitives (and the perception primitives when
    ``captain_perception`` provides them). The request's start state goes to the
    constructor where the driver's typed config declares ``init_state`` / ``seed`` (and
    to ``reset()`` in any case); ``driver_options`` are laid over those of the task (e.g.
    a wide-layout start's randomisation flags) and all passed on: the driver refuses an
    unknown one with the list of valid ones."""
    from captain_backends.core.registry import driver_class
    from captain_harness.core.motion import MotionPrimitives

    name, options = driver_for_task(request.task)
    cls = driver_class(name)
    accepted = cls.config_keys()
    if request.init_state >= 0 and "init_state" in accepted:
        options["init_state"] = request.init_state
    if request.seed is not None and "seed" in accepted:
        options["seed"] = request.seed
    options.update(driver_options or {})
    options.update(request.driver_options)
    driver = cls(**options)
    driver.configure()
    task = driver.reset(seed=request.seed, init_state=request.init_state if request.init_state >= 0 else None)
    driver.activate()
    api = RobotAPI()
    MotionPrimitives(driver).register(api)
    register_primitive_providers(api, driver, request)
    return Backend(api=api, task=task, check_success=driver.check_success, host_context=driver.snapshot,
                   driver=driver, close=driver.shutdown)


#: Entry-point group of packages that add policy-facing primitives to the harness
#: (captain_perception registers its perception and measurement calls here). Each entry
#: is a factory ``(driver, workspace, robot_state) -> object with @primitive methods``.
PRIMITIVE_PROVIDERS_GROUP = "captain.primitives"


def register_primitive_providers(api: RobotAPI, driver: Any, request: BackendRequest,
                                 prepare: bool = False) -> list[str]:
    """Register the primitives of every installed provider (perception, measurement, ...)
    into ``api``; returns the provider names. Providers read the robot state the policy
    sees (``get_robot_state()``'s value, the motion layer's kinematics) without logging a
    call.

    ``prepare``: call each provider's ``prepare()`` (when it has one) before returning, so
    that work it would otherwise do in the background (perception loads the robot's meshes
    for its self-filter) is done now. A host that activates a real driver afterwards asks
    for it: that loading holds the interpreter, and the driver's receive thread could not
    store joint readings meanwhile (the staleness watchdog would judge our own stall)."""
    from importlib.metadata import entry_points

    state_spec = api.specs.get("get_robot_state")

    def robot_state() -> dict[str, Any]:
        return state_spec.fn().result["value"]

    names = []
    for ep in sorted(entry_points(group=PRIMITIVE_PROVIDERS_GROUP), key=lambda e: e.name):
        factory = ep.load()
        provider = factory(driver, request.workspace, robot_state if state_spec is not None else None)
        api.register_object(provider)
        if prepare and callable(getattr(provider, "prepare", None)):
            provider.prepare()
        names.append(ep.name)
    return names
