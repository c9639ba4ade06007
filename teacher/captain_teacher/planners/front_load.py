"""Putting a mug into the microwave through its open front, held by its handle.

The microwave is closed on top, so nothing can be lowered into it from above, and a
top-down hand does not fit with a mug in its cavity: the white-and-yellow mug is 10.3 cm
tall, the cavity 14.4 cm, and the hand reaches 12 cm above the fingertips. The mug's body
(10.6 cm across) is wider than the jaws open (about 8 cm). So the hand takes the mug by
its handle: the jaws close across the handle's outer bar, the fingers point at the mug's
middle and the hand is tipped ``HANDLE_PITCH_RAD`` below level. It lifts the mug just
above the cavity's floor, turns so that the mug leads, slides it in through the front
and sets it down; the hand itself stays outside (its 20 cm wide palm would meet the door
and the front's side panel).

Everything the code uses is measured in the session: the handle is clicked as a point
(``mark_point(granularity="point")``), the grasp height comes from the mug's measured
top, and the place inside comes from a point clicked on the microwave's top. The
numbers the teacher adds are the two models' dimensions (the handle's height on the mug,
the cavity's floor below the top, where the mug sits inside), written beside them.

When the microwave stands at the table's side with its opening outward (LIBERO-PRO's
swapped layouts), the slide in would start past the arm's reach at 45 degrees, and the
microwave stands between the mug and its opening: no carry by the handle gets round it
(over its top the wrist is out of reach, round its ends the door or the reach is in the
way). The mug is then first set down upright on the table in front of the opening by the
ordinary rim grasp (``stage_spot``), and the handle is taken there with the hand tipped
``STAGED_PITCH_RAD`` (the wrist nearer the base), approached from above.

Before the door shuts (``look_inside``), the hand goes in front of the opening and the
wrist camera looks in: the mug and the microwave are clicked and measured, and the mug's
measured centre is checked against the heating region located from the clicked top. (Not
after a set-down in front of an outward opening: see ``look_inside``.)

Frames: the robot base frame (x forward, y left, z up), metres, radians. LIBERO's
microwave opens toward its body's -y; the mug's handle points along its body's +x.
"""

from __future__ import annotations

import math

import numpy as np

from captain_harness.core.geometry import matrix_to_quat
from captain_teacher.boxes import rot_z
from captain_teacher.cells import measure as cells_measure
from captain_teacher.cells import num, vec
from captain_teacher.context import HEAD, WRIST, Step, TeacherContext
from captain_teacher.objects import kind_of, label_of
from captain_teacher.planners.common import (
    TOP_DOWN,
    Plan,
    Target,
    direction_words,
    in_box,
    inside_walls,
    look_and_click,
    pixels,
    short_name,
    target,
    wrist_camera,
)
from captain_teacher.planners.destinations import Destination
from captain_teacher.planners.grasping import back_off_step
from captain_teacher.planners.measuring import move_to_view

#: Mugs the handle grasp knows, by LIBERO model: the middle of the handle's outer bar in the
#: mug's body frame (origin at the bottom's middle), and the middle of its round body, m.
HANDLE_BAR_LOCAL_M: dict[str, tuple[float, float, float]] = {"white_yellow_mug": (0.064, 0.0, 0.056)}
BODY_CENTER_LOCAL_M: dict[str, tuple[float, float]] = {"white_yellow_mug": (-0.0195, 0.0)}
#: The white-and-yellow mug's height and its body's outer radius, m.
MUG_HEIGHT_M = 0.103
MUG_RADIUS_M = 0.054
#: How far the hand is tipped below level while it holds the handle, rad: the palm then
#: rides above and behind the fingers, clear of the mug and of the table.
HANDLE_PITCH_RAD = math.radians(45.0)
#: A mark_point lands on the handle's face toward the camera; the bar's middle is this much
#: further along the line of sight (the bar is about 1.8 cm thick), m.
HANDLE_HALF_DEPTH_M = 0.007
#: The microwave (LIBERO's model, body frame): its top face (x from, x to, y from, y to,
#: height), where the code clicks, and the cavity floor's height, m.
MICROWAVE_TOP_LOCAL_M = (-0.14, 0.15, -0.07, 0.07, 0.188)
MICROWAVE_FLOOR_LOCAL_Z_M = 0.024
#: Where the tool (the middle of the handle's bar) ends when the mug stands inside, in the
#: microwave's body frame (x, y), m: the mug's middle 7 cm inside the front (body y -0.088),
#: its origin 4 cm inside LIBERO's heating region and 2 cm in front of the back wall; the
#: palm, 20 cm wide, stays in front of the opening, its right side just left of the front's
#: right panel (body x >= 0.088) and its left side right of the open door.
INSIDE_TCP_LOCAL_XY_M = (-0.014, -0.098)
#: The mug is carried with its bottom this far above the cavity floor, and slid in from
#: this far outside its place, m.
CARRY_ABOVE_FLOOR_M = 0.014
SLIDE_IN_M = 0.12
#: Where the slide in would start farther than this from the base's vertical axis
#: (horizontally), the mug is first set down in front of the opening, m.
STAGE_BEYOND_M = 0.68
#: The set-down mug's handle bar stands this far outside its place inside (along the way in),
#: m: the mug's round body then clears the microwave's front by about 2 cm.
STAGE_OUT_M = 0.16
#: How far the hand is tipped below level when it takes the handle of a set-down mug, rad
#: (at 45 or 60 degrees the wrist, 12 cm out beyond the handle, is past the arm's reach).
STAGED_PITCH_RAD = math.radians(75.0)
#: The set-down mug also stands this far along the front toward the robot's base from the
#: line it slides in on, m: the handle, at the end of the arm's reach there, comes 2.5 cm
#: nearer the base (a set-down lands within 2-3 cm of its aim; the mug slides in on a slant).
STAGE_ASIDE_M = 0.035


def _slide_start_xy(ctx: TeacherContext, dest: Destination, out_m: float) -> np.ndarray:
    """The handle bar's place ``out_m`` outside its place inside the microwave, base xy, m."""
    into = ctx.scene.yaw(dest.click) + math.pi / 2
    return _local(ctx, dest.click, INSIDE_TCP_LOCAL_XY_M)[:2] - out_m * np.array([math.cos(into), math.sin(into)])


def staged(ctx: TeacherContext, dest: Destination) -> bool:
    """Whether the mug is first set down in front of the opening (see the module
    docstring): the slide in starts farther than ``STAGE_BEYOND_M`` from the base's axis."""
    return float(np.hypot(*_slide_start_xy(ctx, dest, SLIDE_IN_M))) > STAGE_BEYOND_M


def stage_spot(ctx: TeacherContext, obj: str, dest: Destination) -> np.ndarray:
    """Where the mug's box centre goes when it is set down in front of the opening (base
    frame, m): turned as it stands now, its handle bar ``STAGE_OUT_M`` outside its place
    inside and ``STAGE_ASIDE_M`` along the front toward the base."""
    bar = _local(ctx, obj, HANDLE_BAR_LOCAL_M[obj.rsplit("_", 1)[0]])
    box = ctx.scene.box(obj)
    start = _slide_start_xy(ctx, dest, STAGE_OUT_M)
    along = rot_z(ctx.scene.yaw(dest.click))[:2, 0]  # the front's direction
    start = min((start + STAGE_ASIDE_M * along, start - STAGE_ASIDE_M * along), key=lambda p: float(np.hypot(*p)))
    spot = box.center_m.copy()
    spot[:2] += start - bar[:2]
    return spot


#: The mug is set down again when it stands farther than this from its set-down spot, and
#: its handle is taken there when within ``STAGE_TAKEN_WITHIN_M``, m.
STAGE_AGAIN_FROM_M = 0.03
STAGE_TAKEN_WITHIN_M = 0.05


def _at_stage(ctx: TeacherContext, obj: str, dest: Destination, within_m: float) -> bool:
    """Whether the mug stands within ``within_m`` of its set-down spot (``stage_spot``)."""
    return float(np.linalg.norm(ctx.scene.box(obj).center_m[:2] - stage_spot(ctx, obj, dest)[:2])) <= within_m


def set_down_first(ctx: TeacherContext, obj: str, dest: Destination) -> tuple[np.ndarray, str] | None:
    """Where the mug is set down before its handle is taken, and why, in words (see the
    module docstring); None when the slide in is within reach or the mug stands there
    already."""
    if not staged(ctx, dest) or _at_stage(ctx, obj, dest, STAGE_AGAIN_FROM_M):
        return None
    olab = label_of(obj)
    return stage_spot(ctx, obj, dest), (
        f"The {dest.label} stands at the table's side and opens outward, and it stands between the {olab} and its "
        f"opening: held by its handle, the {olab} cannot be carried round it (over its top the wrist would be out "
        f"of reach). I'll first set the {olab} down upright on the table in front of the opening, turned as it "
        "stands, then take it by its handle there.")


def front_loads(ctx: TeacherContext, obj: str, dest: Destination) -> bool:
    """Whether ``obj`` goes into ``dest`` through a front opening by its handle: a mug
    whose handle the teacher knows, into the microwave."""
    base = obj.rsplit("_", 1)[0]
    return (dest.spot_m is None and bool(dest.click) and kind_of(dest.click) == "microwave"
            and base in HANDLE_BAR_LOCAL_M)


def fingers(heading: float, pitch: float) -> np.ndarray:
    """Unit direction of fingers pointing along ``heading`` (rad about base z, from the base
    x axis) and tipped ``pitch`` rad below level (base frame)."""
    return np.array([math.cos(heading) * math.cos(pitch), math.sin(heading) * math.cos(pitch), -math.sin(pitch)])


def level_quat(heading: float, pitch: float) -> np.ndarray:
    """Tool quaternion (w, x, y, z): fingers along ``fingers(heading, pitch)``, the jaws
    closing horizontally across that direction; of the two equivalent jaw senses, the one
    nearer top-down (the wrist turns least)."""
    z = fingers(heading, pitch)
    best: tuple[float, np.ndarray] | None = None
    for sign in (1.0, -1.0):
        x = sign * np.array([-math.sin(heading), math.cos(heading), 0.0])
        q = matrix_to_quat(np.column_stack([x, np.cross(z, x), z]))
        closeness = abs(float(np.dot(q, TOP_DOWN)))
        if best is None or closeness > best[0]:
            best = (closeness, q)
    assert best is not None
    return best[1]


def look_quat(heading: float, pitch: float) -> np.ndarray:
    """Tool quaternion (w, x, y, z) for a look: fingers along ``fingers(heading, pitch)``,
    the jaws closing in the vertical plane (the hand is narrow seen from the side); the
    wrist camera then sits to the right of the fingers."""
    z = fingers(heading, pitch)
    x = np.array([math.cos(heading) * math.sin(pitch), math.sin(heading) * math.sin(pitch), math.cos(pitch)])
    return matrix_to_quat(np.column_stack([x, np.cross(z, x), z]))


def _local(ctx: TeacherContext, name: str, p: tuple[float, ...]) -> np.ndarray:
    """A point given in ``name``'s body frame, in the base frame."""
    q = np.zeros(3)
    q[: len(p)] = p
    return ctx.scene.position(name) + rot_z(ctx.scene.yaw(name)) @ q


def handle_points(ctx: TeacherContext, obj: str) -> np.ndarray:
    """Candidate points to click on the handle's outer bar (base frame): its outer face at
    a few heights."""
    bx, by, bz = HANDLE_BAR_LOCAL_M[obj.rsplit("_", 1)[0]]
    return np.array([_local(ctx, obj, (bx + 0.004, by + dy, bz + dz))
                     for dz in (0.0, -0.01, 0.01) for dy in (0.0, -0.004, 0.004)])


def _body_hides(ctx: TeacherContext, obj: str, eye: np.ndarray, p: np.ndarray) -> bool:
    """Whether the mug's own round body lies on the line of sight from ``eye`` to ``p``."""
    base = obj.rsplit("_", 1)[0]
    c = _local(ctx, obj, BODY_CENTER_LOCAL_M[base])
    bottom = float(ctx.scene.position(obj)[2])
    for t in np.linspace(0.0, 0.97, 60):
        s = eye + t * (p - eye)
        if bottom <= s[2] <= bottom + MUG_HEIGHT_M and float(np.hypot(*(s[:2] - c[:2]))) < MUG_RADIUS_M:
            return True
    return False


def _handle_pixel(ctx: TeacherContext, obj: str) -> tuple[str, tuple[float, float]] | None:
    """The camera and pixel to click on the handle, head camera first; None when neither
    camera sees the bar past the mug's body."""
    for camera in (HEAD, WRIST):
        cam = ctx.cameras.get(HEAD) if camera == HEAD else wrist_camera(ctx)
        if cam is None:
            continue
        for p in handle_points(ctx, obj):
            if _body_hides(ctx, obj, cam.position_m, p):
                continue
            uv = ctx.scene.click(obj, cam, p[None])
            if uv is not None:
                return camera, uv
    return None


def handle_grasp(ctx: TeacherContext, obj: str, dest: Destination) -> Plan:
    """Grasp the mug by its handle and carry it into the microwave (see the module
    docstring); one retry of the grasp when the jaws close on nothing."""
    if staged(ctx, dest) and (ctx.held(obj) or not _at_stage(ctx, obj, dest, STAGE_TAKEN_WITHIN_M)):
        return  # not where the handle can be taken (``pick_place`` sets it down there first)
    for attempt in range(2):
        if ctx.actions_left() < 12 or ctx.requests_left() < 4:
            return
        found = _handle_pixel(ctx, obj)
        if found is None:  # the mug's body hides its handle: look from above
            yield from move_to_view(ctx, obj, why=f"The head camera does not see the {label_of(obj)}'s handle past "
                                                  "its body.")
            found = _handle_pixel(ctx, obj)
        planned = None if found is None else _grasp_step(ctx, obj, dest, attempt, found)
        if planned is None:
            return
        step, top_pt = planned
        fb = yield step
        if fb.values.get("held") is True and ctx.held(obj):
            break
        yield back_off_step(ctx, f"The jaws did not get the {label_of(obj)}'s handle.")
    else:
        return
    yield _insert_step(ctx, obj, dest, top_pt)


def top_click(ctx: TeacherContext, name: str) -> tuple[str, tuple[float, float], np.ndarray] | None:
    """Where to click the microwave's top: the camera, the pixel and the point (base frame),
    the seen point of the top face nearest its middle (the head camera sees the microwave
    near its edge); None when no camera sees the top."""
    x0, x1, y0, y1, z = MICROWAVE_TOP_LOCAL_M
    grid = [(x, y) for x in np.linspace(x0, x1, 7) for y in np.linspace(y0, y1, 5)]
    grid.sort(key=lambda p: float(np.hypot(p[0] - 0.5 * (x0 + x1), p[1] - 0.5 * (y0 + y1))))
    for x, y in grid:
        p = _local(ctx, name, (x, y, z))
        found = pixels(ctx, [Target("mw_top", "", "point", "point", p[None], (name,))], HEAD)
        if found is not None:
            return found[0], found[1]["mw_top"], p
    return None


def _grasp_step(ctx: TeacherContext, obj: str, dest: Destination, attempt: int,
                found: tuple[str, tuple[float, float]]) -> tuple[Step, np.ndarray] | None:
    """The request that clicks the handle (``found``: the camera and pixel) and the
    microwave's top, grasps the handle and lifts the mug to the carrying height; also
    returns the top's clicked point. None when no camera sees the microwave's top."""
    olab, dlab = label_of(obj), dest.label
    top = top_click(ctx, dest.click)
    if top is None:
        return None
    top_cam, top_uv, top_pt = top
    camera, uv = found
    base = obj.rsplit("_", 1)[0]
    bar = _local(ctx, obj, HANDLE_BAR_LOCAL_M[base])
    body = _local(ctx, obj, BODY_CENTER_LOCAL_M[base])
    yaw = ctx.scene.yaw(dest.click)
    into = yaw + math.pi / 2
    is_staged = staged(ctx, dest)
    # from the handle toward the mug's middle; set down in front of the opening, the mug's handle
    # already points out of it: the hand takes it as it will slide it in (tipped 75 deg, the two
    # jaw senses are about as near top-down, and a turn of the held mug to the other would swing
    # it about the handle)
    heading = into if is_staged else math.atan2(*(body[:2] - bar[:2])[::-1])
    pitch = STAGED_PITCH_RAD if is_staged else HANDLE_PITCH_RAD
    q_grasp = level_quat(heading, pitch)
    ahead = fingers(heading, pitch)
    bar_below_top = MUG_HEIGHT_M - HANDLE_BAR_LOCAL_M[base][2]
    floor_below_top = MICROWAVE_TOP_LOCAL_M[4] - MICROWAVE_FLOOR_LOCAL_Z_M
    lines = [
        f'v = need(robot.observe(), "observe")\nimage(v["images"][{0 if camera == HEAD else 1}])',
        _mark_point_line("h", camera, uv, f"{olab} handle"),
        _mark_point_line("mw_top", top_cam, top_uv, f"{dlab} top"),
        'print("handle:", np.round(h, 4).tolist(), "microwave top:", np.round(mw_top, 4).tolist())',
        f'eye = np.array(v["cameras"]["{camera}"]["T_base_camera"])[:3, 3]',
        f"grasp = h + {num(HANDLE_HALF_DEPTH_M, 3)} * (h - eye) / np.linalg.norm(h - eye)  # the bar's middle, "
        "behind the face the click landed on",
        f'grasp[2] = o["top_z_m"] - {num(bar_below_top, 3)}  # the bar\'s middle is '
        f"{num(bar_below_top * 100, 1)} cm below the rim",
        f"q = {vec(q_grasp, 4)}  # fingers toward the {olab}'s middle, tipped "
        f"{round(math.degrees(pitch))}° down, jaws across the handle",
        f"ahead = np.array({vec(ahead, 4)})  # the fingers' direction",
        f"floor = mw_top[2] - {num(floor_below_top, 3)}  # the cavity's floor, {num(floor_below_top * 100, 1)} cm "
        f"below the {dlab}'s top",
        f"lift = grasp.copy()\nlift[2] = floor + {num(HANDLE_BAR_LOCAL_M[base][2] + CARRY_ABOVE_FLOOR_M, 3)}"
        f"  # the bottom {num(CARRY_ABOVE_FLOOR_M * 100, 1)} cm above that floor",
        'if val(robot.gripper_state(), "gripper_open_fraction") < 0.9:\n    robot.move_to(gripper="open")',
        *([f"above = grasp + np.array({vec(np.array([math.cos(into), math.sin(into), 0.0]) * 0.08)})"
           f"\nabove[2] = mw_top[2] + 0.1  # over the front of the {dlab}'s opening, clear of its top",
           f"r = go(above, downq(0.0), speed={num(ctx.style.approach_speed_m_s)})",
           'if r["success"]:\n    r = go(above, q, speed=0.1)  # tipped there, clear of everything',
           'if r["success"]:\n    r = go(grasp + [0, 0, 0.09], q, speed=0.05)  # straight above the handle']
          if is_staged else [f"r = go(grasp - 0.1 * ahead, q, speed={num(ctx.style.approach_speed_m_s)})"]),
        'if r["success"]:\n    r = go(grasp, q, speed=0.03)',
        'print("reached:", r["success"], (r.get("value") or {}).get("stopped_reason"))',
        'c = robot.move_to(gripper="close")\nprint("held:", val(c, "held"))',
        'if val(c, "held"):\n    r = go(lift, q, speed=0.05, mode="manipulation")\n    print("lifted:", r["success"])',
    ]
    ctx.tcp_quaternion = q_grasp
    ctx.last_grasp_xy = bar[:2]
    ctx.front_top = top_pt
    toward = direction_words(np.array([math.cos(yaw - math.pi / 2), math.sin(yaw - math.pi / 2)]))
    again = "Again: " if attempt else ""
    reasoning = (f"{again}The {dlab} is closed on top and opens {toward}, and the {olab} is too tall for a top-down "
                 f"hand inside it and too wide for the jaws across its body. I'll take it by its handle: click the "
                 f"handle and a point on the {dlab}'s top, close the jaws across the handle's bar with "
                 f"the fingers toward the {olab}'s middle and the hand tipped down, and lift it just above the "
                 f"height of the {dlab}'s floor.")
    return Step(reasoning, ["\n".join(lines)]), top_pt


def _insert_step(ctx: TeacherContext, obj: str, dest: Destination, top_pt: np.ndarray) -> Step:
    """The request that turns the held mug to lead, slides it in through the front, sets it
    down, lets go and backs out."""
    olab, dlab = label_of(obj), dest.label
    yaw = ctx.scene.yaw(dest.click)
    into = yaw + math.pi / 2  # the microwave's body +y: from the front into the cavity
    pitch = STAGED_PITCH_RAD if staged(ctx, dest) else HANDLE_PITCH_RAD
    q_in = level_quat(into, pitch)
    inside = _local(ctx, dest.click, INSIDE_TCP_LOCAL_XY_M)
    shift = inside[:2] - top_pt[:2]
    u = np.array([math.cos(into), math.sin(into)])
    ahead = fingers(into, pitch)
    bar_z = HANDLE_BAR_LOCAL_M[obj.rsplit("_", 1)[0]][2]
    lines = [
        f"q = {vec(q_in, 4)}  # fingers into the {dlab}, so the {olab} leads",
        f"into = np.array({vec(np.append(u, 0.0), 4)})  # from the front into the cavity",
        f"ahead = np.array({vec(ahead, 4)})",
        f"place = mw_top + {vec(np.append(shift, 0.0))}  # the handle's place: the {olab}'s middle 8 cm inside "
        "the front, the hand outside",
        f"place[2] = floor + {num(bar_z + 0.004, 3)}  # the bottom just above the floor",
        f"carry = place + [0, 0, {num(CARRY_ABOVE_FLOOR_M - 0.004, 3)}]",
        f'r = go(carry - {num(SLIDE_IN_M)} * into, q, speed=0.05, mode="manipulation")  # in front of the opening',
        'if r["success"]:\n    r = go(carry, q, speed=0.05, mode="manipulation")',
        'print("slid in:", r["success"], (r.get("value") or {}).get("stopped_reason"))',
        'if r["success"]:\n    r = go(place, q, speed=0.03, mode="manipulation")',
        'opened = robot.move_to(gripper="open")',
        'r = go(place - 0.1 * ahead, q, speed=0.05)  # back out along the fingers',
        'print("backed out:", r["success"])',
        'r = go(place - 0.1 * ahead + [0, 0, 0.1], downq(0.0), speed=0.1)',
        f"r = go(home, downq(0.0), speed={num(ctx.style.approach_speed_m_s)})  # out of the head camera's view",
    ]
    if ctx.style.notes:
        lines.append(f'with open("NOTES.md", "a") as f:\n    f.write("- slid the {olab} into the {dlab} by its '
                     'handle\\n")')
    ctx.tcp_quaternion = TOP_DOWN.copy()
    turn = "it already leads" if staged(ctx, dest) else f"I'll turn the hand so the {olab} leads"
    reasoning = (f"The {olab} hangs from its handle; {turn}. I'll line it up in front of the opening, slide it in "
                 "level just above the floor, set it down, open, and back the hand out along the fingers.")
    return Step(reasoning, ["\n".join(lines)])


def _mark_point_line(var: str, camera: str, uv: tuple[float, float], label: str) -> str:
    """Click a pixel as a point and keep its base-frame position (m) in ``var``."""
    u, v = uv
    return (f'{var} = np.array(need(robot.mark_point(v["observation_handle"], "{camera}", {num(u)}, '
            f'{num(v)}, label="{label}", granularity="point"), "mark {label}")["position_m"])')


#: The wrist camera's look into the microwave through its open front, in the microwave's body
#: frame (m): the tool in front of the opening, low enough to see the mug's foot (the
#: segmenter needs it to cut the mug away from the floor it stands on) and beside the mug's
#: line so that the camera (5.4 cm to the side of the fingers) looks straight in; the hand
#: tipped ``LOOK_PITCH_RAD`` below level with its jaws up-down (narrow from the side: clear
#: of the open door).
LOOK_TCP_LOCAL_M = (-0.041, -0.31, 0.102)
LOOK_PITCH_RAD = math.radians(32.0)
#: Candidate clicks on the microwave seen through its front: its back wall and the floor's
#: back corners, in its body frame (m).
INSIDE_POINTS_LOCAL_M = tuple((x, 0.079, z) for z in (0.1, 0.14, 0.06) for x in (-0.12, -0.09, 0.03, -0.06, 0.0))


def look_inside(ctx: TeacherContext, obj: str, dest: Destination, part: str, var: str = "shut_ok") -> Plan:
    """Before the door shuts: move the hand in front of the opening, look in with the wrist
    camera, click the mug and the microwave's inside, measure them, and check the mug's
    measured centre against the heating region located from the top clicked before the
    grasp (``ctx.front_top``). Prints ``inside before shutting: True|False`` into ``var``."""
    top_pt = ctx.front_top
    if top_pt is None or staged(ctx, dest):
        # In front of an opening at the table's side (``staged``) the usual view is past the
        # arm's reach, and from every view that is not (in the simulator: 11 to 14 cm in front
        # of the opening, 10 to 18 cm over the floor, tipped 35 to 55 deg) perception takes
        # the mug and the microwave's inside as one region, or a click lands on the handle
        # sticking out of the opening and measures it alone (2 cm across): no measurement is
        # made, and the final check names the goal as not measured.
        return
    olab, dlab = label_of(obj), label_of(part)
    yaw = ctx.scene.yaw(dest.click)
    into = yaw + math.pi / 2
    view_shift = _local(ctx, dest.click, LOOK_TCP_LOCAL_M) - top_pt
    q_look = look_quat(into, LOOK_PITCH_RAD)
    ctx.tcp_quaternion = q_look
    fb = yield Step(
        f"Before I shut the {dlab}: once it is shut no camera sees inside, and the head camera does not see in "
        f"through the front. I'll move the hand in front of the opening and look in with the wrist camera.",
        [f"view = mw_top + {vec(view_shift)}  # in front of the opening, low, from the {dlab}'s top clicked "
         "before\n"
         f"r = go(view + [0, 0, 0.1], {vec(q_look, 4)}, speed={num(ctx.style.approach_speed_m_s)})  # over the "
         f"open door, tipped {round(math.degrees(LOOK_PITCH_RAD))}° down\n"
         f'if r["success"]:\n    r = go(view, {vec(q_look, 4)}, speed=0.05)  # down in front of the opening, '
         "looking in\n"
         'print("moved:", r["success"])'])
    home = (f"r = go(view + [0, 0, 0.1], {vec(q_look, 4)}, speed=0.05)  # back up over the door\n"
            f"r = go(home, downq(0.0), speed={num(ctx.style.approach_speed_m_s)})  # out of the head camera's view")
    if fb is None or fb.values.get("moved") is not True:
        ctx.tcp_quaternion = TOP_DOWN.copy()
        yield Step(f"The hand could not get in front of the {dlab}'s opening. I'll move it back out of the head "
                   "camera's view.", [home])
        return
    inside = np.array([_local(ctx, dest.click, p) for p in INSIDE_POINTS_LOCAL_M])
    ov, dv = short_name(obj) + "_s", short_name(dest.click) + "_s"
    found = look_and_click(ctx, [target(ov, obj, ignore=(dest.click,)),
                                 target(dv, dest.click, points=inside)],
                           prefer=WRIST)
    ctx.tcp_quaternion = TOP_DOWN.copy()
    if found is None or found[0] != WRIST:
        yield Step(f"The wrist camera does not see the {olab} inside the {dlab} from here. I'll move the hand back "
                   "out of the head camera's view.", [home])
        return
    region_c = dest.region_center_m(ctx.scene)
    shift = region_c[:2] - top_pt[:2]
    hx, hy = dest.half_xy_m()
    shown, inside_check = inside_walls("ins", olab, dlab)
    lines = [*found[1], home, cells_measure("ins", ov, dv),
             f'ins_off = np.array(ins["object"]["center_xy_m"]) - (mw_top[:2] + {vec(shift)})  # from the heating '
             f"region's centre, located from the {dlab}'s top clicked before",
             f"ins_in = {in_box('ins_off', yaw, (hx, hy))}  # within its "
             f"{num(2 * hx * 100, 1)} x {num(2 * hy * 100, 1)} cm",
             f'print("{olab} in the {dlab}\'s heating region:", ins_in, np.round(ins_off, 4).tolist())',
             shown,
             f'{var} = ins_in and {inside_check}\n'
             f'print("inside before shutting:", {var})']
    fb = yield Step(f"From here the wrist camera sees the {olab} inside the {dlab}. I'll click both, move the hand "
                    f"back out of the way, and measure the {olab} against the heating region, located from the "
                    f"{dlab}'s top I clicked before the grasp.", ["\n".join(lines)])
    return fb
