"""The bringup tests' own rclpy client stays alive while they build action clients on
it: an executor that dies silently turns every later test of a module into a timeout."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import Client, isolated_domain

pytestmark = [pytest.mark.ros]


def test_action_clients_built_while_the_client_spins_leave_its_executor_running() -> None:
    from rclpy.action import ActionClient

    from captain_interfaces.action import Hold
    from captain_interfaces.srv import RobotCall

    with isolated_domain():
        client = Client()
        try:
            # built from this thread, rclpy's ActionClient ends the spin within ~100 of these
            for i in range(400):
                client.on_executor(ActionClient, client.node, Hold, f"probe_{i}")
            assert client.spin_error is None, client.spin_trace
            assert client.thread.is_alive()
            # and the executor still answers: a service of this very node, called through it
            server = client.node.create_service(RobotCall, "echo", lambda req, res: (
                setattr(res.result, "receipt", req.name) or res))
            try:
                answer = client.call(RobotCall, "echo", RobotCall.Request(name="here", args_json="{}"), timeout_s=20.0)
                assert answer.result.receipt == "here"
            finally:
                client.node.destroy_service(server)
        finally:
            client.close()
