"""Articulated parts: drawers (open by pulling the handle, close by pushing the handle bar
with a tipped hand), the
stove knob (turned by pinching its fin and twisting the hand) and the microwave door
(closed by pushing its outer face along its swing).

Drawer handles face the robot, so the hand cannot come from above (it would hit the
cabinet's face): the teacher turns the hand horizontal at a clear pose first, fingers
pointing into the cabinet, then reaches the handle. Joint thresholds are LIBERO's: a
drawer is open below -0.14 m and closed above 0 m; the knob is on above 0.5 rad; the
microwave is closed above -0.005 rad.
"""

from __future__ import annotations

import math

import numpy as np

from captain_harness.core.geometry import matrix_to_quat
from captain_teacher.boxes import Box
from captain_teacher.cells import num, vec
from captain_teacher.clearance import HAND_HALF_LENGTH_M, movable
from captain_teacher.context import HEAD, WRIST, Step, TeacherContext, quat_matrix
from captain_teacher.fixtures import Drawer, drawer_box, drawer_for_region, drawers
from captain_teacher.objects import kind_of, label_of
from captain_teacher.planners.common import (
    TOP_DOWN,
    Plan,
    PlanError,
    Target,
    direction_words,
    look_and_click,
    xy_distance_to_box,
)
from captain_teacher.planners.door import close_door
from captain_teacher.planners.grasping import quat_for_jaw, wrap_jaw
from captain_teacher.planners.measuring import move_to_view
from captain_teacher.planners.pick_place import move_aside
from captain_teacher.scene import SceneView

DRAWER_OPEN_BELOW_M = -0.14
DRAWER_TRAVEL_M = 0.155
DRAWER_CLOSED_ABOVE_M = 0.0
#: How far the pushing hand is tipped about the handle bar, rad.
PUSH_TILT_RAD = 0.7
KNOB_ON_RAD = 0.5
#: Source of a session function: the jaw direction (rad, from the base x axis) of the
#: top-down hand, from the measured tool quaternion (``downq``'s inverse).
HAND_JAW_SOURCE = (
    "def hand_jaw():\n"
    '    q = val(robot.get_robot_state(), "end_effector_quaternion_wxyz")\n'
    "    return 2 * math.atan2(q[2], q[1]) - math.pi / 2")


def side_quat(pointing_xy: np.ndarray, jaw_vertical: bool = True, reference: np.ndarray = TOP_DOWN) -> np.ndarray:
    """A horizontal hand: fingers pointing along ``pointing_xy``, jaws closing up-down
    (or sideways); of the two equivalent jaw directions, the one nearer ``reference``
    (the wrist turns least)."""
    z = np.array([pointing_xy[0], pointing_xy[1], 0.0])
    z /= float(np.linalg.norm(z))
    best = None
    for sign in (1.0, -1.0):
        x = sign * (np.array([0.0, 0.0, 1.0]) if jaw_vertical else np.array([-z[1], z[0], 0.0]))
        q = matrix_to_quat(np.column_stack([x, np.cross(z, x), z]))
        closeness = abs(float(np.dot(q, reference)))
        if best is None or closeness > best[0]:
            best = (closeness, q)
    return best[1]


#: Fingers tipped this far down while pulling a drawer whose path has something low
#: beside it (``_low_beside_pull``): a level hand with its jaws up-down reaches about
#: ``HAND_HALF_WIDTH_M`` below the handle, a tipped one rides higher behind it.
PULL_TILT_RAD = math.radians(15.0)
#: A tipped hand's pads slide about a centimetre along the bar's round front while
#: pulling, so its pull aims this much further (m; the drawer's end stop is 16 cm out).
TIPPED_EXTRA_TRAVEL_M = 0.008
#: Half the hand's width along its jaw axis, m.
HAND_HALF_WIDTH_M = 0.09


def _palm_axis(pull: np.ndarray, tilt_rad: float) -> np.ndarray:
    """Unit vector from the fingertips back to the palm of a hand pulling along ``pull``
    with its fingers tipped ``tilt_rad`` down into the cabinet."""
    p = np.array([pull[0], pull[1], 0.0]) / float(np.linalg.norm(pull[:2]))
    return math.cos(tilt_rad) * p + math.sin(tilt_rad) * np.array([0.0, 0.0, 1.0])


def tipped_side_quat(pull: np.ndarray, tilt_rad: float) -> np.ndarray:
    """``side_quat(-pull)`` turned about the bar (the horizontal across the pull) so the
    fingers point ``tilt_rad`` down into the cabinet; the jaws still close across the bar."""
    R = quat_matrix(side_quat(-pull))
    axis = np.cross(np.array([pull[0], pull[1], 0.0]), np.array([0.0, 0.0, 1.0]))
    axis /= float(np.linalg.norm(axis))
    best = None
    for sign in (1.0, -1.0):
        Rt = _axis_angle(axis, sign * tilt_rad) @ R
        if best is None or Rt[2, 2] < best[0]:  # the fingers (tool z) pointing further down
            best = (float(Rt[2, 2]), Rt)
    return matrix_to_quat(best[1])


def _low_beside_pull(ctx: TeacherContext, d: Drawer, pull: np.ndarray) -> str | None:
    """Something (another fixture or an object) whose footprint lies where a level hand
    pulling ``d`` open would be near the end of the pull (up to a hand's length behind the
    handle's final place, within ``HAND_HALF_WIDTH_M`` sideways) and whose top is above
    the hand's lower edge; None when the path is clear."""
    scene = ctx.scene
    handle = d.handle_m(scene)
    p = np.array([pull[0], pull[1]]) / float(np.linalg.norm(pull[:2]))
    side = np.array([-p[1], p[0]])
    lowest = float(handle[2]) - HAND_HALF_WIDTH_M
    samples = [handle[:2] + p * t + side * u for t in np.arange(0.06, DRAWER_TRAVEL_M + 0.14, 0.02)
               for u in (-0.05, 0.0, 0.05)]
    for name in scene.names():
        if name == d.cabinet or name in scene.held_names:
            continue
        b = scene.box(name)
        if b.top_z_m <= lowest + 0.01:
            continue
        if min(xy_distance_to_box(q, b) for q in samples) < 0.005:
            return name
    return None


def _qcode(q: np.ndarray) -> str:
    return vec(q, 4)


# ---------------------------------------------------------------------- queries
def needs_open(ctx: TeacherContext, region: str) -> bool:
    """Whether a destination region lies in a drawer that is closed now."""
    d = drawer_for_region(ctx.scene, region)
    return d is not None and d.position_m > DRAWER_OPEN_BELOW_M + 0.01


def is_open(ctx: TeacherContext, region: str) -> bool:
    """Whether the drawer of a region is open."""
    d = drawer_for_region(ctx.scene, region)
    return d is None or d.position_m <= DRAWER_OPEN_BELOW_M


def _open_box(scene: SceneView, d: Drawer) -> Box:
    """Where drawer ``d`` will be once pulled out its full ``DRAWER_TRAVEL_M``."""
    return drawer_box(scene, d.with_position(-DRAWER_TRAVEL_M))


def in_drawer_way(ctx: TeacherContext, region: str, obj: str) -> bool:
    """Whether an object stands where the drawer of ``region`` will be once open (or so
    close that a hand reaching for it would touch the open drawer)."""
    d = drawer_for_region(ctx.scene, region)
    if d is None:
        return False
    box = _open_box(ctx.scene, d)
    near = xy_distance_to_box(ctx.scene.box(obj).center_m, box)
    return near < HAND_HALF_LENGTH_M + 0.05


#: An object whose footprint comes this close (m) to where a drawer will be once open
#: stands in the way of opening it: the drawer, or the hand pulling it, would push it.
PULL_CLEARANCE_M = 0.02


def pull_obstacles(ctx: TeacherContext, region: str) -> list[str]:
    """Movable objects in the way of opening the (closed) drawer of ``region``: reaching
    into the height of the drawer's body, within ``PULL_CLEARANCE_M`` of the open drawer's
    footprint, not inside the drawer itself. Such an object is set aside first (a wine
    bottle in front of a LIBERO-PRO cabinet stopped the pull 0.4 cm short of open)."""
    scene = ctx.scene
    d = drawer_for_region(scene, region)
    if d is None or d.position_m <= DRAWER_OPEN_BELOW_M:
        return []
    open_box = _open_box(scene, d)
    closed_box = drawer_box(scene, d)
    out = []
    for name in scene.names():
        if not movable(name) or name in scene.held_names:
            continue
        b = scene.box(name)
        if closed_box.contains(b.center_m) or b.bottom_z_m > open_box.top_z_m or b.top_z_m <= open_box.bottom_z_m:
            continue  # inside the drawer, or above or below it (a low bowl under a raised drawer)
        if xy_distance_to_box(b.center_m, open_box) - float(np.max(b.half_m[:2])) < PULL_CLEARANCE_M:
            out.append(name)
    return out


def clear_pull(ctx: TeacherContext, region: str, obj: str) -> Plan:
    """Set an object aside that stands where the drawer of ``region`` will be once open."""
    d = drawer_for_region(ctx.scene, region)
    if d is None:
        return
    box = _open_box(ctx.scene, d)
    reason = (f"The {label_of(obj)} stands where the {d.level} drawer of the {label_of(d.cabinet)} will be once it is "
              f"open: pulling the drawer would push the {label_of(obj)} over or jam against it. I'll first set the "
              f"{label_of(obj)} aside on a free spot of the table.")
    yield from move_aside(ctx, obj, [], d.cabinet, reason=reason, avoid_boxes=[box])


def clear_drawer_way(ctx: TeacherContext, region: str, obj: str) -> Plan:
    """Set an object aside so the drawer can open and the object can still be reached."""
    d = drawer_for_region(ctx.scene, region)
    if d is None:
        return
    box = _open_box(ctx.scene, d)
    corners = list(box.corners()[:, :3])
    reason = (f"The {label_of(obj)} stands right in front of the {d.level} drawer: once the drawer is open it would "
              f"hang over the {label_of(obj)} and the hand could not reach it from above. I'll first set the "
              f"{label_of(obj)} aside on a free spot of the table.")
    yield from move_aside(ctx, obj, [box.center_m, *corners], obj, reason=reason)


def _drawer(ctx: TeacherContext, name: str) -> Drawer:
    d = drawer_for_region(ctx.scene, name)
    if d is None:
        raise PlanError(f"no drawer matches {name}")
    return d


# ---------------------------------------------------------------------- drawers
def open_region(ctx: TeacherContext, region: str) -> Plan:
    """Open the drawer holding a region."""
    yield from drawer(ctx, "open", _drawer(ctx, region))


def drawer_or_door(ctx: TeacherContext, op: str, name: str) -> Plan:
    """Open or close a drawer, or close the microwave door."""
    if kind_of(name) == "microwave":
        if op != "close":
            raise PlanError("the teacher only closes microwave doors")
        yield from close_door(ctx, name)
        return
    d = drawer_for_region(ctx.scene, name)
    if d is None:
        candidates = [x for x in drawers(ctx.scene) if name.startswith(x.cabinet)]
        if not candidates:
            raise PlanError(f"no drawer matches {name}")
        d = min(candidates, key=lambda x: x.position_m) if op == "close" else candidates[0]
    yield from drawer(ctx, op, d)


def _handle_click(ctx: TeacherContext, d: Drawer) -> tuple[str, list[str]] | None:
    scene = ctx.scene
    handle = d.handle_m(scene)
    pull = np.append(d.pull_direction(scene), 0.0)
    point = handle + 0.007 * pull  # the front of the bar
    t = Target("hdl", "", f"{d.level} drawer handle", "point", point[None], (d.cabinet,))
    return look_and_click(ctx, [t], prefer=HEAD)


def _turning_spot(ctx: TeacherContext, handle: np.ndarray, pull: np.ndarray) -> np.ndarray:
    """A spot to turn the hand horizontal: on the approach line behind the handle, where
    the wrist (about 0.2 m behind the fingertips) stays clear of tall things."""
    scene = ctx.scene
    tall = [scene.box(n) for n in scene.names() if scene.box(n).top_z_m > 0.12]
    best, best_room = None, -1.0
    side = np.array([-pull[1], pull[0]])
    for k in (0.1, 0.16, 0.22):
        for lateral in (0.0, 0.05, -0.05, 0.1, -0.1):
            p = handle[:2] + pull * (0.08 + k) + side * lateral
            if not 0.3 < float(np.hypot(*p)) < 0.6:
                continue
            samples = [p + pull * t for t in (0.0, 0.1, 0.2, 0.28)]
            room = min((xy_distance_to_box(np.append(q, 0.0), b) for q in samples for b in tall), default=1.0)
            if room > best_room + 0.01:
                best, best_room = p, room
    if best is None:
        best = np.array([0.42, 0.5 * float(handle[1])])
    return np.array([best[0], best[1], 0.25])


def drawer(ctx: TeacherContext, op: str, d: Drawer, attempt: int = 0) -> Plan:
    """Open (pull the handle with a horizontal hand) or close (push it from above) one drawer."""
    scene = ctx.scene
    st = ctx.style
    cab = label_of(d.cabinet)
    found = _handle_click(ctx, d)
    if found is None:
        yield from move_to_view(ctx, d.cabinet)
        found = _handle_click(ctx, d)
        if found is None:
            raise PlanError(f"no camera sees the {d.level} drawer's handle")
    _camera, lines = found
    lines[-1] = lines[-1].replace('["detection_id"]', "")
    lines.append('handle = np.array(hdl["position_m"])\nprint("handle:", [round(x, 4) for x in handle])')
    if d.joint not in ctx.handle_refs:  # the reference the final check measures the drawer's travel from
        out0 = max(0.0, -d.position_m)
        state = "closed" if out0 < 0.01 else f"about {num(out0 * 100, 0)} cm out"
        var = f"{d.level}_handle0"
        lines.append(f"{var} = handle.copy()  # the handle where I first see it, the drawer {state}")
        ctx.handle_refs[d.joint] = (var, out0)
    yield Step(f"To {op} the {d.level} drawer of the {cab} I need its handle: I'll click the handle bar and keep "
               "its 3-D position.", ["\n".join(lines)])
    pull = d.pull_direction(ctx.scene)
    if op != "open":
        yield from _push_closed(ctx, d, pull, attempt)
        return
    low = _low_beside_pull(ctx, d, pull)
    q_side = side_quat(-pull) if low is None else tipped_side_quat(pull, PULL_TILT_RAD)
    mid = _turning_spot(ctx, d.handle_m(scene), pull)
    speed = num(st.approach_speed_m_s)
    ctx.tcp_quaternion = q_side
    tip = math.degrees(PULL_TILT_RAD)
    travel = DRAWER_TRAVEL_M if low is None else DRAWER_TRAVEL_M + TIPPED_EXTRA_TRAVEL_M
    lines = [
        f"pull = np.array([{num(pull[0])}, {num(pull[1])}, 0.0])  # the drawer slides out {direction_words(pull)}",
        f"q_side = {_qcode(q_side)}  # hand horizontal, fingers into the {cab}, jaws closing up-down" if low is None
        else f"q_side = {_qcode(q_side)}  # fingers into the {cab} tipped {num(tip)} deg down, jaws across the bar",
        f"mid = np.array({vec(mid)})  # a clear spot to turn the hand",
        f"r = go(mid, downq(0.0), speed={speed})",
        'r = robot.move_to(mid.tolist(), q_side, angular=0.6)\nprint("turned:", r["success"])',
        "pre = handle + 0.08 * pull" if low is None else
        f"out = np.array({vec(_palm_axis(pull, PULL_TILT_RAD), 4)})  # from the fingertips back to the palm\n"
        "pre = handle + 0.08 * out",
        f"r = go([pre[0], pre[1], mid[2]], q_side, speed={speed})  # above the spot in front of the handle",
        f"r = go(pre, q_side, speed={speed})",
        'if r["success"]:\n    r = go(handle - 0.006 * pull, q_side, speed=0.03)',
        'c = robot.move_to(gripper="close")\nprint("gripping the handle:", val(c, "held"))',
        f'r = go(handle - 0.006 * pull + {num(travel)} * pull, q_side, speed=0.03, mode="manipulation")',
        'print("pulled:", r["success"], (r.get("value") or {}).get("stopped_reason"))',
        'robot.move_to(gripper="open")',
        "held_at = np.array(robot.get_robot_state()['value']['end_effector_position_m'])  # where the pull ended",
        'print("the hand pulled the handle about", round((float(np.dot(held_at - handle, pull)) + 0.006) * 100, 1), '
        '"cm")',
        "back = held_at + 0.06 * pull" if low is None else "back = held_at + 0.06 * out  # back along the fingers",
        f"r = go(back, q_side, speed={speed})",
        f"r = go([back[0], back[1], mid[2]], q_side, speed={speed})",
        f"r = go(mid, q_side, speed={speed})",
        "r = robot.move_to(mid.tolist(), downq(0.0), angular=0.6)",
        f"r = go(home, downq(0.0), speed={speed})",
    ]
    reasoning = (f"The handle faces the robot, so I'll turn the hand horizontal at a clear spot, reach the bar with "
                 f"the fingers pointing into the {cab}, close on it and pull the drawer out "
                 f"{num(travel * 100)} cm in manipulation mode.")
    if low is not None:
        reasoning += (f" The {label_of(low)} is low beside the drawer's path: a level hand reaches down to the table "
                      f"and would meet it near the end of the pull, so the fingers point {num(tip)} deg down into the "
                      "drawer and the palm rides higher; I reach the bar and back off along the fingers.")
    fb = yield Step(reasoning, ["\n".join(lines)])
    ctx.tcp_quaternion = TOP_DOWN.copy()
    now = next(x for x in drawers(ctx.scene) if x.joint == d.joint)
    if now.position_m > DRAWER_OPEN_BELOW_M and attempt == 0 and ctx.actions_left() > 12:
        yield from _drawer_again(ctx, op, now, fb)


def pushing_quat(pull: np.ndarray, tilt_rad: float = PUSH_TILT_RAD) -> np.ndarray:
    """A top-down hand with the jaws along a drawer's handle bar, tipped by ``tilt_rad``
    about the bar so the fingers point down and into the cabinet: the palm then leans
    back toward the robot instead of reaching over the handle of the drawer above."""
    jaw = math.atan2(pull[1], pull[0])  # jaws along the bar (the bar is across the pull direction)
    R = quat_matrix(quat_for_jaw(wrap_jaw(jaw)))
    axis = R[:, 0] / float(np.linalg.norm(R[:, 0]))  # the jaw axis (downq(0) closes along base y = tool x)
    best = None
    for sign in (1.0, -1.0):
        Rt = _axis_angle(axis, sign * tilt_rad) @ R
        into = -float(np.dot(Rt[:2, 2], pull))  # how far the fingers point into the cabinet
        if best is None or into > best[0]:
            best = (into, Rt)
    return matrix_to_quat(best[1])


def _axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    x, y, z = axis
    K = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * (K @ K)


#: Where the pushing tool centre sits behind the middle of the handle bar while the tipped
#: fingers press on the bar, along the pull direction, m.
PUSH_CONTACT_BEHIND_BAR_M = 0.015
#: The first (manipulation) push stops this far short of the closed position, m; the
#: guarded push that follows closes the rest and stops at the drawer's end stop.
PUSH_SHORT_M = 0.012
#: How far past the closed position the guarded push aims (the end stop, 1 cm past
#: closed, stops it first), m.
PUSH_PAST_M = 0.015


def _push_closed(ctx: TeacherContext, d: Drawer, pull: np.ndarray, attempt: int = 0) -> Plan:
    """Push a drawer shut: closed fingertips against the front of its handle bar, the hand
    tipped so the fingers point down into the cabinet (a straight top-down palm is as deep
    as its palm and meets the handle of the drawer above before the drawer is in). The
    push has two parts: in manipulation mode (which tolerates the drawer's load) to just
    short of the closed position, then slowly in guarded mode, aiming a little past closed,
    so the drawer's end stop ends it as a light contact instead of a hard press."""
    st = ctx.style
    out_m = max(0.0, -d.position_m)
    q_push = pushing_quat(pull)
    ctx.tcp_quaternion = q_push
    words = direction_words(pull)
    speed = num(st.approach_speed_m_s)
    # ``handle`` in the session is the clicked front of the bar (0.7 cm in front of its middle)
    to_closed = out_m + 0.007 - PUSH_CONTACT_BEHIND_BAR_M
    lines = [f"pull = np.array([{num(pull[0])}, {num(pull[1])}, 0.0])  # the drawer slides out {words}",
             f"q_push = {_qcode(q_push)}  # jaws along the bar, fingers tipped {num(math.degrees(PUSH_TILT_RAD))} deg "
             "into the cabinet",
             'robot.move_to(gripper="close")',
             "start = handle + 0.035 * pull + [0, 0, 0.008]  # fingertips just in front of the bar",
             f"r = go(start + [0, 0, 0.1], q_push, speed={speed})",
             'if r["success"]:\n    r = go(start, q_push, speed=0.03)',
             f"shut = handle - {num(to_closed, 3)} * pull + [0, 0, 0.008]  # the hand here once the drawer is in",
             f'if r["success"]:  # most of the way\n    r = go(shut + {num(PUSH_SHORT_M, 3)} * pull, q_push, '
             'speed=0.04, mode="manipulation")',
             'if r["success"]:  # the rest slowly and guarded: the end stop ends it with a light contact\n'
             f'    r = robot.move_to((shut - {num(PUSH_PAST_M, 3)} * pull).tolist(), q_push, speed=0.01)',
             'pv = r.get("value") or {}\n'
             'print("pushed:", pv.get("stopped_reason"), round(pv.get("max_observed_force_n") or 0.0, 1))',
             "up = np.array(val(robot.get_robot_state(), 'end_effector_position_m')) + 0.04 * pull + [0, 0, 0.1]",
             f"r = go(up, q_push, speed={speed})",
             f"r = go(home, downq(0.0), speed={speed})"]
    reasoning = (f"The drawer sticks out about {num(out_m * 100, 1)} cm. I'll push it shut at its handle bar with "
                 "closed fingertips, the hand tipped so the fingers point down into the cabinet: a straight "
                 "top-down palm would meet the handle of the drawer above before this one is in. Most of the way "
                 f"in manipulation mode, then the last {num(PUSH_SHORT_M * 100)} cm slowly in guarded mode, so the "
                 "drawer's end stop ends the push with a light contact.")
    if attempt:
        reasoning = (f"It is still about {num(out_m * 100, 1)} cm out. The same push again from where the bar is "
                     "now, ending guarded against the drawer's end stop.")
    yield Step(reasoning, ["\n".join(lines)])
    ctx.tcp_quaternion = TOP_DOWN.copy()
    now = next(x for x in drawers(ctx.scene) if x.joint == d.joint)
    if now.position_m <= DRAWER_CLOSED_ABOVE_M and attempt < 2 and ctx.actions_left() > 12:
        yield from _drawer_again(ctx, "close", now, None, attempt + 1)


def _drawer_again(ctx: TeacherContext, op: str, d: Drawer, fb: object, attempt: int = 1) -> Plan:
    """One more pull or push when the first did not get the drawer far enough."""
    verb = "opened" if op == "open" else "closed"
    left = (d.position_m - DRAWER_OPEN_BELOW_M) if op == "open" else -d.position_m
    ctx.flags.append({"request_index": ctx.request_index, "recovery": f"drawer_not_{verb}"})
    reason = (f"The drawer is not fully {verb} yet (about {num(max(left, 0.0) * 100, 1)} cm short). I'll take the "
              "handle again and finish the motion.")
    yield Step(reason, ['v = need(robot.observe(), "observe")\nimage(v["images"][0])'])
    yield from drawer(ctx, op, d, attempt=attempt)


# ---------------------------------------------------------------------- knob
def knob(ctx: TeacherContext, op: str, name: str) -> Plan:
    """Turn the stove knob on: pinch its fin from above and twist the hand, in rounds."""
    if op != "turnon":
        raise PlanError("the teacher only turns knobs on")
    scene = ctx.scene
    st = ctx.style
    joint = next((j for j in scene.snapshot.articulated_joints if j.startswith(name) and "button" in j), None)
    if joint is None:
        raise PlanError(f"{name} has no knob")
    hinge = scene.position(name)
    stove_yaw = scene.yaw(name)
    hub_point = hinge + np.array([0.0, 0.0, 0.048])
    t = Target("knob", "", "stove knob", "point", hub_point[None], (name,))
    found = look_and_click(ctx, [t], prefer=HEAD)
    if found is None:
        yield from move_to_view(ctx, name)
        found = look_and_click(ctx, [t], prefer=WRIST)
        if found is None:
            raise PlanError("no camera sees the stove knob")
    _camera, lines = found
    lines[-1] = lines[-1].replace('["detection_id"]', "")
    lines.append('hub = np.array(knob["position_m"])\nprint("knob:", [round(x, 4) for x in hub])')
    yield Step("To turn the stove on I need its knob: I'll click the middle of the knob (its fin runs across it) "
               "and keep the 3-D position.", ["\n".join(lines)])
    angle0 = float(ctx.scene.snapshot.articulated_joints[joint])
    for round_index in range(3):
        angle = float(ctx.scene.snapshot.articulated_joints[joint])
        if angle >= KNOB_ON_RAD + 0.05:
            break
        fin = wrap_jaw(stove_yaw + angle)
        ctx.tcp_quaternion = TOP_DOWN.copy()
        lines = [] if round_index else [HAND_JAW_SOURCE,
                                        "knob_turned = 0.0  # how far the pinching hand has turned the knob, rad"]
        ctx.part_measurements[name] = ("knob_turned", max(KNOB_ON_RAD - angle0, 0.1))
        lines += [f"fin = {num(fin)}  # direction the knob's fin points now (rad, from the base x axis)",
                 "def on_fin(a):\n    return hub + [0.03 * math.cos(a), 0.03 * math.sin(a), -0.002]",
                 "p = on_fin(fin)  # pinch the fin 3 cm out from the knob's axis",
                 "for start in (p + [0, 0, 0.06], p + [-0.06, 0, 0.05], p + [0, 0, 0.04]):",
                 f"    r = go(start, downq(fin), speed={num(st.approach_speed_m_s)})",
                 '    if r["success"]:\n        r = go(p, downq(fin), speed=0.03)',
                 '    if r["success"]:\n        break',
                 'c = robot.move_to(gripper="close")\nprint("pinched:", val(c, "held"))',
                 "jaw0 = hand_jaw()",
                 "for k in (1, 2, 3):  # turn counter-clockwise along the knob's circle, 0.3 rad at a time",
                 "    a = fin + 0.3 * k",
                 '    t = robot.move_to(on_fin(a).tolist(), downq(a), speed=0.02, angular=0.3, mode="manipulation")',
                 '    if not t["success"]:\n        break',
                 'print("turned to:", round(a, 2), t["success"])',
                 "knob_turned += (hand_jaw() - jaw0 + math.pi) % (2 * math.pi) - math.pi  # measured, while pinching",
                 'print("knob_turned:", round(knob_turned, 3))',
                 'robot.move_to(gripper="open")',
                 f"r = go(home, downq(0.0), speed={num(st.approach_speed_m_s)})"]
        if round_index == 0:
            reasoning = ("The knob switches on turning counter-clockwise (seen from above). I'll pinch its fin 3 cm "
                         "out from the axis and carry that point around the knob's circle in three 0.3 rad steps, in "
                         "manipulation mode, so the hand turns with the knob.")
        else:
            reasoning = ("The knob is not far enough yet. I'll pinch the fin where it points now and turn it "
                         "further along the circle.")
        yield Step(reasoning, ["\n".join(lines)])
