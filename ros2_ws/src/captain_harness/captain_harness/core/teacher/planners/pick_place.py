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

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

import captain_harness.core.teacher.cells as cells
from captain_harness.core.teacher.cells import num, vec
from captain_harness.core.teacher.clearance import FINGER_BELOW_TCP_M, free_spot, hand_blockers, movable
from captain_harness.core.teacher.context import HEAD, WRIST, Step, TeacherContext
from captain_harness.core.teacher.fixtures import open_drawer_walls
from captain_harness.core.teacher.objects import GraspSpec, grasp_for, kind_of, label_of
from captain_harness.core.teacher.planners.common import Plan, look_and_click, spot_target, target, view_pose_above
from captain_harness.core.teacher.planners.destinations import Destination, spot_destination
from captain_harness.core.teacher.planners.lay import groove_for, lay_step
from captain_harness.core.teacher.scene import Box, rot_z

#: Short session variable names per kind of object.
_SHORT = {"bowl": "bowl", "plate": "plate", "ramekin": "ramekin", "mug": "mug", "can": "can",
          "flat_box": "box", "bottle": "bottle", "carton": "carton", "wine_bottle": "bottle",
          "moka_pot": "pot", "book": "book", "basket": "basket", "stove": "stove",
          "drawer_cabinet": "cabinet", "microwave": "microwave", "wine_rack": "rack", "caddy": "caddy",
          "cube": "cube"}
_WORDS_BY_PREFIX = {"alphabet_soup": "soup", "tomato_sauce": "sauce", "cream_cheese": "cheese",
                    "butter": "butter", "chocolate_pudding": "pudding", "bbq_sauce": "bbq", "ketchup": "ketchup",
                    "salad_dressing": "dressing", "milk": "milk", "orange_juice": "juice",
                    "white_yellow_mug": "ymug", "porcelain_mug": "mug", "red_coffee_mug": "rmug"}
#: Expected footprint radius per kind (m), to notice a measurement that took in too much.
EXPECTED_RADIUS_M = {"bowl": 0.054, "ramekin": 0.045, "plate": 0.069, "can": 0.032, "flat_box": 0.047,
                     "bottle": 0.032, "carton": 0.038, "wine_bottle": 0.022, "mug": 0.06, "moka_pot": 0.08,
                     "book": 0.07, "cube": 0.028}
TOP_DOWN = np.array([0.0, 2**-0.5, 2**-0.5, 0.0])
#: Into a narrow compartment the held object's bottom is released this far below the
#: destination's measured top (inside its walls, so it cannot topple over them), m.
SLOT_RELEASE_BELOW_TOP_M = 0.05
#: Kinds whose measured outline is widened by a handle or spout, so that its centre is off
#: the body's (corrected for when carrying them to a target).
WIDENED_OUTLINE_KINDS = frozenset({"mug", "moka_pot"})


class PlanError(RuntimeError):
    """The teacher cannot continue this plan (nothing it could click, no reachable pose)."""


def short_name(name: str) -> str:
    """A session variable name for an object (``"akita_black_bowl_1"`` -> ``"bowl"``)."""
    for prefix, word in _WORDS_BY_PREFIX.items():
        if name.startswith(prefix):
            return word
    return _SHORT.get(kind_of(name), "thing")


def names_for(obj: str, dest: Destination) -> tuple[str, str]:
    """Session variables of the object's and the destination's detections."""
    ov, dv = short_name(obj), short_name(dest.click)
    return ov, (dv + "2" if dv == ov else dv)


def quat_for_jaw(jaw_yaw: float) -> np.ndarray:
    """The quaternion ``downq(jaw_yaw)`` evaluates to."""
    a = math.pi / 4 + jaw_yaw / 2
    return np.array([0.0, math.cos(a), math.sin(a), 0.0])


def direction_words(v: np.ndarray) -> str:
    """Words for a horizontal direction in the base frame, from the robot's view."""
    x, y = float(v[0]), float(v[1])
    parts = []
    if abs(x) > 0.3 * max(abs(x), abs(y)):
        parts.append("farther from the robot" if x > 0 else "nearer the robot")
    if abs(y) > 0.3 * max(abs(x), abs(y)):
        parts.append("to the left" if y > 0 else "to the right")
    return " and ".join(parts) or "here"


def xy_distance_to_box(p: np.ndarray, box: Box) -> float:
    """Horizontal distance from a point to a box's footprint, m (0 inside)."""
    local = rot_z(box.yaw_rad)[:2, :2].T @ (np.asarray(p[:2], float) - box.center_m[:2])
    d = np.maximum(np.abs(local) - box.half_m[:2], 0.0)
    return float(np.hypot(*d))


# ---------------------------------------------------------------------- grasp choice
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


def _center_grasp(ctx: TeacherContext, obj: str, spec: GraspSpec, attempt: int) -> Grasp:
    """A centred grasp: jaws across the narrow side (or any way round for round objects),
    turned a little when the hand would otherwise touch a neighbour."""
    scene = ctx.scene
    box = scene.box(obj)
    depth = max(0.006, spec.depth_below_top_m - 0.008 * attempt)
    tcp = np.array([box.center_m[0], box.center_m[1], max(box.top_z_m - depth, box.bottom_z_m + 0.016)])
    hx, hy = float(box.half_m[0]), float(box.half_m[1])
    elongated = max(hx, hy) > 1.25 * min(hx, hy)
    if spec.jaw_square_to_sides:
        return _square_grasp(ctx, obj, tcp, depth)
    if spec.jaw_across_short_side and elongated:
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
        jaw = _wrap_jaw(base + delta)
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
    return Grasp(None, base_code or "0.0", _wrap_jaw(base), depth, 0.0, blockers=first_blockers)


def _square_grasp(ctx: TeacherContext, obj: str, tcp: np.ndarray, depth: float) -> Grasp:
    """A centred grasp on a square footprint (a cube): the jaws square to its sides, the
    turn nearest the base y axis, read from the measured yaw when that agrees with the
    object (else written as a number); a quarter turn or a small tilt when the hand would
    touch a neighbour."""
    scene = ctx.scene
    square = _wrap_quarter(scene.box(obj).yaw_rad)
    printed = _printed(ctx, short_name(obj))
    measured = None
    if printed is not None and isinstance(printed.get("yaw"), (int, float)):
        measured = _wrap_quarter(float(printed["yaw"]))
    from_measurement = measured is not None and abs(_wrap_quarter(measured - square)) < math.radians(8.0)
    first_blockers: tuple[str, ...] = ()
    for delta in (0.0, math.pi / 2, 0.25, -0.25, math.pi / 2 + 0.25, math.pi / 2 - 0.25):
        jaw = _wrap_jaw(square + delta)
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


def _wrap_jaw(angle: float) -> float:
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
    if spec.style == "body":
        jaw = _wrap_jaw(scene.yaw(obj) - math.pi / 2)
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
        from captain_harness.core.teacher.fixtures import drawer_for_region

        drawer = drawer_for_region(scene, dest.goal_arg)
        across = rot_z(scene.yaw(drawer.cabinet))[:2, 0]  # along the drawer's front
        allowed = across
    scored = []
    for deg in range(0, 360, 30):
        a = math.radians(deg)
        if allowed is not None and abs(math.cos(a) * allowed[0] + math.sin(a) * allowed[1]) < 0.95:
            continue  # keep the hand along the drawer's front so it stays off the cabinet
        d = np.array([math.cos(a), math.sin(a)])
        finger = box.center_m[:2] + d * (radius + 0.015)
        room = min((xy_distance_to_box(finger, b) for b in obstacles), default=0.1)
        tcp = box.center_m[:2] + d * (radius - spec.rim_inset_m)
        reach = float(np.hypot(*tcp))
        blocked = hand_blockers(scene, np.array([tcp[0], tcp[1], grasp_z]), _wrap_jaw(a - math.pi / 2), [obj])
        score = min(room, 0.05) - 0.3 * max(0.0, reach - 0.66) - (0.004 if deg % 90 else 0.0) - 0.05 * len(blocked)
        scored.append((score, deg, d))
    scored.sort(key=lambda t: -t[0])
    good = [t for t in scored if t[0] >= scored[0][0] - 0.006]
    pick = good[int(ctx.rng.integers(len(good)))] if attempt == 0 else scored[min(attempt, len(scored) - 1)]
    _score, deg, d = pick
    jaw = _wrap_jaw(math.radians(deg) - math.pi / 2)
    if deg % 90 == 0:
        jaw_code = {0: "math.pi / 2", 90: "0.0", 180: "math.pi / 2", 270: "0.0"}[deg]
        jaw = {0: math.pi / 2, 90: 0.0, 180: math.pi / 2, 270: 0.0}[deg]
        side = np.round(d)
    else:
        jaw_code = num(jaw)
        side = np.round(d, 3)
    depth = spec.depth_below_top_m + 0.005 * attempt
    return Grasp(side, jaw_code, jaw, depth, spec.rim_inset_m)


# ---------------------------------------------------------------------- measuring
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
        yield from move_to_view(ctx, obj)
        found = look_and_click(ctx, targets, prefer=WRIST) or look_and_click(ctx, targets, prefer=HEAD)
    apart = ""
    if found is None:  # one hides the other from every view: click each from its own view
        first = look_and_click(ctx, targets[:1], prefer=WRIST) or look_and_click(ctx, targets[:1], prefer=HEAD)
        if first is None or dest.spot_m is not None:
            raise PlanError(f"no camera sees both the {label_of(obj)} and the {dest.label}")
        yield Step(f"From here I see the {label_of(obj)} but not the {dest.label} around it; I'll click the "
                   f"{label_of(obj)} now and the {dest.label} from a view above it.", ["\n".join(first[1])])
        yield from move_to_view(ctx, dest.click)
        found = look_and_click(ctx, targets[1:], prefer=WRIST) or look_and_click(ctx, targets[1:], prefer=HEAD)
        if found is None:
            raise PlanError(f"no camera sees the {dest.label}")
        apart = f"The {label_of(obj)} is clicked already; now the {dest.label}."
    camera, lines = found
    if dest.spot_m is not None:
        lines[-1] = lines[-1].replace('["detection_id"]', "")
        lines.append(cells.measure("g", ov))
        lines.append(f'o = g["object"]\np_spot = np.array({dv}["position_m"])\n'
                     'd = {"center_m": p_spot, "center_xy_m": p_spot[:2], "top_z_m": p_spot[2], '
                     '"bottom_z_m": p_spot[2]}')
        lines.append(print_geometry(ov, "o", with_yaw=True))
        lines.append('print("spot:", [round(x, 4) for x in p_spot])')
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


def move_to_view(ctx: TeacherContext, name: str) -> Plan:
    """Move the hand above an object so the wrist camera looks down on it (a few
    viewpoints, the first reachable one)."""
    views = [view_pose_above(ctx, name, h, back) for h, back in ((0.22, 0.06), (0.18, 0.12), (0.26, 0.16))]
    ctx.tcp_quaternion = TOP_DOWN.copy()
    options = ", ".join(vec(p) for p in views)
    fb = yield Step(
        f"The head camera does not give a clean view of the {label_of(name)} from here. I'll move the hand above "
        "it and look down with the wrist camera, trying a few viewpoints until one is reachable.",
        [f"for view in ({options}):\n    r = go(view, downq(0.0), speed={num(ctx.style.approach_speed_m_s)})\n"
         '    if r["success"]:\n        break\nprint("moved:", r["success"])'])
    return fb


def remeasure_from_above(ctx: TeacherContext, name: str, var: str, key: str, problem: str) -> Plan:
    """Measure one object again from the wrist camera above it; the result replaces the
    session's ``o`` (object) or ``d`` (destination)."""
    yield from move_to_view(ctx, name)
    found = look_and_click(ctx, [target(var + "_w", name)], prefer=WRIST)
    if found is None:
        return
    _camera, lines = found
    lines.append(cells.measure("gw", var + "_w"))
    lines.append(f'{key} = gw["object"]')
    lines.append(print_geometry(var, key, with_yaw=key == "o"))
    fb = yield Step(f"That measurement looks off: {problem}. From above, the wrist camera sees the {label_of(name)} "
                    "on its own; I'll measure it again there and use that.", ["\n".join(lines)])
    return fb


# ---------------------------------------------------------------------- the plan
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
    blockers = [b for b in choose_grasp(ctx, obj, spec, 0).blockers if movable(b) and b != dest.click]
    if blockers and dest.spot_m is None:
        for b in blockers[:2]:
            yield from move_aside(ctx, b, [ctx.scene.position(obj), dest.aim_m(ctx.scene)], obj)
        yield from ground_and_measure(ctx, obj, dest, ov, dv,
                                      f"With the way clear, I measure the {olab} and the {dlab} again.")
    yield from grasp_carry_release(ctx, obj, dest, spec, ov, dv, retries=2)


def move_aside(ctx: TeacherContext, name: str, avoid: list[np.ndarray], for_obj: str,
               reason: str | None = None) -> Plan:
    """Pick an object that is in the way and set it down on a free spot of the table."""
    spot = free_spot(ctx.scene, name, avoid, ctx.rng)
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
        if fb.values.get("held") is True and ctx.held(obj):
            break
        if ctx.failure_done:  # an injected failure: carry on as if the grasp held
            yield _place_step(ctx, obj, dest, spec)
            return
        if fb.values.get("held") is True:
            fb = yield _open_and_back_off(ctx, f"The jaws report something held, but the {label_of(obj)} is not "
                                               "lifting with them.")
        attempt += 1
        if attempt > retries:
            return
        fb = yield from _regrasp(ctx, obj, dest, ov, dv, attempt)
    # measured again while holding when the object moved in the grasp (or by habit)
    printed = _printed(ctx, ov)
    shifted = printed is not None and float(np.linalg.norm(
        np.asarray(printed["center"][:2]) - ctx.scene.box(obj).center_m[:2]
        - (ctx.scene.ee_m[:2] - _grasp_tcp_xy(ctx)))) > 0.012
    groove = groove_for(dest)
    if groove is not None:  # laid down along a groove: the carry is measured from before the grasp
        fb = yield lay_step(ctx, obj, dest, groove, _printed(ctx, dv), TOP_DOWN)
    else:
        if shifted or ctx.style.wrist_remeasure:
            yield from measure_held(ctx, obj, dest, ov, dv, shifted)
        fb = yield _place_step(ctx, obj, dest, spec)
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


def grasp_step(ctx: TeacherContext, obj: str, dest: Destination | None, spec: GraspSpec, grasp: Grasp,
               ov: str, attempt: int) -> Step:
    """The request that grasps ``obj`` from its measurement ``o`` and lifts it: clear of
    the destination ``d`` on the way there, or (``dest`` None: the task only asks for the
    object to be picked up) well above where it stood."""
    st = ctx.style
    descend = num(spec.descend_speed_m_s * st.descend_speed_scale)
    olab = label_of(obj)
    lines = [f"q = downq({grasp.jaw_code})", 'grasp = np.array(o["center_m"], dtype=float)']
    if grasp.square_from_measurement:
        lines.insert(0, 'square = (o["yaw_rad"] + math.pi / 4) % (math.pi / 2) - math.pi / 4  # jaws square to '
                        "its sides")
    if grasp.side is not None:
        lines.append(f'grasp[:2] += np.array({vec(grasp.side)}) * (o["footprint"]["radius_m"] - '
                     f'{num(grasp.inset_m)})  # on the rim')
        what = f"the {olab}'s rim, on the side {direction_words(grasp.side)}"
    else:
        what = f"the middle of the {olab}{grasp.note}"
    if spec.style == "body":
        printed = _printed(ctx, ov)
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
    measured = _printed(ctx, ov)
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
    ctx.tcp_quaternion = quat_for_jaw(yaw)
    if mistake == "fast_descent" and attempt == 0:
        ctx.mistake_done = True
        meta = {"injected_mistake": mistake, "nosup_reason": "injected_mistake"}
        lines.append('if r["success"]:\n    r = go(grasp - [0, 0, 0.03], q, speed=0.2)')
        lines.append('print("descent:", (r.get("value") or {}).get("stopped_reason"))')
        return Step(f"I'll go straight down onto {what} and close there.", ["\n".join(lines)], meta=meta)
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
    reasoning = (f"Now the grasp{again}: top-down on {what}, {where}. "
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


def _off_destination(ctx: TeacherContext, obj: str, dest: Destination) -> np.ndarray:
    """An injected failure: a horizontal shift (base frame, m) of the release that leaves
    the object a few centimetres outside the destination (past the region's or the 3 cm
    tolerance's edge), toward whichever side keeps the release within reach."""
    scene = ctx.scene
    aim = dest.aim_m(scene)[:2]
    distance = max(dest.half_xy_m()) + (0.06 if dest.container else 0.045)
    best, best_score = None, -1e9
    for k in range(8):
        a = k * math.pi / 4 + 0.2 * float(ctx.rng.random())
        shift = distance * np.array([math.cos(a), math.sin(a)])
        reach = float(np.hypot(*(aim + shift)))
        room = min((xy_distance_to_box(np.append(aim + shift, 0.0), scene.box(n)) for n in scene.names()
                    if n not in (obj, dest.click)), default=0.2)
        score = min(room, 0.08) - 2.0 * max(0.0, reach - 0.68) - 2.0 * max(0.0, 0.35 - reach)
        if score > best_score:
            best, best_score = shift, score
    return best


def _lift_expression(ctx: TeacherContext, obj: str, dest: Destination, spec: GraspSpec) -> str:
    """Source of the lift height: clear of the destination's top (and of anything high on
    the way) with the object hanging below the fingers."""
    clear = num(0.03 + 0.5 * ctx.style.lift_extra_m)
    expr = f'max(grasp[2] + 0.1, d["top_z_m"] + hang + {clear})'
    scene = ctx.scene
    start, end = scene.position(obj), dest.aim_m(scene)
    top = -1.0
    for n in scene.names():
        if n in (obj, dest.click):
            continue
        b = scene.box(n)
        if any(xy_distance_to_box(start + t * (end - start), b) < 0.07 for t in np.linspace(0.0, 1.0, 12)):
            top = max(top, b.top_z_m)
    box = scene.box(obj)
    hang = box.top_z_m - spec.depth_below_top_m - box.bottom_z_m
    needed = top + hang + 0.05 + box.top_z_m - spec.depth_below_top_m - box.bottom_z_m - hang
    dest_top = scene.box(dest.click).top_z_m if dest.click else float(dest.aim_m(scene)[2])
    if top > dest_top and needed > box.top_z_m + 0.1:
        expr = f"max({expr}, {num(top + 0.05)} + hang)  # pass over what stands on the way"
    return expr


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
    ctx.adopt_held = bool(good)
    radius_cm = float(held_m.get("radius", 0.0)) * 100 if isinstance(held_m, dict) else 0.0
    ctx.held_note = ("" if good else f"the held measurement took in the fingers (radius {num(radius_cm, 1)} cm), "
                     "so I keep the one from before the grasp")


def _place_step(ctx: TeacherContext, obj: str, dest: Destination, spec: GraspSpec) -> Step:
    st = ctx.style
    olab, dlab = label_of(obj), dest.label
    _ov, dv = names_for(obj, dest)
    where = "into" if dest.container else "onto"
    aim = dest.aim_m(ctx.scene)
    lines = []
    measured_dest = _printed(ctx, dv)
    corr = None
    if dest.spot_m is None and measured_dest is not None:
        corr = aim[:2] - np.asarray(measured_dest["center"][:2], dtype=float)
        if float(np.linalg.norm(corr)) < 0.01:
            corr = None
    if corr is not None:
        words = "the spot is" if dest.region else f"the {dlab}'s middle is"
        lines.append(f'target = np.array(d["center_xy_m"]) + {vec(corr)}  # {words} '
                     f"{direction_words(corr)} of the {dlab}'s measured centre")
    else:
        lines.append('target = np.array(d["center_xy_m"])')
    widened = kind_of(obj) in WIDENED_OUTLINE_KINDS and _slot_jaw(ctx, obj, dest, spec) is None
    body = _outline_offset(ctx, obj) if widened else None
    if body is not None and getattr(ctx, "adopt_held", None) is not True:
        lines.append(f"target += {vec(body)}  # the {olab}'s outline centre is {direction_words(body)} of its body's")
    meta: dict = {}
    if st.mistake == "release_off_target" and not ctx.mistake_done:
        ctx.mistake_done = True
        meta = {"injected_mistake": st.mistake, "nosup_reason": "injected_mistake"}
        lines.append("target += [0.0, 0.06]")
    elif dest.spot_m is None and ctx.failure_due("perturbed_place"):
        ctx.failure_done = True
        meta = {"injected_failure": "perturbed_place", "nosup_reason": "injected_failure"}
        lines.append(f"target += {vec(_off_destination(ctx, obj, dest))}")
    if getattr(ctx, "adopt_held", None) is True:
        lines.insert(0, 'o, d, lift = g_h["object"], g_h["destination"], lift_h\nhang = lift[2] - o["bottom_z_m"]'
                        "  # the measurement taken while holding")
    elif getattr(ctx, "adopt_held", None) is False:
        lines.insert(0, f"# {ctx.held_note}")
    ctx.adopt_held = None
    lines.append('place = lift.copy()\nplace[:2] += target - np.array(o["center_xy_m"])')
    slot_jaw = _slot_jaw(ctx, obj, dest, spec)
    if slot_jaw is not None:
        lines.append(f"q = downq({num(slot_jaw)})  # the {olab}'s thin side (between the jaws) across the "
                     f"{dlab}'s compartment")
    lines.append(f'r = go(place, q, speed={num(st.carry_speed_m_s)}, mode="manipulation")')
    if spec.style != "rim" and slot_jaw is None:  # held at its middle: it may turn about the vertical
        lines.append(_quarter_turn_fallback(st.carry_speed_m_s, olab))
    top = dest.release_top(ctx.scene)
    if slot_jaw is not None:
        lines.append(f'release = place.copy()\nrelease[2] = {top} - {num(SLOT_RELEASE_BELOW_TOP_M)} + hang'
                     f"  # the {olab}'s bottom already between the compartment's walls")
    elif dest.is_drawer(ctx.scene):
        lines.append(f'release = place.copy()\nrelease[2] = {top} + {num(spec.release_above_m)} + hang'
                     f"  # just above the drawer's walls")
    elif dest.container:
        lines.append(f'release = place.copy()\nrelease[2] = {top} + {num(spec.release_above_m)} + hang'
                     f"  # just above the rim, it drops in")
    else:
        lines.append(f'release = place.copy()\nrelease[2] = {top} + {num(spec.release_above_m)} + hang')
    if slot_jaw is not None:  # guarded: a touch on a wall stops it lightly, and it is released from there
        lines.append('if r["success"]:\n    r = go(release, q, speed=0.03)\n'
                     '    print("lowered:", r["success"], (r.get("value") or {}).get("stopped_reason"))')
    else:
        lines.append('if r["success"]:\n    r = go(release, q, speed=0.05, mode="manipulation")\n'
                     '    print("lowered:", r["success"])')
    lines.append('opened = robot.move_to(gripper="open")')
    if st.settle_hold_s > 0:
        lines.append(f"robot.hold(duration_s={num(st.settle_hold_s, 1)})")
    lines.append(f"r = go(release + [0, 0, 0.1], q, speed={num(st.approach_speed_m_s)})")
    lines.append(f"r = go(home, downq(0.0), speed={num(st.approach_speed_m_s)})  # out of the head camera's view")
    if st.notes:
        lines.append(f'with open("NOTES.md", "a") as f:\n    f.write("- released the {olab} {where} the {dlab}\\n")')
    ctx.tcp_quaternion = TOP_DOWN.copy()
    reasoning = (f"The {olab} is held. I'll carry it by the measured offset to the {dlab}, lower it {where} it, open "
                 "the jaws, back off upward and move out of the head camera's view.")
    return Step(reasoning, ["\n".join(lines)], meta=meta)


def _outline_offset(ctx: TeacherContext, obj: str) -> np.ndarray | None:
    """How far the measured outline centre of the held ``obj`` (its last printed measurement
    before the grasp) lies from its body origin, base frame xy (m), when that is 1 cm or
    more (a handle or spout widens the outline); else None. Carrying the outline centre to
    ``target + offset`` puts the body where the target is."""
    printed = _printed(ctx, short_name(obj))
    if printed is None or ctx.last_grasp_xy is None:
        return None
    # where the body was when measured: it moved with the tool since the grasp
    body_then = ctx.scene.position(obj)[:2] - (ctx.scene.ee_m[:2] - ctx.last_grasp_xy)
    offset = np.asarray(printed["center"][:2], dtype=float) - body_then
    return offset if 0.01 <= float(np.linalg.norm(offset)) <= 0.05 else None


def _quarter_turn_fallback(speed_m_s: float, olab: str) -> str:
    """Source that retries a refused carry with the held object turned a quarter about the
    vertical either way (the last wrist joint's range or a wrist flip can be in the way of
    one hand orientation but not of another); ``q`` becomes the turn that runs."""
    return ('if not r["success"] and r.get("failure_category") in ("joint_limit", "ik_failed"):\n'
            f"    for turn in (math.pi / 2, -math.pi / 2):  # the {olab} is held at its middle: turn it a quarter\n"
            "        c, s = math.cos(turn / 2), math.sin(turn / 2)\n"
            "        w, x, y, z = q\n"
            "        q_turned = [w * c - z * s, x * c + y * s, y * c - x * s, z * c + w * s]\n"
            f'        r = go(place, q_turned, speed={num(speed_m_s)}, mode="manipulation")\n'
            '        if r["success"]:\n'
            "            q = q_turned\n"
            f'            print("carry: turned the {olab} a quarter turn to keep the wrist in its range")\n'
            "            break")


def _slot_jaw(ctx: TeacherContext, obj: str, dest: Destination, spec: GraspSpec) -> float | None:
    """For a flat object held across its thin side going into a narrow compartment: the
    jaw yaw (rad) that turns its thin side across the compartment, the one of the two
    equivalent hand turns nearest the grasp's; None otherwise."""
    axis = dest.slot_axis(ctx.scene)
    half = ctx.scene.box(obj).half_m
    if axis is None or spec.style != "center" or not spec.jaw_across_short_side \
            or max(half[0], half[1]) < 1.6 * min(half[0], half[1]):
        return None
    q = ctx.tcp_quaternion if ctx.tcp_quaternion is not None else TOP_DOWN
    current = 2.0 * (math.atan2(float(q[2]), float(q[1])) - math.pi / 4)
    jaw = math.atan2(float(axis[1]), float(axis[0])) - math.pi / 2  # the jaw axis along the slot's across direction
    return min((jaw + k * math.pi for k in range(-2, 3)), key=lambda j: abs(j - current))


def _printed(ctx: TeacherContext, key: str) -> dict | None:
    """The last measurement the session printed under ``key``."""
    for values in reversed(ctx.printed_history):
        v = values.get(key)
        if isinstance(v, dict) and "center" in v:
            return v
    return None


def _open_and_back_off(ctx: TeacherContext, why: str) -> Step:
    ctx.tcp_quaternion = TOP_DOWN.copy()
    lines = ['robot.move_to(gripper="open")',
             'r = robot.recover(max_distance_m=0.08, max_duration_s=6.0)',
             f"r = go(home, downq(0.0), speed={num(ctx.style.approach_speed_m_s)})"]
    return Step(why + " I'll open, back off along the path and look again.", ["\n".join(lines)],
                meta={"recovery": "reopen"})


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


def _regrasp(ctx: TeacherContext, obj: str, dest: Destination, ov: str, dv: str, attempt: int) -> Plan:
    """After an empty grasp (or a guarded stop): open, back off, look and measure again."""
    stopped = ctx.fb is not None and ctx.fb.receipt_failed("move_to")
    why = ("The descent stopped early on contact and the jaws did not get the "
           f"{label_of(obj)}." if stopped else f"The jaws closed on nothing: the {label_of(obj)} is not held.")
    yield back_off_step(ctx, why)
    reason = f"Grasp attempt {attempt + 1}: re-grounding the {label_of(obj)} and the {dest.label} in a fresh image."
    fb = yield from ground_and_measure(ctx, obj, dest, ov, dv, reason)
    return fb
