"""An object resting on or in another one is segmented apart from it, on rendered LIBERO scenes.

Objects are placed by the simulator (``captain_perception.arrange``): a bowl on the stove
(no colour change at the contact: the merged region used to cover both), the cream
cheese box lying in a bowl, and a soup can in the basket. Each click must give the
clicked object's own region (scored by IoU with the simulator's segmentation, used only
here), the two regions must be distinct, and ``measure_object_geometry`` must give the
true object-to-destination offset and find the object resting on its destination. The
classical text segmenter must return the object on its support as its own region too.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from captain_backends.core.driver import HEAD_CAMERA
from captain_harness.core.api import RobotAPI
from captain_perception.core.primitives import Perception

pytestmark = pytest.mark.sim

BOWL, STOVE, CHEESE = "akita_black_bowl_1", "flat_stove_1", "cream_cheese_1"
SOUP, BASKET = "alphabet_soup_1", "basket_1"
#: Where an object goes on the stove: the burner, 20 cm along world x from the stove's body
#: origin (its cook region), world metres.
ON_BURNER_XY_M = (0.20, -0.013)


def _libero(task: str):
    from captain_backends.core.libero.driver import LiberoDriver
    from captain_perception.groundtruth import SimTruth

    driver = LiberoDriver(task=task, init_state=11)
    driver.configure()
    truth = SimTruth.from_libero(driver, include_fixtures=True)
    return driver, truth


@pytest.fixture(scope="module")
def goal_scene():
    driver, truth = _libero("libero_goal/1")
    yield driver, truth
    truth.close()
    driver.shutdown()


@pytest.fixture(scope="module")
def object_scene():
    driver, truth = _libero("libero_object/0")
    yield driver, truth
    truth.close()
    driver.shutdown()


def _observe(libero, tmp_path, obj: str, support: str):
    from captain_perception import arrange

    driver, truth = libero
    driver.reset(init_state=11)
    arrange.put_on(driver, obj, support, offset_xy_m=ON_BURNER_XY_M if support == STOVE else (0.0, 0.0))
    assert arrange.touching(driver, obj, support), f"{obj} does not rest on {support}"
    perception = Perception(driver, tmp_path)
    api = RobotAPI()
    api.register_object(perception)
    handle = api.call("observe").result["value"]["observation_handle"]
    return api, perception, handle, truth.segmentation(HEAD_CAMERA)


def _centre_pixel(mask: np.ndarray) -> tuple[int, int]:
    """The visible pixel (away from the outline) nearest the middle of the visible ones."""
    inner = cv2.erode(mask.astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool)
    ys, xs = np.nonzero(inner if inner.any() else mask)
    k = int(np.argmin((xs - xs.mean()) ** 2 + (ys - ys.mean()) ** 2))
    return int(xs[k]), int(ys[k])


def _away_from(mask: np.ndarray, other: np.ndarray) -> np.ndarray:
    """The pixels of ``mask`` at least 8 px from ``other``: where one clicks a container or a
    support, off the object it holds (a click next to the object may land on it)."""
    near = cv2.dilate(other.astype(np.uint8), np.ones((17, 17), np.uint8)).astype(bool)
    away = mask & ~near
    return away if away.sum() > 100 else mask


def _click(api, perception, handle, mask: np.ndarray, label: str,
           where: np.ndarray | None = None) -> tuple[str, np.ndarray, float]:
    x, y = _centre_pixel(mask if where is None else where)
    out = api.call("mark_point", (handle, HEAD_CAMERA, (x + 0.5) / 512, (y + 0.5) / 512),
                   {"label": label, "granularity": "object"}).result
    assert out["success"], out["message"]
    det = out["value"]["detection_id"]
    region = perception.store.detection(det).mask.full()
    return det, region, float((region & mask).sum() / (region | mask).sum())


@pytest.mark.parametrize(("scene", "obj", "support", "min_iou"), [
    ("goal_scene", BOWL, STOVE, 0.85),
    ("goal_scene", CHEESE, BOWL, 0.6),
    ("object_scene", SOUP, BASKET, 0.85),
])
def test_object_on_its_destination_is_its_own_region(request, tmp_path, scene, obj, support, min_iou):
    libero = request.getfixturevalue(scene)
    _driver, truth = libero
    api, perception, handle, seg = _observe(libero, tmp_path, obj, support)
    obj_mask, sup_mask = truth.object_mask(seg, obj), truth.object_mask(seg, support)
    assert obj_mask.sum() > 300 and sup_mask.sum() > 1000
    o, o_region, o_iou = _click(api, perception, handle, obj_mask, obj)
    s, s_region, s_iou = _click(api, perception, handle, sup_mask, support, _away_from(sup_mask, obj_mask))
    assert o_iou > min_iou, f"{obj}: IoU {o_iou:.3f} with its true pixels"
    assert s_iou > 0.7, f"{support}: IoU {s_iou:.3f} with its true pixels"
    assert (o_region & s_region).sum() < 0.1 * o_region.sum()
    out = api.call("measure_object_geometry", (o, s)).result
    assert out["success"], out["message"]
    v = out["value"]
    assert v["object_over_destination"] and v["resting_height_consistent"]
    if support != STOVE:  # the stove's truth centre includes parts the camera does not see
        true = truth.object_truth(obj).center_m[:2] - truth.object_truth(support).center_m[:2]
        np.testing.assert_allclose(v["object_to_destination_xy_offset_m"], true, atol=0.015)
    got = np.array(v["object"]["center_xy_m"])
    assert np.linalg.norm(got - truth.object_truth(obj).center_m[:2]) < 0.015


def test_segmenter_returns_the_bowl_on_the_stove(goal_scene, tmp_path):
    _driver, truth = goal_scene
    api, perception, handle, seg = _observe(goal_scene, tmp_path, BOWL, STOVE)
    out = api.call("segment", (handle, HEAD_CAMERA, "black bowl")).result
    assert out["success"], out["message"]
    best = out["value"]["detections"][0]["detection_id"]
    region = perception.store.detection(best).mask.full()
    mask = truth.object_mask(seg, BOWL)
    assert (region & mask).sum() / (region | mask).sum() > 0.8
