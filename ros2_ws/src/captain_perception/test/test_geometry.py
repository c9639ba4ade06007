"""Object geometry from point sets: footprints, extents, yaw, resting."""

from __future__ import annotations

import math

import numpy as np
import pytest

from captain_perception.core.errors import NothingFoundError
from captain_perception.core.geometry import fit_footprint, measure_points

RNG = np.random.default_rng(0)


def _cylinder(cx: float, cy: float, r: float, z0: float, z1: float, n: int = 3000) -> np.ndarray:
    a = RNG.uniform(0, 2 * np.pi, n)
    z = RNG.uniform(z0, z1, n)
    side = np.stack([cx + r * np.cos(a), cy + r * np.sin(a), z], 1)
    rr = r * np.sqrt(RNG.uniform(0, 1, n))
    b = RNG.uniform(0, 2 * np.pi, n)
    top = np.stack([cx + rr * np.cos(b), cy + rr * np.sin(b), np.full(n, z1)], 1)
    return np.concatenate([side, top])


def _box(c: tuple[float, float, float], size: tuple[float, float, float], yaw: float, n: int = 6000) -> np.ndarray:
    p = RNG.uniform(-0.5, 0.5, (n, 3)) * np.array(size)
    p[: n // 3, 2] = size[2] / 2  # a top face
    R = np.array([[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]])
    return p @ R.T + np.array(c)


def test_cylinder_is_a_circle_with_its_radius_and_centre():
    g = measure_points(_cylinder(0.5, -0.1, 0.041, 0.0, 0.09), support_z_m=0.0)
    assert g.footprint.shape == "circle"
    assert g.footprint.radius_m == pytest.approx(0.041, abs=1e-3)
    assert g.center_m[0] == pytest.approx(0.5, abs=1e-3) and g.center_m[1] == pytest.approx(-0.1, abs=1e-3)
    assert g.center_m[2] == pytest.approx(0.045, abs=2e-3)
    assert g.top_z_m == pytest.approx(0.09, abs=1e-3)
    assert g.resting


def test_box_has_extents_yaw_and_half_diagonal_radius():
    g = measure_points(_box((0.4, 0.2, 0.03), (0.12, 0.06, 0.06), math.radians(30)), support_z_m=0.0)
    assert g.footprint.shape == "rectangle"
    assert g.extents_m[0] == pytest.approx(0.12, abs=3e-3)
    assert g.extents_m[1] == pytest.approx(0.06, abs=3e-3)
    assert g.extents_m[2] == pytest.approx(0.06, abs=3e-3)
    assert g.yaw_rad == pytest.approx(math.radians(30), abs=0.03)
    assert g.footprint.radius_m == pytest.approx(math.hypot(0.06, 0.03), abs=3e-3)


def test_shape_choices():
    pts = _cylinder(0.0, 0.0, 0.05, 0.0, 0.02)
    assert fit_footprint(pts[:, :2], "box").shape == "circle"  # the outline decides
    assert fit_footprint(_box((0, 0, 0), (0.1, 0.1, 0.1), 0.0)[:, :2], "cylinder").shape == "circle"
    auto = measure_points(pts, shape="auto")
    assert auto.extents_m[0] == pytest.approx(0.1, abs=2e-3) and auto.yaw_rad == 0.0


def test_floating_object_is_not_resting():
    g = measure_points(_cylinder(0.0, 0.0, 0.05, 0.10, 0.15), support_z_m=0.0)
    assert g.resting is False
    assert g.resting_gap_m == pytest.approx(0.10, abs=2e-3)
    assert g.bottom_z_m == pytest.approx(0.10, abs=2e-3)


def test_too_few_points_fail_clearly():
    with pytest.raises(NothingFoundError, match="3-D points"):
        measure_points(np.zeros((5, 3)))
    with pytest.raises(NothingFoundError):
        measure_points(np.full((100, 3), np.nan))


def _disc(cx: float, cy: float, r: float, n: int = 20000) -> np.ndarray:
    rr = r * np.sqrt(RNG.uniform(0, 1, n))
    a = RNG.uniform(0, 2 * np.pi, n)
    return np.stack([cx + rr * np.cos(a), cy + rr * np.sin(a)], 1)


@pytest.mark.parametrize("cut", ["shadow", "crescent", "ragged crescent"])
def test_partly_hidden_plate_keeps_its_centre_and_radius(cut):
    # a plate (r 10 cm) seen from the front (+x) with a bowl (r 6.5 cm) standing on it:
    # "shadow": the bowl and the strip behind it are hidden, most of the rim stays in view;
    # "crescent": only the front crescent is seen (under half the rim, ending in straight
    # cuts), where the smallest enclosing circle of the points is 2.3 cm off toward +x;
    # "ragged": the same with up to 1 mm of noise on every point, as a mask's edge has
    plate = _disc(0.70, 0.20, 0.10)
    bowl = np.hypot(plate[:, 0] - 0.69, plate[:, 1] - 0.20) < 0.065
    behind = (plate[:, 0] < 0.69) & (np.abs(plate[:, 1] - 0.20) < 0.065)
    visible = plate[~bowl & ~behind]
    if cut.endswith("crescent"):
        visible = visible[visible[:, 0] > 0.72]
    if cut.startswith("ragged"):
        visible = visible + RNG.uniform(-0.001, 0.001, visible.shape)
    fp = fit_footprint(visible, "box")
    assert fp.shape == "circle"
    tol = 3e-3 if cut.startswith("ragged") else 2e-3
    assert fp.center_xy_m[0] == pytest.approx(0.70, abs=tol)
    assert fp.center_xy_m[1] == pytest.approx(0.20, abs=tol)
    assert fp.radius_m == pytest.approx(0.10, abs=tol)


def test_pixel_grid_rectangles_stay_rectangles():
    # the hull of a rendered box's points has many corners along its straight sides
    xs, ys = np.meshgrid(np.arange(-0.06, 0.06, 0.002), np.arange(-0.04, 0.04, 0.002))
    pts = np.stack([xs.ravel(), ys.ravel()], 1) + RNG.normal(0, 4e-4, (xs.size, 2))
    for yaw in (0.0, 0.4):
        rot = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
        fp = fit_footprint(pts @ rot.T, "box")
        assert fp.shape == "rectangle"
        assert fp.rectangle_size_m[0] == pytest.approx(0.12, abs=4e-3)
    square = np.stack(np.meshgrid(np.arange(0, 0.08, 0.002), np.arange(0, 0.08, 0.002)), -1).reshape(-1, 2)
    assert fit_footprint(square, "box").shape == "rectangle"


def _near_half_of_a_flat_bottle(cx: float, a: float, b: float, height: float, n: int = 4000) -> np.ndarray:
    """Side points of an elliptical bottle (semi-axes a along x, b along y) seen from +x:
    only the half facing the camera (x > cx) is seen."""
    t = RNG.uniform(-np.pi / 2, np.pi / 2, n)
    z = RNG.uniform(0.0, height, n)
    return np.stack([cx + a * np.cos(t), b * np.sin(t), z], 1)


def test_a_tall_object_seen_from_the_side_gets_its_hidden_back():
    """Only the near half of a flat bottle is seen: its enclosing circle is centred behind
    the axis; with the camera's position the seen half is mirrored and the centre and
    radius come out right. A low object (whose top shows its back) is left alone."""
    pts = _near_half_of_a_flat_bottle(0.6, 0.017, 0.025, 0.12)
    plain = measure_points(pts, support_z_m=0.0)
    assert abs(plain.center_m[0] - 0.6) > 0.005  # the error this fixes
    g = measure_points(pts, support_z_m=0.0, view_xy_m=(1.5, 0.0))
    assert abs(g.center_m[0] - 0.6) < 0.002 and abs(g.center_m[1]) < 0.002
    assert abs(g.footprint.radius_m - 0.025) < 0.002
    low = _near_half_of_a_flat_bottle(0.6, 0.017, 0.025, 0.02)
    kept = measure_points(low, support_z_m=0.0, view_xy_m=(1.5, 0.0))
    assert kept.center_m == measure_points(low, support_z_m=0.0).center_m


def _box_front(x0: float, size: tuple[float, float, float], bottom: float, n: int = 3000) -> np.ndarray:
    """A box seen from +x: its top face and its +x wall, bottom at ``bottom``."""
    lx, ly, lz = size
    top = np.stack([RNG.uniform(x0 - lx, x0, n), RNG.uniform(-ly / 2, ly / 2, n), np.full(n, bottom + lz)], 1)
    wall = np.stack([np.full(n, x0), RNG.uniform(-ly / 2, ly / 2, n), RNG.uniform(bottom, bottom + lz, n)], 1)
    return np.concatenate([top, wall])


def test_a_bottom_seen_clear_of_the_surface_is_kept():
    """A box whose bottom edge stands 11 mm above the table: with table seen under its
    footprint past that edge, the bottom is its lowest point; with table seen only in
    front of the edge (the edge hides the contact), the bottom is the table."""
    pts = _box_front(0.6, (0.04, 0.08, 0.02), 0.011)
    under = np.stack([RNG.uniform(0.585, 0.598, 50), RNG.uniform(-0.03, 0.03, 50)], 1)
    in_front = np.stack([RNG.uniform(0.601, 0.604, 50), RNG.uniform(-0.03, 0.03, 50)], 1)
    seen = measure_points(pts, support_z_m=0.0, floor_xy_m=under)
    assert abs(seen.bottom_z_m - 0.011) < 0.001
    hidden = measure_points(pts, support_z_m=0.0, floor_xy_m=in_front)
    assert hidden.bottom_z_m == 0.0
    assert measure_points(pts, support_z_m=0.0).bottom_z_m == 0.0
