"""What the final verifying cell measures for each goal, and the check it decides from.

Every check is computed in the session from what policy-visible calls measured; the
teacher chooses what to click and writes what it knows of the fixtures (where a region
lies on its fixture, which way a drawer slides), never a verdict:

* a relation to an object (``On(bowl, plate)``): ``measure_object_geometry(object,
  destination)`` gives ``xy_distance_m`` within the TASK.md tolerance and
  ``resting_height_consistent``;
* a relation to a region (the stove's cook region, the inside of a basket or a drawer,
  the top of the rack or the cabinet): the object's measured centre lies inside the
  region's extent, the region placed by where it lies relative to the fixture's measured
  centre and measured along the fixture's sides (plus the resting check); the fixture's
  centre itself is not the target; inside a container (``In``) the object's lowest seen
  point at least ``gate.INSIDE_MARGIN_M`` below the container's measured top stands in for
  the resting check (the gate's standard: its foot is hidden);
* a relation to a region of the table (``main_table_stove_front_region``): the object's
  measured centre inside the base-frame rectangle TASK.md states for it (plus the resting
  check), the standard the completion gate applies;
* a drawer to open or close: its handle clicked again in the fresh observation; how far
  the drawer is out is how far it was when the episode first clicked that handle plus the
  handle's measured travel along the pull direction since;
* the stove knob: how far the pinching hand turned, measured from the tool quaternion
  while it held the fin (``knob_turned``, written by the turning cells);
* the microwave door: how far open the door still is where the pushing fingertips stopped,
  from the measured tool position about the hinge (``door_open_rad``).

Frames: the robot base frame (x forward, y left, z up), metres, radians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from captain_harness.core.episode.table_regions import TableRegion
from captain_teacher.cells import num, vec
from captain_teacher.context import TeacherContext
from captain_teacher.fixtures import Drawer, drawer_for_region, drawers
from captain_teacher.objects import kind_of, label_of
from captain_teacher.planners.articulated import DRAWER_OPEN_BELOW_M
from captain_teacher.planners.common import (
    Target,
    direction_words,
    in_box,
    inside_walls,
    names_for,
    printed_measurement,
)
from captain_teacher.planners.destinations import Destination

#: How far out (m) a drawer may still measure and count as closed: the handle's depth
#: click lands within about a centimetre of the bar's front.
CLOSED_OUT_TOLERANCE_M = 0.01


@dataclass
class PartEvidence:
    """The measurement of one articulated goal: the click it needs in the fresh observation
    (None: it reads a session variable an earlier cell measured), the source lines that
    compute and print the measurement, the boolean expression of the check, and the words
    for the reasoning. ``check`` is empty when the part cannot be measured."""

    goal: str
    words: str
    target: Target | None = None
    lines: list[str] = field(default_factory=list)
    check: str = ""


def _drawer_of(ctx: TeacherContext, name: str, op: str) -> Drawer | None:
    """The drawer an articulated goal names (as ``articulated.drawer_or_door`` picks it)."""
    d = drawer_for_region(ctx.scene, name)
    if d is None:
        candidates = [x for x in drawers(ctx.scene) if name.startswith(x.cabinet)]
        if candidates:
            d = min(candidates, key=lambda x: x.position_m) if op == "close" else candidates[0]
    return d


def part_evidence(ctx: TeacherContext, op: str, name: str) -> PartEvidence:
    """The evidence of one articulated goal (``op`` in open, close, turnon, turnoff)."""
    scene = ctx.scene
    if kind_of(name) == "microwave" or (op == "turnon" and kind_of(name) == "stove"):
        var, bound = ctx.part_measurements.get(name, ("", 0.0))
        label = label_of(name)
        if not var:
            return PartEvidence(f"{op} {name}", f"the {label} ({op}, not measured in this episode)")
        if var == "knob_turned":
            return PartEvidence(f"{op} {name}", f"how far the {label}'s knob turned under the pinching hand",
                                lines=['print("knob turned:", round(knob_turned, 3))'],
                                check=f"knob_turned >= {num(bound)}")
        return PartEvidence(f"{op} {name}", f"how far the {label}'s door is still open at the pushing fingertips",
                            lines=['print("door open:", round(door_open_rad, 3))'],
                            check=f"door_open_rad <= {num(bound)}")
    d = _drawer_of(ctx, name, op)
    if d is None or op not in ("open", "close"):
        return PartEvidence(f"{op} {name}", f"the {label_of(name)} ({op}, not measured)")
    words = f"how far the {d.level} drawer is out, from its handle"
    ref = ctx.handle_refs.get(d.joint)
    if ref is None:
        return PartEvidence(f"{op} {name}", words + " (never clicked in this episode: not measured)")
    ref_var, out0 = ref
    pull = d.pull_direction(scene)
    point = d.handle_m(scene) + 0.007 * np.append(pull, 0.0)  # the front of the bar, as first clicked
    var = f"hdl_{d.level}_f"
    out = f"{d.level}_out"
    target = Target(var, "", f"{d.level} drawer handle", "point", point[None], (d.cabinet,))
    lines = [f"pull = np.array([{num(pull[0])}, {num(pull[1])}, 0.0])  # the drawer slides out {direction_words(pull)}",
             f'{out} = {num(out0)} + float(np.dot(np.array({var}["position_m"]) - {ref_var}, pull))'
             "  # how far it was out when first clicked, plus the handle's travel since",
             f'print("{d.level} drawer out:", round({out}, 4))']
    check = (f"{out} >= {num(-DRAWER_OPEN_BELOW_M)}" if op == "open"
             else f"{out} <= {num(CLOSED_OUT_TOLERANCE_M)}")
    return PartEvidence(f"{op} {name}", words, target, lines, check)


def relation_check(ctx: TeacherContext, var: str, obj: str, dest: Destination, tolerance_m: float
                   ) -> tuple[list[str], str, str]:
    """Source lines that print the measured relation ``var`` (a ``measure_object_geometry``
    result of ``obj`` against ``dest``'s clicked object), the check's expression and words
    for the reasoning (see the module docstring)."""
    olab, dlab = label_of(obj), dest.label
    if not dest.region or not dest.click:
        lines = [f'print("{olab} -> {dlab}:", round({var}["xy_distance_m"], 4), '
                 f'{var}["resting_height_consistent"])']
        check = f'{var}["xy_distance_m"] <= {num(tolerance_m)} and {var}["resting_height_consistent"]'
        return lines, check, f"the {olab} against the {dlab}"
    table = ctx.table_regions.get(dest.goal_arg)
    if table is not None:
        return _table_region_check(var, olab, dest.goal_arg, table)
    scene = ctx.scene
    center = dest.region_center_m(scene)[:2]
    _ov, dv = names_for(obj, dest)
    measured = printed_measurement(ctx, dv)
    fixture = (np.asarray(measured["center"][:2], dtype=float) if measured is not None
               else scene.box(dest.click).center_m[:2])
    corr = center - fixture
    yaw = scene.yaw(dest.click)
    hx, hy = dest.half_xy_m()
    region = "drawer" if dest.is_drawer(scene) else "inside" if dest.container else "region"
    where = ("at" if float(np.linalg.norm(corr)) < 0.01
             else f"{num(float(np.linalg.norm(corr)) * 100, 0)} cm {direction_words(corr)} of")
    off = f"{var}_off"
    lines = [f'{off} = np.array({var}["object"]["center_xy_m"]) - np.array({var}["destination"]["center_xy_m"]) '
             f"- {vec(corr)}  # from the {region}'s centre, {where} the {dlab}'s measured centre",
             f"{var}_in = {in_box(off, yaw, (hx, hy))}"
             f"  # within the {region}'s {num(2 * hx * 100, 1)} x {num(2 * hy * 100, 1)} cm along the {dlab}'s sides",
             f'print("{olab} in the {dlab}\'s {region}:", {var}_in, np.round({off}, 4).tolist(), '
             f'{var}["resting_height_consistent"])']
    if dest.relation == "in":
        # inside a container: its foot is hidden (by its own walls or the container's), so
        # the gate's standard is the lowest seen point inside the walls, not resting
        shown, inside = inside_walls(var, olab, dlab)
        lines.append(shown)
        check = f"{var}_in and {inside}"
    else:
        check = f'{var}_in and {var}["resting_height_consistent"]'
    return lines, check, f"the {olab} against the {dlab}'s {region}"


def _table_region_check(var: str, olab: str, name: str, region: TableRegion) -> tuple[list[str], str, str]:
    """``relation_check`` for a region of the table: the measured object centre inside the
    rectangle TASK.md states (``table_regions.TableRegion``, base frame)."""
    (x, y), (hx, hy), yaw = region.center_xy_m, region.half_xy_m, region.yaw_rad
    c = f"{var}_c"
    lines = [f'{c} = np.array({var}["object"]["center_xy_m"])']
    if abs(yaw) < 1e-6:
        lines.append(f"{var}_in = {num(x - hx)} <= {c}[0] <= {num(x + hx)} and {num(y - hy)} <= {c}[1] <= {num(y + hy)}"
                     f"  # {name}: the table's rectangle in TASK.md")
    else:
        cy, sy, nsy = num(math.cos(yaw)), num(math.sin(yaw)), num(-math.sin(yaw))
        lines.append(f"{var}_d = {c} - {vec((x, y))}  # from the centre of {name}, the table's rectangle in TASK.md\n"
                     f"{var}_in = abs({cy} * {var}_d[0] + {sy} * {var}_d[1]) <= {num(hx)} "
                     f"and abs({nsy} * {var}_d[0] + {cy} * {var}_d[1]) <= {num(hy)}")
    lines.append(f'print("{olab} in {name}:", {var}_in, np.round({c}, 4).tolist(), {var}["resting_height_consistent"])')
    return lines, f'{var}_in and {var}["resting_height_consistent"]', f"the {olab} against {name} of TASK.md"
