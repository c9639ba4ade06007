"""What a ROS 2 user expects from `captain bringup sim`, seen by a foreign rclpy client:
a latched /robot_description (a URDF Pinocchio reads), /tf and /tf_static whose base -> TCP
chain is the pose the harness reports, /clock in simulated time that advances while the arm
moves (joint_states stamped with it, velocities zero at rest; /tf and /clock repeat only
about once a second while the simulation stands still), camera optical frames, and
describe_robot / diagnostics naming the driver actually in use after an episode swapped it."""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import Client, Stack, isolated_domain

pytestmark = [pytest.mark.ros, pytest.mark.e2e]

TOP_DOWN = [0.0, 2**-0.5, 2**-0.5, 0.0]


class Topics:
    """Latest messages of a few topics, received by the client's node."""

    def __init__(self, client: Client) -> None:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import Image, JointState
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage

        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.lock = threading.Lock()
        self.last: dict[str, object] = {}
        self.clock: list[float] = []
        self.clock_received: list[float] = []  # monotonic wall time of each /clock message
        self.static: dict[str, tuple[str, object]] = {}
        node = client.node
        node.create_subscription(String, "robot_description", lambda m: self._keep("robot_description", m), latched)
        node.create_subscription(TFMessage, "/tf_static", self._on_static, latched)
        node.create_subscription(TFMessage, "/tf", lambda m: self._keep("tf", m), 10)
        node.create_subscription(Clock, "/clock", self._on_clock, 10)
        node.create_subscription(JointState, "joint_states", lambda m: self._keep("joint_states", m), 10)
        self.image_sub = node.create_subscription(Image, "agentview/color/image_raw",
                                                  lambda m: self._keep("image", m), qos_profile_sensor_data)

    def _keep(self, key: str, msg: object) -> None:
        with self.lock:
            self.last[key] = msg

    def _on_static(self, msg) -> None:
        with self.lock:
            for t in msg.transforms:  # each latched message carries the whole static set
                self.static[t.child_frame_id] = (t.header.frame_id, t.transform)

    def _on_clock(self, msg) -> None:
        with self.lock:
            self.clock.append(msg.clock.sec + msg.clock.nanosec * 1e-9)
            self.clock_received.append(time.monotonic())

    def wait(self, key: str, timeout_s: float = 30.0, since: object = None) -> object:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                msg = self.last.get(key)
            if msg is not None and msg is not since:
                return msg
            time.sleep(0.02)
        raise AssertionError(f"no {key} message within {timeout_s} s")


def _T(transform) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    r, p = transform.rotation, transform.translation
    T = np.eye(4)
    T[:3, :3] = Rotation.from_quat([r.x, r.y, r.z, r.w]).as_matrix()
    T[:3, 3] = [p.x, p.y, p.z]
    return T


@pytest.fixture(scope="module")
def stack():
    with isolated_domain():
        stack = Stack("sim", "--param", "harness.driver=mock", "--param", "harness.camera_rate_hz=5.0",
                      "--param", "harness.diagnostics_rate_hz=5.0", "--param", "harness.sim_speed=5.0",
                      ready_timeout_s=120.0)
        client = Client()
        topics = Topics(client)
        try:
            yield stack, client, topics
        finally:
            client.close()
            code = stack.stop()
            assert code == 0, "bringup did not exit cleanly on SIGINT:\n" + "\n".join(stack.lines[-30:])


def _tcp_from_tf(topics: Topics, base: str) -> tuple[np.ndarray, object]:
    tf = topics.wait("tf")
    with topics.lock:
        tree = dict(topics.static)
    tree.update({t.child_frame_id: (t.header.frame_id, t.transform) for t in tf.transforms})
    frame, T = "captain_tcp", np.eye(4)
    while frame != base:
        assert frame in tree, f"{frame} has no parent on /tf or /tf_static; frames: {sorted(tree)}"
        parent, transform = tree[frame]
        T, frame = _T(transform) @ T, parent
    return T, tf


def _move(client: Client, offset: list[float]) -> None:
    from action_msgs.msg import GoalStatus

    from captain_interfaces.action import MoveTo

    state = client.robot_call("get_robot_state")
    target = np.asarray(state["value"]["end_effector_position_m"]) + np.asarray(offset)
    action = client.action(MoveTo, "move_to")
    handle = client.wait(action.send_goal_async(MoveTo.Goal(position_m=target.tolist(), quaternion_wxyz=TOP_DOWN,
                                                            speed_m_s=0.1)))
    assert handle.accepted
    res = client.wait(handle.get_result_async())
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.result.message


def test_robot_description_is_latched_and_is_the_harness_model(stack) -> None:
    import pinocchio as pin

    _, _, topics = stack
    urdf = topics.wait("robot_description").data
    model = pin.buildModelFromXML(urdf)
    assert model.nq == 7 and model.existFrame("captain_tcp")


def test_tf_chain_gives_the_tcp_the_harness_reports(stack) -> None:
    _, client, topics = stack
    state = client.robot_call("get_robot_state")
    assert state["success"], state
    time.sleep(0.2)
    T, _ = _tcp_from_tf(topics, "robot0_base")
    np.testing.assert_allclose(T[:3, 3], state["value"]["end_effector_position_m"], atol=2e-3)


def test_clock_is_simulated_time_and_advances_only_while_the_arm_moves(stack) -> None:
    _, client, topics = stack
    time.sleep(2.7)
    with topics.lock:
        since = time.monotonic() - 2.5
        idle = [c for c, t in zip(topics.clock, topics.clock_received, strict=True) if t >= since]
    assert max(idle) - min(idle) < 1e-6  # nothing steps the simulator
    # the same time is repeated about once a second, not at tf_rate_hz (50 Hz)
    assert 2 <= len(idle) <= 4, len(idle)
    joints = topics.wait("joint_states")
    assert not any(joints.velocity), joints.velocity  # an arm at rest
    stamp = joints.header.stamp.sec + joints.header.stamp.nanosec * 1e-9
    assert stamp == pytest.approx(idle[-1], abs=0.05)  # joint_states in simulated time
    before = idle[-1]
    _move(client, [0.0, 0.05, -0.04])
    time.sleep(0.3)
    with topics.lock:
        after = topics.clock[-1]
        ordered = list(topics.clock)
    assert after > before + 0.2  # a 6 cm move at 0.1 m/s takes simulated time
    assert all(b >= a for a, b in itertools.pairwise(ordered))
    T, _ = _tcp_from_tf(topics, "robot0_base")
    state = client.robot_call("get_robot_state")
    np.testing.assert_allclose(T[:3, 3], state["value"]["end_effector_position_m"], atol=2e-3)


def test_use_sim_time_node_clock_follows_clock_while_timers_keep_going(stack) -> None:
    from diagnostic_msgs.msg import DiagnosticArray
    from rcl_interfaces.srv import GetParameters

    _, client, topics = stack
    response = client.call(GetParameters, "harness/get_parameters", GetParameters.Request(names=["use_sim_time"]))
    assert response.values[0].bool_value is True  # config/sim.yaml
    diagnostics: list = []  # the harness's (the perception node publishes on the same topic)
    sub = client.node.create_subscription(DiagnosticArray, "diagnostics", lambda m: diagnostics.append(m) if any(
        s.name.startswith("/harness:") for s in m.status) else None, 10)
    try:
        time.sleep(0.5)  # the arm is idle: nothing steps the simulator, /clock stands still
        with topics.lock:
            idle_clock = topics.clock[-1]
        joints = topics.wait("joint_states")
        seen = len(diagnostics)
        time.sleep(1.2)
        with topics.lock:
            assert topics.clock[-1] == idle_clock
        # steady timers: diagnostics (5 Hz here) and joint states keep coming meanwhile
        assert len(diagnostics) - seen >= 3, len(diagnostics) - seen
        assert topics.wait("joint_states", timeout_s=2.0, since=joints) is not joints
        # the node clock is simulated time: diagnostics are stamped with /clock, not the wall clock
        last = diagnostics[-1]
        stamp = last.header.stamp.sec + last.header.stamp.nanosec * 1e-9
        stamps = [d.header.stamp.sec + d.header.stamp.nanosec * 1e-9 for d in diagnostics[seen:]]
        assert stamp == pytest.approx(idle_clock, abs=0.05), (idle_clock, stamps)
        assert time.time() - stamp > 1e6
        values = {kv.key: kv.value for status in last.status for kv in status.values}
        assert values["use_sim_time"] == "True"
        # ... set by the harness itself, not through a subscription to its own /clock
        readers = {i.node_name for i in client.node.get_subscriptions_info_by_topic("/clock")}
        assert "harness" not in readers and "perception" in readers, readers
    finally:
        client.node.destroy_subscription(sub)


def test_camera_optical_frames_join_tf_static(stack) -> None:
    _, _, topics = stack
    image = topics.wait("image")  # subscribing makes the harness render and publish the camera
    assert image.header.frame_id == "agentview_optical_frame"
    from rclpy.qos import ReliabilityPolicy

    _, client, _ = stack
    for topic in ("/agentview/color/image_raw", "/agentview/color/camera_info"):  # harness.camera_qos default
        # every publisher the graph lists (one re-created after a driver swap may still be listed
        # for a while beside its replacement)
        infos = client.node.get_publishers_info_by_topic(topic)
        assert infos, topic
        assert all(i.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT for i in infos), topic
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and "agentview_optical_frame" not in topics.static:
        time.sleep(0.05)
    parent, _ = topics.static["agentview_optical_frame"]
    assert parent == "robot0_base"


def test_describe_and_diagnostics_name_the_driver_in_use(stack) -> None:
    from diagnostic_msgs.msg import DiagnosticArray

    from captain_interfaces.srv import DescribeRobot, ResetEpisode

    _, client, topics = stack
    assert client.call(DescribeRobot, "describe_robot", DescribeRobot.Request()).driver == "mock"
    with topics.lock:
        clock_before = topics.clock[-1]
    reset = client.call(ResetEpisode, "episode/reset", ResetEpisode.Request(
        task="tabletop/cube_on_plate", init_state=-1, seed=0), timeout_s=120.0, resend_s=120.0)
    assert reset.success, reset.message
    assert client.call(DescribeRobot, "describe_robot", DescribeRobot.Request()).driver == "tabletop"
    seen: list[str] = []
    client.node.create_subscription(DiagnosticArray, "diagnostics", lambda m: seen.extend(
        kv.value for s in m.status if s.name.endswith(": driver") for kv in s.values if kv.key == "driver"), 10)
    deadline = time.monotonic() + 15.0
    while time.monotonic() < deadline and "tabletop" not in seen:
        time.sleep(0.05)
    assert "tabletop" in seen, seen
    time.sleep(0.3)
    with topics.lock:
        assert topics.clock[-1] >= clock_before  # the new driver's time continues the clock
    assert json.loads(json.dumps(reset.task_json))  # a JSON string came back


def test_negative_goal_values_end_with_the_reason_in_the_result(stack) -> None:
    from action_msgs.msg import GoalStatus

    from captain_interfaces.action import Hold, MoveTo, Recover

    _, client, _ = stack
    start = np.asarray(client.robot_call("get_robot_state")["value"]["end_effector_position_m"])
    cases = [(MoveTo, "move_to", MoveTo.Goal(position_m=start.tolist(), speed_m_s=-0.1), "speed"),
             (MoveTo, "move_to", MoveTo.Goal(position_m=start.tolist(), duration_s=-2.0), "duration"),
             (Hold, "hold", Hold.Goal(duration_s=-1.0), "duration_s"),
             (Recover, "recover", Recover.Goal(max_distance_m=-0.1), "max_distance_m")]
    for action_type, name, goal, field in cases:
        action = client.action(action_type, name)
        handle = client.wait(action.send_goal_async(goal))
        assert handle.accepted
        res = client.wait(handle.get_result_async())
        assert res.status == GoalStatus.STATUS_ABORTED, (name, field)
        result = res.result.result
        assert result.failure_category == "invalid_argument", (name, field, result.message)
        assert field in result.message and "range" in result.message, result.message


def test_malformed_goals_end_aborted_with_the_reason_and_move_nothing(stack) -> None:
    from action_msgs.msg import GoalStatus

    from captain_interfaces.action import Hold, MoveTo, Recover

    _, client, _ = stack
    before = np.asarray(client.robot_call("get_robot_state")["value"]["joint_positions_rad"])
    start = np.asarray(client.robot_call("get_robot_state")["value"]["end_effector_position_m"])
    nan, inf = float("nan"), float("inf")
    cases = [(MoveTo, "move_to", MoveTo.Goal(position_m=[nan, 0.0, 0.3]), "finite"),
             (MoveTo, "move_to", MoveTo.Goal(position_m=start.tolist(), speed_m_s=inf), "finite"),
             (MoveTo, "move_to", MoveTo.Goal(position_m=[0.4, 0.0]), "3 values"),
             (MoveTo, "move_to", MoveTo.Goal(position_m=start.tolist(), quaternion_wxyz=[1.0, 0.0, 0.0]), "4 values"),
             (MoveTo, "move_to", MoveTo.Goal(position_m=start.tolist(), mode="fast"), "mode"),
             (MoveTo, "move_to", MoveTo.Goal(args_json="[1, 2]"), "JSON object"),
             (Hold, "hold", Hold.Goal(duration_s=nan), "finite"),
             (Recover, "recover", Recover.Goal(max_distance_m=-inf), "finite")]
    for action_type, name, goal, words in cases:
        action = client.action(action_type, name)
        handle = client.wait(action.send_goal_async(goal))
        assert handle.accepted, (name, goal)
        res = client.wait(handle.get_result_async())
        assert res.status == GoalStatus.STATUS_ABORTED, (name, goal)
        result = res.result.result
        assert result.failure_category == "invalid_argument" and not result.executed, result.message
        assert words in result.message and "not run" in result.message, result.message
        assert json.loads(result.result_json)["message"] == result.message
    after = np.asarray(client.robot_call("get_robot_state")["value"]["joint_positions_rad"])
    assert np.max(np.abs(after - before)) < 1e-6
    # the motion slot was never taken: a valid goal runs right after
    handle = client.wait(client.action(Hold, "hold").send_goal_async(Hold.Goal(duration_s=0.05)))
    assert handle.accepted
    assert client.wait(handle.get_result_async()).status == GoalStatus.STATUS_SUCCEEDED


def test_parameters_read_at_start_refuse_a_change_with_a_reason(stack) -> None:
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    _, client, _ = stack
    request = SetParameters.Request(parameters=[Parameter("sim_speed", value=1.0).to_parameter_msg()])
    response = client.call(SetParameters, "harness/set_parameters", request)
    (result,) = response.results
    assert not result.successful and "read-only" in result.reason and "sim_speed" in result.reason
