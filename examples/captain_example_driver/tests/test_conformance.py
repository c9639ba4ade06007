"""The example arm against CaPtain's driver conformance kit: these few lines are all a
driver package needs (the hooks let the kit make contact, push the arm past its
emergency force and stop the controller's state stream)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from captain_example_driver.driver import ExampleArmDriver

from captain_backends.testing import DriverConformance


class TestExampleArmConformance(DriverConformance):
    driver_name = "example_arm"
    driver_options: ClassVar[dict[str, Any]] = {"stale_state_timeout_s": 0.1}
    stale_state_timeout_s = 0.1

    def make_contact(self, driver: ExampleArmDriver) -> tuple[np.ndarray, float]:
        # lean the shoulder past the table (wall_rad = 0.9)
        return np.asarray(driver.read_state().joint_positions_rad) + np.array([0.0, 1.2, 0.0]), 20.0

    def induce_fault(self, driver: ExampleArmDriver) -> bool:
        driver.box.external_force_n = 500.0  # beyond emergency_force_n
        return True

    def remove_fault_cause(self, driver: ExampleArmDriver) -> None:
        driver.box.external_force_n = 0.0

    def stop_state_updates(self, driver: ExampleArmDriver) -> bool:
        driver.box.streaming = False
        return True

    def resume_state_updates(self, driver: ExampleArmDriver) -> None:
        driver.box.streaming = True
