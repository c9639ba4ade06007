"""Re-finding a known object in a newer observation.

The target's appearance (colour-name shares of its pixels), size (footprint) and
position are taken from its detection. In the new frame every surface piece of object
size is a candidate (``region.py``); each is scored by colour similarity (overlap of
the colour-name shares), size similarity and distance from the old position
(objects usually move little between observations, but a carried one may move far,
so distance only breaks ties). The piece under the old position's projection is tried
first. A match below ``MIN_MATCH`` is reported as not found rather than guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from captain_perception.core.backproject import project_points
from captain_perception.core.errors import NothingFoundError
from captain_perception.core.geometry import fit_footprint
from captain_perception.core.pointcloud import FrameCloud
from captain_perception.core.region import RegionParams, frame_pieces
from captain_perception.core.segmenters.colours import name_shares

MIN_MATCH = 0.35


@dataclass(frozen=True)
class Appearance:
    """What identifies an object across frames: colour shares, size (m), centre (m)."""

    colours: dict[str, float]
    size_m: float
    centre_m: np.ndarray


def appearance_of(cloud: FrameCloud, mask: np.ndarray) -> Appearance:
    """Appearance of the object under ``mask`` in ``cloud``."""
    pts = cloud.points_base[mask]
    pts = pts[np.isfinite(pts[:, 2])]
    fp = fit_footprint(pts[:, :2].astype(float)) if len(pts) >= 3 else None
    size = 0.0 if fp is None else (2 * fp.circle_radius_m if fp.shape == "circle" else fp.rectangle_size_m[0])
    centre = np.median(pts, axis=0) if len(pts) else np.full(3, np.nan)
    return Appearance(colours=name_shares(cloud.lab[mask]), size_m=float(size), centre_m=centre)


def similarity(a: Appearance, b: Appearance) -> tuple[float, dict[str, float]]:
    """Match score in [0, 1] of two appearances, with its parts."""
    names = set(a.colours) | set(b.colours)
    colour = sum(min(a.colours.get(n, 0.0), b.colours.get(n, 0.0)) for n in names)
    if a.size_m > 0 and b.size_m > 0:
        size = math.exp(-abs(math.log(b.size_m / a.size_m)) / 0.35)
    else:
        size = 0.0
    dist = float(np.linalg.norm(a.centre_m - b.centre_m)) if np.all(np.isfinite(a.centre_m)) else 1.0
    near = 0.75 + 0.25 * math.exp(-dist / 0.1)
    return colour * size * near, {"colour": round(colour, 3), "size": round(size, 3), "distance_m": round(dist, 4)}


def track(target: Appearance, cloud: FrameCloud, params: RegionParams) -> tuple[np.ndarray, float, dict[str, float]]:
    """The mask of the best match for ``target`` in ``cloud``, its score and score parts.

    Raises:
        NothingFoundError: no candidate reaches ``MIN_MATCH``.
    """
    labels, _, _, _ = frame_pieces(cloud, params)
    best: tuple[float, int, dict[str, float]] | None = None
    slices = ndimage.find_objects(labels)
    # the piece under the old position first
    xy, _ = project_points(target.centre_m[None], cloud.K, cloud.T_base_camera)
    first = None
    if np.all(np.isfinite(xy)) and 0 <= xy[0, 0] < cloud.width and 0 <= xy[0, 1] < cloud.height:
        first = int(labels[int(xy[0, 1]), int(xy[0, 0])]) or None
    order = ([first] if first else []) + [i for i in range(1, len(slices) + 1) if i != first]
    for idx in order:
        sl = slices[idx - 1]
        if sl is None:
            continue
        crop = labels[sl] == idx
        if crop.sum() < 30:
            continue
        mask = np.zeros(labels.shape, bool)
        mask[sl] = crop
        cand = appearance_of(cloud, mask)
        if cand.size_m < 0.01 or cand.size_m > 1.5:
            continue
        score, parts = similarity(target, cand)
        if best is None or score > best[0]:
            best = (score, idx, parts)
    if best is None or best[0] < MIN_MATCH:
        got = "" if best is None else f" (best match {best[0]:.2f}: colour {best[2]['colour']}, size {best[2]['size']})"
        raise NothingFoundError(f"the target was not found in {cloud.frame.name}{got}; it may be hidden or out of "
                                "view: try the other camera, or mark it again with mark_point")
    return labels == best[1], float(best[0]), best[2]
