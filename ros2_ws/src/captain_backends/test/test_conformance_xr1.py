"""The XR1 driver passes the driver conformance kit against ``xr1_fake_hardware`` over
real DDS (a separate process in an isolated domain): the fake hardware's injected
wrench makes contact (guard) and an emergency force (fault), and switching its joint
states off makes the state stale."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest
from _xr1_ros import RobotProcess, Spy

from captain_backends.core.driver import RobotDriver
from captain_backends.testing import DriverConformance

pytestmark = pytest.mark.ros

FAKE = "captain_backends.nodes.xr1_fake_hardware"


@pytest.fixture(scope="module")
def robot() -> Iterator[Spy]:
    """The fake hardware and a spy node that sets its parameters, in an isolated domain
    for this module (localhost discovery)."""
    from captain_perception.nodes.dds_profile import fresh_domain

    saved = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}
    with fresh_domain() as did:
        os.environ["ROS_DOMAIN_ID"] = str(did)
        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        hw = RobotProcess(FAKE, {"time_constant_s": 0.03, "camera_rate_hz": 10.0})
        spy = Spy()
        try:
            yield spy
        finally:
            spy.close()
            hw.stop()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class TestXR1Conformance(DriverConformance):
    driver_name = "xr1"
    #: the scheduling stalls of a loaded shared machine stay below this staleness limit
    driver_options: ClassVar[dict[str, Any]] = {"safety": {"stale_state_timeout_s": 0.5}}
    stale_state_timeout_s = 0.5

    @pytest.fixture(autouse=True)
    def _robot(self, robot: Spy) -> Iterator[None]:
        self.spy = robot
        yield
        robot.set_parameters("xr1_fake_hardware", {"injected_force_n": [0.0, 0.0, 0.0],
                                                   "publish_joint_states": True})

    def make_contact(self, driver: RobotDriver) -> tuple[np.ndarray, float]:
        # 30 N: above the guard, below the 120 N emergency limit
        self.spy.set_parameters("xr1_fake_hardware", {"injected_force_n": [0.0, 0.0, 30.0]})
        return np.asarray(driver.read_state().joint_positions_rad), 20.0

    def induce_fault(self, driver: RobotDriver) -> bool:
        self.spy.set_parameters("xr1_fake_hardware", {"injected_force_n": [0.0, 90.0, 90.0]})  # 127 N
        return True

    def remove_fault_cause(self, driver: RobotDriver) -> None:
        self.spy.set_parameters("xr1_fake_hardware", {"injected_force_n": [0.0, 0.0, 0.0]})

    def stop_state_updates(self, driver: RobotDriver) -> bool:
        self.spy.set_parameters("xr1_fake_hardware", {"publish_joint_states": False})
        return True

    def resume_state_updates(self, driver: RobotDriver) -> None:
        self.spy.set_parameters("xr1_fake_hardware", {"publish_joint_states": True})
