"""The robot self-filter on rendered LIBERO scenes, scored against the simulator's segmentation.

The mask comes from the robot description and the joint readings only; the
segmentation is used to score. Several arm poses (random offsets from the official
state's, random gripper openings), both cameras.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA
from captain_harness.core.api import RobotAPI
from captain_perception.core.primitives import Perception, PerceptionConfig
from captain_perception.core.self_filter import SelfFilterConfig

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    from captain_backends.core.libero.driver import LiberoDriver
    from captain_perception.groundtruth import SimTruth

    driver = LiberoDriver(task="libero_spatial/0", init_state=11)
    driver.configure()
    truth = SimTruth.from_libero(driver, include_fixtures=True)
    perception = Perception(driver, tmp_path_factory.mktemp("workspace"))
    yield {"driver": driver, "truth": truth, "perception": perception}
    truth.close()
    driver.shutdown()


def test_robot_mask_matches_the_segmentation_in_several_poses(scene):
    from captain_perception.robot_mask_score import arm_poses, score_poses

    poses = arm_poses(scene["driver"], 4, seed=1)
    scores = score_poses(scene["driver"], scene["perception"], scene["truth"], poses)
    scene["driver"].load_task("libero_spatial/0", init_state=11)
    for cam in (HEAD_CAMERA, WRIST_CAMERA):
        ious = [s.iou for s in scores if s.camera == cam]
        assert len(ious) == 4
        assert np.median(ious) >= 0.9, scores
        assert min(ious) >= 0.85, scores
        # the robot is really in view: the score is not of two empty masks
        assert min(s.truth_px for s in scores if s.camera == cam) > 2000


def test_a_click_on_the_robot_says_so_and_the_robot_is_left_out_of_clouds(scene):
    p = scene["perception"]
    api = RobotAPI()
    api.register_object(p)
    res = api.call("observe").result
    assert res["value"]["robot_self_filter"] == "kinematic"
    obs = p.store.observation(res["value"]["observation_handle"])
    mask = obs.robot_mask(WRIST_CAMERA)
    assert mask is not None and mask.sum() > 2000
    ys, xs = np.nonzero(mask)
    k = len(xs) // 2
    w, h = obs.frames[WRIST_CAMERA].size_px
    u, v = (xs[k] + 0.5) / w, (ys[k] + 0.5) / h
    out = api.call("mark_point", kwargs={"observation_handle": obs.handle, "camera": "wrist", "u": u,
                                          "v": v}).result
    assert not out["success"]
    assert out["failure_category"] == "not_found"
    assert "on the robot itself" in out["message"]
    pts = api.call("measure_image_points", kwargs={"observation_handle": obs.handle, "camera": "wrist",
                                                   "points": [[u, v]]}).result
    assert pts["value"]["points"][0]["on_robot"] is True
    assert pts["value"]["points"][0]["position_m"] is None
    cloud = obs.cloud(WRIST_CAMERA)
    assert not cloud.valid[mask].any()
    assert cloud.valid[~mask].mean() > 0.9


def test_self_filter_off_by_configuration(scene, tmp_path):
    p = Perception(scene["driver"], tmp_path, config=PerceptionConfig(self_filter=SelfFilterConfig(enabled=False)))
    res = p.observe().result
    assert res["value"]["robot_self_filter"].startswith("off (disabled")
    obs = p.store.observation(res["value"]["observation_handle"])
    assert obs.robot_mask(HEAD_CAMERA) is None


def test_bad_geometry_kind_turns_the_filter_off_with_the_reason(scene, tmp_path):
    p = Perception(scene["driver"], tmp_path, config=PerceptionConfig(self_filter=SelfFilterConfig(geometry="mesh")))
    res = p.observe().result
    assert res["success"]
    assert "geometry='mesh' is not valid" in res["value"]["robot_self_filter"]


def test_a_held_bowl_is_measured_alone(scene, tmp_path):
    """A bowl held by the rim, clicked in the head camera: its region holds no robot pixel
    and its centre is off by centimetres at most; without the self-filter the region
    takes in the hand and the centre is several centimetres off."""
    from captain_perception.core.detections import detection_mask
    from captain_perception.held_score import hold, score_held
    from captain_perception.robot_mask_score import robot_geoms

    driver, truth = scene["driver"], scene["truth"]
    driver.load_task("libero_spatial/0", init_state=11)
    try:
        grasp = hold(driver, truth, "akita_black_bowl_1", side=1)
        on = score_held(scene["perception"], truth, "akita_black_bowl_1", grasp, "plate_1", cameras=(HEAD_CAMERA,))
        p = scene["perception"]
        det = p.store.detection(on[0].detection_id)
        held_px = detection_mask(p.store.observation(det.observation_handle), det, p.config.region)
        off_p = Perception(driver, tmp_path, config=PerceptionConfig(self_filter=SelfFilterConfig(enabled=False)))
        off = score_held(off_p, truth, "akita_black_bowl_1", grasp, "plate_1", cameras=(HEAD_CAMERA,))
        seg = truth.segmentation(HEAD_CAMERA)
        robot_px = np.isin(seg, robot_geoms(truth))
    finally:
        driver.load_task("libero_spatial/0", init_state=11)
    assert on[0].center_err_mm is not None and on[0].center_err_mm <= 20.0, on
    assert on[0].offset_err_mm is not None and on[0].offset_err_mm <= 20.0, on
    assert off[0].center_err_mm is not None and off[0].center_err_mm > 40.0, off
    # the region is the bowl's: no robot pixel, and mostly the bowl's visible pixels
    assert not (held_px & robot_px).any()
    bowl_px = truth.object_mask(seg, "akita_black_bowl_1")
    assert (held_px & bowl_px).sum() >= 0.8 * held_px.sum()


def test_a_pointed_location_on_the_robot_is_skipped(scene, tmp_path):
    from _http_endpoint import ChatServer

    from captain_perception.core.pointer import PointerConfig

    driver = scene["driver"]
    probe = scene["perception"]
    obs = probe.store.observation(probe.observe().result["value"]["observation_handle"])
    mask = obs.robot_mask(WRIST_CAMERA)
    inner = cv2.erode(mask.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool)
    ys, xs = np.nonzero(inner)
    w, h = obs.frames[WRIST_CAMERA].size_px
    x, y = 100 * (xs[len(xs) // 2] + 0.5) / w, 100 * (ys[len(ys) // 2] + 0.5) / h
    with ChatServer(f'<point x="{x:.2f}" y="{y:.2f}" alt="bowl">bowl</point>') as srv:
        p = Perception(driver, tmp_path, pointer=PointerConfig(base_url=srv.url, model="molmo"))
        handle = p.observe().result["value"]["observation_handle"]
        out = p.point(handle, "wrist", "black bowl").result
    assert not out["success"]
    assert out["failure_category"] == "not_found"
    assert "on the robot itself (1)" in out["message"]
