"""Choosing a top-down grasp from the measured geometry (rim side, centred, square to a
cube's sides, across a body), writing the request that grasps and lifts, and the request
that backs off after a grasp that failed.

Frames: the robot base frame (x forward, y left, z up), metres, radians. A jaw yaw is the
direction of the jaw axis about z; ``downq(jaw)`` in the session turns it into the
quaternion ``quat_for_jaw`` gives here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from captain_teacher.boxes import Box, rot_z
from captain_teacher.cells import num, vec
from captain_teacher.clearance import FINGER_BELOW_TCP_M, hand_blockers
from captain_teacher.context import Step, TeacherContext
from captain_teacher.fixtures import drawer_for_region, open_drawer_walls
from captain_teacher.objects import EXPECTED_RADIUS_M, GraspSpec, label_of
from captain_teacher.planners.common import (
    TOP_DOWN,
    direction_words,
    printed_measurement,
    short_name,
    xy_distance_to_box,
)
from captain_teacher.planners.destinations import Destination

#: On a retry after a grasp the arm could not reach, the jaws turn at least this far from
#: the failed ones, rad.
UNREACHABLE_JAW_TURN_RAD = math.radians(45.0)


#: How far the hand tips outward from top-down for an object a top-down grasp cannot reach,
#: rad: the wrist then stays nearer the robot.
REACH_TILT_RAD = math.radians(35.0)


#: A centred grasp the arm could not reach is retried tipped only for an object this far
#: from the base or farther (horizontally, m): nearer, the failure is a wrist turn, not reach.
REACH_TILT_FROM_M = 0.75

#: A centred grasp the arm could not make is retried from a hover this far farther out
#: (horizontally, m) for an object nearer the base than ``FOLDED_REACH_M``.
FOLDED_HOVER_OUT_M = 0.08
FOLDED_REACH_M = 0.42
#: ... and from there in to this far above the grasp before the last of it straight down, m.
FOLDED_LAST_DOWN_M = 0.03

#: The widest span the tipped jaws take, m (they open to 7.7 cm; 7 mm to spare).
TIPPED_SPAN_MAX_M = 0.07


def elongated(box: Box) -> bool:
    """Whether a footprint is elongated: its long side more than a quarter longer than its
    short one (else round or square)."""
    hx, hy = float(box.half_m[0]), float(box.half_m[1])
    return max(hx, hy) > 1.25 * min(hx, hy)


def reach_heading(box: Box) -> float:
    """The reach direction to a box's centre: its angle about base z from the base x axis, rad."""
    return math.atan2(float(box.center_m[1]), float(box.center_m[0]))


def span_across_reach(ctx: TeacherContext, obj: str) -> float:
    """The width of ``obj``'s footprint across the reach direction (horizontal, at right
    angles to the line from the base to its centre), m: what the tipped jaws close over. A
    round or square footprint (sides within a quarter of each other) counts its width: the
    closing jaws square it up, and a round one has no corners."""
    box = ctx.scene.box(obj)
    hx, hy = float(box.half_m[0]), float(box.half_m[1])
    if not elongated(box):
        return 2.0 * max(hx, hy)
    turn = reach_heading(box) - float(box.yaw_rad)  # the reach direction in the box's own frame
    return 2.0 * (hx * abs(math.sin(turn)) + hy * abs(math.cos(turn)))


def tipped_grasp_fits(ctx: TeacherContext, obj: str) -> bool:
    """Whether a tipped grasp suits ``obj``: at least ``REACH_TILT_FROM_M`` from the base,
    and its footprint across the reach direction fits the jaws (``TIPPED_SPAN_MAX_M``; the
    tipped jaws close across the reach direction whatever the object's turn, so a box lying
    across it does not fit)."""
    box = ctx.scene.box(obj)
    far = float(np.hypot(*box.center_m[:2])) >= REACH_TILT_FROM_M
    return far and span_across_reach(ctx, obj) <= TIPPED_SPAN_MAX_M


def quat_for_jaw(jaw_yaw: float) -> np.ndarray:
    """The quaternion ``downq(jaw_yaw)`` evaluates to."""
    a = math.pi / 4 + jaw_yaw / 2
    return np.array([0.0, math.cos(a), math.sin(a), 0.0])


def tipped_quat(heading: float, tilt: float) -> np.ndarray:
    """A grasp quaternion (w, x, y, z) with the jaws closing across the direction
    ``heading`` (rad about base z, from the robot toward the object) and the hand tipped
    ``tilt`` rad from top-down about that closing axis, fingertips outward: the fingers
    stay level with each other and the wrist stays nearer the robot."""
    q0 = quat_for_jaw(heading)
    half = -0.5 * tilt
    k = np.array([-math.sin(heading), math.cos(heading), 0.0]) * math.sin(half)
    w1, x1, y1, z1 = math.cos(half), *k
    w2, x2, y2, z2 = q0
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


@dataclass
class Grasp:
    """A grasp decision: rim side (unit xy vector, None for a centred grasp), the jaw yaw
    (as code and as a number, None when the code reads it from the measurement), depth
    below the top and the rim inset."""

    side: np.ndarray | None
    jaw_code: str
    jaw_yaw: float | None
    depth_m: float
    inset_m: float
    blockers: tuple[str, ...] = ()
    note: str = ""
    #: the code defines ``square`` (the measured yaw folded into a quarter turn) first
    square_from_measurement: bool = False
    #: tipped this far outward from top-down (``tipped_quat``), rad; 0: top-down
    tilt_rad: float = 0.0


def _center_grasp(ctx: TeacherContext, obj: str, spec: GraspSpec, attempt: int) -> Grasp:
    """A centred grasp: jaws across the narrow side (or any way round for round objects),
    turned a little when the hand would otherwise touch a neighbour."""
    scene = ctx.scene
    box = scene.box(obj)
    depth = max(0.006, spec.depth_below_top_m - 0.008 * attempt)
    tcp = np.array([box.center_m[0], box.center_m[1], max(box.top_z_m - depth, box.bottom_z_m + 0.016)])
    hx, hy = float(box.half_m[0]), float(box.half_m[1])
    if spec.jaw_square_to_sides:
        return _square_grasp(ctx, obj, tcp, depth)
    if spec.jaw_across_short_side and elongated(box):
        long_dir = box.yaw_rad + (0.0 if hx >= hy else math.pi / 2)
        deltas = [0.0, 0.2, -0.2, 0.35, -0.35]
        base_code = 'o["yaw_rad"]'
        base = long_dir
    else:
        deltas = [0.0, math.pi / 4, -math.pi / 4, math.pi / 2, math.pi / 8, -math.pi / 8, 3 * math.pi / 8,
                  -3 * math.pi / 8]
        base_code = ""
        base = 0.0
    first_blockers: tuple[str, ...] = ()
    for delta in deltas:
        jaw = wrap_jaw(base + delta)
        blocked = hand_blockers(scene, tcp, jaw, [obj])
        if not blocked:
            if base_code:
                code = base_code if delta == 0.0 else f"{base_code} + {num(delta, 2)}"
            else:
                code = "0.0" if delta == 0.0 else ("math.pi / 2" if abs(abs(jaw) - math.pi / 2) < 1e-6 else num(jaw, 3))
            note = "" if delta == 0.0 else " turned a little so the hand stays clear of its neighbours"
            return Grasp(None, code, jaw, depth, 0.0, note=note)
        if not first_blockers:
            first_blockers = tuple(blocked)
    return Grasp(None, base_code or "0.0", wrap_jaw(base), depth, 0.0, blockers=first_blockers)


def _square_grasp(ctx: TeacherContext, obj: str, tcp: np.ndarray, depth: float) -> Grasp:
    """A centred grasp on a square footprint (a cube): the jaws square to its sides, the
    turn nearest the base y axis, read from the measured yaw when that agrees with the
    object (else written as a number); a quarter turn or a small tilt when the hand would
    touch a neighbour."""
    scene = ctx.scene
    square = _wrap_quarter(scene.box(obj).yaw_rad)
    printed = printed_measurement(ctx, short_name(obj))
    measured = None
    if printed is not None and isinstance(printed.get("yaw"), (int, float)):
        measured = _wrap_quarter(float(printed["yaw"]))
    from_measurement = measured is not None and abs(_wrap_quarter(measured - square)) < math.radians(8.0)
    first_blockers: tuple[str, ...] = ()
    for delta in (0.0, math.pi / 2, 0.25, -0.25, math.pi / 2 + 0.25, math.pi / 2 - 0.25):
        jaw = wrap_jaw(square + delta)
        blocked = hand_blockers(scene, tcp, jaw, [obj])
        if blocked:
            first_blockers = first_blockers or tuple(blocked)
            continue
        if from_measurement:
            code = "square" if delta == 0.0 else f"square + {num(delta, 3)}"
        else:
            code = num(jaw, 3)
        note = ", the jaws square to its sides" + ("" if delta in (0.0, math.pi / 2) else
                                                    ", turned a little so the hand stays clear of its neighbours")
        return Grasp(None, code, jaw, depth, 0.0, note=note, square_from_measurement=from_measurement)
    return Grasp(None, num(square, 3), square, depth, 0.0, blockers=first_blockers)


def _wrap_quarter(angle: float) -> float:
    """An angle folded into [-pi/4, pi/4) (a square looks the same every quarter turn)."""
    return (angle + math.pi / 4) % (math.pi / 2) - math.pi / 4


def wrap_jaw(angle: float) -> float:
    """A jaw yaw in (-pi/2, pi/2] (the jaws are symmetric)."""
    while angle > math.pi / 2:
        angle -= math.pi
    while angle <= -math.pi / 2:
        angle += math.pi
    return angle


def choose_grasp(ctx: TeacherContext, obj: str, spec: GraspSpec, attempt: int,
                 dest: Destination | None = None) -> Grasp:
    """The grasp: for rim grasps the side with the most room for the outer finger (other
    objects, the walls of an open drawer) within comfortable reach, random among the
    good ones (another on a retry); for centred grasps the jaws across the narrow side
    of the measured footprint."""
    scene = ctx.scene
    if attempt and obj in ctx.out_of_reach and spec.style != "rim":
        # a top-down grasp was out of reach: the jaws close across the reach direction and
        # the hand tips outward about them
        heading = reach_heading(scene.box(obj))
        depth = max(0.006, spec.depth_below_top_m - 0.008 * attempt)
        return Grasp(None, num(heading, 3), heading, depth, 0.0, tilt_rad=REACH_TILT_RAD,
                     note=f", the hand tipped {round(math.degrees(REACH_TILT_RAD))}° outward (top-down it is out of "
                          "the arm's reach)")
    if spec.style == "body":
        jaw = wrap_jaw(scene.yaw(obj) - math.pi / 2)
        return Grasp(None, num(jaw), jaw, spec.depth_below_top_m, 0.0,
                     note=", across its body (handle and spout stay outside the jaws)")
    if spec.style != "rim":
        return _center_grasp(ctx, obj, spec, attempt)
    box = scene.box(obj)
    radius = EXPECTED_RADIUS_M.get(spec.kind, float(max(box.half_m[0], box.half_m[1])))
    grasp_z = box.top_z_m - spec.depth_below_top_m
    obstacles = [scene.box(n) for n in scene.names() if n != obj and scene.box(n).top_z_m > grasp_z - 0.01
                 and scene.box(n).bottom_z_m < box.top_z_m]
    obstacles += [w for w in open_drawer_walls(scene) if w.top_z_m > grasp_z - 0.01]
    allowed = None
    if dest is not None and dest.is_drawer(scene):
        drawer = drawer_for_region(scene, dest.goal_arg)
        across = rot_z(scene.yaw(drawer.cabinet))[:2, 0]  # along the drawer's front
        allowed = across
    scored, others = [], []
    for deg in range(0, 360, 30):
        a = math.radians(deg)
        # keep the hand along the drawer's front so it stays off the cabinet
        along = allowed is None or abs(math.cos(a) * allowed[0] + math.sin(a) * allowed[1]) >= 0.95
        d = np.array([math.cos(a), math.sin(a)])
        finger = box.center_m[:2] + d * (radius + 0.015)
        room = min((xy_distance_to_box(finger, b) for b in obstacles), default=0.1)
        tcp = box.center_m[:2] + d * (radius - spec.rim_inset_m)
        reach = float(np.hypot(*tcp))
        blocked = hand_blockers(scene, np.array([tcp[0], tcp[1], grasp_z]), wrap_jaw(a - math.pi / 2), [obj])
        score = min(room, 0.05) - 0.3 * max(0.0, reach - 0.66) - (0.004 if deg % 90 else 0.0) - 0.05 * len(blocked)
        (scored if along else others).append((score, deg, d))
    scored.sort(key=lambda t: -t[0])
    others.sort(key=lambda t: -t[0])
    good = [t for t in scored if t[0] >= scored[0][0] - 0.006]
    pick = good[int(ctx.rng.integers(len(good)))] if attempt == 0 else scored[min(attempt, len(scored) - 1)]
    failed = ctx.unreachable_jaws.get(obj, []) if attempt else []  # (only a retry has failed turns)
    note = ""
    if failed:
        # the arm could not reach the last grasp (a joint limit or no inverse kinematics):
        # the wrist turn is what it could not make, so the jaws turn well away from every
        # such one (the opposite side of the rim has the same jaws); along a drawer's
        # front only when that leaves a choice
        def turned(t: tuple) -> bool:
            jaw_t = math.radians(t[1]) - math.pi / 2
            return all(abs(wrap_jaw(jaw_t - f)) >= UNREACHABLE_JAW_TURN_RAD for f in failed)

        away = [t for t in scored if turned(t)] or [t for t in others if turned(t)]
        if away:
            pick = away[0]
            note = ", the jaws turned away from those the arm could not reach"
    _score, deg, d = pick
    jaw = wrap_jaw(math.radians(deg) - math.pi / 2)
    if deg % 90 == 0:
        jaw_code = {0: "math.pi / 2", 90: "0.0", 180: "math.pi / 2", 270: "0.0"}[deg]
        jaw = {0: math.pi / 2, 90: 0.0, 180: math.pi / 2, 270: 0.0}[deg]
        side = np.round(d)
    else:
        jaw_code = num(jaw)
        side = np.round(d, 3)
    depth = spec.depth_below_top_m + 0.005 * attempt
    return Grasp(side, jaw_code, jaw, depth, spec.rim_inset_m, note=note)


def _folded_hover_offset(ctx: TeacherContext, obj: str, grasp: Grasp, xy: np.ndarray) -> np.ndarray:
    """Where the hover of a retried grasp near the base goes (xy offset from the grasp, m):
    ``FOLDED_HOVER_OUT_M`` out along the reach direction, or turned up to 90 deg off it
    where the hand there would sweep through another object (``hand_blockers``)."""
    heading = math.atan2(float(xy[1]), float(xy[0]))
    box = ctx.scene.box(obj)
    jaw = grasp.jaw_yaw if grasp.jaw_yaw is not None else 0.0
    for turn in (0.0, math.pi / 4, -math.pi / 4, math.pi / 2, -math.pi / 2):
        off = FOLDED_HOVER_OUT_M * np.array([math.cos(heading + turn), math.sin(heading + turn)])
        tcp = np.array([*(box.center_m[:2] + off), box.top_z_m + FOLDED_LAST_DOWN_M])
        if not hand_blockers(ctx.scene, tcp, jaw, [obj]):
            return off
    return FOLDED_HOVER_OUT_M * np.array([math.cos(heading), math.sin(heading)])


def grasp_step(ctx: TeacherContext, obj: str, dest: Destination | None, spec: GraspSpec, grasp: Grasp,
               ov: str, attempt: int) -> Step:
    """The request that grasps ``obj`` from its measurement ``o`` and lifts it: clear of
    the destination ``d`` on the way there, or (``dest`` None: the task only asks for the
    object to be picked up) well above where it stood."""
    st = ctx.style
    descend = num(spec.descend_speed_m_s * st.descend_speed_scale)
    olab = label_of(obj)
    q_line = f"q = downq({grasp.jaw_code})"
    if grasp.tilt_rad:
        q_line = (f"q = {vec(tipped_quat(float(grasp.jaw_yaw or 0.0), grasp.tilt_rad), 4)}  # tipped "
                  f"{round(math.degrees(grasp.tilt_rad))}° outward, the jaws across the reach direction")
    lines = [q_line, 'grasp = np.array(o["center_m"], dtype=float)']
    if grasp.square_from_measurement:
        lines.insert(0, 'square = (o["yaw_rad"] + math.pi / 4) % (math.pi / 2) - math.pi / 4  # jaws square to '
                        "its sides")
    if grasp.side is not None:
        lines.append(f'grasp[:2] += np.array({vec(grasp.side)}) * (o["footprint"]["radius_m"] - '
                     f'{num(grasp.inset_m)})  # on the rim')
        what = f"the {olab}'s rim, on the side {direction_words(grasp.side)}{grasp.note}"
    else:
        what = f"the middle of the {olab}{grasp.note}"
    if spec.style == "body":
        printed = printed_measurement(ctx, ov)
        if printed is not None:
            corr = ctx.scene.position(obj)[:2] - np.asarray(printed["center"][:2], dtype=float)
            if float(np.linalg.norm(corr)) > 0.004:
                lines.append(f"grasp[:2] += {vec(corr)}  # the body's middle: the handle and spout widen the outline")
    depth = grasp.depth_m
    meta: dict = {}
    mistake = st.mistake if not ctx.mistake_done else None
    if mistake == "grasp_too_high" and attempt == 0:
        depth = -0.025  # the fingertips stop above the object
        ctx.mistake_done = True
        meta = {"injected_mistake": mistake, "nosup_reason": "injected_mistake"}
    floor = f'o["bottom_z_m"] + {num(FINGER_BELOW_TCP_M + 0.0035, 4)}'
    measured = printed_measurement(ctx, ov)
    box = ctx.scene.box(obj)
    if measured is not None and "bottom" in measured and float(measured["bottom"]) > box.bottom_z_m + 0.012 \
            and abs(float(measured.get("top", box.top_z_m)) - box.top_z_m) < 0.012:
        # the measured bottom took in only the top face: keep the fingertips off the support by the
        # object's known height instead
        height = box.top_z_m - box.bottom_z_m
        floor = f'o["top_z_m"] - {num(height - FINGER_BELOW_TCP_M - 0.0035, 4)}'
        seen_cm = (float(measured["top"]) - float(measured["bottom"])) * 100
        lines.append(f"# the measured bottom is only {num(seen_cm, 1)} cm below the top; the {label_of(obj)} is "
                     f"about {num(height * 100, 1)} cm tall")
    lines.append(f'grasp[2] = max(o["top_z_m"] - {num(depth)}, {floor})  # fingertips off the support')
    lines.append('hang = grasp[2] - o["bottom_z_m"]  # how far the object reaches below the fingers')
    hover = spec.approach_above_m + st.hover_m - 0.06
    if attempt == 0 and (dest is None or dest.spot_m is None) and ctx.failure_due("perturbed_grasp"):
        ctx.failure_done = True
        meta = {"injected_failure": "perturbed_grasp", "nosup_reason": "injected_failure"}
        lines.append(f"grasp[:2] += {vec(_beside(ctx, obj, spec, grasp))}")
    near = ctx.scene.box(obj).center_m[:2]
    folded = bool(attempt and grasp.side is None and obj in getattr(ctx, "folded_reach", ()))
    if folded:
        out = _folded_hover_offset(ctx, obj, grasp, near)
        lines.append(f"above = grasp + [{num(float(out[0]), 3)}, {num(float(out[1]), 3)}, {num(hover)}]"
                     "  # from farther out: straight down, the arm folded near its base passes a wrist flip")
    else:
        lines.append(f"above = grasp + [0, 0, {num(hover)}]")
    if st.check_first:
        lines.append('chk = robot.check_motion(grasp.tolist(), q)\nprint("grasp reachable:", val(chk, "reachable"))')
    lines.append('if val(robot.gripper_state(), "gripper_open_fraction") < 0.9:\n    robot.move_to(gripper="open")')
    lines.append(f"r = go(above, q, speed={num(st.approach_speed_m_s)})")
    # the teacher's own record of where the tool will be (for later checks)
    box = ctx.scene.box(obj)
    side_xy = np.zeros(2) if grasp.side is None else np.asarray(grasp.side, float) * (
        EXPECTED_RADIUS_M.get(spec.kind, 0.05) - grasp.inset_m)
    ctx.last_grasp_xy = box.center_m[:2] + side_xy
    yaw = grasp.jaw_yaw if grasp.jaw_yaw is not None else 0.0
    ctx.tcp_quaternion = tipped_quat(yaw, grasp.tilt_rad) if grasp.tilt_rad else quat_for_jaw(yaw)
    if mistake == "fast_descent" and attempt == 0:
        ctx.mistake_done = True
        meta = {"injected_mistake": mistake, "nosup_reason": "injected_mistake"}
        lines.append('if r["success"]:\n    r = go(grasp - [0, 0, 0.03], q, speed=0.2)')
        lines.append('print("descent:", (r.get("value") or {}).get("stopped_reason"))')
        return Step(f"I'll go straight down onto {what} and close there.", ["\n".join(lines)], meta=meta)
    if folded:  # in to just above it, then the last few centimetres straight down
        lines.append(f'if r["success"]:\n    r = go(grasp + [0, 0, {num(FOLDED_LAST_DOWN_M)}], q, speed={descend})')
    lines.append(f'if r["success"]:\n    r = go(grasp, q, speed={descend})')
    lines.append('print("descent:", (r.get("value") or {}).get("stopped_reason"))')
    if st.inspect_contact:
        lines.append(f'ic = robot.inspect_contact_geometry({ov}, grasp.tolist(), q)\n'
                     'print("straddles:", val(ic, "straddles"))')
    lines.append('c = robot.move_to(gripper="close")\nprint("held:", val(c, "held"))')
    if dest is None:
        lift_z = f"grasp[2] + {num(0.08 + st.lift_extra_m)}  # well clear of the table"
    else:
        lift_z = _lift_expression(ctx, obj, dest, spec)
    lift = (f'lift = grasp.copy()\nlift[2] = {lift_z}\n'
            f'r = go(lift, q, speed={num(st.carry_speed_m_s * 0.8)}, mode="manipulation")\n'
            'print("lifted:", r["success"])')
    if meta.get("injected_failure"):
        lines.append(lift)
    else:
        lines.append('if val(c, "held"):\n' + "\n".join("    " + line for line in lift.splitlines()))
    again = " again, with a changed grasp" if attempt else ""
    where = f"{num(depth * 100, 1)} cm below the measured top" if depth > 0 else "at the height of its measured top"
    how = "" if grasp.tilt_rad else "top-down "  # a tipped grasp says so in its note
    reasoning = (f"Now the grasp{again}: {how}on {what}, {where}. "
                 "Hover first, descend slowly, close, and lift in manipulation mode if it holds.")
    return Step(reasoning, ["\n".join(lines)], meta=meta)


def _beside(ctx: TeacherContext, obj: str, spec: GraspSpec, grasp: Grasp) -> np.ndarray:
    """An injected failure: a horizontal shift (base frame, m) that puts the closing jaws a
    few centimetres beside the object. A rim grasp moves outward along the jaw axis until
    the inner finger is outside the wall; a centred grasp moves across the jaw axis, past
    the object's side, to the side nearer the robot's reach."""
    radius = EXPECTED_RADIUS_M.get(spec.kind, float(max(ctx.scene.box(obj).half_m[:2])))
    if grasp.side is not None:
        side = np.asarray(grasp.side, dtype=float)
        return side / float(np.linalg.norm(side)) * (spec.rim_inset_m + 0.055)
    jaw = grasp.jaw_yaw if grasp.jaw_yaw is not None else ctx.scene.yaw(obj)
    across = np.array([math.cos(jaw), math.sin(jaw)])  # perpendicular to the jaw axis
    center = ctx.scene.box(obj).center_m[:2]
    sign = 1.0 if float(np.hypot(*(center - across * 0.05))) > float(np.hypot(*(center + across * 0.05))) else -1.0
    if ctx.rng.random() < 0.3:
        sign = -sign
    return sign * across * (radius + 0.025)


def _lift_expression(ctx: TeacherContext, obj: str, dest: Destination, spec: GraspSpec) -> str:
    """Source of the lift height: clear of the destination's top (and of anything high on
    the way) with the object hanging below the fingers."""
    clear = num(0.03 + 0.5 * ctx.style.lift_extra_m)
    expr = f'max(grasp[2] + 0.1, d["top_z_m"] + hang + {clear})'
    scene = ctx.scene
    start, end = scene.position(obj), dest.aim_m(scene)
    # objects set beside this one in a shared region are passed beside, not over, at the end
    sharers = {g.args[0] for g in scene.snapshot.goals if len(g.args) > 1 and g.args[1] == dest.goal_arg}
    length = float(np.linalg.norm((end - start)[:2]))
    beside = 1.0 - min(1.0, 2.0 * dest.spread_m() / length) if dest.share[1] > 1 and length > 0 else 1.0
    top = -1.0
    for n in scene.names():
        if n in (obj, dest.click):
            continue
        b = scene.box(n)
        ts = np.linspace(0.0, 1.0, 12)
        if n in sharers:
            ts = ts[ts <= beside]
        if any(xy_distance_to_box(start + t * (end - start), b) < 0.07 for t in ts):
            top = max(top, b.top_z_m)
    box = scene.box(obj)
    hang = box.top_z_m - spec.depth_below_top_m - box.bottom_z_m
    needed = top + hang + 0.05 + box.top_z_m - spec.depth_below_top_m - box.bottom_z_m - hang
    dest_top = scene.box(dest.click).top_z_m if dest.click else float(dest.aim_m(scene)[2])
    if top > dest_top and needed > box.top_z_m + 0.1:
        expr = f"max({expr}, {num(top + 0.05)} + hang)  # pass over what stands on the way"
    return expr


def back_off_step(ctx: TeacherContext, why: str) -> Step:
    """The recovery request after a failed grasp: open, back off along the path with
    recover() (or straight up), and return home to look again; ``why`` opens its reasoning."""
    lines = ['robot.move_to(gripper="open")',
             'r = robot.recover(max_distance_m=0.08, max_duration_s=6.0)',
             'if not r["success"]:\n    r = go(np.array(val(robot.get_robot_state(), "end_effector_position_m")) '
             '+ [0, 0, 0.08], q, speed=0.05)',
             f"r = go(home, downq(0.0), speed={num(ctx.style.approach_speed_m_s)})"]
    ctx.tcp_quaternion = TOP_DOWN.copy()
    return Step(why + " I'll open, back off along the path with recover() and look again before another try.",
                ["\n".join(lines)], meta={"recovery": "empty_grasp"})
