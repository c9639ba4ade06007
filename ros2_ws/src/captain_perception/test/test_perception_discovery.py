"""The perception node's discovery of the harness's calls survives a lost response: a
harness whose first ``describe_robot`` answer never arrives (as when rmw gives up sending a
response because the client's response reader is not discovered yet) is asked again after
``describe_timeout_s``, and the node becomes ready serving the calls of the second answer.
Real rclpy over Fast DDS on an isolated domain; the harness side is a plain rclpy service
that withholds its first answer."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ros]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_remote_perception import NodeProcess, _domain  # noqa: E402


class WithholdingHarness:
    """A ``describe_robot`` service in ``namespace`` that never answers its first request
    (until ``close``) and answers every later one with one perception call."""

    def __init__(self, namespace: str) -> None:
        import rclpy
        from rclpy.callback_groups import ReentrantCallbackGroup
        from rclpy.context import Context
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        from captain_interfaces.srv import DescribeRobot

        self.context = Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("harness", namespace=namespace, context=self.context)
        self.requests = 0
        self.release = threading.Event()
        self.node.create_service(DescribeRobot, "describe_robot", self._describe,
                                 callback_group=ReentrantCallbackGroup())
        self.executor = MultiThreadedExecutor(num_threads=3, context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _describe(self, request, response):
        self.requests += 1
        if self.requests == 1:
            self.release.wait(120.0)  # the lost answer
        response.robot, response.driver, response.names = "panda", "stub", ["observe"]
        response.calls_json = json.dumps([{"name": "observe", "physical": False, "group": "perception",
                                           "doc": "", "parameters": []}])
        return response

    def close(self) -> None:
        self.release.set()
        self.executor.shutdown(timeout_sec=5.0)
        self.thread.join(timeout=5.0)
        self.node.destroy_node()
        self.context.try_shutdown()


def test_an_unanswered_describe_robot_is_asked_again() -> None:
    with _domain():
        harness = WithholdingHarness("/lossy")
        node = None
        try:
            node = NodeProcess("captain_perception.nodes.perception_node", "describe_timeout_s:=1.0",
                               "discovery_period_s:=0.2", "serve:=false", namespace="/lossy",
                               ready_timeout_s=60.0)
            text = "\n".join(node.lines)
            assert harness.requests >= 2, text
            assert "describe_robot unanswered after" in text and "asking the harness again" in text, text
            assert "serving 1 calls: perception/observe" in text, text
        finally:
            if node is not None:
                node.stop()
            harness.close()
