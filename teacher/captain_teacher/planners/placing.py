"""Carrying a held object to its destination and releasing it: the request that carries
by the measured offset (corrected for a handle-widened outline or a destination spot off
the measured centre), turns a flat object across a narrow compartment, lowers, opens and
steps out of the head camera's view.
"""

from __future__ import annotations

import math

import numpy as np

from captain_harness.core.episode.table_regions import TableRegion
from captain_teacher.boxes import Box, rot_z
from captain_teacher.cells import num, vec
from captain_teacher.context import Step, TeacherContext
from captain_teacher.objects import EXPECTED_RADIUS_M, GraspSpec, kind_of, label_of
from captain_teacher.planners.common import (
    TOP_DOWN,
    direction_words,
    names_for,
    printed_measurement,
    short_name,
    xy_distance_to_box,
)
from captain_teacher.planners.destinations import Destination

#: Into a narrow compartment the held object's bottom is released this far below the
#: destination's measured top (inside its walls, so it cannot topple over them), m.
SLOT_RELEASE_BELOW_TOP_M = 0.05
#: A carry to a spot this far from the base or farther (horizontally, m; where a top-down
#: hand nears the end of its reach) goes out along the reach direction from
#: ``FAR_CARRY_VIA_M``: straight from the side, the arm passes a joint limit on the way.
FAR_CARRY_FROM_M = 0.75
FAR_CARRY_VIA_M = 0.62
#: An object set beside others in a shared region is turned a quarter when its footprint
#: reaches this much farther along the row than across it, m.
LONG_SIDE_MARGIN_M = 0.01
#: An object set down in a table region keeps its footprint this far from others', m.
SPOT_CLEARANCE_M = 0.01


#: Kinds whose measured outline is widened by a handle or spout, so that its centre is off
#: the body's (corrected for when carrying them to a target).
WIDENED_OUTLINE_KINDS = frozenset({"mug", "moka_pot"})


def place_step(ctx: TeacherContext, obj: str, dest: Destination, spec: GraspSpec) -> Step:
    st = ctx.style
    olab, dlab = label_of(obj), dest.label
    _ov, dv = names_for(obj, dest)
    where = "into" if dest.container else "onto"
    aim = dest.aim_m(ctx.scene)
    lines = []
    measured_dest = printed_measurement(ctx, dv)
    corr = None
    if dest.spot_m is None and measured_dest is not None:
        corr = aim[:2] - np.asarray(measured_dest["center"][:2], dtype=float)
        if float(np.linalg.norm(corr)) < 0.01:
            corr = None
    table = ctx.table_regions.get(dest.goal_arg) if dest.region else None
    if table is not None:  # a region of the table: its rectangle in TASK.md, not the fixture it is named after
        centre = np.asarray(table.center_xy_m, dtype=float)
        spot, blockers = clear_spot(ctx, obj, aim[:2], table)
        shift = spot - centre
        moved = f" + {vec(shift)}" if float(np.linalg.norm(shift)) >= 0.005 else ""
        why = f", where the {label_of(obj)} stays clear of the {' and the '.join(blockers)}" if blockers else ""
        lines.append(f"target = np.array({vec(centre)}){moved}  # in {dest.goal_arg}, the table's rectangle in "
                     f"TASK.md{why}")
    elif corr is not None:
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
    body_held = widened and spec.style != "rim" and getattr(ctx, "adopt_held", None) is True
    ctx.adopt_held = None
    if body_held:
        lines.append(f"place = lift.copy()\nplace[:2] = target  # the jaws hold the {olab}'s body at its middle, "
                     "and its outline (measured while holding) is off the body's: the tool centre goes over the spot")
    else:
        lines.append('place = lift.copy()\nplace[:2] += target - np.array(o["center_xy_m"])')
    slot_jaw = _slot_jaw(ctx, obj, dest, spec)
    if slot_jaw is not None:
        lines.append(f"q = downq({num(slot_jaw)})  # the {olab}'s thin side (between the jaws) across the "
                     f"{dlab}'s compartment")
    elif spec.style != "rim" and _long_side_along_share(ctx, obj, dest):
        # a quarter turn of the held object about the vertical (the tool's z points down: a tool
        # turn t turns the object by -t), the side its outline widens to ending away from the robot
        wide = body if body is not None else np.array([0.0, -1.0])
        outward = aim[:2] / float(np.hypot(*aim[:2]))
        turn = max((math.pi / 2, -math.pi / 2), key=lambda t: float(rot_z(-t)[:2, :2] @ wide @ outward))
        lines.append(f"c, s = math.cos({num(turn / 2, 4)}), math.sin({num(turn / 2, 4)})\nw, x, y, z = q\n"
                     f"q = [w * c - z * s, x * c + y * s, y * c - x * s, z * c + w * s]  # the {olab} turned a "
                     f"quarter: set beside another on the {dlab}, its long side across the row, not along it, "
                     "and its handle away from the robot")
    if far := float(np.hypot(*aim[:2])) >= FAR_CARRY_FROM_M:
        lines.append(f"out = float(np.hypot(*place[:2]))\nvia = place.copy()\nvia[:2] *= {num(FAR_CARRY_VIA_M)} / out"
                     "  # at the edge of reach: out along the reach direction, from nearer the robot\n"
                     f'go(via, q, speed={num(st.carry_speed_m_s)}, mode="manipulation")')
    lines.append(f'r = go(place, q, speed={num(st.carry_speed_m_s)}, mode="manipulation")')
    if spec.style != "rim" and slot_jaw is None:  # held at its middle: it may turn about the vertical
        lines.append(quarter_turn_fallback(st.carry_speed_m_s, olab))
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
    tall = tall_on_way_home(ctx, aim, spec.hang_m, exclude=(obj, dest.click))
    if tall is not None:
        lines.append(f"r = go(place, q, speed={num(st.approach_speed_m_s)})  # up to the carry height: the "
                     f"{label_of(tall)} stands on the way back")
    if far:
        lines.append(f"r = go(via, q, speed={num(st.approach_speed_m_s)})  # back in along the reach direction")
    lines.append(f"r = go(home, downq(0.0), speed={num(st.approach_speed_m_s)})  # out of the head camera's view")
    if st.notes:
        lines.append(f'with open("NOTES.md", "a") as f:\n    f.write("- released the {olab} {where} the {dlab}\\n")')
    ctx.tcp_quaternion = TOP_DOWN.copy()
    reasoning = (f"The {olab} is held. I'll carry it by the measured offset to the {dlab}, lower it {where} it, open "
                 "the jaws, back off upward and move out of the head camera's view.")
    return Step(reasoning, ["\n".join(lines)], meta=meta)


#: The hand's way back to the start pose after a release is checked against everything
#: standing within this of the straight line (xy), m, and this much clearance over its top, m.
WAY_HOME_MARGIN_M = 0.08
WAY_HOME_CLEARANCE_M = 0.05


def tall_on_way_home(ctx: TeacherContext, aim_m: np.ndarray, hang_m: float, exclude: tuple[str, ...] = ()
                     ) -> str | None:
    """What stands on the straight way from 10 cm above a release at ``aim_m`` (base frame,
    m; the object's bottom at the aim's height plus ``hang_m``) back to the start pose,
    with its top less than ``WAY_HOME_CLEARANCE_M`` under the fingertips there (a
    microwave beside the spot a mug was set down on), other than ``exclude``; None when
    nothing does or the start pose is unknown."""
    if ctx.home_m is None:
        return None
    a = np.asarray(aim_m, dtype=float)[:2]
    b = np.asarray(ctx.home_m, dtype=float)[:2]
    z_from = float(aim_m[2]) + hang_m + 0.1
    seg = b - a
    length2 = float(seg @ seg) or 1e-9
    for name in ctx.scene.names():
        if name in exclude:
            continue
        box = ctx.scene.box(name)
        for t in np.linspace(0.0, 1.0, 21):
            p = a + t * seg
            local = rot_z(box.yaw_rad)[:2, :2].T @ (p - box.center_m[:2])
            if np.all(np.abs(local) <= box.half_m[:2] + WAY_HOME_MARGIN_M):
                z = z_from + t * (float(ctx.home_m[2]) - z_from)
                if box.top_z_m > z - WAY_HOME_CLEARANCE_M and float((p - a) @ seg) / length2 > 0.05:
                    return name
    return None


def clear_spot(ctx: TeacherContext, obj: str, aim_xy: np.ndarray, table: TableRegion
               ) -> tuple[np.ndarray, list[str]]:
    """Where in a table region ``obj`` goes: ``aim_xy`` when its footprint (its kind's
    expected radius, else its box's) stays ``SPOT_CLEARANCE_M`` clear of every other object's footprint there, else
    the point of the region's rectangle (kept ``AIM_EDGE_MARGIN_M`` inside it, searched on
    a 5 mm grid) nearest ``aim_xy`` that does, or the clearest one when none does (a plate
    set down on the stove's edge beside the region tips and slides off its aim).

    Returns:
        ``(spot_xy, blockers)``: base frame metres, and the words for the objects the spot
        moved away from (empty when ``aim_xy`` was clear).
    """
    spot, _, near, _ = _clearest_spot(ctx, obj, aim_xy, table)
    return spot, [label_of(n) for n in near]


def spot_blockers(ctx: TeacherContext, obj: str, table: TableRegion) -> list[str]:
    """The objects that leave no spot of the table region ``table`` where ``obj``'s
    footprint stays ``SPOT_CLEARANCE_M`` clear of theirs (``clear_spot`` then settles for
    the clearest one: a plate set down half on a cream cheese box in LIBERO-PRO's swapped
    libero_goal/5 tipped and slid off the region); empty when there is such a spot."""
    _, clearance, _, there = _clearest_spot(ctx, obj, np.asarray(table.center_xy_m, float), table)
    return [] if clearance >= SPOT_CLEARANCE_M else there


#: A blocker is moved at most this far out of a table region, m, and keeps this far from
#: every other object's footprint where it is set down, m; moved, it leaves the region a
#: spot ``NUDGE_SPARE_M`` clearer than ``SPOT_CLEARANCE_M`` (it is set down within a
#: centimetre or two of its aim), m.
NUDGE_MAX_M = 0.15
NUDGE_CLEARANCE_M = 0.015
NUDGE_SPARE_M = 0.015


def nudge_spot(ctx: TeacherContext, blocker: str, obj: str, table: TableRegion) -> np.ndarray | None:
    """The nearest place (base frame, m; on the table at ``blocker``'s height) away from the
    region's centre (straight away first, then up to 60 deg off that), in 1 cm steps up to
    ``NUDGE_MAX_M``, where ``blocker`` leaves
    ``obj`` a clear spot of the region (``spot_blockers``, with ``NUDGE_SPARE_M``) and its own footprint
    stays ``NUDGE_CLEARANCE_M`` clear of every other object's (a crowded table has no free
    spot 13 cm from everything, ``clearance.free_spot``); None when there is none."""
    scene = ctx.scene
    box = scene.box(blocker)
    away = box.center_m[:2] - np.asarray(table.center_xy_m, float)
    heading = math.atan2(float(away[1]), float(away[0]))
    others = [scene.box(n) for n in scene.names() if n not in (blocker, obj)]
    for step in np.arange(0.01, NUDGE_MAX_M + 1e-9, 0.01):
        for turn in (0.0, math.pi / 6, -math.pi / 6, math.pi / 3, -math.pi / 3):  # straight away first
            centre = box.center_m.copy()
            centre[:2] += step * np.array([math.cos(heading + turn), math.sin(heading + turn)])
            there = Box(centre, box.half_m, box.yaw_rad)
            if any(footprint_gap(there, b) < NUDGE_CLEARANCE_M for b in others):
                continue
            _, clearance, _, _ = _clearest_spot(ctx, obj, np.asarray(table.center_xy_m, float), table,
                                                {blocker: there})
            if clearance >= SPOT_CLEARANCE_M + NUDGE_SPARE_M:
                return centre
    return None


def footprint_gap(a: Box, b: Box) -> float:
    """Horizontal gap between two boxes' footprints, m (0 when they overlap): the least
    distance from a corner or edge midpoint of either to the other's footprint."""
    def rim(box: Box) -> np.ndarray:
        signs = np.array([(1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1)], dtype=float)
        return box.center_m[:2] + (signs * box.half_m[:2]) @ rot_z(box.yaw_rad)[:2, :2].T

    if a.contains(np.array([*b.center_m[:2], a.center_m[2]])) or b.contains(np.array([*a.center_m[:2], b.center_m[2]])):
        return 0.0
    return min(min(xy_distance_to_box(p, b) for p in rim(a)), min(xy_distance_to_box(p, a) for p in rim(b)))


def _clearest_spot(ctx: TeacherContext, obj: str, aim_xy: np.ndarray, table: TableRegion,
                   moved: dict[str, Box] | None = None) -> tuple[np.ndarray, float, list[str], list[str]]:
    """``clear_spot``'s search: the spot, its clearance (m) and the names of the objects
    less than ``SPOT_CLEARANCE_M`` from the footprint at ``aim_xy`` (where the search
    started) and at the spot; ``moved``: other objects' boxes as they would be elsewhere."""
    from captain_teacher.planners.destinations import AIM_EDGE_MARGIN_M

    scene = ctx.scene
    radius = EXPECTED_RADIUS_M.get(kind_of(obj), float(np.hypot(*scene.box(obj).half_m[:2])))
    others = [(n, (moved or {}).get(n) or scene.box(n)) for n in scene.names() if n != obj]

    def clearance(p: np.ndarray) -> tuple[float, list[str]]:
        gaps = [(xy_distance_to_box(p, box) - radius, n) for n, box in others]
        low = min((g for g, _ in gaps), default=math.inf)
        return low, [n for g, n in gaps if g < SPOT_CLEARANCE_M]

    here, near = clearance(np.asarray(aim_xy, float))
    if here >= SPOT_CLEARANCE_M:
        return np.asarray(aim_xy, float), here, [], []
    R = np.array([[math.cos(table.yaw_rad), -math.sin(table.yaw_rad)],
                  [math.sin(table.yaw_rad), math.cos(table.yaw_rad)]])
    half = np.maximum(np.asarray(table.half_xy_m, float) - AIM_EDGE_MARGIN_M, 0.0)
    grid = [np.arange(-h, h + 1e-9, 0.005) if h > 0 else np.zeros(1) for h in half]
    best, best_key = np.asarray(aim_xy, float), (False, here, 0.0)
    for u in grid[0]:
        for v in grid[1]:
            p = np.asarray(table.center_xy_m, float) + R @ np.array([u, v])
            c, _ = clearance(p)
            key = (c >= SPOT_CLEARANCE_M, c if c < SPOT_CLEARANCE_M else 0.0, -float(np.linalg.norm(p - aim_xy)))
            if key > best_key:
                best, best_key = p, key
    c_best, there = clearance(best)
    return best, c_best, near, there


def _outline_offset(ctx: TeacherContext, obj: str) -> np.ndarray | None:
    """How far the measured outline centre of the held ``obj`` (its last printed measurement
    before the grasp) lies from its body origin, base frame xy (m), when that is 1 cm or
    more (a handle or spout widens the outline); else None. Carrying the outline centre to
    ``target + offset`` puts the body where the target is."""
    printed = printed_measurement(ctx, short_name(obj))
    if printed is None or ctx.last_grasp_xy is None:
        return None
    # where the body was when measured: it moved with the tool since the grasp
    body_then = ctx.scene.position(obj)[:2] - (ctx.scene.ee_m[:2] - ctx.last_grasp_xy)
    offset = np.asarray(printed["center"][:2], dtype=float) - body_then
    return offset if 0.01 <= float(np.linalg.norm(offset)) <= 0.05 else None


def quarter_turn_fallback(speed_m_s: float, olab: str) -> str:
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


def _long_side_along_share(ctx: TeacherContext, obj: str, dest: Destination) -> bool:
    """Whether ``obj``, set side by side with others in ``dest``'s region, has its long
    side along the row (its footprint's reach along the share axis more than
    ``LONG_SIDE_MARGIN_M`` beyond its reach across it): a moka pot's handle and spout, along
    the row, reach into its neighbour's."""
    if dest.share[1] < 2 or dest.container or not dest.region:
        return False
    box = ctx.scene.box(obj)
    axis = dest.share_axis(ctx.scene)[:2]
    local = rot_z(box.yaw_rad)[:2, :2].T @ axis
    along = float(np.abs(local) @ box.half_m[:2])
    across = float(np.abs(local[::-1]) @ box.half_m[:2])
    return along > across + LONG_SIDE_MARGIN_M


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
