"""The whole episode: set up the session, split the task's goals into sub-tasks in a
workable order, run each sub-task's planner, then verify and finish.

Order of sub-tasks: setting aside what stands in a table region an object must go to (no
spot of it would keep the object clear), opening drawers (also one that a relation needs open), turning knobs,
then the relations in the task's order, then closing drawers and doors (after whatever
goes inside them), then picking up what must end lifted in the hand (the tabletop's
``Lifted``). Goals already true at the start are skipped. After an injected
failure (``style.FAILURES``) the teacher does not notice: it verifies and finishes
without fixing anything.

When the scene is right (by the host's snapshot) but the teacher's own measurement is out
of tolerance or could not be made, or the gate has rejected a finish (the gate's standard
for a region goal, 2 cm from the clicked fixture's centre, is stricter than the region the
teacher measures against), the teacher still finishes (the gate accepts a third call);
those finishing requests carry ``nosup_reason`` = ``FINISH_AGAINST_EVIDENCE``, so SFT data
built from the records does not teach a policy to finish against the evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import captain_teacher.cells as cells
from captain_harness.core.episode.gate import shuts
from captain_teacher.clearance import movable
from captain_teacher.context import HEAD, WRIST, Step, TeacherContext
from captain_teacher.library import HELPERS_SOURCE
from captain_teacher.objects import kind_of, label_of
from captain_teacher.planners import articulated
from captain_teacher.planners.common import Plan, PlanError
from captain_teacher.planners.destinations import Destination, basket_corners, destination_for, share_spread_m
from captain_teacher.planners.lift import pick_up
from captain_teacher.planners.pick_place import clear_region, pick_and_place
from captain_teacher.planners.placing import spot_blockers
from captain_teacher.planners.verify import (
    MEASURED_SUMMARY,
    SAME_REGION,
    Relation,
    all_goals_met,
    finish_step,
    measure_before_shutting,
    measured_within,
    one_region_object,
    outside_object,
    verify_and_finish,
    wrist_passed,
)

RELATIONS = ("on", "in")
ARTICULATIONS = ("open", "close", "turnon", "turnoff")
#: At most this many looks from the wrist camera at relations the head camera measured
#: outside their checks, each at another object (the two mugs on their plates).
MAX_RELOOKS = 2
#: ``nosup_reason`` of a finish made against the teacher's own evidence.
FINISH_AGAINST_EVIDENCE = "finish_against_evidence"


@dataclass(frozen=True)
class Subtask:
    """One goal to bring about: ``kind`` is ``"place"`` or an articulation predicate."""

    kind: str
    args: tuple[str, ...]
    dest: Destination | None = None

    def satisfied(self, ctx: TeacherContext) -> bool:
        """Whether its goal holds now."""
        if self.kind == "place":
            assert self.dest is not None
            return ctx.goal_satisfied(self.dest.relation, (self.args[0], self.dest.goal_arg))
        if self.kind == "open_for":
            return articulated.is_open(ctx, self.args[0])
        if self.kind == "clear":
            return not articulated.in_drawer_way(ctx, self.args[1], self.args[0])
        if self.kind == "clear_pull":
            return self.args[0] not in articulated.pull_obstacles(ctx, self.args[1])
        if self.kind == "clear_region":
            table = ctx.table_regions.get(self.args[1])
            return table is None or self.args[0] not in spot_blockers(ctx, self.args[2], table)
        return ctx.goal_satisfied(self.kind, self.args)


def setup_step(ctx: TeacherContext, instruction_words: str) -> Step:
    """Request 1: the helper library, a first look with both cameras, the start pose."""
    code = "\n".join([
        HELPERS_SOURCE,
        cells.observe(attach=(HEAD, WRIST), print_tcp=True, print_cameras=True),
        'home = np.array(rs["end_effector_position_m"])  # a pose that keeps the head camera clear',
    ])
    reasoning = (f"Task: {instruction_words}. I'll define my small helper library once (val, need, downq, go), "
                 "take a first look with both cameras and note where the hand starts, so I can bring it back out "
                 "of the head camera's view later.")
    return Step(reasoning, [code])


def decompose(ctx: TeacherContext) -> list[Subtask]:
    """Sub-tasks for the snapshot's goals (see the module docstring)."""
    scene = ctx.scene
    goals = list(scene.snapshot.goals)
    first: list[Subtask] = []
    middle: list[Subtask] = []
    last: list[Subtask] = []
    lifts: list[Subtask] = []
    for g in goals:
        pred, args = g.predicate, tuple(g.args)
        if pred in RELATIONS and len(args) >= 2:
            dest = destination_for(args[1], pred, scene)
            if articulated.needs_open(ctx, args[1]) and not any(t.kind == "open_for" for t in first):
                if articulated.in_drawer_way(ctx, args[1], args[0]):
                    first.append(Subtask("clear", (args[0], args[1])))
                first.extend(Subtask("clear_pull", (o, args[1])) for o in articulated.pull_obstacles(ctx, args[1])
                             if o != args[0])
                first.append(Subtask("open_for", (args[1],)))
            middle.append(Subtask("place", (args[0],), dest))
        elif pred in ("open", "turnon", "turnoff"):
            if pred == "open":
                first.extend(Subtask("clear_pull", (o, args[0])) for o in articulated.pull_obstacles(ctx, args[0]))
            first.append(Subtask(pred, args))
        elif pred == "close":
            last.append(Subtask(pred, args))
        elif pred == "lifted" and len(args) == 1:
            lifts.append(Subtask(pred, args))
        else:
            raise PlanError(f"the teacher has no plan for the goal {pred}({', '.join(args)})")
    tables = getattr(ctx, "table_regions", None) or {}
    goal_objects = {g.args[0] for g in goals if g.args}
    for t in middle:  # a table region something else stands in: that is set aside first
        if t.kind == "place" and t.dest is not None and t.dest.goal_arg in tables:
            first.extend(Subtask("clear_region", (b, t.dest.goal_arg, t.args[0]))
                         for b in spot_blockers(ctx, t.args[0], tables[t.dest.goal_arg])
                         if movable(b) and b not in goal_objects)
    shared: dict[str, list[int]] = {}
    for i, t in enumerate(middle):
        if t.kind == "place" and t.dest is not None and t.dest.region:
            shared.setdefault(t.dest.goal_arg, []).append(i)
    for indices in shared.values():
        if len(indices) > 1 and kind_of(middle[indices[0]].dest.click) == "basket":
            corners = basket_corners(middle[indices[0]].dest, [middle[j].args[0] for j in indices], scene)
            for i, corner in zip(indices, corners, strict=True):
                t = middle[i]
                middle[i] = Subtask(t.kind, t.args, replace(t.dest, corner_m=corner))
        elif len(indices) > 1:  # side by side, each on the side it starts from: their paths do not cross
            axis = middle[indices[0]].dest.share_axis(scene)[:2]
            for k, i in enumerate(sorted(indices, key=lambda j: float(scene.position(middle[j].args[0])[:2] @ axis))):
                t = middle[i]
                spread = share_spread_m(t.dest, [middle[j].args[0] for j in indices], scene)
                middle[i] = Subtask(t.kind, t.args, replace(t.dest, share=(k, len(indices)), share_spread_m=spread))
    return first + middle + last + lifts[:1]  # one hand: one object can end up lifted


def plan_episode(ctx: TeacherContext, instruction: str) -> Plan:
    """Every request of one episode (see the module docstring)."""
    yield setup_step(ctx, instruction)
    if not ctx.scene.snapshot.goals:
        raise PlanError("the task lists no goal predicates the teacher can plan for")
    subtasks = decompose(ctx)
    relations = [Relation(t.args[0], t.dest) for t in subtasks if t.kind == "place" and t.dest is not None]
    parts = [(t.kind, t.args[0]) for t in subtasks if t.kind in ARTICULATIONS]
    held = [t.args[0] for t in subtasks if t.kind == "lifted"]
    done_any = False
    for t in subtasks:
        if t.satisfied(ctx):
            continue
        if t.kind == "close":  # once shut, no camera sees what went inside: measure it first
            inside = [rel for rel in relations if rel.dest.container and shuts(t.args[0], rel.dest.goal_arg)]
            if inside:
                yield from measure_before_shutting(ctx, inside, t.args[0])
        yield from run_subtask(ctx, t, first=not done_any)
        done_any = True
    fixes = 0
    finishes = 0
    from_above = one_region = ""
    kept: list[tuple[Relation, str]] = []
    relooked: set[str] = set()  # objects measured again from the wrist camera
    while True:
        fb = yield from verify_and_finish(ctx, relations, parts, held, from_above=from_above, one_region=one_region,
                                          kept=kept)
        within = measured_within(fb)
        if (within is not True and relations and fb is not None and len(relooked) < MAX_RELOOKS
                and ctx.requests_left() >= 6 and ctx.actions_left() >= 4):
            # decided from what the cell printed, whatever the scene's truth: the head camera
            # saw an object and its destination as one region, or measured one outside its
            # check; the wrist camera, closer up (above it, or behind a tall object on a
            # plate), sees the object clear of what it stands on
            if within is None and SAME_REGION in fb.text and not from_above:
                from_above = ("The head camera's image could not tell an object from its destination (one "
                              "region for both), so that look measured nothing.")
                one_region = one_region_object(fb)
                relooked.add(one_region)
                continue
            # relations the wrist camera measured within tolerance stand while only the empty
            # hand moves (TASK.md): the next look measures the others
            passed = wrist_passed(ctx, relations, fb) if within is False else []
            rest = [rel for rel in relations if rel not in {r for r, _ in passed}]
            outside = outside_object(ctx, rest, fb) if within is False else ""
            if outside and outside not in ctx.wrist_clicked and outside not in relooked:
                kept = passed
                from_above = ("The head camera's measurement puts an object outside its check; the wrist camera, "
                              "closer up, sees it and what it stands on better, so I'll measure it there before "
                              "deciding.")
                if passed:
                    said = " and ".join(f"the {label_of(r.obj)} against the {r.dest.label}" for r, _ in passed)
                    from_above += (f" From the wrist camera {said} measured within tolerance; only the empty hand "
                                   "moves now, touching nothing, so that measurement stands.")
                one_region = outside
                relooked.add(outside)
                continue
        # still here: finish() was not called, or it was rejected
        if all_goals_met(ctx) or ctx.failure_done:  # an injected failure goes unnoticed
            rejected = fb is not None and "finish() rejected" in fb.text
            while finishes < 3:
                finishes += 1
                summary = MEASURED_SUMMARY
                if finishes > 1 or rejected:
                    why = "The gate asks for more evidence, but the scene is as it should be; finishing again."
                    summary = "finishing again after the gate's rejection; the evidence has not changed"
                elif within is False:
                    why = ("The measurement stays just outside the tolerance, but the images show everything in "
                           "place; calling finish().")
                    summary = "the last measurement is outside the tolerance; finishing on the images"
                elif within is None:
                    why = "Not everything could be measured, but the images show everything in place; calling finish()."
                    summary = "not every goal could be measured; finishing on the images"
                else:
                    why = "The fresh measurements and the images show the task done; calling finish()."
                step = finish_step(ctx, why, summary)
                if finishes > 1 or rejected or within is not True:
                    # the teacher knows the scene is right from the host's snapshot, which a
                    # policy never has: such a finish is recorded but not trained on
                    step.meta = {"nosup_reason": FINISH_AGAINST_EVIDENCE}
                fb = yield step
                del fb
            return
        if fixes >= 2 or ctx.actions_left() < 12 or ctx.requests_left() < 6:
            return
        fixes += 1
        kept = []  # the fix moves objects: nothing measured before it stands
        for t in subtasks:
            if not t.satisfied(ctx):
                if t.kind == "place":  # a new release: what was measured before shutting no longer counts
                    ctx.shut_check = None
                yield from run_subtask(ctx, t, first=False)
                break


def run_subtask(ctx: TeacherContext, t: Subtask, first: bool) -> Plan:
    """Dispatch one sub-task to its planner."""
    if t.kind == "place":
        assert t.dest is not None
        yield from pick_and_place(ctx, t.args[0], t.dest, first=first)
    elif t.kind == "open_for":
        yield from articulated.open_region(ctx, t.args[0])
    elif t.kind == "clear":
        yield from articulated.clear_drawer_way(ctx, t.args[1], t.args[0])
    elif t.kind == "clear_pull":
        yield from articulated.clear_pull(ctx, t.args[1], t.args[0])
    elif t.kind == "clear_region":
        yield from clear_region(ctx, *t.args)
    elif t.kind in ("open", "close"):
        yield from articulated.drawer_or_door(ctx, t.kind, t.args[0])
    elif t.kind in ("turnon", "turnoff"):
        yield from articulated.knob(ctx, t.kind, t.args[0])
    elif t.kind == "lifted":
        yield from pick_up(ctx, t.args[0], first=first)
    else:
        raise PlanError(f"no planner for {t.kind}")
