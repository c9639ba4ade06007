"""Pieces shared by the planners: choosing a camera and pixels for a set of objects,
writing the observe-and-click part of a cell, session variable names and words for
directions, the error a planner raises when it cannot continue."""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import captain_teacher.cells as cells
from captain_harness.core.episode.gate import INSIDE_MARGIN_M
from captain_teacher.boxes import Box, rot_z
from captain_teacher.context import HEAD, WRIST, Step, TeacherContext
from captain_teacher.feedback import Feedback
from captain_teacher.objects import kind_of, label_of
from captain_teacher.planners.destinations import Destination
from captain_teacher.scene import CameraModel

#: A planner: yields steps, receives the next request's feedback.
Plan = Generator[Step, Feedback, Any]


@dataclass(frozen=True)
class Target:
    """One thing to click: its session variable, its snapshot name, its label, the
    granularity of the click and optional candidate points (base frame) to click on."""

    var: str
    name: str
    label: str
    granularity: str = "object"
    points: np.ndarray | None = None
    ignore: tuple[str, ...] = ()


def target(var: str, name: str, granularity: str = "object", points: np.ndarray | None = None,
           ignore: Sequence[str] = ()) -> Target:
    """A click target with the object's usual label."""
    return Target(var, name, label_of(name), granularity, points, tuple(ignore))


def spot_target(var: str, spot_m: np.ndarray) -> Target:
    """A point on the table to click."""
    return Target(var, "", "free spot on the table", "point", np.asarray(spot_m, float)[None])


def wrist_camera(ctx: TeacherContext) -> CameraModel | None:
    """The wrist camera at the current tool pose (from the snapshot and the orientation
    the teacher last commanded)."""
    if ctx.tcp_quaternion is None:
        return None
    return wrist_camera_at(ctx, ctx.scene.ee_m, ctx.tcp_quaternion)


def wrist_camera_at(ctx: TeacherContext, position_m: np.ndarray, quaternion: np.ndarray) -> CameraModel | None:
    """The wrist camera with the tool at ``position_m`` (base frame, m) and ``quaternion``
    ([w, x, y, z]); None while its mount or intrinsics are not known."""
    if ctx.T_tcp_wrist is None or WRIST not in ctx.cameras:
        return None
    from captain_teacher.context import pose

    T_base_tcp = pose(np.asarray(position_m, dtype=float), np.asarray(quaternion, dtype=float))
    return CameraModel(WRIST, ctx.cameras[WRIST].K, T_base_tcp @ ctx.T_tcp_wrist)


def pixels(ctx: TeacherContext, targets: Sequence[Target], prefer: str = HEAD
           ) -> tuple[str, dict[str, tuple[float, float]]] | None:
    """A camera that sees every target and the pixel to click on each, trying ``prefer``
    first; None when no camera sees them all from the current pose."""
    order = [prefer] + [c for c in (HEAD, WRIST) if c != prefer]
    scene = ctx.scene
    for name in order:
        cam = ctx.cameras.get(HEAD) if name == HEAD else wrist_camera(ctx)
        if cam is None:
            continue
        picks = {}
        for t in targets:
            if t.name:
                uv = scene.click(t.name, cam, t.points, ignore=t.ignore)
            else:
                uv = scene.click_point(t.points[0], cam, ignore=t.ignore) if t.points is not None else None
            if uv is None:
                break
            picks[t.var] = uv
        else:
            return name, picks
    return None


def seen_by(ctx: TeacherContext, targets: Sequence[Target], camera: str) -> bool:
    """Whether ``camera`` sees every target from the current pose."""
    found = pixels(ctx, targets, camera)
    return found is not None and found[0] == camera


def look_and_click(ctx: TeacherContext, targets: Sequence[Target], prefer: str = HEAD,
                   observe_first: bool = True) -> tuple[str, list[str]] | None:
    """Source lines that observe (optionally) and click every target; also returns the
    camera used. None when no camera sees all targets from here."""
    found = pixels(ctx, targets, prefer)
    if found is None:
        return None
    camera, picks = found
    attach = [camera] if not ctx.style.attach_wrist or camera == WRIST else [HEAD, WRIST]
    lines = [cells.observe(attach=attach, print_tcp=True)] if observe_first else []
    for t in targets:
        lines.append(cells.mark(t.var, camera, picks[t.var], t.label, t.granularity))
    return camera, lines


def look_and_click_each(ctx: TeacherContext, groups: Sequence[Sequence[Target]], prefer: Sequence[str]
                        ) -> list[str] | None:
    """Source lines that observe once and click each group of targets in the camera that
    sees the whole group, trying ``prefer[i]`` first for group ``i`` (a target two groups
    share is clicked once). None when some group is seen whole by no camera from here."""
    chosen: list[tuple[str, list[Target], dict[str, tuple[float, float]]]] = []
    done: set[str] = set()
    for group, first in zip(groups, prefer, strict=True):
        todo = [t for t in group if t.var not in done]
        if not todo:
            continue
        found = pixels(ctx, todo, first)
        if found is None:
            return None
        chosen.append((found[0], todo, found[1]))
        done |= {t.var for t in todo}
    used = {camera for camera, _, _ in chosen}
    attach = [c for c in (HEAD, WRIST) if c in used or (ctx.style.attach_wrist and c == WRIST)]
    lines = [cells.observe(attach=attach, print_tcp=True)]
    for camera, todo, picks in chosen:
        lines += [cells.mark(t.var, camera, picks[t.var], t.label, t.granularity) for t in todo]
    return lines


def view_pose_above(ctx: TeacherContext, name: str, height_m: float = 0.22, back_m: float = 0.06) -> np.ndarray:
    """A tool position above an object from which the wrist camera looks down on it
    (the camera sits ahead of the fingers, so the tool stays ``back_m`` nearer the robot)."""
    box = ctx.scene.box(name)
    p = box.center_m.copy()
    p[0] -= back_m
    p[2] = box.top_z_m + height_m
    return p


def fmt_goal(predicate: str, args: Sequence[str]) -> str:
    """``On(a, b)`` as text."""
    return f"{predicate.capitalize()}({', '.join(args)})"


TOP_DOWN = np.array([0.0, 2**-0.5, 2**-0.5, 0.0])


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


def printed_measurement(ctx: TeacherContext, key: str) -> dict | None:
    """The last measurement the session printed under ``key``."""
    for values in reversed(ctx.printed_history):
        v = values.get(key)
        if isinstance(v, dict) and "center" in v:
            return v
    return None


def in_box(off: str, yaw: float, half_xy: tuple[float, float]) -> str:
    """Source of the check that the session's x-y offset ``off`` (m, from a region's centre)
    lies within the region's half sizes ``half_xy`` (m) along its sides, turned ``yaw`` (rad)."""
    c, s = math.cos(yaw), math.sin(yaw)
    hx, hy = half_xy
    return (f"abs({cells.num(c)} * {off}[0] + {cells.num(s)} * {off}[1]) <= {cells.num(hx)} and "
            f"abs({cells.num(-s)} * {off}[0] + {cells.num(c)} * {off}[1]) <= {cells.num(hy)}")


def inside_walls(var: str, olab: str, dlab: str) -> tuple[str, str]:
    """For the measurement ``var`` of an object in a container: the source line that prints
    the object's lowest seen point against the container's measured top, and the check that
    it lies ``INSIDE_MARGIN_M`` below it (the gate's standard for ``In``)."""
    low, top = f'{var}["object"]["lowest_point_z_m"]', f'{var}["destination"]["top_z_m"]'
    shown = (f'print("{olab} inside the {dlab}\'s walls:", round({low}, 4), "<=", round({top}, 4), '
             f'"- {cells.num(INSIDE_MARGIN_M)}")')
    return shown, f"{low} <= {top} - {cells.num(INSIDE_MARGIN_M)}"
