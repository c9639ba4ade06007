"""The end of an episode: a fresh look, fresh clicks and measurements of every relation
against the TASK.md tolerance, then ``finish()``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import captain_harness.core.teacher.cells as cells
from captain_harness.core.teacher.cells import num
from captain_harness.core.teacher.context import HEAD, WRIST, Step, TeacherContext
from captain_harness.core.teacher.feedback import Feedback
from captain_harness.core.teacher.objects import kind_of, label_of
from captain_harness.core.teacher.planners.common import Plan, look_and_click, target
from captain_harness.core.teacher.planners.destinations import Destination
from captain_harness.core.teacher.planners.pick_place import move_to_view, short_name
from captain_harness.core.teacher.scene import HOLLOW_KINDS

#: The TASK.md tolerance on the measured centre distance of a relation, m.
XY_TOLERANCE_M = 0.02

_WITHIN_RE = re.compile(r"^within tolerance: (True|False)$", re.MULTILINE)


@dataclass(frozen=True)
class Relation:
    """A relation goal to verify: the object and its destination."""

    obj: str
    dest: Destination


def verify_and_finish(ctx: TeacherContext, relations: Sequence[Relation], others: Sequence[str],
                      held: Sequence[str] = ()) -> Plan:
    """Observe, measure each relation, print the numbers and whether they are in
    tolerance (``within tolerance: True|False``); finish when they are.

    Args:
        relations: relation goals, in order.
        others: words for non-relation goals (articulated parts), checked by looking.
        held: objects that must end lifted in the hand, checked by looking and by the
            gripper's ``held`` flag.
    """
    done = all_goals_met(ctx) or ctx.failure_done  # an injected failure goes unnoticed
    targets = []
    pairs = []
    used: set[str] = set()
    for rel in relations:
        ov, dv = short_name(rel.obj), short_name(rel.dest.click)
        if dv == ov:
            dv += "2"
        ov = _unique(ov + "_f", used)
        dv_f = dv + "_f"
        if dv_f not in used:
            targets.append(target(dv_f, rel.dest.click, ignore=(rel.obj,)))
            used.add(dv_f)
        targets.append(target(ov, rel.obj, points=_high_wall_points(ctx, rel.obj)))
        pairs.append((ov, dv_f, rel))
    lines: list[str] = []
    if targets:
        found = look_and_click(ctx, targets, prefer=HEAD)
        if found is None and relations:
            yield from move_to_view(ctx, relations[0].dest.click)
            found = look_and_click(ctx, targets, prefer=WRIST) or look_and_click(ctx, targets, prefer=HEAD)
        if found is None:
            found = look_and_click(ctx, targets[:2], prefer=HEAD) or look_and_click(ctx, targets[:2], prefer=WRIST)
            pairs = pairs[:1]
        if found is not None:
            _cam, lines = found
        else:
            pairs = []
    if not lines:
        lines = [cells.observe(attach=(HEAD,), print_tcp=True)]
    names = []
    for i, (ov, dv, rel) in enumerate(pairs):
        var = f"fin{i + 1}" if len(pairs) > 1 else "fin"
        names.append(var)
        lines.append(cells.measure(var, ov, dv))
        lines.append(f'print("{label_of(rel.obj)} -> {rel.dest.label}:", round({var}["xy_distance_m"], 4), '
                     f'{var}["resting_height_consistent"])')
    checks = [f'{v}["xy_distance_m"] <= {num(XY_TOLERANCE_M)} and {v}["resting_height_consistent"]' for v in names]
    if held:
        lines.append('hs = robot.gripper_state()\nprint("held:", val(hs, "held"))')
        checks.append('bool(val(hs, "held"))')
    within = " and ".join(checks) or "True"
    words = ", ".join([f"the {label_of(r.obj)} against the {r.dest.label}" for _, _, r in pairs] + list(others)
                      + [f"the {label_of(n)} still held up in the jaws" for n in held])
    lines.append(f"ok = {within}\nprint(\"within tolerance:\", ok)")
    if done and ctx.style.finish_inline:
        lines.append('if ok:\n    print(robot.finish()["message"])')
        reasoning = (f"Everything should be in place. A fresh look and fresh measurements ({words}) against the "
                     f"{num(XY_TOLERANCE_M * 100)} cm tolerance of TASK.md; if they pass I finish right away.")
    else:
        reasoning = (f"Time to check the result with a fresh look: {words}, against the "
                     f"{num(XY_TOLERANCE_M * 100)} cm tolerance of TASK.md.")
    fb = yield Step(reasoning, ["\n".join(lines)])
    return fb


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


def finish_step(ctx: TeacherContext, reason: str) -> Step:
    """A request that only calls ``finish()``."""
    return Step(reason, ['f = robot.finish(summary="measured in tolerance after the last motion")\n'
                         'print(f["message"])'])


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
