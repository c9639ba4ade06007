"""Cutting apart an object and what it rests on or in when the surface pieces of
``region.py`` keep them together (a bowl on the stove, a box in a basket or a bowl, a
cube on a plate): the contact between them shows no depth break and no colour crease.

``split_supported`` finds a piece's largest flat, upward face. When it is a support (a
plate's floor, a basket's liner, the stove's top), bodies standing on it are cut away;
when it is the top of a body lying inside the rest of the piece (a box in a bowl), that
body is cut away. A face too small for a support may still be such a top (a box in a
basket seen from above: its top is all the camera sees of it). On a support's top above
the table, a body of another colour that joins the support's sides in the image (a
bottle near the cabinet's front edge, a moka pot on the stove) is cut away above the face
and grown back down within its own footprint. A face bodies were cut from may be the top of
a tall body standing on a lower support of the same piece (a moka pot's lid, its knob cut
away, the pot on the stove): a face a tall body's height lower is tried next. A wide floor
low in a large piece (an open drawer's floor seen from above, the cabinet around it) gives
up the bodies it surrounds in the image (a bowl in the drawer, touching its side wall).

Frames: points and normals in the robot base frame (z up), metres.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import cv2
import numpy as np
from scipy import ndimage

if TYPE_CHECKING:
    from captain_perception.core.region import RegionParams


def split_supported(labels: np.ndarray, P: np.ndarray, N: np.ndarray, params: RegionParams,
                    table_height_m: float | None = None, lab: np.ndarray | None = None,
                    gap2_m2: np.ndarray | None = None) -> set[int]:
    """Cut objects resting on a piece's own flat top away from it, in place (new labels).

    A piece that holds a large horizontal face (a plate's floor, a basket's liner, the
    stove's or the cabinet's top) and, standing on that face, a body that rises clearly
    above it (a bowl on the stove, a box in the basket, a cube on the plate) is one object
    on another when they are joined at a contact without a colour change. The face is the
    most common height among the piece's upward-facing points (base frame z, within
    ``supported_band_m``); the piece without the face falls apart into parts, and a part is
    cut away as its own piece when it rests on the face (its lowest point near it), rises
    ``supported_min_height_m`` above it, has its centre over the face and covers a clearly
    smaller area than the face. A bowl's own floor is surrounded by its wall (the wall is
    not smaller than the floor), so a single object is left whole. When no part rests on
    the face, the face may be the top of a body lying inside the rest of the piece (a box
    in a bowl, ``_top_inside``); that body is cut away instead. After a cut, faces at least
    ``dish_body_min_height_m`` lower are tried too (the cut face was a tall body's top).
    A wide face (``supported_face_min_area_m2``) no higher than a dish above the table
    that cut nothing gives up the bodies it surrounds in the image (``_enclosed_bodies``).

    Args:
        labels: (h, w) int32 piece labels (0 = none), relabelled in place.
        P: (3, h, w) base-frame points, metres.
        N: (3, h, w) unit normals (base frame).
        table_height_m: the support plane's height (base frame z, metres), if known: a
            body joined to a tall support's sides is looked for only on faces standing
            ``raised_face_min_height_m`` above it (``_raised_bodies``).
        lab: (h, w, 3) CIE L*a*b* colour of the pixels; without it no such body is cut.
        gap2_m2: (h, w) squared depth-break tolerance of each pixel (m^2). With it, a face
            that is too small a share of its piece but wide, raised above a dish's height
            and solid in the image (``supported_face_min_area_m2``: the microwave's floor
            seen through its open front; a basket's rim is a thin ring) holds tall bodies
            too; the rest of the piece without the face (and the face's height band beside
            it) then falls apart along depth breaks, not only where the face separated it
            (the mug standing in the microwave touches the back wall in the image, 10 cm
            behind it).

    Returns:
        The labels of the pieces something was cut away from (supports and containers:
        ``region.grow_region`` does not split those into lobes).
    """
    p = params
    holders: set[int] = set()
    next_label = int(labels.max()) + 1
    min_px = 4 * p.min_region_px
    up = np.nan_to_num(N[2], nan=0.0) > p.supported_up_cos
    z_all = P[2]
    for idx, sl in enumerate(ndimage.find_objects(labels), start=1):
        if sl is None:
            continue
        piece = labels[sl] == idx
        n = int(piece.sum())
        if n < 3 * min_px:
            continue
        z = z_all[sl]
        flat = piece & up[sl] & np.isfinite(z)
        if int(flat.sum()) < min_px:
            continue
        zf = z[flat]
        bins = np.arange(float(zf.min()) - 1e-4, float(zf.max()) + 2 * p.supported_band_m, p.supported_band_m)
        hist, edges = np.histogram(zf, bins=bins)
        xs = P[0][sl]
        ys = P[1][sl]
        tried: list[float] = []
        cut_at: float | None = None  # the face bodies were cut from (see below)
        # the most common heights first (the bowl's own floor may outnumber the stove's top)
        for k in np.argsort(-hist, kind="stable")[:p.supported_faces]:
            if hist[k] < min_px // 2:
                break
            near = (zf >= edges[max(k - 1, 0)]) & (zf <= edges[min(k + 2, len(edges) - 1)])
            z_face = float(np.median(zf[near]))
            if any(abs(z_face - t) < 2 * p.supported_band_m for t in tried):
                continue
            if cut_at is not None and z_face > cut_at - p.dish_body_min_height_m:
                continue
            tried.append(z_face)
            face = flat & (np.abs(z - z_face) < p.supported_band_m)
            if int(face.sum()) < max(min_px, p.supported_face_share * n):
                # too small for a support, but it may be the top of a body lying in the
                # rest (a box in a basket seen from above: its top is all the camera sees
                # of it, the basket's woven floor is no single flat face)
                tops = _tops_inside(face, z_face, piece & ~face, xs, ys, z, p, min_px, compact=True,
                                    first=idx not in holders)
                for top_body in tops:  # then tops at other heights (a can and a box in the basket)
                    labels[sl][top_body] = next_label
                    next_label += 1
                    piece &= ~top_body
                    flat &= ~top_body
                if tops:
                    holders.add(idx)
                    continue
                raised = table_height_m is not None and z_face - table_height_m > p.dish_max_height_m
                if not raised or gap2_m2 is None or int(face.sum()) < min_px or idx in holders \
                        or _footprint_m2(face, xs, ys) < p.supported_face_min_area_m2 \
                        or _solidity(face) < p.wide_face_min_solidity:
                    bodies = []
                else:
                    # a wide, solid, raised floor that is a small share of a large piece (the
                    # microwave's floor seen through its open front; not a basket's rim, a thin
                    # ring): tall bodies standing on it (``dish_body_min_height_m``, as on a
                    # dish), apart from the rest along depth breaks (in the image the mug
                    # touches the back wall 10 cm behind it)
                    tall_only = replace(p, supported_min_height_m=p.dish_body_min_height_m)
                    bodies = _bodies_on_face(piece, face, z_face, xs, ys, z, tall_only, min_px, gap2_m2=gap2_m2[sl])
            else:
                if idx in holders and cut_at is None:  # tops of bodies were cut away: the rest is their container
                    continue
                above = z_face - table_height_m if lab is not None and table_height_m is not None else None
                tall = above is not None and above > p.raised_face_min_height_m
                dish = above is not None and p.dish_min_height_m < above < p.dish_max_height_m
                bodies = _bodies_on_face(piece, face, z_face, xs, ys, z, p, min_px,
                                         lab[sl] if lab is not None and (tall or dish) else None, dish)
            if not bodies and gap2_m2 is not None and table_height_m is not None and idx not in holders \
                    and z_face - table_height_m <= p.dish_max_height_m and int(face.sum()) >= min_px \
                    and _footprint_m2(face, xs, ys) >= p.supported_face_min_area_m2:
                # a wide floor low in a large piece (an open drawer's floor seen from above, the
                # cabinet around it; whatever its share of the piece): bodies it surrounds
                bodies = _enclosed_bodies(piece, face, z_face, xs, ys, z, p, min_px, gap2_m2[sl])
            for body in bodies:
                labels[sl][body] = next_label
                next_label += 1
                piece &= ~body
                flat &= ~body
            if not bodies:
                continue
            holders.add(idx)
            if cut_at is not None:
                break
            # the face may be the top of a tall body standing on a lower support in the same
            # piece (a moka pot's lid, its knob cut away, the pot on the stove): a face at
            # least a tall body's height (``dish_body_min_height_m``) lower is tried next
            cut_at = z_face
    return holders


def _bodies_on_face(piece: np.ndarray, face: np.ndarray, z_face: float, xs: np.ndarray, ys: np.ndarray,
                    z: np.ndarray, p: RegionParams, min_px: int, raised_lab: np.ndarray | None = None,
                    dish: bool = False, gap2_m2: np.ndarray | None = None) -> list[np.ndarray]:
    """The bodies to cut away from ``piece`` given its flat ``face`` at height ``z_face``
    (see ``split_supported``); empty when there are none. ``raised_lab``: the colours of
    the piece's window when the face stands above the table or is a dish's floor
    (``_raised_bodies`` is tried too); ``dish``: the face lies within
    ``dish_min_height_m`` to ``dish_max_height_m`` above the table; ``gap2_m2``: squared
    depth-break tolerances (``split_supported``)."""
    rest = piece & ~face
    if gap2_m2 is not None:
        # the face's height band next to it, whatever the normals (they turn near a crease,
        # so a ring of the floor round a body's foot is not counted as face)
        band = _band(z, z_face, p)
        near = cv2.dilate(face.astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool)
        rest &= ~(band & near)
    n_parts, parts = _parts(rest, xs, ys, z, gap2_m2)
    if n_parts < 2:  # nothing but the face
        return []
    face_xy = _xy_of(face, xs, ys)
    if len(face_xy) < 3:
        return []
    face_hull = cv2.convexHull(face_xy)
    face_area = float(cv2.contourArea(face_hull))
    out = []
    for j in range(1, n_parts):
        part = parts == j
        if not _stands_on(part, z, z_face, p, min_px):
            continue
        pxy = _xy_of(part, xs, ys)
        if not _centre_over(pxy, face_hull):
            continue
        if float(cv2.contourArea(cv2.convexHull(pxy))) > p.supported_area_ratio * face_area:
            continue
        out.append(_body_of(part, xs, ys, z, z_face, p))
    if not out:  # the face is the top of bodies lying inside the rest (a box in a bowl, two cans in a basket)
        out = _tops_inside(face, z_face, rest, xs, ys, z, p, min_px)
    if not out and raised_lab is not None:
        out = _raised_bodies(piece, rest, face_hull, z_face, xs, ys, z, raised_lab, p, min_px, dish)
    return out


def _enclosed_bodies(piece: np.ndarray, face: np.ndarray, z_face: float, xs: np.ndarray, ys: np.ndarray,
                     z: np.ndarray, p: RegionParams, min_px: int, gap2_m2: np.ndarray) -> list[np.ndarray]:
    """Bodies standing on a wide floor low in a large piece that the floor surrounds in the
    image (a bowl in an open drawer seen from above; it may touch the drawer's walls).

    The rest of the piece (without the face's height band) within the outline in x-y of the
    floor and of the lowest seen points of what stands on it (a bowl in the drawer's corner
    hides the floor there), ``enclosed_margin_m`` clear of it (the floor's own walls stand
    at that outline), falls apart along depth breaks. A part is a body when it rests on the floor (its lowest point
    near it), rises ``supported_min_height_m`` above it, covers a clearly smaller footprint
    than the floor (``supported_area_ratio``) and at least ``enclosed_min_share`` of the
    pixels just outside it lie at the floor's height; it is then grown back to the rest's
    pixels within its own footprint that join it (its rim where it touches a wall)."""
    band = _band(z, z_face, p)
    rest = piece & ~face & ~band
    face_xy = _xy_of(face, xs, ys)
    if len(face_xy) < 3:
        return []
    # the floor's outline, with the lowest seen points of what stands on it (a bowl in the
    # drawer's corner hides the floor there)
    foot = rest & (np.nan_to_num(z, nan=np.inf) < z_face + p.supported_contact_m)
    ry, rx = np.nonzero(rest & np.isfinite(z))
    rxy = np.stack([xs[ry, rx], ys[ry, rx]], -1)
    inner = np.zeros_like(rest)
    inner[ry, rx] = _inside_xy(rxy, np.vstack([face_xy, _xy_of(foot, xs, ys)]), -p.enclosed_margin_m)
    n_parts, parts = _parts(inner, xs, ys, z, gap2_m2)
    face_area = float(cv2.contourArea(cv2.convexHull(face_xy.astype(np.float32))))
    out = []
    for j in range(1, n_parts):
        part = parts == j
        if not _stands_on(part, z, z_face, p, min_px):
            continue
        pxy = _xy_of(part, xs, ys)
        if float(cv2.contourArea(cv2.convexHull(pxy.astype(np.float32)))) > p.supported_area_ratio * face_area:
            continue
        if not _surrounded(part, face | band, p):
            continue
        within = np.zeros_like(rest)
        within[ry, rx] = _inside_xy(rxy, pxy, 0.0)
        _, grown = cv2.connectedComponents((part | within).astype(np.uint8), connectivity=8)
        keep = np.unique(grown[part])
        out.append(np.isin(grown, keep[keep > 0]))
    return out


def _raised_bodies(piece: np.ndarray, rest: np.ndarray, face_hull: np.ndarray, z_face: float, xs: np.ndarray,
                   ys: np.ndarray, z: np.ndarray, lab: np.ndarray, p: RegionParams, min_px: int,
                   dish: bool = False) -> list[np.ndarray]:
    """Bodies (of another colour, or tall on a dish) standing on a support's top whose pixels join the
    support's own sides in the image (a bottle on the cabinet's top reaches down past its
    front edge, a moka pot on the stove):
    the parts of ``rest`` rising more than half ``supported_min_height_m`` above the face,
    each grown back down to the face within its own footprint (``relief_margin_m``), that
    pass the tests of a body resting on the face (its lowest point at the face, its top
    ``supported_min_height_m`` above it, its centre over the face) and cover a clearly
    smaller footprint than what is left of the piece (the support: the body may hide most
    of the face itself). A container's wall rises all around its floor, so its footprint
    is not smaller than the floor left inside it; a support's own raised parts (the stove's
    knob stand) share its colour: the median L*a*b* colours of body and support must differ
    by more than ``raised_colour_gap``.

    On a dish (``dish``: a face ``dish_min_height_m`` to ``dish_max_height_m`` above the
    table, a plate's floor on its foot) the colours may match (a white mug on a white plate)
    and the body may hide most of the dish: there the support's only raised part is its low
    rim, so a tall body passes when what is left of the piece stays within ``dish_rim_m`` of
    the face and lies mostly outside the body's outline in the image (a container's floor
    lies inside its wall's outline); see ``_on_a_dish``.

    When no body passes, the cut is made again at the full ``supported_min_height_m``: a
    support's low rim (a plate's, about a centimetre above its floor) can join a body to its
    neighbour at half that height (a mug on a plate and a box against the plate's rim form
    one part, too large for a body)."""
    for cut in (0.5, 1.0):
        out = _raised_bodies_above(piece, rest, face_hull, z_face, xs, ys, z, lab, p, min_px,
                                   z_face + cut * p.supported_min_height_m, dish)
        if out:
            return out
    return []


def _raised_bodies_above(piece: np.ndarray, rest: np.ndarray, face_hull: np.ndarray, z_face: float,
                         xs: np.ndarray, ys: np.ndarray, z: np.ndarray, lab: np.ndarray, p: RegionParams,
                         min_px: int, z_cut: float, dish: bool = False) -> list[np.ndarray]:
    """``_raised_bodies`` for the parts of ``rest`` above ``z_cut`` (base frame z, metres)."""
    high = rest & np.isfinite(z) & (z > z_cut)
    n_parts, parts = cv2.connectedComponents(high.astype(np.uint8), connectivity=8)
    out = []
    for j in range(1, n_parts):
        part = parts == j
        if int(part.sum()) < min_px:
            continue
        hxy = _xy_of(part, xs, ys)
        if len(hxy) < 3:
            continue
        if float(np.percentile(z[part], 98)) < z_face + p.supported_min_height_m:
            continue
        # the part's own lower pixels: those of the rest connected to it within its footprint
        ry, rx = np.nonzero(rest & ~part & np.isfinite(z))
        under = np.zeros_like(part)
        if len(ry):
            inside = _inside_xy(np.stack([xs[ry, rx], ys[ry, rx]], -1), hxy, p.relief_margin_m)
            under[ry[inside], rx[inside]] = True
        _, grown = cv2.connectedComponents((part | under).astype(np.uint8), connectivity=8)
        keep = np.unique(grown[part])
        body = np.isin(grown, keep[keep > 0])
        zb = z[body]
        zb = zb[np.isfinite(zb)]
        if abs(float(np.percentile(zb, 2)) - z_face) > p.supported_contact_m:
            continue
        bxy = _xy_of(body, xs, ys)
        if not _centre_over(bxy, face_hull):
            continue
        sxy = _xy_of(piece & ~body, xs, ys)
        if len(sxy) < 3:
            continue
        if dish and _on_a_dish(piece & ~body, body, z, z_face, p):
            out.append(body)
            continue
        support_area = float(cv2.contourArea(cv2.convexHull(sxy)))
        if float(cv2.contourArea(cv2.convexHull(bxy))) > p.supported_area_ratio * support_area:
            continue
        colour_gap = np.linalg.norm(np.median(lab[body], axis=0) - np.median(lab[piece & ~body], axis=0))
        if not colour_gap > p.raised_colour_gap:
            continue
        out.append(body)
    return out


def _on_a_dish(support: np.ndarray, body: np.ndarray, z: np.ndarray, z_face: float, p: RegionParams) -> bool:
    """Whether ``body`` stands on a dish whatever its colour and size (see ``_raised_bodies``):
    the body rises ``dish_body_min_height_m`` above the face (98th percentile; a support's
    own raised parts, such as the stove's knob stand, are lower), the ``support`` left
    without it rises at most ``dish_rim_m`` above the face (90th percentile of its heights)
    and less than ``dish_inside_max_share`` of its pixels lie inside the body's outline
    (convex hull) in the image."""
    zb = z[body & np.isfinite(z)]
    if zb.size == 0 or float(np.percentile(zb, 98)) < z_face + p.dish_body_min_height_m:
        return False
    zs = z[support & np.isfinite(z)]
    if zs.size == 0 or float(np.percentile(zs, 90)) > z_face + p.dish_rim_m:
        return False
    yy, xx = np.nonzero(body)
    outline = np.zeros(body.shape, np.uint8)
    cv2.fillConvexPoly(outline, cv2.convexHull(np.stack([xx, yy], -1).astype(np.int32)), 1)
    return float((support & (outline > 0)).sum()) < p.dish_inside_max_share * float(support.sum())


def _tops_inside(face: np.ndarray, z_face: float, rest: np.ndarray, xs: np.ndarray, ys: np.ndarray,
                 z: np.ndarray, p: RegionParams, min_px: int, compact: bool = False,
                 first: bool = True) -> list[np.ndarray]:
    """``_top_inside`` for each patch of ``face`` of at least ``min_px`` pixels, largest
    first (bodies of one height lying side by side, two cans or two boxes in a basket, give
    one face of several patches; each patch is tested with the others counted as the rest).
    Past the face's largest patch, or when ``first`` is False (a top was already cut from
    the piece), a patch must also cover ``more_tops_min_area_m2``. ``compact`` (a face too
    small to be a support): only patches that are one compact blob
    (``compact_top_solidity`` of their convex hull, in pixels), as the top of a box is and
    a container's rim or a ring of relief is not. Returns the bodies found, none
    overlapping another."""
    n, comp, stats, _ = cv2.connectedComponentsWithStats(face.astype(np.uint8), connectivity=8)
    out: list[np.ndarray] = []
    largest = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA])) if first and n > 1 else 0
    for k in 1 + np.argsort(-stats[1:, cv2.CC_STAT_AREA], kind="stable"):
        if int(stats[k, cv2.CC_STAT_AREA]) < min_px:
            break
        patch = comp == k
        if compact:
            yy, xx = np.nonzero(patch)
            hull_px = float(cv2.contourArea(cv2.convexHull(np.stack([xx, yy], -1).astype(np.int32))))
            if hull_px <= 0 or patch.sum() < p.compact_top_solidity * hull_px:
                continue
        xy = _xy_of(patch, xs, ys)
        if len(xy) < 3:
            continue
        area = float(cv2.contourArea(cv2.convexHull(xy)))
        if k != largest and area < p.more_tops_min_area_m2:
            continue
        body = _top_inside(patch, xy, area, z_face, rest | (face & ~patch), xs, ys, z, p)
        if body is not None and not any((body & other).any() for other in out):
            out.append(body)
    return out


def _parts(mask: np.ndarray, xs: np.ndarray, ys: np.ndarray, z: np.ndarray, gap2_m2: np.ndarray | None
           ) -> tuple[int, np.ndarray]:
    """Connected parts of ``mask``: ``(count + 1, labels)`` as ``cv2.connectedComponents``
    gives them. With ``gap2_m2`` (squared depth-break tolerance per pixel, m^2), two
    neighbours are joined only when their 3-D points lie within the smaller tolerance
    (4-connected); without it, 8-connected pixel adjacency."""
    if gap2_m2 is None:
        return cv2.connectedComponents(mask.astype(np.uint8), connectivity=8)
    h, w = mask.shape
    grid = np.zeros((2 * h - 1, 2 * w - 1), np.uint8)
    grid[::2, ::2] = mask
    for axis in (0, 1):
        a, b = (np.s_[:-1, :], np.s_[1:, :]) if axis == 0 else (np.s_[:, :-1], np.s_[:, 1:])
        gap2 = (xs[b] - xs[a]) ** 2 + (ys[b] - ys[a]) ** 2 + (z[b] - z[a]) ** 2
        keep = mask[a] & mask[b] & (np.nan_to_num(gap2, nan=np.inf) <= np.minimum(gap2_m2[a], gap2_m2[b]))
        if axis == 0:
            grid[1::2, ::2] = keep
        else:
            grid[::2, 1::2] = keep
    n, big = cv2.connectedComponents(grid, connectivity=4, ltype=cv2.CV_32S)
    parts = big[::2, ::2].copy()
    parts[~mask] = 0
    return n, parts


def _stands_on(part: np.ndarray, z: np.ndarray, z_face: float, p: RegionParams, min_px: int) -> bool:
    """Whether ``part`` (at least ``min_px`` pixels with depth) stands on a face at height
    ``z_face``: its lowest point (2nd percentile) within ``supported_contact_m`` of it, its
    top (98th) at least ``supported_min_height_m`` above it."""
    zp = z[part]
    zp = zp[np.isfinite(zp)]
    if zp.size < min_px:
        return False
    low, top = float(np.percentile(zp, 2)), float(np.percentile(zp, 98))
    return abs(low - z_face) <= p.supported_contact_m and top >= z_face + p.supported_min_height_m


def _band(z: np.ndarray, z_face: float, p: RegionParams) -> np.ndarray:
    """Pixels within ``supported_band_m`` of the face's height, whatever their normals."""
    return np.abs(np.nan_to_num(z, nan=np.inf) - z_face) < p.supported_band_m


def _surrounded(part: np.ndarray, around: np.ndarray, p: RegionParams) -> bool:
    """Whether at least ``enclosed_min_share`` of the pixels in a 5-pixel ring just outside
    ``part`` are ``around``."""
    ring = cv2.dilate(part.astype(np.uint8), np.ones((11, 11), np.uint8)).astype(bool) & ~part
    n = int(ring.sum())
    return n > 0 and float((ring & around).sum()) >= p.enclosed_min_share * n


def _solidity(mask: np.ndarray) -> float:
    """Share of its convex hull (image pixels) a mask fills."""
    ys, xs = np.nonzero(mask)
    if len(xs) < 3:
        return 0.0
    hull = cv2.convexHull(np.stack([xs, ys], 1).astype(np.int32))
    return float(len(xs)) / max(1.0, float(cv2.contourArea(hull)))


def _footprint_m2(mask: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> float:
    """Area of the convex hull of a mask's base-frame x-y points, m^2."""
    xy = _xy_of(mask, xs, ys)
    return float(cv2.contourArea(cv2.convexHull(xy))) if len(xy) >= 3 else 0.0


def _xy_of(mask: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """The finite base-frame x, y (n, 2) float32 of a mask's pixels, metres."""
    xy = np.stack([xs[mask], ys[mask]], -1).astype(np.float32)
    return xy[np.isfinite(xy).all(1)]


def _centre_over(xy: np.ndarray, hull: np.ndarray) -> bool:
    """Whether the mean of points ``xy`` (n, 2) lies inside the convex ``hull``."""
    centre = xy.mean(0)
    return cv2.pointPolygonTest(hull, (float(centre[0]), float(centre[1])), False) >= 0


def _inside_xy(xy: np.ndarray, outline_xy: np.ndarray, margin_m: float) -> np.ndarray:
    """Which points ``xy`` (n, 2) lie within ``margin_m`` of the convex hull of ``outline_xy``
    (m, 2), x and y in metres (rasterised at 1 mm); a negative ``margin_m``: at least that
    far inside it."""
    pad = abs(margin_m) + 0.002
    lo = outline_xy.min(0) - pad
    cells = np.ceil((outline_xy.max(0) + pad - lo) / 0.001).astype(int) + 1
    grid = np.zeros((int(cells[1]), int(cells[0])), np.uint8)
    hull = cv2.convexHull(((outline_xy - lo) / 0.001).astype(np.int32))
    cv2.fillConvexPoly(grid, hull, 1)
    r = max(1, round(abs(margin_m) / 0.001))
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
    grid = cv2.erode(grid, disc) if margin_m < 0 else cv2.dilate(grid, disc)
    ij = np.floor((xy - lo) / 0.001).astype(int)
    ok = (ij[:, 0] >= 0) & (ij[:, 1] >= 0) & (ij[:, 0] < grid.shape[1]) & (ij[:, 1] < grid.shape[0])
    out = np.zeros(len(xy), bool)
    out[ok] = grid[ij[ok, 1], ij[ok, 0]] > 0
    return out


def _body_of(part: np.ndarray, xs: np.ndarray, ys: np.ndarray, z: np.ndarray, z_face: float,
             p: RegionParams) -> np.ndarray:
    """The body standing on a face, without the low relief of the support that it touches
    (a burner's rings around a pot): points less than half ``supported_min_height_m`` above
    the face that lie more than ``relief_margin_m`` outside the footprint of the body's
    higher points stay with the support."""
    high = part & np.isfinite(z) & (z >= z_face + 0.5 * p.supported_min_height_m)
    if int(high.sum()) < 3:
        return part
    low = part & ~high
    ly, lx = np.nonzero(low)
    if len(ly) == 0:
        return part
    hxy = np.stack([xs[high], ys[high]], -1)
    lxy = np.stack([xs[ly, lx], ys[ly, lx]], -1)
    fin = np.isfinite(lxy).all(1)
    keep = np.zeros(len(ly), bool)
    keep[fin] = _inside_xy(lxy[fin], hxy, p.relief_margin_m)
    body = part.copy()
    body[ly[~keep], lx[~keep]] = False
    return body


def _top_inside(face_all: np.ndarray, face_xy: np.ndarray, face_area: float, z_face: float, rest: np.ndarray,
                xs: np.ndarray, ys: np.ndarray, z: np.ndarray, p: RegionParams) -> np.ndarray | None:
    """Whether a piece's flat face is the top of a body lying inside the rest of the piece:
    the rest surrounds it in x, y (``contained_coverage`` of the directions), covers a
    clearly larger footprint, reaches below it (``contained_depth_m``: it is not
    the container's floor), reaches up to the face's height at least ``contained_gap_m``
    away from it on several sides (a box's own sides lie right under its top's outline) and
    does not rise around its edge (a floor's wall does).
    Returns the body's top (a mask like ``face_all``) or None."""
    face = face_all
    n, comp, stats, _ = cv2.connectedComponentsWithStats(face.astype(np.uint8), connectivity=8)
    if n > 2:  # the largest patch only (the rim of a container may lie at the same height)
        face = comp == 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
        face_xy = np.stack([xs[face], ys[face]], -1).astype(np.float32)
        face_xy = face_xy[np.isfinite(face_xy).all(1)]
        if len(face_xy) < 3:
            return None
        face_area = float(cv2.contourArea(cv2.convexHull(face_xy)))
    ok = (rest | (face_all & ~face)) & np.isfinite(z)
    if int(ok.sum()) < 4 * p.min_region_px:
        return None
    if float(np.percentile(z[ok], 5)) > z_face - p.contained_depth_m:
        return None
    rxy = np.stack([xs[ok], ys[ok]], -1).astype(np.float32)
    if float(cv2.contourArea(cv2.convexHull(rxy))) * p.supported_area_ratio < face_area:
        return None
    centre = face_xy.mean(0)
    ang = np.arctan2(rxy[:, 1] - centre[1], rxy[:, 0] - centre[0])
    sectors = np.unique(((ang + np.pi) / (2 * np.pi) * 12).astype(int) % 12)
    if len(sectors) < p.contained_coverage * 12:
        return None
    # the container reaches up to the body's top away from it (a bowl's rim around a box in
    # it); a box's own sides lie right under its top's outline and below it
    hull = cv2.convexHull(face_xy)
    hy, hx = np.nonzero(ok & (z >= z_face - p.supported_band_m))
    step = max(1, len(hy) // 1500)
    far = [(float(xs[a, b]), float(ys[a, b])) for a, b in zip(hy[::step], hx[::step], strict=True)]
    far = np.array([q for q in far if cv2.pointPolygonTest(hull, q, True) < -p.contained_gap_m], np.float32)
    if len(far) < 10:
        return None
    ang = np.arctan2(far[:, 1] - centre[1], far[:, 0] - centre[0])
    if len(np.unique(((ang + np.pi) / (2 * np.pi) * 12).astype(int) % 12)) < 0.5 * p.contained_coverage * 12:
        return None
    # and it does so around the top, not only on one side of it: the top's centre lies within
    # the outline of those points (a container's own front rim, seen from in front, has the
    # rest of the rim behind and beside it only)
    if cv2.pointPolygonTest(cv2.convexHull(far), (float(centre[0]), float(centre[1])), False) < 0:
        return None
    ring = cv2.dilate(face.astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool) & ok
    if int(ring.sum()) < 10:
        return None
    if float(np.median(z[ring])) > z_face + p.supported_band_m:
        return None
    # the body's sides: points of the rest below its top whose x, y lie within its top's outline
    cand = ok & (z < z_face) & ~face
    yy, xx = np.nonzero(cand)
    inside = np.array([cv2.pointPolygonTest(hull, (float(xs[a, b]), float(ys[a, b])), True) >= -0.004
                       for a, b in zip(yy, xx, strict=True)], bool)
    body = face.copy()
    body[yy[inside], xx[inside]] = True
    _, parts = cv2.connectedComponents(body.astype(np.uint8), connectivity=8)
    keep = np.unique(parts[face])
    return np.isin(parts, keep[keep > 0])
