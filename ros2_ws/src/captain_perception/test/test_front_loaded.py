"""A mug standing in the microwave, seen through the open front by the wrist camera, is
segmented apart from the microwave (rendered LIBERO scene, libero_10/9).

Seen from the front, the whole microwave is one surface piece and its floor only a tenth
of it; the mug's foot meets the floor in its own shadow (no colour change there) and its
outline touches the back wall in the image. ``region_split.split_supported`` cuts it away
on the wide, raised floor along depth breaks. The click on the mug must give the mug's own
pixels (scored against the simulator's segmentation, used only here), the click on the
back wall the microwave's, and ``measure_object_geometry`` must find the mug within the
microwave's extent and inside its walls, as the finish gate asks before the door shuts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _views import click, libero_scene, perceive, pose_tool

pytestmark = pytest.mark.sim

MUG, MICROWAVE = "white_yellow_mug_1", "microwave_1"
WRIST = "robot0_eye_in_hand"
#: The mug's origin (bottom middle) inside the cavity, world metres (the microwave's floor is
#: at z 0.944).
MUG_INSIDE_WORLD_M = (-0.022, 0.307, 0.946)


@pytest.fixture(scope="module")
def inside(tmp_path_factory):
    from captain_perception import arrange

    with libero_scene("libero_10/9") as (driver, truth):
        driver.reset(init_state=11)
        arrange.move_object(driver, MUG, np.array(MUG_INSIDE_WORLD_M))
        arrange.settle(driver, 1.0)
        # a look in: the tool in front of the opening, fingers along base +y tipped 32 degrees
        # down, jaws closing in the vertical plane (the wrist camera 5.4 cm to the right)
        pitch = math.radians(32.0)
        fingers = np.array([0.0, math.cos(pitch), -math.sin(pitch)])
        jaws = np.array([0.0, math.sin(pitch), math.cos(pitch)])
        T = np.eye(4)
        T[:3, :3] = np.column_stack([jaws, np.cross(fingers, jaws), fingers])
        T[:3, 3] = [0.61, 0.03, 0.11]
        pose_tool(driver, T)
        api, perception, handle = perceive(driver, tmp_path_factory.mktemp("front"))
        yield api, perception, handle, truth, truth.segmentation(WRIST)


def test_mug_in_the_microwave_is_its_own_region(inside):
    api, perception, handle, truth, seg = inside
    mug, mw = truth.object_mask(seg, MUG), truth.object_mask(seg, MICROWAVE)
    assert mug.sum() > 3000 and mw.sum() > 20000
    ys, xs = np.nonzero(mug)
    k = int(np.argmin((xs - np.median(xs)) ** 2 + (ys - np.percentile(ys, 30)) ** 2))  # on the body, above the handle
    m, m_region = click(api, perception, handle, WRIST, int(xs[k]), int(ys[k]), "mug")
    iou = float((m_region & mug).sum() / (m_region | mug).sum())
    assert iou > 0.9, f"mug IoU {iou:.3f} with its true pixels"
    # the back wall, away from the mug: the microwave's region, without the mug
    wall = mw & (np.abs(np.arange(512)[None, :] - np.median(xs)) > 0.6 * (xs.max() - xs.min())) \
        & (np.arange(512)[:, None] < np.percentile(ys, 50))
    wy, wx = np.nonzero(wall)
    w, w_region = click(api, perception, handle, WRIST, int(wx[len(wx) // 2]), int(wy[len(wy) // 2]), "microwave")
    assert (m_region & w_region).sum() < 0.05 * m_region.sum()
    out = api.call("measure_object_geometry", (m, w)).result
    assert out["success"], out["message"]
    v = out["value"]
    assert v["xy_distance_m"] <= v["destination"]["footprint"]["radius_m"]
    assert v["object"]["lowest_point_z_m"] <= v["destination"]["top_z_m"] - 0.02
    got = np.array(v["object"]["center_xy_m"])
    assert np.linalg.norm(got - truth.object_truth(MUG).center_m[:2]) < 0.03
