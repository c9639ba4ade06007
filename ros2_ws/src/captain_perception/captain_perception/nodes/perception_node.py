"""``perception_node``: the perception and measurement calls as ROS 2 services.

One service per call, ``perception/<call>`` and ``measurement/<call>`` (e.g.
``perception/observe``, ``perception/mark_point``,
``measurement/measure_object_geometry``), of type captain_interfaces/srv/RobotCall
(``args_json = {"args": [...], "kwargs": {...}}``; ``name`` may be left empty). The
calls are those the harness describes (``describe_robot``), so the services follow
whatever perception the harness's robot API has.

Where the calls run: in the harness node's one ``RobotAPI``, reached through its
``robot_call`` service. Perception shares state with the other calls (observation
handles and detection ids are used by measurement, planning and motion calls, frames
come from the driver the harness owns), so answering them anywhere else would split
that state; this way a perception call returns the same result dict and receipt over
ROS as in-process. The node adds one local service hop (about a millisecond).

Parameters: ``captain_perception.nodes.perception_params.SCHEMA``.
"""

from __future__ import annotations

import json
import threading
from functools import partial
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node

from captain_harness.core.results import CallOutcome, FailureCategory, fail, format_receipt
from captain_harness.nodes import diagnostics as diag
from captain_harness.nodes.messages import result_msg
from captain_harness.nodes.ros_params import declare_schema
from captain_interfaces.srv import DescribeRobot, RobotCall
from captain_perception.nodes.perception_params import SCHEMA


class PerceptionNode(Node):
    """The perception node (see the module docstring).

    Args:
        node_name: the node's name (its key in the parameter files).
        **kwargs: passed to ``rclpy.node.Node``.
    """

    #: threads of its MultiThreadedExecutor (captain_harness.nodes.hosting.make_executor): a
    #: forwarded call blocks its thread until the harness answers, and the answer itself
    #: needs a free thread; four let two calls and the diagnostics timer overlap.
    executor_threads = 4

    def __init__(self, node_name: str = "perception", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.params = declare_schema(self, SCHEMA)
        ns = self.params["harness_namespace"].rstrip("/")
        self._group = ReentrantCallbackGroup()
        self._harness_call = self.create_client(RobotCall, f"{ns}/robot_call" if ns else "robot_call",
                                                callback_group=self._group)
        self._describe = self.create_client(DescribeRobot, f"{ns}/describe_robot" if ns else "describe_robot",
                                            callback_group=self._group)
        self.served: dict[str, str] = {}
        self._discovered = threading.Event()
        self._pending: Any = None
        self._calls_answered = 0
        self._discovery = self.create_timer(self.params["discovery_period_s"], self._discover,
                                            callback_group=MutuallyExclusiveCallbackGroup())
        self._diagnostics = diag.DiagnosticsPublisher(self, self._statuses, self.params["diagnostics_rate_hz"],
                                                      MutuallyExclusiveCallbackGroup())

    @property
    def ready(self) -> bool:
        """True once the harness has described its calls and the services exist."""
        return self._discovered.is_set()

    def _discover(self) -> None:
        if self._discovered.is_set() or self._pending is not None or not self._describe.service_is_ready():
            return
        self._pending = self._describe.call_async(DescribeRobot.Request())
        self._pending.add_done_callback(self._on_described)

    def _on_described(self, future: Any) -> None:
        self._pending = None
        try:
            calls = json.loads(future.result().calls_json or "[]")
        except Exception as exc:
            self.get_logger().warning(f"describe_robot failed: {exc}", throttle_duration_sec=5.0)
            return
        if not calls:
            return  # the harness's driver is still starting
        groups = set(self.params["groups"])
        for entry in calls:
            if entry.get("group") in groups and not entry.get("physical") and entry["name"] not in self.served:
                service = f"{entry['group']}/{entry['name']}"
                self.create_service(RobotCall, service, partial(self._on_call, entry["name"]),
                                    callback_group=self._group)
                self.served[entry["name"]] = service
        self._discovered.set()
        self._discovery.cancel()
        if self.served:
            self.get_logger().info(f"serving {len(self.served)} calls: {', '.join(sorted(self.served.values()))}")
        else:
            self.get_logger().warning(f"the harness's robot API has no calls in groups {sorted(groups)}; "
                                      "no perception services")

    def _on_call(self, name: str, request: Any, response: Any) -> Any:
        if request.name and request.name != name:
            result = fail(FailureCategory.INVALID_ARGUMENT,
                          f"this service answers {name}; leave name empty or call the {request.name} service")
            response.result = result_msg(CallOutcome(result, format_receipt(name, result)))
            return response
        done = threading.Event()
        future = self._harness_call.call_async(RobotCall.Request(name=name, args_json=request.args_json))
        future.add_done_callback(lambda _: done.set())
        if not done.wait(self.params["call_timeout_s"]) or future.result() is None:
            result = fail(FailureCategory.NOT_AVAILABLE,
                          f"{name}: the harness did not answer within {self.params['call_timeout_s']:g} s")
            response.result = result_msg(CallOutcome(result, format_receipt(name, result)))
            return response
        self._calls_answered += 1
        response.result = future.result().result
        return response

    def _statuses(self) -> list[Any]:
        reachable = self._harness_call.service_is_ready()
        level = diag.OK if reachable and self.ready else diag.WARN
        message = "serving" if self.ready else "waiting for the harness to describe its calls"
        if not reachable:
            message = "the harness's robot_call service is not reachable"
        values = {"harness_reachable": reachable, "services": len(self.served), "calls_answered": self._calls_answered}
        return [diag.status(f"{self.get_fully_qualified_name()}: perception", level, message, values)]


def main(args: list[str] | None = None) -> int:
    """Console entry point ``perception_node``."""
    from captain_harness.nodes.hosting import run_nodes

    return run_nodes([PerceptionNode], args)


if __name__ == "__main__":
    raise SystemExit(main())
