"""The session's `robot` calls over ROS: the remote API offers the same calls (signatures,
docstrings, TASK.md) and returns the same result dicts and receipts as the in-process API
on the same state; whole episodes run through the episode action against the harness
node's robot, with the same receipts as the same episode in-process."""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import Client, Stack, isolated_domain

pytestmark = [pytest.mark.ros, pytest.mark.e2e]

TOP_DOWN = [0.0, 2**-0.5, 2**-0.5, 0.0]

#: A sequence of policy calls: motion, state, planning, bad arguments, unknown names.
CALLS = [
    ("get_robot_state", (), {}),
    ("move_to", ([0.45, 0.05, 0.25], TOP_DOWN), {"speed": 0.2}),
    ("check_motion", (), {"position": [0.5, -0.1, 0.2]}),
    ("move_to", (), {"gripper": "close"}),
    ("hold", (), {"duration_s": 0.05}),
    ("hold", (), {"duration_s": "long"}),
    ("move_to", (), {"position": [0.45, 0.05, float("nan")]}),
    ("recover", (), {"max_distance_m": 0.02}),
    ("preview_motion", ("recover", {"max_distance_m": 0.01}), {}),
    ("transform_pose", ([0, 0, 0.05],), {"from_frame": "tcp", "to_frame": "base"}),
    ("read_motion_trajectory", (), {"max_samples": 5}),
    ("release", (), {"retreat_m": 0.02}),
    ("gripper_state", (), {}),
    ("fly", (), {}),
    ("move_to", ([0.45, 0.05, 0.25], TOP_DOWN, 0.1, None, None, "guarded", None, "extra"), {}),
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    records = tmp_path_factory.mktemp("records")
    with isolated_domain():
        # sim_speed: the mock arm moves at 5x real time, so a slow sweep lasts long enough to cancel
        stack = Stack("sim", "--param", "harness.driver=mock", "--param", "harness.camera_rate_hz=0.0",
                      "--param", "harness.sim_speed=5.0",
                      "--param", "episode_runner.isolation=none", "--param", f"episode_runner.records_dir={records}",
                      ready_timeout_s=120.0)
        try:
            yield stack
        finally:
            assert stack.stop() == 0, "\n".join(stack.lines[-30:])


@pytest.fixture(scope="module")
def robot(stack):
    from captain_harness.nodes.ros_robot_client import RosRobotClient

    client = RosRobotClient(call_timeout_s=60.0)
    assert client.wait_for_harness(30.0)
    yield client
    client.close()


def _comparable(result: dict) -> dict:
    """A result dict without its wall-clock figures (diagnostics timings, budget times)."""
    out = dict(result)
    out.pop("diagnostics", None)
    out["budget"] = {k: v for k, v in (result.get("budget") or {}).items() if not k.startswith("wall_time")}
    return out


def test_same_calls_same_receipts_as_in_process(robot, tmp_path: Path) -> None:
    from captain_harness.core.episode.backend import BackendRequest, default_backend
    from captain_harness.core.episode.taskmd import client_signature_text, signature_text
    from captain_harness.nodes.ros_robot_client import remote_api

    start = robot.reset_episode("mock/empty", -1, None, str(tmp_path / "ros"))
    assert start.task.task_id == "mock/empty"
    remote = remote_api(robot)
    local = default_backend(BackendRequest("mock/empty", -1, None, tmp_path / "local", str(tmp_path), "e")).api
    try:
        assert remote.names() == local.names()
        for name in local.names():
            a, b = remote.specs[name], local.specs[name]
            assert (a.physical, a.group, a.doc) == (b.physical, b.group, b.doc)
            assert signature_text(a) == signature_text(b) and client_signature_text(a) == client_signature_text(b)
        for name, args, kwargs in CALLS:
            via_ros = remote.call(name, args, kwargs)
            in_process = local.call(name, args, kwargs)
            assert via_ros.receipt == in_process.receipt, name
            assert _comparable(via_ros.result) == _comparable(in_process.result), name
        if "observe" in local.specs:  # perception: handles and detection ids are the harness's own
            seen = remote.call("observe")
            assert seen.receipt == local.call("observe").receipt and seen.result["success"]
            handle = seen.result["value"]["observation_handle"]
            for name, args in (("mark_point", (handle, "agentview", 0.5, 0.62)),
                               ("mark_point", (handle, "robot0_eye_in_hand", 0.4, 0.9)),
                               ("mark_point", ("obs_99", "agentview", 0.5, 0.5)),
                               ("measure_image_points", (handle, "agentview", [[0.5, 0.6], [0.55, 0.65]]))):
                via_ros, in_process = remote.call(name, args), local.call(name, args)
                assert via_ros.receipt == in_process.receipt, name
                assert _comparable(via_ros.result) == _comparable(in_process.result), name
        assert remote.budget.physical_actions_used == local.budget.physical_actions_used >= 5
        assert [r.counted_as_action for r in remote.log] == [r.counted_as_action for r in local.log]
    finally:
        local.specs["move_to"].fn.__self__.driver.shutdown()


def test_host_state_and_snapshot_reach_the_host(robot) -> None:
    from captain_backends.core.snapshot import SimSnapshot

    state = robot.host_state(include_snapshot=True)
    assert state["available"] and state["success"] is False
    snap = SimSnapshot.from_dict(state["snapshot"])
    assert len(snap.ee_position_m) == 3 and 0.0 <= snap.gripper_open_fraction <= 1.0


def test_unreachable_harness_gives_a_result_dict_not_an_exception() -> None:
    from captain_harness.nodes.ros_robot_client import RosRobotClient

    with isolated_domain():
        client = RosRobotClient(namespace="/nobody_here", call_timeout_s=1.0)
        try:
            outcome = client.call("get_robot_state")
        finally:
            client.close()
    assert outcome.result["success"] is False and outcome.result["failure_category"] == "not_available"
    assert outcome.receipt.startswith("get_robot_state: FAILED not_available")


def test_episode_action_replays_an_in_process_episode(stack, robot, tmp_path: Path) -> None:
    """The same scripted episode, once in-process and once through the episode action
    against the harness node: the same receipts request by request."""
    from action_msgs.msg import GoalStatus

    from captain_harness.core.episode.loop import LoopConfig
    from captain_harness.core.episode.policy.replay import ReplayPolicy
    from captain_harness.core.episode.runner import EpisodeConfig, run_episode
    from captain_harness.core.episode.sandbox import SandboxConfig
    from captain_interfaces.action import RunEpisode

    cells = [
        "r = robot.move_to([0.45, 0.0, 0.3], [0, 2**-0.5, 2**-0.5, 0], speed=0.2)\nprint(r['success'])",
        "s = robot.get_robot_state()['value']\nprint(np.round(s['end_effector_position_m'], 3).tolist())\n"
        "robot.move_to(gripper='close')['executed']",
        ["robot.hold(duration_s=0.1)", "robot.check_motion([0.5, 0.1, 0.2])"],
        "robot.finish()",
    ]
    config = EpisodeConfig(loop=LoopConfig(cell_timeout_s=60.0), sandbox=SandboxConfig(isolation="none"))
    local = run_episode("mock/empty", policy=ReplayPolicy.from_cells(cells), out_dir=tmp_path / "local",
                        config=config)
    rows = Path(local.record_dir) / "rows.jsonl"
    assert rows.is_file()

    client = Client()
    try:
        action = client.action(RunEpisode, "run_episode")
        stream = client.feedback_tap(RunEpisode, "run_episode")  # the whole stream, see feedback_tap
        goal = RunEpisode.Goal(task="mock/empty", init_state=-1, policy="replay",
                               settings_json=json.dumps({"policy_options": {"record": str(rows)},
                                                         "cell_timeout_s": 60.0}))
        handle = client.wait(action.send_goal_async(goal))
        assert handle.accepted
        res = client.wait(handle.get_result_async(), timeout_s=300.0)
        feedback = stream(handle, until=lambda f: f.request_index >= res.result.requests)
    finally:
        client.close()
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.summary_json
    summary = json.loads(res.result.summary_json)
    assert summary["error"] is None, summary["error"]
    assert res.result.outcome == local.outcome and res.result.requests == local.requests == 5
    assert res.result.physical_actions == local.physical_actions == 3
    assert Path(res.result.record_path).is_file()
    assert [f.request_index for f in feedback] == list(range(1, res.result.requests + 1))
    assert "move_to: ok; stopped_reason=target_reached" in feedback[0].last_receipts

    def receipts(record_dir: str) -> list[list[str]]:
        events = [json.loads(x) for x in (Path(record_dir) / "events.jsonl").read_text().splitlines()]
        return [[r for c in e["cells"] for r in c["receipts"]] for e in events]

    ros_receipts = receipts(summary["record_dir"])
    assert ros_receipts == receipts(local.record_dir)
    assert sum(len(r) for r in ros_receipts) >= 6
    time.sleep(0.1)


def test_cancelling_an_episode_holds_the_arm_and_ends_it(stack, tmp_path: Path) -> None:
    import numpy as np
    from action_msgs.msg import GoalStatus
    from sensor_msgs.msg import JointState

    from captain_harness.core.episode.policy.replay import ReplayPolicy
    from captain_interfaces.action import RunEpisode

    # a recorded episode (rows.jsonl) whose first cell starts a long, slow sweep (~80 s simulated, ~17 s at 5x)
    rows = tmp_path / "rows.jsonl"
    replies = ReplayPolicy.from_cells(["robot.move_to([0.4572, 0.25, 0.099], speed=0.003)",
                                       "robot.get_robot_state()"])
    with rows.open("w") as f:
        for k, reply in enumerate(replies.replies, 1):
            f.write(json.dumps({"messages": [reply.assistant_message()], "meta": {"request_index": k}}) + "\n")

    client = Client()
    try:
        states: list = []
        client.node.create_subscription(JointState, "joint_states", lambda m: states.append(np.array(m.position)), 50)
        action = client.action(RunEpisode, "run_episode")
        handle = client.wait(action.send_goal_async(RunEpisode.Goal(
            task="mock/empty", init_state=-1, policy="replay",
            settings_json=json.dumps({"policy_options": {"record": str(rows)}}))))
        assert handle.accepted
        def sweeping() -> bool:  # joint_states change a little at every sample (a reset jumps once)
            recent = list(states[-7:])
            steps = [np.max(np.abs(b - a)) for a, b in itertools.pairwise(recent)]
            return len(steps) == 6 and all(1e-7 < d < 0.01 for d in steps)

        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and not sweeping():
            time.sleep(0.02)
        assert time.monotonic() < deadline, "the episode's sweep never started"
        client.wait(handle.cancel_goal_async())
        res = client.wait(handle.get_result_async(), timeout_s=120.0)
        time.sleep(0.5)
        still = states[-10:]
    finally:
        client.close()
    assert res.status == GoalStatus.STATUS_CANCELED
    summary = json.loads(res.result.summary_json)
    events = [json.loads(x) for x in (Path(summary["record_dir"]) / "events.jsonl").read_text().splitlines()]
    assert events[0]["cells"][0]["receipts"][0].startswith("move_to: FAILED cancelled"), events[0]["cells"]
    assert res.result.requests == 2 and "cancelled" in (summary["error"] or "")
    assert np.max(np.abs(np.array(still) - still[0])) < 1e-9  # the arm holds


def test_an_episode_goal_that_cannot_run_says_why_in_its_result(stack) -> None:
    """Bad settings: the goal is accepted and aborted at once, the reason in the result
    (a rejected goal carries no reason to its client); then a good goal still runs."""
    from action_msgs.msg import GoalStatus

    from captain_interfaces.action import RunEpisode

    client = Client()
    try:
        action = client.action(RunEpisode, "run_episode")
        reasons = []
        for settings in ({"cell_timeout_s": -1.0}, {"max_requests": 0}, {"max_requests": 2.5},
                         {"speed": 1}, {"mcap": "yes"}):
            handle = client.wait(action.send_goal_async(RunEpisode.Goal(
                task="mock/empty", init_state=-1, policy="replay", settings_json=json.dumps(settings))))
            assert handle.accepted
            res = client.wait(handle.get_result_async(), timeout_s=60.0)
            assert res.status == GoalStatus.STATUS_ABORTED and res.result.outcome == "rejected"
            reasons.append(json.loads(res.result.summary_json)["error"])
    finally:
        client.close()
    assert reasons[:3] == ["cell_timeout_s must be positive, got -1.0", "max_requests must be positive, got 0",
                           "max_requests must be an integer, got 2.5"]
    assert reasons[3].startswith("unknown settings ['speed']; known: policy_options, seed, max_requests")
    assert reasons[4] == "mcap must be true or false, got 'yes'"
