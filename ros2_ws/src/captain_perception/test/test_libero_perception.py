"""Perception on real rendered LIBERO scenes, scored against the simulator's truth.

One LIBERO driver (libero_spatial/0, official state 11) is shared by the module; the
ground truth (meshes, segmentation, ray casts) is only used to choose pixels and to
score, as in the benchmark.
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA
from captain_harness.core.api import RobotAPI
from captain_perception.core.primitives import Perception, PerceptionConfig
from captain_perception.core.segmenters import Sam3Segmenter

pytestmark = pytest.mark.sim

TOP_DOWN = [0, 2**-0.5, 2**-0.5, 0]


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    from captain_backends.core.libero.driver import LiberoDriver
    from captain_perception.groundtruth import SimTruth

    driver = LiberoDriver(task="libero_spatial/0", init_state=11)
    driver.configure()
    truth = SimTruth.from_libero(driver, include_fixtures=True)
    perception = Perception(driver, tmp_path_factory.mktemp("workspace"))
    api = RobotAPI()
    api.register_object(perception)
    obs = api.call("observe").result
    seg = truth.segmentation(HEAD_CAMERA)
    yield {"driver": driver, "truth": truth, "perception": perception, "api": api, "obs": obs, "seg": seg}
    truth.close()
    driver.shutdown()


def _uv(x: float, y: float, size: int = 512) -> tuple[float, float]:
    return (x + 0.5) / size, (y + 0.5) / size


def _centre_pixel(mask: np.ndarray) -> tuple[int, int]:
    inner = cv2.erode(mask.astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool)
    ys, xs = np.nonzero(inner)
    k = int(np.argmin((xs - xs.mean()) ** 2 + (ys - ys.mean()) ** 2))
    return int(xs[k]), int(ys[k])


def test_observe_saves_frames_and_reports_state(scene):
    value = scene["obs"]["value"]
    assert scene["obs"]["success"]
    assert value["images"] == ["obs_000_head.png", "obs_000_wrist.png"]
    for name in value["images"]:
        img = cv2.imread(str(Path(scene["perception"].workspace) / name))
        assert img.shape == (512, 512, 3)
    snap = scene["driver"].snapshot()
    T_base_world = np.linalg.inv(scene["driver"].description().T_world_base)
    ee_true = T_base_world[:3, :3] @ np.array(snap.ee_position_m) + T_base_world[:3, 3]
    np.testing.assert_allclose(value["robot_state"]["end_effector_position_m"], ee_true, atol=2e-3)
    cams = value["cameras"]
    assert set(cams) == {HEAD_CAMERA, WRIST_CAMERA}
    assert np.asarray(cams[HEAD_CAMERA]["T_base_camera"]).shape == (4, 4)
    assert cams[HEAD_CAMERA]["width_px"] == 512


def test_mark_point_lands_on_the_surface_within_5_mm(scene):
    rng = np.random.default_rng(3)
    frame = scene["perception"].store.observation("obs_0").frames[HEAD_CAMERA]
    errors = []
    for name in scene["truth"].objects:
        mask = scene["truth"].object_mask(scene["seg"], name)
        inner = cv2.erode(mask.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
        ys, xs = np.nonzero(inner)
        for k in rng.choice(len(xs), size=min(4, len(xs)), replace=False) if len(xs) else []:
            hit, geom = scene["truth"].raycast(frame, float(xs[k]), float(ys[k]))
            if hit is None or geom not in scene["truth"].geoms(name):
                continue
            r = scene["api"].call("mark_point", ("obs_0", HEAD_CAMERA, *_uv(xs[k], ys[k])), {"label": name})
            assert r.result["success"], r.receipt
            assert r.receipt.startswith("mark_point: ok; detection_id=det_")
            errors.append(np.linalg.norm(np.array(r.result["value"]["position_m"]) - hit))
    assert len(errors) >= 20
    assert np.median(errors) < 0.005


@pytest.mark.parametrize("name", ["akita_black_bowl_1", "akita_black_bowl_2", "plate_1",
                                  "glazed_rim_porcelain_ramekin_1", "cookies_1"])
def test_object_centre_and_radius_within_1_cm(scene, name):
    mask = scene["truth"].object_mask(scene["seg"], name)
    x, y = _centre_pixel(mask)
    mark = scene["api"].call("mark_point", ("obs_0", HEAD_CAMERA, *_uv(x, y)),
                             {"label": name, "granularity": "object"}).result
    assert mark["success"]
    det_mask = scene["perception"].store.detection(mark["value"]["detection_id"]).mask.full()
    assert (det_mask & mask).sum() / (det_mask | mask).sum() > 0.85
    geo = scene["api"].call("measure_object_geometry", (mark["value"]["detection_id"],)).result
    assert geo["success"], geo["message"]
    true = scene["truth"].object_truth(name)
    obj = geo["value"]["object"]
    assert np.linalg.norm(np.array(obj["center_m"]) - true.center_m) < 0.01
    assert abs(obj["footprint"]["radius_m"] - true.radius_m) < 0.01
    assert abs(obj["top_z_m"] - true.top_z_m) < 0.01
    assert geo["value"]["resting_height_consistent"] is True


def test_offset_to_destination_matches_truth(scene):
    api, truth = scene["api"], scene["truth"]
    ids = {}
    for name in ("akita_black_bowl_1", "plate_1"):
        x, y = _centre_pixel(truth.object_mask(scene["seg"], name))
        ids[name] = api.call("mark_point", ("obs_0", HEAD_CAMERA, *_uv(x, y)), {"label": name}).result["value"][
            "detection_id"]
    out = api.call("measure_object_geometry", (ids["akita_black_bowl_1"], ids["plate_1"]),
                   {"shape": "auto", "cameras": "primary"})
    v = out.result["value"]
    true = truth.object_truth("akita_black_bowl_1").center_m[:2] - truth.object_truth("plate_1").center_m[:2]
    np.testing.assert_allclose(v["object_to_destination_xy_offset_m"], true, atol=0.01)
    assert v["xy_distance_m"] == pytest.approx(float(np.linalg.norm(true)), abs=0.01)
    for key in ("center_m", "center_xy_m", "top_z_m", "extents_m", "yaw_rad"):
        assert key in v["object"] and key in v["destination"]
    assert "radius_m" in v["destination"]["footprint"]
    assert "object_to_destination_xy_offset_m=[" in out.receipt and "xy_distance_m=" in out.receipt
    # both cameras: the wrist sees the plate from above
    both = api.call("measure_object_geometry", (ids["plate_1"],), {"cameras": "all"}).result
    assert both["success"]
    assert np.linalg.norm(np.array(both["value"]["object"]["center_xy_m"])
                          - truth.object_truth("plate_1").center_m[:2]) < 0.01


@pytest.mark.parametrize(("text", "names"), [
    ("black bowl", {"akita_black_bowl_1", "akita_black_bowl_2"}),
    ("plate", {"plate_1"}),
    ("ramekin", {"glazed_rim_porcelain_ramekin_1"}),
    ("cookie box", {"cookies_1"}),
    ("wooden cabinet", {"wooden_cabinet_1"}),
    ("flat stove", {"flat_stove_1"}),
])
def test_classical_segmenter_grounds_instruction_objects(scene, text, names):
    out = scene["api"].call("segment", ("obs_0", HEAD_CAMERA, text)).result
    assert out["success"], out["message"]
    best = scene["perception"].store.detection(out["value"]["detection_id"]).mask.full()
    ious = {n: (best & scene["truth"].object_mask(scene["seg"], n)).sum()
            / max(1, (best | scene["truth"].object_mask(scene["seg"], n)).sum()) for n in scene["truth"].objects}
    assert max(ious, key=ious.get) in names
    assert max(ious.values()) > 0.6


@pytest.mark.parametrize("text", ["red mug", "blue cube", "top drawer of the wooden cabinet", "teapot"])
def test_classical_segmenter_fails_honestly(scene, text):
    out = scene["api"].call("segment", ("obs_0", HEAD_CAMERA, text))
    assert not out.result["success"]
    assert out.result["failure_category"] == "not_found"
    assert out.result["message"]


def test_contact_geometry_of_a_top_down_grasp_on_the_bowl_rim(scene):
    api, truth = scene["api"], scene["truth"]
    x, y = _centre_pixel(truth.object_mask(scene["seg"], "akita_black_bowl_2"))
    det = api.call("mark_point", ("obs_0", HEAD_CAMERA, *_uv(x, y))).result["value"]["detection_id"]
    geo = api.call("measure_object_geometry", (det,)).result["value"]["object"]
    c, r = np.array(geo["center_m"]), geo["footprint"]["radius_m"]
    # jaws close along base y: TCP over the +y rim, 1.5 cm below the top
    rim = [c[0], c[1] + r - 0.008, geo["top_z_m"] - 0.015]
    out = api.call("inspect_contact_geometry", (det, rim, TOP_DOWN))
    v = out.result["value"]
    assert out.result["success"] and v["straddles"] and v["fits"]
    assert v["width_needed_m"] < 0.03
    assert v["min_clearance_m"] > 0.0
    np.testing.assert_allclose(v["closing_axis_base"], [0, 1, 0], atol=1e-6)
    # jaws turned 90 degrees (closing along the rim): they take a chord of the rim, about
    # 2 * sqrt(2 * r * 0.008) wide
    along_rim = [0, 1, 0, 0]
    v2 = api.call("inspect_contact_geometry", (det, rim, along_rim)).result["value"]
    np.testing.assert_allclose(v2["closing_axis_base"], [1, 0, 0], atol=1e-6)
    chord = 2 * math.sqrt(2 * r * 0.008)
    assert v2["width_needed_m"] == pytest.approx(chord, abs=0.012)
    assert v2["width_needed_m"] > v["width_needed_m"] + 0.02
    # beside the bowl, across the closing axis: nothing between the jaws
    beside = [c[0] + r + 0.03, c[1], geo["top_z_m"] - 0.015]
    v3 = api.call("inspect_contact_geometry", (det, beside, TOP_DOWN)).result["value"]
    assert v3["points_between_jaws"] == 0 and v3["straddles"] is False


def test_track_and_compare_in_a_new_observation(scene):
    api, truth = scene["api"], scene["truth"]
    x, y = _centre_pixel(truth.object_mask(scene["seg"], "plate_1"))
    det = api.call("mark_point", ("obs_0", HEAD_CAMERA, *_uv(x, y)), {"granularity": "object"}).result["value"][
        "detection_id"]
    new = api.call("observe").result["value"]["observation_handle"]
    tr = api.call("track_target", (det, new))
    assert tr.result["success"], tr.result["message"]
    assert tr.result["value"]["moved_m"] < 0.01
    cmp = api.call("compare_object_observations", (det, tr.result["value"]["detection_id"])).result["value"]
    assert cmp["moved"] is False and cmp["xy_distance_m"] < 0.01


def test_select_and_image_points(scene):
    api = scene["api"]
    seg = api.call("segment", ("obs_0", HEAD_CAMERA, "black bowl")).result["value"]
    ids = [d["detection_id"] for d in seg["detections"]]
    left = api.call("select_detection", (ids, "leftmost")).result["value"]["detection_id"]
    right = api.call("select_detection", (ids, "rightmost")).result["value"]["detection_id"]
    assert (left == right) == (len(ids) == 1)
    pts = api.call("measure_image_points", ("obs_0", HEAD_CAMERA, [[0.5, 0.8], [0.6, 0.8]])).result["value"]
    assert pts["valid"] == 2
    assert 0.0 < pts["distances_m"][0][1] < 0.2
    rel = api.call("inspect_release_geometry", (ids[0], [0.5, 0.0, 0.3], TOP_DOWN)).result
    assert rel["success"] and "drop_height_m" in rel["value"]


def test_failures_are_results_and_never_raise(scene, tmp_path):
    api = scene["api"]
    cases = [
        ("mark_point", ("obs_99", HEAD_CAMERA, 0.5, 0.5), {}, "unknown_id"),
        ("mark_point", ("obs_0", "left_eye", 0.5, 0.5), {}, "invalid_argument"),
        ("mark_point", ("obs_0", HEAD_CAMERA, 1.5, 0.5), {}, "invalid_argument"),
        ("mark_point", ("obs_0", HEAD_CAMERA, math.nan, 0.5), {}, "invalid_argument"),
        ("mark_point", ("obs_0", HEAD_CAMERA, 0.5), {}, "invalid_argument"),
        ("mark_point", ("obs_0", HEAD_CAMERA, 0.5, 0.5), {"granularity": "blob"}, "invalid_argument"),
        ("measure_object_geometry", ("det_100000",), {}, "unknown_id"),
        ("measure_object_geometry", (42,), {}, "invalid_argument"),
        ("measure_object_geometry", ("det_0",), {"shape": "sphere"}, "invalid_argument"),
        ("inspect_contact_geometry", ("det_0", [0, 0], TOP_DOWN), {}, "invalid_argument"),
        ("inspect_contact_geometry", ("det_0", [0.5, 0, 0.1], [0, 0, 0, 0]), {}, "invalid_argument"),
        ("segment", ("obs_0", HEAD_CAMERA, ""), {}, "invalid_argument"),
        ("point", ("obs_0", HEAD_CAMERA, "bowl"), {}, "not_available"),
        ("select_detection", ([],), {}, "invalid_argument"),
        ("track_target", ("det_nope",), {}, "unknown_id"),
    ]
    for name, args, kwargs, category in cases:
        call = (name, args, kwargs)
        out = api.call(name, args, kwargs)
        assert out.result["success"] is False, (call, out.receipt)
        assert out.result["failure_category"] == category, (call, out.result["message"])
        assert out.receipt.startswith(f"{name}: FAILED {category}") and len(out.receipt) <= 300
        assert out.result["message"]


def test_stale_handles_and_sam3_without_weights(scene, tmp_path):
    perception = Perception(scene["driver"], tmp_path, segmenter=Sam3Segmenter(None),
                            config=PerceptionConfig(max_observations=2))
    api = RobotAPI()
    api.register_object(perception)
    first = api.call("observe").result["value"]["observation_handle"]
    det = api.call("mark_point", (first, HEAD_CAMERA, 0.5, 0.7)).result["value"]["detection_id"]
    api.call("observe")
    api.call("observe")
    stale = api.call("mark_point", (first, HEAD_CAMERA, 0.5, 0.7)).result
    assert stale["failure_category"] == "stale_handle" and "observe()" in stale["message"]
    assert api.call("measure_object_geometry", (det,)).result["failure_category"] == "stale_handle"
    sam = api.call("segment", ("obs_2", HEAD_CAMERA, "black bowl")).result
    assert sam["failure_category"] == "not_available" and "sam3_weights_path" in sam["message"]


def test_point_through_an_endpoint(scene, tmp_path):
    from _http_endpoint import ChatServer

    from captain_perception.core.pointer import PointerConfig

    truth = scene["truth"]
    x, y = _centre_pixel(truth.object_mask(scene["seg"], "plate_1"))
    u, v = _uv(x, y)
    with ChatServer(f'<point x="{u * 100:.2f}" y="{v * 100:.2f}" alt="plate">plate</point>') as srv:
        perception = Perception(scene["driver"], tmp_path, pointer=PointerConfig(base_url=srv.url, model="molmo"))
        api = RobotAPI()
        api.register_object(perception)
        handle = api.call("observe").result["value"]["observation_handle"]
        out = api.call("point", (handle, HEAD_CAMERA, "plate"))
    assert out.result["success"], out.result["message"]
    det = out.result["value"]["detection_id"]
    geo = api.call("measure_object_geometry", (det,)).result["value"]["object"]
    assert np.linalg.norm(np.array(geo["center_xy_m"]) - truth.object_truth("plate_1").center_m[:2]) < 0.01
