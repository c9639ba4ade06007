"""The self-filter's triangle fill (no simulator): coverage and perspective depth of
``_scan_fill`` against a per-pixel reference."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from captain_perception.core.self_filter import _scan_fill


def _barycentric(tri: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    (x0, y0), (x1, y1), (x2, y2) = tri
    det = (y1 - y2) * (x0 - x2) + (x2 - x1) * (y0 - y2)
    l0 = ((y1 - y2) * (xs - x2) + (x2 - x1) * (ys - y2)) / det
    l1 = ((y2 - y0) * (xs - x2) + (x0 - x2) * (ys - y2)) / det
    return np.stack([l0, l1, 1.0 - l0 - l1], -1)


def test_scan_fill_covers_each_triangle_with_its_perspective_depth():
    rng = np.random.default_rng(3)
    h, w = 120, 160
    ys, xs = np.mgrid[0:h, 0:w].astype(float)
    for _ in range(40):
        tri = rng.uniform([-30.0, -30.0], [w + 30.0, h + 30.0], (3, 2))
        inv_z = rng.uniform(0.4, 2.5, 3)
        near = np.full((h, w), np.inf, np.float32)
        _scan_fill(near, tri[None, 0], tri[None, 1], tri[None, 2], inv_z[None])
        filled = np.isfinite(near)
        bary = _barycentric(tri, xs, ys)
        inside = (bary >= 1e-6).all(-1)
        # every pixel whose centre is inside is filled ...
        assert filled[inside].all()
        # ... and nothing farther than a pixel from the triangle
        contour = tri.astype(np.float32).reshape(-1, 1, 2)
        for y, x in np.argwhere(filled & ~inside)[:200]:
            assert cv2.pointPolygonTest(contour, (float(x), float(y)), True) >= -1.0
        # depth: 1/z interpolated linearly in the image (perspective-correct), inside the triangle
        expected = 1.0 / (bary[inside] @ inv_z)
        np.testing.assert_allclose(near[inside], expected, rtol=1e-5)


def test_scan_fill_keeps_the_nearer_of_overlapping_triangles():
    h, w = 64, 64
    near = np.full((h, w), np.inf, np.float32)
    a = np.array([[2.0, 2.0], [2.0, 2.0]])
    b = np.array([[60.0, 2.0], [60.0, 2.0]])
    c = np.array([[2.0, 60.0], [2.0, 60.0]])
    _scan_fill(near, a, b, c, np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]))
    assert np.isfinite(near[10, 10]) and near[10, 10] == np.float32(0.5)
    assert np.isinf(near[62, 62])


def test_filters_of_one_robot_share_its_loaded_meshes_and_a_changed_file_is_read_again(tmp_path):
    """Every episode builds a new filter: the meshes load once per process (about a second
    of CPU each time otherwise) and give the same masks; a model file that changed is read
    again."""
    import dataclasses
    import shutil

    from captain_backends.core.driver import HEAD_CAMERA
    from captain_backends.core.tabletop.driver import TabletopDriver
    from captain_perception.core.self_filter import RobotSelfFilter, _robot_geometry

    driver = TabletopDriver(seed=0)
    driver.configure()
    driver.activate()
    try:
        description = driver.description()
        frame = driver.capture()[HEAD_CAMERA]
        state = driver.read_state()
    finally:
        driver.shutdown()
    q = np.asarray(state.joint_positions_rad, float)
    first, second = RobotSelfFilter(description), RobotSelfFilter(description)
    assert first.meshes[0] is second.meshes[0] and first.data is not second.data
    mask = first.mask(frame, q, state.gripper_open_fraction)
    assert mask is not None and mask.any()
    assert np.array_equal(mask, second.mask(frame, q, state.gripper_open_fraction))
    with pytest.raises(ValueError, match="read-only"):
        first.meshes[0].vertices[0, 0] = 1.0

    # a copy of the model directory: same content, another file -> loaded on its own
    copy = tmp_path / "model"
    shutil.copytree(description.model_path.parent, copy)
    moved = dataclasses.replace(description, model_path=copy / description.model_path.name)
    loads = _robot_geometry.cache_info().misses
    third = RobotSelfFilter(moved)
    assert _robot_geometry.cache_info().misses == loads + 1 and third.meshes[0] is not first.meshes[0]
    assert np.array_equal(mask, third.mask(frame, q, state.gripper_open_fraction))
    moved.model_path.write_text(moved.model_path.read_text() + "\n<!-- edited -->\n")
    RobotSelfFilter(moved)
    assert _robot_geometry.cache_info().misses == loads + 2
