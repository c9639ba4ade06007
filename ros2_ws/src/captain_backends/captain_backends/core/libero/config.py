"""Parameters of the LIBERO driver: one schema (type, default, unit, valid range).

``LiberoConfig.from_options(**options)`` validates keyword options (as passed to
``make_driver("libero", **options)``) against ``SCHEMA`` and names the known parameters
when one is unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from captain_backends.core.params import ParameterError, ParamSpec, describe, validate

SCHEMA: tuple[ParamSpec, ...] = (
    ParamSpec("task", str, "libero_spatial/0", "task id '<suite>/<index>', e.g. 'libero_spatial/0'"),
    ParamSpec("init_state", int, 0, "official initial state used by reset() without arguments",
              min_value=0, max_value=10_000),
    ParamSpec("random_layout", bool, False, "reset() without init_state gives a seeded wide-layout start"),
    ParamSpec("seed", int, 0, "base seed of random layouts, appearance and fixture placement",
              min_value=0, max_value=2**31 - 1),
    ParamSpec("camera_width_px", int, 512, "rendered image width", "px", 16, 2048),
    ParamSpec("camera_height_px", int, 512, "rendered image height", "px", 16, 2048),
    ParamSpec("antialiasing", bool, False, "4x multisampling when rendering (about 2x slower on CPU)"),
    ParamSpec("control_period_s", float, 0.01, "duration of one advance(), a multiple of 0.002 s",
              "s", 0.002, 0.1),
    ParamSpec("joint_bandwidth_rad_s", float, 60.0, "closed-loop natural frequency of joint tracking",
              "rad/s", 5.0, 150.0),
    ParamSpec("joint_damping_ratio", float, 1.0, "closed-loop damping ratio of joint tracking", "", 0.3, 3.0),
    ParamSpec("velocity_limit_scale", float, 1.0,
              "fraction of the joint velocity limits one command step may use", "", 0.05, 1.0),
    ParamSpec("settle_s", float, 0.5,
              "physics run after a reset (arm holding, gripper opening) for the objects to land",
              "s", 0.0, 5.0),
    ParamSpec("layout_spread_m", float, 0.15, "largest horizontal displacement of a re-placed object",
              "m", 0.0, 0.4),
    ParamSpec("layout_yaw_rad", float, 0.5, "largest yaw change of a re-placed object", "rad", 0.0, math.pi),
    ParamSpec("layout_attempts", int, 50, "random layouts tried before giving up", "", 1, 1000),
    ParamSpec("randomize_lighting", bool, False, "perturb light intensities and positions at reset"),
    ParamSpec("randomize_camera_pose", bool, False, "perturb the head camera pose at reset"),
    ParamSpec("randomize_materials", bool, False, "tint scene and object material colours at reset"),
    ParamSpec("camera_translation_m", float, 0.02, "largest head-camera position change", "m", 0.0, 0.1),
    ParamSpec("camera_rotation_rad", float, 0.035, "largest head-camera rotation change", "rad", 0.0, 0.3),
)
_SPECS = {spec.name: spec for spec in SCHEMA}


@dataclass(frozen=True)
class LiberoConfig:
    """Validated driver parameters (see ``SCHEMA`` for meaning, units and ranges)."""

    task: str = "libero_spatial/0"
    init_state: int = 0
    random_layout: bool = False
    seed: int = 0
    camera_width_px: int = 512
    camera_height_px: int = 512
    antialiasing: bool = False
    control_period_s: float = 0.01
    joint_bandwidth_rad_s: float = 60.0
    joint_damping_ratio: float = 1.0
    velocity_limit_scale: float = 1.0
    settle_s: float = 0.5
    layout_spread_m: float = 0.15
    layout_yaw_rad: float = 0.5
    layout_attempts: int = 50
    randomize_lighting: bool = False
    randomize_camera_pose: bool = False
    randomize_materials: bool = False
    camera_translation_m: float = 0.02
    camera_rotation_rad: float = 0.035

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _SPECS[f.name].check(getattr(self, f.name)))

    @classmethod
    def from_options(cls, **options: Any) -> LiberoConfig:
        """Build from keyword options; unknown names are refused with the known ones.

        Raises:
            ParameterError: unknown name, wrong type or value out of range.
        """
        return cls(**validate(SCHEMA, options, node="libero"))

    def substeps(self, timestep_s: float) -> int:
        """Physics substeps per control period for a simulator timestep.

        Raises:
            ParameterError: the period is not a whole multiple of the timestep.
        """
        n = round(self.control_period_s / timestep_s)
        if n < 1 or abs(n * timestep_s - self.control_period_s) > 1e-9:
            raise ParameterError(
                f"parameter 'control_period_s' = {self.control_period_s} s is not a multiple of the physics "
                f"timestep {timestep_s} s; use e.g. {timestep_s * 5:g} or {timestep_s * 10:g}")
        return n


def describe_parameters() -> str:
    """The schema as a Markdown table."""
    return describe(SCHEMA)
