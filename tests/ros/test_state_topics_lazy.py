"""The harness's 50 Hz state topics cost nothing while no one listens: ``/tf`` (and
``joint_states``, ``wrench``) are built and sent only while a subscription is matched,
and ``/clock`` of a simulated driver goes on regardless (use_sim_time nodes need it).
A real ``RobotStatePublisher`` on a real rclpy node, over the mock driver behind a real
``RobotHost``; the ticks are called directly instead of by a timer."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import Client, isolated_domain

pytestmark = [pytest.mark.ros]


def _until(condition, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_tf_and_joint_states_are_built_only_while_someone_subscribes() -> None:
    from rosgraph_msgs.msg import Clock
    from tf2_msgs.msg import TFMessage

    from captain_harness.core.host.robot_host import HostSettings, RobotHost
    from captain_harness.nodes.robot_state_publisher import RobotStatePublisher

    with isolated_domain():
        harness, listener = Client(), Client()
        host = RobotHost(HostSettings(driver="mock"))
        host.start()
        try:
            harness.node.host = host
            rsp = RobotStatePublisher(harness.node, rate_hz=0.0)  # no timer: ticks called below
            sent: list = []
            publish = rsp.tf_pub.publish
            rsp.tf_pub.publish = lambda msg: (sent.append(msg), publish(msg))
            clocks: list = []
            listener.node.create_subscription(Clock, "/clock", clocks.append, 10)
            _until(lambda: rsp.clock_pub.get_subscription_count() > 0)

            rsp.publish()
            assert sent == [], "/tf built with no subscriber"
            _until(lambda: len(clocks) >= 1)  # /clock went out all the same

            received: list = []
            listener.node.create_subscription(TFMessage, "/tf", received.append, 10)
            _until(lambda: rsp.tf_pub.get_subscription_count() > 0)
            assert host.call("hold", (), {"duration_s": 0.05}).result["success"]  # simulated time moves on
            rsp.publish()
            assert len(sent) == 1 and sent[0].transforms, "no /tf for a subscriber"
            _until(lambda: len(received) >= 1)
            assert {t.child_frame_id for t in received[0].transforms} == {t.child_frame_id
                                                                          for t in sent[0].transforms}
            # joint_states the same way (the shared tick of joint_states and wrench)
            from sensor_msgs.msg import JointState

            from captain_harness.nodes.sensor_publishers import SensorPublishers

            harness.node.robot_state = rsp
            sensors = SensorPublishers(harness.node, {
                "depth_encoding": "32FC1", "cameras": [], "joint_states_rate_hz": 50.0, "wrench_rate_hz": 50.0,
                "camera_rate_hz": 0.0, "camera_qos": "sensor_data"}, schedule=lambda period_s, fn: None)
            joints_sent: list = []
            publish_joints = sensors.joint_pub.publish
            sensors.joint_pub.publish = lambda msg: (joints_sent.append(msg), publish_joints(msg))
            sensors.publish_state()
            assert joints_sent == [], "joint_states built with no subscriber"
            listener.node.create_subscription(JointState, "joint_states", lambda m: None, 10)
            _until(lambda: sensors.joint_pub.get_subscription_count() > 0)
            time.sleep(0.03)  # the next 50 Hz slot
            sensors.publish_state()
            assert len(joints_sent) == 1 and joints_sent[0].name[-1] == "gripper_opening"
        finally:
            host.shutdown()
            harness.close()
            listener.close()
