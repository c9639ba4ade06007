"""Pieces shared by the planners: choosing a camera and pixels for a set of objects,
writing the observe-and-click part of a cell, and the final verification."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import captain_harness.core.teacher.cells as cells
from captain_harness.core.teacher.context import HEAD, WRIST, Step, TeacherContext
from captain_harness.core.teacher.feedback import Feedback
from captain_harness.core.teacher.objects import label_of
from captain_harness.core.teacher.scene import CameraModel

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
    if ctx.T_tcp_wrist is None or ctx.tcp_quaternion is None or WRIST not in ctx.cameras:
        return None
    from captain_harness.core.teacher.context import pose

    T_base_tcp = pose(ctx.scene.ee_m, ctx.tcp_quaternion)
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
