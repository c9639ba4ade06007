"""Grounding and measuring: click an object and its destination, measure them together and
print the numbers; check a printed measurement against the snapshot (host check) and
measure again from the wrist camera above an object when it looks wrong, or while the
object is held.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

import captain_teacher.cells as cells
from captain_teacher.boxes import rot_z
from captain_teacher.cells import num, vec
from captain_teacher.context import HEAD, WRIST, Step, TeacherContext, quat_matrix
from captain_teacher.objects import EXPECTED_RADIUS_M, kind_of, label_of
from captain_teacher.planners.common import (
    TOP_DOWN,
    Plan,
    PlanError,
    Target,
    look_and_click,
    spot_target,
    target,
    view_pose_above,
    wrist_camera,
    wrist_camera_at,
)
from captain_teacher.planners.destinations import Destination


def measurement_problem(ctx: TeacherContext, name: str, printed: Any) -> str | None:
    """Why a printed measurement of an object looks wrong (host check), or None."""
    if not isinstance(printed, dict) or "center" not in printed:
        return "the measurement did not come back"
    box = ctx.scene.box(name)
    c = np.asarray(printed["center"], dtype=float)
    kind = kind_of(name)
    expected = EXPECTED_RADIUS_M.get(kind)
    radius = float(printed.get("radius") or 0.0)
    if expected is not None and radius > 1.35 * expected + 0.01:
        return (f"the measured footprint radius ({num(radius * 100, 1)} cm) is too large for a {label_of(name)}; "
                "the region took in something next to or under it")
    if float(np.linalg.norm(c[:2] - box.center_m[:2])) > 0.02:
        return "the measured centre does not match where the object is in the image"
    if abs(float(printed.get("top", box.top_z_m)) - box.top_z_m) > 0.02:
        return "the measured top height looks wrong"
    return None


#: The session variable of the table point clicked for a table region whose fixture no
#: camera sees.
TABLE_SPOT_VAR = "table_spot"


def ground_and_measure(ctx: TeacherContext, obj: str, dest: Destination, ov: str, dv: str,
                       reasoning: str) -> Plan:
    """Observe, click the object and the destination, measure them together and print
    the numbers; moves to a viewpoint first when the head camera cannot see both, and
    measures again from above when a measurement looks wrong."""
    held = tuple(n for n, h in ctx.scene.snapshot.held.items() if h)
    if dest.spot_m is not None:
        dest_t = spot_target(dv, np.asarray(dest.spot_m))
    else:
        dest_t = target(dv, dest.click, ignore=(obj,) if obj in held else ())
    targets = [target(ov, obj, ignore=held), dest_t]
    found = look_and_click(ctx, targets, prefer=HEAD)
    if found is None:
        # a set-down spot: say why the object goes there before the looks that find them
        why = (f"{reasoning} The head camera does not give a clean view of the {label_of(obj)} from here."
               if dest.spot_m is not None else "")
        yield from move_to_view(ctx, obj, why=why)
        found = look_and_click(ctx, targets, prefer=WRIST) or look_and_click(ctx, targets, prefer=HEAD)
    apart, table_point, spot_view = "", False, False
    if found is None:  # one hides the other from every view: click each from its own view
        first = look_and_click(ctx, targets[:1], prefer=WRIST) or look_and_click(ctx, targets[:1], prefer=HEAD)
        if first is None:
            raise PlanError(f"no camera sees both the {label_of(obj)} and the {dest.label}")
        behind = None if dest.region or dest.spot_m is not None else behind_views(ctx, obj, dest.click)
        yield Step(f"From here I see the {label_of(obj)} but not the {dest.label} around it; I'll click the "
                   f"{label_of(obj)} now and the {dest.label} from another view.", ["\n".join(first[1])])
        rest = targets[1:]
        if behind is not None:
            yield from move_to_view(ctx, dest.click, views=behind, how=behind_words(obj, dest.click),
                                    turned=beyond_views(ctx, dest.click))
            rest = [rim_target(ctx, dest_t)]
        elif dest.spot_m is not None:
            spot = np.asarray(dest.spot_m, dtype=float)
            yield from move_to_view(ctx, obj, why="The head camera does not see that spot of the table.",
                                    views=[spot + np.array([-back, 0.0, h]) for h, back in ABOVE_VIEWS_M],
                                    how="above the spot and look down on it with the wrist camera")
            spot_view = True
        else:
            yield from move_to_view(ctx, dest.click)
        found = look_and_click(ctx, rest, prefer=WRIST) or look_and_click(ctx, targets[1:], prefer=HEAD)
        apart = f"The {label_of(obj)} is clicked already; now the {dest.label}."
        table = ctx.table_regions.get(dest.goal_arg) if dest.region else None
        if found is None and table is not None:
            # a region of the table (TASK.md gives its rectangle): the table in its middle will do
            # for the height to set the object down at (a mug on the plate hid the plate the
            # region is named after from every view)
            spot = np.array([*table.center_xy_m, ctx.scene.box(obj).bottom_z_m])
            on_table = [spot_target(TABLE_SPOT_VAR, spot)]
            found = look_and_click(ctx, on_table, prefer=WRIST) or look_and_click(ctx, on_table, prefer=HEAD)
            apart = (f"The {label_of(obj)} is clicked already. No camera sees the {dest.label} from here; "
                     f"{dest.goal_arg} is a rectangle of the table (TASK.md), so I click the table in its middle "
                     "instead.")
            table_point = found is not None
        if found is None:
            raise PlanError(f"no camera sees the {dest.label}")
    camera, lines = found
    if dest.spot_m is not None or table_point:
        lines[-1] = lines[-1].replace('["detection_id"]', "")
        lines.append(cells.measure("g", ov))
        lines.append(f'o = g["object"]\np_spot = np.array({TABLE_SPOT_VAR if table_point else dv}["position_m"])\n'
                     'd = {"center_m": p_spot, "center_xy_m": p_spot[:2], "top_z_m": p_spot[2], '
                     '"bottom_z_m": p_spot[2]}')
        lines.append(print_geometry(ov, "o", with_yaw=True))
        lines.append('print("spot:", [round(x, 4) for x in p_spot])')
        if spot_view:  # the straight way from that view to the object may pass over something tall
            lines.append(f"r = go(home, downq(0.0), speed={num(ctx.style.approach_speed_m_s)})  # back to the start "
                         "pose before going for the " + label_of(obj))
    else:
        lines.append(cells.measure("g", ov, dv))
        lines.append('o, d = g["object"], g["destination"]')
        lines.append(print_geometry(ov, "o", with_yaw=True))
        lines.append(print_geometry(dv, "d"))
        lines.append('print("offset:", [round(x, 4) for x in g["object_to_destination_xy_offset_m"]])')
    cam_words = "head" if camera == HEAD else "wrist"
    words = apart or reasoning + f" I'll click both in the {cam_words} image and measure them together."
    fb = yield Step(words, ["\n".join(lines)])
    printed = dict(fb.values)
    for name, var, key in ((obj, ov, "o"), (dest.click, dv, "d")):
        if name == dest.click and (dest.region or dest.spot_m is not None):
            continue
        problem = measurement_problem(ctx, name, printed.get(var))
        if problem is None:
            continue
        fb = yield from remeasure_from_above(ctx, name, var, key, problem)
    return fb


def print_geometry(var: str, key: str, with_yaw: bool = False) -> str:
    """Source that prints a measured object's centre, top, bottom, radius (and yaw) under ``var``."""
    yaw = f', "yaw": {key}["yaw_rad"]' if with_yaw else ""
    return (f'print("{var}:", {{"center": {key}["center_m"], "top": {key}["top_z_m"], "bottom": {key}["bottom_z_m"], '
            f'"radius": {key}["footprint"]["radius_m"]{yaw}}})')


#: The usual wrist views of an object: (height above its top, back toward the robot), m.
ABOVE_VIEWS_M = ((0.22, 0.06), (0.18, 0.12), (0.26, 0.16))


def above_views(ctx: TeacherContext, name: str) -> list[np.ndarray]:
    """Tool positions (base frame, m) from which the wrist camera looks down on ``name``
    (``ABOVE_VIEWS_M``), in the order to try them."""
    return [view_pose_above(ctx, name, h, back) for h, back in ABOVE_VIEWS_M]


#: Wrist views of a tall object standing on or beside another object (a mug on a plate):
#: (how far back toward the robot's base from the other object's centre, height above its
#: top), m. From straight above, the camera 22 cm over the plate, a 10 cm mug hides all of
#: the plate but a sliver; from 19-25 cm back the camera sees the plate's near rim beside
#: the mug (the plate's centre measured within 1 mm in the simulator, the mug's within 1.6
#: cm: its handle).
BEHIND_VIEWS_M = ((0.19, 0.28), (0.22, 0.32), (0.25, 0.36))
#: Turns (deg) of the direction toward the robot's base tried at each of those: a view
#: straight toward the base can lie past a joint limit from where the hand is.
BEHIND_TURNS_DEG = (0.0, 30.0, -30.0)
#: The same with the jaws turned 180 deg (the tool's start pose may be turned, and the way
#: to a straight view then passes joint 7's limit): the turned wrist camera's image has the
#: robot's side at its top and the fingers fill its bottom, so these tool positions lie
#: beyond the other object, away from the base: (how far beyond its centre, height above
#: its top), m (the plate's centre measured within 1 mm in the simulator from each).
BEYOND_VIEWS_M = ((0.15, 0.28), (0.12, 0.32), (0.10, 0.36))
#: An object at least this tall (m) hides what it stands on or touches from straight above.
TALL_OBJECT_M = 0.08
#: Fractions of a plate's radius its rim click candidates lie at, seen past a tall object.
RIM_RING_FRACTIONS = (0.92, 0.85)


def behind_views(ctx: TeacherContext, obj: str, other: str, above: bool = True) -> list[np.ndarray] | None:
    """Tool positions (base frame, m) from which the wrist camera sees the tall ``obj`` on
    or against the object ``other`` from behind, toward the robot's base
    (``BEHIND_VIEWS_M``), then the usual ones above ``other``; None when ``obj`` is not
    tall or its footprint does not reach over ``other``'s (the view from above does)."""
    box, dbox = ctx.scene.box(obj), ctx.scene.box(other)
    if 2.0 * float(box.half_m[2]) < TALL_OBJECT_M:
        return None
    reach = float(max(box.half_m[:2])) + float(max(dbox.half_m[:2]))
    if float(np.linalg.norm(box.center_m[:2] - dbox.center_m[:2])) > reach:
        return None
    return _around(ctx, other, BEHIND_VIEWS_M, toward_base=True) + (above_views(ctx, other) if above else [])


def beyond_views(ctx: TeacherContext, other: str) -> list[np.ndarray]:
    """Tool positions (base frame, m) for ``behind_views`` with the jaws turned 180 deg
    (``BEYOND_VIEWS_M``): beyond ``other``, away from the robot's base."""
    return _around(ctx, other, BEYOND_VIEWS_M, toward_base=False)


def _around(ctx: TeacherContext, other: str, spots: Sequence[tuple[float, float]], toward_base: bool
            ) -> list[np.ndarray]:
    """Tool positions at (distance, height above its top) from ``other``'s centre, toward
    the robot's base or away from it, each straight and turned by ``BEHIND_TURNS_DEG``."""
    dbox = ctx.scene.box(other)
    c = np.asarray(dbox.center_m, dtype=float)
    way0 = c[:2] / max(float(np.linalg.norm(c[:2])), 1e-6) * (-1.0 if toward_base else 1.0)
    views = []
    for dist, h in spots:
        for turn in np.radians(BEHIND_TURNS_DEG):
            way = rot_z(float(turn))[:2, :2] @ way0
            views.append(np.array([c[0] + dist * way[0], c[1] + dist * way[1], dbox.top_z_m + h]))
    return views


def behind_words(obj: str, other: str) -> str:
    """The reasoning's words for ``behind_views`` (``move_to_view``'s ``how``)."""
    return (f"back toward the robot (with the jaws turned, beyond the {label_of(other)}), where the wrist camera "
            f"sees the {label_of(other)}'s rim beside the {label_of(obj)} (from straight above it hides the "
            f"{label_of(other)})")


def rim_target(ctx: TeacherContext, t: Target) -> Target:
    """``t`` (a plate) clicked on its rim where a tall object on or beside it does not hide
    it: rings at ``RIM_RING_FRACTIONS`` of its radius, every other object an occluder (its
    middle may lie under the object)."""
    box = ctx.scene.box(t.name)
    radius = float(min(box.half_m[0], box.half_m[1]))
    angles = np.radians(np.arange(0.0, 360.0, 15.0))
    ring = np.array([[box.center_m[0] + f * radius * math.cos(a), box.center_m[1] + f * radius * math.sin(a),
                      box.top_z_m - 0.004] for f in RIM_RING_FRACTIONS for a in angles])
    return replace(t, points=ring, ignore=())


#: How far inside the image's edges (share of its size) an object seen whole lies.
WHOLE_IN_VIEW_MARGIN = 0.02


def sighted(ctx: TeacherContext, views: Sequence[np.ndarray], jaw_rad: float, dest_t: Target,
            obj_t: Target) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``views`` (tool positions, base frame, m; top-down, the jaws turned ``jaw_rad``) split
    into those from which the wrist camera would see both clicks of ``behind_group`` and
    both objects whole (inside the image), and the others, each in their order: the first
    reachable view is the one used; seen past a tall object's box from some of them the
    plate's rim is all hidden, and from others the object is cut by the image's edge (its
    measured centre then lies toward the image)."""
    half = 0.5 * (math.pi / 2 + jaw_rad)
    q = np.array([0.0, math.cos(half), math.sin(half), 0.0])
    rim = rim_target(ctx, dest_t)
    seen, unseen = [], []
    for view in views:
        camera = wrist_camera_at(ctx, view, q)
        ok = camera is not None and all(
            camera.in_view(u, v, WHOLE_IN_VIEW_MARGIN)
            for name in (dest_t.name, obj_t.name) for u, v in camera.project(ctx.scene.box(name).corners())[0])
        ok = ok and ctx.scene.click(rim.name, camera, rim.points, ignore=rim.ignore) is not None \
            and ctx.scene.click(obj_t.name, camera, ctx.scene.click_candidates(obj_t.name, camera)) is not None
        (seen if ok else unseen).append(view)
    return seen, unseen


def behind_group(ctx: TeacherContext, dest_t: Target, obj_t: Target) -> list[Target]:
    """A relation's clicks from a view of ``behind_views``, with the hand already there: the
    destination on its rim (``rim_target``), the object on its wall facing the wrist camera
    (candidates chosen for the head camera's side can lie past its outline from here)."""
    camera = wrist_camera(ctx)
    points = ctx.scene.click_candidates(obj_t.name, camera) if camera is not None else None
    return [rim_target(ctx, dest_t), replace(obj_t, points=points)]


def twin_view_shift(ctx: TeacherContext) -> np.ndarray | None:
    """How far (base frame, m) a top-down view's tool moves when its jaws are turned 180 deg,
    so the wrist camera, which sits off the tool's axis, stays above the same spot (None:
    the camera's mount is not known yet). Turned without it, the camera lands twice its
    offset away and the object it was to look down on sits at the image's edge."""
    if ctx.T_tcp_wrist is None:
        return None
    offset = np.asarray(ctx.T_tcp_wrist[:3, 3], dtype=float)
    shift = quat_matrix(TOP_DOWN) @ np.array([2.0 * offset[0], 2.0 * offset[1], 0.0])
    return shift if float(np.linalg.norm(shift)) > 0.005 else None


def move_to_view(ctx: TeacherContext, name: str, why: str = "", views: Sequence[np.ndarray] | None = None,
                 how: str = "", turned: Sequence[np.ndarray] | None = None, turned_first: bool = False) -> Plan:
    """Move the hand above an object so the wrist camera looks down on it (a few
    viewpoints, the first reachable one). ``why``: the reasoning's first sentence (default:
    the head camera does not see it cleanly); ``views``: the tool positions to try, base
    frame, m (default: above the object's box); ``how``: what the views are, in the
    reasoning (default: above it, looking down); ``turned``: tool positions to try with the
    jaws turned 180 deg instead of the views' turned twins (``beyond_views``), after the
    views, or before them with ``turned_first`` (only from those does the wrist camera see
    what it is to measure: ``sighted``).

    Only where every view is refused are they tried with the jaws turned 180 deg, the tool
    moved by ``twin_view_shift`` (``go``'s turned twin is the same grasp, not the same
    view), and last turned in place (the camera farther off, but somewhere above). When no
    view is reachable from where the hand is (a long sideways move past a joint limit), they
    are tried again from the start pose (``home``). The cell prints the tool's orientation,
    so the clicks that follow use the wrist camera where it is."""
    if views is None:
        views = above_views(ctx, name)
    ctx.tcp_quaternion = TOP_DOWN.copy()
    speed = num(ctx.style.approach_speed_m_s)
    why = why or f"The head camera does not give a clean view of the {label_of(name)} from here."
    tries = [f"({vec(p)}, 0.0)" for p in views]
    note = ""
    if turned is not None:
        twins = [f"({vec(p)}, math.pi)" for p in turned]
        tries = twins + tries if turned_first else tries + twins
        note = (f"# the {'first' if turned_first else 'last'} ones: with the jaws turned 180 deg, the wrist camera "
                f"looks back toward the robot from beyond the {label_of(name)}\n")
    else:
        shift = twin_view_shift(ctx)
        if shift is not None:
            tries += [f"({vec(np.asarray(p) + shift)}, math.pi)" for p in views]
            note = (f"# turned 180 deg, the tool moves {num(float(np.linalg.norm(shift)) * 100, 1)} cm so the wrist "
                    "camera, off the tool's axis, stays above the same spot; the last ones: turned in place, the\n"
                    "# camera farther off but somewhere above it\n")
        tries += [f"({vec(p)}, math.pi)" for p in views]
    fb = yield Step(
        f"{why} I'll move the hand {how or 'above it and look down with the wrist camera'}, trying a few viewpoints "
        "until one is reachable (from the start pose if none is from here).",
        [f"{note}def to_view():\n"
         f"    for view, jaw in ({', '.join(tries)}):\n"
         f"        args = dict(position=view, quaternion=downq(jaw), speed={speed})\n"
         '        if robot.preview_motion("move_to", args)["success"] and robot.move_to(**args)["success"]:\n'
         "            return True\n"
         "    return False\n\n\n"
         f'moved = to_view() or (go(home, downq(0.0), speed={speed})["success"] and to_view())\n'
         'print("moved:", moved)\n'
         'print("tcp_q:", [round(x, 4) for x in val(robot.get_robot_state(), "end_effector_quaternion_wxyz")])'])
    return fb


def remeasure_from_above(ctx: TeacherContext, name: str, var: str, key: str, problem: str) -> Plan:
    """Measure one object again from the wrist camera above it; the result replaces the
    session's ``o`` (object) or ``d`` (destination)."""
    yield from move_to_view(ctx, name)
    found = look_and_click(ctx, [target(var + "_w", name)], prefer=WRIST)
    if found is None:
        return
    camera, lines = found
    lines.append(cells.measure("gw", var + "_w"))
    lines.append(f'{key} = gw["object"]')
    lines.append(print_geometry(var, key, with_yaw=key == "o"))
    if camera == WRIST:
        seen = f"From above, the wrist camera sees the {label_of(name)} on its own; I'll measure it again there"
    else:  # the wrist camera does not see it from here: the head camera, with the hand moved
        seen = (f"From above, the wrist camera does not see the {label_of(name)}; I'll measure it again on its own "
                "in a fresh head image, the hand out of the way,")
    fb = yield Step(f"That measurement looks off: {problem}. {seen} and use that.", ["\n".join(lines)])
    return fb


#: A held object's measured bottom more than this below where it really hangs is not
#: adopted for the carry, m.
HELD_BOTTOM_TOLERANCE_M = 0.03


def measure_held(ctx: TeacherContext, obj: str, dest: Destination, ov: str, dv: str, shifted: bool) -> Plan:
    """Measure the held object and the destination again before carrying."""
    if not dest.click:
        return
    held_t = target(ov + "_h", obj, ignore=(obj,))
    dest_t = target(dv + "_h", dest.click, ignore=(obj,))
    found = look_and_click(ctx, [held_t, dest_t], prefer=WRIST if ctx.rng.random() < 0.5 else HEAD)
    if found is None:
        return
    camera, lines = found
    lines = ['lift_h = np.array(val(robot.get_robot_state(), "end_effector_position_m"))', *lines]
    lines.append(cells.measure("g_h", ov + "_h", dv + "_h"))
    lines.append(print_geometry(ov + "_held", 'g_h["object"]', with_yaw=True))
    lines.append(print_geometry(dv + "_now", 'g_h["destination"]'))
    why = ("The object may have shifted in the grasp" if shifted else "Before carrying")
    cam = "wrist" if camera == WRIST else "head"
    fb = yield Step(f"{why}: I'll measure the held {label_of(obj)} and the {dest.label} again from the {cam} camera, "
                    "so the carry uses where it really is between the fingers.", ["\n".join(lines)])
    held_m = fb.values.get(ov + "_held")
    box = ctx.scene.box(obj)
    good = isinstance(held_m, dict) and "center" in held_m and float(np.linalg.norm(
        np.asarray(held_m["center"][:2], float) - box.center_m[:2])) < 0.015 and abs(
        float(held_m.get("radius", 0.0)) - EXPECTED_RADIUS_M.get(kind_of(obj), float(held_m.get("radius", 0.0)))) < 0.02
    # the carry lowers the object by its measured bottom: one that stayed on the table (a plate
    # hanging from its rim, its underside unseen) would have it let go far above its support
    low = isinstance(held_m, dict) and "bottom" in held_m and \
        float(held_m["bottom"]) < box.bottom_z_m - HELD_BOTTOM_TOLERANCE_M
    ctx.adopt_held = bool(good) and not low
    radius_cm = float(held_m.get("radius", 0.0)) * 100 if isinstance(held_m, dict) else 0.0
    if low:
        ctx.held_note = (f"the held measurement's bottom ({num(float(held_m['bottom']), 3)} m) is where the "
                         f"{label_of(obj)} stood, not where it hangs now, so I keep the one from before the grasp")
    else:
        ctx.held_note = ("" if good else f"the held measurement took in the fingers (radius {num(radius_cm, 1)} cm), "
                         "so I keep the one from before the grasp")
