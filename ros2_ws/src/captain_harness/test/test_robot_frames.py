"""The frame tree's URDF is the harness's kinematic model: Pinocchio reads it back and its
base -> TCP pose equals ``Kinematics.fk`` at random configurations; camera mounts on a link
follow the link."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from captain_backends.core.mock import MockDriver
from captain_harness.core.robot_frames import FrameTree


def _tree() -> FrameTree:
    driver = MockDriver()
    driver.configure()
    try:
        return FrameTree(driver.description())
    finally:
        driver.shutdown()


def test_urdf_round_trip_matches_the_harness_kinematics() -> None:
    tree = _tree()
    kin = tree.kin
    model = pin.buildModelFromXML(tree.urdf())
    data = model.createData()
    assert model.nq == len(kin.joint_names)  # arm joints move, everything else is fixed
    rng = np.random.default_rng(0)
    for _ in range(10):
        q = kin.random_configuration(rng)
        q_urdf = pin.neutral(model)
        for name, value in zip(kin.joint_names, q, strict=True):
            q_urdf[model.joints[model.getJointId(name)].idx_q] = value
        pin.framesForwardKinematics(model, data, q_urdf)
        base = data.oMf[model.getFrameId(tree.description.base_frame)]
        T = base.actInv(data.oMf[model.getFrameId("captain_tcp")]).homogeneous
        np.testing.assert_allclose(T, kin.fk(q), atol=1e-7)


def test_moving_and_static_edges_compose_to_the_tcp() -> None:
    tree = _tree()
    q = tree.kin.home_rad + 0.1
    edges = {c: (p, T) for p, c, T in [*tree.static_transforms(), *tree.moving_transforms(q)]}
    frame, T = "captain_tcp", np.eye(4)
    while frame != tree.description.base_frame:
        parent, T_parent = edges[frame]
        T, frame = T_parent @ T, parent
    np.testing.assert_allclose(T, tree.kin.fk(q), atol=1e-9)
    assert {e.joint for e in tree.moving} == set(tree.kin.joint_names)


def test_a_wrist_camera_stays_on_its_link() -> None:
    tree = _tree()
    flange = tree.description.flange_frame
    q0 = tree.kin.home_rad
    T_flange_cam = np.eye(4)
    T_flange_cam[:3, 3] = [0.05, 0.0, 0.02]
    T_base_cam = tree.T_base_link(q0, flange) @ T_flange_cam
    assert tree.set_camera("wrist", T_base_cam, q0, flange)
    q1 = q0 + 0.2  # the same mount seen at another configuration: no change
    assert not tree.set_camera("wrist", tree.T_base_link(q1, flange) @ T_flange_cam, q1, flange)
    parent, child, T = tree.static_transforms()[-1]
    assert (parent, child) == (flange, "wrist_optical_frame")
    np.testing.assert_allclose(T, T_flange_cam, atol=1e-9)
