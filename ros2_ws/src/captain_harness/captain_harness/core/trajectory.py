"""The record of executed arm motions: what ``read_motion_trajectory`` reports and the path
``recover`` retraces.

Joint samples are stored as measured (rad, command order, one per control period);
TCP poses are computed from them on demand with the harness kinematics (base frame).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from captain_harness.core.geometry import matrix_to_quat
from captain_harness.core.kinematics import Kinematics


@dataclass
class MotionRecord:
    """One executed physical call.

    Attributes:
        call: ``move_to``, ``recover``, ``release``, ``hold`` or ``gripper``.
        mode: ``guarded`` / ``manipulation`` (``""`` where it does not apply).
        stopped_reason: the call's stop reason.
        time_s: driver time of each sample, s (the first sample is the start state).
        q: joint positions, rad (N, nq).
        force_n: contact force of each sample, N.
        max_observed_force_n: peak force over the call (including substeps), N.
        goal_position_m / goal_quaternion_wxyz: the requested TCP goal, if any.
        guard_force_n: the force limit that was in effect, N.
    """

    call: str
    mode: str
    stopped_reason: str
    time_s: np.ndarray
    q: np.ndarray
    force_n: np.ndarray
    max_observed_force_n: float
    goal_position_m: np.ndarray | None = None
    goal_quaternion_wxyz: np.ndarray | None = None
    guard_force_n: float | None = None
    _tcp: np.ndarray | None = field(default=None, repr=False)

    def tcp_positions(self, kin: Kinematics) -> np.ndarray:
        """TCP positions (N, 3), base frame, metres (computed once)."""
        if self._tcp is None:
            self._tcp = kin.tcp_positions(self.q)
        return self._tcp

    def path_length_m(self, kin: Kinematics) -> float:
        """TCP distance travelled, metres."""
        p = self.tcp_positions(kin)
        return float(np.sum(np.linalg.norm(np.diff(p, axis=0), axis=1))) if len(p) > 1 else 0.0

    def summary(self, kin: Kinematics, max_samples: int) -> dict:
        """The record as the policy sees it, subsampled to at most ``max_samples``."""
        n = len(self.time_s)
        idx = np.unique(np.linspace(0, n - 1, min(max_samples, n)).round().astype(int)) if n else np.array([], int)
        tcp = self.tcp_positions(kin)
        quats = [matrix_to_quat(kin.fk(self.q[i])[:3, :3]) for i in idx]
        t0 = float(self.time_s[0]) if n else 0.0
        return {
            "call": self.call,
            "mode": self.mode,
            "stopped_reason": self.stopped_reason,
            "sample_count": n,
            "duration_s": float(self.time_s[-1] - t0) if n else 0.0,
            "executed_distance_m": self.path_length_m(kin),
            "max_observed_force_n": self.max_observed_force_n,
            "guard_force_n": self.guard_force_n,
            "goal_position_m": self.goal_position_m,
            "goal_quaternion_wxyz": self.goal_quaternion_wxyz,
            "start_position_m": tcp[0] if n else None,
            "end_position_m": tcp[-1] if n else None,
            "samples": {
                "time_s": [float(self.time_s[i] - t0) for i in idx],
                "tcp_position_m": tcp[idx],
                "tcp_quaternion_wxyz": quats,
                "force_n": self.force_n[idx],
            },
        }


class MotionHistory:
    """The last executed sweep, the last physical call, and the joint path that
    ``recover`` may retrace.

    The recover path is the measured joint path of the last arm sweep (oldest first),
    shortened by each ``recover`` by the part it retraced. Jaw commands and holds do not
    replace it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.last: MotionRecord | None = None
        self.last_call: MotionRecord | None = None
        self._path: np.ndarray | None = None

    def record(self, rec: MotionRecord, *, sweep: bool) -> None:
        """Store ``rec``: ``last_call`` always; a sweep also becomes ``last`` (what
        ``read_motion_trajectory`` reports) and the recover path."""
        with self._lock:
            self.last_call = rec
            if sweep:
                self.last = rec
                if len(rec.q) >= 2:
                    self._path = np.array(rec.q, dtype=float)

    def recover_path(self) -> np.ndarray | None:
        """The joint path recover may retrace (oldest first), or None."""
        with self._lock:
            return None if self._path is None else self._path.copy()

    def set_recover_path(self, path: np.ndarray | None) -> None:
        """Replace the recover path (after a recover consumed part of it)."""
        with self._lock:
            self._path = None if path is None or len(path) < 2 else np.array(path, dtype=float)

    def clear(self) -> None:
        """Forget everything (e.g. after a reset of the scene)."""
        with self._lock:
            self.last = None
            self.last_call = None
            self._path = None
