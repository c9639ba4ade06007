"""Measurement accuracy on a fixed set of rendered LIBERO scenes, scored against the
simulator's truth (``captain_perception.accuracy``), so the tail of the perception bench
cannot quietly return.

One scene per suite, both cameras: libero_spatial/0 (bowls, plate, ramekin, cookie box),
libero_object/0 (grocery boxes and cans, the basket), libero_goal/8 (bowl, plate, wine
bottle, cream cheese) and libero_10/4 (three mugs with handles, two plates); and two
scenes for the causes of the tail that the measurement handles: libero_10/0 (living-room
boxes standing clear of the table) and libero_object/4 (tall bottles seen from the side).
Each cause test also checks the measured region against the simulator's segmentation
(IoU), so it is the geometry fit that is tested. Not timed.
"""

from __future__ import annotations

import numpy as np
import pytest

from captain_backends.core.driver import HEAD_CAMERA, WRIST_CAMERA
from captain_perception import accuracy
from captain_perception.scenes import SceneSpec, load_or_render

pytestmark = [pytest.mark.sim, pytest.mark.slow]

SCENES = (SceneSpec("libero_spatial/0", 11), SceneSpec("libero_object/0", 11), SceneSpec("libero_goal/8", 11),
          SceneSpec("libero_10/4", 11), SceneSpec("libero_10/0", 11), SceneSpec("libero_object/4", 11))


@pytest.fixture(scope="module")
def scored():
    records = load_or_render(SCENES)
    return records, [s for rec in records for s in accuracy.score_record(rec)]


def test_tail_stays_within_five_millimetres(scored):
    _, scores = scored
    summary = accuracy.summarise(scores)
    table = accuracy.tail_table(scores)
    assert summary["objects_scored"] >= 25, table
    assert summary["objects_failed"] == 0, table
    # the bench's target (p90 <= 5 mm over 165 objects) holds on this set too (3.9 / 1.6 mm)
    assert summary["center_err_mm_p90"] <= 5.0, table
    assert summary["radius_err_mm_p90"] <= 5.0, table
    assert summary["center_err_mm_median"] <= 3.0, table
    assert summary["radius_err_mm_median"] <= 1.5, table
    # both cameras contribute
    assert {s.camera for s in scores} == set(accuracy.CAMERAS)


def test_mugs_with_handles_are_measured_by_their_enclosing_circle(scored):
    """A mug's outline (round body and handle) does not fill a rectangle; its footprint
    radius must be the smallest circle around body and handle (the rectangle's half
    diagonal was about a centimetre too large)."""
    records, scores = scored
    mugs = [s for s in scores if s.scene == records[3].spec.key and s.camera == HEAD_CAMERA and "mug" in s.name]
    assert len(mugs) >= 2, [s.name for s in scores if s.scene == records[3].spec.key]
    for s in mugs:
        assert s.iou > 0.8, (s.name, s.iou)
        assert s.radius_err_mm < 5.0, (s.name, s.radius_err_mm)
        assert s.center_xy_err_mm < 5.0, (s.name, s.center_xy_err_mm)


def test_cause_classes_come_from_the_truth(scored):
    """Objects touching the basket are labelled by the container, and every score has a
    class from the documented list."""
    records, scores = scored
    assert all(s.cause in accuracy.CAUSES for s in scores)
    basket_scene = records[1]
    assert "basket_1" in basket_scene.objects
    assert any(np.isfinite(s.center_err_mm) for s in scores if s.name == "basket_1")


def _one(scores, scene: str, camera: str, name: str) -> accuracy.ObjectScore:
    found = [s for s in scores if s.scene == scene and s.camera == camera and s.name == name]
    assert len(found) == 1, (scene, camera, name, [(s.scene, s.camera, s.name) for s in scores])
    assert found[0].iou > 0.9, found[0]  # the region is the object: the fit is under test
    return found[0]


def test_a_bottom_seen_clear_of_the_table_is_the_bottom(scored):
    """LIBERO's living-room boxes stand about 1.1 cm above the table surface the camera
    sees; filling their bottom down to the table put their centres 5-6 mm low. A mug's
    inset foot shows the same gap. Bowls, whose lowest visible points lie inside the rim's
    outline, and the basket keep their bottom on the table."""
    records, scores = scored
    living, mugs, bowls, basket = records[4].spec.key, records[3].spec.key, records[0].spec.key, records[1].spec.key
    for camera, name in ((HEAD_CAMERA, "butter_1"), (HEAD_CAMERA, "cream_cheese_1"), (WRIST_CAMERA, "cream_cheese_1")):
        s = _one(scores, living, camera, name)
        assert abs(s.center_z_err_mm) < 2.5, s
        assert s.center_err_mm < 3.0, s
    s = _one(scores, mugs, HEAD_CAMERA, "porcelain_mug_1")
    assert abs(s.center_z_err_mm) < 3.5, s
    for name in ("akita_black_bowl_1", "akita_black_bowl_2"):
        s = _one(scores, bowls, HEAD_CAMERA, name)
        assert abs(s.center_z_err_mm) < 2.0, s
    assert abs(_one(scores, basket, HEAD_CAMERA, "basket_1").center_z_err_mm) < 3.0


def test_a_bottom_hidden_behind_the_object_rests_on_the_table(scored):
    """Seen from above by the wrist camera, the wine bottle's own side hides its bottom
    (its lowest seen point was 1.6-4 cm above the table, beyond the resting tolerance, and
    the centre came out 2 cm high)."""
    records, scores = scored
    s = _one(scores, records[2].spec.key, WRIST_CAMERA, "wine_bottle_1")
    assert abs(s.center_z_err_mm) < 3.0, s
    assert s.center_err_mm < 3.0, s


def test_tall_bottles_seen_from_the_side_have_their_back_completed(scored):
    """The head camera sees the near half of a tall bottle; its smallest enclosing circle
    was centred about a centimetre behind the bottle's axis (the outline is flatter than a
    circle). Mirroring the seen half about its widest section completes the footprint."""
    records, scores = scored
    for name in ("bbq_sauce_1", "ketchup_1"):
        s = _one(scores, records[5].spec.key, HEAD_CAMERA, name)
        assert s.center_xy_err_mm < 5.0, s
        assert s.radius_err_mm < 2.0, s
