"""Drivers are found by name through the ``captain.drivers`` entry-point group.

A new driver needs no edit to existing code: its package declares, in setup.py or
pyproject.toml::

    entry_points={"captain.drivers": ["my_arm = my_pkg.my_driver:MyArmDriver"]}

and ``make_driver("my_arm", **config)`` constructs it.
"""

from __future__ import annotations

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
    """Construct (not yet configure) the driver registered under ``name``."""
    return driver_class(name)(**config)
