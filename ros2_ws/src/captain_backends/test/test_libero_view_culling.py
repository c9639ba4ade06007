"""View-frustum culling of the LIBERO camera renderer: the same pixels and depths as a full
pass, from fewer triangles, over official states and a moved arm (the wrist camera then
looks somewhere else)."""

from __future__ import annotations

import numpy as np
import pytest
from _libero_helpers import stream

from captain_backends.core.libero import LiberoDriver

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def driver():
    drv = LiberoDriver(task="libero_spatial/0", init_state=11)
    drv.configure()
    drv.activate()
    yield drv
    drv.shutdown()


def _both_passes(drv, camera):
    renderer = drv.scene.cameras
    renderer.view_culling = False
    rgb_full, depth_full = renderer.render(drv.scene.data, camera)
    renderer.view_culling = True
    rgb, depth = renderer.render(drv.scene.data, camera)
    return (rgb_full, depth_full), (rgb, depth), renderer.last_pass_triangles


@pytest.mark.parametrize("init_state", [11, 3])
def test_culled_passes_render_identical_frames_from_fewer_triangles(driver, init_state):
    driver.reset(init_state=init_state)
    for camera in ("agentview", "robot0_eye_in_hand"):
        (rgb_full, depth_full), (rgb, depth), (drawn, culled) = _both_passes(driver, camera)
        assert np.array_equal(rgb, rgb_full), camera
        assert np.array_equal(depth, depth_full), camera
        assert (depth > 0).mean() > 0.5, camera  # the frame does show the scene
        assert drawn > 0
        if camera == "robot0_eye_in_hand":
            # the wrist camera looks down past the arm: its links are out of view
            assert culled > 0.2 * (drawn + culled)


def test_culling_follows_the_moving_wrist_camera(driver):
    driver.reset(init_state=11)
    q0 = driver.read_state().joint_positions_rad
    q1 = q0 + np.array([0.6, -0.3, 0.0, 0.3, 0.0, 0.4, 0.0])
    stream(driver, q0, q1, 1.5)
    (rgb_full, depth_full), (rgb, depth), (_, culled) = _both_passes(driver, "robot0_eye_in_hand")
    assert np.array_equal(rgb, rgb_full)
    assert np.array_equal(depth, depth_full)
    assert culled > 0
