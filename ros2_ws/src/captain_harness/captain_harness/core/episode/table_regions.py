"""Regions of the table a task names (``main_table_stove_front_region``): nothing on the
table marks them, so TASK.md states each as a rectangle in the robot base frame, and the
completion gate (``gate.py``) checks a measured centre against it. A policy reads the
rectangles back from TASK.md with ``table_regions_in``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TableRegion:
    """A region of the table as the task defines it, in the robot base frame.

    Attributes:
        center_xy_m: the rectangle's centre (x, y), m, base frame.
        half_xy_m: its half sizes along its own axes, m.
        yaw_rad: the angle of its first axis from the base x axis, rad (counter-clockwise).
    """

    center_xy_m: tuple[float, float]
    half_xy_m: tuple[float, float]
    yaw_rad: float = 0.0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TableRegion:
        """From ``{"center_xy_m": [x, y], "half_xy_m": [hx, hy], "yaw_rad": a}`` (a
        driver's ``TaskInfo.extra["table_regions"]`` entry); ValueError when malformed."""
        try:
            center = tuple(float(v) for v in data["center_xy_m"])
            half = tuple(float(v) for v in data["half_xy_m"])
            yaw = float(data.get("yaw_rad", 0.0))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a table region needs center_xy_m, half_xy_m and yaw_rad: {data!r}") from exc
        if len(center) != 2 or len(half) != 2 or min(half) <= 0 or not all(map(math.isfinite, (*center, *half, yaw))):
            raise ValueError("a table region needs two finite centre coordinates and two positive half "
                             f"sizes: {data!r}")
        return cls((center[0], center[1]), (half[0], half[1]), yaw)

    def contains(self, xy: Sequence[float]) -> bool:
        """Whether the point ``xy`` (base frame, m) lies inside the rectangle."""
        dx, dy = float(xy[0]) - self.center_xy_m[0], float(xy[1]) - self.center_xy_m[1]
        c, s = math.cos(self.yaw_rad), math.sin(self.yaw_rad)
        return abs(c * dx + s * dy) <= self.half_xy_m[0] and abs(-s * dx + c * dy) <= self.half_xy_m[1]

    def words(self) -> str:
        """The rectangle as TASK.md states it (parsed back by ``table_regions_in``)."""
        (x, y), (hx, hy) = self.center_xy_m, self.half_xy_m
        text = f"centre [{x:.3f}, {y:.3f}] m, half sizes [{hx:.3f}, {hy:.3f}] m, yaw {self.yaw_rad:.3f} rad"
        if abs(self.yaw_rad) < 1e-6:
            text += f" (x from {x - hx:.3f} to {x + hx:.3f} m, y from {y - hy:.3f} to {y + hy:.3f} m)"
        return text


#: ``table_regions_in``: a table region as ``TableRegion.words`` writes it after its name.
_TABLE_REGION_RE = re.compile(
    r"`(?P<name>[A-Za-z0-9_]+)` is the table's rectangle centre \[(?P<x>-?[\d.]+), (?P<y>-?[\d.]+)\] m, "
    r"half sizes \[(?P<hx>[\d.]+), (?P<hy>[\d.]+)\] m, yaw (?P<yaw>-?[\d.]+) rad")


def table_regions_in(text: str) -> dict[str, TableRegion]:
    """The table regions a TASK.md text states, by goal argument (the policy's way to
    read them back; empty when it states none)."""
    return {m["name"]: TableRegion((float(m["x"]), float(m["y"])), (float(m["hx"]), float(m["hy"])), float(m["yaw"]))
            for m in _TABLE_REGION_RE.finditer(text)}
