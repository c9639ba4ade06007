"""A teacher episode on the MuJoCo tabletop recorded as a rosbag2 bag, read back with
``rosbags``' reader: standard message types, simulated-time stamps that strictly increase,
and a TF tree whose base -> TCP chain is the harness's own forward kinematics."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.sim, pytest.mark.e2e]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    from captain_harness.core.episode.runner import EpisodeConfig, run_episode

    out = tmp_path_factory.mktemp("bag")
    outcome = run_episode("tabletop/cube_on_plate", policy="teacher", out_dir=out, seed=0,
                          config=EpisodeConfig(mcap=True))
    bag = Path(outcome.record_dir) / "episode_bag"
    messages = defaultdict(list)
    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_KILTED)) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        order = []
        for connection, t_ns, raw in reader.messages():
            messages[connection.topic].append((t_ns, reader.deserialize(raw, connection.msgtype)))
            order.append(t_ns)
    return outcome, types, messages, order


def _T(transform) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    r, p = transform.rotation, transform.translation
    T = np.eye(4)
    T[:3, :3] = Rotation.from_quat([r.x, r.y, r.z, r.w]).as_matrix()
    T[:3, 3] = [p.x, p.y, p.z]
    return T


def _stamp_ns(header) -> int:
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


def test_standard_types_on_the_stack_topics(recorded) -> None:
    _, types, messages, _ = recorded
    assert types["/joint_states"] == "sensor_msgs/msg/JointState"
    assert types["/tf"] == types["/tf_static"] == "tf2_msgs/msg/TFMessage"
    assert types["/wrench"] == "geometry_msgs/msg/WrenchStamped"
    for camera in ("agentview", "robot0_eye_in_hand"):
        assert types[f"/{camera}/color/image_raw"] == "sensor_msgs/msg/Image"
        assert types[f"/{camera}/color/camera_info"] == "sensor_msgs/msg/CameraInfo"
        (_, image), *_ = messages[f"/{camera}/color/image_raw"]
        (_, info), *_ = messages[f"/{camera}/color/camera_info"]
        assert image.encoding == "rgb8" and image.step == image.width * 3
        assert len(image.data) == image.height * image.step
        assert (info.width, info.height) == (image.width, image.height) and info.k[0] > 0
        assert image.header.frame_id == info.header.frame_id == f"{camera}_optical_frame"
    assert {types[t] for t in ("/captain/requests", "/captain/cells", "/captain/receipts")} == {"std_msgs/msg/String"}


def test_stamps_are_simulated_time_and_strictly_increase(recorded) -> None:
    _, _, messages, order = recorded
    assert order == sorted(order) and len(set(order)) == len(order)
    joint = messages["/joint_states"]
    stamps = np.array([_stamp_ns(m.header) for _, m in joint]) / 1e9
    assert np.all(np.diff(stamps) > 0)
    # 50 Hz of simulated time (the tabletop's 10 ms control period): the spacing is a
    # multiple of 10 ms, mostly exactly 20 ms; wall time (policy, rendering) leaves no gaps
    spacing = np.round(np.diff(stamps), 6)
    assert np.median(spacing) == pytest.approx(0.02)
    assert stamps[0] == pytest.approx(0.0, abs=1e-6)
    assert [t / 1e9 for t, _ in joint] == pytest.approx(stamps.tolist(), abs=1e-8)
    requests = [json.loads(m.data) for _, m in messages["/captain/requests"]]
    assert [r["request_index"] for r in requests] == list(range(1, len(requests) + 1))


def test_tf_chain_to_the_tcp_is_the_harness_kinematics(recorded) -> None:
    from captain_backends.core.tabletop.driver import TabletopDriver
    from captain_harness.core.kinematics import Kinematics

    _, _, messages, _ = recorded
    static = {}
    for _, msg in messages["/tf_static"]:
        static.update({t.child_frame_id: (t.header.frame_id, _T(t.transform)) for t in msg.transforms})
    assert "captain_tcp" in static
    assert {"agentview_optical_frame", "robot0_eye_in_hand_optical_frame"} <= set(static)
    driver = TabletopDriver(task="cube_on_plate", seed=0)
    driver.configure()
    try:
        description = driver.description()
    finally:
        driver.shutdown()
    kin = Kinematics(description)
    base = description.base_frame
    checked = 0
    joints, tfs = messages["/joint_states"], messages["/tf"]
    assert len(joints) == len(tfs)
    for (_, js), (_, tf) in list(zip(joints, tfs, strict=True))[:: max(1, len(joints) // 25)]:
        assert all(_stamp_ns(t.header) == _stamp_ns(js.header) for t in tf.transforms)
        tree = dict(static)
        tree.update({t.child_frame_id: (t.header.frame_id, _T(t.transform)) for t in tf.transforms})
        frame, T = "captain_tcp", np.eye(4)
        while frame != base:
            parent, T_parent = tree[frame]
            T, frame = T_parent @ T, parent
        q = np.asarray(js.position[:7])
        assert list(js.name[:7]) == list(kin.joint_names)
        np.testing.assert_allclose(T, kin.fk(q), atol=1e-6)
        checked += 1
    assert checked >= 20
    moved = np.ptp(np.array([m.position[:7] for _, m in joints]), axis=0)
    assert moved.max() > 0.3  # the teacher moved the arm: the chain was checked along a motion
