"""The default segmenter: geometry and colour, no learned weights, works offline.

1. **Objects**: the frame is cut into surface pieces (``region.py``: the support plane
   removed, pieces separated at depth breaks and at creases where the colour changes),
   and each piece big enough to be an object becomes a candidate with its footprint
   (circle or rectangle, size), its height above the surface it stands on and the
   colour names of its pixels (``colours.py``).
2. **Prompt**: parsed into colour words, a noun with shape and size priors and other
   words (``lexicon.py``).
3. **Grounding**: a candidate scores by how well its outline, size and height fit the
   noun and how much of it has the prompt's colours. Candidates that contradict the
   prompt (a clear size mismatch, too little of a named colour) are refused, so a
   prompt for something absent fails with a list of what was seen instead of
   returning a wrong object.
4. **Relations**: when the prompt names a spatial relation ("between the plate and
   the ramekin", "next to the cookie box", "on the left", ``relations.py``), the
   named references are grounded among the other candidates of the same frame and each
   candidate's score is multiplied by how well the relation holds for it; a relation
   only ranks, it never refuses a candidate the words of the head phrase accept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np
from scipy import ndimage

from captain_perception.core.errors import NothingFoundError
from captain_perception.core.geometry import fit_footprint, surrounding_support_z
from captain_perception.core.pointcloud import FrameCloud
from captain_perception.core.region import RegionParams, frame_pieces
from captain_perception.core.segmenters.base import Segment, Segmenter
from captain_perception.core.segmenters.colours import dominant_names, name_shares, word_share
from captain_perception.core.segmenters.lexicon import PRIORS, NounPrior, ParsedPrompt, parse_prompt
from captain_perception.core.segmenters.relations import BINARY_KINDS, Place, binary_fit, extreme_fit, view_axes

#: Smallest share of an object's pixels that must carry a named colour.
MIN_COLOUR_SHARE = 0.12
#: Smallest combined score for a candidate to be returned.
MIN_SCORE = 0.3


@dataclass(frozen=True)
class Candidate:
    """One object-sized piece of the frame.

    Attributes:
        mask: (H, W) bool.
        outline: ``"circle"`` or ``"rectangle"`` (from the footprint fit).
        size_m: largest horizontal extent (diameter or length).
        width_m: smaller horizontal extent.
        height_m: top above the surface it stands on.
        centre_m: footprint centre x, y and top z.
        colours: share of pixels per colour name.
        pixels: mask area.
        cavity_m: how far the middle of the footprint lies below the top (an open
            container's depth), or None when the middle is not seen.
        resting_gap_m: lowest point above the surface around it.
    """

    mask: np.ndarray
    outline: str
    size_m: float
    width_m: float
    height_m: float
    centre_m: tuple[float, float, float]
    colours: dict[str, float] = field(default_factory=dict)
    pixels: int = 0
    cavity_m: float | None = None
    resting_gap_m: float = 0.0

    def summary(self) -> str:
        """Short description for failure messages."""
        shape = "round" if self.outline == "circle" else "boxy"
        return (f"{shape} {self.size_m * 100:.0f} cm {'/'.join(dominant_names(self.colours))} "
                f"{self.height_m * 100:.0f} cm tall at [{self.centre_m[0]:.2f},{self.centre_m[1]:.2f}]")


class ClassicalSegmenter(Segmenter):
    """Geometry-and-colour segmenter (see the module docstring).

    Args:
        region_params: thresholds of the surface cutting.
        min_pixels: smallest piece considered an object, pixels.
        min_size_m: smallest horizontal extent considered an object, metres.
        exclude_radius_m: pieces whose footprint centre lies this close to the base
            origin (the robot's own pedestal) are ignored, metres.
        max_resting_gap_m: pieces whose lowest point floats higher than this above the
            surface around them (parts of the arm, held objects) are not candidates.
    """

    name = "classical"

    def __init__(self, region_params: RegionParams | None = None, min_pixels: int = 80,
                 min_size_m: float = 0.015, exclude_radius_m: float = 0.25,
                 max_resting_gap_m: float = 0.04) -> None:
        self.region_params = region_params or RegionParams()
        self.max_resting_gap_m = float(max_resting_gap_m)
        self.min_pixels = int(min_pixels)
        self.min_size_m = float(min_size_m)
        self.exclude_radius_m = float(exclude_radius_m)

    def describe(self) -> dict[str, Any]:
        """Backend name and that it needs no weights."""
        return {"backend": self.name, "weights": None}

    # ------------------------------------------------------------- candidates
    def candidates(self, cloud: FrameCloud) -> list[Candidate]:
        """Object-sized pieces of the frame (cached per frame)."""
        key = ("classical_candidates", self.region_params, self.min_pixels, self.min_size_m)
        if key not in cloud.cache:
            cloud.cache[key] = self._candidates(cloud)
        return cloud.cache[key]  # type: ignore[return-value]

    def _candidates(self, cloud: FrameCloud) -> list[Candidate]:
        labels, support_mask, table, _ = frame_pieces(cloud, self.region_params)
        table_hull = _support_hull(cloud.points_base, support_mask)
        if table_hull is not None:
            mom = cv2.moments(table_hull)
            if mom["m00"] > 0:
                cloud.cache["classical_table_xy"] = (mom["m10"] / mom["m00"], mom["m01"] / mom["m00"])
        out: list[Candidate] = []
        slices = ndimage.find_objects(labels)
        pts_all = cloud.points_base
        for idx, sl in enumerate(slices, start=1):
            if sl is None:
                continue
            crop = labels[sl] == idx
            n = int(crop.sum())
            if n < self.min_pixels:
                continue
            pts = pts_all[sl][crop]
            pts = pts[np.isfinite(pts[:, 2])]
            if len(pts) < self.min_pixels:
                continue
            fp = fit_footprint(pts[:, :2].astype(np.float64), outline_rule="area")
            size = fp.rectangle_size_m[0] if fp.shape == "rectangle" else 2 * fp.circle_radius_m
            if size < self.min_size_m or size > 1.5:
                continue
            if math.hypot(*fp.center_xy_m) < self.exclude_radius_m:
                continue
            if table_hull is not None and cv2.pointPolygonTest(
                    table_hull, (float(fp.center_xy_m[0]), float(fp.center_xy_m[1])), True) < -0.03:
                continue  # not over the table (walls, floor, the robot's pedestal)
            mask = np.zeros(labels.shape, bool)
            mask[sl] = crop
            top = float(np.percentile(pts[:, 2], 99.5))
            low = float(np.percentile(pts[:, 2], 0.5))
            support = surrounding_support_z(pts_all, mask, low, fallback_z_m=table)
            gap = low - support if support is not None else 0.0
            if gap > self.max_resting_gap_m:
                continue  # floating: part of the arm or an object in the gripper
            base = support if support is not None else low
            height = max(top - min(base, low + 0.015), 0.0)
            lab = cloud.lab[sl][crop]
            if len(lab) > 4000:
                lab = lab[:: len(lab) // 4000 + 1]
            out.append(Candidate(
                mask=mask, outline=fp.shape, size_m=float(size),
                width_m=float(fp.rectangle_size_m[1] if fp.shape == "rectangle" else size),
                height_m=height, centre_m=(fp.center_xy_m[0], fp.center_xy_m[1], top),
                colours=name_shares(lab), pixels=n, cavity_m=_cavity(pts, fp.center_xy_m, size, top),
                resting_gap_m=float(gap)))
        return out

    # -------------------------------------------------------------- grounding
    def segment(self, cloud: FrameCloud, text: str, max_results: int = 5) -> list[Segment]:
        """Instances matching ``text``, best first (see the module docstring)."""
        prompt = parse_prompt(text)
        prior = prompt.prior
        if prior is not None and prior.part_of:
            raise NothingFoundError(
                f"'{prompt.noun_words}' is a part of a {prior.part_of}; the classical segmenter finds whole "
                f"objects: segment '{prior.part_of}' and measure it, or mark_point on the {prompt.noun_words} "
                "itself")
        if prior is None and not prompt.colours:
            known = ", ".join(sorted(PRIORS))
            raise NothingFoundError(
                f"the classical segmenter cannot ground {text!r}: it knows colour words and the nouns {known}; "
                "name the object by colour and one of these nouns, mark_point on it, or use SAM 3 "
                "(CAPTAIN_SEGMENTER=sam3 with CAPTAIN_SAM3_WEIGHTS; node: segmenter:=sam3, sam3_weights_path)")
        cands = self.candidates(cloud)
        scored = []
        for c in cands:
            score, evidence = _score(c, prompt, prior)
            if score >= MIN_SCORE:
                scored.append((score, c, evidence))
        if not scored:
            seen = "; ".join(c.summary() for c in sorted(cands, key=lambda c: -c.pixels)[:6]) or "no objects"
            wanted = " ".join([*prompt.colours, prompt.noun_words or "object"])
            raise NothingFoundError(
                f"no {wanted!r} in {cloud.frame.name}: seen {len(cands)} object(s): {seen}"[:600])
        if prompt.relation is not None:
            scored = _apply_relation(scored, cands, prompt, cloud)
        scored.sort(key=lambda t: -t[0])
        label = " ".join([*prompt.colours, prompt.noun_words]).strip() or text
        return [Segment(mask=c.mask, score=float(s), label=label, evidence=ev)
                for s, c, ev in scored[:max_results]]


def _support_hull(points: np.ndarray, support_mask: np.ndarray) -> np.ndarray | None:
    """Convex hull (float32 polygon, base x/y, metres) of the support plane's points."""
    if support_mask.sum() < 500:
        return None
    xy = points[support_mask][:, :2]
    xy = xy[np.isfinite(xy[:, 0])][::7].astype(np.float32)
    if len(xy) < 50:
        return None
    return cv2.convexHull(xy)


def _cavity(pts: np.ndarray, centre_xy: tuple[float, float], size: float, top: float) -> float | None:
    """Depth of the middle of the footprint below the top, or None if the middle is unseen."""
    r = np.hypot(pts[:, 0] - centre_xy[0], pts[:, 1] - centre_xy[1])
    inner = pts[r < 0.2 * size, 2]
    if len(inner) < 15:
        return None
    return float(top - np.median(inner))


def _range_score(value: float, lo: float, hi: float) -> float:
    """1 inside [lo, hi], falling off outside (8 % of the bound is one sigma)."""
    if lo <= value <= hi:
        return 1.0
    edge = lo if value < lo else hi
    dist = (lo - value) if value < lo else (value - hi)
    return float(math.exp(-((dist / (0.08 * edge)) ** 2)))


def _typicality(value: float, typical: float) -> float:
    """Mild preference for values near the typical one (log-normal, sigma = factor e)."""
    if value <= 0 or typical <= 0:
        return 0.5
    return float(math.exp(-0.5 * math.log(value / typical) ** 2))


def _score(c: Candidate, prompt: ParsedPrompt, prior: NounPrior | None) -> tuple[float, dict[str, Any]]:
    evidence: dict[str, Any] = {
        "outline": c.outline, "size_m": round(c.size_m, 4), "height_m": round(c.height_m, 4),
        "cavity_m": None if c.cavity_m is None else round(c.cavity_m, 4),
        "colours": {k: round(v, 3) for k, v in sorted(c.colours.items(), key=lambda kv: -kv[1])[:3]},
    }
    score = 1.0
    if prior is not None:
        s_size = _range_score(c.size_m, *prior.size_m)
        s_height = _range_score(c.height_m, *prior.height_m)
        if prior.outline == "round":
            s_outline = 1.0 if c.outline == "circle" else 0.45
        elif prior.outline == "rect":
            s_outline = 1.0 if c.outline == "rectangle" else 0.5
        else:
            s_outline = 1.0
        if s_size < 0.25 or s_height < 0.25:
            return 0.0, evidence
        s_typical = math.sqrt(_typicality(c.size_m, prior.typical_size_m)
                              * _typicality(c.height_m, prior.typical_height_m))
        s_cavity = 1.0
        if prior.concave is not None and c.cavity_m is not None:
            is_concave = c.cavity_m > max(0.012, 0.35 * c.height_m)
            s_cavity = 1.0 if is_concave == prior.concave else 0.3
        score *= s_size * s_height * s_outline * s_cavity * (0.5 + 0.5 * s_typical)
        evidence.update(noun=prior.noun, size_fit=round(s_size, 3), height_fit=round(s_height, 3),
                        outline_fit=s_outline, cavity_fit=s_cavity, typicality=round(s_typical, 3))
    for word in prompt.colours:
        share = word_share(word, c.colours)
        evidence[f"share_{word}"] = round(share, 3)
        if share < MIN_COLOUR_SHARE:
            return 0.0, evidence
        score *= min(1.0, 0.6 + share)
    return float(score), evidence


def _place(c: Candidate) -> Place:
    return Place(xy=np.array(c.centre_m[:2], float), top_z=float(c.centre_m[2]),
                 bottom_z=float(c.centre_m[2] - c.height_m), size=float(c.size_m))


def _references(cands: list[Candidate], phrase: str) -> list[tuple[float, int]]:
    """(score, index) of the candidates matching a reference phrase, best first."""
    ref = parse_prompt(phrase)
    prior = ref.prior
    if prior is not None and prior.part_of:  # "the top drawer of the cabinet": the cabinet
        prior = PRIORS.get(prior.part_of)
    if prior is None and not ref.colours:
        return []
    out = []
    for i, c in enumerate(cands):
        score, _ = _score(c, ref, prior)
        if score >= MIN_SCORE:
            out.append((score, i))
    return sorted(out, reverse=True)


def _apply_relation(scored: list[tuple[float, Candidate, dict[str, Any]]], cands: list[Candidate],
                    prompt: ParsedPrompt, cloud: FrameCloud) -> list[tuple[float, Candidate, dict[str, Any]]]:
    """Scores multiplied by how well each candidate stands in the prompt's relation."""
    rel = prompt.relation
    assert rel is not None
    right, away = view_axes(cloud.T_base_camera)
    out = []
    if rel.kind in BINARY_KINDS:
        refs = {phrase: _references(cands, phrase) for phrase in rel.refs}
        missing = [p for p, r in refs.items() if not r]
        tops = sorted(c.centre_m[2] for _, c, _ in scored)
        for score, c, ev in scored:
            ev = dict(ev, relation=rel.kind, relation_refs=list(rel.refs))
            if missing and rel.kind == "on" and len(tops) > 1:
                # the support is hidden under the object or merged with it: an object standing on
                # another stands higher than its look-alikes on the table
                fit = 0.2 + 0.8 * tops.index(c.centre_m[2]) / (len(tops) - 1)
                ev["relation_note"] = (f"not found in this frame: {', '.join(missing)}; ranked by how high it "
                                       "stands (on something hidden or merged with it)")
                ev["relation_fit"] = round(fit, 3)
                out.append((score * fit, c, ev))
                continue
            if missing:
                ev["relation_note"] = f"not found in this frame: {', '.join(missing)}; ranked by the words alone"
                out.append((score, c, ev))
                continue
            places = []
            for phrase in rel.refs:
                # the reference is another object than the candidate itself
                best = next((i for _, i in refs[phrase] if cands[i] is not c), None)
                if best is not None:
                    places.append(_place(cands[best]))
            if len(places) < len(rel.refs):
                ev["relation_note"] = "a reference is this object itself; ranked by the words alone"
                out.append((score, c, ev))
                continue
            fit = binary_fit(rel.kind, _place(c), places, right, away)
            ev["relation_fit"] = round(fit, 3)
            out.append((score * fit, c, ev))
        return out
    if rel.kind == "table_centre":
        centre = cloud.cache.get("classical_table_xy")
        for score, c, ev in scored:
            ev = dict(ev, relation=rel.kind)
            if centre is None:
                ev["relation_note"] = "the table is not seen; ranked by the words alone"
                out.append((score, c, ev))
                continue
            d = math.hypot(c.centre_m[0] - centre[0], c.centre_m[1] - centre[1])  # type: ignore[index]
            fit = math.exp(-((d / 0.15) ** 2))
            ev["relation_fit"] = round(fit, 3)
            out.append((score * fit, c, ev))
        return out
    places = [_place(c) for _, c, _ in scored]
    for (score, c, ev), place in zip(scored, places, strict=True):
        fit = extreme_fit(rel.kind, place, places, right, away)
        out.append((score * fit, c, dict(ev, relation=rel.kind, relation_fit=round(fit, 3))))
    return out
