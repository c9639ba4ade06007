"""The completion gate: ``finish()`` is accepted only on the agent's own evidence.

The gate reads the ``RobotAPI`` call log (what the agent called and what came back),
never the simulator. For each goal predicate of the task it asks for a standard that
TASK.md states:

* relations (``On``, ``In``, ``Stack``, ...): a successful
  ``measure_object_geometry(object, destination)`` made after the last executed
  physical action, with ``xy_distance_m`` within the tolerance and
  ``resting_height_consistent`` true, one distinct object/destination pair per
  relation;
* relations to a region of a fixture (the destination named ``..._region`` or
  ``..._side``: the stove's cook region, the inside of a basket, the top of the
  cabinet): the same measurement, with the object's centre within the destination's
  measured extent (``xy_distance_m`` at most the destination's measured footprint
  radius) instead of within the tolerance of its centre; for ``In`` (the inside of a
  basket, a drawer, a compartment) the object's lowest seen point at least
  ``INSIDE_MARGIN_M`` below the destination's measured top (inside its walls) stands in
  for ``resting_height_consistent``: LIBERO's ``In`` is where the object is, and seen
  into a container from above an object's foot is hidden by its own walls or the
  container's, so whether it rests cannot be seen;
* the inside of a region that another goal closes (``In(bowl, cabinet_1_bottom_region)``
  with ``Close(cabinet_1_bottom_region)``, ``In(mug, microwave_1_heating_region)`` with
  ``Close(microwave_1)``): once shut, no camera sees the object, so the measurement
  inside the walls counts when made after the last release of the gripper
  (``move_to(gripper="open")``) on detections made after it; the closed part itself
  needs its fresh look after the last physical action like any articulated goal;
* relations to a region of the table (``main_table_stove_front_region``: an area of the
  table with nothing there to see or click): TASK.md states the region as a rectangle in
  the robot base frame (``table_regions.TableRegion``, from the task's definition); a successful fresh
  ``measure_object_geometry(object)`` (with or without a destination) puts the object's
  centre inside it, with ``resting_height_consistent`` true;
* articulated parts (``Open``, ``Close``, ``TurnOn``, ``TurnOff``): a successful fresh
  perception or measurement call after the last physical action;
* a free-form instruction without predicates: a fresh ``observe()`` after the last
  physical action.

"The last physical action" is the last one that could have changed the scene: a move of
the empty hand that reached its target touching nothing (``moved_nothing``: a ``move_to``
with ``stopped_reason`` target_reached, nothing held before or after, and a peak force of at
most ``GateConfig.free_motion_max_force_n``) only takes the cameras somewhere else, so
measurements made before it stay fresh (one goal measured from one viewpoint, the next from
another).

A failing ``finish()`` is rejected with the reason, at most ``max_rejections`` times
(2); the next call is accepted whatever the evidence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from captain_harness.core.api import CallRecord
from captain_harness.core.episode.table_regions import TableRegion
from captain_harness.core.results import CallOutcome, FailureCategory, make_result

RELATION_PREDICATES = frozenset({"on", "in", "inside", "stack", "ontop", "onto", "under", "placed"})
#: Relations that put an object inside a region (a container's inside).
INSIDE_PREDICATES = frozenset({"in", "inside"})
#: How far below the destination's measured top an object's lowest seen point must be for
#: it to be inside the destination's walls, m (an object lying across the rim is not).
INSIDE_MARGIN_M = 0.02
ARTICULATION_PREDICATES = frozenset({"open", "close", "closed", "turnon", "turnoff", "turn_on", "turn_off"})
#: Articulation goals that shut a part (what is inside it can no longer be seen).
CLOSING_PREDICATES = frozenset({"close", "closed"})
#: Calls that count as a fresh look at the scene for articulated goals.
PERCEPTION_CALLS = ("observe", "compare_object_observations", "measure_object_geometry",
                    "measure_image_points", "track_target", "segment", "point", "mark_point")
#: The failure category of a rejected ``finish()``.
FINISH_REJECTED = FailureCategory.FINISH_REJECTED

#: A relation's last argument names a region of a fixture (``flat_stove_1_cook_region``).
_REGION_RE = re.compile(r"_(region|side)$", re.IGNORECASE)
_GOAL_RE = re.compile(r"^\s*\(?\s*([A-Za-z_][A-Za-z0-9_]*)\s*[\s(]\s*(.*?)\s*\)?\s*$")


@dataclass
class GateConfig:
    """Settings of the completion gate.

    Attributes:
        max_rejections: how many failing ``finish()`` calls are rejected before one is
            accepted regardless (paper: 2).
        xy_tolerance_m: largest horizontal distance between the object's and the
            destination's centres for a relation to count as met, metres.
        require_resting_height: also require ``resting_height_consistent`` to be true.
        require_fresh_detections: a measurement counts only if its detections were made
            after the last physical action (when their origin is in the log).
        free_motion_max_force_n: the largest peak force (N) a move of the empty hand may
            report and still count as touching nothing (``moved_nothing``); a negative
            value makes every physical action count.
    """

    max_rejections: int = 2
    xy_tolerance_m: float = 0.02
    require_resting_height: bool = True
    require_fresh_detections: bool = True
    free_motion_max_force_n: float = 0.5


@dataclass(frozen=True)
class GoalStandard:
    """The success standard of one goal predicate, as TASK.md states it and the gate checks it.

    Attributes:
        predicate: lower-case predicate name (``on``, ``open``, ...).
        args: the names the predicate relates (benchmark names, for the reader).
        kind: ``"relation"``, ``"articulation"`` or ``"other"``.
        xy_tolerance_m: horizontal tolerance of a relation, metres (None otherwise).
        region: the destination is a region of a fixture or of the table.
        table_region: the destination is this region of the table (None otherwise).
        closed_by: for the inside of a region, the argument of the goal that closes it
            (``Close(microwave_1)`` shuts ``microwave_1_heating_region``; None otherwise).
    """

    predicate: str
    args: tuple[str, ...]
    kind: str
    xy_tolerance_m: float | None = None
    region: bool = False
    table_region: TableRegion | None = None
    closed_by: str | None = None

    @property
    def inside(self) -> bool:
        """A relation to the inside of a region of a fixture (``In(can, basket_1_contain_region)``)."""
        return self.kind == "relation" and self.region and self.table_region is None \
            and self.predicate in INSIDE_PREDICATES

    @property
    def label(self) -> str:
        """The predicate as written in the task, e.g. ``On(bowl_1, plate_1)``."""
        return f"{self.predicate.capitalize()}({', '.join(self.args)})"

    def describe(self, require_resting_height: bool = True) -> str:
        """One sentence for TASK.md."""
        if self.kind == "relation" and self.table_region is not None:
            rest = " and `resting_height_consistent` is true" if require_resting_height else ""
            return (f"`{self.label}`: `{self.args[-1]}` is the table's rectangle {self.table_region.words()} in "
                    f"the robot base frame (nothing marks it on the table); after your last physical action, "
                    f"`measure_object_geometry(object)` on a fresh observation (a destination may be given; it "
                    f"is not used) puts the object's centre (`object.center_xy_m`) inside it{rest}.")
        if self.inside and self.closed_by is not None:
            return (f"`{self.label}`: `{self.closed_by}` is shut by another goal, after which no camera sees "
                    f"inside it; so after your last release of the gripper (`move_to(gripper=\"open\")`), "
                    f"on detections made after it, `measure_object_geometry(object, destination)` puts the "
                    f"object's centre within the destination's measured extent (`xy_distance_m` <= the "
                    f"destination's `footprint.radius_m`) and inside its walls: the object's lowest seen point "
                    f"(`object.lowest_point_z_m`) at least {INSIDE_MARGIN_M:g} m below the destination's top "
                    f"(`destination.top_z_m`). Measure it before you shut it.")
        if self.inside:
            return (f"`{self.label}`: after your last physical action, "
                    f"`measure_object_geometry(object, destination)` on a fresh observation puts the object's "
                    f"centre within the destination's measured extent (`xy_distance_m` <= the destination's "
                    f"`footprint.radius_m`) and inside its walls: the object's lowest seen point "
                    f"(`object.lowest_point_z_m`) at least {INSIDE_MARGIN_M:g} m below the destination's top "
                    f"(`destination.top_z_m`).")
        if self.kind == "relation" and self.region:
            rest = " and `resting_height_consistent` is true" if require_resting_height else ""
            return (f"`{self.label}`: after your last physical action, "
                    f"`measure_object_geometry(object, destination)` on a fresh observation puts the object's "
                    f"centre within the destination's measured extent (`xy_distance_m` <= the destination's "
                    f"`footprint.radius_m`){rest}.")
        if self.kind == "relation":
            rest = " and `resting_height_consistent` is true" if require_resting_height else ""
            return (f"`{self.label}`: after your last physical action, "
                    f"`measure_object_geometry(object, destination)` on a fresh observation gives "
                    f"`xy_distance_m` <= {self.xy_tolerance_m:g} m{rest}.")
        if self.kind == "articulation":
            return (
                f"`{self.label}`: the part has reached its {self.predicate} state; after your last physical "
                "action, observe again and check it (e.g. with `compare_object_observations`)."
            )
        return f"`{self.label}`: holds in a fresh observation taken after your last physical action."


def moved_nothing(record: CallRecord, holding: bool, max_force_n: float) -> bool:
    """Whether a physical call only moved the empty hand, touching nothing: a ``move_to`` (no
    jaw command) that reached its target, nothing held before (``holding``) or after, a peak
    force of at most ``max_force_n`` newtons. It moves the cameras, not the scene."""
    value = record.result.get("value")
    if record.name != "move_to" or holding or not record.result.get("success") or not isinstance(value, dict):
        return False
    force = value.get("max_observed_force_n")
    return ("command" not in value and value.get("stopped_reason") == "target_reached"
            and value.get("held") is False and isinstance(force, (int, float)) and force <= max_force_n)


def scene_changes(log: Sequence[CallRecord], max_force_n: float) -> list[CallRecord]:
    """The executed physical calls of ``log`` that could have changed the scene: all but the
    moves of the empty hand that touched nothing (``moved_nothing``)."""
    out, holding = [], False
    for r in log:
        if not (r.physical and r.result.get("executed")):
            continue
        if not moved_nothing(r, holding, max_force_n):
            out.append(r)
        value = r.result.get("value")
        if isinstance(value, dict) and isinstance(value.get("held"), bool):
            holding = value["held"]
    return out


def parse_goal(text: str) -> tuple[str, tuple[str, ...]]:
    """``"On(akita_black_bowl_1, plate_1)"`` or ``"(On bowl plate)"`` -> ``("on", ("akita_black_bowl_1",
    "plate_1"))``."""
    m = _GOAL_RE.match(text)
    if not m:
        return text.strip().lower(), ()
    args = tuple(a for a in re.split(r"[\s,]+", m.group(2).strip("() ")) if a)
    return m.group(1).lower(), args


def shuts(part: str, region: str) -> bool:
    """Whether closing ``part`` shuts ``region`` (``microwave_1`` shuts
    ``microwave_1_heating_region``; a drawer's region shuts itself)."""
    return region == part or region.startswith(part + "_")


def standards_for(goals: Sequence[str], config: GateConfig | None = None,
                  table_regions: dict[str, Any] | None = None) -> list[GoalStandard]:
    """The success standard of each goal predicate.

    ``table_regions``: regions of the table by goal argument, ``TableRegion`` or its dict
    form (a driver's ``TaskInfo.extra["table_regions"]``); a relation to one is judged
    against that rectangle. ValueError on a malformed entry."""
    cfg = config or GateConfig()
    regions = {str(k): v if isinstance(v, TableRegion) else TableRegion.from_dict(v)
               for k, v in (table_regions or {}).items()}
    out = []
    for goal in goals:
        predicate, args = parse_goal(goal)
        if predicate in RELATION_PREDICATES and len(args) >= 2:
            out.append(GoalStandard(predicate, args, "relation", cfg.xy_tolerance_m,
                                    region=bool(_REGION_RE.search(args[-1])) or args[-1] in regions,
                                    table_region=regions.get(args[-1])))
        elif predicate in ARTICULATION_PREDICATES:
            out.append(GoalStandard(predicate, args, "articulation"))
        else:
            out.append(GoalStandard(predicate, args, "other"))
    shut = [s.args[0] for s in out if s.kind == "articulation" and s.predicate in CLOSING_PREDICATES and s.args]
    for i, s in enumerate(out):
        closer = next((c for c in shut if s.args and shuts(c, s.args[-1])), None)
        if s.inside and closer is not None:
            out[i] = replace(s, closed_by=closer)
    return out


@dataclass
class GateVerdict:
    """The gate's judgement of the evidence: ``passed``, the ``reason`` when it did not pass,
    and the log indices of the calls that served as evidence."""

    passed: bool
    reason: str = ""
    evidence: list[int] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


def _arg(record: CallRecord, position: int, keyword: str) -> Any:
    if len(record.args) > position:
        return record.args[position]
    return record.kwargs.get(keyword)


def _detection_ids(value: Any, depth: int = 0) -> list[str]:
    """Every ``detection_id`` in a perception result value."""
    if depth > 4:
        return []
    if isinstance(value, dict):
        out = [str(value["detection_id"])] if value.get("detection_id") is not None else []
        for v in value.values():
            if isinstance(v, (dict, list)):
                out.extend(_detection_ids(v, depth + 1))
        return out
    if isinstance(value, list):
        return [i for v in value[:64] for i in _detection_ids(v, depth + 1)]
    return []


def _extent_radius(value: dict[str, Any]) -> float | None:
    """The destination's measured footprint radius, metres (None when not reported)."""
    dest = value.get("destination")
    foot = dest.get("footprint") if isinstance(dest, dict) else None
    r = foot.get("radius_m") if isinstance(foot, dict) else None
    return float(r) if isinstance(r, (int, float)) and math.isfinite(r) and r > 0 else None


def _xy_distance(value: dict[str, Any]) -> float | None:
    d = value.get("xy_distance_m")
    if isinstance(d, (int, float)) and math.isfinite(d):
        return float(d)
    off = value.get("object_to_destination_xy_offset_m")
    if isinstance(off, (list, tuple)) and len(off) >= 2 and all(isinstance(v, (int, float)) for v in off[:2]):
        return math.hypot(float(off[0]), float(off[1]))
    return None


def _lowest_and_top(value: dict[str, Any]) -> tuple[float, float] | None:
    """The object's lowest seen point and the destination's measured top of a measurement,
    m (None when either is missing or not finite)."""
    obj, dest = value.get("object"), value.get("destination")
    low = obj.get("lowest_point_z_m") if isinstance(obj, dict) else None
    top = dest.get("top_z_m") if isinstance(dest, dict) else None
    if not isinstance(low, (int, float)) or not isinstance(top, (int, float)):
        return None
    return (float(low), float(top)) if math.isfinite(low) and math.isfinite(top) else None


def inside_walls(value: dict[str, Any]) -> bool:
    """Whether a measurement puts the object's lowest seen point ``INSIDE_MARGIN_M`` below
    the destination's measured top."""
    heights = _lowest_and_top(value)
    return heights is not None and heights[0] <= heights[1] - INSIDE_MARGIN_M


def _inside_words(value: dict[str, Any]) -> str:
    heights = _lowest_and_top(value)
    if heights is None:
        return ""
    return (f", and the object's lowest seen point {heights[0]:.4f} m against the destination's top "
            f"{heights[1]:.4f} m (inside its walls: at least {INSIDE_MARGIN_M:g} m below it)")


class CompletionGate:
    """Judges ``finish()`` calls on the call log. See the module docstring."""

    def __init__(self, standards: Sequence[GoalStandard], config: GateConfig | None = None) -> None:
        self.standards = list(standards)
        self.config = config or GateConfig()
        self.attempts = 0
        self.rejections: list[str] = []
        self.accepted = False
        self.accepted_on_evidence = False

    def evaluate(self, log: Sequence[CallRecord]) -> GateVerdict:
        """Whether the agent's recorded calls meet every standard."""
        actions = [r for r in log if r.physical and r.result.get("executed")]
        if not actions:
            return GateVerdict(False, "no physical action has been executed yet; the task is not done")
        changes = scene_changes(log, self.config.free_motion_max_force_n)
        last = changes[-1] if changes else actions[-1]
        fresh = [r for r in log if r.index > last.index]
        where = f"your last physical action ({last.name}, call #{last.index})"
        if last is not actions[-1]:
            where = f"{where[:-1]}; the moves of the empty hand after it touched nothing)"
        relations = [s for s in self.standards if s.kind == "relation"]
        evidence: list[int] = []
        details: dict[str, Any] = {"last_physical_call": last.index}
        on_table = [s for s in relations if s.table_region is not None]
        shut_in = [s for s in relations if s.closed_by is not None]
        relations = [s for s in relations if s.table_region is None and s.closed_by is None]
        measured_any = [
            r
            for r in fresh
            if r.name == "measure_object_geometry"
            and r.result.get("success")
            and isinstance(r.result.get("value"), dict)
        ]
        stale: list[CallRecord] = []
        if self.config.require_fresh_detections:
            stale = self._stale(log, measured_any, last.index)
            measured_any = [r for r in measured_any if r not in stale]
        if on_table:
            if not measured_any and stale:
                return GateVerdict(False, self._stale_reason(stale[-1], where), details=details)
            verdict = self._table_regions(on_table, measured_any, where)
            if not verdict.passed:
                verdict.details.update(details)
                return verdict
            evidence.extend(verdict.evidence)
            details["table_regions_passed"] = len(on_table)
        if shut_in:
            verdict = self._shut_in(log, shut_in)
            if not verdict.passed:
                verdict.details.update(details)
                return verdict
            evidence.extend(verdict.evidence)
            details["shut_in_passed"] = len(shut_in)
        if relations:
            tol = min(s.xy_tolerance_m or self.config.xy_tolerance_m for s in relations)
            n_regions = sum(1 for s in relations if s.region)
            measured = [r for r in measured_any if _arg(r, 1, "destination_id") is not None]
            stale_pairs = [r for r in stale if _arg(r, 1, "destination_id") is not None]
            if not measured and stale_pairs:
                return GateVerdict(False, self._stale_reason(stale_pairs[-1], where), details=details)
            if not measured:
                return GateVerdict(
                    False,
                    f"no measure_object_geometry(object, destination) after {where}; observe, "
                    "measure the object against its destination, then call finish() again",
                    details=details,
                )
            n_inside = sum(1 for s in relations if s.inside)
            passing: dict[tuple[str, str], int] = {}
            in_extent: dict[tuple[str, str], int] = {}  # resting, within a destination's extent
            inside: dict[tuple[str, str], int] = {}  # within the extent and inside the walls, not resting
            worst = None
            for r in measured:
                value = r.result["value"]
                dist = _xy_distance(value)
                resting = value.get("resting_height_consistent")
                extent = _extent_radius(value) if n_regions else None
                rest_ok = resting is True or not self.config.require_resting_height
                pair = (str(_arg(r, 0, "object_id")), str(_arg(r, 1, "destination_id")))
                within = dist is not None and extent is not None and dist <= extent
                if dist is not None and dist <= tol and rest_ok:
                    passing[pair] = r.index
                elif within and rest_ok:
                    in_extent[pair] = r.index
                elif within and n_inside and inside_walls(value):
                    inside[pair] = r.index
                else:
                    worst = (r, dist, resting, _inside_words(value) if n_inside else "")
            # relations to objects need the tolerance; relations to regions the measured extent
            # (resting, or inside the walls for the inside of one). Each kind of measurement
            # serves its own relations and every later kind's, so there are enough when each
            # prefix of kinds has at least as many measurements as the relations it serves.
            n_objects = len(relations) - n_regions
            n_on_regions = n_regions - n_inside
            enough = (len(passing) >= n_objects
                      and len(passing) + len(in_extent) >= n_objects + n_on_regions
                      and len(passing) + len(in_extent) + len(inside) >= len(relations))
            if enough:
                passing.update(dict([*in_extent.items(), *inside.items()][:n_regions]))
            if not enough:
                if worst is not None:
                    r, dist, resting, walls = worst
                    extent_words = ", or the destination's measured extent for a region" if n_regions else ""
                    dist_text = "unknown" if dist is None else f"{dist:.4f} m"
                    reason = (
                        f"the measurement after {where} (call #{r.index}) gives xy_distance_m={dist_text} "
                        f"(tolerance {tol:g} m{extent_words}) and resting_height_consistent={resting}{walls}; "
                        "the goal is not met yet"
                    )
                else:
                    reason = (
                        f"{len(passing)} of {len(relations)} goal relations are measured within tolerance "
                        f"after {where}; measure each object against its destination"
                    )
                return GateVerdict(False, reason, details=details)
            evidence.extend(passing.values())
            details["relations_passed"] = len(passing)
        if any(s.kind != "relation" for s in self.standards) or not self.standards:
            names = PERCEPTION_CALLS if self.standards else ("observe",)
            looks = [r for r in fresh if r.name in names and r.result.get("success")]
            if not looks:
                return GateVerdict(
                    False,
                    f"no fresh {' or '.join(names[:2])} after {where}; look at the scene "
                    "again and check the goal, then call finish() again",
                    details=details,
                )
            evidence.append(looks[-1].index)
        return GateVerdict(True, "", sorted(set(evidence)), details)

    def _shut_in(self, log: Sequence[CallRecord], standards: Sequence[GoalStandard]) -> GateVerdict:
        """The inside of regions another goal shuts: one distinct object/destination pair per
        goal measured within the destination's extent and inside its walls after the last
        release of the gripper, on detections made after it."""
        releases = [r for r in log if r.physical and r.result.get("executed") and r.name == "move_to"
                    and r.kwargs.get("gripper") == "open"]
        if not releases:
            return GateVerdict(False, f"{standards[0].label} is not measured: nothing was released into "
                                      f"{standards[0].args[-1]} yet")
        release = releases[-1]
        where = f"your last release of the gripper (call #{release.index})"
        measured = [r for r in log if r.index > release.index and r.name == "measure_object_geometry"
                    and r.result.get("success") and isinstance(r.result.get("value"), dict)
                    and _arg(r, 1, "destination_id") is not None]
        if self.config.require_fresh_detections:
            stale = self._stale(log, measured, release.index)
            measured = [r for r in measured if r not in stale]
        inside: dict[tuple[str, str], int] = {}
        for r in measured:
            value = r.result["value"]
            dist, extent = _xy_distance(value), _extent_radius(value)
            if dist is not None and extent is not None and dist <= extent and inside_walls(value):
                inside[(str(_arg(r, 0, "object_id")), str(_arg(r, 1, "destination_id")))] = r.index
        if len(inside) < len(standards):
            names = ", ".join(s.label for s in standards)
            return GateVerdict(False, f"{len(inside)} of {len(standards)} goals inside a part another goal shuts "
                                      f"({names}) are measured within the destination's extent and inside its "
                                      f"walls after {where}; measure each before shutting it")
        return GateVerdict(True, "", sorted(inside.values()))

    @staticmethod
    def _stale(log: Sequence[CallRecord], measured: Sequence[CallRecord], last_index: int) -> list[CallRecord]:
        """The measurements among ``measured`` that used a detection made before the call
        ``last_index`` (the last physical action)."""
        origin: dict[str, int] = {}
        for r in log:
            if r.name != "measure_object_geometry" and r.result.get("success"):
                for det in _detection_ids(r.result.get("value")):
                    origin.setdefault(det, r.index)
        return [
            r for r in measured
            if any(origin.get(str(_arg(r, i, k)), last_index + 1) < last_index
                   for i, k in ((0, "object_id"), (1, "destination_id")) if _arg(r, i, k) is not None)
        ]

    @staticmethod
    def _stale_reason(r: CallRecord, where: str) -> str:
        return (f"measure_object_geometry (call #{r.index}) used detections made "
                f"before {where}; observe again, mark or segment the object and "
                "destination in the new observation, measure, then call finish()")

    def _table_regions(self, standards: Sequence[GoalStandard], measured: Sequence[CallRecord],
                       where: str) -> GateVerdict:
        """Each relation to a region of the table needs its own measurement (a distinct
        object detection) whose object centre lies inside the region's rectangle."""
        used: set[str] = set()
        evidence: list[int] = []
        for standard in standards:
            region = standard.table_region
            assert region is not None
            inside, closest = None, None
            for r in reversed(measured):
                obj = r.result["value"].get("object")
                xy = obj.get("center_xy_m") if isinstance(obj, dict) else None
                det = str(_arg(r, 0, "object_id"))
                if det in used or not isinstance(xy, (list, tuple)) or len(xy) < 2:
                    continue
                resting = r.result["value"].get("resting_height_consistent")
                rest_ok = resting is True or not self.config.require_resting_height
                if region.contains(xy) and rest_ok:
                    inside = (r, det)
                    break
                closest = closest or (r, xy, resting)
            if inside is None:
                if closest is None:
                    reason = (f"no measure_object_geometry(object) after {where} for {standard.label}; "
                              "observe, measure the object, then call finish() again")
                else:
                    r, xy, resting = closest
                    reason = (f"the measurement after {where} (call #{r.index}) puts the object's centre at "
                              f"[{float(xy[0]):.4f}, {float(xy[1]):.4f}] m with resting_height_consistent="
                              f"{resting}; {standard.label} needs it inside the table's rectangle "
                              f"{region.words()}; the goal is not met yet")
                return GateVerdict(False, reason)
            used.add(inside[1])
            evidence.append(inside[0].index)
        return GateVerdict(True, "", evidence)

    def finish(self, log: Sequence[CallRecord], summary: str = "") -> CallOutcome:
        """Judge one ``finish()`` call; returns its result dict and receipt."""
        self.attempts += 1
        verdict = self.evaluate(log)
        left = self.config.max_rejections - len(self.rejections)
        value = {
            "accepted": False,
            "attempt": self.attempts,
            "evidence_calls": verdict.evidence,
            "summary": summary,
        }
        if verdict.passed or left <= 0:
            self.accepted = True
            self.accepted_on_evidence = verdict.passed
            value["accepted"] = True
            if verdict.passed:
                message = "finish accepted: your measurements meet the TASK.md standard; the episode ends"
                evidence = ",".join(f"#{i}" for i in verdict.evidence)
                receipt = f"finish: ok; accepted evidence={evidence}" if evidence else "finish: ok; accepted"
            else:
                message = (
                    f"finish accepted after {len(self.rejections)} rejections (the evidence still does not "
                    f"meet the standard: {verdict.reason}); the episode ends"
                )
                receipt = f"finish: ok; accepted after {len(self.rejections)} rejections"
            return CallOutcome(make_result(success=True, message=message, value=value), receipt[:300])
        self.rejections.append(verdict.reason)
        value["rejections_left"] = left - 1
        value["reason"] = verdict.reason
        message = (
            f"finish() rejected: {verdict.reason}. (Rejection {len(self.rejections)} of "
            f"{self.config.max_rejections}; after that finish() is accepted whatever the evidence.)"
        )
        result = make_result(success=False, failure_category=FINISH_REJECTED, message=message, value=value)
        receipt = f"finish: FAILED {FINISH_REJECTED}; {verdict.reason}"
        if len(receipt) > 300:
            receipt = receipt[:297] + "..."
        return CallOutcome(result, receipt)

    def primitive(self, log_source: Any) -> Any:
        """The ``finish`` callable to register in a ``RobotAPI`` (``log_source.log`` is read)."""

        def finish(summary: str = "", **details: Any) -> CallOutcome:
            """End the episode: call it when the task is done and your own fresh measurements show it.

            The host's completion gate checks your recorded measurements against the success standard
            in TASK.md (never the simulator) and may reject finish() twice with a reason; the third
            call is accepted. Nothing physical happens. ``summary``: optional words on the evidence.
            """
            return self.finish(log_source.log, summary=str(summary))

        return finish
