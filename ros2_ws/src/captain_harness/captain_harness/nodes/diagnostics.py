"""Diagnostics of the stack's nodes on ``diagnostics`` (diagnostic_msgs/DiagnosticArray).

Every node of the stack publishes its own statuses at ``diagnostics_rate_hz`` (as nodes
using diagnostic_updater do; an aggregator or ``rqt_robot_monitor`` gathers them):

* the harness: ``<node>: driver`` (driver name, lifecycle state, fault, task, control
  period; ERROR on a driver fault or a failed start, WARN while starting) and
  ``<node>: motion`` (the active goal and control-loop timing of the last motion:
  driver time, wall time, real-time factor, wall time per control period, largest gap
  between feedback messages);
* the episode runner: the running episode and the last outcome;
* the perception node: whether the harness is reachable and which services it serves.

``MotionTiming`` measures the control loop from the motion's feedback callbacks and
result (plain Python; only the publishing uses ROS messages).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.node import Node

OK = DiagnosticStatus.OK
WARN = DiagnosticStatus.WARN
ERROR = DiagnosticStatus.ERROR


@dataclass
class MotionTiming:
    """Control-loop timing of motions, from their feedback and results (thread-safe).

    Attributes:
        call: the last motion's call name.
        stopped_reason: its stop reason.
        driver_time_s: driver time the motion took (simulated or real seconds).
        wall_s: wall time the call took.
        control_periods: control periods executed (driver time / control period).
        max_feedback_gap_s: largest wall-clock gap between two feedback messages.
        motions: motions executed since start.
    """

    call: str = ""
    stopped_reason: str = ""
    driver_time_s: float = 0.0
    wall_s: float = 0.0
    control_periods: int = 0
    max_feedback_gap_s: float = 0.0
    motions: int = 0
    _started_s: float = 0.0
    _last_feedback_s: float = 0.0
    _gap_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def begin(self) -> None:
        """A motion starts."""
        now = time.monotonic()
        with self._lock:
            self._started_s = self._last_feedback_s = now
            self._gap_s = 0.0

    def feedback(self) -> None:
        """A feedback message was sent."""
        now = time.monotonic()
        with self._lock:
            self._gap_s = max(self._gap_s, now - self._last_feedback_s)
            self._last_feedback_s = now

    def end(self, call: str, result: dict[str, Any], control_period_s: float) -> None:
        """A motion ended with ``result`` (its ``value.duration_s`` is driver time)."""
        now = time.monotonic()
        value = result.get("value") if isinstance(result.get("value"), dict) else {}
        with self._lock:
            self.call = call
            self.stopped_reason = str(value.get("stopped_reason") or result.get("failure_category") or "ok")
            self.driver_time_s = float(value.get("duration_s") or 0.0)
            self.wall_s = now - self._started_s
            self.control_periods = round(self.driver_time_s / control_period_s) if control_period_s > 0 else 0
            self.max_feedback_gap_s = self._gap_s
            self.motions += 1

    def values(self) -> dict[str, Any]:
        """The figures as diagnostic key/values."""
        with self._lock:
            rtf = self.driver_time_s / self.wall_s if self.wall_s > 0 else 0.0
            per_period_ms = 1000.0 * self.wall_s / self.control_periods if self.control_periods else 0.0
            return {"motions": self.motions, "last_call": self.call, "last_stopped_reason": self.stopped_reason,
                    "last_driver_time_s": round(self.driver_time_s, 4), "last_wall_s": round(self.wall_s, 4),
                    "last_real_time_factor": round(rtf, 3), "last_control_periods": self.control_periods,
                    "last_wall_per_control_period_ms": round(per_period_ms, 3),
                    "last_max_feedback_gap_s": round(self.max_feedback_gap_s, 4)}


def status(name: str, level: int, message: str, values: dict[str, Any], hardware_id: str = "") -> DiagnosticStatus:
    """A DiagnosticStatus with the values as strings."""
    return DiagnosticStatus(level=bytes([level]) if isinstance(level, int) else level, name=name,
                            message=message, hardware_id=hardware_id,
                            values=[KeyValue(key=str(k), value=str(v)) for k, v in values.items()])


class DiagnosticsPublisher:
    """Publishes the statuses returned by ``collect()`` at ``rate_hz`` on ``diagnostics``."""

    def __init__(self, node: Node, collect, rate_hz: float, callback_group=None) -> None:
        self.node = node
        self.collect = collect
        self.publisher = node.create_publisher(DiagnosticArray, "diagnostics", 10)
        # a steady clock: diagnostics keep coming while a simulator's /clock stands still
        # (with use_sim_time a node-clock timer would stop with it); stamps use the node clock
        self.timer = node.create_timer(1.0 / rate_hz, self.publish, callback_group=callback_group,
                                       clock=Clock(clock_type=ClockType.STEADY_TIME))

    def publish(self) -> None:
        """Publish one DiagnosticArray now."""
        msg = DiagnosticArray()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.status = list(self.collect())
        self.publisher.publish(msg)
