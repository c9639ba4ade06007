"""Back-projection, projection and robust depth on synthetic depth images."""

from __future__ import annotations

import numpy as np
import pytest

from captain_perception.core.backproject import (
    backproject,
    normalised_to_pixel,
    pixel_to_normalised,
    project_points,
    robust_depth,
    transform_points,
)

K = np.array([[600.0, 0.0, 255.5], [0.0, 600.0, 255.5], [0.0, 0.0, 1.0]])


def _pose(rx: float, t: tuple[float, float, float]) -> np.ndarray:
    c, s = np.cos(rx), np.sin(rx)
    T = np.eye(4)
    T[:3, :3] = np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    T[:3, 3] = t
    return T


def test_normalised_pixel_round_trip_and_edges():
    x, y = normalised_to_pixel(0.0, 1.0, 512, 512)
    assert (x, y) == (-0.5, 511.5)
    assert normalised_to_pixel(0.5, 0.5, 512, 512) == (255.5, 255.5)
    u, v = pixel_to_normalised(*normalised_to_pixel(0.3172, 0.8123, 640, 480), 640, 480)
    assert u == pytest.approx(0.3172) and v == pytest.approx(0.8123)


def test_project_inverts_backproject_through_a_pose():
    T = _pose(2.3, (0.9, 0.1, 0.7))
    rng = np.random.default_rng(1)
    xs, ys = rng.uniform(0, 511, 50), rng.uniform(0, 511, 50)
    d = rng.uniform(0.3, 2.0, 50)
    pts = transform_points(T, backproject(xs, ys, d, K))
    xy, depth = project_points(pts, K, T)
    np.testing.assert_allclose(xy[:, 0], xs, atol=1e-6)
    np.testing.assert_allclose(xy[:, 1], ys, atol=1e-6)
    np.testing.assert_allclose(depth, d, atol=1e-9)


def _slanted_plane_depth(h: int = 120, w: int = 160) -> np.ndarray:
    # plane z = 1 + 0.5 * Y in camera coordinates: 1/d is linear in pixel coordinates
    ys = (np.arange(h)[:, None] - K[1, 2]) / K[1, 1]
    return np.broadcast_to(1.0 / (1.0 - 0.5 * ys), (h, w)).astype(np.float32).copy()


def test_subpixel_depth_on_a_slanted_plane_is_exact():
    depth = _slanted_plane_depth()
    y = 60.37
    expect = 1.0 / (1.0 - 0.5 * (y - K[1, 2]) / K[1, 1])
    sd = robust_depth(depth, K, 80.2, y)
    assert sd.method == "plane_fit"
    assert sd.depth_m == pytest.approx(expect, abs=1e-5)


def test_hole_takes_the_nearest_surface():
    depth = _slanted_plane_depth()
    depth[55:66, 75:86] = 0.0  # a hole of 11 px around the pixel
    sd = robust_depth(depth, K, 80.0, 60.0)
    expect = 1.0 / (1.0 - 0.5 * (60.0 - K[1, 2]) / K[1, 1])
    assert not sd.centre_valid
    assert sd.depth_m == pytest.approx(expect, abs=2e-3)


def test_edge_keeps_the_clicked_surface():
    depth = np.full((100, 100), 1.5, np.float32)  # background
    depth[:, :50] = 0.8  # an object's face on the left half
    on_object = robust_depth(depth, K, 48.0, 50.0)
    on_background = robust_depth(depth, K, 51.0, 50.0)
    assert on_object.on_edge and on_background.on_edge
    assert on_object.depth_m == pytest.approx(0.8, abs=1e-4)
    assert on_background.depth_m == pytest.approx(1.5, abs=1e-4)


def test_no_depth_anywhere_gives_none():
    assert robust_depth(np.zeros((40, 40), np.float32), K, 20.0, 20.0) is None
    assert robust_depth(np.full((40, 40), np.nan, np.float32), K, 20.0, 20.0) is None
