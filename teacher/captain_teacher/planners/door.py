"""Closing the microwave door: the closed fingertips, pointing straight down, push the
door's outer face near its top edge along its swing, in a few short straight pushes.

The hand stays top-down the whole way. A hand turned to push fingers first has to turn
its wrist through the door's whole swing (up to 120 degrees), which the arm cannot do
from most starts; a top-down hand needs no wrist turn. The fingertips ride
``DOOR_PUSH_BELOW_TOP_M`` below the door's top edge, so the palm passes above the
microwave's top as the door shuts.

Evidence: how far open the door still is where the fingertips stopped, from their
measured position about the hinge (``door_open_rad``, ``planners.evidence``). The hinge
comes from the point the handle grasp clicked on the microwave's top when there is one
(``ctx.front_top``), else from the teacher's view of the scene.

Frames: the robot base frame (x forward, y left, z up), metres, radians. LIBERO's
microwave door swings about a vertical hinge at its front-left corner; its joint is 0
when shut and negative when open; LIBERO counts it closed above -0.005 rad.
"""

from __future__ import annotations

import math

import numpy as np

from captain_teacher.boxes import rot_z
from captain_teacher.cells import num, vec
from captain_teacher.context import Step, TeacherContext
from captain_teacher.planners.common import TOP_DOWN, Plan, PlanError
from captain_teacher.planners.grasping import quat_for_jaw

MICROWAVE_CLOSED_RAD = -0.005
#: The door's hinge in the microwave's body frame, m (at mid-height of the door).
DOOR_HINGE_LOCAL_M = (-0.173, -0.088, 0.096)
#: The door's top edge above the microwave's body origin, m.
DOOR_TOP_LOCAL_Z_M = 0.188
#: How far from the hinge the fingertips push, m (the door is 26 cm wide; its handle
#: stands out near its free end).
DOOR_PUSH_RADIUS_M = 0.17
#: The door's outer face lies this far outside the line through its hinge, m, and the
#: closed fingers reach 1.1 cm to either side of the tool point: the tool touches the face
#: this far from the hinge line.
DOOR_TOUCH_OUT_M = 0.036
#: The pushes aim this far outside the hinge line (3 mm into the face of a shut door, so
#: the last push presses it shut without forcing it against its stop), m.
DOOR_PUSH_OUT_M = 0.033
#: The fingertips ride this far below the door's top edge, m.
DOOR_PUSH_BELOW_TOP_M = 0.022
#: Swing step between pushes, rad.
DOOR_STEP_RAD = 0.3


def door_hinge(ctx: TeacherContext, name: str) -> np.ndarray:
    """The door's hinge, base frame, m."""
    return ctx.scene.position(name) + rot_z(ctx.scene.yaw(name)) @ np.asarray(DOOR_HINGE_LOCAL_M)


def swing_points(ctx: TeacherContext, name: str, angle: float) -> list[np.ndarray]:
    """Tool positions (base frame, m) pushing the door from its joint ``angle`` (rad) shut:
    one per ``DOOR_STEP_RAD``, on the door's outer side, the last at the shut door."""
    yaw0 = ctx.scene.yaw(name)
    hinge = door_hinge(ctx, name)
    z = float(ctx.scene.position(name)[2]) + DOOR_TOP_LOCAL_Z_M - DOOR_PUSH_BELOW_TOP_M
    pts = []
    for th in [*np.arange(yaw0 + angle, yaw0 - 0.03, DOOR_STEP_RAD), yaw0]:
        u = np.array([math.cos(th), math.sin(th)])
        out = np.array([math.sin(th), -math.cos(th)])  # the door's outer side
        p = hinge[:2] + DOOR_PUSH_RADIUS_M * u + DOOR_PUSH_OUT_M * out
        pts.append(np.array([p[0], p[1], z]))
    return pts


def close_door(ctx: TeacherContext, name: str) -> Plan:
    """Close the microwave door (see the module docstring); a second try when it is not
    shut after the first."""
    scene = ctx.scene
    st = ctx.style
    joint = next((j for j in scene.snapshot.articulated_joints if j.startswith(name)), None)
    if joint is None:
        raise PlanError(f"{name} has no door joint")
    yaw0 = scene.yaw(name)
    hinge = door_hinge(ctx, name)
    q = quat_for_jaw(math.pi / 2)  # top-down, the jaws along the base x axis
    for attempt in range(2):
        angle = float(ctx.scene.snapshot.articulated_joints[joint])
        if angle > MICROWAVE_CLOSED_RAD:
            return
        pts = swing_points(ctx, name, angle)
        out0 = np.array([math.sin(yaw0 + angle), -math.cos(yaw0 + angle), 0.0])
        start = pts[0] + 0.05 * out0
        if ctx.front_top is not None:
            hinge_line = (f"hinge = mw_top + {vec(hinge - ctx.front_top)}  # the door's hinge, from the microwave's "
                          "top clicked before")
            swing = "swing = [hinge + d for d in (" + ", ".join(vec(p - hinge) for p in pts) + ")]"
        else:
            hinge_line = f"hinge = np.array({vec(hinge)})  # the door's hinge"
            swing = "swing = [np.array(p) for p in (" + ", ".join(vec(p) for p in pts) + ")]"
        ctx.part_measurements[name] = ("door_open_rad", -MICROWAVE_CLOSED_RAD)
        lines = [hinge_line, swing, f"start = swing[0] + {vec(start - pts[0])}  # outside the door",
                 f"q = {vec(q, 4)}  # top-down, closed fingertips {num(DOOR_PUSH_BELOW_TOP_M * 100, 1)} cm below the "
                 "door's top edge",
                 f"r = go(start + [0, 0, 0.12], q, speed={num(st.approach_speed_m_s)})",
                 'robot.move_to(gripper="close")',
                 'r = go(start, q, speed=0.05)',
                 "# push along the door's swing, a few short straight pushes",
                 'for p in swing:\n    r = go(p, q, speed=0.04, mode="manipulation")\n'
                 '    if not r["success"]:\n        break',
                 'print("pushed:", r["success"], (r.get("value") or {}).get("stopped_reason"))',
                 "tip = np.array(val(robot.get_robot_state(), 'end_effector_position_m'))",
                 f"door_open_rad = {num(yaw0 - math.atan2(DOOR_TOUCH_OUT_M, DOOR_PUSH_RADIUS_M))} - math.atan2("
                 "tip[1] - hinge[1], tip[0] - hinge[0])  # how far open the door is where the fingertips pushed it",
                 'print("door_open_rad:", round(door_open_rad, 3))',
                 f"away = tip + {vec(0.05 * np.array([math.sin(yaw0), -math.cos(yaw0), 0.0]))}  # off the door",
                 "r = go(away, q, speed=0.05)",
                 "r = go(away + [0, 0, 0.12], q, speed=0.05)",
                 f"r = go(home, downq(0.0), speed={num(st.approach_speed_m_s)})"]
        ctx.tcp_quaternion = TOP_DOWN.copy()
        reasoning = ("The microwave door is open and swings about its hinge at the front-left corner. I'll push its "
                     "outer face near the top edge with the closed fingertips, the hand straight down, along its "
                     "swing until it shuts." if attempt == 0 else
                     "The door is not fully shut yet; I'll push it along its swing once more from where it is.")
        yield Step(reasoning, ["\n".join(lines)])
