"""A validated ``move_to`` request and the parsing of its arguments (shared by
``move_to``, ``check_motion``, ``preview_motion`` and ``release``'s retreat)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from captain_harness.core import arguments
from captain_harness.core.errors import ArgumentError
from captain_harness.core.motion_config import MotionConfig

MODES = ("guarded", "manipulation")
GRIPPER_COMMANDS = ("open", "close")


@dataclass(frozen=True)
class MoveRequest:
    """A validated ``move_to`` call.

    Attributes:
        position_m: TCP target, base frame (None: keep the current position).
        quaternion_wxyz: TCP orientation (None: keep the current orientation).
        speed_m_s / angular_rad_s / duration_s: pacing (None: defaults; see ``sweep``).
        mode: ``guarded`` or ``manipulation``.
        gripper: ``open`` / ``close`` for a jaw command, else None.
    """

    position_m: np.ndarray | None
    quaternion_wxyz: np.ndarray | None
    speed_m_s: float | None
    angular_rad_s: float | None
    duration_s: float | None
    mode: str
    gripper: str | None


def parse_move(
    cfg: MotionConfig,
    position: Any,
    quaternion: Any,
    speed: Any,
    duration: Any,
    angular: Any,
    mode: Any,
    gripper: Any,
    call: str = "move_to",
) -> MoveRequest:
    """Validate ``move_to`` arguments against ``cfg``'s limits (raises ``ArgumentError``
    saying what to change); ``call`` names the primitive in the messages."""
    if gripper is not None:
        g = arguments.as_choice("gripper", gripper, GRIPPER_COMMANDS)
        extra = [
            n
            for n, v in (
                ("position", position),
                ("quaternion", quaternion),
                ("speed", speed),
                ("duration", duration),
                ("angular", angular),
            )
            if v is not None
        ]
        if extra:
            raise ArgumentError(
                f"move_to takes either a pose or gripper=, not both (got gripper={g!r} and "
                f"{', '.join(extra)}); make two calls"
            )
        if mode not in (None, "guarded", "manipulation"):
            arguments.as_choice("mode", mode, MODES)
        return MoveRequest(None, None, None, None, None, "guarded", g)
    if position is None and quaternion is None:
        raise ArgumentError(
            f"{call} needs position=[x, y, z] (m, base frame) and quaternion=[w, x, y, z]"
            + (", or gripper='open'/'close'" if call == "move_to" else "")
        )
    p = None if position is None else arguments.as_position("position", position)
    q = None if quaternion is None else arguments.as_quaternion("quaternion", quaternion)
    v = arguments.as_optional_float(
        "speed", speed, minimum=0.0, maximum=cfg.max_linear_speed_m_s, unit="m/s", exclusive_minimum=True
    )
    w = arguments.as_optional_float(
        "angular",
        angular,
        minimum=0.0,
        maximum=cfg.max_angular_speed_rad_s,
        unit="rad/s",
        exclusive_minimum=True,
    )
    d = arguments.as_optional_float(
        "duration",
        duration,
        minimum=0.0,
        maximum=cfg.max_sweep_duration_s,
        unit="s",
        exclusive_minimum=True,
    )
    m = "guarded" if mode is None else arguments.as_choice("mode", mode, MODES)
    return MoveRequest(p, q, v, w, d, m, None)

