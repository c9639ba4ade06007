"""Drivers are found by name through the captain.drivers entry-point group."""

from __future__ import annotations

import pytest

from captain_backends.core import (
    LifecycleState,
    RobotDriver,
    UnknownDriverError,
    available_drivers,
    driver_class,
)
from captain_backends.core.errors import DriverStateError


def test_builtin_drivers_are_registered() -> None:
    names = available_drivers()
    for name in ("mock", "tabletop", "libero"):
        assert name in names
    for name in names:
        assert issubclass(driver_class(name), RobotDriver)


def test_unknown_driver_lists_the_registered_ones() -> None:
    with pytest.raises(UnknownDriverError) as info:
        driver_class("ur5_typo")
    assert "mock" in str(info.value) and "captain.drivers" in str(info.value)


def test_lifecycle_is_enforced_by_the_base_class() -> None:
    driver = driver_class("mock")()
    assert driver.lifecycle_state is LifecycleState.UNCONFIGURED
    with pytest.raises(DriverStateError, match="needs state inactive"):
        driver.activate()
    driver.configure()
    assert driver.lifecycle_state is LifecycleState.INACTIVE
    driver.activate()
    assert driver.lifecycle_state is LifecycleState.ACTIVE
    driver.shutdown()
    assert driver.lifecycle_state is LifecycleState.FINALIZED
    driver.shutdown()  # idempotent
