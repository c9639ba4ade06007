"""Spatial relations of a prompt, checked against the other objects of the same frame.

A prompt such as ``"black bowl between the plate and the ramekin"`` names the object
(the head phrase, ``lexicon.parse_prompt``) and a relation to other named objects. The
classical segmenter grounds each named reference in the same frame (its best candidate
for the reference's words) and multiplies every candidate's score by how well the
relation holds for it, so of two black bowls the one between the plate and the ramekin
ranks first.

Relations (``parse_relation``) and how each is scored, all from the candidates'
footprints in the robot base frame (centre x, y; top z; largest extent), metres:

* ``between X and Y``: distance of the candidate's centre from the segment X-Y
  (``exp(-(d / 0.08 m)^2)``), and how far outside the segment its projection lies;
* ``next to / beside / near / by X``: gap between the footprints (``exp(-gap / 0.08 m)``);
* ``on / on top of X``: the candidate's centre over X's footprint and its bottom near
  X's top (within 5 cm);
* ``in / inside X``: the candidate's centre over X's footprint and its bottom below X's top;
* ``left of / right of / behind / in front of X``: as the camera of the frame sees it
  (left and right across the image; behind is farther from the camera, in front nearer),
  by the offset from X along that direction (a logistic of the offset over 3 cm);
* ``at / from the table centre``, ``in the middle``: distance to the centre of the
  visible table (the support surface), ``exp(-(d / 0.15 m)^2)``;
* ``on the left / right``, ``leftmost`` ...: the candidate's rank along that direction
  among the candidates matching the head phrase.

A reference that cannot be found in the frame leaves the ranking to the words of the
head phrase; the evidence says so (``relation_note``). Except for ``on X``: an object on
a support that is hidden under it or merged with it into one piece (a bowl on a ramekin)
ranks by how high its top stands among the candidates.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

#: relation kind -> regular expression on the lowercased prompt after the head phrase
_BINARY = (
    ("between", r"\bbetween (?P<a>.+?) and (?P<b>.+)$"),
    ("left_of", r"\b(?:to the |on the )?left (?:side )?of (?P<a>.+)$"),
    ("right_of", r"\b(?:to the |on the )?right (?:side )?of (?P<a>.+)$"),
    ("front_of", r"\bin front of (?P<a>.+)$"),
    ("behind", r"\b(?:behind|in back of|at the back of) (?P<a>.+)$"),
    ("on", r"\b(?:on top of|on|atop|upon) (?P<a>.+)$"),
    ("in", r"\b(?:inside|in|within) (?P<a>.+)$"),
    ("near", r"\b(?:next to|beside|near|close to|by|adjacent to|nearest to|closest to) (?P<a>.+)$"),
)
_TABLE_CENTRE = re.compile(r"\b(?:from|at|in|on) (?:the )?(?:table )?(?:centre|center|middle)\b|"
                           r"\b(?:centre|center|middle) of (?:the )?table\b")
_EXTREMES = (
    ("leftmost", re.compile(r"\b(?:leftmost|left most|left hand|left side)\b|\bthe left\b(?! of)|^(?:the )?left ")),
    ("rightmost", re.compile(r"\b(?:rightmost|right most|right hand|right side)\b|\bthe right\b(?! of)|"
                             r"^(?:the )?right ")),
    ("backmost", re.compile(r"\b(?:the back|farthest|furthest|far|rear|back)\b")),
    ("frontmost", re.compile(r"\b(?:the front|nearest|closest|front)\b")),
)

#: relation kinds that need one or two reference objects
BINARY_KINDS = tuple(k for k, _ in _BINARY)


@dataclass(frozen=True)
class Relation:
    """A relation named by a prompt.

    Attributes:
        kind: one of ``BINARY_KINDS``, ``"table_centre"`` or an extreme
            (``"leftmost"``, ``"rightmost"``, ``"backmost"``, ``"frontmost"``).
        refs: the reference objects' phrases (``"the plate"``), one or two for binary
            kinds, none otherwise.
    """

    kind: str
    refs: tuple[str, ...] = ()


def parse_relation(rest: str, before: str = "") -> Relation | None:
    """The relation named by the words after the prompt's noun (``rest``) and before it
    (``before``, for "the left bowl"), both lowercased letters and single spaces; None
    when they name none."""
    if _TABLE_CENTRE.search(rest):
        return Relation("table_centre")
    for kind, pattern in _BINARY:
        m = re.search(pattern, rest)
        if m is None:
            continue
        refs = tuple(_clean_ref(v) for k, v in m.groupdict().items() if v)
        refs = tuple(r for r in refs if r)
        if refs and not all(r in ("left", "right", "front", "back", "table") for r in refs):
            return Relation(kind, refs)
    for kind, pattern in _EXTREMES:
        if pattern.search(rest) or pattern.search(before + " "):
            return Relation(kind)
    return None


def _clean_ref(phrase: str) -> str:
    # a reference phrase ends before a second clause ("... and place it on the plate")
    phrase = re.split(r"\b(?:and (?:place|put|move|pick)|then|which|that)\b", phrase)[0]
    return re.sub(r"^(?:the|a|an) ", "", phrase.strip()).strip()


@dataclass(frozen=True)
class Place:
    """Where an object stands: footprint centre ``xy`` and ``top_z`` (base frame), its
    ``bottom_z``, and ``size`` (largest horizontal extent), metres."""

    xy: np.ndarray
    top_z: float
    bottom_z: float
    size: float


def view_axes(T_base_camera: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit base-frame xy directions of the camera's right (image +u) and of looking away
    from it (horizontal part of the optical axis)."""
    R = np.asarray(T_base_camera, float)[:3, :3]
    right = R[:2, 0]
    away = R[:2, 2]
    right = right / max(float(np.linalg.norm(right)), 1e-9)
    if float(np.linalg.norm(away)) < 1e-6:  # looking straight down: image -v is away
        away = -R[:2, 1]
    away = away / max(float(np.linalg.norm(away)), 1e-9)
    return right, away


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(x, 50.0), -50.0)))


def _over(a: Place, ref: Place) -> float:
    """1 when a's centre lies over ref's footprint, falling off outside (3 cm sigma)."""
    d = float(np.linalg.norm(a.xy - ref.xy)) - 0.5 * ref.size
    return 1.0 if d <= 0 else math.exp(-((d / 0.03) ** 2))


def binary_fit(kind: str, a: Place, refs: list[Place], right: np.ndarray, away: np.ndarray) -> float:
    """How well ``a`` stands in relation ``kind`` to the reference places, in [0, 1]."""
    r = refs[0]
    if kind == "between":
        if len(refs) < 2:
            return 1.0
        p, q = refs[0].xy, refs[1].xy
        seg = q - p
        n2 = float(seg @ seg)
        t = float((a.xy - p) @ seg / n2) if n2 > 1e-9 else 0.5
        closest = p + min(max(t, 0.0), 1.0) * seg
        d = float(np.linalg.norm(a.xy - closest))
        return math.exp(-((d / 0.08) ** 2))
    if kind == "near":
        gap = max(float(np.linalg.norm(a.xy - r.xy)) - 0.5 * (a.size + r.size), 0.0)
        return math.exp(-gap / 0.08)
    if kind == "on":
        dz = abs(a.bottom_z - r.top_z)
        return _over(a, r) * (1.0 if dz <= 0.05 else math.exp(-(((dz - 0.05) / 0.03) ** 2)))
    if kind == "in":
        below = a.bottom_z < r.top_z - 0.01
        return _over(a, r) * (1.0 if below else 0.3)
    offset = a.xy - r.xy
    along = {"left_of": -float(offset @ right), "right_of": float(offset @ right),
             "behind": float(offset @ away), "front_of": -float(offset @ away)}[kind]
    return _sigmoid(along / 0.03)


def extreme_fit(kind: str, a: Place, others: list[Place], right: np.ndarray, away: np.ndarray) -> float:
    """Rank-based fit of an extreme (``leftmost``...) among ``others`` (a included): 1 for
    the most extreme, 0.2 for the least."""
    axis = {"leftmost": -right, "rightmost": right, "backmost": away, "frontmost": -away}[kind]
    values = sorted(float(o.xy @ axis) for o in others)
    if len(values) < 2:
        return 1.0
    rank = values.index(min(values, key=lambda v: abs(v - float(a.xy @ axis))))
    return 0.2 + 0.8 * rank / (len(values) - 1)
