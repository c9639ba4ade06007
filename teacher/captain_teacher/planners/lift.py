"""Pick an object up and keep holding it (the tabletop's ``Lifted`` goal): ground it by
clicking a pixel, measure it, grasp from the measured geometry, lift it well clear of the
table and stay there. Verification (a fresh look and the gripper's ``held`` flag while
holding) is written by the task planner.

Requests (typical): ground and measure; grasp and lift. A measurement that is off is
repeated from the wrist camera above the object; an empty grasp is retried with a
changed grasp after opening and backing off.
"""

from __future__ import annotations

import captain_teacher.cells as cells
from captain_teacher.context import HEAD, WRIST, Step, TeacherContext
from captain_teacher.objects import grasp_for, label_of
from captain_teacher.planners.common import Plan, PlanError, look_and_click, short_name, target
from captain_teacher.planners.grasping import back_off_step, choose_grasp, grasp_step
from captain_teacher.planners.measuring import measurement_problem, move_to_view, print_geometry, remeasure_from_above


def ground_and_measure_alone(ctx: TeacherContext, obj: str, ov: str, reasoning: str) -> Plan:
    """Observe, click the object, measure it and print the numbers; moves to a viewpoint
    first when the head camera cannot see it, and measures again from above when the
    measurement looks wrong."""
    targets = [target(ov, obj)]
    found = look_and_click(ctx, targets, prefer=HEAD)
    if found is None:
        yield from move_to_view(ctx, obj)
        found = look_and_click(ctx, targets, prefer=WRIST) or look_and_click(ctx, targets, prefer=HEAD)
        if found is None:
            raise PlanError(f"no camera sees the {label_of(obj)}")
    camera, lines = found
    lines.append(cells.measure("g", ov))
    lines.append('o = g["object"]')
    lines.append(print_geometry(ov, "o", with_yaw=True))
    cam_words = "head" if camera == HEAD else "wrist"
    fb = yield Step(reasoning + f" I'll click it in the {cam_words} image and measure it.", ["\n".join(lines)])
    problem = measurement_problem(ctx, obj, fb.values.get(ov))
    if problem is not None:
        fb = yield from remeasure_from_above(ctx, obj, ov, "o", problem)
    return fb


def pick_up(ctx: TeacherContext, obj: str, *, first: bool, retries: int = 2) -> Plan:
    """Grasp ``obj`` and lift it; it stays in the hand (see the module docstring)."""
    spec = grasp_for(obj)
    ov = short_name(obj)
    olab = label_of(obj)
    reason = (f"{'First' if first else 'Next'} I need to find the {olab}: I'll ground it and measure where it is "
              "and how tall it is.")
    yield from ground_and_measure_alone(ctx, obj, ov, reason)
    attempt = 0
    while True:
        if ctx.actions_left() < 6 or ctx.requests_left() < 3:
            return
        grasp = choose_grasp(ctx, obj, spec, attempt)
        fb = yield grasp_step(ctx, obj, None, spec, grasp, ov, attempt)
        if (fb.values.get("held") is True and ctx.held(obj)) or ctx.failure_done:
            return  # held and lifted (after an injected failure the teacher carries on as if it were)
        attempt += 1
        if attempt > retries:
            return
        why = (f"The jaws report something held, but the {olab} is not lifting with them."
               if fb.values.get("held") is True else f"The jaws closed on nothing: the {olab} is not held.")
        yield back_off_step(ctx, why)
        yield from ground_and_measure_alone(
            ctx, obj, ov, f"Grasp attempt {attempt + 1}: re-grounding the {olab} in a fresh image.")
