"""Region growing: the pixels of the object around a seed pixel, from depth and colour.

The image is cut into surface pieces along three kinds of boundary between
neighbouring pixels:

* a **depth break**: the two 3-D points are farther apart than the surface could be
  (an occluding edge);
* a **contact crease**: the surface normal turns sharply *and* the colour changes there
  (where an object rests on or leans against another one);
* a **strong colour edge**: a colour change large enough to separate objects on its own;
* a **step with a colour change**: the surface jumps by at least ``step_edge_m``
  between two neighbours instead of running on at the slope it has on either side, and
  the colours two pixels out on either side differ by ``step_colour_edge`` (a plate's rim
  lying against a raised plank of another colour; the depth-break tolerance is looser,
  so that steep surfaces seen at a grazing angle stay whole).

Pixels on the **support plane** (the largest horizontal surface, normally the table, and
within ``support_band_m`` of it) and pixels without depth are removed. The object is
the connected piece that contains the seed. Printed texture on a flat face (a crease
is missing) and shading across a curved surface (colour changes slowly) do not cut an
object apart.

Objects that touch (a bowl pressed against a ramekin or another bowl) can stay joined
through the few pixels where their surfaces meet. The seed's piece is therefore checked
for **lobes**: the distance transform of its mask is thresholded at rising levels, and
when two or more cores appear, each at least ``lobe_ratio`` as thick as the thickest
and ``lobe_min_radius_m`` in inscribed radius, the piece is two bodies joined by a
neck. It is then split by a watershed on the L*a*b* image seeded with the cores, so
the cut follows the colour seam between the bodies, and the seed's part is kept. A
single compact object has one core at every level and is left whole.

An object resting on another without a colour change at the contact (a bowl on the
stove, a box in a basket or a bowl, a cube on a plate) is cut away from it by
``region_split.split_supported``, which looks for the flat face one of them offers. A
piece that held such a body, or that surrounds another whole piece in the image (a basket
around the box lying in it, seen from above), is a support or a container, never split
into lobes.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from scipy import ndimage

from captain_perception.core.pointcloud import FrameCloud, normal_planes
from captain_perception.core.region_split import split_supported


@dataclass(frozen=True)
class RegionParams:
    """Thresholds of region growing.

    Attributes:
        max_object_size_m: largest object extent searched around the seed, metres.
        window_size_m: half-size of the first search window of a single query, metres.
        depth_break_px: neighbours farther apart than this many pixel footprints (plus
            ``depth_break_min_m``) are on different surfaces.
        depth_break_min_m: smallest 3-D gap that counts as a depth break, metres.
        crease_deg: normal turn (degrees) between pixels two apart that marks a crease.
        colour_edge: CIE76 colour difference (L*a*b*) between neighbours that counts as
            a colour edge at a crease.
        strong_colour_edge: colour difference that separates pieces even without a crease.
        support_band_m: pixels this close to the support plane (with an upward normal)
            belong to the support, metres.
        min_region_px: a seed piece smaller than this is merged with its surroundings
            by retrying without colour cuts.
        split_lobes: split a seed piece made of lobes joined by a neck (touching objects).
        lobe_ratio: a core counts as a lobe when its inscribed radius is at least this
            fraction of the piece's largest inscribed radius.
        lobe_min_radius_m: smallest inscribed radius of a lobe, metres.
        split_supported: cut bodies resting on or lying in a piece away from it
            (``region_split.split_supported``).
        supported_up_cos: a point faces up when its normal's z exceeds this.
        supported_band_m: half-thickness of the flat face around its height, metres.
        supported_contact_m: a part rests on the face when its lowest point is this
            close to the face's height, metres.
        supported_min_height_m: the part's top rises at least this above the face, metres.
        supported_area_ratio: the part's footprint covers at most this share of the
            face's footprint.
        supported_faces: how many of a piece's most common heights of upward-facing
            points are tried as the face.
        supported_face_share: a face holds at least this share of its piece's pixels.
        supported_face_min_area_m2: a smaller share is a support too when it covers at least
            this much of the base-frame x-y plane (a microwave's floor is a small share of
            the whole microwave seen through its front) when it also lies higher than a
            dish (``dish_max_height_m``) and fills ``wide_face_min_solidity`` of its convex
            hull in the image; bodies on it rising ``dish_body_min_height_m`` are then cut
            apart along depth breaks (``region_split.split_supported``), m^2.
        wide_face_min_solidity: see ``supported_face_min_area_m2`` (a basket's rim, a thin
            ring, fills under a tenth of its hull). Such a face no higher than a dish (an
            open drawer's floor seen from above, the cabinet around it) holds only bodies
            it surrounds in the image: ``enclosed_min_share`` of the pixels just outside
            the body's outline are at the face's height (``region_split._enclosed_bodies``),
            whatever the face's solidity (the body itself leaves a hole in it).
        enclosed_min_share: see ``wide_face_min_solidity`` (a bowl in the drawer's corner
            has half its outline on the two walls).
        enclosed_margin_m: such a body is looked for this far inside the outline in x-y of
            the face and the lowest seen points of what stands on it (the face's walls stand
            at the outline), metres.
        contained_coverage: share of the directions around a body lying in a container
            in which the container's points lie.
        contained_depth_m: the rest of a piece reaches at least this far below a face for the
            face to be the top of a body lying in it, metres (not the container's own floor;
            a box lying flat on a basket's liner is about 2 cm tall, with the liner rising
            toward the walls around it).
        contained_gap_m: the container's rim lies at least this far outside the body's
            top, metres.
        raised_face_min_height_m: a body of another colour joined to its support's sides
            in the image is looked for only on a face this far above the table (the top of
            a cabinet, the stove's plate), metres.
        raised_colour_gap: least CIE76 difference between the median colours of such a
            body and its support (a support's own raised parts share its colour).
        compact_top_solidity: a flat face too small to be a support is tried as the top of
            a body lying in the rest only when its largest patch fills at least this share
            of its convex hull (image pixels): a box's top does, a rim or a ring does not.
        more_tops_min_area_m2: beyond the first top found in a piece (or its face's largest
            patch), another patch is tried as a body's top only when its outline covers
            this much of the base-frame x-y plane, m^2 (a can's top seen from above covers
            about 20 cm^2; bits of a basket's rim at one height are smaller).
        dish_min_height_m, dish_max_height_m: a face this far above the table is a dish's
            floor (a plate's, on its foot), whose only raised part is its rim
            (``region_split._raised_bodies``); lower, it is a flat base with its own raised
            parts (the stove's, under its knobs), metres.
        dish_rim_m: how far a dish's rim rises above its floor at most, metres.
        dish_body_min_height_m: a body standing on a dish is cut away whatever its colour
            only when it rises this far above the floor, metres.
        dish_inside_max_share: ... and only when less than this share of the dish left
            without it lies inside the body's outline in the image (a container's floor lies
            wholly inside its wall's; a mug's handle reaches over part of a plate's rim).
        step_edge_m: a step between neighbours: their 3-D difference departs from the
            mean of the differences on either side of them by at least this, metres.
        step_colour_edge: a step cuts pieces apart only where the colours two pixels out on
            either side of it differ by at least this CIE76 distance.
        relief_margin_m: a body's points low over the face lie within this of its higher
            points' footprint; farther ones are the support's relief (a burner), metres.
        lobe_support_tolerance_m: lobes are split apart only when each reaches this close
            to the piece's lowest point (z, base frame), as bodies standing side by side do;
            metres.
        lobe_max_hole_share: a piece whose outline encloses holes over this share of its
            area (a ring around content cut away from it) is not split into lobes.
    """

    max_object_size_m: float = 0.45
    window_size_m: float = 0.25
    depth_break_px: float = 4.0
    depth_break_min_m: float = 0.006
    crease_deg: float = 30.0
    colour_edge: float = 10.0
    strong_colour_edge: float = 1e9
    step_edge_m: float = 0.003
    step_colour_edge: float = 10.0
    support_band_m: float = 0.004
    min_region_px: int = 30
    split_lobes: bool = True
    lobe_ratio: float = 0.5
    lobe_min_radius_m: float = 0.015
    lobe_support_tolerance_m: float = 0.012
    lobe_max_hole_share: float = 0.1
    split_supported: bool = True
    supported_up_cos: float = 0.9
    supported_band_m: float = 0.004
    supported_contact_m: float = 0.015
    supported_min_height_m: float = 0.02
    supported_area_ratio: float = 0.6
    supported_faces: int = 3
    supported_face_share: float = 0.1
    supported_face_min_area_m2: float = 0.01
    wide_face_min_solidity: float = 0.5
    enclosed_min_share: float = 0.5
    enclosed_margin_m: float = 0.01
    contained_coverage: float = 0.75
    contained_gap_m: float = 0.015
    contained_depth_m: float = 0.01
    compact_top_solidity: float = 0.85
    more_tops_min_area_m2: float = 0.0008
    raised_face_min_height_m: float = 0.02
    raised_colour_gap: float = 5.0
    relief_margin_m: float = 0.005
    dish_min_height_m: float = 0.01
    dish_max_height_m: float = 0.035
    dish_rim_m: float = 0.015
    dish_body_min_height_m: float = 0.06
    dish_inside_max_share: float = 0.7


@dataclass(frozen=True)
class Region:
    """A grown region.

    Attributes:
        mask: (H, W) bool mask over the full frame.
        seed_px: (x, y) integer pixel the region was grown from.
        on_support: the seed lies on the support plane itself (the region is that surface).
        support_height_m: base-frame height of the support plane used, or None.
        touches_crop_border: the region reached the border of the search window.
    """

    mask: np.ndarray
    seed_px: tuple[int, int]
    on_support: bool
    support_height_m: float | None
    touches_crop_border: bool

    @property
    def pixel_count(self) -> int:
        """Number of pixels in the region."""
        return int(self.mask.sum())


def search_window(cloud: FrameCloud, x: int, y: int, size_m: float) -> tuple[int, int, int, int]:
    """Pixel window ``(y0, y1, x0, x1)`` that covers ``size_m`` around pixel (x, y)."""
    d = cloud.depth_m[y, x]
    if not np.isfinite(d):
        d = float(np.nanmedian(cloud.depth_m)) if np.isfinite(cloud.depth_m).any() else 1.0
    half = int(np.ceil(size_m / float(cloud.pixel_size_m(max(d, 0.05))))) + 4
    return (max(0, y - half), min(cloud.height, y + half + 1),
            max(0, x - half), min(cloud.width, x + half + 1))


def surface_pieces(cloud: FrameCloud, window: tuple[int, int, int, int] | None = None,
                   params: RegionParams | None = None, use_colour: bool = True
                   ) -> tuple[np.ndarray, np.ndarray, float | None, frozenset[int]]:
    """Cut a window of the frame into surface pieces (see the module docstring).

    Returns:
        ``(labels, support, support_height_m, holders)``: int32 labels of the window
        (0 = cut, support or invalid), the window's support-plane mask, the support
        height, and the labels of pieces that something resting on or lying in them was
        cut away from (``region_split.split_supported``).
    """
    p = params or RegionParams()
    y0, y1, x0, x1 = window or (0, cloud.height, 0, cloud.width)
    P = np.ascontiguousarray(cloud.point_planes[:, y0:y1, x0:x1])
    valid = np.isfinite(P[2])
    lab = cloud.lab[y0:y1, x0:x1]
    Lab = [np.ascontiguousarray(lab[..., i]) for i in range(3)]
    # normals at half resolution (smoothed over ~6 px anyway), repeated back to full size
    N = normal_planes(np.ascontiguousarray(P[:, ::2, ::2]), cloud.camera_position_base, 3)
    N = np.repeat(np.repeat(N, 2, axis=1), 2, axis=2)[:, :P.shape[1], :P.shape[2]]
    depth = cloud.depth_m[y0:y1, x0:x1]

    table = cloud.table_height_m()
    if table is not None:
        support = valid & (np.abs(P[2] - table) < p.support_band_m)
    else:
        support = np.zeros_like(valid)

    tol = p.depth_break_min_m + p.depth_break_px * cloud.pixel_size_m(np.nan_to_num(depth, nan=1.0))
    tol2 = (tol * tol).astype(np.float32)
    node_ok = valid & ~support
    cos_crease = np.float32(np.cos(np.radians(p.crease_deg)))
    colour2 = np.float32(p.colour_edge ** 2)
    strong2 = np.float32(min(p.strong_colour_edge, 1e6) ** 2)
    h, w = node_ok.shape
    # Connectivity on a doubled grid: pixel (i, j) sits at (2i, 2j); the cell between two
    # neighbours is set when they are connected, so 4-connected components of the grid
    # are the pieces.
    grid = np.zeros((2 * h - 1, 2 * w - 1), np.uint8)
    grid[::2, ::2] = node_ok
    for axis in (0, 1):
        if axis == 0:
            a_t, b_t = np.s_[:-1, :], np.s_[1:, :]
            a2, b2, mid = np.s_[:-3, :], np.s_[3:, :], np.s_[1:-1, :]
        else:
            a_t, b_t = np.s_[:, :-1], np.s_[:, 1:]
            a2, b2, mid = np.s_[:, :-3], np.s_[:, 3:], np.s_[:, 1:-1]
        D = [c[b_t] - c[a_t] for c in P]  # neighbour to neighbour, per base axis
        gap2 = sum(d * d for d in D)
        keep = (gap2 <= np.minimum(tol2[a_t], tol2[b_t])) & node_ok[a_t] & node_ok[b_t]
        if use_colour:
            dcol2 = sum((c[a_t] - c[b_t]) ** 2 for c in Lab)
            if strong2 < 1e12:
                keep &= dcol2 <= strong2
            # concave (valley) creases only, normals compared three pixels apart:
            # normals converge there, (nb - na).(pb - pa) < 0
            dot = sum(N[i][a2] * N[i][b2] for i in range(3))
            conc = sum((N[i][b2] - N[i][a2]) * (P[i][b2] - P[i][a2]) for i in range(3))
            crease = np.zeros(keep.shape, bool)
            crease[mid] = (dot < cos_crease) & (conc < 0)
            keep &= ~(crease & (dcol2 > colour2))
            keep &= ~_colour_steps(D, Lab, axis, p)
        if axis == 0:
            grid[1::2, ::2] = keep
        else:
            grid[::2, 1::2] = keep
    _, big = cv2.connectedComponents(grid, connectivity=4, ltype=cv2.CV_32S)
    labels = big[::2, ::2].astype(np.int32)
    labels[~node_ok] = 0
    holders = frozenset(split_supported(labels, P, N, p, table, lab, tol2)) if p.split_supported else frozenset()
    return labels, support, table, holders


def _colour_steps(D: list[np.ndarray], Lab: list[np.ndarray], axis: int, p: RegionParams) -> np.ndarray:
    """Neighbour pairs along ``axis`` (pair ``k`` joins pixels ``k`` and ``k + 1``; ``D``
    their 3-D differences, x, y, z, m) where the surface steps and the colour changes.

    The step is the pair's 3-D difference minus the mean of the differences of the pairs
    before and after it (what the surface's slope predicts there): at least
    ``step_edge_m``, and the pairs on either side agree with each other to within half of
    it (the surface runs on evenly on both sides; a curved or ragged patch does not).
    The colours compared are those of pixels ``k - 1`` and ``k + 2``, so an anti-aliased
    pixel on the seam does not hide the change. Pairs at the image border are never
    steps.

    Returns:
        bool array of the pairs' shape (``D``'s).
    """
    out = np.zeros(D[2].shape, bool)
    if out.shape[axis] < 3:
        return out
    mid, before, after = ((np.s_[1:-1, :], np.s_[:-2, :], np.s_[2:, :]) if axis == 0 else
                          (np.s_[:, 1:-1], np.s_[:, :-2], np.s_[:, 2:]))
    finite = np.isfinite(D[2])
    D = [np.where(finite, d, 0.0) for d in D]
    jump2 = sum((d[mid] - 0.5 * (d[before] + d[after])) ** 2 for d in D)
    even2 = sum((d[before] - d[after]) ** 2 for d in D)
    step = (jump2 >= np.float32(p.step_edge_m ** 2)) & (even2 <= 0.25 * jump2) & \
        finite[mid] & finite[before] & finite[after]
    if not step.any():
        return out
    a = np.s_[:-3, :] if axis == 0 else np.s_[:, :-3]
    b = np.s_[3:, :] if axis == 0 else np.s_[:, 3:]
    dcol2 = sum((c[a] - c[b]) ** 2 for c in Lab)
    out[mid] = step & (dcol2 >= np.float32(p.step_colour_edge ** 2))
    return out


def frame_pieces(cloud: FrameCloud, params: RegionParams | None = None
                 ) -> tuple[np.ndarray, np.ndarray, float | None, frozenset[int]]:
    """``surface_pieces`` of the whole frame, computed once per cloud and parameters."""
    p = params or RegionParams()
    key = ("pieces", p)
    if key not in cloud.cache:
        cloud.cache[key] = surface_pieces(cloud, None, p)
    return cloud.cache[key]  # type: ignore[return-value]


def grow_region(cloud: FrameCloud, x: float, y: float, params: RegionParams | None = None) -> Region | None:
    """The object region around pixel ``(x, y)`` (see the module docstring).

    Returns None when the seed has no depth within a few pixels.
    """
    p = params or RegionParams()
    ix = int(np.clip(round(x), 0, cloud.width - 1))
    iy = int(np.clip(round(y), 0, cloud.height - 1))
    full = (0, cloud.height, 0, cloud.width)
    key = ("pieces", p)
    queries = int(cloud.cache.get("region_queries", 0)) + 1  # type: ignore[call-overload]
    cloud.cache["region_queries"] = queries
    if key in cloud.cache or queries > 1:
        window = full
        labels, support, table, holders = frame_pieces(cloud, p)
    else:
        # a single query: cut only a window around the seed; redo on the full frame if
        # the object reaches the window's border
        window = search_window(cloud, ix, iy, p.window_size_m)
        labels, support, table, holders = surface_pieces(cloud, window, p)
    for attempt in range(2):
        if attempt == 1:
            # the seed piece is tiny (texture cut it off): grow without colour cuts nearby
            window = search_window(cloud, ix, iy, p.max_object_size_m)
            labels, support, table, holders = surface_pieces(cloud, window, p, use_colour=False)
        y0, y1, x0, x1 = window
        sx, sy = ix - x0, iy - y0
        if support[sy, sx]:
            piece = _support_piece(support, sx, sy)
            on_support = True
        else:
            lab_id = _seed_label(labels, sx, sy)
            if lab_id is None:
                return None
            piece = labels == lab_id
            on_support = False
            if piece.sum() < p.min_region_px and attempt == 0:
                continue
            if p.split_lobes and lab_id not in holders and not _encloses_a_piece(piece, labels, p):
                # (a support or container holding a body is one object, not lobes)
                piece = split_lobes(cloud, piece, window, sx, sy, p)
        mask = np.zeros((cloud.height, cloud.width), bool)
        mask[y0:y1, x0:x1] = piece
        border = (piece[0, :].any() and y0 > 0) or (piece[-1, :].any() and y1 < cloud.height) or \
                 (piece[:, 0].any() and x0 > 0) or (piece[:, -1].any() and x1 < cloud.width)
        if border and attempt == 0 and window != full:
            return grow_region_full(cloud, ix, iy, p)
        return Region(mask=mask, seed_px=(ix, iy), on_support=on_support, support_height_m=table,
                      touches_crop_border=bool(border))
    return None


def grow_region_full(cloud: FrameCloud, x: float, y: float, params: RegionParams | None = None) -> Region | None:
    """``grow_region`` on the whole frame (the frame's pieces are computed and cached)."""
    frame_pieces(cloud, params or RegionParams())
    return grow_region(cloud, x, y, params)


def _seed_label(labels: np.ndarray, sx: int, sy: int, radius: int = 4) -> int | None:
    """Label at the seed, or the most common label among the nearest labelled pixels."""
    if labels[sy, sx] > 0:
        return int(labels[sy, sx])
    h, w = labels.shape
    for r in range(1, radius + 1):
        win = labels[max(0, sy - r):min(h, sy + r + 1), max(0, sx - r):min(w, sx + r + 1)]
        vals = win[win > 0]
        if vals.size:
            ids, counts = np.unique(vals, return_counts=True)
            return int(ids[np.argmax(counts)])
    return None


def _encloses_a_piece(piece: np.ndarray, labels: np.ndarray, p: RegionParams) -> bool:
    """Whether ``piece`` surrounds another whole piece of ``labels`` in the image (a basket
    around the box lying in it, seen from above): at least ``min_region_px`` pixels of it,
    nine tenths of them inside the piece's holes."""
    ys, xs = np.nonzero(piece)
    if len(ys) == 0:
        return False
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    crop = piece[y0:y1, x0:x1]
    hole = ndimage.binary_fill_holes(crop) & ~crop
    inside = labels[y0:y1, x0:x1][hole]
    inside = inside[inside > 0]
    if inside.size < p.min_region_px:
        return False
    ids, counts = np.unique(inside, return_counts=True)
    sizes = ndimage.sum_labels(np.ones_like(labels), labels, ids)
    return bool(np.any((counts >= p.min_region_px) & (counts >= 0.9 * sizes)))


def _hole_share(mask: np.ndarray) -> float:
    """Share of a mask's filled outline that is enclosed hole."""
    n = int(np.count_nonzero(mask))
    if n == 0:
        return 0.0
    filled = np.count_nonzero(ndimage.binary_fill_holes(mask.astype(bool)))
    return float(filled - n) / float(filled)


def _support_piece(support: np.ndarray, sx: int, sy: int) -> np.ndarray:
    _, lab = cv2.connectedComponents(support.astype(np.uint8), connectivity=4)
    return lab == lab[sy, sx]


def split_lobes(cloud: FrameCloud, piece: np.ndarray, window: tuple[int, int, int, int], sx: int, sy: int,
                params: RegionParams | None = None) -> np.ndarray:
    """The seed's lobe of a piece made of touching bodies (see the module docstring).

    Args:
        cloud: the frame.
        piece: (h, w) bool mask of the seed's piece within ``window``.
        window: ``(y0, y1, x0, x1)`` of ``piece`` in the frame.
        sx / sy: the seed pixel within the window.

    Returns:
        The seed's lobe, or ``piece`` itself when it has a single lobe.
    """
    p = params or RegionParams()
    if piece.sum() < 8 * p.min_region_px:
        return piece
    ys, xs = np.nonzero(piece)
    by0, by1 = max(0, ys.min() - 2), min(piece.shape[0], ys.max() + 3)
    bx0, bx1 = max(0, xs.min() - 2), min(piece.shape[1], xs.max() + 3)
    crop = np.ascontiguousarray(piece[by0:by1, bx0:bx1]).astype(np.uint8)
    if _hole_share(crop) > p.lobe_max_hole_share:
        # a ring around a hole: a container whose content was cut away from it
        # (``region_split``), not two bodies side by side
        return piece
    dt = cv2.distanceTransform(crop, cv2.DIST_L2, 5)
    radius_px = float(dt.max())
    depth = float(np.nanmedian(cloud.depth_m[window[0]:window[1], window[2]:window[3]][piece]))
    min_px = max(p.lobe_ratio * radius_px, p.lobe_min_radius_m / float(cloud.pixel_size_m(depth)))
    if radius_px < min_px:
        return piece
    cores: list[np.ndarray] = []
    for level in np.arange(0.2, 0.9, 0.05) * radius_px:
        n, lab = cv2.connectedComponents((dt > level).astype(np.uint8), connectivity=8)
        if n <= 2:
            continue
        peaks = np.zeros(n, np.float32)
        np.maximum.at(peaks, lab.ravel(), dt.ravel())
        big = [i for i in range(1, n) if peaks[i] >= min_px]
        if len(big) >= 2:
            cores = [lab == i for i in big]
            break
    if len(cores) < 2:
        return piece
    markers = np.zeros(crop.shape, np.int32)
    for k, core in enumerate(cores, 1):
        markers[core] = k
    outside = len(cores) + 1
    markers[~cv2.dilate(crop, np.ones((3, 3), np.uint8)).astype(bool)] = outside
    y0, x0 = window[0] + by0, window[2] + bx0
    lab_img = cloud.lab[y0:y0 + crop.shape[0], x0:x0 + crop.shape[1]]
    # L*a*b* to 8 bits, all three axes scaled alike (L* 0..100 -> 0..255, a* b* about 128)
    img = np.clip(np.stack([lab_img[..., 0] * 2.55, lab_img[..., 1] * 2.55 + 128.0,
                            lab_img[..., 2] * 2.55 + 128.0], -1), 0, 255)
    ws = cv2.watershed(np.ascontiguousarray(img.astype(np.uint8)), markers)
    # a watershed line pixel (-1) next to one lobe only is that lobe's outline; one
    # between two lobes is on the seam and belongs to neither
    inside = crop.astype(bool)
    owner = np.where(inside & (ws > 0) & (ws != outside), ws, 0)
    line = inside & (ws == -1)
    near = [cv2.dilate((owner == k).astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
            for k in range(1, len(cores) + 1)]
    count = np.sum(near, axis=0)
    for k, around in enumerate(near, 1):
        owner[line & around & (count == 1)] = k
    # touching bodies each stand on the support: every lobe reaches down to the piece's
    # lowest level; a lobe that stays above it (a bottle's neck and cap, a handle) is part
    # of the same object
    z = cloud.points_base[y0:y0 + crop.shape[0], x0:x0 + crop.shape[1], 2]
    ok = inside & np.isfinite(z)
    if not ok.any():
        return piece
    lowest = float(z[ok].min())
    for k in range(1, len(cores) + 1):
        zk = z[ok & (owner == k)]
        if zk.size == 0 or float(zk.min()) > lowest + p.lobe_support_tolerance_m:
            return piece
    seed = (sy - by0, sx - bx0)
    if not (0 <= seed[0] < crop.shape[0] and 0 <= seed[1] < crop.shape[1]):
        return piece
    seed_k = int(owner[seed])
    if seed_k == 0:
        # the seed lies on the seam: the lobe that owns most of its neighbourhood
        votes = owner[max(0, seed[0] - 2):seed[0] + 3, max(0, seed[1] - 2):seed[1] + 3]
        votes = votes[votes > 0]
        if votes.size == 0:
            return piece
        seed_k = int(np.bincount(votes).argmax())
        owner[seed] = seed_k
    # the part of the seed's lobe connected to the seed (drops slivers cut off by the split)
    _, parts = cv2.connectedComponents((owner == seed_k).astype(np.uint8), connectivity=4)
    lobe = parts == parts[seed]
    if lobe.sum() < p.min_region_px:
        return piece
    out = np.zeros_like(piece)
    out[by0:by1, bx0:bx1] = lobe
    return out
