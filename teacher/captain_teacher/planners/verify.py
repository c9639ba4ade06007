"""The end of an episode: a fresh look, fresh clicks and measurements of every goal
(``planners.evidence``), a verdict the session computes from them, then ``finish()``."""

from __future__ import annotations

import math
import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass

import numpy as np

import captain_teacher.cells as cells
from captain_teacher.cells import num
from captain_teacher.context import HEAD, WRIST, Step, TeacherContext
from captain_teacher.feedback import Feedback
from captain_teacher.objects import kind_of, label_of
from captain_teacher.planners.common import (
    Plan,
    Target,
    look_and_click,
    look_and_click_each,
    seen_by,
    short_name,
    target,
    view_pose_above,
)
from captain_teacher.planners.destinations import Destination
from captain_teacher.planners.evidence import part_evidence, relation_check
from captain_teacher.planners.front_load import front_loads, look_inside
from captain_teacher.planners.measuring import (
    above_views,
    behind_group,
    behind_views,
    behind_words,
    beyond_views,
    move_to_view,
    sighted,
)
from captain_teacher.scene import HOLLOW_KINDS

#: The TASK.md tolerance on the measured centre distance of a relation, m.
XY_TOLERANCE_M = 0.02

#: Share of the stove plate's half sizes the click candidates on it span (about 1.5 cm
#: inside its edges).
STOVE_PLATE_FRACTION = 0.82
#: How far beyond the footprint of the object on the stove a click on its plate stays, m
#: (the plate is little wider than a bowl).
STOVE_CLEARANCE_M = 0.02

#: Fixtures whose box is mostly open frame: an object lying in one is seen through it.
OPEN_FRAMES = frozenset({"wine_rack"})

#: ``nosup_reason`` of a verifying cell that could not measure every goal.
UNMEASURED_GOAL = "unmeasured_goal"

_WITHIN_RE = re.compile(r"^within tolerance: (True|False)$", re.MULTILINE)


@dataclass(frozen=True)
class Relation:
    """A relation goal to verify: the object and its destination."""

    obj: str
    dest: Destination


def _relation_targets(ctx: TeacherContext, relations: Sequence[Relation], suffix: str
                      ) -> tuple[list[list[Target]], list[tuple[str, str, Relation]]]:
    """Per relation, the click targets of its destination and object (session variables
    ending in ``suffix``) and the ``(object var, destination var, relation)`` pairs."""
    groups: list[list[Target]] = []
    pairs = []
    used: set[str] = set()
    dest_vars: dict[str | None, str] = {}
    for rel in relations:
        ov, dv = short_name(rel.obj), short_name(rel.dest.click)
        if dv == ov:
            dv += "2"
        ov = _unique(ov + suffix, used)
        # relations into one destination share its click; two destinations of one name (the
        # two plates) each get their own
        dv_f = dest_vars.get(rel.dest.click)
        if dv_f is None:
            dv_f = dest_vars[rel.dest.click] = _unique(dv + suffix, used)
        # a region's fixture (the stove, the basket) is clicked where the object does not hide
        # it: a click on its middle lands on the object resting there, and both clicks then
        # mark one region
        ignore = () if rel.dest.region else (rel.obj,)
        groups.append([target(dv_f, rel.dest.click, ignore=ignore,
                              points=_away_points(ctx, rel.dest.click, rel.obj) if rel.dest.region else None),
                       target(ov, rel.obj, points=_high_wall_points(ctx, rel.obj),
                              ignore=(rel.dest.click,) if kind_of(rel.dest.click) in OPEN_FRAMES else ())])
        pairs.append((ov, dv_f, rel))
    return groups, pairs


#: The session variable of the check made before shutting a part (``measure_before_shutting``).
SHUT_CHECK_VAR = "shut_ok"


def measure_before_shutting(ctx: TeacherContext, relations: Sequence[Relation], part: str) -> Plan:
    """Before a goal shuts ``part`` (a drawer, the microwave's door), measure each relation
    into it: once shut, no camera sees inside (the gate then takes the measurement made
    after the last release). From the head camera, else (nothing to click, or the object
    and the destination one region) from the wrist camera above the first relation's
    destination. The check is kept in ``ctx.shut_check`` for the final verdict when the
    cell printed it; nothing is kept otherwise (the final look then names the goal as
    unmeasured)."""
    if len(relations) == 1 and ctx.front_top is not None and front_loads(ctx, relations[0].obj, relations[0].dest):
        # slid in through the front: only the wrist camera, in front of the opening, sees it
        fb = yield from look_inside(ctx, relations[0].obj, relations[0].dest, part, SHUT_CHECK_VAR)
        plab = label_of(part)
        _shut_check_printed(ctx, fb, relations, f"the {label_of(relations[0].obj)} against the {plab}'s heating region",
                            plab)
        return
    groups, pairs = _relation_targets(ctx, relations, "_s")
    flat = _dedupe([t for g in groups for t in g])
    plab = label_of(part)
    checks, words, measure_lines = [], [], []
    for i, (ov, dv, rel) in enumerate(pairs):
        var = f"ins{i + 1}" if len(pairs) > 1 else "ins"
        measure_lines.append(cells.measure(var, ov, dv))
        rel_lines, check, what = relation_check(ctx, var, rel.obj, rel.dest, XY_TOLERANCE_M)
        measure_lines += rel_lines
        checks.append(check)
        words.append(what)
    said = ", ".join(words)
    measure_lines.append(f"{SHUT_CHECK_VAR} = {' and '.join(checks)}\n"
                         f'print("inside before shutting:", {SHUT_CHECK_VAR})')
    reasoning = (f"Before I shut the {plab}: once it is shut no camera sees inside, so I'll measure now, after the "
                 f"release: {said}.")
    found = look_and_click(ctx, flat, prefer=HEAD)
    if found is not None:
        fb = yield Step(reasoning, ["\n".join(found[1] + measure_lines)])
        if _shut_check_printed(ctx, fb, relations, said, plab) or fb is None or SAME_REGION not in fb.text:
            return
        why = f"The head camera's image could not tell the object from the {plab} (one region for both)."
    else:
        why = f"The head camera does not see into the {plab} cleanly."
    aim = relations[0].dest.region_center_m(ctx.scene)
    yield from move_to_view(ctx, part, why=why, views=[aim + np.array([-back, 0.0, h])
                                                       for h, back in ((0.25, 0.06), (0.3, 0.12), (0.22, 0.0))])
    speed = num(ctx.style.approach_speed_m_s)
    found = look_and_click(ctx, flat, prefer=WRIST)
    back = f"r = go(home, downq(0.0), speed={speed})  # out of the head camera's view again"
    if found is None:
        yield Step(f"The wrist camera does not see into the {plab} from here either. I'll move the hand back out of "
                   "the head camera's view.", [back])
        return
    look, marks = found[1][0], found[1][1:]  # back out of view right after the look: the clicks use its images
    fb = yield Step(f"{reasoning} The hand goes back out of the head camera's view right after the look.",
                    ["\n".join([look, back, *marks, *measure_lines])])
    _shut_check_printed(ctx, fb, relations, said, plab)


#: What ``measure_object_geometry`` says when an object and its destination are one region.
SAME_REGION = "are the same region of"
_FAILED_MEASURE_RE = re.compile(r"^Traceback.*?measure_object_geometry\((\w+), \w+\)", re.MULTILINE | re.DOTALL)


#: A relation printed at most this far from its destination (m) but outside its check is
#: measured once more from the wrist camera; one farther off is plainly elsewhere, and the
#: teacher sets it right instead. Seen from afar at the edge of the head image (the second
#: of two plates), a mug standing on its plate measures up to 5 cm off.
RECHECK_WITHIN_M = 3.0 * XY_TOLERANCE_M


def outside_object(ctx: TeacherContext, relations: Sequence[Relation], fb: Feedback | None) -> str:
    """The session variable of the first relation to an object whose measurement in the
    verifying cell ``fb`` reports printed just outside its check (an offset over the
    tolerance but within ``RECHECK_WITHIN_M``, or a False resting check within it); empty
    when none did (only a region's check, or one plainly off, failed)."""
    if fb is None:
        return ""
    shut = ctx.shut_check
    if shut is not None:
        relations = [rel for rel in relations if rel.obj not in shut[0]]
    _groups, pairs = _relation_targets(ctx, relations, "_f")
    printed = fb.text.splitlines()
    for ov, _dv, rel in pairs:
        olab = label_of(rel.obj)
        for line in printed:
            if line.startswith(f"{olab} -> {rel.dest.label}: "):
                words = line.split()
                try:
                    offset = float(words[-2])
                except (ValueError, IndexError):
                    continue
                # printed to 0.1 mm: 0.02 may be just over the tolerance the session checked
                if (offset >= XY_TOLERANCE_M or words[-1] != "True") and offset <= RECHECK_WITHIN_M:
                    return ov
    return ""


def wrist_passed(ctx: TeacherContext, relations: Sequence[Relation], fb: Feedback | None
                 ) -> list[tuple[Relation, str]]:
    """The relations to objects whose object and destination the verifying cell ``fb``
    reports clicked in the wrist image and measured within the tolerance, resting, each with
    the session variable holding that measurement (``ctx.verify_vars``)."""
    if fb is None:
        return []
    _groups, pairs = _relation_targets(ctx, relations, "_f")
    printed = fb.text.splitlines()
    out = []
    for ov, dv, rel in pairs:
        var = ctx.verify_vars.get(rel.obj)
        if rel.dest.region or var is None or not {ov, dv} <= ctx.wrist_clicked:
            continue
        for line in printed:
            if line.startswith(f"{label_of(rel.obj)} -> {rel.dest.label}: "):
                words = line.split()
                if words[-1] == "True" and _number(words[-2]) < XY_TOLERANCE_M:
                    out.append((rel, var))
    return out


def _number(word: str) -> float:
    try:
        return float(word)
    except ValueError:
        return float("inf")


def one_region_object(fb: Feedback | None) -> str:
    """The session variable of the object whose measurement against its destination failed
    in the cell ``fb`` reports (the call in its traceback); empty when none did."""
    if fb is None or SAME_REGION not in fb.text:
        return ""
    m = _FAILED_MEASURE_RE.search(fb.text)
    return m.group(1) if m else ""


_SHUT_RE = re.compile(r"^inside before shutting: (True|False)$", re.MULTILINE)


def _shut_check_printed(ctx: TeacherContext, fb: Feedback | None, relations: Sequence[Relation], said: str,
                        plab: str) -> bool:
    """Keep the check made before shutting in ``ctx.shut_check`` when the cell printed it."""
    if fb is None or not _SHUT_RE.search(fb.text):
        return False
    ctx.shut_check = (frozenset(rel.obj for rel in relations), SHUT_CHECK_VAR,
                      f"{said}, measured before the {plab} was shut")
    return True


def verify_and_finish(ctx: TeacherContext, relations: Sequence[Relation], parts: Sequence[tuple[str, str]],
                      held: Sequence[str] = (), from_above: str = "", one_region: str = "",
                      kept: Sequence[tuple[Relation, str]] = ()) -> Plan:
    """Observe, measure every goal (``planners.evidence``), print the numbers and whether
    they meet the goals (``within tolerance: True|False``, computed in the session from
    those measurements); finish when they do.

    Args:
        relations: relation goals, in order.
        parts: articulated goals as ``(op, name)`` (``("open", "wooden_cabinet_1_middle_region")``).
        held: objects that must end lifted in the hand, checked by the gripper's ``held`` flag.
        from_above: when set (the reason, one sentence), look from above a relation's
            destination with the wrist camera first (the head camera's look could not
            measure it: the object and its destination segmented as one region); that
            relation is clicked in the wrist image, the others where the head camera sees them.
        one_region: the session variable of that relation's object (``one_region_object``);
            empty: the first relation.
        kept: relations the last verifying cell measured within the tolerance from the wrist
            camera (``wrist_passed``), with the session variable of that measurement: only
            the empty hand has moved since (to this look's viewpoint, touching nothing), so
            they are not measured again; their checks join this cell's verdict.

    A goal that cannot be measured (no camera sees it, nothing recorded its motion) is
    named in the reasoning; the cell then prints no verdict and is not trained on
    (``nosup_reason`` = ``UNMEASURED_GOAL``).
    """
    done = all_goals_met(ctx) or ctx.failure_done  # an injected failure goes unnoticed
    shut = ctx.shut_check
    if shut is not None:  # measured before the part was shut: no camera sees them now
        relations = [rel for rel in relations if rel.obj not in shut[0]]
    relations = [rel for rel in relations if rel not in {r for r, _ in kept}]
    groups, pairs = _relation_targets(ctx, relations, "_f")
    evidence = [part_evidence(ctx, op, name) for op, name in parts]
    groups += [[ev.target] for ev in evidence if ev.target is not None]
    flat = _dedupe([t for g in groups for t in g])
    clicked: set[str] = set()
    lines: list[str] = []
    if flat:
        found = None
        if from_above and relations:
            look = next((i for i, (ov, _, _) in enumerate(pairs) if ov == one_region), 0)
            each = yield from _look_from_above(ctx, pairs, groups, look, from_above)
            found = (WRIST, each) if each is not None else None
        found = found or look_and_click(ctx, flat, prefer=HEAD)
        if found is None and relations and not from_above:
            # from above the first relation the head camera does not see
            look = next((i for i, g in enumerate(groups[:len(pairs)]) if not seen_by(ctx, g, HEAD)), 0)
            each = yield from _look_from_above(ctx, pairs, groups, look)
            found = ((WRIST, each) if each is not None else
                     look_and_click(ctx, flat, prefer=WRIST) or look_and_click(ctx, flat, prefer=HEAD))
        if found is not None:
            lines = found[1]
            clicked = {t.var for t in flat}
        else:  # no one view sees everything: each goal from a view that sees its part
            for group in groups:
                one = look_and_click(ctx, group, prefer=HEAD) or look_and_click(ctx, group, prefer=WRIST)
                if one is not None:
                    lines += one[1]
                    clicked |= {t.var for t in group}
    ctx.wrist_clicked = frozenset(line.split(" = ", 1)[0] for line in lines
                                  if "robot.mark_point(" in line and f'"{WRIST}"' in line)
    point_vars = {ev.target.var for ev in evidence if ev.target is not None}
    lines = [_keep_whole_value(line, point_vars) for line in lines]
    if not lines:
        lines = [cells.observe(attach=(HEAD,), print_tcp=True)]
    checks: list[str] = []
    words: list[str] = []
    unmeasured: list[str] = []
    names = []
    measured_pairs = [(ov, dv, rel) for ov, dv, rel in pairs if ov in clicked and dv in clicked]
    for i, (rel, old) in enumerate(kept):
        var = f"kept{i + 1}" if len(kept) > 1 else "kept"
        lines.append(f"{var} = {old}  # from the wrist camera in the last look; only the empty hand moved since")
        rel_lines, check, what = relation_check(ctx, var, rel.obj, rel.dest, XY_TOLERANCE_M)
        lines += rel_lines
        checks.append(check)
        words.append(f"{what} (within tolerance from the wrist camera in the last look)")
    ctx.verify_vars = {}
    for i, (ov, dv, rel) in enumerate(measured_pairs):
        var = f"fin{i + 1}" if len(measured_pairs) > 1 else "fin"
        names.append(var)
        ctx.verify_vars[rel.obj] = var
        lines.append(cells.measure(var, ov, dv))
        rel_lines, check, what = relation_check(ctx, var, rel.obj, rel.dest, XY_TOLERANCE_M)
        if rel.dest.region and rel.dest.click and rel.dest.goal_arg not in ctx.table_regions:
            # the host judges a region goal by the destination's measured extent: the object's
            # centre within the measured footprint (object_over_destination); check it too
            over = f'{var}["object_over_destination"]'
            rel_lines.append(f'print("over the {rel.dest.label}\'s measured extent:", {over})')
            check = f"{check} and {over}"
        lines += rel_lines
        checks.append(check)
        words.append(what)
    unmeasured += [f"the {label_of(rel.obj)} against the {rel.dest.label}" for ov, dv, rel in pairs
                   if (ov, dv, rel) not in measured_pairs]
    for ev in evidence:
        if ev.check and (ev.target is None or ev.target.var in clicked):
            lines += ev.lines
            checks.append(ev.check)
            words.append(ev.words)
        else:
            unmeasured.append(ev.words)
    if shut is not None:
        checks.append(shut[1])
        words.append(shut[2])
    if held:
        lines.append('hs = robot.gripper_state()\nprint("held:", val(hs, "held"))')
        checks.append('bool(val(hs, "held"))')
        words += [f"the {label_of(n)} still held up in the jaws" for n in held]
    said = ", ".join(words)
    tol = f"{num(XY_TOLERANCE_M * 100)} cm tolerance of TASK.md"
    if unmeasured or not checks:
        missing = ", ".join(unmeasured) or "the goals"
        reasoning = (f"Time to check the result with a fresh look{': ' + said if said else ''}. I cannot measure "
                     f"{missing} from here, so this look alone does not show the task done.")
        fb = yield Step(reasoning, ["\n".join(lines)], meta={"nosup_reason": UNMEASURED_GOAL})
        return fb
    lines.append(f"ok = {' and '.join(checks)}\nprint(\"within tolerance:\", ok)")
    if done and ctx.style.finish_inline:
        lines.append('if ok:\n    print(robot.finish()["message"])')
        reasoning = (f"Everything should be in place. A fresh look and fresh measurements ({said}), each against "
                     f"its goal (relations to objects within the {tol}); if they all pass I finish right away.")
    else:
        reasoning = (f"Time to check the result with a fresh look and measurements: {said}, each against its goal "
                     f"(relations to objects within the {tol}).")
    fb = yield Step(reasoning, ["\n".join(lines)])
    return fb


#: An object at least this tall (m) standing on a region is looked at from beside it: from
#: straight above its top hides its foot (a moka pot's lid overhangs its body), and whether
#: it rests on the region cannot be seen.
TALL_ON_REGION_M = 0.08
#: Tool positions for that look: (sideways from the tall object nearest the robot's middle,
#: further toward the middle; height above the fixture's top), m. From 5 cm beside a moka
#: pot its foot is hidden; from 12 cm the wrist camera sees it, and the stove beyond.
BESIDE_VIEWS_M = ((0.12, 0.28), (0.15, 0.28))


def _beside_views(ctx: TeacherContext, rels: Sequence[Relation]) -> list[np.ndarray] | None:
    """Tool positions (base frame, m) from which the wrist camera sees the tall objects of
    ``rels`` (relations into one region) from the side, then the usual ones above the
    region's fixture; None (the usual ones) when none of them is tall."""
    rel = rels[0]
    if not rel.dest.region or rel.dest.container:
        return None
    boxes = [ctx.scene.box(r.obj) for r in rels]
    tall = [b.center_m for b in boxes if 2.0 * float(b.half_m[2]) >= TALL_ON_REGION_M]
    if not tall:
        return None
    toward_middle = -1.0 if ctx.scene.box(rel.dest.click).center_m[1] > 0.0 else 1.0
    nearest = max(float(c[1]) * toward_middle for c in tall) * toward_middle
    beside = []
    for side, h in BESIDE_VIEWS_M:
        view = view_pose_above(ctx, rel.dest.click, h)  # above the fixture, then moved sideways
        view[1] = nearest + toward_middle * side
        beside.append(view)
    return beside + above_views(ctx, rel.dest.click)


def _look_from_above(ctx: TeacherContext, pairs: Sequence[tuple[str, str, Relation]],
                     groups: Sequence[Sequence[Target]], look: int, why: str = ""
                     ) -> Generator[Step, Feedback, list[str] | None]:
    """Move the wrist camera to look at relation ``look``'s destination (``_beside_views``)
    and click its group there, the rest where the head camera sees them; from beside tall
    objects on a region, all relations into it in the wrist image (the second moka pot on
    the stove: the head camera sees it as one region with the stove; a second can in the
    basket stays in the head image, the wrist camera above the basket sees it as one region
    with the basket). None when some group is seen by no camera."""
    rel = pairs[look][2]
    behind = None if rel.dest.region else behind_views(ctx, rel.obj, rel.dest.click, above=False)
    if behind is not None:
        # only the views from which the wrist camera would see the rim and both objects whole
        # (from the start pose when none is reachable from here), turned ones first when only
        # those do; without any, all of them and straight above last (the tall object hides
        # the plate and is seen as one region with it)
        seen, unseen = sighted(ctx, behind, 0.0, *groups[look])
        seen_t, unseen_t = sighted(ctx, beyond_views(ctx, rel.dest.click), math.pi, *groups[look])
        if not seen and not seen_t:
            seen, seen_t = unseen + above_views(ctx, rel.dest.click), unseen_t
        yield from move_to_view(ctx, rel.dest.click, why=why, views=seen, how=behind_words(rel.obj, rel.dest.click),
                                turned=seen_t, turned_first=bool(seen_t) and not seen)
        groups = [behind_group(ctx, *g) if i == look else g for i, g in enumerate(groups)]
        return look_and_click_each(ctx, groups, [WRIST if i == look else HEAD for i in range(len(groups))])
    into = [i for i, (_, _, other) in enumerate(pairs) if other.dest.click == rel.dest.click]
    views = _beside_views(ctx, [rel] + [pairs[i][2] for i in into if i != look])
    yield from move_to_view(ctx, rel.dest.click, why=why, views=views)
    wrist = set(into) if views is not None else {look}
    return look_and_click_each(ctx, groups, [WRIST if i in wrist else HEAD for i in range(len(groups))])


def _dedupe(targets: Sequence[Target]) -> list[Target]:
    """Targets with each session variable once (two relations may share a destination)."""
    out, seen = [], set()
    for t in targets:
        if t.var not in seen:
            seen.add(t.var)
            out.append(t)
    return out


def _keep_whole_value(line: str, point_vars: set[str]) -> str:
    """A click on a point whose position the check reads keeps mark_point's whole value."""
    for var in point_vars:
        if line.startswith(f"{var} = need(robot.mark_point("):
            return line.replace('["detection_id"]', "")
    return line


def _away_points(ctx: TeacherContext, fixture: str, obj: str, clearance_m: float = 0.04) -> np.ndarray | None:
    """Click candidates on a region's fixture (on its top where it has some) at least
    ``clearance_m`` beyond the footprint of the object resting on it (None: the usual ones).
    Next to the object, low relief of the fixture (a burner's rings under a bowl) segments
    with the object, and both clicks then mark one region."""
    camera = ctx.cameras.get(HEAD)
    if camera is None or not fixture:
        return None
    box = ctx.scene.box(obj)
    fbox = ctx.scene.box(fixture)
    if kind_of(fixture) == "stove":
        # its plate (the scene's first part box), at the height the object rests on: the
        # stove's box also holds the knob's stand, a region of its own, with bare table beside it
        pts = ctx.scene.part_boxes(fixture)[0].top_points(fraction=STOVE_PLATE_FRACTION, n=9)
        pts[:, 2] = box.bottom_z_m
        clearance_m = min(clearance_m, STOVE_CLEARANCE_M)
        top = np.ones(len(pts), bool)
    else:
        pts = ctx.scene.click_candidates(fixture, camera)
        top = pts[:, 2] >= fbox.top_z_m - 0.01  # its top: the face the region lies on
    far = np.linalg.norm(pts[:, :2] - box.center_m[:2], axis=1) > float(max(box.half_m[:2])) + clearance_m
    if (far & top).any():
        far &= top
    return pts[far] if far.any() else None


def _high_wall_points(ctx: TeacherContext, name: str) -> np.ndarray | None:
    """Click candidates high on a hollow object's outer wall as the head camera sees it
    (None: the usual ones). Once it rests on its destination, a click low on a bowl's
    tapering wall can land on what it stands on, and both clicks then mark one region."""
    camera = ctx.cameras.get(HEAD)
    if camera is None or kind_of(name) not in HOLLOW_KINDS:
        return None
    return ctx.scene.click_candidates(name, camera, wall_height_frac=0.85, wall_radius_frac=0.93)


def measured_within(fb: Feedback | None) -> bool | None:
    """What the last verifying cell printed as ``within tolerance:`` (None: nothing)."""
    if fb is None:
        return None
    m = _WITHIN_RE.findall(fb.text)
    return None if not m else m[-1] == "True"


#: ``finish()``'s summary after a verifying cell whose goals all measured within tolerance.
MEASURED_SUMMARY = "measured in tolerance after the last motion"


def finish_step(ctx: TeacherContext, reason: str, summary: str = MEASURED_SUMMARY) -> Step:
    """A request that only calls ``finish()``, with ``summary`` saying what its evidence is
    (never more than the last verifying cell showed)."""
    return Step(reason, [f"f = robot.finish(summary={summary!r})\n" 'print(f["message"])'])


def all_goals_met(ctx: TeacherContext) -> bool:
    """Whether every goal predicate holds in the snapshot."""
    return all(g.satisfied for g in ctx.scene.snapshot.goals)


def _unique(name: str, used: set[str]) -> str:
    out, k = name, 2
    while out in used:
        out = f"{name}{k}"
        k += 1
    used.add(out)
    return out
