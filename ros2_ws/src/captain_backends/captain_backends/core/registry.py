"""Drivers are found by name through the ``captain.drivers`` entry-point group.

A new driver needs no edit to existing code: its package declares, in setup.py or
pyproject.toml::

    entry_points={"captain.drivers": ["my_arm = my_pkg.my_driver:MyArmDriver"]}

and ``make_driver("my_arm", **config)`` constructs it. Tasks (``"<suite>/<name>"``) go
to the driver registered under the suite's name, else to the one whose
``task_suites`` patterns match the suite (LIBERO: ``libero_*``); no driver is named
anywhere else.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from captain_backends.core.driver import RobotDriver
from captain_backends.core.errors import UnknownDriverError

ENTRY_POINT_GROUP = "captain.drivers"


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_drivers() -> list[str]:
    """Sorted names of every registered driver."""
    return sorted(_entry_points())


def driver_class(name: str) -> type[RobotDriver]:
    """The driver class registered under ``name``.

    Raises:
        UnknownDriverError: listing the registered names.
    """
    eps = _entry_points()
    if name not in eps:
        raise UnknownDriverError(
            f"no driver named {name!r}; registered drivers: {', '.join(sorted(eps)) or 'none'}"
            f" (entry-point group {ENTRY_POINT_GROUP!r})"
        )
    cls = eps[name].load()
    if not (isinstance(cls, type) and issubclass(cls, RobotDriver)):
        raise UnknownDriverError(f"entry point {name!r} -> {cls!r} is not a RobotDriver subclass")
    return cls


def make_driver(name: str, **config: Any) -> RobotDriver:
    """Construct (not yet configure) the driver registered under ``name``; every option
    goes to the constructor, which refuses unknown ones with the list of valid ones."""
    return driver_class(name)(**config)


def driver_for_suite(suite: str) -> str:
    """The registered driver that loads tasks of ``suite``: the driver of that name,
    else the one whose ``task_suites`` patterns match it.

    Raises:
        UnknownDriverError: no driver, or more than one, claims the suite.
    """
    eps = _entry_points()
    if suite in eps:
        return suite
    claims = sorted(name for name in eps
                    if any(fnmatchcase(suite, pattern) for pattern in driver_class(name).task_suites))
    if len(claims) == 1:
        return claims[0]
    if not claims:
        raise UnknownDriverError(
            f"no driver loads tasks of suite {suite!r}; registered drivers: {', '.join(sorted(eps)) or 'none'} "
            "(a driver loads the suite named like it, or those its task_suites patterns match)")
    raise UnknownDriverError(f"suite {suite!r} is claimed by several drivers: {', '.join(claims)}")


def driver_for_task(task: str) -> tuple[str, dict[str, Any]]:
    """The registered driver name and the constructor options that load ``task``
    (``"<suite>/<name>"``, e.g. ``"libero_spatial/0"`` or ``"tabletop/cube_on_plate"``).

    Raises:
        UnknownDriverError: a malformed task id, or no driver for its suite.
    """
    suite, sep, name = task.partition("/")
    if not sep or not suite or not name:
        raise UnknownDriverError(f"task {task!r} must look like <suite>/<task>, e.g. libero_spatial/0 or "
                                 "tabletop/cube_on_plate or mock/empty")
    driver = driver_for_suite(suite)
    return driver, driver_class(driver).task_options(suite, name)
