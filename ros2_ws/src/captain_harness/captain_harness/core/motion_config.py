"""Parameters of the motion primitives: one dataclass, each field with unit, range and meaning.

All Cartesian values are in the robot base frame (metres, radians, seconds, newtons).
``MotionConfig.schema()`` lists the parameters for documentation (TASK.md, parameter
YAML); ``MotionConfig.from_dict`` builds a validated config from a parameter mapping.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from captain_harness.core.errors import ArgumentError


def _p(default: Any, unit: str, lo: float | None, hi: float | None, doc: str) -> Any:
    return field(default=default, metadata={"unit": unit, "range": (lo, hi), "doc": doc})


@dataclass(frozen=True)
class MotionConfig:
    """Thresholds, speeds and limits of ``move_to``, ``hold``, ``recover`` and ``release``."""

    default_linear_speed_m_s: float = _p(0.05, "m/s", 0.001, 0.5, "TCP speed of a sweep without speed=")
    default_angular_speed_rad_s: float = _p(0.5, "rad/s", 0.01, 3.0, "TCP turn rate of a sweep without angular=")
    max_linear_speed_m_s: float = _p(0.25, "m/s", 0.001, 1.0, "largest accepted speed=")
    max_angular_speed_rad_s: float = _p(1.5, "rad/s", 0.01, 3.0, "largest accepted angular=")
    max_sweep_duration_s: float = _p(120.0, "s", 1.0, 600.0, "longest accepted sweep")
    accel_time_s: float = _p(0.25, "s", 0.0, 2.0, "ramp-up and ramp-down time of the trapezoidal speed profile")
    waypoint_spacing_m: float = _p(0.02, "m", 0.001, 0.05, "IK / collision waypoint spacing along the path")
    waypoint_spacing_rad: float = _p(0.15, "rad", 0.01, 0.5, "IK / collision waypoint spacing in rotation")
    max_joint_step_rad: float = _p(
        0.3, "rad", 0.05, 1.0, "largest joint change between two waypoints (larger: IK branch jump)"
    )
    joint_velocity_fraction: float = _p(
        0.8,
        "",
        0.1,
        1.0,
        "planned joint speeds stay below this fraction of the limits (the sweep is slowed down otherwise)",
    )
    joint_limit_margin_rad: float = _p(0.005, "rad", 0.0, 0.2, "distance kept from joint limits")
    contact_threshold_n: float = _p(
        12.0,
        "N",
        1.0,
        100.0,
        "guarded mode: stop when the contact force exceeds its value at the start of the motion by this much",
    )
    emergency_force_n: float = _p(
        80.0, "N", 10.0, 500.0, "any motion stops above this contact force (manipulation mode's limit)"
    )
    position_tolerance_m: float = _p(0.005, "m", 0.0005, 0.05, "a sweep counts as target_reached within this distance")
    rotation_tolerance_rad: float = _p(
        math.radians(3.0), "rad", 0.001, 0.5, "a sweep counts as target_reached within this angle"
    )
    settle_position_m: float = _p(0.001, "m", 0.0001, 0.02, "settling ends below this TCP error")
    settle_rotation_rad: float = _p(math.radians(0.5), "rad", 0.0005, 0.2, "settling ends below this TCP angle error")
    state_sample_period_s: float = _p(
        0.05,
        "s",
        0.0,
        1.0,
        "how often a sweep reads and records the robot state (the force "
        "guard itself runs in the driver at every substep)",
    )
    settle_timeout_s: float = _p(1.5, "s", 0.0, 10.0, "longest wait after the last waypoint")
    ik_position_tolerance_m: float = _p(1e-4, "m", 1e-6, 1e-2, "IK convergence tolerance (position)")
    ik_rotation_tolerance_rad: float = _p(1e-3, "rad", 1e-5, 1e-1, "IK convergence tolerance (angle)")
    ik_max_iterations: int = _p(60, "", 5, 1000, "DLS iterations per IK attempt")
    ik_restarts: int = _p(6, "", 0, 100, "random restarts of a goal IK that fails from the current pose")
    ik_seed: int = _p(0, "", 0, None, "seed of the IK restarts (deterministic)")
    workspace_min_m: tuple[float, float, float] = _p(
        (-0.3, -0.8, -0.35), "m", None, None, "lower corner of the workspace box (base frame)"
    )
    workspace_max_m: tuple[float, float, float] = _p(
        (1.0, 0.8, 1.2), "m", None, None, "upper corner of the workspace box (base frame)"
    )
    gripper_timeout_s: float = _p(2.0, "s", 0.1, 10.0, "longest jaw command")
    gripper_settle_m: float = _p(
        0.0001, "m", 1e-5, 0.01, "a jaw command ends when the opening changes less than this per period"
    )
    held_min_open_fraction: float = _p(
        0.03, "", 0.0, 0.5, "closed jaws that stop above this opening fraction hold something"
    )
    hold_default_duration_s: float = _p(1.0, "s", 0.0, 60.0, "hold() without duration_s")
    hold_max_duration_s: float = _p(30.0, "s", 0.0, 600.0, "largest accepted duration_s of hold()")
    recover_default_distance_m: float = _p(0.05, "m", 0.001, 1.0, "recover() without max_distance_m")
    recover_max_distance_m: float = _p(0.5, "m", 0.001, 2.0, "largest accepted max_distance_m")
    recover_default_duration_s: float = _p(10.0, "s", 0.1, 120.0, "recover() without max_duration_s")
    recover_speed_m_s: float = _p(0.03, "m/s", 0.001, 0.5, "TCP speed of recover()")
    release_retreat_m: float = _p(
        0.05, "m", 0.0, 0.3, "release(): distance backed away along -z of the TCP after opening"
    )
    release_speed_m_s: float = _p(0.03, "m/s", 0.001, 0.5, "release(): retreat speed")
    trajectory_summary_samples: int = _p(40, "", 2, 1000, "samples returned by read_motion_trajectory() by default")

    def __post_init__(self) -> None:
        for f in fields(self):
            lo, hi = f.metadata.get("range", (None, None))
            v = getattr(self, f.name)
            if isinstance(v, (bool, tuple)):
                continue
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                raise ArgumentError(
                    f"MotionConfig.{f.name}={v!r} is out of range [{lo}, {hi}] {f.metadata.get('unit', '')}"
                )
        if any(a >= b for a, b in zip(self.workspace_min_m, self.workspace_max_m, strict=True)):
            raise ArgumentError("MotionConfig.workspace_min_m must be below workspace_max_m on every axis")

    @classmethod
    def schema(cls) -> list[dict[str, Any]]:
        """Name, default, unit, range and meaning of every parameter."""
        return [
            {
                "name": f.name,
                "default": f.default,
                "unit": f.metadata["unit"],
                "range": list(f.metadata["range"]),
                "doc": f.metadata["doc"],
            }
            for f in fields(cls)
        ]

    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> MotionConfig:
        """A config from a mapping of parameter names (unknown names are refused)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - names)
        if unknown:
            raise ArgumentError(f"unknown motion parameters {unknown}; valid: {sorted(names)}")
        clean = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
        return cls(**clean)

    def to_dict(self) -> dict[str, Any]:
        """The parameters as plain values."""
        return asdict(self)
