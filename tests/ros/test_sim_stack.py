"""`captain bringup sim` in a subprocess on an isolated domain, driven by a plain rclpy
client: MoveTo goals with feedback and results, cancel-means-hold, one motion goal at a
time, the sensor and diagnostics topics, the perception services, and the same receipts
over ROS as in-process.

The stack runs the mock driver here (no physics: the transport and the node behaviour
are under test, and it starts in seconds); the episode and twin tests use real physics.
"""

from __future__ import annotations

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


@pytest.fixture(scope="module")
def stack():
    with isolated_domain():
        # sim_speed: the mock arm runs at most 20x real time, so the slow sweeps the cancel tests
        # interrupt last seconds however fast the harness streams
        stack = Stack("sim", "--param", "harness.driver=mock", "--param", "harness.camera_rate_hz=5.0",
                      "--param", "harness.diagnostics_rate_hz=5.0", "--param", "harness.sim_speed=20.0",
                      ready_timeout_s=120.0)
        client = Client()
        try:
            yield stack, client
        finally:
            client.close()
            code = stack.stop()
            assert code == 0, "bringup did not exit cleanly on SIGINT:\n" + "\n".join(stack.lines[-30:])


def _tcp(client: Client) -> np.ndarray:
    state = client.robot_call("get_robot_state")
    assert state["success"], state
    return np.asarray(state["value"]["end_effector_position_m"])


def _action(client: Client, name: str):
    from captain_interfaces.action import Hold, MoveTo, Recover, Release

    types = {"move_to": MoveTo, "hold": Hold, "recover": Recover, "release": Release}
    return client.action(types[name], name), types[name]


def test_ready_line_names_every_node(stack) -> None:
    proc, _ = stack
    assert proc.ready_line.startswith("READY captain bringup sim: harness, perception, episode_runner")


def test_move_to_sends_feedback_and_a_full_result(stack) -> None:
    from action_msgs.msg import GoalStatus

    _, client = stack
    start = _tcp(client)
    target = start + np.array([0.0, 0.06, -0.05])
    action, MoveTo = _action(client, "move_to")
    stream = client.feedback_tap(MoveTo, "move_to")  # the whole stream, see feedback_tap
    seen_by_client: list = []
    t0 = time.monotonic()
    handle = client.wait(action.send_goal_async(
        MoveTo.Goal(position_m=target.tolist(), quaternion_wxyz=TOP_DOWN, speed_m_s=0.02),
        feedback_callback=lambda m: seen_by_client.append(m.feedback)))
    assert handle.accepted
    res = client.wait(handle.get_result_async())
    wall_s = time.monotonic() - t0
    assert len(seen_by_client) >= 1  # the action client gets the stream while the goal runs
    feedback = stream(handle, until=lambda f: f.progress == pytest.approx(1.0, abs=0.05))
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.result.message
    result = json.loads(res.result.result.result_json)
    assert set(result) == {"success", "executed", "failure_category", "message", "value", "diagnostics", "budget"}
    assert result["success"] and result["executed"] and result["value"]["stopped_reason"] == "target_reached"
    assert res.result.stopped_reason == "target_reached"
    assert res.result.executed_distance_m == pytest.approx(result["value"]["executed_distance_m"])
    assert res.result.executed_distance_m > 0.07
    assert res.result.result.receipt.startswith("move_to: ok; stopped_reason=target_reached executed_distance_m=")
    # one per 50 ms of simulated time, at most feedback_rate_hz (20) per wall second, and
    # always the first and the last (the unpaced simulation runs faster than real time)
    assert 3 <= len(feedback) <= 2 + 20.0 * wall_s + 1, (len(feedback), wall_s)
    progress = [f.progress for f in feedback]
    assert progress == sorted(progress) and progress[-1] == pytest.approx(1.0, abs=0.05)
    last = feedback[-1].tcp_pose.position
    assert np.linalg.norm(np.array([last.x, last.y, last.z]) - target) < 0.01
    assert np.linalg.norm(_tcp(client) - target) < 0.006


def test_cancelled_sweep_holds_the_arm(stack) -> None:
    from action_msgs.msg import GoalStatus
    from sensor_msgs.msg import JointState

    _, client = stack
    start = _tcp(client)
    target = start + np.array([0.0, -0.3, 0.0])
    action, MoveTo = _action(client, "move_to")
    moving = threading.Event()
    handle = client.wait(action.send_goal_async(
        MoveTo.Goal(position_m=target.tolist(), speed_m_s=0.003),
        feedback_callback=lambda m: m.feedback.progress > 0.0 and moving.set()))
    assert handle.accepted
    assert moving.wait(30.0), "no progress feedback"
    time.sleep(0.2)
    client.wait(handle.cancel_goal_async())
    res = client.wait(handle.get_result_async())
    assert res.status == GoalStatus.STATUS_CANCELED
    assert res.result.stopped_reason == "cancelled"
    assert res.result.result.failure_category == "cancelled"
    assert res.result.result.receipt.startswith("move_to: FAILED cancelled;")
    assert 0.0 < res.result.executed_distance_m < 0.29

    # the arm holds where it stopped: joint_states stay put and the TCP is short of the target
    states: list = []
    sub = client.node.create_subscription(JointState, "joint_states", states.append, 10)
    try:
        time.sleep(1.0)
    finally:
        client.node.destroy_subscription(sub)
    assert len(states) >= 10, "joint_states are not published at rate"
    q = np.array([s.position for s in states])
    assert np.max(np.abs(q - q[0])) < 1e-6
    assert states[0].name[-1] == "gripper_opening" and len(states[0].name) == 8
    here = _tcp(client)
    assert 0.0 < np.linalg.norm(here - start) < 0.29
    assert np.linalg.norm(here - target) > 0.01


def test_one_motion_goal_at_a_time(stack) -> None:
    from action_msgs.msg import GoalStatus

    _, client = stack
    start = _tcp(client)
    action, MoveTo = _action(client, "move_to")
    hold, Hold = _action(client, "hold")
    first = client.wait(action.send_goal_async(MoveTo.Goal(position_m=(start + np.array([0.0, 0.2, 0.0])).tolist(),
                                                           speed_m_s=0.003)))
    assert first.accepted
    time.sleep(0.3)
    second = client.wait(hold.send_goal_async(Hold.Goal(duration_s=0.1)))
    assert not second.accepted
    client.wait(first.cancel_goal_async())
    assert client.wait(first.get_result_async()).status == GoalStatus.STATUS_CANCELED
    # a malformed goal is refused in the goal callback: it ends at once, ABORTED, with the reason
    bad = client.wait(action.send_goal_async(MoveTo.Goal(position_m=[float("nan"), 0.0, 0.3])))
    refused = client.wait(bad.get_result_async())
    assert refused.status == GoalStatus.STATUS_ABORTED
    assert refused.result.result.failure_category == "invalid_argument"
    assert "finite" in refused.result.result.message and refused.result.executed_distance_m == 0.0
    # and the primitive's own argument checks answer with a result dict
    handle = client.wait(action.send_goal_async(MoveTo.Goal(args_json=json.dumps({"position": [1, 2]}))))
    res = client.wait(handle.get_result_async())
    assert res.status == GoalStatus.STATUS_ABORTED
    assert res.result.result.failure_category == "invalid_argument"


def test_hold_recover_release_actions(stack) -> None:
    from action_msgs.msg import GoalStatus

    _, client = stack
    start = _tcp(client)
    move, MoveTo = _action(client, "move_to")
    res = client.wait(client.wait(move.send_goal_async(
        MoveTo.Goal(position_m=(start + np.array([0.05, 0.0, 0.0])).tolist(), speed_m_s=0.1))).get_result_async())
    assert res.status == GoalStatus.STATUS_SUCCEEDED
    hold, Hold = _action(client, "hold")
    stream = client.feedback_tap(Hold, "hold")  # the whole stream, see feedback_tap
    t0 = time.monotonic()
    handle = client.wait(hold.send_goal_async(Hold.Goal(duration_s=4.0)))
    res = client.wait(handle.get_result_async())
    wall_s = time.monotonic() - t0
    assert res.status == GoalStatus.STATUS_SUCCEEDED and res.result.result.receipt.startswith("hold: ok")
    progress = [f.progress for f in stream(handle, until=lambda f: f.progress == pytest.approx(1.0))]
    # the first, the last, and one per 50 ms of simulated time, at most 20 per wall second
    assert 3 <= len(progress) <= 2 + 20.0 * wall_s + 1, (len(progress), wall_s)
    assert progress == sorted(progress) and progress[-1] == pytest.approx(1.0)
    recover, Recover = _action(client, "recover")
    res = client.wait(client.wait(recover.send_goal_async(Recover.Goal(max_distance_m=0.02))).get_result_async())
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.result.message
    assert res.result.executed_distance_m == pytest.approx(0.02, abs=0.004)
    release, Release = _action(client, "release")
    res = client.wait(client.wait(release.send_goal_async(
        Release.Goal(args_json=json.dumps({"retreat_m": 0.0})))).get_result_async())
    assert res.result.result.success, res.result.result.message


def test_camera_topics_and_diagnostics(stack) -> None:
    from action_msgs.msg import GoalStatus
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import CameraInfo, Image

    _, client = stack
    hold, Hold = _action(client, "hold")
    done = client.wait(client.wait(hold.send_goal_async(Hold.Goal(duration_s=0.05))).get_result_async())
    assert done.status == GoalStatus.STATUS_SUCCEEDED
    got: dict[str, list] = {"rgb": [], "depth": [], "info": [], "diag": []}
    from captain_backends.nodes import xr1_messages as xm

    subs = [
        client.node.create_subscription(Image, "agentview/color/image_raw", got["rgb"].append, xm.IMAGE_QOS),
        client.node.create_subscription(Image, "agentview/aligned_depth_to_color/image_raw", got["depth"].append,
                                        xm.IMAGE_QOS),
        client.node.create_subscription(CameraInfo, "agentview/color/camera_info", got["info"].append,
                                        xm.IMAGE_QOS),
        client.node.create_subscription(DiagnosticArray, "diagnostics", got["diag"].append, 10),
    ]
    nodes = ("/harness: driver", "/episode_runner: episodes", "/perception: perception")

    def every_node_reported() -> bool:  # each node publishes its own diagnostics, at its own pace
        names = {s.name for msg in list(got["diag"]) for s in msg.status}
        return len(got["diag"]) > 3 and all(n in names for n in nodes)

    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline and not (got["rgb"] and got["depth"] and got["info"] and every_node_reported()):
        time.sleep(0.1)
    for sub in subs:
        client.node.destroy_subscription(sub)
    assert got["rgb"] and got["depth"] and got["info"], {k: len(v) for k, v in got.items()}
    assert len(got["diag"]) > 3, {k: len(v) for k, v in got.items()}
    rgb, depth, info = got["rgb"][0], got["depth"][0], got["info"][0]
    assert rgb.encoding == "rgb8" and rgb.width == rgb.height == 512
    assert depth.encoding == "32FC1" and info.k[0] > 0 and info.width == 512
    d = np.frombuffer(bytes(depth.data), dtype="<f4")
    assert np.isfinite(d).any() and np.nanmax(d) > 0.1
    statuses = {s.name: s for msg in got["diag"] for s in msg.status}
    driver = statuses["/harness: driver"]
    values = {kv.key: kv.value for kv in driver.values}
    assert driver.level == b"\x00" and values["lifecycle_state"] == "active" and values["driver"] == "mock"
    motion = {kv.key: kv.value for kv in statuses["/harness: motion"].values}
    assert int(motion["motions"]) >= 1 and float(motion["last_real_time_factor"]) > 0
    assert "/episode_runner: episodes" in statuses and "/perception: perception" in statuses


def test_perception_services(stack) -> None:
    from captain_interfaces.srv import RobotCall

    _, client = stack
    names = dict(client.node.get_service_names_and_types())
    served = sorted(n for n in names if n.startswith("/perception/") or n.startswith("/measurement/"))
    assert "/state/get_robot_state" in names and "/planning/check_motion" in names
    if "/perception/observe" not in served:
        pytest.skip("the harness's robot API has no perception calls on this install (captain_perception."
                    "core.primitives is not available)")
    response = client.call(RobotCall, "perception/observe", RobotCall.Request(args_json="{}"))
    result = json.loads(response.result.result_json)
    assert result["success"], result["message"]
    assert response.result.receipt.startswith("observe: ok")
    assert "observation_handle" in result["value"]
    # the handle is shared with the harness's other calls
    again = client.robot_call("observe")
    assert again["value"]["observation_handle"] != result["value"]["observation_handle"]


def test_planning_and_state_services_match_robot_call(stack) -> None:
    from captain_interfaces.srv import RobotCall

    _, client = stack
    via_service = client.call(RobotCall, "state/get_robot_state", RobotCall.Request(args_json="{}"))
    via_call = client.robot_call("get_robot_state")
    assert via_service.result.receipt == via_call["receipt"]
    check = client.call(RobotCall, "planning/check_motion", RobotCall.Request(
        args_json=json.dumps({"kwargs": {"position": [0.45, 0.0, 0.25]}})))
    assert json.loads(check.result.result_json)["value"]["path_ok"] in (True, False)
    assert check.result.receipt.startswith("check_motion:")
    physical = client.call(RobotCall, "robot_call", RobotCall.Request(name="move_to", args_json="{}"))
    assert physical.result.failure_category == "invalid_argument" and "action" in physical.result.message
