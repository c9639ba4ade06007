"""What the XR1 driver needs from a transport, stated without ROS.

The driver's safety and limiting logic is ROS-free; the transport moves messages. The
ROS 2 implementation is ``captain_backends.nodes.xr1_transport.RosXR1Transport`` (its
own rclpy context, node and executor thread); ``default_transport_factory`` imports it
only when a driver is configured, so this core stays importable without rclpy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from captain_backends.core.xr1.config import XR1Config
from captain_backends.core.xr1.state_buffer import StateBuffer


class XR1Transport(Protocol):
    """Delivers readings into a ``StateBuffer`` and publishes commands."""

    def start(self, buffer: StateBuffer) -> None:
        """Connect: subscribe every configured topic, pushing readings into ``buffer``."""

    def drain(self, timeout_s: float) -> bool:
        """Store into the buffer every reading received so far that is not stored yet;
        False when that did not finish within ``timeout_s`` (s)."""

    def publish_arm(self, positions_rad: np.ndarray, time_from_start_s: float) -> None:
        """Send arm joint position targets (configured joint order), rad."""

    def publish_gripper(self, positions: np.ndarray) -> None:
        """Send gripper joint position targets (configured joint order)."""

    def command_subscriber_count(self) -> int:
        """Subscriptions matched by the arm command publisher (the controller, any recorders)."""

    def where(self) -> str:
        """A human-readable location of the robot's topics (for error messages)."""

    def stop(self) -> None:
        """Disconnect and release every resource (idempotent)."""


TransportFactory = Callable[[XR1Config], XR1Transport]


def default_transport_factory(config: XR1Config) -> XR1Transport:
    """The ROS 2 transport (imports rclpy)."""
    from captain_backends.nodes.xr1_transport import RosXR1Transport

    return RosXR1Transport(config)
