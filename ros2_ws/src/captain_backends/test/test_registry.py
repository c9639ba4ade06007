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


def test_tasks_go_to_drivers_by_suite_name_or_declared_suite_patterns() -> None:
    from captain_backends.core.registry import driver_for_task

    assert driver_for_task("tabletop/pick_cube") == ("tabletop", {"task": "pick_cube"})
    assert driver_for_task("mock/empty") == ("mock", {})  # one scene, no task option
    # LIBERO declares task_suites = ("libero_*",) and takes the whole id as its task
    assert driver_for_task("libero_spatial/3") == ("libero", {"task": "libero_spatial/3"})
    assert driver_for_task("libero_goal_swap/1") == ("libero", {"task": "libero_goal_swap/1"})
    with pytest.raises(UnknownDriverError, match=r"no driver loads tasks of suite 'robocasa'.*drivers: .*mock"):
        driver_for_task("robocasa/0")
    with pytest.raises(UnknownDriverError, match="must look like <suite>/<task>"):
        driver_for_task("tabletop")


@pytest.mark.parametrize("name", ["mock", "tabletop", "libero", "xr1"])
def test_every_driver_declares_a_typed_config_that_lists_its_valid_options(name: str) -> None:
    from dataclasses import fields, is_dataclass

    from captain_backends.core import make_driver
    from captain_backends.core.errors import BackendError

    cls = driver_class(name)
    assert is_dataclass(cls.config_type)
    declared = [f.name for f in fields(cls.config_type)]
    with pytest.raises(BackendError) as info:
        make_driver(name, image_size=64)  # a typo of image_size_px
    message = str(info.value)
    assert "image_size" in message and all(k in message for k in declared), message


def test_option_values_are_type_checked() -> None:
    from captain_backends.core.config import DriverConfigError
    from captain_backends.core.mock import MockConfig, MockDriver

    with pytest.raises(DriverConfigError, match=r"option 'image_size_px' of driver 'mock' must be int, got str '64'"):
        MockDriver(image_size_px="64")
    with pytest.raises(DriverConfigError, match=r"unknown option\(s\) 'task' of driver 'mock'"):
        MockDriver(task="empty")
    with pytest.raises(DriverConfigError, match="not both"):
        MockDriver(MockConfig(), image_size_px=64)
    assert MockDriver(image_size_px=64, cache_dir=None).config == MockConfig(image_size_px=64)
    tabletop = driver_class("tabletop")(seed=None, settle_s=1)
    assert tabletop.config.seed is None and tabletop.config.settle_s == 1.0
