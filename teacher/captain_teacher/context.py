"""The teacher's running state in one episode: the latest feedback, the camera models and
base pose it has read back, the style, and the names it has defined in the session.

A planner is a generator that yields ``Step`` objects (one per request) and receives the
``Feedback`` of the next request in return; ``TeacherContext`` keeps everything derived
from that feedback up to date (``ctx.scene``, ``ctx.cameras``) so planners can decide
from the current simulator state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from captain_teacher.feedback import Feedback
from captain_teacher.scene import WRIST_CAMERA, CameraModel, SceneView, estimate_T_world_base
from captain_teacher.style import Style

HEAD = "agentview"
WRIST = WRIST_CAMERA


@dataclass
class Step:
    """One request's reply: reasoning, optional visible text, code cells and record flags.

    Attributes:
        reasoning: the thinking text (short).
        cells: python cells, run in order.
        content: visible text of the reply.
        meta: flags for the request's record (e.g. ``injected_mistake``).
    """

    reasoning: str
    cells: list[str] = field(default_factory=list)
    content: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def quat_matrix(q_wxyz: Any) -> np.ndarray:
    """3x3 rotation of a quaternion [w, x, y, z]."""
    w, x, y, z = (float(v) for v in q_wxyz)
    n = w * w + x * x + y * y + z * z
    s = 2.0 / n if n > 0 else 0.0
    return np.array([
        [1 - s * (y * y + z * z), s * (x * y - w * z), s * (x * z + w * y)],
        [s * (x * y + w * z), 1 - s * (x * x + z * z), s * (y * z - w * x)],
        [s * (x * z - w * y), s * (y * z + w * x), 1 - s * (x * x + y * y)],
    ])


def pose(position: Any, q_wxyz: Any) -> np.ndarray:
    """4x4 pose from a position and a quaternion."""
    T = np.eye(4)
    T[:3, :3] = quat_matrix(q_wxyz)
    T[:3, 3] = np.asarray(position, dtype=float)
    return T


class TeacherContext:
    """State of one teacher episode (see the module docstring).

    Args:
        episode_id: the episode's id.
        style: how this episode's code is written.
        rng: the episode's random generator.
    """

    def __init__(self, episode_id: str, style: Style, rng: np.random.Generator) -> None:
        self.episode_id = episode_id
        self.style = style
        self.rng = rng
        self.fb: Feedback | None = None
        self.cameras: dict[str, CameraModel] = {}
        self.T_world_base: np.ndarray | None = None
        self.T_tcp_wrist: np.ndarray | None = None
        self.tcp_position_m: np.ndarray | None = None
        self.tcp_quaternion: np.ndarray | None = None
        self.home_m: np.ndarray | None = None
        self.first_snapshot: Any = None
        self.mistake_done = False
        self.mistake_request: int | None = None
        #: an injected failure was made (the teacher then carries on without noticing)
        self.failure_done = False
        #: the request that made it (set by the policy)
        self.failure_request: int | None = None
        self.flags: list[dict[str, Any]] = []
        #: the regions of the table TASK.md states, by goal argument (``table_regions.TableRegion``,
        #: base frame): read from the system message as a policy reads them
        self.table_regions: dict[str, Any] = {}
        #: values printed by the session, one dict per request's feedback
        self.printed_history: list[dict[str, Any]] = []
        #: where the tool was sent to close on the last grasp (x, y), base frame
        self.last_grasp_xy: np.ndarray | None = None
        #: whether the next carry uses the measurement taken while holding (None: none taken)
        self.adopt_held: bool | None = None
        self.held_note = ""
        #: per drawer joint: the session variable holding its handle where the episode first
        #: clicked it, and how far the drawer was out then (m)
        self.handle_refs: dict[str, tuple[str, float]] = {}
        #: per articulated part (knob, door): the session variable a cell measured its motion
        #: into, and the bound it must meet (see ``planners.evidence``)
        self.part_measurements: dict[str, tuple[str, float]] = {}
        #: per object: the jaw yaws (rad, base frame) of rim grasps the arm could not reach
        #: (the preview refused the approach or the descent: a joint limit or no inverse
        #: kinematics on the way)
        self.unreachable_jaws: dict[str, list[float]] = {}
        #: objects a top-down grasp could not reach (retried with the hand tipped outward)
        self.out_of_reach: set[str] = set()
        #: objects near the base whose centred grasp the arm could not make straight down
        self.folded_reach: set[str] = set()
        #: relations into a part a goal shuts, measured after the release and before
        #: shutting it: the objects, the session variable of the check and its words
        self.shut_check: tuple[frozenset[str], str, str] | None = None
        #: session variables the last verifying cell clicked in the wrist image
        self.wrist_clicked: frozenset[str] = frozenset()
        #: per relation's object: the session variable the last verifying cell measured it into
        self.verify_vars: dict[str, str] = {}
        #: the point (base frame, m) a handle grasp clicked on the microwave's top
        #: (``planners.front_load``): the session's ``mw_top``
        self.front_top: np.ndarray | None = None

    # ------------------------------------------------------------- feedback
    def update(self, fb: Feedback) -> None:
        """Take in a new request's feedback: printed camera models and tool pose, the snapshot."""
        self.fb = fb
        self.printed_history.append(fb.values)
        if self.first_snapshot is None:
            self.first_snapshot = fb.snapshot
        values = fb.values
        cams = values.get("cameras")
        if isinstance(cams, dict):
            for name, c in cams.items():
                try:
                    self.cameras[name] = CameraModel(name, np.asarray(c["K"], float), np.asarray(c["T"], float))
                except (KeyError, TypeError, ValueError):
                    continue
        tcp = values.get("tcp")
        if isinstance(tcp, (list, tuple)) and len(tcp) >= 3:
            self.tcp_position_m = np.asarray(tcp[:3], dtype=float)
            if self.T_world_base is None and fb.snapshot is not None:
                self.T_world_base = estimate_T_world_base(fb.snapshot.ee_position_m, self.tcp_position_m)
                self.home_m = self.tcp_position_m.copy()
        tq = values.get("tcp_q")
        if isinstance(tq, (list, tuple)) and len(tq) == 4:
            self.tcp_quaternion = np.asarray(tq, dtype=float)
        if self.tcp_position_m is not None and self.tcp_quaternion is not None:
            T_base_tcp = pose(self.tcp_position_m, self.tcp_quaternion)
            if isinstance(cams, dict) and WRIST in self.cameras and self.T_tcp_wrist is None:
                self.T_tcp_wrist = np.linalg.inv(T_base_tcp) @ self.cameras[WRIST].T_base_camera
            elif self.T_tcp_wrist is not None and WRIST in self.cameras and "tcp" in values:
                wrist = self.cameras[WRIST]
                self.cameras[WRIST] = CameraModel(WRIST, wrist.K, T_base_tcp @ self.T_tcp_wrist)

    @property
    def scene(self) -> SceneView:
        """The current snapshot in the base frame."""
        if self.fb is None or self.fb.snapshot is None:
            raise RuntimeError("the teacher needs the simulator snapshot (host context) of a simulated backend")
        T = self.T_world_base if self.T_world_base is not None else np.eye(4)
        return SceneView(self.fb.snapshot, T)

    @property
    def request_index(self) -> int:
        """Index of the request being written."""
        return self.fb.request_index if self.fb is not None else 1

    def actions_left(self) -> int:
        """Physical actions left in the budget (a large number when unknown)."""
        b = (self.fb.budget if self.fb else {}) or {}
        left = b.get("physical_actions_left")
        return int(left) if isinstance(left, (int, float)) else 10_000

    def requests_left(self) -> int:
        """Requests left after the one being written (a large number when unknown)."""
        b = (self.fb.budget if self.fb else {}) or {}
        left = b.get("requests_left")
        return int(left) if isinstance(left, (int, float)) else 10_000

    # ----------------------------------------------------------- decisions
    def failure_due(self, kind: str) -> bool:
        """Whether the style's injected failure is ``kind`` and not made yet."""
        return self.style.failure == kind and not self.failure_done

    def goal_satisfied(self, predicate: str, args: tuple[str, ...]) -> bool:
        """Whether a goal predicate holds in the current snapshot."""
        for g in self.scene.snapshot.goals:
            if g.predicate == predicate and tuple(g.args) == tuple(args):
                return bool(g.satisfied)
        return False

    def held(self, name: str) -> bool:
        """Whether an object is held between the fingers now."""
        return bool(self.scene.snapshot.held.get(name, False))
