"""The self-filter's triangle fill (no simulator): coverage and perspective depth of
``_scan_fill`` against a per-pixel reference."""

from __future__ import annotations

import cv2
import numpy as np

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
