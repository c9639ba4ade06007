"""Pick an object and put it on or in a destination: ground both by clicking pixels,
measure them, grasp from the measured geometry, lift, carry by the measured offset,
lower, release, and step out of the camera's view. Verification is written by the task
planner once every goal is done.

Requests (typical): ground and measure; grasp and lift; carry and release. The teacher
compares what the session measured and did with the snapshot: a measurement that is
off (an object merged with what it stands on) is repeated from the wrist camera above
the object; an empty grasp is retried with a changed grasp; an object that shifted in
the grasp is measured again while held; a release off target is picked up again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from captain_teacher.boxes import Box
from captain_teacher.cells import num
from captain_teacher.clearance import free_spot, movable
from captain_teacher.context import HEAD, Step, TeacherContext
from captain_teacher.objects import GraspSpec, grasp_for, label_of
from captain_teacher.planners.common import (
    TOP_DOWN,
    Plan,
    direction_words,
    names_for,
    printed_measurement,
    short_name,
)
from captain_teacher.planners.destinations import Destination, spot_destination
from captain_teacher.planners.front_load import front_loads, handle_grasp, set_down_first
from captain_teacher.planners.grasping import (
    FOLDED_REACH_M,
    back_off_step,
    choose_grasp,
    grasp_step,
    tipped_grasp_fits,
)
from captain_teacher.planners.lay import groove_for, lay_step
from captain_teacher.planners.measuring import ground_and_measure, measure_held
from captain_teacher.planners.placing import nudge_spot, place_step


def pick_and_place(ctx: TeacherContext, obj: str, dest: Destination, *, first: bool) -> Plan:
    """The whole pick-and-place of one object (see the module docstring)."""
    spec = grasp_for(obj)
    groove = groove_for(dest)
    if groove is not None:  # held lower, so the hand can reach out to lay it down
        spec = replace(spec, depth_below_top_m=groove.grasp_depth_m)
    ov, dv = names_for(obj, dest)
    olab, dlab = label_of(obj), dest.label
    reason = (f"{'First' if first else 'Next'} I need the {olab} and the {dlab}: I'll ground both and measure where "
              f"the {olab} is relative to the {dlab}.")
    yield from ground_and_measure(ctx, obj, dest, ov, dv, reason)
    if front_loads(ctx, obj, dest):  # closed on top: in through the front, held by the handle
        first = set_down_first(ctx, obj, dest)
        if first is not None:  # an opening past reach, the microwave in the way: in front of it first
            yield from move_aside(ctx, obj, [], obj, spot=first[0], reason=first[1])
        yield from handle_grasp(ctx, obj, dest)
        return
    blockers = [b for b in choose_grasp(ctx, obj, spec, 0).blockers if movable(b) and b != dest.click]
    if blockers and dest.spot_m is None:
        for b in blockers[:2]:
            yield from move_aside(ctx, b, [ctx.scene.position(obj), dest.aim_m(ctx.scene)], obj)
        yield from ground_and_measure(ctx, obj, dest, ov, dv,
                                      f"With the way clear, I measure the {olab} and the {dlab} again.")
    yield from grasp_carry_release(ctx, obj, dest, spec, ov, dv, retries=2)


def move_aside(ctx: TeacherContext, name: str, avoid: list[np.ndarray], for_obj: str,
               reason: str | None = None, avoid_boxes: Sequence[Box] = (), spot: np.ndarray | None = None) -> Plan:
    """Pick an object that is in the way and set it down on a free spot of the table
    (away from the ``avoid`` points and ``avoid_boxes``, see ``free_spot``), or at ``spot``
    (base frame, m) when given."""
    head = ctx.cameras.get(HEAD)
    if spot is None:
        spot = free_spot(ctx.scene, name, avoid, ctx.rng, avoid_boxes=avoid_boxes,
                         seen=None if head is None else lambda p: ctx.scene.click_point(p, head) is not None)
    if spot is None:
        return
    dest = spot_destination(spot)
    spec = grasp_for(name)
    ov, dv = short_name(name), "spot"
    reason = reason or (
        f"The {label_of(name)} stands so close to the {label_of(for_obj)} that the hand would hit it when closing on "
        f"the {label_of(for_obj)}. I'll first set the {label_of(name)} aside on a free spot of the table.")
    yield from ground_and_measure(ctx, name, dest, ov, dv, reason)
    yield from grasp_carry_release(ctx, name, dest, spec, ov, dv, retries=1)


def clear_region(ctx: TeacherContext, blocker: str, region: str, obj: str) -> Plan:
    """Move ``blocker`` out of the way when it leaves no spot of the table region ``region``
    clear for ``obj`` (``placing.spot_blockers``): to the nearest place that clears one
    (``placing.nudge_spot``); nothing when there is none."""
    table = ctx.table_regions.get(region)
    spot = None if table is None else nudge_spot(ctx, blocker, obj, table)
    if spot is None:
        return
    cm = num(float(np.linalg.norm(spot[:2] - ctx.scene.box(blocker).center_m[:2])) * 100, 0)
    reason = (f"The {label_of(blocker)} stands where the {label_of(obj)} has to go: no spot of {region} (TASK.md) "
              f"keeps the {label_of(obj)} clear of it, and set down on it the {label_of(obj)} would tip and slide "
              f"off. I'll first move the {label_of(blocker)} {cm} cm out of the way (the table is too crowded to set "
              "it farther aside).")
    yield from move_aside(ctx, blocker, [], obj, reason=reason, spot=spot)


#: A grasp cell's printed descent when the arm could not make it or the approach above it
#: (the preview refused the motion).
UNREACHABLE_DESCENT = re.compile(r"^descent: (ik_failed|joint_limit)\s*$", re.MULTILINE)


def grasp_carry_release(ctx: TeacherContext, obj: str, dest: Destination, spec: GraspSpec, ov: str, dv: str,
                        retries: int) -> Plan:
    """Grasp (with retries), measure again while holding when needed, carry, release,
    and pick the object up again once when it ends off target."""
    attempt = 0
    while True:
        if ctx.actions_left() < 10 or ctx.requests_left() < 4:
            return
        grasp = choose_grasp(ctx, obj, spec, attempt, dest)
        fb = yield grasp_step(ctx, obj, dest, spec, grasp, ov, attempt)
        if UNREACHABLE_DESCENT.search(fb.text):
            if grasp.side is not None and grasp.jaw_yaw is not None:
                ctx.unreachable_jaws.setdefault(obj, []).append(float(grasp.jaw_yaw))
            elif not grasp.tilt_rad and tipped_grasp_fits(ctx, obj):
                ctx.out_of_reach.add(obj)
            elif grasp.side is None and float(np.hypot(*ctx.scene.box(obj).center_m[:2])) < FOLDED_REACH_M:
                ctx.folded_reach.add(obj)
        if fb.values.get("held") is True and ctx.held(obj):
            break
        if ctx.failure_done:  # an injected failure: carry on as if the grasp held
            yield place_step(ctx, obj, dest, spec)
            return
        if fb.values.get("held") is True:
            fb = yield _open_and_back_off(ctx, f"The jaws report something held, but the {label_of(obj)} is not "
                                               "lifting with them.")
        attempt += 1
        if attempt > retries:
            return
        fb = yield from _regrasp(ctx, obj, dest, ov, dv, attempt)
    # measured again while holding when the object moved in the grasp (or by habit)
    printed = printed_measurement(ctx, ov)
    shifted = printed is not None and float(np.linalg.norm(
        np.asarray(printed["center"][:2]) - ctx.scene.box(obj).center_m[:2]
        - (ctx.scene.ee_m[:2] - _grasp_tcp_xy(ctx)))) > 0.012
    groove = groove_for(dest)
    if groove is not None:  # laid down along a groove: the carry is measured from before the grasp
        fb = yield lay_step(ctx, obj, dest, groove, printed_measurement(ctx, dv), TOP_DOWN)
    else:
        if shifted or ctx.style.wrist_remeasure:
            yield from measure_held(ctx, obj, dest, ov, dv, shifted)
        fb = yield place_step(ctx, obj, dest, spec)
    if ctx.failure_done:  # an injected failure goes unnoticed
        return
    aim = dest.aim_m(ctx.scene)
    off = ctx.scene.position(obj)[:2] - aim[:2]
    half = dest.half_xy_m()
    if dest.spot_m is None and dest.goal_arg and not ctx.held(obj):
        if ctx.goal_satisfied(dest.relation, (obj, dest.goal_arg)):
            return
    elif not ctx.held(obj) and abs(off[0]) <= half[0] * 0.85 and abs(off[1]) <= half[1] * 0.85:
        return
    if retries <= 0 or ctx.actions_left() < 12 or ctx.requests_left() < 8:
        return
    if ctx.held(obj):
        yield _open_and_back_off(ctx, f"The {label_of(obj)} is still between the jaws.")
    reason = (f"The {label_of(obj)} did not end where it should ({num(float(np.linalg.norm(off)) * 100, 1)} cm off; "
              f"it has to go {direction_words(-off)}). I'll measure again and move it.")
    yield from ground_and_measure(ctx, obj, dest, ov, dv, reason)
    yield from grasp_carry_release(ctx, obj, dest, spec, ov, dv, retries=0)


def _grasp_tcp_xy(ctx: TeacherContext) -> np.ndarray:
    """Where the tool was when it closed (the teacher's record of its last grasp)."""
    return ctx.last_grasp_xy if ctx.last_grasp_xy is not None else ctx.scene.ee_m[:2]


def _open_and_back_off(ctx: TeacherContext, why: str) -> Step:
    ctx.tcp_quaternion = TOP_DOWN.copy()
    lines = ['robot.move_to(gripper="open")',
             'r = robot.recover(max_distance_m=0.08, max_duration_s=6.0)',
             f"r = go(home, downq(0.0), speed={num(ctx.style.approach_speed_m_s)})"]
    return Step(why + " I'll open, back off along the path and look again.", ["\n".join(lines)],
                meta={"recovery": "reopen"})


def _regrasp(ctx: TeacherContext, obj: str, dest: Destination, ov: str, dv: str, attempt: int) -> Plan:
    """After an empty grasp (or a guarded stop): open, back off, look and measure again."""
    stopped = ctx.fb is not None and ctx.fb.receipt_failed("move_to")
    why = ("The descent stopped early on contact and the jaws did not get the "
           f"{label_of(obj)}." if stopped else f"The jaws closed on nothing: the {label_of(obj)} is not held.")
    yield back_off_step(ctx, why)
    reason = f"Grasp attempt {attempt + 1}: re-grounding the {label_of(obj)} and the {dest.label} in a fresh image."
    fb = yield from ground_and_measure(ctx, obj, dest, ov, dv, reason)
    return fb
