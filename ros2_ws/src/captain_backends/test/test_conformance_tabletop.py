"""The MuJoCo tabletop driver passes the driver conformance kit: the arm leaning forward
from home strikes the table or a cube (the guard check), and an absurd generalised
force on the arm makes MuJoCo's accelerations blow up (the fault check)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from captain_backends.core.driver import RobotDriver
from captain_backends.testing import DriverConformance

pytestmark = pytest.mark.sim


class TestTabletopConformance(DriverConformance):
    driver_name = "tabletop"
    driver_options: ClassVar[dict[str, Any]] = {"task": "pick_cube", "seed": 0, "image_size_px": 64}

    def make_contact(self, driver: RobotDriver) -> tuple[np.ndarray, float]:
        target = np.asarray(driver.read_state().joint_positions_rad) + np.array([0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        return target, 20.0

    def induce_fault(self, driver: RobotDriver) -> bool:
        driver.mj_data.qfrc_applied[:7] = 1e12  # MuJoCo flags bad accelerations and resets its state
        return True

    def remove_fault_cause(self, driver: RobotDriver) -> None:
        driver.mj_data.qfrc_applied[:] = 0.0
