"""An object resting on or in another one is segmented apart from it, on rendered LIBERO scenes.

Objects are placed by the simulator (``captain_perception.arrange``): a bowl on the stove
(no colour change at the contact: the merged region used to cover both), the cream
cheese box lying in a bowl, a soup can in the basket, and a white mug on a white plate
(the plate's rim joins them). Each click must give the
clicked object's own region (scored by IoU with the simulator's segmentation, used only
here), the two regions must be distinct, and ``measure_object_geometry`` must give the
true object-to-destination offset and find the object resting on its destination. The
classical text segmenter must return the object on its support as its own region too.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from _views import libero_scene, look_down_with_the_wrist, perceive

from captain_backends.core.driver import HEAD_CAMERA
from captain_harness.core.api import RobotAPI
from captain_perception.core.primitives import Perception

pytestmark = pytest.mark.sim

BOWL, STOVE, CHEESE = "akita_black_bowl_1", "flat_stove_1", "cream_cheese_1"
SOUP, BASKET = "alphabet_soup_1", "basket_1"
#: Where an object goes on the stove: the burner, 20 cm along world x from the stove's body
#: origin (its cook region), world metres.
ON_BURNER_XY_M = (0.20, -0.013)


def _scene_fixture(task: str):
    """A module-scoped fixture: a configured LIBERO driver of ``task`` and its simulator truth."""

    @pytest.fixture(scope="module")
    def scene():
        with libero_scene(task) as opened:
            yield opened

    return scene


goal_scene = _scene_fixture("libero_goal/1")
object_scene = _scene_fixture("libero_object/0")
pot_scene = _scene_fixture("libero_10/2")
mug_scene = _scene_fixture("libero_10/6")
two_mugs_scene = _scene_fixture("libero_10/4")


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


@pytest.mark.parametrize(("scene", "obj", "support", "min_iou", "support_iou"), [
    ("goal_scene", BOWL, STOVE, 0.85, 0.7),
    ("goal_scene", CHEESE, BOWL, 0.6, 0.7),
    ("object_scene", SOUP, BASKET, 0.85, 0.7),
    ("pot_scene", "moka_pot_1", STOVE, 0.8, 0.7),  # silver on black, joined at the plate's edge
    ("mug_scene", "porcelain_mug_1", "plate_1", 0.8, 0.7),  # white on white, joined by the plate's rim
    # the handle reaches over the plate's rim toward the head camera, so much of what shows
    # of the plate lies inside the mug's outline in the image; the plate shows as thin bands
    ("two_mugs_scene", "white_yellow_mug_1", "plate_2", 0.8, 0.6),
])
def test_object_on_its_destination_is_its_own_region(request, tmp_path, scene, obj, support, min_iou, support_iou):
    libero = request.getfixturevalue(scene)
    _driver, truth = libero
    api, perception, handle, seg = _observe(libero, tmp_path, obj, support)
    obj_mask, sup_mask = truth.object_mask(seg, obj), truth.object_mask(seg, support)
    assert obj_mask.sum() > 300 and sup_mask.sum() > 1000
    o, o_region, o_iou = _click(api, perception, handle, obj_mask, obj)
    s, s_region, s_iou = _click(api, perception, handle, sup_mask, support, _away_from(sup_mask, obj_mask))
    assert o_iou > min_iou, f"{obj}: IoU {o_iou:.3f} with its true pixels"
    assert s_iou > support_iou, f"{support}: IoU {s_iou:.3f} with its true pixels"
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


def _wrist_look_into_the_basket(driver, truth, tmp_path):
    """The wrist camera looking straight down into the basket: the API, its perception, the
    observation's handle and the simulator's wrist segmentation."""
    from captain_backends.core.driver import WRIST_CAMERA

    look_down_with_the_wrist(driver, truth.object_truth(BASKET).center_m)
    perception = Perception(driver, tmp_path)
    api = RobotAPI()
    api.register_object(perception)
    handle = api.call("observe").result["value"]["observation_handle"]
    return api, perception, handle, truth.segmentation(WRIST_CAMERA)


@pytest.mark.parametrize("box_name", ["butter_1", "cream_cheese_1"])
def test_box_in_the_basket_seen_from_above_is_its_own_region(object_scene, tmp_path, box_name):
    """From the wrist camera above the basket only the box's top shows; the basket's woven
    floor is no single flat face, so the box is cut away as the top of a body lying in it
    (before: one region of both, and ``measure_object_geometry`` refused the pair)."""
    from captain_backends.core.driver import WRIST_CAMERA
    from captain_perception import arrange

    driver, truth = object_scene
    driver.reset(init_state=11)
    arrange.put_on(driver, box_name, BASKET)
    assert arrange.touching(driver, box_name, BASKET)
    api, perception, handle, seg = _wrist_look_into_the_basket(driver, truth, tmp_path)
    box, basket = truth.object_mask(seg, box_name), truth.object_mask(seg, BASKET)
    assert box.sum() > 300 and basket.sum() > 5000
    ids, regions = {}, {}
    for name, mask, where in ((box_name, box, None), (BASKET, basket, _away_from(basket, box))):
        x, y = _centre_pixel(mask if where is None else where)
        out = api.call("mark_point", (handle, WRIST_CAMERA, (x + 0.5) / 512, (y + 0.5) / 512),
                       {"label": name, "granularity": "object"}).result
        assert out["success"], out["message"]
        ids[name] = out["value"]["detection_id"]
        regions[name] = perception.store.detection(ids[name]).mask.full()
    box_iou = (regions[box_name] & box).sum() / (regions[box_name] | box).sum()
    basket_iou = (regions[BASKET] & basket).sum() / (regions[BASKET] | basket).sum()
    assert box_iou > 0.6, f"box IoU {box_iou:.3f}"
    assert basket_iou > 0.8, f"basket IoU {basket_iou:.3f}: the basket must stay whole around the box"
    out = api.call("measure_object_geometry", (ids[box_name], ids[BASKET])).result
    assert out["success"], out["message"]
    v = out["value"]
    assert v["object_over_destination"]
    got = np.array(v["object"]["center_xy_m"])
    assert np.linalg.norm(got - truth.object_truth(box_name).center_m[:2]) < 0.015


@pytest.mark.parametrize(("first", "second"), [
    (SOUP, "tomato_sauce_1"),  # two cans: their tops at one height, one face of two patches
    (SOUP, CHEESE),  # a can and a box: two tops at different heights
    ("butter_1", CHEESE),  # two boxes lying flat on the liner, 2 cm above the liner around them
])
def test_two_objects_side_by_side_in_the_basket_are_each_their_own_region(object_scene, tmp_path, first, second):
    """Two objects in opposite corners of the basket, seen from above: each is cut away as
    the top of a body lying in it (before: only the top at the most common height, and of
    that only the largest patch, so the other object stayed one region with the basket).
    Seen from above, a can's region is its top (its side, part of the simulator's mask, lies
    outside the top's outline): the IoU bound is lower than a box's, the centre is checked."""
    from captain_backends.core.driver import WRIST_CAMERA
    from captain_perception import arrange

    driver, truth = object_scene
    driver.reset(init_state=11)
    arrange.put_on(driver, first, BASKET, offset_xy_m=(0.025, 0.025))  # opposite corners, as the teacher aims
    arrange.put_on(driver, second, BASKET, offset_xy_m=(-0.025, -0.025))
    for name in (first, second):
        assert arrange.touching(driver, name, BASKET), f"{name} is not in the basket"
    api, perception, handle, seg = _wrist_look_into_the_basket(driver, truth, tmp_path)
    masks = {name: truth.object_mask(seg, name) for name in (first, second, BASKET)}
    assert masks[first].sum() > 300 and masks[second].sum() > 300 and masks[BASKET].sum() > 5000
    ids, ious = {}, {}
    for name, mask in masks.items():
        where = _away_from(_away_from(mask, masks[first]), masks[second]) if name == BASKET else mask
        x, y = _centre_pixel(where)
        out = api.call("mark_point", (handle, WRIST_CAMERA, (x + 0.5) / 512, (y + 0.5) / 512),
                       {"label": name, "granularity": "object"}).result
        assert out["success"], out["message"]
        ids[name] = out["value"]["detection_id"]
        region = perception.store.detection(ids[name]).mask.full()
        ious[name] = float((region & mask).sum() / (region | mask).sum())
    assert ious[first] > 0.5 and ious[second] > 0.5, ious
    assert ious[BASKET] > 0.8, ious
    for name in (first, second):
        out = api.call("measure_object_geometry", (ids[name], ids[BASKET])).result
        assert out["success"], out["message"]
        v = out["value"]
        assert v["object_over_destination"], name
        got = np.array(v["object"]["center_xy_m"])
        assert np.linalg.norm(got - truth.object_truth(name).center_m[:2]) < 0.015, name


def test_bottle_standing_on_the_cabinet_is_its_own_region(goal_scene, tmp_path):
    """A bottle on the cabinet's top joins the cabinet's front in the head image (no depth
    break where it stands near the edge): it is cut away as a body rising from the top of a
    tall support."""
    _driver, truth = goal_scene
    api, perception, handle, seg = _observe(goal_scene, tmp_path, "wine_bottle_1", "wooden_cabinet_1")
    bottle, cabinet = truth.object_mask(seg, "wine_bottle_1"), truth.object_mask(seg, "wooden_cabinet_1")
    assert bottle.sum() > 300 and cabinet.sum() > 5000
    b, _, b_iou = _click(api, perception, handle, bottle, "wine bottle")
    c, _, c_iou = _click(api, perception, handle, cabinet, "cabinet", _away_from(cabinet, bottle))
    assert b_iou > 0.8, f"bottle IoU {b_iou:.3f}"
    assert c_iou > 0.8, f"cabinet IoU {c_iou:.3f}"
    out = api.call("measure_object_geometry", (b, c)).result
    assert out["success"], out["message"]
    assert out["value"]["resting_height_consistent"]


@pytest.fixture(scope="module")
def swapped_basket_scene():
    """LIBERO-PRO's libero_object_swap/4 at state 12: the basket stands at the table's right,
    near the head camera's view axis, so its front wall faces the camera squarely."""
    with libero_scene("libero_object_swap/4", init_state=12) as opened:
        yield opened


def test_basket_with_a_bottle_standing_in_it_stays_whole_from_the_head_camera(swapped_basket_scene, tmp_path):
    """A bottle standing in the basket hides part of the back rim from the head camera: the
    flat top of the basket's front wall, a compact strip at the rim's height with the rest of
    the rim behind and beside it, was cut away as the top of a body lying in the basket,
    taking the front wall with it; a click on the basket then gave the front wall alone,
    measured 8 cm in front of the basket's centre (the ketchup, 2 cm from that centre, was
    then 7.7 cm off it and its finish not on evidence)."""
    from captain_perception import arrange

    driver, truth = swapped_basket_scene
    driver.reset(init_state=12)
    arrange.put_on(driver, "ketchup_1", BASKET, offset_xy_m=(0.0, 0.015))
    assert arrange.touching(driver, "ketchup_1", BASKET)
    api, perception, handle = perceive(driver, tmp_path)
    seg = truth.segmentation(HEAD_CAMERA)
    bottle, basket = truth.object_mask(seg, "ketchup_1"), truth.object_mask(seg, BASKET)
    assert bottle.sum() > 300 and basket.sum() > 5000
    k, _, k_iou = _click(api, perception, handle, bottle, "ketchup")
    b, _, b_iou = _click(api, perception, handle, basket, "basket", _away_from(basket, bottle))
    assert k_iou > 0.7, f"ketchup IoU {k_iou:.3f}"
    assert b_iou > 0.8, f"basket IoU {b_iou:.3f}: the basket must stay whole around the bottle"
    out = api.call("measure_object_geometry", (k, b)).result
    assert out["success"], out["message"]
    v = out["value"]
    assert v["object_over_destination"]
    true = truth.object_truth("ketchup_1").center_m[:2] - truth.object_truth(BASKET).center_m[:2]
    np.testing.assert_allclose(v["object_to_destination_xy_offset_m"], true, atol=0.015)
