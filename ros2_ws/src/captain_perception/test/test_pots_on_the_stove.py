"""Two moka pots standing on the stove, seen from above by the wrist camera, are each
segmented apart from the stove (rendered LIBERO scene, libero_10/8).

The far pot and the stove's top are one surface piece in this view (no depth break and no
colour crease where the pot's foot meets the stove). The piece's most common upward height
is the pot's lid, not the stove's top: cutting the lid's knob away from the lid must not end
the search, since the lid is the top of a body standing on the lower stove top
(``region_split.split_supported``). Each click on a pot must give that pot's own pixels
(scored against the simulator's segmentation, used only here), the click on the stove's top
none of the pots', and ``measure_object_geometry`` must find each pot within the stove's
measured extent and resting on it, as the finish gate asks of a region goal.
"""

from __future__ import annotations

import numpy as np
import pytest
from _views import click, libero_scene, look_down_with_the_wrist, perceive

pytestmark = pytest.mark.sim

POTS, STOVE = ("moka_pot_1", "moka_pot_2"), "flat_stove_1"
WRIST = "robot0_eye_in_hand"
#: Where the teacher set the pots down in state 11, world metres (each pot's origin).
POTS_WORLD_M = ((-0.1064, -0.1717, 0.9966), (0.0014, -0.1708, 0.9966))
#: The stove's top, base frame z, m.
STOVE_TOP_Z_M = 0.013
#: The wrist camera looks down on the stove from 12 cm beside it, toward the robot's middle
#: (tool position, base frame, m): from straight above, a pot's lid hides its foot.
TOOL_M = (0.494, -0.074, 0.30)


@pytest.fixture(scope="module")
def on_stove(tmp_path_factory):
    from captain_perception import arrange

    with libero_scene("libero_10/8") as (driver, truth):
        driver.reset(init_state=11)
        for name, at in zip(POTS, POTS_WORLD_M, strict=True):
            arrange.move_object(driver, name, np.array(at))
        arrange.settle(driver, 1.0)
        look_down_with_the_wrist(driver, np.array(TOOL_M[:2]), TOOL_M[2])
        api, perception, handle = perceive(driver, tmp_path_factory.mktemp("stove"))
        yield api, perception, handle, truth, truth.segmentation(WRIST)


def _click(api, perception, handle, mask: np.ndarray, label: str, off_middle: bool = False
           ) -> tuple[str, np.ndarray]:
    """Click ``mask``'s pixel farthest inside it; ``off_middle``: outside the middle half of
    its width (a pot's body from above, not the knob on its lid, which is a region of its own)."""
    import cv2

    if off_middle:
        ys, xs = np.nonzero(mask)
        half = 0.25 * (xs.max() - xs.min())
        mask = mask & (np.hypot(np.arange(512)[None, :] - xs.mean(), np.arange(512)[:, None] - ys.mean()) > half)
    inner = cv2.distanceTransform(mask.astype(np.uint8), cv2.DIST_L2, 5)
    y, x = np.unravel_index(int(np.argmax(inner)), mask.shape)
    return click(api, perception, handle, WRIST, int(x), int(y), label)


def test_each_pot_is_its_own_region_and_rests_on_the_stove(on_stove):
    api, perception, handle, truth, seg = on_stove
    stove = truth.object_mask(seg, STOVE)
    pots = [truth.object_mask(seg, name) for name in POTS]
    assert stove.sum() > 10000 and all(p.sum() > 10000 for p in pots)
    # the stove's top (its points at the top's height, not the knob in front of it)
    z = perception.store.observation(handle).cloud(WRIST).points_base[..., 2]
    s, s_region = _click(api, perception, handle, stove & (np.abs(np.nan_to_num(z, nan=1.0) - STOVE_TOP_Z_M) < 0.004),
                         "stove")
    for p in pots:
        assert (s_region & p).sum() < 0.05 * p.sum(), "the stove's region holds a pot"
    for name, p in zip(POTS, pots, strict=True):
        d, region = _click(api, perception, handle, p, "moka pot", off_middle=True)
        iou = float((region & p).sum() / (region | p).sum())
        assert iou > 0.8, f"{name}: IoU {iou:.3f} with its true pixels"
        out = api.call("measure_object_geometry", (d, s)).result
        assert out["success"], out["message"]
        v = out["value"]
        assert v["xy_distance_m"] <= v["destination"]["footprint"]["radius_m"], name
        assert v["resting_height_consistent"] is True, name
        got = np.array(v["object"]["center_xy_m"])
        assert np.linalg.norm(got - truth.object_truth(name).center_m[:2]) < 0.03, name
