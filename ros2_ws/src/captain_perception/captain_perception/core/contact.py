"""How the jaws would meet an object at a given tool pose, and what a release would do.

Tool frame (the harness's TCP frame, see ``captain_harness.core.kinematics``): origin at
the tool centre point midway between the finger pads, **z** the approach direction
(out of the palm along the fingers), **x** the jaw-closing axis (finger to finger),
**y** = z × x. The quaternion ``[0, 2**-0.5, 2**-0.5, 0]`` points z down with the jaws
closing along the base y axis.

The gripper is modelled as two finger boxes that slide along x: each is
``finger_thickness_m`` thick along x, ``finger_width_m`` wide along y and spans z from
``tip_beyond_tcp_m`` (the fingertips) back to ``tip_beyond_tcp_m - finger_length_m``
(the palm). Points are the object's observed points (and, for obstruction, the other
points of the same camera frame), all in the robot base frame, metres.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class GripperGeometry:
    """Dimensions of a parallel-jaw gripper (Panda hand defaults), metres.

    Attributes:
        max_opening_m: distance between the finger pads when fully open.
        finger_length_m: from the fingertips back to the palm, along the approach axis.
        finger_width_m: finger extent across the closing axis (tool y).
        finger_thickness_m: finger extent along the closing axis (tool x).
        tip_beyond_tcp_m: how far the fingertips reach beyond the TCP along the approach.
    """

    max_opening_m: float = 0.08
    finger_length_m: float = 0.05
    finger_width_m: float = 0.02
    finger_thickness_m: float = 0.012
    tip_beyond_tcp_m: float = 0.01


def to_tool(points_base: np.ndarray, position_m: np.ndarray, R_base_tool: np.ndarray) -> np.ndarray:
    """Base-frame points (N, 3) expressed in the tool frame at the given pose."""
    return (np.asarray(points_base, float) - np.asarray(position_m, float)) @ np.asarray(R_base_tool, float)


def inspect_contact(object_points: np.ndarray, position_m: np.ndarray, R_base_tool: np.ndarray,
                    gripper: GripperGeometry, *, opening_m: float | None = None,
                    support_z_m: float | None = None, obstacle_points: np.ndarray | None = None
                    ) -> dict[str, Any]:
    """How the jaws meet the object at a TCP pose (see the module docstring).

    Returns a dict with:
        ``points_between_jaws``: object points inside the jaws' sweep (between and under
        the open fingers); ``points_in_finger_paths``: those where a finger itself would go;
        ``width_needed_m``: extent of the swept points along the closing axis (what the
        jaws must open to take them);
        ``fits``: the width is below the opening (``opening_m`` or the maximum) and no
        finger comes down on the object;
        ``straddles``: the points lie on both sides of the TCP along the closing axis, so
        both fingers close onto the object;
        ``centre_offset_m``: middle of those points along the closing axis (0 = centred);
        ``clearance_m``: gap between each open finger and the object (negative: the finger
        would hit the object on the way in), ``min_clearance_m`` the smaller one;
        ``contact_depth_m``: how far along the fingers the object reaches;
        ``palm_contact``: object points behind the palm plane inside the hand's outline;
        ``fingertip_height_above_support_m``: fingertip height over the supporting surface;
        ``obstructed_fingers``: fingers whose volume (open) holds other scene points;
        ``closing_axis_base`` / ``approach_axis_base``: the tool axes in the base frame.
    """
    R = np.asarray(R_base_tool, float)
    opening = gripper.max_opening_m if opening_m is None else float(opening_m)
    p = to_tool(object_points, position_m, R)
    tip = gripper.tip_beyond_tcp_m
    palm = tip - gripper.finger_length_m
    half_w = gripper.finger_width_m / 2.0
    reach = opening / 2 + gripper.finger_thickness_m
    in_sweep = (np.abs(p[:, 1]) <= half_w) & (p[:, 2] <= tip) & (p[:, 2] >= palm) & (np.abs(p[:, 0]) <= reach)
    between = p[in_sweep]
    in_fingers = int((np.abs(between[:, 0]) >= opening / 2).sum()) if len(between) else 0
    out: dict[str, Any] = {
        "closing_axis_base": R[:, 0].round(4).tolist(),
        "approach_axis_base": R[:, 2].round(4).tolist(),
        "opening_m": opening,
        "points_between_jaws": len(between),
        "points_in_finger_paths": in_fingers,
    }
    if len(between):
        xmin, xmax = float(np.percentile(between[:, 0], 1)), float(np.percentile(between[:, 0], 99))
        width = xmax - xmin
        clear_pos = opening / 2 - max(xmax, 0.0)
        clear_neg = opening / 2 + min(xmin, 0.0)
        out.update(
            width_needed_m=width,
            fits=bool(width < opening and in_fingers < 3),
            straddles=bool(xmin < 0.0 < xmax),
            centre_offset_m=0.5 * (xmin + xmax),
            clearance_m={"positive_jaw": clear_pos, "negative_jaw": clear_neg},
            min_clearance_m=min(clear_pos, clear_neg),
            contact_depth_m=float(min(tip, between[:, 2].max()) - max(palm, between[:, 2].min())),
        )
    else:
        out.update(width_needed_m=0.0, fits=True, straddles=False, centre_offset_m=None,
                   clearance_m=None, min_clearance_m=None, contact_depth_m=0.0)
    hand_half_x = opening / 2 + gripper.finger_thickness_m
    behind = (p[:, 2] < palm) & (p[:, 2] > palm - 0.03) & (np.abs(p[:, 0]) <= hand_half_x) & \
             (np.abs(p[:, 1]) <= max(half_w, 0.03))
    out["palm_contact"] = bool(behind.sum() >= 3)
    tip_base = np.asarray(position_m, float) + R[:, 2] * tip
    out["fingertip_position_m"] = tip_base.round(5).tolist()
    out["fingertip_height_above_support_m"] = None if support_z_m is None else float(tip_base[2] - support_z_m)
    obstructed: list[str] = []
    if obstacle_points is not None and len(obstacle_points):
        q = to_tool(obstacle_points, position_m, R)
        if support_z_m is not None:
            q = q[np.asarray(obstacle_points)[:, 2] > support_z_m + 0.004]
        near = (np.abs(q[:, 1]) <= half_w) & (q[:, 2] <= tip) & (q[:, 2] >= palm)
        for name, sign in (("positive_jaw", 1.0), ("negative_jaw", -1.0)):
            s = sign * q[:, 0]
            hit = near & (s >= opening / 2) & (s <= opening / 2 + gripper.finger_thickness_m)
            if hit.sum() >= 3:
                obstructed.append(name)
    out["obstructed_fingers"] = obstructed
    return out


def predict_release(object_center_m: np.ndarray, object_bottom_z_m: float, tcp_now_m: np.ndarray,
                    release_position_m: np.ndarray, R_now: np.ndarray | None = None,
                    R_release: np.ndarray | None = None) -> dict[str, Any]:
    """Where a held object would be if the TCP moved to the release pose, carrying it rigidly.

    Returns ``predicted_center_m``, ``predicted_bottom_z_m`` and ``held_offset_m`` (object
    centre minus TCP now, base frame).
    """
    c = np.asarray(object_center_m, float)
    offset = c - np.asarray(tcp_now_m, float)
    rotated = offset
    if R_now is not None and R_release is not None:
        rotated = np.asarray(R_release) @ np.asarray(R_now).T @ offset
    centre = np.asarray(release_position_m, float) + rotated
    bottom = float(object_bottom_z_m - c[2] + centre[2])
    return {"predicted_center_m": centre, "predicted_bottom_z_m": bottom, "held_offset_m": offset}
