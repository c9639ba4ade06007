"""What the teacher knows about the objects of LIBERO and of the MuJoCo tabletop: how to
grasp each kind, how far it hangs below the grasp, and where the parts of fixtures (drawer
handles, the stove knob, the microwave door) are.

These are the teacher's own choices, written as numbers in its code the way a careful
person would after one look at the object (grip 2.3 cm below the rim, release 3 cm above
the plate). Geometry the code needs in the session (centres, heights, radii) comes from
``measure_object_geometry``; the numbers here only shape the decisions.

Frames: the robot base frame (x forward, y left, z up), metres, radians.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GraspSpec:
    """How to pick up one kind of object with a top-down grasp.

    Attributes:
        kind: the kind's name (``bowl``, ``can``, ``flat_box``, ...).
        style: ``"rim"`` (one jaw inside a hollow object's wall, gripping the wall),
            ``"center"`` (both jaws around the body, centred on it) or ``"body"`` (around
            the body of an object whose outline is widened by a handle or spout: the
            grasp is moved from the outline's centre to the body's and the jaws close
            across the body, clear of the handle).
        depth_below_top_m: how far below the measured top the TCP goes.
        rim_inset_m: for ``rim``: how far inside the measured footprint radius the TCP is.
        jaw_across_short_side: for ``center``: close the jaws across the shorter
            horizontal side of the measured footprint (False: along the base y axis).
        jaw_square_to_sides: for ``center``: turn the jaws square to the sides of a
            square footprint (a cube), the one of the four turns nearest the base y axis.
        hang_m: how far the object reaches below the TCP once lifted (for clearances).
        release_above_m: height of the object's bottom above the destination's top at
            release.
        approach_above_m: hover height above the top before the final descent.
        descend_speed_m_s: speed of the final guarded descent.
    """

    kind: str
    style: str
    depth_below_top_m: float
    rim_inset_m: float = 0.0
    jaw_across_short_side: bool = True
    jaw_square_to_sides: bool = False
    hang_m: float = 0.05
    release_above_m: float = 0.02
    approach_above_m: float = 0.08
    descend_speed_m_s: float = 0.04


#: Object-name prefixes -> kind; longest prefix wins.
KIND_BY_PREFIX: dict[str, str] = {
    "akita_black_bowl": "bowl",
    "glazed_rim_porcelain_ramekin": "ramekin",
    "plate": "plate",
    "cookies": "flat_box",
    "alphabet_soup": "can",
    "tomato_sauce": "can",
    "cream_cheese": "flat_box",
    "butter": "flat_box",
    "chocolate_pudding": "flat_box",
    "bbq_sauce": "bottle",
    "ketchup": "bottle",
    "salad_dressing": "bottle",
    "milk": "carton",
    "orange_juice": "carton",
    "wine_bottle": "wine_bottle",
    "moka_pot": "moka_pot",
    "porcelain_mug": "mug",
    "white_yellow_mug": "mug",
    "red_coffee_mug": "mug",
    "black_book": "book",
    "basket": "basket",
    "wooden_cabinet": "drawer_cabinet",
    "white_cabinet": "drawer_cabinet",
    "flat_stove": "stove",
    "microwave": "microwave",
    "wine_rack": "wine_rack",
    "desk_caddy": "caddy",
}

GRASPS: dict[str, GraspSpec] = {
    "bowl": GraspSpec("bowl", "rim", depth_below_top_m=0.025, rim_inset_m=0.012, hang_m=0.04,
                      release_above_m=0.025),
    "ramekin": GraspSpec("ramekin", "rim", depth_below_top_m=0.02, rim_inset_m=0.01, hang_m=0.03),
    "mug": GraspSpec("mug", "rim", depth_below_top_m=0.025, rim_inset_m=0.008, hang_m=0.09,
                     release_above_m=0.02),
    "can": GraspSpec("can", "center", depth_below_top_m=0.025, jaw_across_short_side=False, hang_m=0.05,
                     release_above_m=0.03),
    "flat_box": GraspSpec("flat_box", "center", depth_below_top_m=0.012, hang_m=0.01, release_above_m=0.03,
                          descend_speed_m_s=0.03),
    "bottle": GraspSpec("bottle", "center", depth_below_top_m=0.025, hang_m=0.07, release_above_m=0.03),
    "carton": GraspSpec("carton", "center", depth_below_top_m=0.025, hang_m=0.10, release_above_m=0.03),
    "wine_bottle": GraspSpec("wine_bottle", "center", depth_below_top_m=0.025, jaw_across_short_side=False,
                             hang_m=0.11, release_above_m=0.015),
    "moka_pot": GraspSpec("moka_pot", "body", depth_below_top_m=0.022, hang_m=0.11, release_above_m=0.015),
    "book": GraspSpec("book", "center", depth_below_top_m=0.025, hang_m=0.10, release_above_m=0.02),
    "plate": GraspSpec("plate", "rim", depth_below_top_m=0.008, rim_inset_m=0.01, hang_m=0.01),
    "cube": GraspSpec("cube", "center", depth_below_top_m=0.02, jaw_across_short_side=False,
                      jaw_square_to_sides=True, hang_m=0.02, release_above_m=0.015, descend_speed_m_s=0.03),
}

#: Kinds that are only ever destinations or fixtures.
FIXTURE_KINDS = frozenset({"drawer_cabinet", "stove", "microwave", "wine_rack", "caddy", "basket"})


def kind_of(name: str) -> str:
    """The kind of a LIBERO object or fixture name (``"akita_black_bowl_1"`` -> ``"bowl"``)
    or of a tabletop object (``"red_cube"`` -> ``"cube"``, ``"plate"`` -> ``"plate"``);
    ``"object"`` when unknown."""
    if name.endswith("_cube"):
        return "cube"
    best = ""
    for prefix in KIND_BY_PREFIX:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return KIND_BY_PREFIX[best] if best else "object"


def grasp_for(name: str) -> GraspSpec:
    """The grasp of an object by name (a centred grasp for unknown kinds)."""
    return GRASPS.get(kind_of(name), GraspSpec(kind_of(name), "center", depth_below_top_m=0.03))


def label_of(name: str) -> str:
    """Words for an object name, as a person would label a click (``"akita_black_bowl_1"`` ->
    ``"black bowl"``)."""
    words = {
        "akita_black_bowl": "black bowl",
        "glazed_rim_porcelain_ramekin": "ramekin",
        "cookies": "cookie box",
        "alphabet_soup": "alphabet soup can",
        "tomato_sauce": "tomato sauce can",
        "cream_cheese": "cream cheese box",
        "chocolate_pudding": "chocolate pudding",
        "bbq_sauce": "bbq sauce bottle",
        "salad_dressing": "salad dressing bottle",
        "orange_juice": "orange juice carton",
        "milk": "milk carton",
        "wine_bottle": "wine bottle",
        "moka_pot": "moka pot",
        "porcelain_mug": "white mug",
        "white_yellow_mug": "yellow and white mug",
        "red_coffee_mug": "red mug",
        "black_book": "black book",
        "flat_stove": "stove",
        "wooden_cabinet": "wooden cabinet",
        "white_cabinet": "white cabinet",
        "wine_rack": "wine rack",
        "desk_caddy": "desk caddy",
    }
    base = name
    for suffix in ("_contain_region", "_cook_region", "_heating_region", "_top_region", "_top_side",
                   "_middle_region", "_bottom_region"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    stem = base.rstrip("0123456789").rstrip("_")
    for prefix, text in words.items():
        if stem.startswith(prefix):
            return text
    return stem.replace("_", " ")


#: Expected footprint radius per kind (m), to notice a measurement that took in too much.
EXPECTED_RADIUS_M = {"bowl": 0.054, "ramekin": 0.045, "plate": 0.069, "can": 0.032, "flat_box": 0.047,
                     "bottle": 0.032, "carton": 0.038, "wine_bottle": 0.022, "mug": 0.06, "moka_pot": 0.08,
                     "book": 0.07, "cube": 0.028}
